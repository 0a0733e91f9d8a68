#!/usr/bin/env python3
"""The learning-rate study's table (docs/results.md §3) from its results directories: per
(variant, heads), test BLEU / dev loss at each noam factor (mean ± sd over the seeds finished
there), the factor of the lowest mean dev loss in bold, and, where a cell has 2 or more seeds
and mha's best cell at the same head count too, Welch's t-test of dev loss against mha's best
(each variant at its own best rate). Standard library only.
   python3 benchmarks/experiments/lr_grid_table.py [GRID_DIR]   (default docs/results/bible-lr)"""
import collections
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_stats  # noqa: E402

ORDER = ["mha", "interacting", "talking_heads", "fixed_head", "interacting_sqrth"]


def cells(grid):
    """{(variant, heads): {factor: [(bleu, dev_loss), ...]}} over every finished run."""
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in glob.glob(os.path.join(grid, "f*", "results.json")):
        factor = float(os.path.basename(os.path.dirname(path))[1:])
        with open(path, encoding="utf-8") as f:
            for r in json.load(f)["runs"]:
                if r.get("status") == "ok" and r.get("dev_loss") is not None:
                    out[(r["variant"], r["heads"])][factor].append((r["bleu"], r["dev_loss"]))
    return out


def fmt(xs, digits):
    if len(xs) == 1:
        return "%.*f" % (digits, xs[0])
    return "%.*f ± %.*f" % (digits, statistics.mean(xs), digits, statistics.stdev(xs))


def main():
    grid = sys.argv[1] if len(sys.argv) > 1 else "docs/results/bible-lr"
    c = cells(grid)
    factors = sorted({f for v in c.values() for f in v})
    best = {k: min(v, key=lambda f: statistics.mean(d for _, d in v[f])) for k, v in c.items()}
    print("| variant | heads | " + " | ".join("factor %g" % f for f in factors) +
          " | at its best vs mha at its best (dev loss, Welch) |")
    print("|---" * (len(factors) + 3) + "|")
    for key in sorted(c, key=lambda k: (k[1], ORDER.index(k[0]) if k[0] in ORDER else 99)):
        row = []
        for f in factors:
            runs = c[key].get(f)
            if not runs:
                row.append("—")
                continue
            text = "%s / %s%s" % (fmt([b for b, _ in runs], 2), fmt([d for _, d in runs], 3),
                                  " (%d seeds)" % len(runs) if len(runs) > 1 else "")
            row.append("**%s**" % text if f == best[key] else text)
        verdict = ""
        m = ("mha", key[1])
        if key[0] != "mha" and m in c:
            a = [d for _, d in c[key][best[key]]]
            b = [d for _, d in c[m][best[m]]]
            w = compare_stats.welch(a, b)
            if w:
                verdict = "%+.3f (p %.3g, %d vs %d seeds)" % (w[0], w[3], len(a), len(b))
            else:
                verdict = "%+.3f (one seed)" % (statistics.mean(a) - statistics.mean(b))
        print("| %s | %d | %s | %s |" % (key[0], key[1], " | ".join(row), verdict))


if __name__ == "__main__":
    main()
