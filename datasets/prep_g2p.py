#!/usr/bin/python3
"""Prepare the CMUdict grapheme-to-phoneme (G2P) task for tgraph (datasets/README.md).

Usage: prep_g2p.py [-i DICT] [--force] [-q] [OUT_DIR]

Reads a CMU pronouncing dictionary (default: Debian's pocketsphinx-en-us copy) and writes,
into OUT_DIR (default <repo>/data/g2p):

  train.src / train.tgt   one line per (word, pronunciation) pair
  dev.src / dev.tgt       one line per unique word; .tgt = its first pronunciation
  dev.refs                all pronunciations of that word joined by " ||| "
  test.src / test.tgt / test.refs   the same for the test split
  stats.txt               the statistics printed at the end
  .stamp                  input checksum + script version; a rerun with the same input and
                          version does nothing (--force redoes it)

Source tokens are the word's characters ("a b a c u s"); target tokens are ARPAbet phonemes
without stress digits ("AE B AH K AH S"). The split is by word, so that every pronunciation of
a word lands in one split: b = int(first 8 hex digits of sha256(word)) mod 100; b < 90 train,
90-94 dev, 95-99 test.

Only the Python standard library is used. Exit status: 0 done (or cached), 1 bad input,
2 missing input file (with the Debian package that provides it).
"""

import argparse
import hashlib
import json
import os
import re
import sys

SCRIPT_VERSION = "1"
DEFAULT_DICT = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"
DICT_PACKAGE = "pocketsphinx-en-us"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO_ROOT, "data", "g2p")

# The 39 ARPAbet phonemes of CMUdict (stress digits removed).
ARPABET = frozenset(
    "AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH "
    "UH UW V W Y Z ZH".split())

# Characters a word may contain besides letters and digits. CMUdict 0.7b also has entries for
# punctuation marks ("!EXCLAMATION-POINT", "\"CLOSE-QUOTE", "%PERCENT"): those are not G2P
# examples, so an entry with any other character is dropped (and counted).
WORD_EXTRA_CHARS = frozenset("'-._")

SPLITS = ("train", "dev", "test")
OUTPUT_FILES = ("train.src", "train.tgt", "dev.src", "dev.tgt", "dev.refs",
                "test.src", "test.tgt", "test.refs", "stats.txt")
REF_SEP = " ||| "
VARIANT_RE = re.compile(r"^(.+)\((\d+)\)$")
STRESS_RE = re.compile(r"[0-9]+$")


def split_of(word):
    """The split: first 8 hex digits of sha256(word) as an integer, mod 100."""
    bucket = int(hashlib.sha256(word.encode("utf-8")).hexdigest()[:8], 16) % 100
    if bucket < 90:
        return "train"
    return "dev" if bucket < 95 else "test"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def strip_comment(line):
    """Drop ';;;' comment lines and anything after a '#' that starts a comment.

    A '#' counts as a comment start at the beginning of the line or after whitespace
    (cmudict.dict writes "word  PH PH # comment"); CMUdict 0.7b's ";;;" lines are comments.
    """
    if line.startswith(";;;"):
        return ""
    for i, ch in enumerate(line):
        if ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def word_is_clean(word):
    return all(ch.isalpha() or ch.isdigit() or ch in WORD_EXTRA_CHARS for ch in word)


class Dictionary:
    """Entries grouped by word, in the order words first appear."""

    def __init__(self):
        self.words = {}          # word -> {variant number: tuple of phonemes}
        self.entries = 0         # entries kept
        self.notes = {}          # kind of problem -> [count, first examples]

    def note(self, kind, example):
        slot = self.notes.setdefault(kind, [0, []])
        slot[0] += 1
        if len(slot[1]) < 3:
            slot[1].append(example)


def parse_dictionary(path):
    """Parse a CMUdict-format file; returns a Dictionary. Problems are counted, not fatal."""
    d = Dictionary()
    with open(path, "rb") as f:
        raw_lines = f.read().split(b"\n")
    for lineno, raw in enumerate(raw_lines, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            # CMUdict 0.7b is nominally ASCII but old copies carry Latin-1 bytes.
            line = raw.decode("latin-1")
            d.note("line not UTF-8, read as Latin-1", "line %d" % lineno)
        fields = strip_comment(line).split()
        if not fields:
            continue
        where = "line %d: %s" % (lineno, line.strip()[:60])
        if len(fields) < 2:
            d.note("entry without phonemes (dropped)", where)
            continue
        head = fields[0].lower()
        m = VARIANT_RE.match(head)
        word, variant = (m.group(1), int(m.group(2))) if m else (head, 1)
        if not word_is_clean(word):
            d.note("word with odd characters (dropped)", where)
            continue
        phones = []
        for p in fields[1:]:
            base = STRESS_RE.sub("", p.upper())
            phones.append(base)
        bad = [p for p in phones if p not in ARPABET]
        if bad:
            d.note("unknown phoneme %s (entry dropped)" % bad[0], where)
            continue
        prons = d.words.setdefault(word, {})
        if variant in prons:
            d.note("repeated entry for the same word(N) (later one dropped)", where)
            continue
        prons[variant] = tuple(phones)
        d.entries += 1
    return d


def pronunciations(variants):
    """Pronunciations in variant order (word, word(2), ...), duplicates removed.

    Removing stress digits can make two variants equal (CMUdict has pairs differing only in
    stress); they are one pronunciation for this task.
    """
    out = []
    for _, phones in sorted(variants.items()):
        if phones not in out:
            out.append(phones)
    return out


def build_lines(d):
    """Return {split: (src lines, tgt lines, refs lines or None)} and the duplicate count."""
    out = {s: ([], [], [] if s != "train" else None) for s in SPLITS}
    dups = 0
    for word, variants in d.words.items():
        prons = pronunciations(variants)
        dups += len(variants) - len(prons)
        src_line = " ".join(word)
        src, tgt, refs = out[split_of(word)]
        if refs is None:
            for p in prons:
                src.append(src_line)
                tgt.append(" ".join(p))
        else:
            src.append(src_line)
            tgt.append(" ".join(prons[0]))
            refs.append(REF_SEP.join(" ".join(p) for p in prons))
    return out, dups


def length_stats(lines):
    lens = [len(l.split()) for l in lines]
    if not lens:
        return 0.0, 0
    return sum(lens) / len(lens), max(lens)


def statistics(d, out, dups, path, digest):
    """Human-readable statistics, as a list of lines."""
    n_multi = sum(1 for v in d.words.values() if len(pronunciations(v)) > 1)
    graphemes = sorted({ch for w in d.words for ch in w})
    all_prons = [p for v in d.words.values() for p in pronunciations(v)]
    phonemes = sorted({ph for p in all_prons for ph in p})
    entry_words = [w for w, v in d.words.items() for _ in pronunciations(v)]
    g_mean = sum(len(w) for w in entry_words) / max(1, len(entry_words))
    p_mean = sum(len(p) for p in all_prons) / max(1, len(all_prons))
    s = ["input: %s" % path, "input sha256: %s" % digest,
         "entries kept: %d; unique words: %d; words with 2+ pronunciations: %d" %
         (d.entries, len(d.words), n_multi),
         "pronunciations equal after removing stress (merged): %d" % dups,
         "graphemes (%d): %s" % (len(graphemes), "".join(graphemes)),
         "phonemes (%d): %s" % (len(phonemes), " ".join(phonemes)),
         "per pronunciation: graphemes mean %.2f max %d; phonemes mean %.2f max %d" %
         (g_mean, max((len(w) for w in entry_words), default=0), p_mean,
          max((len(p) for p in all_prons), default=0))]
    for kind, (count, examples) in sorted(d.notes.items()):
        s.append("note: %s: %d (e.g. %s)" % (kind, count, "; ".join(examples)))
    s.append("split  words  lines  src mean/max  tgt mean/max  (expected words)")
    expected = {"train": 113343, "dev": 6286, "test": 6316}
    for split in SPLITS:
        src, tgt, refs = out[split]
        words = len(set(src))
        sm, sx = length_stats(src)
        tm, tx = length_stats(tgt)
        s.append("%-5s  %6d %6d  %5.2f / %-3d  %5.2f / %-3d  (%d)" %
                 (split, words, len(src), sm, sx, tm, tx, expected[split]))
    return s


def write_outputs(out_dir, files):
    """Write {name: lines} atomically: each file via a temporary name and os.replace."""
    os.makedirs(out_dir, exist_ok=True)
    for name, lines in files.items():
        tmp = os.path.join(out_dir, ".%s.tmp" % name)
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
        os.replace(tmp, os.path.join(out_dir, name))


def stamp_record(path, digest):
    return {"script": "prep_g2p.py", "version": SCRIPT_VERSION,
            "input": os.path.abspath(path), "input_sha256": digest}


def is_cached(out_dir, record):
    try:
        with open(os.path.join(out_dir, ".stamp"), encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError):
        return False
    if old.get("version") != record["version"] or \
            old.get("input_sha256") != record["input_sha256"]:
        return False
    return all(os.path.isfile(os.path.join(out_dir, n)) for n in OUTPUT_FILES)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Prepare the CMUdict G2P task (datasets/README.md).")
    ap.add_argument("out_dir", nargs="?", default=DEFAULT_OUT,
                    help="output directory (default: %(default)s)")
    ap.add_argument("-i", "--input", default=DEFAULT_DICT,
                    help="CMUdict-format dictionary (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    args = ap.parse_args(argv)
    say = (lambda *a: None) if args.quiet else print

    if not os.path.isfile(args.input):
        hint = (" (install it with: apt-get install %s)" % DICT_PACKAGE
                if args.input == DEFAULT_DICT else "")
        print("prep_g2p: dictionary '%s' not found%s" % (args.input, hint), file=sys.stderr)
        return 2
    digest = sha256_file(args.input)
    record = stamp_record(args.input, digest)
    if not args.force and is_cached(args.out_dir, record):
        say("prep_g2p: %s is up to date (same input sha256 and script version %s); nothing to do"
            % (args.out_dir, SCRIPT_VERSION))
        with open(os.path.join(args.out_dir, "stats.txt"), encoding="utf-8") as f:
            say(f.read(), end="")
        return 0

    d = parse_dictionary(args.input)
    if not d.words:
        print("prep_g2p: no usable entries in '%s'" % args.input, file=sys.stderr)
        return 1
    out, dups = build_lines(d)
    stats = statistics(d, out, dups, args.input, digest)

    stamp_path = os.path.join(args.out_dir, ".stamp")
    if os.path.exists(stamp_path):
        os.remove(stamp_path)   # an interrupted rewrite must not look up to date
    files = {"stats.txt": stats}
    for split in SPLITS:
        src, tgt, refs = out[split]
        files[split + ".src"] = src
        files[split + ".tgt"] = tgt
        if refs is not None:
            files[split + ".refs"] = refs
    write_outputs(args.out_dir, files)
    with open(stamp_path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    say("prep_g2p: wrote %s" % args.out_dir)
    say("\n".join(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
