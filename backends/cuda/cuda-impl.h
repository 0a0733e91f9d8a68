/* Internal interface of the CUDA backend (not installed).
 *
 * Host code is C (cuda.c: the backend object, allocator, copies and store maths; cuda_ops.c:
 * one function per op that turns a node into launcher arguments, and matmul through cuBLAS).
 * The .cu files hold only kernels and the thin extern "C" launchers declared here, each of
 * which enqueues its kernels on the given stream and returns cudaGetLastError().
 *
 * Every kernel computes what the CPU kernel of the same op computes (backends/cpu/k_*.c), in
 * the same float operations per element (nvcc runs with --fmad=false so that a*b+c is not
 * fused, as on the CPU without -march=native). Where the CPU sums in a fixed serial order the
 * GPU sums in a tree (block reductions): those results agree to rounding, not bit for bit;
 * so do expf/logf/tanhf (CUDA's are within 2 ulp, glibc's within 1) and cuBLAS products.
 * Bit-identical by construction: + - * /, sqrt, relu, scale, masks, dropout (same Philox
 * counter/key), layout copies, max/max_back, embedding and its scatter-add (same row order),
 * column sums (unless few columns meet more than 256 rows), the optimizer updates, and the
 * per-element exponentials of softmax and cross-entropy (the CPU's own fast exp). */
#ifndef TG_CUDA_IMPL_H
#define TG_CUDA_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "tg/ops.h"    /* tg_op: the op codes of the elementwise kernels */
#include "tg/tensor.h" /* TG_MAX_DIMS */

#ifdef __cplusplus
extern "C" {
#endif

/* An n-dimensional index space (the output, row-major) read through up to two inputs with
 * their own element strides (0 where an input is broadcast). Host code merges dimensions that
 * are contiguous in every operand, so the common cases have 1 or 2 dimensions. */
typedef struct tgcu_index {
    int nd; /* >= 1 */
    int64_t shape[TG_MAX_DIMS];
    int64_t sa[TG_MAX_DIMS]; /* strides of input a */
    int64_t sb[TG_MAX_DIMS]; /* strides of input b */
} tgcu_index;

/* ---- k_elementwise.cu ---- */
cudaError_t tgcu_fill(cudaStream_t s, float *o, int64_t n, float v);
/* o = a (op) b over the index space ix (o contiguous, n = numel of ix); op is the node's op
 * (add, sub, mul, div, and the backward ops of x and dy: relu_back, gelu_back, ...). */
cudaError_t tgcu_binary(cudaStream_t s, tg_op op, float *o, const float *a, const float *b,
                        const tgcu_index *ix, int64_t n);
/* o = op(a) for the unary elementwise ops; sc and c are scale's (x * sc + c) */
cudaError_t tgcu_unary(cudaStream_t s, tg_op op, float *o, const float *a, int64_t n, float sc,
                       float c);
/* o = mask != 0 ? v : x; the mask (f32 or i32) read through ix.sb, x through ix.sa. */
cudaError_t tgcu_masked_fill(cudaStream_t s, float *o, const float *x, const void *mask,
                             bool mask_i32, const tgcu_index *ix, int64_t n, float v);
/* Inverted dropout, mask word of element e = Philox(ctr (e/4, stream), key) word e%4. */
cudaError_t tgcu_dropout(cudaStream_t s, float *o, const float *a, int64_t n, float p,
                         float keep_scale, uint32_t stream_id, uint32_t key0, uint32_t key1);
/* o += g (gradient accumulation into a store) and x *= sc (store scaling). */
cudaError_t tgcu_accumulate(cudaStream_t s, float *o, const float *g, int64_t n);
cudaError_t tgcu_scale_inplace(cudaStream_t s, float *x, int64_t n, float sc);
/* Optimizer updates with exactly the CPU's float expressions (cpu.c, cpu_optim_update). */
cudaError_t tgcu_sgd(cudaStream_t s, float *w, const float *g, float *m, int64_t n, float lr,
                     float wd, float mu);
cudaError_t tgcu_adam(cudaStream_t s, float *w, const float *g, float *m, float *v, int64_t n,
                      float lr, float wd, float b1, float b2, float eps, float alpha, float rc2,
                      bool decoupled);
/* Sum of squares in double: part must hold tgcu_sumsq_parts(n) doubles; the total is written
 * to *out (device memory). */
int64_t tgcu_sumsq_parts(int64_t n);
cudaError_t tgcu_sumsq(cudaStream_t s, const float *x, int64_t n, double *part, double *out);

/* ---- k_layout.cu ---- */
/* o[e] = src[offset of e through ix.sa] for 4-byte elements (contiguous copy, expand). */
cudaError_t tgcu_strided_copy(cudaStream_t s, uint32_t *o, const uint32_t *src,
                              const tgcu_index *ix, int64_t n);

/* ---- k_reduce.cu ---- */
/* x viewed as [outer, n, inner], summed over n into o [outer, inner]. `part` is scratch of
 * tgcu_sum_axis_scratch(outer, n, inner) floats (may be NULL when that is 0). */
int64_t tgcu_sum_axis_scratch(int64_t outer, int64_t n, int64_t inner);
cudaError_t tgcu_sum_axis(cudaStream_t s, const float *x, float *o, int64_t outer, int64_t n,
                          int64_t inner, float *part);
/* General sum_to: x has nd dims of shape xshape (contiguous); red[i] marks the summed dims;
 * each of the nout outputs sums its reduced index space in row-major order. */
typedef struct tgcu_sumto {
    int nd;
    int64_t shape[TG_MAX_DIMS];
    int64_t stride[TG_MAX_DIMS];
    int red[TG_MAX_DIMS];
} tgcu_sumto;
cudaError_t tgcu_sum_to(cudaStream_t s, const float *x, float *o, const tgcu_sumto *d,
                        int64_t nout, int64_t nred);
cudaError_t tgcu_max_axis(cudaStream_t s, const float *x, float *o, int64_t outer, int64_t n,
                          int64_t inner);
cudaError_t tgcu_max_back(cudaStream_t s, const float *x, const float *y, const float *dy, float *o,
                          int64_t outer, int64_t n, int64_t inner);

/* ---- k_rows.cu (one thread block per row of the last axis) ---- */
cudaError_t tgcu_softmax(cudaStream_t s, const float *x, float *y, int64_t rows, int64_t d,
                         bool log_out);
cudaError_t tgcu_softmax_back(cudaStream_t s, const float *y, const float *dy, float *dx,
                              int64_t rows, int64_t d, bool log_out);
cudaError_t tgcu_layer_norm(cudaStream_t s, const float *x, const float *gamma, const float *beta,
                            float *y, int64_t rows, int64_t d, float eps);
cudaError_t tgcu_layer_norm_back(cudaStream_t s, const float *x, const float *gamma,
                                 const float *dy, float *dx, int64_t rows, int64_t d, float eps);
/* Cross-entropy row losses into rowloss[N, cols] (0 for ignored rows; cols 2: the NLL, the
 * loss at eps 0, beside it); then, unless reduction is none, out[c] = the sum (or sum / count)
 * of column c accumulated in double. */
cudaError_t tgcu_cross_entropy(cudaStream_t s, const float *x, const int32_t *y, float *rowloss,
                               int64_t N, int64_t V, float eps, int32_t ignore, int cols);
cudaError_t tgcu_sum_rows_to_scalar(cudaStream_t s, const float *rowloss, int64_t N, int cols,
                                    float *out, bool mean, int64_t count);
/* dx = sc_i (softmax(x_i) - q_i) + sc1_i (softmax(x_i) - [k = y_i]); sc_i = dy[i] (none), dy[0]
 * (sum) or dy[0]/count (mean), sc1_i the same from dy's second column (cols 2; else 0). */
cudaError_t tgcu_cross_entropy_back(cudaStream_t s, const float *x, const int32_t *y,
                                    const float *dy, float *dx, int64_t N, int64_t V, float eps,
                                    int32_t ignore, int reduction, int64_t count, int cols);

/* ---- k_band.cu (banded attention, core/ops/band.c; rows = batches × query rows for scores and
 * mix, batches × key rows for mix_t; n query rows and m key rows per batch, r the half-width) ---- */
cudaError_t tgcu_band_scores(cudaStream_t s, const float *q, const float *k, float *o, int64_t rows,
                             int64_t n, int64_t m, int64_t dk, int64_t r, float fill);
cudaError_t tgcu_band_mix(cudaStream_t s, const float *p, const float *v, float *o, int64_t rows,
                          int64_t n, int64_t m, int64_t dv, int64_t r);
cudaError_t tgcu_band_mix_t(cudaStream_t s, const float *a, const float *x, float *o, int64_t rows,
                            int64_t n, int64_t m, int64_t d, int64_t r);

/* ---- k_nn.cu ---- */
/* Validate ids: out[0] = first position whose id is outside [0, V) (and not `ignore` when
 * use_ignore), or INT64_MAX; out[1] = number of ids that are not ignored. out is device
 * memory of two int64. */
cudaError_t tgcu_check_ids(cudaStream_t s, const int32_t *ids, int64_t n, int64_t V,
                           bool use_ignore, int32_t ignore, int64_t *out);
/* o[r] = table[ids[r]] (rows of d floats); ids were validated (an invalid one gives NaNs). */
cudaError_t tgcu_embedding(cudaStream_t s, const float *table, const int32_t *ids, float *o,
                           int64_t n, int64_t V, int64_t d);
/* Deterministic scatter-add: o [V, d] = 0, then for every id row r in increasing r,
 * o[id[r]] += dy[r] — positions are sorted by (id, r) with CUB's radix sort first, so each
 * output element is summed by one thread in the CPU's order. Scratch: tgcu_embedding_back_scratch
 * bytes (call with the same n and V). */
size_t tgcu_embedding_back_scratch(int64_t n, int64_t V);
cudaError_t tgcu_embedding_back(cudaStream_t s, const int32_t *ids, const float *dy, float *o,
                                int64_t n, int64_t V, int64_t d, void *scratch,
                                size_t scratch_bytes);

#ifdef __cplusplus
}
#endif
#endif
