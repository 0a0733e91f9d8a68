#!/bin/sh
# End-to-end tests of data-parallel `tg train` under mpirun (docs/distributed.md), on the
# synthetic reverse task with a tiny model (about 15 s on 2 cores):
#  a. 2 ranks x 1 thread give the parameters of 1 process with the whole batch: 6 steps of SGD
#     (momentum 0) and of Adam, dropout 0, compared element by element by tests/st_compare.py
#     within |a-b| <= 1e-5 + 1e-4*|b| (float32 sums in another order: the ranks add their slices'
#     gradients, one process adds per token; Adam: without the attention key biases, whose
#     gradient is exactly zero, so rounding noise that Adam scales up to steps of --lr); the
#     final dev losses agree to 1e-4 relative;
#  b. the group's metrics.jsonl has "ranks":2 and an "allreduce_ms" number, rank 0 alone wrote
#     the files, and the "2 ranks (mpi)" line appears once;
#  c. --resume across rank counts: 2 ranks for 3 steps then 1 process to step 6, and 1 process
#     for 3 steps then 2 ranks to step 6, both within the tolerance of the straight 6-step run;
#  d. an empty line in rank 1's training file only (MPMD launch): non-zero exit, the message
#     "rank 1: ... empty line", no hang, no files in a fresh --out;
#  e. different (valid) training data on rank 1: non-zero exit, "different training data"; an
#     option error on rank 1 alone and --resume on rank 0 alone: non-zero exit and the message;
#  f. SIGTERM to mpirun: a checkpoint saved and the run resumed by 2 ranks.
# Every mpirun runs under `timeout 120`: a hang is a failure.
# Usage: test_dist_tool.sh PATH/TO/tg     Prints "N passed, N failed"; exit status 1 on any
# failure, 77 (skipped) without mpirun or python3, or when tg was built without MPI.
# shellcheck disable=SC2016  # the sh -c scripts expand their own $0, $1
set -u

TG=${1:?usage: test_dist_tool.sh PATH/TO/tg}
here=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
command -v mpirun >/dev/null 2>&1 || { echo "skip: mpirun not found"; exit 77; }
command -v "$PY" >/dev/null 2>&1 || { echo "skip: $PY not found"; exit 77; }
. "$here/tool_lib.sh" # ok, check, one, same_dev, ran, same_params, interrupted
tool_start dist
mkdir rt && export TMPDIR="$tmp/rt" # where ranks > 0 keep a resumed checkpoint's copy
export TG_NUM_THREADS=1

bad() { # tool_lib.sh's, with the ends of the outputs (mpirun's last words)
    failed=$((failed + 1))
    echo "FAIL $1"
    [ -s out.txt ] && sed 's/^/     stdout: /' out.txt | tail -8
    [ -s err.txt ] && sed 's/^/     stderr: /' err.txt | tail -12
}
# mpi ARGS...: mpirun ARGS under a 120 s timeout; stdout in out.txt, stderr in err.txt, the exit
# status in $rc (124 or 137: it hung)
mpi() {
    timeout -k 10 120 mpirun --allow-run-as-root --oversubscribe "$@" >out.txt 2>err.txt
    rc=$?
}
# ---------------------------------------------------------------- data and options
reverse_task # D, COMMON, SGD, ADAM

# ---------------------------------------------------------------- a, b: 2 ranks = 1 process
# shellcheck disable=SC2086
mpi -np 2 "$TG" train $COMMON $SGD --steps 6 --out two
if [ "$rc" -ne 0 ] && grep -q "built without MPI" err.txt; then
    echo "skip: $TG was built without MPI"
    exit 77
fi
ran "2 ranks: 6 SGD steps"
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 6 --out one
ran "1 process: 6 SGD steps"
same_params "SGD: 2 ranks = 1 process" two/model.safetensors one/model.safetensors
same_dev "SGD: dev loss of 2 ranks = 1 process" two/metrics.jsonl one/metrics.jsonl
# shellcheck disable=SC2086
mpi -np 2 "$TG" train $COMMON $ADAM --steps 6 --out twoA
ran "2 ranks: 6 Adam steps"
# shellcheck disable=SC2086
one train $COMMON $ADAM --steps 6 --out oneA
ran "1 process: 6 Adam steps"
# the attention key biases have an exactly zero gradient: rounding noise that Adam turns into
# steps of about --lr (see st_compare.py --skip)
same_params "Adam: 2 ranks = 1 process" twoA/model.safetensors oneA/model.safetensors --skip k_proj.bias
same_dev "Adam: dev loss of 2 ranks = 1 process" twoA/metrics.jsonl oneA/metrics.jsonl

check "metrics.jsonl of 2 ranks: \"ranks\":2 and an \"allreduce_ms\" number on every train line" \
    "$PY" -c '
import json, sys
tr = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "train"]
sys.exit(not (len(tr) == 3 and all(e.get("ranks") == 2 and isinstance(e.get("allreduce_ms"), (int, float))
                                   and e["allreduce_ms"] >= 0 for e in tr)))' two/metrics.jsonl
check "metrics.jsonl of 1 process: no \"ranks\" field" sh -c '! grep -q "\"ranks\"" one/metrics.jsonl'
check "rank 0 alone wrote the files (one metrics.jsonl, model, state; nothing else in --out)" \
    sh -c '[ "$(ls two | tr "\n" " ")" = "metrics.jsonl model.safetensors state.safetensors " ] &&
           [ "$(grep -c "\"event\":\"dev\"" two/metrics.jsonl)" -eq 1 ]'
check "the \"2 ranks (mpi)\" line once" sh -c '[ "$(grep -c "2 ranks (mpi)" "2 ranks: 6 SGD steps.err")" -eq 1 ]'
check "\"done at step 6\" once" sh -c '[ "$(grep -c "done at step 6" "2 ranks: 6 SGD steps.err")" -eq 1 ]'

# ---------------------------------------------------------------- c: resume across rank counts
# shellcheck disable=SC2086
mpi -np 2 "$TG" train $COMMON $SGD --steps 3 --out r21
ran "2 ranks: 3 steps"
one train --out r21 --resume --steps 6 --progress none --threads 1
ran "1 process: --resume to step 6"
check "resumed at step 3" grep -q "resuming at step 3" err.txt
same_params "2 ranks 3 steps + 1 process 3 steps = 1 process 6 steps" r21/model.safetensors one/model.safetensors
# shellcheck disable=SC2086
one train $COMMON $SGD --steps 3 --out r12
ran "1 process: 3 steps"
check "the 3-step model is beyond the tolerance of the 6-step one (the comparisons mean something)" \
    sh -c '! "$0" "$1/st_compare.py" r12/model.safetensors one/model.safetensors >/dev/null' "$PY" "$here"
mpi -np 2 "$TG" train --out r12 --resume --steps 6 --progress none --threads 1
ran "2 ranks: --resume to step 6"
check "resumed at step 3, once" sh -c '[ "$(grep -c "resuming at step 3" err.txt)" -eq 1 ]'
same_params "1 process 3 steps + 2 ranks 3 steps = 1 process 6 steps" r12/model.safetensors one/model.safetensors
check "no rank's temporary copy of the checkpoint left behind" sh -c '[ -z "$(ls rt | grep "^tg-rank")" ]'

# ---------------------------------------------------------------- d, e: one rank's data differs
awk 'NR == 5 { print ""; next } { print }' "$D/train.src" >empty.src
# shellcheck disable=SC2086
mpi -np 1 "$TG" train $COMMON $SGD --steps 2 --out bad : \
    -np 1 "$TG" train $COMMON $SGD --steps 2 --out bad --train-src empty.src
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    bad "empty line on rank 1: no end within 120 s (it hung)"
else
    check "empty line on rank 1: non-zero exit status ($rc)" [ "$rc" -ne 0 ]
    check "empty line on rank 1: \"rank 1:\" and \"empty line\" in the message" \
        grep -q "tg train: rank 1: .*empty line" err.txt
    check "empty line on rank 1: the message once" sh -c '[ "$(grep -c "empty line" err.txt)" -eq 1 ]'
    check "empty line on rank 1: no files in a fresh --out" sh -c '[ ! -e bad ]'
fi
head -n 599 "$D/train.src" >short.src
head -n 599 "$D/train.tgt" >short.tgt
# shellcheck disable=SC2086
mpi -np 1 "$TG" train $COMMON $SGD --steps 2 --out diff : \
    -np 1 "$TG" train $COMMON $SGD --steps 2 --out diff --train-src short.src --train-tgt short.tgt
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    bad "different data on rank 1: no end within 120 s (it hung)"
else
    check "different data on rank 1: non-zero exit status ($rc)" [ "$rc" -ne 0 ]
    check "different data on rank 1: \"different training data\"" grep -q "different training data" err.txt
    check "different data on rank 1: no files in a fresh --out" sh -c '[ ! -e diff ]'
fi

# an option error on rank 1 alone, found after the ranks joined (no stop condition), and
# --resume on rank 0 alone: every rank stops with the message, no hang
# shellcheck disable=SC2086
mpi -np 1 "$TG" train $COMMON $SGD --steps 2 --out u1 : -np 1 "$TG" train $COMMON $SGD --out u1
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    bad "option error on rank 1 alone: no end within 120 s (it hung)"
else
    check "option error on rank 1 alone: non-zero exit status ($rc) and \"rank 1: no stop condition\"" \
        sh -c '[ "$0" -ne 0 ] && grep -q "tg train: rank 1: no stop condition" err.txt' "$rc"
fi
# shellcheck disable=SC2086
mpi -np 1 "$TG" train --out r21 --resume --steps 8 --progress none : \
    -np 1 "$TG" train $COMMON $SGD --steps 8 --out r21 --progress none
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    bad "--resume on rank 0 alone: no end within 120 s (it hung)"
else
    check "--resume on rank 0 alone: non-zero exit status ($rc) and \"different options (--resume)\"" \
        sh -c '[ "$0" -ne 0 ] && grep -q "the ranks were given different options (--resume)" err.txt' "$rc"
fi

# ---------------------------------------------------------------- f: SIGTERM
# mpirun hands SIGTERM on to the ranks; they agree to stop, rank 0 saves a checkpoint, and the
# run resumes. The signal is sent once the first train line is logged (every rank is training).
# timeout --foreground: otherwise timeout hands the signal on to mpirun and to its own process
# group, mpirun included, and mpirun takes a second SIGTERM as "kill the ranks now" (as a second
# Ctrl-C): the ranks die before they can save.
# shellcheck disable=SC2086
interrupted mpirun --allow-run-as-root --oversubscribe -np 2 "$TG" train $COMMON $SGD --steps 1000000 \
    --log-interval 1 --out I
if [ -n "$step" ]; then
    mpi -np 2 "$TG" train --out I --resume --steps $((step + 2)) --progress none
    ran "SIGTERM: 2 ranks resume the interrupted run"
    check "SIGTERM: resumed at step $step, done at step $((step + 2))" \
        sh -c 'grep -q "resuming at step $0," err.txt && grep -q "done at step $1," err.txt' "$step" $((step + 2))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
