/* The CPU backend's thread team (internal header): persistent threads, a barrier that spins,
 * then yields, then sleeps, and the work-sharing helpers the kernels use.
 *
 * A team of n threads is created once with the backend: the thread that calls
 * tg_cpu_team_run() is member 0, n - 1 pthreads are the others. A team with one member per CPU
 * the process may run on pins member i to the i-th of them, member 0 only during its jobs (a
 * short one only when it is elsewhere; team.c says why; TG_CPU_BIND=0: never). tg_cpu_team_run(fn) runs fn
 * on every member at once and returns when all have finished. tg_cpu_team_offer(fn) runs it on
 * member 0 and whichever members join in time, and does not wait for the others: the CPU
 * backend runs a whole graph that way (runner.c: every member walks the node list and takes shares
 * of each node, waiting until the node is done before the next), so a training step opens one
 * parallel region, not one per op, and a member that another process holds off its core
 * delays neither the start nor the end of a run.
 *
 * A kernel gets a tg_cpu_par: its share index ith and the share count nth. It splits its loop
 * with TG_CPU_FOR (contiguous static blocks, as OpenMP's schedule(static)). Called by every
 * member of a running team (p->team set: tg_cpu_team_run), it may also hand out tasks
 * dynamically with tg_cpu_next() and wait for the others with tg_cpu_barrier() (every member
 * must reach the same barriers in the same order); called for one share of a graph node (runner.c,
 * p->team NULL), barriers do nothing and the split must be static.
 */
#ifndef TG_CPU_TEAM_H
#define TG_CPU_TEAM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_cpu_team tg_cpu_team;

/* Work that the shares of one graph node do once for all of them — a product's operand packed
 * for the GEMM (gemm_packed.c) — held in the node's slot (tg_cpu_par.shared): the first share
 * that needs it stores it there, the others find it, and the graph runner (runner.c) calls
 * release once the node's last share is done. */
typedef struct tg_cpu_shared tg_cpu_shared;
struct tg_cpu_shared {
    void (*release)(tg_cpu_shared *s);
};

/* One member's view of the running team. solo_next is the dynamic counter of a team of one
 * (team NULL): kernels can be called without a team, on the calling thread alone. shared: the
 * node's slot when the graph runner runs one share of a node (team NULL), else NULL. team_size:
 * there, the team's size (0: nth), which fixes how a weight gradient is cut along k whatever
 * number of shares the node is cut into (gemm_split_k.c). */
typedef struct tg_cpu_par {
    tg_cpu_team *team;
    int ith, nth;
    int64_t solo_next;
    void *solo_slot;
    tg_cpu_shared *_Atomic *shared;
    int team_size;
} tg_cpu_par;

/* The node's shared object for share p (p->shared set), given mine — made by the caller after
 * finding the slot empty: mine stored now, or the one another share stored first (mine is
 * then released). NULL (the caller could not make one): nothing stored, NULL returned. */
static inline tg_cpu_shared *tg_cpu_shared_publish(tg_cpu_par *p, tg_cpu_shared *mine) {
    tg_cpu_shared *s = NULL;
    if (!mine) return NULL;
    if (atomic_compare_exchange_strong_explicit(p->shared, &s, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    mine->release(mine);
    return s;
}

/* Subnormal floats (magnitude below 2^-126 = 1.2e-38) are flushed to zero while the backend
 * computes: as results (MXCSR's FTZ) and as inputs (DAZ). An Intel core takes a microcode
 * assist for an FMA that reads or makes a subnormal, and a saturated softmax makes millions:
 * a trained interacting-attention model at 32 heads (Bible EN->ES, d 256) stepped at 2,000
 * tokens/s with them and 10,000 without on an AVX-512 Xeon. Flushing changes only values below
 * 1.2e-38. Members flush for their lifetime (team.c); the calling thread only inside
 * a backend call, between tg_cpu_flush_begin() and tg_cpu_flush_end(saved), which restores its
 * control bits and keeps the exception flags raised meanwhile. A no-op off x86. */
#if defined(__SSE2__)
#include <xmmintrin.h>
enum { TG_CPU_MXCSR_FLUSH = 0x8040u, TG_CPU_MXCSR_FLAGS = 0x3Fu }; /* FTZ | DAZ; status flags */
static inline unsigned tg_cpu_flush_begin(void) {
    unsigned saved = _mm_getcsr();
    if ((saved & TG_CPU_MXCSR_FLUSH) != TG_CPU_MXCSR_FLUSH) _mm_setcsr(saved | TG_CPU_MXCSR_FLUSH);
    return saved;
}
static inline void tg_cpu_flush_end(unsigned saved) {
    if ((saved & TG_CPU_MXCSR_FLUSH) != TG_CPU_MXCSR_FLUSH)
        _mm_setcsr(saved | (_mm_getcsr() & TG_CPU_MXCSR_FLAGS));
}
#else
static inline unsigned tg_cpu_flush_begin(void) { return 0; }
static inline void tg_cpu_flush_end(unsigned saved) { (void)saved; }
#endif

/* A team of n >= 1 threads (n - 1 of them created here). NULL (and errno) when a thread cannot
 * be started. */
tg_cpu_team *tg_cpu_team_new(int n);
void tg_cpu_team_free(tg_cpu_team *team);
int tg_cpu_team_size(const tg_cpu_team *team);

/* fn(ctx, par) on every member at once; returns when all have returned. A call made while the
 * team is already running (from inside fn, on member 0) runs fn on the caller alone. */
void tg_cpu_team_run(tg_cpu_team *team, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx);

/* fn(ctx, par) on member 0 and on every other member that is free to join while member 0 is
 * inside fn; returns when member 0's fn has returned and every member that joined has left. A
 * member asleep, or preempted by another process, when the job is posted may find it already
 * done and is not waited for, so fn must get all the work done by whichever members run it
 * (take work items atomically, as the graph runner's shares in runner.c), and must not use
 * tg_cpu_barrier or a static split of the team. tg_cpu_member_joined(p, m): whether member m
 * has joined the current job (so far; a member may join later). Same nesting rule as
 * tg_cpu_team_run. */
void tg_cpu_team_offer(tg_cpu_team *team, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx);
/* The same for a job of a node or two (a graph run of one op): member 0 is bound to its CPU
 * for it (team.c: binding) only when the caller is not on that CPU already — the two calls
 * that bind the caller and give back its mask cost ~6 µs, a quarter of a 20-µs job, and the
 * scheduler moves nothing that soon; a caller left on another member's CPU would share it. */
void tg_cpu_team_offer_short(tg_cpu_team *team, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx);
bool tg_cpu_member_joined(const tg_cpu_par *p, int m);

/* fn(ctx, par) on the caller alone, as member 0 of the team's n (par.nth = n, par.team NULL):
 * the members are neither woken nor waited for, and the caller keeps its own CPU mask (not
 * bound to member 0's CPU). fn is an offered job's (tg_cpu_team_offer), whose work items are
 * cut for n members whoever runs them, so it gives the same results. For runs whose other
 * members cannot get to a core in time (runner_policy.c: run_alone). */
void tg_cpu_team_run_alone(tg_cpu_team *team, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx);

/* Tests: the members other than 0 join no offered job while on (as if another process held
 * them off their cores for good); tg_cpu_team_run's jobs they still join. */
void tg_cpu_team_members_away(tg_cpu_team *team, bool on);

/* The CPU time member m of p's team has had, in ns: its thread's CPU clock, which counts the
 * current slice while the thread runs on another core, so that a member held off its core by
 * another process (its clock stands still) is told from one at work (runner_policy.c:
 * offcore). -1 when there is no team or the clock cannot be read. */
int64_t tg_cpu_member_cpu_ns(const tg_cpu_par *p, int m);

/* Member m (not 0) holds a share while another process has its CPU, and the caller, waiting on
 * that share with nothing else to run, is about to sleep: m may now run on every CPU of the
 * team, so that the one the caller leaves idle takes it at once (team.c says why). Returns
 * whether m was lent: not member 0, nor in a team that does not pin its members. */
bool tg_cpu_team_lend(tg_cpu_team *t, int m);

/* Whether the members' waits for the next job keep their cores (spin through the yield phase,
 * as tg_cpu_event.keep_core) instead of yielding them: the runner decides (runner_policy.c:
 * keep_between). */
void tg_cpu_team_keep_core_between(tg_cpu_team *team, bool on);

/* The CPU time of member m of the team, in ns (member 0: the calling thread's, which is member
 * 0 when called between jobs by the thread that runs them); -1 when it cannot be read. */
int64_t tg_cpu_team_member_cpu_ns(const tg_cpu_team *team, int m);

/* Whether the team pins its members, one per CPU (team.c: bind_members). */
bool tg_cpu_team_pinned(const tg_cpu_team *t);

/* Member p, if it was lent, pins itself to its own CPU again: the graph runner calls it at each
 * node, and a member at each job it joins (a relaxed load when it was not lent). */
void tg_cpu_team_repin(const tg_cpu_par *p);

/* Wait until every member has arrived. Also resets the dynamic counter (tg_cpu_next): a
 * dynamically scheduled loop must be separated from the next one by a barrier. */
void tg_cpu_barrier(tg_cpu_par *p);

/* The CPU backend's timings and thresholds, one place for all (team.c; runner.h says what the
 * runner's do). A wait spins until spin_ns, yields the core until yield_ns (the event's
 * yield_ns: tg_cpu_team_yield_ns), then sleeps until woken (team.c says why). */
typedef struct {
    int64_t spin_ns;          /* a wait spins this long: members finish a node µs apart */
    int64_t yield_ns;         /* then yields until this: a sleeper wakes late, its core lent */
    int64_t yield_oversub_ns; /* the same in a team with more members than CPUs: hand cores over */
    int64_t steal_ns;         /* grace before a member takes a partner's untaken share */
    int fine_shares;          /* shares per member of a big node that is not a product */
    int64_t fine_min;         /* big: more output values than this */
    int short_run_nodes;      /* runs of fewer nodes bind the caller only when it is elsewhere */
    int64_t probe_ns;         /* offcore: interval between readings of a holder's CPU clock */
    int deep_ahead;           /* offcore: later nodes a member may run any untaken share of */
    int deep_pending;         /* offcore: unfinished nodes tracked while running ahead (<= 64) */
    int contended_offcore;    /* fine_after: a run with this many off-core waits is contended */
    int contended_min_nodes;  /* runs of fewer nodes are neither counted contended nor judged */
    int alone_window;         /* run_alone: runs per judgement */
    int alone_share;          /* run_alone: members that ran under 1/this of their shares */
    int alone_cpu_num, alone_cpu_den; /* run_alone: while member 0 had under num/den of a CPU */
    int64_t alone_ns;         /* run_alone: how long the runs then go alone */
    int keep_cpu_num, keep_cpu_den; /* keep_between: a member under num/den of a CPU: yield */
    int64_t keep_window_ns;   /* keep_between: the shortest window judged */
    int64_t keep_retry_ns;    /* keep_between: first retry after a window that should yield */
    int keep_backoff_max;     /* keep_between: the retry time doubles at most this often */
} tg_cpu_timing;
extern const tg_cpu_timing tg_cpu_t;

/* A condition other threads wait for, with the barrier's spin, yield and sleep phases: a
 * waiter calls tg_cpu_event_wait(e, cond, ctx), which returns once cond(ctx) is true; whoever
 * makes the condition true calls tg_cpu_event_signal(e) afterwards. Zero-initialised. */
typedef struct tg_cpu_event {
    _Atomic unsigned seq;
    _Atomic int sleepers;
    int64_t yield_ns; /* end of the yield phase; 0: tg_cpu_t.yield_ns (tg_cpu_team_yield_ns) */
    atomic_bool keep_core; /* the yield phase spins on instead of yielding (runner_policy.c:
                              keep_core); atomic: the team's `posted` is set while members wait */
} tg_cpu_event;
void tg_cpu_event_wait(tg_cpu_event *e, bool (*cond)(void *ctx), void *ctx);
void tg_cpu_event_signal(tg_cpu_event *e);
/* Where a wait on e ends its yield phase, from the wait's start. */
static inline int64_t tg_cpu_event_yield_ns(const tg_cpu_event *e) {
    return e->yield_ns ? e->yield_ns : tg_cpu_t.yield_ns;
}
/* The wait's sleep phase alone: for a waiter that knows spinning or yielding cannot help (the
 * graph runner's member whose partner is off its core: runner_policy.c, offcore). */
void tg_cpu_event_sleep(tg_cpu_event *e, bool (*cond)(void *ctx), void *ctx);

/* The yield phase for the events of a job on this team: tg_cpu_t.yield_oversub_ns when the
 * team has more members than the CPUs the process may run on, else 0 (tg_cpu_t.yield_ns). */
int64_t tg_cpu_team_yield_ns(const tg_cpu_team *team);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t tg_cpu_now_ns(void);
/* The calling thread's CPU time in ns (-1 when it cannot be read). */
int64_t tg_cpu_thread_cpu_ns(void);

/* The next `step` indices of the current dynamically scheduled loop: returns the first. Only
 * for members of a running team (p->team set); a share of a graph node (runner.c: p->team NULL,
 * called once per share) must split its work statically, or it would do every task. */
int64_t tg_cpu_next(tg_cpu_par *p, int64_t step);

/* A pointer-sized slot shared by the members (member 0 publishes a buffer, a barrier, the others
 * read it). */
void **tg_cpu_slot(tg_cpu_par *p);

/* The number of threads a backend gets when asked for n: n if n > 0, else TG_NUM_THREADS, else
 * OMP_NUM_THREADS (its first number), else the online cores. -1 when an environment value is
 * not a count in 1..4096 (*bad names the variable). */
int tg_cpu_thread_count(int n, const char **bad);

/* [lo, hi) of member ith among nth for n items: contiguous blocks, the first n % nth members
 * one item more (OpenMP's static schedule). par false: member 0 takes all (the work is too
 * small to share). */
static inline void tg_cpu_share(const tg_cpu_par *p, int64_t n, bool par, int64_t *lo, int64_t *hi) {
    if (!par || p->nth <= 1) {
        *lo = 0;
        *hi = p->ith == 0 ? n : 0;
        return;
    }
    int64_t q = n / p->nth, r = n % p->nth, i = p->ith;
    *lo = i * q + (i < r ? i : r);
    *hi = *lo + q + (i < r);
}

/* for (I = this member's first; I < its end; I++) over n items, shared when PAR */
#define TG_CPU_FOR(P, I, N, PAR)                                                                   \
    for (int64_t I##_lo_, I##_hi_, I##_once_ = (tg_cpu_share((P), (N), (PAR), &I##_lo_, &I##_hi_), 1); \
         I##_once_; I##_once_ = 0)                                                                 \
        for (int64_t I = I##_lo_; I < I##_hi_; I++)

#endif
