#!/bin/sh
# Test of benchmarks/experiments/bench_seq_heads.py (step time against sequence length and heads) on a tiny
# grid: n 8,16 x h 1,2, a d 16 model of 1 + 1 layers, 1 step per run, with
# benchmarks/micro/bench_step and a fake PyTorch peer (a shell script printing the peer's JSON), so
# that no torch is needed and it runs in seconds:
#   sh tests/test_seq_heads.sh SOURCE_ROOT BUILD_ROOT
# Checks the bad-input messages, one grid (rows, the memory skip, the order flipped in round 2,
# the table, the figure), resuming (nothing run again), a further round, and a failing peer
# (status failed, exit 1, retried on the next sitting). No timing is asserted. Prints ok/FAIL
# per check and "N passed, N failed"; exit 0 only if nothing failed, 77 (skipped) without
# /usr/bin/python3 or bench_step.
set -u
src=${1:-.}
build=${2:-build}
PY=${PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || { echo "skip: $PY not found"; exit 77; }
[ -x "$build/benchmarks/micro/bench_step" ] || { echo "skip: $build/benchmarks/micro/bench_step not built"; exit 77; }
tmp=$(mktemp -d /tmp/tg-seq-heads.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# the fake peer: nn_transformer_step.py's output fields that the script reads
cat >"$tmp/peer.sh" <<'EOF'
#!/bin/sh
[ -n "${PEER_FAIL:-}" ] && { echo "peer: told to fail" >&2; exit 3; }
echo '{"framework": "pytorch", "ms_per_step": 12.5, "peak_rss_mib": 100.0}'
EOF

sweep() {
    "$PY" "$src/benchmarks/experiments/bench_seq_heads.py" --build-dir "$build" --python /bin/sh \
        --peer "$tmp/peer.sh" --tokens 32 --d-model 16 --d-ff 32 --layers 1 --vocab 20 \
        --steps 1 --warmup-steps 0 --threads 1 "$@"
}
# rows CSV [GREP]: data rows (matching GREP)
rows() { tail -n +2 "$1" | grep -c -- "${2:-.}"; }

sweep --heads 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 2 ] && grep -qF -- "--heads 3: d_model 16 is not a multiple" "$tmp/err"; then
    ok "heads not dividing d"
else
    bad "heads not dividing d: exit $rc, $(head -c 300 "$tmp/err")"
fi
sweep --kinds mha,nope >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 2 ] && grep -qF "unknown kind 'nope'" "$tmp/err"; then
    ok "unknown kind"
else
    bad "unknown kind: exit $rc, $(head -c 300 "$tmp/err")"
fi

# The grid. Estimated attention memory 1536 h n bytes (h^2 for pairwise): the bound 0.06 MiB
# skips interacting_pairwise at n 16 h 2 (0.094 MiB) alone.
grid="--seq 8,16 --heads 1,2 --kinds mha,interacting_pairwise --max-attn-mib 0.06"
csv=$tmp/sh.csv
sweep $grid --rounds 2 --csv "$csv" --png "$tmp/sh.png" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 0 ] && [ "$(rows "$csv" ',ok,')" = 22 ] && [ "$(rows "$csv" ',skipped,')" = 2 ]; then
    ok "grid: 22 runs, 2 skipped"
else
    bad "grid: exit $rc, $(rows "$csv" ',ok,') ok rows, $(head -c 300 "$tmp/err")"
fi
if grep -q "skip tgraph interacting_pairwise n 16 h 2: estimated attention memory" "$tmp/err" &&
    ! grep -q "skip.*mha" "$tmp/err"; then
    ok "memory skip said"
else
    bad "memory skip: $(head -c 300 "$tmp/err")"
fi
# round 1 runs tgraph first in a cell, round 2 the peer first
first1=$(grep '^8,1,.*,1,' "$csv" | head -1 | cut -d, -f4)
first2=$(grep '^8,1,.*,2,' "$csv" | head -1 | cut -d, -f4)
if [ "$first1" = tgraph ] && [ "$first2" = pytorch ]; then
    ok "order flipped in round 2"
else
    bad "order: round 1 starts with $first1, round 2 with $first2"
fi
if grep -q "^| 16 | 2 | 2 | [0-9,]* | skipped | 12 | \*\*[0-9.]*\*\* |" "$tmp/out" &&
    grep -q "^| n | h | B | mha ms | interacting_pairwise ms | PyTorch ms | mha / PyTorch | load |" "$tmp/out"; then
    ok "table"
else
    bad "table: $(head -c 600 "$tmp/out")"
fi
if command -v gnuplot >/dev/null 2>&1; then
    if [ "$(head -c 4 "$tmp/sh.png" | tail -c 3)" = PNG ]; then ok "figure"; else bad "figure: no PNG"; fi
fi

# Resuming runs nothing again; one more round adds only its rows.
sweep $grid --rounds 2 --csv "$csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 0 ] && [ "$(rows "$csv")" = 24 ] && grep -q "0 runs done" "$tmp/err"; then
    ok "resume: nothing run again"
else
    bad "resume: exit $rc, $(rows "$csv") rows, $(head -c 300 "$tmp/err")"
fi
sweep $grid --rounds 3 --csv "$csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 0 ] && [ "$(rows "$csv")" = 36 ] && [ "$(rows "$csv" ',3,[0-9]*,16,1,32,')" = 12 ]; then
    ok "a third round: 12 rows added"
else
    bad "third round: exit $rc, $(rows "$csv") rows"
fi

# A failing peer: status failed and exit 1; the next sitting retries it.
csv2=$tmp/fail.csv
PEER_FAIL=1 sweep --seq 8 --heads 1 --kinds mha --rounds 1 --csv "$csv2" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && [ "$(rows "$csv2" ',failed,')" = 1 ] && grep -q "peer: told to fail" "$tmp/err"; then
    ok "failing peer"
else
    bad "failing peer: exit $rc, $(head -c 300 "$tmp/err")"
fi
sweep --seq 8 --heads 1 --kinds mha --rounds 1 --csv "$csv2" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 0 ] && [ "$(rows "$csv2" 'pytorch,1,.*,ok,')" = 1 ]; then
    ok "failed run retried"
else
    bad "retry: exit $rc, $(cat "$csv2")"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
