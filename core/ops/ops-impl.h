/* What every op family file (core/ops/) shares: the row that defines an op (tg__op_def),
 * the families' tables of rows that core/op_table.c assembles into the op table, and the
 * small checks the builders have in common. */
#ifndef TG_OPS_IMPL_H
#define TG_OPS_IMPL_H

#include "core/graph-impl.h"

/* One op: its name, its TG_OPF_* flags and its gradient rule (NULL for backward-only ops,
 * which are differentiated through the op they belong to, and for ops with no gradient). */
typedef struct tg__op_def {
    const char *name;
    unsigned flags;
    tg_grad_rule grad;
} tg__op_def;

/* A family's rows, indexed by op with designated initialisers ([TG_OP_X] = {...}); the rows of
 * other families' ops are empty (name NULL). An op has a row in exactly one family
 * (tg__op_table_check, tested by tests/test_backends.c). */
#define TG__OP_FAMILY(fam) const tg__op_def tg__op_family_##fam[TG_OP_COUNT]
#define TG__OP_FAMILY_CHECK(fam)                                                             \
    _Static_assert(sizeof tg__op_family_##fam / sizeof tg__op_family_##fam[0] == TG_OP_COUNT, \
                   "the " #fam " family's table must have one slot per op")
extern TG__OP_FAMILY(layout);
extern TG__OP_FAMILY(elementwise);
extern TG__OP_FAMILY(reduce);
extern TG__OP_FAMILY(rows);
extern TG__OP_FAMILY(matmul);
extern TG__OP_FAMILY(nn);
extern TG__OP_FAMILY(band);

#define TG__OP_CHECK(x) \
    if (!(x)) return NULL
#define TG__OP_SHAPESTR(buf, t) tg_shape_str(buf, sizeof buf, (t)->ndim, (t)->shape)

/* x, or NULL with a dtype error recorded when x is not f32. */
static inline tg_tensor *tg__op_need_f32(tg_tensor *x, const char *fn) {
    if (x->dtype != TG_DTYPE_F32)
        return tg__graph_fail(x->graph, TG_ERR_DTYPE, "%s: expected f32, got %s", fn,
                              tg_dtype_name(x->dtype));
    return x;
}

/* a, or NULL with an error recorded when a and b belong to different graphs. */
static inline tg_tensor *tg__op_same_graph(tg_tensor *a, tg_tensor *b, const char *fn) {
    if (a->graph != b->graph)
        return tg__graph_fail(a->graph, TG_ERR_INVALID, "%s: inputs belong to different graphs",
                              fn);
    return a;
}

/* True if shape `from` broadcasts to exactly `to` (expand and sum_to). */
static inline bool tg__op_broadcasts_to(int nf, const int64_t *from, int nt, const int64_t *to) {
    if (nf > nt) return false;
    for (int i = 0; i < nf; i++) {
        int64_t f = from[nf - 1 - i], d = to[nt - 1 - i];
        if (f != d && f != 1) return false;
    }
    return true;
}

/* A same-shape f32 op of x (plus an optional extra input of the same shape): elementwise.c. */
tg_tensor *tg__op_unary(tg_op op, tg_tensor *x, tg_tensor *extra);

#endif
