#!/bin/sh
# The sentencepiece BPE of datasets/prep_bible.py as a stored tokenizer: `tg train --spm
# spm.model` reads raw text, cuts it into the pieces spm_encode makes and stores the model in the
# checkpoint, so that tokenize, score, generate and translate read raw text the same way. The
# pieces are compared with spm_encode's on the training text and on lines its normaliser changes
# (NFKC: full-width letters, ligatures, composed and decomposed accents, white space runs).
# Skipped (exit 77) without spm_train and spm_encode (Debian package sentencepiece).
# Usage: test_spm_tool.sh PATH/TO/tg     Prints "N passed, N failed"; exit status 1 on any failure.
set -u

TG=${1:?usage: test_spm_tool.sh PATH/TO/tg}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v spm_train >/dev/null || ! command -v spm_encode >/dev/null; then
    echo "spm_train / spm_encode not installed (apt-get install sentencepiece): skipped"
    exit 77
fi
. "$here/tool_lib.sh" # ok, bad, run, expect, check
tool_start spm_tool

# raw text: the prose of this repository's documentation (no U+2581 in it), lines of 20+ bytes
grep -h -v -e '▁' -e '^ *$' "$here/../docs/model.md" "$here/../docs/guide.md" | awk 'length($0) > 20' | head -600 >raw.txt
head -40 raw.txt >dev.txt
# lines the normaliser changes (nmt_nfkc) and white space runs
printf '%s\n' "ＦＵＬＬ ｗｉｄｔｈ １２３" "a ﬁne ﬂow ½ ™ ①" "  leading and trailing  " \
    "tabs	and		runs   of  spaces" "CJK 漢字 and emoji 😀 ok" "x" "Straße ÆØÅ Ⅻ ＄" >odd.txt
printf 'caf\303\251 cafe\314\201 na\303\257ve\n' >>odd.txt # composed and decomposed accents
check "spm_train a BPE model (as prep_bible.py)" spm_train --input=raw.txt --model_prefix=spm --model_type=bpe \
    --vocab_size=400 --character_coverage=1.0 --minloglevel=2
spm_encode --model=spm.model --output_format=piece <raw.txt >raw.pieces
spm_encode --model=spm.model --output_format=piece <odd.txt >odd.pieces

small="--d-model 32 --heads 2 --d-ff 64 --max-len 128 --dropout 0 --schedule constant --lr 0.003 --warmup 0
 --max-tokens 2000 --progress none"
# shellcheck disable=SC2086
expect "train --arch lm --spm on raw text" 0 "done at step 3" train --arch lm --spm spm.model --documents lines \
    --train raw.txt --out L $small --dec-layers 1 --steps 3
expect "inspect: the stored sentencepiece tokenizer" 0 "tokenizer: spm_bpe (stored" inspect --model L/model.safetensors
expect "tokenize --pieces: the training text" 0 "" tokenize --model L/model.safetensors --text raw.txt --pieces
check "  the pieces of spm_encode, line for line" cmp -s out.txt raw.pieces
expect "tokenize --pieces: normalised lines" 0 "" tokenize --model L/model.safetensors --text odd.txt --pieces
check "  the pieces of spm_encode (NFKC, accents, white space)" cmp -s out.txt odd.pieces
expect "score --text raw" 0 "tg score: 40 sequences" score --model L/model.safetensors --text dev.txt
head -40 raw.pieces >dev.pieces
expect "score of text already cut into pieces refused" 1 "cut into sentencepiece pieces already" score \
    --model L/model.safetensors --text dev.pieces
check "  no scores printed" sh -c '[ ! -s out.txt ]'
expect "score --chars refused" 2 "carries its tokenizer (spm_bpe): --chars does not apply" score \
    --model L/model.safetensors --text dev.txt --chars
expect "generate from raw text: decoded, no pieces" 0 "" generate --model L/model.safetensors --prompt "The model" \
    --greedy --max-new 5
check "  the prompt comes back as text" sh -c 'grep -q "^The model" out.txt && ! grep -q "▁" out.txt'
expect "train --spm on pieces refused" 1 "cut into sentencepiece pieces already" train --arch lm --spm spm.model \
    --train raw.pieces --out X --steps 1
check "  no directory made" absent X
expect "train --spm with --chars" 2 "--spm and --chars exclude each other" train --arch lm --spm spm.model --chars \
    --train raw.txt --out X --steps 1

# an encoder-decoder: translate reads raw text and writes text (the pieces joined)
head -60 raw.txt >src.txt
# shellcheck disable=SC2086
expect "train encdec --spm (copy)" 0 "done at step 2" train --train-src src.txt --train-tgt src.txt --spm spm.model \
    --joint --out E $small --enc-layers 1 --dec-layers 1 --steps 2
printf 'The model reads raw text.\n' >one.txt
expect "translate raw text" 0 "" translate --model E/model.safetensors --input one.txt --beam 1 --max-len-b 8
check "  one line of text, no pieces" sh -c '[ "$(wc -l <out.txt)" -eq 1 ] && ! grep -q "▁" out.txt'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
