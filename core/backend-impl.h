/* The backend table and the backend's common fields. Filled by each backend (backends/), called
 * by core — the layers above call the backend through core/tg-impl.h's functions, never through
 * the table (tests/test_layers.py). */
#ifndef TG_BACKEND_IMPL_H
#define TG_BACKEND_IMPL_H

#include <stdatomic.h>

#include "core/tg-impl.h"

/* the alignment of every block a backend allocates, in bytes */
#define TG_ALIGN 64

/* The backend table (a table of function pointers plus a capability query, as ggml's backends). */
typedef struct tg_backend_vtable {
    const char *name;
    void *(*alloc)(tg_backend *b, size_t bytes); /* NULL + error set on failure */
    /* Optional (NULL: alloc): memory that lives as long as a store, its slabs (core/store.c) —
     * the CPU backend maps big blocks of it on huge pages. Freed by free. */
    void *(*alloc_lasting)(tg_backend *b, size_t bytes);
    void (*free)(tg_backend *b, void *p, size_t bytes);
    tg_status (*copy_in)(tg_backend *b, void *dst, const void *src, size_t bytes);
    tg_status (*copy_out)(tg_backend *b, void *dst, const void *src, size_t bytes);
    tg_status (*memset0)(tg_backend *b, void *dst, size_t bytes);
    bool (*supports_op)(tg_backend *b, tg_op op);
    tg_status (*run_node)(tg_backend *b, tg_tensor *node);
    /* Optional (NULL: the executor calls run_node node by node). Run nodes[0..n) in order, in
     * one go on the backend's own threads: a node flagged TG_TF_INPUT copies its host data in,
     * one flagged TG_TF_FUSED runs nothing, any other runs its kernel. When `after` is not
     * NULL, after(ctx, i) is called on the calling thread once node i is complete (nodes
     * after i may already be running on other threads). On failure *failed is the index of
     * the node that failed and the error is set on the calling thread. */
    tg_status (*run_graph)(tg_backend *b, tg_tensor *const *nodes, int64_t n,
                           void (*after)(void *ctx, int64_t i), void *ctx, int64_t *failed);
    tg_status (*sync)(tg_backend *b);
    /* optimizer and store maths on backend memory; optim_update with zero_g leaves g zero */
    tg_status (*optim_update)(tg_backend *b, const tg_optim_config *cfg, float lr, int64_t step,
                              float *w, float *g, float *m, float *v, int64_t n, bool zero_g);
    tg_status (*sumsq)(tg_backend *b, const float *x, int64_t n, double *out);
    tg_status (*scale)(tg_backend *b, float *x, int64_t n, float s);
    void (*destroy)(tg_backend *b);
    /* the matmul, sum_to and layer_norm_gamma_back kernels honour TG_TF_ACCUM (add into their
     * output instead of overwriting it), so the planner may fuse a parameter's grad_acc into
     * its producer */
    bool accumulates;
    /* the matmul kernel writes its output through the node's strides (batch strides and row
     * stride; the last dim contiguous), so the planner may lay a product out for the copy it
     * feeds (core/plan.c: TG_TF_INTO) */
    bool strided_out;
    /* the kernel of a TG_OPF_TILE node whose chain_prev is set runs its whole chain (the
     * members linked by chain_prev, the earlier ones flagged TG_TF_CHAINED and never run on
     * their own; a TG_TF_TRANSIENT one has no buffer), so the planner may fuse chains */
    bool chains;
    /* buffers are host memory: a kept tensor's values may be read where they lie (its data)
     * until its graph runs again or is freed, without a copy_out (a decoder's log-probabilities,
     * models/decode.c) */
    bool host_memory;
    /* Optional: whether the kernel of matmul node m can read its operand B (src[1]) — a view of
     * an embedding lookup of a parameter table by input ids, [.., w] — from the table's rows
     * itself (the ids say which), so that the planner need not make the lookup (core/plan.c:
     * TG_TF_LOOKUP) */
    bool (*reads_lookup)(tg_backend *b, const tg_tensor *m);
    /* Optional: a weight w [rows, cols] (backend memory) that many products x·wᵀ will read
     * unchanged until released, such as a decoder's (models/decode.c): the backend may prepare
     * it once (the CPU backend packs it for its GEMM). Counted: each keep is released once. */
    void (*keep_weight)(tg_backend *b, const float *w, int64_t rows, int64_t cols);
    void (*release_weight)(tg_backend *b, const float *w, int64_t rows, int64_t cols);
} tg_backend_vtable;

struct tg_backend {
    const tg_backend_vtable *vt;
    int nthreads;
    /* bytes held and their peak (tg__backend_account): atomic, since threads sharing the
     * backend allocate at once (include/tg/backend.h) */
    _Atomic size_t in_use, peak;
    void *impl;
};

/* backend memory accounting helpers (core/backend.c) */
void tg__backend_account(tg_backend *b, ptrdiff_t delta);

#endif
