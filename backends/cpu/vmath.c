/* Vector exp, tanh, GELU, row softmax, layer norm and the cross-entropy's row sums of the CPU
 * backend: AVX2+FMA polynomials chosen at run time (exp and GELU written once for AVX2 and
 * AVX-512F: vmath_lanes.h; GELU and short softmax rows run 16 lanes wide where the CPU has
 * AVX-512F), portable scalar code otherwise (vmath.h states the error bounds).
 *
 * exp: Cody-Waite. n = round(x / ln 2), r = x - n ln 2 with ln 2 split in two constants so
 * that n·C1 is exact, exp(r) = 1 + r P(r) with P a minimax polynomial of degree 5 on |r| <=
 * ln2 / 2 (six multiply-adds: cpu-impl.h), times 2^n built in the exponent bits. x is clamped
 * to [-87.3, 88.37] first: n stays in [-126, 127] and the result finite and normal.
 * tanh: for |x| < 0.625 the odd polynomial x + x^3 Q(x^2) (Cephes tanhf); above it
 * 1 - 2 / (exp(2|x|) + 1) with the sign of x, |x| clamped to 9 (tanh is 1 in float there).
 * GELU (tanh form): with u = sqrt(2/pi) (x + 0.044715 x^3) and e = exp(-2u) = 2^z,
 *   gelu(x) = x s,  gelu'(x) = s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 · 0.044715 x^2),
 * with s = 1 / (1 + e) = (1 + tanh u) / 2 and 1 - s = e s: written with exp rather than tanh,
 * free of the cancellation in 1 + tanh u for negative x; u is computed from x clamped to
 * [-10, 10], where s is already 1 or < 1e-37, so that x^3 cannot overflow. z = -2u log2(e) is
 * one multiply-add and a product of x (the constants folded), and 2^z needs neither exp's
 * clamp nor its two-constant reduction: |z| < 126 and z minus z rounded to eighths is exact
 * (EXP2_C1's comment: a table of 2^(j/8) and a cubic). Against an exp of -2u this is 16 vector
 * operations before the division instead of 24, at the same accuracy; 2^z's four multiplies
 * (where a degree-6 polynomial took six) make GELU and GELU' 1.1x as fast on a Zen 4 core
 * (docs/log/2026-12-04.md).
 */
#include "backends/cpu/vmath.h"

#include <math.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/isa.h"

#if TG_CPU_X86
#include <immintrin.h>
#define AVX2 TG_TARGET_AVX2
#endif

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f
#define LOG2E 1.44269504088896341f
/* z = -2u log2(e) = xc (GELU_Z1 + GELU_Z3 xc^2): exp(-2u) = 2^z with the constants folded */
#define GELU_Z1 (-2.0f * GELU_K * LOG2E)
#define GELU_Z3 (-2.0f * GELU_K * GELU_C * LOG2E)

/* 2^z = 2^n 2^(j/8) 2^r: z rounded to eighths by adding 1.5 * 2^20 (t's last bit is then 1/8,
 * so t's low bits hold 8n + j), r = z - that exact and |r| <= 1/16; 2^r = 1 + r (C1 + r (C2 +
 * r C3)), a relative fit on [-1/16, 1/16] (largest error ~2.5e-8 before rounding), and 2^(j/8)
 * rounded to float (relative error <= 2^-24.9), twice over so that a 16-lane permute can index
 * it with 4 bits. Three multiply-adds and a product where a degree-6 polynomial on [-1/2, 1/2]
 * took six. */
#define EXP2_MAGIC 1572864.0f
#define EXP2_C3 5.5496632348e-2f
#define EXP2_C2 2.4025770847e-1f
#define EXP2_C1 6.9314721312e-1f
/* clang-format off */
static const float EXP2_T[16] __attribute__((aligned(64))) = {
    1.0f, 1.090507746f, 1.189207077f, 1.296839595f, 1.414213538f, 1.542210817f, 1.681792855f, 1.834008098f,
    1.0f, 1.090507746f, 1.189207077f, 1.296839595f, 1.414213538f, 1.542210817f, 1.681792855f, 1.834008098f};
/* clang-format on */

/* tanhf's polynomial on |x| < 0.625 (Cephes): tanh x = x + x^3 Q(x^2) */
#define TANH_Q0 -5.70498872745e-3f
#define TANH_Q1 2.06390887954e-2f
#define TANH_Q2 -5.37397155531e-2f
#define TANH_Q3 1.33314422036e-1f
#define TANH_Q4 -3.33332819422e-1f

/* ---- the scalar path (exp is tg_fast_expf of cpu-impl.h) ---- */

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

/* Rows up to SHORT_ROW_MAX values (attention over a few keys) sum their exps in one running
 * float; longer ones (vocabularies, attention over many keys) take the cross-entropy's sums, as
 * the vector code does (softmax_long_avx2). */
enum { SHORT_ROW_MAX = 32 };

static float ce_sumexp_scalar(const float *x, int64_t n, float *max, float *sum_x, float *e);

/* The all-masked row (every entry -inf): probabilities 0, log-probabilities -inf */
static void softmax_dead_row(float *y, int64_t n, bool log_out) {
    for (int64_t j = 0; j < n; j++)
        y[j] = log_out ? -INFINITY : 0.0f;
}

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

/* softmax backward of one row: dx = y (dy - sum(dy y)). The dot product in a fixed order:
 * serially for rows shorter than 16 (attention over ~10 keys: 8 accumulators cost more to
 * set up and combine), else element j to accumulator j % 8 and the 8 combined pairwise. */
enum { DOT_SERIAL_BELOW = 16 };
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

/* ---- the AVX2+FMA path ---- */

#if TG_CPU_X86
/* Lanes [0, k) on, 0 <= k <= 8: for maskload/maskstore of a row's tail. */
AVX2 static inline __m256i lanes(int64_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* exp, GELU and GELU' for AVX2 and AVX-512F from one template (vmath_lanes.h, which
 * undefines these names again) */
#define FN AVX2
#define SFX avx2
#define V __m256
#define W 8
#define VSET1 _mm256_set1_ps
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMUL _mm256_mul_ps
#define VDIV _mm256_div_ps
#define VMIN _mm256_min_ps
#define VMAX _mm256_max_ps
#define VFMADD _mm256_fmadd_ps
#define VFNMADD _mm256_fnmadd_ps
#define VADDI _mm256_add_epi32
#define VSLLI23(a) _mm256_slli_epi32(a, 23)
/* 2^n built in the exponent bits (plus 127 << 23, the bits of 1.0f) and multiplied in */
#define VSCALE2N(p, t, n) VMUL(p, VASF(VADDI(VSLLI23(VASI(t)), VASI(VSET1(1.0f)))))
#define VSRLI3(a) _mm256_srli_epi32(a, 3)
#define VTAB8(i) _mm256_permutevar8x32_ps(_mm256_load_ps(EXP2_T), i)
#define VASI _mm256_castps_si256
#define VASF _mm256_castsi256_ps
#define VLOAD _mm256_loadu_ps
#define VSTORE _mm256_storeu_ps
#define VLOADN(p, k) _mm256_maskload_ps(p, lanes(k))
#define VSTOREN(p, k, v) _mm256_maskstore_ps(p, lanes(k), v)
#include "backends/cpu/vmath_lanes.h"

#define FN TG_TARGET_AVX512
#define SFX avx512
#define V __m512
#define W 16
#define VSET1 _mm512_set1_ps
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMUL _mm512_mul_ps
#define VDIV _mm512_div_ps
#define VMIN _mm512_min_ps
#define VMAX _mm512_max_ps
#define VFMADD _mm512_fmadd_ps
#define VFNMADD _mm512_fnmadd_ps
#define VADDI _mm512_add_epi32
#define VSLLI23(a) _mm512_slli_epi32(a, 23)
/* VSCALEFPS: p·2^n rounded once, as the multiply by 2^n's bits (a normal float for these n)
 * rounds it: the same bits in one operation instead of three */
#define VSCALE2N(p, t, n) _mm512_scalef_ps(p, n)
#define VSRLI3(a) _mm512_srli_epi32(a, 3)
#define VTAB8(i) _mm512_permutexvar_ps(i, _mm512_load_ps(EXP2_T)) /* 4 index bits: T twice */
#define VASI _mm512_castps_si512
#define VASF _mm512_castsi512_ps
#define VLOAD _mm512_loadu_ps
#define VSTORE _mm512_storeu_ps
#define VLOADN(p, k) _mm512_maskz_loadu_ps((__mmask16)((1u << (k)) - 1), p)
#define VSTOREN(p, k, v) _mm512_mask_storeu_ps(p, (__mmask16)((1u << (k)) - 1), v)
#include "backends/cpu/vmath_lanes.h"

AVX2 static inline __m256 tanh8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign, x), z = _mm256_mul_ps(x, x);
    __m256 q = _mm256_set1_ps(TANH_Q0);
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(TANH_Q1));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(TANH_Q2));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(TANH_Q3));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(TANH_Q4));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(x, z), q, x);
    __m256 e = exp_avx2(_mm256_mul_ps(_mm256_set1_ps(2.0f), clamp_avx2(ax, 0.0f, 9.0f)));
    __m256 big = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                               _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    big = _mm256_or_ps(big, _mm256_and_ps(x, sign));
    return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

/* Whole vectors, then the tail with a masked load and store through the same code: every
 * element's result depends on its input alone, wherever a thread's share starts. */
#define MAP8(NAME, F)                                                                        \
    AVX2 static void NAME(const float *x, float *y, int64_t n) {                            \
        int64_t i = 0;                                                                       \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i)));      \
        if (i < n) {                                                                         \
            __m256i m = lanes(n - i);                                                        \
            _mm256_maskstore_ps(y + i, m, F(_mm256_maskload_ps(x + i, m)));                  \
        }                                                                                    \
    }
MAP8(vexp_avx2, exp_avx2)
MAP8(vtanh_avx2, tanh8)

AVX2 static inline float hmax8(__m256 v) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

AVX2 static inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* Element j of a row at lane j % 8 of vector j / 8; lanes past the end read as -inf (the
 * identity of max, and exp gives them 0). */
AVX2 static inline __m256 load_row(const float *x, int64_t j, int64_t d) {
    if (j + 8 <= d) return _mm256_loadu_ps(x + j);
    __m256i m = lanes(d - j);
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(x + j, m), _mm256_castsi256_ps(m));
}

AVX2 static inline void store_row(float *y, int64_t j, int64_t d, __m256 v) {
    if (j + 8 <= d) _mm256_storeu_ps(y + j, v);
    else _mm256_maskstore_ps(y + j, lanes(d - j), v);
}

/* One row of up to SHORT_ROW_MAX values in vectors of 8, exps stored then scaled; sums over
 * lanes j % 8, combined as hsum8 does. */
AVX2 static inline void softmax_row_avx2(const float *x, float *y, int64_t d, bool log_out) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 vm = ninf;
    for (int64_t j = 0; j < d; j += 8) vm = _mm256_max_ps(load_row(x, j, d), vm); /* NaN skipped */
    float m = hmax8(vm);
    if (m == -INFINITY) {
        softmax_dead_row(y, d, log_out);
        return;
    }
    const __m256 mv = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < d; j += 8) {
        __m256 v = load_row(x, j, d);
        __m256 e =
            _mm256_and_ps(exp_le0_avx2(_mm256_sub_ps(v, mv)), _mm256_cmp_ps(v, ninf, _CMP_NEQ_UQ));
        acc = _mm256_add_ps(acc, e);
        if (!log_out) store_row(y, j, d, e);
    }
    float s = hsum8(acc);
    if (log_out) {
        const __m256 lse = _mm256_set1_ps(m + logf(s));
        for (int64_t j = 0; j < d; j += 8) store_row(y, j, d, _mm256_sub_ps(load_row(x, j, d), lse));
    } else {
        const __m256 inv = _mm256_set1_ps(1.0f / s);
        for (int64_t j = 0; j < d; j += 8) {
            __m256i m8 = lanes(d - j);
            __m256 v = j + 8 <= d ? _mm256_loadu_ps(y + j) : _mm256_maskload_ps(y + j, m8);
            store_row(y, j, d, _mm256_mul_ps(v, inv));
        }
    }
}

/* Short rows (attention over 10–32 keys) fill a vector poorly and pay the horizontal max and
 * sum, the masks and the branches once per row: 8 softmax rows at a time are instead
 * transposed in registers so that lane r holds row r and every operation is vertical over the
 * columns. The arithmetic is softmax_row_avx2's, operation for operation (the same max, exp,
 * lane-j % 8 partial sums combined in hsum8's order, 1 / s, m + logf(s)), so a row's result is
 * bit-identical whichever path takes it: results do not depend on how threads split rows (rows
 * of up to SHORT_ROW_MAX values; longer ones take softmax_long_avx2). */

AVX2 static inline void transpose8(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* The block code is inlined once per row length d (softmax_rows_avx2's switch), so that d and
 * W = d rounded up to 8 are constants, the loops unroll and the columns stay in registers:
 * ~1.3x faster than one generic instance at d 10–16, for ~60 KB of code. */
#define INLINE inline __attribute__((always_inline))

/* The 8 values at p of a row's segment starting at column j (of W): the last segment masked
 * to the row's tm lanes */
AVX2 static INLINE __m256 load_seg8(const float *p, int j, int W, __m256i tm) {
    return j + 8 < W ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tm);
}

/* c[j] = column j of the 8 rows at x, j < W (columns d..W-1 unused). Whole-segment loads may
 * run into the next rows of the block; the last segment is a masked load, so nothing outside
 * the block's 8d floats (another thread's rows) is read. */
AVX2 static INLINE void load_cols8(const float *x, int64_t d, int W, __m256 *c) {
    __m256i tm = lanes(d - (W - 8));
    for (int j = 0; j < W; j += 8) {
        __m256 t[8];
        for (int r = 0; r < 8; r++)
            t[r] = load_seg8(x + r * d + j, j, W, tm);
        transpose8(t);
        for (int k = 0; k < 8; k++) c[j + k] = t[k];
    }
}

/* The inverse, rows stored in order: a whole-vector store running into the next row is
 * overwritten by that row's own store; stores that would leave the block store only the row's
 * lanes. */
AVX2 static INLINE void store_cols8(float *y, int64_t d, int W, __m256 *c) {
    for (int j = 0; j < W; j += 8) transpose8(c + j); /* c[j + r]: row r, columns j..j+7 */
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < W; j += 8) {
            int64_t off = r * d + j;
            if (off + 8 <= 8 * d) {
                _mm256_storeu_ps(y + off, c[j + r]);
            } else {
                float t[8];
                _mm256_storeu_ps(t, c[j + r]);
                for (int64_t k = 0; k < 8 && j + k < d; k++) y[off + k] = t[k];
            }
        }
}

AVX2 static INLINE void softmax_8rows_avx2(const float *x, float *y, int64_t d, int W, bool log_out) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 c[SHORT_ROW_MAX], acc[8];
    load_cols8(x, d, W, c);
    __m256 m = ninf;
    for (int j = 0; j < d; j++) m = _mm256_max_ps(c[j], m); /* NaN skipped */
    for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_ps();
    for (int j = 0; j < d; j++) {
        __m256 e = _mm256_and_ps(exp_le0_avx2(_mm256_sub_ps(c[j], m)),
                                 _mm256_cmp_ps(c[j], ninf, _CMP_NEQ_UQ));
        acc[j % 8] = _mm256_add_ps(acc[j % 8], e);
        if (!log_out) c[j] = e;
    }
    /* hsum8's order: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) */
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                             _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
    __m256 dead = _mm256_cmp_ps(m, ninf, _CMP_EQ_OQ); /* all -inf rows: 0 (log: -inf) */
    if (log_out) {
        float mf[8], sf[8];
        _mm256_storeu_ps(mf, m);
        _mm256_storeu_ps(sf, s);
        for (int k = 0; k < 8; k++) mf[k] += logf(sf[k]);
        __m256 lse = _mm256_loadu_ps(mf);
        for (int j = 0; j < d; j++) c[j] = _mm256_blendv_ps(_mm256_sub_ps(c[j], lse), ninf, dead);
    } else {
        __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), s);
        for (int j = 0; j < d; j++) c[j] = _mm256_andnot_ps(dead, _mm256_mul_ps(c[j], inv));
    }
    store_cols8(y, d, W, c);
}

AVX2 static void softmax_long_avx2(const float *x, float *y, int64_t d, bool log_out);

AVX2 static void softmax_rows_avx2(const float *x, float *y, int64_t rows, int64_t d, bool log_out) {
    if (d > SHORT_ROW_MAX) {
        for (int64_t r = 0; r < rows; r++)
            softmax_long_avx2(x + r * d, y + r * d, d, log_out);
        return;
    }
    int64_t r = 0;
    /* one instance per row length (constant D), so that every loop unrolls */
#define BLOCKS(D)                                                                                  \
    case D:                                                                                        \
        for (; r + 8 <= rows; r += 8) softmax_8rows_avx2(x + r * D, y + r * D, D, (D + 7) / 8 * 8, false); \
        break
    switch (log_out ? 0 : d) { /* log-softmax rows of up to 32 are rare: one by one */
        BLOCKS(1); BLOCKS(2); BLOCKS(3); BLOCKS(4); BLOCKS(5); BLOCKS(6); BLOCKS(7); BLOCKS(8);
        BLOCKS(9); BLOCKS(10); BLOCKS(11); BLOCKS(12); BLOCKS(13); BLOCKS(14); BLOCKS(15); BLOCKS(16);
        BLOCKS(17); BLOCKS(18); BLOCKS(19); BLOCKS(20); BLOCKS(21); BLOCKS(22); BLOCKS(23); BLOCKS(24);
        BLOCKS(25); BLOCKS(26); BLOCKS(27); BLOCKS(28); BLOCKS(29); BLOCKS(30); BLOCKS(31); BLOCKS(32);
    default: break;
    }
#undef BLOCKS
    for (; r < rows; r++) softmax_row_avx2(x + r * d, y + r * d, d, log_out);
}

/* With AVX-512F (isa.h), rows of 9-32 values (attention over 10-32 keys) 16 at a time: each
 * row is one or two 16-lane vectors, transposed so that lane r holds row r, and every step is
 * softmax_8rows_avx2's with twice the lanes (the same max, exp, lane-j % 8 partial sums in
 * hsum8's order, 1 / s): the same bits. A row's 16-value load or store may run into the next
 * rows of the block (stores in row order, so each row's own store lands last); where it would
 * leave the block it is masked, so nothing outside the block is touched. */
#define AVX512 TG_TARGET_AVX512

/* r[i] lane j <- r[j] lane i: pairs of rows interleaved, then groups of 4 within each 128-bit
 * lane, then the 128-bit lanes exchanged in two steps */
AVX512 static INLINE void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xDD);
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xDD);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
        r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xDD);
    }
}

/* The 16 values of row r at columns j..j+15 of a block of 16 rows of d (lanes past the row's end
 * hold the next row's values, or 0 at the block's end). */
AVX512 static INLINE __m512 load16(const float *x, int d, int r, int j) {
    int off = r * d + j;
    if (off + 16 <= 16 * d) return _mm512_loadu_ps(x + off);
    return _mm512_maskz_loadu_ps((__mmask16)((1u << (16 * d - off)) - 1), x + off);
}
AVX512 static INLINE void store16(float *y, int d, int r, int j, __m512 v) {
    int off = r * d + j;
    if (off + 16 <= 16 * d)
        _mm512_storeu_ps(y + off, v);
    else
        _mm512_mask_storeu_ps(y + off, (__mmask16)((1u << (16 * d - off)) - 1), v);
}

/* c[j], j < W = d rounded up to 16: column j of the 16 rows at x, and the inverse (rows
 * stored in order; columns d..W-1 are written as whatever c holds there, then overwritten by
 * the next row's own stores) */
AVX512 static INLINE void load_cols16(const float *x, int d, int W, __m512 *c) {
    for (int j = 0; j < W; j += 16) {
        for (int r = 0; r < 16; r++)
            c[j + r] = load16(x, d, r, j);
        transpose16(c + j);
    }
}
AVX512 static INLINE void store_cols16(float *y, int d, int W, __m512 *c) {
    for (int j = 0; j < W; j += 16)
        transpose16(c + j); /* c[j + r]: row r, columns j..j+15 */
    for (int r = 0; r < 16; r++)
        for (int j = 0; j < W; j += 16)
            store16(y, d, r, j, c[j + r]);
}

/* nb (1 or 2) blocks of 16 rows at x: with two (rows of up to 16 values), the blocks' long
 * chains of dependent steps (the max, exp, the division) interleave, 1.07-1.13x one block at a
 * time on an Intel Xeon core (docs/log/2026-12-05.md). */
AVX512 static INLINE void softmax_16rows(const float *x, float *y, int d, int W, int nb) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 c[2][SHORT_ROW_MAX], acc[2][8], m[2], inv[2];
    __mmask16 alive[2];
    for (int b = 0; b < nb; b++) {
        load_cols16(x + b * 16 * d, d, W, c[b]);
        m[b] = ninf;
        for (int k = 0; k < 8; k++)
            acc[b][k] = _mm512_setzero_ps();
    }
    for (int j = 0; j < d; j++)
        for (int b = 0; b < nb; b++)
            m[b] = _mm512_max_ps(c[b][j], m[b]); /* NaN skipped */
    for (int j = 0; j < d; j++)
        for (int b = 0; b < nb; b++) {
            __mmask16 live = _mm512_cmp_ps_mask(c[b][j], ninf, _CMP_NEQ_UQ);
            c[b][j] = _mm512_maskz_mov_ps(live, exp_le0_avx512(_mm512_sub_ps(c[b][j], m[b])));
            acc[b][j % 8] = _mm512_add_ps(acc[b][j % 8], c[b][j]);
        }
    for (int b = 0; b < nb; b++) {
        __m512 *a = acc[b];
        __m512 s =
            _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                          _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])));
        alive[b] = _mm512_cmp_ps_mask(m[b], ninf, _CMP_NEQ_OQ); /* all -inf rows: 0 */
        inv[b] = _mm512_div_ps(_mm512_set1_ps(1.0f), s);
    }
    for (int j = 0; j < d; j++)
        for (int b = 0; b < nb; b++)
            c[b][j] = _mm512_maskz_mul_ps(alive[b], c[b][j], inv[b]);
    for (int b = 0; b < nb; b++) {
        for (int j = d; j < W; j++)
            c[b][j] = _mm512_setzero_ps();
        store_cols16(y + b * 16 * d, d, W, c[b]);
    }
}

AVX512 static void softmax_long_avx512(const float *x, float *y, int64_t d, bool log_out);

AVX512 static void softmax_rows_avx512(const float *x, float *y, int64_t rows, int64_t d,
                                       bool log_out) {
    if (d > SHORT_ROW_MAX) {
        for (int64_t r = 0; r < rows; r++)
            softmax_long_avx512(x + r * d, y + r * d, d, log_out);
        return;
    }
    int64_t r = 0;
#define BLOCKS16(D)                                                                                \
    case D:                                                                                        \
        for (; D <= 16 && r + 32 <= rows; r += 32)                                                 \
            softmax_16rows(x + r * D, y + r * D, D, 16, 2);                                        \
        for (; r + 16 <= rows; r += 16)                                                            \
            softmax_16rows(x + r * D, y + r * D, D, (D + 15) / 16 * 16, 1);                        \
        break
    switch (log_out ? 0 : d) {
        /* clang-format off */
        BLOCKS16(9); BLOCKS16(10); BLOCKS16(11); BLOCKS16(12); BLOCKS16(13); BLOCKS16(14);
        BLOCKS16(15); BLOCKS16(16); BLOCKS16(17); BLOCKS16(18); BLOCKS16(19); BLOCKS16(20);
        BLOCKS16(21); BLOCKS16(22); BLOCKS16(23); BLOCKS16(24); BLOCKS16(25); BLOCKS16(26);
        BLOCKS16(27); BLOCKS16(28); BLOCKS16(29); BLOCKS16(30); BLOCKS16(31); BLOCKS16(32);
        /* clang-format on */
    default:
        break;
    }
#undef BLOCKS16
    softmax_rows_avx2(x + r * d, y + r * d, rows - r, d, log_out);
}
#undef AVX512

/* softmax backward, the scalar row code's arithmetic operation for operation: products rounded
 * before they are added (no fused multiply-add: the barrier keeps the compiler from contracting
 * them), the serial (rows under 16) or j % 8 order of the dot product, then y (dy - s).
 * Bit-identical to softmax_back_row_scalar, which takes the rows a block leaves over. Only the
 * sums need the rows transposed; dx is computed in memory order (below): 1.4-2.2x the blocks
 * that transposed y, dy and dx on an Intel Xeon core (docs/log/2026-12-05.md). */
AVX2 static INLINE __m256 mul_rounded(__m256 a, __m256 b) {
    __m256 p = _mm256_mul_ps(a, b);
    __asm__("" : "+x"(p));
    return p;
}

/* A block of R rows of d in memory order is d vectors of R values; lane l of vector k holds
 * value kR + l, of row (kR + l) / d = ix[kR + l]: the indices of a permute that spreads the
 * rows' sums (lane r: row r) over the block's values. */
static void row_of_lane(int32_t *ix, int d, int R) {
    for (int i = 0, row = 0, col = 0; i < d * R; i++) {
        ix[i] = row;
        if (++col == d) col = 0, row++;
    }
}

/* Rows shorter than 16, 8 at a time: the products dy·y of each row (one vector per 8 columns,
 * loaded as load_cols8 loads them) are transposed so that lane r holds row r and summed serially
 * over the columns; then dx = y (dy - s) over the block's 8d values in memory order, each
 * vector's sums spread to its values' rows by a permute. The scalar row code's operations in
 * its order: the same bits, with one set of transposes where transposing y, dy and dx took
 * three. */
AVX2 static INLINE void softmax_back_8rows_avx2(const float *y, const float *dy, float *dx,
                                                int64_t d, int W, const int32_t *ix) {
    __m256 c[SHORT_ROW_MAX], s = _mm256_setzero_ps();
    __m256i tm = lanes(d - (W - 8));
    for (int j = 0; j < W; j += 8) {
        for (int r = 0; r < 8; r++)
            c[j + r] = mul_rounded(load_seg8(dy + r * d + j, j, W, tm),
                                   load_seg8(y + r * d + j, j, W, tm));
        transpose8(c + j);
    }
    for (int j = 0; j < d; j++)
        s = _mm256_add_ps(s, c[j]);
    for (int k = 0; k < d; k++) {
        __m256 sk = _mm256_permutevar8x32_ps(s, _mm256_loadu_si256((const __m256i *)(ix + 8 * k)));
        __m256 vy = _mm256_loadu_ps(y + 8 * k);
        _mm256_storeu_ps(dx + 8 * k,
                         _mm256_mul_ps(vy, _mm256_sub_ps(_mm256_loadu_ps(dy + 8 * k), sk)));
    }
}

/* A row of 16 or more values: the scalar row code's accumulators acc[j % 8] are the lanes of
 * one vector (past the row's end masked loads add 0, which changes no sum: acc is never -0),
 * combined in its order, ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)): the same bits. */
AVX2 static inline void softmax_back_row_avx2(const float *y, const float *dy, float *dx,
                                              int64_t d) {
    __m256 acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= d; j += 8)
        acc = _mm256_add_ps(acc, mul_rounded(_mm256_loadu_ps(dy + j), _mm256_loadu_ps(y + j)));
    if (j < d) {
        __m256i m = lanes(d - j);
        acc = _mm256_add_ps(
            acc, mul_rounded(_mm256_maskload_ps(dy + j, m), _mm256_maskload_ps(y + j, m)));
    }
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    __m128 u = _mm_add_ps(t, _mm_shuffle_ps(t, t, 0xB1)); /* t0 + t1, _, t2 + t3, _ */
    const __m256 s = _mm256_set1_ps(_mm_cvtss_f32(_mm_add_ss(u, _mm_movehl_ps(u, u))));
    for (j = 0; j + 8 <= d; j += 8)
        _mm256_storeu_ps(dx + j, _mm256_mul_ps(_mm256_loadu_ps(y + j),
                                               _mm256_sub_ps(_mm256_loadu_ps(dy + j), s)));
    if (j < d) {
        __m256i m = lanes(d - j);
        __m256 v = _mm256_mul_ps(_mm256_maskload_ps(y + j, m),
                                 _mm256_sub_ps(_mm256_maskload_ps(dy + j, m), s));
        _mm256_maskstore_ps(dx + j, m, v);
    }
}

AVX2 static void softmax_back_rows_avx2(const float *y, const float *dy, float *dx, int64_t rows, int64_t d) {
    int64_t r = 0;
    if (d >= DOT_SERIAL_BELOW) {
        for (; r < rows; r++)
            softmax_back_row_avx2(y + r * d, dy + r * d, dx + r * d, d);
        return;
    }
    int32_t ix[8 * DOT_SERIAL_BELOW];
    if (rows >= 8) row_of_lane(ix, (int)d, 8);
#define BLOCKS(D)                                                                                  \
    case D:                                                                                        \
        for (; r + 8 <= rows; r += 8)                                                              \
            softmax_back_8rows_avx2(y + r * D, dy + r * D, dx + r * D, D, (D + 7) / 8 * 8, ix);    \
        break
    switch (d) {
        /* clang-format off */
        BLOCKS(1); BLOCKS(2); BLOCKS(3); BLOCKS(4); BLOCKS(5); BLOCKS(6); BLOCKS(7); BLOCKS(8);
        BLOCKS(9); BLOCKS(10); BLOCKS(11); BLOCKS(12); BLOCKS(13); BLOCKS(14); BLOCKS(15);
        /* clang-format on */
    default: break;
    }
#undef BLOCKS
    for (; r < rows; r++) softmax_back_row_scalar(y + r * d, dy + r * d, dx + r * d, d);
}

/* With AVX-512F, the backward's rows of 9-15 values 16 at a time, each row's products one
 * 16-lane vector: softmax_back_8rows_avx2's steps with twice the lanes, the same bits. */
#define AVX512 TG_TARGET_AVX512
AVX512 static INLINE __m512 mul_rounded16(__m512 a, __m512 b) {
    __m512 p = _mm512_mul_ps(a, b);
    __asm__("" : "+v"(p));
    return p;
}

AVX512 static INLINE void softmax_back_16rows(const float *y, const float *dy, float *dx, int d,
                                              const int32_t *ix) {
    __m512 c[16], s = _mm512_setzero_ps();
    for (int r = 0; r < 16; r++)
        c[r] = mul_rounded16(load16(dy, d, r, 0), load16(y, d, r, 0));
    transpose16(c);
    for (int j = 0; j < d; j++)
        s = _mm512_add_ps(s, c[j]);
    for (int k = 0; k < d; k++) {
        __m512 sk = _mm512_permutexvar_ps(_mm512_loadu_si512(ix + 16 * k), s);
        __m512 vy = _mm512_loadu_ps(y + 16 * k);
        _mm512_storeu_ps(dx + 16 * k,
                         _mm512_mul_ps(vy, _mm512_sub_ps(_mm512_loadu_ps(dy + 16 * k), sk)));
    }
}

AVX512 static void softmax_back_rows_avx512(const float *y, const float *dy, float *dx,
                                            int64_t rows, int64_t d) {
    int64_t r = 0;
    int32_t ix[16 * DOT_SERIAL_BELOW];
    if (rows >= 16 && d >= 9 && d < DOT_SERIAL_BELOW) row_of_lane(ix, (int)d, 16);
#define BLOCKS16(D)                                                                                \
    case D:                                                                                        \
        for (; r + 16 <= rows; r += 16)                                                            \
            softmax_back_16rows(y + r * D, dy + r * D, dx + r * D, D, ix);                         \
        break
    switch (d) {
        /* clang-format off */
        BLOCKS16(9); BLOCKS16(10); BLOCKS16(11); BLOCKS16(12); BLOCKS16(13); BLOCKS16(14);
        BLOCKS16(15);
        /* clang-format on */
    default:
        break;
    }
#undef BLOCKS16
    softmax_back_rows_avx2(y + r * d, dy + r * d, dx + r * d, rows - r, d);
}
#undef AVX512

/* Lanes of a row past d read as 0 (maskload); vmask() zeroes them after arithmetic. */
AVX2 static inline __m256 load0(const float *x, int64_t j, int64_t d) {
    return j + 8 <= d ? _mm256_loadu_ps(x + j) : _mm256_maskload_ps(x + j, lanes(d - j));
}
AVX2 static inline __m256 vmask(__m256 v, int64_t j, int64_t d) {
    return j + 8 <= d ? v : _mm256_and_ps(v, _mm256_castsi256_ps(lanes(d - j)));
}

/* The forward's four accumulators combined, (a0 + a1) + (a2 + a3), then across lanes; and
 * 1/sqrt(var + eps) from the sum of squares: one place for each, so that the 16-lane code
 * (layer_norm_avx512) ends its sums as the AVX2 code does */
AVX2 static inline float ln_sum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    return hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}
static inline float ln_rstd(float sum_sq, int64_t d, float eps) {
    return 1.0f / sqrtf(sum_sq / (float)d + eps);
}

/* Four accumulators (vectors 4i .. 4i + 3) so that the adds of a long row are four
 * independent chains: one chain is bound by the add latency (3-4 cycles per vector), and
 * with two a [1280, 256] layer norm measured 1.3x slower (docs/log/). Always inlined:
 * layer_norm_avx2 takes two rows' statistics side by side. */
AVX2 static inline __attribute__((always_inline)) void
row_stats_avx2(const float *x, int64_t d, float eps, float *mean, float *rstd) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t j = 0;
    for (; j + 32 <= d; j += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + j));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + j + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + j + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + j + 24));
    }
    for (; j < d; j += 8) a0 = _mm256_add_ps(a0, load0(x, j, d));
    float mu = ln_sum4(a0, a1, a2, a3) / (float)d;
    const __m256 mv = _mm256_set1_ps(mu);
    a0 = a1 = a2 = a3 = _mm256_setzero_ps();
    for (j = 0; j + 32 <= d; j += 32) {
        __m256 c0 = _mm256_sub_ps(_mm256_loadu_ps(x + j), mv);
        __m256 c1 = _mm256_sub_ps(_mm256_loadu_ps(x + j + 8), mv);
        __m256 c2 = _mm256_sub_ps(_mm256_loadu_ps(x + j + 16), mv);
        __m256 c3 = _mm256_sub_ps(_mm256_loadu_ps(x + j + 24), mv);
        a0 = _mm256_fmadd_ps(c0, c0, a0);
        a1 = _mm256_fmadd_ps(c1, c1, a1);
        a2 = _mm256_fmadd_ps(c2, c2, a2);
        a3 = _mm256_fmadd_ps(c3, c3, a3);
    }
    for (; j < d; j += 8) {
        __m256 c = vmask(_mm256_sub_ps(load0(x, j, d), mv), j, d);
        a0 = _mm256_fmadd_ps(c, c, a0);
    }
    *mean = mu;
    *rstd = ln_rstd(ln_sum4(a0, a1, a2, a3), d, eps);
}

/* y = (x - mu) rstd gamma + beta over the row's vectors from j on (gamma, beta or both may be
 * absent; lanes past d neither read nor written) */
AVX2 static inline void ln_normalize(const float *x, const float *gm, const float *bt, float *y,
                                     int64_t j, int64_t d, __m256 mv, __m256 rv) {
    for (; j < d; j += 8) {
        __m256 v = _mm256_mul_ps(_mm256_sub_ps(load0(x, j, d), mv), rv);
        if (gm && bt) {
            v = _mm256_fmadd_ps(v, load0(gm, j, d), load0(bt, j, d));
        } else {
            if (gm) v = _mm256_mul_ps(v, load0(gm, j, d));
            __asm__("" : "+x"(v)); /* rounded before beta's add (as lnb_load's g) */
            if (bt) v = _mm256_add_ps(v, load0(bt, j, d));
        }
        store_row(y, j, d, v);
    }
}

/* Rows in pairs: both rows' statistics side by side, then both rows normalised in one pass
 * over gamma and beta. A row's statistics are chains of dependent adds, two horizontal sums, a
 * division and a square root, which one row at a time left the core waiting on (~200 cycles a
 * row at d 256, 0.38 of a copy's rate in cache); two rows' chains side by side overlap, and the
 * normalising pass loads gamma and beta once for both: 0.81x the time at d 256, 0.88x at 512
 * (docs/log/2026-12-04.md). Each row's operations are its own, in its order: a row gives the same
 * bits alone or paired, wherever a thread's share of rows starts. */
AVX2 static void layer_norm_avx2(const float *x, const float *gm, const float *bt, float *y,
                                 int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; r += 2, x += 2 * d, y += 2 * d) {
        const bool two = r + 1 < rows;
        float mu[2], rs[2];
        row_stats_avx2(x, d, eps, &mu[0], &rs[0]);
        if (two) row_stats_avx2(x + d, d, eps, &mu[1], &rs[1]);
        const __m256 mv0 = _mm256_set1_ps(mu[0]), rv0 = _mm256_set1_ps(rs[0]);
        const __m256 mv1 = _mm256_set1_ps(two ? mu[1] : 0.0f),
                     rv1 = _mm256_set1_ps(two ? rs[1] : 0.0f);
        int64_t j = 0;
        if (gm && bt && two) /* the usual case: whole vectors without the tail's tests */
            for (; j + 8 <= d; j += 8) {
                const __m256 g = _mm256_loadu_ps(gm + j), b = _mm256_loadu_ps(bt + j);
                __m256 v0 = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv0), rv0);
                __m256 v1 = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + d + j), mv1), rv1);
                _mm256_storeu_ps(y + j, _mm256_fmadd_ps(v0, g, b));
                _mm256_storeu_ps(y + d + j, _mm256_fmadd_ps(v1, g, b));
            }
        ln_normalize(x, gm, bt, y, j, d, mv0, rv0);
        if (two) ln_normalize(x + d, gm, bt, y + d, j, d, mv1, rv1);
    }
}

/* g = dy gamma and c = x - mu of the vector at j (lanes past d: 0, as load0 and vmask give). g
 * is rounded (mul_rounded) before anything adds it: the compiler may otherwise fuse the product
 * into the add or subtract that uses it (GCC contracts by default), in some inlined copies and
 * not others — a row paired or alone then differed in its last bits under the sanitizers' -O2. */
AVX2 static inline void lnb_load(const float *x, const float *gm, const float *dy, int64_t j,
                                 int64_t d, __m256 mv, __m256 *g, __m256 *c) {
    *g = load0(dy, j, d);
    if (gm) *g = mul_rounded(*g, load0(gm, j, d));
    *c = vmask(_mm256_sub_ps(load0(x, j, d), mv), j, d);
}

/* The backward's first two passes over a row, the mean and then three sums together (sum g xh
 * = rstd sum g (x - mu) needs only the mean): s[0] = sum (x - mu)^2, s[1] = sum g,
 * s[2] = sum g (x - mu). Two vectors per step into two named accumulators each (an array
 * indexed by the step's parity lived on the stack: every add went through memory). Always
 * inlined: layer_norm_back_avx2 takes two rows' sums side by side, as the forward takes their
 * statistics. */
AVX2 static inline __attribute__((always_inline)) void
lnb_sums(const float *x, const float *gm, const float *dy, int64_t d, float *mu, float s[3]) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 a0 = zero, a1 = zero;
    int64_t j = 0;
    for (; j + 16 <= d; j += 16) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + j));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + j + 8));
    }
    for (; j < d; j += 8)
        a0 = _mm256_add_ps(a0, load0(x, j, d));
    *mu = hsum8(_mm256_add_ps(a0, a1)) / (float)d;
    const __m256 mv = _mm256_set1_ps(*mu);
    __m256 ac0 = zero, ac1 = zero, ag0 = zero, ag1 = zero, agc0 = zero, agc1 = zero, g, c;
    for (j = 0; j + 16 <= d; j += 16) {
        lnb_load(x, gm, dy, j, d, mv, &g, &c);
        ac0 = _mm256_fmadd_ps(c, c, ac0);
        ag0 = _mm256_add_ps(ag0, g);
        agc0 = _mm256_fmadd_ps(g, c, agc0);
        lnb_load(x, gm, dy, j + 8, d, mv, &g, &c);
        ac1 = _mm256_fmadd_ps(c, c, ac1);
        ag1 = _mm256_add_ps(ag1, g);
        agc1 = _mm256_fmadd_ps(g, c, agc1);
    }
    for (; j < d; j += 8) {
        lnb_load(x, gm, dy, j, d, mv, &g, &c);
        ac0 = _mm256_fmadd_ps(c, c, ac0);
        ag0 = _mm256_add_ps(ag0, g);
        agc0 = _mm256_fmadd_ps(g, c, agc0);
    }
    s[0] = hsum8(_mm256_add_ps(ac0, ac1));
    s[1] = hsum8(_mm256_add_ps(ag0, ag1));
    s[2] = hsum8(_mm256_add_ps(agc0, agc1));
}

/* dx of one row's vectors from j on, from its mean and lnb_sums' sums: dx = rstd (g - mean(g)
 * - xh mean(g xh)), written as rv (g - sg - c sgc) */
typedef struct {
    __m256 mv, rv, sg, sgc;
} lnb_coef;

AVX2 static inline lnb_coef lnb_coefs(float mu, const float s[3], int64_t d, float eps) {
    const float rs = ln_rstd(s[0], d, eps);
    /* xh sgx with xh = c rs and sgx = rs sum(g c) / d: c (rs^2 sum(g c) / d) */
    return (lnb_coef){_mm256_set1_ps(mu), _mm256_set1_ps(rs), _mm256_set1_ps(s[1] / (float)d),
                      _mm256_set1_ps(rs * rs * (s[2] / (float)d))};
}

AVX2 static inline __m256 lnb_dx(__m256 g, __m256 c, lnb_coef k) {
    return _mm256_mul_ps(k.rv, _mm256_fnmadd_ps(c, k.sgc, _mm256_sub_ps(g, k.sg)));
}

AVX2 static inline void lnb_rest(const float *x, const float *gm, const float *dy, float *dx,
                                 int64_t j, int64_t d, lnb_coef k) {
    __m256 g, c;
    for (; j < d; j += 8) {
        lnb_load(x, gm, dy, j, d, k.mv, &g, &c);
        store_row(dx, j, d, lnb_dx(g, c, k));
    }
}

/* Three passes over a row instead of four (lnb_sums, then dx); rows in pairs, as in the
 * forward: both rows' sums side by side, then both rows' dx in one pass over gamma (0.90x the
 * time at d 256, 0.92x at 512), the same bits alone or paired. A lone last row's second set of
 * coefficients is computed from placeholder sums and not used. */
AVX2 static void layer_norm_back_avx2(const float *x, const float *gm, const float *dy, float *dx,
                                      int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; r += 2, x += 2 * d, dy += 2 * d, dx += 2 * d) {
        const bool two = r + 1 < rows;
        float mu[2], sums[2][3] = {{1.0f, 0.0f, 0.0f}, {1.0f, 0.0f, 0.0f}};
        lnb_sums(x, gm, dy, d, &mu[0], sums[0]);
        if (two) lnb_sums(x + d, gm, dy + d, d, &mu[1], sums[1]);
        const lnb_coef k0 = lnb_coefs(mu[0], sums[0], d, eps),
                       k1 = lnb_coefs(two ? mu[1] : 0.0f, sums[1], d, eps);
        int64_t j = 0;
        if (gm && two) /* the usual case: whole vectors, gamma loaded once for both rows */
            for (; j + 8 <= d; j += 8) {
                const __m256 gv = _mm256_loadu_ps(gm + j);
                __m256 g0 = mul_rounded(_mm256_loadu_ps(dy + j), gv);
                __m256 g1 = mul_rounded(_mm256_loadu_ps(dy + d + j), gv);
                __m256 c0 = _mm256_sub_ps(_mm256_loadu_ps(x + j), k0.mv);
                __m256 c1 = _mm256_sub_ps(_mm256_loadu_ps(x + d + j), k1.mv);
                _mm256_storeu_ps(dx + j, lnb_dx(g0, c0, k0));
                _mm256_storeu_ps(dx + d + j, lnb_dx(g1, c1, k1));
            }
        lnb_rest(x, gm, dy, dx, j, d, k0);
        if (two) lnb_rest(x + d, gm, dy + d, dx + d, j, d, k1);
    }
}

/* Layer norm and its backward four rows at a time where the CPU has AVX-512F (isa.h) and every
 * row starts on a 64-byte line (a graph's tensors start on one; d a multiple of 16), with the
 * AVX2 code's bits: a 16-lane accumulator holds two of the AVX2 code's 8-lane ones side by side
 * (lanes 0-7 the one that sums the first 8 values of each 16 or 32, lanes 8-15 the next), each
 * lane summing the same values in the same order; the halves are taken apart for the AVX2
 * code's tail and its combining order, and every element's own arithmetic is the AVX2 code's.
 * The sums of a row are chains of dependent adds, one chain per 16 lanes: four rows' sums side by
 * side keep the adds busy where two 16-lane chains of one row could not, and the element passes
 * do half the AVX2 code's operations. The output is then written one row after the other: with
 * the four rows' stores interleaved (four store streams) the kernel from memory took 1.07-1.28x
 * the AVX2 code's time, and the forward in a training step ~1.06x (docs/log/2026-12-05.md). Rows
 * left over (fewer than four) go to the AVX2 functions. */
#define LN512 TG_TARGET_AVX512
enum { LN_ROWS = 4 };

/* Rows whose 16-value loads each stay within one cache line: 16 bytes off a line, every 512-bit
 * load spans two, and the four-row code took 1.07-1.18x the AVX2 code's time (which loads such
 * rows as 256-bit halves, one of two across a line) */
static bool ln_lines(int64_t d, const void *a, const void *b, const void *c, const void *e) {
    const uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)e;
    return d % 16 == 0 && bits % 64 == 0;
}

LN512 static inline __m256 lo256(__m512 v) {
    return _mm512_castps512_ps256(v);
}
LN512 static inline __m256 hi256(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/* row_stats_avx2 for LN_ROWS rows d apart: (a0|a1) in A, (a2|a3) in B */
LN512 static inline __attribute__((always_inline)) void
row_stats_avx512(const float *x, int64_t d, float eps, float *mean, float *rstd) {
    __m512 A[LN_ROWS], B[LN_ROWS];
    for (int r = 0; r < LN_ROWS; r++)
        A[r] = B[r] = _mm512_setzero_ps();
    int64_t j0 = 0;
    for (; j0 + 32 <= d; j0 += 32)
        for (int r = 0; r < LN_ROWS; r++) {
            A[r] = _mm512_add_ps(A[r], _mm512_loadu_ps(x + r * d + j0));
            B[r] = _mm512_add_ps(B[r], _mm512_loadu_ps(x + r * d + j0 + 16));
        }
    for (int r = 0; r < LN_ROWS; r++) {
        __m256 a0 = lo256(A[r]);
        for (int64_t j = j0; j < d; j += 8)
            a0 = _mm256_add_ps(a0, load0(x + r * d, j, d));
        mean[r] = ln_sum4(a0, hi256(A[r]), lo256(B[r]), hi256(B[r])) / (float)d;
        A[r] = B[r] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j + 32 <= d; j += 32)
        for (int r = 0; r < LN_ROWS; r++) {
            const __m512 mv = _mm512_set1_ps(mean[r]);
            const __m512 c0 = _mm512_sub_ps(_mm512_loadu_ps(x + r * d + j), mv);
            const __m512 c1 = _mm512_sub_ps(_mm512_loadu_ps(x + r * d + j + 16), mv);
            A[r] = _mm512_fmadd_ps(c0, c0, A[r]);
            B[r] = _mm512_fmadd_ps(c1, c1, B[r]);
        }
    for (int r = 0; r < LN_ROWS; r++) {
        const __m256 mv = _mm256_set1_ps(mean[r]);
        __m256 a0 = lo256(A[r]);
        for (int64_t j = j0; j < d; j += 8) {
            __m256 c = vmask(_mm256_sub_ps(load0(x + r * d, j, d), mv), j, d);
            a0 = _mm256_fmadd_ps(c, c, a0);
        }
        rstd[r] = ln_rstd(ln_sum4(a0, hi256(A[r]), lo256(B[r]), hi256(B[r])), d, eps);
    }
}

LN512 static void layer_norm_avx512(const float *x, const float *gm, const float *bt, float *y,
                                    int64_t rows, int64_t d, float eps) {
    if (!ln_lines(d, x, y, gm, bt)) {
        layer_norm_avx2(x, gm, bt, y, rows, d, eps);
        return;
    }
    int64_t r0 = 0;
    for (; r0 + LN_ROWS <= rows; r0 += LN_ROWS, x += LN_ROWS * d, y += LN_ROWS * d) {
        float mu[LN_ROWS], rs[LN_ROWS];
        row_stats_avx512(x, d, eps, mu, rs);
        for (int r = 0; r < LN_ROWS; r++) { /* row after row (above) */
            int64_t j = 0;
            if (gm && bt) /* the usual case */
                for (; j + 16 <= d; j += 16) {
                    const __m512 g = _mm512_loadu_ps(gm + j), b = _mm512_loadu_ps(bt + j);
                    __m512 v = _mm512_mul_ps(
                        _mm512_sub_ps(_mm512_loadu_ps(x + r * d + j), _mm512_set1_ps(mu[r])),
                        _mm512_set1_ps(rs[r]));
                    _mm512_storeu_ps(y + r * d + j, _mm512_fmadd_ps(v, g, b));
                }
            ln_normalize(x + r * d, gm, bt, y + r * d, j, d, _mm256_set1_ps(mu[r]),
                         _mm256_set1_ps(rs[r]));
        }
    }
    if (r0 < rows) layer_norm_avx2(x, gm, bt, y, rows - r0, d, eps);
}

/* lnb_sums for LN_ROWS rows d apart: each 16-lane accumulator is lnb_sums' (a0|a1) pair */
LN512 static inline __attribute__((always_inline)) void lnb_sums_avx512(const float *x,
                                                                        const float *gm,
                                                                        const float *dy, int64_t d,
                                                                        float *mu, float s[][3]) {
    __m512 A[LN_ROWS], C[LN_ROWS], G[LN_ROWS], GC[LN_ROWS];
    for (int r = 0; r < LN_ROWS; r++)
        A[r] = C[r] = G[r] = GC[r] = _mm512_setzero_ps();
    int64_t j0 = 0;
    for (; j0 + 16 <= d; j0 += 16)
        for (int r = 0; r < LN_ROWS; r++)
            A[r] = _mm512_add_ps(A[r], _mm512_loadu_ps(x + r * d + j0));
    for (int r = 0; r < LN_ROWS; r++) {
        __m256 a0 = lo256(A[r]);
        for (int64_t j = j0; j < d; j += 8)
            a0 = _mm256_add_ps(a0, load0(x + r * d, j, d));
        mu[r] = hsum8(_mm256_add_ps(a0, hi256(A[r]))) / (float)d;
    }
    for (int64_t j = 0; j + 16 <= d; j += 16)
        for (int r = 0; r < LN_ROWS; r++) {
            __m512 g = _mm512_loadu_ps(dy + r * d + j);
            if (gm) g = mul_rounded16(g, _mm512_loadu_ps(gm + j));
            const __m512 c = _mm512_sub_ps(_mm512_loadu_ps(x + r * d + j), _mm512_set1_ps(mu[r]));
            C[r] = _mm512_fmadd_ps(c, c, C[r]);
            G[r] = _mm512_add_ps(G[r], g);
            GC[r] = _mm512_fmadd_ps(g, c, GC[r]);
        }
    for (int r = 0; r < LN_ROWS; r++) {
        const __m256 mv = _mm256_set1_ps(mu[r]);
        __m256 ac0 = lo256(C[r]), ag0 = lo256(G[r]), agc0 = lo256(GC[r]), g, c;
        for (int64_t j = j0; j < d; j += 8) {
            lnb_load(x + r * d, gm, dy + r * d, j, d, mv, &g, &c);
            ac0 = _mm256_fmadd_ps(c, c, ac0);
            ag0 = _mm256_add_ps(ag0, g);
            agc0 = _mm256_fmadd_ps(g, c, agc0);
        }
        s[r][0] = hsum8(_mm256_add_ps(ac0, hi256(C[r])));
        s[r][1] = hsum8(_mm256_add_ps(ag0, hi256(G[r])));
        s[r][2] = hsum8(_mm256_add_ps(agc0, hi256(GC[r])));
    }
}

LN512 static void layer_norm_back_avx512(const float *x, const float *gm, const float *dy,
                                         float *dx, int64_t rows, int64_t d, float eps) {
    if (!ln_lines(d, x, dy, dx, gm)) {
        layer_norm_back_avx2(x, gm, dy, dx, rows, d, eps);
        return;
    }
    int64_t r0 = 0;
    for (; r0 + LN_ROWS <= rows;
         r0 += LN_ROWS, x += LN_ROWS * d, dy += LN_ROWS * d, dx += LN_ROWS * d) {
        float mu[LN_ROWS], sums[LN_ROWS][3];
        lnb_sums_avx512(x, gm, dy, d, mu, sums);
        lnb_coef k[LN_ROWS];
        __m512 rv[LN_ROWS], sg[LN_ROWS], sgc[LN_ROWS];
        for (int r = 0; r < LN_ROWS; r++) {
            k[r] = lnb_coefs(mu[r], sums[r], d, eps);
            rv[r] = _mm512_set1_ps(_mm256_cvtss_f32(k[r].rv));
            sg[r] = _mm512_set1_ps(_mm256_cvtss_f32(k[r].sg));
            sgc[r] = _mm512_set1_ps(_mm256_cvtss_f32(k[r].sgc));
        }
        for (int r = 0; r < LN_ROWS; r++) {
            /* row after row, as the forward; gamma present: the usual case */
            int64_t j = 0;
            if (gm)
                for (; j + 16 <= d; j += 16) {
                    const __m512 g =
                        mul_rounded16(_mm512_loadu_ps(dy + r * d + j), _mm512_loadu_ps(gm + j));
                    const __m512 c =
                        _mm512_sub_ps(_mm512_loadu_ps(x + r * d + j), _mm512_set1_ps(mu[r]));
                    /* lnb_dx: rv (g - sg - c sgc) */
                    const __m512 dxv =
                        _mm512_mul_ps(rv[r], _mm512_fnmadd_ps(c, sgc[r], _mm512_sub_ps(g, sg[r])));
                    _mm512_storeu_ps(dx + r * d + j, dxv);
                }
            lnb_rest(x + r * d, gm, dy + r * d, dx + r * d, j, d, k[r]);
        }
    }
    if (r0 < rows) layer_norm_back_avx2(x, gm, dy, dx, rows - r0, d, eps);
}

/* The forward's statistics alone (tg_cpu_vlayer_norm_stats): the same calls, so the same bits */
AVX2 static void layer_norm_stats_avx2(const float *x, int64_t rows, int64_t d, float eps,
                                       float *mean, float *rstd) {
    for (int64_t r = 0; r < rows; r++)
        row_stats_avx2(x + r * d, d, eps, &mean[r], &rstd[r]);
}
LN512 static void layer_norm_stats_avx512(const float *x, int64_t rows, int64_t d, float eps,
                                          float *mean, float *rstd) {
    int64_t r0 = 0;
    if (ln_lines(d, x, NULL, NULL, NULL))
        for (; r0 + LN_ROWS <= rows; r0 += LN_ROWS)
            row_stats_avx512(x + r0 * d, d, eps, mean + r0, rstd + r0);
    layer_norm_stats_avx2(x + r0 * d, rows - r0, d, eps, mean + r0, rstd + r0);
}
#undef LN512

/* The cross-entropy rows, 16 values at a time in two 8-lane vectors (lane l of vector h sums
 * elements 16i + 8h + l; the two added, then hsum8: the order of one 16-lane vector): the
 * masked tail reads -inf for the max and the exps (masked to 0) and 0 for the plain sum, and a
 * vector wholly past the end adds exactly 0. With e, the exps are stored there as well (a long
 * softmax row's; e may be x: each vector is read before it is written). The max runs in four
 * chains (one was bound by the max's latency), exact in any order. */
AVX2 static INLINE float sumexp8x2(const float *x, int64_t n, float *max, float *sum_x, float *e) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 vm[4] = {ninf, ninf, ninf, ninf}, a0 = _mm256_setzero_ps(), a1 = a0, x0 = a0, x1 = a0;
    for (int64_t j = 0; j < n; j += 32)
        for (int k = 0; k < 4; k++)
            vm[k] = _mm256_max_ps(load_row(x, j + 8 * k, n), vm[k]);
    const __m256 mv = _mm256_set1_ps(
        hmax8(_mm256_max_ps(_mm256_max_ps(vm[0], vm[1]), _mm256_max_ps(vm[2], vm[3]))));
    for (int64_t j = 0; j < n; j += 16) {
        __m256 v0 = load_row(x, j, n), v1 = load_row(x, j + 8, n);
        __m256 e0 = _mm256_and_ps(exp_le0_avx2(_mm256_sub_ps(v0, mv)),
                                  _mm256_cmp_ps(v0, ninf, _CMP_NEQ_UQ));
        __m256 e1 = _mm256_and_ps(exp_le0_avx2(_mm256_sub_ps(v1, mv)),
                                  _mm256_cmp_ps(v1, ninf, _CMP_NEQ_UQ));
        a0 = _mm256_add_ps(a0, e0);
        a1 = _mm256_add_ps(a1, e1);
        x0 = _mm256_add_ps(x0, load0(x, j, n));
        x1 = _mm256_add_ps(x1, load0(x, j + 8, n));
        if (e) {
            store_row(e, j, n, e0);
            store_row(e, j + 8, n, e1);
        }
    }
    if (sum_x) *sum_x = hsum8(_mm256_add_ps(x0, x1));
    *max = _mm256_cvtss_f32(mv);
    return hsum8(_mm256_add_ps(a0, a1));
}
/* sumexp8x2 is inlined into each caller, so that a softmax row's (no plain sum) drops that sum */
AVX2 static float ce_sumexp_avx2(const float *x, int64_t n, float *max, float *sum_x) {
    return sumexp8x2(x, n, max, sum_x, NULL);
}

/* A softmax row longer than SHORT_ROW_MAX: the cross-entropy's max and sum (16 lanes, two exp
 * chains, where one 8-lane chain of dependent adds had bound the row), so a log-softmax's
 * log-sum-exp m + logf(s) is the cross-entropy's bit for bit: -log p(y) of a decoding step is the
 * loss's NLL of the same logits. The AVX-512 code (softmax_long_avx512) gives the same bits. */
AVX2 static void softmax_long_avx2(const float *x, float *y, int64_t d, bool log_out) {
    float m, s = log_out ? sumexp8x2(x, d, &m, NULL, NULL) : sumexp8x2(x, d, &m, NULL, y);
    if (m == -INFINITY) {
        softmax_dead_row(y, d, log_out);
    } else if (log_out) {
        const __m256 lse = _mm256_set1_ps(m + logf(s));
        for (int64_t j = 0; j < d; j += 8)
            store_row(y, j, d, _mm256_sub_ps(load0(x, j, d), lse));
    } else {
        const __m256 inv = _mm256_set1_ps(1.0f / s);
        for (int64_t j = 0; j < d; j += 8)
            store_row(y, j, d, _mm256_mul_ps(load0(y, j, d), inv));
    }
}

AVX2 static void ce_grad_avx2(const float *x, int64_t n, float m, float inv, float scale,
                              float base, float *y) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY), mv = _mm256_set1_ps(m), iv = _mm256_set1_ps(inv);
    const __m256 sc = _mm256_set1_ps(scale), b = _mm256_set1_ps(base);
    for (int64_t j = 0; j < n; j += 8) {
        __m256 v = load_row(x, j, n);
        __m256 e =
            _mm256_and_ps(exp_le0_avx2(_mm256_sub_ps(v, mv)), _mm256_cmp_ps(v, ninf, _CMP_NEQ_UQ));
        store_row(y, j, n, _mm256_mul_ps(sc, _mm256_sub_ps(_mm256_mul_ps(e, iv), b)));
    }
}

/* With AVX-512F, the same rows in one 16-lane vector at a time: the same elements meet the
 * same operations in the same order (exp_le0_avx512 gives exp_le0_avx2's bits; the sums end as
 * the AVX2 code's), so the same bits at twice the width — the step's cross-entropy, forward and
 * backward, is bound by exp's arithmetic at 8 lanes (docs/log/2026-12-06.md). */
#define AVX512 TG_TARGET_AVX512
AVX512 static inline __mmask16 tail16(int64_t j, int64_t n) {
    return n - j >= 16 ? (__mmask16)0xFFFF
           : n <= j    ? (__mmask16)0
                       : (__mmask16)((1u << (n - j)) - 1);
}

/* lanes l and l + 8 added, then hsum8: ce_sumexp_avx2's end */
AVX512 static inline float hsum16(__m512 v) {
    return hsum8(_mm256_add_ps(_mm512_castps512_ps256(v),
                               _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

AVX512 static INLINE float sumexp16(const float *x, int64_t n, float *max, float *sum_x, float *e) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 vm[4] = {ninf, ninf, ninf, ninf}, acc = _mm512_setzero_ps(), accx = acc;
    for (int64_t j = 0; j < n; j += 64)
        for (int k = 0; k < 4; k++)
            vm[k] = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, tail16(j + 16 * k, n), x + j + 16 * k),
                                  vm[k]);
    /* exact, in any order */
    const float m = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_max_ps(vm[0], vm[1]), _mm512_max_ps(vm[2], vm[3])));
    const __m512 mv = _mm512_set1_ps(m);
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 t = tail16(j, n);
        __m512 v = _mm512_mask_loadu_ps(ninf, t, x + j);
        __m512 ev = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_UQ),
                                        exp_le0_avx512(_mm512_sub_ps(v, mv)));
        acc = _mm512_add_ps(acc, ev);
        accx = _mm512_add_ps(accx, _mm512_maskz_loadu_ps(t, x + j));
        if (e) _mm512_mask_storeu_ps(e + j, t, ev);
    }
    if (sum_x) *sum_x = hsum16(accx);
    *max = m;
    return hsum16(acc);
}
/* the cross-entropy's (tg_cpu_vce_sumexp), as ce_sumexp_avx2 */
AVX512 static float ce_sumexp_avx512(const float *x, int64_t n, float *max, float *sum_x) {
    return sumexp16(x, n, max, sum_x, NULL);
}

/* softmax_long_avx2's row in 16-lane vectors: the same bits */
AVX512 static void softmax_long_avx512(const float *x, float *y, int64_t d, bool log_out) {
    float m, s = log_out ? sumexp16(x, d, &m, NULL, NULL) : sumexp16(x, d, &m, NULL, y);
    if (m == -INFINITY) {
        softmax_dead_row(y, d, log_out);
    } else if (log_out) {
        const __m512 lse = _mm512_set1_ps(m + logf(s));
        for (int64_t j = 0; j < d; j += 16) {
            const __mmask16 t = tail16(j, d);
            _mm512_mask_storeu_ps(y + j, t, _mm512_sub_ps(_mm512_maskz_loadu_ps(t, x + j), lse));
        }
    } else {
        const __m512 inv = _mm512_set1_ps(1.0f / s);
        for (int64_t j = 0; j < d; j += 16) {
            const __mmask16 t = tail16(j, d);
            _mm512_mask_storeu_ps(y + j, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, y + j), inv));
        }
    }
}

AVX512 static inline __m512 ce_grad16(const float *x, __mmask16 t, __m512 mv, __m512 iv, __m512 sc,
                                      __m512 b) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 v = _mm512_mask_loadu_ps(ninf, t, x);
    __m512 e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_UQ),
                                   exp_le0_avx512(_mm512_sub_ps(v, mv)));
    return _mm512_mul_ps(sc, _mm512_sub_ps(_mm512_mul_ps(e, iv), b));
}

/* Each value depends on its own x alone, so the row may be cut anywhere: a row of a vocabulary
 * (CE_STREAM values or more, the step's gradient of the logits: tens of MB, read next from
 * memory by the products) goes out in streaming stores from its first 64-byte line on, which
 * skip reading the lines in first; the fence orders them before the node's end is signalled. */
enum { CE_STREAM = 2048 };
AVX512 static void ce_grad_avx512(const float *x, int64_t n, float m, float inv, float scale,
                                  float base, float *y) {
    const __m512 mv = _mm512_set1_ps(m), iv = _mm512_set1_ps(inv);
    const __m512 sc = _mm512_set1_ps(scale), b = _mm512_set1_ps(base);
    int64_t j = 0;
    if (n >= CE_STREAM && (uintptr_t)y % sizeof(float) == 0) {
        const int64_t head = (int64_t)((64 - (uintptr_t)y % 64) % 64 / sizeof(float));
        _mm512_mask_storeu_ps(y, tail16(0, head), ce_grad16(x, tail16(0, head), mv, iv, sc, b));
        for (j = head; j + 16 <= n; j += 16)
            _mm512_stream_ps(y + j, ce_grad16(x + j, 0xFFFF, mv, iv, sc, b));
        _mm_sfence();
    }
    for (; j < n; j += 16) {
        const __mmask16 t = tail16(j, n);
        _mm512_mask_storeu_ps(y + j, t, ce_grad16(x + j, t, mv, iv, sc, b));
    }
}
#undef AVX512

#endif

/* ---- the entry points per instruction-set level (isa.h) ---- */

static void softmax_rows_scalar(const float *x, float *y, int64_t rows, int64_t d, bool log_out) {
    for (int64_t r = 0; r < rows; r++) softmax_row_scalar(x + r * d, y + r * d, d, log_out);
}
static float ce_sumexp_scalar4(const float *x, int64_t n, float *max, float *sum_x) {
    return ce_sumexp_scalar(x, n, max, sum_x, NULL);
}

typedef struct vmath_kernels {
    void (*vexp)(const float *x, float *y, int64_t n);
    void (*vtanh)(const float *x, float *y, int64_t n);
    void (*vgelu)(const float *x, float *y, int64_t n);
    void (*vgelu_back)(const float *x, const float *dy, float *dx, int64_t n);
    void (*softmax_rows)(const float *x, float *y, int64_t rows, int64_t d, bool log_out);
    void (*softmax_back_rows)(const float *y, const float *dy, float *dx, int64_t rows, int64_t d);
    void (*layer_norm)(const float *x, const float *gm, const float *bt, float *y, int64_t rows,
                       int64_t d, float eps);
    void (*layer_norm_back)(const float *x, const float *gm, const float *dy, float *dx,
                            int64_t rows, int64_t d, float eps);
    void (*layer_norm_stats)(const float *x, int64_t rows, int64_t d, float eps, float *mean,
                             float *rstd);
    float (*ce_sumexp)(const float *x, int64_t n, float *max, float *sum_x);
    void (*ce_grad)(const float *x, int64_t n, float max, float inv, float scale, float base,
                    float *y);
} vmath_kernels;

/* exp and tanh have no 512-bit form: the AVX2 one serves that level too. */
static const vmath_kernels kernels[TG_CPU_ISA_LEVELS] = {
    [TG_CPU_ISA_PORTABLE] = {vexp_scalar, vtanh_scalar, vgelu_scalar, vgelu_back_scalar,
                             softmax_rows_scalar, softmax_back_rows_scalar, layer_norm_scalar,
                             layer_norm_back_scalar, layer_norm_stats_scalar, ce_sumexp_scalar4,
                             ce_grad_scalar},
#if TG_CPU_X86
    [TG_CPU_ISA_AVX2] = {vexp_avx2, vtanh_avx2, vgelu_avx2, vgelu_back_avx2, softmax_rows_avx2,
                         softmax_back_rows_avx2, layer_norm_avx2, layer_norm_back_avx2,
                         layer_norm_stats_avx2, ce_sumexp_avx2, ce_grad_avx2},
    [TG_CPU_ISA_AVX512] = {vexp_avx2, vtanh_avx2, vgelu_avx512, vgelu_back_avx512,
                           softmax_rows_avx512, softmax_back_rows_avx512, layer_norm_avx512,
                           layer_norm_back_avx512, layer_norm_stats_avx512, ce_sumexp_avx512,
                           ce_grad_avx512},
#endif
};

/* The level's kernels; vector false: the portable (scalar) ones. */
static const vmath_kernels *at(bool vector) {
    return &kernels[vector ? tg_cpu_isa() : TG_CPU_ISA_PORTABLE];
}

const char *tg_cpu_vmath_isa(void) { return tg_cpu_isa() >= TG_CPU_ISA_AVX2 ? "avx2+fma" : "portable"; }

void tg_cpu_vexp_path(const float *x, float *y, int64_t n, bool avx2) { at(avx2)->vexp(x, y, n); }
void tg_cpu_vtanh_path(const float *x, float *y, int64_t n, bool avx2) { at(avx2)->vtanh(x, y, n); }
void tg_cpu_vgelu_path(const float *x, float *y, int64_t n, bool avx2) { at(avx2)->vgelu(x, y, n); }
void tg_cpu_vgelu_back_path(const float *x, const float *dy, float *dx, int64_t n, bool avx2) {
    at(avx2)->vgelu_back(x, dy, dx, n);
}

void tg_cpu_vexp(const float *x, float *y, int64_t n) { tg_cpu_vexp_path(x, y, n, true); }
void tg_cpu_vtanh(const float *x, float *y, int64_t n) { tg_cpu_vtanh_path(x, y, n, true); }
void tg_cpu_vgelu(const float *x, float *y, int64_t n) { tg_cpu_vgelu_path(x, y, n, true); }
void tg_cpu_vgelu_back(const float *x, const float *dy, float *dx, int64_t n) {
    tg_cpu_vgelu_back_path(x, dy, dx, n, true);
}

void tg_cpu_vsoftmax_rows_path(const float *x, float *y, int64_t rows, int64_t d, bool log_out, bool avx2) {
    at(avx2)->softmax_rows(x, y, rows, d, log_out);
}
void tg_cpu_vsoftmax_rows(const float *x, float *y, int64_t rows, int64_t d, bool log_out) {
    tg_cpu_vsoftmax_rows_path(x, y, rows, d, log_out, true);
}

void tg_cpu_vsoftmax_back_rows_path(const float *y, const float *dy, float *dx, int64_t rows, int64_t d, bool avx2) {
    at(avx2)->softmax_back_rows(y, dy, dx, rows, d);
}
void tg_cpu_vsoftmax_back_rows(const float *y, const float *dy, float *dx, int64_t rows, int64_t d) {
    tg_cpu_vsoftmax_back_rows_path(y, dy, dx, rows, d, true);
}

void tg_cpu_vlayer_norm_rows_path(const float *x, const float *gamma, const float *beta, float *y,
                                  int64_t rows, int64_t d, float eps, bool avx2) {
    at(avx2)->layer_norm(x, gamma, beta, y, rows, d, eps);
}
void tg_cpu_vlayer_norm_back_rows_path(const float *x, const float *gamma, const float *dy, float *dx,
                                       int64_t rows, int64_t d, float eps, bool avx2) {
    at(avx2)->layer_norm_back(x, gamma, dy, dx, rows, d, eps);
}
void tg_cpu_vlayer_norm_stats_path(const float *x, int64_t rows, int64_t d, float eps, float *mean,
                                   float *rstd, bool avx2) {
    at(avx2)->layer_norm_stats(x, rows, d, eps, mean, rstd);
}
void tg_cpu_vlayer_norm_stats(const float *x, int64_t rows, int64_t d, float eps, float *mean,
                              float *rstd) {
    tg_cpu_vlayer_norm_stats_path(x, rows, d, eps, mean, rstd, true);
}
void tg_cpu_vlayer_norm_rows(const float *x, const float *gamma, const float *beta, float *y,
                             int64_t rows, int64_t d, float eps) {
    tg_cpu_vlayer_norm_rows_path(x, gamma, beta, y, rows, d, eps, true);
}
void tg_cpu_vlayer_norm_back_rows(const float *x, const float *gamma, const float *dy, float *dx,
                                  int64_t rows, int64_t d, float eps) {
    tg_cpu_vlayer_norm_back_rows_path(x, gamma, dy, dx, rows, d, eps, true);
}

float tg_cpu_vce_sumexp_path(const float *x, int64_t n, float *max, float *sum_x, bool avx2) {
    return at(avx2)->ce_sumexp(x, n, max, sum_x);
}
void tg_cpu_vce_grad_path(const float *x, int64_t n, float max, float inv, float scale, float base,
                          float *y, bool avx2) {
    at(avx2)->ce_grad(x, n, max, inv, scale, base, y);
}
float tg_cpu_vce_sumexp(const float *x, int64_t n, float *max, float *sum_x) {
    return tg_cpu_vce_sumexp_path(x, n, max, sum_x, true);
}
void tg_cpu_vce_grad(const float *x, int64_t n, float max, float inv, float scale, float base,
                     float *y) {
    tg_cpu_vce_grad_path(x, n, max, inv, scale, base, y, true);
}
