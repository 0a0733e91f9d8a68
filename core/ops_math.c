/* Shape rules of the computing ops (elementwise, reductions, rows, products, losses). Every
 * computing kernel reads contiguous inputs (tg__cont inserts a copy for views), except matmul,
 * which reads any view whose matrix rows or columns are contiguous. */
#include <math.h>
#include <string.h>

#include "core/tg-impl.h"

#define CHECK1(x) \
    if (!(x)) return NULL
#define SHAPESTR(buf, t) tg_shape_str(buf, sizeof buf, (t)->ndim, (t)->shape)

static tg_tensor *need_f32(tg_tensor *x, const char *fn) {
    if (x->dtype != TG_DTYPE_F32)
        return tg__fail(x->graph, TG_ERR_DTYPE, "%s: expected f32, got %s", fn,
                        tg_dtype_name(x->dtype));
    return x;
}

static tg_tensor *same_graph(tg_tensor *a, tg_tensor *b, const char *fn) {
    if (a->graph != b->graph)
        return tg__fail(a->graph, TG_ERR_INVALID, "%s: inputs belong to different graphs", fn);
    return a;
}

static tg_tensor *binary(tg_op op, tg_tensor *a, tg_tensor *b, const char *fn) {
    CHECK1(a);
    CHECK1(b);
    CHECK1(same_graph(a, b, fn));
    CHECK1(need_f32(a, fn));
    CHECK1(need_f32(b, fn));
    int n;
    int64_t s[TG_MAX_DIMS];
    if (!tg__broadcast(a->ndim, a->shape, b->ndim, b->shape, &n, s)) {
        char sa[96], sb[96];
        return tg__fail(a->graph, TG_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", fn,
                        SHAPESTR(sa, a), SHAPESTR(sb, b));
    }
    tg_tensor *src[2] = {tg__cont(a), tg__cont(b)};
    CHECK1(src[0]);
    CHECK1(src[1]);
    tg_tensor *t = tg__new(a->graph, op, TG_DTYPE_F32, n, s);
    if (t) tg__set_src(t, 2, src);
    return t;
}

tg_tensor *tg_add(tg_tensor *a, tg_tensor *b) { return binary(TG_OP_ADD, a, b, "tg_add"); }
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b) { return binary(TG_OP_SUB, a, b, "tg_sub"); }
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b) { return binary(TG_OP_MUL, a, b, "tg_mul"); }
tg_tensor *tg_div(tg_tensor *a, tg_tensor *b) { return binary(TG_OP_DIV, a, b, "tg_div"); }

/* A same-shape op of one f32 input (plus optional extra inputs of the same shape). */
tg_tensor *tg__unary(tg_op op, tg_tensor *x, tg_tensor *extra) {
    CHECK1(x);
    CHECK1(need_f32(x, tg_op_name(op)));
    tg_tensor *src[2] = {tg__cont(x), extra ? tg__cont(extra) : NULL};
    CHECK1(src[0]);
    if (extra) {
        CHECK1(src[1]);
        if (!tg__same_shape(x, extra)) {
            char a[96], b[96];
            return tg__fail(x->graph, TG_ERR_SHAPE, "%s: shapes %s and %s differ", tg_op_name(op),
                            SHAPESTR(a, x), SHAPESTR(b, extra));
        }
    }
    tg_tensor *t = tg__new(x->graph, op, TG_DTYPE_F32, x->ndim, x->shape);
    if (t) tg__set_src(t, extra ? 2 : 1, src);
    return t;
}

tg_tensor *tg_affine(tg_tensor *x, float s, float c) {
    tg_tensor *t = tg__unary(TG_OP_SCALE, x, NULL);
    if (t) {
        t->pf[0] = s;
        t->pf[1] = c;
    }
    return t;
}
tg_tensor *tg_scale(tg_tensor *x, float s) { return tg_affine(x, s, 0.0f); }
tg_tensor *tg_add_scalar(tg_tensor *x, float c) { return tg_affine(x, 1.0f, c); }
tg_tensor *tg_neg(tg_tensor *x) { return tg_affine(x, -1.0f, 0.0f); }
tg_tensor *tg_exp(tg_tensor *x) { return tg__unary(TG_OP_EXP, x, NULL); }
tg_tensor *tg_log(tg_tensor *x) { return tg__unary(TG_OP_LOG, x, NULL); }
tg_tensor *tg_sqrt(tg_tensor *x) { return tg__unary(TG_OP_SQRT, x, NULL); }
tg_tensor *tg_rsqrt(tg_tensor *x) { return tg__unary(TG_OP_RSQRT, x, NULL); }
tg_tensor *tg_tanh(tg_tensor *x) { return tg__unary(TG_OP_TANH, x, NULL); }
tg_tensor *tg_relu(tg_tensor *x) { return tg__unary(TG_OP_RELU, x, NULL); }
tg_tensor *tg_gelu(tg_tensor *x) { return tg__unary(TG_OP_GELU, x, NULL); }
tg_tensor *tg_softmax(tg_tensor *x) { return tg__unary(TG_OP_SOFTMAX, x, NULL); }
tg_tensor *tg_log_softmax(tg_tensor *x) { return tg__unary(TG_OP_LOG_SOFTMAX, x, NULL); }

tg_tensor *tg_masked_fill(tg_tensor *x, tg_tensor *mask, float value) {
    CHECK1(x);
    CHECK1(mask);
    CHECK1(same_graph(x, mask, "tg_masked_fill"));
    CHECK1(need_f32(x, "tg_masked_fill"));
    int n;
    int64_t s[TG_MAX_DIMS];
    if (!tg__broadcast(x->ndim, x->shape, mask->ndim, mask->shape, &n, s) || n != x->ndim ||
        tg__numel(n, s) != tg_tensor_numel(x)) {
        char a[96], b[96];
        return tg__fail(x->graph, TG_ERR_SHAPE, "tg_masked_fill: mask %s does not broadcast to %s",
                        SHAPESTR(b, mask), SHAPESTR(a, x));
    }
    tg_tensor *src[2] = {tg__cont(x), tg__cont(mask)};
    CHECK1(src[0]);
    CHECK1(src[1]);
    tg_tensor *t = tg__new(x->graph, TG_OP_MASKED_FILL, TG_DTYPE_F32, x->ndim, x->shape);
    CHECK1(t);
    tg__set_src(t, 2, src);
    t->pf[0] = value;
    return t;
}

/* Dropout parameters: pf[0] = p, pi[0] = stream id, pi[1..2] = seed (low, high words).
 * The gradient reuses them, so it sees the same mask. */
tg_tensor *tg__dropout_like(tg_tensor *x, const tg_tensor *like) {
    tg_tensor *t = tg__unary(TG_OP_DROPOUT, x, NULL);
    if (t) {
        t->pf[0] = like->pf[0];
        t->pi[0] = like->pi[0];
        t->pi[1] = like->pi[1];
        t->pi[2] = like->pi[2];
    }
    return t;
}

tg_tensor *tg_dropout(tg_tensor *x, float p) {
    CHECK1(x);
    if (!(p >= 0.0f && p < 1.0f))
        return tg__fail(x->graph, TG_ERR_INVALID, "tg_dropout: p = %g outside [0, 1)", (double)p);
    if (p == 0.0f || !x->graph->training) return x;
    tg_tensor *t = tg__unary(TG_OP_DROPOUT, x, NULL);
    CHECK1(t);
    tg_graph *g = x->graph;
    t->pf[0] = p;
    t->pi[0] = g->next_stream++;
    t->pi[1] = (int32_t)(uint32_t)(g->seed & 0xffffffffu);
    t->pi[2] = (int32_t)(uint32_t)(g->seed >> 32);
    return t;
}

static tg_tensor *reduce(tg_op op, tg_tensor *x, int axis, bool keepdim, const char *fn) {
    CHECK1(x);
    CHECK1(need_f32(x, fn));
    int a = tg__axis(axis, x->ndim);
    if (a < 0)
        return tg__fail(x->graph, TG_ERR_INVALID, "%s: axis %d out of range for %d dims", fn, axis,
                        x->ndim);
    if (op == TG_OP_MAX && x->shape[a] == 0)
        return tg__fail(x->graph, TG_ERR_SHAPE, "%s: max over an empty axis", fn);
    tg_tensor *c = tg__cont(x);
    CHECK1(c);
    int64_t s[TG_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != a) s[n++] = x->shape[i];
        else if (keepdim) s[n++] = 1;
    }
    tg_tensor *t = tg__new(x->graph, op, TG_DTYPE_F32, n, s);
    CHECK1(t);
    tg__set_src(t, 1, &c);
    t->pi[0] = a;
    t->pi[1] = keepdim;
    return t;
}

tg_tensor *tg_sum(tg_tensor *x, int axis, bool keepdim) {
    return reduce(TG_OP_SUM, x, axis, keepdim, "tg_sum");
}
tg_tensor *tg_max(tg_tensor *x, int axis, bool keepdim) {
    return reduce(TG_OP_MAX, x, axis, keepdim, "tg_max");
}
tg_tensor *tg_mean(tg_tensor *x, int axis, bool keepdim) {
    tg_tensor *s = tg_sum(x, axis, keepdim);
    CHECK1(s);
    int64_t n = x->shape[tg__axis(axis, x->ndim)];
    return tg_scale(s, n ? 1.0f / (float)n : 0.0f);
}
tg_tensor *tg_sum_all(tg_tensor *x) {
    CHECK1(x);
    int64_t n = tg_tensor_numel(x);
    tg_tensor *flat = tg_reshape(x, 1, &n);
    return tg_sum(flat, 0, false);
}
tg_tensor *tg_mean_all(tg_tensor *x) {
    tg_tensor *s = tg_sum_all(x);
    CHECK1(s);
    int64_t n = tg_tensor_numel(x);
    return tg_scale(s, n ? 1.0f / (float)n : 0.0f);
}

tg_tensor *tg_layer_norm(tg_tensor *x, tg_tensor *gamma, tg_tensor *beta, float eps) {
    CHECK1(x);
    CHECK1(need_f32(x, "tg_layer_norm"));
    if (x->ndim < 1) return tg__fail(x->graph, TG_ERR_SHAPE, "tg_layer_norm: scalar input");
    if (!(eps > 0.0f)) return tg__fail(x->graph, TG_ERR_INVALID, "tg_layer_norm: eps must be > 0");
    int64_t d = x->shape[x->ndim - 1];
    tg_tensor *aff[2] = {gamma, beta};
    for (int i = 0; i < 2; i++) {
        if (!aff[i]) continue;
        CHECK1(same_graph(x, aff[i], "tg_layer_norm"));
        if (aff[i]->ndim != 1 || aff[i]->shape[0] != d) {
            char a[96], b[96];
            return tg__fail(x->graph, TG_ERR_SHAPE, "tg_layer_norm: %s %s does not match [%lld] of %s",
                            i ? "beta" : "gamma", SHAPESTR(b, aff[i]), (long long)d,
                            SHAPESTR(a, x));
        }
        aff[i] = tg__cont(aff[i]);
        CHECK1(aff[i]);
    }
    tg_tensor *src[3] = {tg__cont(x), aff[0], aff[1]};
    CHECK1(src[0]);
    tg_tensor *t = tg__new(x->graph, TG_OP_LAYER_NORM, TG_DTYPE_F32, x->ndim, x->shape);
    CHECK1(t);
    tg__set_src(t, 3, src);
    t->pf[0] = eps;
    return t;
}

/* A matrix operand can be read in place when its rows or its columns are contiguous. */
static tg_tensor *matrix_view(tg_tensor *x) {
    int n = x->ndim;
    if (x->stride[n - 1] == 1 || x->shape[n - 1] == 1) return x;
    if (x->stride[n - 2] == 1 || x->shape[n - 2] == 1) return x;
    tg_tensor *t = tg__new(x->graph, TG_OP_CONT, x->dtype, x->ndim, x->shape);
    if (t) tg__set_src(t, 1, &x);
    return t;
}

tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b, bool trans_a, bool trans_b) {
    CHECK1(a);
    CHECK1(b);
    CHECK1(same_graph(a, b, "tg_matmul"));
    CHECK1(need_f32(a, "tg_matmul"));
    CHECK1(need_f32(b, "tg_matmul"));
    char sa[96], sb[96];
    if (a->ndim < 2 || b->ndim < 2)
        return tg__fail(a->graph, TG_ERR_SHAPE, "tg_matmul: operands need 2+ dimensions: %s x %s",
                        SHAPESTR(sa, a), SHAPESTR(sb, b));
    int64_t m = a->shape[a->ndim - (trans_a ? 1 : 2)], ka = a->shape[a->ndim - (trans_a ? 2 : 1)];
    int64_t kb = b->shape[b->ndim - (trans_b ? 1 : 2)], n = b->shape[b->ndim - (trans_b ? 2 : 1)];
    if (ka != kb)
        return tg__fail(a->graph, TG_ERR_SHAPE, "tg_matmul: inner dimensions differ: %s%s x %s%s",
                        SHAPESTR(sa, a), trans_a ? "^T" : "", SHAPESTR(sb, b), trans_b ? "^T" : "");
    int nb;
    int64_t s[TG_MAX_DIMS];
    if (!tg__broadcast(a->ndim - 2, a->shape, b->ndim - 2, b->shape, &nb, s))
        return tg__fail(a->graph, TG_ERR_SHAPE, "tg_matmul: batch dimensions of %s and %s do not broadcast",
                        SHAPESTR(sa, a), SHAPESTR(sb, b));
    s[nb] = m;
    s[nb + 1] = n;
    tg_tensor *src[2] = {matrix_view(a), matrix_view(b)};
    CHECK1(src[0]);
    CHECK1(src[1]);
    tg_tensor *t = tg__new(a->graph, TG_OP_MATMUL, TG_DTYPE_F32, nb + 2, s);
    CHECK1(t);
    tg__set_src(t, 2, src);
    t->pi[0] = trans_a;
    t->pi[1] = trans_b;
    return t;
}

tg_tensor *tg_embedding(tg_tensor *table, tg_tensor *ids) {
    CHECK1(table);
    CHECK1(ids);
    CHECK1(same_graph(table, ids, "tg_embedding"));
    CHECK1(need_f32(table, "tg_embedding"));
    if (ids->dtype != TG_DTYPE_I32)
        return tg__fail(table->graph, TG_ERR_DTYPE, "tg_embedding: ids must be i32, got %s",
                        tg_dtype_name(ids->dtype));
    if (table->ndim != 2 || ids->ndim >= TG_MAX_DIMS) {
        char a[96];
        return tg__fail(table->graph, TG_ERR_SHAPE, "tg_embedding: table %s must be [V, d]",
                        SHAPESTR(a, table));
    }
    tg_tensor *src[2] = {tg__cont(table), tg__cont(ids)};
    CHECK1(src[0]);
    CHECK1(src[1]);
    int64_t s[TG_MAX_DIMS];
    memcpy(s, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    s[ids->ndim] = table->shape[1];
    tg_tensor *t = tg__new(table->graph, TG_OP_EMBEDDING, TG_DTYPE_F32, ids->ndim + 1, s);
    if (t) tg__set_src(t, 2, src);
    return t;
}

tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *targets, float smoothing,
                            int32_t ignore_index, tg_reduction reduction) {
    CHECK1(logits);
    CHECK1(targets);
    tg_graph *g = logits->graph;
    CHECK1(same_graph(logits, targets, "tg_cross_entropy"));
    CHECK1(need_f32(logits, "tg_cross_entropy"));
    if (targets->dtype != TG_DTYPE_I32)
        return tg__fail(g, TG_ERR_DTYPE, "tg_cross_entropy: targets must be i32, got %s",
                        tg_dtype_name(targets->dtype));
    char a[96], b[96];
    if (logits->ndim != 2 || targets->ndim != 1 || targets->shape[0] != logits->shape[0])
        return tg__fail(g, TG_ERR_SHAPE, "tg_cross_entropy: logits %s must be [N, V] and targets %s [N]",
                        SHAPESTR(a, logits), SHAPESTR(b, targets));
    if (!(smoothing >= 0.0f && smoothing < 1.0f))
        return tg__fail(g, TG_ERR_INVALID, "tg_cross_entropy: smoothing %g outside [0, 1)",
                        (double)smoothing);
    if (reduction < TG_REDUCE_MEAN || reduction > TG_REDUCE_NONE)
        return tg__fail(g, TG_ERR_INVALID, "tg_cross_entropy: unknown reduction %d", (int)reduction);
    tg_tensor *src[2] = {tg__cont(logits), tg__cont(targets)};
    CHECK1(src[0]);
    CHECK1(src[1]);
    tg_tensor *t = reduction == TG_REDUCE_NONE
                       ? tg__new(g, TG_OP_CROSS_ENTROPY, TG_DTYPE_F32, 1, logits->shape)
                       : tg__new(g, TG_OP_CROSS_ENTROPY, TG_DTYPE_F32, 0, NULL);
    CHECK1(t);
    tg__set_src(t, 2, src);
    t->pf[0] = smoothing;
    t->pi[0] = ignore_index;
    t->pi[1] = (int32_t)reduction;
    return t;
}
