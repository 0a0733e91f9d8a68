/* Vector maths of the CPU backend (internal header): exp, tanh, GELU and GELU's derivative over
 * arrays, and the row kernels softmax, layer norm and the cross-entropy's sums. Each function
 * runs the kernels of the instruction-set level in use (isa.h): 8 lanes at a time with AVX2+FMA
 * (vmath_avx2.c), 16 for GELU, GELU', short softmax rows, the softmax backward's rows of 9-15,
 * layer norm on 64-byte lines and the cross-entropy's rows with AVX-512F (vmath_avx512.c), and
 * portable scalar code otherwise (vmath_portable.c: the reference the vector levels are tested
 * against). The maths: vmath-impl.h.
 *
 * Accuracy against libm in double, at every level (asserted by tests/test_vmath.c over
 * 200,003-point sweeps):
 *   exp       relative error <= 2^-23 (2 ulp) for x in [-87.3, 88.3]; x below -87.3 gives
 *             exp(-87.3) ~ 1.2e-38, not 0 (callers that need 0 for -inf mask it); NaN -> NaN
 *   tanh      absolute error <= 2^-23 over [-12, 12], relative <= 2^-23 for |x| < 0.625
 *   gelu      (tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))
 *             absolute error <= 2^-22 * max(|x|, 1) over [-10, 10]
 *   gelu'     absolute error <= 2^-21 over [-10, 10]
 *   softmax   relative error <= 1e-6 per probability, rows of 1..40 and long rows
 *   softmax backward absolute error <= 1e-6 (probabilities, |dy| <= 1.5), rows of 1..40
 *   layer norm absolute error <= 5e-6 (unit-variance output; backward: of max(rstd, 1)), rows of
 *             1..40 and 63..300, mean 3
 *   cross-entropy rows: max + log(sum of exps) and the plain sum relative error <= 2e-6 of
 *             max(|ref|, 1), gradient absolute error <= 5e-7, rows of 1..45, 1000, 7816 and
 *             8000 over [-20, 20]
 * Bits across levels: the AVX2 level uses fused multiply-adds, so its results differ from the
 * portable level's in the last bits; the AVX-512 level does the AVX2 level's operations on the
 * same elements in the same order and gives its bits. The softmax backward gives the same bits
 * at every level (no fused multiply-adds). At any level the results are fixed: they depend
 * neither on threads nor on alignment nor on where a thread's share of rows starts.
 */
#ifndef TG_CPU_VMATH_H
#define TG_CPU_VMATH_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/cpu/isa.h"

/* y[i] = f(x[i]), i < n; y may be x */
void tg_cpu_vexp(const float *x, float *y, int64_t n);
void tg_cpu_vtanh(const float *x, float *y, int64_t n);
void tg_cpu_vgelu(const float *x, float *y, int64_t n);
/* dx[i] = dy[i] * gelu'(x[i]); dx may be x or dy */
void tg_cpu_vgelu_back(const float *x, const float *dy, float *dx, int64_t n);

/* Row softmax of rows × d (row-major, y may be x), log_out: log-softmax. Entries at -inf get
 * probability 0 (log-prob -inf); an all -inf row gives zeros (log: -inf). The vector levels
 * take softmax rows of up to 32 eight (AVX-512: sixteen) at a time, transposed (lane r = row
 * r), bit-identical to their one-row code, so a row's result does not depend on where a
 * thread's share of rows starts. Rows longer than 32 take tg_cpu_vce_sumexp's max and sum at
 * every level: a log-softmax row is x - (max + logf(sum)), the cross-entropy's log-sum-exp,
 * bit for bit. */
void tg_cpu_vsoftmax_rows(const float *x, float *y, int64_t rows, int64_t d, bool log_out);
/* Its backward, dx = y (dy - sum(dy y)) over rows × d (dx may be y or dy); sum(dy y) serially
 * for rows shorter than 16, else in 8 lane accumulators (element j in lane j % 8). Every level
 * gives the same bits (no fused multiply-add). */
void tg_cpu_vsoftmax_back_rows(const float *y, const float *dy, float *dx, int64_t rows, int64_t d);

/* Layer norm over rows × d (y = (x - mean) / sqrt(var + eps) * gamma + beta; gamma, beta may
 * be NULL) and its backward, dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = gamma * dy.
 * Means in 8 lane accumulators (element j in lane j % 8), two passes for the variance. */
void tg_cpu_vlayer_norm_rows(const float *x, const float *gamma, const float *beta, float *y,
                             int64_t rows, int64_t d, float eps);
void tg_cpu_vlayer_norm_back_rows(const float *x, const float *gamma, const float *dy, float *dx,
                                  int64_t rows, int64_t d, float eps);
/* The forward's statistics of each row, mean[r] and rstd[r] = 1 / sqrt(var + eps): the values
 * tg_cpu_vlayer_norm_rows normalises with (same bits), so that (x - mean) * rstd, rounded after
 * the subtraction and after the product, is its xhat. */
void tg_cpu_vlayer_norm_stats(const float *x, int64_t rows, int64_t d, float eps, float *mean,
                              float *rstd);

/* Rows of the cross-entropy (vocabularies), in 8 lane accumulators (element k in lane k % 8):
 * the row's max (*max) and sum of exp(x[k] - max), returned, and with sum_x its plain sum; and
 * its gradient row y[k] = scale (exp(x[k] - max) inv - base), inv = 1 / that sum. Entries at
 * -inf have probability 0. */
float tg_cpu_vce_sumexp(const float *x, int64_t n, float *max, float *sum_x);
void tg_cpu_vce_grad(const float *x, int64_t n, float max, float inv, float scale, float base,
                     float *y);

/* The kernels of one level, with the arguments of the functions above. */
typedef struct tg_cpu_vmath {
    void (*vexp)(const float *x, float *y, int64_t n);
    void (*vtanh)(const float *x, float *y, int64_t n);
    void (*vgelu)(const float *x, float *y, int64_t n);
    void (*vgelu_back)(const float *x, const float *dy, float *dx, int64_t n);
    void (*softmax_rows)(const float *x, float *y, int64_t rows, int64_t d, bool log_out);
    void (*softmax_back_rows)(const float *y, const float *dy, float *dx, int64_t rows, int64_t d);
    void (*layer_norm)(const float *x, const float *gamma, const float *beta, float *y,
                       int64_t rows, int64_t d, float eps);
    void (*layer_norm_back)(const float *x, const float *gamma, const float *dy, float *dx,
                            int64_t rows, int64_t d, float eps);
    void (*layer_norm_stats)(const float *x, int64_t rows, int64_t d, float eps, float *mean,
                             float *rstd);
    float (*ce_sumexp)(const float *x, int64_t n, float *max, float *sum_x);
    void (*ce_grad)(const float *x, int64_t n, float max, float inv, float scale, float base,
                    float *y);
} tg_cpu_vmath;

/* The kernels of `level`, whatever level is in use, so that tests and benchmarks can compare
 * the levels in one process; NULL where the CPU lacks the level (tg_cpu_isa_supported). */
const tg_cpu_vmath *tg_cpu_vmath_at(tg_cpu_isa_level level);

#endif
