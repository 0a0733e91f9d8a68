#!/usr/bin/python3
"""Is the low-rank bottleneck visible? `tg attention --stats` on the checkpoints of one or more
benchmarks/experiments/compare.py results directories, over the test set, in one table and one plot.

For every run of each results directory (runs/<name>/model.safetensors; results.json names its
variant and heads) it runs

    tg attention --model runs/<name>/model.safetensors --src-file DATA/test.src
                 --tgt-file DATA/test.tgt --stats OUT/heads/<run_id>/<name>.csv --limit N

(teacher forcing: the decoder reads the reference; one sentence at a time, no padding) and
averages its rows — one per sub-layer and head — over layers and heads, self-attention (encoder
and decoder) and cross-attention separately, then over the seeds of a (variant, heads). The
columns (docs/tool.md, tg attention --stats, defines each per sentence; every figure here is a
mean over sentences, then over heads and layers):

  n̄, m̄        queries and keys per sentence (tokens + </s> or <s>)
  d_k, d/h    the head width, and d_model / heads (they differ for fixed_head)
  bound       min(n, m, width): the largest rank S = Q Kᵀ/√d_k can have; width = d_k
              (h·d_k for talking heads, whose mixed logits add h rank-d_k matrices)
  rank        numerical rank of the pre-mask logits S (NumPy's float32 tolerance)
  rank/d_k, rank/min(n,m), width binds (d_k < min(n,m): the bottleneck applies), at bound
  erank       effective rank (Roy & Vetterli 2007) of S
  entropy     attention entropy per query row, nats; logit std: standard deviation of S

Outputs in --out: table.md, table.csv, rank_vs_heads.png (gnuplot; skipped with a note without
it: numerical and effective rank against heads per variant, d/h and n̄ drawn as references,
h_max = floor(d / n̄) of results.json marked), and heads/<run_id>/<name>.csv, the tool's rows,
which are reused when newer than the checkpoint (--force recomputes); their names say how many
sentences were read (<name>.first200.csv, <name>.all.csv).

Standard library only. Example (docs/results/attention-stats/):
  /usr/bin/python3 benchmarks/experiments/attention_stats.py docs/results/bible-lr/f0.2 \\
      --data data/bible --include-unfinished --limit 0 --out docs/results/attention-stats
"""

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = ("mha", "fixed_head", "talking_heads", "interacting", "interacting_sqrth",
         "interacting_pairwise")
# the tool's CSV columns averaged into the table, and their headings
MEANS = (("n_mean", "n̄"), ("m_mean", "m̄"), ("bound_mean", "bound"), ("rank_mean", "rank"),
         ("rank_over_dk", "rank/d_k"), ("rank_over_min_nm", "rank/min(n,m)"),
         ("width_binds", "width binds"), ("at_bound", "at bound"), ("erank_mean", "erank"),
         ("entropy_mean", "entropy"), ("logit_std_mean", "logit std"))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument
    a("results", nargs="+", help="results directories of benchmarks/experiments/compare.py (results.json, runs/)")
    a("--tg", help="the tg program (default: BUILD/tools/tg)")
    a("--build-dir", default=os.path.join(HERE, "..", "..", "build"), help="where tg was built")
    a("--data", help="folder with test.src and test.tgt (default: each results.json's task.data)")
    a("--limit", type=int, default=200, help="test sentences per checkpoint (default 200; 0: all)")
    a("--threads", type=int, default=0, help="tg --threads (0: its default)")
    a("--out", default=os.path.join(HERE, "..", "..", "docs", "results", "attention-stats"),
      help="output folder (default docs/results/attention-stats)")
    a("--include-unfinished", action="store_true",
      help="also runs results.json does not list as ok but whose folder has a checkpoint (a run "
           "still training: its latest save; the table says so)")
    a("--force", action="store_true", help="rerun tg even where a CSV newer than the checkpoint exists")
    a("--no-plot", action="store_true", help="skip the gnuplot figure")
    return p.parse_args(argv)


def order(variant):
    return (ORDER.index(variant) if variant in ORDER else len(ORDER), variant)


def last_step(run_dir):
    """The last training step metrics.jsonl records (None without one)."""
    step = None
    try:
        with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
            for line in f:
                try:
                    step = json.loads(line).get("step", step)
                except ValueError:
                    pass
    except OSError:
        pass
    return step


def checkpoints(results_dir, include_unfinished):
    """(results.json, [run dicts with 'model', 'ok', 'step']) of one results directory."""
    with open(os.path.join(results_dir, "results.json"), encoding="utf-8") as f:
        res = json.load(f)
    runs = []
    for r in res.get("runs", []):
        d = os.path.join(results_dir, r.get("dir") or os.path.join("runs", r["name"]))
        model = os.path.join(d, "model.safetensors")
        ok = r.get("status") == "ok"
        if os.path.exists(model) and (ok or include_unfinished):
            runs.append(dict(r, model=model, ok=ok, step=last_step(d)))
    return res, runs


def run_tg(o, tg, run, data, csv_path):
    """tg attention --stats on one checkpoint, unless a CSV newer than it exists."""
    if (not o.force and os.path.exists(csv_path)
            and os.path.getmtime(csv_path) > os.path.getmtime(run["model"])):
        return "reused"
    os.makedirs(os.path.dirname(csv_path), exist_ok=True)
    cmd = [tg, "attention", "--model", run["model"], "--src-file", os.path.join(data, "test.src"),
           "--tgt-file", os.path.join(data, "test.tgt"), "--stats", csv_path + ".part",
           "--limit", str(o.limit)]
    if o.threads:
        cmd += ["--threads", str(o.threads)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    os.replace(csv_path + ".part", csv_path)
    return p.stdout.splitlines()[0].replace(".csv.part", ".csv") if p.stdout else "done"


def summarise(csv_path):
    """{'self': {...}, 'cross': {...}}: the tool's rows averaged over layers and heads."""
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for kind in ("self", "cross"):
        sel = [r for r in rows if r["sublayer"].endswith(kind + "_attn")]
        if not sel:
            continue
        e = {k: statistics.mean(float(r[k]) for r in sel) for k, _ in MEANS}
        e["d_k"] = int(sel[0]["d_k"])
        e["d_over_h"] = float(sel[0]["d_over_h"])
        e["sentences"] = int(sel[0]["sentences"])
        out[kind] = e
    return out


def fmt(k, v):
    if k in ("width_binds", "at_bound"):
        return "%.0f %%" % (100 * v)
    if k in ("rank_over_dk", "rank_over_min_nm"):
        return "%.2f" % v
    return "%.1f" % v if k in ("n_mean", "m_mean", "bound_mean") else "%.2f" % v


def write_table(o, table, notes):
    cols = ["variant", "heads", "d_k", "d/h", "attention"] + [h for _, h in MEANS] + ["runs"]
    with open(os.path.join(o.out, "table.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["variant", "heads", "d_k", "d_over_h", "attention"] + [k for k, _ in MEANS]
                   + ["runs", "sentences", "checkpoints"])
        for t in table:
            w.writerow([t["variant"], t["heads"], t["d_k"], "%g" % t["d_over_h"], t["attention"]]
                       + ["%.4f" % t[k] for k, _ in MEANS] + [t["runs"], t["sentences"], t["what"]])
    lines = ["# Attention logits: rank against heads", "",
             "Written by `benchmarks/experiments/attention_stats.py` (`tg attention --stats` per checkpoint; "
             "docs/tool.md defines every column). Means over test sentences, then over "
             "layers and heads, then over seeds; self-attention is the encoder's and the "
             "decoder's (S taken before the causal mask), cross-attention the decoder's over "
             "the encoder. Rank is the numerical rank of S (singular values above "
             "σ_max·max(n,m)·2⁻²³, NumPy's float32 default); bound = min(n, m, width) with "
             "width d_k (h·d_k for talking heads).", ""]
    lines += notes + [""] if notes else []
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for t in table:
        lines.append("| " + " | ".join(
            [t["variant"], str(t["heads"]), str(t["d_k"]), "%g" % t["d_over_h"], t["attention"]]
            + [fmt(k, t[k]) for k, _ in MEANS] + ["%d%s" % (t["runs"], t["mark"])]) + " |")
    with open(os.path.join(o.out, "table.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def write_plot(o, table, h_max, d_model):
    """rank_vs_heads.png: numerical rank (solid) and effective rank (dashed) against heads."""
    if not shutil.which("gnuplot"):
        return "gnuplot not found (apt-get install gnuplot-nox): no plot"
    variants = sorted({t["variant"] for t in table}, key=order)
    heads = sorted({t["heads"] for t in table})
    dat = os.path.join(o.out, "rank_vs_heads.dat")
    nbar = {}
    with open(dat, "w", encoding="utf-8") as f:
        for kind in ("self", "cross"):
            for v in variants:
                f.write("# %s %s: heads rank erank n_mean\n" % (kind, v))
                for t in table:
                    if t["variant"] == v and t["attention"] == kind:
                        f.write("%d %g %g %g\n" % (t["heads"], t["rank_mean"], t["erank_mean"],
                                                     t["n_mean"]))
                        nbar.setdefault(kind, []).append(min(t["n_mean"], t["m_mean"]))
                f.write("\n\n")
    lo, hi = min(heads) / 1.6, max(heads) * 1.6
    nv = len(variants)
    gp = ["set terminal pngcairo noenhanced size 1200,520 font ',10'",
          "set output 'rank_vs_heads.png'", "set grid", "set logscale x 2",
          "set xrange [%g:%g]" % (lo, hi), "set xtics (%s)" % ", ".join("'%d' %d" % (h, h) for h in heads),
          "set xlabel 'heads'", "set ylabel 'rank of the logits S (per head)'", "set yrange [0:*]",
          "set key top right opaque box", "titles = '%s'" % " ".join(variants),
          "set multiplot layout 1,2 title 'numerical (solid) and effective (dashed) rank of "
          "S = QK^T/sqrt(d_k) against heads; d/h and min(n̄, m̄) as references'"]
    if h_max and lo <= h_max <= hi:
        gp += ["set arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 2 lw 2 lc 'gray'" % (h_max, h_max),
               "set label 1 'h_max = %d' at %d, graph 0.95 offset 0.5,0" % (h_max, h_max)]
    for i, kind in enumerate(("self", "cross")):
        nb = statistics.mean(nbar.get(kind, [0]))
        gp += ["set title '%s-attention'" % kind,
               "plot for [i=0:%d] 'rank_vs_heads.dat' index %d+i using 1:2 with linespoints lw 2 "
               "pt 7 lc i+1 title word(titles, i+1), \\" % (nv - 1, i * nv),
               "     for [i=0:%d] 'rank_vs_heads.dat' index %d+i using 1:3 with linespoints lw 2 "
               "dt 2 pt 6 lc i+1 notitle, \\" % (nv - 1, i * nv),
               "     %d / x with lines lw 1 lc 'black' dt 3 title 'd/h', \\" % d_model,
               "     %g with lines lw 1 lc 'gray' dt 4 title 'min(n̄, m̄) = %.1f'" % (nb, nb)]
    gp += ["unset multiplot"]
    with open(os.path.join(o.out, "rank_vs_heads.gp"), "w", encoding="utf-8") as f:
        f.write("\n".join(gp) + "\n")
    p = subprocess.run(["gnuplot", "rank_vs_heads.gp"], cwd=o.out, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return None if p.returncode == 0 else "gnuplot failed: %s" % p.stdout.strip()[-400:]


def main(argv):
    o = parse_args(argv)
    tg = o.tg or os.path.join(o.build_dir, "tools", "tg")
    if not os.access(tg, os.X_OK):
        sys.exit("attention_stats: no tg program at %s (build it, or give --tg)" % tg)
    os.makedirs(o.out, exist_ok=True)
    groups, notes, h_max, d_model = {}, [], None, None
    for rd in o.results:
        res, runs = checkpoints(rd, o.include_unfinished)
        data = o.data or res.get("task", {}).get("data")
        if not data or not os.path.exists(os.path.join(data, "test.src")):
            sys.exit("attention_stats: no test.src in %s (give --data)" % data)
        h_max = h_max or res.get("task", {}).get("h_max")
        d_model = d_model or res.get("config", {}).get("d_model")
        if not runs:
            print("attention_stats: %s: no checkpoint to read" % rd, file=sys.stderr)
        for r in runs:
            csv_path = os.path.join(o.out, "heads", res.get("run_id", os.path.basename(rd)),
                                    "%s.%s.csv" % (r["name"], "all" if o.limit == 0 else "first%d" % o.limit))
            try:
                said = run_tg(o, tg, r, data, csv_path)
            except RuntimeError as e:
                print("attention_stats: %s" % e, file=sys.stderr)
                continue
            print("%s: %s" % (r["name"], said))
            what = "%s step %s%s" % (r["name"], r["step"], "" if r["ok"] else " (unfinished)")
            if not r["ok"]:
                notes.append("* %s: results.json does not list it as finished; its checkpoint "
                             "at step %s was read." % (r["name"], r["step"]))
            for kind, e in summarise(csv_path).items():
                groups.setdefault((r["variant"], r["heads"], kind), []).append((e, what, r["ok"]))
    if not groups:
        sys.exit("attention_stats: nothing measured")
    table = []
    for (v, h, kind), es in sorted(groups.items(), key=lambda kv: (order(kv[0][0]), kv[0][1], kv[0][2] != "self")):
        t = {"variant": v, "heads": h, "attention": kind, "runs": len(es),
             "mark": "" if all(ok for _, _, ok in es) else "*",
             "d_k": es[0][0]["d_k"], "d_over_h": es[0][0]["d_over_h"],
             "sentences": es[0][0]["sentences"], "what": "; ".join(w for _, w, _ in es)}
        for k, _ in MEANS:
            t[k] = statistics.mean(e[k] for e, _, _ in es)
        table.append(t)
    if any(t["mark"] for t in table):
        notes.append("* marks a row with an unfinished checkpoint.")
    if h_max:
        notes.append("h_max = floor(d / n̄) = %s (results.json, from the training set's mean length)."
                     % h_max)
    for line in write_table(o, table, notes):
        print(line)
    if not o.no_plot:
        note = write_plot(o, table, h_max, d_model or 0)
        print("attention_stats: %s" % (note or "plot in %s" % os.path.join(o.out, "rank_vs_heads.png")))


if __name__ == "__main__":
    main(sys.argv[1:])
