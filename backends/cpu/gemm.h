/* The CPU backend's matrix-multiply engine (internal header).
 *
 * Every matmul on the CPU — forward and backward, attention's batched products and the big
 * projections — goes through tg_cpu_gemm_run_par() (tg_cpu_gemm_batched/_batched2 for tests and
 * benchmarks). tg_cpu_gemm_choose() picks one of two engines for a call:
 *
 *  - the small path (gemm_small.c): many small products (attention's, B·h of them) and tall,
 *    narrow ones, register tiles over op(A) read in place, parallel over (product, block of C)
 *    tasks handed out dynamically;
 *  - the packed path (gemm_packed.c): BLIS's five loops around one micro-kernel per
 *    instruction set, op(A) and op(B) packed into panels. How a block gets its op(B) panels is
 *    a supplier: packed by the block itself, shared by the blocks of one product (the first to
 *    reach a piece packs it), or kept packed across products (a decoder's weights). gemm.c cuts
 *    the products into blocks — rows, columns, or along k for a weight gradient in a graph run
 *    (gemm_split_k.c) — and picks the supplier.
 *
 * OpenBLAS (cblas_sgemm on one thread of its own, each team member calling it on its block)
 * computes the blocks where the packed path has no kernel (below the AVX2 level, isa.h) and, at
 * the AVX2 level, the products whose weight has more than 2^18 values, where it is faster.
 *
 * Every entry point has two forms: *_par(..., tg_cpu_par *p), called by every member of a
 * running team or for one share of a graph node, each doing its share; and a form taking
 * nthreads, for tests and benchmarks, that runs on a team of that many threads kept for it.
 *
 * Determinism: each element of C is summed over k by one thread in a fixed order, so results
 * are bit-identical for a given instruction-set level and thread count; the small and packed
 * paths do not depend on the thread count either, except a weight gradient cut along k
 * (gemm_split_k.c), whose partial sums depend on the count.
 */
#ifndef TG_CPU_GEMM_H
#define TG_CPU_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/cpu/team.h"

/* C[b] = alpha * op(A[b]) · op(B[b]) + beta * C[b], b = 0..batch-1, all row-major.
 * op(A) is M×K: A[b] starts at a + b*stride_a; element (i,p) of op(A) is a[i*lda + p] when
 * !trans_a, a[p*lda + i] when trans_a. Likewise op(B) is K×N with ldb/trans_b, C is M×N with
 * ldc. stride_a or stride_b may be 0 (broadcast one matrix over the batch); C[b] must not
 * overlap. beta 0 ignores whatever C holds (NaN included). nthreads < 1 counts as 1. */
void tg_cpu_gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                         float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                         int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                         int64_t stride_c, int nthreads);

/* The same with two levels of batch: product (o, i), o < outer, i < batch, has A at
 * a + o*ostride_a + i*stride_a, and likewise B and C. For strided views whose batch dimensions
 * do not merge into one stride (the heads of a [B, n, h, dk] tensor seen as [B, h, n, dk]), so
 * that all B·h products are one call shared out over the threads together. A's and B's strides
 * may be 0 (broadcast). outer or batch <= 0: nothing to do. */
void tg_cpu_gemm_batched2(int64_t outer, int64_t ostride_a, int64_t ostride_b, int64_t ostride_c,
                          int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N,
                          int64_t K, float alpha, const float *a, int64_t lda, int64_t stride_a,
                          const float *b, int64_t ldb, int64_t stride_b, float beta, float *c,
                          int64_t ldc, int64_t stride_c, int nthreads);

/* op(B) read through an embedding lookup that was never made (core/plan.c: TG_TF_LOOKUP): B is
 * (a view of) a [.., w] tensor whose row r would hold table row ids[r]; element x of it is
 * table[ids[x / w] * w + x % w]. off is x of product 0's first element; each product adds its
 * strides as for b. ldb is w and every stored row of a product lies in one row of the lookup
 * (tg__cpu_matmul_reads_lookup checks). It is a supplier of the small path's op(B): a product's
 * rows copied into a buffer of at most TG_CPU_GEMM_LOOKUP_MAX floats, computed from there (the
 * same values, the same bits). The packed path has no such supplier, as the products that read a
 * lookup are attention's (a decoder's gathered keys and values), small by the path rule; the
 * planner fuses a lookup only into a product on the small path. An id outside [0, rows) reads
 * row 0 (k_matmul.c reports it). */
typedef struct tg_cpu_lookup {
    const float *table; /* [rows, w] */
    const int32_t *ids;
    int64_t rows, w, off;
} tg_cpu_lookup;
#define TG_CPU_GEMM_LOOKUP_MAX 16384

/* The arguments of tg_cpu_gemm_batched2() in one struct (same meanings). outer <= 0 counts as
 * 1, so a zero-initialised struct describes a one-level batch. */
typedef struct tg_cpu_gemm_args {
    int64_t outer, ostride_a, ostride_b, ostride_c;
    int64_t batch, M, N, K;
    bool trans_a, trans_b;
    float alpha, beta;
    const float *a;
    int64_t lda, stride_a;
    const float *b; /* NULL with lookup_b */
    int64_t ldb, stride_b;
    float *c;
    int64_t ldc, stride_c;
    const tg_cpu_lookup *lookup_b; /* NULL: op(B) at b */
} tg_cpu_gemm_args;

typedef enum tg_cpu_gemm_path {
    TG_CPU_GEMM_AUTO = 0, /* let tg_cpu_gemm_choose() decide */
    TG_CPU_GEMM_SMALL,    /* the small path */
    TG_CPU_GEMM_BLAS,     /* the packed path's cuts, every block by cblas_sgemm */
    TG_CPU_GEMM_PACKED    /* the packed path (cblas_sgemm for a block it declines) */
} tg_cpu_gemm_path;

static inline int64_t tg_cpu_gemm_imin(int64_t x, int64_t y) {
    return x < y ? x : y;
}

/* Number of products: max(outer, 1) * batch. */
static inline int64_t tg_cpu_gemm_count(const tg_cpu_gemm_args *g) {
    return (g->outer > 1 ? g->outer : 1) * g->batch;
}

/* Where product (o, i) of the call lives (b NULL with a lookup) */
static inline void tg_cpu_gemm_product_at(const tg_cpu_gemm_args *g, int64_t o, int64_t i,
                                          const float **a, const float **b, float **c) {
    *a = g->a + o * g->ostride_a + i * g->stride_a;
    *b = g->lookup_b ? NULL : g->b + o * g->ostride_b + i * g->stride_b;
    *c = g->c + o * g->ostride_c + i * g->stride_c;
}
/* Product t (0 <= t < tg_cpu_gemm_count(g)): (o, i) = divmod(t, batch). */
static inline void tg_cpu_gemm_product(const tg_cpu_gemm_args *g, int64_t t, const float **a,
                                       const float **b, float **c) {
    tg_cpu_gemm_product_at(g, t / g->batch, t % g->batch, a, b, c);
}

/* The path tg_cpu_gemm_run() takes for these arguments (never TG_CPU_GEMM_AUTO). */
tg_cpu_gemm_path tg_cpu_gemm_choose(const tg_cpu_gemm_args *g, int nthreads);

/* Run the call on the given path (AUTO: tg_cpu_gemm_choose()). g is borrowed. */
void tg_cpu_gemm_run(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, int nthreads);
void tg_cpu_gemm_run_par(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, tg_cpu_par *p);
/* The small path with the portable kernel whatever the level (tests of the fallback). */
void tg_cpu_gemm_small_portable(const tg_cpu_gemm_args *g, int nthreads);

/* Into how many shares the graph runner (cpu.c) cuts a call on a team of nthreads, at most
 * `most`: `most` on the small path (its own tasks); nthreads for a product cut along k
 * (tg_cpu_gemm_split_k_fits), with `fine` each cut again into up to most / nthreads blocks of C
 * (tg_cpu_gemm_split_k_blocks); with `fine`, one product on the packed path in blocks of at
 * least 64 rows (they share op(B)), or, cut by columns (N > M) with an op(B) too big to share,
 * of at least 512 columns; never fewer than nthreads. */
int tg_cpu_gemm_shares(const tg_cpu_gemm_args *g, int nthreads, int most, bool fine);

/* Rows of the packed path's register tile: row blocks cut at multiples of it keep every tile
 * but the product's last whole. */
#define TG_CPU_GEMM_PACKED_MR 6

/* One block of one product, C = alpha·op(A)·op(B) + beta·C, row-major, as cblas_sgemm. */
typedef void (*tg_cpu_gemm_block_fn)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                     const float *a, int64_t lda, const float *b, int64_t ldb,
                                     float beta, float *c, int64_t ldc);

/* ---- weight gradients cut along k (gemm_split_k.c) ---- */

/* Whether a graph run on nth shares cuts this call along k: one product with op(A) transposed
 * (a weight gradient Xᵀ·dY, K the tokens), at least 256 k per share, whose partial sums —
 * M·N per extra share, at most 2^21 floats — are at most a quarter of the values of op(A) and
 * op(B), (M + N)·K (else the serial sum of the partials costs more than the cut saves). */
bool tg_cpu_gemm_split_k_fits(const tg_cpu_gemm_args *g, int nth);
/* Into how many blocks of C each block of k of such a call is cut again, at most `most`, when
 * the graph runner cuts fine: blocks of at least 64 columns (rows where C has more rows than
 * columns) and 2^16 values. The cut along k, and so the bits, stay the same. */
int tg_cpu_gemm_split_k_blocks(const tg_cpu_gemm_args *g, int most);
/* Share p->ith of p->nth of such a call (p->shared: the node's slot), each block computed by
 * `call`: p->team_size (else p->nth) blocks of k, each cut into p->nth / that blocks of C, at
 * most TG_CPU_GEMM_SPLIT_K_BLOCKS. */
#define TG_CPU_GEMM_SPLIT_K_BLOCKS 8
void tg_cpu_gemm_split_k_par(const tg_cpu_gemm_args *g, tg_cpu_par *p, tg_cpu_gemm_block_fn call);
/* The blocks of k that share p's call is cut into (p->team_size, else p->nth) */
static inline int tg_cpu_gemm_split_k_cuts(const tg_cpu_par *p) {
    return p->team_size > 0 ? p->team_size : p->nth;
}

/* ---- the packed path (gemm_packed.c) ---- */

/* Whether this CPU runs the packed path's kernels (the AVX2 level and up, isa.h), and whether
 * its 512-bit ones (the AVX-512 level). */
bool tg_cpu_gemm_packed_available(void);
bool tg_cpu_gemm_packed_is_wide(void);

/* Suppliers of op(B)'s packed panels. A panels object stands for op(B) of one product — its
 * tb, b, ldb, n columns, k rows, as in tg_cpu_gemm_args — packed in the layout the packed loop
 * nest reads; it is a tg_cpu_shared, so that a graph node's shares can find it in the node's
 * slot and the runner release it. Shared panels (tg_cpu_gemm_panels_shared) are packed piece
 * by piece by whichever block of the product needs a piece first; a block that finds a piece
 * claimed by another that does not finish it in time packs it itself. They come from a pool of
 * at most two buffers (NULL when both are in use, or no memory, or no packed path on this CPU);
 * tg_cpu_gemm_shared_b_trim() frees the idle ones. Kept panels (tg_cpu_gemm_keep_b) are packed
 * at once and stay until dropped. */
tg_cpu_shared *tg_cpu_gemm_panels_shared(bool tb, const float *b, int64_t ldb, int64_t n,
                                         int64_t k);
void tg_cpu_gemm_shared_b_trim(void);

/* Kept operands: op(B) of products that reuse one weight many times (a decoder's step graphs,
 * models/decode.c) packed once and found by (tb, b, ldb, n, k) by every product until dropped;
 * such a product packs no op(B) (the same values, the same bits). The caller promises that b's
 * values do not change while kept. tg_cpu_gemm_keep_b counts the holders (false: no memory or
 * no packed path on this CPU: nothing kept); tg_cpu_gemm_drop_b releases one and frees the
 * panels with the last; tg_cpu_gemm_kept_b gives the kept panels or NULL. */
bool tg_cpu_gemm_keep_b(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k);
void tg_cpu_gemm_drop_b(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k);
tg_cpu_shared *tg_cpu_gemm_kept_b(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k);
/* A kept operand's column blocks start at multiples of this (a product cut by columns into
 * blocks reading kept panels cuts there). */
#define TG_CPU_GEMM_PANELS_ALIGN 64

/* Columns [j0, j0 + n) of C = alpha·op(A)·op(B) + beta·C on the calling thread by the packed
 * loop nest: op(B) is the whole product's (tb, b, ldb, k rows), c the block's first column.
 * panels: op(B)'s panels (shared or kept: j0 a multiple of TG_CPU_GEMM_PANELS_ALIGN), or NULL
 * or panels of another operand: op(B) packed into this thread's buffer. Returns false, having
 * done nothing, where it cannot run: k <= 0, no packed path, or no memory for this thread's
 * buffers. */
bool tg_cpu_gemm_packed_block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                              const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                              float *c, int64_t ldc, tg_cpu_shared *panels, int64_t j0);

/* The micro-kernels, for tests and benchmarks: C[i][j] (row stride ldc) = (add ? C[i][j] : 0) +
 * sum_p A[i][p] · B[p][j] for i < 6, j < 16·np, p < kc. B: np consecutive packed 16-column
 * panels at b (16·kc floats each, 64-byte aligned). A: a packed 6-row panel (a[p*6 + i]) where
 * lda is 0; else read in place, row-major (a[i*lda + p]) or, with cola, transposed
 * (a[p*lda + i]). np 1 takes A packed only; np 2 and 4 need the 512-bit kernels
 * (tg_cpu_gemm_packed_is_wide). Every form gives every element the same FMAs in the same order:
 * the same bits. */
void tg_cpu_gemm_packed_kernel(int np, int64_t kc, const float *a, int64_t lda, bool cola,
                               const float *b, float *c, int64_t ldc, bool add);

/* nc rows of a matrix, kc values each, transposed into a zero-padded panel w floats wide:
 * buf[p*w + j] = src[j*ld + p] for p < kc, j < nc <= w; zero for nc <= j < w (the small path's
 * packer, which the packed path uses too). With w not a multiple of 8 the AVX2 packer stores
 * whole vectors: up to 2 floats past each row of the panel, overwritten by the next, and past
 * the panel's end (the buffer needs that slack). */
void tg__cpu_gemm_pack_transposed(const float *src, int64_t ld, int64_t kc, int nc, int w,
                                  float *buf);

/* ---- the small path (gemm_small.c) ---- */

/* portable: the scalar kernel whatever the level (tests of the fallback). */
void tg_cpu_gemm_small_par(const tg_cpu_gemm_args *g, tg_cpu_par *p, bool portable);

/* Handle the calls with nothing to multiply (M or N = 0: nothing; K = 0 or alpha = 0:
 * C = beta*C, beta 0 writing zeros, by member 0). Returns true when the job is done. */
bool tg_cpu_gemm_trivial(const tg_cpu_gemm_args *g, const tg_cpu_par *p);

#endif
