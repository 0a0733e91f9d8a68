#!/usr/bin/env bash
# bench_translate.sh: decoding speed — `tg translate` against PyTorch beam search with key/value
# caches (benchmarks/peer/translate.py) on the same checkpoint and sentences, each alone and
# beside busy processes, alternating, with ratios and how many translations agree.
#
#   benchmarks/contention/bench_translate.sh --model M [--input F] [--sentences N] [--beam K]
#                                 [--threads N] [--batch N] [--rounds N] [--loads "none busy"]
#                                 [--tg PATH] [--against PATH]
#
# --model M      an encoder-decoder checkpoint, e.g. a run's model.safetensors from
#                `./run.sh --task bible` (results/<run-id>/runs/<run>/)
# --input F      sources, one per line, tokens separated by spaces (default data/bible/test.src,
#                which `./run.sh --task bible` prepares)
# --sentences N  the first N lines only (default: all)
# --beam K       beam size, 1 = greedy (default 4); --batch N sentences together (default 16)
# --threads N    threads of both programs (default 2)
# --rounds N     rounds (default 3); a round runs both programs under every load, in turn
# --loads L      from none, busy, busy2, busy3, nice19 (benchmarks/contention/loads.sh); default "none busy"
# --tg PATH      the tg binary (default build-release/tools/tg, else build/tools/tg)
# --against PATH another tg binary (an earlier build, say) in PyTorch's place: run and timed as
#                tgraph is, so that the ratios compare two builds under the same loads
#
# tgraph runs with no environment variable set (TG_*, OMP_* removed) and is timed as a whole
# process (reading the checkpoint and the input included); PyTorch with its fair settings (the
# peer sets them) is timed by its own clock around the decoding alone (torch's import, the
# checkpoint and the input left out): both choices favour PyTorch. Prints every run, then per
# (program, load) the median seconds, sentences per second, the ratio to the program's time
# alone and tgraph ÷ PyTorch (or ÷ the --against build) under the same load; and how many of
# the two programs' lines are identical (they decode with the same rules: differences come
# from float rounding only).
set -euo pipefail
cd "$(dirname "$0")/../.."

model=""
input=data/bible/test.src
sentences=0
beam=4
threads=2
batch=16
rounds=3
loads="none busy"
tg=""
against=""
while [ $# -gt 0 ]; do
    case "$1" in
    --model) model="$2"; shift ;;
    --input) input="$2"; shift ;;
    --sentences) sentences="$2"; shift ;;
    --beam) beam="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --batch) batch="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --loads) loads="$2"; shift ;;
    --tg) tg="$2"; shift ;;
    --against) against="$2"; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "bench_translate.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
die() { echo "bench_translate.sh: $*" >&2; exit 2; }
[ -n "$model" ] || die "--model is required (see --help)"
[ -f "$model" ] || die "no checkpoint $model"
[ -f "$input" ] || die "no input $input (./run.sh --task bible prepares data/bible)"
if [ -z "$tg" ]; then
    for c in build-release/tools/tg build/tools/tg; do [ -x "$c" ] && { tg=$c; break; }; done
fi
{ [ -n "$tg" ] && [ -x "$tg" ]; } || die "no tg binary (build it first, or --tg PATH)"
. benchmarks/contention/loads.sh
for l in $loads; do check_load "$l" || die "unknown load '$l'"; done
if [ -n "$against" ]; then
    [ -x "$against" ] || die "no tg binary $against"
    peer=against
else
    /usr/bin/python3 -c "import torch" 2>/dev/null ||
        die "PyTorch is missing (tools/install_deps.sh run installs it)"
    peer=pytorch
fi

tmp=$(mktemp -d)
cleanup() { stop_load; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$sentences" -gt 0 ]; then head -n "$sentences" "$input" > "$tmp/src"; else cp "$input" "$tmp/src"; fi
n=$(wc -l < "$tmp/src")
opts=(--beam "$beam" --batch "$batch" --threads "$threads")

echo "host: $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $model; $n sentences of $input; beam $beam, batch $batch, $threads threads; $rounds rounds"
[ -z "$against" ] || echo "tgraph: $tg; against: $against"
# tg_run BINARY OUTPUT: one decoding by a tg binary under the current load, timed as a whole
# process; prints the seconds
tg_run() {
    local t0 t1
    t0=$(date +%s.%N)
    env -u TG_NUM_THREADS -u OMP_NUM_THREADS -u OMP_WAIT_POLICY -u OMP_PROC_BIND \
        -u GOMP_SPINCOUNT "$1" translate --model "$model" --input "$tmp/src" \
        --output "$2" "${opts[@]}"
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
for r in $(seq 1 "$rounds"); do
    for l in $loads; do
        start_load "$l"
        v=$(tg_run "$tg" "$tmp/tg.hyp")
        stop_load
        echo "tgraph $l $v" >> "$tmp/times"
        printf 'round %d: tgraph, load %s: %.2f s\n' "$r" "$l" "$v"
        start_load "$l"
        if [ -n "$against" ]; then
            v=$(tg_run "$against" "$tmp/peer.hyp")
        else
            v=$(/usr/bin/python3 benchmarks/peer/translate.py --model "$model" --input "$tmp/src" \
                    --output "$tmp/peer.hyp" "${opts[@]}" |
                sed -n 's/.*"decode_s": \([0-9.e+-]*\).*/\1/p')
        fi
        stop_load
        [ -n "$v" ] || die "the $peer peer printed no time"
        echo "$peer $l $v" >> "$tmp/times"
        printf 'round %d: %s, load %s: %.2f s\n' "$r" "$peer" "$l" "$v"
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
same=$(paste -d '\t' "$tmp/tg.hyp" "$tmp/peer.hyp" | awk -F '\t' '$1 == $2' | wc -l)
echo
awk -v loads="$loads" -v n="$n" -v peer="$peer" "$awk_median"'
    { v[$1, $2] = v[$1, $2] " " $3 }
    END {
        nl = split(loads, L, " ")
        printf "%-8s %-8s %10s %12s %10s %12s\n", "program", "load", "seconds", "sentences/s", "vs alone", "vs " peer
        for (i = 1; i <= 2; i++) for (j = 1; j <= nl; j++) {
            p = i == 1 ? "tgraph" : peer; l = L[j]
            m = median(v[p, l]); base = median(v[p, "none"])
            pt = p == "tgraph" ? median(v[peer, l]) : 0
            printf "%-8s %-8s %10.2f %12.1f %10s %12s\n", p, l, m, n / m,
                   ((p, "none") in v) ? sprintf("%.2fx", m / base) : "-", pt ? sprintf("%.2fx", m / pt) : "-"
        }
    }' "$tmp/times"
echo "identical translations (last round): $same of $n"
