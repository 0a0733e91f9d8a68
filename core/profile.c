/* TG_PROFILE: the time of every node of a graph run, by op and, for the matrix products, by
 * shape (tg_profile_report prints both) — where a step's time goes, without an external
 * profiler. A node's time runs from the previous node's completion to its own, as the calling
 * thread sees them (core/exec.c calls tg__profile_node in order). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend-helpers.h"
#include "core/tg-impl.h"

/* One lock for the counts: the replicas of `tg train --replicas N` run graphs in threads side by
 * side, each calling tg__profile_node. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double op_sec[TG_OP_COUNT];
static int64_t op_calls[TG_OP_COUNT];

/* Products by M, N, K, batch count and transposes; shapes past PROF_SHAPES are counted in their
 * op's line only. */
enum { PROF_SHAPES = 128 };
typedef struct {
    int64_t m, n, k, batch;
    bool ta, tb;
    double sec;
    int64_t calls;
} mm_shape;
static mm_shape shapes[PROF_SHAPES];
static int nshapes;

/* read once; atomic, since graph runs on several threads ask at once */
bool tg__profile_on(void) {
    static atomic_int on = -1;
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) atomic_store_explicit(&on, v = getenv("TG_PROFILE") != NULL, memory_order_relaxed);
    return v > 0;
}

static void add_shape(const tg_tensor *t, double sec) {
    tg_mm_plan p;
    tg__geom_mm_plan(t, &p);
    const int64_t batch = p.M * p.N > 0 ? tg_tensor_numel(t) / (p.M * p.N) : 0;
    int i = 0;
    while (i < nshapes &&
           !(shapes[i].m == p.M && shapes[i].n == p.N && shapes[i].k == p.K &&
             shapes[i].batch == batch && shapes[i].ta == p.a.trans && shapes[i].tb == p.b.trans))
        i++;
    if (i == nshapes) {
        if (nshapes == PROF_SHAPES) return;
        shapes[nshapes++] = (mm_shape){p.M, p.N, p.K, batch, p.a.trans, p.b.trans, 0.0, 0};
    }
    shapes[i].sec += sec;
    shapes[i].calls++;
}

void tg__profile_node(const tg_tensor *t, double sec) {
    pthread_mutex_lock(&mu);
    op_sec[t->op] += sec;
    op_calls[t->op]++;
    if (t->op == TG_OP_MATMUL) add_shape(t, sec);
    pthread_mutex_unlock(&mu);
}

static int by_time(const void *a, const void *b) {
    const double x = ((const mm_shape *)a)->sec, y = ((const mm_shape *)b)->sec;
    return x < y ? 1 : x > y ? -1 : 0;
}

void tg_profile_reset(void) {
    pthread_mutex_lock(&mu);
    memset(op_sec, 0, sizeof op_sec);
    memset(op_calls, 0, sizeof op_calls);
    nshapes = 0;
    pthread_mutex_unlock(&mu);
}

static void report(FILE *out) {
    double total = 0;
    for (int op = 0; op < TG_OP_COUNT; op++)
        total += op_sec[op];
    if (total <= 0) return;
    fprintf(out, "%-20s %10s %10s %7s\n", "op", "calls", "ms", "share");
    for (int op = 0; op < TG_OP_COUNT; op++)
        if (op_calls[op])
            fprintf(out, "%-20s %10lld %10.1f %6.1f%%\n", tg_op_name((tg_op)op),
                    (long long)op_calls[op], 1e3 * op_sec[op], 100.0 * op_sec[op] / total);
    if (!nshapes) return;
    /* 2 M N K flops per product: what each shape ran at */
    qsort(shapes, (size_t)nshapes, sizeof shapes[0], by_time);
    fprintf(out, "matmul by shape: %5s %5s %5s %6s %4s %8s %10s %7s %8s\n", "M", "N", "K", "batch",
            "op", "calls", "ms", "share", "GFLOP/s");
    for (int i = 0; i < nshapes; i++) {
        const mm_shape *s = &shapes[i];
        const double flops =
            2.0 * (double)s->m * (double)s->n * (double)s->k * (double)s->batch * (double)s->calls;
        fprintf(out, "                 %5lld %5lld %5lld %6lld   %c%c %8lld %10.1f %6.1f%% %8.1f\n",
                (long long)s->m, (long long)s->n, (long long)s->k, (long long)s->batch,
                s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', (long long)s->calls, 1e3 * s->sec,
                100.0 * s->sec / total, s->sec > 0 ? flops / s->sec * 1e-9 : 0.0);
    }
}

void tg_profile_report(void *out) {
    pthread_mutex_lock(&mu);
    report(out);
    pthread_mutex_unlock(&mu);
}
