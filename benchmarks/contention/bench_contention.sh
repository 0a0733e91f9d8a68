#!/usr/bin/env bash
# bench_contention.sh: a training step beside other processes — tgraph (one or more builds) and
# PyTorch's nn.Transformer, each alone and beside busy processes, alternating, with ratios.
#
#   benchmarks/contention/bench_contention.sh [--build DIR]... [--isa LEVELS] [--no-torch] [--rounds N]
#                                  [--steps N] [--loads "none busy nice19"] [-- bench_step/peer options]
#
# --build DIR   a build directory holding benchmarks/micro/bench_step (repeatable: compare builds,
#               e.g. an old and a new one, and get each later build's time ÷ the first's at the
#               same --isa level, round by round; default: build)
# --isa LEVELS  comma-separated CPU instruction sets each build runs at, e.g. avx2,avx512 (the
#               TG_CPU_ISA cap, backends/cpu/isa.h: an AVX-512 host measured as an AVX2 one; the
#               program's name gets @LEVEL); default: none set, the CPU's own
# --no-torch    leave out PyTorch (benchmarks/peer/nn_transformer_step.py, its best settings)
# --rounds N    rounds (default 5); a round runs every contender under every load, in turn
# --steps N     timed steps per run (default 5, after 2 untimed; PyTorch: max(N/2, 2) after 1)
# --loads L     from: none (nothing else), busy (one `sh -c 'while :; do :; done'` at nice 0),
#               busy2, busy3 (two, three of them: more busy threads than cores), nice19 (one
#               at nice 19); default "none busy nice19"
# Options after -- go to both programs (default: g2p-small, 2 threads:
#   --d-model 256 --heads 4 --layers 3 --d-ff 1024 --src-vocab 30 --tgt-vocab 45 --batch 128
#   --src-len 10 --tgt-len 10 --threads 2).
#
# tgraph runs with no environment variable set (TG_*, OMP_* removed); PyTorch with its own
# fair settings (the peer script sets them). Each busy loop is started just before a run and
# ended by its PID after it. Prints per (program, load) the median ms per step of the rounds,
# its ratio to the program's time alone, and each tgraph build's ratio to PyTorch under the
# same load; the machine's load average is printed at the start and end (the machine is
# rarely idle: state it with the numbers).
set -euo pipefail
cd "$(dirname "$0")/../.."

builds=()
isas=("")
torch=1
rounds=5
steps=5
loads="none busy nice19"
model=(--d-model 256 --heads 4 --layers 3 --d-ff 1024 --src-vocab 30 --tgt-vocab 45 --batch 128
       --src-len 10 --tgt-len 10 --threads 2)
while [ $# -gt 0 ]; do
    case "$1" in
    --build) builds+=("$2"); shift ;;
    --isa) IFS=, read -r -a isas <<<"$2"; shift ;;
    --no-torch) torch=0 ;;
    --rounds) rounds="$2"; shift ;;
    --steps) steps="$2"; shift ;;
    --loads) loads="$2"; shift ;;
    --) shift; model=("$@"); break ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "bench_contention.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ ${#builds[@]} -gt 0 ] || builds=(build)
for b in "${builds[@]}"; do
    [ -x "$b/benchmarks/micro/bench_step" ] || { echo "bench_contention.sh: no $b/benchmarks/micro/bench_step (build it first)" >&2; exit 2; }
done
. benchmarks/contention/loads.sh
for l in $loads; do
    check_load "$l" || { echo "bench_contention.sh: unknown load '$l'" >&2; exit 2; }
done
if [ $torch = 1 ] && ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
    echo "bench_contention.sh: PyTorch is missing (tools/install_deps.sh run installs it; or --no-torch)" >&2
    exit 2
fi

tsteps=$(( steps / 2 > 2 ? steps / 2 : 2 ))
out=$(mktemp)
cleanup() { stop_load; rm -f "$out"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

ms() { sed -n 's/.*"ms_per_step": \([0-9.e+-]*\).*/\1/p' | head -1; }

echo "host: $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: ${model[*]}; $rounds rounds, $steps timed steps per tgraph run, $tsteps per PyTorch run"
for r in $(seq 1 "$rounds"); do
    for l in $loads; do
        for b in "${builds[@]}"; do
            for isa in "${isas[@]}"; do
                name=$b${isa:+@$isa}
                cap=(-u TG_CPU_ISA)
                [ -z "$isa" ] || cap=(TG_CPU_ISA="$isa")
                start_load "$l"
                v=$(env -u TG_NUM_THREADS -u OMP_NUM_THREADS -u OMP_WAIT_POLICY -u OMP_PROC_BIND \
                        -u GOMP_SPINCOUNT "${cap[@]}" "$b/benchmarks/micro/bench_step" "${model[@]}" \
                        --steps "$steps" --warmup-steps 2 | ms)
                stop_load
                echo "$name $l $v" >> "$out"
                echo "round $r: $name, load $l: $v ms"
            done
        done
        if [ $torch = 1 ]; then
            start_load "$l"
            v=$(/usr/bin/python3 benchmarks/peer/nn_transformer_step.py "${model[@]}" \
                    --steps "$tsteps" --warmup-steps 1 | ms)
            stop_load
            echo "pytorch $l $v" >> "$out"
            echo "round $r: pytorch nn.Transformer, load $l: $v ms"
        fi
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
awk -v loads="$loads" -v first="${builds[0]}" "$awk_median"'
    { v[$1, $2] = v[$1, $2] " " $3; if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
    END {
        nl = split(loads, L, " ")
        printf "%-28s %-8s %10s %12s %12s\n", "program", "load", "ms/step", "vs alone", "vs pytorch"
        for (i = 0; i < n; i++) for (j = 1; j <= nl; j++) {
            p = order[i]; l = L[j]
            if (!((p, l) in v)) continue
            m = median(v[p, l]); base = ((p, "none") in v) ? median(v[p, "none"]) : 0
            pt = (p != "pytorch" && ("pytorch", l) in v) ? median(v["pytorch", l]) : 0
            printf "%-28s %-8s %10.1f %12s %12s\n", p, l, m, base ? sprintf("%.2fx", m / base) : "-",
                   pt ? sprintf("%.2fx", m / pt) : "-"
        }
        # builds against the first at the same instruction set, round by round (each pair ran
        # in the same round under one load)
        for (i = 1; i < n; i++) for (j = 1; j <= nl; j++) {
            p = order[i]; l = L[j]; at = index(p, "@"); ref = first (at ? substr(p, at) : "")
            if (p == "pytorch" || p == ref || !((p, l) in v) || !((ref, l) in v)) continue
            k = split(v[p, l], x, " "); split(v[ref, l], y, " "); r = ""; below = 0
            for (q = 1; q <= k; q++) { r = r " " x[q] / y[q]; below += x[q] < y[q] }
            printf "%s / %s, load %s: median of the rounds'"'"' ratios %.3f, %d of %d rounds below 1\n",
                   p, ref, l, median(r), below, k
        }
    }' "$out"
