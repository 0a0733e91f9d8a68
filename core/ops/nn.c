/* The neural-network op family: masked_fill, dropout, embedding (and its scatter-add
 * backward), label-smoothed cross-entropy (and its backward), and grad_acc, the sink that adds
 * a parameter's gradient into its store; shape rules and gradient rules. Kernels:
 * backends/cpu/k_elementwise.c (masked_fill, dropout) and k_nn.c; backends/cuda/k_elementwise.cu
 * and k_nn.cu, k_rows.cu (cross-entropy). */
#include <string.h>

#include "core/ops/ops-impl.h"

tg_tensor *tg_masked_fill(tg_tensor *x, tg_tensor *mask, float value) {
    TG__OP_CHECK(x);
    TG__OP_CHECK(mask);
    TG__OP_CHECK(tg__op_same_graph(x, mask, "tg_masked_fill"));
    TG__OP_CHECK(tg__op_need_f32(x, "tg_masked_fill"));
    int n;
    int64_t s[TG_MAX_DIMS];
    if (!tg__tensor_broadcast(x->ndim, x->shape, mask->ndim, mask->shape, &n, s) || n != x->ndim ||
        tg__tensor_numel(n, s) != tg_tensor_numel(x)) {
        char a[96], b[96];
        return tg__graph_fail(x->graph, TG_ERR_SHAPE,
                              "tg_masked_fill: mask %s does not broadcast to %s",
                              TG__OP_SHAPESTR(b, mask), TG__OP_SHAPESTR(a, x));
    }
    tg_tensor *src[2] = {tg__op_cont(x), tg__op_cont(mask)};
    TG__OP_CHECK(src[0]);
    TG__OP_CHECK(src[1]);
    tg_tensor *t = tg__graph_new(x->graph, TG_OP_MASKED_FILL, TG_DTYPE_F32, x->ndim, x->shape);
    TG__OP_CHECK(t);
    tg__graph_set_src(t, 2, src);
    t->p.masked_fill.value = value;
    return t;
}


tg_tensor *tg_dropout(tg_tensor *x, float p) {
    TG__OP_CHECK(x);
    if (!(p >= 0.0f && p < 1.0f))
        return tg__graph_fail(x->graph, TG_ERR_INVALID, "tg_dropout: p = %g outside [0, 1)",
                              (double)p);
    if (p == 0.0f || !x->graph->training) return x;
    tg_tensor *t = tg__op_unary(TG_OP_DROPOUT, x, NULL);
    TG__OP_CHECK(t);
    tg_graph *g = x->graph;
    t->p.dropout.p = p;
    t->p.dropout.stream = (uint32_t)g->next_stream++;
    t->p.dropout.seed_lo = (uint32_t)(g->seed & 0xffffffffu);
    t->p.dropout.seed_hi = (uint32_t)(g->seed >> 32);
    return t;
}

tg_tensor *tg_embedding(tg_tensor *table, tg_tensor *ids) {
    TG__OP_CHECK(table);
    TG__OP_CHECK(ids);
    TG__OP_CHECK(tg__op_same_graph(table, ids, "tg_embedding"));
    TG__OP_CHECK(tg__op_need_f32(table, "tg_embedding"));
    if (ids->dtype != TG_DTYPE_I32)
        return tg__graph_fail(table->graph, TG_ERR_DTYPE, "tg_embedding: ids must be i32, got %s",
                              tg_dtype_name(ids->dtype));
    if (table->ndim != 2 || ids->ndim >= TG_MAX_DIMS) {
        char a[96];
        return tg__graph_fail(table->graph, TG_ERR_SHAPE, "tg_embedding: table %s must be [V, d]",
                              TG__OP_SHAPESTR(a, table));
    }
    tg_tensor *src[2] = {tg__op_cont(table), tg__op_cont(ids)};
    TG__OP_CHECK(src[0]);
    TG__OP_CHECK(src[1]);
    int64_t s[TG_MAX_DIMS];
    memcpy(s, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    s[ids->ndim] = table->shape[1];
    tg_tensor *t = tg__graph_new(table->graph, TG_OP_EMBEDDING, TG_DTYPE_F32, ids->ndim + 1, s);
    if (t) tg__graph_set_src(t, 2, src);
    return t;
}

/* tg_cross_entropy and tg_cross_entropy_with_nll (fn: the caller's name, for messages) */
static tg_tensor *cross_entropy(tg_tensor *logits, tg_tensor *targets, float smoothing,
                                int32_t ignore_index, tg_reduction reduction, bool with_nll,
                                const char *fn) {
    TG__OP_CHECK(logits);
    TG__OP_CHECK(targets);
    tg_graph *g = logits->graph;
    TG__OP_CHECK(tg__op_same_graph(logits, targets, fn));
    TG__OP_CHECK(tg__op_need_f32(logits, fn));
    if (targets->dtype != TG_DTYPE_I32)
        return tg__graph_fail(g, TG_ERR_DTYPE, "%s: targets must be i32, got %s", fn,
                              tg_dtype_name(targets->dtype));
    char a[96], b[96];
    if (logits->ndim != 2 || targets->ndim != 1 || targets->shape[0] != logits->shape[0])
        return tg__graph_fail(g, TG_ERR_SHAPE, "%s: logits %s must be [N, V] and targets %s [N]",
                              fn, TG__OP_SHAPESTR(a, logits), TG__OP_SHAPESTR(b, targets));
    if (!(smoothing >= 0.0f && smoothing < 1.0f))
        return tg__graph_fail(g, TG_ERR_INVALID, "%s: smoothing %g outside [0, 1)", fn,
                              (double)smoothing);
    if (reduction < TG_REDUCE_MEAN || reduction > TG_REDUCE_NONE)
        return tg__graph_fail(g, TG_ERR_INVALID, "%s: unknown reduction %d", fn, (int)reduction);
    tg_tensor *src[2] = {tg__op_cont(logits), tg__op_cont(targets)};
    TG__OP_CHECK(src[0]);
    TG__OP_CHECK(src[1]);
    /* [N] or [] per loss, then a last axis of 2 for the pair */
    int64_t shape[2] = {logits->shape[0], 2};
    int nd = reduction == TG_REDUCE_NONE ? 1 : 0;
    if (with_nll) shape[nd++] = 2;
    tg_tensor *t = tg__graph_new(g, TG_OP_CROSS_ENTROPY, TG_DTYPE_F32, nd, shape);
    TG__OP_CHECK(t);
    tg__graph_set_src(t, 2, src);
    t->p.cross_entropy.smoothing = smoothing;
    t->p.cross_entropy.ignore_index = ignore_index;
    t->p.cross_entropy.reduction = reduction;
    t->p.cross_entropy.with_nll = with_nll;
    return t;
}

tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *targets, float smoothing,
                            int32_t ignore_index, tg_reduction reduction) {
    return cross_entropy(logits, targets, smoothing, ignore_index, reduction, false,
                         "tg_cross_entropy");
}

tg_tensor *tg_cross_entropy_with_nll(tg_tensor *logits, tg_tensor *targets, float smoothing,
                                     int32_t ignore_index, tg_reduction reduction) {
    return cross_entropy(logits, targets, smoothing, ignore_index, reduction, true,
                         "tg_cross_entropy_with_nll");
}

/* ---- gradient rules ---- */

#define X(i) (node->src[i])

/* y = where(mask, value, x): dx = where(mask, 0, dy) */
static void g_masked_fill(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_masked_fill(dy, X(1), 0.0f));
}

/* y = x m / (1 - p), m the mask: dx = dy m / (1 - p), a dropout of dy with the node's seed,
 * stream and p, so the same mask and the same scale. */
static void g_dropout(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *t = tg__op_unary(TG_OP_DROPOUT, dy, NULL);
    if (!t) return;
    t->p.dropout = node->p.dropout;
    tg__grad_accum(X(0), t);
}

/* y[r] = table[ids[r]]: dtable = embedding_back(ids, dy), the rows of dy scatter-added into
 * a zero [V, d] in increasing r (ids are not differentiable). */
static void g_embedding(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *table = X(0);
    if (!(table->flags & TG_TF_REQ_GRAD)) return;
    tg_tensor *t = tg__graph_new(node->graph, TG_OP_EMBEDDING_BACK, TG_DTYPE_F32, 2, table->shape);
    if (!t) return;
    tg_tensor *src[2] = {X(1), tg__op_cont(dy)};
    tg__graph_set_src(t, 2, src);
    tg__grad_accum(table, t);
}

/* loss_i = -sum_k q_k log softmax(x_i)_k, q = (1 - eps)[k = y_i] + eps / V:
 * dx_i = cross_entropy_back(x, y, dy) = s_i (softmax(x_i) - q), s_i = dy_i (none), dy (sum),
 * dy / count (mean); 0 for ignored rows. With the NLL column (q = [k = y_i], scale t_i from
 * dy's second column): dx_i = s_i (softmax(x_i) - q) + t_i (softmax(x_i) - [k = y_i]). */
static void g_cross_entropy(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *t =
        tg__graph_new(node->graph, TG_OP_CROSS_ENTROPY_BACK, TG_DTYPE_F32, 2, X(0)->shape);
    if (!t) return;
    tg_tensor *src[3] = {X(0), X(1), tg__op_cont(dy)};
    tg__graph_set_src(t, 3, src);
    t->p.cross_entropy = node->p.cross_entropy;
    tg__grad_accum(X(0), t);
}

/* ---- the family's rows ---- */

TG__OP_FAMILY(nn) = {
    [TG_OP_MASKED_FILL] = {"masked_fill", TG_OPF_INPLACE | TG_OPF_TILE, g_masked_fill},
    [TG_OP_DROPOUT] = {"dropout", TG_OPF_INPLACE | TG_OPF_TILE, g_dropout},
    [TG_OP_EMBEDDING] = {"embedding", 0, g_embedding},
    [TG_OP_EMBEDDING_BACK] = {"embedding_back", TG_OPF_BACKWARD_ONLY, NULL}, /* srcs ids, dy */
    [TG_OP_CROSS_ENTROPY] = {"cross_entropy", 0, g_cross_entropy},
    [TG_OP_CROSS_ENTROPY_BACK] = {"cross_entropy_back", TG_OPF_BACKWARD_ONLY, NULL}, /* x, y, dy */
    /* the store's gradient += src; built by tg_backward (autograd/backward.c) */
    [TG_OP_GRAD_ACC] = {"grad_acc", TG_OPF_NO_GRAD, NULL},
};
TG__OP_FAMILY_CHECK(nn);
