/* The CPU GEMM's entry points: the path rule, and the cut of the packed path's products into
 * blocks, each computed by the packed loop nest with its op(B) supplier, or by cblas_sgemm
 * (gemm.h says the design).
 *
 * OpenBLAS stays on one thread of its own (openblas_set_num_threads(1) at library start-up) and
 * the team parallelises around it, so that its pthread pool and the team never compete for the
 * cores.
 */
#include "backends/cpu/gemm.h"
#include "backends/cpu/cpu-impl.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>

struct tg__cpu_stats tg__cpu_stats;

/* The path rule (tg_cpu_gemm_choose).
 *
 *     M·N·K <= 2^21, but not one product of 32 rows or more  ->  small path
 *     N <= 64 and K <= 256 (any M)                           ->  small path
 *     a weight of at most 2^18 values, or the 512-bit kernels ->  packed path
 *     otherwise                                               ->  BLAS (cblas_sgemm per block)
 *
 * The small path has almost no per-call cost and reads op(A) in place, but does no cache
 * blocking beyond one panel of op(B): it wins while a product is small (every attention
 * product is below 2^21 multiply-adds, every projection far above), and for tall, narrow
 * products (N <= 64: op(B) at most 64 KiB, op(A) streamed in place a few times where a packing
 * GEMM would pack all of it for a handful of columns). One product of 32 rows or more (a
 * decoder step's projections, 64 hypotheses) goes to the packed path, which packs op(B) once
 * for every member where the small path's row blocks would each pack it. The weight is op(B),
 * K × N, for X·W and dY·Wᵀ, and the result, M × N, for a weight gradient Xᵀ·dY (K the tokens).
 * At the AVX2 level OpenBLAS is faster on weights over 2^18 values; with the 512-bit kernels
 * the packed path is faster on all of them. The crossings are per core: nthreads does not
 * enter. */
#define SMALL_MNK (128.0 * 128.0 * 128.0)
#define SMALL_ONE_MIN_M 32
#define SMALL_MAX_N 64
#define SMALL_MAX_K 256
#define PACKED_MAX_WEIGHT (1 << 18)

/* Below this many flops in the whole call the packed path runs on member 0 alone. */
#define SERIAL_FLOPS (1 << 18)

/* Rows (or columns) of C per block are a multiple of this: OpenBLAS's register tile (16 for
 * its Haswell/Zen sgemm kernel), whose bits depend on where the blocks start. */
#define BLAS_ALIGN 16

/* An op(B) that the blocks of a product share packed is at most this many floats (2 MiB):
 * each of the two shared buffers grows to the biggest op(B) it held, which counts in a step's
 * peak memory. */
#define SHARED_MAX_B (1 << 19)

/* Rows of C per share of a packed product cut finer than one share per member; columns per
 * share of one cut by columns (N > M) whose op(B) is too big to share: the packed path packs
 * op(A) once per 512 columns of C (gemm_packed.c: NC), so such blocks pack nothing twice. */
#define FINE_ROWS 64
#define FINE_COLS 512

static int64_t imax(int64_t x, int64_t y) {
    return x > y ? x : y;
}

bool tg_cpu_gemm_trivial(const tg_cpu_gemm_args *g, const tg_cpu_par *p) {
    if (g->batch <= 0 || g->M <= 0 || g->N <= 0) return true;
    if (g->K > 0 && g->alpha != 0.0f) return false;
    if (p->ith != 0) return true;
    for (int64_t t = 0; t < tg_cpu_gemm_count(g); t++)
        for (int64_t i = 0; i < g->M; i++) {
            const float *A, *B;
            float *C;
            tg_cpu_gemm_product(g, t, &A, &B, &C);
            float *cr = C + i * g->ldc;
            for (int64_t j = 0; j < g->N; j++)
                cr[j] = g->beta == 0.0f ? 0.0f : g->beta * cr[j];
        }
    return true;
}

tg_cpu_gemm_path tg_cpu_gemm_choose(const tg_cpu_gemm_args *g, int nthreads) {
    (void)nthreads;
    const double mnk = (double)g->M * (double)g->N * (double)g->K;
    if (mnk <= SMALL_MNK && (tg_cpu_gemm_count(g) > 1 || g->M < SMALL_ONE_MIN_M))
        return TG_CPU_GEMM_SMALL;
    if (g->N <= SMALL_MAX_N && g->K <= SMALL_MAX_K) return TG_CPU_GEMM_SMALL;
    const double weight = g->trans_a ? (double)g->M * (double)g->N  /* Xᵀ·dY */
                                     : (double)g->K * (double)g->N; /* X·W, dY·Wᵀ */
    if ((weight <= PACKED_MAX_WEIGHT || tg_cpu_gemm_packed_is_wide()) &&
        tg_cpu_gemm_packed_available())
        return TG_CPU_GEMM_PACKED;
    return TG_CPU_GEMM_BLAS;
}

/* One cblas_sgemm. CBLAS insists on ld >= the stored row length even for a matrix of one
 * stored row, whose ld is never used; such ld are raised. */
static void blas_call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc) {
    if ((ta ? k : m) <= 1) lda = imax(lda, imax(ta ? m : k, 1));
    if ((tb ? n : k) <= 1) ldb = imax(ldb, imax(tb ? k : n, 1));
    if (m <= 1) ldc = imax(ldc, imax(n, 1));
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta,
                c, (blasint)ldc);
}

/* The packed loop nest on a block, op(B) packed by the block itself (cblas_sgemm where it
 * declines: no memory for its buffers) */
static void packed_call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                        float *c, int64_t ldc) {
    if (!tg_cpu_gemm_packed_block(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL, 0))
        blas_call(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* Rows [i0, i0 + m) × columns [j0, j0 + n) of the product at A, B, C: by the packed loop nest
 * with op(B) from `panels` (NULL: packed by the block), or by cblas_sgemm. */
static void block(const tg_cpu_gemm_args *g, bool packed, const float *A, const float *B, float *C,
                  int64_t i0, int64_t m, int64_t j0, int64_t n, tg_cpu_shared *panels) {
    const bool ta = g->trans_a, tb = g->trans_b;
    const float *a = ta ? A + i0 : A + i0 * g->lda;
    float *c = C + i0 * g->ldc + j0;
    if (packed && tg_cpu_gemm_packed_block(ta, tb, m, n, g->K, g->alpha, a, g->lda, B, g->ldb,
                                           g->beta, c, g->ldc, panels, j0))
        return;
    blas_call(ta, tb, m, n, g->K, g->alpha, a, g->lda, tb ? B + j0 * g->ldb : B + j0, g->ldb,
              g->beta, c, g->ldc);
}

/* Block ith of dim rows or columns cut into at most n blocks that start at multiples of
 * align, as even as that allows: its first index, and its length in *len (0: no block ith). */
static int64_t cut_block(int64_t dim, int64_t align, int n, int ith, int64_t *len) {
    const int64_t units = (dim + align - 1) / align, size = (units + n - 1) / n * align;
    const int64_t lo = ith * size;
    *len = lo < dim ? tg_cpu_gemm_imin(size, dim - lo) : 0;
    return lo;
}

/* Product t cut into at most nthreads blocks of rows of C (columns when N > M: each member then
 * re-reads all of op(A) rather than all of op(B), the smaller), block ith computed. The cut
 * depends only on the shape and nthreads. Kept panels are read in blocks of columns starting
 * where their pieces do. */
static void split_product(const tg_cpu_gemm_args *g, bool packed, int64_t t, int nthreads, int ith,
                          tg_cpu_shared *kept) {
    const float *A, *B;
    float *C;
    tg_cpu_gemm_product(g, t, &A, &B, &C);
    const bool by_rows = g->M >= g->N;
    const int64_t align = !by_rows && kept ? TG_CPU_GEMM_PANELS_ALIGN : BLAS_ALIGN;
    int64_t len;
    const int64_t lo = cut_block(by_rows ? g->M : g->N, align, nthreads, ith, &len);
    if (len == 0) return;
    if (by_rows)
        block(g, packed, A, B, C, lo, len, 0, g->N, kept);
    else
        block(g, packed, A, B, C, 0, g->M, lo, len, kept);
}

/* The panels of op(B) that p's blocks of one product share: kept ones; else a team's member 0
 * takes shared ones from the pool and hands them over through the team's slot (every member
 * calls: the barrier), or a graph node's first share to get here stores them in the node's
 * slot (the graph runner releases them when the node is done). NULL: each block packs op(B). */
static tg_cpu_shared *shared_panels(const tg_cpu_gemm_args *g, tg_cpu_par *p) {
    tg_cpu_shared *kept = tg_cpu_gemm_kept_b(g->trans_b, g->b, g->ldb, g->N, g->K);
    if (kept) return kept;
    if (p->team) {
        void **slot = tg_cpu_slot(p);
        if (p->ith == 0) *slot = tg_cpu_gemm_panels_shared(g->trans_b, g->b, g->ldb, g->N, g->K);
        tg_cpu_barrier(p);
        return *slot;
    }
    if (!p->shared) return NULL;
    tg_cpu_shared *s = atomic_load_explicit(p->shared, memory_order_acquire);
    if (s) return s;
    return tg_cpu_shared_publish(p,
                                 tg_cpu_gemm_panels_shared(g->trans_b, g->b, g->ldb, g->N, g->K));
}

/* One product on the packed path cut into p->nth blocks of whole 6-row tiles (the last may be
 * short or empty) that share op(B)'s panels: more blocks than members then cost no repacking,
 * so the graph runner cuts such a product into several shares per member
 * (tg_cpu_gemm_shares) and a member that finishes first takes more of them. */
static void rows_shared_par(const tg_cpu_gemm_args *g, tg_cpu_par *p) {
    tg_cpu_shared *s = shared_panels(g, p);
    const int64_t tiles = (g->M + TG_CPU_GEMM_PACKED_MR - 1) / TG_CPU_GEMM_PACKED_MR;
    const int64_t rows = (tiles + p->nth - 1) / p->nth * TG_CPU_GEMM_PACKED_MR;
    const int64_t lo = p->ith * rows, len = tg_cpu_gemm_imin(rows, g->M - lo);
    if (len > 0) block(g, true, g->a, g->b, g->c, lo, len, 0, g->N, s);
    if (p->team) {
        tg_cpu_barrier(p); /* every member is done with s */
        if (p->ith == 0 && s) s->release(s);
    }
}

/* Whether the packed path cuts this call into blocks of rows sharing op(B) (on more than one
 * member or share): one product, big enough to share, whose op(B) takes at most SHARED_MAX_B
 * floats packed (in 16-column panels). */
static bool rows_shared(const tg_cpu_gemm_args *g) {
    const double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    return tg_cpu_gemm_count(g) == 1 && flops >= SERIAL_FLOPS &&
           (double)g->K * (double)((g->N + 15) / 16 * 16) <= SHARED_MAX_B &&
           tg_cpu_gemm_packed_available();
}

int tg_cpu_gemm_shares(const tg_cpu_gemm_args *g, int nthreads, int most, bool fine) {
    const tg_cpu_gemm_path path = tg_cpu_gemm_choose(g, nthreads);
    if (path == TG_CPU_GEMM_SMALL) return most;
    if (tg_cpu_gemm_split_k_fits(g, nthreads))
        return fine ? nthreads * tg_cpu_gemm_split_k_blocks(g, most / nthreads) : nthreads;
    int64_t k = nthreads;
    if (fine && path == TG_CPU_GEMM_PACKED && rows_shared(g))
        k = g->M / FINE_ROWS;
    else if (fine && path == TG_CPU_GEMM_PACKED && tg_cpu_gemm_count(g) == 1 && g->N > g->M)
        k = g->N / FINE_COLS;
    k = tg_cpu_gemm_imin(most, k);
    return k > nthreads ? (int)k : nthreads;
}

/* The packed path (packed) or the same cuts by cblas_sgemm: a weight gradient in a graph run
 * along k; one product sharing op(B) in blocks of rows; else whole products per member, or
 * each product cut into one block per member. */
static void blocks_par(const tg_cpu_gemm_args *g, tg_cpu_par *p, bool packed) {
    if (tg_cpu_gemm_trivial(g, p)) return;
    int nthreads = p->nth;
    const int64_t batch = tg_cpu_gemm_count(g);
    const double flops = 2.0 * (double)batch * (double)g->M * (double)g->N * (double)g->K;
    const int kcuts = tg_cpu_gemm_split_k_cuts(p);
    if (!p->team && p->shared && p->nth % kcuts == 0 &&
        p->nth / kcuts <= TG_CPU_GEMM_SPLIT_K_BLOCKS && tg_cpu_gemm_split_k_fits(g, kcuts)) {
        tg_cpu_gemm_split_k_par(g, p, packed ? packed_call : blas_call);
        return;
    }
    if (packed && p->nth > 1 && (p->team || p->shared) && rows_shared(g)) {
        rows_shared_par(g, p);
        return;
    }
    if (flops < SERIAL_FLOPS) nthreads = 1;
    if (nthreads == 1 && p->ith != 0) return;
    const int ith = nthreads == 1 ? 0 : p->ith;
    /* whole products per member when they share out evenly (or nearly: >= 4 per member); else
     * every member takes a block of each product in turn (no barrier between products: they
     * write different blocks of C) */
    if (nthreads > 1 && batch >= nthreads && (batch % nthreads == 0 || batch >= 4 * nthreads)) {
        TG_CPU_FOR(p, t, batch, true) {
            const float *A, *B;
            float *C;
            tg_cpu_gemm_product(g, t, &A, &B, &C);
            block(g, packed, A, B, C, 0, g->M, 0, g->N, NULL);
        }
        return;
    }
    tg_cpu_shared *kept =
        packed && batch == 1 ? tg_cpu_gemm_kept_b(g->trans_b, g->b, g->ldb, g->N, g->K) : NULL;
    for (int64_t t = 0; t < batch; t++)
        split_product(g, packed, t, nthreads, ith, kept);
}

void tg_cpu_gemm_run_par(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, tg_cpu_par *p) {
    if (path == TG_CPU_GEMM_AUTO) path = tg_cpu_gemm_choose(g, p->nth);
    if (path == TG_CPU_GEMM_SMALL)
        tg_cpu_gemm_small_par(g, p, false);
    else
        blocks_par(g, p, path == TG_CPU_GEMM_PACKED);
}

/* ---- Calls from outside a team (tests, benchmarks): run on a team of nthreads, kept. ---- */

static tg_cpu_team *standalone_team(int nthreads) {
    enum { MAXT = 64 };
    static tg_cpu_team *teams[MAXT + 1];
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > MAXT) nthreads = MAXT;
    pthread_mutex_lock(&mu);
    if (!teams[nthreads]) teams[nthreads] = tg_cpu_team_new(nthreads);
    tg_cpu_team *t = teams[nthreads]; /* NULL (no threads): the call runs on the caller alone */
    pthread_mutex_unlock(&mu);
    return t;
}

typedef struct {
    const tg_cpu_gemm_args *g;
    tg_cpu_gemm_path path;
    bool portable;
} standalone_call;

static void standalone_member(void *ctx, tg_cpu_par *p) {
    const standalone_call *c = ctx;
    if (c->portable)
        tg_cpu_gemm_small_par(c->g, p, true);
    else
        tg_cpu_gemm_run_par(c->g, c->path, p);
}

static void standalone(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, bool portable,
                       int nthreads) {
    standalone_call c = {g, path, portable};
    unsigned fp = tg_cpu_flush_begin();
    tg_cpu_team_run(standalone_team(nthreads), standalone_member, &c);
    tg_cpu_flush_end(fp);
}

void tg_cpu_gemm_run(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, int nthreads) {
    standalone(g, path, false, nthreads);
}

void tg_cpu_gemm_small_portable(const tg_cpu_gemm_args *g, int nthreads) {
    standalone(g, TG_CPU_GEMM_SMALL, true, nthreads);
}

void tg_cpu_gemm_batched2(int64_t outer, int64_t ostride_a, int64_t ostride_b, int64_t ostride_c,
                          int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N,
                          int64_t K, float alpha, const float *a, int64_t lda, int64_t stride_a,
                          const float *b, int64_t ldb, int64_t stride_b, float beta, float *c,
                          int64_t ldc, int64_t stride_c, int nthreads) {
    if (outer <= 0) return;
    const tg_cpu_gemm_args g = {.outer = outer,
                                .ostride_a = ostride_a,
                                .ostride_b = ostride_b,
                                .ostride_c = ostride_c,
                                .batch = batch,
                                .M = M,
                                .N = N,
                                .K = K,
                                .trans_a = trans_a,
                                .trans_b = trans_b,
                                .alpha = alpha,
                                .beta = beta,
                                .a = a,
                                .lda = lda,
                                .stride_a = stride_a,
                                .b = b,
                                .ldb = ldb,
                                .stride_b = stride_b,
                                .c = c,
                                .ldc = ldc,
                                .stride_c = stride_c};
    tg_cpu_gemm_run(&g, TG_CPU_GEMM_AUTO, nthreads);
}

void tg_cpu_gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                         float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                         int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                         int64_t stride_c, int nthreads) {
    tg_cpu_gemm_batched2(1, 0, 0, 0, batch, trans_a, trans_b, M, N, K, alpha, a, lda, stride_a, b,
                         ldb, stride_b, beta, c, ldc, stride_c, nthreads);
}
