/* tg_backward: reverse-mode differentiation by appending gradient nodes to the same graph.
 *
 * Nodes are visited in reverse creation order (a topological order, since inputs are always
 * created before the ops that use them). Only nodes flagged REQ_GRAD — those that depend on a
 * trainable parameter or on an input marked with tg_requires_grad — receive gradients, so
 * branches that reach no such leaf cost nothing. Parameter gradients end in GRAD_ACC sink
 * nodes that add into the store when the graph runs. */
#include <string.h>

#include "core/tg-impl.h"

void tg__grad_accum(tg_tensor *src, tg_tensor *contrib) {
    if (!src || !contrib || !(src->flags & TG_TF_REQ_GRAD)) return;
    if (!tg__tensor_same_shape(src, contrib)) contrib = tg_sum_to(contrib, src->ndim, src->shape);
    if (!contrib) return;
    src->grad = src->grad ? tg_add(src->grad, contrib) : contrib;
}

/* The gathered slices as a gradient of src's whole shape: zero-padded outside their range. */
static tg_tensor *slices_padded(tg_tensor *src) {
    tg_tensor *sg = src->slice_grad;
    int a = src->slice_axis;
    if (src->slice_lo == 0 && src->slice_hi == src->shape[a]) return sg;
    return tg_pad(sg, a, src->slice_lo, src->shape[a] - src->slice_hi);
}

tg_tensor *tg__grad_take(tg_tensor *t) {
    if (t->slice_grad) {
        tg_tensor *p = slices_padded(t);
        t->slice_grad = NULL;
        if (p) t->grad = t->grad ? tg_add(t->grad, p) : p;
    }
    return t->grad;
}

/* The gradient of each slice of x was a zero-padded copy of it, summed over the slices: for a
 * tensor cut into parts (a fused projection's Q, K and V; RoPE's halves) as many passes over
 * the whole tensor as parts, and as many adds. Slices whose ranges meet end to end are gathered
 * instead into one concatenation — the backward pass visits them in reverse order of creation,
 * so each new one lies just before or just after the range gathered so far — padded once when
 * the gradient is taken. A slice that does not meet the range (a gap, an overlap, another axis),
 * or one more than a concatenation holds, sends what was gathered to the gradient (padded and
 * added, as before) and starts anew. Every element is the same sum as with a pad per slice. */
void tg__grad_slice(tg_tensor *src, int a, int64_t lo, int64_t hi, tg_tensor *dy) {
    if (!src || !dy || !(src->flags & TG_TF_REQ_GRAD)) return;
    tg_tensor *sg = src->slice_grad;
    const bool before = sg && src->slice_axis == a && hi == src->slice_lo;
    const bool after = sg && src->slice_axis == a && lo == src->slice_hi;
    /* the gathered parts: a concatenation on this axis is opened, so that three slices give
     * one concatenation of three rather than one of a concatenation and a part */
    tg_tensor *const *had = &sg;
    int nhad = 1;
    if (sg && sg->op == TG_OP_CONCAT && sg->p.concat.axis == a) had = sg->src, nhad = sg->nsrc;
    if ((!before && !after) || nhad + 1 > TG_MAX_SRC) {
        tg__grad_take(src); /* what was gathered goes to the gradient */
        src->slice_grad = dy;
        src->slice_axis = a;
        src->slice_lo = lo;
        src->slice_hi = hi;
        return;
    }
    tg_tensor *parts[TG_MAX_SRC];
    int np = 0;
    if (before) parts[np++] = dy;
    for (int i = 0; i < nhad; i++)
        parts[np++] = had[i];
    if (after) parts[np++] = dy;
    tg_tensor *c = tg_concat(parts, np, a);
    if (!c) return;
    src->slice_grad = c;
    if (before)
        src->slice_lo = lo;
    else
        src->slice_hi = hi;
}

tg_status tg_backward(tg_graph *g, tg_tensor *loss) {
    if (!g || !loss) {
        const char *m = g ? g->msg : "";
        return tg_error_set(g && g->status ? g->status : TG_ERR_INVALID,
                            "tg_backward: no loss (graph error: %s)", m[0] ? m : "none");
    }
    if (g->status != TG_OK) return tg_error_set(g->status, "%s", g->msg);
    if (loss->graph != g) return tg_error_set(TG_ERR_INVALID, "tg_backward: loss is not in this graph");
    if (!g->grad_enabled)
        return tg_error_set(TG_ERR_STATE, "tg_backward: the graph is in inference mode");
    if (g->backward_done)
        return tg_error_set(TG_ERR_STATE, "tg_backward: called twice on one graph");
    if (loss->dtype != TG_DTYPE_F32 || tg_tensor_numel(loss) != 1) {
        char s[96];
        return tg_error_set(TG_ERR_SHAPE, "tg_backward: loss must be a scalar, got %s",
                            tg_shape_str(s, sizeof s, loss->ndim, loss->shape));
    }
    g->backward_done = true;
    int64_t n0 = g->n;
    if (loss->flags & TG_TF_REQ_GRAD) {
        loss->grad = tg_full(g, 1.0f, loss->ndim, loss->shape);
        for (int64_t i = loss->id; i >= 0 && g->status == TG_OK; i--) {
            tg_tensor *t = g->nodes[i];
            tg__grad_take(t);
            if (!t->grad || t->op == TG_OP_NONE || !(t->flags & TG_TF_REQ_GRAD)) continue;
            tg_grad_rule rule = tg__grad_rule(t->op);
            if (!rule) {
                tg__graph_fail(g, TG_ERR_UNSUPPORTED, "tg_backward: op %s has no gradient rule",
                               tg_op_name(t->op));
                break;
            }
            rule(t, t->grad);
        }
    }
    for (int64_t i = 0; i < n0 && g->status == TG_OK; i++) {
        tg_tensor *t = g->nodes[i];
        if (!tg__grad_take(t)) continue;
        if (t->flags & TG_TF_PARAM) {
            tg_tensor *gc = tg__op_cont(t->grad);
            if (!gc) break;
            tg_tensor *acc = tg__graph_new(g, TG_OP_GRAD_ACC, TG_DTYPE_F32, gc->ndim, gc->shape);
            if (!acc) break;
            tg__graph_set_src(acc, 1, &gc);
            acc->store = t->store;
            acc->param = t->param;
            acc->flags |= TG_TF_SINK;
        }
        if (t->flags & TG_TF_WANT_GRAD) tg_keep(t->grad);
    }
    if (g->status != TG_OK) return tg_error_set(g->status, "%s", g->msg);
    return TG_OK;
}

tg_tensor *tg_grad(tg_graph *g, const tg_tensor *t) {
    if (!g || !t || !t->grad) return NULL;
    return tg_keep(t->grad);
}
