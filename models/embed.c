/* Sentence embeddings of an encoder (arch mlm): the encoder's final states, pooled over each
 * sequence's tokens and optionally normalised, as sentence-transformers does (its Pooling
 * module's mean / cls / max modes, then its Normalize module). The pooling runs on the host:
 * B·S·d reads, nothing next to the encoder's cost. */
#include <math.h>
#include <stdlib.h>

#include "models/model-impl.h"

tg_status tg_model_embed(tg_model *m, const int32_t *ids, int64_t B, int64_t S, tg_pool pool, bool normalize,
                         float *out) {
    if (!m || !ids || !out || B < 1 || S < 1) return tg_error_set(TG_ERR_INVALID, "tg_model_embed: NULL argument or empty batch");
    if (m->cfg.arch != TG_ARCH_MLM)
        return tg_error_set(TG_ERR_INVALID, "tg_model_embed: the model is not an encoder (arch %s)", tg_model_arch_name(m->cfg.arch));
    int64_t d = m->cfg.d_model;
    tg_graph *g = tg_graph_new();
    if (!g) return tg_error_set(TG_ERR_NOMEM, "tg_model_embed: out of memory");
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    tg_tensor *h = tg_keep(tg_model_encode(m, g, ids, B, S, NULL));
    float *x = malloc((size_t)(B * S * d) * sizeof *x);
    const char *msg;
    tg_status st = tg_graph_status(g, &msg);
    if (st) tg_error_set(st, "%s", msg);
    else if (!x) st = tg_error_set(TG_ERR_NOMEM, "tg_model_embed: out of memory");
    if (st == TG_OK) st = tg_graph_run(g, m->backend);
    if (st == TG_OK) st = tg_tensor_read(h, x, (size_t)(B * S * d) * sizeof *x);
    for (int64_t b = 0; st == TG_OK && b < B; b++) {
        float *o = out + b * d;
        int64_t n = 0;
        for (int64_t j = 0; j < d; j++) o[j] = pool == TG_POOL_MAX ? -INFINITY : 0.0f;
        for (int64_t s = 0; s < S; s++) {
            if (ids[b * S + s] == m->cfg.pad_id || (pool == TG_POOL_CLS && s > 0)) continue;
            const float *r = x + (b * S + s) * d;
            for (int64_t j = 0; j < d; j++) o[j] = pool == TG_POOL_MAX ? fmaxf(o[j], r[j]) : o[j] + r[j];
            n++;
        }
        if (pool == TG_POOL_MEAN && n > 0)
            for (int64_t j = 0; j < d; j++) o[j] /= (float)n;
        if (n == 0)
            for (int64_t j = 0; j < d; j++) o[j] = 0.0f; /* only padding: a zero vector */
        if (normalize) { /* x / max(||x||, 1e-12), as torch.nn.functional.normalize */
            double ss = 0.0;
            for (int64_t j = 0; j < d; j++) ss += (double)o[j] * o[j];
            double nrm = fmax(sqrt(ss), 1e-12);
            for (int64_t j = 0; j < d; j++) o[j] = (float)(o[j] / nrm);
        }
    }
    free(x);
    tg_graph_free(g);
    return st;
}
