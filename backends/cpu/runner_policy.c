/* The graph runner's contention policies (runner.h): what the runner does on top of its core
 * (runner.c) when members finish unevenly or other processes take their cores. Each is one
 * section here behind one switch of tg_cpu_policy, and none changes a run's bits: they change
 * who runs a share and when, and how a waiting member spends its wait.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/runner.h"

tg_cpu_policies tg_cpu_policy = {.offcore = true,
                                 .fine_after = true,
                                 .keep_core = true,
                                 .run_alone = true,
                                 .keep_between = true};

/* Whether the comma-separated list names `name` (whole, not a prefix of another name). */

static bool named(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *q = list; (q = strstr(q, name)); q += n)
        if ((q == list || q[-1] == ',') && (q[n] == ',' || q[n] == '\0')) return true;
    return false;
}

void tg_cpu_policies_init(void) {
    const char *off = getenv("TG_CPU_POLICY_OFF");
    if (!off) off = "";
    tg_cpu_policy = (tg_cpu_policies){
        .offcore = !named(off, "offcore"),
        .fine_after = !named(off, "fine_after"),
        .keep_core = !named(off, "keep_core"),
        .run_alone = !named(off, "run_alone"),
        .keep_between = !named(off, "keep_between"),
    };
}

/* Whether node t may run beside node q: q is finished, or their memory does not meet. */
static bool clear_of(tg_cpu_graph_job *j, const tg_tensor *t, int64_t q) {
    return tg_cpu_node_finished(j, q) || tg__nodes_independent(t, j->nodes[q]);
}

/* ---- offcore ----
 * A member waiting on a share that another member holds reads the holder's CPU clock
 * (tg_cpu_member_cpu_ns) probe_ns / 2 into the wait and every probe_ns after: a clock that
 * moved less than half the wall time since the last reading means the holder is off its core,
 * preempted by another process, which then has that core, often for milliseconds. The waiting
 * member then runs ahead: every untaken share, whoever owns it, of the next deep_ahead nodes
 * independent of every unfinished node before them. When there is none it sleeps until the
 * node is done instead of spinning and yielding on its own core (nothing it does there brings
 * the share nearer) — and first lends the holder every CPU of a pinned team (team.h:
 * tg_cpu_team_lend), else the holder waits out the other process's time slice queued on its
 * own core while the sleeper's stays idle. A holder at work keeps the spin-yield wait. */

/* Member p runs every untaken share of the next deep_ahead nodes independent of every
 * unfinished node before them (deep_pending of those tracked at most; a fused chain's members
 * count as unfinished, as its tail runs them). Returns whether it ran any. */
static bool run_ahead(tg_cpu_graph_job *j, tg_cpu_par *p, int64_t i) {
    int64_t pending[64];
    const int most = tg_cpu_t.deep_pending < 64 ? tg_cpu_t.deep_pending : 64;
    int np = 0;
    bool ran = false;
    pending[np++] = i;
    for (int64_t m = i + 1; m < j->n && m <= i + tg_cpu_t.deep_ahead; m++) {
        tg_tensor *t = j->nodes[m];
        if (!(t->flags & TG_TF_FUSED) && !tg_cpu_node_finished(j, m)) {
            bool free_to_run = true;
            for (int q = 0; q < np && free_to_run; q++)
                free_to_run = clear_of(j, t, pending[q]);
            const int k = tg_cpu_node_shares(j, m);
            for (int c = 0; free_to_run && c < k; c++)
                if (tg_cpu_take(j, m, c, p->ith)) {
                    tg_cpu_run_share(j, m, c, k);
                    atomic_fetch_add_explicit(&j->r->ahead, 1, memory_order_relaxed);
                    ran = true;
                }
            if (atomic_load(&j->fail_at) <= m) break;
        }
        if ((t->flags & TG_TF_FUSED) || !tg_cpu_node_finished(j, m)) {
            if (np == most) break;
            pending[np++] = m;
        }
    }
    return ran;
}

/* The probes cut the wait into calls of tg_cpu_event_wait, each starting its phases afresh,
 * so the wait's own end of the yield phase is kept here. */
void tg_cpu_offcore_probe(tg_cpu_graph_job *j, tg_cpu_par *p, tg_cpu_node_wait *w) {
    if (!tg_cpu_policy.offcore) return;
    const int64_t now = tg_cpu_now_ns();
    if (now < w->probe_at) return;
    w->probe_at = now + tg_cpu_t.probe_ns;
    if (now - w->start >= tg_cpu_event_yield_ns(&j->progress)) {
        tg_cpu_event_sleep(&j->progress, tg_cpu_node_wait_done, w);
        return;
    }
    int holder = -1;
    for (int c = 0; c < w->k && holder < 0; c++) {
        const int v = atomic_load_explicit(&j->taken[w->i * j->shares + c], memory_order_relaxed);
        if ((v & 3) == TG_SHARE_TAKEN && (v >> 2) - 1 != p->ith) holder = (v >> 2) - 1;
    }
    if (holder < 0) return;
    const int64_t cpu = tg_cpu_member_cpu_ns(p, holder);
    if (cpu < 0) return;
    if (j->r->all_offcore ||
        (holder == w->probe_m && 2 * (cpu - w->probe_cpu) < now - w->probe_wall)) {
        atomic_fetch_add_explicit(&j->r->offcore, 1, memory_order_relaxed);
        w->probe_m = -1;
        if (!j->after && run_ahead(j, p, w->i)) return;
        atomic_fetch_add_explicit(&j->r->slept, 1, memory_order_relaxed);
        if (tg_cpu_team_lend(p->team, holder))
            atomic_fetch_add_explicit(&j->r->lent, 1, memory_order_relaxed);
        tg_cpu_event_sleep(&j->progress, tg_cpu_node_wait_done, w);
        return;
    }
    w->probe_m = holder, w->probe_wall = now, w->probe_cpu = cpu;
}

/* ---- fine_after ----
 * A run of at least contended_min_nodes nodes in which members waited contended_offcore times
 * or more on a holder off its core says another process competes for the cores, and the next
 * run is cut for it: the packed products into blocks of 64 rows or 512 columns (gemm.h:
 * tg_cpu_gemm_shares), weight gradients' blocks of k into blocks of C (gemm_split_k.c), so that
 * a member held off its core holds up a small block and its partner takes the rest; and a
 * member done with its own shares takes its partner's untaken ones at once, without the steal
 * grace (which keeps a member's shares in its own core's cache while both are at work). The
 * finer cut streams op(B) more often per A panel, a price on an idle machine: hence only after
 * a contended run. Counting the waits needs the off-core probes. */

/* ---- keep_core ----
 * The node waits of a run that follows an uncontended one, on a team that pins its members one
 * per CPU, spin through the yield phase (tg_cpu_event.keep_core) instead of calling
 * sched_yield(): a yield hands the core to any other runnable task the scheduler finds
 * eligible — on an EEVDF kernel a lowest-priority process gets a whole time slice the moment
 * the partner finishes the share waited on, and the next node waits for the yielder. Pinned
 * members never share a core, so a spinning member holds up no partner; an unpinned team, or
 * a run after a contended one (a process of equal priority, where yielding pays), yields. */

/* ---- run_alone ----
 * Members that other processes keep off their cores cannot help, and a team that waits for
 * them costs its caller, bound to member 0's CPU for the run (half a CPU beside a busy process,
 * where a thread left to the scheduler among three on two cores gets two thirds or more). So
 * the team judges itself every alone_window of its runs of contended_min_nodes nodes or more:
 * when the members other than 0 ran fewer than 1/alone_share of the shares they own (idle they
 * run nearly all) while member 0 was on its CPU less than alone_cpu_num/alone_cpu_den of the
 * runs' time (member 0 with a core of its own gains nothing alone and loses the shares the
 * members still run), the runs of the next alone_ns go on the caller alone
 * (tg_cpu_team_run_alone: not bound, the members left asleep), cut into the same shares, so the
 * same bits; then the team runs and is judged again, which brings it back once the other
 * processes are gone. */

bool tg__cpu_judged_alone(int64_t owned, int64_t helped, int64_t wall_ns, int64_t cpu_ns) {
    const tg_cpu_timing *T = &tg_cpu_t;
    return helped * T->alone_share < owned &&
           cpu_ns * T->alone_cpu_den < wall_ns * T->alone_cpu_num;
}

/* ---- keep_between ----
 * A member waiting for the next run yields its core in the yield phase, and beside a
 * lowest-priority process each yield is a time slice given away (decoding's runs come every
 * ~1 ms). So the waits between runs, like a pinned team's node waits (keep_core), spin through
 * the yield phase — while every member keeps its core: beside a process of equal priority a
 * member spinning there holds a core it shares. Windows of at least keep_window_ns (closed at
 * the end of a run-alone judgement) read every member's CPU clock: a member that had less than
 * keep_cpu_num/keep_cpu_den of the window's wall time shares its CPU with a process of its own
 * priority, and the waits yield again, as they do when the runs are judged to go alone;
 * keep_retry_ns later a window keeps the cores again to see, twice as long after each such
 * window in a row (every try beside a busy process costs its window). */

tg__cpu_keep_state tg__cpu_keep_next(tg__cpu_keep_state s, bool on_core, bool alone, int64_t now) {
    if ((s.keep && !on_core) || alone) { /* a window that should not have kept them */
        const int max = tg_cpu_t.keep_backoff_max;
        const int backoff = s.fails < max ? s.fails : max;
        return (tg__cpu_keep_state){false, s.fails + 1, now + (tg_cpu_t.keep_retry_ns << backoff)};
    }
    if (s.keep) return (tg__cpu_keep_state){true, 0, s.retry_at};
    return (tg__cpu_keep_state){now >= s.retry_at, s.fails, s.retry_at}; /* time to try again */
}

static void window_start(tg_cpu_runner *r, tg_cpu_team *team, int64_t now) {
    r->window_wall0 = now;
    for (int m = 0; m < tg_cpu_team_size(team); m++)
        r->window_cpu[m] = tg_cpu_team_member_cpu_ns(team, m);
}

/* At the end of a run-alone judgement, once keep_window_ns have passed since the window
 * started, or when the runs are to go alone (the members are off their cores then). */
static void judge_waits(tg_cpu_runner *r, tg_cpu_team *team, int64_t now, bool alone) {
    const int64_t wall = now - r->window_wall0;
    if (wall < tg_cpu_t.keep_window_ns && !alone) return;
    r->window_wall0 = 0; /* the next starts anew */
    bool on_core = !alone;
    for (int m = 0; m < tg_cpu_team_size(team) && on_core; m++) {
        const int64_t cpu = tg_cpu_team_member_cpu_ns(team, m);
        on_core = cpu >= 0 && r->window_cpu[m] >= 0 &&
                  (cpu - r->window_cpu[m]) * tg_cpu_t.keep_cpu_den >= wall * tg_cpu_t.keep_cpu_num;
    }
    r->keep = tg__cpu_keep_next(r->keep, on_core, alone, now);
    tg_cpu_team_keep_core_between(
        team, tg_cpu_policy.keep_between && r->keep.keep && tg_cpu_team_pinned(team) &&
                  !atomic_load_explicit(&r->contended, memory_order_relaxed));
}

/* Judge the team on a run it made: the shares the members other than 0 own and those they
 * ran (the state words say who held each). */
static void judge_team(tg_cpu_graph_job *j, tg_cpu_team *team, int64_t wall_ns, int64_t cpu_ns) {
    tg_cpu_runner *r = j->r;
    int64_t owned = 0, helped = 0;
    for (int64_t i = 0; i < j->n; i++) {
        const int k = atomic_load_explicit(&j->nshares[i], memory_order_relaxed);
        for (int s = 0; s < k; s++) {
            const int v = atomic_load_explicit(&j->taken[i * j->shares + s], memory_order_relaxed);
            owned += tg_cpu_owner(s, k, j->nthreads) != 0;
            helped += v && (v >> 2) - 1 != 0;
        }
    }
    r->owned += owned;
    r->helped += helped;
    r->wall_ns += wall_ns;
    r->cpu_ns += cpu_ns;
    if (++r->judged < tg_cpu_t.alone_window) return;
    const int64_t now = tg_cpu_now_ns();
    const bool alone = tg__cpu_judged_alone(r->owned, r->helped, r->wall_ns, r->cpu_ns);
    r->judged = r->owned = r->helped = r->wall_ns = r->cpu_ns = 0;
    if (alone && tg_cpu_policy.run_alone)
        atomic_store_explicit(&r->alone_until, now + tg_cpu_t.alone_ns, memory_order_relaxed);
    judge_waits(r, team, now, alone);
}

/* ---- around a run ---- */

tg_cpu_run_plan tg_cpu_policies_before(tg_cpu_graph_job *j, tg_cpu_team *team) {
    tg_cpu_runner *r = j->r;
    tg_cpu_run_plan plan = {.offcore0 = atomic_load(&r->offcore), .cpu0 = -1};
    j->contended =
        tg_cpu_policy.fine_after && atomic_load_explicit(&r->contended, memory_order_relaxed);
    if (j->contended) atomic_fetch_add_explicit(&r->fine_runs, 1, memory_order_relaxed);
    const bool keep_core = tg_cpu_policy.keep_core &&
                           !atomic_load_explicit(&r->contended, memory_order_relaxed) &&
                           tg_cpu_team_pinned(team);
    atomic_init(&j->progress.keep_core, keep_core);
    if (keep_core) atomic_fetch_add_explicit(&r->kept, 1, memory_order_relaxed);
    plan.wall0 = tg_cpu_now_ns();
    plan.alone = team && plan.wall0 < atomic_load_explicit(&r->alone_until, memory_order_relaxed);
    /* a test taking every holder to be off its core tests the team's waits: never alone */
    plan.judged = team && !plan.alone && j->n >= tg_cpu_t.contended_min_nodes && !r->all_offcore &&
                  !atomic_exchange_explicit(&r->judging, true, memory_order_acquire);
    if (plan.judged && r->window_wall0 == 0) window_start(r, team, plan.wall0);
    if (plan.judged) plan.cpu0 = tg_cpu_thread_cpu_ns();
    if (plan.alone) atomic_fetch_add_explicit(&r->alone_runs, 1, memory_order_relaxed);
    return plan;
}

void tg_cpu_policies_after(tg_cpu_graph_job *j, tg_cpu_team *team, const tg_cpu_run_plan *plan) {
    tg_cpu_runner *r = j->r;
    if (!plan->alone && j->n >= tg_cpu_t.contended_min_nodes)
        atomic_store_explicit(
            &r->contended, atomic_load(&r->offcore) - plan->offcore0 >= tg_cpu_t.contended_offcore,
            memory_order_relaxed);
    if (plan->judged) {
        if (plan->cpu0 >= 0)
            judge_team(j, team, tg_cpu_now_ns() - plan->wall0, tg_cpu_thread_cpu_ns() - plan->cpu0);
        atomic_store_explicit(&r->judging, false, memory_order_release);
    }
}
