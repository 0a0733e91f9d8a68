#!/usr/bin/python3
"""Training-step time against sequence length and head count, every attention kind, with
PyTorch's own nn.Transformer alongside (docs/log/2026-12-01.md, "Step time against sequence
length and heads").

For each sequence length n (source = target = n positions) and head count h it times one
training step (forward, label-smoothed cross-entropy, backward, Adam; dropout 0.1) of
benchmarks/micro/bench_step for every tgraph attention kind asked for, and of
benchmarks/peer/nn_transformer_step.py (PyTorch has only multi-head attention: it is the peer
of `mha` alone; the other kinds have no PyTorch counterpart). The batch holds a fixed number
of tokens: B = --tokens / n sentences of n positions, so every cell does the same projection
and feed-forward work and differs in the attention's n^2 part and in the head split.

Within a cell the programs run one after the other (tgraph kinds, then PyTorch; the order is
reversed every other round), so that both see the same machine load; the 1-minute load
average is recorded with every row. tgraph runs with no environment variable of its own
(TG_* and OMP_* are removed from its environment); PyTorch's script sets its best settings
itself (threads = --threads, OMP_WAIT_POLICY=PASSIVE).

Resuming: rows are appended to --csv as they are measured, and a (n, h, kind, impl, round)
already in the file (measured or skipped) is not run again, so a long grid can be run over
several sittings with the same command. Cells whose estimated attention memory exceeds
--max-attn-mib are skipped (said on stderr and written as status "skipped").

Estimated attention memory (a coarse bound, not what the planner allocates): 4 bytes x 4
tensors kept per attention (scores, probabilities, dropout output, their gradient) x 3L
attention layers (L encoder self, L decoder self, L cross) x B x h_eff x n x n, with h_eff = h,
or h^2 for interacting_pairwise (a score matrix per head pair).

Outputs: the CSV (one row per run), a PNG figure via gnuplot (--png; ms/step against n for
each kind at up to four head counts, and tgraph mha / PyTorch against n per head count), and
a Markdown table of medians over rounds on stdout (--table FILE writes it to a file too).

Example (the reduced grid of docs/log/2026-12-01.md):
  /usr/bin/python3 benchmarks/experiments/bench_seq_heads.py --seq 8,16,32,64,128 --heads 1,4,16,64 \\
      --kinds mha,interacting --rounds 2 --csv docs/results/seq-heads.csv \\
      --png docs/results/seq-heads.png
"""

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

KINDS = ("mha", "fixed_head", "talking_heads", "interacting", "interacting_pairwise")
SEQ = (8, 16, 32, 64, 128, 256, 512)
HEADS = (1, 2, 4, 8, 16, 32, 64)
FIELDS = ("n", "heads", "kind", "impl", "round", "batch", "d_model", "layers", "d_ff", "status",
          "ms_per_step", "peak_rss_mib", "est_attn_mib", "load1", "seconds", "time_utc")
HERE = os.path.dirname(os.path.abspath(__file__))


def int_list(text):
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers")
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': need positive integers")
    return vals


def kind_list(text):
    vals = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in vals if v not in KINDS]
    if bad or not vals:
        raise argparse.ArgumentTypeError(
            f"unknown kind '{bad[0] if bad else text}' (known: {', '.join(KINDS)})")
    return vals


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq", type=int_list, default=list(SEQ), help="sequence lengths n")
    p.add_argument("--heads", type=int_list, default=list(HEADS), help="head counts h")
    p.add_argument("--kinds", type=kind_list, default=list(KINDS), help="tgraph attention kinds")
    p.add_argument("--no-torch", action="store_true", help="tgraph only (no PyTorch peer)")
    p.add_argument("--steps", type=int, default=3, help="timed steps per run (median)")
    p.add_argument("--warmup-steps", type=int, default=1, help="untimed steps first")
    p.add_argument("--rounds", type=int, default=2, help="runs per program and cell")
    p.add_argument("--tokens", type=int, default=4096, help="tokens per batch: B = tokens / n")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=2, help="encoder and decoder layers each")
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=1000, help="source and target vocabulary")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--max-attn-mib", type=float, default=4096.0,
                   help="skip cells whose estimated attention memory exceeds this")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    p.add_argument("--build-dir", default="build")
    p.add_argument("--bench-step", help="default: BUILD_DIR/benchmarks/micro/bench_step")
    p.add_argument("--peer", default=os.path.join(HERE, "..", "peer", "nn_transformer_step.py"))
    p.add_argument("--python", default="/usr/bin/python3", help="the interpreter with torch")
    p.add_argument("--csv", default="seq-heads.csv")
    p.add_argument("--png", help="write the figure here (needs gnuplot)")
    p.add_argument("--table", help="write the Markdown table here too")
    p.add_argument("--plot-only", action="store_true", help="no runs: table and figure from --csv")
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    a = p.parse_args(argv)
    for name in ("steps", "rounds", "tokens", "d_model", "layers", "d_ff", "threads"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.warmup_steps < 0:
        p.error("--warmup-steps must be >= 0")
    for h in a.heads:
        if a.d_model % h:
            p.error(f"--heads {h}: d_model {a.d_model} is not a multiple of it")
    for n in a.seq:
        if a.tokens // n < 1:
            p.error(f"--seq {n}: longer than --tokens {a.tokens} (no sentence fits a batch)")
    a.bench_step = a.bench_step or os.path.join(a.build_dir, "benchmarks", "micro", "bench_step")
    return a


def est_attn_mib(a, kind, n, h):
    heff = h * h if kind == "interacting_pairwise" else h
    return 4.0 * 4 * 3 * a.layers * (a.tokens // n) * heff * n * n / 2**20


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def row_key(r):
    return (int(r["n"]), int(r["heads"]), r["kind"], r["impl"], int(r["round"]))


def append_row(path, row):
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)


def tgraph_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("TG_", "OMP_"))}


def command(a, impl, kind, n, h):
    shape = ["--d-model", a.d_model, "--heads", h, "--layers", a.layers, "--d-ff", a.d_ff,
             "--src-vocab", a.vocab, "--tgt-vocab", a.vocab, "--batch", a.tokens // n,
             "--src-len", n, "--tgt-len", n, "--threads", a.threads, "--steps", a.steps,
             "--warmup-steps", a.warmup_steps]
    shape = [str(v) for v in shape]
    if impl == "tgraph":
        return [a.bench_step, "--attention", kind] + shape, tgraph_env()
    return [a.python, a.peer] + shape, dict(os.environ)


def run_one(a, impl, kind, n, h, rnd):
    cmd, env = command(a, impl, kind, n, h)
    row = {"n": n, "heads": h, "kind": kind, "impl": impl, "round": rnd, "batch": a.tokens // n,
           "d_model": a.d_model, "layers": a.layers, "d_ff": a.d_ff, "ms_per_step": "",
           "peak_rss_mib": "", "est_attn_mib": f"{est_attn_mib(a, kind, n, h):.4g}",
           "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
        out = None
        for line in reversed(p.stdout.splitlines()):
            if line.startswith("{"):
                out = json.loads(line)
                break
        if p.returncode or out is None:
            raise RuntimeError(f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")
        row.update(status="ok", ms_per_step=f"{out['ms_per_step']:.1f}",
                   peak_rss_mib=f"{out['peak_rss_mib']:.0f}")
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        print(f"bench_seq_heads: {impl} {kind} n {n} h {h}: failed: {e}", file=sys.stderr)
        row["status"] = "failed"
    row["seconds"] = f"{time.monotonic() - t0:.1f}"
    row["load1"] = f"{os.getloadavg()[0]:.2f}"
    return row


def programs(a):
    progs = [("tgraph", k) for k in a.kinds]
    if not a.no_torch:
        progs.append(("pytorch", "mha"))
    return progs


def run_grid(a):
    if not a.dry_run:
        if not os.access(a.bench_step, os.X_OK) and any(i == "tgraph" for i, _ in programs(a)):
            sys.exit(f"bench_seq_heads: '{a.bench_step}' not found: build it first")
        if not a.no_torch and not os.access(a.python, os.X_OK):
            sys.exit(f"bench_seq_heads: '{a.python}' not found (or pass --no-torch)")
    done = {row_key(r) for r in read_rows(a.csv) if r["status"] in ("ok", "skipped")}
    todo = skipped = 0
    for rnd in range(1, a.rounds + 1):
        for n in a.seq:
            for h in a.heads:
                progs = programs(a)
                if rnd % 2 == 0:
                    progs.reverse()  # alternate who goes first
                for impl, kind in progs:
                    if (n, h, kind, impl, rnd) in done:
                        continue
                    est = est_attn_mib(a, kind, n, h)
                    if est > a.max_attn_mib:
                        skipped += 1
                        print(f"bench_seq_heads: skip {impl} {kind} n {n} h {h}: estimated "
                              f"attention memory {est:.4g} MiB > --max-attn-mib "
                              f"{a.max_attn_mib:.4g}", file=sys.stderr)
                        if not a.dry_run:
                            append_row(a.csv, {"n": n, "heads": h, "kind": kind, "impl": impl,
                                               "round": rnd, "batch": a.tokens // n,
                                               "d_model": a.d_model, "layers": a.layers,
                                               "d_ff": a.d_ff, "status": "skipped",
                                               "est_attn_mib": f"{est:.4g}",
                                               "time_utc": time.strftime(
                                                   "%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
                        continue
                    todo += 1
                    if a.dry_run:
                        print(" ".join(command(a, impl, kind, n, h)[0]))
                        continue
                    row = run_one(a, impl, kind, n, h, rnd)
                    append_row(a.csv, row)
                    print(f"round {rnd} n {n:3d} h {h:2d} {impl:7s} {kind:20s} "
                          f"{row['status']:6s} {row['ms_per_step']:>9s} ms/step  "
                          f"load {row['load1']}", flush=True)
    print(f"bench_seq_heads: {todo} runs {'planned' if a.dry_run else 'done'}, "
          f"{skipped} skipped (memory)", file=sys.stderr)


def medians(rows):
    """{(n, h, kind, impl): (median ms, [ms of each round], median load)} of the ok rows."""
    acc = {}
    for r in rows:
        if r["status"] == "ok":
            k = (int(r["n"]), int(r["heads"]), r["kind"], r["impl"])
            acc.setdefault(k, []).append((int(r["round"]), float(r["ms_per_step"]),
                                          float(r["load1"])))
    return {k: (statistics.median(v[1] for v in vs), [v[1] for v in sorted(vs)],
                statistics.median(v[2] for v in vs)) for k, vs in acc.items()}


def table(rows):
    med = medians(rows)
    skipped = {(int(r["n"]), int(r["heads"]), r["kind"], r["impl"]) for r in rows
               if r["status"] == "skipped"}
    kinds = [k for k in KINDS if any(key[2] == k and key[3] == "tgraph" for key in med)]
    torch = any(key[3] == "pytorch" for key in med)
    cells = sorted({(key[0], key[1]) for key in med} | {(s[0], s[1]) for s in skipped})
    head = ["n", "h", "B"] + [f"{k} ms" for k in kinds]
    if torch:
        head += ["PyTorch ms", "mha / PyTorch"]
    head.append("load")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    batch = {(int(r["n"]), int(r["heads"])): r["batch"] for r in rows}

    def cell(key):
        if key in med:
            return f"{med[key][0]:,.0f}"
        return "skipped" if key in skipped else "—"

    for n, h in cells:
        vals = [str(n), str(h), batch[(n, h)]]
        vals += [cell((n, h, k, "tgraph")) for k in kinds]
        loads = [v[2] for key, v in med.items() if key[:2] == (n, h)]
        if torch:
            pt, mh = med.get((n, h, "mha", "pytorch")), med.get((n, h, "mha", "tgraph"))
            vals += [cell((n, h, "mha", "pytorch")),
                     f"**{mh[0] / pt[0]:.2f}**" if pt and mh else "—"]
        vals.append(f"{statistics.median(loads):.1f}" if loads else "—")
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def plot(rows, path):
    gp = shutil.which("gnuplot")
    if not gp:
        print("bench_seq_heads: gnuplot not found: no figure (apt-get install gnuplot-nox)",
              file=sys.stderr)
        return False
    med = medians(rows)
    if not med:
        print("bench_seq_heads: no measured rows: no figure", file=sys.stderr)
        return False
    hs = sorted({k[1] for k in med})
    if len(hs) > 4:  # four panels at most: spread over the range
        hs = [hs[round(i * (len(hs) - 1) / 3)] for i in range(4)]
    series = [(impl, kind) for impl in ("tgraph", "pytorch") for kind in KINDS
              if any(k[2] == kind and k[3] == impl for k in med)]
    blocks, plots = [], []
    for i, h in enumerate(hs):
        cmds = []
        for lt, (impl, kind) in enumerate(series, 1):  # one line type per program in every panel
            pts = sorted((k[0], v[0]) for k, v in med.items()
                         if k[1] == h and k[2] == kind and k[3] == impl)
            if not pts:
                continue
            name = f"$d{i}_{impl}_{kind}"
            blocks.append(f"{name} << EOD\n" + "\n".join(f"{n} {ms}" for n, ms in pts) + "\nEOD")
            label = "PyTorch nn.Transformer" if impl == "pytorch" else f"tgraph {kind}"
            cmds.append(f"{name} using 1:2 with linespoints lt {lt} title '{label}' noenhanced")
        plots.append(f"set title 'h = {h}'\nplot " + ", \\\n  ".join(cmds))
    ratio = []
    for h in sorted({k[1] for k in med}):
        pts = sorted((n, med[(n, h, "mha", "tgraph")][0] / med[(n, h, "mha", "pytorch")][0])
                     for (n, hh, kind, impl) in med if hh == h and kind == "mha" and
                     impl == "tgraph" and (n, h, "mha", "pytorch") in med)
        if pts:
            blocks.append(f"$r{h} << EOD\n" + "\n".join(f"{n} {r:.4f}" for n, r in pts) + "\nEOD")
            ratio.append(f"$r{h} using 1:2 with linespoints title 'h = {h}'")
    panels = len(plots) + (1 if ratio else 0)
    cols = 3 if panels > 4 else 2 if panels > 1 else 1
    nrows = (panels + cols - 1) // cols
    script = "\n".join(blocks) + f"""
set terminal pngcairo size {520 * cols},{400 * nrows} font ',10'
set output '{path}'
set multiplot layout {nrows},{cols} title 'training step vs sequence length n (tokens per batch fixed)'
set logscale xy 2
set xlabel 'sequence length n'
set ylabel 'ms / step'
set key top left font ',8'
set grid
""" + "\n".join(plots)
    if ratio:
        script += """
set title 'tgraph mha / PyTorch nn.Transformer'
unset logscale y
set ylabel 'time ratio (< 1: tgraph faster)'
set yrange [0:*]
plot """ + ", \\\n  ".join(ratio) + ", 1 with lines dt 2 lc 'gray' notitle"
    script += "\nunset multiplot\n"
    p = subprocess.run([gp], input=script, capture_output=True, text=True)
    if p.returncode:
        print(f"bench_seq_heads: gnuplot failed: {p.stderr.strip()[-500:]}", file=sys.stderr)
        return False
    return True


def main(argv):
    a = parse_args(argv)
    if not a.plot_only:
        run_grid(a)
    if a.dry_run:
        return 0
    rows = read_rows(a.csv)
    if not rows:
        print(f"bench_seq_heads: no rows in '{a.csv}'", file=sys.stderr)
        return 1
    md = table(rows)
    print(md)
    if a.table:
        with open(a.table, "w") as f:
            f.write(md + "\n")
    if a.png and plot(rows, a.png):
        print(f"bench_seq_heads: figure written to {a.png}", file=sys.stderr)
    ok = {row_key(r) for r in rows if r["status"] == "ok"}
    return 1 if any(r["status"] == "failed" and row_key(r) not in ok for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
