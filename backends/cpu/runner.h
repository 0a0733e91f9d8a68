/* The CPU backend's graph runner (internal header): the core (runner.c) and its contention
 * policies (runner_policy.c), each behind one switch of tg_cpu_policy.
 *
 * A graph run is offered to the thread team (team.h: tg_cpu_team_offer). Node i is cut into k
 * shares — its kernel called with (ith, nth) = (share, k), the same cut as a team of k makes —
 * and share c is owned by member tg_cpu_owner(c, k, n). Every member walks the node list; at node i
 * it runs its own shares, then those of members that have not joined the run, then waits until
 * every share is done (the node's barrier: node i + 1 may read what node i wrote), taking any
 * share still untaken after the steal grace (its owner is late). A run's bits depend on the
 * cut alone, never on who ran a share or when.
 */
#ifndef TG_CPU_RUNNER_H
#define TG_CPU_RUNNER_H

#include <pthread.h>
#include <stdatomic.h>

#include "backends/cpu/cpu-impl.h"

/* The policies the runner applies on top of its core (runner_policy.c says what each does and
 * why), each switched off by naming it in TG_CPU_POLICY_OFF (a comma-separated list, read once
 * per process), so that a benchmark can time the runner with and without it alternately
 * (benchmarks/contention/bench_contention.sh, one --build per setting). */
typedef struct {
    bool offcore;      /* a wait on a holder off its core runs ahead, else sleeps and lends */
    bool fine_after;   /* after a contended run, products cut finer and stolen at once */
    bool keep_core;    /* a pinned team's node waits spin through the yield phase */
    bool run_alone;    /* runs go on the caller alone while the members cannot help */
    bool keep_between; /* waits between runs spin through the yield phase beside nice 19 */
} tg_cpu_policies;
extern tg_cpu_policies tg_cpu_policy;
void tg_cpu_policies_init(void);

/* What the runner keeps from run to run on one backend: counters (tests and benchmarks read
 * them: cpu-impl.h) and the policies' state. */
typedef struct {
    atomic_llong ahead;       /* shares run ahead of their node's turn (offcore's run-ahead) */
    atomic_llong offcore;     /* waits on a share whose holder was off its core */
    atomic_llong slept;       /* of those, slept through (nothing to run ahead) */
    atomic_llong lent;        /* of those, the holder lent the sleeper's CPU */
    atomic_llong fine_runs;   /* runs cut finer after a contended one */
    atomic_llong kept;        /* runs whose waits kept their core */
    atomic_llong alone_runs;  /* runs made on the caller alone */
    atomic_bool contended;    /* the last run found members off their cores */
    atomic_llong alone_until; /* runs go on the caller alone until then */
    /* The judgement (run-alone, keep-between), made by one calling thread at a time: the one
     * that set `judging` owns the fields after it; another thread's run goes unjudged. */
    atomic_bool judging;
    int64_t judged, owned, helped, wall_ns, cpu_ns; /* run-alone: the window's runs so far */
    tg__cpu_keep_state keep; /* keep-between: its state, its window's start (0: none) and */
    int64_t window_wall0;    /* each member's CPU clock then */
    int64_t *window_cpu;
    bool all_offcore; /* tests: every holder taken to be off its core */
} tg_cpu_runner;

/* A share's state word: the member holding it + 1 above the two low bits, which say UNTAKEN,
 * TAKEN (its holder computes it) or DONE. */
enum { TG_SHARE_UNTAKEN = 0, TG_SHARE_TAKEN = 1, TG_SHARE_DONE = 2 };

/* One graph run. */
typedef struct {
    tg_tensor *const *nodes;
    int64_t n;
    int nthreads, shares;                /* team size; most shares of one node */
    bool contended;                      /* cut the products finer and steal at once (fine_after) */
    void (*after)(void *ctx, int64_t i); /* called by member 0 after node i; no running ahead */
    void *ctx;
    _Atomic int *claimed, *done;    /* per node: shares taken, shares finished */
    _Atomic int *nshares;           /* per node: its share count, once known (0: not yet) */
    _Atomic int *taken;             /* per node and share: the state word */
    tg_cpu_shared *_Atomic *shared; /* per node: work its shares do once for all (team.h) */
    tg_cpu_runner *r;
    tg_cpu_event progress; /* signalled when a node's last share is done */
    atomic_llong fail_at;  /* the first failing node (n: none) */
    tg_status st;
    char msg[1024];
    pthread_mutex_t mu;
} tg_cpu_graph_job;

/* A member's wait on node i, every own share run. */
typedef struct {
    tg_cpu_graph_job *j;
    int64_t i, start, steal_at;
    int k;
    int64_t probe_at; /* off-core: the next reading of a holder's clock; its member, the */
    int probe_m;      /* wall time and the clock at the last reading */
    int64_t probe_wall, probe_cpu;
} tg_cpu_node_wait;

/* The member that owns share c of k among nth: contiguous runs of shares per member, so that
 * a member's shares of an elementwise node cover the rows its share of the product before
 * wrote, still in its core's cache. */
static inline int tg_cpu_owner(int c, int k, int nth) {
    return (int)((int64_t)c * nth / k);
}

/* Run nodes[0, n) on team (NULL: the caller alone) of nthreads (runner.c). */
tg_status tg_cpu_runner_run(tg_cpu_runner *r, tg_cpu_team *team, int nthreads,
                            tg_tensor *const *nodes, int64_t n, void (*after)(void *ctx, int64_t i),
                            void *ctx, int64_t *failed);

/* The core's services to the policies (runner.c). */
int tg_cpu_node_shares(tg_cpu_graph_job *j, int64_t i);
bool tg_cpu_node_finished(tg_cpu_graph_job *j, int64_t i);
bool tg_cpu_take(tg_cpu_graph_job *j, int64_t i, int c, int m);
void tg_cpu_run_share(tg_cpu_graph_job *j, int64_t i, int c, int k);
bool tg_cpu_node_wait_done(void *w); /* cond of tg_cpu_event_wait: the node is done */

/* The policies (runner_policy.c): each returns at once when its switch is off. */
/* offcore: member p waits on w->i, every share taken; at each probe time it reads a holder's
 * CPU clock and, the holder off its core, runs ahead or else sleeps until the node is done. */
void tg_cpu_offcore_probe(tg_cpu_graph_job *j, tg_cpu_par *p, tg_cpu_node_wait *w);
/* Before a run: whether it is cut finer (fine_after), its node waits keep the core
 * (keep_core), it goes alone (run_alone) and it is judged; after: the judgement. */
typedef struct {
    bool alone, judged;
    int64_t wall0, cpu0, offcore0;
} tg_cpu_run_plan;
tg_cpu_run_plan tg_cpu_policies_before(tg_cpu_graph_job *j, tg_cpu_team *team);
void tg_cpu_policies_after(tg_cpu_graph_job *j, tg_cpu_team *team, const tg_cpu_run_plan *plan);

#endif
