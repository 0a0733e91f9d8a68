/* The op table: every op's definition (name, flags, gradient rule), assembled from the rows of
 * the op family files (core/ops/), where each op's builder, shape rule, named parameters
 * (core/ops/params.h) and gradient rule live. */
#include <stdio.h>

#include "core/ops/ops-impl.h"

/* The families; an op's row is in exactly one of them (tg__op_table_check). */
static const tg__op_def *const families[] = {
    tg__op_family_layout, tg__op_family_elementwise, tg__op_family_reduce,
    tg__op_family_rows,   tg__op_family_matmul,      tg__op_family_nn,
    tg__op_family_band,
};
enum { NFAMILIES = sizeof families / sizeof families[0] };

static const tg__op_def *def_of(tg_op op) {
    if (op < 0 || op >= TG_OP_COUNT) return NULL;
    for (int f = 0; f < NFAMILIES; f++)
        if (families[f][op].name) return &families[f][op];
    return NULL;
}

bool tg__op_table_check(char *msg, size_t n) {
    for (int op = 0; op < TG_OP_COUNT; op++) {
        int rows = 0;
        for (int f = 0; f < NFAMILIES; f++) rows += families[f][op].name != NULL;
        if (rows != 1) {
            snprintf(msg, n, "op %d (%s) has %d rows in the op families (want 1)", op,
                     tg_op_name((tg_op)op), rows);
            return false;
        }
    }
    return true;
}

const char *tg_op_name(tg_op op) {
    const tg__op_def *d = def_of(op);
    return d ? d->name : "unknown-op";
}
unsigned tg__op_flags(tg_op op) {
    const tg__op_def *d = def_of(op);
    return d ? d->flags : 0;
}
tg_grad_rule tg__grad_rule(tg_op op) {
    const tg__op_def *d = def_of(op);
    return d ? d->grad : NULL;
}
bool tg_op_is_backward_only(tg_op op) { return tg__op_flags(op) & TG_OPF_BACKWARD_ONLY; }
bool tg_op_has_no_gradient(tg_op op) { return tg__op_flags(op) & TG_OPF_NO_GRAD; }
