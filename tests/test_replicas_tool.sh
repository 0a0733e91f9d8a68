#!/bin/sh
# End-to-end tests of `tg train --replicas N` (docs/distributed.md: N copies of the model in
# threads of one process, each on 1/N of every batch), on the synthetic reverse task with a tiny
# model (about 10 s on 2 cores):
#  a. 2 replicas give the parameters of 1 process with the whole batch: 6 steps of SGD
#     (momentum 0) and of Adam, dropout 0, within tests/st_compare.py's tolerance; the final
#     dev losses agree to 1e-4 relative;
#  b. metrics.jsonl has "ranks":2 and an "allreduce_ms" number, the "2 replicas" line and
#     "done at step 6" appear once, and --out holds the model, the state and the metrics only;
#  c. with dropout and Adam, 2 replicas and 2 MPI ranks write the same model.safetensors, byte
#     for byte (an MPI build under mpirun only: the same slices, the same sums);
#  d. a run of 3 steps resumed to step 6 by 2 replicas ends with the bits of the straight
#     6-step run, and 2 replicas resume what 1 process started (within the tolerance);
#  e. --replicas with --backend cuda, --replicas 0 and an empty line in the training file:
#     non-zero exit, the message once, no hang; more threads than cores: a warning;
#  f. SIGTERM: the replicas agree to stop, a checkpoint is saved, and the run resumes.
# Every run is under `timeout 120`: a hang is a failure.
# Usage: test_replicas_tool.sh PATH/TO/tg     Prints "N passed, N failed"; exit status 1 on any
# failure, 77 (skipped) without python3.
# shellcheck disable=SC2016  # the sh -c scripts expand their own $0, $1
set -u

TG=${1:?usage: test_replicas_tool.sh PATH/TO/tg}
here=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || { echo "skip: $PY not found"; exit 77; }
. "$here/tool_lib.sh" # ok, bad, check, one, same_dev, ran, same_params, interrupted
tool_start replicas
unset TG_NUM_THREADS

reverse_task # D, COMMON, SGD, ADAM

# ---------------------------------------------------------------- a, b: 2 replicas = 1 process
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 6 --replicas 2 --out two
ran "2 replicas: 6 SGD steps" # stderr in "2 replicas: 6 SGD steps.err"
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 6 --out one
ran "1 process: 6 SGD steps"
same_params "SGD: 2 replicas = 1 process" two/model.safetensors one/model.safetensors
same_dev "SGD: dev loss of 2 replicas = 1 process" two/metrics.jsonl one/metrics.jsonl
# shellcheck disable=SC2086
one train $COMMON $ADAM --steps 6 --replicas 2 --out twoA
ran "2 replicas: 6 Adam steps"
# shellcheck disable=SC2086
one train $COMMON $ADAM --steps 6 --out oneA
ran "1 process: 6 Adam steps"
# the attention key biases: an exactly zero gradient that Adam turns into steps (st_compare.py)
same_params "Adam: 2 replicas = 1 process" twoA/model.safetensors oneA/model.safetensors --skip k_proj.bias
check "metrics.jsonl of 2 replicas: \"ranks\":2 and an \"allreduce_ms\" number on every train line" \
    "$PY" -c '
import json, sys
tr = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "train"]
sys.exit(not (len(tr) == 3 and all(e.get("ranks") == 2 and isinstance(e.get("allreduce_ms"), (int, float))
                                   and e["allreduce_ms"] >= 0 for e in tr)))' two/metrics.jsonl
check "replica 0 alone wrote the files (nothing else in --out, one dev event)" \
    sh -c '[ "$(ls two | tr "\n" " ")" = "metrics.jsonl model.safetensors state.safetensors " ] &&
           [ "$(grep -c "\"event\":\"dev\"" two/metrics.jsonl)" -eq 1 ]'
check "the \"2 replicas (threads of this process)\" line and \"done at step 6\" once each" \
    sh -c '[ "$(grep -c "2 replicas (threads of this process), 1 threads each" "2 replicas: 6 SGD steps.err")" -eq 1 ] &&
           [ "$(grep -c "done at step 6" "2 replicas: 6 SGD steps.err")" -eq 1 ]'

# ---------------------------------------------------------------- c: the bits of 2 MPI ranks
DROP="--dropout 0.1 --optimizer adam --lr 0.003 --steps 5"
if command -v mpirun >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    timeout -k 10 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$TG" train $COMMON $DROP --out mpi \
        >out.txt 2>err.txt
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q "built without MPI" err.txt; then
        echo "skip: 2 replicas = 2 MPI ranks (tg built without MPI)"
    else
        ran "2 MPI ranks: 5 Adam steps with dropout"
        # shellcheck disable=SC2086
        one train $COMMON $DROP --replicas 2 --out rep
        ran "2 replicas: 5 Adam steps with dropout"
        check "2 replicas and 2 MPI ranks: the same model.safetensors, byte for byte" \
            cmp -s rep/model.safetensors mpi/model.safetensors
    fi
else
    echo "skip: 2 replicas = 2 MPI ranks (no mpirun)"
fi

# ---------------------------------------------------------------- d: resume
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 3 --replicas 2 --out r3
ran "2 replicas: 3 steps"
cp r3/model.safetensors three.safetensors
one train --out r3 --resume --steps 6 --replicas 2 --progress none --threads 1
ran "2 replicas: --resume to step 6"
check "resumed at step 3, once" sh -c '[ "$(grep -c "resuming at step 3" err.txt)" -eq 1 ]'
check "3 + 3 steps with 2 replicas: the bits of the straight 6-step run" \
    cmp -s r3/model.safetensors two/model.safetensors
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 3 --out p3
ran "1 process: 3 steps"
one train --out p3 --resume --steps 6 --replicas 2 --progress none --threads 1
ran "2 replicas: --resume of 1 process's run to step 6"
same_params "1 process 3 steps + 2 replicas 3 steps = 1 process 6 steps" p3/model.safetensors one/model.safetensors
check "the 3-step model is beyond the tolerance of the 6-step one (the comparisons mean something)" \
    sh -c '! "$0" "$1/st_compare.py" three.safetensors one/model.safetensors >/dev/null 2>&1' "$PY" "$here"

# ---------------------------------------------------------------- e: errors
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 2 --replicas 2 --backend cuda --out e1
check "--replicas with --backend cuda: exit 2 and the message once" \
    sh -c '[ "$0" -eq 2 ] && [ "$(grep -c "replicas trains on the CPU backend" err.txt)" -eq 1 ]' "$rc"
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 2 --replicas 0 --out e2
check "--replicas 0: exit 2, \"replicas\" in the message" sh -c '[ "$0" -eq 2 ] && grep -q "replicas" err.txt' "$rc"
cores=$(nproc 2>/dev/null || echo 2)
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 1 --replicas 2 --threads "$cores" --out e4
check "2 replicas x $cores threads on $cores cores: trains, with the warning once" \
    sh -c '[ "$0" -eq 0 ] && [ "$(grep -c "warning: 2 replicas x $1 threads on $1 cores" err.txt)" -eq 1 ]' "$rc" "$cores"
awk 'NR == 5 { print ""; next } { print }' "$D/train.src" >empty.src
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 2 --replicas 2 --train-src empty.src --out e3
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    bad "empty line in the training file: no end within 120 s (it hung)"
else
    check "empty line in the training file: non-zero exit ($rc), the message once, no --out" \
        sh -c '[ "$0" -ne 0 ] && [ "$(grep -c "empty line" err.txt)" -eq 1 ] && [ ! -e e3 ]' "$rc"
fi

# ---------------------------------------------------------------- f: SIGTERM
# shellcheck disable=SC2086
interrupted "$TG" train $COMMON $SGD --steps 1000000 --log-interval 1 --replicas 2 --out I
check "SIGTERM: exit status 130 ($rc)" [ "$rc" -eq 130 ]
if [ -n "$step" ]; then
    one train --out I --resume --steps $((step + 2)) --replicas 2 --progress none --threads 1
    ran "SIGTERM: 2 replicas resume the interrupted run"
    check "SIGTERM: resumed at step $step, done at step $((step + 2))" \
        sh -c 'grep -q "resuming at step $0," err.txt && grep -q "done at step $1," err.txt' "$step" $((step + 2))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
