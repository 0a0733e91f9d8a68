#!/bin/sh
# End-to-end tests of what `tg` says when numbers or inputs go wrong (issue 60):
#  - a finite but huge weight (3e38): score, score --text, translate, generate and attention fail
#    with exit 1 naming the node that overflowed and its parameter, and print nothing;
#  - a NaN in the optimizer moments of state.safetensors: --resume refuses it;
#  - --resume: "done" names model.safetensors; resuming a finished run adds no event;
#  - a first save that hits a full disk in an existing directory leaves no file behind;
#  - messages: attention --src too long and a translation reaching max_len, an empty --dev or
#    --text, --min-count leaving no token, --metric with an empty name, --train-src with an lm,
#    translate's usage errors (exit 2), an underflowing --temperature.
# Usage: test_honest_tool.sh PATH/TO/tg     Prints "N passed, N failed"; exit status 1 on any failure.
set -u

TG=${1:?usage: test_honest_tool.sh PATH/TO/tg}
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$here/fixtures
PY=${PYTHON:-python3}
. "$here/tool_lib.sh" # ok, bad, run, expect, check, absent
tool_start honest_tool

# set_tensor IN OUT NAME VALUE: a copy of safetensors file IN whose tensor NAME holds VALUE everywhere
set_tensor() {
    "$PY" - "$@" <<'EOF'
import json, struct, sys
src, dst, name, value = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
a, b = json.loads(raw[8:8 + n])[name]["data_offsets"]
body = bytearray(raw[8 + n:])
body[a:b] = struct.pack("<f", value) * ((b - a) // 4)
open(dst, "wb").write(raw[:8 + n] + bytes(body))
EOF
}
# quiet NAME: the last command wrote nothing on standard output
quiet() { if [ -s out.txt ]; then bad "$1: printed $(head -c 80 out.txt)"; else ok "$1"; fi; }

# ---------------------------------------------------------------- huge weights: no NaN printed
W=decoder.layers.0.ffn.fc1.weight
set_tensor "$fixtures/models/mha_pre.safetensors" big.safetensors $W 3e38 || exit 1
set_tensor "$fixtures/lm/lm_mha.safetensors" lmbig.safetensors $W 3e38 || exit 1
origin="from finite inputs"
expect "score: a 3e38 weight fails naming the matmul" 1 "(matmul)" score --model big.safetensors \
    --src "$fixtures/models/pairs.src" --tgt "$fixtures/models/pairs.tgt"
check "score: the message names the parameter" grep -q "$origin.*parameter '$W'" err.txt
quiet "score: no number printed"
expect "score --text: a 3e38 weight fails" 1 "parameter '$W'" score --model lmbig.safetensors --text "$fixtures/lm/text.txt"
quiet "score --text: no number printed"
expect "translate: a 3e38 weight fails" 1 "parameter '$W'" translate --model big.safetensors \
    --input "$fixtures/models/pairs.src"
quiet "translate: nothing printed"
expect "generate: a 3e38 weight fails" 1 "parameter '$W'" generate --model lmbig.safetensors --prompt "the cat"
expect "attention: a 3e38 weight fails" 1 "parameter '$W'" attention --model big.safetensors --src "a b" \
    --tgt "a b" --out A --no-png
check "attention: no maps written" absent A

# ---------------------------------------------------------------- a tiny language model
i=0
while [ $i -lt 20 ]; do
    echo "the cat sat on the mat"
    echo "a dog ran on the grass"
    i=$((i + 1))
done >train.txt
head -2 train.txt >dev.txt
: >empty.txt
lm="--arch lm --train train.txt --d-model 16 --heads 2 --dec-layers 1 --d-ff 16 --max-len 10 --dropout 0
 --schedule constant --lr 0.003 --warmup 0 --max-tokens 200 --progress none --threads 1"
# shellcheck disable=SC2086
expect "train an lm, 4 steps" 0 "done at step 4" train $lm --dev dev.txt --out L --steps 4 --eval-interval 2 \
    --save-interval 2
# shellcheck disable=SC2086
expect "--resume: done names model.safetensors" 0 "model in L/model.safetensors" train --out L --resume --steps 6
check "--resume: model.safetensors is there" test -s L/model.safetensors
cp L/metrics.jsonl before.jsonl
expect "--resume of a finished run" 0 "done at step 6" train --out L --resume --steps 6
check "--resume of a finished run adds no event to metrics.jsonl" cmp -s before.jsonl L/metrics.jsonl

cp -r L N
set_tensor L/state.safetensors N/state.safetensors "optim.m.$W" nan || exit 1
expect "--resume: a NaN moment is refused" 1 "optimizer state 'optim.m.$W' holds nan" train --out N --resume \
    --steps 8
cp -r L V
set_tensor L/state.safetensors V/state.safetensors "optim.v.$W" -1 || exit 1
expect "--resume: a negative second moment is refused" 1 "optimizer state 'optim.v.$W' holds -1" train --out V \
    --resume --steps 8

# shellcheck disable=SC2086
expect "train --dev of an empty file" 1 "the dev data ('empty.txt') hold 0 tokens" train $lm --dev empty.txt --out E --steps 2
check "train --dev of an empty file: no directory left" absent E
# shellcheck disable=SC2086
expect "train --arch lm with --train-src" 2 "not --train-src" train $lm --train-src train.txt --out E --steps 2
# shellcheck disable=SC2086
expect "train --arch mlm --min-count 100000" 1 "--min-count 100000 leaves no token" train \
    $(echo "$lm" | sed 's/--arch lm/--arch mlm/; s/--dec-layers/--enc-layers/') --min-count 100000 --out E --steps 2
expect "score --text of an empty file" 1 "holds no line" score --model L/model.safetensors --text empty.txt
quiet "score --text of an empty file: nothing printed"
expect "generate --temperature 4e-320 (an underflow) is a number" 0 "" generate --model L/model.safetensors \
    --prompt "the" --temperature 4e-320 --max-new 3

# ---------------------------------------------------------------- a full disk at the first save
# the operation that writes the first state file, found from a trace of the same run
mkdir T F
# shellcheck disable=SC2086
TG_FAULT_INJECT=trace "$TG" train $lm --out T --steps 2 >/dev/null 2>trace.txt
n=$(sed -n 's/^tg-io \([0-9]*\) write .*state\.safetensors.*/\1/p' trace.txt | head -1)
if [ -z "$n" ]; then
    bad "full disk: no write of state.safetensors in the trace"
else
    # shellcheck disable=SC2086
    TG_FAULT_INJECT=enospc:$n "$TG" train $lm --out F --steps 2 >out.txt 2>err.txt
    rc=$?
    if [ $rc -eq 1 ] && grep -q "No space left on device" err.txt; then ok "full disk at the first save: exit 1"; else
        bad "full disk at the first save: exit $rc"; fi
    check "full disk at the first save: nothing left in the directory that was there" \
        sh -c '[ -d F ] && [ -z "$(ls -A F | grep -v "^\.tg-train\.lock$")" ]'
fi

# ---------------------------------------------------------------- an encoder-decoder's messages
awk 'BEGIN { for (i = 0; i < 40; i++) { print "a b c"; } }' >e.src
cp e.src e.tgt
# shellcheck disable=SC2086
expect "train a tiny encoder-decoder" 0 "done at step 2" train --train-src e.src --train-tgt e.tgt --d-model 16 \
    --heads 2 --enc-layers 1 --dec-layers 1 --d-ff 16 --max-len 6 --dropout 0 --max-tokens 100 --progress none \
    --threads 1 --out S --steps 2
expect "attention --src longer than max_len" 1 "--src has 6 tokens (+ </s>); the model takes at most 5" attention \
    --model S/model.safetensors --src "a b c a b c" --out A --no-png
run attention --model S/model.safetensors --src "a b" --out A --no-png
if [ "$rc" -ne 0 ]; then bad "attention over the greedy translation (exit $rc)"; elif grep -q "longer" err.txt; then
    bad "attention: blames the input's length"; else ok "attention over the greedy translation (any length)"; fi
expect "eval --metric bleu, (an empty name)" 2 "has an empty name" eval --hyp e.src --ref e.tgt --metric bleu,
expect "eval --metric ''" 2 "needs a non-empty value" eval --hyp e.src --ref e.tgt --metric ""

expect "translate: an unknown option exits 2" 2 "unknown option" translate --bogus
expect "translate: no --model exits 2" 2 "--model is required" translate --input e.src
expect "translate: a bad value exits 2" 2 "bad value" translate --model S/model.safetensors --beam 0
expect "translate: --nbest above --beam exits 2" 2 "exceeds the beam size" translate --model S/model.safetensors \
    --beam 2 --nbest 3

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
