/* The CPU backend's thread team: persistent pthreads and a spin-yield-sleep barrier (team.h).
 *
 * Barrier: a count of arrivals and a generation number. The last member to arrive resets the
 * count (and the dynamic counter), then bumps the generation; the others wait for the
 * generation to change in three phases (tg_cpu_event_wait, on any condition):
 *   1. spin with the CPU's pause hint for spin_ns: the common case in a graph run, where the
 *      members finish a node within microseconds of each other;
 *   2. sched_yield() until yield_ns from the start of the wait: a member whose partner was
 *      preempted hands its core to whatever else is runnable there without giving up its
 *      place. A member that sleeps instead gives its core to another process until that
 *      process's time slice ends, and a VM wakes a sleeper late, while the waits inside a step
 *      and between its graph runs are often longer than a few hundred µs; hence 20 ms. Only
 *      yield_oversub_ns in a team with more members than usable CPUs: there a member waits for
 *      one that has no core, and only a sleeping member's core lets the kernel move that one
 *      over. An event may keep the core (keep_core): its yield phase spins on instead, since
 *      a yield hands the core to any eligible task, a lowest-priority one included
 *      (runner_policy.c: keep_core, keep_between);
 *   3. sleep on a futex (Linux; elsewhere it keeps yielding) until the last member wakes the
 *      sleepers: an idle team costs no CPU yield_ns after its last job.
 * Spinning without end is what makes OpenMP's default and OpenBLAS's pool slow beside a busy
 * process: a spinning member holds a core its preempted partner needs.
 * The graph runner's waits (runner.c) are "every share of this node is done";
 * tg_cpu_event_sleep is the third phase alone, for a member whose partner is off its core. The
 * sleep/wake race: a waiter reads the event's sequence number, announces itself (sleepers++)
 * and re-checks the condition before sleeping on the sequence number; the signaller makes the
 * condition true, bumps the sequence number and then reads sleepers. Both are sequentially
 * consistent, so either the waiter sees the condition or the signaller sees the sleeper, and
 * futex_wait returns at once if the sequence number moved in between.
 */
#include "backends/cpu/team.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#define TG_TEAM_FUTEX 1
#else
#define TG_TEAM_FUTEX 0
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

enum { MAX_THREADS = 4096 };

const tg_cpu_timing tg_cpu_t = {
    .spin_ns = 50 * 1000,
    .yield_ns = 20 * 1000 * 1000,
    .yield_oversub_ns = 200 * 1000,
    .steal_ns = 100 * 1000,
    .fine_shares = 4,
    .fine_min = 4 * 16384 /* 4 TG_PAR_MIN */,
    .short_run_nodes = 4,
    .probe_ns = 200 * 1000,
    .deep_ahead = 1024,
    .deep_pending = 64,
    .contended_offcore = 4,
    .contended_min_nodes = 16,
    .alone_window = 8,
    .alone_share = 5,
    .alone_cpu_num = 3,
    .alone_cpu_den = 4,
    .alone_ns = 100 * 1000 * 1000,
    .keep_cpu_num = 3,
    .keep_cpu_den = 4,
    .keep_window_ns = 25 * 1000 * 1000,
    .keep_retry_ns = (int64_t)1000 * 1000 * 1000,
    .keep_backoff_max = 4,
};


/* A job's state word: its number (bits 32..63), CLOSED (no member may join any more) and the
 * number of members inside it besides member 0 (the low bits). */
#define JOB_CLOSED (UINT64_C(1) << 31)
#define JOB_INSIDE (JOB_CLOSED - 1)

/* Counters on their own cache lines: members write `arrived` while others poll `gen`. */
struct tg_cpu_team {
    _Alignas(64) atomic_int arrived;
    _Alignas(64) atomic_uint gen;
    tg_cpu_event ev; /* signalled when gen moves */
    _Alignas(64) _Atomic uint64_t job; /* the posted job's state word */
    tg_cpu_event posted;               /* signalled when a job is posted */
    tg_cpu_event left;                 /* signalled when the last member leaves a closed job */
    _Alignas(64) atomic_llong next;    /* the dynamic counter (tg_cpu_next) */
    _Alignas(64) void (*fn)(void *ctx, tg_cpu_par *p);
    void *slot;
    void *ctx;
    bool quit;
    /* the posted job needs every member (tg_cpu_team_run); atomic: a member that woke late reads
     * it before its join fails, while member 0 posts the next job */
    atomic_bool everyone;
    atomic_bool running; /* member 0 is inside tg_cpu_team_run or tg_cpu_team_offer */
    atomic_bool away;    /* tests: the members other than 0 join no offered job */
    int n;
    int64_t yield_ns; /* tg_cpu_team_yield_ns */
    int *cpu;         /* member i's CPU when the team binds its members (bind_members), or NULL */
    pthread_t *threads;
    tg_cpu_par *pars;
    _Atomic unsigned *joined; /* per member: the number of the last job it joined */
    atomic_bool *lent;        /* per member: let run on every team CPU (tg_cpu_team_lend) */
};

static int64_t ns_of(const struct timespec *ts) {
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int64_t tg_cpu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ns_of(&ts);
}

int64_t tg_cpu_thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return -1;
    return ns_of(&ts);
}

static void futex_wait(_Atomic unsigned *word, unsigned val) {
#if TG_TEAM_FUTEX
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    (void)word, (void)val;
    sched_yield(); /* no futex: poll with yields */
#endif
}

static void futex_wake_all(_Atomic unsigned *word) {
#if TG_TEAM_FUTEX
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

/* The barrier's three phases on an arbitrary condition. Sleep: read seq, announce, re-check the
 * condition, sleep unless seq moved; a signal after the condition became true bumps seq, so a
 * sleeper cannot miss it (the same handshake as the barrier's). */
void tg_cpu_event_wait(tg_cpu_event *e, bool (*cond)(void *ctx), void *ctx) {
    int64_t start = 0;
    for (int i = 1;; i++) {
        if (cond(ctx)) return;
        cpu_relax();
        if ((i & 63) == 0) {
            int64_t now = tg_cpu_now_ns();
            if (!start) start = now;
            else if (now - start > tg_cpu_t.spin_ns)
                break;
        }
    }
    const int64_t yield_ns = tg_cpu_event_yield_ns(e);
    while (tg_cpu_now_ns() - start < yield_ns) {
        if (cond(ctx)) return;
        if (atomic_load_explicit(&e->keep_core, memory_order_relaxed))
            for (int i = 0; i < 64; i++)
                cpu_relax();
        else
            sched_yield();
    }
    tg_cpu_event_sleep(e, cond, ctx);
}

void tg_cpu_event_sleep(tg_cpu_event *e, bool (*cond)(void *ctx), void *ctx) {
    for (;;) {
        unsigned seq = atomic_load(&e->seq);
        atomic_fetch_add(&e->sleepers, 1);
        bool done = cond(ctx);
        if (!done) futex_wait(&e->seq, seq);
        atomic_fetch_sub(&e->sleepers, 1);
        if (done || cond(ctx)) return;
    }
}

void tg_cpu_event_signal(tg_cpu_event *e) {
    atomic_fetch_add(&e->seq, 1); /* seq_cst: see tg_cpu_event_wait */
    if (atomic_load(&e->sleepers) > 0) futex_wake_all(&e->seq);
}

typedef struct {
    tg_cpu_team *t;
    unsigned gen;
} gen_wait;

static bool gen_moved(void *ctx) {
    const gen_wait *w = ctx;
    return atomic_load_explicit(&w->t->gen, memory_order_acquire) != w->gen;
}

static void barrier(tg_cpu_team *t) {
    gen_wait w = {t, atomic_load_explicit(&t->gen, memory_order_acquire)};
    if (atomic_fetch_add_explicit(&t->arrived, 1, memory_order_acq_rel) == t->n - 1) {
        atomic_store_explicit(&t->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&t->next, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->gen, 1, memory_order_release);
        tg_cpu_event_signal(&t->ev);
        return;
    }
    tg_cpu_event_wait(&t->ev, gen_moved, &w);
}

void tg_cpu_barrier(tg_cpu_par *p) {
    if (p->team && p->nth > 1) barrier(p->team);
    else p->solo_next = 0;
}

int64_t tg_cpu_next(tg_cpu_par *p, int64_t step) {
    if (!p->team || p->nth <= 1) {
        int64_t v = p->solo_next;
        p->solo_next += step;
        return v;
    }
    return atomic_fetch_add_explicit(&p->team->next, step, memory_order_relaxed);
}

void **tg_cpu_slot(tg_cpu_par *p) {
    return p->team && p->nth > 1 ? &p->team->slot : &p->solo_slot;
}

typedef struct {
    tg_cpu_team *t;
    unsigned seen;
} job_wait;

static bool job_posted(void *ctx) {
    const job_wait *w = ctx;
    return (unsigned)(atomic_load_explicit(&w->t->job, memory_order_acquire) >> 32) != w->seen;
}

static bool nobody_inside(void *ctx) {
    return (atomic_load(&((tg_cpu_team *)ctx)->job) & JOB_INSIDE) == 0;
}

/* Enter job `num` unless it is closed or already replaced by a newer one. */
static bool join(tg_cpu_team *t, unsigned num) {
    uint64_t s = atomic_load(&t->job);
    do {
        if ((unsigned)(s >> 32) != num || (s & JOB_CLOSED)) return false;
    } while (!atomic_compare_exchange_weak(&t->job, &s, s + 1));
    return true;
}

static void leave(tg_cpu_team *t) {
    uint64_t s = atomic_fetch_sub(&t->job, 1) - 1;
    if ((s & JOB_CLOSED) && (s & JOB_INSIDE) == 0) tg_cpu_event_signal(&t->left);
}

/* The CPUs this process may run on (its affinity mask), at least 1. */
static int usable_cpus(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Binding. A team with one member per CPU the process may run on (the default thread count)
 * pins member i to the i-th of those CPUs — the caller, member 0, only while it runs a job, its
 * own affinity restored after. Left to the kernel, two members beside one busy process on two
 * CPUs mostly share one core while the other process has the other alone (two runnable threads
 * against one is as balanced as three threads on two cores get, so the kernel moves none);
 * pinned, one member shares its core with the other process and the other has a core of its
 * own, and the runner's stealing gives that one most of the work. A team with fewer members
 * than CPUs is not pinned — several such processes would pile onto the first CPUs — nor one
 * with more; nor any team when TG_CPU_BIND=0 (a program that places its threads itself). */
#if defined(__linux__)
/* The CPUs of this thread's affinity mask, in order, into cpu (the first max of them); how many
 * there are (0 when the mask cannot be read). */
static int mask_cpus(int *cpu, int max) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    int k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            if (k < max) cpu[k] = c;
            k++;
        }
    return k;
}

static void pin_to(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)sched_setaffinity(0, sizeof one, &one); /* failing, the member runs unpinned */
}

/* Member 0's job pinned: its mask saved into *saved, false when not pinned — also when the
 * caller's own mask leaves out member 0's CPU (a program that placed the thread itself), and
 * when it is member 0's CPU alone already (setting and restoring the mask costs microseconds
 * a job, which a program running many short jobs from a thread it pinned need not pay). */
static bool pin_caller(const tg_cpu_team *t, cpu_set_t *saved) {
    if (!t->cpu || sched_getaffinity(0, sizeof *saved, saved) != 0 || !CPU_ISSET(t->cpu[0], saved))
        return false;
    if (CPU_COUNT(saved) == 1) return false;
    pin_to(t->cpu[0]);
    return true;
}

static void unpin_caller(bool pinned, const cpu_set_t *saved) {
    if (pinned) (void)sched_setaffinity(0, sizeof *saved, saved);
}
#define TG_TEAM_PIN 1
#else
#define TG_TEAM_PIN 0
#endif

/* Whether a team of n binds its members, and to which CPUs (t->cpu, n entries). */
static void bind_members(tg_cpu_team *t) {
    const char *env = getenv("TG_CPU_BIND");
    if (t->n < 2 || (env && strcmp(env, "0") == 0)) return;
#if TG_TEAM_PIN
    int *cpu = malloc(sizeof *cpu * (size_t)t->n);
    if (cpu && mask_cpus(cpu, t->n) == t->n) {
        t->cpu = cpu;
        return;
    }
    free(cpu);
#endif
}

/* A preempted member lent the idle CPU (team.h). The kernel keeps a member that another process
 * holds off its core queued on that core, pinned there, while its partner, with nothing left to
 * run, sleeps and leaves its own core idle for the rest of the other process's time slice. Let
 * run on every CPU of the team, the member is pulled onto the idle one at once; at its next node
 * (or job) it pins itself again, so that the team keeps one member per CPU. The member's mask
 * is widened before the flag is set: a member that reads the flag has been widened, and one
 * widened after it last read the flag reads it at its next node. Member 0 is never lent: its
 * mask is the program's. */
bool tg_cpu_team_lend(tg_cpu_team *t, int m) {
#if TG_TEAM_PIN
    if (!t || !t->cpu || m < 1 || m >= t->n ||
        atomic_load_explicit(&t->lent[m], memory_order_relaxed))
        return false;
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int i = 0; i < t->n; i++)
        CPU_SET(t->cpu[i], &all);
    if (pthread_setaffinity_np(t->threads[m], sizeof all, &all) != 0) return false;
    atomic_store_explicit(&t->lent[m], true, memory_order_release);
    return true;
#else
    (void)t, (void)m;
    return false;
#endif
}

bool tg_cpu_team_pinned(const tg_cpu_team *t) {
    return t && t->cpu;
}

void tg_cpu_team_repin(const tg_cpu_par *p) {
#if TG_TEAM_PIN
    const tg_cpu_team *t = p->team;
    if (t && t->cpu && p->ith > 0 && atomic_load_explicit(&t->lent[p->ith], memory_order_relaxed) &&
        atomic_exchange_explicit(&t->lent[p->ith], false, memory_order_acquire))
        pin_to(t->cpu[p->ith]);
#else
    (void)p;
#endif
}

/* A member other than 0: wait for a job to be posted, join it, do it, leave. A member that wakes
 * late finds an offered job (tg_cpu_team_offer) closed, done without it, and waits for the
 * next; a job for everyone (tg_cpu_team_run) is never closed before every member has joined
 * it, since member 0 waits at its closing barrier. */
static void *member_main(void *arg) {
    tg_cpu_par *p = arg;
    tg_cpu_team *t = p->team;
    job_wait w = {t, 0};
    (void)tg_cpu_flush_begin(); /* for the thread's lifetime (team.h) */
#if TG_TEAM_PIN
    if (t->cpu) pin_to(t->cpu[p->ith]);
#endif
    for (;;) {
        tg_cpu_event_wait(&t->posted, job_posted, &w);
        w.seen = (unsigned)(atomic_load_explicit(&t->job, memory_order_acquire) >> 32);
        if (!atomic_load_explicit(&t->everyone, memory_order_relaxed) &&
            atomic_load_explicit(&t->away, memory_order_relaxed))
            continue;
        if (!join(t, w.seen)) continue;
        atomic_store_explicit(&t->joined[p->ith], w.seen, memory_order_release);
        tg_cpu_team_repin(p); /* lent in an earlier job and not back at a node since */
        bool quit = t->quit, everyone = atomic_load_explicit(&t->everyone, memory_order_relaxed);
        if (!quit) {
            p->solo_next = 0;
            t->fn(t->ctx, p);
        }
        leave(t); /* before the barrier: once member 0 passes it, nobody is inside */
        if (everyone) barrier(t);
        if (quit) return NULL;
    }
}

int64_t tg_cpu_team_yield_ns(const tg_cpu_team *team) {
    return team ? team->yield_ns : 0;
}

tg_cpu_team *tg_cpu_team_new(int n) {
    if (n < 1 || n > MAX_THREADS) {
        errno = EINVAL;
        return NULL;
    }
    tg_cpu_team *t = aligned_alloc(64, (sizeof *t + 63) / 64 * 64);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->n = n;
    t->yield_ns = n > usable_cpus() ? tg_cpu_t.yield_oversub_ns : 0;
    t->ev.yield_ns = t->posted.yield_ns = t->left.yield_ns = t->yield_ns;
    t->threads = calloc((size_t)n, sizeof *t->threads);
    t->pars = calloc((size_t)n, sizeof *t->pars);
    t->joined = calloc((size_t)n, sizeof *t->joined);
    t->lent = calloc((size_t)n, sizeof *t->lent);
    if (!t->threads || !t->pars || !t->joined || !t->lent) {
        free(t->threads);
        free(t->pars);
        free((void *)t->joined);
        free((void *)t->lent);
        free(t);
        return NULL;
    }
    for (int i = 0; i < n; i++) t->pars[i] = (tg_cpu_par){.team = t, .ith = i, .nth = n};
    bind_members(t); /* before the members start: they pin themselves */
    for (int i = 1; i < n; i++) {
        int err = pthread_create(&t->threads[i], NULL, member_main, &t->pars[i]);
        if (err) {
            /* shrink the team to the members that started, then free it */
            t->n = i;
            tg_cpu_team_free(t);
            errno = err;
            return NULL;
        }
    }
    return t;
}

/* Member 0: publish fn and ctx as job number num (the release store of the state word) and
 * wake the sleeping members. */
static void post(tg_cpu_team *t, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx, bool everyone) {
    unsigned num = (unsigned)(atomic_load(&t->job) >> 32) + 1;
    t->fn = fn;
    t->ctx = ctx;
    atomic_store_explicit(&t->everyone, everyone, memory_order_relaxed);
    atomic_store_explicit(&t->next, 0, memory_order_relaxed);
    t->threads[0] = pthread_self(); /* member 0 is whoever posts (tg_cpu_member_cpu_ns) */
    atomic_store_explicit(&t->joined[0], num, memory_order_relaxed);
    atomic_store_explicit(&t->job, (uint64_t)num << 32, memory_order_release);
    tg_cpu_event_signal(&t->posted);
}

void tg_cpu_team_free(tg_cpu_team *t) {
    if (!t) return;
    if (t->n > 1) {
        t->quit = true;
        post(t, NULL, NULL, true);
        barrier(t); /* every member has seen quit */
        for (int i = 1; i < t->n; i++) pthread_join(t->threads[i], NULL);
    }
    free(t->threads);
    free(t->pars);
    free((void *)t->joined);
    free((void *)t->lent);
    free(t->cpu);
    free(t);
}

int tg_cpu_team_size(const tg_cpu_team *t) { return t ? t->n : 1; }

static bool solo(tg_cpu_team *t, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx) {
    if (t && t->n > 1 && !atomic_exchange(&t->running, true)) return false;
    tg_cpu_par one = {.team = NULL, .ith = 0, .nth = 1};
    fn(ctx, &one);
    return true;
}

void tg_cpu_team_run(tg_cpu_team *t, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx) {
    if (solo(t, fn, ctx)) return;
    tg_cpu_par *p = &t->pars[0];
    p->solo_next = 0;
#if TG_TEAM_PIN
    cpu_set_t saved;
    const bool pinned = pin_caller(t, &saved);
#endif
    post(t, fn, ctx, true);
    fn(ctx, p);
    barrier(t); /* end: every member has joined, done its part and left */
#if TG_TEAM_PIN
    unpin_caller(pinned, &saved);
#endif
    atomic_store(&t->running, false);
}

static void offer(tg_cpu_team *t, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx, bool pin) {
    if (solo(t, fn, ctx)) return;
    tg_cpu_par *p = &t->pars[0];
    p->solo_next = 0;
#if TG_TEAM_PIN
    cpu_set_t saved;
    /* a short job binds the caller only when it is not on member 0's CPU already (where it
     * would share a core with the member bound there) */
    const bool pinned =
        t->cpu && (pin || sched_getcpu() != t->cpu[0]) && pin_caller(t, &saved);
#else
    (void)pin;
#endif
    post(t, fn, ctx, false);
    fn(ctx, p);
#if TG_TEAM_PIN
    unpin_caller(pinned, &saved); /* the members still inside are at their end */
#endif
    /* the work is done; wait only for members still inside (they may read ctx) */
    atomic_fetch_or(&t->job, JOB_CLOSED);
    tg_cpu_event_wait(&t->left, nobody_inside, t);
    atomic_store(&t->running, false);
}

void tg_cpu_team_offer(tg_cpu_team *t, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx) {
    offer(t, fn, ctx, true);
}

void tg_cpu_team_offer_short(tg_cpu_team *t, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx) {
    offer(t, fn, ctx, false);
}

void tg_cpu_team_run_alone(tg_cpu_team *t, void (*fn)(void *ctx, tg_cpu_par *p), void *ctx) {
    if (solo(t, fn, ctx)) return;
    /* no team: tg_cpu_member_joined says no member but the caller has joined */
    tg_cpu_par alone = {.team = NULL, .ith = 0, .nth = t->n};
    fn(ctx, &alone);
    atomic_store(&t->running, false);
}

void tg_cpu_team_keep_core_between(tg_cpu_team *t, bool on) {
    if (t) atomic_store_explicit(&t->posted.keep_core, on, memory_order_relaxed);
}

/* The CPU clock of thread m of team t, in ns; -1 when it cannot be read. */
static int64_t member_cpu_ns(const tg_cpu_team *t, int m) {
    clockid_t clock;
    struct timespec ts;
    if (!t || m < 0 || m >= t->n || pthread_getcpuclockid(t->threads[m], &clock) ||
        clock_gettime(clock, &ts))
        return -1;
    return ns_of(&ts);
}

int64_t tg_cpu_team_member_cpu_ns(const tg_cpu_team *t, int m) {
    if (m == 0) return tg_cpu_thread_cpu_ns(); /* the caller, posted a job or not */
    return member_cpu_ns(t, m);
}

void tg_cpu_team_members_away(tg_cpu_team *t, bool on) {
    if (t) atomic_store(&t->away, on);
}

bool tg_cpu_member_joined(const tg_cpu_par *p, int m) {
    if (!p->team) return m == p->ith;
    const tg_cpu_team *t = p->team;
    unsigned num = (unsigned)(atomic_load_explicit(&t->job, memory_order_relaxed) >> 32);
    return atomic_load_explicit(&t->joined[m], memory_order_acquire) == num;
}

int64_t tg_cpu_member_cpu_ns(const tg_cpu_par *p, int m) {
    return member_cpu_ns(p->team, m);
}

/* A positive count in 1..MAX_THREADS at the start of s (OMP_NUM_THREADS may be a list "4,2"). */
static int parse_count(const char *s, bool whole) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || v < 1 || v > MAX_THREADS) return -1;
    if (whole ? *end != '\0' : (*end != '\0' && *end != ',')) return -1;
    return (int)v;
}

int tg_cpu_thread_count(int n, const char **bad) {
    if (n > 0) return n;
    const char *env = getenv("TG_NUM_THREADS");
    if (env && *env) {
        int v = parse_count(env, true);
        if (v < 0 && bad) *bad = "TG_NUM_THREADS";
        return v;
    }
    env = getenv("OMP_NUM_THREADS");
    if (env && *env) {
        int v = parse_count(env, false);
        if (v < 0 && bad) *bad = "OMP_NUM_THREADS";
        return v;
    }
    /* the cores this process may run on (a cpuset or taskset can leave fewer than online) */
    long c = sysconf(_SC_NPROCESSORS_ONLN);
#if defined(__linux__)
    cpu_set_t cs;
    if (sched_getaffinity(0, sizeof cs, &cs) == 0) c = CPU_COUNT(&cs);
#endif
    return c < 1 ? 1 : c > MAX_THREADS ? MAX_THREADS : (int)c;
}
