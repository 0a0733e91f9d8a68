#!/bin/sh
# The `cuda_emu` test suite: build the CUDA backend's kernels and host code against the CPU
# emulation of the CUDA runtime (build.sh) and run tests/test_gpu.c on it, so the CUDA code is
# compiled and checked against the CPU backend on machines without a GPU.
#   sh tests/cuda_emu/run.sh BUILD_DIR     (BUILD_DIR: a meson build with the CUDA backend)
# SAN selects the sanitizers (default none here: a run takes minutes instead of a quarter of an
# hour under AddressSanitizer; `SAN=-fsanitize=address,undefined sh tests/cuda_emu/run.sh build`
# for the thorough run). Exits 77 (skipped) without g++ or python3.
set -e
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
for p in g++ gcc python3; do
    command -v $p >/dev/null 2>&1 || { echo "SKIP: $p not found"; exit 77; }
done
SAN=${SAN-} sh "$here/build.sh" "$1"
exec "$1/cuda_emu/test_gpu_emu"
