#!/bin/sh
# End-to-end tests of the language-model families in the `tg` program (tg train --arch lm and
# --arch mlm, tg score --text, tg generate, tg inspect) on a tiny generated text: files
# written, perplexity and masked-token accuracy reported, cached generation equal to full
# recomputation, seeded sampling repeatable, and every wrong-family or too-long input refused
# with a message and no output file.
# Usage: test_lm_tool.sh PATH/TO/tg     Prints "N passed, N failed"; exit status 1 on any failure.
set -u

TG=${1:?usage: test_lm_tool.sh PATH/TO/tg}
fixtures=$(cd "$(dirname "$0")" && pwd)/fixtures/models
. "$fixtures/../../tool_lib.sh" # ok, bad, run, expect, check
tool_start lm_tool

little_corpus

small="--d-model 32 --heads 2 --dec-layers 2 --d-ff 64 --max-len 12 --dropout 0 --schedule constant --lr 0.003
 --warmup 10 --max-tokens 300 --progress none"
# shellcheck disable=SC2086
expect "train --arch lm" 0 "done at step 80" train --arch lm --documents lines --train train.txt --dev dev.txt --out L $small --steps 80 \
    --eval-interval 40
check "train wrote model, state, metrics" sh -c '[ -s L/model.safetensors ] && [ -s L/state.safetensors ] && [ -s L/metrics.jsonl ]'
check "dev perplexity in the metrics" grep -q '"event":"dev".*"ppl"' L/metrics.jsonl
expect "train --resume of an lm" 0 "resuming at step 80" train --out L --resume --steps 90
expect "inspect names the family" 0 "family: lm (decoder-only language model)" inspect --model L/model.safetensors
check "inspect: no encoder" grep -q "encoder layers 0, decoder layers 2" out.txt
expect "inspect an old checkpoint: encdec" 0 "family: encdec (encoder-decoder)" inspect --model "$fixtures/mha_pre.safetensors"
expect "score --text" 0 "tg score: 3 sequences, 18 tokens with </s>" score --model L/model.safetensors --text dev.txt
check "score: one line per sequence" sh -c '[ "$(wc -l <out.txt)" -eq 3 ]'
# scored line by line, a model trained on the lines as documents of one stream (each after the
# one before): well below the 13 of a uniform guess
check "score: perplexity below 3 on the training text" sh -c \
    'awk "/perplexity/ { exit !(\$NF < 3.0) }" err.txt'
expect "generate greedy" 0 "the cat sat on the mat" generate --model L/model.safetensors --prompt "the cat" --greedy
cp out.txt greedy.txt
expect "generate greedy without the cache" 0 "" generate --model L/model.safetensors --prompt "the cat" --greedy --no-cache
check "cached greedy = full recomputation" cmp -s out.txt greedy.txt
printf 'a\nthe dog\n\n' >prompts.txt
expect "generate sampled from a file" 0 "" generate --model L/model.safetensors --input prompts.txt --temperature 1.5 \
    --top-k 8 --top-p 0.95 --seed 4 --output s1.txt
expect "generate sampled without the cache" 0 "" generate --model L/model.safetensors --input prompts.txt \
    --temperature 1.5 --top-k 8 --top-p 0.95 --seed 4 --no-cache --output s2.txt
check "sampled: three lines" sh -c '[ "$(wc -l <s1.txt)" -eq 3 ]'
check "cached sampling = full recomputation (same seed)" cmp -s s1.txt s2.txt

# wrong family, too long, bad options: an error and no output file
expect "generate with an encoder-decoder" 1 "is an encoder-decoder model (arch encdec)" generate \
    --model "$fixtures/mha_pre.safetensors" --prompt "a" --output g1.txt
check "  nothing written" sh -c '[ ! -e g1.txt ]'
expect "generate: prompt longer than max_len" 1 "the prompt has 12 tokens; the model takes at most 11 (+ <s>)" generate \
    --model L/model.safetensors --prompt "the cat sat on the mat the cat sat on the mat" --output g2.txt
check "  nothing written" sh -c '[ ! -e g2.txt ]'
expect "translate with a language model" 1 "is a language model (arch lm)" translate --model L/model.safetensors \
    --input dev.txt
expect "score pairs with a language model" 1 "score a text with --text FILE" score --model L/model.safetensors \
    --src dev.txt --tgt dev.txt
expect "score --text with an encoder-decoder" 1 "score pairs with --src and --tgt" score \
    --model "$fixtures/mha_pre.safetensors" --text dev.txt
expect "train --arch lm with --train-src" 2 "--arch lm trains on one text" train --arch lm --train-src dev.txt \
    --train-tgt dev.txt --out X --steps 1
expect "train --train without --arch lm" 2 "the texts of --arch lm" train --train dev.txt --out X --steps 1
expect "train --arch lm --enc-layers 2" 2 "has no encoder" train --arch lm --train dev.txt --out X --steps 1 --enc-layers 2
check "  no directory created" sh -c '[ ! -e X ]'
expect "generate --greedy with --top-k" 2 "--greedy takes no" generate --model L/model.safetensors --greedy --top-k 3

# a token stream: one file is one document, empty lines are line breaks (↵), a one-line corpus
# trains, generation runs to --max-new-tokens (past the model's positions) or </s>
printf 'abc abc abc\n\nabc abc abc abc abc abc abc abc abc abc abc abc abc abc abc abc\n' >one.txt
expect "train --arch lm on a text with an empty line" 0 "a token stream of" train --arch lm --chars \
    --train one.txt --out S --d-model 16 --heads 2 --dec-layers 1 --d-ff 32 --block 16 --dropout 0 \
    --schedule constant --lr 0.01 --warmup 0 --max-tokens 200 --progress none --steps 60 --holdout 0
check "  blocks of --block positions, no dev" grep -q "blocks of 16 positions; dev: 0 tokens (none)" err.txt
expect "generate past the model's positions" 0 "" generate --model S/model.safetensors --chars --prompt "abc" \
    --greedy --max-new-tokens 60
check "  60 new tokens over the model's 16 positions" sh -c '[ "$(head -c 63 out.txt | wc -c)" -eq 63 ]'
printf 'just one line of text without any break at all, but long\n' >line.txt
expect "train --arch lm on a one-line corpus" 0 "(1 document) in" train --arch lm --chars --train line.txt \
    --out O --d-model 16 --heads 2 --dec-layers 1 --d-ff 32 --block 8 --progress none --steps 2
# each family's own defaults (tools/train_defaults.c): a small model for a small text, PyTorch's Adam
# and a short warm-up for lm and mlm; the encoder-decoder keeps the paper's base model and recipe
expect "train --arch lm with the family's defaults" 0 "done at step 1" train --arch lm --chars --train line.txt \
    --out F --progress none --steps 1
expect "  inspect: the small lm" 0 "d_model 128, heads 4 (head dim 32), d_ff 512" inspect --model F/model.safetensors
check "  4 decoder layers, 128 positions, one vocabulary" sh -c 'grep -q "encoder layers 0, decoder layers 4" out.txt && grep -q "^vocabulary: [0-9]* tokens (one table" out.txt &&
    grep -q "max_len 128," out.txt && ! grep -q cross out.txt'
check "  stored options: Adam 0.999 / 1e-8, warm-up half a 1-step run, clip 1, cosine over --steps" sh -c \
    'grep -aq "beta2[^,]*:0.999," F/state.safetensors && grep -aq "eps[^,]*:1e-08" F/state.safetensors &&
     grep -aq "warmup[^,]*:0," F/state.safetensors && grep -aq "clip[^,]*:1," F/state.safetensors &&
     grep -aq "schedule[^,]*cosine" F/state.safetensors'
expect "train --help --arch lm shows the lm defaults" 0 "" train --arch lm --help
check "  d-model 128, beta2 0.999" sh -c 'grep -q -- "--d-model D .*(default 128)" out.txt &&
    grep -q -- "--beta2 B .*(default 0.999)" out.txt && grep -q "PyTorch" out.txt'
expect "train --help shows the encoder-decoder's" 0 "" train --help
check "  d-model 512, beta2 0.98, warmup 4000" sh -c 'grep -q -- "--d-model D .*(default 512)" out.txt &&
    grep -q -- "--beta2 B .*(default 0.98)" out.txt && grep -q -- "--warmup N .*(default 4000)" out.txt'
expect "train --arch mlm with the family's defaults" 0 "done at step 1" train --arch mlm --train train.txt \
    --out FM --progress none --steps 1
expect "  inspect: the small mlm" 0 "encoder layers 4, decoder layers 0" inspect --model FM/model.safetensors
expect "train --arch lm --block past --max-len" 2 "--block 64 is past the model's 32 positions" train --arch lm \
    --train line.txt --out X --steps 1 --block 64 --max-len 32
expect "train --arch lm --holdout with --dev" 2 "--holdout and --dev exclude each other" train --arch lm \
    --train line.txt --dev line.txt --out X --steps 1 --holdout 0.2
expect "train --arch mlm --block" 2 "--block applies to --arch lm" train --arch mlm --train dev.txt --out X \
    --steps 1 --block 8
check "  no directory created" sh -c '[ ! -e X ]'

# the blocks of later Transformers: RoPE, SwiGLU, RMSNorm
# shellcheck disable=SC2086
expect "train --arch lm --pos rope --activation swiglu --norm-kind rms --window 3" 0 "done at step 40" train \
    --arch lm --train train.txt --out R $small --steps 40 --pos rope --activation swiglu --norm-kind rms --window 3
expect "inspect shows the blocks" 0 "norm pre (rms), pos rope, activation swiglu" inspect --model R/model.safetensors
check "inspect shows the window" grep -q "restricted to a window of 3" out.txt
expect "generate with RoPE, cached" 0 "" generate --model R/model.safetensors --prompt "the" --seed 2 --output r1.txt
expect "generate with RoPE, full" 0 "" generate --model R/model.safetensors --prompt "the" --seed 2 --no-cache --output r2.txt
check "RoPE: cached generation = full recomputation" cmp -s r1.txt r2.txt
expect "inspect --tensors of a RoPE model" 0 "" inspect --model R/model.safetensors --tensors
check "  no position table" sh -c '! grep -q pos_embed out.txt'

# attention weights: CSV per head and a heat-map grid per sub-layer
expect "attention of a language model" 0 "2 attention sub-layers" attention --model R/model.safetensors \
    --text "the cat sat" --out att
check "attention: a CSV per head, labelled" sh -c \
    'head -1 att/decoder.layers.1.self_attn.h1.csv | grep -qx "\"query \\\\ key\",\"<s>\",\"the\",\"cat\",\"sat\""'
if command -v gnuplot >/dev/null 2>&1; then
    check "attention: PNG heat maps (gnuplot)" sh -c '[ -s att/decoder.layers.0.self_attn.png ]'
fi
expect "attention of an encoder-decoder, its greedy translation" 0 "6 attention sub-layers" attention \
    --model "$fixtures/talking_heads_pre.safetensors" --src "a b c" --out att2 --no-png
check "attention: cross-attention files" sh -c '[ -s att2/decoder.layers.1.cross_attn.h0.csv ] && [ ! -e att2/decoder.layers.1.cross_attn.png ]'
expect "attention: --text for an encoder-decoder" 1 "give --src (and --tgt)" attention \
    --model "$fixtures/mha_pre.safetensors" --text "a" --out att3
check "  no directory created" sh -c '[ ! -e att3 ]'

# tg attention --stats: the rank of the pre-mask logits S per head over a file of inputs.
# every_row CSV EXPR: EXPR (awk, over the columns by their header names in c[...]) holds on
# every data row, and there is at least one row
every_row() {
    awk -F, -v expr="$2" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { for (k in col) c[k] = $col[k]; rows++
          ok = 1
          if (expr == "rank") ok = c["rank_mean"] <= c["width"] + 1e-9 && c["rank_mean"] <= c["bound_mean"] + 1e-9 &&
              c["bound_mean"] <= c["n_mean"] + 1e-9 && c["bound_mean"] <= c["m_mean"] + 1e-9 &&
              c["rank_over_bound"] <= 1 + 1e-9 && c["rank_mean"] >= 1
          else if (expr == "at_dk") ok = c["rank_mean"] == c["d_k"] && c["width_binds"] == 1 && c["at_bound"] == 1
          else if (expr == "below_dk") ok = c["width_binds"] == 0 && c["rank_mean"] <= c["n_mean"] + 1e-9
          if (!ok) { print "row " NR - 1 ": " $0; bad++ } }
        END { exit !(rows > 0 && !bad) }' "$1"
}
# every fixture kind (d_model 8, 2 heads: d_k 4, fixed_head 6) over the 8 pairs: rank <= d_k (h d_k for
# talking heads) and <= min(n, m), per sentence, so in the means
for k in mha_pre fixed_head_post talking_heads_pre interacting_post interacting_pairwise_pre; do
    expect "attention --stats of $k" 0 "over 8 inputs" attention --model "$fixtures/$k.safetensors" \
        --src-file "$fixtures/pairs.src" --tgt-file "$fixtures/pairs.tgt" --stats "st_$k.csv"
    check "  rank <= d_k and <= min(n, m) for every head" every_row "st_$k.csv" rank
done
check "  one line per sub-layer on stdout" grep -q "^decoder.layers.1.cross_attn .* 4 head pairs .* rank " out.txt
check "  pairwise: h^2 rows per sub-layer" sh -c '[ "$(grep -c "^encoder.layers.0.self_attn," st_interacting_pairwise_pre.csv)" -eq 4 ]'
# one pair of 8 and 7 tokens: every query and key count (>= 8) exceeds d_k = 4, so the width binds
# and the rank of every mha head's S is exactly d_k
echo "d e f a b c d e" >long.src
echo "F E D C B A F" >long.tgt
expect "attention --stats, n > d_k" 0 "rank 4.00 of bound 4.00 (width binds 100%, at bound 100%)" attention \
    --model "$fixtures/mha_pre.safetensors" --src-file long.src --tgt-file long.tgt --stats long.csv
check "  mha: rank = d_k in every head when d_k < n" every_row long.csv at_dk
# a language model (d_k 16, n <= 12: the width never binds) with --text-file, --limit
expect "attention --stats of a language model" 0 "over 2 inputs" attention --model R/model.safetensors \
    --text-file dev.txt --stats lm.csv --limit 2
check "  rank <= min(n, m) below the width" every_row lm.csv below_dk
check "  2 sub-layers x 2 heads" sh -c '[ "$(wc -l <lm.csv)" -eq 5 ]'
expect "attention --stats with --out" 2 "no --out" attention --model R/model.safetensors --text-file dev.txt \
    --stats x.csv --out att4
expect "attention --stats without input files" 2 "--stats needs --src-file" attention --model R/model.safetensors \
    --stats x.csv
expect "attention --src-file without --stats" 2 "go with --stats" attention --model R/model.safetensors \
    --src-file dev.txt --out att4
expect "attention --stats --text-file of an encoder-decoder" 1 "give --src-file (and --tgt-file)" attention \
    --model "$fixtures/mha_pre.safetensors" --text-file dev.txt --stats x.csv
head -3 "$fixtures/pairs.tgt" >three.tgt
expect "attention --stats: files of different lengths" 1 "has 8 lines and 'three.tgt' 3" attention \
    --model "$fixtures/mha_pre.safetensors" --src-file "$fixtures/pairs.src" --tgt-file three.tgt --stats x.csv
check "  no CSV written" sh -c '[ ! -e x.csv ] && [ ! -e att4 ]'

# the masked language model family (--arch mlm)
# shellcheck disable=SC2086
expect "train --arch mlm" 0 "done at step 60" train --arch mlm --train train.txt --dev dev.txt --out M \
    --d-model 32 --heads 2 --enc-layers 2 --d-ff 64 --max-len 12 --dropout 0 --schedule constant --lr 0.003 \
    --warmup 10 --max-tokens 300 --progress none --steps 60 --optimizer adamw --no-decay-vectors
expect "inspect names the mlm family" 0 "family: mlm (encoder-only masked language model)" inspect --model M/model.safetensors
check "inspect: no decoder" grep -q "encoder layers 2, decoder layers 0" out.txt
expect "score --text with an mlm: accuracy" 0 "masked tokens: accuracy" score --model M/model.safetensors --text dev.txt \
    --seed 7
cp out.txt mlm1.txt
expect "score --text with an mlm again" 0 "" score --model M/model.safetensors --text dev.txt --seed 7
check "mlm scores repeat with the seed" cmp -s out.txt mlm1.txt
check "mlm: dev accuracy on fresh masks in the metrics" grep -q '"event":"dev".*"accuracy"' M/metrics.jsonl
expect "fill-mask" 0 "<mask> 1 of 1 (token 2):" fill-mask --model M/model.safetensors --text "the <mask> sat" --top-k 3
check "  the filled text, then 3 fillers with probabilities" sh -c '[ "$(wc -l <out.txt)" -eq 5 ] &&
    sed -n 3p out.txt | grep -qE "^  1 [01]\.[0-9]{4} [a-z]+$"'
expect "fill-mask without a mask" 2 "--text has no <mask> token" fill-mask --model M/model.safetensors --text "the cat"
expect "fill-mask with a language model" 1 "tg fill-mask needs a masked language model" fill-mask \
    --model L/model.safetensors --text "the <mask>"
expect "train --arch mlm --static-masks" 0 "masked once (--static-masks)" train --arch mlm --train train.txt --out MS \
    --d-model 16 --heads 2 --enc-layers 1 --d-ff 32 --max-len 12 --progress none --steps 2 --static-masks
expect "generate with an mlm" 1 "is a masked language model (arch mlm)" generate --model M/model.safetensors --output g3.txt
check "  nothing written" sh -c '[ ! -e g3.txt ]'
expect "translate with an mlm" 1 "has no decoder" translate --model M/model.safetensors --input dev.txt
expect "train --arch mlm --dec-layers 1" 2 "has no decoder" train --arch mlm --train dev.txt --out X --steps 1 --dec-layers 1

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
