/* The reduction op family: sum and max over one axis (and max's backward op), and sum_to,
 * which sums broadcast dimensions away; with their shape rules and gradient rules. Kernels:
 * backends/cpu/k_reduce.c, backends/cuda/k_reduce.cu. */
#include <string.h>

#include "core/ops/ops-impl.h"

static tg_tensor *reduce(tg_op op, tg_tensor *x, int axis, bool keepdim, const char *fn) {
    TG__OP_CHECK(x);
    TG__OP_CHECK(tg__op_need_f32(x, fn));
    int a = tg__tensor_axis(axis, x->ndim);
    if (a < 0)
        return tg__graph_fail(x->graph, TG_ERR_INVALID, "%s: axis %d out of range for %d dims", fn,
                              axis, x->ndim);
    if (op == TG_OP_MAX && x->shape[a] == 0)
        return tg__graph_fail(x->graph, TG_ERR_SHAPE, "%s: max over an empty axis", fn);
    tg_tensor *c = tg__op_cont(x);
    TG__OP_CHECK(c);
    int64_t s[TG_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != a) s[n++] = x->shape[i];
        else if (keepdim) s[n++] = 1;
    }
    tg_tensor *t = tg__graph_new(x->graph, op, TG_DTYPE_F32, n, s);
    TG__OP_CHECK(t);
    tg__graph_set_src(t, 1, &c);
    t->p.reduce.axis = a;
    t->p.reduce.keepdim = keepdim;
    return t;
}

tg_tensor *tg_sum(tg_tensor *x, int axis, bool keepdim) {
    return reduce(TG_OP_SUM, x, axis, keepdim, "tg_sum");
}
tg_tensor *tg_max(tg_tensor *x, int axis, bool keepdim) {
    return reduce(TG_OP_MAX, x, axis, keepdim, "tg_max");
}
tg_tensor *tg_mean(tg_tensor *x, int axis, bool keepdim) {
    tg_tensor *s = reduce(TG_OP_SUM, x, axis, keepdim, "tg_mean"); /* its errors name tg_mean */
    TG__OP_CHECK(s);
    int64_t n = x->shape[tg__tensor_axis(axis, x->ndim)];
    return tg_scale(s, n ? 1.0f / (float)n : 0.0f);
}
tg_tensor *tg_sum_all(tg_tensor *x) {
    TG__OP_CHECK(x);
    int64_t n = tg_tensor_numel(x);
    tg_tensor *flat = tg_reshape(x, 1, &n);
    return tg_sum(flat, 0, false);
}
tg_tensor *tg_mean_all(tg_tensor *x) {
    tg_tensor *s = tg_sum_all(x);
    TG__OP_CHECK(s);
    int64_t n = tg_tensor_numel(x);
    return tg_scale(s, n ? 1.0f / (float)n : 0.0f);
}

tg_tensor *tg_sum_to(tg_tensor *x, int ndim, const int64_t *shape) {
    TG__OP_CHECK(x);
    if (ndim < 0 || ndim > TG_MAX_DIMS || !tg__op_broadcasts_to(ndim, shape, x->ndim, x->shape)) {
        char a[96], b[96];
        return tg__graph_fail(x->graph, TG_ERR_SHAPE, "tg_sum_to: %s does not broadcast to %s",
                              tg_shape_str(b, sizeof b, ndim, shape), TG__OP_SHAPESTR(a, x));
    }
    if (tg__tensor_numel(ndim, shape) == tg_tensor_numel(x))
        return ndim == x->ndim ? x : tg_reshape(x, ndim, shape);
    tg_tensor *c = tg__op_cont(x);
    TG__OP_CHECK(c);
    tg_tensor *t = tg__graph_new(x->graph, TG_OP_SUM_TO, x->dtype, ndim, shape);
    if (t) tg__graph_set_src(t, 1, &c);
    return t;
}

/* ---- gradient rules ---- */

#define X(i) (node->src[i])

static void keepdim_shape(const tg_tensor *x, int axis, int64_t *s) {
    memcpy(s, x->shape, sizeof(int64_t) * TG_MAX_DIMS);
    s[axis] = 1;
}

/* y = sum_axis x: dx = dy broadcast back along the axis */
static void g_sum(tg_tensor *node, tg_tensor *dy) {
    int64_t s[TG_MAX_DIMS];
    keepdim_shape(X(0), node->p.reduce.axis, s);
    tg__grad_accum(X(0), tg_expand(tg_reshape(dy, X(0)->ndim, s), X(0)->ndim, X(0)->shape));
}

/* max: dy goes to the first position of the maximum along the axis (max_back(x, y, dy)). */
static void g_max(tg_tensor *node, tg_tensor *dy) {
    int64_t s[TG_MAX_DIMS];
    keepdim_shape(X(0), node->p.reduce.axis, s);
    tg_tensor *y = tg_reshape(node, X(0)->ndim, s), *d = tg_reshape(dy, X(0)->ndim, s);
    if (!y || !d) return;
    tg_tensor *t =
        tg__graph_new(node->graph, TG_OP_MAX_BACK, TG_DTYPE_F32, X(0)->ndim, X(0)->shape);
    if (!t) return;
    tg_tensor *src[3] = {X(0), tg__op_cont(y), tg__op_cont(d)};
    tg__graph_set_src(t, 3, src);
    t->p.reduce.axis = node->p.reduce.axis;
    t->p.reduce.keepdim = true; /* y and dy come with the axis kept */
    tg__grad_accum(X(0), t);
}

/* sum_to (the gradient of broadcasting): dx = dy broadcast back */
static void g_sum_to(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_expand(dy, X(0)->ndim, X(0)->shape));
}

/* ---- the family's rows ---- */

TG__OP_FAMILY(reduce) = {
    [TG_OP_SUM] = {"sum", 0, g_sum},
    [TG_OP_MAX] = {"max", 0, g_max},
    [TG_OP_MAX_BACK] = {"max_back", TG_OPF_BACKWARD_ONLY, NULL}, /* srcs x, y, dy */
    [TG_OP_SUM_TO] = {"sum_to", 0, g_sum_to},
};
TG__OP_FAMILY_CHECK(reduce);
