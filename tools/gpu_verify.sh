#!/bin/bash
# tools/gpu_verify.sh — one prepared check of the CUDA backend on a machine with a GPU.
#
#   OUT=/some/dir tools/gpu_verify.sh        (run from anywhere; default OUT=<repo>/gpu_out)
#
# Builds tgraph with -Dcuda=enabled (meson + ninja when present, else `pip install meson
# ninja`, else a direct gcc/nvcc build of the same sources), runs the GPU test (tests/test_gpu:
# every op and gradient against the CPU backend, dropout masks, optimizer updates, a training
# step) and the GPU benchmark (benchmarks/micro/bench_gpu: Transformer training steps), and writes
# $OUT/gpu_report.txt (plus $OUT/gpu_build.log). Exit status 0 when the build, the test and
# the benchmark all succeeded. Sized for about 10 minutes on one H200 with 16 cores; every
# step has its own time limit so that the report is written whatever happens.
#
# Then every other attention kind (one step against the CPU), and PyTorch's nn.Transformer on
# the same GPU and shapes (benchmarks/peer/nn_transformer_step.py --device cuda) when the
# machine's python3 has torch with CUDA.
#
# Missing build dependencies (OpenBLAS; Check is optional) can travel as Debian packages in
# <repo>/.debs, unpacked into /tmp/tgdeps, never into /. Prepare them on a Debian 12 machine:
#   mkdir -p .debs && (cd .debs && apt-get download libopenblas0-pthread \
#     libopenblas-pthread-dev libopenblas-dev libgfortran5 libquadmath0 check libsubunit0 \
#     libsubunit-dev pkgconf pkgconf-bin libpkgconf3) && echo /.debs/ >> .git/info/exclude
# TG_GPU_VERIFY_DIRECT=1 forces the direct build; TG_GPU_BUILD sets the build folder.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu_out}
mkdir -p "$OUT"
R=$OUT/gpu_report.txt
LOG=$OUT/gpu_build.log
B=${TG_GPU_BUILD:-/tmp/tg_gpu_build}
JOBS=$(nproc 2>/dev/null || echo 4)
: > "$R"
: > "$LOG"
T0=$(date +%s)

say() { echo "$*" | tee -a "$R"; }
section() { say ""; say "== $* (t+$(( $(date +%s) - T0 ))s)"; }
# run LIMIT_SECONDS CMD...: output into the report, status returned
run() {
    local lim=$1; shift
    say "\$ $*"
    timeout --kill-after=10 "$lim" "$@" > "$OUT/.cmd.log" 2>&1
    local rc=$?
    cat "$OUT/.cmd.log" >> "$R"
    cat "$OUT/.cmd.log"
    rm -f "$OUT/.cmd.log"
    [ $rc -eq 124 ] && say "(timed out after ${lim}s)"
    say "(exit status $rc)"
    return $rc
}

section "machine"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(uname -srm)  cores: $JOBS"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap \
    --format=csv,noheader 2>&1 | tee -a "$R"
export PATH=$PATH:/usr/local/cuda/bin
command -v nvcc > /dev/null && nvcc --version | tail -n 2 | tee -a "$R"
gcc --version 2>&1 | head -n 1 | tee -a "$R"
say "repository: $ROOT ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo 'no git'))"

ARCH=90
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
case "$CAP" in [0-9][0-9] | [0-9][0-9][0-9]) ARCH=$CAP ;; esac
say "gpu_arch: $ARCH"

# ---- dependencies carried as .deb files ----
if ls "$ROOT"/.debs/*.deb > /dev/null 2>&1; then
    section "unpacking $ROOT/.debs into /tmp/tgdeps"
    D=/tmp/tgdeps
    mkdir -p $D/pc
    for f in "$ROOT"/.debs/*.deb; do dpkg -x "$f" $D && say "  $(basename "$f")"; done
    # the .pc files name /usr: point them at the unpacked tree
    find $D/usr -name '*.pc' | while read -r pc; do
        sed "s|=/usr|=$D/usr|g; s|-L/usr|-L$D/usr|g; s|-I/usr|-I$D/usr|g" "$pc" > $D/pc/"$(basename "$pc")"
    done
    ML=$D/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG_PATH=$D/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export LD_LIBRARY_PATH=$ML:$ML/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LIBRARY_PATH=$ML:$ML/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}
    export CPATH=$D/usr/include:$D/usr/include/x86_64-linux-gnu/openblas-pthread${CPATH:+:$CPATH}
    export LDFLAGS="${LDFLAGS:-} -Wl,-rpath-link,$ML -Wl,-rpath-link,$ML/openblas-pthread"
    # pkg-config, when the machine has none (pkgconf, pkgconf-bin and libpkgconf3 carried)
    command -v pkg-config > /dev/null || export PATH=$PATH:$D/usr/bin
fi

# ---- build tools ----
section "build tools"
PYBIN=$(python3 -c 'import sys, os; print(os.path.dirname(sys.executable))' 2>/dev/null || true)
[ -n "$PYBIN" ] && export PATH=$PATH:$PYBIN:$HOME/.local/bin
have_tools() { command -v meson > /dev/null && command -v ninja > /dev/null; }
if ! have_tools; then
    say "meson/ninja not on PATH: trying pip"
    timeout 120 python3 -m pip install --user -q meson ninja >> "$LOG" 2>&1 || say "  pip install failed (no network?)"
fi
MODE=direct
if [ "${TG_GPU_VERIFY_DIRECT:-0}" = 1 ]; then
    say "TG_GPU_VERIFY_DIRECT=1: direct gcc/nvcc build"
elif have_tools; then
    MODE=meson
    say "meson $(meson --version), ninja $(ninja --version)"
else
    say "no meson: direct gcc/nvcc build"
fi

# ---- build ----
BUILD_OK=0
TEST_EXE=""
BENCH_EXE=""
if [ $MODE = meson ]; then
    section "meson build in $B"
    rm -rf "$B"
    # werror off here: a newer host compiler's new warnings must not cost the GPU run (the
    # development machines build with -Werror); warnings are counted in the report instead
    if timeout 120 meson setup "$B" "$ROOT" -Dcuda=enabled -Dgpu_arch="$ARCH" -Dwerror=false >> "$LOG" 2>&1; then
        sed -n '/Backends/,/Check tests/p' "$LOG" | tee -a "$R"
        if timeout 420 ninja -C "$B" -j "$JOBS" >> "$LOG" 2>&1; then BUILD_OK=1; fi
    else
        say "meson setup failed (see gpu_build.log); falling back to the direct build"
        MODE=direct
    fi
    if [ $BUILD_OK = 1 ]; then
        say "build: OK ($(grep -c 'warning' "$LOG") lines with 'warning' in gpu_build.log)"
        BENCH_EXE=$B/benchmarks/micro/bench_gpu
        TEST_EXE=$B/tests/test_gpu
        if [ ! -x "$TEST_EXE" ]; then # tests/ is only configured when Check is found
            say "tests/test_gpu not configured (no Check?): compiling it against libtgraph.a"
            CUDA_LIB=/usr/local/cuda/lib64
            read -r -a BLAS_LIBS <<< "$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas)"
            gcc -std=gnu11 -O2 -D_GNU_SOURCE -I"$ROOT/include" -I"$ROOT" "$ROOT/tests/test_gpu.c" \
                "$B/libtgraph.a" -L$CUDA_LIB -Wl,-rpath,$CUDA_LIB -lcudart -lcublas -lstdc++ \
                "${BLAS_LIBS[@]}" -fopenmp -lpthread -lm \
                -o "$B/test_gpu_direct" >> "$LOG" 2>&1 && TEST_EXE=$B/test_gpu_direct
        fi
    elif [ $MODE = meson ]; then
        say "build: FAILED"
        grep -E 'error|FAILED' "$LOG" | head -n 40 | tee -a "$R"
    fi
fi

if [ $MODE = direct ] && [ $BUILD_OK = 0 ]; then
    section "direct build in $B/direct"
    DB=$B/direct
    rm -rf "$DB"
    mkdir -p "$DB/obj"
    CUDA=/usr/local/cuda
    read -r -a BLAS_CFLAGS <<< "$(pkg-config --cflags openblas 2>/dev/null || echo "-I/usr/include/x86_64-linux-gnu/openblas-pthread")"
    read -r -a BLAS_LIBS <<< "$(pkg-config --libs openblas 2>/dev/null || echo "-lopenblas")"
    CFLAGS=(-std=gnu11 -O3 -D_GNU_SOURCE -fno-math-errno -fPIC -fopenmp -DTG_HAVE_CUDA=1
            -I"$ROOT/include" -I"$ROOT" -isystem "$CUDA/include" "${BLAS_CFLAGS[@]}")
    ok=1
    # the C sources each meson.build lists (files(...) entries)
    SRCS=""
    for d in core autograd backends/cpu backends/cuda models train; do
        for f in $(grep -o "'[A-Za-z0-9_]*\.c'" "$ROOT/$d/meson.build" | tr -d "'"); do SRCS="$SRCS $d/$f"; done
    done
    SRCS="$SRCS parallel/dist.c parallel/dist_stubs.c" # without MPI in the direct build
    for s in $SRCS; do
        o=$DB/obj/$(echo "$s" | tr '/' '_').o
        gcc "${CFLAGS[@]}" -c "$ROOT/$s" -o "$o" >> "$LOG" 2>&1 || { ok=0; say "  compile failed: $s"; }
    done
    for cu in "$ROOT"/backends/cuda/*.cu; do
        nvcc -std=c++17 -O3 --fmad=false -Xcompiler -fPIC -I"$ROOT/include" -I"$ROOT" \
            -gencode "arch=compute_$ARCH,code=sm_$ARCH" -gencode "arch=compute_$ARCH,code=compute_$ARCH" \
            -c "$cu" -o "$DB/obj/$(basename "$cu" .cu).cu.o" >> "$LOG" 2>&1 || { ok=0; say "  nvcc failed: $cu"; }
    done
    if [ $ok = 1 ]; then
        ar rcs "$DB/libtgraph.a" "$DB"/obj/*.o
        LIBS=("$DB/libtgraph.a" -L"$CUDA/lib64" "-Wl,-rpath,$CUDA/lib64" -lcudart -lcublas -lstdc++
              "${BLAS_LIBS[@]}" -fopenmp -lpthread -lm)
        gcc "${CFLAGS[@]}" "$ROOT/tests/test_gpu.c" "${LIBS[@]}" -o "$DB/test_gpu" >> "$LOG" 2>&1 || ok=0
        gcc "${CFLAGS[@]}" "$ROOT/benchmarks/micro/bench_gpu.c" "${LIBS[@]}" -o "$DB/bench_gpu" >> "$LOG" 2>&1 || ok=0
    fi
    if [ $ok = 1 ]; then
        BUILD_OK=1
        TEST_EXE=$DB/test_gpu
        BENCH_EXE=$DB/bench_gpu
        say "build: OK (direct)"
    else
        say "build: FAILED (direct); last lines of gpu_build.log:"
        tail -n 30 "$LOG" | tee -a "$R"
    fi
fi

# ---- test ----
TEST_RC=1
if [ $BUILD_OK = 1 ] && [ -x "$TEST_EXE" ]; then
    section "GPU test (tests/test_gpu: CUDA vs CPU backend)"
    run 300 env TG_NUM_THREADS="$JOBS" "$TEST_EXE"
    TEST_RC=$?
    if [ $MODE = meson ] && [ -x "$B/tests/test_gpu" ]; then
        section "meson test --suite gpu"
        run 300 meson test -C "$B" --suite gpu --print-errorlogs
    fi
fi

# ---- benchmark ----
BENCH_RC=1
if [ $BUILD_OK = 1 ] && [ -x "$BENCH_EXE" ]; then
    section "GPU benchmark (benchmarks/micro/bench_gpu)"
    run 150 "$BENCH_EXE" --config g2p-small --steps 20 --warmup-steps 3 --check 1
    BENCH_RC=$?
    run 200 "$BENCH_EXE" --config nmt-small --steps 10 --warmup-steps 3 --check 1
    rc=$?
    [ $rc != 0 ] && BENCH_RC=$rc
    if [ $(( $(date +%s) - T0 )) -lt 420 ]; then
        run 100 env TG_CUDA_TF32=1 "$BENCH_EXE" --config nmt-small --steps 10 --warmup-steps 2 --check 0
    fi
fi

# ---- the other attention kinds: each one's first step against the CPU's, then timed ----
if [ $BUILD_OK = 1 ] && [ -x "$BENCH_EXE" ] && [ $(( $(date +%s) - T0 )) -lt 360 ]; then
    section "attention kinds on the GPU (bench_gpu g2p-small, --check 1)"
    for k in fixed_head talking_heads interacting interacting_pairwise; do
        run 60 "$BENCH_EXE" --config g2p-small --attention $k --steps 10 --warmup-steps 2 --check 1 || BENCH_RC=1
    done
fi

# ---- the peer on the same GPU and shapes: PyTorch's nn.Transformer (fp32, then TF32) ----
PEER="$ROOT/benchmarks/peer/nn_transformer_step.py"
if [ -x "$BENCH_EXE" ] && [ $(( $(date +%s) - T0 )) -lt 380 ] &&
    python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1; then
    section "PyTorch nn.Transformer on the same GPU (benchmarks/peer/nn_transformer_step.py --device cuda)"
    G2P=(--d-model 256 --heads 4 --layers 3 --d-ff 1024 --src-vocab 30 --tgt-vocab 45 --batch 128 --src-len 10 --tgt-len 10)
    NMT=(--d-model 512 --heads 8 --layers 6 --d-ff 2048 --src-vocab 8000 --tgt-vocab 8000 --batch 32 --src-len 32 --tgt-len 32)
    run 90 python3 "$PEER" --device cuda "${G2P[@]}" --steps 20 --warmup-steps 3
    run 90 python3 "$PEER" --device cuda "${NMT[@]}" --steps 10 --warmup-steps 3
    run 90 python3 "$PEER" --device cuda --tf32 "${NMT[@]}" --steps 10 --warmup-steps 3
    # tgraph again after the peer, so that each ratio has a tgraph time on either side of it
    run 60 "$BENCH_EXE" --config g2p-small --steps 20 --warmup-steps 3 --check 0
    run 60 "$BENCH_EXE" --config nmt-small --steps 10 --warmup-steps 3 --check 0
fi

# ---- optional: memory checker, only if time is left ----
if [ $BUILD_OK = 1 ] && [ -x "$TEST_EXE" ] && command -v compute-sanitizer > /dev/null &&
    [ $(( $(date +%s) - T0 )) -lt 400 ]; then
    section "compute-sanitizer memcheck of test_gpu (inconclusive if it times out)"
    run 120 env TG_NUM_THREADS="$JOBS" compute-sanitizer --tool memcheck --error-exitcode 9 "$TEST_EXE" > /dev/null
fi

# data-parallel training on the GPU (docs/distributed.md): 2 ranks sharing this GPU through MPI
# (NCCL needs one GPU per rank, so TG_DIST_NCCL=0 takes the host path), against 1 process
DIST_RC=skipped
if [ "$MODE" = meson ] && [ -x "$B/tools/tg" ] && command -v mpirun > /dev/null && \
    grep -q "MPI *: *True" "$LOG" && [ $(( $(date +%s) - T0 )) -lt 450 ]; then
    section "2 MPI ranks on the GPU against 1 process (reverse task, SGD, dropout 0)"
    # under the build folder, not $OUT: only a few files come back from there
    DD=$B/dist && mkdir -p "$DD" && python3 "$ROOT/datasets/gen_synthetic.py" --tasks reverse \
        --train 2000 --dev 100 --test 100 --max-len 12 -q "$DD/data"
    A="--train-src $DD/data/reverse/train.src --train-tgt $DD/data/reverse/train.tgt --dev-src $DD/data/reverse/dev.src
       --dev-tgt $DD/data/reverse/dev.tgt --d-model 64 --heads 4 --enc-layers 2 --dec-layers 2 --d-ff 256 --dropout 0
       --optimizer sgd --schedule constant --lr 0.1 --warmup 0 --steps 20 --max-tokens 2048 --progress none --backend cuda"
    # shellcheck disable=SC2086
    run 60 "$B/tools/tg" train $A --out "$DD/one" --overwrite && \
        run 90 mpirun --allow-run-as-root --oversubscribe -np 2 -x TG_DIST_NCCL=0 "$B/tools/tg" train $A \
            --out "$DD/two" --overwrite && DIST_RC=0 || DIST_RC=1
    say "final dev losses (1 process, 2 ranks):"
    grep -h '"event":"dev"' "$DD/one/metrics.jsonl" "$DD/two/metrics.jsonl" 2>/dev/null | tail -n 40 | tee -a "$R"
fi

section "summary"
say "2-rank training on the GPU: $DIST_RC"
say "build: $([ $BUILD_OK = 1 ] && echo OK || echo FAILED) ($MODE)"
case $TEST_RC in 0) VERDICT=passed ;; 77) VERDICT="skipped: no GPU" ;; *) VERDICT=FAILED ;; esac
say "test_gpu: exit $TEST_RC ($VERDICT)"
say "bench_gpu: exit $BENCH_RC"
say "elapsed: $(( $(date +%s) - T0 ))s"
[ $BUILD_OK = 1 ] && [ $TEST_RC = 0 ] && [ $BENCH_RC = 0 ]
