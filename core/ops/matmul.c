/* The matmul op family: the batched matrix product, its shape rule and its gradient rule.
 * Matmul reads views whose matrix rows or columns are contiguous in place; the GEMM geometry
 * both backends use is core/backend-helpers.h's tg__geom_mm_plan. Kernels: backends/cpu/k_matmul.c,
 * backends/cuda/cuda_ops.c (cuBLAS). */
#include "core/ops/ops-impl.h"

/* A matrix operand can be read in place when its rows or its columns are contiguous. */
static tg_tensor *matrix_view(tg_tensor *x) {
    int n = x->ndim;
    if (x->stride[n - 1] == 1 || x->shape[n - 1] == 1) return x;
    if (x->stride[n - 2] == 1 || x->shape[n - 2] == 1) return x;
    tg_tensor *t = tg__graph_new(x->graph, TG_OP_CONT, x->dtype, x->ndim, x->shape);
    if (t) tg__graph_set_src(t, 1, &x);
    return t;
}

tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b, bool trans_a, bool trans_b) {
    TG__OP_CHECK(a);
    TG__OP_CHECK(b);
    TG__OP_CHECK(tg__op_same_graph(a, b, "tg_matmul"));
    TG__OP_CHECK(tg__op_need_f32(a, "tg_matmul"));
    TG__OP_CHECK(tg__op_need_f32(b, "tg_matmul"));
    char sa[96], sb[96];
    if (a->ndim < 2 || b->ndim < 2)
        return tg__graph_fail(a->graph, TG_ERR_SHAPE,
                              "tg_matmul: operands need 2+ dimensions: %s x %s",
                              TG__OP_SHAPESTR(sa, a), TG__OP_SHAPESTR(sb, b));
    int64_t m = a->shape[a->ndim - (trans_a ? 1 : 2)], ka = a->shape[a->ndim - (trans_a ? 2 : 1)];
    int64_t kb = b->shape[b->ndim - (trans_b ? 1 : 2)], n = b->shape[b->ndim - (trans_b ? 2 : 1)];
    if (ka != kb)
        return tg__graph_fail(a->graph, TG_ERR_SHAPE,
                              "tg_matmul: inner dimensions differ: %s%s x %s%s",
                              TG__OP_SHAPESTR(sa, a), trans_a ? "^T" : "", TG__OP_SHAPESTR(sb, b),
                              trans_b ? "^T" : "");
    int nb;
    int64_t s[TG_MAX_DIMS];
    if (!tg__tensor_broadcast(a->ndim - 2, a->shape, b->ndim - 2, b->shape, &nb, s))
        return tg__graph_fail(a->graph, TG_ERR_SHAPE,
                              "tg_matmul: batch dimensions of %s and %s do not broadcast",
                              TG__OP_SHAPESTR(sa, a), TG__OP_SHAPESTR(sb, b));
    s[nb] = m;
    s[nb + 1] = n;
    tg_tensor *src[2] = {matrix_view(a), matrix_view(b)};
    TG__OP_CHECK(src[0]);
    TG__OP_CHECK(src[1]);
    tg_tensor *t = tg__graph_new(a->graph, TG_OP_MATMUL, TG_DTYPE_F32, nb + 2, s);
    TG__OP_CHECK(t);
    tg__graph_set_src(t, 2, src);
    t->p.matmul.trans_a = trans_a;
    t->p.matmul.trans_b = trans_b;
    return t;
}

/* ---- gradient rule ---- */

#define X(i) (node->src[i])

/* C = op(A) op(B): d op(A) = dC op(B)^T, d op(B) = op(A)^T dC, transposed back when the
 * operand was used transposed. Broadcast batch dimensions are summed by tg__grad_accum. */
static void g_matmul(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *a = X(0), *b = X(1);
    bool ta = node->p.matmul.trans_a, tb = node->p.matmul.trans_b;
    if (a->flags & TG_TF_REQ_GRAD)
        tg__grad_accum(a, ta ? tg_matmul(b, dy, tb, true) : tg_matmul(dy, b, false, !tb));
    if (b->flags & TG_TF_REQ_GRAD)
        tg__grad_accum(b, tb ? tg_matmul(dy, a, true, ta) : tg_matmul(a, dy, !ta, false));
}

/* ---- the family's row ---- */

TG__OP_FAMILY(matmul) = {
    [TG_OP_MATMUL] = {"matmul", 0, g_matmul},
};
TG__OP_FAMILY_CHECK(matmul);
