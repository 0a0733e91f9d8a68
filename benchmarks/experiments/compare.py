#!/usr/bin/python3
"""tgraph's attention-variant comparison: train the Transformer with each attention kind on one
task under the same model size, head count, budget and seeds, decode the test split, score it,
and measure the cost of a training step against the PyTorch peer.

Called by ./run.sh (which installs packages and builds first); it can be run on its own once
build-release/ holds `tools/tg` and `benchmarks/micro/bench_step`. Standard library only.

Phases, each printed with the elapsed time and an ETA:
  1. data     prepare (cached) the corpus of --task: datasets/prep_g2p.py, prep_bible.py or
              gen_synthetic.py; print n̄ and the interacting-head bound h_max = floor(d / n̄)
  2. runs     for every heads × variant × seed: `tg train` (same budget), `tg translate` of the
              test split (greedy, or --beam K), `tg eval` (PER/WER, or BLEU/chrF for bible)
  3. speed    bench_step (tgraph) and benchmarks/peer/train_step.py (PyTorch) alternately,
              per variant, on the same batch shapes and threads; ratios of medians
  4. report   results.json, summary.md, curves/, plots (gnuplot), and a table on stdout

A failed run is reported with the end of its log and the others go on; the exit status is then
1 and results.json holds everything that did complete. Bad options or a missing corpus: exit 2.
"""

import argparse
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_queue as queue  # noqa: E402
import compare_report as report  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Debian's interpreter (with python3-torch for the peer) even when another python3 is first
# on PATH; the data scripts use only the standard library.
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
# The attention kinds are tg's (its table in include/tg/model.h, read from `tg train --help` by
# use_tg_kinds); this list only serves the error message of a run without a built tg.
VARIANTS = ["mha", "fixed_head", "talking_heads", "interacting", "interacting_pairwise"]
# Readings that are options of a kind: name -> (tg train --attention, extra tg train options).
# interacting_noproj: the authors' public Keras code builds W_O but never applies it.
READINGS = {"interacting_noproj": ("interacting", ["--no-out-proj"]),
            # ours, a diagnostic: interacting with its logits at mha's scale at initialisation
            "interacting_sqrth": ("interacting", ["--interacting-sqrt-h"])}
ALL_VARIANTS = VARIANTS + list(READINGS)
TASKS = {
    # name: (kind, quality metrics, primary metric, lower is better)
    "g2p": ("g2p", ["per", "wer"], "wer", True),
    "bible": ("bible", ["bleu", "chrf", "wer", "meteor", "rouge_l", "cider"], "bleu", False),
    "reverse": ("synthetic", ["per", "wer"], "wer", True),
    "copy": ("synthetic", ["per", "wer"], "wer", True),
    "sort": ("synthetic", ["per", "wer"], "wer", True),
}
# Model presets: d_model, default heads, layers (encoder = decoder), d_ff.
SIZES = {
    "tiny": dict(d_model=64, heads=4, layers=2, d_ff=256),
    "small": dict(d_model=128, heads=4, layers=2, d_ff=512),
    "g2p-small": dict(d_model=256, heads=4, layers=3, d_ff=1024),  # results.md §4
    "base": dict(d_model=512, heads=8, layers=6, d_ff=2048),       # Vaswani et al.; Li & Luo
}
DEFAULT_SIZE = {"g2p": "small", "bible": "small", "reverse": "tiny", "copy": "tiny",
                "sort": "tiny"}
# Defaults of options the user did not give, per task (the rest: TASK_DEFAULTS["*"]).
# bible: the small table of `./run.sh --task bible` in under 30 minutes on 2 cores — mha
# against interacting heads on both sides of h_max = floor(128 / 31.2) = 4, beam 4 (the paper's).
TASK_DEFAULTS = {
    "*": dict(budget="2m", beam=1, bench="auto", ranks="1"),
    "bible": dict(budget="4m", beam=4, bench="off", ranks="auto", heads="2,16",
                  max_tokens=4096),
}
G2P_DICT = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"


class UsageError(Exception):
    """A bad option or a missing input: reported in one line, exit status 2."""


# ---- options ----------------------------------------------------------------------------------

def parse_budget(text):
    """'2m', '90s', '1.5h', '20min' -> ('minutes', x); '500', '500steps' -> ('steps', n)."""
    t = text.strip().lower()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|steps?)?", t)
    if not m:
        raise UsageError("--budget '%s': expected steps (500, 500steps) or a time (90s, 2m, 1.5h)"
                         % text)
    x, unit = float(m.group(1)), m.group(2) or "steps"
    if unit.startswith("step"):
        if x != int(x) or x < 1:
            raise UsageError("--budget '%s': a step count must be a positive integer" % text)
        return ("steps", int(x))
    minutes = x / 60 if unit in ("s", "sec") else x * 60 if unit == "h" else x
    if minutes <= 0:
        raise UsageError("--budget '%s' must be positive" % text)
    return ("minutes", minutes)


def parse_list(text, what, allowed=None, conv=str):
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise UsageError("%s: empty list" % what)
    out = []
    for s in items:
        if allowed is not None and s not in allowed:
            raise UsageError("%s: unknown value '%s' (known: %s)" % (what, s, ", ".join(allowed)))
        try:
            v = conv(s)
        except ValueError:
            raise UsageError("%s: '%s' is not a valid value" % (what, s)) from None
        if v not in out:
            out.append(v)
    return out


def positive_int(s):
    v = int(s)
    if v < 1:
        raise ValueError(s)
    return v


def build_parser():
    p = argparse.ArgumentParser(
        prog="compare.py",
        description="Train the Transformer with each attention variant under the same budget "
                    "and compare quality and cost (the interacting-head paper's Table 3).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n"
               "  compare.py                                   # G2P, 5 variants, h 4, 2 min each\n"
               "  compare.py --heads 1,2,4,8,16,32 --seeds 3 --budget 20m --size g2p-small\n"
               "  compare.py --task reverse --budget 300 --variants mha,interacting\n")
    a = p.add_argument
    a("--task", default="g2p", help="g2p (CMUdict, default), bible (EN->ES, BPE), or a synthetic "
      "task: reverse, copy, sort")
    a("--variants", default=None, help="comma-separated attention kinds (default all five: "
      "%s; bible: mha,interacting); also interacting_noproj, the authors' code (interacting "
      "without output projection)" % ",".join(VARIANTS))
    a("--heads", default=None, help="comma-separated head counts, e.g. 1,2,4,8,16,32 (the "
      "paper's sweep); default: the size preset's")
    a("--seeds", default="1", help="number of seeds (1..N), reported as mean ± sd")
    a("--seeds-for", default="", help="more seeds for some variants, e.g. mha=3,interacting=3 "
      "(the others get --seeds)")
    a("--resume", action="store_true", help="continue the sweep in --out: keep its finished "
      "runs, resume unfinished training from its last checkpoint, run the rest (also the "
      "default when --out already holds results.json)")
    a("--ranks", default=None, help="MPI ranks per training run (auto: 2 where mpirun and an MPI "
      "build exist and there are 2+ cores; each rank gets threads/ranks threads; default 1, "
      "bible auto)")
    a("--save-interval", type=int, default=None, help="checkpoint every N steps, so an "
      "interrupted run resumes from there (default: budget/10 for step budgets)")
    a("--budget", default=None, help="training budget per run: steps (500) or time (90s, 2m, "
      "1.5h; default 2m, bible 4m)")
    a("--size", default=None, help="model preset: %s (default: small for g2p, g2p-small for "
      "bible, tiny for synthetic)" % ", ".join(SIZES))
    a("--backend", default="cpu", choices=["cpu", "cuda"], help="tg backend (default cpu)")
    a("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads (default: all cores)")
    a("--beam", type=int, default=None, help="beam size for test decoding; 1 = greedy "
      "(default; bible 4)")
    a("--max-tokens", type=int, default=None, help="tokens per training batch (padded source + "
      "target; default 2048 for budgets up to 10 min or 5000 steps, else 4096; bible 8192)")
    a("--schedule", default="noam", choices=["noam", "constant", "inverse_sqrt", "cosine"],
      help="learning-rate schedule of tg train (default noam)")
    a("--warmup", type=int, default=None, help="learning-rate warmup steps (default: from the "
      "budget, about 8%% of the expected steps, 150..4000)")
    a("--lr-factor", type=float, default=None, help="noam factor (default 0.35 when the warmup "
      "is under 1000 steps, else 1)")
    a("--lr", type=float, default=1e-3, help="peak learning rate of the other schedules "
      "(default 1e-3)")
    a("--dropout", type=float, default=0.1)
    a("--head-dim", type=int, default=None, help="fixed_head's per-head width d_p (default: the "
      "longest training sequence with </s>, rounded up to 8: Bhojanapalli et al.'s d_p = n)")
    a("--eval-interval", type=int, default=None, help="steps between dev evaluations (default: "
      "the end only for short budgets)")
    a("--test-limit", type=int, default=0, help="decode only the first N test lines (0 = all)")
    a("--bench", default=None, choices=["auto", "on", "off"], help="speed phase against the "
      "PyTorch peer (auto: when torch imports; default auto, bible off)")
    a("--bench-size", default="g2p-small", help="model preset of the speed phase (default "
      "g2p-small, docs/results.md §4)")
    a("--bench-heads", default="4", help="head counts of the speed phase (default 4)")
    a("--bench-batch", default="128x10x10", help="batch x source length x target length "
      "(default 128x10x10)")
    a("--bench-steps", type=int, default=5, help="timed steps per measurement (default 5)")
    a("--bench-rounds", type=int, default=2, help="alternating rounds per variant (default 2)")
    a("--build-dir", default=os.path.join(ROOT, "build-release"), help="where tools/tg and "
      "benchmarks/micro/bench_step are (default build-release)")
    a("--data-root", default=os.path.join(ROOT, "data"), help="prepared corpora (default data/)")
    a("--out", default=None, help="results directory (default results/<run-id>)")
    a("--g2p-dict", default=None, help="CMUdict file for --task g2p (default: pocketsphinx-en-us's, "
      "%s)" % G2P_DICT)
    a("--synthetic-train", type=int, default=20000, help="synthetic task: training pairs")
    a("--synthetic-test", type=int, default=1000, help="synthetic task: dev/test pairs")
    a("--synthetic-max-len", type=int, default=20, help="synthetic task: longest sequence")
    a("--no-plots", action="store_true", help="skip the gnuplot plots")
    a("--bench-only", action="store_true", help="only the speed phase (no training runs)")
    a("--report-only", action="store_true", help="only rescore, test significance and write the "
      "report of the runs --out already holds (no training, no speed phase)")
    a("--train-arg", action="append", default=[], help="extra argument passed to tg train "
      "(repeatable, e.g. --train-arg=--clip --train-arg=1)")
    return p


def use_tg_kinds(tg):
    """Take the attention kinds from this build's `tg train --attention` choices."""
    global VARIANTS, ALL_VARIANTS
    try:
        r = subprocess.run([tg, "train", "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return
    m = re.search(r"--attention (\S+)", r.stdout)
    if m:
        VARIANTS = m.group(1).split("|")
        ALL_VARIANTS = VARIANTS + list(READINGS)


def check_options(o):
    use_tg_kinds(os.path.join(o.build_dir, "tools", "tg"))
    if o.task not in TASKS:
        raise UsageError("--task: unknown task '%s' (known: %s)" % (o.task, ", ".join(TASKS)))
    o.variants = parse_list(o.variants or (",".join(VARIANTS) if o.task != "bible" else
                                           "mha,interacting"), "--variants", ALL_VARIANTS)
    for k, v in dict(TASK_DEFAULTS["*"], **TASK_DEFAULTS.get(o.task, {})).items():
        if getattr(o, k) is None:
            setattr(o, k, v)
    o.size = o.size or DEFAULT_SIZE[o.task]
    if o.size not in SIZES:
        raise UsageError("--size: unknown preset '%s' (known: %s)" % (o.size, ", ".join(SIZES)))
    if o.bench_size not in SIZES:
        raise UsageError("--bench-size: unknown preset '%s' (known: %s)"
                         % (o.bench_size, ", ".join(SIZES)))
    o.model = dict(SIZES[o.size])
    o.heads = parse_list(o.heads, "--heads", conv=positive_int) if o.heads else [o.model["heads"]]
    o.bench_heads = parse_list(o.bench_heads, "--bench-heads", conv=positive_int)
    try:
        o.nseeds = positive_int(o.seeds)
    except ValueError:
        raise UsageError("--seeds '%s': expected a positive integer" % o.seeds) from None
    text, o.seeds_for = o.seeds_for, {}
    for item in [x.strip() for x in text.split(",") if x.strip()]:
        v, _, n = item.partition("=")
        if v not in ALL_VARIANTS:
            raise UsageError("--seeds-for: unknown variant '%s'" % v)
        try:
            o.seeds_for[v] = positive_int(n)
        except ValueError:
            raise UsageError("--seeds-for '%s': expected VARIANT=N" % item) from None
    o.budget_kind, o.budget_value = parse_budget(o.budget)
    for name in ("threads", "beam", "bench_steps", "bench_rounds"):
        if getattr(o, name) < 1:
            raise UsageError("--%s must be at least 1" % name.replace("_", "-"))
    m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", o.bench_batch)
    if not m or min(int(x) for x in m.groups()) < 2:
        raise UsageError("--bench-batch '%s': expected BxSxT, e.g. 128x10x10" % o.bench_batch)
    o.bench_shape = tuple(int(x) for x in m.groups())
    if o.bench_only and o.bench == "off":
        raise UsageError("--bench-only with --bench off leaves nothing to do")
    for h in o.heads:
        for v in o.variants:
            if v != "fixed_head" and o.model["d_model"] % h:
                raise UsageError("--heads %d: d_model %d of --size %s is not a multiple of it "
                                 "(%s)" % (h, o.model["d_model"], o.size, v))
    if o.max_tokens is None:  # short budgets learn more from more, smaller steps
        short = o.budget_value <= (10 if o.budget_kind == "minutes" else 5000)
        o.max_tokens = 8192 if o.task == "bible" else 2048 if short else 4096
    o.tg = os.path.join(o.build_dir, "tools", "tg")
    o.mpirun = shutil.which("mpirun")
    if o.ranks == "auto":
        o.ranks = 2 if (o.mpirun and o.threads >= 2 and o.backend == "cpu"
                        and tg_has_mpi(o.tg)) else 1
    else:
        try:
            o.ranks = positive_int(o.ranks)
        except ValueError:
            raise UsageError("--ranks '%s': expected auto or a positive integer" % o.ranks) from None
    if o.ranks > 1 and not o.mpirun:
        raise UsageError("--ranks %d needs mpirun (Debian: openmpi-bin)" % o.ranks)
    o.bench_step = os.path.join(o.build_dir, "benchmarks", "micro", "bench_step")
    if not os.access(o.tg, os.X_OK):
        raise UsageError("'%s' not found: build it first (./run.sh does: ninja -C build-release "
                         "tools/tg benchmarks/micro/bench_step), or give --build-dir" % o.tg)
    if o.backend != "cpu":
        r = subprocess.run([o.tg, "train", "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if "--backend" not in r.stdout:
            raise UsageError("--backend %s: this build's `tg train` has no --backend option (it "
                             "trains on the CPU backend only)" % o.backend)


def tg_has_mpi(tg):
    """Whether tools/tg was linked with MPI (a build without it refuses to run as ranks)."""
    try:
        r = subprocess.run(["ldd", tg], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, timeout=30)
        return "libmpi" in r.stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


# ---- progress ---------------------------------------------------------------------------------

T0 = time.monotonic()


def fmt_s(s):
    if s is None or not math.isfinite(s):
        return "?"
    s = int(round(s))
    return "%dh%02dm" % (s // 3600, s // 60 % 60) if s >= 3600 else "%dm%02ds" % (s // 60, s % 60)


def say(msg, eta=None):
    line = "[%s] %s" % (fmt_s(time.monotonic() - T0), msg)
    if eta is not None:
        line += "  (ETA %s)" % fmt_s(eta)
    print(line, flush=True)


def warn(msg):
    print("compare: warning: %s" % msg, file=sys.stderr, flush=True)


# ---- data -------------------------------------------------------------------------------------

def prepare_data(o):
    """Run the (cached) preparation of o.task; return the data directory."""
    kind = TASKS[o.task][0]
    if kind == "g2p":
        out = os.path.join(o.data_root, "g2p")
        cmd = [PY, os.path.join(ROOT, "datasets/prep_g2p.py"), out]
        if o.g2p_dict:
            cmd[2:2] = ["-i", o.g2p_dict]
    elif kind == "bible":
        out = os.path.join(o.data_root, "bible")
        cmd = [PY, os.path.join(ROOT, "datasets/prep_bible.py"), out]
    else:
        base = os.path.join(o.data_root, "synthetic-%d-%d-%d" % (o.synthetic_train,
                                                                 o.synthetic_test,
                                                                 o.synthetic_max_len))
        out = os.path.join(base, o.task)
        cmd = [PY, os.path.join(ROOT, "datasets/gen_synthetic.py"), "-q", "--tasks", o.task,
               "--train", str(o.synthetic_train), "--dev", str(o.synthetic_test),
               "--test", str(o.synthetic_test), "--max-len", str(o.synthetic_max_len), base]
        if os.path.exists(os.path.join(out, "test.tgt")):
            return out  # deterministic in its options, which name the directory
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
        raise UsageError("data preparation for --task %s failed (%s exit %d): %s"
                         % (o.task, os.path.basename(cmd[1]), r.returncode,
                            msg[-1] if msg else "no message"))
    return out


def corpus_stats(data):
    """n̄ = mean tokens per training sequence, both sides pooled, without </s> (docs/model.md §2.4)."""
    tokens = seqs = longest = 0
    for side in ("src", "tgt"):
        with open(os.path.join(data, "train." + side), encoding="utf-8") as f:
            for line in f:
                n = len(line.split())
                tokens += n
                seqs += 1
                longest = max(longest, n)
    lines = {}
    for split in ("train", "dev", "test"):
        with open(os.path.join(data, split + ".src"), encoding="utf-8") as f:
            lines[split] = sum(1 for _ in f)
    return {"mean_len": tokens / max(seqs, 1), "max_len": longest, "pairs": lines}


# ---- running the tools ------------------------------------------------------------------------

def run_logged(cmd, log_path, env=None, on_line=None, timeout=None):
    """Run cmd with stdout+stderr into log_path (and each line to on_line). Returns
    (exit status, peak RSS in bytes, wall seconds); exit status -N for a signal."""
    t0 = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ %s\n" % " ".join(cmd))
        log.flush()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                             text=True, errors="replace", bufsize=1)
        killed = False
        try:
            for line in p.stdout:
                log.write(line)
                if on_line:
                    on_line(line.rstrip("\r\n"))
                if timeout and time.monotonic() - t0 > timeout and not killed:
                    p.send_signal(signal.SIGTERM)  # tg saves and stops on SIGTERM
                    killed = True
        except BaseException:
            p.kill()
            raise
        finally:
            p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if killed:
            log.write("compare: stopped after %s (time limit)\n" % fmt_s(timeout))
    return p.returncode, ru.ru_maxrss * 1024, time.monotonic() - t0


def log_tail(path, n=12):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [x.rstrip("\n") for x in f if x.strip()]
    except OSError:
        return ""
    return "\n".join("    " + x for x in lines[-n:])


def tool_env(o):
    """Environment of tg and bench_step: the caller's, with nothing added — users run tgraph
    without tuning variables (its thread team needs none; every command gets --threads)."""
    return dict(os.environ)


def peer_env(o):
    """Environment of the PyTorch peer: its best settings on a shared machine, passive OpenMP
    waiting unless the caller chose a policy (spinning OpenMP threads wait for descheduled
    members: docs/log/experiments.md §0)."""
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def launcher(o):
    """mpirun in front of tg train when the runs train on several ranks (one host)."""
    if o.ranks <= 1:
        return []
    return [o.mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
            "-np", str(o.ranks)]


def budget_args(o):
    if o.budget_kind == "steps":
        return ["--steps", str(o.budget_value)]
    return ["--minutes", "%g" % o.budget_value]


def train_command(o, data, run, d, resume=False):
    """tg train for one run; with resume, continue the run saved in d (its options are stored
    there; the budget is given again, so a sweep may also extend it)."""
    threads = str(max(1, o.threads // o.ranks))
    if resume:
        return launcher(o) + [o.tg, "train", "--out", d, "--resume", "--threads", threads,
                              "--progress", "lines"] + budget_args(o)
    m = o.model
    kind, extra = READINGS.get(run["variant"], (run["variant"], []))
    cmd = launcher(o) + [o.tg, "train",
           "--train-src", os.path.join(data, "train.src"),
           "--train-tgt", os.path.join(data, "train.tgt"),
           "--dev-src", os.path.join(data, "dev.src"),
           "--dev-tgt", os.path.join(data, "dev.tgt"),
           "--out", d, "--overwrite",
           "--d-model", str(m["d_model"]), "--heads", str(run["heads"]),
           "--enc-layers", str(m["layers"]), "--dec-layers", str(m["layers"]),
           "--d-ff", str(m["d_ff"]),
           "--attention", kind,
           "--dropout", str(o.dropout),
           "--max-tokens", str(o.max_tokens // pairwise_accum(run)),
           "--seed", str(run["seed"]),
           "--threads", threads,
           "--schedule", o.schedule,
           "--warmup", str(o.warmup_steps),
           "--eval-interval", str(o.eval_interval),
           "--log-interval", str(o.log_interval),
           "--progress", "lines"] + extra
    if o.save_interval:
        cmd += ["--save-interval", str(o.save_interval)]
    if o.backend != "cpu":
        cmd += ["--backend", o.backend]
    if o.schedule == "noam":
        cmd += ["--factor", str(o.lr_factor)]
    else:
        cmd += ["--lr", str(o.lr)]
    if run["variant"] == "fixed_head":
        cmd += ["--head-dim", str(o.fixed_head_dim)]
    if o.task == "bible":
        cmd += ["--joint"]  # one BPE vocabulary: shared embeddings (docs/model.md §1)
    if pairwise_accum(run) > 1:  # the same batch in slices (memory grows with h^2)
        cmd += ["--accum", str(pairwise_accum(run))]
    return cmd + budget_args(o) + o.train_arg


def pairwise_accum(run):
    """interacting_pairwise keeps B*h^2*n*m attention probabilities per layer (~0.8 GB per
    attention of a 4096-token batch at h 32): above 8 heads the batch is cut into h/8 slices
    whose gradients are accumulated (the same optimizer step, a quarter of the memory at h 32)."""
    if run["variant"] == "interacting_pairwise" and run["heads"] > 8:
        return run["heads"] // 8
    return 1


def read_metrics(path):
    """Train and dev events of a metrics.jsonl (lines that do not parse are skipped)."""
    train, dev, end = [], [], None
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                ev = e.get("event")
                if ev == "train":
                    train.append(e)
                elif ev == "dev":
                    dev.append(e)
                elif ev in ("end", "interrupted"):
                    end = e
    except OSError:
        pass
    return train, dev, end


def step_costs(train):
    """(target tokens per second, ms per optimizer step) of training: medians over the logged
    windows (differences of the cumulative step, target-token and elapsed-time fields), so the
    windows holding a dev evaluation or the start-up do not count. Older metrics files count
    source + target tokens ("tokens"); their rate is returned as it is."""
    key = "tgt_tokens" if train and "tgt_tokens" in train[0] else "tokens"
    rates, ms = [], []
    prev = (0, 0, 0.0)
    for e in train:
        step, tokens, el = e.get("step"), e.get(key), e.get("elapsed_s")
        if step is None or tokens is None or el is None:
            continue
        ds, dn, dt = step - prev[0], tokens - prev[1], el - prev[2]
        if ds > 0 and dt > 0:
            rates.append(dn / dt)
            ms.append(1e3 * dt / ds)
        prev = (step, tokens, el)
    if len(rates) > 2:  # the first window holds start-up costs
        rates, ms = rates[1:], ms[1:]
    if not rates:
        return None, None
    return statistics.median(rates), statistics.median(ms)


def safetensors_params(path):
    """Number of parameters in a safetensors checkpoint (its JSON header's shapes)."""
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")


# tg eval's metric names -> results.json keys
EVAL_NAMES = {"BLEU": "bleu", "chrF2": "chrf", "WER": "wer", "PER": "per", "METEOR": "meteor",
              "ROUGE-L": "rouge_l", "CIDEr-D": "cider"}


def parse_eval(text):
    """The scores printed by `tg eval`, one line per metric: "NAME|signature = score (...)"."""
    out = {}
    for m in re.finditer(r"^([A-Za-z0-9-]+)\|(\S*) = (-?\d+(?:\.\d+)?)", text, re.M):
        key = EVAL_NAMES.get(m.group(1))
        if key:
            out[key] = float(m.group(3))
            out[key + "_signature"] = m.group(1) + "|" + m.group(2)
    return out


def eval_features(tg, wanted):
    """(the metrics of wanted that this build's `tg eval` knows, whether it has --paired-bs):
    older builds lack some."""
    r = subprocess.run([tg, "eval", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return [m for m in wanted if m in r.stdout], "--paired-bs" in r.stdout


def detokenize(hyp, into):
    """Bible hypotheses (BPE pieces) as text, what spm_decode does: the pieces of each line
    joined and ▁ turned into spaces; written to the file `into`, which is returned."""
    with open(hyp, encoding="utf-8") as f, open(into, "w", encoding="utf-8") as g:
        for line in f:
            g.write("".join(line.split()).replace("\u2581", " ").strip() + "\n")
    return into


def eval_inputs(o, data, hyp, d):
    """(hypotheses, references, extra tg eval options) for the test split. Bible: detokenised
    first (join the BPE pieces and turn ▁ into spaces, what spm_decode does) and scored with
    13a tokenisation; G2P: several references per word (" ||| "); synthetic: one, WER = wrong
    sequences (--g2p)."""
    kind = TASKS[o.task][0]
    n = o.test_lines
    if kind == "bible":
        detok = detokenize(hyp, os.path.join(d, "hyp.txt"))
        ref = limited(os.path.join(data, "test.ref.txt"), n, os.path.join(d, "ref.txt"))
        return detok, ref, ["--tokenize", "13a"]
    refs = os.path.join(data, "test.refs" if kind == "g2p" else "test.tgt")
    return hyp, limited(refs, n, os.path.join(d, "test.refs")), ["--g2p"]


def score(o, data, hyp, d):
    """Scores of one run's test hypotheses: ({metric: score, metric_signature: ...}, status)."""
    h, ref, extra = eval_inputs(o, data, hyp, d)
    cmd = [o.tg, "eval", "--metric", ",".join(o.metrics), "--hyp", h, "--ref", ref] + extra
    rc, _, _ = run_logged(cmd, os.path.join(d, "eval.log"), env=tool_env(o))
    with open(os.path.join(d, "eval.log"), encoding="utf-8", errors="replace") as f:
        return parse_eval(f.read().split("\n", 1)[-1]), rc


def limited(path, n, copy_path):
    """path itself, or its first n lines written to copy_path when --test-limit is set."""
    if not n:
        return path
    with open(path, encoding="utf-8") as f, open(copy_path, "w", encoding="utf-8") as g:
        for i, line in enumerate(f):
            if i >= n:
                break
            g.write(line)
    return copy_path


class Progress:
    """Condensed live progress of one training run: the trainer's step lines at most every
    20 s, dev lines and errors at once."""

    def __init__(self, label):
        self.label, self.last = label, 0.0

    def __call__(self, line):
        now = time.monotonic()
        low = line.lower()
        if line.startswith("dev ") or "error" in low or "warning" in low:
            say("  %s: %s" % (self.label, line.strip()))
        elif line.startswith("step ") and now - self.last >= 20:
            self.last = now
            say("  %s: %s" % (self.label, line.strip()))


def failed(run, label, error, log):
    run["status"] = "failed"
    run["error"] = error
    say("  %s: FAILED: %s\n%s" % (label, error, log_tail(log)))
    return run


def run_one(o, data, run, out):
    """Train, decode and score one (variant, heads, seed); fills run in place. Each stage is
    skipped when an earlier sitting finished it: training that ended is not repeated, training
    that was interrupted resumes from its last checkpoint, complete hypotheses are not decoded
    again (scoring always runs: it is cheap and picks up new metrics)."""
    label = "%s h%d seed %d" % (run["variant"], run["heads"], run["seed"])
    d = os.path.join(out, "runs", run["name"])
    os.makedirs(d, exist_ok=True)
    run["dir"] = os.path.relpath(d, out)
    run["status"] = "running"
    t_run = time.monotonic()
    state = queue.training_state(d, o.budget_value if o.budget_kind == "steps" else None)
    if state != "done":
        resume = state == "resumable"
        if resume:
            say("  %s: resuming its training from the last checkpoint" % label)
        limit = o.budget_value * 60 * 1.5 + 600 if o.budget_kind == "minutes" else None
        log = os.path.join(d, "train.log")
        if resume and os.path.exists(log):  # keep the first sitting's log
            os.replace(log, os.path.join(d, "train-%d.log" % int(time.time())))
        rc, peak, wall = run_logged(train_command(o, data, run, d, resume), log,
                                    env=tool_env(o), on_line=Progress(label), timeout=limit)
        # where and with what this run trained: a sweep's sittings may differ in both
        run["trained"] = {"date": time.strftime("%Y-%m-%d"), "cpu": o.host.get("cpu"),
                          "source": o.source}
        run["train_wall_s"] = round(wall, 2) + (run.get("train_wall_s") or 0 if resume else 0)
        run["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
        run["peak_bytes"] = max(peak, run.get("peak_bytes") or 0)
        run["ranks"] = o.ranks
        if rc != 0 or not os.path.exists(os.path.join(d, "model.safetensors")):
            why = "exit status %d" % rc if rc != 0 else "no model.safetensors written"
            return failed(run, label, "tg train failed (%s); see %s/train.log" % (why, run["dir"]),
                          log)
        o.timings["train_over"].append(wall - (o.budget_value * 60 if o.budget_kind == "minutes"
                                               else 0))
    train, dev, end = read_metrics(os.path.join(d, "metrics.jsonl"))
    model = os.path.join(d, "model.safetensors")
    run["params"] = safetensors_params(model)
    run["steps"] = (end or (train[-1] if train else {})).get("step")
    run["epochs"] = round(train[-1]["step"] and train[-1]["epoch"] + train[-1].get(
        "epoch_progress", 0), 3) if train else None
    run["train_s"] = (end or (train[-1] if train else {})).get("elapsed_s")
    run["tokens_per_s"], run["ms_per_step"] = step_costs(train)
    if dev:
        run["dev_loss"] = dev[-1].get("nll")
        run["dev_loss_smoothed"] = dev[-1].get("loss")
    run["curve"] = {"train": [(e["step"], e.get("elapsed_s"), e.get("loss"), e.get("nll"))
                              for e in train],
                    "dev": [(e["step"], e.get("elapsed_s"), e.get("loss"), e.get("nll"))
                            for e in dev]}
    if run["steps"] and run.get("train_wall_s"):
        o.timings["per_step"].append(run["train_wall_s"] / run["steps"])

    src = limited(os.path.join(data, "test.src"), o.test_lines, os.path.join(d, "test.src"))
    hyp = os.path.join(d, "test.hyp")
    if queue.count_lines(hyp) != queue.count_lines(src) or run.get("decoded_beam") != o.beam:
        tmp = hyp + ".part"  # complete hypotheses only under the final name
        cmd = [o.tg, "translate", "--model", model, "--beam", str(o.beam), "--input", src,
               "--output", tmp, "--threads", str(o.threads)]
        if o.backend != "cpu":
            cmd += ["--backend", o.backend]
        rc, _, wall = run_logged(cmd, os.path.join(d, "translate.log"), env=tool_env(o))
        run["decode_s"] = round(wall, 2)
        o.timings["decode"].append(wall)
        if rc != 0:
            return failed(run, label, "tg translate failed (exit status %d); see %s/translate.log"
                          % (rc, run["dir"]), os.path.join(d, "translate.log"))
        os.replace(tmp, hyp)
        run["decoded_beam"] = o.beam
    scores, rc = score(o, data, hyp, d)
    missing = [k for k in o.metrics if k not in scores]
    if rc != 0 or missing:
        return failed(run, label, "tg eval failed (exit status %d%s); see %s/eval.log" % (
            rc, ", no " + ",".join(missing) if missing else "", run["dir"]),
            os.path.join(d, "eval.log"))
    run.update({k: scores[k] for k in o.metrics})
    run["signatures"] = [scores[k + "_signature"] for k in o.metrics if k + "_signature" in scores]
    if run["seed"] == 1 and "attention_map" not in run:
        attention_map(o, data, run, d, model)
    run["status"] = "ok"
    run["tg_version"] = o.tg_version
    run["wall_s"] = round((run.get("wall_s") or 0) + time.monotonic() - t_run, 1)
    return run


def attention_map(o, data, run, d, model):
    """`tg attention` on the first test sentence: the heat maps of every head of the last
    decoder layer's cross-attention (where the variants differ most visibly), kept as
    runs/NAME/attention.png; the other sub-layers' maps are not kept. Optional: a build without
    the command or without gnuplot leaves the run without a map."""
    with open(os.path.join(data, "test.src"), encoding="utf-8") as f:
        src = f.readline().strip()
    tmp = os.path.join(d, "attention")
    shutil.rmtree(tmp, ignore_errors=True)
    rc, _, _ = run_logged([o.tg, "attention", "--model", model, "--src", src, "--out", tmp,
                           "--threads", str(o.threads)], os.path.join(d, "attention.log"),
                          env=tool_env(o))
    pngs = sorted(f for f in os.listdir(tmp) if f.endswith(".png")) if os.path.isdir(tmp) else []
    cross = [f for f in pngs if "cross_attn" in f]
    pick = (cross or pngs)[-1:] if rc == 0 else []
    if pick:
        os.replace(os.path.join(tmp, pick[0]), os.path.join(d, "attention.png"))
        run["attention_map"] = {"file": os.path.join(run["dir"], "attention.png"),
                                "sublayer": pick[0][:-4], "source": src}
    shutil.rmtree(tmp, ignore_errors=True)


def rescore(o, data, out, runs):
    """Score finished runs again where this build's tg eval offers metrics they lack (a sweep
    begun before a metric existed gets it in a later sitting, without decoding again)."""
    for r in runs:
        if r.get("status") != "ok" or all(k in r for k in o.metrics):
            continue
        d = os.path.join(out, r["dir"])
        scores, rc = score(o, data, os.path.join(d, "test.hyp"), d)
        if rc == 0:
            r.update({k: scores[k] for k in o.metrics if k in scores})
            r["signatures"] = [scores[k + "_signature"] for k in o.metrics
                               if k + "_signature" in scores]
            say("  rescored %s: %s" % (r["name"], ", ".join("%s %.2f" % (k, scores[k])
                                                             for k in o.metrics if k in scores)))


def paired_bootstrap(o, data, out, runs):
    """sacreBLEU's paired bootstrap (tg eval --paired-bs, 1,000 resamples) of every run against
    mha at the same heads and seed (or mha's seed 1 when that seed is missing); stored in the
    run as paired_bs = {baseline, samples, metrics: {metric: {diff, p_value, ...}}}."""
    if TASKS[o.task][0] != "bible":
        return
    ok = {(r["variant"], r["heads"], r["seed"]): r for r in runs if r.get("status") == "ok"}
    metrics = [m for m in o.metrics if m != "per"]
    for (v, h, s), r in sorted(ok.items()):
        base = ok.get(("mha", h, s)) or ok.get(("mha", h, 1))
        if v == "mha" or not base:
            continue
        have = r.get("paired_bs") or {}
        if have.get("baseline") == base["name"] and all(m in have.get("metrics", {})
                                                        for m in metrics):
            continue
        d, bd = os.path.join(out, r["dir"]), os.path.join(out, base["dir"])
        h_sys, ref, extra = eval_inputs(o, data, os.path.join(d, "test.hyp"), d)
        h_base, _, _ = eval_inputs(o, data, os.path.join(bd, "test.hyp"), bd)
        cmd = [o.tg, "eval", "--metric", ",".join(metrics), "--hyp", h_sys, "--baseline", h_base,
               "--ref", ref, "--paired-bs", "--json"] + extra
        log = os.path.join(d, "paired_bs.log")
        rc, _, _ = run_logged(cmd, log, env=tool_env(o))
        try:
            with open(log, encoding="utf-8") as f:
                res = json.loads(f.read().split("\n", 1)[1])["paired_bs"]
        except (OSError, ValueError, KeyError, IndexError):
            warn("paired bootstrap of %s against %s failed (exit %d): see %s"
                 % (r["name"], base["name"], rc, os.path.relpath(log, out)))
            continue
        r["paired_bs"] = {"baseline": base["name"], "samples": res.get("samples"),
                          "seed": res.get("seed"), "metrics": res.get("metrics", {})}
        say("  paired bootstrap %s vs %s: %s" % (r["name"], base["name"], ", ".join(
            "%s %+.2f (p %.3f)" % (m, x["diff"], x["p_value"])
            for m, x in r["paired_bs"]["metrics"].items())))


# ---- the speed phase --------------------------------------------------------------------------

def torch_available():
    try:
        r = subprocess.run([PY, "-c", "import torch"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def bench_commands(o, variant, heads):
    m = SIZES[o.bench_size]
    b, s, t = o.bench_shape
    common = ["--d-model", str(m["d_model"]), "--heads", str(heads), "--layers", str(m["layers"]),
              "--d-ff", str(m["d_ff"]), "--attention", variant, "--src-vocab", "30",
              "--tgt-vocab", "45", "--batch", str(b), "--src-len", str(s), "--tgt-len", str(t),
              "--threads", str(o.threads), "--steps", str(o.bench_steps), "--warmup-steps", "2"]
    if variant == "fixed_head":
        common += ["--head-dim", str(o.fixed_head_dim)]
    return {"tgraph": [o.bench_step] + common,
            "pytorch": [PY, os.path.join(ROOT, "benchmarks/peer/train_step.py")] + common}


def run_bench(o, out, results, save):
    """tgraph and PyTorch alternately (the order flips every round), per variant and heads."""
    if o.bench == "off":
        results["bench"] = {"status": "skipped", "note": "--bench off"}
        return
    peer = torch_available()
    note = None if peer else "PyTorch (python3-torch) is not importable: peer skipped"
    if o.backend != "cpu":  # bench_step and the peer step on the CPU
        note = (note + "; " if note else "") + "the speed phase runs on the CPU, not on %s" % o.backend
    if note:
        warn(note)
    if not os.access(o.bench_step, os.X_OK):
        results["bench"] = {"status": "skipped", "note": "'%s' not built" % o.bench_step}
        warn(results["bench"]["note"])
        return
    impls = ["tgraph", "pytorch"] if peer else ["tgraph"]
    d = os.path.join(out, "bench")
    os.makedirs(d, exist_ok=True)
    samples, errors = {}, []
    total = len(o.bench_heads) * o.bench_rounds * len(o.variants) * len(impls)
    done = 0
    for heads in o.bench_heads:
        for rnd in range(o.bench_rounds):
            for vi, v in enumerate(o.variants):
                if v not in VARIANTS:
                    continue  # readings of a kind (interacting_noproj): not in bench_step
                order = impls if (rnd + vi) % 2 == 0 else impls[::-1]
                cmds = bench_commands(o, v, heads)
                for impl in order:
                    name = "%s-h%d-%s-r%d" % (v, heads, impl, rnd + 1)
                    t0 = time.monotonic()
                    rc, _, _ = run_logged(cmds[impl], os.path.join(d, name + ".log"),
                                          env=tool_env(o) if impl == "tgraph" else peer_env(o))
                    o.timings["bench"].append(time.monotonic() - t0)
                    done += 1
                    left = statistics.mean(o.timings["bench"]) * (total - done)
                    rec = None
                    if rc == 0:
                        with open(os.path.join(d, name + ".log"), encoding="utf-8") as f:
                            for line in f:
                                if line.startswith("{"):
                                    try:
                                        rec = json.loads(line)
                                    except ValueError:
                                        pass
                    if rec is None or "ms_per_step" not in rec:
                        errors.append("%s (exit %d): see bench/%s.log" % (name, rc, name))
                        say("  speed %s: FAILED\n%s" % (name, log_tail(os.path.join(d, name + ".log"))))
                        continue
                    rec["loadavg_1min"] = os.getloadavg()[0]
                    samples.setdefault((v, heads, impl), []).append(rec)
                    say("  speed %-22s %-8s round %d: %8.1f ms/step  peak %6.0f MiB"
                        % ("%s h%d" % (v, heads), impl, rnd + 1, rec["ms_per_step"],
                           rec["peak_rss_mib"]), eta=left + o.report_eta)
    rows = []
    for heads in o.bench_heads:
        for v in o.variants:
            row = {"variant": v, "heads": heads}
            for impl in impls:
                recs = samples.get((v, heads, impl), [])
                if recs:
                    row[impl] = {
                        "ms_per_step": statistics.median(r["ms_per_step"] for r in recs),
                        "ms_per_step_best": min(r["ms_per_step"] for r in recs),
                        "ms_per_step_rounds": [round(r["ms_per_step"], 2) for r in recs],
                        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in recs),
                        "peak_bytes": int(statistics.median(r["peak_rss_mib"] for r in recs)
                                          * 1048576),
                        "params": recs[0].get("params"),
                        "loadavg_1min": [round(r["loadavg_1min"], 2) for r in recs],
                    }
                    # where the host held the cores (bench_step: before and after the steps)
                    if any("core_rtt_ns" in r for r in recs):
                        row[impl]["core_rtt_ns"] = [r.get("core_rtt_ns") for r in recs]
            if "tgraph" in row and "pytorch" in row:
                row["ratio_ms"] = row["tgraph"]["ms_per_step"] / row["pytorch"]["ms_per_step"]
                row["ratio_peak"] = row["tgraph"]["peak_bytes"] / row["pytorch"]["peak_bytes"]
                # the best rounds: on a shared machine the least disturbed measurement of each
                row["ratio_ms_best"] = (row["tgraph"]["ms_per_step_best"]
                                        / row["pytorch"]["ms_per_step_best"])
            rows.append(row)
    m = SIZES[o.bench_size]
    results["bench"] = {
        "status": "ok" if not errors else "partial",
        "note": note,
        "model": dict(m, size=o.bench_size),
        "batch": {"sentences": o.bench_shape[0], "src_len": o.bench_shape[1],
                  "tgt_len": o.bench_shape[2]},
        "threads": o.threads, "steps": o.bench_steps, "rounds": o.bench_rounds,
        "rows": rows, "errors": errors,
    }
    save()


# ---- main -------------------------------------------------------------------------------------

def source_version():
    """The commit the tools were built from (with "+changes" for a dirty tree), or None."""
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        # docs/ holds the sweeps' own results, which change as they run
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":(exclude)docs"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def host_info(o):
    info = {"machine": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
            "kernel": platform.release()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo", encoding="utf-8") as f:
            info["memory_gib"] = round(int(f.readline().split()[1]) / 1048576, 1)
    except (OSError, ValueError, IndexError):
        pass
    if o.backend == "cuda" and shutil.which("nvidia-smi"):
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        info["gpu"] = r.stdout.strip()
    try:
        info["loadavg_start"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    return info


def defaults_from_budget(o):
    if o.budget_kind == "steps":
        expected = o.budget_value
    else:  # a rough step rate for the warmup only; the budget itself is wall time
        expected = o.budget_value * 60 * o.guess_steps_per_s
    if o.warmup is None:
        o.warmup_steps = int(min(4000, max(150, round(0.08 * expected, -1))))
    else:
        o.warmup_steps = o.warmup
    if o.lr_factor is None:
        # Short budgets get a short warmup, hence a high peak rate, and interacting heads (whose
        # logits sum h query heads, so start about sqrt(h) hotter) stall at factor 0.7: measured
        # on G2P, d 128, 550 steps, warmup 150, dev NLL 1.22 against 0.62 at 0.35; MHA and
        # talking heads also do better at 0.35 (0.52 against 0.60).
        o.lr_factor = 0.35 if o.warmup_steps < 1000 else 1.0
    o.log_interval = max(1, min(100, int(expected // 100)))
    if o.eval_interval is None:
        o.eval_interval = 0 if expected < 4000 else int(round(expected / 10, -2))
    if o.save_interval is None:  # what an interrupted run may lose
        o.save_interval = max(50, int(round(expected / 10, -1))) if expected >= 500 else 0


def main(argv=None):
    o = build_parser().parse_args(argv)
    try:
        check_options(o)
    except UsageError as e:
        print("compare: error: %s" % e, file=sys.stderr)
        return 2
    o.timings = {"train_over": [], "per_step": [], "decode": [], "bench": []}
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + o.task
    out = os.path.abspath(o.out or os.path.join(ROOT, "results", run_id))
    os.makedirs(out, exist_ok=True)
    say("results in %s" % out)

    say("phase 1/4: data (%s)" % o.task)
    try:
        data = prepare_data(o)
    except UsageError as e:
        print("compare: error: %s" % e, file=sys.stderr)
        return 2
    st = corpus_stats(data)
    d = o.model["d_model"]
    h_max = math.floor(d / st["mean_len"]) if st["mean_len"] > 0 else 0
    o.test_lines = min(o.test_limit, st["pairs"]["test"]) if o.test_limit else 0
    o.fixed_head_dim = o.head_dim or 8 * math.ceil((st["max_len"] + 1) / 8)
    # steps per second of a 2-core machine, only to place the warmup of a time budget
    o.guess_steps_per_s = {"tiny": 15, "small": 7, "g2p-small": 1.5, "base": 0.2}[o.size]
    if o.backend == "cuda":
        o.guess_steps_per_s *= 10
    defaults_from_budget(o)
    say("  %s: %d / %d / %d pairs (train/dev/test); n̄ = %.2f tokens, longest %d; d = %d: "
        "h_max = floor(d / n̄) = %d" % (data, st["pairs"]["train"], st["pairs"]["dev"],
                                       st["pairs"]["test"], st["mean_len"], st["max_len"], d, h_max))
    for h in o.heads:
        if h > h_max:
            warn("%d heads is above h_max = %d for d = %d (the interacting-head paper's bound)"
                 % (h, h_max, d))

    runs = [] if o.bench_only else plan_runs(o)
    o.metrics, o.paired_bs = eval_features(o.tg, TASKS[o.task][1])
    for m in TASKS[o.task][1]:
        if m not in o.metrics:
            warn("this build's tg eval has no %s: not scored" % m)
    o.host, o.source = host_info(o), source_version()
    o.tg_version = subprocess.run([o.tg, "--version"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True).stdout.strip()
    results = {
        "format": "tgraph-compare-1",
        "run_id": os.path.basename(out),
        "command": " ".join([os.path.relpath(sys.argv[0], ROOT) if argv is None else "compare.py"]
                            + (sys.argv[1:] if argv is None else list(argv))),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": o.host,
        "task": {"name": o.task, "data": data, **st, "h_max": h_max,
                 "metrics": o.metrics, "primary": TASKS[o.task][2],
                 "lower_is_better": TASKS[o.task][3], "test_lines": o.test_lines or st["pairs"]["test"]},
        "config": {"size": o.size, **o.model, "heads": o.heads, "variants": o.variants,
                   "seeds": o.nseeds, "seeds_for": o.seeds_for, "ranks": o.ranks,
                   "save_interval": o.save_interval, "budget": {"kind": o.budget_kind, "value": o.budget_value},
                   "backend": o.backend, "threads": o.threads, "beam": o.beam,
                   "max_tokens": o.max_tokens, "dropout": o.dropout, "schedule": o.schedule, "lr": o.lr,
                   "warmup": o.warmup_steps, "lr_factor": o.lr_factor,
                   "fixed_head_dim": o.fixed_head_dim, "eval_interval": o.eval_interval,
                   "train_args": o.train_arg,
                   "peer_omp_wait_policy": peer_env(o)["OMP_WAIT_POLICY"]},
        "units": {"per": "%", "wer": "%", "bleu": "0-100", "chrf": "0-100", "meteor": "0-100",
                  "rouge_l": "0-100", "cider": "CIDEr-D (x10 scale, as pycocoevalcap)",
                  "tokens_per_s": "target tokens (non-pad, </s> included) per second of training",
                  "ms_per_step": "median ms per optimizer step", "peak_bytes": "peak RSS of the "
                  "training process", "dev_loss": "dev cross-entropy per target token (nats, "
                  "no smoothing)"},
        "runs": runs,
    }

    previous = None if o.bench_only else queue.load_previous(out)
    if previous:
        try:
            carried = queue.merge(previous, results)
        except queue.QueueError as e:
            print("compare: error: %s" % e, file=sys.stderr)
            return 2
        say("continuing the sweep in %s: %d of %d runs already finished" % (out, carried,
                                                                          len(runs)))
    elif o.resume:
        warn("--resume: %s holds no results.json yet; starting the sweep" % out)

    def save():
        results["summary"] = report.summarise(results)
        results["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        tmp = os.path.join(out, ".results.json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        os.replace(tmp, os.path.join(out, "results.json"))

    nb = len(o.bench_heads) * o.bench_rounds * len(o.variants) * (2 if o.bench != "off" else 0)
    o.report_eta = 5

    def eta(left_runs, bench_done=0):
        measured = queue.estimate_left(runs, o)
        if measured is not None:
            return measured + (statistics.mean(o.timings["bench"]) if o.timings["bench"] else
                               (o.bench_steps + 2) * 1.2 + 4) * (nb - bench_done) + o.report_eta
        if o.budget_kind == "minutes":
            per = o.budget_value * 60 + (statistics.mean(o.timings["train_over"])
                                         if o.timings["train_over"] else 10)
        elif o.timings["per_step"]:
            per = statistics.mean(o.timings["per_step"]) * o.budget_value
        else:
            return None
        per += statistics.mean(o.timings["decode"]) if o.timings["decode"] else 20
        bench = (statistics.mean(o.timings["bench"]) if o.timings["bench"] else
                 (o.bench_steps + 2) * 1.2 + 4) * (nb - bench_done)
        return left_runs * per + bench + o.report_eta

    save()
    say("phase 2/4: %d training runs (%s, budget %s each, %d threads, backend %s)"
        % (len(runs), o.size, o.budget, o.threads, o.backend), eta=eta(len(runs)))
    interrupted = False
    try:
        for i, run in enumerate(runs):
            if run["status"] == "ok" or o.report_only:
                continue  # finished in an earlier sitting (or only the report is wanted)
            done = sum(r["status"] == "ok" for r in runs)
            say("run %d/%d: %s, %d heads, seed %d  [%d done, %d left]"
                % (i + 1, len(runs), run["variant"], run["heads"], run["seed"], done,
                   len(runs) - done), eta=eta(len(runs) - done))
            run_one(o, data, run, out)
            save()
            r = run
            if r["status"] == "ok":
                q = "  ".join("%s %.2f" % (k.upper(), r[k]) for k in o.metrics)
                left = sum(x["status"] != "ok" for x in runs)
                say("  done: %s  params %d  %s tok/s  %s ms/step  peak %.0f MiB  (%d steps, "
                    "decode %s)  [%d done, %d left]"
                    % (q, r["params"], fmt_num(r.get("tokens_per_s")),
                       fmt_num(r.get("ms_per_step")), (r.get("peak_bytes") or 0) / 1048576,
                       r.get("steps") or 0, fmt_s(r.get("decode_s")), len(runs) - left, left),
                    eta=eta(left))
        say("phase 3/4: speed against the PyTorch peer (%s, batch %s, %d threads)"
            % (o.bench_size, o.bench_batch, o.threads), eta=eta(0))
        if o.report_only:
            results.setdefault("bench", {"status": "skipped", "note": "--report-only"})
        else:
            run_bench(o, out, results, save)
    except KeyboardInterrupt:
        interrupted = True
        warn("interrupted: writing the partial results")

    say("phase 4/4: report")
    try:
        rescore(o, data, out, results["runs"])
        if any(m in o.metrics for m in ("bleu", "chrf")) and o.paired_bs:
            paired_bootstrap(o, data, out, results["runs"])
    except KeyboardInterrupt:
        interrupted = True
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results["wall_s"] = round(time.monotonic() - T0, 1)
    save()
    text = report.write_all(results, out, plots=not o.no_plots)
    save()
    print(text, flush=True)
    failed = [r for r in runs if r["status"] == "failed" or (r["status"] == "running" and not o.report_only)]
    for r in failed:
        print("compare: run %s failed: %s" % (r["name"], r["error"]), file=sys.stderr)
    bench_errors = (results.get("bench") or {}).get("errors") or []
    for e in bench_errors:
        print("compare: speed measurement failed: %s" % e, file=sys.stderr)
    say("done in %s: %s" % (fmt_s(time.monotonic() - T0), out))
    if interrupted:
        return 130
    return 1 if failed or bench_errors else 0


def plan_runs(o):
    """Every (variant, heads, seed) of the sweep, in the order that answers the question
    soonest: first mha and interacting (the comparison the seeds are for), one seed at every
    head count, then their further seeds; then the other variants; last the runs whose cost
    grows fastest with the heads (interacting_pairwise above 8 heads)."""
    runs = []
    for h in o.heads:
        for v in o.variants:
            if v == "fixed_head" and "mha" in o.variants and o.fixed_head_dim * h == o.model["d_model"]:
                say("  fixed_head at %d heads: d_p = %d = d/h is the same model as mha (and "
                    "the same run as mha seed 1): not trained again" % (h, o.fixed_head_dim))
                continue
            for s in range(1, o.seeds_for.get(v, o.nseeds) + 1):
                runs.append({"name": "%s-h%d-s%d" % (v, h, s), "variant": v, "heads": h,
                             "seed": s, "status": "pending"})

    def key(r):
        tier = 2 if pairwise_accum(r) > 1 else 0 if r["variant"] in ("mha", "interacting") else 1
        return (tier, r["seed"], o.heads.index(r["heads"]), ALL_VARIANTS.index(r["variant"]))
    return sorted(runs, key=key)


def fmt_num(x):
    return "?" if x is None else "%.0f" % x if x >= 100 else "%.1f" % x


if __name__ == "__main__":
    sys.exit(main())
