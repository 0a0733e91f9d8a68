/* Weight gradients cut along k (the tokens) in a graph run: each share sums over the tokens
 * its own core wrote.
 *
 * A weight gradient Xᵀ·dY (op(A) transposed; M, N the layer's widths, K the batch's tokens)
 * cut into blocks of rows of C has every member read all K rows of X and dY, half of them
 * written by the other member, from the other core's cache. Cut along k, share i of n sums
 * rows [i·kb, (i+1)·kb) of X and dY, kb = ceil(K / n) — the rows the row-cut kernels before it
 * gave member i — so only the partial sums cross between cores: M·N values per extra share
 * instead of (M + N)·K/2.
 *
 * Share 0 writes C = beta·C + alpha·S_0 in place; share i > 0 writes alpha·S_i into partial
 * buffer i; whichever share finishes last adds partials 1, 2, ... in that order into C. So C is
 * (beta·C + S_0) + S_1 + ... whoever runs which share and whenever: bit-exact for a thread
 * count (the graph runner cuts such a product into exactly nthreads blocks of k, fine or not:
 * gemm.c, tg_cpu_gemm_shares), though not one thread's single sum. Each S_i is one block call
 * (the packed loop nest, or cblas_sgemm).
 *
 * When the graph runner cuts fine (cpu.c: after a contended run) each block of k is cut again
 * into a few blocks of C (columns, or rows where C has more rows than columns), one share each,
 * so that a member held off its core holds up one of those while its partner takes the rest;
 * each block of C is finished, partials added, by the last of its nthreads shares. An element
 * of S_i is summed in the same order in any block of C: the bits are the same as uncut.
 *
 * The partial buffers come with the node's shared object (team.h: the graph runner releases it
 * when the node is done) from a pool of mapped pages. Where none can be had, share 0 computes
 * the whole product alone and the others nothing: the same result to rounding, not the same
 * bits. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"

/* Fewest k per share, most partial values per product (M·N·(n - 1) floats: 8 MiB). */
enum { SPLIT_K_MIN_PER_SHARE = 256 };
#define SPLIT_K_MAX_PARTIAL (1 << 21)

bool tg_cpu_gemm_split_k_fits(const tg_cpu_gemm_args *g, int nth) {
    if (nth < 2 || !g->trans_a || tg_cpu_gemm_count(g) != 1 || tg__cpu_stats.gemm.no_split_k)
        return false;
    const double m = (double)g->M, n = (double)g->N, k = (double)g->K;
    return k >= (double)SPLIT_K_MIN_PER_SHARE * nth && m * n * (nth - 1) <= SPLIT_K_MAX_PARTIAL &&
           4.0 * m * n * (nth - 1) <= (m + n) * k;
}

typedef struct split_k {
    tg_cpu_shared base;
    struct split_k *next; /* the pool's free list */
    float *part;          /* partials 1 .. n-1, M·N floats each, rows N apart */
    size_t cap;           /* floats mapped */
    atomic_int finished[TG_CPU_GEMM_SPLIT_K_BLOCKS]; /* per block of C: its shares done */
} split_k;

/* Idle objects kept for the next products; more are made while a run holds these. */
enum { POOL_KEEP = 2 };
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static split_k *pool;
static int pool_idle;

static void split_k_free(split_k *s) {
    if (s->part) munmap(s->part, s->cap * sizeof(float));
    free(s);
}

static void split_k_release(tg_cpu_shared *base) {
    split_k *s = (split_k *)base;
    pthread_mutex_lock(&pool_mu);
    const bool keep = pool_idle < POOL_KEEP;
    if (keep) {
        s->next = pool;
        pool = s;
        pool_idle++;
    }
    pthread_mutex_unlock(&pool_mu);
    if (!keep) split_k_free(s);
}

/* Every share that finds no partial buffers: share 0 does the whole product. */
static void no_buffers_release(tg_cpu_shared *s) {
    (void)s;
}
static tg_cpu_shared no_buffers = {no_buffers_release};

static split_k *split_k_new(size_t floats) {
    pthread_mutex_lock(&pool_mu);
    split_k *s = pool;
    if (s) {
        pool = s->next;
        pool_idle--;
    }
    pthread_mutex_unlock(&pool_mu);
    if (!s && !(s = calloc(1, sizeof *s))) return NULL;
    s->base.release = split_k_release;
    if (s->cap < floats) {
        if (s->part) munmap(s->part, s->cap * sizeof(float));
        s->cap = 0;
        void *p = mmap(NULL, floats * sizeof(float), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        s->part = p == MAP_FAILED ? NULL : p;
        if (!s->part) {
            split_k_free(s);
            return NULL;
        }
        s->cap = floats;
    }
    for (int b = 0; b < TG_CPU_GEMM_SPLIT_K_BLOCKS; b++)
        atomic_store_explicit(&s->finished[b], 0, memory_order_relaxed);
    return s;
}

/* The node's object: made by the first share to get here, stored in the node's slot. */
static tg_cpu_shared *shared_of(const tg_cpu_gemm_args *g, tg_cpu_par *p, int kcuts) {
    tg_cpu_shared *s = atomic_load_explicit(p->shared, memory_order_acquire);
    if (s) return s;
    split_k *mine = split_k_new((size_t)g->M * (size_t)g->N * (size_t)(kcuts - 1));
    return tg_cpu_shared_publish(p, mine ? &mine->base : &no_buffers);
}

/* c += x over m rows of n (c's rows ldc apart, x's ldx), in the order of the elements */
TG_CPU_BODY void add_rows_body(float *c, int64_t ldc, const float *x, int64_t ldx, int64_t m,
                               int64_t n) {
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++)
            c[r * ldc + j] += x[r * ldx + j];
}
TG_CPU_BY_LEVEL(, add_rows,
                (float *c, int64_t ldc, const float *x, int64_t ldx, int64_t m, int64_t n),
                (c, ldc, x, ldx, m, n))

/* Fewest columns (or rows) per block of C of a cut block of k: the 6×64 kernel's width; and
 * fewest values: each block streams all of its block of k of the other operand, which smaller
 * blocks would not repay */
enum { SPLIT_K_MIN_BLOCK = 64, SPLIT_K_MIN_BLOCK_VALUES = 1 << 16 };

static bool blocks_by_rows(const tg_cpu_gemm_args *g) {
    return g->M > g->N;
}

int tg_cpu_gemm_split_k_blocks(const tg_cpu_gemm_args *g, int most) {
    const int64_t side = blocks_by_rows(g) ? g->M : g->N;
    int64_t n = tg_cpu_gemm_imin(most, side / SPLIT_K_MIN_BLOCK);
    n = tg_cpu_gemm_imin(n, g->M * g->N / SPLIT_K_MIN_BLOCK_VALUES);
    n = tg_cpu_gemm_imin(n, TG_CPU_GEMM_SPLIT_K_BLOCKS);
    return n > 1 ? (int)n : 1;
}

/* Block b of nb of C's rows (by_rows) or columns: [*lo, *lo + *len), whole register tiles
 * (6 rows, 64 columns) but the last; empty where the earlier blocks cover the side. */
static void c_block(int64_t side, bool by_rows, int nb, int b, int64_t *lo, int64_t *len) {
    const int64_t unit = by_rows ? TG_CPU_GEMM_PACKED_MR : SPLIT_K_MIN_BLOCK;
    const int64_t per = ((side + nb - 1) / nb + unit - 1) / unit * unit;
    *lo = tg_cpu_gemm_imin(b * per, side);
    *len = tg_cpu_gemm_imin(per, side - *lo);
}

void tg_cpu_gemm_split_k_par(const tg_cpu_gemm_args *g, tg_cpu_par *p, tg_cpu_gemm_block_fn call) {
    const int kcuts = tg_cpu_gemm_split_k_cuts(p), nb = p->nth / kcuts;
    tg_cpu_shared *sh = shared_of(g, p, kcuts);
    if (sh == &no_buffers) {
        if (p->ith == 0)
            call(true, g->trans_b, g->M, g->N, g->K, g->alpha, g->a, g->lda, g->b, g->ldb, g->beta,
                 g->c, g->ldc);
        return;
    }
    split_k *s = (split_k *)sh;
    /* block ik of k (every block has k: fits, K >= 256 kcuts), block ib of C (the member that
     * owns block ik of k owns its shares: cpu.c, owner) */
    const int ik = p->ith / nb, ib = p->ith % nb;
    const int64_t kb = (g->K + kcuts - 1) / kcuts, k0 = ik * kb;
    const int64_t kl = tg_cpu_gemm_imin(kb, g->K - k0), mn = g->M * g->N;
    const bool by_rows = blocks_by_rows(g);
    int64_t lo, len;
    c_block(by_rows ? g->M : g->N, by_rows, nb, ib, &lo, &len);
    const int64_t r0 = by_rows ? lo : 0, m = by_rows ? len : g->M;
    const int64_t c0 = by_rows ? 0 : lo, n = by_rows ? g->N : len;
    float *c = g->c + r0 * g->ldc + c0, beta = g->beta;
    int64_t ldc = g->ldc;
    if (ik > 0) /* into partial ik, rows N apart */
        c = s->part + (ik - 1) * mn + r0 * g->N + c0, ldc = g->N, beta = 0.0f;
    if (m > 0 && n > 0) {
        /* op(A) = Aᵀ: its rows r0.. are A's columns; op(B)'s columns c0.. */
        const float *a = g->a + k0 * g->lda + r0;
        const float *b = g->trans_b ? g->b + c0 * g->ldb + k0 : g->b + k0 * g->ldb + c0;
        call(true, g->trans_b, m, n, kl, g->alpha, a, g->lda, b, g->ldb, beta, c, ldc);
    }
    if (atomic_fetch_add_explicit(&s->finished[ib], 1, memory_order_acq_rel) != kcuts - 1) return;
    for (int q = 1; q < kcuts && m > 0 && n > 0; q++) /* the block's last share: every partial */
        add_rows(g->c + r0 * g->ldc + c0, g->ldc, s->part + (q - 1) * mn + r0 * g->N + c0, g->N, m,
                 n);
}
