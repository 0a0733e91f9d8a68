/* CPU kernels of embedding lookup, label-smoothed cross-entropy and gradient accumulation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/vmath.h"

tg_status tg__cpu_check_ids(const int32_t *ids, int64_t n, int64_t V, const char *fn) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return tg_error_set(TG_ERR_INVALID, "%s: id %d at position %lld outside [0, %lld)", fn,
                                (int)ids[i], (long long)i, (long long)V);
    return TG_OK;
}

/* The loss of one row (docs/model.md §1): with q(k) = (1-eps)[k=y] + eps/V,
 * -sum_k q(k) log p(k) = lse - (1-eps) x_y - (eps/V) sum_k x_k. The row's sums in lane
 * accumulators (vmath.h: tg_cpu_vce_sumexp): one running float sum over a vocabulary of
 * thousands cannot be vectorised. */
static float ce_row(const float *x, int64_t V, int32_t y, float eps, float *nll) {
    float m, sx = 0.0f, s = tg_cpu_vce_sumexp(x, V, &m, eps > 0.0f ? &sx : NULL);
    const float lse = m + logf(s);
    float loss = lse - (1.0f - eps) * x[y];
    if (eps > 0.0f) loss -= eps / (float)V * sx;
    if (nll) *nll = lse - x[y]; /* the loss at eps 0: (1 - 0) x_y is x_y exactly */
    return loss;
}

static tg_status embedding(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *tab = t->src[0], *ids = t->src[1];
    int64_t V = tab->shape[0], d = tab->shape[1], n = tg_tensor_numel(ids);
    tg_status st = tg__cpu_check_ids(ids->data, n, V, "tg_embedding");
    if (st) return st;
    const int32_t *id = ids->data;
    const float *w = tab->data;
    float *o = t->data;
    TG_CPU_FOR(p, r, n, n * d > TG_PAR_MIN) memcpy(o + r * d, w + (int64_t)id[r] * d, (size_t)d * 4);
    return TG_OK;
}

static tg_status embedding_back(tg_cpu_par *p, tg_tensor *t) {
    /* scatter-add; members own column ranges (zeroed by their owner), rows are added in
     * order: deterministic */
    const tg_tensor *ids = t->src[0], *dy = t->src[1];
    int64_t V = t->shape[0], d = t->shape[1], n = tg_tensor_numel(ids);
    tg_status st = tg__cpu_check_ids(ids->data, n, V, "tg_embedding backward");
    if (st) return st;
    const int32_t *id = ids->data;
    const float *g = dy->data;
    float *o = t->data;
    enum { CB = 64 };
    int64_t nblk = (d + CB - 1) / CB;
    TG_CPU_FOR(p, blk, nblk, (n + V) * d > TG_PAR_MIN) {
        int64_t c0 = blk * CB, c1 = c0 + CB < d ? c0 + CB : d;
        for (int64_t v = 0; v < V; v++) memset(o + v * d + c0, 0, (size_t)(c1 - c0) * 4);
        for (int64_t r = 0; r < n; r++) {
            float *orow = o + (int64_t)id[r] * d;
            const float *grow = g + r * d;
            for (int64_t c = c0; c < c1; c++) orow[c] += grow[c];
        }
    }
    return TG_OK;
}

/* The row losses of a reduced cross-entropy run as shares of a graph node (cpu.c): the first
 * share makes the buffer, every share fills its rows, and the share that finishes last (the
 * counter) sums them all in row order. */
typedef struct {
    tg_cpu_shared base;
    _Atomic int done; /* shares that have written their rows */
    float rows[];
} ce_rows;

static void ce_rows_release(tg_cpu_shared *s) {
    free(s);
}

static ce_rows *ce_rows_of(tg_cpu_par *p, int64_t n) {
    tg_cpu_shared *s = atomic_load_explicit(p->shared, memory_order_acquire);
    if (s) return (ce_rows *)s;
    ce_rows *c = malloc(sizeof *c + (size_t)(n ? n : 1) * sizeof(float));
    if (!c) return NULL;
    c->base.release = ce_rows_release;
    atomic_init(&c->done, 0);
    return (ce_rows *)tg_cpu_shared_publish(p, &c->base);
}

/* The reduction of the row losses [N, k] into out[k]: serial sums in double in row order, so the
 * totals do not depend on the threads or the cut. */
static void ce_total(const float *rowloss, int64_t N, int k, int64_t count, tg_reduction red,
                     float *out) {
    for (int c = 0; c < k; c++) {
        double total = 0.0;
        for (int64_t i = 0; i < N; i++)
            total += rowloss[i * k + c];
        out[c] = (float)(red == TG_REDUCE_MEAN ? (count ? total / (double)count : 0.0) : total);
    }
}

/* p's share of the row losses [N, k] (k 2: the NLL beside the loss; 0 for an ignored row) */
static void ce_fill(tg_cpu_par *p, const float *x, const int32_t *y, int64_t N, int64_t V,
                    int32_t ignore, float eps, int k, float *rowloss) {
    TG_CPU_FOR(p, i, N, N * V > TG_PAR_MIN) {
        float nll = 0.0f;
        rowloss[i * k] = y[i] == ignore ? 0.0f : ce_row(x + i * V, V, y[i], eps, &nll);
        if (k == 2) rowloss[i * k + 1] = nll;
    }
}

/* The scale of row i's gradient from column c of dy ([k] reduced, [N, k] per row) */
static float ce_scale(const float *dy, int64_t i, int k, int c, tg_reduction red, int64_t count) {
    return red == TG_REDUCE_NONE  ? dy[i * k + c]
           : red == TG_REDUCE_SUM ? dy[c]
                                  : dy[c] / (float)count;
}

/* cross_entropy and cross_entropy_back (srcs logits, targets, and dy for the backward) */
static tg_status cross_entropy(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *lg = t->src[0], *tg = t->src[1];
    int64_t N = lg->shape[0], V = lg->shape[1];
    const float *x = lg->data;
    const int32_t *y = tg->data;
    float eps = t->p.cross_entropy.smoothing;
    int32_t ignore = t->p.cross_entropy.ignore_index;
    tg_reduction red = t->p.cross_entropy.reduction;
    const int k = t->p.cross_entropy.with_nll ? 2 : 1;
    int64_t count = 0;
    for (int64_t i = 0; i < N; i++) {
        if (y[i] == ignore) continue;
        if (y[i] < 0 || y[i] >= V)
            return tg_error_set(TG_ERR_INVALID,
                                "tg_cross_entropy: target %d at row %lld outside [0, %lld)",
                                (int)y[i], (long long)i, (long long)V);
        count++;
    }
    if (t->op == TG_OP_CROSS_ENTROPY) {
        if (red == TG_REDUCE_NONE) {
            ce_fill(p, x, y, N, V, ignore, eps, k, t->data);
            return TG_OK;
        }
        if (p->shared && !p->team) { /* a share of a graph node */
            ce_rows *c = ce_rows_of(p, N * k);
            if (!c) return tg_error_set(TG_ERR_NOMEM, "tg_cross_entropy: out of memory");
            ce_fill(p, x, y, N, V, ignore, eps, k, c->rows);
            if (atomic_fetch_add_explicit(&c->done, 1, memory_order_acq_rel) == p->nth - 1)
                ce_total(c->rows, N, k, count, red, t->data);
            return TG_OK;
        }
        /* a team's members (or one thread): member 0 allocates the row losses and shares them
         * (a barrier), sums them once all are written (a barrier) and frees them */
        void **slot = tg_cpu_slot(p);
        if (p->ith == 0) *slot = malloc((size_t)(N ? N * k : 1) * 4);
        tg_cpu_barrier(p);
        float *rowloss = *slot;
        if (!rowloss) return tg_error_set(TG_ERR_NOMEM, "tg_cross_entropy: out of memory");
        ce_fill(p, x, y, N, V, ignore, eps, k, rowloss);
        tg_cpu_barrier(p);
        if (p->ith != 0) return TG_OK;
        ce_total(rowloss, N, k, count, red, t->data);
        free(rowloss);
        return TG_OK;
    }
    /* backward: dx = sc (softmax(x_i) - q_i) + sc1 (softmax(x_i) - [k = y_i]), sc1 from the NLL
     * column (0 without one: then exactly the plain cross-entropy's gradient) */
    const float *dy = t->src[2]->data;
    float *o = t->data;
    TG_CPU_FOR(p, i, N, N * V > TG_PAR_MIN) {
        float *orow = o + i * V;
        if (y[i] == ignore) {
            memset(orow, 0, (size_t)V * 4);
            continue;
        }
        const float sc = ce_scale(dy, i, k, 0, red, count);
        const float sc1 = k == 2 ? ce_scale(dy, i, k, 1, red, count) : 0.0f;
        const float *xr = x + i * V;
        float m, s = tg_cpu_vce_sumexp(xr, V, &m, NULL);
        if (sc1 == 0.0f) {
            tg_cpu_vce_grad(xr, V, m, 1.0f / s, sc, eps / (float)V, orow);
            orow[y[i]] -= sc * (1.0f - eps);
        } else {
            tg_cpu_vce_grad(xr, V, m, 1.0f / s, sc + sc1, 0.0f, orow);
            const float b = sc * (eps / (float)V);
            for (int64_t j = 0; j < V; j++)
                orow[j] -= b;
            orow[y[i]] -= sc * (1.0f - eps) + sc1;
        }
    }
    return TG_OK;
}

/* the store's gradient buffer += src */
static tg_status grad_acc(tg_cpu_par *p, tg_tensor *t) {
    const float *g = t->src[0]->data;
    float *o = t->data;
    int64_t n = tg_tensor_numel(t);
    TG_CPU_FOR(p, i, n, n > TG_PAR_MIN) o[i] += g[i];
    return TG_OK;
}

/* The family's kernels, registered by op. */
TG__CPU_KERNELS(nn) = {
    [TG_OP_EMBEDDING] = embedding,
    [TG_OP_EMBEDDING_BACK] = embedding_back,
    [TG_OP_CROSS_ENTROPY] = cross_entropy,
    [TG_OP_CROSS_ENTROPY_BACK] = cross_entropy,
    [TG_OP_GRAD_ACC] = grad_acc,
};
TG__CPU_KERNELS_CHECK(nn);
