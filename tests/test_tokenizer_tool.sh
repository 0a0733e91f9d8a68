#!/bin/sh
# The tokenizer travels with the model (docs/tool.md "Tokenizers"): `tg train` stores the one it
# read the data with (words or characters), and generate, score, fill-mask, attention,
# translate and tokenize read text with it, with no flag; a --chars that contradicts it is
# refused; a checkpoint stored before tokenizers travelled reads as before, but a character
# vocabulary read as words (every token <unk>) is refused instead of scored silently.
# Usage: test_tokenizer_tool.sh PATH/TO/tg     Prints "N passed, N failed"; exit status 1 on any failure.
set -u

TG=${1:?usage: test_tokenizer_tool.sh PATH/TO/tg}
here=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-python3}
. "$here/tool_lib.sh" # ok, bad, run, expect, check
tool_start tok_tool

# legacy IN OUT: the checkpoint IN without its stored tokenizer (as tg train wrote it before
# tokenizers travelled): the safetensors header's __metadata__ lose the key "tokenizer"
legacy() {
    "$PY" - "$1" "$2" <<'PYEOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
head = json.loads(data[8:8 + n])
del head["__metadata__"]["tokenizer"]
h = json.dumps(head, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + data[8 + n:])
PYEOF
}

little_corpus

small="--d-model 32 --heads 2 --d-ff 64 --max-len 40 --dropout 0 --schedule constant --lr 0.003
 --warmup 10 --max-tokens 400 --progress none"
# a character language model
# shellcheck disable=SC2086
expect "train --arch lm --chars" 0 "done at step 60" train --arch lm --chars --documents lines --train train.txt \
    --out C $small --dec-layers 2 --steps 60
expect "inspect: the stored tokenizer" 0 "tokenizer: chars (stored" inspect --model C/model.safetensors
expect "tokenize reads characters with no flag" 0 "" tokenize --model C/model.safetensors --text dev.txt
check "  one id per character and space (22 for the first line)" sh -c '[ "$(head -1 out.txt | wc -w)" -eq 22 ]'

# score: the stored tokenizer, with or without --chars, the same numbers; the perplexity of a
# character model (not of <unk>s)
expect "score --text with no flag" 0 "tg score: 3 sequences, 58 tokens with </s>" score --model C/model.safetensors \
    --text dev.txt
cp out.txt score_plain.txt
check "  perplexity below 4 (characters, not <unk>s)" sh -c 'awk "/perplexity/ { exit !(\$NF < 4.0) }" err.txt'
expect "score --text --chars (agrees with the stored tokenizer)" 0 "" score --model C/model.safetensors --text dev.txt \
    --chars
check "  the same scores" cmp -s out.txt score_plain.txt
expect "score --no-chars contradicts the stored tokenizer" 2 "trained on characters (its stored tokenizer): --no-chars contradicts it" \
    score --model C/model.safetensors --text dev.txt --no-chars
check "  no scores printed" sh -c '[ ! -s out.txt ]'

# generate: the prompt is characters without --chars
expect "generate greedy, no flag" 0 "the cat sat" generate --model C/model.safetensors --prompt "the c" --greedy \
    --max-new 12
cp out.txt gen_plain.txt
expect "generate greedy, --chars" 0 "" generate --model C/model.safetensors --prompt "the c" --greedy --max-new 12 --chars
check "  the same continuation" cmp -s out.txt gen_plain.txt
expect "generate --no-chars refused" 2 "--no-chars contradicts it" generate --model C/model.safetensors --prompt "the c" \
    --no-chars --output g.txt
check "  nothing written" absent g.txt

# a checkpoint stored before tokenizers travelled: as before with --chars; without it, refused
# (every character word would be <unk>: the perplexity in the hundreds, silently)
legacy C/model.safetensors old_chars.safetensors
expect "inspect: the legacy copy stores no tokenizer" 0 "tokenizer: none stored" inspect --model old_chars.safetensors
expect "legacy chars model, score --chars" 0 "stores no tokenizer (trained before tokenizers travelled): reading characters" \
    score --model old_chars.safetensors --text dev.txt --chars
check "  the scores of the stored tokenizer" cmp -s out.txt score_plain.txt
expect "legacy chars model, score without --chars refused" 1 "its vocabulary is single characters with" score \
    --model old_chars.safetensors --text dev.txt
check "  no scores printed" sh -c '[ ! -s out.txt ]'
expect "legacy chars model, generate without --chars refused" 1 "give --chars" generate --model old_chars.safetensors \
    --prompt "the c" --greedy

# a words model: --chars contradicts it; its legacy copy with --chars is refused too
# shellcheck disable=SC2086
expect "train --arch lm (words)" 0 "done at step 20" train --arch lm --documents lines --train train.txt --out W $small \
    --dec-layers 1 --steps 20
expect "inspect: a words tokenizer stored" 0 "tokenizer: words (stored" inspect --model W/model.safetensors
expect "score --chars on a words model refused" 2 "trained on whitespace words (its stored tokenizer): --chars contradicts it" \
    score --model W/model.safetensors --text dev.txt --chars
legacy W/model.safetensors old_words.safetensors
expect "legacy words model, score as before" 0 "reading whitespace words" score --model old_words.safetensors --text dev.txt
expect "legacy words model, --chars refused" 1 "its vocabulary holds words" score --model old_words.safetensors \
    --text dev.txt --chars

# a masked language model of characters: fill-mask reads characters with no flag
# shellcheck disable=SC2086
expect "train --arch mlm --chars" 0 "done at step 20" train --arch mlm --chars --train train.txt --out M $small \
    --enc-layers 1 --steps 20
expect "fill-mask with no flag: one mask among characters" 0 "<mask> 1 of 1 (token 3)" fill-mask \
    --model M/model.safetensors --text "th<mask> cat"
expect "fill-mask --no-chars refused" 2 "--no-chars contradicts it" fill-mask --model M/model.safetensors \
    --text "th<mask> cat" --no-chars

# an encoder-decoder of characters: translate (which has no --chars) reads and writes characters
printf 'abc\nbca\ncab\n' >s.txt
printf 'cba\nacb\nbac\n' >t.txt
i=0
while [ $i -lt 5 ]; do cat s.txt; i=$((i + 1)); done >src.txt
i=0
while [ $i -lt 5 ]; do cat t.txt; i=$((i + 1)); done >tgt.txt
# shellcheck disable=SC2086
expect "train encdec --chars" 0 "done at step 5" train --train-src src.txt --train-tgt tgt.txt --chars --joint --out E \
    $small --enc-layers 1 --dec-layers 1 --steps 5
expect "score pairs with no flag" 0 "" score --model E/model.safetensors --src s.txt --tgt t.txt
cp out.txt pairs_plain.txt
expect "score pairs --chars" 0 "" score --model E/model.safetensors --src s.txt --tgt t.txt --chars
check "  the same scores" cmp -s out.txt pairs_plain.txt
expect "translate a chars model" 0 "" translate --model E/model.safetensors --input s.txt --beam 1
check "  three lines of characters, no spaces between them" sh -c '[ "$(wc -l <out.txt)" -eq 3 ] && ! grep -q " " out.txt'

# tg train --init: the chars model trained further keeps its tokenizer and starts where it
# ended (its first loss far below a fresh model's first)
first_loss() { sed -n 's/.*"event":"train","step":1,.*"loss":\([0-9.e+-]*\).*/\1/p' "$1"; }
# shellcheck disable=SC2086
expect "train --init a chars language model" 0 "done at step 5" train --init C/model.safetensors --documents lines \
    --train train.txt --out C2 --steps 5 --log-interval 1 --lr 0.001 --warmup 0 --schedule constant --progress none
check "  its first loss below half a fresh model's first" awk -v a="$(first_loss C2/metrics.jsonl)" \
    -v b="$(sed -n 's/.*"event":"train","step":[0-9]*,.*"loss":\([0-9.e+-]*\).*/\1/p' C/metrics.jsonl | head -1)" \
    'BEGIN { exit !(a > 0 && a < 0.5 * b) }'
expect "  the continued model reads characters" 0 "tokenizer: chars (stored" inspect --model C2/model.safetensors
expect "train --init with another --arch refused" 2 "is a model of arch lm: --arch mlm contradicts it" train \
    --init C/model.safetensors --arch mlm --train train.txt --out X --steps 1
expect "train --init --no-chars refused" 2 "--no-chars contradicts it" train --init C/model.safetensors --no-chars \
    --train train.txt --out X --steps 1
expect "train --init and --resume" 2 "--init and --resume exclude each other" train --init C/model.safetensors \
    --resume --out C2 --steps 6
expect "train --init of a file that is no checkpoint" 1 "--init" train --init train.txt --train train.txt --out X --steps 1
check "  no directory made" absent X

# --task classify from scratch (words): the class of a line from its words; resumed
awk '{ print (/dog/ ? 1 : 0) "\t" $0 }' train.txt >cls.txt
# shellcheck disable=SC2086
expect "train --arch mlm --task classify" 0 "in 2 classes" train --arch mlm --task classify --train cls.txt --dev cls.txt \
    --out K $small --enc-layers 1 --steps 20 --eval-interval 20
check "  dev accuracy 100 %" grep -q '"event":"dev".*"accuracy":1,' K/metrics.jsonl
expect "  resumed" 0 "resuming at step 20" train --out K --resume --steps 25

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
