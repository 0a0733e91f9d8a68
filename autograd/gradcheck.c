/* Finite-difference gradient checks (tg/gradcheck.h has the method and tolerances). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/graph-impl.h"
#include "tg/autograd.h"
#include "tg/rng.h"
#include "tg/gradcheck.h"

tg_gradcheck_options tg_gradcheck_options_default(void) {
    tg_gradcheck_options o = {.step = 5e-3, .atol = 2e-3, .rtol = 1e-2, .seed = 1234, .store = NULL};
    return o;
}

typedef struct {
    tg_gradcheck_fn fn;
    void *ctx;
    int n;
    tg_gradcheck_input *in;
    tg_backend *b;
    const float *R;
    uint64_t seed;
} gc;

static tg_status built(tg_graph *g, tg_tensor *y, const char *what) {
    const char *msg = NULL;
    tg_status st = tg_graph_status(g, &msg);
    if (st) return tg_error_set(st, "tg_gradcheck: %s: %s", what, msg);
    return y ? TG_OK : tg_error_prefix(TG_ERR_INVALID, "tg_gradcheck: %s: the function returned NULL", what);
}

static tg_tensor **leaves(gc *c, tg_graph *g, bool grad) {
    tg_tensor **x = calloc((size_t)c->n + 1, sizeof *x);
    for (int k = 0; x && k < c->n; k++) {
        x[k] = tg_input(g, TG_DTYPE_F32, c->in[k].ndim, c->in[k].shape, c->in[k].values);
        if (grad) x[k] = tg_requires_grad(x[k]);
    }
    return x;
}

/* Forward only at the current values: L = sum(y * R) in double. */
static tg_status eval(gc *c, double *L) {
    tg_graph *g = tg_graph_new();
    tg_tensor **x = g ? leaves(c, g, false) : NULL;
    if (!x) {
        tg_graph_free(g);
        return tg_error_set(TG_ERR_NOMEM, "tg_gradcheck: out of memory");
    }
    tg_graph_set_seed(g, c->seed);
    tg_graph_set_grad_enabled(g, false);
    tg_tensor *y = tg_keep(c->fn(g, x, c->ctx));
    tg_status st = built(g, y, "forward");
    float *v = NULL;
    int64_t n = st == TG_OK ? tg_tensor_numel(y) : 0;
    if (st == TG_OK) st = tg_graph_run(g, c->b);
    if (st == TG_OK && !(v = malloc((size_t)(n ? n : 1) * 4))) st = tg_error_set(TG_ERR_NOMEM, "tg_gradcheck: out of memory");
    if (st == TG_OK) st = tg_tensor_read(y, v, (size_t)n * 4);
    if (st == TG_OK) {
        double s = 0.0;
        for (int64_t i = 0; i < n; i++) s += (double)v[i] * c->R[i];
        *L = s;
    }
    free(v);
    free(x);
    tg_graph_free(g);
    return st;
}

/* central difference at *x (a host float that eval reads through `write` when it is a
 * parameter); returns the numeric derivative */
static tg_status numeric(gc *c, float *x, tg_store *s, int64_t pi, float *pv, int64_t pn, double h, double *out) {
    float x0 = *x;
    double lp = 0, lm = 0;
    *x = x0 + (float)h;
    double hp = (double)*x - x0;
    tg_status st = s ? tg_store_write(s, pi, pv, pn) : TG_OK;
    if (st == TG_OK) st = eval(c, &lp);
    *x = x0 - (float)h;
    double hm = x0 - (double)*x;
    if (st == TG_OK && s) st = tg_store_write(s, pi, pv, pn);
    if (st == TG_OK) st = eval(c, &lm);
    *x = x0;
    if (s) {
        tg_status st2 = tg_store_write(s, pi, pv, pn);
        if (st == TG_OK) st = st2;
    }
    *out = (lp - lm) / (hp + hm);
    return st;
}

static void judge(tg_gradcheck_result *r, const tg_gradcheck_options *o, double an, double num, int input,
                  int64_t param, int64_t el) {
    double e = fabs(an - num) / (o->atol + o->rtol * fabs(num));
    if (e != e) e = INFINITY;
    r->checked++;
    if (r->checked == 1 || e > r->worst) {
        r->worst = e;
        r->input = input;
        r->param = param;
        r->element = el;
        r->analytic = an;
        r->numeric = num;
    }
}

tg_status tg_gradcheck(tg_gradcheck_fn fn, void *ctx, int n, tg_gradcheck_input *in, tg_backend *b,
                       const tg_gradcheck_options *opt, tg_gradcheck_result *res) {
    tg_gradcheck_result local;
    tg_gradcheck_result *r = res ? res : &local;
    memset(r, 0, sizeof *r);
    r->input = -1;
    r->param = -1;
    if (!fn || !b || n < 0 || (n > 0 && !in)) return tg_error_set(TG_ERR_INVALID, "tg_gradcheck: NULL argument");
    tg_gradcheck_options o = opt ? *opt : tg_gradcheck_options_default();
    if (!(o.step > 0) || !(o.atol >= 0) || !(o.rtol >= 0) || o.atol + o.rtol <= 0)
        return tg_error_set(TG_ERR_INVALID, "tg_gradcheck: step %g must be > 0, tolerances >= 0 and not both 0", o.step);
    tg_store *s = o.store;
    gc c = {fn, ctx, n, in, b, NULL, o.seed};
    float **grads = calloc((size_t)n + 1, sizeof *grads), *R = NULL, *pv = NULL, *pg = NULL;
    tg_tensor **x = NULL, **gr = calloc((size_t)n + 1, sizeof *gr);
    tg_graph *g = tg_graph_new();
    tg_status st = grads && gr && g ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_gradcheck: out of memory");
    /* analytic pass: loss = sum(y * R) inside the graph */
    if (st == TG_OK && !(x = leaves(&c, g, true))) st = tg_error_set(TG_ERR_NOMEM, "tg_gradcheck: out of memory");
    tg_tensor *y = NULL;
    if (st == TG_OK) {
        tg_graph_set_seed(g, o.seed);
        y = fn(g, x, ctx);
        st = built(g, y, "build");
    }
    if (st == TG_OK) {
        int64_t ny = tg_tensor_numel(y), ys[TG_MAX_DIMS];
        int ynd = tg_tensor_shape(y, ys);
        tg_rng rng;
        tg_rng_init(&rng, o.seed);
        if (!(R = malloc((size_t)(ny ? ny : 1) * 4))) st = tg_error_set(TG_ERR_NOMEM, "tg_gradcheck: out of memory");
        for (int64_t i = 0; st == TG_OK && i < ny; i++)
            R[i] = (float)(0.5 + tg_rng_uniform(&rng)) * (i % 2 ? -1.0f : 1.0f);
        c.R = R;
        if (st == TG_OK) st = tg_backward(g, tg_sum_all(tg_mul(y, tg_input(g, TG_DTYPE_F32, ynd, ys, R))));
        if (st) st = tg_error_prefix(st, "tg_gradcheck: backward");
    }
    for (int k = 0; st == TG_OK && k < n; k++) gr[k] = tg_grad(g, x[k]);
    if (st == TG_OK && s) st = tg_store_zero_grad(s);
    if (st == TG_OK) st = tg_graph_run(g, b);
    for (int k = 0; st == TG_OK && k < n; k++) {
        int64_t ne = tg__tensor_numel(in[k].ndim, in[k].shape);
        if (!(grads[k] = calloc((size_t)(ne ? ne : 1), 4))) st = tg_error_set(TG_ERR_NOMEM, "tg_gradcheck: out of memory");
        else if (gr[k]) st = tg_tensor_read(gr[k], grads[k], (size_t)ne * 4);
    }
    /* numeric pass over inputs, then parameters */
    for (int k = 0; st == TG_OK && k < n; k++) {
        int64_t ne = tg__tensor_numel(in[k].ndim, in[k].shape);
        for (int64_t i = 0; st == TG_OK && i < ne; i++) {
            double num;
            st = numeric(&c, &in[k].values[i], NULL, -1, NULL, 0, o.step, &num);
            if (st == TG_OK) judge(r, &o, grads[k][i], num, k, -1, i);
        }
    }
    for (int64_t p = 0; st == TG_OK && s && p < tg_store_count(s); p++) {
        if (!tg_store_trainable(s, p)) continue;
        int64_t ne = tg_store_numel(s, p);
        free(pv);
        free(pg);
        pv = malloc((size_t)(ne ? ne : 1) * 4);
        pg = malloc((size_t)(ne ? ne : 1) * 4);
        if (!pv || !pg) st = tg_error_set(TG_ERR_NOMEM, "tg_gradcheck: out of memory");
        if (st == TG_OK) st = tg_store_read(s, p, pv, ne);
        if (st == TG_OK) st = tg_store_read_grad(s, p, pg, ne);
        for (int64_t i = 0; st == TG_OK && i < ne; i++) {
            double num;
            st = numeric(&c, &pv[i], s, p, pv, ne, o.step, &num);
            if (st == TG_OK) judge(r, &o, pg[i], num, -1, p, i);
        }
    }
    if (r->checked > 0) {
        if (r->input >= 0)
            snprintf(r->where, sizeof r->where, "input %d element %lld", r->input, (long long)r->element);
        else
            snprintf(r->where, sizeof r->where, "parameter '%s' element %lld", tg_store_name(s, r->param),
                     (long long)r->element);
    }
    if (st == TG_OK && r->worst > 1.0)
        st = tg_error_set(TG_ERR_NUMERIC, "tg_gradcheck: %s: analytic %.6g, numeric %.6g (%.3g x the tolerance; %lld entries checked)",
                          r->where, r->analytic, r->numeric, r->worst, (long long)r->checked);
    tg_graph_free(g);
    for (int k = 0; grads && k < n; k++) free(grads[k]);
    free(grads);
    free(gr);
    free(x);
    free(R);
    free(pv);
    free(pg);
    return st;
}
