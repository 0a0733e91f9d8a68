/* tgraph — the Transformer model zoo (docs/model.md §1, §2, §4).
 *
 * A model is a configuration, two vocabularies and a parameter store. Building the graph for a
 * batch is one call; the attention variant is a configuration field, so every attention of the
 * Transformer (encoder self, decoder self, cross) uses it. */
#ifndef TG_MODEL_H
#define TG_MODEL_H

#include "tg/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "tg/graph.h"
#include "tg/rng.h"
#include "tg/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- vocabularies: ids <pad>=0, <unk>=1, <s>=2, </s>=3 come first (docs/model.md §4) ---- */
enum { TG_PAD = 0, TG_UNK = 1, TG_BOS = 2, TG_EOS = 3 };

typedef struct tg_vocab tg_vocab;
/* A vocabulary holding the four special tokens. */
TG_API tg_status tg_vocab_new(tg_vocab **out);
TG_API void tg_vocab_free(tg_vocab *v);
/* Add a token (no spaces, valid UTF-8) if absent; its id in *id (may be NULL). */
TG_API tg_status tg_vocab_add(tg_vocab *v, const char *token, int32_t *id);
/* Id of a token, TG_UNK if absent. */
TG_API int32_t tg_vocab_id(const tg_vocab *v, const char *token);
/* An empty vocabulary, for a layout of special tokens that a tokenizer defines (an imported
 * model's: BERT's [PAD] 0, [UNK] 100, [CLS] 101, ...). */
TG_API tg_status tg_vocab_new_empty(tg_vocab **out);
/* Id of a token, -1 if absent. */
TG_API int32_t tg_vocab_find(const tg_vocab *v, const char *token);
/* Token of an id (NULL if out of range); owned by the vocabulary. */
TG_API const char *tg_vocab_token(const tg_vocab *v, int32_t id);
TG_API int64_t tg_vocab_size(const tg_vocab *v);
/* Split a line on spaces/tabs into ids (unknown -> <unk>); *ids is malloc'ed, caller frees. */
TG_API tg_status tg_vocab_encode(const tg_vocab *v, const char *line, int32_t **ids, int64_t *n);

/* ---- configuration ---- */
/* The attention kinds, one row each (docs/model.md §2): the enum, the names that parsing,
 * printing and checkpoints use, and the command line's choices all come from this table. */
#define TG_ATTN_KINDS(X)                                    \
    X(TG_ATTN_MHA, "mha")                                   \
    X(TG_ATTN_FIXED_HEAD, "fixed_head")                     \
    X(TG_ATTN_TALKING_HEADS, "talking_heads")               \
    X(TG_ATTN_INTERACTING, "interacting")                   \
    X(TG_ATTN_INTERACTING_PAIRWISE, "interacting_pairwise")

#define TG__ATTN_ENUM(e, s) e,
typedef enum tg_attn_kind { TG_ATTN_KINDS(TG__ATTN_ENUM) TG_ATTN_COUNT } tg_attn_kind;
#undef TG__ATTN_ENUM

/* The model family (docs/guide.md "Model families"). */
typedef enum tg_model_arch {
    TG_ARCH_ENCDEC = 0, /* encoder-decoder (translation): the default, and old checkpoints */
    TG_ARCH_LM,         /* decoder-only language model (GPT-2 style): no encoder and no
                         * cross-attention, one vocabulary, output tied to the embedding;
                         * a sequence is the target side of a batch */
    TG_ARCH_MLM,        /* encoder-only masked language model (BERT style): the encoder stack
                         * and an output tied to the embedding; the vocabulary holds "<mask>" */
} tg_model_arch;

/* How a sentence embedding pools the final states of its tokens (padding excluded). */
typedef enum tg_pool { TG_POOL_MEAN = 0, TG_POOL_CLS, TG_POOL_MAX } tg_pool;

typedef struct tg_model_config {
    tg_model_arch arch;
    int64_t d_model, heads, enc_layers, dec_layers, d_ff;
    tg_attn_kind attention;
    int64_t head_dim;         /* fixed_head: per-head width d_p (0 = d_model/heads) */
    bool interacting_literal; /* interacting: the paper's all-pairs form instead of summed query */
    bool no_out_proj;         /* interacting: no output projection W_O (the authors' public code
                                 builds W_O but never applies it): out = Concat(O_1..O_h) */
    bool interacting_sqrt_h;  /* interacting: logits also divided by sqrt(h), the summed query's
                                 scale at initialisation (a diagnostic reading, not the paper's) */
    bool pre_norm;            /* norm=pre (default post) */
    bool learned_pos;         /* pos=learned (default sinusoidal) */
    bool share_embeddings;    /* one table for source, target and output */
    bool tie_output;          /* output projection = target embedding (default true) */
    bool gelu;                /* activation=gelu (default relu) */
    /* blocks of later Transformers, each an option of every family */
    bool rms_norm;            /* norm_kind=rms: RMSNorm (Zhang & Sennrich 2019) for every norm */
    bool swiglu;              /* activation=swiglu: (silu(x W1) * x W3) W2 (Shazeer 2020) */
    bool rope;                /* pos=rope: rotary positions in self-attention (Su et al. 2021) */
    int64_t classes;          /* arch mlm: > 0 adds a classification head on the first token
                               * (cls_head.weight [classes, d], cls_head.bias) */
    int64_t window;           /* > 0: restricted self-attention (Vaswani et al. 2017, Table 1): a
                               * query at position i sees keys j with |i - j| <= window only
                               * (0 = unrestricted); cross-attention is never restricted */
    int64_t max_len;          /* longest sequence (tokens incl. specials) */
    /* BERT's embedding and output details, each off (0) by default (docs/model.md "Imported
     * models"): */
    int64_t type_vocab;       /* > 0: token-type embeddings type_embed.weight [type_vocab, d]
                               * added to every position (one segment: type 0) */
    bool embed_norm;          /* a LayerNorm (embed_norm.*) on the embedding sum, before dropout */
    bool gelu_erf;            /* activation=gelu_erf: the exact GELU x Phi(x) (gelu is the tanh form) */
    bool mlm_head;            /* arch mlm: BERT's prediction head before the tied output:
                               * LN(gelu(y W^T + b)) with mlm_head.dense and mlm_head.norm, and an
                               * output bias mlm_head.bias [V] */
    float norm_eps;           /* epsilon of every LayerNorm / RMSNorm; 0 = 1e-5 */
    float embed_scale;        /* token embeddings are multiplied by it; 0 = sqrt(d_model) */
    int32_t pad_id;           /* the padding token (masked as a key); 0 = <pad>, -1 = none (GPT-2) */
    /* sentence embeddings (tg_model_embed): the pooling of the encoder's states, and whether
     * the pooled vector is scaled to unit length (sentence-transformers' Normalize) */
    tg_pool pool;
    bool normalize;
    float dropout, attn_dropout, ffn_dropout, label_smoothing;
    int64_t src_vocab, tgt_vocab; /* sizes (filled from the vocabularies) */
} tg_model_config;

/* The paper's base model defaults: N=6, d=512, d_ff=2048, h=8, dropout 0.1, post-LN, sinusoidal,
 * label smoothing 0.1, max_len 256. */
TG_API tg_model_config tg_model_config_default(void);
/* A GPT-2 style language model (arch lm): the defaults above with no encoder, pre-LN, learned
 * positions, GELU, one shared embedding tied to the output, no label smoothing. */
TG_API tg_model_config tg_model_config_lm_default(void);
/* A BERT style masked language model (arch mlm): the defaults with no decoder, post-LN, learned
 * positions, GELU, one shared embedding tied to the output, no label smoothing. */
TG_API tg_model_config tg_model_config_mlm_default(void);
/* Check every field; the message names the first bad one. */
TG_API tg_status tg_model_config_check(const tg_model_config *c);
TG_API const char *tg_attn_kind_name(tg_attn_kind k);
/* Every kind's name joined by '|' ("mha|fixed_head|...": a command line's choices). */
TG_API const char *tg_attn_kind_choices(void);
/* "encdec" / "lm" / "mlm" */
TG_API const char *tg_model_arch_name(tg_model_arch a);
TG_API tg_status tg_model_arch_parse(const char *name, tg_model_arch *out);
TG_API tg_status tg_attn_kind_parse(const char *name, tg_attn_kind *out);
/* Per-head query/key width of the configuration (d_p for fixed_head, d/h otherwise). */
TG_API int64_t tg_model_head_dim(const tg_model_config *c);
/* The number of parameters (floats) of a model of config c (vocabulary sizes included),
 * without creating it; as a double, since a bad config can imply more than 2^63. */
TG_API tg_status tg_model_param_count(const tg_model_config *c, double *out);
/* h_max = floor(d / mean_len) (docs/model.md §2.4; the interacting-head paper's head-count bound). */
TG_API int64_t tg_model_max_heads(int64_t d_model, double mean_len);

/* ---- the model ---- */
typedef struct tg_model tg_model;

/* A freshly initialised model (docs/model.md §1 initialisation, seeded). Takes ownership of the
 * vocabularies (src and tgt may be the same pointer: a joint vocabulary); cfg's vocab sizes are
 * set from them. */
TG_API tg_status tg_model_new(const tg_model_config *cfg, tg_vocab *src, tg_vocab *tgt, tg_backend *b,
                       uint64_t seed, tg_model **out);
TG_API void tg_model_free(tg_model *m);
TG_API const tg_model_config *tg_model_cfg(const tg_model *m);
TG_API tg_store *tg_model_store(tg_model *m);
TG_API const tg_vocab *tg_model_src_vocab(const tg_model *m);
TG_API const tg_vocab *tg_model_tgt_vocab(const tg_model *m);
TG_API tg_backend *tg_model_backend(const tg_model *m);

/* Checkpoints in the docs/model.md §4 safetensors format (usable alone; written atomically). */
TG_API tg_status tg_model_save(const tg_model *m, const char *path);
TG_API tg_status tg_model_load(const char *path, tg_backend *b, tg_model **out);

/* ---- batches (docs/model.md §4 token conventions) ---- */
typedef struct tg_batch {
    int64_t size, src_len, tgt_len; /* B, S (incl. </s>), T (incl. <s> / </s>) */
    int32_t *src;                   /* [B, S]: tokens + </s>, right-padded with <pad> */
    int32_t *tgt_in;                /* [B, T]: <s> + tokens (NULL for inference) */
    int32_t *tgt_out;               /* [B, T]: tokens + </s> */
    int64_t src_tokens, tgt_tokens; /* non-pad counts */
    bool classify;                  /* a classification batch: tgt_out [B] holds each sequence's
                                     * class (tgt_len 1, tgt_in NULL); the loss is tg_model_classify's */
} tg_batch;

/* Build a batch from n sentences of token ids (without specials). tgt may be NULL. */
TG_API tg_status tg_batch_build(tg_batch *b, int64_t n, const int32_t *const *src, const int64_t *src_n,
                         const int32_t *const *tgt, const int64_t *tgt_n);
TG_API void tg_batch_free(tg_batch *b);
/* A batch of n sequences for a language model (arch lm): targets = the sequences, sources
 * empty. */
TG_API tg_status tg_batch_build_lm(tg_batch *b, int64_t n, const int32_t *const *seq, const int64_t *seq_n);

/* A batch of n windows of a token stream (arch lm trained on a stream, train/stream.c): window i
 * of len[i] >= 2 ids reads seq[i][0, len-1) (tgt_in) and predicts seq[i][1, len) (tgt_out), with
 * no <s> or </s> added; sources empty (</s> alone). */
TG_API tg_status tg_batch_build_lm_blocks(tg_batch *b, int64_t n, const int32_t *const *seq, const int64_t *len);

/* ---- masked language models (arch mlm; models/mlm.c) ---- */
/* BERT's masking rule (Devlin et al. 2019) on ids[0..n): every token that is not special
 * (id >= 4) and not <mask> is chosen with probability p (at least one when any is eligible);
 * a chosen token becomes <mask> (80 %), a uniformly random id of [4, V) (10 %) or stays (10 %).
 * Writes the model input into input[0..n) and the targets into target[0..n): the original id
 * where chosen, <pad> (ignored) elsewhere. Draws from rng. */
TG_API tg_status tg_mlm_mask(const tg_vocab *v, const int32_t *ids, int64_t n, double p, tg_rng *rng, int32_t *input,
                      int32_t *target);
/* A batch of n masked sequences: src = input + </s>, tgt_out = target with <pad> at every
 * position not chosen (the </s> too), tgt_tokens = the number of chosen positions. */
TG_API tg_status tg_batch_build_mlm(tg_batch *b, int64_t n, const int32_t *const *input, const int32_t *const *target,
                             const int64_t *len);
/* Class logits [B, classes] of a masked language model with a classification head (classes
 * > 0): the final encoder state of each sequence's first token through cls_head, as BERT
 * classifies from its first token. ids [B, S] (right-padded with <pad>). */
TG_API tg_tensor *tg_model_classify(tg_model *m, tg_graph *g, const int32_t *ids, int64_t B, int64_t S);
/* The sequences of a classification batch (b->classify) whose class is the argmax of their
 * logits: *correct of *total. */
TG_API tg_status tg_model_classify_accuracy(tg_model *m, const tg_batch *b, int64_t *correct, int64_t *total);
/* A copy of masked language model m (same backend, configuration, vocabulary, tokenizer and
 * weights) with a classification head of `classes` (> 0): drawn from seed where m has none,
 * m's own where it has one of that size (another size is an error). *out: the caller's. */
TG_API tg_status tg_model_with_classes(const tg_model *m, int64_t classes, uint64_t seed, tg_model **out);
/* Masked tokens of a batch that the model predicts right (argmax of the logits = the target)
 * and their number. */
TG_API tg_status tg_model_mlm_accuracy(tg_model *m, const tg_batch *b, int64_t *correct, int64_t *total);

/* ---- sentence embeddings (models/embed.c) ---- */
/* One vector per sequence of an encoder (arch mlm): the final encoder states of ids [B, S]
 * (right-padded with the model's pad id, which is excluded) pooled by `pool` (mean over the
 * tokens, the first token, or the maximum per channel), then scaled to unit L2 length when
 * normalize. out: B * d_model floats, caller-owned. */
TG_API tg_status tg_model_embed(tg_model *m, const int32_t *ids, int64_t B, int64_t S, tg_pool pool, bool normalize,
                         float *out);
/* The fillers of one sequence ids[0..n) (<mask> where a token is wanted; no specials added) under a
 * masked language model: probs[i * V + v] = P(token v at position i), the softmax of the logits
 * (dropout off); probs holds n * V floats (V the vocabulary size). A model whose stored
 * tokenizer has its own layout (an imported BERT) reads ids as that tokenizer encodes them,
 * [CLS] ... [SEP], with nothing appended; tgraph's own read ids + </s>. Errors: another family,
 * an empty sequence, an id outside the vocabulary, n + 1 (with </s>) past max_len. */
TG_API tg_status tg_model_mlm_probs(tg_model *m, const int32_t *ids, int64_t n, float *probs);

/* ---- graphs ---- */
/* Logits [B*T, V_tgt] for a batch with targets (teacher forcing). A language model (arch lm)
 * reads only the target side: tgt_in = <s> + tokens predicts tgt_out = tokens + </s> under a
 * causal mask, so tg_model_loss and tg_model_score (log P of each sequence, </s> included)
 * serve both families. */
TG_API tg_tensor *tg_model_logits(tg_model *m, tg_graph *g, const tg_batch *b);
/* Mean label-smoothed cross-entropy over non-pad target tokens (scalar). */
TG_API tg_tensor *tg_model_loss(tg_model *m, tg_graph *g, const tg_batch *b);
/* log P(target | source) per sentence (docs/model.md §4: natural log, </s> included, dropout off). */
TG_API tg_status tg_model_score(tg_model *m, const tg_batch *b, double *scores);

/* ---- pieces for decoding and tests ---- */
/* Encoder output [B, S, d] and the source padding mask [B, 1, 1, S] (1 = masked) it used.
 * A language model has no encoder: NULL with an error. */
TG_API tg_tensor *tg_model_encode(tg_model *m, tg_graph *g, const int32_t *src, int64_t B, int64_t S,
                           tg_tensor **src_mask);
/* One attention sub-layer of the configured variant, parameters under `prefix` (e.g.
 * "encoder.layers.0.self_attn"): xq [B,n,d], xkv [B,m,d], mask broadcastable to [B,1,n,m]
 * (1 = masked, or NULL). Returns [B,n,d]. With pos=rope, xq == xkv (self-attention) rotates
 * queries and keys by their positions 0..n-1. With a window (restricted self-attention), a
 * mask given here is applied to the dense scores: the banded O(r·n·d) form is taken without a
 * mask, and by the model's own stacks, which know what their padding and causal masks mask. */
TG_API tg_tensor *tg_model_attention(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *xq,
                              tg_tensor *xkv, tg_tensor *mask);

/* ---- attention weights, for looking at (models/attn_maps.c) ---- */
typedef struct tg_attn_map {
    char name[160];             /* the sub-layer: "encoder.layers.0.self_attn", ... */
    int ndim;                   /* 4: [B, h, n, m]; interacting_pairwise 5: [B, h_i, h_j, n, m] */
    int64_t shape[TG_MAX_DIMS];
    float *w;                   /* the weights that multiply V (talking heads: after the
                                 * post-softmax mixing), row-major; malloc'ed */
    /* Filled by tg_model_attention_logits only (NULL otherwise), row-major, shape as w: */
    float *s; /* the logits before the mask, as the kind computes them: Q_i K_i^T / sqrt(d_k)
               * per head (mha, fixed_head), the mixed logits L_j = sum_i P_l[i,j] S_i
               * (talking_heads), (sum_i Q_i) K_j^T / sqrt(d_k) (interacting), Q_i K_j^T /
               * sqrt(d_k) per pair (interacting_pairwise); masked entries hold the raw score */
    float *p; /* talking_heads: softmax(L + mask), before the post-softmax mixing; NULL for the
               * other kinds, whose w is that softmax */
} tg_attn_map;

/* The attention weights of every attention sub-layer (encoder self, decoder self, cross, in
 * build order) for a batch (as tg_model_logits takes it), dropout off. On success *maps is a
 * malloc'ed array of *count maps, freed with tg_attn_maps_free. */
TG_API tg_status tg_model_attention_maps(tg_model *m, const tg_batch *b, tg_attn_map **maps, int64_t *count);
/* The same with each map's logits s (and talking heads' softmax p) filled in: the forward graph
 * also keeps those tensors, so the weights are computed by the same ops as in
 * tg_model_attention_maps (equal up to the rounding of any fusion the kept tensors prevent). */
TG_API tg_status tg_model_attention_logits(tg_model *m, const tg_batch *b, tg_attn_map **maps, int64_t *count);
TG_API void tg_attn_maps_free(tg_attn_map *maps, int64_t count);

#ifdef __cplusplus
}
#endif
#endif
