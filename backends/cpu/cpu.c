/* The CPU backend: host memory with a small caching allocator, the kernels' table, graph runs
 * on a persistent thread team in one parallel region each (runner.h, team.h), the store's
 * maths on the team, and OpenBLAS kept at one thread (tgraph splits GEMMs across its own
 * threads, so the pools never fight). */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/runner.h"

/* Freed buffers are kept for reuse: a training loop builds a new graph every step, and fresh
 * large allocations would cost page faults on every step. The cache is bounded in count and in
 * bytes (oldest evicted first): bucketed batches give workspaces of many sizes, and an
 * unbounded cache would hold one of each. */
#define CACHE_SLOTS 32
#define CACHE_MAX_BYTES ((size_t)1 << 30)

/* Threads (include/tg/backend.h: any number may use one backend at once): the cache and the
 * byte counts (ptr, size, n, bytes; tg__backend_account) are under `mu`, held for a whole
 * block_new or cpu_free, so that two runs never take the same cached block. A graph run takes
 * the team when it is free (team.c: a run that finds it busy runs on its caller alone, cut into
 * the same shares: the same bits); what the runner keeps between runs is atomic or owned by
 * one caller at a time (runner.h). Everything else a run needs is its own. */
typedef struct {
    pthread_mutex_t mu;
    void *ptr[CACHE_SLOTS];
    size_t size[CACHE_SLOTS]; /* in insertion order, oldest first */
    int n;
    size_t bytes;
    tg_cpu_team *team; /* NULL for one thread */
    tg_cpu_runner run; /* the graph runner's counters and policies' state (runner.h) */
} cpu_impl;

/* Blocks of HUGE_MIN bytes or more are mapped on 2-MiB boundaries and offered to the kernel's
 * transparent huge pages (MADV_HUGEPAGE; Debian's default THP mode, "madvise", gives them to no
 * other memory): a store's slabs of weights, gradients and optimizer moments (alloc_lasting,
 * core/store.c) and a graph's workspace. Streams over tens of MiB then take a TLB miss per
 * 2 MiB, not per 4 KiB, and in a virtual machine each miss walks two levels of page tables.
 *
 * A new mapping is paid for once, as its pages are first touched (the kernel zeroes 2 MiB at a
 * time, and a VM's host may back them only then), so a big block that is not lasting is made in
 * a size class — whole 2-MiB pages, eight classes an octave — and kept in the cache like any
 * other: `tg train`'s batches, whose workspaces differ by a few MiB, then share a few blocks
 * instead of mapping one after another (heap blocks would be cached one per size); when a
 * batch outgrows them, the cached ones of at least half the new block's size go back. Pages of
 * a class never touched are never resident.
 * Without THP the advice is ignored and the pages are 4 KiB. */
enum { HUGE_PAGE = 2 << 20, HUGE_MIN = 4 * HUGE_PAGE };

/* Benchmarks and tests: big blocks mapped so (on, the default) or from the heap (off) */
static atomic_bool huge_on = true;

bool tg__cpu_huge_pages(bool on) {
    return atomic_exchange(&huge_on, on);
}

/* The length a big block of `bytes` (its header included) is mapped with: lasting blocks
 * (sized by their owner) in whole 2-MiB pages; others in their size class, 1/8 of the octave
 * below them (at least a page) at a time, so at most 1/8 more than asked. */
static size_t huge_length(size_t bytes, bool lasting) {
    size_t step = HUGE_PAGE;
    if (!lasting)
        for (size_t octave = HUGE_PAGE; octave < bytes; octave *= 2)
            if (octave / 8 > step) step = octave / 8;
    return (bytes + step - 1) / step * step;
}

/* A mapping of `size` bytes (a multiple of HUGE_PAGE) starting on a HUGE_PAGE boundary */
static void *huge_map(size_t size) {
    const size_t over = size + HUGE_PAGE;
    char *m = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    /* the unaligned head and the tail past `size` go back */
    const size_t head = (HUGE_PAGE - (uintptr_t)m % HUGE_PAGE) % HUGE_PAGE;
    if (head) munmap(m, head);
    if (over - head > size) munmap(m + head + size, over - head - size);
#ifdef MADV_HUGEPAGE
    madvise(m + head, size, MADV_HUGEPAGE);
#endif
    return m + head;
}

static size_t rounded(size_t bytes) { return ((bytes ? bytes : 1) + TG_ALIGN - 1) / TG_ALIGN * TG_ALIGN; }

static void cache_remove(cpu_impl *c, int i) {
    c->bytes -= c->size[i];
    memmove(c->ptr + i, c->ptr + i + 1, (size_t)(c->n - i - 1) * sizeof *c->ptr);
    memmove(c->size + i, c->size + i + 1, (size_t)(c->n - i - 1) * sizeof *c->size);
    c->n--;
}

/* The header of TG_ALIGN bytes in front of a block (block_new): [0] the bytes it holds, [1] the
 * length of its mapping (0: from the heap) */
static size_t *header(void *p) {
    return (size_t *)((char *)p - TG_ALIGN);
}

/* A block of cpu_alloc's back to the heap or the system */
static void block_free(void *p) {
    size_t *base = header(p);
    if (base[1])
        munmap(base, base[1]);
    else
        free(base);
}

static void release(tg_backend *b, void *p, size_t size) {
    block_free(p);
    tg__backend_account(b, -(ptrdiff_t)size);
}

/* A block of `bytes`: from the cache of freed blocks, else new; a big one on huge pages, and a
 * big lasting one (a store's slab) always so, never a cached block from the heap. */
static void *block_new_locked(tg_backend *b, size_t bytes, bool lasting) {
    cpu_impl *c = b->impl;
    size_t want = rounded(bytes);
    const bool huge =
        want + TG_ALIGN >= HUGE_MIN && atomic_load_explicit(&huge_on, memory_order_relaxed);
    int best = -1;
    for (int i = 0; i < c->n && !(huge && lasting); i++)
        if (c->size[i] >= want && c->size[i] <= 2 * want + 4096 && (best < 0 || c->size[i] < c->size[best]))
            best = i;
    if (best >= 0) { /* already counted in in_use while cached */
        void *p = c->ptr[best];
        cache_remove(c, best);
        return p;
    }
    /* A new big workspace: the run's batches have outgrown the cached ones. Those of at least
     * half its size go back, since the new one will serve the requests they served (down to
     * half its size); kept, each would stay resident unused. */
    if (huge && !lasting)
        for (int i = c->n - 1; i >= 0; i--)
            if (header(c->ptr[i])[1] && c->size[i] < want && 2 * c->size[i] >= want) {
                release(b, c->ptr[i], c->size[i]);
                cache_remove(c, i);
            }
    /* a header of TG_ALIGN bytes in front of each block records its size (a mapped block's:
     * all it can hold), since a reused block can be larger than what the caller will say when
     * freeing it, and the length of its mapping (0: from the heap) */
    size_t mapped = huge ? huge_length(want + TG_ALIGN, lasting) : 0;
    char *p = huge ? huge_map(mapped) : NULL;
    if (p) {
        want = mapped - TG_ALIGN;
    } else { /* not big, huge pages off, or no mapping to be had: the heap */
        mapped = 0;
        p = aligned_alloc(TG_ALIGN, want + TG_ALIGN);
    }
    if (!p) {
        tg_error_set(TG_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes", want);
        return NULL;
    }
    p += TG_ALIGN;
    header(p)[0] = want;
    header(p)[1] = mapped;
    tg__backend_account(b, (ptrdiff_t)want);
    return p;
}

static void *block_new(tg_backend *b, size_t bytes, bool lasting) {
    cpu_impl *c = b->impl;
    pthread_mutex_lock(&c->mu);
    void *p = block_new_locked(b, bytes, lasting);
    pthread_mutex_unlock(&c->mu);
    return p;
}

static void *cpu_alloc(tg_backend *b, size_t bytes) {
    return block_new(b, bytes, false);
}

static void *cpu_alloc_lasting(tg_backend *b, size_t bytes) {
    return block_new(b, bytes, true);
}

static void cpu_free(tg_backend *b, void *p, size_t bytes) {
    cpu_impl *c = b->impl;
    (void)bytes;
    if (!p) return;
    size_t got = header(p)[0];
    pthread_mutex_lock(&c->mu);
    if (got > CACHE_MAX_BYTES) {
        release(b, p, got);
        pthread_mutex_unlock(&c->mu);
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
    pthread_mutex_unlock(&c->mu);
}

static tg_status cpu_copy(tg_backend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    if (bytes) memcpy(dst, src, bytes);
    return TG_OK;
}

/* Every op's CPU kernel, assembled once from the kernel files' tables (k_*.c); NULL where
 * there is none (leaves and views run no kernel). supports_op answers from it, so an op added
 * without a CPU kernel is refused before a graph runs (tg_graph_run names it) instead of
 * reaching another op's kernel. */
static const tg__cpu_kernel *const kernel_families[] = {
    tg__cpu_kernels_elementwise, tg__cpu_kernels_layout, tg__cpu_kernels_reduce,
    tg__cpu_kernels_rows,        tg__cpu_kernels_matmul, tg__cpu_kernels_nn,
    tg__cpu_kernels_band,
};
tg__cpu_kernel tg__cpu_kernels[TG_OP_COUNT];
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void assemble_kernels(void) {
    for (size_t f = 0; f < sizeof kernel_families / sizeof kernel_families[0]; f++)
        for (int op = 0; op < TG_OP_COUNT; op++)
            if (kernel_families[f][op]) tg__cpu_kernels[op] = kernel_families[f][op];
}

static bool cpu_supports(tg_backend *b, tg_op op) {
    (void)b;
    return op > TG_OP_NONE && op < TG_OP_COUNT && tg__cpu_kernels[op] != NULL;
}

/* The backend's team, remade when tg_backend_set_threads changed the count (NULL: one thread,
 * or threads that could not be started: the caller then does all the work alone). */
static tg_cpu_team *team_of(tg_backend *b) {
    cpu_impl *c = b->impl;
    if (tg_cpu_team_size(c->team) != b->nthreads) {
        tg_cpu_team_free(c->team);
        c->team = b->nthreads > 1 ? tg_cpu_team_new(b->nthreads) : NULL;
    }
    return c->team;
}

static tg_status cpu_run_graph(tg_backend *b, tg_tensor *const *nodes, int64_t n,
                               void (*after)(void *ctx, int64_t i), void *ctx, int64_t *failed) {
    unsigned fp = tg_cpu_flush_begin();
    tg_status st = tg_cpu_runner_run(&((cpu_impl *)b->impl)->run, team_of(b), b->nthreads, nodes,
                                     n, after, ctx, failed);
    tg_cpu_flush_end(fp);
    return st;
}

/* One node's kernel (whatever its flags), on the team. */
static tg_status cpu_run_node(tg_backend *b, tg_tensor *t) {
    tg_tensor *one = t;
    uint32_t flags = t->flags;
    t->flags &= ~(uint32_t)(TG_TF_FUSED | TG_TF_INPUT);
    tg_status st = cpu_run_graph(b, &one, 1, NULL, NULL, NULL);
    t->flags = flags;
    return st;
}

static tg_status cpu_sync(tg_backend *b) {
    (void)b;
    return TG_OK;
}

/* ---- store maths on the team ---- */

typedef struct {
    const tg_optim_config *cfg;
    float lr, alpha, rc2;
    float *w, *m, *v, *g;
    int64_t n;
    bool zero_g; /* g[i] = 0 once read: the gradients zeroed in the update's pass, where the
                  * line is in the core's cache, rather than in a pass of their own */
} optim_job;

TG_CPU_BODY void optim_member_body(void *ctx, tg_cpu_par *p) {
    const optim_job *o = ctx;
    const tg_optim_config *cfg = o->cfg;
    float *w = o->w, *m = o->m, *v = o->v, *g = o->g, lr = o->lr, wd = cfg->weight_decay;
    const bool zero = o->zero_g; /* loop-invariant: the compiler keeps two loops */
    int64_t n = o->n;
    if (cfg->kind == TG_OPTIM_SGD) {
        float mu = cfg->momentum;
        TG_CPU_FOR(p, i, n, n > TG_PAR_MIN) {
            float gi = g[i] + wd * w[i];
            if (zero) g[i] = 0.0f;
            if (m) {
                m[i] = mu * m[i] + gi;
                gi = m[i];
            }
            w[i] -= lr * gi;
        }
        return;
    }
    float b1 = cfg->beta1, b2 = cfg->beta2, eps = cfg->eps, alpha = o->alpha, rc2 = o->rc2;
    bool decoupled = cfg->kind == TG_OPTIM_ADAMW;
    TG_CPU_FOR(p, i, n, n > TG_PAR_MIN) {
        float gi = decoupled ? g[i] : g[i] + wd * w[i];
        if (zero) g[i] = 0.0f;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float upd = alpha * m[i] / (sqrtf(v[i]) * rc2 + eps);
        w[i] -= decoupled ? upd + lr * wd * w[i] : upd;
    }
}
TG_CPU_BY_LEVEL(, optim_member, (void *ctx, tg_cpu_par *p), (ctx, p))

/* Store maths over a buffer of n floats (optimizer update, gradient norm and scale, zeroing):
 * fn's loop cut into static shares (fn called with (share, shares), no team). Member m first
 * takes its own shares — the m-th run of them, the same elements on every call — then any
 * share still untaken, from the end (tg_cpu_team_offer: a member asleep or held off its core
 * owns nothing it must be waited for). So each member keeps the same part of every weight, its
 * optimizer moments and its gradient step after step, rather than whichever part it came first
 * to (what the zeroing needs: cpu_memset0 below). Buffers below TG_PAR_MIN (biases, norms) are
 * done by the caller alone. The results do not depend on the cut (element-wise updates, or
 * fixed chunks: sumsq). */
enum { VEC_SHARES_PER_THREAD = 4, VEC_SHARES_MAX = 256 };

typedef struct {
    void (*fn)(void *ctx, tg_cpu_par *p);
    void *ctx;
    int shares, nth;
    _Atomic unsigned char taken[VEC_SHARES_MAX];
    _Atomic int done;
    tg_cpu_event finished;
} store_shares;

static bool vec_all_done(void *ctx) {
    store_shares *v = ctx;
    return atomic_load(&v->done) == v->shares;
}

static void vec_share(store_shares *v, int c) {
    unsigned char untaken = 0;
    if (!atomic_compare_exchange_strong(&v->taken[c], &untaken, 1)) return;
    tg_cpu_par share = {.team = NULL, .ith = c, .nth = v->shares};
    v->fn(v->ctx, &share);
    if (atomic_fetch_add(&v->done, 1) + 1 == v->shares) tg_cpu_event_signal(&v->finished);
}

static void vec_member(void *ctx, tg_cpu_par *p) {
    store_shares *v = ctx;
    for (int c = 0; c < v->shares; c++)
        if (tg_cpu_owner(c, v->shares, v->nth) == p->ith) vec_share(v, c);
    for (int c = v->shares - 1; c >= 0; c--)
        vec_share(v, c);
    if (p->ith == 0) tg_cpu_event_wait(&v->finished, vec_all_done, v);
}

static void run_vec(tg_backend *b, int64_t n, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx) {
    unsigned fp = tg_cpu_flush_begin();
    if (n <= TG_PAR_MIN || b->nthreads <= 1) {
        tg_cpu_par one = {.team = NULL, .ith = 0, .nth = 1};
        fn(ctx, &one);
        tg_cpu_flush_end(fp);
        return;
    }
    const int shares = b->nthreads * VEC_SHARES_PER_THREAD;
    store_shares v = {.fn = fn,
                      .ctx = ctx,
                      .shares = shares < VEC_SHARES_MAX ? shares : VEC_SHARES_MAX,
                      .nth = b->nthreads};
    for (int c = 0; c < v.shares; c++)
        atomic_init(&v.taken[c], 0);
    tg_cpu_team *team = team_of(b);
    v.finished.yield_ns = tg_cpu_team_yield_ns(team);
    tg_cpu_team_offer(team, vec_member, &v);
    tg_cpu_flush_end(fp);
}

/* Zeroing a buffer (a store's gradients between steps): on the team, in the store maths' shares
 * (run_vec, above), so that each member zeroes the same part of each gradient every step. By
 * the caller alone, the gradients that the other member wrote last (its shares of the weight
 * gradients' sums) would come across from its cache line by line, slow where the two CPUs sit
 * on different chiplets. */
enum { ZERO_CHUNK = 4096 };

typedef struct {
    char *dst;
    size_t bytes;
} zero_job;

static void zero_member(void *ctx, tg_cpu_par *p) {
    const zero_job *z = ctx;
    const int64_t nch = (int64_t)((z->bytes + ZERO_CHUNK - 1) / ZERO_CHUNK);
    TG_CPU_FOR(p, c, nch, true) {
        const size_t lo = (size_t)c * ZERO_CHUNK;
        memset(z->dst + lo, 0, z->bytes - lo < ZERO_CHUNK ? z->bytes - lo : ZERO_CHUNK);
    }
}

static tg_status cpu_memset0(tg_backend *b, void *dst, size_t bytes) {
    zero_job z = {.dst = dst, .bytes = bytes};
    if (bytes) run_vec(b, (int64_t)(bytes / sizeof(float)), zero_member, &z);
    return TG_OK;
}

static tg_status cpu_optim_update(tg_backend *b, const tg_optim_config *cfg, float lr, int64_t step,
                                  float *w, float *g, float *m, float *v, int64_t n, bool zero_g) {
    optim_job o = {.cfg = cfg, .lr = lr, .w = w, .m = m, .v = v, .g = g, .n = n, .zero_g = zero_g};
    if (cfg->kind != TG_OPTIM_SGD) {
        /* bias corrections folded into the step size (Kingma & Ba, Algorithm 1, last lines) */
        double c1 = 1.0 - pow(cfg->beta1, (double)step), c2 = 1.0 - pow(cfg->beta2, (double)step);
        o.alpha = (float)(lr / c1);
        o.rc2 = (float)(1.0 / sqrt(c2));
    }
    run_vec(b, n, optim_member, &o);
    return TG_OK;
}

/* Fixed-size chunks summed in order: the result does not depend on the thread count. */
enum { SUMSQ_CH = 8192 };

typedef struct {
    const float *x;
    float *x_rw;
    int64_t n, nch;
    double *part;
    float s;
} vec_job;

/* A chunk's sum of squares in 16 running sums (lane l: the chunk's values l, l + 16, ...),
 * then added in a fixed tree: each lane's adds are its own, so the compiler's vectors give
 * the same bits as the scalar code, and 16 chains of adds run side by side where one serial
 * sum waits on each add. Built for the baseline ISA only (not cloned): with FMA the products would
 * be contracted into the sums, and the bits would depend on the CPU. */
static float chunk_sumsq(const float *x, int64_t n) {
    float acc[16] = {0.0f};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            acc[l] += x[i + l] * x[i + l];
    for (int l = 0; i + l < n; l++)
        acc[l] += x[i + l] * x[i + l];
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] += acc[l + w];
    return acc[0];
}

static void sumsq_member(void *ctx, tg_cpu_par *p) {
    const vec_job *j = ctx;
    TG_CPU_FOR(p, c, j->nch, j->nch > 4) {
        const int64_t e = (c + 1) * SUMSQ_CH < j->n ? (c + 1) * SUMSQ_CH : j->n;
        j->part[c] = chunk_sumsq(j->x + c * SUMSQ_CH, e - c * SUMSQ_CH);
    }
}

static tg_status cpu_sumsq(tg_backend *b, const float *x, int64_t n, double *out) {
    int64_t nch = (n + SUMSQ_CH - 1) / SUMSQ_CH;
    double *part = malloc((size_t)(nch ? nch : 1) * sizeof *part);
    if (!part) return tg_error_set(TG_ERR_NOMEM, "cpu sumsq: out of memory");
    vec_job j = {.x = x, .n = n, .nch = nch, .part = part};
    run_vec(b, n, sumsq_member, &j);
    double t = 0.0;
    for (int64_t k = 0; k < nch; k++) t += part[k];
    free(part);
    *out = t;
    return TG_OK;
}

TG_CPU_BODY void scale_member_body(void *ctx, tg_cpu_par *p) {
    const vec_job *j = ctx;
    TG_CPU_FOR(p, i, j->n, j->n > TG_PAR_MIN) j->x_rw[i] *= j->s;
}
TG_CPU_BY_LEVEL(, scale_member, (void *ctx, tg_cpu_par *p), (ctx, p))

static tg_status cpu_scale(tg_backend *b, float *x, int64_t n, float s) {
    vec_job j = {.x_rw = x, .n = n, .s = s};
    run_vec(b, n, scale_member, &j);
    return TG_OK;
}

static void cpu_destroy(tg_backend *b) {
    cpu_impl *c = b->impl;
    tg_cpu_team_free(c->team);
    free(c->run.window_cpu);
    tg_cpu_gemm_shared_b_trim(); /* the GEMM's idle op(B) buffers (any backend's: they are idle) */
    for (int i = 0; i < c->n; i++)
        block_free(c->ptr[i]);
    pthread_mutex_destroy(&c->mu);
    free(c);
    free(b);
}

static bool cpu_reads_lookup(tg_backend *b, const tg_tensor *m) {
    (void)b;
    return tg__cpu_matmul_reads_lookup(m);
}

/* x·wᵀ with w [rows, cols]: op(B) of the GEMM with tb, ldb = cols, n = rows, k = cols
 * (k_matmul.c); not kept (no memory): the products pack it as before */
static void cpu_keep_weight(tg_backend *b, const float *w, int64_t rows, int64_t cols) {
    (void)b;
    (void)tg_cpu_gemm_keep_b(true, w, cols, rows, cols);
}
static void cpu_release_weight(tg_backend *b, const float *w, int64_t rows, int64_t cols) {
    (void)b;
    tg_cpu_gemm_drop_b(true, w, cols, rows, cols);
}

static const tg_backend_vtable cpu_vtable = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .alloc_lasting = cpu_alloc_lasting,
    .free = cpu_free,
    .copy_in = cpu_copy,
    .copy_out = cpu_copy,
    .memset0 = cpu_memset0,
    .supports_op = cpu_supports,
    .run_node = cpu_run_node,
    .run_graph = cpu_run_graph,
    .sync = cpu_sync,
    .optim_update = cpu_optim_update,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .destroy = cpu_destroy,
    .accumulates = true,
    .strided_out = true,
    .chains = true,
    .host_memory = true,
    .reads_lookup = cpu_reads_lookup,
    .keep_weight = cpu_keep_weight,
    .release_weight = cpu_release_weight,
};

tg__cpu_runner_stats tg__cpu_runner_counts(tg_backend *b) {
    tg_cpu_runner *r = &((cpu_impl *)b->impl)->run;
    return (tg__cpu_runner_stats){.run_ahead = atomic_load(&r->ahead),
                                  .waits_offcore = atomic_load(&r->offcore),
                                  .waits_slept = atomic_load(&r->slept),
                                  .waits_lent = atomic_load(&r->lent),
                                  .fine_runs = atomic_load(&r->fine_runs),
                                  .runs_keeping_core = atomic_load(&r->kept),
                                  .runs_alone = atomic_load(&r->alone_runs)};
}

bool tg__cpu_keeps_core_between(tg_backend *b) {
    return ((cpu_impl *)b->impl)->run.keep.keep;
}

void tg__cpu_members_away(tg_backend *b, bool on) {
    tg_cpu_team_members_away(((cpu_impl *)b->impl)->team, on);
}

void tg__cpu_all_offcore(tg_backend *b, bool on) {
    ((cpu_impl *)b->impl)->run.all_offcore = on;
}

tg_status tg_backend_cpu_new(int nthreads, tg_backend **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_backend_cpu_new: out is NULL");
    pthread_once(&kernels_once, assemble_kernels); /* the runner reads the table unchecked */
    static pthread_once_t policies_once = PTHREAD_ONCE_INIT;
    pthread_once(&policies_once, tg_cpu_policies_init);
    tg__cpu_isa_init(); /* the kernels' instruction set, once per process (isa.h) */
    *out = NULL;
    if (nthreads < 0 || nthreads > 4096)
        return tg_error_set(TG_ERR_INVALID, "tg_backend_cpu_new: %d threads out of range", nthreads);
    const char *bad = NULL;
    nthreads = tg_cpu_thread_count(nthreads, &bad);
    if (nthreads < 1)
        return tg_error_set(TG_ERR_INVALID, "tg_backend_cpu_new: %s='%s' is not a thread count in 1..4096",
                            bad, getenv(bad));
    tg_backend *b = calloc(1, sizeof *b);
    cpu_impl *c = calloc(1, sizeof *c);
    tg_cpu_team *team = nthreads > 1 ? tg_cpu_team_new(nthreads) : NULL;
    int64_t *window_cpu = team ? malloc(sizeof *window_cpu * (size_t)nthreads) : NULL;
    if (!b || !c || (nthreads > 1 && (!team || !window_cpu))) {
        free(b);
        free(c);
        free(window_cpu);
        tg_cpu_team_free(team);
        return tg_error_set(TG_ERR_NOMEM, "tg_backend_cpu_new: cannot start %d threads", nthreads);
    }
    openblas_set_num_threads(1);
    pthread_mutex_init(&c->mu, NULL);
    c->team = team;
    c->run.window_cpu = window_cpu; /* calloc: the counters start at 0 */
    b->vt = &cpu_vtable;
    b->nthreads = nthreads;
    b->impl = c;
    *out = b;
    return TG_OK;
}
