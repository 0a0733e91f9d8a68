/* CPU kernels of the banded attention ops (core/ops/band.c): band_scores, band_mix and
 * band_mix_t. Every output row [b, i, :] is computed whole by one member (rows split in static
 * blocks), so results do not depend on the thread count. Each costs O(r·n·d): a row touches
 * only the 2r+1 key rows of its window. */
#include "backends/cpu/cpu-impl.h"

/* Q_i · K_t in a fixed order: element c goes to accumulator c % 8, combined pairwise at the end
 * (8 independent sums vectorise; one running sum would stay serial under float rules). */
static inline float dot8(const float *a, const float *b, int64_t n) {
    float acc[8] = {0};
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        for (int k = 0; k < 8; k++) acc[k] += a[c + k] * b[c + k];
    for (int k = 0; c < n; c++, k++) acc[k] += a[c] * b[c];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* y += s x over d channels */
static inline void axpy(float *restrict y, float s, const float *restrict x, int64_t d) {
    for (int64_t c = 0; c < d; c++) y[c] += s * x[c];
}

/* The operands of every band kernel: a, b the two inputs, r and the window w = 2r+1. */
#define BAND_ARGS                                   \
    const tg_tensor *a = t->src[0], *b = t->src[1]; \
    int nd = t->ndim;                               \
    int64_t r = t->p.band.r, w = 2 * r + 1;         \
    const float *A = a->data, *Bv = b->data;        \
    float *o = t->data

/* A = Q [.., n, dk], B = K [.., m, dk], o = S [.., n, w] */
static tg_status band_scores(tg_cpu_par *p, tg_tensor *t) {
    BAND_ARGS;
    int64_t n = a->shape[nd - 2], dk = a->shape[nd - 1], m = b->shape[nd - 2];
    int64_t rows = tg_tensor_numel(t) / w;
    float fill = t->p.band.fill;
    TG_CPU_FOR(p, row, rows, rows * w * (dk + 1) > TG_PAR_MIN) {
        int64_t bi = row / n, i = row % n;
        const float *q = A + row * dk, *k = Bv + bi * m * dk;
        float *s = o + row * w;
        for (int64_t j = 0; j < w; j++) {
            int64_t tk = i + j - r;
            s[j] = (tk < 0 || tk >= m) ? fill : dot8(q, k + tk * dk, dk);
        }
    }
    return TG_OK;
}

/* A = P [.., n, w], B = V [.., m, dv], o = O [.., n, dv] */
static tg_status band_mix(tg_cpu_par *p, tg_tensor *t) {
    BAND_ARGS;
    int64_t n = a->shape[nd - 2], m = b->shape[nd - 2], dv = b->shape[nd - 1];
    int64_t rows = tg_tensor_numel(a) / w;
    TG_CPU_FOR(p, row, rows, rows * w * (dv + 1) > TG_PAR_MIN) {
        int64_t bi = row / n, i = row % n;
        const float *pr = A + row * w, *v = Bv + bi * m * dv;
        float *y = o + row * dv;
        for (int64_t c = 0; c < dv; c++) y[c] = 0.0f;
        /* only the columns whose key exists: the others may hold -inf */
        int64_t j0 = r - i > 0 ? r - i : 0, j1 = m - 1 - i + r < w - 1 ? m - 1 - i + r : w - 1;
        for (int64_t j = j0; j <= j1; j++) axpy(y, pr[j], v + (i + j - r) * dv, dv);
    }
    return TG_OK;
}

/* A [.., n, w], B = X [.., n, d], o = Y [.., m, d] */
static tg_status band_mix_t(tg_cpu_par *p, tg_tensor *t) {
    BAND_ARGS;
    int64_t n = a->shape[nd - 2], d = b->shape[nd - 1], m = t->shape[nd - 2];
    int64_t rows = d ? tg_tensor_numel(t) / d : 0;
    TG_CPU_FOR(p, row, rows, rows * w * (d + 1) > TG_PAR_MIN) {
        int64_t bi = row / m, tk = row % m;
        const float *ab = A + bi * n * w, *x = Bv + bi * n * d;
        float *y = o + row * d;
        for (int64_t c = 0; c < d; c++) y[c] = 0.0f;
        /* query rows i = tk + r - j in [0, n) */
        int64_t j0 = tk + r - (n - 1) > 0 ? tk + r - (n - 1) : 0, j1 = tk + r < w - 1 ? tk + r : w - 1;
        for (int64_t j = j0; j <= j1; j++) {
            int64_t i = tk + r - j;
            axpy(y, ab[i * w + j], x + i * d, d);
        }
    }
    return TG_OK;
}

/* The family's kernels, registered by op. */
TG__CPU_KERNELS(band) = {
    [TG_OP_BAND_SCORES] = band_scores,
    [TG_OP_BAND_MIX] = band_mix,
    [TG_OP_BAND_MIX_T] = band_mix_t,
};
TG__CPU_KERNELS_CHECK(band);
