/* The row op family (over the last axis): softmax, log-softmax and layer norm, their backward
 * ops, shape rules and gradient rules. Kernels: backends/cpu/k_rows.c (+ vmath.c),
 * backends/cuda/k_rows.cu. */
#include "core/ops/ops-impl.h"

tg_tensor *tg_softmax(tg_tensor *x) {
    return tg__op_unary(TG_OP_SOFTMAX, x, NULL);
}
tg_tensor *tg_log_softmax(tg_tensor *x) {
    return tg__op_unary(TG_OP_LOG_SOFTMAX, x, NULL);
}

tg_tensor *tg_layer_norm(tg_tensor *x, tg_tensor *gamma, tg_tensor *beta, float eps) {
    TG__OP_CHECK(x);
    TG__OP_CHECK(tg__op_need_f32(x, "tg_layer_norm"));
    if (x->ndim < 1) return tg__graph_fail(x->graph, TG_ERR_SHAPE, "tg_layer_norm: scalar input");
    if (!(eps > 0.0f))
        return tg__graph_fail(x->graph, TG_ERR_INVALID, "tg_layer_norm: eps must be > 0");
    int64_t d = x->shape[x->ndim - 1];
    tg_tensor *aff[2] = {gamma, beta};
    for (int i = 0; i < 2; i++) {
        if (!aff[i]) continue;
        TG__OP_CHECK(tg__op_same_graph(x, aff[i], "tg_layer_norm"));
        if (aff[i]->ndim != 1 || aff[i]->shape[0] != d) {
            char a[96], b[96];
            return tg__graph_fail(x->graph, TG_ERR_SHAPE,
                                  "tg_layer_norm: %s %s does not match [%lld] of %s",
                                  i ? "beta" : "gamma", TG__OP_SHAPESTR(b, aff[i]), (long long)d,
                                  TG__OP_SHAPESTR(a, x));
        }
        aff[i] = tg__op_cont(aff[i]);
        TG__OP_CHECK(aff[i]);
    }
    tg_tensor *src[3] = {tg__op_cont(x), aff[0], aff[1]};
    TG__OP_CHECK(src[0]);
    tg_tensor *t = tg__graph_new(x->graph, TG_OP_LAYER_NORM, TG_DTYPE_F32, x->ndim, x->shape);
    TG__OP_CHECK(t);
    tg__graph_set_src(t, 3, src);
    t->p.layer_norm.eps = eps;
    return t;
}

/* ---- gradient rules ---- */

#define X(i) (node->src[i])

/* y = softmax(x) per row: dx = softmax_back(y, dy) = y (dy - sum_j dy_j y_j). A masked entry
 * (y = 0) gets no gradient. */
static void g_softmax(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg__op_unary(TG_OP_SOFTMAX_BACK, node, dy));
}

/* y = log_softmax(x) per row: dx = log_softmax_back(y, dy) = dy - exp(y) sum_j dy_j, with
 * exp(y) taken as 0 where y = -inf (a masked entry). */
static void g_log_softmax(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg__op_unary(TG_OP_LOG_SOFTMAX_BACK, node, dy));
}

/* y = xhat gamma + beta, xhat = (x - mean) rstd, rstd = 1 / sqrt(var + eps), per row of d:
 * dx = layer_norm_back(x, gamma, dy) = rstd (g - mean(g) - xhat mean(g xhat)), g = gamma dy;
 * dgamma = layer_norm_gamma_back(x, dy) = sum_rows(dy xhat), dbeta = sum_rows(dy). The dgamma
 * op recomputes xhat row by row where it sums (cheaper than keeping xhat alive, and than
 * writing it out, multiplying and summing in three passes); its value is exactly that of
 * sum_to(mul(dy, layer_norm(x, NULL, NULL, eps))), bit for bit on the CPU. */
static void g_layer_norm(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *x = X(0), *gamma = X(1), *beta = X(2);
    float eps = node->p.layer_norm.eps;
    dy = tg__op_cont(dy); /* the kernels read whole rows */
    if (!dy) return;
    if (x->flags & TG_TF_REQ_GRAD) {
        tg_tensor *t =
            tg__graph_new(node->graph, TG_OP_LAYER_NORM_BACK, TG_DTYPE_F32, x->ndim, x->shape);
        if (!t) return;
        tg_tensor *src[3] = {x, gamma, dy};
        tg__graph_set_src(t, 3, src);
        t->p.layer_norm.eps = eps;
        tg__grad_accum(x, t);
    }
    if (gamma && (gamma->flags & TG_TF_REQ_GRAD)) {
        tg_tensor *t =
            tg__graph_new(node->graph, TG_OP_LAYER_NORM_GAMMA_BACK, TG_DTYPE_F32, 1, gamma->shape);
        if (!t) return;
        tg_tensor *src[2] = {x, dy};
        tg__graph_set_src(t, 2, src);
        t->p.layer_norm.eps = eps;
        tg__grad_accum(gamma, t);
    }
    if (beta) tg__grad_accum(beta, dy);
}

/* ---- the family's rows ---- */

TG__OP_FAMILY(rows) = {
    [TG_OP_SOFTMAX] = {"softmax", TG_OPF_INPLACE, g_softmax},
    [TG_OP_LOG_SOFTMAX] = {"log_softmax", TG_OPF_INPLACE, g_log_softmax},
    [TG_OP_SOFTMAX_BACK] = {"softmax_back", TG_OPF_BACKWARD_ONLY, NULL},         /* srcs y, dy */
    [TG_OP_LOG_SOFTMAX_BACK] = {"log_softmax_back", TG_OPF_BACKWARD_ONLY, NULL}, /* srcs y, dy */
    [TG_OP_LAYER_NORM] = {"layer_norm", 0, g_layer_norm}, /* srcs x, gamma?, beta? */
    /* srcs x, gamma?, dy */
    [TG_OP_LAYER_NORM_BACK] = {"layer_norm_back", TG_OPF_BACKWARD_ONLY, NULL},
    /* srcs x, dy */
    [TG_OP_LAYER_NORM_GAMMA_BACK] = {"layer_norm_gamma_back", TG_OPF_BACKWARD_ONLY, NULL},
};
TG__OP_FAMILY_CHECK(rows);
