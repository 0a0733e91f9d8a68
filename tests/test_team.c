/* The CPU backend's thread team (backends/cpu/team.c): work sharing covers every index once,
 * barriers order the members, the dynamic counter hands out every task once per loop, nested
 * runs fall back to the caller, an offered job is done whole by whichever members join it
 * (and a job for everyone after offered ones still gets every member), the thread count
 * comes from the argument or the environment, and a graph run on a team of 3 propagates a
 * kernel's error and calls the gradient hook in order (the executor's side: core/exec.c).
 * The graph runner's core alone, every policy off, gives the bits of a run with them, its
 * stealing and node barriers exercised by members that join and members that never do.
 * The rule for which nodes may run together when a member runs ahead (core/hazard.c) case by
 * case, and a graph of independent branches whose runs on a team give the same bits every
 * time, within 1e-4 of one thread's. An idle team sleeps: its members use no CPU once the
 * yield phase of their wait is over, which is short in a team with more members than CPUs.
 * A member's CPU clock tells one at work from one off its core, and the runner's waits on a
 * holder off its core run ahead or sleep (lending a pinned holder the sleeper's CPU) and still
 * end with the same bits. A team whose members never join while member 0 shares its CPU goes
 * alone, with the same bits, and back to the team when the spell is over; the waits between
 * runs keep their cores or yield by the rule of keep_between. Speed is never
 * asserted. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/runner.h"
#include "backends/cpu/team.h"
#include "core/tg-impl.h"
#include "tg_check.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        tg_status st_ = (call);                                                                    \
        ck_assert_msg(st_ == TG_OK, "%s failed: %s", #call, tg_error_message());                   \
    } while (0)

START_TEST(test_share) {
    /* every index exactly once, contiguous blocks in member order, sizes differing by <= 1 */
    for (int nth = 1; nth <= 7; nth++)
        for (int64_t n = 0; n <= 50; n++)
            for (int par = 0; par < 2; par++) {
                int64_t next = 0, smin = n, smax = 0;
                for (int ith = 0; ith < nth; ith++) {
                    tg_cpu_par p = {.ith = ith, .nth = nth};
                    int64_t lo, hi;
                    tg_cpu_share(&p, n, par, &lo, &hi);
                    if (hi <= lo) continue;
                    ck_assert_int_eq(lo, next);
                    next = hi;
                    smin = hi - lo < smin ? hi - lo : smin;
                    smax = hi - lo > smax ? hi - lo : smax;
                    if (!par) ck_assert_int_eq(ith, 0);
                }
                ck_assert_int_eq(next, n);
                if (par && n >= nth) ck_assert_int_le(smax - smin, 1);
            }
}
END_TEST

enum { N_MEMBERS = 3, ROUNDS = 2000, TASKS = 1000 };

typedef struct {
    int64_t slot[N_MEMBERS];
    atomic_int hits[TASKS];
    atomic_int bad;
    atomic_int entered;
} work;

/* Rounds of: write my slot, barrier, check every slot, barrier. A missing or leaky barrier
 * lets a member read a slot from the wrong round. Then a dynamic loop of TASKS tasks. */
static void member(void *ctx, tg_cpu_par *p) {
    work *w = ctx;
    atomic_fetch_add(&w->entered, 1);
    ck_assert_int_eq(p->nth, N_MEMBERS);
    for (int64_t r = 0; r < ROUNDS; r++) {
        w->slot[p->ith] = r * N_MEMBERS + p->ith;
        tg_cpu_barrier(p);
        for (int i = 0; i < N_MEMBERS; i++)
            if (w->slot[i] != r * N_MEMBERS + i) atomic_fetch_add(&w->bad, 1);
        tg_cpu_barrier(p);
    }
    for (int64_t t = tg_cpu_next(p, 7); t < TASKS; t = tg_cpu_next(p, 7))
        for (int64_t k = t; k < t + 7 && k < TASKS; k++) atomic_fetch_add(&w->hits[k], 1);
    tg_cpu_barrier(p); /* resets the counter: a second loop hands out every task again */
    for (int64_t t = tg_cpu_next(p, 3); t < TASKS; t = tg_cpu_next(p, 3))
        for (int64_t k = t; k < t + 3 && k < TASKS; k++) atomic_fetch_add(&w->hits[k], 1);
}

START_TEST(test_barrier_and_dynamic) {
    tg_cpu_team *team = tg_cpu_team_new(N_MEMBERS);
    ck_assert_ptr_nonnull(team);
    ck_assert_int_eq(tg_cpu_team_size(team), N_MEMBERS);
    for (int run = 0; run < 3; run++) { /* the team is reused run after run */
        work *w = calloc(1, sizeof *w);
        tg_cpu_team_run(team, member, w);
        ck_assert_int_eq(atomic_load(&w->entered), N_MEMBERS);
        ck_assert_int_eq(atomic_load(&w->bad), 0);
        for (int k = 0; k < TASKS; k++) ck_assert_int_eq(atomic_load(&w->hits[k]), 2);
        free(w);
    }
    tg_cpu_team_free(team);
}
END_TEST

typedef struct {
    tg_cpu_team *team;
    atomic_int outer, inner, inner_nth;
} nest;

static void inner_fn(void *ctx, tg_cpu_par *p) {
    nest *n = ctx;
    atomic_fetch_add(&n->inner, 1);
    atomic_store(&n->inner_nth, p->nth);
}

static void outer_fn(void *ctx, tg_cpu_par *p) {
    nest *n = ctx;
    atomic_fetch_add(&n->outer, 1);
    if (p->ith == 0) tg_cpu_team_run(n->team, inner_fn, n); /* runs on member 0 alone */
}

START_TEST(test_nested_run) {
    nest n = {.team = tg_cpu_team_new(2)};
    ck_assert_ptr_nonnull(n.team);
    tg_cpu_team_run(n.team, outer_fn, &n);
    ck_assert_int_eq(atomic_load(&n.outer), 2);
    ck_assert_int_eq(atomic_load(&n.inner), 1);
    ck_assert_int_eq(atomic_load(&n.inner_nth), 1);
    tg_cpu_team_free(n.team);
    /* no team: the caller alone, with a working barrier and counter */
    n = (nest){0};
    tg_cpu_team_run(NULL, inner_fn, &n);
    ck_assert_int_eq(atomic_load(&n.inner), 1);
}
END_TEST

/* ---- offered jobs (tg_cpu_team_offer): members that join in time help, the rest are not
 * waited for, and a job for everyone after them still gets every member ---- */

enum { OFFER_TASKS = 257 };

typedef struct {
    atomic_int next;
    atomic_int hits[OFFER_TASKS];
    atomic_int members; /* members that ran fn (0 is always one) */
    atomic_int bad;
    int late_us; /* members other than 0 start this late (held off their core) */
} offer_work;

static void offer_member(void *ctx, tg_cpu_par *p) {
    offer_work *w = ctx;
    atomic_fetch_add(&w->members, 1);
    if (!tg_cpu_member_joined(p, p->ith) || !tg_cpu_member_joined(p, 0))
        atomic_fetch_add(&w->bad, 1);
    if (p->ith != 0 && w->late_us) usleep((useconds_t)w->late_us);
    for (int t; (t = atomic_fetch_add(&w->next, 1)) < OFFER_TASKS;)
        atomic_fetch_add(&w->hits[t], 1);
}

START_TEST(test_offer) {
    tg_cpu_team *team = tg_cpu_team_new(N_MEMBERS);
    ck_assert_ptr_nonnull(team);
    for (int run = 0; run < 600; run++) {
        offer_work *w = calloc(1, sizeof *w);
        w->late_us = run % 3 == 0 ? 200 : 0;
        tg_cpu_team_offer(team, offer_member, w);
        /* every task once, by member 0 alone or with whoever joined */
        for (int k = 0; k < OFFER_TASKS; k++)
            ck_assert_int_eq(atomic_load(&w->hits[k]), 1);
        ck_assert_int_ge(atomic_load(&w->members), 1);
        ck_assert_int_le(atomic_load(&w->members), N_MEMBERS);
        ck_assert_int_eq(atomic_load(&w->bad), 0);
        free(w);
        if (run % 50 == 49) { /* a job for everyone after offered ones: all members come */
            work *e = calloc(1, sizeof *e);
            tg_cpu_team_run(team, member, e);
            ck_assert_int_eq(atomic_load(&e->entered), N_MEMBERS);
            ck_assert_int_eq(atomic_load(&e->bad), 0);
            free(e);
        }
    }
    tg_cpu_team_free(team);
}
END_TEST

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nothing(void *ctx, tg_cpu_par *p) {
    (void)ctx, (void)p;
}

/* After a job, the members spin and yield for tg_cpu_t.yield_ns, then sleep: over the 300 ms
 * after that the process (1 waiting member, the main thread asleep) uses no CPU — a member
 * that kept spinning or yielding would use ~300 ms. 30 ms allows for wake-ups of the clock and
 * a slow machine's noise, not for a member that never sleeps. */
START_TEST(test_idle_team_sleeps) {
    tg_cpu_team *t = tg_cpu_team_new(2); /* not more members than CPUs: the 20 ms phase */
    ck_assert_ptr_nonnull(t);
    tg_cpu_team_run(t, nothing, NULL);
    usleep((useconds_t)(tg_cpu_t.yield_ns / 1000 + 100 * 1000));
    double c0 = seconds(CLOCK_PROCESS_CPUTIME_ID), w0 = seconds(CLOCK_MONOTONIC);
    usleep(300 * 1000);
    double used = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0, wall = seconds(CLOCK_MONOTONIC) - w0;
    ck_assert_msg(used < 0.03, "an idle team used %.0f ms of CPU in %.0f ms", used * 1e3,
                  wall * 1e3);
    /* the sleepers wake for the next job for everyone (it returns once both have run it) */
    tg_cpu_team_run(t, nothing, NULL);
    tg_cpu_team_free(t);
}
END_TEST

/* A team with more members than the CPUs the process may use ends its yield phase at 200 µs
 * (its waiting members must hand their cores to the members that have none); others at 20 ms. */
START_TEST(test_oversubscribed_team_yields_briefly) {
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    const int cpus = CPU_COUNT(&set);
    tg_cpu_team *fits = tg_cpu_team_new(cpus), *over = tg_cpu_team_new(cpus + 1);
    ck_assert(fits && over);
    ck_assert_int_eq(tg_cpu_team_yield_ns(fits), 0);
    ck_assert_int_eq(tg_cpu_team_yield_ns(over), tg_cpu_t.yield_oversub_ns);
    ck_assert_int_eq(tg_cpu_team_yield_ns(NULL), 0);
    tg_cpu_team_free(fits);
    tg_cpu_team_free(over);
}
END_TEST

START_TEST(test_thread_count) {
    const char *bad = NULL;
    unsetenv("TG_NUM_THREADS");
    unsetenv("OMP_NUM_THREADS");
    ck_assert_int_eq(tg_cpu_thread_count(5, &bad), 5);
    ck_assert_int_ge(tg_cpu_thread_count(0, &bad), 1); /* the cores */
    setenv("OMP_NUM_THREADS", "4,2", 1);                  /* OpenMP's nested list: first level */
    ck_assert_int_eq(tg_cpu_thread_count(0, &bad), 4);
    setenv("TG_NUM_THREADS", "3", 1); /* ours first */
    ck_assert_int_eq(tg_cpu_thread_count(0, &bad), 3);
    ck_assert_int_eq(tg_cpu_thread_count(2, &bad), 2); /* the argument first */
    setenv("TG_NUM_THREADS", "3x", 1);
    ck_assert_int_eq(tg_cpu_thread_count(0, &bad), -1);
    ck_assert_str_eq(bad, "TG_NUM_THREADS");
    unsetenv("TG_NUM_THREADS");
    setenv("OMP_NUM_THREADS", "0", 1);
    ck_assert_int_eq(tg_cpu_thread_count(0, &bad), -1);
    ck_assert_str_eq(bad, "OMP_NUM_THREADS");
    tg_backend *b = NULL;
    ck_assert_int_eq(tg_backend_cpu_new(0, &b), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "OMP_NUM_THREADS='0'");
    setenv("OMP_NUM_THREADS", "3", 1);
    CK(tg_backend_cpu_new(0, &b));
    ck_assert_int_eq(b->nthreads, 3);
    tg_backend_free(b);
    unsetenv("OMP_NUM_THREADS");
}
END_TEST

/* ---- a graph run on a team of 3 ---- */

static int hook_calls;
static int64_t hook_last_param = -1;

static void hook(void *ctx, const tg_store *s, int64_t param) {
    (void)ctx;
    (void)s;
    ck_assert_int_ne(param, hook_last_param); /* once per parameter */
    hook_last_param = param;
    hook_calls++;
}

START_TEST(test_graph_on_team) {
    tg_backend *b;
    CK(tg_backend_cpu_new(3, &b));
    tg_store *s;
    CK(tg_store_new(b, &s));
    enum { V = 50, D = 96, N = 400 };
    float *w = malloc(sizeof(float) * D * D); /* both tables' values: [V, D] and [D, D], V < D */
    for (int i = 0; i < D * D; i++) w[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    int64_t ws[2] = {V, D}, hs[2] = {D, D};
    CK(tg_store_add(s, "emb", 2, ws, w, true));
    CK(tg_store_add(s, "proj", 2, hs, w, true));
    int32_t ids[N], tgt[N];
    for (int i = 0; i < N; i++) {
        ids[i] = (i * 7) % V;
        tgt[i] = (i * 3) % D;
    }
    float loss[2];
    for (int rep = 0; rep < 3; rep++) {
        tg_graph *g = tg_graph_new();
        ck_assert_ptr_nonnull(g);
        int64_t is[1] = {N};
        if (rep == 2) ids[5] = V + 3; /* out of range: the embedding kernel fails on every member */
        tg_tensor *x = tg_input(g, TG_DTYPE_I32, 1, is, ids);
        tg_tensor *y = tg_input(g, TG_DTYPE_I32, 1, is, tgt);
        tg_tensor *h = tg_embedding(tg_param(g, s, "emb"), x);
        h = tg_gelu(tg_matmul(h, tg_param(g, s, "proj"), false, true));
        tg_tensor *l = tg_cross_entropy(h, y, 0.1f, -1, TG_REDUCE_MEAN);
        ck_assert_ptr_nonnull(l);
        tg_keep(l);
        CK(tg_backward(g, l));
        hook_calls = 0;
        hook_last_param = -1;
        tg_graph_set_grad_hook(g, hook, NULL);
        tg_status st = tg_graph_run(g, b);
        if (rep < 2) {
            ck_assert_msg(st == TG_OK, "run: %s", tg_error_message());
            ck_assert_int_eq(hook_calls, 2);
            loss[rep] = tg_tensor_item(l);
            ck_assert(isfinite(loss[rep]));
        } else {
            ck_assert_int_eq(st, TG_ERR_INVALID);
            tg_assert_msg_has(tg_error_message(), "embedding");
            tg_assert_msg_has(tg_error_message(), "outside [0, 50)");
        }
        tg_graph_free(g);
        CK(tg_store_zero_grad(s));
    }
    ck_assert_msg(memcmp(&loss[0], &loss[1], sizeof(float)) == 0, "two runs: %.9g vs %.9g",
                  loss[0], loss[1]);
    free(w);
    tg_store_free(s);
    tg_backend_free(b);
}
END_TEST

/* a 1-D or 2-D float tensor over buf at element off (stride {s0, 1}); no data when off < 0 */
static tg_tensor at(float *buf, int64_t off, int64_t n0, int64_t n1, int64_t s0) {
    tg_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = TG_DTYPE_F32;
    t.ndim = n1 ? 2 : 1;
    t.shape[0] = n0;
    t.shape[1] = n1;
    t.stride[0] = n1 ? s0 : 1;
    t.stride[1] = 1;
    t.data = off < 0 ? NULL : buf + off;
    return t;
}

static void reads(tg_tensor *t, tg_tensor *src) {
    t->src[t->nsrc++] = src;
}

START_TEST(test_hazard_rule) {
    float buf[200];
    /* q reads X = [0, 10), writes Q = [10, 20) */
    tg_tensor X = at(buf, 0, 10, 0, 0), Q = at(buf, 10, 10, 0, 0);
    reads(&Q, &X);
    /* disjoint: reads [30, 40), writes [40, 50) */
    tg_tensor Y = at(buf, 30, 10, 0, 0), M = at(buf, 40, 10, 0, 0);
    reads(&M, &Y);
    ck_assert(tg__nodes_independent(&M, &Q) && tg__nodes_independent(&Q, &M));
    /* read after write: reads a view inside Q */
    tg_tensor QV = at(buf, 15, 2, 0, 0), R = at(buf, 50, 2, 0, 0);
    reads(&R, &QV);
    ck_assert(!tg__nodes_independent(&R, &Q) && !tg__nodes_independent(&Q, &R));
    /* write after read: overwrites part of X (a reused block) */
    tg_tensor W = at(buf, 5, 2, 0, 0);
    reads(&W, &Y);
    ck_assert(!tg__nodes_independent(&W, &Q) && !tg__nodes_independent(&Q, &W));
    /* write after write: [18, 22) meets Q's last two elements; [20, 22) does not */
    tg_tensor W2 = at(buf, 18, 4, 0, 0), W3 = at(buf, 20, 2, 0, 0);
    ck_assert(!tg__nodes_independent(&W2, &Q));
    ck_assert(tg__nodes_independent(&W3, &Q));
    /* strided: rows at 60 and 100 of a [2, 3] view with row stride 40 reach Q2 = [100, 110) */
    tg_tensor Q2 = at(buf, 100, 10, 0, 0), S = at(buf, 60, 2, 3, 40), S1 = at(buf, 60, 1, 3, 40);
    ck_assert(!tg__nodes_independent(&S, &Q2));
    ck_assert(tg__nodes_independent(&S1, &Q2));
    /* a fused chain's tail reads what its members read: member C (no data) reads Q */
    tg_tensor C = at(buf, -1, 10, 0, 0), T = at(buf, 120, 10, 0, 0);
    reads(&C, &Q);
    reads(&T, &C);
    T.chain_prev = &C;
    ck_assert(!tg__nodes_independent(&T, &Q) && !tg__nodes_independent(&Q, &T));
    tg_tensor C2 = at(buf, -1, 10, 0, 0), T2 = at(buf, 140, 10, 0, 0);
    reads(&C2, &Y);
    reads(&T2, &C2);
    T2.chain_prev = &C2;
    ck_assert(tg__nodes_independent(&T2, &Q));
    ck_assert(tg__nodes_independent(&T2, &M));  /* both read Y: reads do not conflict */
    ck_assert(!tg__nodes_independent(&T2, &Y)); /* the chain reads what node Y writes */
    /* an empty tensor occupies nothing */
    tg_tensor E = at(buf, 10, 0, 0, 0);
    ck_assert(tg__nodes_independent(&E, &Q));
}
END_TEST

/* loss = sum(sum_b gelu(x W_b) * r) over BR independent branches, forward and backward: on a
 * team, the runner may run a branch's product while another branch's is unfinished. */
enum { BR = 6, TOK = 192, WID = 96 };

/* BR branches gelu(x·w_k) of x [tok, wid] summed, times r, summed; their gradients */
static void branches_grads_of(tg_backend *b, const float *vals, float *grads, int64_t tok,
                              int64_t wid, int br) {
    tg_store *s;
    CK(tg_store_new(b, &s));
    int64_t xs[2] = {tok, wid}, ws[2] = {wid, wid};
    CK(tg_store_add(s, "x", 2, xs, vals, true));
    CK(tg_store_add(s, "r", 2, xs, vals + 7, false));
    for (int k = 0; k < br; k++) {
        char name[16]; /* "w" and an int */
        snprintf(name, sizeof name, "w%d", k);
        CK(tg_store_add(s, name, 2, ws, vals + 100 * (k + 1), true));
    }
    tg_graph *g = tg_graph_new();
    tg_tensor *x = tg_param(g, s, "x"), *sum = NULL;
    for (int k = 0; k < br; k++) {
        char name[16]; /* "w" and an int */
        snprintf(name, sizeof name, "w%d", k);
        tg_tensor *h = tg_gelu(tg_matmul(x, tg_param(g, s, name), false, false));
        sum = sum ? tg_add(sum, h) : h;
    }
    tg_tensor *loss = tg_sum_all(tg_mul(sum, tg_param(g, s, "r")));
    CK(tg_backward(g, loss));
    CK(tg_graph_run(g, b));
    for (int k = 0, off = 0; k <= br; k++) { /* x, then w0 .. w{br-1}: ids 0, 2 .. br + 1 */
        int64_t id = k == 0 ? 0 : k + 1, n = k == 0 ? tok * wid : wid * wid;
        CK(tg_store_read_grad(s, id, grads + off, n));
        off += (int)n;
    }
    tg_graph_free(g);
    tg_store_free(s);
}

static void branches_grads(tg_backend *b, const float *vals, float *grads) {
    branches_grads_of(b, vals, grads, TOK, WID, BR);
}

START_TEST(test_team_same_bits) {
    enum { NV = TOK * WID + 100 * (BR + 1) + WID * WID, NG = TOK * WID + BR * WID * WID };
    float *vals = malloc(sizeof(float) * NV);
    for (int i = 0; i < NV; i++)
        vals[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    float *ref = malloc(sizeof(float) * NG), *one = malloc(sizeof(float) * NG),
          *got = malloc(sizeof(float) * NG);
    tg_backend *b1, *b3;
    CK(tg_backend_cpu_new(1, &b1));
    CK(tg_backend_cpu_new(3, &b3));
    branches_grads(b1, vals, one);
    branches_grads(b3, vals, ref);
    for (int i = 0; i < NG; i++) /* a team's cut differs in the last bits at most */
        ck_assert_msg(fabsf(ref[i] - one[i]) <= 1e-4f * (1.0f + fabsf(one[i])), "grad %d: %g vs %g",
                      i, ref[i], one[i]);
    for (int rep = 0; rep < 20; rep++) {
        branches_grads(b3, vals, got);
        ck_assert_msg(memcmp(got, ref, sizeof(float) * NG) == 0, "run %d differs from the first",
                      rep);
    }
    ck_assert_int_eq(tg__cpu_runner_counts(b1).run_ahead, 0);
    tg_backend_free(b1);
    tg_backend_free(b3);
    free(vals);
    free(ref);
    free(one);
    free(got);
}
END_TEST

/* The runner's core alone (every policy switched off, runner.h): a node's shares taken once
 * each, by their owners or by a member that steals them — every share of members that never
 * join (tg__cpu_members_away), whose shares member 0 takes — and the node's barrier before the
 * next: the runs give the bits of a run with every policy on, on 2 and 3 threads, run after
 * run (a share run twice, or a node begun before the one it reads was done, would change
 * them; a lost wake-up would hang here). */
START_TEST(test_runner_core_same_bits) {
    enum { NV = TOK * WID + 100 * (BR + 1) + WID * WID, NG = TOK * WID + BR * WID * WID };
    float *vals = malloc(sizeof(float) * NV);
    for (int i = 0; i < NV; i++)
        vals[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    float *ref = malloc(sizeof(float) * NG), *got = malloc(sizeof(float) * NG);
    const tg_cpu_policies all = tg_cpu_policy;
    for (int threads = 2; threads <= 3; threads++) {
        tg_backend *b;
        CK(tg_backend_cpu_new(threads, &b));
        branches_grads(b, vals, ref);
        tg_cpu_policy = (tg_cpu_policies){0};
        for (int rep = 0; rep < 20; rep++) {
            tg__cpu_members_away(b, rep % 2 == 1);
            branches_grads(b, vals, got);
            ck_assert_msg(memcmp(got, ref, sizeof(float) * NG) == 0,
                          "%d threads, run %d (members %s) differs", threads, rep,
                          rep % 2 ? "away" : "joining");
        }
        tg_cpu_policy = all;
        tg_backend_free(b);
    }
    free(vals);
    free(ref);
    free(got);
}
END_TEST

/* TG_CPU_POLICY_OFF switches off the policies it names, whole names only. */
START_TEST(test_policy_switches) {
    setenv("TG_CPU_POLICY_OFF", "offcore,keep_between,fine", 1);
    tg_cpu_policies_init();
    ck_assert(tg_cpu_policy.fine_after && tg_cpu_policy.keep_core && tg_cpu_policy.run_alone);
    ck_assert(!tg_cpu_policy.offcore && !tg_cpu_policy.keep_between);
    unsetenv("TG_CPU_POLICY_OFF");
    tg_cpu_policies_init();
    ck_assert(tg_cpu_policy.offcore && tg_cpu_policy.fine_after && tg_cpu_policy.keep_core &&
              tg_cpu_policy.run_alone && tg_cpu_policy.keep_between);
}
END_TEST

/* A member's CPU clock moves while it works and stands still while it sleeps: what tells the
 * graph runner a partner off its core from one at work. */
typedef struct {
    atomic_bool stop;
    int64_t moved, waited; /* member 1's CPU time and the wall time member 0 watched it for */
} clock_watch;

static void spin_a_while(void *ctx, tg_cpu_par *p) {
    clock_watch *cw = ctx;
    if (p->ith == 1) {
        while (!atomic_load(&cw->stop)) {
        }
        return;
    }
    /* member 0 watches member 1's clock until it has moved 10 ms (5 s at most: a loaded
     * machine gives the spinning member less than its core) */
    const int64_t c0 = tg_cpu_member_cpu_ns(p, 1), w0 = tg_cpu_now_ns();
    int64_t c = c0;
    while (c >= 0 && c - c0 < 10 * 1000 * 1000 && tg_cpu_now_ns() - w0 < 5000LL * 1000 * 1000) {
        usleep(1000);
        c = tg_cpu_member_cpu_ns(p, 1);
    }
    cw->moved = c0 < 0 || c < 0 ? -1 : c - c0;
    cw->waited = tg_cpu_now_ns() - w0;
    atomic_store(&cw->stop, true);
}

START_TEST(test_member_cpu_clock) {
    tg_cpu_team *t = tg_cpu_team_new(2);
    ck_assert_ptr_nonnull(t);
    clock_watch cw = {.moved = 0};
    tg_cpu_team_run(t, spin_a_while, &cw);
    ck_assert_msg(cw.moved >= 10 * 1000 * 1000,
                  "a spinning member's clock moved %lld ns in %lld ns", (long long)cw.moved,
                  (long long)cw.waited);
    usleep(100 * 1000); /* member 1 sleeps once the yield phase (20 ms) is over */
    tg_cpu_par p = {.team = t, .ith = 0, .nth = 2};
    const int64_t c0 = tg_cpu_member_cpu_ns(&p, 1);
    usleep(50 * 1000);
    const int64_t c1 = tg_cpu_member_cpu_ns(&p, 1);
    ck_assert_msg(c0 >= 0 && c1 - c0 < 5 * 1000 * 1000, "a sleeping member's clock moved %lld ns",
                  (long long)(c1 - c0));
    tg_cpu_par none = {.team = NULL, .ith = 0, .nth = 1};
    ck_assert_int_eq(tg_cpu_member_cpu_ns(&none, 0), -1);
    tg_cpu_team_free(t);
}
END_TEST

/* How many members a team needs for the library to pin them one per CPU: one per CPU of the
 * process's mask, if a team of that many is pinned (team.c decides: not with TG_CPU_BIND=0,
 * nor off Linux); 0 where no team is pinned. */
static int pinning_cpus(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    const int n = CPU_COUNT(&set);
    tg_cpu_team *t = tg_cpu_team_new(n);
    const bool pinned = tg_cpu_team_pinned(t);
    tg_cpu_team_free(t);
    return pinned ? n : 0;
#else
    return 0;
#endif
}

/* A member waiting on a partner off its core runs ahead — untaken shares of later independent
 * nodes, whoever owns them — or else sleeps until the node is done (runner_policy.c: offcore): with
 * every partner taken to be off its core, waits on started shares do both (the branches are
 * independent), and the runs end with the bits of a plain run (a lost wake-up would hang
 * here; a share run ahead against the hazard rule would change them). */
START_TEST(test_offcore_waits_sleep) {
    enum { NV = TOK * WID + 100 * (BR + 1) + WID * WID, NG = TOK * WID + BR * WID * WID };
    float *vals = malloc(sizeof(float) * NV);
    for (int i = 0; i < NV; i++)
        vals[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    float *ref = malloc(sizeof(float) * NG), *got = malloc(sizeof(float) * NG);
    for (int threads = 2; threads <= 3; threads++) {
        tg_backend *plain, *sleepy;
        CK(tg_backend_cpu_new(threads, &plain));
        CK(tg_backend_cpu_new(threads, &sleepy));
        tg__cpu_all_offcore(sleepy, true);
        branches_grads(plain, vals, ref);
        /* how many such waits there are depends on the members' timing: runs until 10 */
        int rep = 0;
        for (; rep < 6 || (rep < 200 && tg__cpu_runner_counts(sleepy).waits_offcore < 10); rep++) {
            branches_grads(sleepy, vals, got);
            ck_assert_msg(memcmp(got, ref, sizeof(float) * NG) == 0, "%d threads, run %d differs",
                          threads, rep);
        }
        /* a team with one member per CPU pins them: a sleeper lends a holder other than member
         * 0 its CPU (runs on, to see one), and the holder pins itself back at its next node */
        const bool pinned = threads == pinning_cpus();
        for (; pinned && rep < 400 && tg__cpu_runner_counts(sleepy).waits_lent == 0; rep++) {
            branches_grads(sleepy, vals, got);
            ck_assert_msg(memcmp(got, ref, sizeof(float) * NG) == 0, "%d threads, run %d differs",
                          threads, rep);
        }
        const int64_t waits = tg__cpu_runner_counts(sleepy).waits_offcore, slept = tg__cpu_runner_counts(sleepy).waits_slept,
                      lent = tg__cpu_runner_counts(sleepy).waits_lent;
        printf("%d threads, %d runs: %lld waits on a holder off its core, %lld ran ahead, %lld "
               "slept, %lld of them lending the holder the sleeper's CPU\n",
               threads, rep, (long long)waits, (long long)(waits - slept), (long long)slept,
               (long long)lent);
        ck_assert_int_ge(waits, 10);
        ck_assert_int_gt(waits - slept, 0);
        ck_assert_int_le(lent, slept);
        if (pinned) ck_assert_int_gt(lent, 0);
        tg_backend_free(plain);
        tg_backend_free(sleepy);
    }
    free(vals);
    free(ref);
    free(got);
}
END_TEST

/* After a graph run whose members waited on partners off their cores (here every such wait,
 * tg__cpu_all_offcore), the next runs cut the products on the packed path into blocks of 64
 * rows (runner_policy.c: fine_after), which share their packed op(B): the same bits as a plain
 * run. */
START_TEST(test_contended_fine_cut) {
    enum { T = 640, W = 128, B = 10, NV = T * W + 100 * (B + 1) + W * W, NG = T * W + B * W * W };
    float *vals = malloc(sizeof(float) * NV);
    for (int i = 0; i < NV; i++)
        vals[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    float *ref = malloc(sizeof(float) * NG), *got = malloc(sizeof(float) * NG);
    tg_backend *plain, *busy;
    CK(tg_backend_cpu_new(2, &plain));
    CK(tg_backend_cpu_new(2, &busy));
    tg__cpu_all_offcore(busy, true);
    branches_grads_of(plain, vals, ref, T, W, B);
    int rep = 0;
    for (; rep < 6 || (rep < 100 && tg__cpu_runner_counts(busy).fine_runs < 3); rep++) {
        branches_grads_of(busy, vals, got, T, W, B);
        ck_assert_msg(memcmp(got, ref, sizeof(float) * NG) == 0, "run %d (%lld cut fine) differs",
                      rep, (long long)tg__cpu_runner_counts(busy).fine_runs);
    }
    ck_assert_int_ge(tg__cpu_runner_counts(busy).fine_runs, 3);
    tg_backend_free(plain);
    tg_backend_free(busy);
    free(vals);
    free(ref);
    free(got);
}
END_TEST

/* A graph run's waits keep the core (spin through the yield phase instead of yielding:
 * runner_policy.c, keep_core) on a team pinned one member per CPU after an uncontended run; not in a run that
 * follows a contended one (here every wait's holder taken to be off its core: those runs are
 * cut fine), nor on a team with more members than CPUs, nor with TG_CPU_BIND=0. The bits are
 * a plain run's either way. */
START_TEST(test_waits_keep_core) {
    const int n = pinning_cpus();
    if (n < 2) return;
    enum { NV = TOK * WID + 100 * (BR + 1) + WID * WID, NG = TOK * WID + BR * WID * WID };
    float *vals = malloc(sizeof(float) * NV);
    for (int i = 0; i < NV; i++)
        vals[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    float *ref = malloc(sizeof(float) * NG), *got = malloc(sizeof(float) * NG);
    tg_backend *b;
    CK(tg_backend_cpu_new(n, &b));
    branches_grads(b, vals, ref);
    /* each graph run follows a contended run (cut fine, yielding) or an uncontended one
     * (keeping its core), never both: the runs of a call, counted by either */
    const int64_t runs = tg__cpu_runner_counts(b).runs_keeping_core + tg__cpu_runner_counts(b).fine_runs;
    ck_assert_int_gt(runs, 0);
    /* idle, runs keep their core (on a loaded machine some may follow contended ones) */
    for (int rep = 0; rep < 50 && tg__cpu_runner_counts(b).runs_keeping_core == 0; rep++)
        branches_grads(b, vals, got);
    ck_assert_int_gt(tg__cpu_runner_counts(b).runs_keeping_core, 0);
    /* every wait's holder taken to be off its core: runs follow contended ones */
    tg__cpu_all_offcore(b, true);
    for (int rep = 0; rep < 6 || (rep < 100 && tg__cpu_runner_counts(b).fine_runs < 3); rep++) {
        const int64_t kept0 = tg__cpu_runner_counts(b).runs_keeping_core, fine0 = tg__cpu_runner_counts(b).fine_runs;
        branches_grads(b, vals, got);
        ck_assert(memcmp(got, ref, sizeof(float) * NG) == 0);
        ck_assert_int_eq(tg__cpu_runner_counts(b).runs_keeping_core - kept0 + tg__cpu_runner_counts(b).fine_runs - fine0, runs);
    }
    ck_assert_int_ge(tg__cpu_runner_counts(b).fine_runs, 3);
    tg_backend_free(b);
    /* unpinned teams keep yielding */
    for (int mode = 0; mode < 2; mode++) {
        if (mode == 1) setenv("TG_CPU_BIND", "0", 1);
        CK(tg_backend_cpu_new(mode == 0 ? n + 1 : n, &b));
        branches_grads(b, vals, got);
        ck_assert(memcmp(got, ref, sizeof(float) * NG) == 0);
        ck_assert_int_eq(tg__cpu_runner_counts(b).runs_keeping_core, 0);
        tg_backend_free(b);
        unsetenv("TG_CPU_BIND");
    }
    free(vals);
    free(ref);
    free(got);
}
END_TEST

#if defined(__linux__)
/* Each member's CPU mask during a job: one CPU (pinned) or the whole process's. */
typedef struct {
    int ncpu[8], first[8];
} masks;

static void read_masks(void *ctx, tg_cpu_par *p) {
    masks *m = ctx;
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    m->ncpu[p->ith] = CPU_COUNT(&set);
    for (int c = CPU_SETSIZE - 1; c >= 0; c--)
        if (CPU_ISSET(c, &set)) m->first[p->ith] = c;
}
#endif

/* A team with one member per usable CPU pins member i to the i-th of them during its jobs, the
 * caller's own mask restored after (and a caller whose mask leaves out member 0's CPU is left
 * alone; for a short offered job, tg_cpu_team_offer_short, the caller is bound only when it is
 * not on member 0's CPU already; a caller the program pinned there stays pinned); not with
 * TG_CPU_BIND=0, nor a team of more members. */
START_TEST(test_members_pinned) {
#if defined(__linux__)
    cpu_set_t all, after;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    const int n = CPU_COUNT(&all);
    if (n < 2 || n > 7) return; /* the masks above hold 8 members; a single CPU has no team */
    int cpus[8], k = 0;
    for (int c = 0; c < CPU_SETSIZE && k < n; c++)
        if (CPU_ISSET(c, &all)) cpus[k++] = c;
    /* the modes set TG_CPU_BIND themselves: a value from outside (TG_CPU_BIND=0 in the
     * environment) would leave mode 0 unpinned; it is restored at the end */
    const char *outside = getenv("TG_CPU_BIND");
    char *saved = outside ? strdup(outside) : NULL;
    unsetenv("TG_CPU_BIND");
    for (int mode = 0; mode < 3; mode++) { /* pinned; TG_CPU_BIND=0; one member too many */
        if (mode == 1) setenv("TG_CPU_BIND", "0", 1);
        tg_cpu_team *t = tg_cpu_team_new(mode == 2 ? n + 1 : n);
        ck_assert_ptr_nonnull(t);
        for (int job = 0; job < 3; job++) { /* run, offer, short offer (members may miss one) */
            masks m;
            memset(&m, 0, sizeof m);
            if (job == 0)
                tg_cpu_team_run(t, read_masks, &m);
            else if (job == 1)
                tg_cpu_team_offer(t, read_masks, &m);
            else
                tg_cpu_team_offer_short(t, read_masks, &m);
            for (int i = 0; i < (mode == 2 ? n + 1 : n); i++) {
                if (job > 0 && i > 0 && !m.ncpu[i]) continue; /* did not join the offer */
                if (mode == 0 && job == 2 && i == 0) { /* bound only if it was elsewhere */
                    ck_assert_msg(m.ncpu[0] == n || (m.ncpu[0] == 1 && m.first[0] == cpus[0]),
                                  "a short job bound the caller to %d CPUs from %d", m.ncpu[0],
                                  m.first[0]);
                } else if (mode == 0) {
                    ck_assert_msg(m.ncpu[i] == 1 && m.first[i] == cpus[i],
                                  "member %d: %d CPUs from %d, not CPU %d", i, m.ncpu[i],
                                  m.first[i], cpus[i]);
                } else {
                    ck_assert_int_eq(m.ncpu[i], n);
                }
            }
            ck_assert_int_eq(sched_getaffinity(0, sizeof after, &after), 0);
            ck_assert_msg(CPU_EQUAL(&all, &after), "the caller's mask is not restored");
        }
        if (mode == 0) { /* a caller placed elsewhere by the program stays where it was put */
            cpu_set_t last;
            CPU_ZERO(&last);
            CPU_SET(cpus[n - 1], &last);
            ck_assert_int_eq(sched_setaffinity(0, sizeof last, &last), 0);
            masks m;
            memset(&m, 0, sizeof m);
            tg_cpu_team_run(t, read_masks, &m);
            ck_assert_msg(m.ncpu[0] == 1 && m.first[0] == cpus[n - 1],
                          "the caller was moved to CPU %d", m.first[0]);
            ck_assert_int_eq(m.first[1], cpus[1]);
            /* and one the program put on member 0's CPU stays there (nothing set or restored) */
            CPU_ZERO(&last);
            CPU_SET(cpus[0], &last);
            ck_assert_int_eq(sched_setaffinity(0, sizeof last, &last), 0);
            memset(&m, 0, sizeof m);
            tg_cpu_team_run(t, read_masks, &m);
            ck_assert_msg(m.ncpu[0] == 1 && m.first[0] == cpus[0] && m.first[1] == cpus[1],
                          "caller on CPU %d, member 1 on CPU %d", m.first[0], m.first[1]);
            ck_assert_int_eq(sched_getaffinity(0, sizeof after, &after), 0);
            ck_assert_msg(CPU_EQUAL(&last, &after), "the caller's own pinning was undone");
            ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
        }
        tg_cpu_team_free(t);
        unsetenv("TG_CPU_BIND");
    }
    if (saved) setenv("TG_CPU_BIND", saved, 1);
    free(saved);
#endif
}
END_TEST

/* A member lent every CPU of its team (tg_cpu_team_lend: a holder off its core, whose partner
 * is about to sleep) runs with the whole team's mask until it pins itself again
 * (tg_cpu_team_repin: the graph runner calls it at each node, a member at each job it joins);
 * member 0 — the caller, whose mask is the program's — is never lent, nor is a member of a team
 * that does not pin. */
typedef struct {
    masks before, after;
    bool lent, again;
} lend_masks;

/* once every member has joined, member 0 lends the last member; every member reads its mask,
 * pins itself back if it was lent, and reads it again */
static void lend_in_job(void *ctx, tg_cpu_par *p) {
    lend_masks *m = ctx;
    tg_cpu_barrier(p); /* every member has joined (and pinned itself back if it was lent) */
    if (p->ith == 0) {
        m->lent = tg_cpu_team_lend(p->team, p->nth - 1);
        m->again = tg_cpu_team_lend(p->team, p->nth - 1); /* already lent: no */
    }
    tg_cpu_barrier(p);
    read_masks(&m->before, p);
    tg_cpu_team_repin(p);
    read_masks(&m->after, p);
}

START_TEST(test_member_lent) {
#if defined(__linux__)
    cpu_set_t all;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    const int n = pinning_cpus(); /* 0 with TG_CPU_BIND=0: nothing is pinned, nothing lent */
    if (n < 2 || n > 7) return; /* as test_members_pinned */
    int cpus[8], k = 0;
    for (int c = 0; c < CPU_SETSIZE && k < n; c++)
        if (CPU_ISSET(c, &all)) cpus[k++] = c;
    tg_cpu_team *t = tg_cpu_team_new(n);
    ck_assert_ptr_nonnull(t);
    masks started; /* a job for everyone: every member has started and pinned itself */
    tg_cpu_team_run(t, read_masks, &started);
    ck_assert(!tg_cpu_team_lend(t, 0));
    ck_assert(!tg_cpu_team_lend(t, n));
    for (int round = 0; round < 2; round++) { /* lent again once pinned back */
        lend_masks m;
        memset(&m, 0, sizeof m);
        tg_cpu_team_run(t, lend_in_job, &m);
        ck_assert(m.lent && !m.again);
        for (int i = 0; i < n; i++) {
            const int want_before = i == n - 1 ? n : 1;
            ck_assert_msg(m.before.ncpu[i] == want_before && m.after.ncpu[i] == 1 &&
                              m.after.first[i] == cpus[i],
                          "round %d member %d: %d CPUs, then %d from CPU %d (its CPU %d)", round, i,
                          m.before.ncpu[i], m.after.ncpu[i], m.after.first[i], cpus[i]);
        }
    }
    /* lent between jobs: pinned back as it joins the next one */
    ck_assert(tg_cpu_team_lend(t, n - 1));
    masks m;
    memset(&m, 0, sizeof m);
    tg_cpu_team_run(t, read_masks, &m);
    ck_assert_msg(m.ncpu[n - 1] == 1 && m.first[n - 1] == cpus[n - 1],
                  "member %d joined with %d CPUs from %d", n - 1, m.ncpu[n - 1], m.first[n - 1]);
    tg_cpu_team_free(t);
    /* a team that does not pin: one member too many, or TG_CPU_BIND=0 */
    t = tg_cpu_team_new(n + 1);
    ck_assert_ptr_nonnull(t);
    ck_assert(!tg_cpu_team_lend(t, 1));
    tg_cpu_team_free(t);
    setenv("TG_CPU_BIND", "0", 1);
    t = tg_cpu_team_new(n);
    ck_assert_ptr_nonnull(t);
    ck_assert(!tg_cpu_team_lend(t, 1));
    tg_cpu_team_free(t);
    unsetenv("TG_CPU_BIND");
#endif
}
END_TEST

/* run_alone (runner_policy.c): the rule — members other than 0 that ran under a fifth of the shares they
 * own, and member 0 on its CPU under three quarters of the time, say go alone; either alone
 * does not. */
START_TEST(test_run_alone_rule) {
    ck_assert(tg__cpu_judged_alone(100, 6, 1000, 500)); /* beside two busy processes */
    ck_assert(tg__cpu_judged_alone(100, 19, 1000, 740));
    ck_assert(!tg__cpu_judged_alone(100, 20, 1000, 500)); /* the members help */
    ck_assert(!tg__cpu_judged_alone(100, 6, 1000, 750));  /* member 0 has a core of its own */
    ck_assert(!tg__cpu_judged_alone(100, 95, 1000, 1000));
    ck_assert(!tg__cpu_judged_alone(0, 0, 1000, 0)); /* nothing owned: nothing to judge */
}
END_TEST

/* keep_between (runner_policy.c): the waits between runs keep their cores from the first window on; a
 * window in which a member was off its core, or whose runs go alone, makes them yield, and the
 * next try comes 1 s later, then 2, 4, 8 and 16 s after each such window in a row; a window that
 * kept the cores rightly starts the count again. */
START_TEST(test_keep_between_rule) {
    const int64_t s1 = 1000000000;
    tg__cpu_keep_state k = {0};
    k = tg__cpu_keep_next(k, false, false, 5); /* yielding: time to try */
    ck_assert(k.keep);
    k = tg__cpu_keep_next(k, true, false, 10); /* kept, rightly */
    ck_assert(k.keep && k.fails == 0);
    for (int i = 0; i < 6; i++) {
        const int64_t now = 100 * s1 * (i + 1), wait = s1 << (i < 4 ? i : 4);
        k = tg__cpu_keep_next(k, false, i == 2, now); /* a member off its core, or alone */
        ck_assert(!k.keep && k.fails == i + 1 && k.retry_at == now + wait);
        k = tg__cpu_keep_next(k, true, false, now + wait - 1); /* too soon */
        ck_assert(!k.keep);
        k = tg__cpu_keep_next(k, true, false, now + wait);
        ck_assert(k.keep && k.fails == i + 1);
    }
    k = tg__cpu_keep_next(k, true, false, 1000 * s1);
    ck_assert(k.keep && k.fails == 0);
    k = tg__cpu_keep_next(k, true, true, 1001 * s1); /* runs going alone, members on their cores */
    ck_assert(!k.keep && k.fails == 1 && k.retry_at == 1002 * s1);
}
END_TEST

#if defined(__linux__)
static void *spin_until(void *arg) {
    atomic_bool *stop = arg;
    while (!atomic_load_explicit(stop, memory_order_relaxed))
        ;
    return NULL;
}

/* This thread and a busy thread on one CPU: the original mask into *saved. */
static pthread_t share_my_cpu(cpu_set_t *saved, atomic_bool *stop) {
    ck_assert_int_eq(sched_getaffinity(0, sizeof *saved, saved), 0);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setaffinity_np(&attr, sizeof one, &one);
    pthread_t busy;
    atomic_store(stop, false);
    ck_assert_int_eq(pthread_create(&busy, &attr, spin_until, stop), 0);
    pthread_attr_destroy(&attr);
    return busy;
}
#endif

/* Members that never join (tg__cpu_members_away) while member 0 shares its CPU with a busy
 * thread: the team's runs are judged and the next ones go on member 0 alone, with the bits of a
 * team's runs; once the spell is over (ALONE_NS) a run goes to the team again. */
START_TEST(test_run_alone) {
#if defined(__linux__)
    enum { NV = TOK * WID + 100 * (BR + 1) + WID * WID, NG = TOK * WID + BR * WID * WID };
    float *vals = malloc(sizeof(float) * NV);
    for (int i = 0; i < NV; i++)
        vals[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    float *ref = malloc(sizeof(float) * NG), *got = malloc(sizeof(float) * NG);
    tg_backend *plain, *b;
    CK(tg_backend_cpu_new(2, &plain));
    CK(tg_backend_cpu_new(2, &b));
    branches_grads(plain, vals, ref);
    cpu_set_t saved;
    atomic_bool stop;
    pthread_t busy = share_my_cpu(&saved, &stop);
    tg__cpu_members_away(b, true);
    int rep = 0;
    for (; rep < 400 && tg__cpu_runner_counts(b).runs_alone < 3; rep++) {
        branches_grads(b, vals, got);
        ck_assert_msg(memcmp(got, ref, sizeof(float) * NG) == 0, "run %d (%lld alone) differs", rep,
                      (long long)tg__cpu_runner_counts(b).runs_alone);
    }
    atomic_store(&stop, true);
    pthread_join(busy, NULL);
    ck_assert_int_eq(sched_setaffinity(0, sizeof saved, &saved), 0);
    printf("%d runs, %lld of them alone\n", rep, (long long)tg__cpu_runner_counts(b).runs_alone);
    ck_assert_int_ge(tg__cpu_runner_counts(b).runs_alone, 3);
    /* runs that go alone: the waits between runs yield (keep_between) */
    ck_assert(!tg__cpu_keeps_core_between(b));
    /* the spell ends: within a second a run is made by the team, not alone */
    tg__cpu_members_away(b, false);
    bool team_ran = false;
    for (rep = 0; rep < 100 && !team_ran; rep++) {
        const int64_t alone = tg__cpu_runner_counts(b).runs_alone;
        branches_grads(b, vals, got);
        ck_assert(memcmp(got, ref, sizeof(float) * NG) == 0);
        team_ran = tg__cpu_runner_counts(b).runs_alone == alone;
        if (!team_ran) nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    ck_assert(team_ran);
    tg_backend_free(plain);
    tg_backend_free(b);
    free(vals);
    free(ref);
    free(got);
#endif
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("team");
    TCase *tc = tcase_create("team");
    tcase_add_test(tc, test_share);
    tcase_add_test(tc, test_barrier_and_dynamic);
    tcase_add_test(tc, test_nested_run);
    tcase_add_test(tc, test_offer);
    tcase_add_test(tc, test_idle_team_sleeps);
    tcase_add_test(tc, test_oversubscribed_team_yields_briefly);
    tcase_add_test(tc, test_thread_count);
    tcase_add_test(tc, test_graph_on_team);
    tcase_add_test(tc, test_hazard_rule);
    tcase_add_test(tc, test_team_same_bits);
    tcase_add_test(tc, test_runner_core_same_bits);
    tcase_add_test(tc, test_policy_switches);
    tcase_add_test(tc, test_member_cpu_clock);
    tcase_add_test(tc, test_offcore_waits_sleep);
    tcase_add_test(tc, test_contended_fine_cut);
    tcase_add_test(tc, test_waits_keep_core);
    tcase_add_test(tc, test_members_pinned);
    tcase_add_test(tc, test_member_lent);
    tcase_add_test(tc, test_run_alone_rule);
    tcase_add_test(tc, test_run_alone);
    tcase_add_test(tc, test_keep_between_rule);
    suite_add_tcase(s, tc);
    return s;
}
