/* EMULATION ONLY: device-code vocabulary for compiling the .cu kernels as host C++. Kernels run
 * as cooperative fibers (one per CUDA thread, one block at a time) with real barriers. */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H
#include <cmath>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <functional>
#include "cuda_runtime_api.h"
using std::isnan;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
struct emu_dim { unsigned x, y, z; };
extern emu_dim threadIdx, blockIdx, blockDim, gridDim;
void __syncthreads();
void emu_launch(unsigned grid, unsigned block, std::function<void()> f);
#define tgemu_launch(G, B, F) emu_launch((unsigned)(G), (unsigned)(B), F)
extern unsigned char emu_shfl_buf[1024][8];
template <typename T> T __shfl_xor_sync(unsigned mask, T v, int lm) {
    (void)mask;
    memcpy(emu_shfl_buf[threadIdx.x], &v, sizeof v);
    __syncthreads();
    T r;
    memcpy(&r, emu_shfl_buf[threadIdx.x ^ (unsigned)lm], sizeof r);
    __syncthreads();
    return r;
}
inline uint32_t __umulhi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v) { unsigned long long o = *p; if (v < o) *p = v; return o; }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) { unsigned long long o = *p; *p = o + v; return o; }
#endif
