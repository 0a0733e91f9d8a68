#!/usr/bin/env bash
# The scale arm of the "does the verdict survive tuning and scale" study (docs/results.md §3):
# Bible EN->ES with the g2p-small-size model (d 256, 3+3 layers, d_ff 1024; h_max = floor(256 /
# 31.15) = 8) at 8 and 32 heads, mha / interacting / fixed_head (d_p 32) / talking_heads, 3 seeds,
# 2,300 steps of 4,096 tokens (5 epochs). fixed_head at 8 heads is mha (d_p = d/h), so 21 runs.
# One noam factor for all, 0.4 by default: the sweep's, and the learning-rate grid's best for
# interacting at d 128 (mha's best lies higher there), so the schedule favours the challenger;
# at d 256 it is mha's best of 0.2, 0.4 and 0.8 too (docs/results/bible-d256-lr/).
#   benchmarks/experiments/bible_d256.sh [BUILD_DIR] [extra compare.py options]
# Run it again to continue: finished runs are kept, interrupted training resumes from its last
# checkpoint (every 100 steps). TG_D256_FACTOR and TG_D256_OUT override factor and directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-release}
shift || true
python3 benchmarks/experiments/compare.py --build-dir "$build" --task bible --size g2p-small \
    --heads 8,32 --variants mha,fixed_head,talking_heads,interacting --seeds 3 --budget 2300 \
    --max-tokens 4096 --warmup 600 --lr-factor "${TG_D256_FACTOR:-0.4}" --eval-interval 400 \
    --save-interval 100 --beam 4 --head-dim 32 --ranks 1 --threads 2 --bench off \
    --out "${TG_D256_OUT:-docs/results/bible-d256}" "$@"
