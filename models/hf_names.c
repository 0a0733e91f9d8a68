/* The parameter names of BERT and GPT-2 in Hugging Face's files against the zoo's (docs/model.md
 * §4 and "Imported models"), one table per family: a zoo name's pattern, the Hugging Face name
 * it comes from, and how the tensor is laid out there. */
#include <stdio.h>
#include <string.h>

#include "models/hf-impl.h"

typedef struct {
    const char *ours, *theirs; /* "%s" in ours: the rest of a layer's name after the layer index */
} pair;

/* BERT: layer L's sub-layers under encoder.layer.L */
static const pair bert_layer[] = {
    {"self_attn.q_proj", "attention.self.query"},   {"self_attn.k_proj", "attention.self.key"},
    {"self_attn.v_proj", "attention.self.value"},   {"self_attn.out_proj", "attention.output.dense"},
    {"norm1", "attention.output.LayerNorm"},        {"ffn.fc1", "intermediate.dense"},
    {"ffn.fc2", "output.dense"},                    {"norm2", "output.LayerNorm"},
};
static const pair bert_top[] = {
    {"embed.weight", "embeddings.word_embeddings.weight"},
    {"pos_embed.weight", "embeddings.position_embeddings.weight"},
    {"type_embed.weight", "embeddings.token_type_embeddings.weight"},
    {"embed_norm.weight", "embeddings.LayerNorm.weight"},
    {"embed_norm.bias", "embeddings.LayerNorm.bias"},
};
static const pair bert_head[] = { /* BertForMaskedLM's head: no "bert." prefix */
    {"mlm_head.dense.weight", "cls.predictions.transform.dense.weight"},
    {"mlm_head.dense.bias", "cls.predictions.transform.dense.bias"},
    {"mlm_head.norm.weight", "cls.predictions.transform.LayerNorm.weight"},
    {"mlm_head.norm.bias", "cls.predictions.transform.LayerNorm.bias"},
    {"mlm_head.bias", "cls.predictions.bias"},
};
/* GPT-2: layer L under h.L; Conv1D weights are [in, out] */
static const pair gpt2_layer[] = {
    {"norm1", "ln_1"}, {"norm2", "ln_2"}, {"self_attn.out_proj", "attn.c_proj"},
    {"ffn.fc1", "mlp.c_fc"}, {"ffn.fc2", "mlp.c_proj"},
};
static const pair gpt2_top[] = {
    {"embed.weight", "wte.weight"}, {"pos_embed.weight", "wpe.weight"},
    {"decoder.norm.weight", "ln_f.weight"}, {"decoder.norm.bias", "ln_f.bias"},
};

static void shape_of(tg_hf_src *s, int ndim, const int64_t *shape) {
    s->ndim = ndim;
    for (int d = 0; d < ndim && d < 2; d++) s->shape[d] = shape[d];
}

/* a LayerNorm's old spelling: .weight -> .gamma, .bias -> .beta */
static void alt_norm(tg_hf_src *s) {
    size_t n = strlen(s->name);
    if (!strstr(s->name, "LayerNorm.")) return;
    if (n > 7 && !strcmp(s->name + n - 7, ".weight")) snprintf(s->alt, sizeof s->alt, "%.*s.gamma", (int)(n - 7), s->name);
    if (n > 5 && !strcmp(s->name + n - 5, ".bias")) snprintf(s->alt, sizeof s->alt, "%.*s.beta", (int)(n - 5), s->name);
}

static bool bert(const char *prefix, const char *name, int ndim, const int64_t *shape, tg_hf_src *s) {
    for (size_t i = 0; i < sizeof bert_top / sizeof *bert_top; i++)
        if (!strcmp(name, bert_top[i].ours)) {
            snprintf(s->name, sizeof s->name, "%s%s", prefix, bert_top[i].theirs);
            shape_of(s, ndim, shape);
            alt_norm(s);
            return true;
        }
    for (size_t i = 0; i < sizeof bert_head / sizeof *bert_head; i++)
        if (!strcmp(name, bert_head[i].ours)) {
            snprintf(s->name, sizeof s->name, "%s", bert_head[i].theirs);
            if (!strcmp(name, "mlm_head.bias")) snprintf(s->alt, sizeof s->alt, "cls.predictions.decoder.bias");
            shape_of(s, ndim, shape);
            alt_norm(s);
            return true;
        }
    long long L;
    char rest[160];
    if (sscanf(name, "encoder.layers.%lld.%159s", &L, rest) != 2) return false;
    for (size_t i = 0; i < sizeof bert_layer / sizeof *bert_layer; i++) {
        size_t n = strlen(bert_layer[i].ours);
        if (!strncmp(rest, bert_layer[i].ours, n) && rest[n] == '.') {
            snprintf(s->name, sizeof s->name, "%sencoder.layer.%lld.%s%s", prefix, L, bert_layer[i].theirs, rest + n);
            shape_of(s, ndim, shape);
            alt_norm(s);
            return true;
        }
    }
    return false;
}

static bool gpt2(const char *prefix, const char *name, int ndim, const int64_t *shape, tg_hf_src *s) {
    for (size_t i = 0; i < sizeof gpt2_top / sizeof *gpt2_top; i++)
        if (!strcmp(name, gpt2_top[i].ours)) {
            snprintf(s->name, sizeof s->name, "%s%s", prefix, gpt2_top[i].theirs);
            shape_of(s, ndim, shape);
            return true;
        }
    long long L;
    char rest[160];
    if (sscanf(name, "decoder.layers.%lld.%159s", &L, rest) != 2) return false;
    static const char *const qkv[3] = {"self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj."};
    for (int k = 0; k < 3; k++)
        if (!strncmp(rest, qkv[k], strlen(qkv[k]))) { /* a block of c_attn: [d, 3d] / [3d] */
            bool w = ndim == 2;
            snprintf(s->name, sizeof s->name, "%sh.%lld.attn.c_attn.%s", prefix, L, w ? "weight" : "bias");
            s->ndim = ndim;
            s->shape[0] = w ? shape[1] : 3 * shape[0];
            s->shape[1] = w ? 3 * shape[0] : 0;
            s->transpose = true;
            s->col0 = k * shape[0];
            return true;
        }
    for (size_t i = 0; i < sizeof gpt2_layer / sizeof *gpt2_layer; i++) {
        size_t n = strlen(gpt2_layer[i].ours);
        if (!strncmp(rest, gpt2_layer[i].ours, n) && rest[n] == '.') {
            snprintf(s->name, sizeof s->name, "%sh.%lld.%s%s", prefix, L, gpt2_layer[i].theirs, rest + n);
            shape_of(s, ndim, shape);
            if (ndim == 2 && strncmp(rest, "norm", 4)) { /* Conv1D: [in, out] */
                s->shape[0] = shape[1];
                s->shape[1] = shape[0];
                s->transpose = true;
            }
            return true;
        }
    }
    return false;
}

bool tg__hf_source(tg_hf_family fam, const char *prefix, const char *name, int ndim, const int64_t *shape,
                   tg_hf_src *out) {
    memset(out, 0, sizeof *out);
    return fam == TG_HF_BERT ? bert(prefix, name, ndim, shape, out) : gpt2(prefix, name, ndim, shape, out);
}

const char *tg__hf_prefix(tg_hf_family fam, const tg_st_file *f) {
    size_t k;
    const char *with = fam == TG_HF_BERT ? "bert.embeddings.word_embeddings.weight" : "transformer.wte.weight";
    bool yes = tg_st_find(f, with, &k) == TG_OK;
    tg_error_clear();
    return yes ? (fam == TG_HF_BERT ? "bert." : "transformer.") : "";
}
