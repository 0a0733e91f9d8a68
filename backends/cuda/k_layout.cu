/* CUDA kernel of the layout copies: a contiguous output gathered from a strided (contiguous
 * op) or broadcast (expand) source, 4-byte elements (f32 and i32 alike). Concat and pad need
 * no kernel: the host issues 2-D copies (cudaMemcpy2DAsync), see cuda_ops.c. */
#include "backends/cuda/tgcu.cuh"

__global__ void k_strided_copy(uint32_t *o, const uint32_t *src, tgcu_index ix, int64_t n) {
    TGCU_LOOP(e, n) {
        int64_t os, unused;
        tgcu_offsets(ix, e, &os, &unused);
        o[e] = src[os];
    }
}

extern "C" cudaError_t tgcu_strided_copy(cudaStream_t s, uint32_t *o, const uint32_t *src,
                                         const tgcu_index *ix, int64_t n) {
    if (n > 0) k_strided_copy<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(o, src, *ix, n);
    return cudaGetLastError();
}
