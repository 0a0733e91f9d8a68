/* EMULATION ONLY: host implementation of the CUDA runtime subset, cuBLAS SGEMM and kernel launch. */
#include <ucontext.h>
#include <map>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_runtime.h"
#include "cublas_v2.h"

static cudaError_t last_err = cudaSuccess;
static std::map<const char *, size_t> allocs; /* device allocations */
static size_t dev_used = 0;
static const size_t DEV_LIMIT = (size_t)8 << 30;
extern "C" void emu_set_error(cudaError_t e) { if (e) last_err = e; }
static cudaError_t ret(cudaError_t e) { emu_set_error(e); return e; }
extern "C" int emu_is_device(const void *p, size_t n) {
    const char *c = (const char *)p;
    auto it = allocs.upper_bound(c);
    if (it == allocs.begin()) return 0;
    --it;
    return c >= it->first && c + n <= it->first + it->second;
}
static void die(const char *what) { fprintf(stderr, "EMU FATAL: %s\n", what); abort(); }
extern "C" {
cudaError_t cudaGetLastError(void) { cudaError_t e = last_err; last_err = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError(void) { return last_err; }
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) { case cudaSuccess: return "no error"; case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected"; default: return "emulated error"; }
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) { case cudaSuccess: return "cudaSuccess"; case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice"; default: return "cudaErrorEmulated"; }
}
cudaError_t cudaGetDeviceCount(int *n) {
    if (getenv("EMU_NODEV")) { *n = 0; return ret(cudaErrorNoDevice); }
    *n = 1; return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : ret(cudaErrorInvalidValue); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f) { (void)f; *s = (cudaStream_t)malloc(8); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return last_err ? last_err : cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t n) {
    if (dev_used + n > DEV_LIMIT) { *p = NULL; return ret(cudaErrorMemoryAllocation); }
    char *q = (char *)malloc(n ? n : 1);
    memset(q, 0xA5, n); /* garbage, like fresh device memory (NaN-ish floats) */
    allocs[q] = n; dev_used += n; *p = q; return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    auto it = allocs.find((const char *)p);
    if (it == allocs.end()) die("cudaFree of a non-device pointer");
    dev_used -= it->second; allocs.erase(it); free(p); return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) { *p = malloc(n); return cudaSuccess; }
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *fr, size_t *tot) { *tot = DEV_LIMIT; *fr = DEV_LIMIT - dev_used; return cudaSuccess; }
static void check_kind(const void *d, const void *s, size_t n, enum cudaMemcpyKind k) {
    bool dd = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
    bool sd = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
    if (dd && !emu_is_device(d, n)) die("memcpy: destination is not (inside) a device allocation");
    if (!dd && emu_is_device(d, 1)) die("memcpy: host destination is device memory");
    if (sd && !emu_is_device(s, n)) die("memcpy: source is not (inside) a device allocation");
    if (!sd && emu_is_device(s, 1)) die("memcpy: host source is device memory");
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st) {
    (void)st; if (!n) return cudaSuccess; check_kind(d, s, n, k); memmove(d, s, n); return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                              enum cudaMemcpyKind k, cudaStream_t st) {
    (void)st;
    if (w > dp || w > sp) return ret(cudaErrorInvalidValue);
    for (size_t r = 0; r < h; r++) {
        check_kind((char *)d + r * dp, (const char *)s + r * sp, w, k);
        memmove((char *)d + r * dp, (const char *)s + r * sp, w);
    }
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st) {
    (void)st; if (!n) return cudaSuccess;
    if (!emu_is_device(d, n)) die("memset outside a device allocation");
    memset(d, v, n); return cudaSuccess;
}
/* ---- cuBLAS ---- */
const char *cublasGetStatusString(cublasStatus_t s) { return s == 0 ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE"; }
cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = (cublasHandle_t)malloc(8); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { free(h); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) { (void)h; (void)s; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) { (void)h; (void)m; return CUBLAS_STATUS_SUCCESS; }
long emu_gemm_calls = 0;
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
  int m, int n, int k, const float *alpha, const float *A, int lda, long long sa, const float *B, int ldb,
  long long sb, const float *beta, float *C, int ldc, long long sc, int batch) {
    (void)h;
    int arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
        ldc < (m > 1 ? m : 1)) return CUBLAS_STATUS_INVALID_VALUE;
    emu_gemm_calls++;
    for (int b = 0; b < batch; b++) {
        const float *a = A + b * sa, *bb = B + b * sb; float *c = C + b * sc;
        for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) {
            double acc = 0;
            for (int p = 0; p < k; p++) {
                const float *ap = ta == CUBLAS_OP_N ? &a[i + (long)p * lda] : &a[p + (long)i * lda];
                const float *bp = tb == CUBLAS_OP_N ? &bb[p + (long)j * ldb] : &bb[j + (long)p * ldb];
                if (!emu_is_device(ap, 4) || !emu_is_device(bp, 4)) die("sgemm reads outside device memory");
                acc += (double)*ap * *bp;
            }
            float *cp = &c[i + (long)j * ldc];
            if (!emu_is_device(cp, 4)) die("sgemm writes outside device memory");
            *cp = (float)(*alpha * acc + (*beta == 0.0f ? 0.0 : (double)*beta * *cp));
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}
}
/* ---- kernel launch: fibers ---- */
emu_dim threadIdx, blockIdx, blockDim, gridDim;
unsigned char emu_shfl_buf[1024][8];
struct fiber { ucontext_t ctx; char *stack; bool done, waiting; };
static fiber fibers[1024];
static ucontext_t sched_ctx;
static int cur;
static std::function<void()> *kernel;
static const size_t STACK = 256 * 1024;
void __syncthreads() {
    fibers[cur].waiting = true;
    swapcontext(&fibers[cur].ctx, &sched_ctx);
}
static void entry() {
    (*kernel)();
    fibers[cur].done = true;
    swapcontext(&fibers[cur].ctx, &sched_ctx);
}
long emu_launches = 0;
void emu_launch(unsigned grid, unsigned block, std::function<void()> f) {
    static unsigned maxgrid = getenv("EMU_MAXGRID") ? (unsigned)atoi(getenv("EMU_MAXGRID")) : 3;
    if (block == 0 || block > 1024 || grid == 0) { emu_set_error(cudaErrorInvalidValue); return; }
    emu_launches++;
    unsigned g = grid < maxgrid ? grid : maxgrid; /* kernels loop over the grid: fewer blocks is legal */
    kernel = &f;
    gridDim = {g, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned bx = 0; bx < g; bx++) {
        blockIdx = {bx, 0, 0};
        for (unsigned t = 0; t < block; t++) {
            fiber &fb = fibers[t];
            if (!fb.stack) fb.stack = (char *)malloc(STACK);
            getcontext(&fb.ctx);
            fb.ctx.uc_stack.ss_sp = fb.stack;
            fb.ctx.uc_stack.ss_size = STACK;
            fb.ctx.uc_link = NULL;
            makecontext(&fb.ctx, entry, 0);
            fb.done = fb.waiting = false;
        }
        for (;;) {
            unsigned ndone = 0, nwait = 0;
            for (unsigned t = 0; t < block; t++) {
                if (fibers[t].done) continue;
                cur = (int)t;
                threadIdx = {t, 0, 0};
                fibers[t].waiting = false;
                swapcontext(&sched_ctx, &fibers[t].ctx);
            }
            for (unsigned t = 0; t < block; t++) { ndone += fibers[t].done; nwait += fibers[t].waiting && !fibers[t].done; }
            if (ndone == block) break;
            if (ndone > 0 && nwait > 0) die("__syncthreads reached by only part of a block");
        }
    }
}
