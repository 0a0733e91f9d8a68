/* AVX2 helpers inlined by both vector levels of the vector maths (vmath_avx2.c and
 * vmath_avx512.c, and the template both instantiate, vmath_lanes.h): at either width a row's
 * sums end, and its tail is taken, with these 8-lane operations, which is how the AVX-512
 * level gives the AVX2 level's bits. Internal to those files. */
#ifndef TG_CPU_VMATH_AVX2_H
#define TG_CPU_VMATH_AVX2_H

#include "backends/cpu/isa.h"

#if TG_CPU_X86
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#define AVX2 TG_TARGET_AVX2
/* Inlined into every caller: the row-block code is instantiated once per row length (a
 * constant, so that its loops unroll and its columns stay in registers): ~60 KB of code for
 * ~1.3x the speed of one generic instance at rows of 10-16. */
#define INLINE inline __attribute__((always_inline))

/* Lanes [0, k) on, 0 <= k <= 8: for maskload/maskstore of a row's tail. */
AVX2 static inline __m256i lanes(int64_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AVX2 static inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* y's lanes j .. min(j + 8, d) stored */
AVX2 static inline void store_row(float *y, int64_t j, int64_t d, __m256 v) {
    if (j + 8 <= d) _mm256_storeu_ps(y + j, v);
    else _mm256_maskstore_ps(y + j, lanes(d - j), v);
}

/* Lanes of a row past d read as 0 (maskload); vmask() zeroes them after arithmetic. */
AVX2 static inline __m256 load0(const float *x, int64_t j, int64_t d) {
    return j + 8 <= d ? _mm256_loadu_ps(x + j) : _mm256_maskload_ps(x + j, lanes(d - j));
}
AVX2 static inline __m256 vmask(__m256 v, int64_t j, int64_t d) {
    return j + 8 <= d ? v : _mm256_and_ps(v, _mm256_castsi256_ps(lanes(d - j)));
}

/* The forward's four accumulators combined, (a0 + a1) + (a2 + a3), then across lanes; and
 * 1/sqrt(var + eps) from the sum of squares: one place for each, so that both widths of
 * vmath_lanes.h's row_stats end their sums alike */
AVX2 static inline float ln_sum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    return hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}
static inline float ln_rstd(float sum_sq, int64_t d, float eps) {
    return 1.0f / sqrtf(sum_sq / (float)d + eps);
}
/* The rows' products rounded before they are added: the barrier keeps the compiler from
 * contracting them into a fused multiply-add (GCC contracts by default), which would change
 * the bits in some inlined copies and not others. */
AVX2 static INLINE __m256 mul_rounded(__m256 a, __m256 b) {
    __m256 p = _mm256_mul_ps(a, b);
    __asm__("" : "+x"(p));
    return p;
}

/* A block of R rows of d in memory order is d vectors of R values; lane l of vector k holds
 * value kR + l, of row (kR + l) / d = ix[kR + l]: the indices of a permute that spreads the
 * rows' sums (lane r: row r) over the block's values. */
static inline void row_of_lane(int32_t *ix, int d, int R) {
    for (int i = 0, row = 0, col = 0; i < d * R; i++) {
        ix[i] = row;
        if (++col == d) col = 0, row++;
    }
}

/* g = dy gamma and c = x - mu of the vector at j (lanes past d: 0, as load0 and vmask give). g
 * is rounded (mul_rounded) before anything adds it, so that a row paired or alone gives the
 * same bits in every inlined copy. */
AVX2 static inline void lnb_load(const float *x, const float *gm, const float *dy, int64_t j,
                                 int64_t d, __m256 mv, __m256 *g, __m256 *c) {
    *g = load0(dy, j, d);
    if (gm) *g = mul_rounded(*g, load0(gm, j, d));
    *c = vmask(_mm256_sub_ps(load0(x, j, d), mv), j, d);
}

/* The backward's coefficients of a row from its mean and lnb_sums' sums: dx = rstd (g - mean(g)
 * - xh mean(g xh)) is written as rs (g - sg - c sgc), c = x - mu */
typedef struct {
    float mu, rs, sg, sgc;
} lnb_coef;

static inline lnb_coef lnb_coefs(float mu, const float s[3], int64_t d, float eps) {
    const float rs = ln_rstd(s[0], d, eps);
    /* xh sgx with xh = c rs and sgx = rs sum(g c) / d: c (rs^2 sum(g c) / d) */
    return (lnb_coef){mu, rs, s[1] / (float)d, rs * rs * (s[2] / (float)d)};
}

#endif
#endif
