#!/bin/sh
# End-to-end tests of Hugging Face models in the `tg` program on the tiny committed fixtures of
# tests/fixtures/hf: tg inspect of a foreign safetensors file, tg import, tg tokenize (HF's ids),
# tg embed (transformers' embeddings), tg export (the names and shapes transformers expects;
# tests/fixtures/hf_roundtrip.py checks the round trip through transformers, by hand), and bad
# input: files missing, unsupported types, wrong shapes and dtypes, a config contradicting the
# weights -- each a message naming the file and the cause, exit 1 and no output file.
# Usage: test_hf_tool.sh PATH/TO/tg     Prints "N passed, N failed"; exit status 1 on any failure.
set -u

TG=${1:?usage: test_hf_tool.sh PATH/TO/tg}
hf=$(cd "$(dirname "$0")" && pwd)/fixtures/hf
. "$hf/../../tool_lib.sh"
tool_start hf_tool

expect "inspect lists a Hugging Face file's tensors" 0 "bert.embeddings.word_embeddings.weight" inspect --model "$hf/bert/model.safetensors"
check "inspect: dtype, shape and parameter count" sh -c 'grep -q "F32 *\[461,32\]" out.txt && grep -q "^total: .* parameters" out.txt'
expect "import bert" 0 "tokenizer wordpiece" import --from hf "$hf/bert" --out bert.st
expect "import gpt2" 0 "tokenizer bpe_bytes" import --from hf "$hf/gpt2" --out gpt2.st
expect "tokenize with the model's tokenizer" 0 "" tokenize --model bert.st --text "$hf/bert/sentences.txt"
check "tokenize: first line [CLS] ... [SEP]" sh -c 'head -1 out.txt | grep -q "^101 .* 102$"'
check "tokenize: one line per input line" sh -c '[ "$(wc -l <out.txt)" = "$(wc -l <"$0")" ]' "$hf/bert/sentences.txt"
expect "embed: mean pooling, normalised" 0 "" embed --model bert.st --text "$hf/bert/sentences.txt" --output emb.txt
check "embed: 32 floats per line, unit length" awk 'NF != 32 { exit 1 } { s = 0; for (i = 1; i <= NF; i++) s += $i * $i; if (s < 0.9999 || s > 1.0001) exit 1 }' emb.txt
expect "embed --normalize off --pool cls" 0 "" embed --model bert.st --text "$hf/bert/sentences.txt" --normalize off --pool cls
check "embed --normalize off: not unit length" sh -c 'head -1 out.txt | awk "{ s = 0; for (i = 1; i <= NF; i++) s += \$i * \$i; exit (s > 0.99 && s < 1.01) }"'
expect "embed refuses a language model" 1 "is not an encoder" embed --model gpt2.st --text "$hf/bert/sentences.txt"
expect "export bert" 0 "" export --to hf bert.st out-bert
expect "export gpt2" 0 "" export --to hf gpt2.st out-gpt2
expect "exported names and shapes (BertForMaskedLM)" 0 "bert.encoder.layer.1.attention.self.query.weight" inspect --model out-bert/model.safetensors
check "exported shapes equal the original's" sh -c '"$0" inspect --model "$1/bert/model.safetensors" | grep "^  " | sort >a.txt; "$0" inspect --model out-bert/model.safetensors | grep "^  " | sort >b.txt; cmp -s a.txt b.txt' "$TG" "$hf"
check "exported gpt2 shapes equal the original's" sh -c '"$0" inspect --model "$1/gpt2/model.safetensors" | grep "^  " | sort >a.txt; "$0" inspect --model out-gpt2/model.safetensors | grep "^  " | sort >b.txt; cmp -s a.txt b.txt' "$TG" "$hf"
expect "re-import of the export" 0 "" import --from hf out-bert --out again.st
expect "the re-import embeds the same" 0 "" embed --model again.st --text "$hf/bert/sentences.txt" --output emb2.txt
check "same embeddings after the round trip" cmp -s emb.txt emb2.txt

expect "fill-mask with an imported BERT ([MASK] for <mask>, its WordPiece)" 0 "<mask> 1 of 1 (token 4)" fill-mask \
    --model bert.st --text "In the <mask> God created the heavens" --top-k 3
check "  three fillers, no special token among them" sh -c '[ "$(grep -c "^  [0-9] " out.txt)" -eq 3 ] &&
    ! grep -q "^  [0-9] [0-9.]* \[" out.txt'
expect "fill-mask --chars on an imported BERT refused" 2 "carries its tokenizer (wordpiece): --chars does not apply" \
    fill-mask --model bert.st --text "a <mask>" --chars

# tg train --init: the imported BERT trained further as a masked language model, in its own
# vocabulary layout ([CLS] ... [SEP], specials never masked); config, tokenizer and weights kept
i=0
while [ $i -lt 20 ]; do cat "$hf/bert/sentences.txt"; i=$((i + 1)); done >mlm.txt
expect "train --init an imported BERT" 0 "done at step 40" train --init bert.st --train mlm.txt --out B --steps 40 \
    --lr 0.002 --warmup 0 --schedule constant --log-interval 1 --max-tokens 400 --progress none
check "  the loss finite and falling (the mean of the last 5 steps below the first 5's)" awk -F'"loss":' '
    /"event":"train"/ { split($2, a, ","); l[++n] = a[1] + 0; if (a[1] !~ /^[0-9]/) bad = 1 }
    END { for (i = 1; i <= 5; i++) { f += l[i]; e += l[n - i + 1] } exit !(n == 40 && !bad && e < f) }' B/metrics.jsonl
expect "  the tokenizer kept" 0 "" tokenize --model B/model.safetensors --text "$hf/bert/sentences.txt"
"$TG" tokenize --model bert.st --text "$hf/bert/sentences.txt" >ids0.txt 2>/dev/null
check "  the same ids as the imported model's" cmp -s out.txt ids0.txt
check "  the configuration kept" sh -c '"$0" inspect --model bert.st | sed -n "/^configuration/,/^vocab/p" >c0.txt;
    "$0" inspect --model B/model.safetensors | sed -n "/^configuration/,/^vocab/p" >c1.txt; cmp -s c0.txt c1.txt' "$TG"
# the weights loaded, not drawn anew: one step at a tiny learning rate leaves the embeddings
expect "train --init, one step at lr 1e-9" 0 "done at step 1" train --init bert.st --train mlm.txt --out B1 --steps 1 \
    --lr 1e-9 --warmup 0 --schedule constant --progress none
expect "  embed with the continued model" 0 "" embed --model B1/model.safetensors --text "$hf/bert/sentences.txt" \
    --output emb1.txt
check "  its embeddings those of the imported model (to 1e-5)" sh -c 'paste -d" " emb.txt emb1.txt | awk "{ h = NF / 2;
    for (i = 1; i <= h; i++) { d = \$i - \$(i + h); if (d > 1e-5 || d < -1e-5) exit 1 } }"'
# --task classify: the imported BERT with a classification head on [CLS], CLASS<TAB>TEXT lines
i=0
while [ $i -lt 20 ]; do awk '{ print (NR % 2) "\t" $0 }' "$hf/bert/sentences.txt"; i=$((i + 1)); done >cls.txt
expect "train --init BERT --task classify" 0 "in 2 classes" train --init bert.st --task classify --train cls.txt \
    --dev cls.txt --out K --steps 30 --lr 0.002 --warmup 0 --schedule constant --log-interval 1 --progress none
check "  the dev accuracy of the classes in the metrics, above chance" awk -F'"accuracy":' \
    '/"event":"dev"/ { split($2, a, ","); acc = a[1] + 0 } END { exit !(acc > 0.6) }' K/metrics.jsonl
check "  the loss falling" awk -F'"loss":' '/"event":"train"/ { split($2, a, ","); l[++n] = a[1] + 0 }
    END { for (i = 1; i <= 5; i++) { f += l[i]; e += l[n - i + 1] } exit !(n == 30 && e < f) }' K/metrics.jsonl
check "  the checkpoint has the head" sh -c '"$0" inspect --model K/model.safetensors --tensors | grep -q "cls_head.weight  *\[2,32\]"' "$TG"
printf '1\tfine\nno class here\n' >bad_cls.txt
expect "train --task classify: a line without its class" 1 "bad_cls.txt' line 2: not CLASS<TAB>TEXT" train --init bert.st \
    --task classify --train bad_cls.txt --out K2 --steps 1
check "  no directory made" absent K2
expect "train --task classify of a language model refused" 2 "--task and --classes apply to --arch mlm" train \
    --init gpt2.st --task classify --train cls.txt --out K3 --steps 1
# tg score of the imported GPT-2: each line ids + <|endoftext|>, log P from its own tokenizer,
# equal to the log-softmax of transformers' logits (tests/fixtures/hf/gpt2/expected.safetensors)
expect "score --text with an imported GPT-2" 0 "tg score: 6 sequences" score --model gpt2.st --text "$hf/gpt2/sentences.txt"
check "  log P of every line as transformers' logits give it (to 1e-4)" python3 - "$hf/gpt2/expected.safetensors" out.txt <<'PYEOF'
import array, json, math, struct, sys
d = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n])
def get(k):
    v = h[k]; a, b = v["data_offsets"]
    return array.array({"F32": "f", "I32": "i"}[v["dtype"]], d[8 + n + a:8 + n + b])
got = [float(x) for x in open(sys.argv[2])]
for i, g in enumerate(got):
    ids, lg = get("ids.%d" % i), get("logits.%d" % i)
    V = len(lg) // len(ids)
    s = 0.0
    for j in range(len(ids)):
        row = lg[j * V:(j + 1) * V]
        mx = max(row)
        lse = mx + math.log(sum(math.exp(x - mx) for x in row))
        s += row[ids[j + 1] if j + 1 < len(ids) else 0] - lse
    if abs(s - g) > 1e-4:
        sys.exit("line %d: %.6f, transformers %.6f" % (i + 1, g, s))
PYEOF
expect "score --chars with an imported GPT-2 refused" 2 "carries its tokenizer (bpe_bytes): --chars does not apply" score \
    --model gpt2.st --text "$hf/gpt2/sentences.txt" --chars
expect "score --text with an imported BERT refused" 1 "tg score reads it for a language model" score --model bert.st \
    --text "$hf/bert/sentences.txt"

# tg train --init of the imported GPT-2: a token stream of its byte-level BPE, documents joined
# by <|endoftext|> (id 0 here, a target like any other), the positions past a short last block
# ignored (no padding id)
expect "train --init an imported GPT-2" 0 "done at step 30" train --init gpt2.st --train mlm.txt --documents lines \
    --out G --steps 30 --lr 0.003 --warmup 0 --schedule constant --log-interval 1 --max-tokens 512 --progress none
check "  the loss finite and falling" awk -F'"loss":' '
    /"event":"train"/ { split($2, a, ","); l[++n] = a[1] + 0; if (a[1] !~ /^[0-9]/) bad = 1 }
    END { for (i = 1; i <= 5; i++) { f += l[i]; e += l[n - i + 1] } exit !(n == 30 && !bad && e < f) }' G/metrics.jsonl
expect "  generate with the continued GPT-2: its text" 0 "In the beginning" generate --model G/model.safetensors \
    --prompt "In the beginning" --greedy --max-new 5
check "  the tokenizer kept" sh -c '"$0" inspect --model G/model.safetensors | grep -q "tokenizer: bpe_bytes (stored"' "$TG"
expect "train --init GPT-2 --arch mlm refused" 2 "is a model of arch lm: --arch mlm contradicts it" train --init gpt2.st \
    --arch mlm --train mlm.txt --out G2 --steps 1
check "  no directory made" absent G2

# bad input: a copy of the fixture, broken one way at a time
broken() { rm -rf d && cp -r "$hf/bert" d; }
broken; rm d/tokenizer.json
expect "missing tokenizer.json" 1 "d/tokenizer.json" import --from hf d --out x.st
check "no output file" absent x.st
broken; rm d/model.safetensors
expect "missing model.safetensors" 1 "d/model.safetensors" import --from hf d --out x.st
broken; sed 's/"bert"/"roberta"/' "$hf/bert/config.json" >d/config.json
expect "unsupported model_type" 1 "model_type 'roberta' is not supported" import --from hf d --out x.st
broken; sed 's/"BertForMaskedLM"/"BertForSequenceClassification"/' "$hf/bert/config.json" >d/config.json
expect "unsupported architecture" 1 "BertForSequenceClassification' is not supported" import --from hf d --out x.st
broken; sed 's/"type": "WordPiece", "unk_token"/"type": "Unigram", "unk_token"/' "$hf/bert/tokenizer.json" >d/tokenizer.json
expect "unsupported tokenizer type" 1 "tokenizer model type 'Unigram' is not supported" import --from hf d --out x.st
broken; sed 's/"intermediate_size": 64/"intermediate_size": 65/' "$hf/bert/config.json" >d/config.json
expect "config contradicting the weights" 1 "config.json implies [65,32]" import --from hf d --out x.st
broken; sed 's/"vocab_size": 461/"vocab_size": 462/' "$hf/bert/config.json" >d/config.json
expect "config contradicting the tokenizer" 1 "vocab_size is 462, but" import --from hf d --out x.st
check "no output file after any failure" absent x.st
echo "not json" >notjson.txt
broken; cp notjson.txt d/config.json
expect "malformed config.json" 1 "d/config.json" import --from hf d --out x.st
expect "tokenize: missing text" 1 "cannot read 'nope.txt'" tokenize --model bert.st --text nope.txt
expect "import: missing directory" 1 "nowhere/config.json" import --from hf nowhere --out x.st
check "no output file" absent x.st

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
