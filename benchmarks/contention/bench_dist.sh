#!/bin/sh
# Data-parallel training on one host: 1 process x 2 threads against 2 MPI processes x 1 thread
# and against 1 process of 2 replicas x 1 thread (tg train --replicas 2: the ranks' work in two
# threads of one process).
#
# Trains the same model on the same data for the same number of steps with the same global
# batch (--max-tokens 4096: the single process takes the whole batch, each rank or replica half
# of its sentences), alternating the three configurations --rounds times so that the noise of
# the machine falls on all alike. Prints the commands, the 1-minute load average before and after, each
# round's figures and a table of medians over the rounds:
#   ms/step     (elapsed_s, steps) between the first and the last train line of metrics.jsonl:
#               the first log window (start-up, first touches of memory) is warm-up and left out
#   tgt tok/s   target tokens per second over the same steps
#   allreduce   ms per step spent waiting for the gradient all-reduce (allreduce_ms, 2x1 and
#               1r2 only)
# and the ratios 2x1 / 1x2 and 1r2 / 1x2 of ms/step (< 1: faster than the threads splitting
# every op).
#
# Usage: benchmarks/contention/bench_dist.sh [--steps N] [--rounds R] [--tg PATH] [--data DIR]
#                                 [--log-interval N] [--mpirun-args "ARGS"] [--model "ARGS"] [--keep]
#   --steps N        optimizer steps per run (default 60)
#   --rounds R       times each configuration runs (default 2)
#   --tg PATH        the tg program (default: build/tools/tg of this source tree); it must be
#                    built with MPI
#   --data DIR       DIR/train.src and DIR/train.tgt (default: data/g2p made by ./run.sh if it
#                    exists, else the synthetic reverse task generated into a temporary folder)
#   --log-interval N metrics line every N steps (default 10, at most steps/2)
#   --mpirun-args A  extra mpirun arguments (default "--bind-to none": the single process is not
#                    bound either, so both leave placement to the kernel)
#   --model A        the model's tg train options instead of the `small` preset (e.g. g2p-small:
#                    "--d-model 256 --heads 4 --enc-layers 3 --dec-layers 3 --d-ff 1024")
#   --keep           keep the runs' folders (printed) instead of removing them
# Model: run.sh's `small` preset (d_model 128, 4 heads, 2+2 layers, d_ff 512) unless --model, Adam, noam
# schedule with warmup 400. Needs mpirun and python3 (standard library).
set -u

src=$(cd "$(dirname "$0")/../.." && pwd)
steps=60
rounds=2
tg=$src/build/tools/tg
data=
log_interval=10
mpirun_args="--bind-to none"
keep=false
model="--d-model 128 --heads 4 --enc-layers 2 --dec-layers 2 --d-ff 512"
usage() {
    sed -n '/^# Usage:/,/^# Model:/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case $1 in
    --steps) steps=${2:?--steps needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --tg) tg=${2:?--tg needs a value}; shift 2 ;;
    --data) data=${2:?--data needs a value}; shift 2 ;;
    --log-interval) log_interval=${2:?--log-interval needs a value}; shift 2 ;;
    --mpirun-args) mpirun_args=${2?--mpirun-args needs a value}; shift 2 ;;
    --model) model=${2:?--model needs a value}; shift 2 ;;
    --keep) keep=true; shift ;;
    -h | --help) usage ;;
    *) echo "bench_dist.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
for v in "$steps" "$rounds" "$log_interval"; do
    case $v in '' | *[!0-9]*) echo "bench_dist.sh: '$v' is not a positive integer" >&2; exit 2 ;; esac
done
if [ "$steps" -lt 2 ] || [ "$rounds" -lt 1 ] || [ "$log_interval" -lt 1 ]; then
    echo "bench_dist.sh: needs --steps >= 2, --rounds >= 1, --log-interval >= 1" >&2
    exit 2
fi
[ $((2 * log_interval)) -le "$steps" ] || log_interval=$((steps / 2))
[ -x "$tg" ] || { echo "bench_dist.sh: '$tg' not found: build it first (meson setup build && ninja -C build) or give --tg" >&2; exit 2; }
command -v mpirun >/dev/null 2>&1 || { echo "bench_dist.sh: mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "bench_dist.sh: python3 not found" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg_bench_dist.XXXXXX") || exit 1
if $keep; then trap 'echo "runs kept in $tmp"' EXIT; else trap 'rm -rf "$tmp"' EXIT; fi
trap 'exit 1' INT TERM

if [ -z "$data" ]; then
    if [ -s "$src/data/g2p/train.src" ]; then
        data=$src/data/g2p
    else
        echo "data/g2p not found (./run.sh makes it): the synthetic reverse task instead"
        python3 "$src/datasets/gen_synthetic.py" --tasks reverse --train 20000 --dev 10 --test 10 -q "$tmp" ||
            exit 1
        data=$tmp/reverse
    fi
fi
if [ ! -s "$data/train.src" ] || [ ! -s "$data/train.tgt" ]; then
    echo "bench_dist.sh: no $data/train.src or $data/train.tgt" >&2
    exit 2
fi

unset TG_NUM_THREADS # --threads decides; no other variable: tgraph runs as users run it
common="--train-src $data/train.src --train-tgt $data/train.tgt $model"
common="$common --max-tokens 4096 --optimizer adam --schedule noam --warmup 400"
common="$common --steps $steps --log-interval $log_interval --progress none --overwrite"
one_cmd="$tg train $common --threads 2"
two_cmd="mpirun --allow-run-as-root --oversubscribe $mpirun_args -np 2 $tg train $common --threads 1"
rep_cmd="$tg train $common --replicas 2"

load() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?"; }
# the round trip of a cache line between the first two CPUs, where bench_cores is built: the
# host may hold the cores near each other or far apart, and the 1x2 runs' speed follows
# (docs/log/2026-12-04.md)
cores=$(dirname "$tg")/../benchmarks/micro/bench_cores
rtt() { [ -x "$cores" ] && "$cores" | head -n 1 | sed -n 's/.*"round_trip_ns": \([0-9.]*\).*/, core round trip \1 ns/p'; }
echo "host: $(nproc) cores; data: $data; $steps steps, $rounds round(s)"
echo "1x2: $one_cmd --out DIR"
echo "2x1: $two_cmd --out DIR"
echo "1r2: $rep_cmd --out DIR"
echo "load average (1 min) before: $(load)"
r=1
while [ "$r" -le "$rounds" ]; do
    for c in 1x2 2x1 1r2; do
        out=$tmp/run$r-$c
        case $c in 1x2) cmd=$one_cmd ;; 2x1) cmd=$two_cmd ;; *) cmd=$rep_cmd ;; esac
        # shellcheck disable=SC2086
        if ! $cmd --out "$out" >"$out.log" 2>&1; then
            echo "bench_dist.sh: round $r, $c failed:" >&2
            tail -n 15 "$out.log" >&2
            exit 1
        fi
        echo "round $r $c done (load $(load)$(rtt))"
    done
    r=$((r + 1))
done
echo "load average (1 min) after: $(load)"

python3 - "$tmp" "$rounds" <<'EOF'
import json, os, statistics, sys

tmp, rounds = sys.argv[1], int(sys.argv[2])

def measure(d):
    """ms/step, target tokens/s and all-reduce ms/step over the train lines after the first."""
    tr = []
    with open(os.path.join(d, "metrics.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "train":
                tr.append(e)
    if len(tr) < 2:
        sys.exit("bench_dist.sh: %s has fewer than 2 train lines: use more --steps" % d)
    a, b = tr[0], tr[-1]
    steps, secs = b["step"] - a["step"], b["elapsed_s"] - a["elapsed_s"]
    # allreduce_ms is a mean over its log window: weight each window by its steps
    comm, prev = 0.0, a["step"]
    for e in tr[1:]:
        comm += e.get("allreduce_ms", 0.0) * (e["step"] - prev)
        prev = e["step"]
    return dict(ms=1e3 * secs / steps, tok=(b["tgt_tokens"] - a["tgt_tokens"]) / secs,
                comm=comm / steps if "allreduce_ms" in b else None, tokens=b["tgt_tokens"], last=b["step"])

res = {c: [measure(os.path.join(tmp, "run%d-%s" % (r, c))) for r in range(1, rounds + 1)]
       for c in ("1x2", "2x1", "1r2")}
print()
print("per round (ms/step):", "  ".join("%d: 1x2 %.1f, 2x1 %.1f, 1r2 %.1f" % (
    r + 1, res["1x2"][r]["ms"], res["2x1"][r]["ms"], res["1r2"][r]["ms"]) for r in range(rounds)))
same = all(x["tokens"] == res["1x2"][0]["tokens"] and x["last"] == res["1x2"][0]["last"]
           for c in res for x in res[c])
print("same batches in every run (target tokens up to step %d): %s" % (res["1x2"][0]["last"], "yes" if same else "NO"))
print()
print("%-26s %10s %12s %16s" % ("configuration", "ms/step", "tgt tok/s", "allreduce ms/step"))
med = {}
for c, name in (("1x2", "1 process x 2 threads"), ("2x1", "2 processes x 1 thread"),
                ("1r2", "1 process x 2 replicas")):
    ms = statistics.median(x["ms"] for x in res[c])
    tok = statistics.median(x["tok"] for x in res[c])
    comm = [x["comm"] for x in res[c] if x["comm"] is not None]
    med[c] = ms
    print("%-26s %10.1f %12.0f %16s" % (name, ms, tok, "%.2f" % statistics.median(comm) if comm else "-"))
print()
print("ratio 2x1 / 1x2 of ms/step: %.3f (< 1: the 2 processes are faster); medians over %d round%s, "
      "steps after the first log window" % (med["2x1"] / med["1x2"], rounds, "s" if rounds > 1 else ""))
print("ratio 1r2 / 1x2 of ms/step: %.3f (< 1: the 2 replicas are faster); 1r2 / 2x1: %.3f"
      % (med["1r2"] / med["1x2"], med["1r2"] / med["2x1"]))
EOF
