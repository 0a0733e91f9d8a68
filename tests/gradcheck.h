/* Gradient-check cases of the op table (tests only): each case names its inputs' shapes and
 * value kinds; gc_run checks it with the library's tg_gradcheck (tg/gradcheck.h: the method,
 * the tolerances atol 2e-3, rtol 1e-2, and the worst-entry report). */
#ifndef TG_TESTS_GRADCHECK_H
#define TG_TESTS_GRADCHECK_H

#include <stdbool.h>

#include "tg/gradcheck.h"
#include "tg/tg.h"

#define GC_MAX_IN 4

typedef enum {
    GC_NORMAL = 0, /* N(0, 1) */
    GC_POSITIVE,   /* in [0.5, 2] (log, sqrt, rsqrt, div denominators) */
    GC_AWAY0,      /* |x| in [0.1, 1.5] (kinks at 0: relu) */
    GC_DISTINCT    /* well-separated values (max: no near-ties) */
} gc_kind;

typedef struct gc_case {
    const char *name;
    int n;                       /* number of differentiable inputs */
    int ndim[GC_MAX_IN];
    int64_t shape[GC_MAX_IN][TG_MAX_DIMS];
    gc_kind kind[GC_MAX_IN];
    tg_tensor *(*build)(tg_graph *g, tg_tensor **x); /* y from inputs x[0..n-1] */
    double atol, rtol;           /* 0 = defaults */
} gc_case;

/* Run one case; on failure writes a description into msg and returns false. */
bool gc_run(const gc_case *c, tg_backend *b, char *msg, size_t msgsize);

/* Build (without running) forward and backward graphs of a case and mark which ops occur in
 * them in seen[TG_OP_COUNT]. */
bool gc_ops_used(const gc_case *c, bool *seen);

#endif
