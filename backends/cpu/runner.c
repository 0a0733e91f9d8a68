/* The CPU backend's graph runner: one graph run over the thread team (runner.h says how the
 * work is cut and shared). A member at node i:
 *
 *   1. runs its own shares of node i (take: a compare-and-swap on the share's state word, so
 *      that each share runs once whoever gets to it);
 *   2. runs the shares of members that have not joined the run — asleep, or held off their
 *      core by another process — which nobody else would take before the steal grace;
 *   3. waits until every share of node i is done: the node's barrier. A share still untaken
 *      after steal_ns of waiting has a late owner, and the waiting member takes it (from the
 *      end: a late owner works through its shares from the start); with every share taken, the
 *      wait is the team's spin-yield-sleep wait (team.h: tg_cpu_event_wait) on "node i done".
 *
 * So on an idle machine each member does its own shares, as a fixed split would, while a member
 * that the machine preempts holds up only a share it has started. The run is offered to the
 * team (team.h: tg_cpu_team_offer): it ends when member 0 is through the node list and every
 * member that joined has left. The first failing node is recorded with its error message (each
 * thread's message is its own); once it is done every member sees it and stops.
 *
 * The contention policies (runner_policy.c) hook in at step 3 (the off-core probes inside the
 * wait) and around the run (its cut, its waits, whether it goes alone).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/runner.h"

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

static void fail(tg_cpu_graph_job *j, int64_t i, tg_status st) {
    pthread_mutex_lock(&j->mu);
    if (i < atomic_load(&j->fail_at)) {
        j->st = st;
        snprintf(j->msg, sizeof j->msg, "%s", tg_error_message());
        atomic_store(&j->fail_at, i);
    }
    pthread_mutex_unlock(&j->mu);
}

/* Shares of node t: one per member; fine_shares per member for a big node that is not a
 * product (more than fine_min output values, so a share keeps thousands; a reduced
 * cross-entropy, whose one value sums rows × vocabulary), so that a member joining late still
 * finds shares of it to take; the products as the GEMM cuts them (gemm.h: tg_cpu_gemm_shares;
 * finer after a contended run). Every kernel's share computes its own outputs whole, so the
 * results do not depend on the cut — except a weight gradient cut along k, which
 * tg_cpu_gemm_shares cuts into nthreads shares whatever else it does. */
static int shares_of(const tg_cpu_graph_job *j, const tg_tensor *t) {
    if (j->shares == 1) return 1;
    if (t->op == TG_OP_CROSS_ENTROPY) return j->shares;
    if (t->op == TG_OP_MATMUL)
        return tg__cpu_matmul_shares(t, j->nthreads, j->shares, j->contended);
    return tg_tensor_numel(t) <= tg_cpu_t.fine_min ? j->nthreads : j->shares;
}

/* Computed once per run (a product's builds its plan; the run-ahead asks again and again).
 * Members may both compute it: the value is the same. */
int tg_cpu_node_shares(tg_cpu_graph_job *j, int64_t i) {
    int k = atomic_load_explicit(&j->nshares[i], memory_order_relaxed);
    if (!k) {
        k = shares_of(j, j->nodes[i]);
        atomic_store_explicit(&j->nshares[i], k, memory_order_relaxed);
    }
    return k;
}

bool tg_cpu_node_finished(tg_cpu_graph_job *j, int64_t i) {
    return atomic_load_explicit(&j->done[i], memory_order_acquire) >= tg_cpu_node_shares(j, i);
}

/* Member m takes share c of node i: whether it got it. */
bool tg_cpu_take(tg_cpu_graph_job *j, int64_t i, int c, int m) {
    int untaken = TG_SHARE_UNTAKEN;
    if (!atomic_compare_exchange_strong_explicit(&j->taken[i * j->shares + c], &untaken,
                                                 (m + 1) << 2 | TG_SHARE_TAKEN,
                                                 memory_order_relaxed, memory_order_relaxed))
        return false;
    atomic_fetch_add_explicit(&j->claimed[i], 1, memory_order_relaxed);
    return true;
}

/* The work node i's shares did once for all, given back once the last share is done (or the
 * run ends: a failed run leaves nodes unfinished). */
static void release_shared(tg_cpu_graph_job *j, int64_t i) {
    tg_cpu_shared *s = atomic_exchange_explicit(&j->shared[i], NULL, memory_order_acq_rel);
    if (s) s->release(s);
}

/* Share c of node i's k, taken by the caller. The acq_rel count of done shares orders each
 * share's writes before the wait of whoever sees the node done. */
void tg_cpu_run_share(tg_cpu_graph_job *j, int64_t i, int c, int k) {
    tg_tensor *t = j->nodes[i];
    tg_cpu_par share = {
        .team = NULL, .ith = c, .nth = k, .shared = &j->shared[i], .team_size = j->nthreads};
    if (t->flags & TG_TF_INPUT) {
        copy_in_share(&share, t);
    } else {
        tg_status st = tg__cpu_kernels[t->op](&share, t);
        if (st) fail(j, i, st);
    }
    atomic_fetch_or_explicit(&j->taken[i * j->shares + c], TG_SHARE_DONE, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&j->done[i], 1, memory_order_acq_rel) + 1 == k) {
        release_shared(j, i);
        tg_cpu_event_signal(&j->progress);
    }
}

static bool node_done(const tg_cpu_node_wait *w) {
    return atomic_load_explicit(&w->j->done[w->i], memory_order_acquire) >= w->k;
}

bool tg_cpu_node_wait_done(void *w) {
    return node_done(w);
}

/* Stop waiting: the node is done, a share is untaken past the grace, or a probe is due. */
static bool done_or_late(void *ctx) {
    const tg_cpu_node_wait *w = ctx;
    if (node_done(w)) return true;
    const bool untaken = atomic_load_explicit(&w->j->claimed[w->i], memory_order_relaxed) < w->k;
    return tg_cpu_now_ns() >= (untaken ? w->steal_at : w->probe_at);
}

/* Member p at node i, its k shares: steps 1 to 3 of the file's header. */
static void run_node(tg_cpu_graph_job *j, tg_cpu_par *p, int64_t i, int k) {
    for (int c = 0; c < k; c++)
        if (tg_cpu_owner(c, k, p->nth) == p->ith && tg_cpu_take(j, i, c, p->ith))
            tg_cpu_run_share(j, i, c, k);
    for (int c = k - 1; c >= 0; c--)
        if (!tg_cpu_member_joined(p, tg_cpu_owner(c, k, p->nth)) && tg_cpu_take(j, i, c, p->ith))
            tg_cpu_run_share(j, i, c, k);
    const int64_t start = tg_cpu_now_ns();
    tg_cpu_node_wait w = {.j = j,
                          .i = i,
                          .k = k,
                          .start = start,
                          .steal_at = start + (j->contended ? 0 : tg_cpu_t.steal_ns),
                          .probe_at = INT64_MAX,
                          .probe_m = -1};
    if (tg_cpu_policy.offcore) w.probe_at = start + (j->r->all_offcore ? 0 : tg_cpu_t.probe_ns / 2);
    while (!node_done(&w)) {
        tg_cpu_event_wait(&j->progress, done_or_late, &w);
        for (int c = k - 1; c >= 0 && atomic_load(&j->claimed[i]) < k; c--)
            if (tg_cpu_take(j, i, c, p->ith)) tg_cpu_run_share(j, i, c, k);
        if (atomic_load(&j->claimed[i]) == k && !node_done(&w)) tg_cpu_offcore_probe(j, p, &w);
    }
}

/* Every member's part of the run (tg_cpu_team_offer's job). */
static void graph_member(void *ctx, tg_cpu_par *p) {
    tg_cpu_graph_job *j = ctx;
    for (int64_t i = 0; i < j->n; i++) {
        tg_cpu_team_repin(p); /* lent while off its core (off-core policy): its CPU again */
        if (!(j->nodes[i]->flags & TG_TF_FUSED)) {
            run_node(j, p, i, tg_cpu_node_shares(j, i));
            if (atomic_load(&j->fail_at) <= i) return;
        }
        if (p->ith == 0 && j->after) j->after(j->ctx, i);
    }
}

tg_status tg_cpu_runner_run(tg_cpu_runner *r, tg_cpu_team *team, int nthreads,
                            tg_tensor *const *nodes, int64_t n, void (*after)(void *ctx, int64_t i),
                            void *ctx, int64_t *failed) {
    tg_cpu_graph_job job = {.nodes = nodes, .n = n, .after = after, .ctx = ctx, .r = r};
    tg_cpu_graph_job *j = &job;
    j->nthreads = nthreads;
    j->shares = nthreads > 1 ? nthreads * tg_cpu_t.fine_shares : 1;
    j->claimed = calloc((size_t)(3 * n + 1), sizeof *j->claimed);
    j->taken = calloc((size_t)(n * j->shares + 1), sizeof *j->taken);
    j->shared = calloc((size_t)(n + 1), sizeof *j->shared);
    if (!j->claimed || !j->taken || !j->shared) {
        free((void *)j->claimed);
        free((void *)j->taken);
        free((void *)j->shared);
        return tg_error_set(TG_ERR_NOMEM, "cpu backend: out of memory");
    }
    j->done = j->claimed + n;
    j->nshares = j->done + n;
    atomic_init(&j->fail_at, n);
    pthread_mutex_init(&j->mu, NULL);
    j->progress.yield_ns = tg_cpu_team_yield_ns(team);
    const tg_cpu_run_plan plan = tg_cpu_policies_before(j, team);
    if (plan.alone)
        tg_cpu_team_run_alone(team, graph_member, j);
    else if (n >= tg_cpu_t.short_run_nodes)
        tg_cpu_team_offer(team, graph_member, j);
    else
        tg_cpu_team_offer_short(team, graph_member, j);
    tg_cpu_policies_after(j, team, &plan);
    for (int64_t i = 0; i < n; i++)
        release_shared(j, i);
    pthread_mutex_destroy(&j->mu);
    free((void *)j->claimed);
    free((void *)j->taken);
    free((void *)j->shared);
    int64_t at = atomic_load(&j->fail_at);
    if (at == n) return TG_OK;
    if (failed) *failed = at;
    return tg_error_set(j->st, "%s", j->msg);
}
