#!/bin/sh
# tests/cuda_emu/build.sh BUILD_DIR — run the CUDA backend without a GPU (run.sh: suite cuda_emu).
#
# Compiles backends/cuda (kernels and host code) against a CPU emulation of the CUDA runtime
# subset it uses (inc/, emu_rt.cpp): device memory is host memory with bounds checks on every
# copy, cuBLAS SGEMM is a reference column-major loop with cuBLAS's argument checks, CUB's
# radix sort is std::stable_sort with a key-range check, and each kernel launch runs its blocks
# one after another, every CUDA thread a cooperative fiber with real __syncthreads barriers and
# warp shuffles (grids are capped at EMU_MAXGRID blocks, default 3, which the grid-stride
# kernels must handle). prep.py rewrites `k<<<g, b, 0, s>>>(args)` into an emulated launch.
# Everything is built with AddressSanitizer and UBSan (SAN= to change; SAN= alone: none).
#
# BUILD_DIR is a meson build with -Dcuda=enabled (its libtgraph.a gives the CPU side; the CUDA
# objects in it are replaced). Produces BUILD_DIR/cuda_emu/test_gpu_emu and bench_gpu_emu:
#   BUILD_DIR/cuda_emu/test_gpu_emu          # tests/test_gpu against the emulated GPU (~6 min)
#   BUILD_DIR/cuda_emu/bench_gpu_emu --config g2p-small --batch 4 --len 6 --steps 2
# EMU_NODEV=1 makes cudaGetDeviceCount fail (the no-GPU path). What it cannot show: timing,
# real races between blocks or warps, CUDA's libm rounding, real cuBLAS/CUB behaviour.
# shellcheck disable=SC2086  # $SAN and $BLAS are lists of flags
set -e
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
M=$(cd "$(dirname "$0")/../.." && pwd)
E=$M/tests/cuda_emu
BD=$(cd "$1" && pwd)
O=$BD/cuda_emu
SAN=${SAN--fsanitize=address,undefined}
[ -f "$BD/libtgraph.a" ] || { echo "no $BD/libtgraph.a: build the library first" >&2; exit 1; }
rm -rf "$O"
mkdir -p "$O/lib" "$O/gen" "$O/obj"
(cd "$O/lib" && ar x "$BD/libtgraph.a" && rm -f k_*.o backends_cuda_*.o ./*dist_mpi.c.o ./*dist_nccl.c.o ./*dist_stubs.c.o)
for f in "$M"/backends/cuda/*.cu; do
    b=$(basename "$f" .cu)
    python3 "$E/prep.py" "$f" > "$O/gen/$b.cpp"
    g++ -std=c++17 -O1 -g -ffp-contract=off $SAN -Wall -I"$E/inc" -I"$M/backends/cuda" -I"$M/include" \
        -I"$M" -c "$O/gen/$b.cpp" -o "$O/obj/$b.o"
done
# TGCU_BLAS_LINKED: blas_load.c takes the emulator's cuBLAS functions instead of opening the
# library
for f in cuda cuda_ops blas_load; do
    gcc -std=gnu11 -O1 -g $SAN -Wall -Wextra -Werror -D_GNU_SOURCE -DTG_HAVE_CUDA=1 \
        -DTGCU_BLAS_LINKED -I"$E/inc" -I"$M/include" -I"$M" -c "$M/backends/cuda/$f.c" \
        -o "$O/obj/$f.o"
done
# no MPI or NCCL under the emulator: the stubs of a build without them
gcc -std=gnu11 -O1 -g $SAN -Wall -Wextra -Werror -D_GNU_SOURCE -I"$M/include" -I"$M" \
    -c "$M/parallel/dist_stubs.c" -o "$O/obj/dist_stubs.o"
g++ -std=c++17 -O1 -g $SAN -I"$E/inc" -c "$E/emu_rt.cpp" -o "$O/obj/emu_rt.o"
BLAS=$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
for p in tests/test_gpu benchmarks/micro/bench_gpu; do
    n=$(basename $p)
    gcc -std=gnu11 -O1 -g $SAN -D_GNU_SOURCE -I"$M/include" -I"$M" -c "$M/$p.c" -o "$O/$n.o"
    g++ $SAN -fopenmp -o "$O/${n}_emu" "$O/$n.o" "$O"/obj/*.o "$O"/lib/*.o $BLAS -lm
    echo "built $O/${n}_emu"
done
