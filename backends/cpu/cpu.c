/* The CPU backend: host memory with a small caching allocator, a persistent thread team that
 * runs a whole graph in one parallel region (team.h), OpenBLAS kept at one thread (tgraph
 * splits GEMMs across its own threads, so the pools never fight). */
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

/* Freed buffers are kept for reuse: a training loop builds a new graph every step, and fresh
 * large allocations would cost page faults on every step. The cache is bounded in count and in
 * bytes (oldest evicted first): bucketed batches give workspaces of many sizes, and an
 * unbounded cache would hold one of each. */
#define CACHE_SLOTS 32
#define CACHE_MAX_BYTES ((size_t)1 << 30)

/* Threads (include/tg/backend.h: any number may use one backend at once): the cache and the
 * byte counts (ptr, size, n, bytes; tg__backend_account) are under `mu`, held for a whole
 * block_new or cpu_free — two runs taking the same cached block gave both the same memory. A
 * graph run takes the team when it is free (team.c: a run that finds it busy runs on its caller
 * alone, cut into the same shares: the same bits), the counters are atomic, and the team's
 * judgement is owned by one caller at a time (`judging`). Everything else a run needs is its
 * own (graph_job). */
typedef struct {
    pthread_mutex_t mu;
    void *ptr[CACHE_SLOTS];
    size_t size[CACHE_SLOTS]; /* in insertion order, oldest first */
    int n;
    size_t bytes;
    tg_cpu_team *team; /* NULL for one thread */
    atomic_llong ahead; /* shares the graph runner ran ahead of their node's turn */
    atomic_llong offcore; /* waits on a share whose holder was off its core */
    atomic_llong slept;   /* of those, slept through (nothing to run ahead) */
    atomic_llong lent;    /* of those, the holder lent the sleeper's CPU (tg_cpu_team_lend) */
    atomic_bool contended;  /* the last graph run found members off their cores (run_job) */
    atomic_llong fine_runs; /* graph runs made with the finer cut that follows */
    atomic_llong kept;      /* graph runs whose waits kept their core (KEEP_CORE) */
    atomic_llong alone_until; /* graph runs go on the caller alone until then (RUN_ALONE) */
    atomic_llong alone_runs;  /* graph runs made so */
    /* The team's judgement (RUN_ALONE, KEEP_BETWEEN), made by one calling thread at a time: the
     * one that set `judging` owns the fields after it (another thread running a graph on the
     * backend then leaves its run unjudged). */
    atomic_bool judging;
    int64_t judged, owned, helped, wall_ns, cpu_ns; /* RUN_ALONE: the window's runs so far — how
                     many, the shares the members other than 0 own and ran, member 0's times */
    tg__cpu_keep_state keep; /* KEEP_BETWEEN: its state, and its window's start: the wall */
    int64_t window_wall0;    /* time (0: none started), then each member's CPU clock */
    int64_t *window_cpu;
    bool all_offcore;   /* tests: every holder taken to be off its core */
} cpu_impl;

/* Blocks of HUGE_MIN bytes or more are mapped on 2-MiB boundaries and offered to the kernel's
 * transparent huge pages (MADV_HUGEPAGE; Debian's default THP mode, "madvise", gives them to no
 * other memory): a store's slabs of weights, gradients and optimizer moments (alloc_lasting,
 * core/store.c) and a graph's workspace. Streams over tens of MiB then take a TLB miss per
 * 2 MiB, not per 4 KiB, and in a virtual machine each miss walks two levels of page tables: on
 * an Intel Xeon VM Adam's step over g2p-small's weights took 3.1 ms instead of 3.6, and `tg
 * train`'s steps 0.96× the time with the workspace so too (docs/log/2026-12-05.md).
 *
 * A new mapping is paid for once, as its pages are first touched (the kernel zeroes 2 MiB at a
 * time, and a VM's host may back them only then), so a big block that is not lasting is made in
 * a size class — whole 2-MiB pages, eight classes an octave — and kept in the cache like any
 * other: `tg train`'s batches, whose workspaces differ by a few MiB, then share a few blocks
 * instead of mapping one after another; when a batch outgrows them, the cached ones of at least
 * half the new block's size go back (`tg train` on g2p: 341 MiB resident at its peak instead of
 * 1.1 GiB, whose heap blocks were cached one per size). Pages of a class never touched are
 * never resident.
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
static tg__cpu_kernel kernels[TG_OP_COUNT];
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void assemble_kernels(void) {
    for (size_t f = 0; f < sizeof kernel_families / sizeof kernel_families[0]; f++)
        for (int op = 0; op < TG_OP_COUNT; op++)
            if (kernel_families[f][op]) kernels[op] = kernel_families[f][op];
}

static bool cpu_supports(tg_backend *b, tg_op op) {
    (void)b;
    return op > TG_OP_NONE && op < TG_OP_COUNT && kernels[op] != NULL;
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

/* Member p's share of node t's kernel. */
static tg_status run_kernel(tg_cpu_par *p, tg_tensor *t) { return kernels[t->op](p, t); }

/* Member p's share of copying an input's host data in: blocks of 16 KiB. */
static void copy_in_share(tg_cpu_par *p, tg_tensor *t) {
    enum { CH = 16384 };
    size_t bytes = tg__tensor_nbytes(t);
    int64_t nch = (int64_t)((bytes + CH - 1) / CH);
    TG_CPU_FOR(p, c, nch, bytes / 4 > TG_PAR_MIN) {
        size_t lo = (size_t)c * CH, len = bytes - lo < CH ? bytes - lo : CH;
        memcpy((char *)t->data + lo, (const char *)t->host + lo, len);
    }
}

/* A graph run on the team. Every member walks the node list. Node i's work is cut into
 * shares(i) shares — a kernel called with (ith, nth) = (share, shares), the same cut as a team
 * of that size makes — and member m first takes its own shares (m, m + n, ...). A member done
 * with its own waits until every share of node i is done before node i + 1 (which may read what
 * node i wrote, or write a workspace block node i read); if after STEAL_NS of waiting (none
 * after a contended run: CONTENDED_OFFCORE) some share is still untaken, its owner is late
 * (preempted by another process, or still waking up) and the waiting member takes it. So on an
 * idle machine each member does its own share, as a fixed split would, while a member that the
 * machine preempts holds up only a share it has started: the others take the rest, and it
 * catches up through nodes already done. A member done with its own shares of node i that would
 * wait first looks ahead: up to LOOKAHEAD later nodes whose memory does not meet that of any
 * node before them still running (look_ahead) get their own shares run at once, so that the
 * members' time at the end of uneven shares (the two halves of a product finishing a few
 * hundred µs apart; dX and dW of a backward, Q, K and V, the bias gradients: independent) is
 * spent on the next nodes. The run is offered to the team (team.h: tg_cpu_team_offer): a member
 * that has not joined it yet (asleep, or held off its core) owns no share — its shares are
 * taken at once, without the grace — and is not waited for at the end. The first failing node
 * is recorded with its error message (each thread's message is its own); once that node is done
 * every member sees it and stops. */
enum { STEAL_NS = 100 * 1000 };

/* A member waiting on a share that another member started reads the holder's CPU clock
 * (tg_cpu_member_cpu_ns) PROBE_NS / 2 into the wait and every PROBE_NS after: a clock that moved
 * less than half the wall time since the last reading means the holder is off its core —
 * preempted by another process, which then has the holder's core, often for milliseconds. The
 * waiting member then runs ahead: every untaken share, whoever owns it, of the next
 * DEEP_AHEAD nodes whose memory meets that of no unfinished node before them (run_ahead; the
 * look-ahead's rule, but past the nodes it must leave and over shares of both members). When
 * there is none it sleeps until the node is done instead of spinning and yielding on its own
 * core: nothing it can do there brings the share nearer, and the kernel may give the core to
 * the holder or to the other process — to the holder at once where the team pins its members:
 * the sleeper first lends the holder every CPU of the team (tg_cpu_team_lend; the holder pins
 * itself again at its next node), else a pinned holder waits out the other process's time
 * slice on its own core while the sleeper's stays idle (beside a busy process on a Xeon host
 * a g2p-small step 0.96-0.98x the time: docs/log/2026-12-02.md). Sleeping rather than spinning,
 * beside one busy process a g2p-small step takes ~6 % less time and tgraph 16-19 % less CPU,
 * which the other process gets (docs/log/2026-12-02.md); a holder at work (an idle machine, a partner merely late, a nice-19
 * neighbour) keeps the spin-yield wait. (Computing such a share again, from a private copy of C,
 * was tried: no faster. Nor was the spin-yield wait instead of sleeping, though a slept wait has a
 * cost of its own: a woken member tends to be placed on its waker's CPU, and beside a busy process
 * the two members share one core 72-74 % of the time while the other process has the other; 45 %
 * without these sleeps: benchmarks/contention/placement.py, docs/log/2026-12-02.md.) */
enum { PROBE_NS = 200 * 1000, DEEP_AHEAD = 1024, DEEP_PENDING = 64 };

/* A graph run of at least CONTENDED_MIN_NODES nodes in which members waited CONTENDED_OFFCORE
 * times or more on a holder off its core says another process competes for the cores (a
 * g2p-small step: 0-1 such waits alone, 0-4 beside a nice-19 loop, 10-14 beside a nice-0 one),
 * and the next run is cut for it: the packed products into shares of 64 rows, or 512 columns
 * (gemm.h: tg_cpu_gemm_shares), weight gradients' blocks of k into blocks of C
 * (gemm_split_k.c), instead of one per member, so that a member the other process holds off
 * its core holds up a small block and its partner takes the rest; and a member done with its
 * own shares takes its partner's untaken ones at once, without STEAL_NS's grace (which keeps a
 * member's shares on its own core's cache when both are at work). The finer cut has a price
 * on an idle machine — its blocks share op(B), but each still streams all of it and meets each
 * B panel with fewer A panels: cutting always so cost ~1.5 % of the step — hence only after a
 * contended run. Beside a nice-0 loop (docs/log/2026-12-02.md): the finer cut 0.97× the step
 * (16 rounds), taking at once another 0.97× (22 rounds); alone and beside a nice-19 loop the
 * same within the noise. */
enum { CONTENDED_OFFCORE = 4, CONTENDED_MIN_NODES = 16 };

/* KEEP_CORE. The waits of a graph run that follows an uncontended one, on a team that pins its
 * members one per CPU, spin through the yield phase (the pause instruction) instead of calling
 * sched_yield(): on an EEVDF kernel (Linux 6.6 and later) a yield hands the core to any other
 * runnable task that is eligible — a nice-19 loop gets a whole time slice (~1.5–3 ms) at the
 * moment the member's partner finishes the share it waited on, and the next node waits for
 * the yielder instead. Pinned members never share a core, so a spinning member holds up no
 * partner; an unpinned team (also any with more members than CPUs) keeps yielding, and so does a
 * run after a contended one (a busy process of equal priority), where yielding measured as fast or
 * faster (team.c: tg_cpu_event_wait; docs/log/: beside a nice-19 loop 0.95x the step
 * time on a Xeon host, beside a busy one and idle the same). */

/* RUN_ALONE. Members that other processes keep off their cores cannot help, and a team that
 * waits for them costs its caller. Beside two busy processes on two cores, decoding's graph
 * runs (~67 nodes, ~1 ms alone) found member 1 in time for 6 % of the shares it owns (member 0
 * took the rest: tg_cpu_member_joined, STEAL_NS), while member 0, bound to its CPU during the
 * run, had half of that CPU — the other half the busy process's — where a thread left to the
 * scheduler among three on two cores gets two thirds or more: `tg translate` took 3.5 s with 2
 * threads and 2.4-2.7 with 1. So the team judges itself: every ALONE_WINDOW of its runs of
 * CONTENDED_MIN_NODES nodes or more, whether the members other than 0 ran fewer than
 * 1/ALONE_SHARE of the shares they own (idle they run 99 % of them, a training step's beside
 * busy processes 94-98 %; decoding's beside one busy process 9-26 %, beside two 6-17 %) while
 * member 0 was on its CPU less than ALONE_CPU_NUM/ALONE_CPU_DEN of the runs' time (member 0
 * with a core of its own — beside one busy process the members' CPUs hold three threads, and
 * the bound member 0 often has its CPU alone — gains nothing alone, and loses the few shares
 * the members still run: without this test decoding beside one busy process took 1.04x the
 * time). If so, the runs of the next ALONE_NS go on the caller alone (tg_cpu_team_run_alone: not
 * bound, the members left asleep), cut into the same shares, so the same bits; then the team
 * runs again and is judged again, which brings it back once the other processes are gone.
 * Beside two busy processes decoding takes 0.71-0.85x the time, beside one and idle the same
 * (docs/log/2026-12-06.md). */
enum { ALONE_WINDOW = 8, ALONE_SHARE = 5, ALONE_CPU_NUM = 3, ALONE_CPU_DEN = 4 };
#define ALONE_NS (100 * 1000 * 1000)

/* KEEP_BETWEEN. A member waiting for the next graph run yields its core (team.c), and beside a
 * lowest-priority process each yield is a time slice given away: decoding, whose runs come every
 * ~1 ms, took 1.7-1.8 s beside a nice-19 loop where it takes 1.3 idle — member 1 yielded to the
 * loop and ran 7-27 % of its shares. So the waits between runs, like a pinned team's node waits
 * (KEEP_CORE), spin through the yield phase — while every member keeps its core: beside a nice-0
 * process a member spinning there holds a core it shares, and the kernel moves that process onto
 * member 0's (decoding beside one busy loop took 2.3 s instead of 1.8). Windows of at least
 * KEEP_WINDOW_NS (closed at the end of a RUN_ALONE window) read every member's CPU clock: with
 * the waits keeping the cores, a member that had less than KEEP_CPU_NUM/KEEP_CPU_DEN of the
 * window's wall time shares its CPU with a process of its own priority (beside a nice-19 one
 * each keeps 98 % and more of a 25-ms window; a nice-19 loop's occasional slice of ~3 ms took a
 * quarter of a 13-ms window), and the waits yield again, as they do when the runs are judged to
 * go alone. KEEP_RETRY_NS later a window keeps the cores again to see — twice as long after
 * each such window in a row, up to 16 times: every try beside a busy process costs its window
 * and the ~0.1 s the kernel takes to place that process again. A team that is not pinned, or
 * whose runs are contended, yields as before. Beside a nice-19 loop decoding takes 0.72x the
 * time (its idle time), beside busy processes and idle the same (docs/log/2026-12-06.md). */
enum { KEEP_CPU_NUM = 3, KEEP_CPU_DEN = 4 };
#define KEEP_RETRY_NS ((int64_t)1000 * 1000 * 1000)
#define KEEP_WINDOW_NS (25 * 1000 * 1000)

/* A run of fewer nodes binds the caller to member 0's CPU only when it is not there already
 * (team.h: tg_cpu_team_offer_short): a one-node run of the g2p-small step's softmax took
 * 16.8 µs on 2 threads so, 25.4 bound every time (docs/log/2026-12-03.md). */
enum { SHORT_RUN_NODES = 4 };

/* A share's state word: the member holding it + 1 above the two low bits, which say UNTAKEN,
 * TAKEN (its holder computes it) or DONE. */
enum { UNTAKEN = 0, TAKEN = 1, DONE = 2 };

typedef struct {
    tg_tensor *const *nodes;
    int64_t n;
    int nthreads, shares; /* team size; most shares of one node (shares_of) */
    bool contended;       /* cut the big products finer (shares_of) */
    void (*after)(void *ctx, int64_t i); /* with it, no look-ahead: it runs node by node */
    void *ctx;
    _Atomic int *claimed, *done; /* per node: shares taken, shares finished */
    _Atomic int *nshares;        /* per node: shares_of, once known (0: not yet) */
    _Atomic int *taken;          /* per node and share: the state word */
    tg_cpu_shared *_Atomic *shared; /* per node: work its shares do once for all (team.h) */
    cpu_impl *impl;        /* the backend: its counters (ahead, offcore, slept), tests' switch */
    tg_cpu_event progress; /* signalled when a node's last share is done */
    atomic_llong fail_at;
    tg_status st;
    char msg[1024];
    pthread_mutex_t mu;
} graph_job;

static void fail(graph_job *j, int64_t i, tg_status st) {
    pthread_mutex_lock(&j->mu);
    if (i < atomic_load(&j->fail_at)) {
        j->st = st;
        snprintf(j->msg, sizeof j->msg, "%s", tg_error_message());
        atomic_store(&j->fail_at, i);
    }
    pthread_mutex_unlock(&j->mu);
}

/* Shares of a node: the team size, and FINE_SHARES per member for the big nodes that are not
 * products (elementwise, rows, layout: more than FINE_MIN output values, so a share keeps
 * thousands; a reduced cross-entropy, whose one value sums rows × vocabulary, k_nn.c). A member
 * that joins the run late — woken ~50-100 µs after member 0 posted it, or held off its core by
 * another process — then still finds shares of the node left to take instead of member 0 having
 * taken the whole absent share at once (a one-node run of a 1 ms GELU ran on member 0 alone). So
 * are the products on the small-product path (attention: each task packs its own operand), and
 * after a contended run (CONTENDED_OFFCORE) the single products on the packed path; the other
 * products keep one share per member (tg_cpu_gemm_shares). Every kernel's share computes its own
 * outputs whole, so the results do not depend on the cut — except a weight gradient cut along k
 * (gemm_split_k.c), which tg_cpu_gemm_shares therefore always cuts into nthreads shares, contended
 * or not. */
enum { FINE_SHARES = 4, FINE_MIN = 4 * TG_PAR_MIN };

static int shares_of(const graph_job *j, const tg_tensor *t) {
    if (j->shares == 1) return 1;
    /* a reduced cross-entropy's output is one value, its work rows × vocabulary */
    if (t->op == TG_OP_CROSS_ENTROPY) return j->shares;
    if (t->op == TG_OP_MATMUL)
        return tg__cpu_matmul_shares(t, j->nthreads, j->shares, j->contended);
    return tg_tensor_numel(t) <= FINE_MIN ? j->nthreads : j->shares;
}

/* shares_of node i, computed once per run (a matmul's builds its plan; the look-ahead asks
 * for the same nodes again and again). Members may both compute it: the value is the same. */
static int node_shares(graph_job *j, int64_t i) {
    int k = atomic_load_explicit(&j->nshares[i], memory_order_relaxed);
    if (!k) {
        k = shares_of(j, j->nodes[i]);
        atomic_store_explicit(&j->nshares[i], k, memory_order_relaxed);
    }
    return k;
}

/* Member m takes share c of node i. */
static bool take(graph_job *j, int64_t i, int c, int m) {
    int untaken = UNTAKEN;
    if (!atomic_compare_exchange_strong_explicit(&j->taken[i * j->shares + c], &untaken,
                                                 (m + 1) << 2 | TAKEN, memory_order_relaxed,
                                                 memory_order_relaxed))
        return false;
    atomic_fetch_add_explicit(&j->claimed[i], 1, memory_order_relaxed);
    return true;
}

/* The work node i's shares did once for all, given back once the last share is done (or the
 * run ends: a failed run leaves nodes unfinished). */
static void release_shared(graph_job *j, int64_t i) {
    tg_cpu_shared *s = atomic_exchange_explicit(&j->shared[i], NULL, memory_order_acq_rel);
    if (s) s->release(s);
}

static void run_share(graph_job *j, int64_t i, int c, int k) {
    tg_tensor *t = j->nodes[i];
    tg_cpu_par share = {
        .team = NULL, .ith = c, .nth = k, .shared = &j->shared[i], .team_size = j->nthreads};
    if (t->flags & TG_TF_INPUT) {
        copy_in_share(&share, t);
    } else {
        tg_status st = run_kernel(&share, t);
        if (st) fail(j, i, st);
    }
    atomic_fetch_or_explicit(&j->taken[i * j->shares + c], DONE, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&j->done[i], 1, memory_order_acq_rel) + 1 == k) {
        release_shared(j, i);
        tg_cpu_event_signal(&j->progress);
    }
}

typedef struct {
    graph_job *j;
    int64_t i, start, steal_at;
    int k;
    int64_t probe_at; /* next reading of a holder's clock */
    int probe_m;      /* the member of the last reading, its time and the clock */
    int64_t probe_wall, probe_cpu;
} node_wait;

static bool node_done(const node_wait *w) {
    return atomic_load_explicit(&w->j->done[w->i], memory_order_acquire) >= w->k;
}

/* stop waiting: the node is done, a share is untaken past the grace time, or a holder's clock
 * is due to be read */
static bool done_or_late(void *ctx) {
    const node_wait *w = ctx;
    if (node_done(w)) return true;
    const bool untaken = atomic_load_explicit(&w->j->claimed[w->i], memory_order_relaxed) < w->k;
    return tg_cpu_now_ns() >= (untaken ? w->steal_at : w->probe_at);
}

static bool node_done_ctx(void *ctx) {
    return node_done(ctx);
}

/* The member that owns share c of k: contiguous runs of shares per member, so that with 4
 * shares per member a member's shares of an elementwise node cover the rows its share of the
 * preceding product wrote (one block per member), still in its own core's cache. */
static int owner(int c, int k, int nth) {
    return (int)((int64_t)c * nth / k);
}

/* ---- look-ahead: later nodes that may run beside the ones still running ---- */

enum { LOOKAHEAD = 4 };

static bool node_finished(graph_job *j, int64_t q) {
    return atomic_load_explicit(&j->done[q], memory_order_acquire) >= node_shares(j, q);
}

/* Whether node t may run beside node q: q is finished, or their memory does not meet. */
static bool clear_of(graph_job *j, const tg_tensor *t, int64_t q) {
    return node_finished(j, q) || tg__nodes_independent(t, j->nodes[q]);
}

/* Member p, done with its shares of node i, runs its own shares of the next nodes m while each
 * is independent of every node in [i, m) not finished yet. Nodes before i are finished (the
 * member waited for each). A node run early is found taken when the members reach it. */
static void look_ahead(graph_job *j, tg_cpu_par *p, int64_t i) {
    for (int64_t m = i + 1; m < j->n && m <= i + LOOKAHEAD; m++) {
        tg_tensor *t = j->nodes[m];
        if (t->flags & TG_TF_FUSED) return;
        for (int64_t q = i; q < m; q++)
            if (!clear_of(j, t, q)) return;
        const int k = node_shares(j, m);
        for (int c = 0; c < k; c++)
            if (owner(c, k, p->nth) == p->ith && take(j, m, c, p->ith)) {
                run_share(j, m, c, k);
                atomic_fetch_add_explicit(&j->impl->ahead, 1, memory_order_relaxed);
            }
        if (atomic_load(&j->fail_at) <= m) return;
    }
}

/* Member p, whose partner holding a share of node i is off its core, runs every untaken share
 * of the next DEEP_AHEAD nodes that are independent of every unfinished node before them (at
 * most DEEP_PENDING of those are tracked; a fused chain's members count as unfinished, as its
 * tail runs them). Returns whether it ran any. */
static bool run_ahead(graph_job *j, tg_cpu_par *p, int64_t i) {
    int64_t pending[DEEP_PENDING];
    int np = 0;
    bool ran = false;
    pending[np++] = i;
    for (int64_t m = i + 1; m < j->n && m <= i + DEEP_AHEAD; m++) {
        tg_tensor *t = j->nodes[m];
        if (!(t->flags & TG_TF_FUSED) && !node_finished(j, m)) {
            bool free_to_run = true;
            for (int q = 0; q < np && free_to_run; q++)
                free_to_run = clear_of(j, t, pending[q]);
            const int k = node_shares(j, m);
            for (int c = 0; free_to_run && c < k; c++)
                if (take(j, m, c, p->ith)) {
                    run_share(j, m, c, k);
                    atomic_fetch_add_explicit(&j->impl->ahead, 1, memory_order_relaxed);
                    ran = true;
                }
            if (atomic_load(&j->fail_at) <= m) break;
        }
        if ((t->flags & TG_TF_FUSED) || !node_finished(j, m)) {
            if (np == DEEP_PENDING) break;
            pending[np++] = m;
        }
    }
    return ran;
}

/* Member p waits on node w->i, every share taken: it reads the CPU clock of another member
 * holding a share not done, and when that member was off its core since the last reading
 * runs ahead, or else sleeps until the node is done (see PROBE_NS above). The readings cut the
 * wait into calls of tg_cpu_event_wait, each starting its phases afresh, so the wait's own end
 * of the yield phase is kept here. */
static void probe(graph_job *j, tg_cpu_par *p, node_wait *w) {
    const int64_t now = tg_cpu_now_ns();
    if (now < w->probe_at) return;
    w->probe_at = now + PROBE_NS;
    if (now - w->start >= tg_cpu_event_yield_ns(&j->progress)) {
        tg_cpu_event_sleep(&j->progress, node_done_ctx, w);
        return;
    }
    int holder = -1;
    for (int c = 0; c < w->k && holder < 0; c++) {
        const int v = atomic_load_explicit(&j->taken[w->i * j->shares + c], memory_order_relaxed);
        if ((v & 3) == TAKEN && (v >> 2) - 1 != p->ith) holder = (v >> 2) - 1;
    }
    if (holder < 0) return;
    const int64_t cpu = tg_cpu_member_cpu_ns(p, holder);
    if (cpu < 0) return;
    if (j->impl->all_offcore ||
        (holder == w->probe_m && 2 * (cpu - w->probe_cpu) < now - w->probe_wall)) {
        atomic_fetch_add_explicit(&j->impl->offcore, 1, memory_order_relaxed);
        w->probe_m = -1;
        if (!j->after && run_ahead(j, p, w->i)) return;
        atomic_fetch_add_explicit(&j->impl->slept, 1, memory_order_relaxed);
        if (tg_cpu_team_lend(p->team, holder))
            atomic_fetch_add_explicit(&j->impl->lent, 1, memory_order_relaxed);
        tg_cpu_event_sleep(&j->progress, node_done_ctx, w);
        return;
    }
    w->probe_m = holder, w->probe_wall = now, w->probe_cpu = cpu;
}

static void graph_member(void *ctx, tg_cpu_par *p) {
    graph_job *j = ctx;
    for (int64_t i = 0; i < j->n; i++) {
        tg_cpu_team_repin(p); /* lent while off its core (probe): its own CPU again */
        tg_tensor *t = j->nodes[i];
        if (!(t->flags & TG_TF_FUSED)) {
            const int k = node_shares(j, i);
            for (int c = 0; c < k; c++)
                if (owner(c, k, p->nth) == p->ith && take(j, i, c, p->ith)) run_share(j, i, c, k);
            /* shares of members that have not joined the run (asleep, or held off their core
             * by another process): nobody else would take them before the grace time */
            for (int c = k - 1; c >= 0; c--)
                if (!tg_cpu_member_joined(p, owner(c, k, p->nth)) && take(j, i, c, p->ith))
                    run_share(j, i, c, k);
            if (!j->after && p->nth > 1 && !node_finished(j, i)) look_ahead(j, p, i);
            const int64_t start = tg_cpu_now_ns();
            node_wait w = {.j = j,
                           .i = i,
                           .k = k,
                           .start = start,
                           .steal_at = start + (j->contended ? 0 : STEAL_NS),
                           .probe_at = start + (j->impl->all_offcore ? 0 : PROBE_NS / 2),
                           .probe_m = -1};
            while (!node_done(&w)) {
                tg_cpu_event_wait(&j->progress, done_or_late, &w);
                /* from the end: a late owner works through its shares from the start */
                for (int c = k - 1; c >= 0 && atomic_load(&j->claimed[i]) < k; c--)
                    if (take(j, i, c, p->ith)) run_share(j, i, c, k);
                if (atomic_load(&j->claimed[i]) == k && !node_done(&w)) probe(j, p, &w);
            }
            if (atomic_load(&j->fail_at) <= i) return;
        }
        if (p->ith == 0 && j->after) j->after(j->ctx, i);
    }
}

bool tg__cpu_judged_alone(int64_t owned, int64_t helped, int64_t wall_ns, int64_t cpu_ns) {
    return helped * ALONE_SHARE < owned && cpu_ns * ALONE_CPU_DEN < wall_ns * ALONE_CPU_NUM;
}

tg__cpu_keep_state tg__cpu_keep_next(tg__cpu_keep_state s, bool on_core, bool alone, int64_t now) {
    if ((s.keep && !on_core) || alone) { /* a window that should not have kept them */
        const int backoff = s.fails < 4 ? s.fails : 4;
        return (tg__cpu_keep_state){false, s.fails + 1, now + (KEEP_RETRY_NS << backoff)};
    }
    if (s.keep) return (tg__cpu_keep_state){true, 0, s.retry_at};
    return (tg__cpu_keep_state){now >= s.retry_at, s.fails, s.retry_at}; /* time to try again */
}

/* The start of a KEEP_BETWEEN window: the wall time and every member's CPU clock. */
static void window_start(cpu_impl *c, int64_t now) {
    c->window_wall0 = now;
    for (int m = 0; m < tg_cpu_team_size(c->team); m++)
        c->window_cpu[m] = tg_cpu_team_member_cpu_ns(c->team, m);
}

/* At the end of a RUN_ALONE window, once KEEP_WINDOW_NS have passed since the KEEP_BETWEEN
 * window started, or when the runs are to go alone (the members are off their cores then):
 * whether the waits between runs keep their cores. */
static void judge_waits(cpu_impl *c, int64_t now, bool alone) {
    const int64_t wall = now - c->window_wall0;
    if (wall < KEEP_WINDOW_NS && !alone) return;
    c->window_wall0 = 0; /* the next starts anew */
    bool on_core = !alone;
    for (int m = 0; m < tg_cpu_team_size(c->team) && on_core; m++) {
        const int64_t cpu = tg_cpu_team_member_cpu_ns(c->team, m);
        on_core = cpu >= 0 && c->window_cpu[m] >= 0 &&
                  (cpu - c->window_cpu[m]) * KEEP_CPU_DEN >= wall * KEEP_CPU_NUM;
    }
    c->keep = tg__cpu_keep_next(c->keep, on_core, alone, now);
    tg_cpu_team_keep_core_between(c->team,
                                  c->keep.keep && tg_cpu_team_pinned(c->team) &&
                                      !atomic_load_explicit(&c->contended, memory_order_relaxed));
}

/* Judge the team on a run it made (RUN_ALONE): count the shares the members other than 0 own
 * and those they ran (the state words say who held each). */
static void judge_team(graph_job *j, int64_t wall_ns, int64_t cpu_ns) {
    cpu_impl *c = j->impl;
    int64_t owned = 0, helped = 0;
    for (int64_t i = 0; i < j->n; i++) {
        const int k = atomic_load_explicit(&j->nshares[i], memory_order_relaxed);
        for (int s = 0; s < k; s++) {
            const int v = atomic_load_explicit(&j->taken[i * j->shares + s], memory_order_relaxed);
            owned += owner(s, k, j->nthreads) != 0;
            helped += v && (v >> 2) - 1 != 0;
        }
    }
    c->owned += owned;
    c->helped += helped;
    c->wall_ns += wall_ns;
    c->cpu_ns += cpu_ns;
    if (++c->judged < ALONE_WINDOW) return;
    const int64_t now = tg_cpu_now_ns();
    const bool alone = tg__cpu_judged_alone(c->owned, c->helped, c->wall_ns, c->cpu_ns);
    c->judged = c->owned = c->helped = c->wall_ns = c->cpu_ns = 0;
    if (alone) atomic_store_explicit(&c->alone_until, now + ALONE_NS, memory_order_relaxed);
    judge_waits(c, now, alone);
}

static tg_status run_job(tg_backend *b, graph_job *j, int64_t *failed) {
    j->nthreads = b->nthreads;
    j->impl = b->impl;
    j->shares = b->nthreads > 1 ? b->nthreads * FINE_SHARES : 1;
    j->claimed = calloc((size_t)(3 * j->n + 1), sizeof *j->claimed);
    j->taken = calloc((size_t)(j->n * j->shares + 1), sizeof *j->taken);
    j->shared = calloc((size_t)(j->n + 1), sizeof *j->shared);
    if (!j->claimed || !j->taken || !j->shared) {
        free((void *)j->claimed);
        free((void *)j->taken);
        free((void *)j->shared);
        return tg_error_set(TG_ERR_NOMEM, "cpu backend: out of memory");
    }
    j->done = j->claimed + j->n;
    j->nshares = j->done + j->n;
    atomic_init(&j->fail_at, j->n);
    pthread_mutex_init(&j->mu, NULL);
    tg_cpu_team *team = team_of(b);
    j->progress.yield_ns = tg_cpu_team_yield_ns(team);
    const int64_t offcore = atomic_load(&j->impl->offcore);
    j->contended = atomic_load_explicit(&j->impl->contended, memory_order_relaxed);
    /* waits keep the core (spin through the yield phase) unless another process has been
     * taking it (KEEP_CORE above) */
    const bool keep_core = !j->contended && tg_cpu_team_pinned(team);
    atomic_init(&j->progress.keep_core, keep_core);
    if (keep_core) atomic_fetch_add_explicit(&j->impl->kept, 1, memory_order_relaxed);
    if (j->contended) atomic_fetch_add_explicit(&j->impl->fine_runs, 1, memory_order_relaxed);
    const int64_t wall0 = tg_cpu_now_ns();
    const bool alone =
        team && wall0 < atomic_load_explicit(&j->impl->alone_until, memory_order_relaxed);
    /* (a test taking every holder to be off its core tests the team's waits: never alone) */
    const bool judged = team && !alone && j->n >= CONTENDED_MIN_NODES && !j->impl->all_offcore &&
                        !atomic_exchange_explicit(&j->impl->judging, true, memory_order_acquire);
    if (judged && j->impl->window_wall0 == 0) window_start(j->impl, wall0);
    const int64_t cpu0 = judged ? tg_cpu_thread_cpu_ns() : -1;
    if (alone) {
        tg_cpu_team_run_alone(team, graph_member, j);
        atomic_fetch_add_explicit(&j->impl->alone_runs, 1, memory_order_relaxed);
    } else if (j->n >= SHORT_RUN_NODES) {
        tg_cpu_team_offer(team, graph_member, j);
    } else {
        tg_cpu_team_offer_short(team, graph_member, j);
    }
    if (!alone && j->n >= CONTENDED_MIN_NODES) {
        atomic_store_explicit(&j->impl->contended,
                              atomic_load(&j->impl->offcore) - offcore >= CONTENDED_OFFCORE,
                              memory_order_relaxed);
    }
    if (judged) {
        if (cpu0 >= 0) judge_team(j, tg_cpu_now_ns() - wall0, tg_cpu_thread_cpu_ns() - cpu0);
        atomic_store_explicit(&j->impl->judging, false, memory_order_release);
    }
    for (int64_t i = 0; i < j->n; i++)
        release_shared(j, i);
    pthread_mutex_destroy(&j->mu);
    free((void *)j->claimed);
    free((void *)j->taken);
    free((void *)j->shared);
    int64_t at = atomic_load(&j->fail_at);
    if (at == j->n) return TG_OK;
    if (failed) *failed = at;
    return tg_error_set(j->st, "%s", j->msg);
}

static tg_status cpu_run_graph(tg_backend *b, tg_tensor *const *nodes, int64_t n,
                               void (*after)(void *ctx, int64_t i), void *ctx, int64_t *failed) {
    graph_job j = {.nodes = nodes, .n = n, .after = after, .ctx = ctx};
    return run_job(b, &j, failed);
}

/* One node's kernel (whatever its flags), on the team. */
static tg_status cpu_run_node(tg_backend *b, tg_tensor *t) {
    tg_tensor *one = t;
    uint32_t flags = t->flags;
    t->flags &= ~(uint32_t)(TG_TF_FUSED | TG_TF_INPUT);
    graph_job j = {.nodes = &one, .n = 1};
    tg_status st = run_job(b, &j, NULL);
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
 * to (Adam's update measured the same either way, ~3 ms a g2p-small step in both placements;
 * the zeroing is what gained: cpu_memset0 below). Buffers below TG_PAR_MIN (biases, norms) are
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
        if (owner(c, v->shares, v->nth) == p->ith) vec_share(v, c);
    for (int c = v->shares - 1; c >= 0; c--)
        vec_share(v, c);
    if (p->ith == 0) tg_cpu_event_wait(&v->finished, vec_all_done, v);
}

static void run_vec(tg_backend *b, int64_t n, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx) {
    if (n <= TG_PAR_MIN || b->nthreads <= 1) {
        tg_cpu_par one = {.team = NULL, .ith = 0, .nth = 1};
        fn(ctx, &one);
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
}

/* Zeroing a buffer (a store's gradients between steps): on the team, in the store maths' shares
 * (run_vec, above), so that each member zeroes the same part of each gradient every step. By
 * the caller alone, the gradients that the other member wrote last (its shares of the weight
 * gradients' sums) came across from its cache line by line: on a host that puts the two vCPUs
 * on different chiplets, zeroing g2p-small's 22 MB of gradients took 2.9 ms instead of 1.0
 * (docs/log/). */
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
 * sum waited on each add (a store's gradient norm: 4.4× a zeroing pass's time over the same
 * memory before). Built for the baseline ISA only (not cloned): with FMA the products would
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
    free(c->window_cpu);
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

int64_t tg__cpu_fine_runs(tg_backend *b) {
    return atomic_load(&((cpu_impl *)b->impl)->fine_runs);
}

int64_t tg__cpu_shares_run_ahead(tg_backend *b) {
    return atomic_load(&((cpu_impl *)b->impl)->ahead);
}

int64_t tg__cpu_waits_offcore(tg_backend *b) {
    return atomic_load(&((cpu_impl *)b->impl)->offcore);
}

int64_t tg__cpu_waits_slept(tg_backend *b) {
    return atomic_load(&((cpu_impl *)b->impl)->slept);
}

int64_t tg__cpu_runs_keeping_core(tg_backend *b) {
    return atomic_load(&((cpu_impl *)b->impl)->kept);
}

int64_t tg__cpu_waits_lent(tg_backend *b) {
    return atomic_load(&((cpu_impl *)b->impl)->lent);
}

bool tg__cpu_keeps_core_between(tg_backend *b) {
    return ((cpu_impl *)b->impl)->keep.keep;
}

int64_t tg__cpu_runs_alone(tg_backend *b) {
    return atomic_load(&((cpu_impl *)b->impl)->alone_runs);
}

void tg__cpu_members_away(tg_backend *b, bool on) {
    tg_cpu_team_members_away(((cpu_impl *)b->impl)->team, on);
}

void tg__cpu_all_offcore(tg_backend *b, bool on) {
    ((cpu_impl *)b->impl)->all_offcore = on;
}

tg_status tg_backend_cpu_new(int nthreads, tg_backend **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_backend_cpu_new: out is NULL");
    pthread_once(&kernels_once, assemble_kernels); /* run_kernel reads the table unchecked */
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
    c->window_cpu = window_cpu;
    atomic_init(&c->ahead, 0);
    atomic_init(&c->offcore, 0);
    atomic_init(&c->slept, 0);
    atomic_init(&c->lent, 0);
    atomic_init(&c->kept, 0);
    atomic_init(&c->alone_until, 0);
    atomic_init(&c->alone_runs, 0);
    atomic_init(&c->judging, false);
    b->vt = &cpu_vtable;
    b->nthreads = nthreads;
    b->impl = c;
    *out = b;
    return TG_OK;
}
