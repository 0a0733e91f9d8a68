/* Layers of the Transformer (docs/model.md §1) from primitive ops: linear, layer norm, FFN,
 * embeddings with positions, masks, and the residual wiring of a sub-layer (post-LN or pre-LN).
 *
 * Error contract: a builder here that fails marks its graph (tg__graph_fail, first error wins)
 * before returning NULL, so tg_graph_status always names the first real cause; a NULL input alone
 * records nothing, because whatever made it NULL recorded it already. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/model-impl.h"

/* The model's linear, norm and FFN are tg/layers.h's (models/nn.c) over its store and config. */
tg_tensor *tg__layer_linear(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x, bool bias) {
    return tg_layers_linear(g, m->store, prefix, x, bias);
}

tg_tensor *tg__layer_norm(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x) {
    return tg_layers_norm(g, m->store, prefix, x, m->cfg.rms_norm, m->cfg.norm_eps);
}

tg_tensor *tg__layer_ffn(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x) {
    tg_ffn_kind k = m->cfg.swiglu ? TG_FFN_SWIGLU
                    : m->cfg.gelu ? (m->cfg.gelu_erf ? TG_FFN_GELU_ERF : TG_FFN_GELU)
                                  : TG_FFN_RELU;
    return tg_layers_ffn(g, m->store, prefix, x, k, m->cfg.ffn_dropout);
}

bool tg__layer_check_ids(tg_graph *g, const char *who, const char *what, const int32_t *ids,
                         int64_t B, int64_t len, int64_t offset, int64_t vocab, int64_t max_len) {
    if (!ids) {
        tg__graph_fail(g, TG_ERR_INVALID, "%s: %s ids are NULL", who, what);
        return false;
    }
    if (B < 1 || len < 1) {
        tg__graph_fail(g, TG_ERR_INVALID, "%s: empty batch (%lld %s sentences of %lld tokens)", who,
                       (long long)B, what, (long long)len);
        return false;
    }
    if (offset < 0 || offset + len > max_len) {
        tg__graph_fail(g, TG_ERR_INVALID, "%s: %s sequence of %lld tokens exceeds max_len %lld",
                       who, what, (long long)(offset + len), (long long)max_len);
        return false;
    }
    for (int64_t i = 0; i < B * len; i++)
        if (ids[i] < 0 || ids[i] >= vocab) {
            tg__graph_fail(g, TG_ERR_INVALID,
                           "%s: %s id %d at [%lld,%lld] is outside the vocabulary (%lld ids)", who,
                           what, ids[i], (long long)(i / len), (long long)(i % len),
                           (long long)vocab);
            return false;
        }
    return true;
}

tg_tensor *tg__layer_embed(tg_model *m, tg_graph *g, const char *table, const int32_t *ids,
                           int64_t B, int64_t len, int64_t offset) {
    const tg_model_config *c = &m->cfg;
    /* the table's rows bound the ids (checked on the host, before any node is made, so the
     * graph is the same as without the check) */
    int64_t t = tg_store_find(m->store, table);
    if (t < 0) return tg_param(g, m->store, table); /* marks the graph: no such parameter */
    int64_t shape[TG_MAX_DIMS];
    tg_store_shape(m->store, t, shape);
    const int64_t vocab = shape[0];
    if (!tg__layer_check_ids(g, "embedding", table, ids, B, len, offset, vocab, c->max_len))
        return NULL;
    int64_t s[2] = {B, len};
    tg_tensor *x = tg_embedding(tg_param(g, m->store, table), tg_input(g, TG_DTYPE_I32, 2, s, ids));
    float scale = c->embed_scale > 0.0f ? c->embed_scale : sqrtf((float)c->d_model);
    if (scale != 1.0f) x = tg_scale(x, scale);
    if (c->learned_pos) /* rope: positions enter in the attention (rotary), not here */
        x = tg_add(x, tg_embedding(tg_param(g, m->store, "pos_embed.weight"), tg_arange(g, offset, len)));
    else if (!c->rope)
        x = tg_add(x, tg_layers_sinusoid(g, offset, len, c->d_model));
    if (c->type_vocab > 0) { /* one segment: row 0 of the token-type table at every position */
        int64_t d1[2] = {1, c->d_model};
        x = tg_add(x, tg_reshape(tg_slice(tg_param(g, m->store, "type_embed.weight"), 0, 0, 1), 2, d1));
    }
    if (c->embed_norm) x = tg__layer_norm(m, g, "embed_norm", x);
    return tg_dropout(x, c->dropout);
}

tg_tensor *tg__layer_pad_mask(tg_graph *g, const int32_t *ids, int64_t B, int64_t len) {
    if (!ids || B < 1 || len < 1)
        return tg__graph_fail(g, TG_ERR_INVALID,
                              "padding mask: empty batch or NULL ids ([%lld,%lld])", (long long)B,
                              (long long)len);
    return tg_padding_mask(g, ids, B, len, TG_PAD);
}

tg_tensor *tg__layer_causal_mask(tg_graph *g, const int32_t *ids, int64_t B, int64_t T) {
    return tg__layer_causal_mask_pad(g, ids, B, T, TG_PAD);
}

tg_tensor *tg__layer_causal_mask_pad(tg_graph *g, const int32_t *ids, int64_t B, int64_t T, int32_t pad) {
    if (!ids || B < 1 || T < 1)
        return tg__graph_fail(g, TG_ERR_INVALID,
                              "causal mask: empty batch or NULL ids ([%lld,%lld])", (long long)B,
                              (long long)T);
    float *mk = malloc((size_t)(B * T * T) * sizeof *mk);
    if (!mk) return tg__graph_fail(g, TG_ERR_NOMEM, "causal mask: out of memory");
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < T; j++)
                mk[(b * T + i) * T + j] = (j > i || ids[b * T + j] == pad) ? 1.0f : 0.0f;
    int64_t s[4] = {B, 1, T, T};
    tg_tensor *t = tg_input(g, TG_DTYPE_F32, 4, s, mk);
    free(mk);
    return t;
}

/* post-LN (the paper): LN(x + Dropout(f(x))); pre-LN: x + Dropout(f(LN(x))) */
tg_tensor *tg__layer_residual(tg_model *m, tg_graph *g, const char *norm_name, const char *prefix,
                              tg_tensor *x, tg__model_sublayer_fn f, void *ctx) {
    float p = m->cfg.dropout;
    if (m->cfg.pre_norm)
        return tg_add(x, tg_dropout(f(m, g, prefix, tg__layer_norm(m, g, norm_name, x), ctx), p));
    return tg__layer_norm(m, g, norm_name, tg_add(x, tg_dropout(f(m, g, prefix, x, ctx), p)));
}
