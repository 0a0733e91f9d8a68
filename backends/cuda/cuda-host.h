/* Host side of the CUDA backend (C only; not installed): the backend's private state and the
 * helpers shared by cuda.c (backend object, allocator, copies, store maths) and cuda_ops.c
 * (one function per op). */
#ifndef TG_CUDA_HOST_H
#define TG_CUDA_HOST_H

#include <cublas_v2.h>
#include <pthread.h>

#include "backends/cuda/cuda-access.h"
#include "backends/cuda/cuda-impl.h"
#include "core/backend-impl.h"
#include "core/graph-impl.h"

/* Size classes of the caching allocator: 256 bytes, then for 2^e < bytes <= 2^(e+1) four
 * classes k * 2^(e-2), k = 5..8 (class_of in cuda.c): at most 25 % waste. e < 64 gives at
 * most 1 + 56 * 4 classes. */
#define TGCU_NCLASS 232

typedef struct tgcu_block {
    void *ptr;
    struct tgcu_block *next;
} tgcu_block;

typedef struct tgcu_impl {
    /* Threads (include/tg/backend.h): every vtable call holds this recursive lock, so the
     * cache, the staging buffer, the read-back words and the cuBLAS handle serve one call at a
     * time; the calls of several threads interleave on the one stream, each in stream order. */
    pthread_mutex_t mu;
    int device;
    cudaStream_t stream;      /* every kernel, copy and cuBLAS call goes on this one stream */
    cublasHandle_t blas;
    bool tf32;                /* TG_CUDA_TF32=1: cuBLAS may use TF32 tensor cores */
    tgcu_block *cache[TGCU_NCLASS]; /* freed device blocks kept for reuse, per size class */
    size_t cached_bytes;
    int64_t *dev_check;       /* 2 int64 on the device: results of id checks */
    int64_t *host_pinned;     /* 4 int64 of page-locked host memory for small read-backs */
    /* Host-to-device copies are staged through this page-locked buffer so that copy_in can
     * return without waiting: the caller's buffer is copied into it on the host, the device
     * copy is enqueued, and a region is written again only after the stream has been
     * synchronised (staged_used goes back to 0 at every full synchronisation). */
    char *staging;
    size_t staging_size, staged_used;
} tgcu_impl;

/* tgcu_status (a tg status for a CUDA error): backends/cuda/cuda-access.h */
tg_status tgcu_blas_status(cublasStatus_t s, const char *what);

/* The cuBLAS functions the backend calls, loaded at run time (blas_load.c says why):
 * tgcu_blas_load() before the first use (tg_backend_cuda_new); TG_ERR_BACKEND naming the
 * library when it cannot be loaded. */
typedef struct {
    __typeof__(cublasGetStatusString) *status_string;
    __typeof__(cublasCreate) *create;
    __typeof__(cublasDestroy) *destroy;
    __typeof__(cublasSetStream) *set_stream;
    __typeof__(cublasSetMathMode) *set_math_mode;
    __typeof__(cublasSgemmStridedBatched) *sgemm_strided_batched;
} tgcu_blas_api;
extern tgcu_blas_api tgcu_blas;
tg_status tgcu_blas_load(void);

/* Device memory from the backend's caching allocator (NULL + error set on failure); free
 * with the same byte count. Blocks are reused in stream order, so a block freed right after
 * enqueueing the kernel that uses it is safe. */
void *tgcu_alloc(tg_backend *b, size_t bytes);
void tgcu_free(tg_backend *b, void *p, size_t bytes);

/* Copy `bytes` of device memory to host memory and wait for it (ordered after everything
 * enqueued so far). */
tg_status tgcu_read_back(tg_backend *b, void *dst, const void *src, size_t bytes);

/* Run one node (cuda_ops.c). */
tg_status tgcu_run_node(tg_backend *b, tg_tensor *t);
bool tgcu_supports_op(tg_op op);

#endif
