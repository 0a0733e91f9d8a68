/* CPU kernels of the row ops over the last axis: softmax, log-softmax, layer norm, and their
 * backward kernels. One row per iteration; rows are independent, so threads split rows. */
#include <math.h>

#include "backends/cpu/cpu-impl.h"

/* softmax / log-softmax of one row. Entries at -inf get probability 0 (log-prob -inf); a row
 * that is entirely -inf gives zeros (softmax) or -inf (log-softmax), never NaN. */
static void softmax_row(const float *x, float *y, int64_t n, bool log_out) {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    if (m == -INFINITY) {
        for (int64_t j = 0; j < n; j++) y[j] = log_out ? -INFINITY : 0.0f;
        return;
    }
    float s = 0.0f;
    if (log_out) {
        for (int64_t j = 0; j < n; j++) s += tg_fast_expf(x[j] - m);
        float lse = m + logf(s);
        for (int64_t j = 0; j < n; j++) y[j] = x[j] - lse;
    } else {
        for (int64_t j = 0; j < n; j++) {
            float e = x[j] == -INFINITY ? 0.0f : tg_fast_expf(x[j] - m);
            y[j] = e;
            s += e;
        }
        float inv = 1.0f / s;
        for (int64_t j = 0; j < n; j++) y[j] *= inv;
    }
}

/* mean and 1/sqrt(var + eps) of a row (two passes: stable for large means) */
static void row_stats(const float *x, int64_t d, float eps, float *mean, float *rstd) {
    float s = 0.0f;
    for (int64_t j = 0; j < d; j++) s += x[j];
    float mu = s / (float)d, v = 0.0f;
    for (int64_t j = 0; j < d; j++) v += (x[j] - mu) * (x[j] - mu);
    *mean = mu;
    *rstd = 1.0f / sqrtf(v / (float)d + eps);
}

tg_status tg_cpu_rows(tg_backend *b, tg_tensor *t) {
    int nt = b->nthreads;
    int64_t n = tg_tensor_numel(t);
    int64_t d = t->ndim ? t->shape[t->ndim - 1] : 1, rows = d ? n / d : 0;
    float *o = t->data;
    switch (t->op) {
    case TG_OP_SOFTMAX:
    case TG_OP_LOG_SOFTMAX: {
        const float *x = t->src[0]->data;
        bool lg = t->op == TG_OP_LOG_SOFTMAX;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)
        for (int64_t r = 0; r < rows; r++) softmax_row(x + r * d, o + r * d, d, lg);
        return TG_OK;
    }
    case TG_OP_SOFTMAX_BACK:
    case TG_OP_LOG_SOFTMAX_BACK: {
        /* softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy) */
        const float *y = t->src[0]->data, *dy = t->src[1]->data;
        bool lg = t->op == TG_OP_LOG_SOFTMAX_BACK;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)
        for (int64_t r = 0; r < rows; r++) {
            const float *yr = y + r * d, *gr = dy + r * d;
            float *xr = o + r * d, s = 0.0f;
            if (lg) {
                for (int64_t j = 0; j < d; j++) s += gr[j];
                for (int64_t j = 0; j < d; j++)
                    xr[j] = gr[j] - (yr[j] == -INFINITY ? 0.0f : tg_fast_expf(yr[j])) * s;
            } else {
                for (int64_t j = 0; j < d; j++) s += gr[j] * yr[j];
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
#pragma omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)
        for (int64_t r = 0; r < rows; r++) {
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
#pragma omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * d, *gr = dy + r * d;
            float *dx = o + r * d, mu, rs, sg = 0.0f, sgx = 0.0f;
            row_stats(xr, d, eps, &mu, &rs);
            for (int64_t j = 0; j < d; j++) {
                float gj = gm ? gr[j] * gm[j] : gr[j];
                sg += gj;
                sgx += gj * (xr[j] - mu) * rs;
            }
            sg /= (float)d;
            sgx /= (float)d;
            for (int64_t j = 0; j < d; j++) {
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
