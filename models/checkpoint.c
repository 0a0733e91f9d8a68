/* Model checkpoints in docs/model.md §4's format: safetensors, F32 tensors under the parameter names,
 * and __metadata__ holding format = "tgraph", config (JSON), src_vocab and tgt_vocab (JSON
 * arrays of tokens, index = id). A checkpoint is usable alone. Unknown config keys are
 * ignored; missing required keys and shapes that disagree with the config are errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"
#include "tg/json.h"
#include "tg/safetensors.h"

void tg__json_put(tg_json *o, const char *key, tg_json *v, tg_status *st) {
    if (*st == TG_OK && !v) *st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    if (*st == TG_OK) *st = tg_json_object_set(o, key, v);
    else tg_json_free(v);
}

static tg_status config_json(const tg_model_config *c, char **out) {
    tg_json *o = tg_json_new_object();
    if (!o) return tg_error_set(TG_ERR_NOMEM, "checkpoint: out of memory");
    tg_status st = TG_OK;
#define NUM(k, v) tg__json_put(o, k, tg_json_new_number((double)(v)), &st)
#define STR(k, v) tg__json_put(o, k, tg_json_new_string(v, strlen(v)), &st)
#define BOOL(k, v) tg__json_put(o, k, tg_json_new_bool(v), &st)
    STR("arch", tg_model_arch_name(c->arch));
    NUM("d_model", c->d_model);
    NUM("heads", c->heads);
    NUM("enc_layers", c->enc_layers);
    NUM("dec_layers", c->dec_layers);
    NUM("d_ff", c->d_ff);
    STR("attention", tg_attn_kind_name(c->attention));
    tg__json_put(o, "head_dim", c->attention == TG_ATTN_FIXED_HEAD ? tg_json_new_number((double)tg_model_head_dim(c))
                                                                   : tg_json_new_null(), &st);
    STR("norm", c->pre_norm ? "pre" : "post");
    STR("pos", c->rope ? "rope" : c->learned_pos ? "learned" : "sinusoidal");
    STR("norm_kind", c->rms_norm ? "rms" : "layer");
    NUM("window", c->window);
    NUM("classes", c->classes);
    NUM("max_len", c->max_len);
    BOOL("share_embeddings", c->share_embeddings);
    STR("activation", c->swiglu ? "swiglu" : c->gelu ? (c->gelu_erf ? "gelu_erf" : "gelu") : "relu");
    NUM("dropout", c->dropout);
    NUM("label_smoothing", c->label_smoothing);
    /* tgraph's own extras (other readers ignore unknown keys) */
    BOOL("tie_output", c->tie_output);
    NUM("attn_dropout", c->attn_dropout);
    NUM("ffn_dropout", c->ffn_dropout);
    BOOL("interacting_literal", c->interacting_literal);
    /* written only when set, so checkpoints of every other configuration keep their bytes */
    if (c->no_out_proj) BOOL("no_out_proj", true);
    if (c->interacting_sqrt_h) BOOL("interacting_sqrt_h", true);
    if (c->type_vocab > 0) NUM("type_vocab", c->type_vocab);
    if (c->embed_norm) BOOL("embed_norm", true);
    if (c->mlm_head) BOOL("mlm_head", true);
    if (c->norm_eps > 0.0f) NUM("norm_eps", c->norm_eps);
    if (c->embed_scale > 0.0f) NUM("embed_scale", c->embed_scale);
    if (c->pad_id != 0) NUM("pad_id", c->pad_id);
    if (c->pool != TG_POOL_MEAN) STR("pool", c->pool == TG_POOL_CLS ? "cls" : "max");
    if (c->normalize) BOOL("normalize", true);
#undef NUM
#undef STR
#undef BOOL
    if (st == TG_OK) st = tg_json_print(o, 0, out, NULL);
    tg_json_free(o);
    return st;
}

static tg_status vocab_json(const tg_vocab *v, char **out) {
    tg_json *a = tg_json_new_array();
    if (!a) return tg_error_set(TG_ERR_NOMEM, "checkpoint: out of memory");
    tg_status st = TG_OK;
    for (int32_t i = 0; st == TG_OK && i < tg_vocab_size(v); i++) {
        const char *t = tg_vocab_token(v, i);
        tg_json *s = tg_json_new_string(t, strlen(t));
        st = s ? tg_json_array_append(a, s) : tg_error_set(TG_ERR_NOMEM, "checkpoint: out of memory");
    }
    if (st == TG_OK) st = tg_json_print(a, 0, out, NULL);
    tg_json_free(a);
    return st;
}

tg_status tg_model_save(const tg_model *m, const char *path) {
    if (!m || !path) return tg_error_set(TG_ERR_INVALID, "tg_model_save: NULL argument");
    tg_st_writer *w = tg_st_writer_new();
    char *cfg = NULL, *sv = NULL, *tv = NULL;
    float *buf = NULL;
    tg_status st = w ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_model_save: out of memory");
    if (st == TG_OK) st = config_json(&m->cfg, &cfg);
    if (st == TG_OK) st = vocab_json(m->src, &sv);
    if (st == TG_OK) st = vocab_json(m->tgt, &tv);
    if (st == TG_OK) st = tg_st_writer_set_metadata(w, "format", "tgraph");
    if (st == TG_OK) st = tg_st_writer_set_metadata(w, "config", cfg);
    if (st == TG_OK) st = tg_st_writer_set_metadata(w, "src_vocab", sv);
    if (st == TG_OK) st = tg_st_writer_set_metadata(w, "tgt_vocab", tv);
    char *tok = NULL; /* written only when the model has one: other checkpoints keep their bytes */
    if (st == TG_OK && m->tok) st = tg_tokenizer_to_json(m->tok, &tok);
    if (st == TG_OK && tok) st = tg_st_writer_set_metadata(w, "tokenizer", tok);
    free(tok);
    for (int64_t i = 0; st == TG_OK && i < tg_store_count(m->store); i++) {
        int64_t n = tg_store_numel(m->store, i), shape[TG_MAX_DIMS];
        int nd = tg_store_shape(m->store, i, shape);
        float *p = realloc(buf, (size_t)n * sizeof *p);
        if (!p) {
            st = tg_error_set(TG_ERR_NOMEM, "tg_model_save: out of memory");
            break;
        }
        buf = p;
        st = tg_store_read(m->store, i, buf, n);
        if (st == TG_OK)
            st = tg_st_writer_add(w, tg_store_name(m->store, i), TG_ST_F32, nd, shape, buf);
    }
    if (st == TG_OK) st = tg_st_writer_save(w, path);
    free(buf);
    free(cfg);
    free(sv);
    free(tv);
    tg_st_writer_free(w);
    return st;
}

/* ---- loading ---- */

static tg_status get_int(const tg_json *o, const char *key, int64_t *v, const char *path) {
    const tg_json *x = tg_json_get(o, key);
    if (!x) return tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config lacks required key '%s'", path, key);
    if (tg_json_int64(x, v) != TG_OK)
        return tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config key '%s' is not an integer", path, key);
    return TG_OK;
}

static tg_status get_str(const tg_json *o, const char *key, const char **v, const char *path) {
    const tg_json *x = tg_json_get(o, key);
    if (!x || tg_json_kind(x) != TG_JSON_STRING)
        return tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config key '%s' missing or not a string", path, key);
    *v = tg_json_string(x);
    return TG_OK;
}

static float get_float(const tg_json *o, const char *key, float dflt) {
    const tg_json *x = tg_json_get(o, key);
    return tg_json_kind(x) == TG_JSON_NUMBER ? (float)tg_json_number(x) : dflt;
}

static bool get_bool(const tg_json *o, const char *key, bool dflt) {
    const tg_json *x = tg_json_get(o, key);
    return tg_json_kind(x) == TG_JSON_BOOL ? tg_json_bool(x) != 0 : dflt;
}

static tg_status parse_config(const char *text, const char *path, bool has_out_proj, tg_model_config *c) {
    tg_json *o = NULL;
    if (!text) return tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': no 'config' in __metadata__", path);
    tg_status st = tg_json_parse(text, strlen(text), &o);
    if (st) return tg_error_prefix(st, "checkpoint '%s': config", path);
    *c = tg_model_config_default();
    const char *att = NULL, *norm = NULL, *pos = NULL, *act = NULL;
    if (tg_json_kind(o) != TG_JSON_OBJECT) st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config is not an object", path);
    if (st == TG_OK) { /* the model family; checkpoints from before families are encdec */
        const tg_json *a = tg_json_get(o, "arch");
        if (a && tg_json_kind(a) != TG_JSON_STRING)
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config key 'arch' is not a string", path);
        else if (a && tg_model_arch_parse(tg_json_string(a), &c->arch) != TG_OK)
            st = tg_error_prefix(TG_ERR_FORMAT, "checkpoint '%s'", path);
    }
    if (st == TG_OK) st = get_int(o, "d_model", &c->d_model, path);
    if (st == TG_OK) st = get_int(o, "heads", &c->heads, path);
    if (st == TG_OK) st = get_int(o, "enc_layers", &c->enc_layers, path);
    if (st == TG_OK) st = get_int(o, "dec_layers", &c->dec_layers, path);
    if (st == TG_OK) st = get_int(o, "d_ff", &c->d_ff, path);
    if (st == TG_OK) st = get_int(o, "max_len", &c->max_len, path);
    if (st == TG_OK) st = get_str(o, "attention", &att, path);
    if (st == TG_OK) st = tg_attn_kind_parse(att, &c->attention);
    if (st == TG_OK) st = get_str(o, "norm", &norm, path);
    if (st == TG_OK) st = get_str(o, "pos", &pos, path);
    if (st == TG_OK && strcmp(norm, "post") && strcmp(norm, "pre"))
        st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': norm '%s' is not post or pre", path, norm);
    if (st == TG_OK && strcmp(pos, "sinusoidal") && strcmp(pos, "learned") && strcmp(pos, "rope"))
        st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': pos '%s' is not sinusoidal, learned or rope", path, pos);
    if (st == TG_OK) { /* absent in checkpoints from before RMSNorm: layer */
        const tg_json *k = tg_json_get(o, "norm_kind");
        const char *nk = tg_json_kind(k) == TG_JSON_STRING ? tg_json_string(k) : NULL;
        if (!nk) nk = "layer";
        if (strcmp(nk, "layer") && strcmp(nk, "rms"))
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': norm_kind '%s' is not layer or rms", path, nk);
        c->rms_norm = !strcmp(nk, "rms");
        const tg_json *w = tg_json_get(o, "window"), *k2 = tg_json_get(o, "classes"); /* absent: 0 */
        if (w && (tg_json_int64(w, &c->window) != TG_OK || c->window < 0))
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config key 'window' is not an integer >= 0", path);
        if (k2 && (tg_json_int64(k2, &c->classes) != TG_OK || c->classes < 0))
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config key 'classes' is not an integer >= 0", path);
    }
    if (st == TG_OK) {
        const tg_json *a = tg_json_get(o, "activation");
        act = tg_json_kind(a) == TG_JSON_STRING ? tg_json_string(a) : "relu";
        if (strcmp(act, "relu") && strcmp(act, "gelu") && strcmp(act, "gelu_erf") && strcmp(act, "swiglu"))
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': activation '%s' is not relu, gelu, gelu_erf or swiglu",
                              path, act);
    }
    if (st == TG_OK && c->attention == TG_ATTN_FIXED_HEAD) st = get_int(o, "head_dim", &c->head_dim, path);
    if (st == TG_OK) {
        if (!tg_json_get(o, "share_embeddings"))
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config lacks required key 'share_embeddings'", path);
        c->pre_norm = !strcmp(norm, "pre");
        c->learned_pos = !strcmp(pos, "learned");
        c->rope = !strcmp(pos, "rope");
        c->gelu = act && (!strcmp(act, "gelu") || !strcmp(act, "gelu_erf"));
        c->gelu_erf = act && !strcmp(act, "gelu_erf");
        c->swiglu = act && !strcmp(act, "swiglu");
        c->share_embeddings = get_bool(o, "share_embeddings", false);
        /* docs/model.md §4: out_proj.weight exists only when the output projection is not tied */
        c->tie_output = get_bool(o, "tie_output", !has_out_proj);
        c->interacting_literal = get_bool(o, "interacting_literal", false);
        c->no_out_proj = get_bool(o, "no_out_proj", false);
        c->interacting_sqrt_h = get_bool(o, "interacting_sqrt_h", false);
        c->dropout = get_float(o, "dropout", 0.1f);
        c->attn_dropout = get_float(o, "attn_dropout", c->dropout);
        c->ffn_dropout = get_float(o, "ffn_dropout", 0.0f);
        c->label_smoothing = get_float(o, "label_smoothing", 0.1f);
        /* BERT's details (absent in older checkpoints: off) */
        c->embed_norm = get_bool(o, "embed_norm", false);
        c->mlm_head = get_bool(o, "mlm_head", false);
        c->norm_eps = get_float(o, "norm_eps", 0.0f);
        c->embed_scale = get_float(o, "embed_scale", 0.0f);
        const tg_json *tv = tg_json_get(o, "type_vocab"), *pi = tg_json_get(o, "pad_id");
        int64_t pad = 0;
        if (tv && tg_json_int64(tv, &c->type_vocab) != TG_OK)
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config key 'type_vocab' is not an integer", path);
        if (pi && (tg_json_int64(pi, &pad) != TG_OK || pad < -1 || pad > INT32_MAX))
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': config key 'pad_id' is not an id or -1", path);
        c->pad_id = (int32_t)pad;
        const tg_json *pl = tg_json_get(o, "pool");
        const char *ps = tg_json_kind(pl) == TG_JSON_STRING ? tg_json_string(pl) : "mean";
        c->pool = !strcmp(ps, "cls") ? TG_POOL_CLS : !strcmp(ps, "max") ? TG_POOL_MAX : TG_POOL_MEAN;
        if (strcmp(ps, "mean") && c->pool == TG_POOL_MEAN)
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': pool '%s' is not mean, cls or max", path, ps);
        c->normalize = get_bool(o, "normalize", false);
    }
    tg_json_free(o);
    return st;
}

/* free: the layout of special tokens is the stored tokenizer's (an imported model's), not the
 * four fixed ones of docs/model.md §4 */
static tg_status parse_vocab(const char *text, const char *key, const char *path, bool free_layout, tg_vocab **out) {
    *out = NULL;
    if (!text) return tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': no '%s' in __metadata__", path, key);
    tg_json *a = NULL;
    tg_status st = tg_json_parse(text, strlen(text), &a);
    if (st) return tg_error_prefix(st, "checkpoint '%s': %s", path, key);
    static const char *specials[4] = {"<pad>", "<unk>", "<s>", "</s>"};
    if (tg_json_kind(a) != TG_JSON_ARRAY || tg_json_size(a) < 4)
        st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': %s is not an array of at least 4 tokens", path, key);
    for (size_t i = 0; st == TG_OK && !free_layout && i < 4; i++)
        if (tg_json_kind(tg_json_at(a, i)) != TG_JSON_STRING || strcmp(tg_json_string(tg_json_at(a, i)), specials[i]))
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': %s entry %zu must be %s", path, key, i, specials[i]);
    tg_vocab *v = NULL;
    if (st == TG_OK) st = free_layout ? tg_vocab_new_empty(&v) : tg_vocab_new(&v);
    for (size_t i = free_layout ? 0 : 4; st == TG_OK && i < tg_json_size(a); i++) {
        const tg_json *t = tg_json_at(a, i);
        int32_t id;
        if (tg_json_kind(t) != TG_JSON_STRING) {
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': %s entry %zu is not a string", path, key, i);
            break;
        }
        st = tg_vocab_add(v, tg_json_string(t), &id);
        if (st == TG_OK && (size_t)id != i)
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': %s token '%s' appears twice", path, key,
                              tg_json_string(t));
    }
    tg_json_free(a);
    if (st) {
        tg_vocab_free(v);
        return st;
    }
    *out = v;
    return TG_OK;
}

static bool same_vocab(const tg_vocab *a, const tg_vocab *b) {
    if (tg_vocab_size(a) != tg_vocab_size(b)) return false;
    for (int32_t i = 0; i < tg_vocab_size(a); i++)
        if (strcmp(tg_vocab_token(a, i), tg_vocab_token(b, i))) return false;
    return true;
}

/* The file's tensors against the parameters the config implies, before anything is allocated
 * for them: a small file can claim a config of a terabyte. */
typedef struct {
    const tg_st_file *f;
    double params; /* implied by the config */
    char bad[320]; /* the first disagreement */
} probe;

static tg_status probe_param(void *ctx, const char *name, int nd, const int64_t *shape) {
    probe *p = ctx;
    double n = 1.0;
    for (int d = 0; d < nd; d++) n *= (double)shape[d];
    p->params += n;
    size_t k;
    if (p->bad[0]) return TG_OK; /* keep counting */
    if (tg_st_find(p->f, name, &k) != TG_OK) {
        tg_error_clear();
        snprintf(p->bad, sizeof p->bad, "parameter '%s' is missing", name);
        return TG_OK;
    }
    const int64_t *fs = tg_st_tensor_shape(p->f, k);
    bool same = tg_st_tensor_ndim(p->f, k) == nd;
    for (int d = 0; same && d < nd; d++) same = fs[d] == shape[d];
    if (!same) {
        char a[96], e[96];
        snprintf(p->bad, sizeof p->bad, "parameter '%s' has shape %s, the config implies %s", name,
                 tg_shape_str(a, sizeof a, tg_st_tensor_ndim(p->f, k), fs), tg_shape_str(e, sizeof e, nd, shape));
    }
    return TG_OK;
}

static tg_status check_tensors(const tg_st_file *f, const tg_model_config *c, const char *path) {
    probe p = {.f = f};
    tg_status st = tg_model_config_check(c);
    if (st == TG_OK) st = tg__model_params_visit(c, probe_param, &p);
    if (st) return tg_error_prefix(st, "checkpoint '%s'", path);
    if (!p.bad[0]) return TG_OK;
    double bytes = 4.0 * p.params;
    const char *unit = bytes >= 1e12 ? "TB" : bytes >= 1e9 ? "GB" : bytes >= 1e6 ? "MB" : "kB";
    double scale = bytes >= 1e12 ? 1e12 : bytes >= 1e9 ? 1e9 : bytes >= 1e6 ? 1e6 : 1e3;
    return tg_error_set(p.bad[strlen(p.bad) - 1] == ']' ? TG_ERR_SHAPE : TG_ERR_FORMAT,
                        "checkpoint '%s': %s (its config implies %.4g parameters, %.3g %s; nothing was allocated)",
                        path, p.bad, p.params, bytes / scale, unit);
}

/* Every weight a finite number: a NaN would score `nan` and translate garbage without a word. */
static tg_status check_finite(const float *x, int64_t n, const char *name, const char *path) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return tg_error_set(TG_ERR_NUMERIC, "checkpoint '%s': parameter '%s' holds %g at index %lld (a diverged or "
                                "damaged checkpoint)", path, name, (double)x[i], (long long)i);
    return TG_OK;
}

tg_status tg_model_load(const char *path, tg_backend *b, tg_model **out) {
    if (!path || !b || !out) return tg_error_set(TG_ERR_INVALID, "tg_model_load: NULL argument");
    *out = NULL;
    tg_st_file *f = NULL;
    tg_status st = tg_st_open(path, &f);
    if (st) return st;
    const char *fmt = tg_st_metadata(f, "format");
    if (!fmt || strcmp(fmt, "tgraph"))
        st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': __metadata__ format is '%s', expected 'tgraph' (not a tgraph checkpoint: "
                          "`tg inspect` lists its tensors, `tg import --from hf` converts a Hugging Face model)", path,
                          fmt ? fmt : "(absent)");
    tg_model_config c;
    tg_vocab *sv = NULL, *tv = NULL;
    size_t out_idx;
    bool has_out_proj = false;
    if (st == TG_OK) { /* a failed lookup sets the thread's message: only clear our own */
        has_out_proj = tg_st_find(f, "out_proj.weight", &out_idx) == TG_OK;
        tg_error_clear();
    }
    if (st == TG_OK) st = parse_config(tg_st_metadata(f, "config"), path, has_out_proj, &c);
    const char *tok = tg_st_metadata(f, "tokenizer");
    if (st == TG_OK) st = parse_vocab(tg_st_metadata(f, "src_vocab"), "src_vocab", path, tok != NULL, &sv);
    if (st == TG_OK) st = parse_vocab(tg_st_metadata(f, "tgt_vocab"), "tgt_vocab", path, tok != NULL, &tv);
    tg_model *m = NULL;
    if (st == TG_OK && c.share_embeddings) { /* a joint vocabulary: one object for both sides */
        if (!same_vocab(sv, tv))
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': the config shares one embedding table, but src_vocab "
                              "(%lld tokens) and tgt_vocab (%lld tokens) differ", path, (long long)tg_vocab_size(sv),
                              (long long)tg_vocab_size(tv));
        tg_vocab_free(tv);
        tv = sv;
    }
    if (st == TG_OK) {
        c.src_vocab = tg_vocab_size(sv);
        c.tgt_vocab = tg_vocab_size(tv);
        st = check_tensors(f, &c, path);
    }
    if (st == TG_OK) {
        st = tg__model_new(&c, sv, tv, b, 0, false, &m); /* every value read below */
        if (st) st = tg_error_prefix(st, "checkpoint '%s'", path);
        sv = tv = NULL; /* owned by the model, even when tg_model_new fails */
    }
    float *buf = NULL;
    for (int64_t i = 0; st == TG_OK && i < tg_store_count(m->store); i++) {
        const char *name = tg_store_name(m->store, i);
        size_t k;
        int64_t shape[TG_MAX_DIMS];
        int nd = tg_store_shape(m->store, i, shape);
        if (tg_st_find(f, name, &k) != TG_OK) {
            st = tg_error_set(TG_ERR_FORMAT, "checkpoint '%s': parameter '%s' is missing", path, name);
            break;
        }
        const int64_t *fs = tg_st_tensor_shape(f, k);
        bool same = tg_st_tensor_ndim(f, k) == nd;
        for (int d = 0; same && d < nd; d++) same = fs[d] == shape[d];
        if (!same) {
            char a[96], e[96];
            st = tg_error_set(TG_ERR_SHAPE, "checkpoint '%s': parameter '%s' has shape %s, the config implies %s", path,
                              name, tg_shape_str(a, sizeof a, tg_st_tensor_ndim(f, k), fs),
                              tg_shape_str(e, sizeof e, nd, shape));
            break;
        }
        int64_t n = tg_store_numel(m->store, i);
        float *p = realloc(buf, (size_t)n * sizeof *p);
        if (!p) {
            st = tg_error_set(TG_ERR_NOMEM, "tg_model_load: out of memory");
            break;
        }
        buf = p;
        st = tg_st_read_f32(f, k, buf, (size_t)n);
        if (st == TG_OK) st = check_finite(buf, n, name, path);
        if (st == TG_OK) st = tg_store_write(m->store, i, buf, n);
    }
    free(buf);
    if (st == TG_OK && tok) {
        tg_tokenizer *t = NULL;
        char origin[1100];
        snprintf(origin, sizeof origin, "checkpoint '%s': tokenizer", path);
        st = tg_tokenizer_from_json(tok, origin, m->src, &t);
        if (st == TG_OK) m->tok = t;
    }
    tg_st_close(f);
    if (st) {
        tg_model_free(m);
        if (tv != sv) tg_vocab_free(tv);
        tg_vocab_free(sv);
        return st;
    }
    *out = m;
    return TG_OK;
}
