/* Finite-difference gradient checker; see gradcheck.h for the method and tolerances. */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg-impl.h"

#define GC_H 5e-3
#define GC_ATOL 2e-3
#define GC_RTOL 1e-2

static void fill(float *x, int64_t n, gc_kind k, tg_rng *r) {
    for (int64_t i = 0; i < n; i++) {
        double u = tg_rng_uniform(r);
        switch (k) {
        case GC_POSITIVE: x[i] = (float)(0.5 + 1.5 * u); break;
        case GC_AWAY0: x[i] = (float)((0.1 + 1.4 * u) * (tg_rng_uniform(r) < 0.5 ? -1 : 1)); break;
        case GC_DISTINCT: x[i] = (float)(0.25 * (double)i - 0.1 * (double)n + 0.05 * u); break;
        default: x[i] = (float)tg_rng_normal(r); break;
        }
    }
    if (k == GC_DISTINCT) /* shuffle so that the maximum is not always last */
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)tg_rng_below(r, (uint64_t)i + 1);
            float t = x[i];
            x[i] = x[j];
            x[j] = t;
        }
}

/* Forward only: y for the given input values; weighted sum in double. */
static bool eval(const gc_case *c, tg_backend *b, float **xs, const float *R, double *L) {
    tg_graph *g = tg_graph_new();
    tg_tensor *in[GC_MAX_IN];
    tg_graph_set_seed(g, 1234);
    tg_graph_set_grad_enabled(g, false);
    for (int k = 0; k < c->n; k++) in[k] = tg_input(g, TG_DTYPE_F32, c->ndim[k], c->shape[k], xs[k]);
    tg_tensor *y = tg_keep(c->build(g, in));
    bool ok = y && tg_graph_run(g, b) == TG_OK;
    if (ok) {
        int64_t n = tg_tensor_numel(y);
        float *v = malloc((size_t)n * 4);
        ok = tg_tensor_read(y, v, (size_t)n * 4) == TG_OK;
        double s = 0.0;
        for (int64_t i = 0; i < n; i++) s += (double)v[i] * R[i];
        *L = s;
        free(v);
    }
    tg_graph_free(g);
    return ok;
}

bool gc_run(const gc_case *c, tg_backend *b, char *msg, size_t msgsize) {
    tg_rng r;
    tg_rng_init(&r, 42);
    float *xs[GC_MAX_IN] = {0}, *grads[GC_MAX_IN] = {0}, *R = NULL;
    int64_t nel[GC_MAX_IN];
    bool ok = false;
    double atol = c->atol > 0 ? c->atol : GC_ATOL, rtol = c->rtol > 0 ? c->rtol : GC_RTOL;
    for (int k = 0; k < c->n; k++) {
        nel[k] = 1;
        for (int d = 0; d < c->ndim[k]; d++) nel[k] *= c->shape[k][d];
        xs[k] = malloc((size_t)nel[k] * 4 + 4);
        grads[k] = malloc((size_t)nel[k] * 4 + 4);
        fill(xs[k], nel[k], c->kind[k], &r);
    }
    /* analytic pass: loss = sum(y * R) inside the graph */
    tg_graph *g = tg_graph_new();
    tg_graph_set_seed(g, 1234);
    tg_tensor *in[GC_MAX_IN], *gr[GC_MAX_IN];
    for (int k = 0; k < c->n; k++)
        in[k] = tg_requires_grad(tg_input(g, TG_DTYPE_F32, c->ndim[k], c->shape[k], xs[k]));
    tg_tensor *y = c->build(g, in);
    if (!y) {
        snprintf(msg, msgsize, "%s: build failed: %s", c->name, tg_error_message());
        goto out;
    }
    int64_t ny = tg_tensor_numel(y), ys[TG_MAX_DIMS];
    int ynd = tg_tensor_shape(y, ys);
    R = malloc((size_t)ny * 4 + 4);
    for (int64_t i = 0; i < ny; i++) R[i] = (float)(0.5 + tg_rng_uniform(&r)) * (i % 2 ? -1.0f : 1.0f);
    tg_tensor *loss = tg_sum_all(tg_mul(y, tg_input(g, TG_DTYPE_F32, ynd, ys, R)));
    if (tg_backward(g, loss) != TG_OK) {
        snprintf(msg, msgsize, "%s: backward failed: %s", c->name, tg_error_message());
        goto out;
    }
    for (int k = 0; k < c->n; k++) gr[k] = tg_grad(g, in[k]);
    if (tg_graph_run(g, b) != TG_OK) {
        snprintf(msg, msgsize, "%s: run failed: %s", c->name, tg_error_message());
        goto out;
    }
    for (int k = 0; k < c->n; k++) {
        if (!gr[k]) {
            memset(grads[k], 0, (size_t)nel[k] * 4);
        } else if (tg_tensor_read(gr[k], grads[k], (size_t)nel[k] * 4) != TG_OK) {
            snprintf(msg, msgsize, "%s: read grad: %s", c->name, tg_error_message());
            goto out;
        }
    }
    /* numeric pass */
    for (int k = 0; k < c->n; k++)
        for (int64_t i = 0; i < nel[k]; i++) {
            float x0 = xs[k][i];
            double lp, lm;
            xs[k][i] = x0 + (float)GC_H;
            double hp = (double)xs[k][i] - x0;
            bool e1 = eval(c, b, xs, R, &lp);
            xs[k][i] = x0 - (float)GC_H;
            double hm = x0 - (double)xs[k][i];
            bool e2 = eval(c, b, xs, R, &lm);
            xs[k][i] = x0;
            if (!e1 || !e2) {
                snprintf(msg, msgsize, "%s: forward failed: %s", c->name, tg_error_message());
                goto out;
            }
            double num = (lp - lm) / (hp + hm), an = grads[k][i];
            if (!(fabs(an - num) <= atol + rtol * fabs(num))) {
                snprintf(msg, msgsize, "%s: input %d element %lld: analytic %.6g, numeric %.6g", c->name,
                         k, (long long)i, an, num);
                goto out;
            }
        }
    ok = true;
out:
    tg_graph_free(g);
    for (int k = 0; k < c->n; k++) {
        free(xs[k]);
        free(grads[k]);
    }
    free(R);
    return ok;
}

bool gc_ops_used(const gc_case *c, bool *seen) {
    tg_graph *g = tg_graph_new();
    tg_tensor *in[GC_MAX_IN];
    float buf[4096] = {0};
    for (int k = 0; k < c->n; k++)
        in[k] = tg_requires_grad(tg_input(g, TG_DTYPE_F32, c->ndim[k], c->shape[k], buf));
    tg_tensor *y = c->build(g, in);
    bool ok = y && tg_backward(g, tg_sum_all(y)) == TG_OK;
    for (int64_t i = 0; ok && i < g->n; i++) seen[g->nodes[i]->op] = true;
    tg_graph_free(g);
    return ok;
}
