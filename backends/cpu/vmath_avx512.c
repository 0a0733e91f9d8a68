/* The AVX-512F level of the vector maths (vmath.h): 16 lanes at a time where that pays —
 * GELU and GELU', softmax rows of 9-32 values, the softmax backward's rows of 9-15, layer norm
 * on rows that start on 64-byte lines, the cross-entropy's rows — each with the AVX2 level's
 * operations on the same elements in the same order, so with its bits; everything else (exp,
 * tanh, other row lengths, rows left over from a block) is the AVX2 level's code. The maps, the
 * cross-entropy's rows, long softmax rows, the blocks of short rows and layer norm's passes
 * come from the template shared with the AVX2 level (vmath_lanes.h), instantiated here with 16
 * lanes; this file keeps what only this level does: where each kind of row goes, layer norm
 * four rows at a time and the cross-entropy gradient's streaming stores. Every function carries
 * the AVX-512 target attribute (isa.h). */
#include "backends/cpu/vmath_avx2.h"

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/vmath-impl.h"

#if TG_CPU_X86
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

/* Lanes [j, n) of the 16 from j on: the tail of a row of n */
AVX512 static inline __mmask16 tail16(int64_t j, int64_t n) {
    return n - j >= 16 ? (__mmask16)0xFFFF
           : n <= j    ? (__mmask16)0
                       : (__mmask16)((1u << (n - j)) - 1);
}

/* The 8-lane halves of a 16-lane vector */
AVX512 static inline __m256 lo256(__m512 v) {
    return _mm512_castps512_ps256(v);
}

AVX512 static inline __m256 hi256(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/* lanes l and l + 8 added, then hsum8: the AVX2 level's end of its two 8-lane vectors */
AVX512 static inline float hsum16(__m512 v) {
    return hsum8(_mm256_add_ps(lo256(v), hi256(v)));
}

/* The products of the rows' values rounded before they are added (as mul_rounded) */
AVX512 static INLINE __m512 mul_rounded16(__m512 a, __m512 b) {
    __m512 p = _mm512_mul_ps(a, b);
    __asm__("" : "+v"(p));
    return p;
}

/* The template's lane macros (vmath_lanes.h, which undefines them again) */
#define FN AVX512
#define SFX avx512
#define V __m512
#define VM __mmask16
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
/* AVX-512F has its bitwise operations on integers only (the float forms are AVX-512DQ's) */
#define VAND(a, b) VASF(_mm512_and_si512(VASI(a), VASI(b)))
#define VOR(a, b) VASF(_mm512_or_si512(VASI(a), VASI(b)))
#define VANDNOT(a, b) VASF(_mm512_andnot_si512(VASI(a), VASI(b)))
#define VCMP _mm512_cmp_ps_mask
#define VKEEP(m, v) _mm512_maskz_mov_ps(m, v)
#define VBLEND(m, a, b) _mm512_mask_blend_ps(m, a, b)
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
#define VLOADT0(p, j, n) _mm512_maskz_loadu_ps(tail16(j, n), (p) + (j))
#define VLOADT_NINF(p, j, n) _mm512_mask_loadu_ps(VSET1(-INFINITY), tail16(j, n), (p) + (j))
#define VSTORET(p, j, n, v) _mm512_mask_storeu_ps((p) + (j), tail16(j, n), v)
#define VHMAX _mm512_reduce_max_ps /* exact, in any order */
#define VSUM16(a) hsum16(a[0])
#define VMUL_ROUNDED mul_rounded16
#define VTRANSPOSE transpose16
#define VPERMI(v, ix) _mm512_permutexvar_ps(_mm512_loadu_si512(ix), v)
#define VLOAD_SEG(x, d, r, j, Wd) load16(x, d, r, j)
#define VSTORE_SEG store16
#define VQ8(a, q) ((q) % 2 ? hi256((a)[(q) / 2]) : lo256((a)[(q) / 2]))
#define VBARRIER(v) __asm__("" : "+v"(v))
#define BLOCK_D_MIN 9 /* shorter rows: the AVX2 level's blocks of 8 */
#define BLOCK_PAIRS 1
#include "backends/cpu/vmath_lanes.h"

/* With AVX-512F (isa.h), rows of 9-32 values (attention over 10-32 keys) 16 at a time: each
 * row is one or two 16-lane vectors, transposed so that lane r holds row r, and every step is
 * the AVX2 level's with twice the lanes (the template's softmax_cols): the same bits. A row's
 * 16-value load or store may run into the next rows of the block (stores in row order, so each
 * row's own store lands last); where it would leave the block it is masked, so nothing outside
 * the block is touched. */
AVX512 static void softmax_rows_avx512(const float *x, float *y, int64_t rows, int64_t d,
                                       bool log_out) {
    if (d > SHORT_ROW_MAX) {
        for (int64_t r = 0; r < rows; r++)
            softmax_long_avx512(x + r * d, y + r * d, d, log_out);
        return;
    }
    const int64_t r = log_out ? 0 : softmax_blocks_avx512(x, y, rows, d);
    tg__cpu_vmath_avx2.softmax_rows(x + r * d, y + r * d, rows - r, d, log_out);
}

/* With AVX-512F, the backward's rows of 9-15 values 16 at a time, each row's products one
 * 16-lane vector: the AVX2 level's steps with twice the lanes (the template's
 * softmax_back_block), the same bits. */
AVX512 static void softmax_back_rows_avx512(const float *y, const float *dy, float *dx,
                                            int64_t rows, int64_t d) {
    const int64_t r = softmax_back_blocks_avx512(y, dy, dx, rows, d);
    tg__cpu_vmath_avx2.softmax_back_rows(y + r * d, dy + r * d, dx + r * d, rows - r, d);
}

/* Layer norm and its backward four rows at a time where the CPU has AVX-512F (isa.h) and every
 * row starts on a 64-byte line (a graph's tensors start on one; d a multiple of 16), with the
 * AVX2 code's bits: a 16-lane accumulator holds two of the AVX2 code's 8-lane ones side by side
 * (lanes 0-7 the one that sums the first 8 values of each 16 or 32, lanes 8-15 the next), each
 * lane summing the same values in the same order; the halves are taken apart for the AVX2
 * code's tail and its combining order, and every element's own arithmetic is the AVX2 code's.
 * The sums of a row are chains of dependent adds, one chain per 16 lanes: four rows' sums side by
 * side keep the adds busy where two 16-lane chains of one row could not, and the element passes
 * do half the AVX2 code's operations. The output is then written one row after the other: the
 * four rows' stores interleaved (four store streams) are slower from memory than the AVX2
 * code. The sums and the whole-vector passes are the template's (row_stats, lnb_sums,
 * ln_normalize_rows, lnb_dx_rows). Rows left over (fewer than four) go to the AVX2 level. */
enum { LN_ROWS = 4 };

/* Rows whose 16-value loads each stay within one cache line: 16 bytes off a line, every 512-bit
 * load spans two and the four-row code is slower than the AVX2 code (which loads such rows as
 * 256-bit halves, one of two across a line), which takes them instead */
static bool ln_lines(int64_t d, const void *a, const void *b, const void *c, const void *e) {
    const uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)e;
    return d % 16 == 0 && bits % 64 == 0;
}

AVX512 static void layer_norm_avx512(const float *x, const float *gm, const float *bt, float *y,
                                    int64_t rows, int64_t d, float eps) {
    if (!ln_lines(d, x, y, gm, bt)) {
        tg__cpu_vmath_avx2.layer_norm(x, gm, bt, y, rows, d, eps);
        return;
    }
    int64_t r0 = 0;
    for (; r0 + LN_ROWS <= rows; r0 += LN_ROWS, x += LN_ROWS * d, y += LN_ROWS * d) {
        float mu[LN_ROWS], rs[LN_ROWS];
        row_stats_avx512(x, d, eps, LN_ROWS, mu, rs);
        for (int r = 0; r < LN_ROWS; r++) /* row after row (above) */
            ln_normalize_rows_avx512(x + r * d, gm, bt, y + r * d, d, 1, &mu[r], &rs[r]);
    }
    if (r0 < rows) tg__cpu_vmath_avx2.layer_norm(x, gm, bt, y, rows - r0, d, eps);
}

AVX512 static void layer_norm_back_avx512(const float *x, const float *gm, const float *dy,
                                         float *dx, int64_t rows, int64_t d, float eps) {
    if (!ln_lines(d, x, dy, dx, gm)) {
        tg__cpu_vmath_avx2.layer_norm_back(x, gm, dy, dx, rows, d, eps);
        return;
    }
    int64_t r0 = 0;
    for (; r0 + LN_ROWS <= rows;
         r0 += LN_ROWS, x += LN_ROWS * d, dy += LN_ROWS * d, dx += LN_ROWS * d) {
        float mu[LN_ROWS], sums[LN_ROWS][3];
        lnb_sums_avx512(x, gm, dy, d, LN_ROWS, mu, sums);
        lnb_coef k[LN_ROWS];
        for (int r = 0; r < LN_ROWS; r++)
            k[r] = lnb_coefs(mu[r], sums[r], d, eps);
        for (int r = 0; r < LN_ROWS; r++) /* row after row, as the forward */
            lnb_dx_rows_avx512(x + r * d, gm, dy + r * d, dx + r * d, d, 1, &k[r]);
    }
    if (r0 < rows) tg__cpu_vmath_avx2.layer_norm_back(x, gm, dy, dx, rows - r0, d, eps);
}

/* The forward's statistics alone (tg_cpu_vlayer_norm_stats): the same calls, so the same bits */
AVX512 static void layer_norm_stats_avx512(const float *x, int64_t rows, int64_t d, float eps,
                                          float *mean, float *rstd) {
    int64_t r0 = 0;
    if (ln_lines(d, x, NULL, NULL, NULL))
        for (; r0 + LN_ROWS <= rows; r0 += LN_ROWS)
            row_stats_avx512(x + r0 * d, d, eps, LN_ROWS, mean + r0, rstd + r0);
    tg__cpu_vmath_avx2.layer_norm_stats(x + r0 * d, rows - r0, d, eps, mean + r0, rstd + r0);
}

/* The cross-entropy's rows (the template's sumexp and ce_grad) in one 16-lane vector at a
 * time: the same elements meet the same operations in the same order (exp_le0_avx512 gives
 * exp_le0_avx2's bits; the sums end as the AVX2 code's), so the same bits at twice the width: a
 * vocabulary's cross-entropy, forward and backward, is bound by exp's arithmetic.
 *
 * Each gradient value depends on its own x alone, so the row may be cut anywhere: a row of a
 * vocabulary (CE_STREAM values or more, the step's gradient of the logits: tens of MB, read next
 * from memory by the products) goes out in streaming stores from its first 64-byte line on,
 * which skip reading the lines in first; the fence orders them before the node's end is
 * signalled. */
enum { CE_STREAM = 2048 };
AVX512 static void ce_grad_avx512(const float *x, int64_t n, float m, float inv, float scale,
                                  float base, float *y) {
    const ce_coef_avx512 k = {_mm512_set1_ps(m), _mm512_set1_ps(inv), _mm512_set1_ps(scale),
                              _mm512_set1_ps(base)};
    int64_t j = 0;
    if (n >= CE_STREAM && (uintptr_t)y % sizeof(float) == 0) {
        const int64_t head = (int64_t)((64 - (uintptr_t)y % 64) % 64 / sizeof(float));
        const __mmask16 t = tail16(0, head);
        const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), t, x);
        _mm512_mask_storeu_ps(y, t, ce_grad_v_avx512(v, k));
        for (j = head; j + 16 <= n; j += 16)
            _mm512_stream_ps(y + j, ce_grad_v_avx512(_mm512_loadu_ps(x + j), k));
        _mm_sfence();
    }
    ce_grad_from_avx512(x, j, n, k, y);
}

const tg_cpu_vmath tg__cpu_vmath_avx512 = {
    .vexp = tg__cpu_vexp_avx2,
    .vtanh = tg__cpu_vtanh_avx2,
    .vgelu = vgelu_avx512,
    .vgelu_back = vgelu_back_avx512,
    .softmax_rows = softmax_rows_avx512,
    .softmax_back_rows = softmax_back_rows_avx512,
    .layer_norm = layer_norm_avx512,
    .layer_norm_back = layer_norm_back_avx512,
    .layer_norm_stats = layer_norm_stats_avx512,
    .ce_sumexp = ce_sumexp_avx512,
    .ce_grad = ce_grad_avx512,
};
#endif
