/* Parameters of a model, created under docs/model.md §4's names with docs/model.md §1's initialisation:
 * Xavier-uniform matrices, zero biases, LayerNorm gain 1 / bias 0, embeddings N(0, d^-1/2),
 * talking-heads mixing matrices the identity (so training starts as MHA). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/model-impl.h"

/* tg__model_params_visit: a model without a store only lists its parameters, to this visitor */
static _Thread_local tg__model_param_visitor visit_fn;
static _Thread_local void *visit_ctx;

tg_status tg__model_param_add(tg_model *m, tg_rng *r, const char *name, int ndim, const int64_t *shape,
                              tg_init_kind k) {
    if (!m->store) return visit_fn(visit_ctx, name, ndim, shape);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    if (m->no_draw && (k == TG_INIT_XAVIER || k == TG_INIT_NORMAL)) k = TG_INIT_ZEROS; /* loaded next */
    if (tg_store_find(m->store, name) >= 0)
        return tg_error_set(TG_ERR_INVALID, "model init: a second parameter '%s'", name);
    float *w = malloc((size_t)n * sizeof *w);
    if (!w) return tg_error_set(TG_ERR_NOMEM, "model init: out of memory for '%s'", name);
    tg__params_fill(w, ndim, shape, k, r, 1.0 / sqrt((double)m->cfg.d_model));
    tg_status st = tg_store_add(m->store, name, ndim, shape, w, true);
    free(w);
    return st;
}

/* a matrix [rows, cols], or a vector [rows] when cols is 0 */
static tg_status add(tg_model *m, tg_rng *r, const char *name, int64_t rows, int64_t cols, tg_init_kind k) {
    int64_t shape[2] = {rows, cols};
    return tg__model_param_add(m, r, name, cols > 0 ? 2 : 1, shape, k);
}

#define TRY(x)                   \
    do {                         \
        tg_status st_ = (x);     \
        if (st_) return st_;     \
    } while (0)

static tg_status linear(tg_model *m, tg_rng *r, const char *prefix, int64_t out, int64_t in) {
    char name[176]; /* a prefix of up to 159 bytes and ".weight" */
    snprintf(name, sizeof name, "%s.weight", prefix);
    TRY(add(m, r, name, out, in, TG_INIT_XAVIER));
    snprintf(name, sizeof name, "%s.bias", prefix);
    return add(m, r, name, out, 0, TG_INIT_ZEROS);
}

static tg_status norm(tg_model *m, tg_rng *r, const char *prefix) {
    char name[176];
    snprintf(name, sizeof name, "%s.weight", prefix);
    TRY(add(m, r, name, m->cfg.d_model, 0, TG_INIT_ONES));
    if (m->cfg.rms_norm) return TG_OK; /* RMSNorm has a gain only */
    snprintf(name, sizeof name, "%s.bias", prefix);
    return add(m, r, name, m->cfg.d_model, 0, TG_INIT_ZEROS);
}

/* fc1 (and with SwiGLU the gate's partner fc3) [d_ff, d], fc2 [d, d_ff] */
static tg_status ffn(tg_model *m, tg_rng *r, const char *prefix) {
    const tg_model_config *c = &m->cfg;
    char name[160];
    snprintf(name, sizeof name, "%s.fc1", prefix);
    TRY(linear(m, r, name, c->d_ff, c->d_model));
    snprintf(name, sizeof name, "%s.fc2", prefix);
    TRY(linear(m, r, name, c->d_model, c->d_ff));
    snprintf(name, sizeof name, "%s.fc3", prefix);
    return c->swiglu ? linear(m, r, name, c->d_ff, c->d_model) : TG_OK;
}

static tg_status attention(tg_model *m, tg_rng *r, const char *prefix) {
    const tg_model_config *c = &m->cfg;
    const tg_attn_kind_def *def = tg_attn_kind_def_get(c->attention);
    if (def) { /* a kind registered by the program (tg/attn_kinds.h) */
        tg_params *p = tg__params_of_model(m, r);
        if (!p) return tg_error_set(TG_ERR_NOMEM, "model init: out of memory");
        tg_attn_dims dims = tg__attn_dims(c);
        tg_status st = def->init(p, prefix, &dims, def->user);
        tg_params_free(p);
        return st ? tg_error_prefix(st, "attention kind '%s' (%s)", def->name, prefix) : TG_OK;
    }
    int64_t d = c->d_model, h = c->heads, dk = tg_model_head_dim(c);
    char name[160];
    static const char *proj[3] = {"q_proj", "k_proj", "v_proj"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, proj[i]);
        TRY(linear(m, r, name, h * dk, d));
    }
    /* interacting_pairwise concatenates h*h sub-outputs of width d_v: W_O is [d, h*d] */
    int64_t in = c->attention == TG_ATTN_INTERACTING_PAIRWISE ? h * h * dk : h * dk;
    snprintf(name, sizeof name, "%s.out_proj", prefix);
    if (!c->no_out_proj) TRY(linear(m, r, name, d, in));
    if (c->attention == TG_ATTN_TALKING_HEADS) {
        snprintf(name, sizeof name, "%s.pre_softmax_proj", prefix);
        TRY(add(m, r, name, h, h, TG_INIT_EYE));
        snprintf(name, sizeof name, "%s.post_softmax_proj", prefix);
        TRY(add(m, r, name, h, h, TG_INIT_EYE));
    }
    return TG_OK;
}

tg_status tg__model_params_visit(const tg_model_config *c, tg__model_param_visitor fn, void *ctx) {
    tg_model probe = {.cfg = *c};
    visit_fn = fn;
    visit_ctx = ctx;
    return tg__model_init_params(&probe, 0);
}

static tg_status count_param(void *ctx, const char *name, int ndim, const int64_t *shape) {
    (void)name;
    double n = 1.0;
    for (int d = 0; d < ndim; d++) n *= (double)shape[d];
    *(double *)ctx += n;
    return TG_OK;
}

tg_status tg_model_param_count(const tg_model_config *c, double *out) {
    if (!c || !out) return tg_error_set(TG_ERR_INVALID, "tg_model_param_count: NULL argument");
    *out = 0.0;
    tg_status st = tg_model_config_check(c);
    return st ? st : tg__model_params_visit(c, count_param, out);
}

tg_status tg__model_init_params(tg_model *m, uint64_t seed) {
    const tg_model_config *c = &m->cfg;
    tg_rng r;
    tg_rng_init(&r, seed);
    char p[160];
    if (c->share_embeddings) {
        TRY(add(m, &r, "embed.weight", c->tgt_vocab, c->d_model, TG_INIT_NORMAL));
    } else {
        TRY(add(m, &r, "src_embed.weight", c->src_vocab, c->d_model, TG_INIT_NORMAL));
        TRY(add(m, &r, "tgt_embed.weight", c->tgt_vocab, c->d_model, TG_INIT_NORMAL));
    }
    if (c->learned_pos) TRY(add(m, &r, "pos_embed.weight", c->max_len, c->d_model, TG_INIT_NORMAL));
    if (c->type_vocab > 0) TRY(add(m, &r, "type_embed.weight", c->type_vocab, c->d_model, TG_INIT_NORMAL));
    if (c->embed_norm) TRY(norm(m, &r, "embed_norm"));
    for (int64_t l = 0; l < c->enc_layers; l++) {
        snprintf(p, sizeof p, "encoder.layers.%lld.self_attn", (long long)l);
        TRY(attention(m, &r, p));
        snprintf(p, sizeof p, "encoder.layers.%lld.ffn", (long long)l);
        TRY(ffn(m, &r, p));
        for (int k = 1; k <= 2; k++) {
            snprintf(p, sizeof p, "encoder.layers.%lld.norm%d", (long long)l, k);
            TRY(norm(m, &r, p));
        }
    }
    bool lm = c->arch == TG_ARCH_LM; /* no cross-attention, two norms per layer */
    for (int64_t l = 0; l < c->dec_layers; l++) {
        snprintf(p, sizeof p, "decoder.layers.%lld.self_attn", (long long)l);
        TRY(attention(m, &r, p));
        snprintf(p, sizeof p, "decoder.layers.%lld.cross_attn", (long long)l);
        if (!lm) TRY(attention(m, &r, p));
        snprintf(p, sizeof p, "decoder.layers.%lld.ffn", (long long)l);
        TRY(ffn(m, &r, p));
        for (int k = 1; k <= (lm ? 2 : 3); k++) {
            snprintf(p, sizeof p, "decoder.layers.%lld.norm%d", (long long)l, k);
            TRY(norm(m, &r, p));
        }
    }
    if (c->pre_norm) {
        if (c->enc_layers > 0) TRY(norm(m, &r, "encoder.norm"));
        if (c->dec_layers > 0) TRY(norm(m, &r, "decoder.norm"));
    }
    if (c->classes > 0) TRY(linear(m, &r, "cls_head", c->classes, c->d_model));
    if (c->mlm_head) {
        TRY(linear(m, &r, "mlm_head.dense", c->d_model, c->d_model));
        TRY(norm(m, &r, "mlm_head.norm"));
        TRY(add(m, &r, "mlm_head.bias", c->tgt_vocab, 0, TG_INIT_ZEROS));
    }
    if (!c->share_embeddings && !c->tie_output)
        TRY(add(m, &r, "out_proj.weight", c->tgt_vocab, c->d_model, TG_INIT_XAVIER));
    return TG_OK;
}
