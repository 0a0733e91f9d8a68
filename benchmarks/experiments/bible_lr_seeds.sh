#!/usr/bin/env bash
# The seeds of the learning-rate study (docs/results.md §3): after bible_lr_grid.sh, each
# (variant, heads) cell of the grid gets seeds 2 and 3 at the noam factor where its seed-1 dev
# loss was lowest, in that factor's directory (the grid's seed 1 is kept), so that every
# variant is compared with mha at each one's own best rate over 3 seeds.
#   benchmarks/experiments/bible_lr_seeds.sh [BUILD_DIR] [extra compare.py options]
# Resumable as the grid is. TG_LR_GRID_OUT: the grid's directory (default docs/results/bible-lr).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-release}
shift || true
out=${TG_LR_GRID_OUT:-docs/results/bible-lr}
# "variant heads factor" per cell, from every factor directory's results.json
cells=$(python3 - "$out" <<'PY'
import glob, json, os, sys
best = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "f*", "results.json"))):
    factor = os.path.basename(os.path.dirname(path))[1:]
    for r in json.load(open(path))["runs"]:
        if r.get("status") != "ok" or r["seed"] != 1 or r.get("dev_loss") is None:
            continue
        key = (r["variant"], r["heads"])
        if key not in best or r["dev_loss"] < best[key][1]:
            best[key] = (factor, r["dev_loss"])
for (v, h), (f, loss) in sorted(best.items()):
    print(v, h, f)
PY
)
[ -n "$cells" ] || { echo "bible_lr_seeds: no finished grid runs in $out" >&2; exit 1; }
echo "$cells" | while read -r v h f; do
    echo "bible_lr_seeds: $v h$h at factor $f (its lowest seed-1 dev loss)"
    python3 benchmarks/experiments/compare.py --build-dir "$build" --task bible --size small --heads "$h" \
        --variants "$v" --seeds 3 --budget 1200 \
        --max-tokens 4096 --warmup 400 --lr-factor "$f" --eval-interval 200 --save-interval 100 \
        --beam 4 --head-dim 32 --ranks 1 --threads 2 --bench off --no-plots \
        --out "$out/f$f" "$@" </dev/null
done
