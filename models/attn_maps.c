/* Attention weights for looking at: while tg_model_attention_maps builds a forward graph, the
 * attention core records the tensor that multiplies V in each sub-layer (tg__attn_seen) and
 * keeps it; after the run the weights are read back to the host. tg_model_attention_logits
 * keeps each sub-layer's pre-mask logits (and talking heads' softmax) as well. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"

/* room for one more entry in every array of c; false when out of memory */
static bool grow(tg__attn_capture *c) {
    if (c->n < c->cap) return true;
    int64_t cap = c->cap ? 2 * c->cap : 16;
    void *nm = realloc(c->name, (size_t)cap * sizeof *c->name);
    if (!nm) return false;
    c->name = nm;
    tg_tensor ***arr[3] = {&c->w, &c->s, &c->p};
    for (int i = 0; i < 3; i++) {
        tg_tensor **na = realloc(*arr[i], (size_t)cap * sizeof **arr[i]);
        if (!na) return false;
        *arr[i] = na;
    }
    c->cap = cap;
    return true;
}

tg_tensor *tg__attn_seen(tg_model *m, const char *prefix, tg_tensor *w, tg_tensor *s, tg_tensor *p) {
    tg__attn_capture *c = m->capture;
    if (!c || !w) return w;
    if (!grow(c)) return w; /* out of memory: this map is missing; reported by the caller */
    snprintf(c->name[c->n], sizeof c->name[c->n], "%s", prefix);
    c->s[c->n] = c->logits && s ? tg_keep(s) : NULL;
    c->p[c->n] = c->logits && p ? tg_keep(p) : NULL;
    c->w[c->n++] = tg_keep(w);
    return w;
}

void tg_attn_maps_free(tg_attn_map *maps, int64_t count) {
    for (int64_t i = 0; maps && i < count; i++) {
        free(maps[i].w);
        free(maps[i].s);
        free(maps[i].p);
    }
    free(maps);
}

/* *dst = a malloc'ed host copy of the kept tensor t, which has n elements (NULL t: none) */
static tg_status read_back(const tg_tensor *t, int64_t n, float **dst) {
    if (!t) return TG_OK;
    if (tg_tensor_numel(t) != n)
        return tg_error_set(TG_ERR_SHAPE, "tg_model_attention_logits: %lld logits for %lld weights",
                            (long long)tg_tensor_numel(t), (long long)n);
    if (!(*dst = malloc((size_t)n * sizeof **dst)))
        return tg_error_set(TG_ERR_NOMEM, "tg_model_attention_maps: out of memory");
    return tg_tensor_read(t, *dst, (size_t)n * sizeof **dst);
}

static tg_status capture(tg_model *m, const tg_batch *b, bool logits, tg_attn_map **maps, int64_t *count) {
    if (!m || !b || !maps || !count) return tg_error_set(TG_ERR_INVALID, "tg_model_attention_maps: NULL argument");
    *maps = NULL;
    *count = 0;
    tg__attn_capture cap = {.logits = logits};
    tg_graph *g = tg_graph_new();
    if (!g) return tg_error_set(TG_ERR_NOMEM, "tg_model_attention_maps: out of memory");
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    m->capture = &cap;
    /* the model's logits kept and checked too: a softmax gives a row of NaN logits as zeros (a
     * fully masked row's answer), so the maps alone can look sound when the model's numbers are not */
    tg_tensor *out_logits = tg_keep(tg_model_logits(m, g, b));
    m->capture = NULL;
    const char *msg;
    tg_status st = tg_graph_status(g, &msg);
    if (st) st = tg_error_set(st, "%s", msg);
    else if (!out_logits) st = tg_error_prefix(TG_ERR_INVALID, "tg_model_attention_maps");
    int64_t layers = m->cfg.enc_layers + m->cfg.dec_layers * (m->cfg.arch == TG_ARCH_ENCDEC ? 2 : 1);
    if (st == TG_OK && cap.n != layers)
        st = tg_error_set(TG_ERR_NOMEM, "tg_model_attention_maps: %lld of %lld maps recorded", (long long)cap.n,
                          (long long)layers);
    if (st == TG_OK) st = tg_graph_run(g, m->backend);
    if (st == TG_OK) {
        const int64_t n = tg_tensor_numel(out_logits);
        float *l = malloc((size_t)(n ? n : 1) * sizeof *l);
        st = l ? tg_tensor_read(out_logits, l, (size_t)n * sizeof *l)
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
        st = read_back(cap.w[i], n, &out[i].w);
        if (st == TG_OK)
            st = tg__model_check_finite(g, m->backend, out[i].w, n, 1, "tg_model_attention_maps: map %s", out[i].name);
        if (st == TG_OK && logits && !cap.s[i])
            st = tg_error_set(TG_ERR_INVALID, "tg_model_attention_logits: %s recorded no logits", cap.name[i]);
        if (st == TG_OK) st = read_back(cap.s[i], n, &out[i].s);
        if (st == TG_OK) st = read_back(cap.p[i], n, &out[i].p);
    }
    free(cap.name);
    free(cap.w);
    free(cap.s);
    free(cap.p);
    tg_graph_free(g);
    if (st) {
        tg_attn_maps_free(out, cap.n);
        return st;
    }
    *maps = out;
    *count = cap.n;
    return TG_OK;
}

tg_status tg_model_attention_maps(tg_model *m, const tg_batch *b, tg_attn_map **maps, int64_t *count) {
    return capture(m, b, false, maps, count);
}

tg_status tg_model_attention_logits(tg_model *m, const tg_batch *b, tg_attn_map **maps, int64_t *count) {
    return capture(m, b, true, maps, count);
}
