/* Hugging Face models out: a model of BERT's layout (arch mlm with token types and an
 * embedding LayerNorm, post-LN, learned positions, MHA) or GPT-2's (arch lm, pre-LN, learned
 * positions, MHA, tanh GELU) as config.json, model.safetensors and tokenizer.json, with the
 * name map of models/hf_names.c run backwards: GPT-2's Q, K and V go back side by side into
 * c_attn, and its Conv1D weights back to [in, out]. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/hf-impl.h"
#include "models/model-impl.h"
#include "models/tok-impl.h"
#include "tg/hf.h"
#include "tg/json.h"

typedef struct {
    char name[200];
    int ndim;
    int64_t shape[2];
    float *x;
} out_tensor;

static tg_status write_text(const char *dir, const char *name, const char *text) {
    char path[1100], tmp[1110];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return tg_error_set(TG_ERR_IO, "'%s': %s", tmp, strerror(errno));
    bool bad = fputs(text, f) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        remove(tmp);
        return tg_error_set(TG_ERR_IO, "'%s': cannot write", path);
    }
    return TG_OK;
}

static tg_status config_json(const tg_model *m, tg_hf_family fam, bool mlm, char **out) {
    const tg_model_config *c = &m->cfg;
    tg_json *o = tg_json_new_object(), *arch = tg_json_new_array();
    tg_status st = o && arch ? TG_OK : tg_error_set(TG_ERR_NOMEM, "export: out of memory");
    const char *an = fam == TG_HF_GPT2 ? "GPT2LMHeadModel" : mlm ? "BertForMaskedLM" : "BertModel";
    if (st == TG_OK) st = tg_json_array_append(arch, tg_json_new_string(an, strlen(an)));
    if (st == TG_OK) st = tg_json_object_set(o, "architectures", arch);
    else tg_json_free(arch);
#define NUM(k, v) tg__json_put(o, k, tg_json_new_number((double)(v)), &st)
#define STR(k, v) tg__json_put(o, k, tg_json_new_string(v, strlen(v)), &st)
    float eps = c->norm_eps > 0 ? c->norm_eps : 1e-5f;
    if (fam == TG_HF_BERT) {
        STR("model_type", "bert");
        NUM("hidden_size", c->d_model);
        NUM("num_attention_heads", c->heads);
        NUM("num_hidden_layers", c->enc_layers);
        NUM("intermediate_size", c->d_ff);
        NUM("max_position_embeddings", c->max_len);
        NUM("type_vocab_size", c->type_vocab);
        NUM("vocab_size", c->tgt_vocab);
        NUM("layer_norm_eps", eps);
        STR("hidden_act", c->gelu ? (c->gelu_erf ? "gelu" : "gelu_new") : "relu");
        NUM("pad_token_id", c->pad_id);
        NUM("hidden_dropout_prob", c->dropout);
        NUM("attention_probs_dropout_prob", c->attn_dropout);
        STR("position_embedding_type", "absolute");
    } else {
        STR("model_type", "gpt2");
        NUM("n_embd", c->d_model);
        NUM("n_head", c->heads);
        NUM("n_layer", c->dec_layers);
        NUM("n_positions", c->max_len);
        NUM("n_inner", c->d_ff);
        NUM("vocab_size", c->tgt_vocab);
        NUM("layer_norm_epsilon", eps);
        STR("activation_function", c->gelu_erf ? "gelu" : "gelu_new");
        NUM("resid_pdrop", c->dropout);
        NUM("embd_pdrop", c->dropout);
        NUM("attn_pdrop", c->attn_dropout);
        int32_t eos = m->tok ? tg_tokenizer_special(m->tok, "eos") : -1;
        if (eos >= 0) NUM("bos_token_id", eos);
        if (eos >= 0) NUM("eos_token_id", eos);
    }
#undef NUM
#undef STR
    if (st == TG_OK) st = tg_json_print(o, 2, out, NULL);
    tg_json_free(o);
    return st;
}

/* sentence-transformers' modules.json and 1_Pooling/config.json: the model's pooling and
 * Normalize, which tg_hf_import reads back */
static tg_status st_files(const char *dir, const tg_model_config *c) {
    char text[1024], sub[1100];
    snprintf(text, sizeof text,
             "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},\n"
             " {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}%s]\n",
             c->normalize ? ",\n {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Normalize\", \"type\": "
                            "\"sentence_transformers.models.Normalize\"}" : "");
    tg_status st = write_text(dir, "modules.json", text);
    snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
    if (st == TG_OK && mkdir(sub, 0777) && errno != EEXIST) st = tg_error_set(TG_ERR_IO, "'%s': %s", sub, strerror(errno));
    snprintf(text, sizeof text,
             "{\"word_embedding_dimension\": %lld, \"pooling_mode_cls_token\": %s, \"pooling_mode_mean_tokens\": %s, "
             "\"pooling_mode_max_tokens\": %s, \"pooling_mode_mean_sqrt_len_tokens\": false}\n",
             (long long)c->d_model, c->pool == TG_POOL_CLS ? "true" : "false", c->pool == TG_POOL_MEAN ? "true" : "false",
             c->pool == TG_POOL_MAX ? "true" : "false");
    if (st == TG_OK) st = write_text(sub, "config.json", text);
    return st;
}

tg_status tg_hf_export(const tg_model *m, const char *dir) {
    if (!m || !dir) return tg_error_set(TG_ERR_INVALID, "tg_hf_export: NULL argument");
    const tg_model_config *c = &m->cfg;
    bool plain = c->attention == TG_ATTN_MHA && c->learned_pos && !c->rms_norm && !c->swiglu && !c->rope && c->window == 0 &&
                 c->classes == 0 && c->share_embeddings;
    tg_hf_family fam;
    if (plain && c->arch == TG_ARCH_MLM && !c->pre_norm && c->type_vocab > 0 && c->embed_norm && c->gelu) fam = TG_HF_BERT;
    else if (plain && c->arch == TG_ARCH_LM && c->pre_norm && c->gelu && c->type_vocab == 0 && !c->embed_norm) fam = TG_HF_GPT2;
    else
        return tg_error_set(TG_ERR_UNSUPPORTED, "tg_hf_export: the model is neither in BERT's layout (arch mlm, post-LN, learned "
                            "positions, token types, embedding LayerNorm, GELU, MHA) nor in GPT-2's (arch lm, pre-LN, learned "
                            "positions, GELU, MHA)");
    if (mkdir(dir, 0777) && errno != EEXIST) return tg_error_set(TG_ERR_IO, "'%s': %s", dir, strerror(errno));
    const char *prefix = fam == TG_HF_GPT2 ? "transformer." : c->mlm_head ? "bert." : "";
    int64_t np = tg_store_count(m->store);
    out_tensor *t = calloc((size_t)np, sizeof *t);
    int64_t nt = 0;
    float *buf = NULL;
    tg_status st = t ? TG_OK : tg_error_set(TG_ERR_NOMEM, "export: out of memory");
    for (int64_t i = 0; st == TG_OK && i < np; i++) {
        int64_t shape[TG_MAX_DIMS], n = tg_store_numel(m->store, i);
        int nd = tg_store_shape(m->store, i, shape);
        tg_hf_src s;
        if (!tg__hf_source(fam, prefix, tg_store_name(m->store, i), nd, shape, &s)) {
            st = tg_error_set(TG_ERR_UNSUPPORTED, "tg_hf_export: parameter '%s' has no Hugging Face counterpart",
                              tg_store_name(m->store, i));
            break;
        }
        out_tensor *o = NULL;
        for (int64_t k = 0; k < nt && !o; k++)
            if (!strcmp(t[k].name, s.name)) o = &t[k];
        if (!o) {
            o = &t[nt++];
            snprintf(o->name, sizeof o->name, "%s", s.name);
            o->ndim = s.ndim;
            o->shape[0] = s.shape[0];
            o->shape[1] = s.ndim == 2 ? s.shape[1] : 1;
            if (!(o->x = calloc((size_t)(o->shape[0] * o->shape[1]), sizeof *o->x))) {
                st = tg_error_set(TG_ERR_NOMEM, "export: out of memory");
                break;
            }
        }
        float *p = realloc(buf, (size_t)n * sizeof *p);
        if (!p) {
            st = tg_error_set(TG_ERR_NOMEM, "export: out of memory");
            break;
        }
        buf = p;
        st = tg_store_read(m->store, i, buf, n);
        if (st) break;
        if (!s.transpose) memcpy(o->x, buf, (size_t)n * sizeof *buf);
        else if (nd == 1) memcpy(o->x + s.col0, buf, (size_t)n * sizeof *buf);
        else
            for (int64_t r = 0; r < shape[0]; r++)
                for (int64_t q = 0; q < shape[1]; q++) o->x[q * o->shape[1] + s.col0 + r] = buf[r * shape[1] + q];
    }
    free(buf);
    tg_st_writer *w = st == TG_OK ? tg_st_writer_new() : NULL;
    if (st == TG_OK && !w) st = tg_error_set(TG_ERR_NOMEM, "export: out of memory");
    if (st == TG_OK) st = tg_st_writer_set_metadata(w, "format", "pt");
    for (int64_t k = 0; st == TG_OK && k < nt; k++) st = tg_st_writer_add(w, t[k].name, TG_ST_F32, t[k].ndim, t[k].shape, t[k].x);
    char *cfg = NULL, *tok = NULL, path[1100];
    if (st == TG_OK) st = config_json(m, fam, c->mlm_head, &cfg);
    if (st == TG_OK && m->tok) st = tg__tokenizer_hf_json(m->tok, &tok);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (st == TG_OK) st = tg_st_writer_save(w, path);
    if (st == TG_OK) st = write_text(dir, "config.json", cfg);
    if (st == TG_OK && tok) st = write_text(dir, "tokenizer.json", tok);
    if (st == TG_OK && fam == TG_HF_BERT && (c->normalize || c->pool != TG_POOL_MEAN)) st = st_files(dir, c);
    tg_st_writer_free(w);
    for (int64_t k = 0; k < nt; k++) free(t[k].x);
    free(t);
    free(cfg);
    free(tok);
    return st;
}
