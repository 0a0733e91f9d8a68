/* The portable level of the vector maths (vmath.h): plain C, for any CPU, and the reference
 * the vector levels are tested against (tests/test_vmath.c). The maths: vmath-impl.h; exp is
 * tg_fast_expf (cpu-impl.h). No target attributes: built for the baseline the library is
 * compiled for (x86-64's has no fused multiply-add, so every product and sum rounds as
 * written). */
#include <math.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/vmath-impl.h"

static inline float tanh_scalar(float x) {
    float ax = fabsf(x);
    if (ax < 0.625f) {
        float z = x * x;
        float q = (((TANH_Q0 * z + TANH_Q1) * z + TANH_Q2) * z + TANH_Q3) * z + TANH_Q4;
        return x + x * z * q;
    }
    float e = tg_fast_expf(2.0f * tg_clampf(ax, 0.0f, 9.0f));
    return copysignf(1.0f - 2.0f / (e + 1.0f), x);
}

/* 2^z for z in [-125.9, 125.9] (EXP2_C1's comment): the bits of t = z + 1.5 * 2^20 hold 8n + j
 * in their low end, so j = t's bits mod 8 and (bits >> 3) << 23 is n << 23 mod 2^32 */
static inline float exp2_scalar(float z) {
    float t = z + EXP2_MAGIC, r = z - (t - EXP2_MAGIC);
    union {
        float f;
        uint32_t i;
    } ut = {t};
    float p = (((EXP2_C3 * r + EXP2_C2) * r + EXP2_C1) * r + 1.0f) * EXP2_T[ut.i & 7u];
    union {
        float f;
        uint32_t i;
    } up = {p};
    up.i += (ut.i >> 3) << 23;
    return up.f;
}

static inline float gelu_z(float xc) {
    return xc * (GELU_Z1 + GELU_Z3 * (xc * xc));
}

static inline float gelu_scalar(float x) {
    float xc = tg_clampf(x, -10.0f, 10.0f);
    return x / (1.0f + exp2_scalar(gelu_z(xc)));
}

static inline float gelu_grad_scalar(float x) {
    float xc = tg_clampf(x, -10.0f, 10.0f);
    float e = exp2_scalar(gelu_z(xc)), s = 1.0f / (1.0f + e);
    return s + xc * s * (e * s) * (2.0f * GELU_K + 6.0f * GELU_C * GELU_K * (xc * xc));
}

static void vexp_scalar(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tg_fast_expf(x[i]);
}
static void vtanh_scalar(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tanh_scalar(x[i]);
}
static void vgelu_scalar(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = gelu_scalar(x[i]);
}
static void vgelu_back_scalar(const float *x, const float *dy, float *dx, int64_t n) {
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * gelu_grad_scalar(x[i]);
}

static float ce_sumexp_scalar(const float *x, int64_t n, float *max, float *sum_x, float *e);

static void softmax_row_scalar(const float *x, float *y, int64_t n, bool log_out) {
    if (n > SHORT_ROW_MAX) {
        float m, s = ce_sumexp_scalar(x, n, &m, NULL, log_out ? NULL : y);
        if (m == -INFINITY) {
            softmax_dead_row(y, n, log_out);
        } else if (log_out) {
            const float lse = m + logf(s);
            for (int64_t j = 0; j < n; j++)
                y[j] = x[j] - lse;
        } else {
            const float inv = 1.0f / s;
            for (int64_t j = 0; j < n; j++)
                y[j] *= inv;
        }
        return;
    }
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m; /* NaNs skipped */
    if (m == -INFINITY) {
        softmax_dead_row(y, n, log_out);
        return;
    }
    float s = 0.0f;
    if (log_out) {
        for (int64_t j = 0; j < n; j++) s += tg_zero_if_neg_inf(x[j], tg_fast_expf(x[j] - m));
        float lse = m + logf(s);
        for (int64_t j = 0; j < n; j++) y[j] = x[j] - lse;
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        y[j] = tg_zero_if_neg_inf(x[j], tg_fast_expf(x[j] - m));
        s += y[j];
    }
    float inv = 1.0f / s;
    for (int64_t j = 0; j < n; j++) y[j] *= inv;
}

/* softmax backward of one row: dx = y (dy - sum(dy y)), the dot product in a fixed order
 * (DOT_SERIAL_BELOW) */
static void softmax_back_row_scalar(const float *y, const float *dy, float *dx, int64_t d) {
    float s = 0.0f;
    if (d < DOT_SERIAL_BELOW) {
        for (int64_t j = 0; j < d; j++) s += dy[j] * y[j];
    } else {
        float acc[8] = {0};
        int64_t j = 0;
        for (; j + 8 <= d; j += 8)
            for (int k = 0; k < 8; k++) acc[k] += dy[j + k] * y[j + k];
        for (int k = 0; j < d; j++, k++) acc[k] += dy[j] * y[j];
        s = (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])));
    }
    for (int64_t j = 0; j < d; j++) dx[j] = y[j] * (dy[j] - s);
}
static void softmax_back_rows_scalar(const float *y, const float *dy, float *dx, int64_t rows, int64_t d) {
    for (int64_t r = 0; r < rows; r++) softmax_back_row_scalar(y + r * d, dy + r * d, dx + r * d, d);
}

/* Row sums in a fixed order: element j to accumulator j % 8, the 8 combined pairwise. */
#define ACC8_COMBINE(acc)                                                                          \
    ((((acc)[0] + (acc)[4]) + ((acc)[1] + (acc)[5])) + (((acc)[2] + (acc)[6]) + ((acc)[3] + (acc)[7])))

/* mean and 1/sqrt(var + eps) of a row (two passes: stable for large means) */
static void row_stats(const float *x, int64_t d, float eps, float *mean, float *rstd) {
    float acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= d; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += x[j + k];
    for (int k = 0; j < d; j++, k++) acc[k] += x[j];
    float mu = (ACC8_COMBINE(acc)) / (float)d;
    for (int k = 0; k < 8; k++) acc[k] = 0.0f;
    for (j = 0; j + 8 <= d; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += (x[j + k] - mu) * (x[j + k] - mu);
    for (int k = 0; j < d; j++, k++) acc[k] += (x[j] - mu) * (x[j] - mu);
    *mean = mu;
    *rstd = 1.0f / sqrtf((ACC8_COMBINE(acc)) / (float)d + eps);
}

static void layer_norm_scalar(const float *x, const float *gm, const float *bt, float *y,
                              int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d, mu, rs;
        row_stats(xr, d, eps, &mu, &rs);
        for (int64_t j = 0; j < d; j++) {
            float v = (xr[j] - mu) * rs;
            if (gm) v *= gm[j];
            if (bt) v += bt[j];
            yr[j] = v;
        }
    }
}

static void layer_norm_stats_scalar(const float *x, int64_t rows, int64_t d, float eps, float *mean,
                                    float *rstd) {
    for (int64_t r = 0; r < rows; r++)
        row_stats(x + r * d, d, eps, &mean[r], &rstd[r]);
}

static void layer_norm_back_scalar(const float *x, const float *gm, const float *dy, float *dx,
                                   int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d, *gr = dy + r * d;
        float *dr = dx + r * d, mu, rs, ag[8] = {0}, agx[8] = {0};
        row_stats(xr, d, eps, &mu, &rs);
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
            dr[j] = rs * (gj - sg - (xr[j] - mu) * rs * sgx);
        }
    }
}

/* Cross-entropy rows (vocabularies: thousands of values). The row's max m, sum of exp(x - m)
 * (returned) and, with sum_x, plain sum: element k into accumulator k % 8, the 8 combined
 * pairwise (ACC8_COMBINE, as the layer norm's sums); entries at -inf add 0. With e, the exps
 * are stored there too (a long softmax row's; e may be x). (The vector code sums in another
 * order: the same values to within rounding.) */
static float ce_sumexp_scalar(const float *x, int64_t n, float *max, float *sum_x, float *e) {
    float m = -INFINITY, acc[8] = {0}, accx[8] = {0};
    for (int64_t k = 0; k < n; k++)
        m = x[k] > m ? x[k] : m;
    for (int64_t k = 0; k < n; k++) {
        const float xk = x[k], ek = tg_zero_if_neg_inf(xk, tg_fast_expf(xk - m));
        acc[k % 8] += ek;
        accx[k % 8] += xk;
        if (e) e[k] = ek;
    }
    if (sum_x) *sum_x = ACC8_COMBINE(accx);
    *max = m;
    return ACC8_COMBINE(acc);
}

/* y[k] = scale (exp(x[k] - m) inv - base): the cross-entropy's gradient row (before the
 * target's own term), inv = 1 / the sum of exps */
static void ce_grad_scalar(const float *x, int64_t n, float m, float inv, float scale, float base,
                           float *y) {
    for (int64_t k = 0; k < n; k++)
        y[k] = scale * (tg_zero_if_neg_inf(x[k], tg_fast_expf(x[k] - m)) * inv - base);
}

static void softmax_rows_scalar(const float *x, float *y, int64_t rows, int64_t d, bool log_out) {
    for (int64_t r = 0; r < rows; r++) softmax_row_scalar(x + r * d, y + r * d, d, log_out);
}
static float ce_sumexp_scalar4(const float *x, int64_t n, float *max, float *sum_x) {
    return ce_sumexp_scalar(x, n, max, sum_x, NULL);
}

const tg_cpu_vmath tg__cpu_vmath_portable = {
    .vexp = vexp_scalar,
    .vtanh = vtanh_scalar,
    .vgelu = vgelu_scalar,
    .vgelu_back = vgelu_back_scalar,
    .softmax_rows = softmax_rows_scalar,
    .softmax_back_rows = softmax_back_rows_scalar,
    .layer_norm = layer_norm_scalar,
    .layer_norm_back = layer_norm_back_scalar,
    .layer_norm_stats = layer_norm_stats_scalar,
    .ce_sumexp = ce_sumexp_scalar4,
    .ce_grad = ce_grad_scalar,
};
