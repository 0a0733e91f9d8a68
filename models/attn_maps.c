/* Attention weights for looking at: while tg_model_attention_maps builds a forward graph, the
 * attention core records the tensor that multiplies V in each sub-layer (tg__attn_seen) and
 * keeps it; after the run the weights are read back to the host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"

tg_tensor *tg__attn_seen(tg_model *m, const char *prefix, tg_tensor *w) {
    tg__attn_capture *c = m->capture;
    if (!c || !w) return w;
    if (c->n == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 16;
        void *nm = realloc(c->name, (size_t)cap * sizeof *c->name), *nw = NULL;
        if (nm) c->name = nm;
        if (nm) nw = realloc(c->w, (size_t)cap * sizeof *c->w);
        if (!nw) return w; /* out of memory: this map is missing; reported by the caller */
        c->w = nw;
        c->cap = cap;
    }
    snprintf(c->name[c->n], sizeof c->name[c->n], "%s", prefix);
    c->w[c->n++] = tg_keep(w);
    return w;
}

void tg_attn_maps_free(tg_attn_map *maps, int64_t count) {
    for (int64_t i = 0; maps && i < count; i++) free(maps[i].w);
    free(maps);
}

tg_status tg_model_attention_maps(tg_model *m, const tg_batch *b, tg_attn_map **maps, int64_t *count) {
    if (!m || !b || !maps || !count) return tg_error_set(TG_ERR_INVALID, "tg_model_attention_maps: NULL argument");
    *maps = NULL;
    *count = 0;
    tg__attn_capture cap = {0};
    tg_graph *g = tg_graph_new();
    if (!g) return tg_error_set(TG_ERR_NOMEM, "tg_model_attention_maps: out of memory");
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    m->capture = &cap;
    /* the logits kept and checked too: a softmax gives a row of NaN logits as zeros (a fully
     * masked row's answer), so the maps alone can look sound when the model's numbers are not */
    tg_tensor *logits = tg_keep(tg_model_logits(m, g, b));
    m->capture = NULL;
    const char *msg;
    tg_status st = tg_graph_status(g, &msg);
    if (st) st = tg_error_set(st, "%s", msg);
    else if (!logits) st = tg_error_prefix(TG_ERR_INVALID, "tg_model_attention_maps");
    int64_t layers = m->cfg.enc_layers + m->cfg.dec_layers * (m->cfg.arch == TG_ARCH_ENCDEC ? 2 : 1);
    if (st == TG_OK && cap.n != layers)
        st = tg_error_set(TG_ERR_NOMEM, "tg_model_attention_maps: %lld of %lld maps recorded", (long long)cap.n,
                          (long long)layers);
    if (st == TG_OK) st = tg_graph_run(g, m->backend);
    if (st == TG_OK) {
        const int64_t n = tg_tensor_numel(logits);
        float *l = malloc((size_t)(n ? n : 1) * sizeof *l);
        st = l ? tg_tensor_read(logits, l, (size_t)n * sizeof *l)
               : tg_error_set(TG_ERR_NOMEM, "tg_model_attention_maps: out of memory");
        if (st == TG_OK) st = tg__model_check_finite(g, m->backend, l, n, 1, "tg_model_attention_maps: the logits");
        free(l);
    }
    tg_attn_map *out = st == TG_OK ? calloc((size_t)(cap.n ? cap.n : 1), sizeof *out) : NULL;
    if (st == TG_OK && !out) st = tg_error_set(TG_ERR_NOMEM, "tg_model_attention_maps: out of memory");
    for (int64_t i = 0; st == TG_OK && i < cap.n; i++) {
        snprintf(out[i].name, sizeof out[i].name, "%s", cap.name[i]);
        out[i].ndim = tg_tensor_shape(cap.w[i], out[i].shape);
        int64_t n = tg_tensor_numel(cap.w[i]);
        if (!(out[i].w = malloc((size_t)n * sizeof *out[i].w))) st = tg_error_set(TG_ERR_NOMEM, "tg_model_attention_maps: out of memory");
        else st = tg_tensor_read(cap.w[i], out[i].w, (size_t)n * sizeof *out[i].w);
        if (st == TG_OK)
            st = tg__model_check_finite(g, m->backend, out[i].w, n, 1, "tg_model_attention_maps: map %s", out[i].name);
    }
    free(cap.name);
    free(cap.w);
    tg_graph_free(g);
    if (st) {
        tg_attn_maps_free(out, cap.n);
        return st;
    }
    *maps = out;
    *count = cap.n;
    return TG_OK;
}
