/* tg_backward: reverse-mode differentiation by appending gradient nodes to the same graph.
 *
 * Nodes are visited in reverse creation order (a topological order, since inputs are always
 * created before the ops that use them). Only nodes flagged REQ_GRAD — those that depend on a
 * trainable parameter or on an input marked with tg_requires_grad — receive gradients, so
 * branches that reach no such leaf cost nothing. Parameter gradients end in GRAD_ACC sink
 * nodes that add into the store when the graph runs. */
#include <string.h>

#include "core/graph-impl.h"
#include "tg/autograd.h"

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
