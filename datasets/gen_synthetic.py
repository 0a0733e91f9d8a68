#!/usr/bin/python3
"""Generate the synthetic copy / reverse / sort tasks for tgraph (datasets/README.md).

Usage: gen_synthetic.py [--tasks copy,reverse,sort] [--vocab-size V] [--min-len A]
                        [--max-len B] [--train N] [--dev N] [--test N] [--seed S] [OUT_DIR]

Writes OUT_DIR/<task>/{train,dev,test}.{src,tgt} (default OUT_DIR: <repo>/data/synthetic):
one sequence per line, tokens separated by single spaces. Tokens are the integers
0 .. V-1 written in decimal. Lengths are uniform in [A, B].

  copy     tgt = src
  reverse  tgt = src backwards
  sort     tgt = src sorted by numeric token value (ascending, duplicates kept)

All tasks share the same source sequences (so their results are comparable). Dev and test
sequences never occur in train, and test sequences never occur in dev. The output depends only
on the options: the generator is seeded from the string "tgraph-synthetic/<seed>/<split>" and
draws numbers by rejection sampling on getrandbits (stable across Python 3 versions).
Only the standard library is used.
"""

import argparse
import os
import random
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO_ROOT, "data", "synthetic")
TASKS = {
    "copy": lambda seq: list(seq),
    "reverse": lambda seq: list(reversed(seq)),
    "sort": lambda seq: sorted(seq),
}
SPLITS = ("train", "dev", "test")


def below(rng, n):
    """Uniform integer in [0, n): rejection sampling on getrandbits, as CPython's _randbelow
    does, written out so the stream cannot change with the library version."""
    k = n.bit_length()
    while True:
        r = rng.getrandbits(k)
        if r < n:
            return r


def generate(args):
    """{split: list of sequences (tuples of ints)}; raises ValueError if the space is too
    small to hold enough distinct held-out sequences."""
    out = {}
    seen = set()
    for split in SPLITS:
        rng = random.Random("tgraph-synthetic/%d/%s" % (args.seed, split))
        count = getattr(args, split)
        seqs = []
        attempts = 0
        while len(seqs) < count:
            attempts += 1
            if attempts > 100 * count + 1000:
                raise ValueError(
                    "cannot draw %d %s sequences not already in earlier splits: vocabulary %d "
                    "and lengths %d..%d leave too few distinct sequences" %
                    (count, split, args.vocab_size, args.min_len, args.max_len))
            n = args.min_len + below(rng, args.max_len - args.min_len + 1)
            seq = tuple(below(rng, args.vocab_size) for _ in range(n))
            if split != "train" and seq in seen:
                continue
            seqs.append(seq)
        # held-out splits exclude everything drawn before them (train, then train + dev)
        seen.update(seqs)
        out[split] = seqs
    return out


def write_lines(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line)
            f.write("\n")
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Generate synthetic copy/reverse/sort tasks.")
    ap.add_argument("out_dir", nargs="?", default=DEFAULT_OUT,
                    help="output directory; one sub-directory per task (default %(default)s)")
    ap.add_argument("--tasks", default="copy,reverse,sort",
                    help="comma-separated tasks among copy, reverse, sort (default: all)")
    ap.add_argument("--vocab-size", type=int, default=32, help="number of distinct tokens")
    ap.add_argument("--min-len", type=int, default=1, help="shortest sequence")
    ap.add_argument("--max-len", type=int, default=20, help="longest sequence")
    ap.add_argument("--train", type=int, default=20000, help="training sequences")
    ap.add_argument("--dev", type=int, default=500, help="development sequences")
    ap.add_argument("--test", type=int, default=1000, help="test sequences")
    ap.add_argument("--seed", type=int, default=1, help="random seed")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    args = ap.parse_args(argv)

    tasks = [t for t in args.tasks.split(",") if t]
    bad = [t for t in tasks if t not in TASKS]
    if bad or not tasks:
        ap.error("unknown task(s) %s; choose among %s" % (",".join(bad), ",".join(TASKS)))
    if args.vocab_size < 1 or args.min_len < 1 or args.max_len < args.min_len:
        ap.error("need --vocab-size >= 1 and 1 <= --min-len <= --max-len")
    if min(args.train, args.dev, args.test) < 0:
        ap.error("sequence counts must not be negative")
    try:
        data = generate(args)
    except ValueError as e:
        print("gen_synthetic: %s" % e, file=sys.stderr)
        return 1

    for task in tasks:
        d = os.path.join(args.out_dir, task)
        os.makedirs(d, exist_ok=True)
        for split in SPLITS:
            seqs = data[split]
            write_lines(os.path.join(d, split + ".src"),
                        [" ".join(map(str, s)) for s in seqs])
            write_lines(os.path.join(d, split + ".tgt"),
                        [" ".join(map(str, TASKS[task](s))) for s in seqs])
    if not args.quiet:
        print("gen_synthetic: wrote %s in %s (vocabulary %d, lengths %d..%d, seed %d)" %
              (",".join(tasks), args.out_dir, args.vocab_size, args.min_len, args.max_len,
               args.seed))
        for split in SPLITS:
            lens = [len(s) for s in data[split]]
            print("  %-5s %7d sequences, mean length %.2f, max %d" %
                  (split, len(lens), sum(lens) / max(1, len(lens)), max(lens, default=0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
