/* One gradient rule per op, each built from other ops (so it runs on every backend and is
 * planned with the forward). dy is the gradient of the node's output; each rule adds the
 * gradients of the node's inputs with tg__accum_grad, which also sums broadcast dimensions
 * away. Backward-only ops (softmax_back, ...) have no rule: they are differentiated only
 * once, and gradient checks of their forward op exercise them. */
#include <string.h>

#include "core/tg-impl.h"

tg_tensor *tg__unary(tg_op op, tg_tensor *x, tg_tensor *extra);
tg_tensor *tg__dropout_like(tg_tensor *x, const tg_tensor *like);

#define X(i) (node->src[i])

static void g_reshape(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg_reshape(dy, X(0)->ndim, X(0)->shape));
}

static void g_permute(tg_tensor *node, tg_tensor *dy) {
    int inv[TG_MAX_DIMS];
    for (int i = 0; i < node->ndim; i++) inv[node->pi[i]] = i;
    tg__accum_grad(X(0), tg_permute(dy, inv));
}

/* slice: the gradient is dy padded with zeros back to the input's extent. */
static void g_slice(tg_tensor *node, tg_tensor *dy) {
    int a = node->pi[0];
    int64_t start = node->pl[0];
    tg__accum_grad(X(0), tg_pad(dy, a, start, X(0)->shape[a] - start - node->shape[a]));
}

static void g_identity(tg_tensor *node, tg_tensor *dy) { tg__accum_grad(X(0), dy); }

static void g_concat(tg_tensor *node, tg_tensor *dy) {
    int a = node->pi[0];
    int64_t off = 0;
    for (int i = 0; i < node->nsrc; i++) {
        int64_t len = X(i)->shape[a];
        tg__accum_grad(X(i), tg_slice(dy, a, off, off + len));
        off += len;
    }
}

static void g_pad(tg_tensor *node, tg_tensor *dy) {
    int a = node->pi[0];
    tg__accum_grad(X(0), tg_slice(dy, a, node->pl[0], node->pl[0] + X(0)->shape[a]));
}

static void g_expand(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg_sum_to(dy, X(0)->ndim, X(0)->shape));
}

static void g_sum_to(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg_expand(dy, X(0)->ndim, X(0)->shape));
}

static void g_add(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), dy);
    tg__accum_grad(X(1), dy);
}

static void g_sub(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), dy);
    if (X(1)->flags & TG_TF_REQ_GRAD) tg__accum_grad(X(1), tg_neg(dy));
}

static void g_mul(tg_tensor *node, tg_tensor *dy) {
    if (X(0)->flags & TG_TF_REQ_GRAD) tg__accum_grad(X(0), tg_mul(dy, X(1)));
    if (X(1)->flags & TG_TF_REQ_GRAD) tg__accum_grad(X(1), tg_mul(dy, X(0)));
}

/* y = a / b: da = dy / b, db = -dy * y / b. */
static void g_div(tg_tensor *node, tg_tensor *dy) {
    if (X(0)->flags & TG_TF_REQ_GRAD) tg__accum_grad(X(0), tg_div(dy, X(1)));
    if (X(1)->flags & TG_TF_REQ_GRAD) tg__accum_grad(X(1), tg_neg(tg_div(tg_mul(dy, node), X(1))));
}

static void g_scale(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg_scale(dy, node->pf[0]));
}

static void g_exp(tg_tensor *node, tg_tensor *dy) { tg__accum_grad(X(0), tg_mul(dy, node)); }
static void g_log(tg_tensor *node, tg_tensor *dy) { tg__accum_grad(X(0), tg_div(dy, X(0))); }
/* y = sqrt(x): dx = dy / (2y) */
static void g_sqrt(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg_div(tg_scale(dy, 0.5f), node));
}
/* y = x^-1/2: dx = -dy y^3 / 2 */
static void g_rsqrt(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg_mul(dy, tg_scale(tg_mul(node, tg_mul(node, node)), -0.5f)));
}
/* y = tanh x: dx = dy (1 - y^2) */
static void g_tanh(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg_mul(dy, tg_affine(tg_mul(node, node), -1.0f, 1.0f)));
}
static void g_relu(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg__unary(TG_OP_RELU_BACK, X(0), dy));
}
static void g_gelu(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg__unary(TG_OP_GELU_BACK, X(0), dy));
}
static void g_masked_fill(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg_masked_fill(dy, X(1), 0.0f));
}
/* Same seed, stream and p: the same mask and the same 1/(1-p) scale. */
static void g_dropout(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg__dropout_like(dy, node));
}

static void keepdim_shape(const tg_tensor *x, int axis, int64_t *s) {
    memcpy(s, x->shape, sizeof(int64_t) * TG_MAX_DIMS);
    s[axis] = 1;
}

static void g_sum(tg_tensor *node, tg_tensor *dy) {
    int64_t s[TG_MAX_DIMS];
    keepdim_shape(X(0), node->pi[0], s);
    tg__accum_grad(X(0), tg_expand(tg_reshape(dy, X(0)->ndim, s), X(0)->ndim, X(0)->shape));
}

/* max: dy goes to the first position of the maximum along the axis. */
static void g_max(tg_tensor *node, tg_tensor *dy) {
    int64_t s[TG_MAX_DIMS];
    keepdim_shape(X(0), node->pi[0], s);
    tg_tensor *y = tg_reshape(node, X(0)->ndim, s), *d = tg_reshape(dy, X(0)->ndim, s);
    if (!y || !d) return;
    tg_tensor *t = tg__new(node->graph, TG_OP_MAX_BACK, TG_DTYPE_F32, X(0)->ndim, X(0)->shape);
    if (!t) return;
    tg_tensor *src[3] = {X(0), tg__cont(y), tg__cont(d)};
    tg__set_src(t, 3, src);
    t->pi[0] = node->pi[0];
    tg__accum_grad(X(0), t);
}

static void g_softmax(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg__unary(TG_OP_SOFTMAX_BACK, node, dy));
}
static void g_log_softmax(tg_tensor *node, tg_tensor *dy) {
    tg__accum_grad(X(0), tg__unary(TG_OP_LOG_SOFTMAX_BACK, node, dy));
}

/* Layer norm: dx from a fused kernel; dgamma = sum_rows(dy * xhat), dbeta = sum_rows(dy),
 * with xhat recomputed by an affine-free layer norm (cheaper than keeping it alive). */
static void g_layer_norm(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *x = X(0), *gamma = X(1), *beta = X(2);
    if (x->flags & TG_TF_REQ_GRAD) {
        tg_tensor *t = tg__new(node->graph, TG_OP_LAYER_NORM_BACK, TG_DTYPE_F32, x->ndim, x->shape);
        if (!t) return;
        tg_tensor *src[3] = {x, gamma, dy};
        tg__set_src(t, 3, src);
        t->pf[0] = node->pf[0];
        tg__accum_grad(x, t);
    }
    if (gamma && (gamma->flags & TG_TF_REQ_GRAD)) {
        tg_tensor *xhat = tg_layer_norm(x, NULL, NULL, node->pf[0]);
        tg__accum_grad(gamma, tg_mul(dy, xhat));
    }
    if (beta) tg__accum_grad(beta, dy);
}

/* C = op(A) op(B): d op(A) = dC op(B)^T, d op(B) = op(A)^T dC, transposed back when the
 * operand was used transposed. Broadcast batch dimensions are summed by tg__accum_grad. */
static void g_matmul(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *a = X(0), *b = X(1);
    bool ta = node->pi[0], tb = node->pi[1];
    if (a->flags & TG_TF_REQ_GRAD)
        tg__accum_grad(a, ta ? tg_matmul(b, dy, tb, true) : tg_matmul(dy, b, false, !tb));
    if (b->flags & TG_TF_REQ_GRAD)
        tg__accum_grad(b, tb ? tg_matmul(dy, a, true, ta) : tg_matmul(a, dy, !ta, false));
}

static void g_embedding(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *table = X(0);
    if (!(table->flags & TG_TF_REQ_GRAD)) return;
    tg_tensor *t = tg__new(node->graph, TG_OP_EMBEDDING_BACK, TG_DTYPE_F32, 2, table->shape);
    if (!t) return;
    tg_tensor *src[2] = {X(1), tg__cont(dy)};
    tg__set_src(t, 2, src);
    tg__accum_grad(table, t);
}

static void g_cross_entropy(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *t = tg__new(node->graph, TG_OP_CROSS_ENTROPY_BACK, TG_DTYPE_F32, 2, X(0)->shape);
    if (!t) return;
    tg_tensor *src[3] = {X(0), X(1), tg__cont(dy)};
    tg__set_src(t, 3, src);
    t->pf[0] = node->pf[0];
    t->pi[0] = node->pi[0];
    t->pi[1] = node->pi[1];
    tg__accum_grad(X(0), t);
}

/* S = band_scores(Q, K), S[i, j] = Q_i · K_{i+j-r}: dQ_i = sum_j dS[i, j] K_{i+j-r} =
 * band_mix(dS, K); dK_t = sum over (i, j) with i+j-r = t of dS[i, j] Q_i = band_mix_t(dS, Q).
 * Entries of dS outside the keys are never read (band_mix and band_mix_t skip them), so the
 * fill value, a constant, gets no gradient. */
static void g_band_scores(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *q = X(0), *k = X(1);
    int64_t r = node->pi[0];
    if (q->flags & TG_TF_REQ_GRAD) tg__accum_grad(q, tg_band_mix(dy, k, r));
    if (k->flags & TG_TF_REQ_GRAD) tg__accum_grad(k, tg__band_mix_t(dy, q, r, k->shape[k->ndim - 2]));
}

/* O = band_mix(P, V), O_i = sum_j P[i, j] V_{i+j-r}: dP[i, j] = dO_i · V_{i+j-r} =
 * band_scores(dO, V) with 0 where there is no key (P's entries there are never read, so their
 * gradient is 0, and a 0 keeps a softmax_back behind it finite); dV = band_mix_t(P, dO). */
static void g_band_mix(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *p = X(0), *v = X(1);
    int64_t r = node->pi[0];
    if (p->flags & TG_TF_REQ_GRAD) tg__accum_grad(p, tg_band_scores(dy, v, r, 0.0f));
    if (v->flags & TG_TF_REQ_GRAD) tg__accum_grad(v, tg__band_mix_t(p, dy, r, v->shape[v->ndim - 2]));
}

static const tg_grad_rule rules[TG_OP_COUNT] = {
    [TG_OP_RESHAPE] = g_reshape,   [TG_OP_PERMUTE] = g_permute,
    [TG_OP_SLICE] = g_slice,       [TG_OP_CONT] = g_identity,
    [TG_OP_CONCAT] = g_concat,     [TG_OP_PAD] = g_pad,
    [TG_OP_EXPAND] = g_expand,     [TG_OP_SUM_TO] = g_sum_to,
    [TG_OP_ADD] = g_add,           [TG_OP_SUB] = g_sub,
    [TG_OP_MUL] = g_mul,           [TG_OP_DIV] = g_div,
    [TG_OP_SCALE] = g_scale,       [TG_OP_EXP] = g_exp,
    [TG_OP_LOG] = g_log,           [TG_OP_SQRT] = g_sqrt,
    [TG_OP_RSQRT] = g_rsqrt,       [TG_OP_TANH] = g_tanh,
    [TG_OP_RELU] = g_relu,         [TG_OP_GELU] = g_gelu,
    [TG_OP_MASKED_FILL] = g_masked_fill, [TG_OP_DROPOUT] = g_dropout,
    [TG_OP_SUM] = g_sum,           [TG_OP_MAX] = g_max,
    [TG_OP_SOFTMAX] = g_softmax,   [TG_OP_LOG_SOFTMAX] = g_log_softmax,
    [TG_OP_LAYER_NORM] = g_layer_norm, [TG_OP_MATMUL] = g_matmul,
    [TG_OP_EMBEDDING] = g_embedding, [TG_OP_CROSS_ENTROPY] = g_cross_entropy,
    [TG_OP_BAND_SCORES] = g_band_scores, [TG_OP_BAND_MIX] = g_band_mix,
};

tg_grad_rule tg__grad_rule(tg_op op) { return (op >= 0 && op < TG_OP_COUNT) ? rules[op] : NULL; }
