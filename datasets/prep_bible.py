#!/usr/bin/python3
"""Prepare the Bible English -> Spanish translation task for tgraph (datasets/README.md).

Usage: prep_bible.py [--src-module MOD] [--tgt-module MOD] [--vocab-size N] [--force] [-q]
                     [OUT_DIR]

Dumps two SWORD modules with diatheke (default: World English Bible engWEB2015eb -> Reina-Valera
1909 spaRV1909eb), turns their OSIS markup into plain verse text, aligns verses by book, chapter
and verse, drops the verses known to be misaligned (datasets/README.md), splits by held-out books and
trains one shared sentencepiece BPE model on both training sides. Writes into OUT_DIR (default
<repo>/data/bible):

  {train,dev,test}.src / .tgt          BPE pieces separated by spaces (what the trainer reads)
  {train,dev,test}.src.tok / .tgt.tok  words and punctuation separated by spaces (cased)
  {train,dev,test}.src.txt / .tgt.txt  the cleaned raw verse text
  dev.ref.txt, test.ref.txt            raw Spanish references for BLEU / chrF (= *.tgt.txt)
  {train,dev,test}.ids                 the verse of each line ("Gen.1.1")
  spm.model, spm.vocab                 the shared BPE model (spm_decode turns pieces into text)
  stats.txt, .stamp                    statistics; input checksums for the cache

Everything is deterministic. Only the Python standard library is used, plus the programs
diatheke (Debian package diatheke) and spm_train / spm_encode (package sentencepiece).
Exit status: 0 done (or cached), 1 processing error, 2 a program or module is missing.
"""

import argparse
import collections
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys

SCRIPT_VERSION = "1"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO_ROOT, "data", "bible")
DUMP_RANGE = "Gen 1:1-Rev 22:21"

# Debian package that installs each known module / program (for the error messages).
MODULE_PACKAGES = {"engWEB2015eb": "sword-text-web", "spaRV1909eb": "sword-text-sparv",
                   "engKJV2006eb": "sword-text-kjv"}
PROGRAM_PACKAGES = {"diatheke": "diatheke", "spm_train": "sentencepiece",
                    "spm_encode": "sentencepiece"}

# The 66 books of the Protestant canon: diatheke's English name (with "-l en") -> OSIS id.
# Keys of any other book (WEB's Deuterocanon: Tobit, Sirach, "Esther (Greek)", ...) are dropped.
BOOKS = [
    ("Genesis", "Gen"), ("Exodus", "Exod"), ("Leviticus", "Lev"), ("Numbers", "Num"),
    ("Deuteronomy", "Deut"), ("Joshua", "Josh"), ("Judges", "Judg"), ("Ruth", "Ruth"),
    ("I Samuel", "1Sam"), ("II Samuel", "2Sam"), ("I Kings", "1Kgs"), ("II Kings", "2Kgs"),
    ("I Chronicles", "1Chr"), ("II Chronicles", "2Chr"), ("Ezra", "Ezra"),
    ("Nehemiah", "Neh"), ("Esther", "Esth"), ("Job", "Job"), ("Psalms", "Ps"),
    ("Proverbs", "Prov"), ("Ecclesiastes", "Eccl"), ("Song of Solomon", "Song"),
    ("Isaiah", "Isa"), ("Jeremiah", "Jer"), ("Lamentations", "Lam"), ("Ezekiel", "Ezek"),
    ("Daniel", "Dan"), ("Hosea", "Hos"), ("Joel", "Joel"), ("Amos", "Amos"),
    ("Obadiah", "Obad"), ("Jonah", "Jonah"), ("Micah", "Mic"), ("Nahum", "Nah"),
    ("Habakkuk", "Hab"), ("Zephaniah", "Zeph"), ("Haggai", "Hag"), ("Zechariah", "Zech"),
    ("Malachi", "Mal"), ("Matthew", "Matt"), ("Mark", "Mark"), ("Luke", "Luke"),
    ("John", "John"), ("Acts", "Acts"), ("Romans", "Rom"), ("I Corinthians", "1Cor"),
    ("II Corinthians", "2Cor"), ("Galatians", "Gal"), ("Ephesians", "Eph"),
    ("Philippians", "Phil"), ("Colossians", "Col"), ("I Thessalonians", "1Thess"),
    ("II Thessalonians", "2Thess"), ("I Timothy", "1Tim"), ("II Timothy", "2Tim"),
    ("Titus", "Titus"), ("Philemon", "Phlm"), ("Hebrews", "Heb"), ("James", "Jas"),
    ("I Peter", "1Pet"), ("II Peter", "2Pet"), ("I John", "1John"), ("II John", "2John"),
    ("III John", "3John"), ("Jude", "Jude"), ("Revelation of John", "Rev")]
BOOK_ID = dict(BOOKS)

# Held-out books: whole books, so no verse of a test book is seen in training.
TEST_BOOKS = {"Ruth", "Dan", "John", "Heb"}
DEV_BOOKS = {"Esth", "Lam", "Jonah", "Mic", "Acts", "Phil"}

# RV1909 claims KJV versification but keeps Spanish verse divisions in these places:
# (book, chapter, first verse, last verse or None = to the end of the chapter).
EXCLUDE = [
    ("Num", 13, 1, None), ("Num", 30, 1, None), ("1Sam", 24, 1, None), ("Job", 39, 1, None),
    ("Job", 40, 1, None), ("Hos", 12, 1, None), ("Jonah", 2, 1, None),
    ("1Chr", 21, 11, None), ("1Kgs", 22, 43, None), ("2Chr", 33, 10, None),
    ("2Cor", 13, 12, None),
    ("2Sam", 20, 25, 25), ("Job", 35, 15, 15), ("Acts", 19, 40, 40), ("Judg", 14, 18, 20),
    ("1Chr", 1, 30, 32), ("1Chr", 2, 34, 35), ("2Sam", 2, 31, 32), ("1Kgs", 18, 33, 34),
    ("1Sam", 15, 24, 25)]
# ... and with the WEB (NRSVA versification) on the English side, also these.
EXCLUDE_WEB = [("Matt", 23, 13, 14), ("Rom", 14, 23, 23)]

# Pauline epistles (Romans to Hebrews): RV1909 appends a subscription ("Fué escrita de
# Corinto á los Romanos...") to the last verse of each; it is not in the English text.
PAULINE = ["Rom", "1Cor", "2Cor", "Gal", "Eph", "Phil", "Col", "1Thess", "2Thess", "1Tim",
           "2Tim", "Titus", "Phlm", "Heb"]
SUBSCRIPTION_RE = re.compile(r"^(.*\bAmén\.)\s+(\S.*)$")
SUBSCRIPTION_WORDS = re.compile(r"\b(escrita|enviada)\b", re.IGNORECASE)

# Hebrew letters heading the stanzas of Psalm 119 (kept in capitals on both sides).
ACROSTIC = {"ALEPH", "BETH", "GIMEL", "DALETH", "HE", "VAU", "ZAIN", "CHETH", "TETH", "JOD",
            "CAPH", "LAMED", "MEM", "NUN", "SAMECH", "AIN", "PE", "TZADDI", "COPH", "RESH",
            "SIN", "SHIN", "TAU"}

# Spanish verb endings (past, gerund, participle, enclitic pronouns after an accented stem), for
# recasing chapter-initial capitals that appear nowhere else.
VERB_FORM_RE = re.compile(r"(ó|ron|ando|iendo|ado|ido)$|"
                          r"[áéíóú]\w*(me|te|le|les|se|lo|los|la|las|nos|os)$")

# Module-specific clean-ups (see README: chapter-initial capitals, subscriptions).
RV1909 = "spaRV1909eb"

KEY_RE = re.compile(r"(?:^|(?<=>))\s*([^<>\n]+?) (\d+):(\d+): ")
TAG_OR_TEXT_RE = re.compile(r"<[^>]*>|[^<]+")
TAG_RE = re.compile(r"<\s*(/?)\s*([A-Za-z][\w:.-]*)([^>]*?)(/?)\s*>$", re.S)
ATTR_RE = re.compile(r'([\w:.-]+)\s*=\s*"([^"]*)"')
SID_RE = re.compile(r'\bsID="([^"]*)"')
TOKEN_RE = re.compile(r"\w+(?:['’\-]\w+)*|[^\w\s]")

# Elements whose content is not verse text.
DROP_CONTENT = {"note", "speaker", "rdg", "figure", "reference"}
# Elements that separate text (poetry lines, paragraphs, chapters): become a space.
SEPARATORS = {"l", "lg", "lb", "div", "chapter", "p", "item", "list", "milestone", "title",
              "verse", "br", "head", "row", "cell", "table", "speaker"}
GLUE = "\x01"   # marks a start of <w>/<transChange>/<q> where a space may be missing


class Missing(Exception):
    """A program or module is not installed (exit status 2)."""


def need_program(name):
    path = shutil.which(name)
    if path is None:
        raise Missing("program '%s' not found (install it with: apt-get install %s)" %
                      (name, PROGRAM_PACKAGES[name]))
    return path


def run(cmd, stdin=None, cwd=None):
    try:
        p = subprocess.run(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           cwd=cwd, check=False)
    except OSError as e:
        raise RuntimeError("cannot run %s: %s" % (cmd[0], e)) from e
    if p.returncode != 0:
        raise RuntimeError("%s failed with status %d: %s" %
                           (" ".join(cmd), p.returncode, p.stderr.decode(errors="replace")[-800:]))
    return p.stdout


def installed_modules():
    out = run([need_program("diatheke"), "-b", "system", "-k", "modulelist"])
    mods = set()
    for line in out.decode("utf-8", errors="replace").splitlines():
        if " : " in line:
            mods.add(line.split(" : ", 1)[0].strip())
    return mods


def check_module(name, mods):
    if name not in mods:
        pkg = MODULE_PACKAGES.get(name)
        how = ("install it with: apt-get install %s" % pkg) if pkg else \
            "install the SWORD module that provides it"
        raise Missing("SWORD module '%s' is not installed (%s)" % (name, how))


def module_files(name):
    """The module's .conf and data files, for the cache checksum (empty if not found)."""
    roots = [os.environ.get("SWORD_PATH", ""), os.path.expanduser("~/.sword"),
             "/usr/share/sword", "/usr/local/share/sword"]
    for root in roots:
        conf = os.path.join(root, "mods.d", name.lower() + ".conf") if root else ""
        if conf and os.path.isfile(conf):
            files = [conf]
            with open(conf, encoding="utf-8", errors="replace") as f:
                m = re.search(r"^DataPath=(.*)$", f.read(), re.M)
            if m:
                data = os.path.normpath(os.path.join(root, m.group(1).strip()))
                if os.path.isfile(data):
                    data = os.path.dirname(data)
                for d, _, names in sorted(os.walk(data)):
                    files += [os.path.join(d, n) for n in sorted(names)]
            return files
    return []


def sha256_files(paths):
    h = hashlib.sha256()
    for p in paths:
        h.update(p.encode() + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# OSIS -> text


def dump_module(name):
    """Raw `diatheke -f internal` text of the whole module (English book names, UTF-8)."""
    out = run([need_program("diatheke"), "-b", name, "-f", "internal", "-e", "UTF8", "-l", "en",
               "-k", DUMP_RANGE])
    return out.decode("utf-8")


def split_verses(dump, module):
    """Cut a dump into [(book name, chapter, verse, preverse markup, verse markup)].

    diatheke writes one entry per verse: "<preverse markup>Book C:V: <verse markup>". The
    preverse part (Psalm titles, poetry and paragraph openers) comes before the key. The dump
    ends with "(module)". A line without a key continues the previous verse.
    """
    verses = []
    for line in dump.split("\n"):
        if line.strip() == "(%s)" % module:
            break
        m = KEY_RE.search(line)
        if m:
            verses.append([m.group(1).strip(), int(m.group(2)), int(m.group(3)),
                           line[:m.start()], line[m.end():]])
        elif verses:
            verses[-1][4] += "\n" + line
        elif line.strip():
            raise RuntimeError("%s: text before the first verse key: %r" % (module, line[:80]))
    return verses


def markup_to_text(markup):
    """Plain text of an OSIS fragment as diatheke's internal format prints it.

    - a <w> start between two letters gets a space ("God</w><w>created" -> "God created",
      "Yahweh<w>will"); a <transChange>/<q> start gets one only when it follows another
      element's end tag ("enviada</transChange><w>por" but not RV1909's enclitic
      "preguntándo<transChange>le</transChange>", which is one word);
    - poetry lines, paragraphs and chapter milestones separate words;
    - notes, speaker labels and non-canonical titles are dropped; canonical titles kept;
    - text after the end of a book or the start of WEB's glossary is not verse text.
    """
    out = []
    open_elems = []          # (name, content dropped?) of the elements open here
    after_end_tag = False    # the previous piece was an end tag (elements adjacent)
    for piece in TAG_OR_TEXT_RE.findall(markup):
        if not piece.startswith("<"):
            if not any(d for _, d in open_elems):
                out.append(piece)
            after_end_tag = False
            continue
        m = TAG_RE.match(piece)
        if not m:
            continue
        closing, name, attrs_s, selfclose = m.group(1), m.group(2), m.group(3), m.group(4)
        attrs = dict(ATTR_RE.findall(attrs_s))
        if name == "div" and (attrs.get("type") == "glossary" or
                              (attrs.get("type") == "book" and "eID" in attrs)):
            break
        if closing:
            # close the innermost open element of that name (and anything left open in it)
            for i in range(len(open_elems) - 1, -1, -1):
                if open_elems[i][0] == name:
                    del open_elems[i:]
                    break
        elif not selfclose:
            open_elems.append((name, name in DROP_CONTENT or
                               (name == "title" and attrs.get("canonical") != "true")))
        if name in SEPARATORS:
            out.append(" ")
        elif not closing and not selfclose and (
                name == "w" or (name in ("transChange", "q") and after_end_tag)):
            out.append(GLUE)
        if closing:
            after_end_tag = True
    text = html.unescape("".join(out))
    text = re.sub(r"(?<=\w)%s+(?=\w)" % GLUE, " ", text).replace(GLUE, "")
    text = text.replace("\u00b6", " ")          # KJV's pilcrows
    return " ".join(text.split())


def parse_module(module):
    """{(book id, chapter, verse): text} for the 66 books, plus counts of what was dropped."""
    return parse_dump(dump_module(module), module)


def parse_dump(dump, module):
    """parse_module on a dump already read (tests feed it hand-written dumps)."""
    seen_ids = set()
    verses = {}
    counts = collections.Counter()
    for book, ch, v, pre, body in split_verses(dump, module):
        # diatheke 1.9 repeats the last Psalm title (with its <lg>/<l> openers) before every
        # later verse of a range dump: keep preverse markup only the first time its milestone
        # ids appear.
        ids = SID_RE.findall(pre)
        if ids and any(i in seen_ids for i in ids):
            pre = ""
            counts["repeated preverse markup dropped"] += 1
        seen_ids.update(ids)
        seen_ids.update(SID_RE.findall(body))
        if book not in BOOK_ID:
            counts["verses of non-canonical books dropped"] += 1
            continue
        verses[(BOOK_ID[book], ch, v)] = markup_to_text(pre + " " + body)
    if not verses:
        raise RuntimeError("module %s: no verses found in the diatheke dump" % module)
    return verses, counts


def fix_chapter_capitals(verses, counts):
    """RV1909 prints the first word of every chapter in capitals ("EN el principio",
    "Y FUERON acabados", "DE SIETE años"); in print these are display capitals, not words
    spelled in capitals. We rewrite that leading run of capitalised words: a word that starts
    a sentence becomes "En"; any other takes the casing it has most often elsewhere in the
    module ("siete", but "Jehová"). Psalm 119's acrostic letters (ALEPH) stay as they are.
    """
    def starts_sentence(text, pos):
        before = text[:pos].rstrip(" ¡¿«“‘(\"'")
        return before == "" or before[-1] in ".:!?"

    # How each word is written inside sentences elsewhere (sentence starts say nothing).
    forms = collections.Counter()
    for key, text in verses.items():
        if key[2] != 1:
            forms.update(m.group(0) for m in re.finditer(r"\w+", text)
                         if not starts_sentence(text, m.start()))

    def recase(word, sentence_start):
        low, cap = word.lower(), word[:1] + word[1:].lower()
        if sentence_start:
            return cap
        if forms[low] or forms[cap]:
            return low if forms[low] >= forms[cap] else cap
        # Never seen inside a sentence: a verb form with enclitics or a past / gerund ending
        # ("MOSTRÓME", "REASUMIÓ", "PROCEDIENDO") is lower case, anything else a name ("ACHAB").
        return low if VERB_FORM_RE.search(low) else cap

    for key in sorted(verses):
        if key[2] != 1 or not verses[key]:
            continue
        text = verses[key]
        for m in re.finditer(r"\w+", text):
            w = m.group(0)
            if len(w) >= 2 and w.isupper() and not w.isdigit() and \
                    not (key[:2] == ("Ps", 119) and w in ACROSTIC):
                break
        else:
            continue
        start = m.start()
        pieces = [recase(w, starts_sentence(text, start))]
        end = m.end()
        # continue over directly following all-capital words ("LA SEGUNDA suerte")
        while True:
            m2 = re.match(r" (\w+)", text[end:])
            if not m2:
                break
            w2 = m2.group(1)
            if len(w2) < 2 or not w2.isupper() or w2.isdigit():
                break
            pieces.append(" " + recase(w2, False))
            end += m2.end()
        verses[key] = text[:start] + "".join(pieces) + text[end:]
        counts["chapter-initial capitals recased"] += 1


def strip_subscriptions(verses, counts, warnings):
    """Cut RV1909's Pauline subscriptions after the last "Amén." of Romans ... Hebrews."""
    for book in PAULINE:
        keys = sorted(k for k in verses if k[0] == book and verses[k])
        if not keys:
            continue
        last = keys[-1]
        m = SUBSCRIPTION_RE.match(verses[last])
        if m and SUBSCRIPTION_WORDS.search(m.group(2)):
            verses[last] = m.group(1)
            counts["Pauline subscriptions removed"] += 1
        else:
            warnings.append("no subscription found at the end of %s %d:%d" % last)


def excluded(key, src_module):
    book, ch, v = key
    rules = EXCLUDE + (EXCLUDE_WEB if src_module == "engWEB2015eb" else [])
    for b, c, first, last in rules:
        if b == book and c == ch and v >= first and (last is None or v <= last):
            return True
    return False


def split_of(book):
    if book in TEST_BOOKS:
        return "test"
    return "dev" if book in DEV_BOOKS else "train"


def align(src, tgt, src_module, counts):
    """Pairs in canonical order: (key, src text, tgt text)."""
    order = {b: i for i, (_, b) in enumerate(BOOKS)}
    pairs = []
    for key in sorted(set(src) | set(tgt), key=lambda k: (order[k[0]], k[1], k[2])):
        if key not in src or key not in tgt:
            counts["verses in only one module"] += 1
        elif excluded(key, src_module):
            counts["verses excluded (versification differs)"] += 1
        elif not src[key] or not tgt[key]:
            counts["empty verses dropped"] += 1
        else:
            pairs.append((key, src[key], tgt[key]))
    return pairs


# ---------------------------------------------------------------------------------------------
# outputs


def tokenize(text):
    """Words (with inner apostrophes/hyphens: "God’s", "Beer-seba") and punctuation marks."""
    return " ".join(TOKEN_RE.findall(text))


def write_lines(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line)
            f.write("\n")
    os.replace(tmp, path)


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def train_bpe(out_dir, vocab_size, quiet):
    # Run inside out_dir with relative names: the model stores its trainer options (input
    # paths included), so this keeps spm.model byte-identical wherever the output goes.
    cmd = [need_program("spm_train"), "--input=train.src.txt,train.tgt.txt",
           "--model_prefix=spm", "--model_type=bpe", "--vocab_size=%d" % vocab_size,
           "--character_coverage=1.0"]
    if quiet:
        cmd.append("--minloglevel=2")
    run(cmd, cwd=out_dir)
    return os.path.join(out_dir, "spm.model")


def encode_bpe(model, txt_path, out_path):
    with open(txt_path, "rb") as f:
        out = run([need_program("spm_encode"), "--model=" + model, "--output_format=piece"],
                  stdin=f)
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, out_path)


def statistics(out_dir, pairs_by_split, counts, warnings, src_module, tgt_module):
    """Human-readable statistics, read back from the files written (as a list of lines)."""
    s = ["source module: %s; target module: %s" % (src_module, tgt_module)]
    for k in sorted(counts):
        s.append("%s: %d" % (k, counts[k]))
    s += ["warning: " + w for w in warnings]
    total = sum(len(p) for p in pairs_by_split.values())
    s.append("aligned pairs: %d (expected: 30865)" % total)
    expected = {"train": 27672, "dev": 1569, "test": 1624}
    # Three views of a sentence's length: space-separated words of the raw text (what the expected counts
    # counts), word+punctuation tokens (*.tok), BPE pieces (what the model sees).
    views = [("words", ".txt"), ("tokens", ".tok"), ("BPE", "")]
    vocab = {"src": set(), "tgt": set()}
    allv = {(v, side): [] for v, _ in views for side in ("src", "tgt")}
    s.append("split   pairs (expected)  " +
             "   ".join("%-6s src mean/max  tgt mean/max" % v for v, _ in views))
    for split in ("train", "dev", "test"):
        row = "%-6s %6d (%5d)  " % (split, len(pairs_by_split[split]), expected[split])
        for view, ext in views:
            row += "  %-6s" % ""
            for side in ("src", "tgt"):
                lines = read_lines(os.path.join(out_dir, "%s.%s%s" % (split, side, ext)))
                lens = [len(l.split()) for l in lines]
                allv[(view, side)] += lens
                if ext == ".tok":
                    for l in lines:
                        vocab[side].update(l.split())
                row += "  %5.1f / %-4d" % (sum(lens) / max(1, len(lens)), max(lens, default=0))
        s.append(row)
    row = "%-6s %6d (%5d)  " % ("all", total, 30865)
    for view, _ in views:
        row += "  %-6s" % ""
        for side in ("src", "tgt"):
            lens = allv[(view, side)]
            row += "  %5.1f / %-4d" % (sum(lens) / max(1, len(lens)), max(lens, default=0))
    s.append(row + "   (expected words: 24 / 86, 23 / 80; BPE about 31)")
    over = sum(1 for side in ("src", "tgt") for n in allv[("BPE", side)] if n > 128)
    s.append("sentences over 128 BPE pieces: %d" % over)
    s.append("word+punctuation vocabulary (all splits, cased): src %d, tgt %d "
             "(expected: 13k / 31k)" % (len(vocab["src"]), len(vocab["tgt"])))
    pieces = read_lines(os.path.join(out_dir, "spm.vocab"))
    s.append("BPE vocabulary (shared): %d pieces" % len(pieces))
    return s


def stamp_record(args, inputs_digest):
    return {"script": "prep_bible.py", "version": SCRIPT_VERSION,
            "src_module": args.src_module, "tgt_module": args.tgt_module,
            "vocab_size": args.vocab_size, "input_sha256": inputs_digest}


OUTPUTS = ["%s.%s%s" % (sp, side, ext) for sp in ("train", "dev", "test")
           for side in ("src", "tgt") for ext in ("", ".tok", ".txt")] + \
    ["%s.ids" % sp for sp in ("train", "dev", "test")] + \
    ["dev.ref.txt", "test.ref.txt", "spm.model", "spm.vocab", "stats.txt"]


def is_cached(out_dir, record):
    try:
        with open(os.path.join(out_dir, ".stamp"), encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError):
        return False
    return old == record and all(os.path.isfile(os.path.join(out_dir, n)) for n in OUTPUTS)


def prepare(args, say):
    need_program("diatheke")
    need_program("spm_train")
    need_program("spm_encode")
    mods = installed_modules()
    check_module(args.src_module, mods)
    check_module(args.tgt_module, mods)

    # Cache key: the module files, the programs that read them, this script's version.
    inputs = module_files(args.src_module) + module_files(args.tgt_module) + \
        [shutil.which(p) for p in ("diatheke", "spm_train", "spm_encode")]
    record = stamp_record(args, sha256_files(inputs))
    if not args.force and is_cached(args.out_dir, record):
        say("prep_bible: %s is up to date (same modules, programs and script version %s); "
            "nothing to do" % (args.out_dir, SCRIPT_VERSION))
        with open(os.path.join(args.out_dir, "stats.txt"), encoding="utf-8") as f:
            say(f.read(), end="")
        return 0

    counts = collections.Counter()
    warnings = []
    say("prep_bible: dumping %s and %s with diatheke ..." % (args.src_module, args.tgt_module))
    src, c1 = parse_module(args.src_module)
    tgt, c2 = parse_module(args.tgt_module)
    for k, v in c1.items():
        counts["%s: %s" % (args.src_module, k)] += v
    for k, v in c2.items():
        counts["%s: %s" % (args.tgt_module, k)] += v
    if args.tgt_module == RV1909:
        fix_chapter_capitals(tgt, counts)
        strip_subscriptions(tgt, counts, warnings)
    pairs = align(src, tgt, args.src_module, counts)

    os.makedirs(args.out_dir, exist_ok=True)
    stamp_path = os.path.join(args.out_dir, ".stamp")
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    by_split = {"train": [], "dev": [], "test": []}
    for p in pairs:
        by_split[split_of(p[0][0])].append(p)
    for split, ps in by_split.items():
        base = os.path.join(args.out_dir, split)
        write_lines(base + ".ids", ["%s.%d.%d" % k for k, _, _ in ps])
        write_lines(base + ".src.txt", [s for _, s, _ in ps])
        write_lines(base + ".tgt.txt", [t for _, _, t in ps])
        write_lines(base + ".src.tok", [tokenize(s) for _, s, _ in ps])
        write_lines(base + ".tgt.tok", [tokenize(t) for _, _, t in ps])
        if split != "train":
            write_lines(os.path.join(args.out_dir, split + ".ref.txt"), [t for _, _, t in ps])
    say("prep_bible: training BPE (vocab %d) on both training sides ..." % args.vocab_size)
    model = train_bpe(args.out_dir, args.vocab_size, args.quiet)
    for split in by_split:
        for side in ("src", "tgt"):
            base = os.path.join(args.out_dir, "%s.%s" % (split, side))
            encode_bpe(model, base + ".txt", base)
    stats = statistics(args.out_dir, by_split, counts, warnings, args.src_module,
                       args.tgt_module)
    write_lines(os.path.join(args.out_dir, "stats.txt"), stats)
    with open(stamp_path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    say("prep_bible: wrote %s" % args.out_dir)
    say("\n".join(stats))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="Prepare the Bible EN->ES task (datasets/README.md).")
    ap.add_argument("out_dir", nargs="?", default=DEFAULT_OUT,
                    help="output directory (default: %(default)s)")
    ap.add_argument("--src-module", default="engWEB2015eb",
                    help="English SWORD module (default %(default)s; engKJV2006eb also works)")
    ap.add_argument("--tgt-module", default=RV1909, help="Spanish SWORD module")
    ap.add_argument("--vocab-size", type=int, default=8000, help="shared BPE vocabulary size")
    ap.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    args = ap.parse_args(argv)
    say = (lambda *a, **k: None) if args.quiet else print
    try:
        return prepare(args, say)
    except Missing as e:
        print("prep_bible: %s" % e, file=sys.stderr)
        return 2
    except (RuntimeError, OSError, UnicodeDecodeError) as e:
        print("prep_bible: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
