"""Reporting for benchmarks/experiments/compare.py: the per-variant summary of results.json, the tables
(stdout and summary.md), the training curves (curves/) and the gnuplot plots (PNG).
Standard library only; gnuplot is optional (plots are skipped with a note without it)."""

import math
import os
import shutil
import statistics
import subprocess

import compare_stats as stats

QUALITY_NAMES = {"per": "PER %", "wer": "WER %", "bleu": "BLEU", "chrf": "chrF", "meteor": "METEOR",
                 "rouge_l": "ROUGE-L", "cider": "CIDEr-D"}


def mean_sd(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def summarise(results):
    """One entry per (heads, variant) over the seeds that completed: means (and sd for the
    quality numbers), plus the speed ratios of the bench phase for that variant."""
    metrics = results["task"]["metrics"]
    groups = {}
    for r in results["runs"]:
        groups.setdefault((r["heads"], r["variant"]), []).append(r)
    bench_rows = (results.get("bench") or {}).get("rows") or []
    out = []
    for (heads, variant), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        e = {"variant": variant, "heads": heads, "seeds": len(ok), "failed": sum(
            r["status"] == "failed" for r in rs)}
        if ok:
            for k in metrics + ["dev_loss"]:
                m, sd = mean_sd(r.get(k) for r in ok)
                e[k] = m
                e[k + "_sd"] = sd
            for k in ("params", "tokens_per_s", "ms_per_step", "peak_bytes", "steps", "epochs",
                      "train_s", "decode_s"):
                m, _ = mean_sd(r.get(k) for r in ok)
                e[k] = (int(round(m)) if k in ("params", "peak_bytes") and m is not None else m)
        b = [x for x in bench_rows if x["variant"] == variant]
        b = [x for x in b if x["heads"] == heads] or b[:1]
        if b and "ratio_ms" in b[0]:
            e["bench_heads"] = b[0]["heads"]
            e["ratio_ms_vs_pytorch"] = b[0]["ratio_ms"]
            e["ratio_peak_vs_pytorch"] = b[0]["ratio_peak"]
        out.append(e)
    return out


def versus_mha(results):
    """For each heads and variant: the primary metric's difference to MHA, and that difference
    in units of the seed-to-seed spread (pooled sd of the two), when there are 2+ seeds."""
    primary = results["task"]["primary"]
    lower = results["task"]["lower_is_better"]
    summ = {(e["heads"], e["variant"]): e for e in results.get("summary") or []}
    rows = []
    for (heads, variant), e in sorted(summ.items()):
        base = summ.get((heads, "mha"))
        if variant == "mha" or not base or e.get(primary) is None or base.get(primary) is None:
            continue
        delta = e[primary] - base[primary]
        sds = [s for s in (e.get(primary + "_sd"), base.get(primary + "_sd")) if s is not None]
        pooled = math.sqrt(sum(s * s for s in sds) / len(sds)) if len(sds) == 2 else None
        better = delta < 0 if lower else delta > 0
        rows.append({"heads": heads, "variant": variant, "metric": primary, "delta": delta,
                     "better": better and delta != 0, "sd": pooled,
                     "z": delta / pooled if pooled else None})
    return rows


def fmt(x, digits=2):
    if x is None:
        return "–"
    if isinstance(x, int):
        return str(x)
    return "%.*f" % (digits, x)


def fmt_pm(m, sd, digits=2):
    if m is None:
        return "–"
    return fmt(m, digits) + ("" if sd is None else " ± " + fmt(sd, digits))


def main_table(results):
    metrics = results["task"]["metrics"]
    head = ["variant", "heads", "params"] + [QUALITY_NAMES[k] for k in metrics] + [
        "dev loss", "tokens/s", "ms/step", "peak MiB", "steps", "seeds"]
    has_bench = any("ratio_ms_vs_pytorch" in e for e in results.get("summary") or [])
    if has_bench:
        head += ["ms vs PyTorch", "mem vs PyTorch"]
    rows = []
    for e in sorted(results.get("summary") or [], key=lambda e: (e["heads"],
                                                                 order(e["variant"]))):
        row = [e["variant"], str(e["heads"]), fmt(e.get("params"))]
        row += [fmt_pm(e.get(k), e.get(k + "_sd")) for k in metrics]
        row += [fmt_pm(e.get("dev_loss"), e.get("dev_loss_sd"), 3), fmt(e.get("tokens_per_s"), 0),
                fmt(e.get("ms_per_step"), 1),
                fmt(e["peak_bytes"] / 1048576, 0) if e.get("peak_bytes") else "–",
                fmt(e.get("steps"), 0), "%d%s" % (e["seeds"], " (%d failed)" % e["failed"]
                                                  if e["failed"] else "")]
        if has_bench:
            row += [fmt(e.get("ratio_ms_vs_pytorch")) + "×" if e.get("ratio_ms_vs_pytorch")
                    else "–",
                    fmt(e.get("ratio_peak_vs_pytorch")) + "×" if e.get("ratio_peak_vs_pytorch")
                    else "–"]
        rows.append(row)
    return head, rows


def order(variant):
    known = ["mha", "fixed_head", "talking_heads", "interacting", "interacting_noproj", "interacting_sqrth",
             "interacting_pairwise"]
    return known.index(variant) if variant in known else len(known)


def bench_table(results):
    b = results.get("bench") or {}
    head = ["variant", "heads", "tgraph ms/step", "PyTorch ms/step", "ratio", "tgraph peak MiB",
            "PyTorch peak MiB", "ratio", "best-round ratio", "tgraph rounds", "PyTorch rounds"]
    rows = []
    for r in b.get("rows") or []:
        t, p = r.get("tgraph") or {}, r.get("pytorch") or {}
        rows.append([r["variant"], str(r["heads"]), fmt(t.get("ms_per_step"), 1),
                     fmt(p.get("ms_per_step"), 1), fmt(r.get("ratio_ms")),
                     fmt(t["peak_bytes"] / 1048576, 0) if t else "–",
                     fmt(p["peak_bytes"] / 1048576, 0) if p else "–", fmt(r.get("ratio_peak")),
                     fmt(r.get("ratio_ms_best")),
                     " ".join("%.0f" % x for x in t.get("ms_per_step_rounds", [])) or "–",
                     " ".join("%.0f" % x for x in p.get("ms_per_step_rounds", [])) or "–"])
    return head, rows


def text_table(head, rows):
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.rjust(w[i]) if i else c.ljust(w[i])  # noqa: E731
                                   for i, c in enumerate(cells))
    return "\n".join([line(head), line(["-" * x for x in w])] + [line(r) for r in rows])


def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


# ---- curves and plots -------------------------------------------------------------------------

def write_curves(results, out):
    """curves/<run>.train.tsv and .dev.tsv (step, elapsed s, loss, nll) and curves.csv."""
    d = os.path.join(out, "curves")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(out, "curves.csv"), "w", encoding="utf-8") as csv:
        csv.write("run,variant,heads,seed,split,step,elapsed_s,loss,nll\n")
        for r in results["runs"]:
            c = r.get("curve")
            if not c:
                continue
            for split in ("train", "dev"):
                with open(os.path.join(d, "%s.%s.tsv" % (r["name"], split)), "w",
                          encoding="utf-8") as f:
                    f.write("# step\telapsed_s\tloss\tnll\n")
                    for step, el, loss, nll in c[split]:
                        vals = [step, el, loss, nll]
                        f.write("\t".join("nan" if v is None else str(v) for v in vals) + "\n")
                        csv.write("%s,%s,%d,%d,%s,%s\n" % (
                            r["name"], r["variant"], r["heads"], r["seed"], split,
                            ",".join("" if v is None else str(v) for v in vals)))


def gnuplot_terminal():
    r = subprocess.run(["gnuplot", "-e", "set terminal pngcairo"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return "pngcairo size 1200,540 font ',10'" if r.returncode == 0 else "png size 1200,540"


def write_plots(results, out):
    """PNG plots with gnuplot; returns (list of files, note)."""
    if not shutil.which("gnuplot"):
        return [], "gnuplot not found (apt-get install gnuplot-nox): plots skipped"
    d = os.path.join(out, "plots")
    os.makedirs(d, exist_ok=True)
    summ = sorted(results.get("summary") or [], key=lambda e: (order(e["variant"]), e["heads"]))
    variants = []
    for e in summ:
        if e["variant"] not in variants and e.get("params"):
            variants.append(e["variant"])
    heads = sorted({e["heads"] for e in summ})
    metrics = results["task"]["metrics"]
    term = gnuplot_terminal()
    # one data block per variant: heads, metric means and sds, ms/step, peak MiB
    with open(os.path.join(d, "by_heads.dat"), "w", encoding="utf-8") as f:
        for v in variants:
            f.write("# %s\n# heads %s ms_per_step peak_mib tokens_per_s\n" % (
                v, " ".join("%s %s_sd" % (k, k) for k in metrics)))
            for e in summ:
                if e["variant"] != v or not e.get("params"):
                    continue
                vals = [e["heads"]]
                for k in metrics:
                    vals += [e.get(k), e.get(k + "_sd") or 0.0]
                vals += [e.get("ms_per_step"), (e.get("peak_bytes") or 0) / 1048576,
                         e.get("tokens_per_s")]
                f.write(" ".join("nan" if x is None else str(x) for x in vals) + "\n")
            f.write("\n\n")
    lo, hi = (min(heads) / 1.6, max(heads) * 1.6) if heads else (0.5, 2)
    titles = " ".join(v for v in variants)
    files, script = [], ["set terminal %s noenhanced" % term, "set key top left opaque box",
                         "set grid", "set logscale x 2", "set xrange [%g:%g]" % (lo, hi),
                         "set xlabel 'heads'", "set xtics (%s)" % ", ".join(
                             "'%d' %d" % (h, h) for h in heads), "titles = '%s'" % titles]
    n = len(variants)
    if n:
        hm = results["task"].get("h_max")
        if hm and lo <= hm <= hi:  # the interacting-head paper's bound, floor(d / n̄)
            script += ["set arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 2 lw 2 lc 'gray'"
                       % (hm, hm),
                       "set label 1 'h_max = %d' at %d, graph 0.04 offset 0.5,0" % (hm, hm)]
        # more than three metrics: two rows of panels; 30 % headroom above the highest error
        # bar so that the key (top right) covers no point
        rows = 2 if len(metrics) > 3 else 1
        script += ["set output 'quality_vs_heads.png'", "set yrange [0:*]",
                   "set offsets 0, 0, graph 0.3, 0", "set key top right opaque box",
                   "set terminal %s noenhanced" % term.replace("1200,540", "1200,%d" % (420 * rows)),
                   "set multiplot layout %d,%d title '%s: test quality against heads'"
                   % (rows, (len(metrics) + rows - 1) // rows, results["task"]["name"])]
        for i, k in enumerate(metrics):
            col = 2 + 2 * i
            script += ["set ylabel '%s'" % QUALITY_NAMES[k],
                       "plot for [i=0:%d] 'by_heads.dat' index i using 1:%d:%d with yerrorlines "
                       "lw 2 title word(titles, i+1)" % (n - 1, col, col + 1)]
        script += ["unset multiplot"]
        files.append("quality_vs_heads.png")
        c = 2 + 2 * len(metrics)
        script += ["set terminal %s noenhanced" % term, "set output 'cost_vs_heads.png'",
                   "set multiplot layout 1,2 title 'training cost against heads'",
                   "set ylabel 'ms per training step'",
                   "plot for [i=0:%d] 'by_heads.dat' index i using 1:%d with linespoints lw 2 "
                   "title word(titles, i+1)" % (n - 1, c),
                   "set ylabel 'peak memory (MiB, RSS)'",
                   "plot for [i=0:%d] 'by_heads.dat' index i using 1:%d with linespoints lw 2 "
                   "title word(titles, i+1)" % (n - 1, c + 1),
                   "unset multiplot", "set yrange [*:*]", "unset arrow 1", "unset label 1",
                   "set offsets 0, 0, 0, 0"]
        files.append("cost_vs_heads.png")
    # loss curves: every run of the first seed, train NLL against steps; dev loss as points
    curves = [r for r in results["runs"] if r.get("curve") and r["seed"] == 1
              and r["curve"]["train"]]
    if curves:
        script += ["unset logscale x", "set xrange [*:*]", "set xtics autofreq",
                    "set xlabel 'step'", "set ylabel 'cross-entropy per target token (nats)'",
                    "set logscale y", "set output 'loss_curves.png'", "set key top right",
                    "set title 'training (lines) and dev (points) loss, seed 1'"]
        parts = []
        for i, r in enumerate(curves):
            base = "../curves/%s" % r["name"]
            t = "%s h%d" % (r["variant"], r["heads"])
            parts.append("'%s.train.tsv' using 1:4 with lines lw 2 lc %d title '%s'"
                         % (base, i + 1, t))
            if r["curve"]["dev"]:
                parts.append("'%s.dev.tsv' using 1:4 with points pt 7 ps 1.3 lc %d notitle"
                             % (base, i + 1))
        script += ["plot " + ", \\\n     ".join(parts), "unset logscale y", "unset title"]
        files.append("loss_curves.png")
    brows = [r for r in (results.get("bench") or {}).get("rows") or []
             if r.get("tgraph") and r.get("pytorch")]
    if brows:
        with open(os.path.join(d, "bench.dat"), "w", encoding="utf-8") as f:
            f.write("# label tgraph_ms pytorch_ms\n")
            for r in brows:
                f.write("%s-h%d %s %s\n" % (r["variant"], r["heads"], r["tgraph"]["ms_per_step"],
                                            r["pytorch"]["ms_per_step"]))
        script += ["set output 'speed_vs_pytorch.png'", "unset logscale", "set xrange [*:*]",
                   "set xtics autofreq rotate by -30", "set xlabel ''",
                   "set ylabel 'ms per training step (median)'",
                   "set style data histograms", "set style histogram clustered gap 1",
                   "set style fill solid 0.8 border -1", "set yrange [0:*]",
                   "set title 'training step, tgraph against PyTorch (same shapes and threads)'",
                   "plot 'bench.dat' using 2:xtic(1) title 'tgraph', '' using 3 title 'PyTorch'"]
        files.append("speed_vs_pytorch.png")
    if not files:
        return [], "no completed runs: nothing to plot"
    with open(os.path.join(d, "plots.gp"), "w", encoding="utf-8") as f:
        f.write("\n".join(script) + "\n")
    r = subprocess.run(["gnuplot", "plots.gp"], cwd=d, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    made = [x for x in files if os.path.exists(os.path.join(d, x))
            and os.path.getsize(os.path.join(d, x)) > 0]
    note = None
    if r.returncode != 0:
        note = "gnuplot failed (exit %d): %s" % (r.returncode, r.stdout.strip()[-500:])
    return ["plots/" + x for x in made], note


# ---- summary.md -------------------------------------------------------------------------------

def describe_vs_mha(results):
    lines = []
    lower = results["task"]["lower_is_better"]
    for c in versus_mha(results):
        name = QUALITY_NAMES.get(c["metric"], c["metric"])
        word = "better" if c["better"] else "worse" if c["delta"] != 0 else "equal"
        s = "- %s, %d heads: %s %+.2f against mha (%s%s)" % (
            c["variant"], c["heads"], name, c["delta"], word,
            "" if lower else ", higher is better")
        if c["z"] is not None:
            s += "; %.1f× the seed-to-seed sd (%.2f)" % (abs(c["z"]), c["sd"])
        else:
            s += "; one seed, so no seed-to-seed spread to compare with"
        lines.append(s)
    return lines


def significance_md(results):
    """The verdict's evidence: per variant and heads, the primary metric against mha — mean
    difference, seed-to-seed spread, Welch's p over seeds, and each seed's paired bootstrap."""
    metric = results["task"]["primary"]
    rows = stats.significance_rows(results, metric)
    if not rows:
        return []
    name = QUALITY_NAMES.get(metric, metric)
    head = ["variant", "heads", "Δ %s vs mha" % name, "sd (variant / mha)", "seeds",
            "Welch p (seeds)", "paired bootstrap per seed: Δ, p"]
    body = []
    for r in rows:
        sd = "%s / %s" % (fmt(r["sd"]), fmt(r["sd_mha"]))
        body.append([r["variant"], str(r["heads"]), "%+.2f" % r["delta"], sd,
                     "%d / %d" % (r["n"], r["n_mha"]),
                     "%.3f" % r["welch_p"] if r["welch_p"] is not None else "– (needs 2+ seeds each)",
                     "; ".join("s%d %+.2f, p %.3f" % (b[0], b[2], b[3]) for b in r["bootstrap"])
                     or "–"])
    return ["## Significance against mha (%s)" % name, "", md_table(head, body), "",
            "Δ = variant mean − mha mean over the seeds that finished; Welch's two-sided t-test "
            "over seeds asks whether the difference exceeds seed-to-seed noise; the paired "
            "bootstrap (sacreBLEU's --paired-bs, 1,000 resamples of the test sentences) asks, "
            "per seed, whether that system's output beats mha's output of the same seed — it "
            "measures test-set sampling noise, not training noise.", ""]


def trained_lines(results):
    """Where the runs trained, when a sweep's sittings differ: date, CPU and source commit per
    group of runs (runs of results written before these were recorded: "not recorded")."""
    groups = {}
    for r in results["runs"]:
        if r.get("status") != "ok":
            continue
        w = r.get("trained") or {}
        key = (w.get("date") or "?", w.get("cpu") or "?", w.get("source") or "?") if w else None
        groups.setdefault(key, []).append(r["name"])
    if len(groups) < 2:
        return []
    parts = ["%d on %s (%s, source %s)" % (len(v), k[0], k[1], k[2]) if k else
             "%d not recorded" % len(v) for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))]
    return ["Runs trained in several sittings: %s (each run's `trained` in results.json)." % "; ".join(parts), ""]


def write_all(results, out, plots=True):
    """Write curves/, plots/ and summary.md; return the text table for stdout."""
    write_curves(results, out)
    files, note = write_plots(results, out) if plots else ([], "plots skipped (--no-plots)")
    results["plots"] = files
    results["plots_note"] = note
    head, rows = main_table(results)
    bh, brows = bench_table(results)
    t, c, h = results["task"], results["config"], results["host"]
    bud = c["budget"]
    budget = ("%g min" % bud["value"]) if bud["kind"] == "minutes" else ("%d steps" % bud["value"])
    md = ["# Attention-variant comparison: %s (%s)" % (t["name"], results["run_id"]), "",
          "Command: `%s`  " % results["command"],
          "Started %s, finished %s (%s s).  " % (results.get("started"), results.get("finished"),
                                                results.get("wall_s")),
          "Host: %s, %s cores, %s GiB%s; load average at start %s." % (
              h.get("cpu", "?"), h.get("cores"), h.get("memory_gib"),
              (", GPU " + h["gpu"]) if h.get("gpu") else "", h.get("loadavg_start")),
          "",
          *trained_lines(results),
          "Data: `%s`: %d / %d / %d pairs (train / dev / test, %d test lines decoded); "
          "n̄ = %.2f tokens per sequence, h_max = ⌊d / n̄⌋ = %d." % (
              t["data"], t["pairs"]["train"], t["pairs"]["dev"], t["pairs"]["test"],
              t["test_lines"], t["mean_len"], t["h_max"]),
          "Model: preset `%s` (d %d, %d+%d layers, d_ff %d), dropout %g; fixed_head d_p = %d. "
          "Training: budget %s per run, %d tokens per batch, %s schedule (warmup %d, factor %s), seed(s) "
          "1..%d, backend %s, %d threads. Decoding: %s." % (
              c["size"], c["d_model"], c["layers"], c["layers"], c["d_ff"], c["dropout"],
              c["fixed_head_dim"], budget, c["max_tokens"], c["schedule"], c["warmup"], c["lr_factor"],
              c["seeds"], c["backend"], c["threads"],
              "greedy" if c["beam"] == 1 else "beam %d" % c["beam"]),
          ""]
    if rows:
        md += ["## Quality and cost", "", md_table(head, rows), "",
               "Quality on the test split (%s); dev loss = dev cross-entropy per target token at "
               "the end; tokens/s = target tokens per second of training; ms/step and tokens/s "
               "are medians over the logged windows; peak = peak RSS of the training process."
               % ", ".join(QUALITY_NAMES[k] for k in t["metrics"]), ""]
    loads = [r["loadavg_1min_after"] for r in results["runs"] if r.get("loadavg_1min_after")]
    if loads:
        md += ["1-minute load average at the end of the training runs: %.1f–%.1f on %s cores "
               "(above the core count, other processes competed for the CPU: time budgets then "
               "buy fewer steps)." % (min(loads), max(loads), h.get("cores")), ""]
    vs = describe_vs_mha(results)
    if vs:
        md += ["## Against multi-head attention", ""] + vs + [""]
    md += significance_md(results)
    b = results.get("bench") or {}
    if b.get("rows"):
        m = b["model"]
        md += ["## Training step against PyTorch", "",
               "Model `%s` (d %d, %d+%d layers, d_ff %d), batch %d × %d × %d tokens, %d threads, "
               "%d timed steps per measurement, %d rounds alternating the order; medians; "
               "ratio = tgraph / PyTorch (below 1: tgraph faster or smaller); best-round ratio = "
               "the ratio of each side's fastest round (on a shared machine, the least disturbed)."
               % (
                   m["size"], m["d_model"], m["layers"], m["layers"], m["d_ff"],
                   b["batch"]["sentences"], b["batch"]["src_len"], b["batch"]["tgt_len"],
                   b["threads"], b["steps"], b["rounds"]), "", md_table(bh, brows), ""]
        bl = [x for r in b["rows"] for impl in ("tgraph", "pytorch")
              for x in (r.get(impl) or {}).get("loadavg_1min", [])]
        if bl:
            md += ["1-minute load average during the measurements: %.1f–%.1f." % (min(bl), max(bl)),
                   ""]
    if b.get("note") or b.get("status") == "skipped":
        md += ["Speed phase: %s" % (b.get("note") or b.get("status")), ""]
    if files:
        md += ["## Plots", ""] + ["![%s](%s)" % (os.path.basename(f), f) for f in files] + [""]
    maps = [r for r in sorted(results["runs"], key=lambda r: (r["heads"], order(r["variant"])))
            if r.get("attention_map")]
    if maps:
        md += ["## Attention maps (seed 1, first test sentence)", "",
               "Every head's weights in `%s` (`tg attention`), per variant and heads:"
               % maps[0]["attention_map"]["sublayer"], ""]
        md += ["### %s, %d heads\n\n![%s h%d](%s)\n" % (r["variant"], r["heads"], r["variant"],
                                                           r["heads"], r["attention_map"]["file"])
               for r in maps]
    if note:
        md += ["Plots: %s" % note, ""]
    failed = [r for r in results["runs"] if r["status"] == "failed"]
    pending = [r for r in results["runs"] if r["status"] == "pending"]
    errs = b.get("errors") or []
    if failed or pending or errs:
        md += ["## Failures", ""]
        md += ["- run %s: %s" % (r["name"], r["error"]) for r in failed]
        md += ["- run %s: not run (interrupted)" % r["name"] for r in pending]
        md += ["- speed: %s" % e for e in errs] + [""]
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md))
    text = ["", text_table(head, rows)] if rows else []
    if brows:
        text += ["", "training step against PyTorch (ratio = tgraph / PyTorch):",
                 text_table(bh[:9], [r[:9] for r in brows])]
    if vs:
        text += [""] + vs
    if note:
        text += ["", "plots: " + note]
    text += ["", "written: %s/{results.json, summary.md, curves.csv%s}" % (
        out, "".join(", " + f for f in files))]
    return "\n".join(text)
