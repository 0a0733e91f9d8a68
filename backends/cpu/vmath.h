/* Vector maths of the CPU backend (internal header): exp, tanh, GELU and GELU's derivative over
 * arrays, and the row kernels softmax, layer norm and the cross-entropy's sums, run 8 lanes at
 * a time with AVX2+FMA where the CPU has them (chosen at run time: the library is not built
 * for the host CPU), and the same formulas as portable scalar code otherwise.
 *
 * Accuracy against libm in double (asserted by tests/test_vmath.c over 200,003-point sweeps;
 * both paths; measured maxima on Zen 3 in brackets):
 *   exp       relative error <= 2^-23 (2 ulp) for x in [-87.3, 88.3]   [2^-23.2]; x below -87.3
 *             gives exp(-87.3) ~ 1.2e-38, not 0 (callers that need 0 for -inf mask it); NaN -> NaN
 *   tanh      absolute error <= 2^-23 over [-12, 12], relative <= 2^-23 for |x| < 0.625
 *             [2^-23.7 both]
 *   gelu      (tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))
 *             absolute error <= 2^-22 * max(|x|, 1) over [-10, 10]   [2^-23.0]
 *   gelu'     absolute error <= 2^-21 over [-10, 10]   [2^-22.3]
 *   softmax   relative error <= 1e-6 per probability, rows of 1..40   [7.2e-7; 7.9e-7 on the
 *             test's present values]
 *   softmax backward absolute error <= 1e-6 (probabilities, |dy| <= 1.5), rows of 1..40  [1.5e-7]
 *   layer norm absolute error <= 5e-6 (unit-variance output; backward: of max(rstd, 1)), rows of
 *             1..40 and 63..300, mean 3   [1.2e-6, 3.0e-7]
 *   cross-entropy rows: max + log(sum of exps) and the plain sum relative error <= 2e-6 of
 *             max(|ref|, 1), gradient absolute error <= 5e-7, rows of 1..45, 1000, 7816 and
 *             8000 over [-20, 20]   [1.1e-8, 8.6e-8]
 * The AVX2 path uses fused multiply-adds, so its results differ from the scalar path's in the
 * last bits; for a given CPU they are fixed (no dependence on threads or alignment). GELU,
 * GELU', softmax rows of 9-32 values and their backward's of 9-15, and the cross-entropy's rows
 * run 16 lanes at a time where the CPU has AVX-512F (isa.h), with the AVX2 path's operations:
 * the same bits; on a Zen 4 core GELU 1.5-1.7x and softmax 1.3-1.6x the AVX2 path's speed
 * (docs/log/2026-12-02.md). The softmax
 * backward's vector paths give the scalar path's bits (no fused multiply-adds).
 */
#ifndef TG_CPU_VMATH_H
#define TG_CPU_VMATH_H

#include <stdbool.h>
#include <stdint.h>

/* y[i] = f(x[i]), i < n; y may be x */
void tg_cpu_vexp(const float *x, float *y, int64_t n);
void tg_cpu_vtanh(const float *x, float *y, int64_t n);
void tg_cpu_vgelu(const float *x, float *y, int64_t n);
/* dx[i] = dy[i] * gelu'(x[i]); dx may be x or dy */
void tg_cpu_vgelu_back(const float *x, const float *dy, float *dx, int64_t n);

/* Row softmax of rows × d (row-major, y may be x), log_out: log-softmax. Entries at -inf get
 * probability 0 (log-prob -inf); an all -inf row gives zeros (log: -inf). The AVX2 path takes
 * softmax rows of up to 32 eight at a time, transposed (lane r = row r), bit-identical to its
 * one-row code, so a row's result does not depend on where a thread's share of rows starts.
 * Rows longer than 32 take tg_cpu_vce_sumexp's max and sum on every path: a log-softmax row is
 * x - (max + logf(sum)), the cross-entropy's log-sum-exp, bit for bit. */
void tg_cpu_vsoftmax_rows(const float *x, float *y, int64_t rows, int64_t d, bool log_out);
/* Its backward, dx = y (dy - sum(dy y)) over rows × d (dx may be y or dy); sum(dy y) serially
 * for rows shorter than 16, else in 8 lane accumulators (element j in lane j % 8). Both paths
 * give the same bits (no fused multiply-add); the AVX2 path takes rows shorter than 16 eight
 * at a time (their products transposed for the sums), longer ones a vector of 8 at a time. */
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

/* The paths, for tests: which one the functions above use, and each one directly
 * (avx2 false: the scalar path; true: the AVX2 path, only where tg_cpu_vmath_isa() says
 * "avx2+fma"). */
const char *tg_cpu_vmath_isa(void);
void tg_cpu_vexp_path(const float *x, float *y, int64_t n, bool avx2);
void tg_cpu_vtanh_path(const float *x, float *y, int64_t n, bool avx2);
void tg_cpu_vgelu_path(const float *x, float *y, int64_t n, bool avx2);
void tg_cpu_vgelu_back_path(const float *x, const float *dy, float *dx, int64_t n, bool avx2);
void tg_cpu_vsoftmax_rows_path(const float *x, float *y, int64_t rows, int64_t d, bool log_out, bool avx2);
void tg_cpu_vsoftmax_back_rows_path(const float *y, const float *dy, float *dx, int64_t rows, int64_t d, bool avx2);
void tg_cpu_vlayer_norm_rows_path(const float *x, const float *gamma, const float *beta, float *y,
                                  int64_t rows, int64_t d, float eps, bool avx2);
float tg_cpu_vce_sumexp_path(const float *x, int64_t n, float *max, float *sum_x, bool avx2);
void tg_cpu_vce_grad_path(const float *x, int64_t n, float max, float inv, float scale, float base,
                          float *y, bool avx2);
void tg_cpu_vlayer_norm_back_rows_path(const float *x, const float *gamma, const float *dy, float *dx,
                                       int64_t rows, int64_t d, float eps, bool avx2);
void tg_cpu_vlayer_norm_stats_path(const float *x, int64_t rows, int64_t d, float eps, float *mean,
                                   float *rstd, bool avx2);

#endif
