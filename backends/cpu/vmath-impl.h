/* What the vector maths' three levels share (internal to vmath*.c): the constants of the
 * polynomials, the row lengths where the softmax changes method, and each level's table of
 * kernels (vmath.h: tg_cpu_vmath).
 *
 * The maths, the same at every level:
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
 * (EXP2_C1's comment: a table of 2^(j/8) and a cubic): 16 vector operations before the
 * division where an exp of -2u takes 24, at the same accuracy. */
#ifndef TG_CPU_VMATH_IMPL_H
#define TG_CPU_VMATH_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/cpu/vmath.h"

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
 * takes six. */
#define EXP2_MAGIC 1572864.0f
#define EXP2_C3 5.5496632348e-2f
#define EXP2_C2 2.4025770847e-1f
#define EXP2_C1 6.9314721312e-1f
/* clang-format off */
static const float EXP2_T[16] __attribute__((aligned(64), unused)) = {
    1.0f, 1.090507746f, 1.189207077f, 1.296839595f, 1.414213538f, 1.542210817f, 1.681792855f, 1.834008098f,
    1.0f, 1.090507746f, 1.189207077f, 1.296839595f, 1.414213538f, 1.542210817f, 1.681792855f, 1.834008098f};
/* clang-format on */

/* tanhf's polynomial on |x| < 0.625 (Cephes): tanh x = x + x^3 Q(x^2) */
#define TANH_Q0 -5.70498872745e-3f
#define TANH_Q1 2.06390887954e-2f
#define TANH_Q2 -5.37397155531e-2f
#define TANH_Q3 1.33314422036e-1f
#define TANH_Q4 -3.33332819422e-1f

/* Rows of up to SHORT_ROW_MAX values (attention over a few keys) are a softmax's own (the
 * portable level sums their exps in one running float, the vector levels take 8 or 16 rows at a
 * time, transposed); longer ones (vocabularies, attention over many keys) take the
 * cross-entropy's sums, so that a log-softmax row's log-sum-exp is the cross-entropy's bit for
 * bit. */
enum { SHORT_ROW_MAX = 32 };

/* softmax backward's dot product sum(dy y): serially for rows shorter than this (attention over
 * ~10 keys: 8 accumulators cost more to set up and combine), else element j to accumulator
 * j % 8 and the 8 combined pairwise. */
enum { DOT_SERIAL_BELOW = 16 };

/* The all-masked row (every entry -inf): probabilities 0, log-probabilities -inf */
static inline void softmax_dead_row(float *y, int64_t n, bool log_out) {
    for (int64_t j = 0; j < n; j++)
        y[j] = log_out ? -INFINITY : 0.0f;
}

/* Each level's kernels (vmath_portable.c, vmath_avx2.c, vmath_avx512.c); vmath.c picks one. A
 * vector level hands what its own code does not take (row counts or lengths outside its
 * blocks) to the level below, which gives the same bits. */
extern const tg_cpu_vmath tg__cpu_vmath_portable;
extern const tg_cpu_vmath tg__cpu_vmath_avx2;
extern const tg_cpu_vmath tg__cpu_vmath_avx512;
/* exp and tanh have no 512-bit form: both vector levels' tables hold these */
void tg__cpu_vexp_avx2(const float *x, float *y, int64_t n);
void tg__cpu_vtanh_avx2(const float *x, float *y, int64_t n);

#endif
