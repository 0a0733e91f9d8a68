/* tgraph — layers for writing models: parameters made under names in a store (tg_params), and
 * the Transformer's layers built from primitive ops over those names — linear, LayerNorm /
 * RMSNorm, feed-forward (ReLU, GELU, SwiGLU), multi-head attention (with shared key/value heads
 * and an additive score bias, for multi-query attention or ALiBi), token embeddings with
 * positions. The model zoo builds its own layers with these functions, so a hand-written model
 * and an attention kind registered with tg_attn_kind_register (tg/attn_kinds.h) compute what the
 * zoo computes, under the same parameter names (docs/model.md §4).
 *
 * Every builder takes the graph, the store and a name prefix ("decoder.layers.0.ffn"), reads its
 * parameters as prefix + "." + suffix, and returns NULL after marking the graph on an error
 * (a missing parameter, a shape that does not fit), so a model checks once after building. */
#ifndef TG_LAYERS_H
#define TG_LAYERS_H

#include "tg/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "tg/graph.h"
#include "tg/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- making parameters ---- */

/* How a new parameter is initialised (docs/model.md §1). */
typedef enum tg_init_kind {
    TG_INIT_XAVIER = 0, /* U(-a, a), a = sqrt(6 / (fan_in + fan_out)): shape[1] and shape[0] (2-D) */
    TG_INIT_ZEROS,      /* biases, norm biases */
    TG_INIT_ONES,       /* norm gains */
    TG_INIT_NORMAL,     /* N(0, sd^2), sd the tg_params' (models: d_model^-1/2), for embeddings */
    TG_INIT_EYE,        /* the identity (a square matrix) */
} tg_init_kind;

/* Where new parameters go: a store and the RNG their values are drawn from (in element order,
 * so a seed gives the same values on every backend). Inside a registered attention kind's init,
 * the model's own (its seed and draw order). */
typedef struct tg_params tg_params;

/* Parameters into store s (borrowed), drawn from seed; TG_INIT_NORMAL draws N(0, normal_sd^2).
 * Free with tg_params_free. */
TG_API tg_status tg_params_new(tg_store *s, uint64_t seed, double normal_sd, tg_params **out);
TG_API void tg_params_free(tg_params *p);
/* Add a trainable parameter `name` of ndim (1 to 4) dimensions; an existing name is an error. */
TG_API tg_status tg_params_add(tg_params *p, const char *name, int ndim, const int64_t *shape, tg_init_kind init);

/* ---- layers: the parameters (…_init) and the forward ---- */

/* prefix.weight [out, in] (Xavier), prefix.bias [out] (zeros) when bias */
TG_API tg_status tg_layers_linear_init(tg_params *p, const char *prefix, int64_t in, int64_t out, bool bias);
/* y = x W^T (+ b) over the last axis of x [..., in] -> [..., out] (PyTorch's nn.Linear) */
TG_API tg_tensor *tg_layers_linear(tg_graph *g, tg_store *s, const char *prefix, tg_tensor *x, bool bias);

/* prefix.weight [d] (ones) and, unless rms, prefix.bias [d] (zeros) */
TG_API tg_status tg_layers_norm_init(tg_params *p, const char *prefix, int64_t d, bool rms);
/* LayerNorm over the last axis (biased variance), or with rms RMSNorm:
 * x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019); eps <= 0 is 1e-5 (BERT: 1e-12) */
TG_API tg_tensor *tg_layers_norm(tg_graph *g, tg_store *s, const char *prefix, tg_tensor *x, bool rms, float eps);

/* the hidden activation: ReLU, GELU in its tanh form, GELU exact (erf: BERT's), or SwiGLU */
typedef enum tg_ffn_kind { TG_FFN_RELU = 0, TG_FFN_GELU, TG_FFN_SWIGLU, TG_FFN_GELU_ERF } tg_ffn_kind;
/* prefix.fc1 [d_ff, d], prefix.fc2 [d, d_ff], and for SwiGLU prefix.fc3 [d_ff, d] (with biases) */
TG_API tg_status tg_layers_ffn_init(tg_params *p, const char *prefix, int64_t d, int64_t d_ff, tg_ffn_kind kind);
/* act(x W1^T + b1) W2^T + b2 with dropout p on the hidden activation; SwiGLU (Shazeer 2020):
 * act(x W1^T + b1) = silu(x W1^T + b1) * (x W3^T + b3) */
TG_API tg_tensor *tg_layers_ffn(tg_graph *g, tg_store *s, const char *prefix, tg_tensor *x, tg_ffn_kind kind, float dropout);

/* prefix.{q_proj [heads*dk, d], k_proj and v_proj [kv_heads*dk, d], out_proj [d, heads*dk]}
 * with biases, dk = d / heads; kv_heads divides heads (heads: multi-head attention; 1:
 * multi-query attention, Shazeer 2019; between: grouped-query) */
TG_API tg_status tg_layers_attention_init(tg_params *p, const char *prefix, int64_t d, int64_t heads, int64_t kv_heads);
/* Scaled dot-product attention (Vaswani et al. 2017): xq [B,n,d] attends over xkv [B,m,d];
 * query head i reads key/value head i / (heads / kv_heads). scores = Q K^T / sqrt(dk) + bias
 * (NULL, or broadcastable to [B, heads, n, m]: ALiBi's distances, relative positions), masked
 * where mask != 0 (NULL or broadcastable to [B,1,n,m]) with -inf, softmax, dropout p, times V,
 * heads concatenated, out_proj. Returns [B,n,d]. */
TG_API tg_tensor *tg_layers_attention(tg_graph *g, tg_store *s, const char *prefix, tg_tensor *xq, tg_tensor *xkv,
                               tg_tensor *mask, tg_tensor *bias, int64_t heads, int64_t kv_heads, float dropout);

/* The positions an embedding adds. */
typedef enum tg_pos_kind {
    TG_POS_SINUSOIDAL = 0, /* docs/model.md §1, interleaved sin/cos, no parameter */
    TG_POS_LEARNED,        /* a table prefix.pos [max_len, d] */
    TG_POS_NONE,           /* none here (rotary positions are applied in the attention) */
} tg_pos_kind;
/* prefix.weight [vocab, d] (normal) and with TG_POS_LEARNED prefix.pos [max_len, d] (normal) */
TG_API tg_status tg_layers_embed_init(tg_params *p, const char *prefix, int64_t vocab, int64_t d, int64_t max_len,
                               tg_pos_kind pos);
/* Token embedding * sqrt(d) + the positions offset .. offset + T - 1 of ids [B, T] (i32 host
 * data, copied; every id must be in [0, vocab)): [B, T, d], then dropout p. */
TG_API tg_tensor *tg_layers_embed(tg_graph *g, tg_store *s, const char *prefix, const int32_t *ids, int64_t B, int64_t T,
                           int64_t offset, tg_pos_kind pos, float dropout);
/* The sinusoidal encoding of positions offset .. offset + T - 1: an input [T, d]. */
TG_API tg_tensor *tg_layers_sinusoid(tg_graph *g, int64_t offset, int64_t T, int64_t d);

#ifdef __cplusplus
}
#endif
#endif
