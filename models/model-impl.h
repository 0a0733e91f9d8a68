/* Internal structures of the model zoo: the model, its layer builders and attention pieces.
 * Every builder declared here that fails marks its graph (tg__graph_fail) before returning NULL. */
#ifndef TG_MODEL_IMPL_H
#define TG_MODEL_IMPL_H

#include "core/tg-impl.h"
#include "tg/autograd.h"
#include "tg/decode.h"
#include "tg/init.h"
#include "tg/kv_cache.h"
#include "tg/rng.h"
#include "tg/sample.h"
#include "tg/attn_kinds.h"
#include "tg/layers.h"
#include "tg/model.h"
#include "tg/tokenizer.h"
#include "tg/json.h"

/* Attention weights kept while tg_model_attention_maps builds a graph (models/attn_maps.c);
 * with logits set, each sub-layer's pre-mask logits (s) and talking heads' softmax (p) too */
typedef struct tg__attn_capture {
    int64_t n, cap;
    bool logits;
    char (*name)[160];
    tg_tensor **w, **s, **p;
} tg__attn_capture;

struct tg_model {
    tg_model_config cfg;
    tg_vocab *src, *tgt; /* tgt == src for a joint vocabulary */
    tg_store *store;
    tg_backend *backend;
    tg__attn_capture *capture; /* non-NULL: tg__attn_core records its weights here */
    /* Compute a self-attention window (cfg.window) as a mask on the dense n×n scores even
     * where the banded O(r·n·d) path applies (models/attention.c): tests and
     * benchmarks/micro/bench_attention compare the two. Not part of the config or checkpoints. */
    bool dense_window;
    /* Parameters made without drawing their random values (zeros where tg__model_init_params
     * draws): a checkpoint's values replace every one of them (tg_model_load), and drawing
     * ~2 M values was a quarter of a one-sentence `tg translate`'s time. */
    bool no_draw;
    /* tg_decoder_hold_weights calls not yet released: the decoder's weights stay prepared on the
     * backend between decoders while it is above 0 */
    int64_t decode_holds;
    /* the tokenizer that travels with the model (NULL: none stored; owned) */
    tg_tokenizer *tok;
};

/* tg_model_new, the parameters made as for m->no_draw when draw is false */
tg_status tg__model_new(const tg_model_config *cfg, tg_vocab *src, tg_vocab *tgt, tg_backend *b,
                        uint64_t seed, bool draw, tg_model **out);

/* The attention weights of sub-layer `prefix` (w, the tensor that multiplies V), recorded and
 * kept when m->capture is set; returns w. s: the kind's scaled logits before the mask (same
 * shape as w); p: talking heads' softmax before the post-softmax mixing, NULL for the kinds
 * whose w is the softmax. s and p are kept only when the capture asks for logits, so that the
 * graph of tg_model_attention_maps is the one it always was. */
tg_tensor *tg__attn_seen(tg_model *m, const char *prefix, tg_tensor *w, tg_tensor *s, tg_tensor *p);

/* tg_json_object_set(o, key, v) with a sticky status (models/checkpoint.c): nothing but freeing
 * v once *st is an error; a NULL v (its constructor out of memory) makes *st TG_ERR_NOMEM. The
 * metadata writers of checkpoints, tokenizers and the Hugging Face export build with it. */
void tg__json_put(tg_json *o, const char *key, tg_json *v, tg_status *st);

/* parameter names of docs/model.md §4 */
const char *tg__model_src_embed_name(const tg_model_config *c);
const char *tg__model_tgt_embed_name(const tg_model_config *c);
const char *tg__model_out_proj_name(const tg_model_config *c);

/* layers (models/layers.c); parameters are looked up in the model's store by name */
tg_tensor *tg__layer_linear(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x, bool bias);
tg_tensor *tg__layer_norm(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x);
tg_tensor *tg__layer_ffn(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x);
/* Check a [B, len] matrix of token ids at positions [offset, offset + len) before it becomes a
 * graph input: non-NULL, a non-empty batch, within max_len, every id in [0, vocab). On failure
 * marks g with a message that starts with `who` and names `what` ("source", "target") and the
 * cause, and returns false. */
bool tg__layer_check_ids(tg_graph *g, const char *who, const char *what, const int32_t *ids,
                         int64_t B, int64_t len, int64_t offset, int64_t vocab, int64_t max_len);
/* token embedding * sqrt(d) + positions [offset, offset+len), then dropout */
tg_tensor *tg__layer_embed(tg_model *m, tg_graph *g, const char *table, const int32_t *ids,
                           int64_t B, int64_t len, int64_t offset);
/* padding mask [B,1,1,len] from ids (1 where <pad>) */
tg_tensor *tg__layer_pad_mask(tg_graph *g, const int32_t *ids, int64_t B, int64_t len);
/* decoder self-attention mask [B,1,T,T]: causal or padded keys */
tg_tensor *tg__layer_causal_mask(tg_graph *g, const int32_t *ids, int64_t B, int64_t T);
/* the same with the padding id pad (-1: no key is padding, as in GPT-2) */
tg_tensor *tg__layer_causal_mask_pad(tg_graph *g, const int32_t *ids, int64_t B, int64_t T, int32_t pad);

/* a sub-layer with residual, norm and dropout (docs/model.md §1 wiring); f computes the sub-layer */
typedef tg_tensor *(*tg__model_sublayer_fn)(tg_model *m, tg_graph *g, const char *prefix,
                                            tg_tensor *x, void *ctx);
tg_tensor *tg__layer_residual(tg_model *m, tg_graph *g, const char *norm_name, const char *prefix,
                              tg_tensor *x, tg__model_sublayer_fn f, void *ctx);

/* What a self-attention mask masks, told by the code that built it, so that restricted attention
 * (cfg.window) can make the mask's banded form on the host (models/attention.c): key j of
 * sequence b (of B, each n long) is masked where ids[b * n + j] == pad and, with causal, for
 * every query before it. The mask itself is not read: a mask passed without a description takes
 * the dense path. */
typedef struct tg__attn_band {
    const int32_t *ids; /* [B, n] */
    int64_t B;
    int32_t pad; /* -1: no key is padding */
    bool causal;
} tg__attn_band;

/* the decoder stack on embedded targets; memory [B,S,d]; self_band: what self_mask masks */
tg_tensor *tg__model_decode(tg_model *m, tg_graph *g, tg_tensor *y, tg_tensor *memory,
                            tg_tensor *src_mask, tg_tensor *self_mask, const tg__attn_band *self_band);

/* The attention sub-layers of the decoder, as the caller computes them: training and scoring
 * attend over the whole prefix (tg__model_decode), cached decoding over the keys and values of the
 * earlier steps (decode.c). bind(arg, layer, cross) gives the context of that layer's self- or
 * cross-attention, used before the next call. */
typedef struct tg__model_dec_attn {
    tg__model_sublayer_fn self, cross;
    void *(*bind)(void *arg, int64_t layer, bool cross);
    void *arg;
} tg__model_dec_attn;
/* The one decoder layer loop (docs/model.md §1): per layer self-attention, cross-attention (not
 * for arch lm), FFN, each a residual sub-layer; then the final norm with pre-LN. */
tg_tensor *tg__model_decoder_stack(tg_model *m, tg_graph *g, tg_tensor *y,
                                   const tg__model_dec_attn *a);
/* logits = y E^T (docs/model.md §1: no bias), E the (tied) output matrix: y [..., d] -> [N, V] */
tg_tensor *tg__model_output_logits(tg_model *m, tg_graph *g, tg_tensor *y);

/* tg_decoder_step, or with log_probs each row's log-probabilities (the log-softmax of its
 * logits, computed by the backend) in place of the logits: what a search scores with. With
 * view not NULL, *view is set to the [rows, V] values: where the backend holds them when its
 * memory is the host's (no copy; read-only, valid until the decoder's next step or its free),
 * else in out. */
tg_status tg__decoder_step(tg_decoder *d, int64_t rows, const int32_t *parent,
                           const int32_t *tokens, float *out, bool log_probs, const float **view);

/* Beam search's candidates from one row (models/decode_beam.c): the c best tokens of x[0..V)
 * but <pad> and <s>, by value descending, ties to the smaller token, into (tv, tw); returns
 * how many (min(c, V - 2) when no value is NaN) */
int64_t tg__decode_row_top(const float *x, int64_t V, int64_t c, double *tv, int32_t *tw);

/* tg_model_attention with the description of its mask (NULL: none; see tg__attn_band) */
tg_tensor *tg__model_attention(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *xq,
                               tg_tensor *xkv, tg_tensor *mask, const tg__attn_band *band);

/* attention pieces (models/attention.c): project keys/values of xkv into heads, and the core
 * of the variant from the query input and projected K [B,h,m,dk], V [B,h,m,dv]; `self`:
 * self-attention, where pos=rope rotates keys (positions 0..m-1) and queries (the last n) */
void tg__attn_project_kv(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *xkv, tg_tensor **k,
                         tg_tensor **v);
/* [B, n, h*w] -> [B, h, n, w] (contiguous), head i owning columns [i*w, (i+1)*w) */
tg_tensor *tg__attn_split_heads(tg_tensor *x, int64_t h, int64_t w);
/* The keys and values a core reads: k, v, or in two parts [k; k2] and [v; v2] (a decoding
 * step: the cached positions', then the new one's; k2 = v2 = NULL otherwise), read without
 * concatenating them: the scores of each part are concatenated and the weights' two column
 * ranges multiply each part's values. */
typedef struct tg__attn_kv {
    tg_tensor *k, *v, *k2, *v2;
} tg__attn_kv;
/* The one core of the built-in kinds. mask: broadcastable to [B,1,n,m], 1 = masked, or NULL;
 * band: what mask masks (NULL: not told). With cfg.window, self-attention over one part takes
 * the banded O(r·n·d) supply of keys and values where it applies (a mask only with its band),
 * else the dense scores with the window as a mask. */
tg_tensor *tg__attn_core(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *xq, tg__attn_kv kv,
                         tg_tensor *mask, const tg__attn_band *band, bool self);

/* tg_mlm_mask's rule with the <mask> id, the vocabulary size V and the special ids given
 * (special[0..nspecial), ascending, each < V: never chosen, never drawn as a random
 * replacement; arguments checked by the caller); the dynamic masks of a corpus (train/data.c)
 * are drawn with it per batch */
void tg__mlm_mask_ids(int32_t mask, int32_t V, const int32_t *special, int64_t nspecial, const int32_t *ids, int64_t n,
                      double p, tg_rng *rng, int32_t *input, int32_t *target);
/* docs/model.md §4's specials, <pad> <unk> <s> </s> and the mask token, ascending, into special;
 * returns their count */
int64_t tg__mlm_classic_specials(int32_t mask, int32_t special[5]);
/* tg_batch_build and tg_batch_build_mlm with eos, not </s>, appended to every source (an
 * imported BERT's [SEP]) */
tg_status tg__batch_build_eos(tg_batch *b, int64_t n, const int32_t *const *src, const int64_t *src_n,
                              const int32_t *const *tgt, const int64_t *tgt_n, int32_t eos);
/* tg_batch_build_lm_blocks with the targets past a short window `pad` (the model's pad id: -1
 * for a model without padding, whose id 0 is a token) */
tg_status tg__batch_build_lm_blocks_pad(tg_batch *b, int64_t n, const int32_t *const *seq, const int64_t *len, int32_t pad);
tg_status tg__batch_build_mlm_eos(tg_batch *b, int64_t n, const int32_t *const *input, const int32_t *const *target,
                                  const int64_t *len, int32_t eos);

/* parameters (models/params.c, models/init.c): initial values of a parameter of `shape` drawn in
 * element order (TG_INIT_NORMAL with sd); one added to a model being built (or listed to the
 * visitor of tg__model_params_visit), with the model's sd d^-1/2; a tg_params over a model being
 * built, with its RNG (free with tg_params_free) */
void tg__params_fill(float *w, int ndim, const int64_t *shape, tg_init_kind k, tg_rng *r, double sd);
tg_status tg__model_param_add(tg_model *m, tg_rng *r, const char *name, int ndim, const int64_t *shape,
                              tg_init_kind k);
tg_params *tg__params_of_model(tg_model *m, tg_rng *r);

/* A registered kind's sub-layer (models/attention.c): its forward, and its output checked to be
 * the queries' shape. */
tg_tensor *tg__attn_registered(tg_model *m, tg_graph *g, const tg_attn_kind_def *def, const char *prefix,
                               tg_tensor *xq, tg_tensor *xkv, tg_tensor *mask, bool self);
/* registered attention kinds (models/attn_registry.c): the dims a kind is told of config c */
tg_attn_dims tg__attn_dims(const tg_model_config *c);
/* the number of registered kinds; a kind k is registered when TG_ATTN_COUNT <= k < that + COUNT */
bool tg__attn_is_registered(tg_attn_kind k);

/* parameter initialisation (models/init.c) */
/* Whether the values x[0], x[stride], ... (below n) that a run of g on b gave are all finite:
 * TG_OK, else TG_ERR_NUMERIC saying which (what, printf-style, and the index) and naming the
 * node that made it (tg_graph_find_nonfinite runs g again). */
tg_status tg__model_check_finite(tg_graph *g, tg_backend *b, const float *x, int64_t n, int64_t stride,
                                 const char *what, ...) __attribute__((format(printf, 6, 7)));
tg_status tg__model_init_params(tg_model *m, uint64_t seed);
/* The parameters config c implies, in store order, without allocating any: fn is called with
 * each name and shape; a non-OK return stops the walk and is returned. */
typedef tg_status (*tg__model_param_visitor)(void *ctx, const char *name, int ndim,
                                             const int64_t *shape);
tg_status tg__model_params_visit(const tg_model_config *c, tg__model_param_visitor fn, void *ctx);

#endif
