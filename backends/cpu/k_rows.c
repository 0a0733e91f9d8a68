/* CPU kernels of the row ops over the last axis: softmax, log-softmax, layer norm, and their
 * backward kernels. One row per iteration; rows are independent, so threads split rows. */
#include <math.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/vmath.h"

/* Row reductions in a fixed order: element j goes to accumulator j % 8 and the 8 are
 * combined pairwise at the end. The order depends only on the row length (results do not
 * depend on threads), and unlike a single running sum, which float rules keep serial, the 8
 * accumulators live in vector registers. Rows shorter than SHORT_ROW (attention over ~10
 * keys) are summed serially: setting up and combining 8 accumulators costs more there. */
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

static inline float row_dot(const float *a, const float *b, int64_t n) {
    if (n < SHORT_ROW) {
        float s = 0.0f;
        for (int64_t j = 0; j < n; j++) s += a[j] * b[j];
        return s;
    }
    float acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += a[j + k] * b[j + k];
    for (int k = 0; j < n; j++, k++) acc[k] += a[j] * b[j];
    return ACC8_COMBINE(acc);
}

/* e, or 0 where x is -inf (a masked entry). Bit masks rather than a float select, which
 * would keep the loop scalar (see tg_clampf in cpu-impl.h). */
static inline float zero_if_neg_inf(float x, float e) {
    union {
        float f;
        uint32_t u;
    } v = {e};
    v.u &= -(uint32_t)(x != -INFINITY);
    return v.f;
}

/* mean and 1/sqrt(var + eps) of a row (two passes: stable for large means) */
static void row_stats(const float *x, int64_t d, float eps, float *mean, float *rstd) {
    float mu = row_sum(x, d) / (float)d;
    float acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= d; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += (x[j + k] - mu) * (x[j + k] - mu);
    for (int k = 0; j < d; j++, k++) acc[k] += (x[j] - mu) * (x[j] - mu);
    *mean = mu;
    *rstd = 1.0f / sqrtf((ACC8_COMBINE(acc)) / (float)d + eps);
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
        TG_CPU_FOR(p, r, rows, n > TG_PAR_MIN) {
            const float *yr = y + r * d, *gr = dy + r * d;
            float *xr = o + r * d;
            if (lg) {
                float s = row_sum(gr, d);
                for (int64_t j = 0; j < d; j++)
                    xr[j] = gr[j] - zero_if_neg_inf(yr[j], tg_fast_expf(yr[j])) * s;
            } else {
                float s = row_dot(gr, yr, d);
                for (int64_t j = 0; j < d; j++) xr[j] = yr[j] * (gr[j] - s);
            }
        }
        return TG_OK;
    }
    case TG_OP_LAYER_NORM: {
        const float *x = t->src[0]->data;
        const float *gm = t->src[1] ? (const float *)t->src[1]->data : NULL;
        const float *bt = t->src[2] ? (const float *)t->src[2]->data : NULL;
        float eps = t->pf[0];
        TG_CPU_FOR(p, r, rows, n > TG_PAR_MIN) {
            const float *xr = x + r * d;
            float *yr = o + r * d, mu, rs;
            row_stats(xr, d, eps, &mu, &rs);
            for (int64_t j = 0; j < d; j++) {
                float v = (xr[j] - mu) * rs;
                if (gm) v *= gm[j];
                if (bt) v += bt[j];
                yr[j] = v;
            }
        }
        return TG_OK;
    }
    case TG_OP_LAYER_NORM_BACK: {
        /* dx = rstd (g - mean(g) - xhat mean(g xhat)), g = gamma * dy */
        const float *x = t->src[0]->data, *dy = t->src[2]->data;
        const float *gm = t->src[1] ? (const float *)t->src[1]->data : NULL;
        float eps = t->pf[0];
        TG_CPU_FOR(p, r, rows, n > TG_PAR_MIN) {
            const float *xr = x + r * d, *gr = dy + r * d;
            float *dx = o + r * d, mu, rs, ag[8] = {0}, agx[8] = {0};
            row_stats(xr, d, eps, &mu, &rs);
            /* sums of g and g * xhat, 8 accumulators each (see row_sum) */
            int64_t j = 0;
            for (; j + 8 <= d; j += 8)
                for (int k = 0; k < 8; k++) {
                    float gj = gm ? gr[j + k] * gm[j + k] : gr[j + k];
                    ag[k] += gj;
                    agx[k] += gj * (xr[j + k] - mu) * rs;
                }
            for (int k = 0; j < d; j++, k++) {
                float gj = gm ? gr[j] * gm[j] : gr[j];
                ag[k] += gj;
                agx[k] += gj * (xr[j] - mu) * rs;
            }
            float sg = (ACC8_COMBINE(ag)) / (float)d, sgx = (ACC8_COMBINE(agx)) / (float)d;
            for (j = 0; j < d; j++) {
                float gj = gm ? gr[j] * gm[j] : gr[j];
                dx[j] = rs * (gj - sg - (xr[j] - mu) * rs * sgx);
            }
        }
        return TG_OK;
    }
    default:
        return tg_error_set(TG_ERR_UNSUPPORTED, "cpu backend: no row kernel for %s",
                            tg_op_name(t->op));
    }
}
