#!/usr/bin/env python3
"""The learning-rate study's table (docs/results.md §3) from its results directories: per
(variant, heads), test BLEU / dev loss at each noam factor (mean ± sd over the seeds finished
there), in bold the factor of the lowest mean dev loss among the cells with the most seeds, and
where that cell and mha's best at the same head count both have 2 or more seeds, Welch's t-test
of dev loss and of test BLEU against mha's best (each variant at its own best rate). With
--paired-bs TG --data DIR also sacreBLEU's paired bootstrap (`TG eval --paired-bs`, 1,000
resamples) of each variant's test BLEU at its best factor against mha's at its best, seed by seed
(the seeds both cells have; references DIR/test.ref.txt). Standard library only.
   python3 benchmarks/experiments/lr_grid_table.py [GRID_DIR] [--paired-bs TG --data DIR]
   (GRID_DIR default docs/results/bible-lr)"""
import collections
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import compare_stats  # noqa: E402

ORDER = ["mha", "interacting", "talking_heads", "fixed_head", "interacting_sqrth"]


def cells(grid):
    """{(variant, heads): {factor: [(bleu, dev_loss), ...]}} over every finished run, and
    {(variant, heads, factor, seed): the run's directory}."""
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    dirs = {}
    for path in glob.glob(os.path.join(grid, "f*", "results.json")):
        factor = float(os.path.basename(os.path.dirname(path))[1:])
        with open(path, encoding="utf-8") as f:
            for r in json.load(f)["runs"]:
                if r.get("status") == "ok" and r.get("dev_loss") is not None:
                    out[(r["variant"], r["heads"])][factor].append((r["bleu"], r["dev_loss"]))
                    dirs[(r["variant"], r["heads"], factor, r["seed"])] = os.path.join(
                        os.path.dirname(path), r["dir"])
    return out, dirs


def best_factor(row):
    """The factor of the lowest mean dev loss among a row's cells with the most seeds: the seeds
    run where seed 1 did best, and a single seed's value elsewhere is not compared with a mean
    (the lowest of several one-seed cells is biased low)."""
    most = max(len(runs) for runs in row.values())
    return min((f for f in row if len(row[f]) == most),
               key=lambda f: statistics.mean(d for _, d in row[f]))


def paired_bs(tg, ref, run_dir, base_dir, tmp):
    """(BLEU difference, p value) of run_dir's test hypotheses against base_dir's"""
    hyp = compare.detokenize(os.path.join(run_dir, "test.hyp"), os.path.join(tmp, "hyp"))
    base = compare.detokenize(os.path.join(base_dir, "test.hyp"), os.path.join(tmp, "base"))
    r = subprocess.run([tg, "eval", "--metric", "bleu", "--hyp", hyp, "--baseline", base, "--ref",
                        ref, "--tokenize", "13a", "--paired-bs", "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if r.returncode != 0:
        sys.exit("lr_grid_table: %s eval failed: %s" % (tg, r.stderr.strip()))
    m = json.loads(r.stdout)["paired_bs"]["metrics"]["bleu"]
    return m["diff"], m["p_value"]


def rows(c):
    """The table's rows (variant, heads): by heads, then the variants in ORDER"""
    return sorted(c, key=lambda k: (k[1], ORDER.index(k[0]) if k[0] in ORDER else 99))


def fmt(xs, digits):
    if len(xs) == 1:
        return "%.*f" % (digits, xs[0])
    return "%.*f ± %.*f" % (digits, statistics.mean(xs), digits, statistics.stdev(xs))


def main():
    args, tg, data = sys.argv[1:], None, None
    for flag in ("--paired-bs", "--data"):
        if flag in args:
            i = args.index(flag)
            if i + 1 >= len(args):
                sys.exit("lr_grid_table: %s needs a value" % flag)
            if flag == "--paired-bs":
                tg = args[i + 1]
            else:
                data = args[i + 1]
            del args[i:i + 2]
    if (tg is None) != (data is None):
        sys.exit("lr_grid_table: --paired-bs and --data go together")
    grid = args[0] if args else "docs/results/bible-lr"
    c, dirs = cells(grid)
    factors = sorted({f for v in c.values() for f in v})
    best = {k: best_factor(v) for k, v in c.items()}
    print("| variant | heads | " + " | ".join("factor %g" % f for f in factors) +
          " | at its best vs mha at its best: dev loss, test BLEU (Welch) |")
    print("|---" * (len(factors) + 3) + "|")
    for key in rows(c):
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
            parts = []
            for i, digits in ((1, 3), (0, 2)):
                a = [x[i] for x in c[key][best[key]]]
                b = [x[i] for x in c[m][best[m]]]
                w = compare_stats.welch(a, b)
                parts.append("%+.*f (p %.3g)" % (digits, w[0], w[3]) if w else
                             "%+.*f" % (digits, statistics.mean(a) - statistics.mean(b)))
            n_a, n_b = len(c[key][best[key]]), len(c[m][best[m]])
            verdict = "%s, %s (%s)" % (parts[0], parts[1], "one seed" if n_a < 2 or n_b < 2
                                       else "%d vs %d seeds" % (n_a, n_b))
        print("| %s | %d | %s | %s |" % (key[0], key[1], " | ".join(row), verdict))
    if tg:
        print_paired(c, dirs, best, tg, os.path.join(data, "test.ref.txt"))


def print_paired(c, dirs, best, tg, ref):
    """The paired bootstrap table: each variant at its best factor against mha at its best, the
    same seed, test BLEU difference and p value per seed."""
    print()
    print("| variant | heads | factor vs mha's | paired bootstrap of test BLEU, by seed: "
          "difference (p) |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for key in rows(c):
            m = ("mha", key[1])
            if key[0] == "mha" or m not in c:
                continue
            f, fm = best[key], best[m]
            cols = []
            for seed in sorted({s for (v, h, ff, s) in dirs if (v, h, ff) == key + (f,)}):
                base = dirs.get(m + (fm, seed))
                if base:
                    d, p = paired_bs(tg, ref, dirs[key + (f, seed)], base, tmp)
                    cols.append("s%d %+.2f (%.3f)" % (seed, d, p))
            print("| %s | %d | %g vs %g | %s |" % (key[0], key[1], f, fm, ", ".join(cols) or "—"))


if __name__ == "__main__":
    main()
