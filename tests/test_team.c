/* The CPU backend's thread team (backends/cpu/team.c): work sharing covers every index once,
 * barriers order the members, the dynamic counter hands out every task once per loop, nested
 * runs fall back to the caller, an offered job is done whole by whichever members join it
 * (and a job for everyone after offered ones still gets every member), the thread count
 * comes from the argument or the environment, and a graph run on a team of 3 propagates a
 * kernel's error and calls the gradient hook in order (the executor's side: core/exec.c).
 * Timing is never asserted. */
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

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

Suite *tg_test_suite(void) {
    Suite *s = suite_create("team");
    TCase *tc = tcase_create("team");
    tcase_add_test(tc, test_share);
    tcase_add_test(tc, test_barrier_and_dynamic);
    tcase_add_test(tc, test_nested_run);
    tcase_add_test(tc, test_offer);
    tcase_add_test(tc, test_thread_count);
    tcase_add_test(tc, test_graph_on_team);
    suite_add_tcase(s, tc);
    return s;
}
