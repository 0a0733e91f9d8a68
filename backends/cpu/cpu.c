/* The CPU backend: host memory with a small caching allocator, OpenMP threads, OpenBLAS kept at
 * one thread (tgraph splits GEMMs across its own threads, so the pools never fight). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"

/* Freed buffers are kept for reuse: a training loop builds a new graph every step, and fresh
 * large allocations would cost page faults on every step. The cache is bounded in count and in
 * bytes (oldest evicted first): bucketed batches give workspaces of many sizes, and an
 * unbounded cache would hold one of each. */
#define CACHE_SLOTS 32
#define CACHE_MAX_BYTES ((size_t)1 << 30)

typedef struct {
    void *ptr[CACHE_SLOTS];
    size_t size[CACHE_SLOTS]; /* in insertion order, oldest first */
    int n;
    size_t bytes;
} cpu_impl;

static size_t rounded(size_t bytes) { return ((bytes ? bytes : 1) + TG_ALIGN - 1) / TG_ALIGN * TG_ALIGN; }

static void cache_remove(cpu_impl *c, int i) {
    c->bytes -= c->size[i];
    memmove(c->ptr + i, c->ptr + i + 1, (size_t)(c->n - i - 1) * sizeof *c->ptr);
    memmove(c->size + i, c->size + i + 1, (size_t)(c->n - i - 1) * sizeof *c->size);
    c->n--;
}

static void *cpu_alloc(tg_backend *b, size_t bytes) {
    cpu_impl *c = b->impl;
    size_t want = rounded(bytes);
    int best = -1;
    for (int i = 0; i < c->n; i++)
        if (c->size[i] >= want && c->size[i] <= 2 * want + 4096 && (best < 0 || c->size[i] < c->size[best]))
            best = i;
    if (best >= 0) { /* already counted in in_use while cached */
        void *p = c->ptr[best];
        cache_remove(c, best);
        return p;
    }
    /* a header of TG_ALIGN bytes in front of each block records its real size, since a reused
     * block can be larger than what the caller will say when freeing it */
    char *p = aligned_alloc(TG_ALIGN, want + TG_ALIGN);
    if (!p) {
        tg_error_set(TG_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes", want);
        return NULL;
    }
    *(size_t *)p = want;
    tg__backend_account(b, (ptrdiff_t)want);
    return p + TG_ALIGN;
}

static void release(tg_backend *b, void *p, size_t size) {
    free((char *)p - TG_ALIGN);
    tg__backend_account(b, -(ptrdiff_t)size);
}

static void cpu_free(tg_backend *b, void *p, size_t bytes) {
    cpu_impl *c = b->impl;
    (void)bytes;
    if (!p) return;
    size_t got = *(size_t *)((char *)p - TG_ALIGN);
    if (got > CACHE_MAX_BYTES) {
        release(b, p, got);
        return;
    }
    while (c->n > 0 && (c->n == CACHE_SLOTS || c->bytes + got > CACHE_MAX_BYTES)) {
        release(b, c->ptr[0], c->size[0]);
        cache_remove(c, 0);
    }
    c->ptr[c->n] = p;
    c->size[c->n] = got;
    c->n++;
    c->bytes += got;
}

static tg_status cpu_copy(tg_backend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    if (bytes) memcpy(dst, src, bytes);
    return TG_OK;
}

static tg_status cpu_memset0(tg_backend *b, void *dst, size_t bytes) {
    (void)b;
    if (bytes) memset(dst, 0, bytes);
    return TG_OK;
}

static bool cpu_supports(tg_backend *b, tg_op op) {
    (void)b;
    return op > TG_OP_NONE && op < TG_OP_COUNT;
}

static tg_status cpu_run_node(tg_backend *b, tg_tensor *t) {
    switch (t->op) {
    case TG_OP_CONT:
    case TG_OP_CONCAT:
    case TG_OP_PAD:
    case TG_OP_EXPAND: return tg_cpu_layout(b, t);
    case TG_OP_SUM:
    case TG_OP_MAX:
    case TG_OP_MAX_BACK:
    case TG_OP_SUM_TO: return tg_cpu_reduce(b, t);
    case TG_OP_SOFTMAX:
    case TG_OP_LOG_SOFTMAX:
    case TG_OP_SOFTMAX_BACK:
    case TG_OP_LOG_SOFTMAX_BACK:
    case TG_OP_LAYER_NORM:
    case TG_OP_LAYER_NORM_BACK: return tg_cpu_rows(b, t);
    case TG_OP_MATMUL: return tg_cpu_matmul(b, t);
    case TG_OP_EMBEDDING:
    case TG_OP_EMBEDDING_BACK:
    case TG_OP_CROSS_ENTROPY:
    case TG_OP_CROSS_ENTROPY_BACK:
    case TG_OP_GRAD_ACC: return tg_cpu_nn(b, t);
    default: return tg_cpu_elementwise(b, t);
    }
}

static tg_status cpu_sync(tg_backend *b) {
    (void)b;
    return TG_OK;
}

static tg_status cpu_optim_update(tg_backend *b, const tg_optim_config *cfg, float lr, int64_t step,
                                  float *w, const float *g, float *m, float *v, int64_t n) {
    int nt = b->nthreads;
    float wd = cfg->weight_decay;
    if (cfg->kind == TG_OPTIM_SGD) {
        float mu = cfg->momentum;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            float gi = g[i] + wd * w[i];
            if (m) {
                m[i] = mu * m[i] + gi;
                gi = m[i];
            }
            w[i] -= lr * gi;
        }
        return TG_OK;
    }
    float b1 = cfg->beta1, b2 = cfg->beta2, eps = cfg->eps;
    /* bias corrections folded into the step size (Kingma & Ba, Algorithm 1, last lines) */
    double c1 = 1.0 - pow(b1, (double)step), c2 = 1.0 - pow(b2, (double)step);
    float alpha = (float)(lr / c1), rc2 = (float)(1.0 / sqrt(c2));
    bool decoupled = cfg->kind == TG_OPTIM_ADAMW;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float gi = decoupled ? g[i] : g[i] + wd * w[i];
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float upd = alpha * m[i] / (sqrtf(v[i]) * rc2 + eps);
        w[i] -= decoupled ? upd + lr * wd * w[i] : upd;
    }
    return TG_OK;
}

/* Fixed-size chunks summed in order: the result does not depend on the thread count. */
static tg_status cpu_sumsq(tg_backend *b, const float *x, int64_t n, double *out) {
    enum { CH = 8192 };
    int64_t nch = (n + CH - 1) / CH;
    double *part = malloc((size_t)(nch ? nch : 1) * sizeof *part);
    if (!part) return tg_error_set(TG_ERR_NOMEM, "cpu sumsq: out of memory");
#pragma omp parallel for num_threads(b->nthreads) schedule(static) if (nch > 4)
    for (int64_t c = 0; c < nch; c++) {
        int64_t e = (c + 1) * CH < n ? (c + 1) * CH : n;
        float s = 0.0f;
        for (int64_t i = c * CH; i < e; i++) s += x[i] * x[i];
        part[c] = s;
    }
    double t = 0.0;
    for (int64_t c = 0; c < nch; c++) t += part[c];
    free(part);
    *out = t;
    return TG_OK;
}

static tg_status cpu_scale(tg_backend *b, float *x, int64_t n, float s) {
#pragma omp parallel for num_threads(b->nthreads) schedule(static) if (n > TG_PAR_MIN)
    for (int64_t i = 0; i < n; i++) x[i] *= s;
    return TG_OK;
}

static void cpu_destroy(tg_backend *b) {
    cpu_impl *c = b->impl;
    for (int i = 0; i < c->n; i++) free((char *)c->ptr[i] - TG_ALIGN);
    free(c);
    free(b);
}

static const tg_backend_vtable cpu_vtable = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_in = cpu_copy,
    .copy_out = cpu_copy,
    .memset0 = cpu_memset0,
    .supports_op = cpu_supports,
    .run_node = cpu_run_node,
    .sync = cpu_sync,
    .optim_update = cpu_optim_update,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .destroy = cpu_destroy,
    .accumulates = true,
};

tg_status tg_backend_cpu_new(int nthreads, tg_backend **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_backend_cpu_new: out is NULL");
    *out = NULL;
    if (nthreads < 0 || nthreads > 4096)
        return tg_error_set(TG_ERR_INVALID, "tg_backend_cpu_new: %d threads out of range", nthreads);
    if (nthreads == 0) {
        const char *env = getenv("TG_NUM_THREADS");
        if (env && *env) {
            char *end;
            long v = strtol(env, &end, 10);
            if (*end || v < 1 || v > 4096)
                return tg_error_set(TG_ERR_INVALID,
                                    "tg_backend_cpu_new: TG_NUM_THREADS='%s' is not a thread count in 1..4096",
                                    env);
            nthreads = (int)v;
        } else {
            nthreads = omp_get_num_procs();
        }
    }
    tg_backend *b = calloc(1, sizeof *b);
    cpu_impl *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return tg_error_set(TG_ERR_NOMEM, "tg_backend_cpu_new: out of memory");
    }
    openblas_set_num_threads(1);
    b->vt = &cpu_vtable;
    b->nthreads = nthreads;
    b->impl = c;
    *out = b;
    return TG_OK;
}
