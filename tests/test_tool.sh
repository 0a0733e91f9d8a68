#!/bin/sh
# End-to-end tests of the `tg` program on tiny generated files (about a minute on 2 cores):
#  - dispatcher and --help of every command; exit status 2 for usage errors;
#  - tg prep statistics checked against hand-computed means and h_max;
#  - tg train a few steps (files, metrics, the h_max warning), --resume bit-exact against a
#    straight run, Ctrl-C (SIGINT) saving a checkpoint, --keep-checkpoints + tg average;
#  - tg score: batch 1 and batch 3 give identical output;
#  - tg eval on hand-made files with known BLEU / chrF / WER / PER / METEOR / ROUGE-L / CIDEr-D,
#    --json and --paired-bs;
#  - tg inspect: parameter counts worked out by hand;
#  - every bad input (missing / truncated checkpoint, unknown attention kind, mismatched line
#    counts, empty line, invalid UTF-8, option out of range, ...) gives a non-zero exit status,
#    a message, and no partial files.
# Usage: test_tool.sh PATH/TO/tg     Prints "N passed, N failed"; exit status 1 on any failure.
set -u

TG=${1:?usage: test_tool.sh PATH/TO/tg}
fixtures=$(cd "$(dirname "$0")" && pwd)/fixtures/models
. "$fixtures/../../tool_lib.sh" # ok, bad, run, expect, check, absent
tool_start tool

# ---------------------------------------------------------------- data
# reverse task over 8 symbols, lengths 2..7, from a fixed linear congruential generator
awk -v n=120 -v seed=7 -v pre=train 'BEGIN {
    x = seed
    for (i = 0; i < n; i++) {
        x = (x * 75 + 74) % 65537; len = 2 + x % 6; s = ""; t = ""
        for (k = 0; k < len; k++) { x = (x * 75 + 74) % 65537; w[k] = sprintf("s%d", x % 8) }
        for (k = 0; k < len; k++) { s = s (k ? " " : "") w[k]; t = t (k ? " " : "") w[len - 1 - k] }
        print s > (pre ".src"); print t > (pre ".tgt")
    } }'
awk -v n=12 -v seed=99 -v pre=dev 'BEGIN {
    x = seed
    for (i = 0; i < n; i++) {
        x = (x * 75 + 74) % 65537; len = 2 + x % 6; s = ""; t = ""
        for (k = 0; k < len; k++) { x = (x * 75 + 74) % 65537; w[k] = sprintf("s%d", x % 8) }
        for (k = 0; k < len; k++) { s = s (k ? " " : "") w[k]; t = t (k ? " " : "") w[len - 1 - k] }
        print s > (pre ".src"); print t > (pre ".tgt")
    } }'
small="--d-model 16 --heads 2 --enc-layers 1 --dec-layers 1 --d-ff 32 --max-len 12 --joint
       --max-tokens 200 --schedule constant --lr 0.003 --progress lines --log-interval 2"

# ---------------------------------------------------------------- dispatcher and help
expect "tg --help" 0 "commands:" --help
expect "tg without a command" 2 "usage: tg <command>"
expect "unknown command" 2 "unknown command 'bogus'" bogus
for c in prep train translate score eval inspect average; do
    expect "tg $c --help" 0 "usage: tg $c" "$c" --help
done
expect "unknown option" 2 "unknown option '--frobnicate'" score --frobnicate 3

# ---------------------------------------------------------------- prep
printf 'a b c\nd e\n' >p.src
printf 'x\ny z w\n' >p.tgt
expect "prep statistics" 0 "h_max = floor(d_model / n̄) = floor(64 / 2.250) = 28" prep --src p.src --tgt p.tgt --d-model 64
check "prep mean lengths without </s>" grep -q "mean length, without </s> *2.500 *2.000" out.txt
check "prep mean lengths with </s>" grep -q "mean length, with </s> *3.500 *3.000" out.txt
check "prep sentence counts" grep -q "sentences *2 *2" out.txt
expect "prep --joint --out writes a vocabulary" 0 "" prep --src p.src --tgt p.tgt --joint --out vocab
check "prep vocabulary file" sh -c '[ "$(head -4 vocab/vocab.joint | tr "\n" " ")" = "<pad> <unk> <s> </s> " ] && [ "$(wc -l <vocab/vocab.joint)" -eq 13 ]'
expect "prep --heads above h_max warns" 0 "warning: 40 heads > h_max = 28" prep --src p.src --tgt p.tgt --d-model 64 --heads 40
expect "prep --chars (a ▁ b ▁ c: spaces are tokens)" 0 "floor(64 / 3.500) = 18" prep --src p.src --tgt p.tgt --chars --d-model 64

# ---------------------------------------------------------------- train
# shellcheck disable=SC2086
expect "train 6 steps" 0 "done at step 6" train --train-src train.src --train-tgt train.tgt \
    --dev-src dev.src --dev-tgt dev.tgt --out A --steps 6 --eval-interval 3 $small
check "train wrote model, state, metrics" sh -c '[ -s A/model.safetensors ] && [ -s A/state.safetensors ] && [ -s A/metrics.jsonl ]'
check "metrics.jsonl has train and dev events" sh -c 'grep -c "\"event\":\"train\"" A/metrics.jsonl | grep -qx 3 && grep -c "\"event\":\"dev\"" A/metrics.jsonl | grep -qx 2'
check "plain progress lines off a terminal" grep -q "^step 2 epoch 0 loss" err.txt
# shellcheck disable=SC2086
expect "train: heads above h_max warns" 0 "warning: 8 heads > h_max" train --train-src train.src --train-tgt train.tgt \
    --out W --steps 1 $small --heads 8
# TG_PROFILE: the run's steps after its first, by op and by product shape, at the end
export TG_PROFILE=1
# shellcheck disable=SC2086
expect "train with TG_PROFILE reports steps 2-3" 0 "TG_PROFILE: steps 2-3 of this run" train \
    --train-src train.src --train-tgt train.tgt --out P --steps 3 $small
unset TG_PROFILE
check "the report has the products by shape" grep -q "^matmul by shape:" err.txt
# the same 6 steps as 3 + resume 3: identical checkpoint bytes
# shellcheck disable=SC2086
expect "train 3 steps" 0 "done at step 3" train --train-src train.src --train-tgt train.tgt \
    --dev-src dev.src --dev-tgt dev.tgt --out B --steps 3 --eval-interval 3 $small
check "half-way checkpoint differs" sh -c '! cmp -s A/model.safetensors B/model.safetensors'
expect "train --resume to step 6" 0 "resuming at step 3" train --out B --resume --steps 6
check "resumed checkpoint is byte-identical to the straight run" cmp -s A/model.safetensors B/model.safetensors
expect "existing model without --resume" 1 "already holds a model" train --train-src train.src --train-tgt train.tgt \
    --out A --steps 2
check "existing model left untouched" cmp -s A/model.safetensors B/model.safetensors
# keep checkpoints, then average the last two
# shellcheck disable=SC2086
expect "train --keep-checkpoints 2" 0 "" train --train-src train.src --train-tgt train.tgt --out K --steps 4 \
    --save-interval 1 --keep-checkpoints 2 $small
check "only the last two checkpoints kept" sh -c '[ ! -e K/checkpoint-2.safetensors ] && [ -e K/checkpoint-3.safetensors ] && [ -e K/checkpoint-4.safetensors ]'
expect "average --dir --last 2" 0 "mean of 2 checkpoints" average --dir K --last 2 --out K/avg.safetensors
expect "average of one model twice" 0 "" average --out same.safetensors A/model.safetensors A/model.safetensors
check "average of identical checkpoints is the checkpoint" cmp -s same.safetensors A/model.safetensors
expect "average of different models refused" 1 "not checkpoints of one model" average --out x.safetensors \
    A/model.safetensors W/model.safetensors
check "no output from a refused average" absent x.safetensors
# SIGINT: a checkpoint is saved, exit status 130, and the run resumes
# shellcheck disable=SC2086
"$TG" train --train-src train.src --train-tgt train.tgt --out I --steps 1000000 $small >i.out 2>i.err &
pid=$!
n=0
while [ ! -s I/metrics.jsonl ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
kill -INT $pid 2>/dev/null
n=0
while kill -0 $pid 2>/dev/null && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
if kill -0 $pid 2>/dev/null; then kill -9 $pid; fi
wait $pid
rc=$?
check "SIGINT: exit status 130" [ "$rc" -eq 130 ]
check "SIGINT: checkpoint saved and reported" sh -c '[ -s I/model.safetensors ] && [ -s I/state.safetensors ] && grep -q "interrupted at step" i.err'
expect "SIGINT: the run resumes" 0 "resuming at step" train --out I --resume --steps 2000000 --minutes 0.001

# ---------------------------------------------------------------- score
expect "score --batch 1" 0 "" score --model A/model.safetensors --src dev.src --tgt dev.tgt --batch 1
cp out.txt s1.txt
expect "score --batch 3" 0 "" score --model A/model.safetensors --src dev.src --tgt dev.tgt --batch 3
check "score: batch 1 and batch 3 identical" cmp -s s1.txt out.txt
check "score: one line per pair" [ "$(wc -l <s1.txt)" -eq 12 ]
check "score: negative decimals with 6 digits" sh -c '! grep -vqE "^-[0-9]+\.[0-9]{6}$" s1.txt'

# ---------------------------------------------------------------- eval
printf 'the cat sat on the mat\nhello world\n' >ref.txt
cp ref.txt hyp_same.txt
expect "eval identical: BLEU 100" 0 "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:tgraph = 100.00" \
    eval --hyp hyp_same.txt --ref ref.txt --metric bleu,chrf,wer
check "eval identical: chrF 100" grep -q "^chrF2|.* = 100.00$" out.txt
check "eval identical: WER 0" grep -q "^WER|nrefs:1|mode:levenshtein|version:tgraph = 0.00 " out.txt
printf 'a b c d\n' >r1.txt
printf 'a x c\n' >h1.txt
expect "eval WER by hand: 2 errors / 4 words" 0 "= 50.00 (errors = 2 ref_words = 4)" eval --hyp h1.txt --ref r1.txt --metric wer
expect "eval --tokenize none" 0 "tok:none" eval --hyp h1.txt --ref r1.txt --metric bleu --tokenize none
printf 'A B ||| A C\nX Y\n' >g.refs
printf 'A C\nX Y Z\n' >g.hyp
expect "eval G2P WER with .refs: 1 of 2 words wrong" 0 "WER|nrefs:var|mode:g2p|version:tgraph = 50.00 (words_wrong = 1 words = 2)" \
    eval --hyp g.hyp --ref g.refs --metric wer,per
check "eval G2P PER: 1 error / 4 phonemes of the closest references" grep -qF "PER|nrefs:var|ref:closest|version:tgraph = 25.00 (phone_errors = 1 ref_phones = 4)" out.txt
expect "eval BLEU with several references per line" 1 "line 1 holds several references" eval --hyp g.hyp --ref g.refs --metric bleu
check "eval: no partial output on error" [ ! -s out.txt ]
expect "eval unknown metric" 2 "unknown metric 'ter'" eval --hyp g.hyp --ref g.refs --metric wer,ter
expect "eval unknown tokenizer" 2 "unknown tokenize 'intl'" eval --hyp g.hyp --ref g.refs --tokenize intl
printf 'one\n' >h2.txt
expect "eval mismatched line counts" 1 "has 1 lines but" eval --hyp h2.txt --ref ref.txt
# METEOR by hand on identical lines: P = R = 1, one chunk of m words: 1 - 0.5 (1/m)^3;
# "the cat sat on the mat" (m = 6) and "hello world" (m = 2): mean 96.76. ROUGE-L: 100.
# CIDEr-D: every n-gram is in one reference of two (idf log 2), cosine 1 per order present:
# 10 for the 6-word line (orders 1-4), 10 (1 + 1 + 0 + 0) / 4 = 5 for "hello world": 7.5.
expect "eval METEOR by hand" 0 "METEOR|nrefs:1|case:lc|tok:13a|stem:porter|syn:no|a:0.9|b:3|g:0.5|version:tgraph = 96.76" \
    eval --hyp hyp_same.txt --ref ref.txt --metric meteor,rouge_l,cider
check "eval ROUGE-L identical: 100" grep -q "^ROUGE-L|nrefs:1|case:lc|tok:13a|stem:no|version:tgraph = 100.00$" out.txt
check "eval CIDEr-D by hand: 7.5" grep -q "^CIDEr-D|.*|sigma:6|.* = 7.5000$" out.txt
expect "eval --json" 0 '"scores": {' eval --hyp hyp_same.txt --ref ref.txt --metric bleu,meteor,rouge_l --json
check "eval --json: the numbers unrounded" grep -q '"meteor": 96.759259259259' out.txt
check "eval --json: signatures" grep -qF '"bleu": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:tgraph"' out.txt
if command -v python3 >/dev/null; then
    check "eval --json: one valid JSON object" python3 -c 'import json,sys; d=json.load(open("out.txt")); sys.exit(abs(d["scores"]["rouge_l"] - 100) > 1e-9)'
fi
printf 'the cat sat on a mat\nhello\n' >hyp_base.txt
expect "eval --paired-bs" 0 "paired-bs|BLEU|samples:99|seed:5: baseline = " \
    eval --hyp hyp_same.txt --baseline hyp_base.txt --ref ref.txt --metric bleu,chrf,meteor --paired-bs --samples 99 --seed 5
check "eval --paired-bs: one line per metric" [ "$(grep -c '^paired-bs|' out.txt)" -eq 3 ]
check "eval --paired-bs: the system's own line unchanged" grep -q "^BLEU|.* = 100.00 " out.txt
cp out.txt pbs1.txt
run eval --hyp hyp_same.txt --baseline hyp_base.txt --ref ref.txt --metric bleu,chrf,meteor --paired-bs --samples 99 --seed 5
check "eval --paired-bs: seeded, reproducible" cmp -s out.txt pbs1.txt
# a system against itself: every resampled difference is 0, p = 1/(samples + 1) as in sacreBLEU
expect "eval --paired-bs: identical systems" 0 "diff = +0.00 p = 0.0100" \
    eval --hyp hyp_base.txt --baseline hyp_base.txt --ref ref.txt --metric bleu --paired-bs --samples 99
expect "eval --paired-bs --json" 0 '"p_value": 0.01' \
    eval --hyp hyp_base.txt --baseline hyp_base.txt --ref ref.txt --metric bleu --paired-bs --samples 99 --json
check "eval --paired-bs --json: baseline named" grep -q '"baseline": "hyp_base.txt"' out.txt
expect "eval --paired-bs needs --baseline" 2 "--paired-bs and --baseline go together" eval --hyp h1.txt --ref r1.txt --paired-bs
expect "eval --paired-bs: not for G2P" 1 "--paired-bs supports" eval --hyp g.hyp --baseline g.hyp --ref g.refs --metric wer --paired-bs
printf '\n' >empty.txt
expect "eval: one empty line each" 0 "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:tgraph = 0.00" \
    eval --hyp empty.txt --ref empty.txt --metric bleu,meteor,rouge_l,cider

# ---------------------------------------------------------------- inspect
expect "inspect" 0 "d_model 16, heads 2 (head dim 8), d_ff 32" inspect --model A/model.safetensors
V=$(sed -n 's/^vocabularies: source \([0-9]*\),.*/\1/p' out.txt)
# by hand, d = 16, d_ff = 32, one shared V x d table:
#   attention 4d^2 + 4d = 1088; FFN 2 d d_ff + d_ff + d = 1072; norm 2d = 32
#   encoder layer 1088 + 1072 + 2*32 = 2224; decoder layer 2*1088 + 1072 + 3*32 = 3344
want=$(( 16 * V + 2224 + 3344 ))
wantc=$(awk -v n="$want" 'BEGIN { s = sprintf("%d", n); r = ""
    while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
    print s r }')
check "inspect: total = 16 V + 5568 (V = $V)" grep -qE "^total \(.* tensors\) +$wantc$" out.txt
check "inspect: encoder layer 0 = 2,224" grep -qE "^  encoder layer 0 +2,224$" out.txt
check "inspect: decoder cross-attention = 1,088" grep -qE "^    cross_attn \(mha\) +1,088$" out.txt

# ---------------------------------------------------------------- bad inputs: exit status, message, no partial files
expect "score: missing checkpoint" 1 "nothere.safetensors" score --model nothere.safetensors --src dev.src --tgt dev.tgt
check "score: no output for a missing checkpoint" [ ! -s out.txt ]
head -c 100 A/model.safetensors >trunc.safetensors
expect "score: truncated checkpoint" 1 "trunc.safetensors" score --model trunc.safetensors --src dev.src --tgt dev.tgt
check "score: no output for a truncated checkpoint" [ ! -s out.txt ]
expect "inspect: truncated checkpoint" 1 "trunc.safetensors" inspect --model trunc.safetensors
mkdir T && cp A/state.safetensors T/ && cp trunc.safetensors T/model.safetensors
expect "train: resume from a truncated checkpoint" 1 "T/model.safetensors" train --train-src train.src \
    --train-tgt train.tgt --out T --resume --steps 8
check "train: the truncated run is left as it was" cmp -s T/model.safetensors trunc.safetensors
expect "train: resume without a state" 1 "cannot resume" train --train-src train.src --train-tgt train.tgt \
    --out A/nothing --resume --steps 8
expect "train: unknown attention kind" 2 "unknown attention 'sparse'" train --train-src train.src \
    --train-tgt train.tgt --out X1 --steps 2 --attention sparse
check "train: nothing written for an unknown attention kind" absent X1
head -n 5 train.tgt >short.tgt
expect "train: mismatched line counts" 1 "has 120 lines but 'short.tgt' has 5" train --train-src train.src \
    --train-tgt short.tgt --out X2 --steps 2
check "train: nothing written for mismatched line counts" absent X2
expect "score: mismatched line counts" 1 "has 12 lines but" score --model A/model.safetensors --src dev.src --tgt short.tgt
check "score: no output for mismatched line counts" [ ! -s out.txt ]
{ head -n 2 train.src; echo; tail -n 117 train.src; } >empty.src
expect "train: empty line" 1 "empty.src' line 3: empty line" train --train-src empty.src --train-tgt train.tgt \
    --out X3 --steps 2
check "train: nothing written for an empty line" absent X3
{ head -n 3 train.src; printf 's1 s\3772\n'; tail -n 116 train.src; } >utf.src
expect "train: invalid UTF-8" 1 "utf.src' line 4, byte 5: invalid UTF-8" train --train-src utf.src --train-tgt train.tgt \
    --out X4 --steps 2
check "train: nothing written for invalid UTF-8" absent X4
expect "score: invalid UTF-8" 1 "invalid UTF-8" score --model A/model.safetensors --src utf.src --tgt train.tgt
expect "train: --heads out of range" 2 "--heads 0 is out of range [1, 1024]" train --train-src train.src \
    --train-tgt train.tgt --out X5 --steps 2 --heads 0
check "train: nothing written for an option out of range" absent X5
expect "train: --dropout out of range" 2 "--dropout 1.5 is out of range" train --train-src train.src \
    --train-tgt train.tgt --out X6 --steps 2 --dropout 1.5
expect "train: --steps not a number" 2 "--steps expects an integer, got 'ten'" train --train-src train.src \
    --train-tgt train.tgt --out X7 --steps ten
expect "train: no stop condition" 2 "no stop condition" train --train-src train.src --train-tgt train.tgt --out X8
expect "train: d_model not a multiple of heads" 2 "not a multiple of heads" train --train-src train.src \
    --train-tgt train.tgt --out X9 --steps 1 --d-model 16 --heads 3
expect "train: missing data file" 1 "nothere.src" train --train-src nothere.src --train-tgt train.tgt --out X10 --steps 1
check "train: nothing written for bad options or data" sh -c '! ls -d X6 X7 X8 X9 X10 2>/dev/null | grep -q .'
printf '{"d_model": 16, "heads": 2, "bogus_key": 1}\n' >bad.json
expect "train: unknown key in --config" 2 "unknown option 'bogus_key'" train --train-src train.src \
    --train-tgt train.tgt --out X11 --steps 1 --config bad.json
printf '{"d_model": 16, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 32, "joint": true, "max_tokens": 200, "steps": 2, "progress": "none"}\n' >good.json
expect "train: --config JSON" 0 "done at step 2" train --train-src train.src --train-tgt train.tgt --out C --config good.json
expect "inspect: --config applied" 0 "d_model 16, heads 2" inspect --model C/model.safetensors
expect "score: --batch out of range" 2 "--batch 0 is out of range" score --model A/model.safetensors \
    --src dev.src --tgt dev.tgt --batch 0
awk 'NR == 1 { for (i = 0; i < 20; i++) printf "s1 "; print "s2"; next } { print }' dev.src >long.src
expect "score: sentence longer than max_len is an error" 1 "long.src' line 1: 21 tokens + </s> is longer than the model's max_len 12" \
    score --model A/model.safetensors --src long.src --tgt dev.tgt
check "score: no output for a too-long sentence" [ ! -s out.txt ]
# shellcheck disable=SC2086
expect "train: too-long pairs are skipped with a count" 0 "skipped 1 dev pairs longer than max_len 12" train \
    --train-src train.src --train-tgt train.tgt --dev-src long.src --dev-tgt dev.tgt --out L --steps 1 $small

# ---------------------------------------------------------------- the PyTorch reference
# tg score and greedy tg translate against tests/fixtures/models (every attention kind, post
# and pre LN; scores computed in float64 by PyTorch: relative tolerance 1e-4 for float32)
for f in "$fixtures"/*.safetensors; do
    name=$(basename "$f" .safetensors)
    run score --model "$f" --src "$fixtures/pairs.src" --tgt "$fixtures/pairs.tgt"
    if [ "$rc" -eq 0 ] && [ "$(wc -l <out.txt)" -eq "$(wc -l <"$fixtures/$name.scores")" ] &&
        paste out.txt "$fixtures/$name.scores" | awk '{ d = $1 - $2; if (d < 0) d = -d; r = $2 < 0 ? -$2 : $2
            if (d > 1e-4 * r + 1e-5) bad = 1 } END { exit bad }'; then
        ok "score $name equals PyTorch's"
    else
        bad "score $name equals PyTorch's (exit $rc)"
    fi
    run translate --model "$f" --beam 1 --input "$fixtures/pairs.src"
    if [ "$rc" -eq 0 ] && cmp -s out.txt "$fixtures/$name.greedy"; then
        ok "translate $name (greedy) equals PyTorch's"
    else
        bad "translate $name (greedy) equals PyTorch's (exit $rc)"
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
