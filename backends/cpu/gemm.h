/* The CPU backend's matrix-multiply engine (internal header).
 *
 * Every matmul of tgraph on the CPU — forward and backward, the batched attention products
 * and the big projections — goes through tg_cpu_gemm_batched() (or tg_cpu_gemm_batched2(),
 * its two-level-batch form for strided head views). It has three paths:
 *
 *  - the BLAS path (gemm.c): OpenBLAS cblas_sgemm, always on ONE OpenBLAS thread (the library
 *    calls openblas_set_num_threads(1) at start-up), with the parallelism ours: the members of
 *    the backend's thread team (team.h) each call cblas_sgemm on their own block of C (rows, or
 *    columns when M is the smaller side), or on their own products of the batch. OpenBLAS's
 *    pthread pool and our team therefore never fight over the cores.
 *  - the packed path (gemm_packed.c): the BLAS path's cut into blocks, each block computed by
 *    our own packed GEMM — both operands packed into contiguous panels (per-thread buffers),
 *    a 6×16 micro-kernel in inline assembly, and a 6×32 one with 512-bit FMAs over two panels
 *    where the CPU has AVX-512F — where it beats OpenBLAS: the projections and feed-forward
 *    products of models up to d 512 and their gradients (x86-64 with AVX2+FMA), and with the
 *    512-bit kernel every product the BLAS path would take.
 *  - the small path (gemm_small.c): a register-blocked 6x16 AVX2+FMA micro-kernel of our own
 *    (portable scalar fallback where the CPU lacks AVX2/FMA), parallel over (product, block
 *    of rows or columns) tasks handed out dynamically. It is for the many small products of
 *    attention, where OpenBLAS's per-call overhead dominates and it does not split the work
 *    across threads, and for tall, narrow products.
 *
 * The rule that picks the path is in tg_cpu_gemm_choose() (gemm.c).
 *
 * Every entry point has two forms: *_par(..., tg_cpu_par *p), called by every member of a
 * running team (the matmul kernel), each doing its share and returning without a barrier; and
 * a form taking nthreads, for tests and benchmarks, that runs the call on a team of that many
 * threads kept for the purpose.
 *
 * Determinism: for a given thread count every element of C is computed in a fixed order. It is
 * computed by one thread, except for a weight gradient in a graph run on several threads
 * (gemm_split_k.c: each share sums over its own block of k, the partial sums then added in
 * share order): bit-exact for a thread count, not across counts. Elsewhere the small and
 * packed paths are even independent of the thread count (each element's sum runs over k in the
 * same order whatever the partition).
 */
#ifndef TG_CPU_GEMM_H
#define TG_CPU_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/cpu/team.h"

/* C[b] = alpha * op(A[b]) · op(B[b]) + beta * C[b], b = 0..batch-1, all row-major.
 * op(A) is M×K: A[b] starts at a + b*stride_a; element (i,p) of op(A) is a[i*lda + p] when
 * !trans_a, a[p*lda + i] when trans_a. Likewise op(B) is K×N with ldb/trans_b, C is M×N with
 * ldc. stride_a or stride_b may be 0 (broadcast one matrix over the batch); stride_c must
 * separate the products (C[b] must not overlap). beta 0 ignores whatever C holds (NaN
 * included); any other beta scales it. nthreads: threads to use (>=1; values < 1 are
 * taken as 1). Pointers are borrowed; nothing is allocated on the heap. */
void tg_cpu_gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                         float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                         int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                         int64_t stride_c, int nthreads);

/* The same with two levels of batch: product (o, i), o < outer, i < batch, has A at
 * a + o*ostride_a + i*stride_a, B at b + o*ostride_b + i*stride_b, C at c + o*ostride_c +
 * i*stride_c. For strided views whose batch dimensions do not merge into one stride — the
 * heads of a [B, n, h, dk] tensor seen as [B, h, n, dk] are dk apart, the sequences n·h·dk —
 * so that all B·h products are one call, shared out over the threads together (a call per
 * sequence would hand each call only h small products, too few to split). Any of the six
 * strides may be 0 for A and B (broadcast). outer or batch <= 0: nothing to do.
 * tg_cpu_gemm_batched() is outer = 1. */
void tg_cpu_gemm_batched2(int64_t outer, int64_t ostride_a, int64_t ostride_b, int64_t ostride_c,
                          int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N,
                          int64_t K, float alpha, const float *a, int64_t lda, int64_t stride_a,
                          const float *b, int64_t ldb, int64_t stride_b, float beta, float *c,
                          int64_t ldc, int64_t stride_c, int nthreads);

/* ---- Below: the pieces, exposed for tests and benchmarks. ---- */

/* op(B) read through an embedding lookup that was never made (core/plan.c: TG_TF_LOOKUP): B is
 * (a view of) a [.., w] tensor whose row r would hold table row ids[r]. Element x of that tensor
 * is table[ids[x / w] * w + x % w]; off is x of B's first element (of this call's product 0),
 * and each product's offset adds o·ostride_b + i·stride_b as for b. ldb is w and every stored row
 * of a product lies in one row of the lookup (tg__cpu_matmul_reads_lookup checks), so stored row p
 * of a product at x is the table's row ids[x / w + p] from column x % w. Only the small path
 * reads one (it copies a product's rows into a buffer of at most TG_CPU_GEMM_LOOKUP_MAX floats,
 * in cache, and computes from there: the same values, the same bits). An id outside [0, rows)
 * reads row 0 (the caller reports it: k_matmul.c). */
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
    TG_CPU_GEMM_SMALL,    /* our micro-kernel, parallel over (product, row block) */
    TG_CPU_GEMM_BLAS,     /* cblas_sgemm per product or per block of one product */
    TG_CPU_GEMM_PACKED    /* as BLAS, each block by our packed GEMM (gemm_packed.c) */
} tg_cpu_gemm_path;

/* The smaller of two sizes (the three GEMM paths' blocking). */
static inline int64_t tg_cpu_gemm_imin(int64_t x, int64_t y) {
    return x < y ? x : y;
}

/* Number of products: max(outer, 1) * batch. */
static inline int64_t tg_cpu_gemm_count(const tg_cpu_gemm_args *g) {
    return (g->outer > 1 ? g->outer : 1) * g->batch;
}

/* Where product (o, i) of the call lives: item i of outer item o */
static inline void tg_cpu_gemm_product_at(const tg_cpu_gemm_args *g, int64_t o, int64_t i,
                                          const float **a, const float **b, float **c) {
    *a = g->a + o * g->ostride_a + i * g->stride_a;
    *b = g->lookup_b ? NULL : g->b + o * g->ostride_b + i * g->stride_b; /* lookup: small path */
    *c = g->c + o * g->ostride_c + i * g->stride_c;
}
/* Where product t (0 <= t < tg_cpu_gemm_count(g)) of the call lives: (o, i) = divmod(t, batch). */
static inline void tg_cpu_gemm_product(const tg_cpu_gemm_args *g, int64_t t, const float **a,
                                       const float **b, float **c) {
    tg_cpu_gemm_product_at(g, t / g->batch, t % g->batch, a, b, c);
}

/* The path tg_cpu_gemm_batched() takes for these arguments (never TG_CPU_GEMM_AUTO). */
tg_cpu_gemm_path tg_cpu_gemm_choose(const tg_cpu_gemm_args *g, int nthreads);

/* Into how many shares the graph runner (cpu.c) cuts a call on a team of nthreads, at most
 * `most`: `most` on the small path (tasks of its own); nthreads for a product it cuts along k
 * (tg_cpu_gemm_split_k_fits: its bits depend on that cut), with `fine` each of those cut again
 * into up to most / nthreads blocks of C (tg_cpu_gemm_split_k_blocks); with `fine`, one product
 * on the packed path in blocks of at least 64 rows (they share op(B): gemm_packed.c), or, cut
 * by columns (N > M) with an op(B) too big to share, of at least 512 columns (op(A) is packed
 * once per 512 columns anyway), at least nthreads; else nthreads (each further block of the
 * BLAS path would pack the shared operand again). */
int tg_cpu_gemm_shares(const tg_cpu_gemm_args *g, int nthreads, int most, bool fine);

/* Rows of a register tile of the packed path's micro-kernel: blocks of rows of C cut at
 * multiples of it keep every tile but the product's last whole. */
#define TG_CPU_GEMM_PACKED_MR 6
/* Columns of one packed panel of op(B) (the 6×16 kernel's tile): a packed op(B) holds its
 * columns rounded up to a multiple of it. */
#define TG_CPU_GEMM_PACKED_NR 16

/* One block of one product, C = alpha·op(A)·op(B) + beta·C (row-major, as cblas_sgemm):
 * cblas_sgemm itself, or our packed GEMM falling back to it (gemm.c). */
typedef void (*tg_cpu_gemm_block_fn)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                     const float *a, int64_t lda, const float *b, int64_t ldb,
                                     float beta, float *c, int64_t ldc);

/* Whether a graph run on nth shares cuts this call along k (gemm_split_k.c): one product with
 * op(A) transposed (a weight gradient Xᵀ·dY, K the tokens), at least 256 k per share, whose
 * partial sums — M·N per extra share, at most 2^21 floats, added by one share at the end — are
 * at most a quarter of the values of op(A) and op(B), (M + N)·K (on many threads the serial
 * sum would cost more than the cut saves: then the rows are cut). */
bool tg_cpu_gemm_split_k_fits(const tg_cpu_gemm_args *g, int nth);
/* For tests and benchmarks (bench_step --split-k): on (the default), such calls are cut along
 * k; off, by rows as the others. Returns whether they now are. Not while a graph runs. */
bool tg__cpu_gemm_split_k(bool on);
/* Into how many blocks of C each block of k of such a call is cut again, at most `most`, after
 * a contended run (tg_cpu_gemm_shares: `fine`): blocks of at least 64 columns, or of rows where
 * C has more rows than columns, and of at least 2^16 values. The cut along k, and so the bits,
 * stay the same. */
int tg_cpu_gemm_split_k_blocks(const tg_cpu_gemm_args *g, int most);
/* Share p->ith of p->nth of such a call (a graph node's share: p->shared is its slot), each
 * block computed by `call`: p->team_size (else p->nth) blocks of k, each cut into p->nth /
 * that blocks of C, at most TG_CPU_GEMM_SPLIT_K_BLOCKS. */
#define TG_CPU_GEMM_SPLIT_K_BLOCKS 8
void tg_cpu_gemm_split_k_par(const tg_cpu_gemm_args *g, tg_cpu_par *p, tg_cpu_gemm_block_fn call);
/* The blocks of k that share p's call is cut into (p->team_size, else p->nth) */
static inline int tg_cpu_gemm_split_k_cuts(const tg_cpu_par *p) {
    return p->team_size > 0 ? p->team_size : p->nth;
}

/* Run the product on the given path (AUTO: tg_cpu_gemm_choose()). g is borrowed. */
void tg_cpu_gemm_run(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, int nthreads);
void tg_cpu_gemm_run_par(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, tg_cpu_par *p);

/* The BLAS path alone (gemm.c). */
void tg_cpu_gemm_blas(const tg_cpu_gemm_args *g, int nthreads);
void tg_cpu_gemm_blas_par(const tg_cpu_gemm_args *g, tg_cpu_par *p);

/* The packed path alone: the BLAS path's cut of the products into blocks, each block computed
 * by tg_cpu_gemm_packed_block() (by cblas_sgemm where that declines). */
void tg_cpu_gemm_packed(const tg_cpu_gemm_args *g, int nthreads);
void tg_cpu_gemm_packed_par(const tg_cpu_gemm_args *g, tg_cpu_par *p);

/* Whether this CPU runs the packed path's kernel (x86-64 with AVX2 and FMA). */
bool tg_cpu_gemm_packed_available(void);

/* C = alpha·op(A)·op(B) + beta·C for one m×n block on the calling thread, by packing and the
 * 6×16 micro-kernel (gemm_packed.c). Same argument meanings as one product of
 * tg_cpu_gemm_args. Returns false, having done nothing, where it cannot run: k <= 0, no
 * AVX2+FMA, or no memory for this thread's pack buffers. */
bool tg_cpu_gemm_packed_block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                              const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                              float *c, int64_t ldc);

/* The same for one block of rows of a product whose op(B) — b, ldb, tb, n, k: the whole
 * product's — the caller's blocks share, packed once for all of them into `shared`
 * (tg_cpu_gemm_shared_b_new; gemm_packed.c says how). shared NULL, or made for another
 * operand: op(B) packed into this thread's buffer, as tg_cpu_gemm_packed_block(). */
bool tg_cpu_gemm_packed_block_shared(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                     const float *a, int64_t lda, const float *b, int64_t ldb,
                                     float beta, float *c, int64_t ldc, tg_cpu_shared *shared);

/* The same for columns [j0, j0 + n) of a product whose op(B) is kept (tg_cpu_gemm_keep_b: its
 * tb, b, ldb are kept's, k must be), c at the block's first column: the block packs no op(B).
 * j0 a multiple of TG_CPU_GEMM_PACKED_KEPT_ALIGN. False, having done nothing, where it cannot
 * run (as tg_cpu_gemm_packed_block, or kept not a kept operand of k rows holding those
 * columns). */
#define TG_CPU_GEMM_PACKED_KEPT_ALIGN 64
bool tg_cpu_gemm_packed_block_kept(bool ta, int64_t m, int64_t n, int64_t k, float alpha,
                                   const float *a, int64_t lda, float beta, float *c, int64_t ldc,
                                   tg_cpu_shared *kept, int64_t j0);

/* A buffer for op(B) of a product (its tb, b, ldb, n, k as tg_cpu_gemm_args), packed once by the
 * blocks of C that use it, from a pool of at most two such buffers (gemm_packed.c says why);
 * its release member gives it back. NULL when both are in use, there is no memory for it or
 * no packed path on this CPU (the blocks then pack op(B) each for itself).
 * tg_cpu_gemm_shared_b_trim() frees the pool's idle buffers. */
tg_cpu_shared *tg_cpu_gemm_shared_b_new(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k);
void tg_cpu_gemm_shared_b_trim(void);
/* Whether op(B) of n columns and k rows is small enough for the blocks of one product to share
 * it packed (gemm.c: at most 2 MiB packed); a bigger one is packed by each block, and cut by
 * columns where N > M. */
bool tg_cpu_gemm_b_shareable(int64_t n, int64_t k);

/* Kept operands: op(B) of products that reuse one weight many times — a decoder's step graphs,
 * each of a few rows (models/decode.c) — packed once, in the layout the blocks of a product
 * share, and found by (tb, b, ldb, n, k) by every product until dropped: such a product then
 * packs nothing (its blocks read the kept panels: the same values, so the same bits), whether
 * it is cut by rows (an op(B) the blocks may share, tg_cpu_gemm_b_shareable) or by columns
 * (N > M: each block reads only its columns' panels, gemm.c). The caller promises that b's
 * values do not change while it is kept. tg_cpu_gemm_keep_b counts the holders (false: no
 * memory or no packed path on this CPU: nothing kept);
 * tg_cpu_gemm_drop_b releases one and frees the panels with the last; tg_cpu_gemm_kept_b (a
 * product's lookup) gives the kept object or NULL. For tests: how many are kept, and how many
 * lookups found one. */
bool tg_cpu_gemm_keep_b(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k);
void tg_cpu_gemm_drop_b(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k);
tg_cpu_shared *tg_cpu_gemm_kept_b(bool tb, const float *b, int64_t ldb, int64_t n, int64_t k);
int tg__cpu_gemm_kept_count(void);
int tg__cpu_gemm_kept_hits(void);
/* For tests: mark every piece of s claimed by a block that never finishes packing it, as one
 * held off its core would (the blocks then pack the pieces themselves after their wait). */
void tg__cpu_gemm_shared_b_stall(tg_cpu_shared *s);

/* The packed path's micro-kernel: C[i][j] (row stride ldc) = (add ? C[i][j] : 0) +
 * sum_p a[p*6 + i] · b[p*16 + j] for i < 6, j < 16, p < kc: a is a packed 6-row panel, b a
 * packed 16-column panel (32-byte aligned). Only where tg_cpu_gemm_packed_available(). */
void tg_cpu_gemm_packed_kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                               bool add);

/* The same for a 6×32 tile whose two 16-column halves are packed panels b0 and b1, with 512-bit
 * FMAs (x86-64 with AVX-512F; elsewhere two calls of the kernel above). Each element's sum runs
 * over k in the same order as the 16-column kernel's: the same bits. */
void tg_cpu_gemm_packed_kernel2(int64_t kc, const float *a, const float *b0, const float *b1,
                                float *c, int64_t ldc, bool add);

/* The 6×32 kernel with op(A) read in place instead of from a packed panel: row i of the tile
 * at a + i·lda (row-major, lda in floats), value p of k at a[i·lda + p]; b0, b1 and the rest as
 * tg_cpu_gemm_packed_kernel2, whose bits it gives. Only where tg_cpu_gemm_packed_is_wide(). */
void tg_cpu_gemm_packed_kernel2_rowa(int64_t kc, const float *a, int64_t lda, const float *b0,
                                     const float *b1, float *c, int64_t ldc, bool add);

/* The same with a transposed op(A) in place: value p of k for the tile's rows at a[p·lda + i],
 * i < 6 (six consecutive floats of A's row p). */
void tg_cpu_gemm_packed_kernel2_cola(int64_t kc, const float *a, int64_t lda, const float *b0,
                                     const float *b1, float *c, int64_t ldc, bool add);

/* The same three for a 6×64 tile whose four 16-column quarters are consecutive packed panels
 * (b, b + 16·kc, b + 32·kc, b + 48·kc): the 6×32 kernels' bits on each half, from 24 zmm
 * accumulators. Only where tg_cpu_gemm_packed_is_wide() (elsewhere two 6×32 calls). */
void tg_cpu_gemm_packed_kernel4(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                bool add);
void tg_cpu_gemm_packed_kernel4_rowa(int64_t kc, const float *a, int64_t lda, const float *b,
                                     float *c, int64_t ldc, bool add);
void tg_cpu_gemm_packed_kernel4_cola(int64_t kc, const float *a, int64_t lda, const float *b,
                                     float *c, int64_t ldc, bool add);

/* For tests and benchmarks: on (the default), the packed path's 6×64 and 6×32 tiles read op(A)
 * in place, row-major or transposed (alpha 1, N a multiple of 32); off, always from packed
 * panels.
 * Returns the previous setting. Not for use while a product runs. */
bool tg__cpu_gemm_packed_rowa(bool on);

/* For benchmarks (bench_step --prefetch): on (the default), while the packed path computes one
 * block of op(B) it fetches the next block's source into the core's cache; off, it does not.
 * Returns the previous setting. Not for use while a product runs. */
bool tg__cpu_gemm_packed_prefetch(bool on);

/* Whether the packed path's blocks use the 6×32 kernel (the CPU has AVX-512F and isa.h's
 * level is AVX-512; tests cap it at AVX2 with tg__cpu_isa_cap). */
bool tg_cpu_gemm_packed_is_wide(void);

/* nc rows of a matrix, kc values each, transposed into a zero-padded panel w floats wide:
 * buf[p*w + j] = src[j*ld + p] for p < kc, j < nc <= w; zero for nc <= j < w. The small
 * path's transposing packer (AVX2 where available). With w not a multiple of 8 (the packed
 * path's 6-row panels of A) the AVX2 packer stores whole vectors: up to 2 floats past each
 * row of the panel, which the next row overwrites, and past the panel's end (the buffer
 * needs that slack; panels packed in order overwrite each other's). */
void tg__cpu_gemm_pack_transposed(const float *src, int64_t ld, int64_t kc, int nc, int w,
                                  float *buf);

/* The small path alone (gemm_small.c). portable: use the scalar kernel even where AVX2+FMA
 * is available (to test the fallback). */
void tg_cpu_gemm_small(const tg_cpu_gemm_args *g, int nthreads, bool portable);
void tg_cpu_gemm_small_par(const tg_cpu_gemm_args *g, tg_cpu_par *p, bool portable);

/* For tests and benchmarks: on (the default), the small path computes Q·Kᵀ-shaped products
 * over fewer than 16 keys (trans_b, N < 16, K 8, 16, 32 or 64; AVX2) as dot products of rows
 * read in place (gemm_small.c); off, with its tiles on a transposed panel. Returns the previous
 * setting. Not for use while a product runs. */
bool tg__cpu_gemm_small_dot(bool on);

/* "avx2+fma" or "portable": the kernel the small path uses on this CPU. Static string. */
const char *tg_cpu_gemm_small_isa(void);

/* Handle the products with nothing to multiply (M or N = 0: nothing; K = 0 or alpha = 0:
 * C = beta*C, with beta 0 writing zeros, by member 0). Returns true when the job is done (or
 * member 0's). */
bool tg_cpu_gemm_trivial(const tg_cpu_gemm_args *g, const tg_cpu_par *p);

#endif
