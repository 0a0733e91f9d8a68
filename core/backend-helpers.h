/* Backend-independent geometry of kernels (core/backend_helpers.c): what every backend computes
 * the same way before it launches anything -- broadcast strides, how a batched matmul maps onto
 * GEMM calls, and which dims a sum_to reduces. Each backend includes this, never another
 * backend's headers. Not installed. */
#ifndef TG_BACKEND_HELPERS_H
#define TG_BACKEND_HELPERS_H

#include "core/graph-impl.h"

/* Right-aligned broadcast strides of contiguous input x against output shape t (0 where x has
 * size 1 or no dimension): element i of t reads x at sum_k idx_k * st[k]. */
void tg__geom_bcast_strides(const tg_tensor *x, const tg_tensor *t, int64_t *st);

/* ---- matmul: C [..., M, N] = op(A) op(B) as row-major GEMM calls ---- */

/* The stored matrix [r, c] of an operand (its last two dims) as a row-major GEMM operand: read
 * in place with its row stride as leading dimension, or, when its columns are contiguous (a
 * transposed view), as the transpose of a row-major [c, r] -- the transpose flag flips instead
 * of a copy being made. */
typedef struct tg_mm_operand {
    bool trans;                   /* GEMM transpose flag */
    int64_t ld;                   /* leading dimension, >= the stored column count */
    int64_t bstride[TG_MAX_DIMS]; /* per output batch dim, 0 where broadcast */
} tg_mm_operand;

/* Batch dims [first, nb) collapse into one strided batch of `inner` products (strides sa, sb,
 * sc between them) while every operand's strides stay uniform; dims [0, first) are an outer
 * loop of `outer` such batches (tg__geom_mm_offsets gives each one's offsets). Of those, dims
 * [first2, first) collapse the same way into a second level of `mid` batches (strides osa,
 * osb, osc), for an engine that takes two batch levels in one call: the heads of a
 * [B, n, h, dk] tensor viewed as [B, h, n, dk] are dk apart (inner) and the sequences n·h·dk
 * (mid), so all B·h products can be one call. outer is a multiple of mid. */
typedef struct tg_mm_plan {
    int64_t M, N, K;
    tg_mm_operand a, b;
    int nb;                       /* batch dims of C */
    int64_t cstride[TG_MAX_DIMS]; /* C's strides (contiguous unless the planner laid the product
                                   * out for the copy it feeds: core/plan.c, TG_TF_INTO) */
    int64_t ldc;                  /* C's row stride */
    int first, first2;
    int64_t inner, sa, sb, sc, outer;
    int64_t mid, osa, osb, osc;
} tg_mm_plan;

/* The plan of matmul node t (srcs A, B; p.matmul the transpose flags). */
void tg__geom_mm_plan(const tg_tensor *t, tg_mm_plan *p);
/* Element offsets of A, B and C for outer batch o in [0, outer). */
void tg__geom_mm_offsets(const tg_mm_plan *p, const tg_tensor *t, int64_t o, int64_t *offa,
                         int64_t *offb, int64_t *offc);

/* ---- sum_to: reduce x to t's (right-aligned, broadcast-compatible) shape ---- */
typedef struct tg_sumto_plan {
    int nd;                 /* x's dims */
    bool red[TG_MAX_DIMS];  /* dim i of x is summed */
    /* a leading block of summed dims with the rest kept (bias gradients) is one column sum
     * [R, C] -> [C] */
    bool lead_block;
    int64_t R, C;
    int64_t xstride[TG_MAX_DIMS]; /* x's contiguous strides */
    int64_t nout, nred;           /* output elements, summed elements per output */
} tg_sumto_plan;

void tg__geom_sumto_plan(const tg_tensor *t, const tg_tensor *x, tg_sumto_plan *p);

#endif
