/* The graph-building helpers of the gradient rules: what an op's rule (core/ops/) adds to its
 * inputs' gradients. They build ordinary ops on the graph; tg_backward (autograd/backward.c)
 * walks the graph and calls the rules, which call these. */
#include "core/graph-impl.h"

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
