/* CPU kernels of the row ops over the last axis: softmax, log-softmax, layer norm, and their
 * backward kernels. One row per iteration; rows are independent, so threads split rows. */
#include <math.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/vmath.h"

/* Row reductions in a fixed order: element j goes to accumulator j % 8 and the 8 are
 * combined pairwise at the end. The order depends only on the row length (results do not
 * depend on threads), and unlike a single running sum, which float rules keep serial, the 8
 * accumulators live in vector registers. Rows shorter than SHORT_ROW are summed serially:
 * setting up and combining 8 accumulators costs more there (softmax's backward, whose rows are
 * the short attention rows, is in vmath.c with the same order). */
enum { SHORT_ROW = 16 };
#define ACC8_COMBINE(acc)                                                                          \
    ((((acc)[0] + (acc)[4]) + ((acc)[1] + (acc)[5])) +                                             \
     (((acc)[2] + (acc)[6]) + ((acc)[3] + (acc)[7])))

static inline float row_sum(const float *v, int64_t n) {
    if (n < SHORT_ROW) {
        float s = 0.0f;
        for (int64_t j = 0; j < n; j++) s += v[j];
        return s;
    }
    float acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += v[j + k];
    for (int k = 0; j < n; j++, k++) acc[k] += v[j];
    return ACC8_COMBINE(acc);
}

tg_status tg_cpu_rows(tg_cpu_par *p, tg_tensor *t) {
    int64_t n = tg_tensor_numel(t);
    int64_t d = t->ndim ? t->shape[t->ndim - 1] : 1, rows = d ? n / d : 0;
    float *o = t->data;
    switch (t->op) {
    case TG_OP_SOFTMAX:
    case TG_OP_LOG_SOFTMAX: {
        const float *x = t->src[0]->data;
        bool lg = t->op == TG_OP_LOG_SOFTMAX;
        int64_t lo, hi; /* vmath.c: rows of 8–32 (attention) in AVX2 vectors */
        tg_cpu_share(p, rows, n > TG_PAR_MIN, &lo, &hi);
        if (hi > lo) tg_cpu_vsoftmax_rows(x + lo * d, o + lo * d, hi - lo, d, lg);
        return TG_OK;
    }
    case TG_OP_SOFTMAX_BACK:
    case TG_OP_LOG_SOFTMAX_BACK: {
        /* softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy) */
        const float *y = t->src[0]->data, *dy = t->src[1]->data;
        bool lg = t->op == TG_OP_LOG_SOFTMAX_BACK;
        if (!lg) { /* vmath.c: short rows (attention) eight at a time in AVX2 vectors */
            int64_t lo, hi;
            tg_cpu_share(p, rows, n > TG_PAR_MIN, &lo, &hi);
            if (hi > lo) tg_cpu_vsoftmax_back_rows(y + lo * d, dy + lo * d, o + lo * d, hi - lo, d);
            return TG_OK;
        }
        TG_CPU_FOR(p, r, rows, n > TG_PAR_MIN) {
            const float *yr = y + r * d, *gr = dy + r * d;
            float *xr = o + r * d, s = row_sum(gr, d);
            for (int64_t j = 0; j < d; j++)
                xr[j] = gr[j] - tg_zero_if_neg_inf(yr[j], tg_fast_expf(yr[j])) * s;
        }
        return TG_OK;
    }
    case TG_OP_LAYER_NORM:
    case TG_OP_LAYER_NORM_BACK: {
        const float *x = t->src[0]->data;
        const float *gm = t->src[1] ? (const float *)t->src[1]->data : NULL;
        float eps = t->pf[0];
        int64_t lo, hi; /* vmath.c: rows in AVX2 vectors */
        tg_cpu_share(p, rows, n > TG_PAR_MIN, &lo, &hi);
        if (hi <= lo) return TG_OK;
        if (t->op == TG_OP_LAYER_NORM)
            tg_cpu_vlayer_norm_rows(x + lo * d, gm, t->src[2] ? (const float *)t->src[2]->data : NULL,
                                    o + lo * d, hi - lo, d, eps);
        else /* dx = rstd (g - mean(g) - xhat mean(g xhat)), g = gamma * dy */
            tg_cpu_vlayer_norm_back_rows(x + lo * d, gm, (const float *)t->src[2]->data + lo * d,
                                         o + lo * d, hi - lo, d, eps);
        return TG_OK;
    }
    default:
        return tg_error_set(TG_ERR_UNSUPPORTED, "cpu backend: no row kernel for %s",
                            tg_op_name(t->op));
    }
}
