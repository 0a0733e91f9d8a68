# shellcheck shell=bash
# loads.sh: busy processes for the contention benchmarks (sourced by bench_contention.sh and
# bench_translate.sh; bash).
#
#   check_load NAME   exit status 0 if NAME is a known load
#   start_load NAME   none (nothing), busy (one `sh -c 'while :; do :; done'` at nice 0), busy2,
#                     busy3 (two, three of them), nice19 (one at nice 19); their PIDs in busy_pids
#   stop_load         end them by PID and wait for them
# The sourcing script should `trap stop_load EXIT` (or call it from its own exit trap).

busy_pids=()

check_load() {
    case "$1" in none|busy|busy2|busy3|nice19) return 0 ;; *) return 1 ;; esac
}

start_load() {
    local n=0 nice=0
    case "$1" in
    busy) n=1 ;;
    busy2) n=2 ;;
    busy3) n=3 ;;
    nice19) n=1 nice=19 ;;
    esac
    for _ in $(seq 1 $n); do
        nice -n $nice sh -c 'while :; do :; done' &
        busy_pids+=($!)
    done
    sleep 0.2
}

stop_load() {
    if [ ${#busy_pids[@]} -gt 0 ]; then
        kill "${busy_pids[@]}" 2>/dev/null || true
        wait "${busy_pids[@]}" 2>/dev/null || true
        busy_pids=()
    fi
}

# The median of a space-separated list, as an awk function for the scripts' summaries:
#   awk "$awk_median"' { ... median(list) ... }'
# shellcheck disable=SC2034 # used by the scripts that source this file
awk_median='
    function median(s,   a, k, i, j, t) {
        k = split(s, a, " ")
        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }'
