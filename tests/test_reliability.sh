#!/bin/sh
# A user's bad day, end to end with the built `tg` (about a minute on 2 cores):
#  - a training run killed at every file-system operation of its two saves (TG_FAULT_INJECT=
#    crash:N, core/io.c) resumes to a model byte-identical to an uninterrupted run's, logs
#    every step once and leaves no temporary files; the same with a device that fills up at
#    every write (enospc:N): the run stops with a message, and resumes once there is room;
#  - a second trainer on a directory in use (or started at the same time) is refused with the
#    holder's pid; --overwrite removes the old run's checkpoints and log;
#  - a model larger than the machine's memory is refused before allocating;
#  - metrics.jsonl on a full device (/dev/full) stops the run;
#  - a diverging run (Adam at lr 100) stops with the step, the loss and a hint;
#  - checkpoints from tests/fixtures/bad/: a config implying terabytes (refused before any
#    allocation, under a 4 GB address-space limit), NaN and inf weights (named by score,
#    translate, average and train --resume), a shared
#    embedding with two vocabularies, a token with a CR (escaped in the message).
# Usage: test_reliability.sh PATH/TO/tg     Prints "N passed, N failed"; exit status 1 on failure.
set -u

TG=${1:?usage: test_reliability.sh PATH/TO/tg}
bad_dir=$(cd "$(dirname "$0")" && pwd)/fixtures/bad
pairs=$(cd "$(dirname "$0")" && pwd)/fixtures/models/pairs
. "$bad_dir/../../tool_lib.sh" # ok, bad, run, expect, check
tool_start reliability
export TG_NUM_THREADS=1

# reverse task over 6 symbols; a model of a few kB: each run takes a fraction of a second
awk -v n=40 -v seed=7 'BEGIN { x = seed
    for (i = 0; i < n; i++) { x = (x * 75 + 74) % 65537; len = 2 + x % 4; s = ""; t = ""
        for (k = 0; k < len; k++) { x = (x * 75 + 74) % 65537; w[k] = sprintf("s%d", x % 6) }
        for (k = 0; k < len; k++) { s = s (k ? " " : "") w[k]; t = t (k ? " " : "") w[len - 1 - k] }
        print s > "c.src"; print t > "c.tgt" } }'
opts="--train-src c.src --train-tgt c.tgt --d-model 8 --heads 1 --enc-layers 0 --dec-layers 1 --d-ff 8
      --max-len 8 --joint --max-tokens 60 --schedule constant --lr 0.01 --progress none --log-interval 1
      --steps 4 --save-interval 2"
# the events of a metrics.jsonl, without times
events() { sed 's/.*"event":"\([a-z]*\)","step":\([0-9]*\).*/\1 \2/' "$1"; }

# a 4 GB address-space limit, so that a tg that does allocate what a bad config asks for fails
# at once; not under AddressSanitizer, which reserves terabytes of shadow memory
limit_memory() { [ -n "${ASAN_OPTIONS:-}" ] || ulimit -v 4000000 2>/dev/null || :; }

# ---------------------------------------------------------------- the reference run
# shellcheck disable=SC2086
TG_FAULT_INJECT=trace "$TG" train $opts --out REF >/dev/null 2>trace.txt
check "reference run" [ -s REF/model.safetensors ]
nops=$(grep -c '^tg-io ' trace.txt)
check "the run does I/O at two saves ($nops operations)" sh -c "[ $(grep -c 'rename REF/state.safetensors$' trace.txt) -eq 2 ]"
events REF/metrics.jsonl >ref.events

# resume_check NAME DIR: resume DIR (or start it again when it holds no complete save) and
# compare with the reference; prints one line per failure
resume_check() {
    # shellcheck disable=SC2086
    if [ ! -d "$2" ]; then # a run that fails before its first save removes the directory it made
        "$TG" train $opts --out "$2" >r.out 2>r.err || { echo "$1: restart failed: $(cat r.err)"; return; }
    elif ! "$TG" train --out "$2" --resume >r.out 2>r.err; then
        if grep -q "holds no complete checkpoint" r.err; then
            "$TG" train $opts --out "$2" >r.out 2>r.err || { echo "$1: restart failed: $(cat r.err)"; return; }
        else
            echo "$1: resume failed: $(cat r.err)"
            return
        fi
    fi
    cmp -s REF/model.safetensors "$2/model.safetensors" || echo "$1: model differs from the uninterrupted run's"
    events "$2/metrics.jsonl" | cmp -s - ref.events || echo "$1: metrics.jsonl differs: $(events "$2/metrics.jsonl" | tr '\n' ' ')"
    [ -z "$(find "$2" -name '*.tmp.*')" ] || echo "$1: temporary files left: $(ls -a "$2" | tr '\n' ' ')"
    [ "$(find "$2" -name '.tg-model-*' | wc -l)" -eq 1 ] || echo "$1: stale model files: $(ls -a "$2" | tr '\n' ' ')"
}

# ---------------------------------------------------------------- a crash at every operation
: >crash.log
n=1
while [ $n -le "$nops" ]; do
    rm -rf C
    # shellcheck disable=SC2086
    TG_FAULT_INJECT=crash:$n "$TG" train $opts --out C >/dev/null 2>&1
    st=$?
    if [ $st -ne 137 ]; then echo "crash:$n: exit status $st, expected 137 (killed)" >>crash.log; fi
    resume_check "crash:$n" C >>crash.log
    n=$((n + 1))
done
check "killed at each of $nops operations: every resume is bit-exact, logs once, leaves no debris" [ ! -s crash.log ]
[ -s crash.log ] && head -5 crash.log

# ---------------------------------------------------------------- a device that fills up
: >full.log
cnt=0
for n in $(sed -n 's/^tg-io \([0-9]*\) \(write\|fsync\) .*/\1/p' trace.txt); do
    rm -rf F
    # shellcheck disable=SC2086
    TG_FAULT_INJECT=enospc:$n "$TG" train $opts --out F >/dev/null 2>f.err
    st=$?
    if [ $st -ne 1 ] || ! grep -q "No space left on device" f.err; then
        # an fsync of the directory after a rename is best effort (the data are safe already):
        # the run goes on to the next write
        grep -q "^tg-io $n fsync REF\$" trace.txt || echo "enospc:$n: exit $st: $(cat f.err)" >>full.log
    fi
    resume_check "enospc:$n" F >>full.log
    cnt=$((cnt + 1))
done
check "a full device at each of $cnt writes and fsyncs: a message, then a bit-exact resume" [ ! -s full.log ]
[ -s full.log ] && head -5 full.log

# ---------------------------------------------------------------- two trainers, --overwrite
# shellcheck disable=SC2086
"$TG" train $opts --out L --steps 100000000 --save-interval 0 >l.out 2>l.err &
pid=$!
k=0
while [ ! -s L/metrics.jsonl ] && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
# shellcheck disable=SC2086
expect "a second trainer on a directory in use is refused, naming the holder" 1 "in use by another trainer (pid $pid)" \
    train $opts --out L --overwrite
expect "--resume on a directory in use is refused" 1 "(pid $pid)" train --out L --resume
kill -INT $pid
wait $pid
check "the first trainer was not disturbed (exit 130)" [ $? -eq 130 ]
expect "once it has ended, --resume works" 0 "resuming at step" train --out L --resume --steps 1 --minutes 0.0001
# two trainers started together on one new directory: exactly one trains
# shellcheck disable=SC2086
"$TG" train $opts --out T2 >t1.out 2>t1.err &
p1=$!
# shellcheck disable=SC2086
"$TG" train $opts --out T2 >t2.out 2>t2.err &
p2=$!
wait $p1
s1=$?
wait $p2
s2=$?
check "two trainers started together: one trains, the other is refused" sh -c "[ $((s1 + s2)) -eq 1 ] &&
    grep -qE 'in use by another trainer|already holds a model' t1.err t2.err"
# shellcheck disable=SC2086
run train $opts --out O --save-interval 1 --keep-checkpoints 3
# shellcheck disable=SC2086
expect "--overwrite starts anew" 0 "done at step 2" train $opts --out O --overwrite --steps 2 --save-interval 2 --keep-checkpoints 3
check "--overwrite removed the old run's checkpoints" sh -c '[ -e O/checkpoint-2.safetensors ] && [ ! -e O/checkpoint-3.safetensors ] && [ ! -e O/checkpoint-4.safetensors ]'
check "--overwrite started a new metrics.jsonl" sh -c '[ "$(grep -c "\"step\":1," O/metrics.jsonl)" -eq 1 ] && ! grep -q "\"step\":3," O/metrics.jsonl'

# ---------------------------------------------------------------- metrics on a full device
mkdir D && ln -s /dev/full D/metrics.jsonl
# shellcheck disable=SC2086
expect "metrics.jsonl on /dev/full stops the run" 1 "metrics.jsonl': No space left on device" train $opts --out D

# ---------------------------------------------------------------- divergence
# shellcheck disable=SC2086
expect "Adam at --lr 100 stops with the step, the loss and a hint" 1 "training diverged" \
    train $opts --out V --steps 200 --lr 100 --save-interval 0
check "the divergence message names the learning rate and the warm-up" grep -q "step [0-9]*: the loss is .*(learning rate [0-9.e+-]* at this step).*warm-up" err.txt

# shellcheck disable=SC2086
(limit_memory; "$TG" train $opts --out H --d-model 8192 --heads 8 --enc-layers 256 --dec-layers 256 \
    --d-ff 65536 >out.txt 2>err.txt)
rc=$?
check "a model far larger than the machine is refused before allocating" \
    sh -c "[ $rc -eq 1 ] && grep -q 'parameters and needs .* GB of memory .*, more than this machine' err.txt && [ ! -e H ]"

# ---------------------------------------------------------------- bad checkpoints
(limit_memory; "$TG" score --model "$bad_dir/huge.safetensors" --src "$pairs.src" --tgt "$pairs.tgt" >out.txt 2>err.txt)
rc=$?
check "a 552-byte checkpoint whose config implies terabytes is refused before allocating" \
    sh -c "[ $rc -eq 1 ] && grep -q 'is missing (its config implies .* TB; nothing was allocated)' err.txt"
for what in score translate; do
    if [ $what = score ]; then args="--src $pairs.src --tgt $pairs.tgt"; else args="--input $pairs.src"; fi
    # shellcheck disable=SC2086
    expect "$what refuses a NaN weight, naming it" 1 "'decoder.layers.1.ffn.fc1.weight' holds nan" $what --model "$bad_dir/nan.safetensors" $args
    # shellcheck disable=SC2086
    expect "$what refuses an infinite weight, naming it" 1 "'encoder.layers.0.norm2.bias' holds inf" $what --model "$bad_dir/inf.safetensors" $args
done
expect "average refuses a NaN weight, naming it" 1 "'decoder.layers.1.ffn.fc1.weight' holds nan" average \
    --out avg.safetensors "$(dirname "$pairs")/mha_post.safetensors" "$bad_dir/nan.safetensors"
mkdir N && cp "$bad_dir/nan.safetensors" N/model.safetensors && cp REF/state.safetensors N/
expect "train --resume refuses a NaN weight" 1 "holds nan" train --out N --resume
expect "a shared embedding with two vocabularies is refused" 1 "shares one embedding table, but src_vocab" \
    score --model "$bad_dir/shared_two_vocabs.safetensors" --src "$pairs.src" --tgt "$pairs.tgt"
expect "a CR in a token is shown escaped" 1 "token 'a\\rb'" score --model "$bad_dir/cr_token.safetensors" \
    --src "$pairs.src" --tgt "$pairs.tgt"
check "no raw control byte in the message" sh -c '! tr -d "\n" <err.txt | grep -q "$(printf "\r")"'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
