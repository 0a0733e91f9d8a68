/* Whether two nodes of a planned, bound graph may run at the same time (tg__nodes_independent):
 * a backend that runs nodes out of their list order (the CPU runner's run-ahead) asks it.
 * Memory is what orders nodes: the planner reuses blocks, so besides a node reading what an
 * earlier one writes, a later node may overwrite a block an earlier one still reads (or
 * writes). A node's reads are its sources — the planner's liveness rests on the same fact —
 * and, for the tail of a fused elementwise chain (core/fuse.c), its chain members' sources;
 * for a product reading an embedding lookup that was never made, the lookup's sources. */
#include <stdint.h>

#include "core/graph-impl.h"

typedef struct {
    uintptr_t lo, hi; /* bytes [lo, hi); lo == hi: none */
} byte_span;

/* The bytes a tensor's elements occupy, from its data pointer and strides; none while it has
 * no data (a fused chain's members that are never materialised). */
static byte_span span_of(const tg_tensor *t) {
    byte_span s = {0, 0};
    if (!t || !t->data) return s;
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) return s;
        int64_t ext = (t->shape[d] - 1) * t->stride[d];
        if (ext < 0) lo += ext;
        else hi += ext;
    }
    intptr_t es = (intptr_t)tg_dtype_size(t->dtype), base = (intptr_t)t->data;
    s.lo = (uintptr_t)(base + lo * es);
    s.hi = (uintptr_t)(base + (hi + 1) * es);
    return s;
}

static bool meet(byte_span a, byte_span b) { return a.lo < b.hi && b.lo < a.hi; }

/* Does source x meet s — or, read through an embedding lookup the planner did not make
 * (core/plan.c: TG_TF_LOOKUP), the lookup's table or ids? */
static bool src_meets(const tg_tensor *x, byte_span s) {
    if (meet(span_of(x), s)) return true;
    const tg_tensor *r = tg__tensor_root(x);
    return (r->flags & TG_TF_LOOKUP) &&
           (meet(span_of(r->src[0]), s) || meet(span_of(r->src[1]), s));
}

/* Does anything node t reads (with its chain's members) meet s? */
static bool reads_meet(const tg_tensor *t, byte_span s) {
    for (const tg_tensor *c = t; c; c = c->chain_prev)
        for (int k = 0; k < c->nsrc; k++)
            if (c->src[k] && src_meets(c->src[k], s)) return true;
    return false;
}

static bool writes_meet(const tg_tensor *t, byte_span s) {
    for (const tg_tensor *c = t; c; c = c->chain_prev)
        if (meet(span_of(c), s)) return true;
    return false;
}

bool tg__nodes_independent(const tg_tensor *m, const tg_tensor *q) {
    for (const tg_tensor *c = m; c; c = c->chain_prev) {
        byte_span w = span_of(c);
        if (writes_meet(q, w) || reads_meet(q, w)) return false;
    }
    for (const tg_tensor *c = q; c; c = c->chain_prev)
        if (reads_meet(m, span_of(c))) return false;
    return true;
}
