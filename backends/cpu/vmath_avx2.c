/* The AVX2+FMA level of the vector maths (vmath.h): 8 lanes at a time. The maps (exp, tanh,
 * GELU, GELU'), the cross-entropy's rows, long softmax rows, the blocks of 8 short softmax rows
 * and layer norm's passes come from the template shared with the AVX-512 level
 * (vmath_lanes.h), instantiated here with the lane macros below; this file keeps single short
 * rows, the softmax backward's long rows and layer norm's rows in pairs. The maths:
 * vmath-impl.h. Every function carries the AVX2 target attribute (isa.h), so the file builds
 * for the library's baseline and runs only where the level is chosen. */
#include "backends/cpu/vmath_avx2.h"

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/vmath-impl.h"

#if TG_CPU_X86
AVX2 static inline float hmax8(__m256 v) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* Element j of a row at lane j % 8 of vector j / 8; lanes past the end read as -inf (the
 * identity of max, and exp gives them 0). */
AVX2 static inline __m256 load_row(const float *x, int64_t j, int64_t d) {
    if (j + 8 <= d) return _mm256_loadu_ps(x + j);
    __m256i m = lanes(d - j);
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(x + j, m), _mm256_castsi256_ps(m));
}

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

/* Row r's 8 values from column j in a block of 8 rows of d (Wd: d rounded up to 8): whole
 * segments may run into the next row; the last is a masked load (lanes past the row: 0). */
AVX2 static INLINE __m256 load_seg8(const float *x, int d, int r, int j, int Wd) {
    const float *p = x + r * d + j;
    return j + 8 < Wd ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes(d - (Wd - 8)));
}

/* The inverse: a whole-vector store unless it would leave the block, else only the row's lanes */
AVX2 static INLINE void store_seg8(float *y, int d, int r, int j, __m256 v) {
    const int off = r * d + j;
    if (off + 8 <= 8 * d) {
        _mm256_storeu_ps(y + off, v);
    } else {
        float t[8];
        _mm256_storeu_ps(t, v);
        for (int k = 0; k < 8 && j + k < d; k++) y[off + k] = t[k];
    }
}

/* The template's lane macros (vmath_lanes.h, which undefines them again) */
#define FN AVX2
#define SFX avx2
#define V __m256
#define VM __m256 /* a lane mask: all ones or zeros per lane */
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
#define VAND _mm256_and_ps
#define VOR _mm256_or_ps
#define VANDNOT _mm256_andnot_ps
#define VCMP _mm256_cmp_ps
#define VKEEP(m, v) _mm256_and_ps(v, m)
#define VBLEND(m, a, b) _mm256_blendv_ps(a, b, m)
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
#define VLOADT0 load0
#define VLOADT_NINF load_row
#define VSTORET store_row
#define VHMAX hmax8
#define VSUM16(a) hsum8(_mm256_add_ps(a[0], a[1]))
#define VMUL_ROUNDED mul_rounded
#define VTRANSPOSE transpose8
#define VPERMI(v, ix) _mm256_permutevar8x32_ps(v, _mm256_loadu_si256((const __m256i *)(ix)))
#define VLOAD_SEG load_seg8
#define VSTORE_SEG(y, d, r, j, v) store_seg8(y, d, r, j, v)
#define VQ8(a, q) (a)[q]
#define VBARRIER(v) __asm__("" : "+x"(v))
#define BLOCK_D_MIN 1
#define BLOCK_PAIRS 0
#include "backends/cpu/vmath_lanes.h"

/* exp and tanh have no 512-bit form: the AVX-512 level's table holds these as well */
AVX2 void tg__cpu_vexp_avx2(const float *x, float *y, int64_t n) {
    vexp_avx2(x, y, n);
}

AVX2 void tg__cpu_vtanh_avx2(const float *x, float *y, int64_t n) {
    vtanh_avx2(x, y, n);
}

/* One row of up to SHORT_ROW_MAX values in vectors of 8, exps stored then scaled; sums over
 * lanes j % 8, combined as hsum8 does. */
AVX2 static inline void softmax_row_avx2(const float *x, float *y, int64_t d, bool log_out) {
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < d; j += 8) vm = _mm256_max_ps(load_row(x, j, d), vm); /* NaN skipped */
    float m = hmax8(vm);
    if (m == -INFINITY) {
        softmax_dead_row(y, d, log_out);
        return;
    }
    const __m256 mv = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < d; j += 8) {
        __m256 e = exp_live_avx2(load_row(x, j, d), mv);
        acc = _mm256_add_ps(acc, e);
        if (!log_out) store_row(y, j, d, e);
    }
    float s = hsum8(acc);
    if (log_out) {
        const __m256 lse = _mm256_set1_ps(m + logf(s));
        for (int64_t j = 0; j < d; j += 8) store_row(y, j, d, _mm256_sub_ps(load_row(x, j, d), lse));
    } else {
        const __m256 inv = _mm256_set1_ps(1.0f / s);
        for (int64_t j = 0; j < d; j += 8) store_row(y, j, d, _mm256_mul_ps(load0(y, j, d), inv));
    }
}

AVX2 static void softmax_rows_avx2(const float *x, float *y, int64_t rows, int64_t d, bool log_out) {
    if (d > SHORT_ROW_MAX) {
        for (int64_t r = 0; r < rows; r++)
            softmax_long_avx2(x + r * d, y + r * d, d, log_out);
        return;
    }
    /* Short rows (attention over 10–32 keys) fill a vector poorly and pay the horizontal max
     * and sum, the masks and the branches once per row: 8 rows at a time are instead transposed
     * in registers (the template's softmax_blocks), bit-identical to softmax_row_avx2, so
     * results do not depend on how threads split rows. Log-softmax rows of up to 32 are rare:
     * one by one. */
    int64_t r = log_out ? 0 : softmax_blocks_avx2(x, y, rows, d);
    for (; r < rows; r++) softmax_row_avx2(x + r * d, y + r * d, d, log_out);
}

/* softmax backward, the portable row code's arithmetic operation for operation: products
 * rounded before they are added (mul_rounded), the serial (rows under 16: the template's
 * softmax_back_block, 8 rows at a time) or j % 8 order of the dot product (DOT_SERIAL_BELOW),
 * then y (dy - s): the same bits. */

/* A row of 16 or more values: the portable row code's accumulators acc[j % 8] are the lanes of
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
    if (d >= DOT_SERIAL_BELOW) {
        for (int64_t r = 0; r < rows; r++)
            softmax_back_row_avx2(y + r * d, dy + r * d, dx + r * d, d);
        return;
    }
    const int64_t r = softmax_back_blocks_avx2(y, dy, dx, rows, d);
    /* the rows left over: the portable code, which gives the same bits */
    tg__cpu_vmath_portable.softmax_back_rows(y + r * d, dy + r * d, dx + r * d, rows - r, d);
}

/* Rows in pairs: both rows' statistics side by side, then both rows normalised in one pass
 * over gamma and beta. A row's statistics are chains of dependent adds, two horizontal sums, a
 * division and a square root, on which one row at a time leaves the core waiting (~200 cycles
 * a row at d 256); two rows' chains side by side overlap, and the normalising pass loads gamma
 * and beta once for both (0.8-0.9x the time of one row at a time at d 256-512). Each row's
 * operations are its own, in its order: a row gives the same bits alone or paired, wherever a
 * thread's share of rows starts. The sums and the whole-vector passes are the template's
 * (row_stats, ln_normalize_rows). */
AVX2 static void layer_norm_avx2(const float *x, const float *gm, const float *bt, float *y,
                                 int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; r += 2, x += 2 * d, y += 2 * d) {
        const bool two = r + 1 < rows;
        float mu[2], rs[2];
        row_stats_avx2(x, d, eps, 1, &mu[0], &rs[0]);
        if (two) row_stats_avx2(x + d, d, eps, 1, &mu[1], &rs[1]);
        if (two) ln_normalize_rows_avx2(x, gm, bt, y, d, 2, mu, rs);
        else ln_normalize_rows_avx2(x, gm, bt, y, d, 1, mu, rs);
    }
}

/* Three passes over a row, not four (lnb_sums, then dx); rows in pairs, as in the forward:
 * both rows' sums side by side, then both rows' dx in one pass over gamma, the same bits alone
 * or paired (the template's lnb_sums and lnb_dx_rows). A lone last row's second set of
 * coefficients is computed from placeholder sums and not used. */
AVX2 static void layer_norm_back_avx2(const float *x, const float *gm, const float *dy, float *dx,
                                      int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; r += 2, x += 2 * d, dy += 2 * d, dx += 2 * d) {
        const bool two = r + 1 < rows;
        float mu[2], sums[2][3] = {{1.0f, 0.0f, 0.0f}, {1.0f, 0.0f, 0.0f}};
        lnb_sums_avx2(x, gm, dy, d, 1, &mu[0], &sums[0]);
        if (two) lnb_sums_avx2(x + d, gm, dy + d, d, 1, &mu[1], &sums[1]);
        const lnb_coef k[2] = {lnb_coefs(mu[0], sums[0], d, eps),
                               lnb_coefs(two ? mu[1] : 0.0f, sums[1], d, eps)};
        if (two) lnb_dx_rows_avx2(x, gm, dy, dx, d, 2, k);
        else lnb_dx_rows_avx2(x, gm, dy, dx, d, 1, k);
    }
}

/* The forward's statistics alone (tg_cpu_vlayer_norm_stats): the same calls, so the same bits */
AVX2 static void layer_norm_stats_avx2(const float *x, int64_t rows, int64_t d, float eps,
                                       float *mean, float *rstd) {
    for (int64_t r = 0; r < rows; r++)
        row_stats_avx2(x + r * d, d, eps, 1, &mean[r], &rstd[r]);
}

AVX2 static void ce_grad_avx2(const float *x, int64_t n, float m, float inv, float scale,
                              float base, float *y) {
    const ce_coef_avx2 k = {_mm256_set1_ps(m), _mm256_set1_ps(inv), _mm256_set1_ps(scale),
                            _mm256_set1_ps(base)};
    ce_grad_from_avx2(x, 0, n, k, y);
}

const tg_cpu_vmath tg__cpu_vmath_avx2 = {
    .vexp = tg__cpu_vexp_avx2,
    .vtanh = tg__cpu_vtanh_avx2,
    .vgelu = vgelu_avx2,
    .vgelu_back = vgelu_back_avx2,
    .softmax_rows = softmax_rows_avx2,
    .softmax_back_rows = softmax_back_rows_avx2,
    .layer_norm = layer_norm_avx2,
    .layer_norm_back = layer_norm_back_avx2,
    .layer_norm_stats = layer_norm_stats_avx2,
    .ce_sumexp = ce_sumexp_avx2,
    .ce_grad = ce_grad_avx2,
};
#endif
