/* A model's outputs checked before anyone prints them: a NaN or an infinity there is an error
 * that names the node it came from, not a number (tg__model_check_finite). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "models/model-impl.h"

/* The first of x[0], x[stride], ... (below n) that is an infinity or a NaN, or -1. Stride 1: by
 * the exponent bits, integer operations only, which the compiler turns into vectors. */
static int64_t first_nonfinite(const float *x, int64_t n, int64_t stride) {
    if (stride > 1) {
        for (int64_t i = 0; i < n; i += stride)
            if (!isfinite(x[i])) return i;
        return -1;
    }
    enum { BLOCK = 4096 };
    for (int64_t lo = 0; lo < n; lo += BLOCK) {
        const int64_t hi = n - lo < BLOCK ? n : lo + BLOCK;
        uint32_t any = 0;
        for (int64_t i = lo; i < hi; i++) {
            uint32_t u;
            memcpy(&u, x + i, sizeof u);
            any |= (u & 0x7f800000u) == 0x7f800000u;
        }
        if (any)
            for (int64_t i = lo; i < hi; i++)
                if (!isfinite(x[i])) return i;
    }
    return -1;
}

tg_status tg__model_check_finite(tg_graph *g, tg_backend *b, const float *x, int64_t n, int64_t stride,
                                 const char *what, ...) {
    const int64_t at = first_nonfinite(x, n, stride);
    if (at < 0) return TG_OK;
    char w[256];
    va_list ap;
    va_start(ap, what);
    vsnprintf(w, sizeof w, what, ap);
    va_end(ap);
    const float v = isnan(x[at]) ? fabsf(x[at]) : x[at]; /* "nan", not "-nan" */
    tg_status st = tg_graph_find_nonfinite(g, b);
    if (st == TG_ERR_NUMERIC) return tg_error_prefix(st, "%s: value %lld is %g", w, (long long)at, (double)v);
    if (st) return tg_error_prefix(st, "%s: value %lld is %g; looking for its origin", w, (long long)at, (double)v);
    return tg_error_set(TG_ERR_NUMERIC, "%s: value %lld is %g (no node of the graph made a NaN or an overflow)", w,
                        (long long)at, (double)v);
}
