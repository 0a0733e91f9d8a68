#!/usr/bin/env bash
# tgraph: the attention-variant comparison in one command.
#
#   ./run.sh [options]        install what is missing, build (release, build-release/), prepare
#                             the data and compare the attention variants; results/<run-id>/
#   ./run.sh --help           all options
#
# Default: the CMUdict G2P task, the five attention kinds (mha, fixed_head, talking_heads,
# interacting, interacting_pairwise) at the same model size, 4 heads, 2 minutes of training
# each (fixed_head's d_p 32 is d/h there: the same model as mha, trained once), seed 1, greedy
# decoding of the test split, then the training step against PyTorch.
# About 10 minutes on 2 cores, build included. As root it installs the Debian packages it needs
# (tools/install_deps.sh run); without root or network it says what is missing and, when no
# --task was given, falls back to the synthetic reverse task.
set -euo pipefail
cd "$(dirname "$0")"

usage() {
    cat <<'EOF'
usage: ./run.sh [options]

Train the Transformer with each attention variant on one task under the same size, heads,
budget and seeds; decode and score the test split; time a training step against PyTorch.
Writes results/<run-id>/: results.json, summary.md, curves.csv, curves/, plots/*.png.

  --task T           g2p (CMUdict grapheme->phoneme, default), bible (English->Spanish,
                     BPE), or a synthetic task: reverse, copy, sort
  --variants LIST    attention kinds, comma-separated (default: every kind of
                     `tg train --attention`; bible: mha,interacting); also interacting_noproj
                     (interacting without W_O, the authors' code)
  --heads LIST       head counts, e.g. 1,2,4,8,16,32 (the paper's sweep; default 4)
  --seeds N          seeds 1..N per configuration, reported as mean ± sd (default 1)
  --seeds-for LIST   more seeds for some variants, e.g. mha=3,interacting=3
  --out DIR          results directory; running again with the same --out (or --resume)
                     keeps finished runs and resumes interrupted training from its checkpoint
  --ranks N|auto     MPI ranks per training run (default 1; bible: auto = 2 on 2+ cores)
  --budget B         training budget per run: steps (3000) or time (90s, 2m, 1.5h; default 2m,
                     bible 4m)
  --size S           model preset: tiny (d 64, 2+2 layers), small (d 128, 2+2, default for g2p),
                     g2p-small (d 256, 3+3, d_ff 1024), base (d 512, 6+6, d_ff 2048: the
                     Transformer base model of the interacting-head paper)
  --backend B        cpu (default) or cuda (needs the CUDA toolkit and a GPU)
  --threads N        CPU threads (default: all cores)
  --beam K           beam size for test decoding (default 1: greedy; bible 4)
  --bench on|off|auto  the speed phase against PyTorch (default auto: when torch imports;
                     bible off)
  --bench-heads LIST, --bench-size S, --bench-rounds N, --bench-steps N
                     speed phase settings (default 4 heads, g2p-small, 2 rounds, 5 steps)
  --no-install       do not try to install packages
  -h, --help         this help; `benchmarks/experiments/compare.py --help` lists every option

Examples:
  ./run.sh                                             # the default comparison, ~10 min
  ./run.sh --heads 1,2,4,8,16,32 --seeds 3 --budget 20m --size g2p-small   # Table-3 sweep
  ./run.sh --task reverse --budget 300 --variants mha,interacting           # quick check
  ./run.sh --task bible                                # translation, the small table, < 30 min
  ./run.sh --task bible --heads 2,4,16 --seeds-for mha=3,interacting=3 \
      --variants mha,fixed_head,talking_heads,interacting,interacting_noproj,interacting_pairwise \
      --budget 1200 --max-tokens 4096 --warmup 400 --lr-factor 0.4 --eval-interval 200 \
      --save-interval 100 --beam 4 --head-dim 32 --out docs/results/bible-sweep   # the sweep (~8 h)
EOF
}

t0=$(date +%s)
say() { local s=$(($(date +%s) - t0)); printf '[run.sh %dm%02ds] %s\n' $((s / 60)) $((s % 60)) "$*"; }
die() { echo "run.sh: error: $*" >&2; exit 2; }

task="" backend=cpu install=1
args=()
while [ $# -gt 0 ]; do
    case "$1" in
    -h|--help) usage; exit 0 ;;
    --no-install) install=0 ;;
    --task) [ $# -ge 2 ] || die "--task needs a value"; task=$2; args+=("$1" "$2"); shift ;;
    --task=*) task=${1#--task=}; args+=("$1") ;;
    --backend) [ $# -ge 2 ] || die "--backend needs a value"; backend=$2; args+=("$1" "$2"); shift ;;
    --backend=*) backend=${1#--backend=}; args+=("$1") ;;
    *) args+=("$1") ;;
    esac
    shift
done
case "${task:-g2p}" in g2p|bible|reverse|copy|sort) ;; *) die "unknown task '$task' (g2p, bible, reverse, copy, sort)" ;; esac
case "$backend" in cpu|cuda) ;; *) die "unknown backend '$backend' (cpu, cuda)" ;; esac

# ---- 1. packages ------------------------------------------------------------------------------
say "step 1/3: packages"
deps_ok=1
if [ $install = 1 ]; then
    tools/install_deps.sh run || deps_ok=0
    if [ "$task" = bible ]; then
        miss=""
        for p in diatheke sword-text-web sword-text-sparv sentencepiece; do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || miss="$miss $p"
        done
        if [ -n "$miss" ] && [ "$(id -u)" = 0 ]; then
            echo "run.sh: installing$miss (the Bible corpus)"
            # shellcheck disable=SC2086
            { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
                --no-install-recommends $miss; } || deps_ok=0
        elif [ -n "$miss" ]; then
            echo "run.sh: the Bible task needs:$miss (run as root, or: apt-get install$miss)" >&2
        fi
    fi
fi
missing=""
for c in cc meson ninja pkg-config; do command -v "$c" >/dev/null 2>&1 || missing="$missing $c"; done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)
[ -n "$PY" ] || missing="$missing python3"
[ -z "$missing" ] || die "cannot build without:$missing (install as root: tools/install_deps.sh run)"
if [ "$backend" = cuda ] && ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    die "--backend cuda needs the CUDA toolkit (nvcc not found)"
fi
dict=${TG_G2P_DICT:-/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict}  # override: for tests
if [ -z "$task" ] && [ ! -f "$dict" ]; then
    echo "run.sh: the G2P corpus is missing ($dict: apt-get install pocketsphinx-en-us as root);" \
         "falling back to the synthetic task: --task reverse" >&2
    task=reverse
    args=(--task reverse "${args[@]}")
fi
[ -n "${TG_G2P_DICT:-}" ] && [ "${task:-g2p}" = g2p ] && args+=(--g2p-dict "$dict")
[ $deps_ok = 1 ] || echo "run.sh: some packages could not be installed; going on with what is there" >&2

# ---- 2. build ---------------------------------------------------------------------------------
dir=build-release
cuda=disabled
[ "$backend" = cuda ] && cuda=enabled
say "step 2/3: release build in $dir/ (tools/tg, benchmarks/micro/bench_step)"
if [ ! -f "$dir/build.ninja" ]; then
    mkdir -p "$dir"
    wipe=()
    [ -d "$dir/meson-private" ] && wipe=(--wipe)  # an earlier setup that failed
    meson setup "${wipe[@]}" "$dir" -Dbuildtype=release -Dcuda=$cuda >"$dir/setup.log" 2>&1 ||
        { tail -n 40 "$dir/setup.log" >&2; die "meson setup failed (see $dir/setup.log)"; }
    echo $cuda >"$dir/.run-sh-cuda"
elif [ "$(cat "$dir/.run-sh-cuda" 2>/dev/null)" != $cuda ]; then
    meson configure "$dir" -Dcuda=$cuda >/dev/null || die "meson configure -Dcuda=$cuda failed"
    echo $cuda >"$dir/.run-sh-cuda"
fi
ninja -C "$dir" tools/tg benchmarks/micro/bench_step >"$dir/build.log" 2>&1 ||
    { tail -n 40 "$dir/build.log" >&2; die "build failed (see $dir/build.log)"; }
say "built"

# ---- 3. the comparison ------------------------------------------------------------------------
say "step 3/3: benchmarks/experiments/compare.py ${args[*]}"
exec "$PY" benchmarks/experiments/compare.py --build-dir "$dir" "${args[@]}"
