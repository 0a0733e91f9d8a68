/* tgraph — the primitive ops.
 *
 * Every op: shape inference at build time (errors recorded on the graph, NULL returned), a
 * kernel per backend, and a gradient rule; all but the kernels are in its family file in
 * core/ops/ (docs/extending.md). Binary elementwise ops broadcast like NumPy (shapes aligned
 * on the right, size-1 dimensions stretch). Axes may be negative.
 * All functions return a new tensor owned by the graph of their inputs, or NULL on error. */
#ifndef TG_OPS_H
#define TG_OPS_H

#include "tg/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "tg/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_op {
    TG_OP_NONE = 0,      /* leaf: input, parameter */
    TG_OP_FILL,          /* constant fill */
    /* views (no data movement) and copies */
    TG_OP_RESHAPE,
    TG_OP_PERMUTE,
    TG_OP_SLICE,
    TG_OP_CONT,          /* contiguous copy of a view */
    TG_OP_CONCAT,
    TG_OP_PAD,           /* zero padding along one axis (gradient of slice) */
    TG_OP_EXPAND,        /* broadcast to a larger shape (gradient of sum) */
    /* elementwise */
    TG_OP_ADD,
    TG_OP_SUB,
    TG_OP_MUL,
    TG_OP_DIV,
    TG_OP_SCALE,         /* y = x * s + c */
    TG_OP_EXP,
    TG_OP_LOG,
    TG_OP_SQRT,
    TG_OP_RSQRT,
    TG_OP_TANH,
    TG_OP_RELU,
    TG_OP_GELU,          /* tanh form */
    TG_OP_RELU_BACK,     /* dy * (x > 0) */
    TG_OP_GELU_BACK,     /* dy * gelu'(x) */
    TG_OP_MASKED_FILL,   /* where(mask != 0, value, x) */
    TG_OP_DROPOUT,
    /* reductions */
    TG_OP_SUM,           /* over one axis */
    TG_OP_MAX,           /* over one axis */
    TG_OP_MAX_BACK,      /* dy routed to the first maximum */
    TG_OP_SUM_TO,        /* sum broadcast dimensions away (gradient of broadcasting) */
    /* fused rows */
    TG_OP_SOFTMAX,
    TG_OP_LOG_SOFTMAX,
    TG_OP_SOFTMAX_BACK,
    TG_OP_LOG_SOFTMAX_BACK,
    TG_OP_LAYER_NORM,
    TG_OP_LAYER_NORM_BACK,
    /* products, lookups, losses */
    TG_OP_MATMUL,
    TG_OP_EMBEDDING,
    TG_OP_EMBEDDING_BACK, /* scatter-add of row gradients */
    TG_OP_CROSS_ENTROPY,
    TG_OP_CROSS_ENTROPY_BACK,
    /* banded (local-window) attention products, O(r·n·d) */
    TG_OP_BAND_SCORES,   /* S[i, j] = Q_i · K_{i+j-r} */
    TG_OP_BAND_MIX,      /* O_i = sum_j P[i, j] V_{i+j-r} */
    TG_OP_BAND_MIX_T,    /* Y_t = sum_j A[t+r-j, j] X_{t+r-j} (gradient of both) */
    /* side effects */
    TG_OP_GRAD_ACC,      /* store gradient += g */
    TG_OP_SILU,          /* x * sigmoid(x) */
    TG_OP_SILU_BACK,     /* dy * silu'(x) */
    TG_OP_LAYER_NORM_GAMMA_BACK, /* layer norm's dgamma: sum over rows of dy (x - mean) rstd */
    TG_OP_GELU_ERF,      /* exact GELU: x Phi(x) */
    TG_OP_GELU_ERF_BACK, /* dy * (Phi(x) + x phi(x)) */
    TG_OP_COUNT
} tg_op;

/* Name of an op ("matmul"). */
TG_API const char *tg_op_name(tg_op op);
/* True for ops that only appear inside gradients (checked through the op they differentiate). */
TG_API bool tg_op_is_backward_only(tg_op op);
/* True for ops with no differentiable input (fill, grad_acc). */
TG_API bool tg_op_has_no_gradient(tg_op op);
/* Op that produced t (TG_OP_NONE for leaves). */
TG_API tg_op tg_tensor_op(const tg_tensor *t);

/* ---- shape ops: reshape/permute/transpose/slice are views when possible ---- */
/* New shape with the same number of elements; one entry may be -1 (inferred). */
TG_API tg_tensor *tg_reshape(tg_tensor *x, int ndim, const int64_t *shape);
/* Output dimension i is input dimension perm[i]. */
TG_API tg_tensor *tg_permute(tg_tensor *x, const int *perm);
TG_API tg_tensor *tg_transpose(tg_tensor *x, int axis0, int axis1);
/* Elements [start, end) of `axis`. */
TG_API tg_tensor *tg_slice(tg_tensor *x, int axis, int64_t start, int64_t end);
/* A contiguous copy (the identity when x already is contiguous). */
TG_API tg_tensor *tg_contiguous(tg_tensor *x);
/* Concatenate n >= 1 tensors of equal shape except along `axis`. */
TG_API tg_tensor *tg_concat(tg_tensor *const *xs, int n, int axis);
/* Zero padding: `before` and `after` elements added along `axis`. */
TG_API tg_tensor *tg_pad(tg_tensor *x, int axis, int64_t before, int64_t after);
/* Broadcast x to `shape` (NumPy rules). */
TG_API tg_tensor *tg_expand(tg_tensor *x, int ndim, const int64_t *shape);

/* ---- elementwise ---- */
TG_API tg_tensor *tg_add(tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_div(tg_tensor *a, tg_tensor *b);
/* x * s */
TG_API tg_tensor *tg_scale(tg_tensor *x, float s);
/* x * s + c */
TG_API tg_tensor *tg_affine(tg_tensor *x, float s, float c);
TG_API tg_tensor *tg_add_scalar(tg_tensor *x, float c);
TG_API tg_tensor *tg_neg(tg_tensor *x);
TG_API tg_tensor *tg_exp(tg_tensor *x);
TG_API tg_tensor *tg_log(tg_tensor *x);
TG_API tg_tensor *tg_sqrt(tg_tensor *x);
TG_API tg_tensor *tg_rsqrt(tg_tensor *x);
TG_API tg_tensor *tg_tanh(tg_tensor *x);
TG_API tg_tensor *tg_relu(tg_tensor *x);
/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
TG_API tg_tensor *tg_gelu(tg_tensor *x);
/* SiLU (swish): x * sigmoid(x) = x / (1 + exp(-x)). */
TG_API tg_tensor *tg_silu(tg_tensor *x);
/* GELU, exact form (BERT's, PyTorch's default): x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))). */
TG_API tg_tensor *tg_gelu_erf(tg_tensor *x);
/* where(mask != 0, value, x); mask (f32 or i32) broadcasts to x. value may be -INFINITY. */
TG_API tg_tensor *tg_masked_fill(tg_tensor *x, tg_tensor *mask, float value);
/* Inverted dropout: zero with probability p, scale kept values by 1/(1-p). Identity in
 * inference mode or when p == 0. Masks come from the graph seed and the op's stream id. */
TG_API tg_tensor *tg_dropout(tg_tensor *x, float p);

/* ---- reductions ---- */
TG_API tg_tensor *tg_sum(tg_tensor *x, int axis, bool keepdim);
TG_API tg_tensor *tg_mean(tg_tensor *x, int axis, bool keepdim);
TG_API tg_tensor *tg_max(tg_tensor *x, int axis, bool keepdim);
/* Sum of all elements, a scalar. */
TG_API tg_tensor *tg_sum_all(tg_tensor *x);
TG_API tg_tensor *tg_mean_all(tg_tensor *x);
/* Sum the dimensions that broadcasting stretched, back to `shape`. */
TG_API tg_tensor *tg_sum_to(tg_tensor *x, int ndim, const int64_t *shape);

/* ---- rows (last axis) ---- */
/* Numerically stable; entries at -inf get probability 0; a row that is entirely -inf gives 0s. */
TG_API tg_tensor *tg_softmax(tg_tensor *x);
/* log-softmax; an entirely -inf row gives -inf (its softmax is 0). */
TG_API tg_tensor *tg_log_softmax(tg_tensor *x);
/* (x - mean) / sqrt(var + eps) * gamma + beta over the last axis, biased variance.
 * gamma and beta ([d]) may be NULL. */
TG_API tg_tensor *tg_layer_norm(tg_tensor *x, tg_tensor *gamma, tg_tensor *beta, float eps);

/* ---- products, lookups, losses ---- */
/* Batched matrix product op(a)·op(b) over the last two axes; batch axes broadcast. */
TG_API tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b, bool trans_a, bool trans_b);
/* Rows of table [V, d] selected by i32 ids of any shape: result shape ids.shape + [d]. An id
 * outside [0, V) is a run-time error. */
TG_API tg_tensor *tg_embedding(tg_tensor *table, tg_tensor *ids);

typedef enum tg_reduction {
    TG_REDUCE_MEAN = 0, /* mean over non-ignored targets (0 if none) */
    TG_REDUCE_SUM = 1,
    TG_REDUCE_NONE = 2, /* one loss per row; ignored rows give 0 */
} tg_reduction;
/* Label-smoothed cross-entropy (docs/model.md §1): logits [N, V], targets i32 [N];
 * q(k) = (1 - eps)[k = y] + eps / V; loss_row = -sum_k q(k) log softmax(logits)_k.
 * Rows whose target equals ignore_index contribute nothing. */
TG_API tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *targets, float smoothing,
                            int32_t ignore_index, tg_reduction reduction);
/* The same loss and, beside it, the plain negative log-likelihood (smoothing 0) of the same
 * rows, from one pass over the logits: [2] = {loss, nll} when reduced, [N, 2] per row with
 * TG_REDUCE_NONE. Each column has the bits of tg_cross_entropy with its smoothing; the gradient
 * takes both columns (a trainer that minimises the loss and reports the NLL pays one pass). */
TG_API tg_tensor *tg_cross_entropy_with_nll(tg_tensor *logits, tg_tensor *targets, float smoothing,
                                     int32_t ignore_index, tg_reduction reduction);

/* ---- banded (restricted, local-window) attention: O(r·n·d) instead of O(n·m·d) ----
 * Row i of n queries sees the 2r+1 keys at positions i-r .. i+r; column j of a banded score
 * row is the key at position i + j - r (j = r: the key at the query's own position, j > r:
 * later keys). The leading (batch, head) dimensions of both operands must be equal (no
 * broadcasting: tg_expand the smaller one). r >= 0; r may exceed n and m. */
/* S [..., n, 2r+1] with S[i, j] = Q_i · K_{i+j-r} for Q [..., n, dk], K [..., m, dk]. A
 * position i+j-r outside [0, m) has no key: its entry is `fill` (-INFINITY so that a softmax
 * gives it probability 0 with no mask; 0 where the scores are mixed before masking, as
 * talking-heads attention does, which then must mask those entries itself). */
TG_API tg_tensor *tg_band_scores(tg_tensor *q, tg_tensor *k, int64_t r, float fill);
/* O [..., n, dv] with O_i = sum_j P[i, j] V_{i+j-r} for P [..., n, 2r+1], V [..., m, dv];
 * entries of P whose key position lies outside [0, m) are never read (they may be -inf). */
TG_API tg_tensor *tg_band_mix(tg_tensor *p, tg_tensor *v, int64_t r);

#ifdef __cplusplus
}
#endif
#endif
