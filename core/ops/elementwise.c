/* The elementwise op family: fill, the broadcasting binary ops (add, sub, mul, div), scale
 * and the unary maths (exp, log, sqrt, rsqrt, tanh, relu, gelu and their backward ops), with
 * their shape rules and gradient rules. Kernels: backends/cpu/k_elementwise.c,
 * backends/cuda/k_elementwise.cu (registered in backends/cpu/cpu.c, backends/cuda/cuda_ops.c). */
#include <math.h>
#include <string.h>

#include "core/ops/ops-impl.h"

static tg_tensor *binary(tg_op op, tg_tensor *a, tg_tensor *b, const char *fn) {
    TG__OP_CHECK(a);
    TG__OP_CHECK(b);
    TG__OP_CHECK(tg__op_same_graph(a, b, fn));
    TG__OP_CHECK(tg__op_need_f32(a, fn));
    TG__OP_CHECK(tg__op_need_f32(b, fn));
    int n;
    int64_t s[TG_MAX_DIMS];
    if (!tg__tensor_broadcast(a->ndim, a->shape, b->ndim, b->shape, &n, s)) {
        char sa[96], sb[96];
        return tg__graph_fail(a->graph, TG_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", fn,
                              TG__OP_SHAPESTR(sa, a), TG__OP_SHAPESTR(sb, b));
    }
    tg_tensor *src[2] = {tg__op_cont(a), tg__op_cont(b)};
    TG__OP_CHECK(src[0]);
    TG__OP_CHECK(src[1]);
    tg_tensor *t = tg__graph_new(a->graph, op, TG_DTYPE_F32, n, s);
    if (t) tg__graph_set_src(t, 2, src);
    return t;
}

tg_tensor *tg_add(tg_tensor *a, tg_tensor *b) { return binary(TG_OP_ADD, a, b, "tg_add"); }
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b) { return binary(TG_OP_SUB, a, b, "tg_sub"); }
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b) { return binary(TG_OP_MUL, a, b, "tg_mul"); }
tg_tensor *tg_div(tg_tensor *a, tg_tensor *b) { return binary(TG_OP_DIV, a, b, "tg_div"); }

/* A same-shape op of one f32 input (plus optional extra inputs of the same shape). */
tg_tensor *tg__op_unary(tg_op op, tg_tensor *x, tg_tensor *extra) {
    TG__OP_CHECK(x);
    char fn[64]; /* the public function's name, as every other builder's errors say it */
    snprintf(fn, sizeof fn, "tg_%s", tg_op_name(op));
    TG__OP_CHECK(tg__op_need_f32(x, fn));
    tg_tensor *src[2] = {tg__op_cont(x), extra ? tg__op_cont(extra) : NULL};
    TG__OP_CHECK(src[0]);
    if (extra) {
        TG__OP_CHECK(src[1]);
        if (!tg__tensor_same_shape(x, extra)) {
            char a[96], b[96];
            return tg__graph_fail(x->graph, TG_ERR_SHAPE, "%s: shapes %s and %s differ", fn,
                                  TG__OP_SHAPESTR(a, x), TG__OP_SHAPESTR(b, extra));
        }
    }
    tg_tensor *t = tg__graph_new(x->graph, op, TG_DTYPE_F32, x->ndim, x->shape);
    if (t) tg__graph_set_src(t, extra ? 2 : 1, src);
    return t;
}

tg_tensor *tg_affine(tg_tensor *x, float s, float c) {
    tg_tensor *t = tg__op_unary(TG_OP_SCALE, x, NULL);
    if (t) {
        t->p.scale.mul = s;
        t->p.scale.add = c;
    }
    return t;
}
tg_tensor *tg_scale(tg_tensor *x, float s) { return tg_affine(x, s, 0.0f); }
tg_tensor *tg_add_scalar(tg_tensor *x, float c) { return tg_affine(x, 1.0f, c); }
tg_tensor *tg_neg(tg_tensor *x) { return tg_affine(x, -1.0f, 0.0f); }
tg_tensor *tg_exp(tg_tensor *x) {
    return tg__op_unary(TG_OP_EXP, x, NULL);
}
tg_tensor *tg_log(tg_tensor *x) {
    return tg__op_unary(TG_OP_LOG, x, NULL);
}
tg_tensor *tg_sqrt(tg_tensor *x) {
    return tg__op_unary(TG_OP_SQRT, x, NULL);
}
tg_tensor *tg_rsqrt(tg_tensor *x) {
    return tg__op_unary(TG_OP_RSQRT, x, NULL);
}
tg_tensor *tg_tanh(tg_tensor *x) {
    return tg__op_unary(TG_OP_TANH, x, NULL);
}
tg_tensor *tg_relu(tg_tensor *x) {
    return tg__op_unary(TG_OP_RELU, x, NULL);
}
tg_tensor *tg_gelu(tg_tensor *x) {
    return tg__op_unary(TG_OP_GELU, x, NULL);
}
tg_tensor *tg_silu(tg_tensor *x) {
    return tg__op_unary(TG_OP_SILU, x, NULL);
}
tg_tensor *tg_gelu_erf(tg_tensor *x) {
    return tg__op_unary(TG_OP_GELU_ERF, x, NULL);
}

/* ---- gradient rules ---- */

#define X(i) (node->src[i])

/* y = a + b: da = db = dy (summed over broadcast dims by tg__grad_accum) */
static void g_add(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), dy);
    tg__grad_accum(X(1), dy);
}

/* y = a - b: da = dy, db = -dy */
static void g_sub(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), dy);
    if (X(1)->flags & TG_TF_REQ_GRAD) tg__grad_accum(X(1), tg_neg(dy));
}

/* y = a b: da = dy b, db = dy a */
static void g_mul(tg_tensor *node, tg_tensor *dy) {
    if (X(0)->flags & TG_TF_REQ_GRAD) tg__grad_accum(X(0), tg_mul(dy, X(1)));
    if (X(1)->flags & TG_TF_REQ_GRAD) tg__grad_accum(X(1), tg_mul(dy, X(0)));
}

/* y = a / b: da = dy / b, db = -dy * y / b. */
static void g_div(tg_tensor *node, tg_tensor *dy) {
    if (X(0)->flags & TG_TF_REQ_GRAD) tg__grad_accum(X(0), tg_div(dy, X(1)));
    if (X(1)->flags & TG_TF_REQ_GRAD) tg__grad_accum(X(1), tg_neg(tg_div(tg_mul(dy, node), X(1))));
}

/* y = x mul + add: dx = dy mul */
static void g_scale(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_scale(dy, node->p.scale.mul));
}

/* y = exp x: dx = dy y */
static void g_exp(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_mul(dy, node));
}
/* y = log x: dx = dy / x */
static void g_log(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_div(dy, X(0)));
}
/* y = sqrt(x): dx = dy / (2y) */
static void g_sqrt(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_div(tg_scale(dy, 0.5f), node));
}
/* y = x^-1/2: dx = -dy y^3 / 2 */
static void g_rsqrt(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_mul(dy, tg_scale(tg_mul(node, tg_mul(node, node)), -0.5f)));
}
/* y = tanh x: dx = dy (1 - y^2) */
static void g_tanh(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_mul(dy, tg_affine(tg_mul(node, node), -1.0f, 1.0f)));
}
/* y = max(x, 0): dx = dy (x > 0) = relu_back(y, dy) = dy (y > 0) — y > 0 exactly where x > 0
 * (x NaN or -0 gives y 0, as relu_back of x gives 0), so the same bits from the output, which
 * the next layer keeps anyway: the pre-activation need not outlive the forward pass (a
 * feed-forward layer's bias + ReLU then never writes it). */
static void g_relu(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg__op_unary(TG_OP_RELU_BACK, node, dy));
}
/* y = gelu(x) = x Phi~(x), u = k (x + c x^3), k = sqrt(2/pi), c = 0.044715:
 * dx = gelu_back(x, dy) = dy (0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2)) */
static void g_gelu(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg__op_unary(TG_OP_GELU_BACK, X(0), dy));
}

/* y = silu(x) = x s, s = sigmoid(x) = 1 / (1 + exp(-x)):
 * dx = silu_back(x, dy) = dy (s + x s (1 - s)) = dy s (1 + x (1 - s)) */
static void g_silu(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg__op_unary(TG_OP_SILU_BACK, X(0), dy));
}

/* y = gelu_erf(x) = x Phi(x), Phi the standard normal CDF = 0.5 (1 + erf(x / sqrt 2)):
 * dx = gelu_erf_back(x, dy) = dy (Phi(x) + x phi(x)), phi(x) = exp(-x^2 / 2) / sqrt(2 pi) */
static void g_gelu_erf(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg__op_unary(TG_OP_GELU_ERF_BACK, X(0), dy));
}

/* ---- the family's rows ---- */

TG__OP_FAMILY(elementwise) = {
    [TG_OP_FILL] = {"fill", TG_OPF_NO_GRAD, NULL}, /* builder: tg_full (core/graph.c) */
    [TG_OP_ADD] = {"add", TG_OPF_INPLACE | TG_OPF_TILE, g_add},
    [TG_OP_SUB] = {"sub", TG_OPF_INPLACE | TG_OPF_TILE, g_sub},
    [TG_OP_MUL] = {"mul", TG_OPF_INPLACE | TG_OPF_TILE, g_mul},
    [TG_OP_DIV] = {"div", TG_OPF_INPLACE | TG_OPF_TILE, g_div},
    [TG_OP_SCALE] = {"scale", TG_OPF_INPLACE | TG_OPF_TILE, g_scale},
    [TG_OP_EXP] = {"exp", TG_OPF_INPLACE | TG_OPF_TILE, g_exp},
    [TG_OP_LOG] = {"log", TG_OPF_INPLACE | TG_OPF_TILE, g_log},
    [TG_OP_SQRT] = {"sqrt", TG_OPF_INPLACE | TG_OPF_TILE, g_sqrt},
    [TG_OP_RSQRT] = {"rsqrt", TG_OPF_INPLACE | TG_OPF_TILE, g_rsqrt},
    [TG_OP_TANH] = {"tanh", TG_OPF_INPLACE | TG_OPF_TILE, g_tanh},
    [TG_OP_RELU] = {"relu", TG_OPF_INPLACE | TG_OPF_TILE, g_relu},
    [TG_OP_GELU] = {"gelu", TG_OPF_INPLACE | TG_OPF_TILE, g_gelu},
    [TG_OP_RELU_BACK] = {"relu_back", TG_OPF_INPLACE | TG_OPF_TILE | TG_OPF_BACKWARD_ONLY, NULL},
    [TG_OP_GELU_BACK] = {"gelu_back", TG_OPF_INPLACE | TG_OPF_TILE | TG_OPF_BACKWARD_ONLY, NULL},
    [TG_OP_SILU] = {"silu", TG_OPF_INPLACE | TG_OPF_TILE, g_silu},
    [TG_OP_SILU_BACK] = {"silu_back", TG_OPF_INPLACE | TG_OPF_TILE | TG_OPF_BACKWARD_ONLY,
                         NULL}, /* srcs x, dy */
    [TG_OP_GELU_ERF] = {"gelu_erf", TG_OPF_INPLACE | TG_OPF_TILE, g_gelu_erf},
    [TG_OP_GELU_ERF_BACK] = {"gelu_erf_back", TG_OPF_INPLACE | TG_OPF_TILE | TG_OPF_BACKWARD_ONLY,
                             NULL}, /* srcs x, dy */
};
TG__OP_FAMILY_CHECK(elementwise);
