/* Hugging Face models in: a directory's config.json, tokenizer.json and model.safetensors (and
 * sentence-transformers' modules.json, 1_Pooling/config.json, sentence_bert_config.json) into a
 * model of the zoo. The parameter names map one to one (models/hf_names.c); GPT-2's Conv1D
 * weights are stored [in, out] and its c_attn holds Q, K and V side by side, so those are
 * transposed and split. Nothing is allocated for the weights before the config and every
 * tensor's name, dtype and shape have been checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/hf-impl.h"
#include "models/model-impl.h"
#include "tg/hf.h"
#include "tg/json.h"
#include "tg/safetensors.h"

tg_status tg__hf_read(const char *path, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tg_error_set(TG_ERR_IO, "'%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    while (p) {
        n += fread(p + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *q = realloc(p, cap *= 2);
        if (!q) free(p);
        p = q;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!p || bad) {
        free(p);
        return tg_error_set(p ? TG_ERR_IO : TG_ERR_NOMEM, "'%s': %s", path, p ? "read error" : "out of memory");
    }
    p[n] = '\0';
    *len = n;
    *out = p;
    return TG_OK;
}

/* dir/name parsed; absent and optional: *out NULL and TG_OK */
static tg_status read_json(const char *dir, const char *name, bool required, tg_json **out) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (!required && errno == ENOENT) return TG_OK;
        return tg_error_set(TG_ERR_IO, "'%s': %s%s", path, strerror(errno),
                            required ? " (a Hugging Face model directory holds config.json, model.safetensors and "
                                       "tokenizer.json)" : "");
    }
    fclose(f);
    size_t len;
    char *text;
    tg_status st = tg__hf_read(path, &text, &len);
    if (st) return st;
    st = tg_json_parse(text, len, out);
    free(text);
    if (st) return tg_error_prefix(st, "'%s'", path);
    if (tg_json_kind(*out) != TG_JSON_OBJECT) {
        tg_json_free(*out);
        *out = NULL;
        return tg_error_set(TG_ERR_FORMAT, "'%s': not a JSON object", path);
    }
    return TG_OK;
}

static const char *jstr(const tg_json *o, const char *k) {
    const tg_json *x = tg_json_get(o, k);
    return tg_json_kind(x) == TG_JSON_STRING ? tg_json_string(x) : NULL;
}

/* an integer key of config.json: required, or dflt when absent */
static tg_status jint(const tg_json *o, const char *k, const char *path, bool required, int64_t dflt, int64_t *v) {
    const tg_json *x = tg_json_get(o, k);
    if (!x || tg_json_kind(x) == TG_JSON_NULL) {
        if (required) return tg_error_set(TG_ERR_FORMAT, "'%s': lacks the key '%s'", path, k);
        *v = dflt;
        return TG_OK;
    }
    if (tg_json_int64(x, v) || *v < 0) return tg_error_set(TG_ERR_FORMAT, "'%s': '%s' is not an integer >= 0", path, k);
    return TG_OK;
}
static float jnum(const tg_json *o, const char *k, float dflt) {
    const tg_json *x = tg_json_get(o, k);
    return tg_json_kind(x) == TG_JSON_NUMBER ? (float)tg_json_number(x) : dflt;
}

/* config.json into c (family, sizes, details) */
static tg_status hf_config(const tg_json *j, const char *path, tg_hf_family *fam, tg_model_config *c) {
    const tg_json *a0 = tg_json_at(tg_json_get(j, "architectures"), 0);
    const char *type = jstr(j, "model_type"), *arch = tg_json_kind(a0) == TG_JSON_STRING ? tg_json_string(a0) : NULL;
    tg_status st = TG_OK;
    if (type && !strcmp(type, "bert")) {
        *fam = TG_HF_BERT;
        if (arch && strcmp(arch, "BertModel") && strcmp(arch, "BertForMaskedLM"))
            return tg_error_set(TG_ERR_UNSUPPORTED, "'%s': architecture '%s' is not supported (BertModel, BertForMaskedLM)",
                                path, arch);
        const char *pos = jstr(j, "position_embedding_type"), *act = jstr(j, "hidden_act");
        if (pos && strcmp(pos, "absolute"))
            return tg_error_set(TG_ERR_UNSUPPORTED, "'%s': position_embedding_type '%s' is not supported (absolute)", path, pos);
        if (act && strcmp(act, "gelu") && strcmp(act, "gelu_new") && strcmp(act, "relu"))
            return tg_error_set(TG_ERR_UNSUPPORTED, "'%s': hidden_act '%s' is not supported (gelu, gelu_new, relu)", path, act);
        *c = tg_model_config_mlm_default();
        if (st == TG_OK) st = jint(j, "hidden_size", path, true, 0, &c->d_model);
        if (st == TG_OK) st = jint(j, "num_attention_heads", path, true, 0, &c->heads);
        if (st == TG_OK) st = jint(j, "num_hidden_layers", path, true, 0, &c->enc_layers);
        if (st == TG_OK) st = jint(j, "intermediate_size", path, true, 0, &c->d_ff);
        if (st == TG_OK) st = jint(j, "max_position_embeddings", path, true, 0, &c->max_len);
        if (st == TG_OK) st = jint(j, "type_vocab_size", path, false, 2, &c->type_vocab);
        if (st == TG_OK) st = jint(j, "vocab_size", path, true, 0, &c->tgt_vocab);
        c->gelu = !act || strcmp(act, "relu");
        c->gelu_erf = !act || !strcmp(act, "gelu");
        c->embed_norm = true;
        c->norm_eps = jnum(j, "layer_norm_eps", 1e-12f);
        c->dropout = jnum(j, "hidden_dropout_prob", 0.1f);
        c->attn_dropout = jnum(j, "attention_probs_dropout_prob", 0.1f);
        int64_t pad = 0;
        if (st == TG_OK) st = jint(j, "pad_token_id", path, false, 0, &pad);
        c->pad_id = (int32_t)pad;
    } else if (type && !strcmp(type, "gpt2")) {
        *fam = TG_HF_GPT2;
        if (arch && strcmp(arch, "GPT2LMHeadModel") && strcmp(arch, "GPT2Model"))
            return tg_error_set(TG_ERR_UNSUPPORTED, "'%s': architecture '%s' is not supported (GPT2LMHeadModel, GPT2Model)",
                                path, arch);
        const char *act = jstr(j, "activation_function");
        if (act && strcmp(act, "gelu_new") && strcmp(act, "gelu"))
            return tg_error_set(TG_ERR_UNSUPPORTED, "'%s': activation_function '%s' is not supported (gelu_new, gelu)", path, act);
        *c = tg_model_config_lm_default();
        if (st == TG_OK) st = jint(j, "n_embd", path, true, 0, &c->d_model);
        if (st == TG_OK) st = jint(j, "n_head", path, true, 0, &c->heads);
        if (st == TG_OK) st = jint(j, "n_layer", path, true, 0, &c->dec_layers);
        if (st == TG_OK) st = jint(j, "n_positions", path, true, 0, &c->max_len);
        if (st == TG_OK) st = jint(j, "n_inner", path, false, 4 * c->d_model, &c->d_ff);
        if (st == TG_OK) st = jint(j, "vocab_size", path, true, 0, &c->tgt_vocab);
        c->gelu_erf = act && !strcmp(act, "gelu");
        c->norm_eps = jnum(j, "layer_norm_epsilon", 1e-5f);
        c->dropout = jnum(j, "resid_pdrop", 0.1f);
        c->attn_dropout = jnum(j, "attn_pdrop", 0.1f);
        c->pad_id = -1; /* GPT-2 has no padding token: id 0 is "!" */
        if (tg_json_kind(tg_json_get(j, "scale_attn_weights")) == TG_JSON_BOOL && !tg_json_bool(tg_json_get(j, "scale_attn_weights")))
            return tg_error_set(TG_ERR_UNSUPPORTED, "'%s': scale_attn_weights false is not supported", path);
    } else {
        return tg_error_set(TG_ERR_UNSUPPORTED, "'%s': model_type '%s' is not supported (bert, gpt2)", path,
                            type ? type : "(absent)");
    }
    c->embed_scale = 1.0f;
    c->label_smoothing = 0.0f;
    c->src_vocab = c->tgt_vocab;
    return st;
}

/* sentence-transformers: pooling, Normalize, max_seq_length */
static tg_status st_modules(const char *dir, tg_model_config *c, int64_t *max_seq) {
    tg_json *mods = NULL, *pool = NULL, *sb = NULL;
    *max_seq = 0;
    char path[1100];
    snprintf(path, sizeof path, "%s/modules.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return TG_OK;
    fclose(f);
    size_t len;
    char *text;
    tg_status st = tg__hf_read(path, &text, &len);
    if (st) return st;
    st = tg_json_parse(text, len, &mods);
    free(text);
    if (st) return tg_error_prefix(st, "'%s'", path);
    const char *pool_dir = NULL;
    for (size_t i = 0; i < tg_json_size(mods); i++) {
        const char *type = jstr(tg_json_at(mods, i), "type"), *p = jstr(tg_json_at(mods, i), "path");
        if (type && strstr(type, "Pooling")) pool_dir = p;
        if (type && strstr(type, "Normalize")) c->normalize = true;
    }
    if (pool_dir) {
        char name[600];
        snprintf(name, sizeof name, "%s/config.json", pool_dir);
        st = read_json(dir, name, true, &pool);
        if (st == TG_OK) {
            const tg_json *cls = tg_json_get(pool, "pooling_mode_cls_token"), *mx = tg_json_get(pool, "pooling_mode_max_tokens"),
                          *sq = tg_json_get(pool, "pooling_mode_mean_sqrt_len_tokens");
            if (tg_json_bool(sq) == 1)
                st = tg_error_set(TG_ERR_UNSUPPORTED, "'%s/%s': pooling_mode_mean_sqrt_len_tokens is not supported", dir, name);
            c->pool = tg_json_bool(cls) == 1 ? TG_POOL_CLS : tg_json_bool(mx) == 1 ? TG_POOL_MAX : TG_POOL_MEAN;
        }
    }
    if (st == TG_OK) st = read_json(dir, "sentence_bert_config.json", false, &sb);
    if (st == TG_OK && sb) {
        int64_t m = 0;
        if (tg_json_get(sb, "max_seq_length") && tg_json_int64(tg_json_get(sb, "max_seq_length"), &m) == TG_OK && m > 0)
            *max_seq = m;
    }
    tg_json_free(mods);
    tg_json_free(pool);
    tg_json_free(sb);
    return st;
}

/* the checks of one tensor before anything is allocated */
typedef struct {
    const tg_st_file *f;
    const char *path, *prefix;
    tg_hf_family fam;
    char bad[400];
    tg_status code;
} probe;

static tg_status check_one(void *ctx, const char *name, int nd, const int64_t *shape) {
    probe *p = ctx;
    if (p->bad[0]) return TG_OK;
    tg_hf_src s;
    if (!tg__hf_source(p->fam, p->prefix, name, nd, shape, &s)) {
        snprintf(p->bad, sizeof p->bad, "no Hugging Face tensor for parameter '%s'", name);
        p->code = TG_ERR_UNSUPPORTED;
        return TG_OK;
    }
    size_t k;
    if (tg_st_find(p->f, s.name, &k) != TG_OK && (!s.alt[0] || tg_st_find(p->f, s.alt, &k) != TG_OK)) {
        tg_error_clear();
        snprintf(p->bad, sizeof p->bad, "tensor '%s' is missing", s.name);
        p->code = TG_ERR_FORMAT;
        return TG_OK;
    }
    tg_st_dtype dt = tg_st_tensor_dtype(p->f, k);
    if (dt != TG_ST_F32 && dt != TG_ST_F16 && dt != TG_ST_BF16 && dt != TG_ST_F64) {
        snprintf(p->bad, sizeof p->bad, "tensor '%s' has dtype %s (F32, F16, BF16 and F64 are read)", tg_st_name(p->f, k),
                 tg_st_dtype_name(dt));
        p->code = TG_ERR_UNSUPPORTED;
        return TG_OK;
    }
    const int64_t *fs = tg_st_tensor_shape(p->f, k);
    bool same = tg_st_tensor_ndim(p->f, k) == s.ndim;
    for (int d = 0; same && d < s.ndim; d++) same = fs[d] == s.shape[d];
    if (!same) {
        char a[96], e[96];
        snprintf(p->bad, sizeof p->bad, "tensor '%s' has shape %s, config.json implies %s", tg_st_name(p->f, k),
                 tg_shape_str(a, sizeof a, tg_st_tensor_ndim(p->f, k), fs), tg_shape_str(e, sizeof e, s.ndim, s.shape));
        p->code = TG_ERR_SHAPE;
    }
    return TG_OK;
}

/* parameter i of the model from its Hugging Face tensor: transposed and/or a column block */
static tg_status load_one(tg_model *m, const tg_st_file *f, tg_hf_family fam, const char *prefix, int64_t i) {
    int64_t shape[TG_MAX_DIMS], n = tg_store_numel(m->store, i);
    int nd = tg_store_shape(m->store, i, shape);
    tg_hf_src s;
    tg__hf_source(fam, prefix, tg_store_name(m->store, i), nd, shape, &s);
    size_t k;
    if (tg_st_find(f, s.name, &k) != TG_OK) tg_st_find(f, s.alt, &k);
    tg_error_clear();
    size_t total = tg_st_tensor_numel(f, k);
    float *src = malloc(total * sizeof *src), *dst = malloc((size_t)n * sizeof *dst);
    tg_status st = src && dst ? tg_st_read_f32(f, k, src, total) : tg_error_set(TG_ERR_NOMEM, "import: out of memory");
    if (st == TG_OK) {
        if (!s.transpose) {
            memcpy(dst, src, (size_t)n * sizeof *dst);
        } else if (nd == 1) { /* a bias's block */
            memcpy(dst, src + s.col0, (size_t)n * sizeof *dst);
        } else { /* Conv1D [in, out_total] -> ours [out, in], columns [col0, col0 + out) */
            int64_t out = shape[0], in = shape[1], cols = s.shape[1];
            for (int64_t o = 0; o < out; o++)
                for (int64_t c = 0; c < in; c++) dst[o * in + c] = src[c * cols + s.col0 + o];
        }
        st = tg_store_write(m->store, i, dst, n);
    }
    free(src);
    free(dst);
    return st;
}

tg_status tg_hf_import(const char *dir, tg_backend *b, tg_model **out) {
    if (!dir || !b || !out) return tg_error_set(TG_ERR_INVALID, "tg_hf_import: NULL argument");
    *out = NULL;
    char cpath[1100], tpath[1100], wpath[1100];
    snprintf(cpath, sizeof cpath, "%s/config.json", dir);
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", dir);
    snprintf(wpath, sizeof wpath, "%s/model.safetensors", dir);
    tg_json *cj = NULL;
    tg_model_config c;
    tg_hf_family fam = TG_HF_BERT;
    tg_tokenizer *tok = NULL;
    tg_st_file *f = NULL;
    tg_model *m = NULL;
    int64_t max_seq = 0;
    tg_status st = read_json(dir, "config.json", true, &cj);
    if (st == TG_OK) st = hf_config(cj, cpath, &fam, &c);
    if (st == TG_OK && fam == TG_HF_BERT) st = st_modules(dir, &c, &max_seq);
    if (st == TG_OK) {
        size_t len;
        char *text;
        st = tg__hf_read(tpath, &text, &len);
        if (st == TG_OK) st = tg_tokenizer_from_hf(text, len, tpath, &tok);
        free(text);
    }
    if (st == TG_OK && (fam == TG_HF_BERT) != (tg_tokenizer_kind(tok) == TG_TOK_WORDPIECE))
        st = tg_error_set(TG_ERR_UNSUPPORTED, "'%s': a %s tokenizer with a %s model is not supported", tpath,
                          tg_tokenizer_kind_name(tg_tokenizer_kind(tok)), fam == TG_HF_BERT ? "BERT" : "GPT-2");
    if (st == TG_OK && tg_vocab_size(tg_tokenizer_vocab(tok)) != c.tgt_vocab)
        st = tg_error_set(TG_ERR_FORMAT, "'%s': vocab_size is %lld, but '%s' holds %lld tokens", cpath, (long long)c.tgt_vocab,
                          tpath, (long long)tg_vocab_size(tg_tokenizer_vocab(tok)));
    if (st == TG_OK && fam == TG_HF_BERT && c.pad_id != tg_tokenizer_special(tok, "pad"))
        st = tg_error_set(TG_ERR_FORMAT, "'%s': pad_token_id %d, but the tokenizer's padding token is id %d", cpath,
                          (int)c.pad_id, (int)tg_tokenizer_special(tok, "pad"));
    if (st == TG_OK) st = tg_st_open(wpath, &f);
    const char *prefix = "";
    if (st == TG_OK) prefix = tg__hf_prefix(fam, f);
    if (st == TG_OK && fam == TG_HF_BERT) {
        size_t k;
        c.mlm_head = tg_st_find(f, "cls.predictions.transform.dense.weight", &k) == TG_OK;
        tg_error_clear();
    }
    if (st == TG_OK) {
        st = tg_model_config_check(&c);
        if (st) st = tg_error_prefix(st, "'%s'", cpath);
    }
    probe p = {.f = f, .path = wpath, .prefix = prefix, .fam = fam};
    if (st == TG_OK) st = tg__model_params_visit(&c, check_one, &p);
    if (st == TG_OK && p.bad[0]) st = tg_error_set(p.code, "'%s': %s", wpath, p.bad);
    if (st == TG_OK) {
        tg_vocab *v = tg_tokenizer_take_vocab(tok);
        st = tg__model_new(&c, v, v, b, 0, false, &m);
        if (st) st = tg_error_prefix(st, "'%s'", dir);
    }
    for (int64_t i = 0; st == TG_OK && i < tg_store_count(m->store); i++) st = load_one(m, f, fam, prefix, i);
    if (st == TG_OK) { /* text past the model's positions is truncated to them (or to a shorter
                        * limit of the tokenizer or of sentence-transformers) */
        int64_t lim = tg_tokenizer_max_length(tok);
        if (max_seq > 0) lim = max_seq;
        if (lim <= 0 || lim > c.max_len) lim = c.max_len;
        tg_tokenizer_set_max_length(tok, lim);
        st = tg_model_set_tokenizer(m, tok);
        tok = NULL;
    }
    tg_tokenizer_free(tok);
    tg_st_close(f);
    tg_json_free(cj);
    if (st) {
        tg_model_free(m);
        return st;
    }
    *out = m;
    return TG_OK;
}
