/* Gradient checks of the op table's cases: values drawn by kind, checked by the library's
 * tg_gradcheck (tg/gradcheck.h has the method and tolerances). */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/graph-impl.h"

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

static tg_tensor *build_case(tg_graph *g, tg_tensor **x, void *ctx) {
    const gc_case *c = ctx;
    return c->build(g, x);
}

/* The library's checker (tg_gradcheck) on values drawn by kind from a fixed seed. */
bool gc_run(const gc_case *c, tg_backend *b, char *msg, size_t msgsize) {
    tg_rng r;
    tg_rng_init(&r, 42);
    tg_gradcheck_input in[GC_MAX_IN];
    for (int k = 0; k < c->n; k++) {
        in[k].ndim = c->ndim[k];
        memcpy(in[k].shape, c->shape[k], sizeof in[k].shape);
        int64_t nel = 1;
        for (int d = 0; d < c->ndim[k]; d++) nel *= c->shape[k][d];
        in[k].values = malloc((size_t)nel * 4 + 4);
        fill(in[k].values, nel, c->kind[k], &r);
    }
    tg_gradcheck_options o = tg_gradcheck_options_default();
    if (c->atol > 0) o.atol = c->atol;
    if (c->rtol > 0) o.rtol = c->rtol;
    tg_gradcheck_result res;
    tg_status st = tg_gradcheck(build_case, (void *)c, c->n, in, b, &o, &res);
    if (st != TG_OK) snprintf(msg, msgsize, "%s: %s", c->name, tg_error_message());
    for (int k = 0; k < c->n; k++) free(in[k].values);
    return st == TG_OK;
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
