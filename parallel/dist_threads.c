/* A group of threads of one process (include/tg/dist.h: tg_dist_threads): replicas of a model
 * that train like MPI ranks, each on its own slice of every batch with its own backend, but
 * whose collectives are plain reads and writes of each other's buffers.
 *
 * Why: on a small model, two processes of one thread each trained up to 18 % faster per step
 * than one process whose two threads split every op of the graph (0.82-1.1x in four runs of
 * benchmarks/contention/bench_dist.sh, docs/distributed.md): a rank keeps its own activations in
 * its own core's caches and waits for the other only once a step, where the split graph meets at
 * every node. Threads of one process do the same without an MPI launcher (Marian's CPU training
 * also runs one graph per worker thread).
 *
 * Collectives: every rank publishes its buffer in its slot and meets the others at a barrier;
 * an all-reduce then has rank r reduce elements [n r / size, n (r + 1) / size) over the ranks'
 * buffers in rank order and write the result into every buffer (the ranks' slices are
 * disjoint, so nobody reads what another writes), and a second barrier ends it. So results
 * are the same on every rank and from run to run, and with two ranks the same bits as MPI's
 * (a + b). A gradient bucket's "non-blocking" sum is done when it is waited for
 * (tg_dist_grad_end waits for the buckets in order on every rank): summing a few MiB in
 * memory takes about a millisecond, and a sum started from the gradient hook would make each
 * replica wait for the other in the middle of its backward. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/dist-impl.h"

typedef struct {
    int size;
    atomic_int refs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    unsigned gen;
    void *slot[]; /* each rank's buffer of the collective under way */
} thr_group;

static thr_group *group_of(tg_dist *d) {
    return d->tp_impl;
}

static void meet(thr_group *g) {
    pthread_mutex_lock(&g->mu);
    unsigned gen = g->gen;
    if (++g->arrived == g->size) {
        g->arrived = 0;
        g->gen++;
        pthread_cond_broadcast(&g->cv);
    } else {
        while (gen == g->gen)
            pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

/* acc = acc op x, over each rank's buffer in rank order */
#define REDUCE(T, OPEXPR)                                                                          \
    for (int64_t i = lo; i < hi; i++) {                                                            \
        T acc = ((T *)g->slot[0])[i];                                                              \
        for (int r = 1; r < g->size; r++) {                                                        \
            T x = ((T *)g->slot[r])[i];                                                            \
            acc = (OPEXPR);                                                                        \
        }                                                                                          \
        for (int r = 0; r < g->size; r++)                                                          \
            ((T *)g->slot[r])[i] = acc;                                                            \
    }
#define REDUCE_ALL(T)                                                                              \
    do {                                                                                           \
        if (op == TGD_SUM)                                                                         \
            REDUCE(T, acc + x)                                                                     \
        else if (op == TGD_MAX)                                                                    \
            REDUCE(T, x > acc ? x : acc)                                                           \
        else                                                                                       \
            REDUCE(T, x < acc ? x : acc)                                                           \
    } while (0)

static tg_status t_allreduce(tg_dist *d, void *buf, int64_t n, tgd_type t, tgd_op op) {
    if (n <= 0) return TG_OK;
    thr_group *g = group_of(d);
    g->slot[d->rank] = buf;
    meet(g);
    const int64_t lo = n * d->rank / g->size, hi = n * (d->rank + 1) / g->size;
    if (t == TGD_F64)
        REDUCE_ALL(double);
    else if (t == TGD_F32)
        REDUCE_ALL(float);
    else
        REDUCE_ALL(int64_t);
    meet(g);
    return TG_OK;
}

static tg_status t_bcast(tg_dist *d, void *buf, size_t bytes, int root) {
    thr_group *g = group_of(d);
    g->slot[d->rank] = buf;
    meet(g);
    if (d->rank != root && bytes) memcpy(buf, g->slot[root], bytes);
    meet(g); /* the root's buffer is read until here */
    return TG_OK;
}

typedef struct {
    float *buf;
    int64_t n;
} pending_sum;

static tg_status t_isum(tg_dist *d, float *buf, int64_t n, void **req) {
    (void)d;
    *req = NULL;
    if (n <= 0) return TG_OK;
    pending_sum *p = malloc(sizeof *p);
    if (!p) return tg_error_set(TG_ERR_NOMEM, "threads: out of memory");
    p->buf = buf, p->n = n;
    *req = p;
    return TG_OK;
}

static tg_status t_wait(tg_dist *d, void **req) {
    pending_sum *p = *req;
    if (!p) return TG_OK;
    *req = NULL;
    tg_status st = t_allreduce(d, p->buf, p->n, TGD_F32, TGD_SUM);
    free(p);
    return st;
}

static void t_progress(tg_dist *d) {
    (void)d;
}

/* Nothing to end: the transport cannot fail, and the tool returns from every thread. */
static void t_abort(tg_dist *d, int code) {
    (void)d, (void)code;
}

static void t_finalize(tg_dist *d) {
    thr_group *g = group_of(d);
    d->tp_impl = NULL;
    if (atomic_fetch_sub(&g->refs, 1) == 1) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
    }
}

static const tgd_transport threads_tp = {
    .name = "threads",
    .allreduce = t_allreduce,
    .bcast = t_bcast,
    .isum_f32 = t_isum,
    .wait = t_wait,
    .progress = t_progress,
    .abort = t_abort,
    .finalize = t_finalize,
};

tg_status tgd_threads_init(int size, tg_dist **d) {
    thr_group *g = calloc(1, sizeof *g + (size_t)size * sizeof g->slot[0]);
    if (!g) return tg_error_set(TG_ERR_NOMEM, "tg_dist_threads: out of memory");
    g->size = size;
    atomic_init(&g->refs, size);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    for (int r = 0; r < size; r++) {
        d[r]->rank = d[r]->local_rank = r;
        d[r]->size = d[r]->local_size = size;
        d[r]->tp = &threads_tp;
        d[r]->tp_impl = g;
        snprintf(d[r]->name, sizeof d[r]->name, "threads");
    }
    return TG_OK;
}
