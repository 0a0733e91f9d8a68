/* The encoder–decoder Transformer (docs/model.md §1): model lifetime, encoder and decoder stacks,
 * logits, loss and scores. */
#include <stdio.h>
#include <stdlib.h>

#include "models/model-impl.h"

tg_status tg_model_new(const tg_model_config *cfg, tg_vocab *src, tg_vocab *tgt, tg_backend *b,
                       uint64_t seed, tg_model **out) {
    return tg__model_new(cfg, src, tgt, b, seed, true, out);
}

tg_status tg__model_new(const tg_model_config *cfg, tg_vocab *src, tg_vocab *tgt, tg_backend *b,
                        uint64_t seed, bool draw, tg_model **out) {
    tg_model *m = (cfg && src && tgt && b && out) ? calloc(1, sizeof *m) : NULL;
    if (!m) { /* the vocabularies are owned even on failure */
        if (tgt != src) tg_vocab_free(tgt);
        tg_vocab_free(src);
        if (out) *out = NULL;
        return tg_error_set(cfg && b && out ? TG_ERR_NOMEM : TG_ERR_INVALID,
                            "tg_model_new: NULL argument or out of memory");
    }
    *out = NULL;
    m->cfg = *cfg;
    m->cfg.src_vocab = tg_vocab_size(src);
    m->cfg.tgt_vocab = tg_vocab_size(tgt);
    m->src = src;
    m->tgt = tgt;
    m->backend = b;
    m->no_draw = !draw;
    tg_status st = tg_model_config_check(&m->cfg);
    if (st == TG_OK && m->cfg.arch == TG_ARCH_MLM && tg_vocab_id(src, "<mask>") == TG_UNK &&
        tg_vocab_find(src, "[MASK]") < 0) /* the classic layout's mask, or BERT's */
        st = tg_error_set(TG_ERR_INVALID, "tg_model_new: a masked language model (arch mlm) needs the token <mask> in its vocabulary");
    if (st == TG_OK) st = tg_store_new(b, &m->store);
    if (st == TG_OK) st = tg__model_init_params(m, seed);
    if (st) {
        tg_model_free(m);
        return st;
    }
    *out = m;
    return TG_OK;
}

void tg_model_free(tg_model *m) {
    if (!m) return;
    /* holds left (tg_decoder_hold_weights): the backend's prepared copies, found by the weights'
     * addresses, must not outlive the weights */
    while (m->decode_holds > 0)
        tg_decoder_release_weights(m);
    tg_store_free(m->store);
    tg_tokenizer_free(m->tok);
    if (m->tgt != m->src) tg_vocab_free(m->tgt);
    tg_vocab_free(m->src);
    free(m);
}

const tg_model_config *tg_model_cfg(const tg_model *m) { return &m->cfg; }
tg_store *tg_model_store(tg_model *m) { return m->store; }
const tg_vocab *tg_model_src_vocab(const tg_model *m) { return m->src; }
const tg_vocab *tg_model_tgt_vocab(const tg_model *m) { return m->tgt; }
tg_backend *tg_model_backend(const tg_model *m) { return m->backend; }

typedef struct {
    tg_tensor *kv; /* NULL: self-attention on the (normed) input */
    tg_tensor *mask;
    const tg__attn_band *band; /* what mask masks, for a window's banded form (NULL: not told) */
} attn_ctx;

static tg_tensor *attn_sublayer(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x, void *ctx) {
    attn_ctx *a = ctx;
    return tg__model_attention(m, g, prefix, x, a->kv ? a->kv : x, a->mask, a->band);
}

static tg_tensor *ffn_sublayer(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x, void *ctx) {
    (void)ctx;
    return tg__layer_ffn(m, g, prefix, x);
}

tg_tensor *tg_model_encode(tg_model *m, tg_graph *g, const int32_t *src, int64_t B, int64_t S,
                           tg_tensor **src_mask) {
    if (src_mask) *src_mask = NULL;
    if (!m || !g) return tg__graph_fail(g, TG_ERR_INVALID, "tg_model_encode: NULL model or graph");
    const tg_model_config *c = &m->cfg;
    if (c->arch == TG_ARCH_LM)
        return tg__graph_fail(g, TG_ERR_INVALID,
                              "tg_model_encode: a language model (arch lm) has no encoder");
    if (!tg__layer_check_ids(g, "tg_model_encode", "source", src, B, S, 0, c->src_vocab,
                             c->max_len))
        return NULL;
    tg_tensor *mask = tg__layer_pad_mask(g, src, B, S);
    const tg__attn_band band = {src, B, TG_PAD, false}; /* what tg__layer_pad_mask masks */
    if (src_mask) *src_mask = mask;
    tg_tensor *x = tg__layer_embed(m, g, tg__model_src_embed_name(c), src, B, S, 0);
    char p[160], n[160];
    for (int64_t l = 0; l < c->enc_layers; l++) {
        attn_ctx a = {NULL, mask, &band};
        snprintf(p, sizeof p, "encoder.layers.%lld.self_attn", (long long)l);
        snprintf(n, sizeof n, "encoder.layers.%lld.norm1", (long long)l);
        x = tg__layer_residual(m, g, n, p, x, attn_sublayer, &a);
        snprintf(p, sizeof p, "encoder.layers.%lld.ffn", (long long)l);
        snprintf(n, sizeof n, "encoder.layers.%lld.norm2", (long long)l);
        x = tg__layer_residual(m, g, n, p, x, ffn_sublayer, NULL);
    }
    if (c->pre_norm && c->enc_layers > 0) x = tg__layer_norm(m, g, "encoder.norm", x);
    return x;
}

tg_tensor *tg__model_decoder_stack(tg_model *m, tg_graph *g, tg_tensor *y,
                                   const tg__model_dec_attn *a) {
    const tg_model_config *c = &m->cfg;
    bool lm = c->arch == TG_ARCH_LM; /* no cross-attention; the FFN's norm is norm2 */
    char p[160], n[160];
    for (int64_t l = 0; l < c->dec_layers; l++) {
        snprintf(p, sizeof p, "decoder.layers.%lld.self_attn", (long long)l);
        snprintf(n, sizeof n, "decoder.layers.%lld.norm1", (long long)l);
        y = tg__layer_residual(m, g, n, p, y, a->self, a->bind(a->arg, l, false));
        if (!lm) {
            snprintf(p, sizeof p, "decoder.layers.%lld.cross_attn", (long long)l);
            snprintf(n, sizeof n, "decoder.layers.%lld.norm2", (long long)l);
            y = tg__layer_residual(m, g, n, p, y, a->cross, a->bind(a->arg, l, true));
        }
        snprintf(p, sizeof p, "decoder.layers.%lld.ffn", (long long)l);
        snprintf(n, sizeof n, "decoder.layers.%lld.norm%d", (long long)l, lm ? 2 : 3);
        y = tg__layer_residual(m, g, n, p, y, ffn_sublayer, NULL);
    }
    if (c->pre_norm) y = tg__layer_norm(m, g, "decoder.norm", y);
    return y;
}

/* the whole prefix: every layer attends with the same masks */
typedef struct {
    attn_ctx self, cross;
} full_ctx;

static void *bind_full(void *arg, int64_t layer, bool cross) {
    (void)layer;
    full_ctx *f = arg;
    return cross ? &f->cross : &f->self;
}

tg_tensor *tg__model_decode(tg_model *m, tg_graph *g, tg_tensor *y, tg_tensor *memory,
                            tg_tensor *src_mask, tg_tensor *self_mask, const tg__attn_band *self_band) {
    full_ctx f = {{NULL, self_mask, self_band}, {memory, src_mask, NULL}};
    tg__model_dec_attn a = {attn_sublayer, attn_sublayer, bind_full, &f};
    return tg__model_decoder_stack(m, g, y, &a);
}

tg_tensor *tg__model_output_logits(tg_model *m, tg_graph *g, tg_tensor *y) {
    int64_t flat[2] = {-1, m->cfg.d_model};
    if (m->cfg.mlm_head) { /* BERT's prediction head: LN(gelu(y W^T + b)), then E^T + bias */
        tg_tensor *h = tg__layer_linear(m, g, "mlm_head.dense", y, true);
        h = tg__layer_norm(m, g, "mlm_head.norm", m->cfg.gelu_erf ? tg_gelu_erf(h) : tg_gelu(h));
        return tg_add(tg_matmul(tg_reshape(h, 2, flat), tg_param(g, m->store, tg__model_out_proj_name(&m->cfg)),
                                false, true),
                      tg_param(g, m->store, "mlm_head.bias"));
    }
    return tg_matmul(tg_reshape(y, 2, flat),
                     tg_param(g, m->store, tg__model_out_proj_name(&m->cfg)), false, true);
}

tg_tensor *tg_model_logits(tg_model *m, tg_graph *g, const tg_batch *b) {
    if (!m || !g || !b || !b->tgt_in)
        return tg__graph_fail(g, TG_ERR_INVALID,
                              "tg_model_logits: NULL argument or batch without targets");
    const tg_model_config *c = &m->cfg;
    if (c->arch == TG_ARCH_MLM) { /* the encoder's output at every source position */
        if (b->tgt_len != b->src_len)
            return tg__graph_fail(g, TG_ERR_SHAPE,
                                  "tg_model_logits: a masked language model's targets (%lld) align "
                                  "with its inputs (%lld)",
                                  (long long)b->tgt_len, (long long)b->src_len);
        return tg__model_output_logits(m, g,
                                       tg_model_encode(m, g, b->src, b->size, b->src_len, NULL));
    }
    tg_tensor *src_mask = NULL, *mem = NULL; /* a language model reads the target side only */
    if (c->arch != TG_ARCH_LM) {
        mem = tg_model_encode(m, g, b->src, b->size, b->src_len, &src_mask); /* checks src */
        if (!mem) return NULL; /* the graph says why; a NULL memory would read as self-attention */
    }
    /* the target side is checked where it is used (the source by tg_model_encode) */
    if (!tg__layer_check_ids(g, "tg_model_logits", "target", b->tgt_in, b->size, b->tgt_len, 0,
                             c->tgt_vocab, c->max_len))
        return NULL;
    tg_tensor *y =
        tg__layer_embed(m, g, tg__model_tgt_embed_name(&m->cfg), b->tgt_in, b->size, b->tgt_len, 0);
    tg_tensor *self_mask = tg__layer_causal_mask_pad(g, b->tgt_in, b->size, b->tgt_len, c->pad_id);
    const tg__attn_band band = {b->tgt_in, b->size, c->pad_id, true}; /* what self_mask masks */
    return tg__model_output_logits(m, g, tg__model_decode(m, g, y, mem, src_mask, self_mask, &band));
}

/* The target outputs [B*T] as a graph input, checked first (ids in range; <pad> is ignored by
 * the loss but is still a vocabulary id). */
static tg_tensor *targets(tg_model *m, tg_graph *g, const tg_batch *b, const char *who) {
    if (!tg__layer_check_ids(g, who, "target output", b->tgt_out, b->size, b->tgt_len, 0,
                             m->cfg.tgt_vocab, m->cfg.max_len))
        return NULL;
    int64_t n = b->size * b->tgt_len;
    return tg_input(g, TG_DTYPE_I32, 1, &n, b->tgt_out);
}

tg_tensor *tg_model_loss(tg_model *m, tg_graph *g, const tg_batch *b) {
    tg_tensor *logits = tg_model_logits(m, g, b);
    if (!logits) return NULL;
    tg_tensor *y = targets(m, g, b, "tg_model_loss");
    return tg_cross_entropy(logits, y, m->cfg.label_smoothing, m->cfg.pad_id, TG_REDUCE_MEAN);
}

tg_status tg_model_score(tg_model *m, const tg_batch *b, double *scores) {
    if (!m || !b || !scores || !b->tgt_out)
        return tg_error_set(TG_ERR_INVALID, "tg_model_score: NULL argument or batch without targets");
    tg_graph *g = tg_graph_new();
    if (!g) return tg_error_set(TG_ERR_NOMEM, "tg_model_score: out of memory");
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    tg_tensor *logits = tg_model_logits(m, g, b);
    /* per-token -log softmax(logits)[target] over the whole vocabulary; pads give 0 */
    tg_tensor *y = logits ? targets(m, g, b, "tg_model_score") : NULL;
    /* the pad id is no target (none: -1, GPT-2, whose id 0 is a token) */
    tg_tensor *tok = tg_keep(tg_cross_entropy(logits, y, 0.0f, m->cfg.pad_id, TG_REDUCE_NONE));
    int64_t n = tok ? b->size * b->tgt_len : 0;
    float *nll = tok ? malloc((size_t)n * sizeof *nll) : NULL;
    const char *msg;
    tg_status st = tg_graph_status(g, &msg);
    if (st != TG_OK) tg_error_set(st, "%s", msg);
    else if (!tok || !nll) st = tg_error_set(TG_ERR_NOMEM, "tg_model_score: out of memory");
    if (st == TG_OK) st = tg_graph_run(g, m->backend);
    if (st == TG_OK) st = tg_tensor_read(tok, nll, (size_t)n * sizeof *nll);
    if (st == TG_OK)
        st = tg__model_check_finite(g, m->backend, nll, n, 1, "tg_model_score: the log-probabilities of a batch");
    if (st == TG_OK)
        for (int64_t i = 0; i < b->size; i++) {
            double s = 0.0;
            for (int64_t t = 0; t < b->tgt_len; t++) s -= nll[i * b->tgt_len + t];
            scores[i] = s;
        }
    free(nll);
    tg_graph_free(g);
    return st;
}
