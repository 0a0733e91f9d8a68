/* Device helpers shared by the CUDA kernels: launch geometry, index arithmetic, block
 * reductions, the CPU's fast exp, and Philox-4x32-10. Included by the .cu files only. */
#ifndef TG_TGCU_CUH
#define TG_TGCU_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "backends/cuda/cuda-impl.h"

#define TGCU_THREADS 256

/* Grid-stride loop: item i of n, whatever the grid size. */
#define TGCU_LOOP(i, n)                                                     \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

/* Blocks for a grid-stride loop over n items: enough to fill the GPU, never more than
 * needed. The kernels loop, so any cap is correct. */
static inline unsigned tgcu_grid(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b > 8192) b = 8192;
    return b < 1 ? 1u : (unsigned)b;
}

/* Threads per block for a row kernel of row length d: a multiple of the warp size, at most
 * 256 (short attention rows do not waste 256 threads). */
static inline int tgcu_row_threads(int64_t d) {
    if (d <= 32) return 32;
    if (d <= 64) return 64;
    if (d <= 128) return 128;
    return 256;
}

/* Element offsets of flat output index e in the two inputs of an index space. */
__device__ inline void tgcu_offsets(const tgcu_index &ix, int64_t e, int64_t *oa, int64_t *ob) {
    int64_t a = 0, b = 0;
    for (int i = ix.nd - 1; i >= 0; i--) {
        int64_t k = e % ix.shape[i];
        e /= ix.shape[i];
        a += k * ix.sa[i];
        b += k * ix.sb[i];
    }
    *oa = a;
    *ob = b;
}

template <typename T> __device__ inline T tgcu_warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
 * total. sh: __shared__ T[32]. Starts with a barrier so sh can be reused call after call. */
template <typename T> __device__ inline T tgcu_block_sum(T v, T *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = tgcu_warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (T)0;
    return tgcu_warp_sum(v); /* every warp reduces the same partials in the same order */
}

/* Maximum in the CPU's sense (m = x > m ? x : m from -inf): NaN is never selected. */
__device__ inline float tgcu_max2(float m, float x) { return x > m ? x : m; }

__device__ inline float tgcu_block_max(float v, float *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = tgcu_max2(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = tgcu_max2(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* tg_fast_expf of backends/cpu/cpu-impl.h, operation for operation (compiled without FMA
 * contraction, so the value is the CPU's bit for bit). */
__device__ inline float tgcu_fast_expf(float x) {
    x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
    float n = roundf(x * 1.44269504088896341f);
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    return p * __int_as_float(((int)n + 127) << 23);
}

/* Philox-4x32-10, as core/rng.c (Salmon et al., SC 2011). */
__device__ inline void tgcu_philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                   uint32_t k1, uint32_t out[4]) {
    for (int r = 0; r < 10; r++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c1 = lo1;
        c3 = lo0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

#endif
