/* The planner's elementwise fusion: chains of TG_OPF_TILE ops (bias + activation + dropout,
 * dropout + residual add, scale + masks + softmax, dropout + activation backward, ...) run as
 * one node.
 *
 * A chain is a sequence of nodes m1 -> m2 -> ... -> mk where each member reads the one before
 * it (directly or through a reshape) and has its number of elements; the tail may also be a
 * softmax (or its backward) over rows that fit in a tile. The backend runs the tail's kernel,
 * which computes every member tile by tile (a few KiB that stay in L1) and writes to memory only
 * what is read outside the chain: a member nothing else reads is TG_TF_TRANSIENT (no buffer at
 * all), so bias + GELU + dropout reads its input once and writes once instead of three reads
 * and three writes.
 *
 * The chain runs at the tail's position, so the members are moved next to it in the execution
 * order. That is only legal when nothing between a member and the tail reads the member: every
 * reader outside the chain must come after the tail (a view node does no work; the nodes
 * reading through it count). A member may read another member through a reshape of its whole
 * buffer, but not through any other view (one that reorders elements would read elements whose
 * tile is not computed yet). The liveness pass then counts every member's reads at the tail's
 * position (core/plan.c), since the tail's kernel does them. Each element is computed by the
 * same tile function as the unfused op, so results are bit-identical. */
#include <stdlib.h>

#include "core/graph-impl.h"

enum { MAX_CHAIN = TG_CHAIN_MAX };

static bool chainable(const tg_tensor *t) {
    return t->op != TG_OP_NONE && (tg__op_flags(t->op) & TG_OPF_TILE) && !t->base &&
           t->dtype == TG_DTYPE_F32 &&
           !(t->flags & (TG_TF_PARAM | TG_TF_INPUT | TG_TF_ACCUM | TG_TF_SINK));
}

/* A row op that may end a chain: its rows fit in a tile (the backend computes the members over
 * whole rows, then the row op on them). */
static bool row_tail(const tg_tensor *t) {
    if (t->op != TG_OP_SOFTMAX && t->op != TG_OP_LOG_SOFTMAX && t->op != TG_OP_SOFTMAX_BACK)
        return false;
    int64_t d = t->ndim ? t->shape[t->ndim - 1] : 1;
    return !t->base && t->dtype == TG_DTYPE_F32 && d >= 1 && d <= TG_CHAIN_TILE &&
           !(t->flags & (TG_TF_ACCUM | TG_TF_SINK));
}

/* A view that keeps its base's element order (a reshape of the whole buffer): reading it
 * element by element is reading the base. A linear layer's output reaches its activation
 * through one ([B T, d] -> [B, T, d]). */
static bool plain_view(const tg_tensor *v) {
    return v->base && v->op == TG_OP_RESHAPE && v->offset == 0 && tg__tensor_is_contiguous(v);
}

static bool is_view_node(const tg_tensor *t) { return (tg__op_flags(t->op) & TG_OPF_VIEW) != 0; }

static int chain_len(const tg_tensor *t) {
    int k = 1;
    for (const tg_tensor *m = t->chain_prev; m; m = m->chain_prev)
        k++;
    return k;
}

/* Readers of each storage root by position (CSR: rpos[rstart[id] .. rstart[id + 1])): a node
 * reading root r directly or through a view, or a view of r (t->base). */
typedef struct {
    int64_t *rstart, *rpos;
    tg_tensor **rnode;
} readers_t;

static bool readers_build(tg_graph *g, readers_t *r) {
    int64_t n = g->n, ne = g->nexec, total = 0;
    r->rstart = calloc((size_t)n + 1, sizeof *r->rstart);
    if (!r->rstart) return false;
    for (int64_t p = 0; p < ne; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k]) r->rstart[tg__tensor_root(t->src[k])->id + 1]++, total++;
        if (t->base) r->rstart[t->base->id + 1]++, total++;
    }
    for (int64_t i = 0; i < n; i++)
        r->rstart[i + 1] += r->rstart[i];
    r->rpos = malloc((size_t)(total ? total : 1) * sizeof *r->rpos);
    r->rnode = malloc((size_t)(total ? total : 1) * sizeof *r->rnode);
    int64_t *fill = malloc((size_t)(n ? n : 1) * sizeof *fill);
    if (!r->rpos || !r->rnode || !fill) {
        free(fill);
        return false;
    }
    for (int64_t i = 0; i < n; i++)
        fill[i] = r->rstart[i];
    for (int64_t p = 0; p < ne; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k]) {
                int64_t at = fill[tg__tensor_root(t->src[k])->id]++;
                r->rpos[at] = p;
                r->rnode[at] = t;
            }
        if (t->base) {
            int64_t at = fill[t->base->id]++;
            r->rpos[at] = p;
            r->rnode[at] = t;
        }
    }
    free(fill);
    return true;
}

/* May node b (at position pb) become the tail of the chain ending at a? Every member's readers
 * outside the chain must come after pb (view nodes do no work: their readers count), and b may
 * read a member only directly or through a plain view. */
static bool may_extend(const readers_t *r, tg_tensor *a, tg_tensor *b, int64_t pb) {
    if (chain_len(a) >= MAX_CHAIN) return false;
    for (int k = 0; k < b->nsrc; k++)
        if (b->src[k] && b->src[k]->base && tg__chain_has(a, b->src[k]->base) && !plain_view(b->src[k]))
            return false;
    for (const tg_tensor *m = a; m; m = m->chain_prev)
        for (int64_t i = r->rstart[m->id]; i < r->rstart[m->id + 1]; i++) {
            const tg_tensor *x = r->rnode[i];
            if (x != b && !tg__chain_has(a, x) && !is_view_node(x) && r->rpos[i] <= pb) return false;
        }
    return true;
}

/* A member needs a buffer when it is kept or something outside its chain reads it. */
static bool read_outside(const readers_t *r, const tg_tensor *tail, const tg_tensor *m) {
    if (m->flags & TG_TF_KEEP) return true;
    for (int64_t i = r->rstart[m->id]; i < r->rstart[m->id + 1]; i++) {
        /* a view node counts if kept (the nodes reading through it count anyway) */
        const tg_tensor *x = r->rnode[i];
        if (!tg__chain_has(tail, x) && (!is_view_node(x) || (x->flags & TG_TF_KEEP))) return true;
    }
    return false;
}

tg_status tg__plan_fuse_chains(tg_graph *g) {
    int64_t ne = g->nexec;
    readers_t r = {0};
    int64_t *order = malloc((size_t)(ne ? ne : 1) * sizeof *order);
    if (!order || !readers_build(g, &r)) {
        free(order);
        free(r.rstart);
        free(r.rpos);
        free(r.rnode);
        return tg_error_set(TG_ERR_NOMEM, "tg_graph_plan: out of memory for fusion");
    }
    /* chains, greedily in execution order: b joins the chain of the first input that allows */
    for (int64_t p = 0; p < ne; p++) {
        tg_tensor *b = g->nodes[g->order[p]];
        if (!chainable(b) && !row_tail(b)) continue;
        for (int k = 0; k < b->nsrc; k++) {
            tg_tensor *a = b->src[k];
            if (a && plain_view(a)) a = a->base;
            if (!a || !chainable(a) || (a->flags & TG_TF_CHAINED) ||
                tg_tensor_numel(a) != tg_tensor_numel(b) || !may_extend(&r, a, b, p))
                continue;
            b->chain_prev = a;
            a->flags |= TG_TF_CHAINED;
            break;
        }
    }
    /* members without outside readers need no buffer; members move next to their tail */
    int64_t n = 0;
    for (int64_t p = 0; p < ne; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        if (t->flags & TG_TF_CHAINED) continue;
        if (t->chain_prev) {
            tg_tensor *m[MAX_CHAIN];
            int k = 0;
            for (tg_tensor *x = t->chain_prev; x; x = x->chain_prev)
                m[k++] = x;
            while (k > 0) {
                tg_tensor *x = m[--k];
                if (!read_outside(&r, t, x)) x->flags |= TG_TF_TRANSIENT;
                order[n++] = x->id;
            }
        }
        order[n++] = g->order[p];
    }
    for (int64_t p = 0; p < ne; p++) {
        g->order[p] = order[p];
        g->nodes[order[p]]->pos = p;
    }
    free(order);
    free(r.rstart);
    free(r.rpos);
    free(r.rnode);
    return TG_OK;
}
