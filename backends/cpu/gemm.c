/* The CPU GEMM entry point, the path rule and the BLAS path (see gemm.h for the design).
 *
 * BLAS path: OpenBLAS stays on one thread of its own (openblas_set_num_threads(1) at library
 * start-up) and we parallelise around it with the backend's thread team, so that its pthread
 * pool and our team never both spin on the two cores. A big product is cut into one block of
 * rows of C per member (or of columns, when N > M) and each member calls cblas_sgemm on its
 * block; a batch of big products is shared out whole, one cblas_sgemm per product.
 */
#include "backends/cpu/gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>

/* The path rule.
 *
 * Per product the work is M·N·K multiply-adds. OpenBLAS reaches its 72–78 GFLOP/s per core
 * only once a call is big enough to amortise its per-call cost (argument checks, buffer
 * set-up, packing of both operands: microseconds) and it never splits a small call across
 * threads. Our micro-kernel has almost no per-call cost, reads op(A) (and op(B) when not
 * transposed) in place and runs at a similar per-core rate while a 16-column panel of op(B)
 * sits in L1, but it does no cache blocking beyond that panel. So:
 *
 *     M·N·K <= 2^21, but not one product of 32 rows or more
 *                                  ->  small path (our kernel, parallel over products × blocks)
 *     N <= 64 and K <= 256 (any M) ->  small path
 *     otherwise                    ->  BLAS path (cblas_sgemm per product or per block)
 *
 * 2^21 = 128·128·128 (4.2 MFLOP per product, ~50 µs on one core) is about where the two
 * paths cross on the 2-core Zen 3 machines (96³–128³: within noise of each other, batch 1 or
 * 8, 2 threads); every attention product (n <= 128, head width <= 128) is below it, every
 * projection (M = tokens >= 1000, K, N = model widths >= 256) far above it. The second line
 * is for tall, narrow products (M·256 × 256·N with N <= 64: a logits layer over a small
 * vocabulary, 4096×64×64): op(B) is at most 64 KiB, our kernel streams op(A) in place at most
 * 4 times, while OpenBLAS packs all of op(A) for a handful of columns; measured 1.1–1.5× faster
 * than the split BLAS path there. nthreads does not enter: the crossing is per core and both
 * paths use every thread. One product alone of 32 rows or more (a decoder step's projections:
 * 64 hypotheses × 128 × 128) goes on to the rules below (the packed path): the small path cuts it
 * into blocks of rows that each pack all of op(B), where the packed path packs it once for every
 * member; in `tg translate`'s steps 64 × 128 × 128 ran 1.6× faster so, 16 × 128 × 128 1.9×
 * slower (docs/log/2026-12-06.md).
 *
 * Of the rest, the packed path (our packed GEMM per block, gemm_packed.c) takes those whose
 * weight matrix has at most 2^18 values (1 MiB): op(B), K × N, for X·W and dY·Wᵀ (M, the
 * tokens, any number), and the result, M × N, for a weight gradient Xᵀ·dY (op(A) transposed,
 * K the tokens) — the projections and feed-forward layers of models up to d 512 (d 256 with
 * d_ff 1024), where it ran 0.98–1.22× OpenBLAS's rate on one core, 1.04–1.05× over those
 * products of g2p-small and nmt-small (benchmarks/micro/bench_gemm_packed.c). OpenBLAS keeps the
 * bigger weights (1024 × 1024: 0.89–0.99×; nmt's 512 × 2048: 0.86–0.98×; a vocabulary of 8000:
 * 0.91–1.13×, mostly below 1) and every CPU without AVX2+FMA — except where the packed path
 * runs its 512-bit kernel (AVX-512F: tg_cpu_gemm_packed_is_wide): there it took every one of
 * these products at 1.5–2× the rate of OpenBLAS 0.3.21's call on 2 threads (which stays on
 * its AVX2 kernels there; benchmarks/micro/bench_gemm on a Zen 5-class host,
 * docs/log/2026-12-02.md). */
#define TG_GEMM_SMALL_MNK (128.0 * 128.0 * 128.0)
#define TG_GEMM_SMALL_ONE_MIN_M 32
#define TG_GEMM_SMALL_MAX_N 64
#define TG_GEMM_SMALL_MAX_K 256
#define TG_GEMM_PACKED_MAX_WEIGHT (1 << 18)

/* Below this many flops in the whole call the BLAS path runs on member 0 alone. */
#define TG_GEMM_BLAS_SERIAL_FLOPS (1 << 18)

/* Rows (or columns) of C per thread block are a multiple of this, so that the blocks start
 * on OpenBLAS's register-tile boundaries (16 for its Haswell/Zen sgemm kernel). */
#define TG_GEMM_BLAS_ALIGN 16

static int64_t imax(int64_t x, int64_t y) {
    return x > y ? x : y;
}

bool tg_cpu_gemm_trivial(const tg_cpu_gemm_args *g, const tg_cpu_par *p) {
    if (g->batch <= 0 || g->M <= 0 || g->N <= 0) return true;
    if (g->K > 0 && g->alpha != 0.0f) return false;
    if (p->ith != 0) return true;
    /* C = beta*C; beta 0 writes zeros whatever C held (NaN included). */
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
    (void)nthreads; /* the crossing point is per core; both paths use every thread */
    const double mnk = (double)g->M * (double)g->N * (double)g->K;
    if (mnk <= TG_GEMM_SMALL_MNK && (tg_cpu_gemm_count(g) > 1 || g->M < TG_GEMM_SMALL_ONE_MIN_M))
        return TG_CPU_GEMM_SMALL;
    if (g->N <= TG_GEMM_SMALL_MAX_N && g->K <= TG_GEMM_SMALL_MAX_K) return TG_CPU_GEMM_SMALL;
    const double weight = g->trans_a ? (double)g->M * (double)g->N  /* Xᵀ·dY: K the tokens */
                                     : (double)g->K * (double)g->N; /* X·W, dY·Wᵀ */
    if ((weight <= TG_GEMM_PACKED_MAX_WEIGHT || tg_cpu_gemm_packed_is_wide()) &&
        tg_cpu_gemm_packed_available())
        return TG_CPU_GEMM_PACKED;
    return TG_CPU_GEMM_BLAS;
}

/* One cblas_sgemm on a (block of a) product. CBLAS insists on ld >= the stored row length
 * even when a matrix has a single stored row, where ld is never used; such ld are raised. */
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

/* The packed path's block: our packed GEMM, or cblas_sgemm where it declines (no AVX2+FMA, no
 * memory for the pack buffers). */
static void packed_call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                        float *c, int64_t ldc) {
    if (!tg_cpu_gemm_packed_block(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        blas_call(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* How one block of one product is computed: blas_call or packed_call. */
typedef tg_cpu_gemm_block_fn block_fn;

/* Block ith of dim rows or columns cut into at most n blocks that start at multiples of
 * align, as even as that allows: its first index, and its length in *len (0: no block ith). */
static int64_t cut_block(int64_t dim, int64_t align, int n, int ith, int64_t *len) {
    const int64_t units = (dim + align - 1) / align, size = (units + n - 1) / n * align;
    const int64_t lo = ith * size;
    *len = lo < dim ? tg_cpu_gemm_imin(size, dim - lo) : 0;
    return lo;
}

/* Product t cut into at most nthreads blocks of rows of C (columns when N > M: each member
 * then re-reads all of op(A) rather than all of op(B), the smaller of the two), one per member.
 * The cut depends only on the shape and nthreads, so results are reproducible for a thread
 * count. (Cutting into 4 blocks per thread handed out dynamically, for balance on a shared
 * machine, measured no better: each extra block re-packs the shared operand.) Member ith
 * computes block ith; nthreads 1 is member 0 alone. */
static void split_product(const tg_cpu_gemm_args *g, int64_t t, int nthreads, int ith,
                          block_fn call) {
    const float *A, *B;
    float *C;
    tg_cpu_gemm_product(g, t, &A, &B, &C);
    const bool by_rows = g->M >= g->N;
    const int64_t dim = by_rows ? g->M : g->N;
    int64_t len;
    const int64_t lo = cut_block(dim, TG_GEMM_BLAS_ALIGN, nthreads, ith, &len);
    if (len > 0) {
        if (by_rows)
            call(g->trans_a, g->trans_b, len, g->N, g->K, g->alpha,
                 g->trans_a ? A + lo : A + lo * g->lda, g->lda, B, g->ldb, g->beta, C + lo * g->ldc,
                 g->ldc);
        else
            call(g->trans_a, g->trans_b, g->M, len, g->K, g->alpha, A, g->lda,
                 g->trans_b ? B + lo * g->ldb : B + lo, g->ldb, g->beta, C + lo, g->ldc);
    }
}

/* The op(B) buffer that p's blocks of one product share: a team's member 0 takes one from the
 * pool and hands it over through the team's slot (the caller's barriers: every member calls);
 * a graph node's first share to get here stores one in the node's slot (the graph runner gives
 * it back when the node is done). NULL: each block packs op(B) for itself. */
static tg_cpu_shared *shared_b_of(const tg_cpu_gemm_args *g, tg_cpu_par *p) {
    tg_cpu_shared *kept = tg_cpu_gemm_kept_b(g->trans_b, g->b, g->ldb, g->N, g->K);
    if (kept) return kept; /* packed already, for as long as it is kept: no slot, no barrier */
    if (p->team) {
        void **slot = tg_cpu_slot(p);
        if (p->ith == 0) *slot = tg_cpu_gemm_shared_b_new(g->trans_b, g->b, g->ldb, g->N, g->K);
        tg_cpu_barrier(p);
        return *slot;
    }
    if (!p->shared) return NULL;
    tg_cpu_shared *s = atomic_load_explicit(p->shared, memory_order_acquire);
    if (s) return s;
    return tg_cpu_shared_publish(p, tg_cpu_gemm_shared_b_new(g->trans_b, g->b, g->ldb, g->N, g->K));
}

/* One product on the packed path cut into p->nth blocks of rows of C, whole 6-row panels each
 * (the last may be short or empty), op(B) packed once for all of them (gemm_packed.c): more
 * blocks than members then cost no repacking, so the graph runner cuts such a product into
 * several shares per member (tg_cpu_gemm_shares) and a member that finishes first, or whose
 * partner another process holds off its core, takes more of them. Block ith: member or share
 * ith. */
static void packed_rows_shared(const tg_cpu_gemm_args *g, tg_cpu_par *p) {
    tg_cpu_shared *s = shared_b_of(g, p);
    const int64_t panels = (g->M + TG_CPU_GEMM_PACKED_MR - 1) / TG_CPU_GEMM_PACKED_MR;
    const int64_t rows = (panels + p->nth - 1) / p->nth * TG_CPU_GEMM_PACKED_MR;
    const int64_t lo = p->ith * rows, len = tg_cpu_gemm_imin(rows, g->M - lo);
    if (len > 0) {
        const float *A = g->trans_a ? g->a + lo : g->a + lo * g->lda;
        float *C = g->c + lo * g->ldc;
        if (!tg_cpu_gemm_packed_block_shared(g->trans_a, g->trans_b, len, g->N, g->K, g->alpha, A,
                                             g->lda, g->b, g->ldb, g->beta, C, g->ldc, s))
            blas_call(g->trans_a, g->trans_b, len, g->N, g->K, g->alpha, A, g->lda, g->b, g->ldb,
                      g->beta, C, g->ldc);
    }
    if (p->team) {
        tg_cpu_barrier(p); /* every member is done with s */
        if (p->ith == 0 && s) s->release(s);
    }
}

/* One product cut by columns of C (N > M) whose op(B) is kept (tg_cpu_gemm_keep_b): block ith
 * of nthreads, cut at multiples of the kept panels' pieces, reads only its columns' panels and
 * packs nothing. (Cut by rows instead, each block would read all the panels: a decoder's output
 * projection, 4 MB packed, read 241 against 268 GFLOP/s packed per step.) */
static void packed_cols_kept(const tg_cpu_gemm_args *g, int nthreads, int ith,
                             tg_cpu_shared *kept) {
    const float *A, *B;
    float *C;
    tg_cpu_gemm_product(g, 0, &A, &B, &C);
    int64_t len;
    const int64_t lo = cut_block(g->N, TG_CPU_GEMM_PACKED_KEPT_ALIGN, nthreads, ith, &len);
    if (len == 0) return;
    if (!tg_cpu_gemm_packed_block_kept(g->trans_a, g->M, len, g->K, g->alpha, A, g->lda, g->beta,
                                       C + lo, g->ldc, kept, lo))
        blas_call(g->trans_a, g->trans_b, g->M, len, g->K, g->alpha, A, g->lda,
                  g->trans_b ? B + lo * g->ldb : B + lo, g->ldb, g->beta, C + lo, g->ldc);
}

/* An op(B) the blocks of a product share packed takes at most TG_GEMM_SHARED_MAX_B floats
 * (2 MiB). The buffers are kept for reuse and a step has up to two in use at once (g2p-small), each
 * grown to the biggest op(B) it held: with the feed-forward weight gradient's dY (1280 × 1024) they
 * added 11.6 MiB to the step's peak memory (4.7 %), for no gain on that product
 * (benchmarks/micro/bench_gemm: 0.95× OpenBLAS either way), while the other weight gradients'
 * (dY 1280 × 256) went from 0.95× to 0.99–1.00×. */
#define TG_GEMM_SHARED_MAX_B (1 << 19)
bool tg_cpu_gemm_b_shareable(int64_t n, int64_t k) {
    return (double)k * (double)((n + TG_CPU_GEMM_PACKED_NR - 1) / TG_CPU_GEMM_PACKED_NR *
                                TG_CPU_GEMM_PACKED_NR) <=
           TG_GEMM_SHARED_MAX_B;
}

/* Whether the packed path cuts this call into blocks of rows sharing op(B) (when it runs on
 * more than one member or share): one product, big enough to share (the BLAS path's serial
 * threshold), whose op(B) is shareable. */
static bool rows_shared(const tg_cpu_gemm_args *g) {
    const double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    return tg_cpu_gemm_count(g) == 1 && flops >= TG_GEMM_BLAS_SERIAL_FLOPS &&
           tg_cpu_gemm_b_shareable(g->N, g->K) && tg_cpu_gemm_packed_available();
}

/* Rows of C per share of a packed product cut finer than one share per member; columns per
 * share of one cut by columns (N > M) whose op(B) is too big to share: the packed path packs
 * op(A) once per 512 columns of C anyway (gemm_packed.c: NC), so such blocks pack nothing
 * twice. */
#define TG_GEMM_FINE_ROWS 64
#define TG_GEMM_FINE_COLS 512

int tg_cpu_gemm_shares(const tg_cpu_gemm_args *g, int nthreads, int most, bool fine) {
    const tg_cpu_gemm_path path = tg_cpu_gemm_choose(g, nthreads);
    if (path == TG_CPU_GEMM_SMALL) return most;
    if (tg_cpu_gemm_split_k_fits(g, nthreads))
        return fine ? nthreads * tg_cpu_gemm_split_k_blocks(g, most / nthreads) : nthreads;
    int64_t k = nthreads;
    if (fine && path == TG_CPU_GEMM_PACKED && rows_shared(g))
        k = g->M / TG_GEMM_FINE_ROWS;
    else if (fine && path == TG_CPU_GEMM_PACKED && tg_cpu_gemm_count(g) == 1 && g->N > g->M)
        k = g->N / TG_GEMM_FINE_COLS;
    k = tg_cpu_gemm_imin(most, k);
    return k > nthreads ? (int)k : nthreads;
}

/* The BLAS and packed paths: whole products or blocks of them per member, each by `call`. */
static void blocks_par(const tg_cpu_gemm_args *g, tg_cpu_par *p, block_fn call) {
    if (tg_cpu_gemm_trivial(g, p)) return;
    int nthreads = p->nth;
    const int64_t batch = tg_cpu_gemm_count(g);
    const double flops = 2.0 * (double)batch * (double)g->M * (double)g->N * (double)g->K;
    const int kcuts = tg_cpu_gemm_split_k_cuts(p);
    if (!p->team && p->shared && p->nth % kcuts == 0 &&
        p->nth / kcuts <= TG_CPU_GEMM_SPLIT_K_BLOCKS && tg_cpu_gemm_split_k_fits(g, kcuts)) {
        tg_cpu_gemm_split_k_par(g, p, call); /* a weight gradient in a graph run */
        return;
    }
    if (call == packed_call && p->nth > 1 && (p->team || p->shared) && rows_shared(g)) {
        packed_rows_shared(g, p);
        return;
    }
    if (flops < TG_GEMM_BLAS_SERIAL_FLOPS) nthreads = 1;
    if (nthreads == 1 && p->ith != 0) return;
    if (call == packed_call && batch == 1 && g->N > g->M) {
        tg_cpu_shared *kept = tg_cpu_gemm_kept_b(g->trans_b, g->b, g->ldb, g->N, g->K);
        if (kept) {
            packed_cols_kept(g, nthreads, nthreads == 1 ? 0 : p->ith, kept);
            return;
        }
    }

    /* Whole products per member when they share out evenly (or nearly: >= 4 per member);
     * otherwise every member takes a block of each product in turn (no barrier between
     * products: they write different blocks of C). */
    if (nthreads > 1 && batch >= nthreads && (batch % nthreads == 0 || batch >= 4 * nthreads)) {
        TG_CPU_FOR(p, t, batch, true) {
            const float *A, *B;
            float *C;
            tg_cpu_gemm_product(g, t, &A, &B, &C);
            call(g->trans_a, g->trans_b, g->M, g->N, g->K, g->alpha, A, g->lda, B, g->ldb, g->beta,
                 C, g->ldc);
        }
        return;
    }
    for (int64_t t = 0; t < batch; t++)
        split_product(g, t, nthreads, nthreads == 1 ? 0 : p->ith, call);
}

void tg_cpu_gemm_blas_par(const tg_cpu_gemm_args *g, tg_cpu_par *p) {
    blocks_par(g, p, blas_call);
}

void tg_cpu_gemm_packed_par(const tg_cpu_gemm_args *g, tg_cpu_par *p) {
    blocks_par(g, p, packed_call);
}

void tg_cpu_gemm_run_par(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, tg_cpu_par *p) {
    if (path == TG_CPU_GEMM_AUTO) path = tg_cpu_gemm_choose(g, p->nth);
    if (path == TG_CPU_GEMM_SMALL)
        tg_cpu_gemm_small_par(g, p, false);
    else if (path == TG_CPU_GEMM_PACKED)
        tg_cpu_gemm_packed_par(g, p);
    else
        tg_cpu_gemm_blas_par(g, p);
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
    if (c->path == TG_CPU_GEMM_SMALL)
        tg_cpu_gemm_small_par(c->g, p, c->portable);
    else
        tg_cpu_gemm_run_par(c->g, c->path, p);
}

static void standalone(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, bool portable, int nthreads) {
    standalone_call c = {g, path, portable};
    tg_cpu_team_run(standalone_team(nthreads), standalone_member, &c);
}

void tg_cpu_gemm_run(const tg_cpu_gemm_args *g, tg_cpu_gemm_path path, int nthreads) {
    standalone(g, path, false, nthreads);
}

void tg_cpu_gemm_blas(const tg_cpu_gemm_args *g, int nthreads) {
    standalone(g, TG_CPU_GEMM_BLAS, false, nthreads);
}

void tg_cpu_gemm_packed(const tg_cpu_gemm_args *g, int nthreads) {
    standalone(g, TG_CPU_GEMM_PACKED, false, nthreads);
}

void tg_cpu_gemm_small(const tg_cpu_gemm_args *g, int nthreads, bool portable) {
    standalone(g, TG_CPU_GEMM_SMALL, portable, nthreads);
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
