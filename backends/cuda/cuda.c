/* The CUDA backend: one device, one stream, a caching device allocator, cuBLAS for matrix
 * products and the kernels of backends/cuda/k_*.cu for every other op (cuda_ops.c maps nodes
 * to them). Same vtable as the CPU backend (core/tg-impl.h).
 *
 * Ordering: every kernel, device copy and cuBLAS call is enqueued on the backend's single
 * stream, so operations run in the order the executor issues them and a device block handed
 * back to the allocator can be reused by the next operation without waiting. The host waits
 * only where it must: copies to host memory (the caller reads the buffer as soon as the call
 * returns), copies from host memory too large for the page-locked staging buffer, small
 * read-backs (device-side id validation, sum of squares) and sync(). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-host.h"

tg_status tgcu_status(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return TG_OK;
    (void)cudaGetLastError(); /* forget a non-sticky error once it has become a status */
    if (e == cudaErrorMemoryAllocation)
        return tg_error_set(TG_ERR_NOMEM, "cuda backend: %s: out of device memory (%s)", what,
                            cudaGetErrorString(e));
    return tg_error_set(TG_ERR_BACKEND, "cuda backend: %s: %s (%s)", what, cudaGetErrorString(e),
                        cudaGetErrorName(e));
}

tg_status tgcu_blas_status(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return TG_OK;
    (void)cudaGetLastError();
    return tg_error_set(s == CUBLAS_STATUS_ALLOC_FAILED ? TG_ERR_NOMEM : TG_ERR_BACKEND,
                        "cuda backend: %s: cuBLAS: %s", what, tgcu_blas.status_string(s));
}

/* Make the backend's device current on the calling thread (cheap; needed when a program
 * drives several devices from one thread). */
static tg_status enter(const tgcu_impl *c) { return tgcu_status(cudaSetDevice(c->device), "cudaSetDevice"); }

/* ---- caching allocator ----
 * Freed blocks go to a free list per size class and are handed out again in LIFO order; a
 * training loop builds a new graph every step, so after the first steps no cudaMalloc (which
 * synchronises the device) happens at all. */

/* The class of a request and its rounded size: 256 bytes, or k * 2^(e-2) with k = 5..8 for
 * 2^e < bytes <= 2^(e+1). */
static size_t class_of(size_t bytes, int *cls) {
    if (bytes <= 256) {
        *cls = 0;
        return 256;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^e <= bytes-1 < 2^(e+1) */
    size_t q = (size_t)1 << (e - 2), k = (bytes + q - 1) / q;      /* 5 <= k <= 8 */
    *cls = 1 + (e - 8) * 4 + (int)(k - 5);
    return k * q;
}

/* The rounded size of class k (the inverse of class_of). */
static size_t class_size(int k) {
    if (k == 0) return 256;
    int e = (k - 1) / 4 + 8;
    return (size_t)(5 + (k - 1) % 4) << (e - 2);
}

/* Give every cached block back to CUDA (after the stream has finished with them). */
static void release_cache(tg_backend *b) {
    tgcu_impl *c = b->impl;
    (void)cudaStreamSynchronize(c->stream);
    for (int k = 0; k < TGCU_NCLASS; k++) {
        while (c->cache[k]) {
            tgcu_block *blk = c->cache[k];
            c->cache[k] = blk->next;
            (void)cudaFree(blk->ptr);
            tg__backend_account(b, -(ptrdiff_t)class_size(k));
            free(blk);
        }
    }
    (void)cudaGetLastError();
    c->cached_bytes = 0;
}

void *tgcu_alloc(tg_backend *b, size_t bytes) {
    tgcu_impl *c = b->impl;
    int cls;
    size_t size = class_of(bytes, &cls);
    if (cls >= TGCU_NCLASS) {
        tg_error_set(TG_ERR_NOMEM, "cuda backend: cannot allocate %zu bytes", bytes);
        return NULL;
    }
    tgcu_block *blk = c->cache[cls];
    if (blk) {
        void *p = blk->ptr;
        c->cache[cls] = blk->next;
        c->cached_bytes -= size;
        free(blk);
        return p;
    }
    if (enter(c) != TG_OK) return NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) { /* free what the cache holds, then try once more */
        (void)cudaGetLastError();
        release_cache(b);
        e = cudaMalloc(&p, size);
    }
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) (void)cudaGetLastError();
        tg_error_set(TG_ERR_NOMEM,
                     "cuda backend: out of device memory allocating %zu bytes on device %d "
                     "(%zu MiB free of %zu MiB after releasing the cache; tgraph holds %zu MiB)",
                     size, c->device, fr >> 20, tot >> 20, b->in_use >> 20);
        return NULL;
    }
    if (e != cudaSuccess) {
        tgcu_status(e, "cudaMalloc");
        return NULL;
    }
    tg__backend_account(b, (ptrdiff_t)size);
    return p;
}

void tgcu_free(tg_backend *b, void *p, size_t bytes) {
    tgcu_impl *c = b->impl;
    if (!p) return;
    int cls;
    size_t size = class_of(bytes, &cls);
    tgcu_block *blk = malloc(sizeof *blk);
    if (!blk) { /* no host memory for the list node: give the block back to CUDA instead */
        (void)cudaStreamSynchronize(c->stream);
        (void)cudaFree(p);
        (void)cudaGetLastError();
        tg__backend_account(b, -(ptrdiff_t)size);
        return;
    }
    blk->ptr = p;
    blk->next = c->cache[cls];
    c->cache[cls] = blk;
    c->cached_bytes += size;
}

/* ---- vtable ---- */

/* Page-locked staging for host-to-device copies (token ids, masks, parameter uploads). */
#define STAGING_BYTES ((size_t)32 << 20)

static void *cuda_alloc_unlocked(tg_backend *b, size_t bytes) { return tgcu_alloc(b, bytes); }
static void cuda_free_unlocked(tg_backend *b, void *p, size_t bytes) { tgcu_free(b, p, bytes); }

/* Wait for everything enqueued; the staging buffer is then free again. */
static tg_status synchronize(tgcu_impl *c, const char *what) {
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e == cudaSuccess) c->staged_used = 0;
    return tgcu_status(e, what);
}

tg_status tgcu_read_back(tg_backend *b, void *dst, const void *src, size_t bytes) {
    tgcu_impl *c = b->impl;
    if (!bytes) return TG_OK;
    tg_status st = enter(c);
    if (st) return st;
    st = tgcu_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream),
                     "copy to host");
    return st ? st : synchronize(c, "copy to host");
}

/* The source is ordinary (pageable) caller memory that may be freed as soon as we return.
 * Small copies go through the page-locked staging buffer and do not wait; a copy that does
 * not fit in what is left of it waits for the stream first (then the whole buffer is free);
 * one larger than the buffer is copied directly and waited for. */
static tg_status cuda_copy_in_unlocked(tg_backend *b, void *dst, const void *src, size_t bytes) {
    tgcu_impl *c = b->impl;
    if (!bytes) return TG_OK;
    tg_status st = enter(c);
    if (st) return st;
    if (bytes > c->staging_size) {
        st = tgcu_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream),
                         "copy to device");
        return st ? st : synchronize(c, "copy to device");
    }
    size_t off = (c->staged_used + 255) / 256 * 256;
    if (off + bytes > c->staging_size) {
        st = synchronize(c, "copy to device");
        if (st) return st;
        off = 0;
    }
    memcpy(c->staging + off, src, bytes);
    c->staged_used = off + bytes;
    return tgcu_status(cudaMemcpyAsync(dst, c->staging + off, bytes, cudaMemcpyHostToDevice, c->stream),
                       "copy to device");
}

static tg_status cuda_copy_out_unlocked(tg_backend *b, void *dst, const void *src, size_t bytes) {
    return tgcu_read_back(b, dst, src, bytes);
}

static tg_status cuda_memset0_unlocked(tg_backend *b, void *dst, size_t bytes) {
    tgcu_impl *c = b->impl;
    if (!bytes) return TG_OK;
    tg_status st = enter(c);
    if (st) return st;
    return tgcu_status(cudaMemsetAsync(dst, 0, bytes, c->stream), "memset");
}

static bool cuda_supports(tg_backend *b, tg_op op) {
    (void)b;
    return tgcu_supports_op(op);
}

static tg_status cuda_run_node_unlocked(tg_backend *b, tg_tensor *t) {
    tg_status st = enter(b->impl);
    return st ? st : tgcu_run_node(b, t);
}

static tg_status cuda_sync_unlocked(tg_backend *b) {
    tgcu_impl *c = b->impl;
    tg_status st = enter(c);
    if (st) return st;
    /* errors of kernels that failed after their launch (bad addresses, ...) surface here */
    return synchronize(c, "stream synchronize");
}

/* the update's kernel, then with zero_g the gradients zeroed on the same stream */
static tg_status cuda_update(tgcu_impl *c, const tg_optim_config *cfg, float lr, int64_t step,
                             float *w, const float *g, float *m, float *v, int64_t n) {
    float wd = cfg->weight_decay;
    if (cfg->kind == TG_OPTIM_SGD)
        return tgcu_status(tgcu_sgd(c->stream, w, g, m, n, lr, wd, cfg->momentum), "sgd update");
    float b1 = cfg->beta1, b2 = cfg->beta2;
    /* bias corrections folded into the step size, in double on the host exactly as cpu.c */
    double c1 = 1.0 - pow(b1, (double)step), c2 = 1.0 - pow(b2, (double)step);
    float alpha = (float)(lr / c1), rc2 = (float)(1.0 / sqrt(c2));
    return tgcu_status(tgcu_adam(c->stream, w, g, m, v, n, lr, wd, b1, b2, cfg->eps, alpha, rc2,
                                 cfg->kind == TG_OPTIM_ADAMW),
                       "adam update");
}

static tg_status cuda_optim_update_unlocked(tg_backend *b, const tg_optim_config *cfg, float lr,
                                   int64_t step, float *w, float *g, float *m, float *v, int64_t n,
                                   bool zero_g) {
    tgcu_impl *c = b->impl;
    tg_status st = enter(c);
    if (st == TG_OK) st = cuda_update(c, cfg, lr, step, w, g, m, v, n);
    if (st == TG_OK && zero_g)
        st = tgcu_status(cudaMemsetAsync(g, 0, (size_t)n * sizeof(float), c->stream),
                         "gradient zeroing");
    return st;
}

static tg_status cuda_sumsq_unlocked(tg_backend *b, const float *x, int64_t n, double *out) {
    tgcu_impl *c = b->impl;
    tg_status st = enter(c);
    if (st) return st;
    int64_t np = tgcu_sumsq_parts(n);
    size_t bytes = (size_t)(np + 1) * sizeof(double);
    double *part = tgcu_alloc(b, bytes);
    if (!part) return tg_error_prefix(TG_ERR_NOMEM, "cuda sumsq");
    st = tgcu_status(tgcu_sumsq(c->stream, x, n, part + 1, part), "sum of squares");
    if (st == TG_OK) st = tgcu_read_back(b, c->host_pinned, part, sizeof(double));
    if (st == TG_OK) memcpy(out, c->host_pinned, sizeof(double));
    tgcu_free(b, part, bytes);
    return st;
}

static tg_status cuda_scale_unlocked(tg_backend *b, float *x, int64_t n, float s) {
    tgcu_impl *c = b->impl;
    tg_status st = enter(c);
    return st ? st : tgcu_status(tgcu_scale_inplace(c->stream, x, n, s), "scale");
}

/* ---- the entry points: each under the backend's lock (cuda-host.h: tgcu_impl.mu) ---- */

static void lock(tg_backend *b) { pthread_mutex_lock(&((tgcu_impl *)b->impl)->mu); }
static void unlock(tg_backend *b) { pthread_mutex_unlock(&((tgcu_impl *)b->impl)->mu); }

static void *cuda_alloc(tg_backend *b, size_t bytes) {
    lock(b);
    void *p = cuda_alloc_unlocked(b, bytes);
    unlock(b);
    return p;
}
static void cuda_free(tg_backend *b, void *p, size_t bytes) {
    lock(b);
    cuda_free_unlocked(b, p, bytes);
    unlock(b);
}
#define LOCKED(call)            \
    do {                        \
        lock(b);                \
        tg_status st_ = (call); \
        unlock(b);              \
        return st_;             \
    } while (0)
static tg_status cuda_copy_in(tg_backend *b, void *dst, const void *src, size_t bytes) {
    LOCKED(cuda_copy_in_unlocked(b, dst, src, bytes));
}
static tg_status cuda_copy_out(tg_backend *b, void *dst, const void *src, size_t bytes) {
    LOCKED(cuda_copy_out_unlocked(b, dst, src, bytes));
}
static tg_status cuda_memset0(tg_backend *b, void *dst, size_t bytes) {
    LOCKED(cuda_memset0_unlocked(b, dst, bytes));
}
static tg_status cuda_run_node(tg_backend *b, tg_tensor *t) { LOCKED(cuda_run_node_unlocked(b, t)); }
static tg_status cuda_sync(tg_backend *b) { LOCKED(cuda_sync_unlocked(b)); }
static tg_status cuda_optim_update(tg_backend *b, const tg_optim_config *cfg, float lr,
                                   int64_t step, float *w, float *g, float *m, float *v, int64_t n,
                                   bool zero_g) {
    LOCKED(cuda_optim_update_unlocked(b, cfg, lr, step, w, g, m, v, n, zero_g));
}
static tg_status cuda_sumsq(tg_backend *b, const float *x, int64_t n, double *out) {
    LOCKED(cuda_sumsq_unlocked(b, x, n, out));
}
static tg_status cuda_scale(tg_backend *b, float *x, int64_t n, float s) {
    LOCKED(cuda_scale_unlocked(b, x, n, s));
}
#undef LOCKED

static void destroy_impl(tg_backend *b) {
    tgcu_impl *c = b->impl;
    if (!c) return;
    (void)cudaSetDevice(c->device);
    if (c->stream) (void)cudaStreamSynchronize(c->stream);
    release_cache(b);
    if (c->dev_check) (void)cudaFree(c->dev_check);
    if (c->host_pinned) (void)cudaFreeHost(c->host_pinned);
    if (c->staging) (void)cudaFreeHost(c->staging);
    if (c->blas) (void)tgcu_blas.destroy(c->blas);
    if (c->stream) (void)cudaStreamDestroy(c->stream);
    (void)cudaGetLastError();
    pthread_mutex_destroy(&c->mu);
    free(c);
    b->impl = NULL;
}

static void cuda_destroy(tg_backend *b) {
    destroy_impl(b);
    free(b);
}

static const tg_backend_vtable cuda_vtable = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy_in = cuda_copy_in,
    .copy_out = cuda_copy_out,
    .memset0 = cuda_memset0,
    .supports_op = cuda_supports,
    .run_node = cuda_run_node,
    .sync = cuda_sync,
    .optim_update = cuda_optim_update,
    .sumsq = cuda_sumsq,
    .scale = cuda_scale,
    .destroy = cuda_destroy,
};

bool tg_have_cuda(void) { return true; }

bool tgcu_is_cuda(const tg_backend *b) { return b && b->vt == &cuda_vtable; }

tg_status tgcu_stream_of(const tg_backend *b, int *device, cudaStream_t *stream) {
    if (!tgcu_is_cuda(b))
        return tg_error_set(TG_ERR_UNSUPPORTED, "not a CUDA backend: %s", tg_backend_name(b));
    const tgcu_impl *c = b->impl;
    if (device) *device = c->device;
    if (stream) *stream = c->stream;
    return TG_OK;
}

tg_status tg_backend_cuda_new(int device, tg_backend **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_backend_cuda_new: out is NULL");
    *out = NULL;
    bool tf32 = false;
    const char *env = getenv("TG_CUDA_TF32");
    if (env && *env) {
        if (strcmp(env, "0") != 0 && strcmp(env, "1") != 0)
            return tg_error_set(TG_ERR_INVALID, "tg_backend_cuda_new: TG_CUDA_TF32='%s' is not 0 or 1",
                                env);
        tf32 = env[0] == '1';
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tg_error_set(TG_ERR_BACKEND, "tg_backend_cuda_new: no usable CUDA device: %s (%s)",
                            cudaGetErrorString(e), cudaGetErrorName(e));
    }
    if (count <= 0) return tg_error_set(TG_ERR_BACKEND, "tg_backend_cuda_new: no CUDA device found");
    if (device < 0 || device >= count)
        return tg_error_set(TG_ERR_INVALID, "tg_backend_cuda_new: device %d out of range (%d device%s)",
                            device, count, count == 1 ? "" : "s");
    tg_backend *b = calloc(1, sizeof *b);
    tgcu_impl *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return tg_error_set(TG_ERR_NOMEM, "tg_backend_cuda_new: out of memory");
    }
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    /* recursive: an entry point calls others (alloc releases the cache, sumsq allocates) */
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&c->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    b->vt = &cuda_vtable;
    b->nthreads = 1;
    b->impl = c;
    c->device = device;
    c->tf32 = tf32;
    tg_status st = tgcu_blas_load();
    if (!st) st = tgcu_status(cudaSetDevice(device), "cudaSetDevice");
    if (!st) st = tgcu_status(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!st) st = tgcu_blas_status(tgcu_blas.create(&c->blas), "cublasCreate");
    if (!st) st = tgcu_blas_status(tgcu_blas.set_stream(c->blas, c->stream), "cublasSetStream");
    /* TF32 off by default: products keep full float32 precision, as on the CPU */
    if (!st)
        st = tgcu_blas_status(tgcu_blas.set_math_mode(c->blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                    : CUBLAS_DEFAULT_MATH),
                              "cublasSetMathMode");
    if (!st) st = tgcu_status(cudaMalloc((void **)&c->dev_check, 2 * sizeof(int64_t)), "cudaMalloc");
    if (!st) st = tgcu_status(cudaMallocHost((void **)&c->host_pinned, 4 * sizeof(int64_t)), "cudaMallocHost");
    if (!st) st = tgcu_status(cudaMallocHost((void **)&c->staging, STAGING_BYTES), "cudaMallocHost");
    if (!st) c->staging_size = STAGING_BYTES;
    if (st) {
        tg_error_prefix(st, "tg_backend_cuda_new(%d)", device);
        destroy_impl(b);
        free(b);
        return st;
    }
    *out = b;
    return TG_OK;
}
