#!/usr/bin/env bash
# The learning-rate grid of the "does the verdict survive tuning" study (docs/results.md §3):
# Bible EN->ES at the sweep's size (d 128, 2+2 layers, 1,200 steps), heads 4 and 16, each of
# mha, interacting, fixed_head, talking_heads and the diagnostic interacting_sqrth (logits over
# sqrt(h), ours) at noam factor 0.2, 0.4, 0.8 and 1.6 (the sweep's 0.4 halved, doubled and
# doubled again, since mha's dev loss still fell at 0.8), one seed; each factor is its own
# resumable results directory (TG_LR_GRID_FACTORS picks some, TG_LR_GRID_OUT moves them).
#   benchmarks/experiments/bible_lr_grid.sh [BUILD_DIR] [extra compare.py options]
# Run it again to continue: finished runs are kept, interrupted training resumes.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-release}
shift || true
out=${TG_LR_GRID_OUT:-docs/results/bible-lr}
for f in ${TG_LR_GRID_FACTORS:-0.2 0.8 0.4 1.6}; do
    python3 benchmarks/experiments/compare.py --build-dir "$build" --task bible --size small --heads 4,16 \
        --variants mha,fixed_head,talking_heads,interacting,interacting_sqrth --seeds 1 --budget 1200 \
        --max-tokens 4096 --warmup 400 --lr-factor "$f" --eval-interval 200 --save-interval 100 \
        --beam 4 --head-dim 32 --ranks 1 --threads 2 --bench off --no-plots \
        --out "$out/f$f" "$@"
done
