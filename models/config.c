/* Model configuration: defaults (the paper's base model), validation, names. */
#include <math.h>
#include <string.h>

#include "models/model-impl.h"

/* names and lists of the attention kinds, from the one table in tg/model.h */
#define KIND_NAME(e, s) s,
#define KIND_BAR(e, s) "|" s
#define KIND_COMMA(e, s) ", " s
static const char *const kind_names[] = {TG_ATTN_KINDS(KIND_NAME)};
_Static_assert(sizeof kind_names / sizeof *kind_names == TG_ATTN_COUNT, "one name per attention kind");
static const char kind_bars[] = TG_ATTN_KINDS(KIND_BAR);     /* "|mha|fixed_head|..." */
static const char kind_commas[] = TG_ATTN_KINDS(KIND_COMMA); /* ", mha, fixed_head, ..." */

const char *tg_attn_kind_choices(void) { return kind_bars + 1; }

tg_model_config tg_model_config_default(void) {
    tg_model_config c = {0};
    c.d_model = 512;
    c.heads = 8;
    c.enc_layers = 6;
    c.dec_layers = 6;
    c.d_ff = 2048;
    c.attention = TG_ATTN_MHA;
    c.tie_output = true;
    c.max_len = 256;
    c.dropout = 0.1f;
    c.attn_dropout = 0.1f;
    c.ffn_dropout = 0.0f;
    c.label_smoothing = 0.1f;
    return c;
}

tg_model_config tg_model_config_lm_default(void) {
    tg_model_config c = tg_model_config_default();
    c.arch = TG_ARCH_LM;
    c.enc_layers = 0;
    c.pre_norm = true;
    c.learned_pos = true;
    c.gelu = true;
    c.share_embeddings = true;
    c.label_smoothing = 0.0f;
    return c;
}

tg_model_config tg_model_config_mlm_default(void) {
    tg_model_config c = tg_model_config_default();
    c.arch = TG_ARCH_MLM;
    c.dec_layers = 0;
    c.learned_pos = true;
    c.gelu = true;
    c.share_embeddings = true;
    c.label_smoothing = 0.0f;
    return c;
}

const char *tg_model_arch_name(tg_model_arch a) {
    return a == TG_ARCH_LM ? "lm" : a == TG_ARCH_MLM ? "mlm" : a == TG_ARCH_ENCDEC ? "encdec" : "unknown";
}

tg_status tg_model_arch_parse(const char *name, tg_model_arch *out) {
    if (name && !strcmp(name, "encdec")) *out = TG_ARCH_ENCDEC;
    else if (name && !strcmp(name, "lm")) *out = TG_ARCH_LM;
    else if (name && !strcmp(name, "mlm")) *out = TG_ARCH_MLM;
    else return tg_error_set(TG_ERR_INVALID, "unknown model family '%s' (encdec, lm, mlm)", name ? name : "(null)");
    return TG_OK;
}

const char *tg_attn_kind_name(tg_attn_kind k) {
    const tg_attn_kind_def *def = tg_attn_kind_def_get(k);
    if (def) return def->name;
    return ((int)k >= 0 && k < TG_ATTN_COUNT) ? kind_names[k] : "unknown";
}

/* the built-in kinds, then the ones the program registered (tg/attn_kinds.h) */
tg_status tg_attn_kind_parse(const char *name, tg_attn_kind *out) {
    for (int k = 0; name && k < TG_ATTN_COUNT; k++)
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (tg_attn_kind)k;
            return TG_OK;
        }
    const tg_attn_kind_def *def;
    for (int k = TG_ATTN_COUNT; name && (def = tg_attn_kind_def_get((tg_attn_kind)k)); k++)
        if (strcmp(name, def->name) == 0) {
            *out = (tg_attn_kind)k;
            return TG_OK;
        }
    return tg_error_set(TG_ERR_INVALID, "unknown attention kind '%s' (%s, or one the program registers with "
                        "tg_attn_kind_register)", name ? name : "(null)", kind_commas + 2);
}

int64_t tg_model_head_dim(const tg_model_config *c) {
    if (c->attention == TG_ATTN_FIXED_HEAD && c->head_dim > 0) return c->head_dim;
    return c->heads > 0 ? c->d_model / c->heads : 0;
}

int64_t tg_model_max_heads(int64_t d_model, double mean_len) {
    if (!(mean_len > 0.0) || d_model <= 0) return 0;
    return (int64_t)floor((double)d_model / mean_len);
}

#define RANGE(cond, ...)                                                 \
    if (!(cond)) return tg_error_set(TG_ERR_INVALID, "model config: " __VA_ARGS__)

tg_status tg_model_config_check(const tg_model_config *c) {
    if (!c) return tg_error_set(TG_ERR_INVALID, "model config: NULL");
    RANGE(c->arch >= TG_ARCH_ENCDEC && c->arch <= TG_ARCH_MLM, "unknown model family %d", (int)c->arch);
    RANGE(c->arch != TG_ARCH_MLM || (c->dec_layers == 0 && c->enc_layers >= 1),
          "a masked language model (arch mlm) is an encoder: enc_layers %lld must be >= 1 and dec_layers %lld 0",
          (long long)c->enc_layers, (long long)c->dec_layers);
    RANGE(c->arch != TG_ARCH_MLM || c->share_embeddings,
          "a masked language model (arch mlm) has one vocabulary and a tied output: share_embeddings must be set");
    RANGE(c->arch != TG_ARCH_LM || c->enc_layers == 0, "a language model (arch lm) has no encoder: enc_layers %lld",
          (long long)c->enc_layers);
    RANGE(c->arch != TG_ARCH_LM || c->share_embeddings,
          "a language model (arch lm) has one vocabulary and a tied output: share_embeddings must be set");
    RANGE(c->d_model >= 1 && c->d_model <= 65536, "d_model %lld outside [1, 65536]", (long long)c->d_model);
    RANGE(c->heads >= 1 && c->heads <= 1024, "heads %lld outside [1, 1024]", (long long)c->heads);
    RANGE(c->enc_layers >= 0 && c->enc_layers <= 256, "enc_layers %lld outside [0, 256]", (long long)c->enc_layers);
    RANGE(c->dec_layers >= (c->arch == TG_ARCH_MLM ? 0 : 1) && c->dec_layers <= 256, "dec_layers %lld outside [%d, 256]",
          (long long)c->dec_layers, c->arch == TG_ARCH_MLM ? 0 : 1);
    RANGE(c->d_ff >= 1 && c->d_ff <= 1 << 20, "d_ff %lld outside [1, 1048576]", (long long)c->d_ff);
    const tg_attn_kind_def *def = tg_attn_kind_def_get(c->attention);
    RANGE(((int)c->attention >= 0 && c->attention < TG_ATTN_COUNT) || def,
          "unknown attention kind %d", (int)c->attention);
    /* a registered kind computes what its forward says: the built-in kinds' options are not its */
    RANGE(!def || (!c->rope && c->window == 0 && !c->interacting_literal),
          "pos rope, a window and interacting_literal apply to the built-in attention kinds, not '%s'",
          def ? def->name : "");
    if (c->attention == TG_ATTN_FIXED_HEAD) {
        RANGE(c->head_dim >= 0 && c->head_dim <= 65536, "head_dim %lld outside [0, 65536]", (long long)c->head_dim);
    } else {
        RANGE(c->d_model % c->heads == 0, "d_model %lld is not a multiple of heads %lld (%s)",
              (long long)c->d_model, (long long)c->heads, tg_attn_kind_name(c->attention));
    }
    RANGE(!c->no_out_proj || c->attention == TG_ATTN_INTERACTING,
          "no_out_proj applies to the interacting kind only (not %s)", tg_attn_kind_name(c->attention));
    RANGE(!c->interacting_sqrt_h || c->attention == TG_ATTN_INTERACTING,
          "interacting_sqrt_h applies to the interacting kind only (not %s)",
          tg_attn_kind_name(c->attention));
    RANGE(!c->rope || !c->learned_pos, "pos is rope or learned, not both");
    RANGE(c->classes >= 0 && c->classes <= 1 << 20, "classes %lld outside [0, 1048576]", (long long)c->classes);
    RANGE(c->classes == 0 || c->arch == TG_ARCH_MLM, "a classification head (classes %lld) needs arch mlm",
          (long long)c->classes);
    RANGE(c->window >= 0 && c->window <= 1 << 20, "window %lld outside [0, 1048576]", (long long)c->window);
    RANGE(!c->rope || tg_model_head_dim(c) % 2 == 0, "rope rotates pairs of channels: head dim %lld is odd",
          (long long)tg_model_head_dim(c));
    RANGE(c->type_vocab >= 0 && c->type_vocab <= 1 << 20, "type_vocab %lld outside [0, 1048576]",
          (long long)c->type_vocab);
    RANGE(!c->mlm_head || c->arch == TG_ARCH_MLM, "mlm_head needs arch mlm");
    RANGE(c->norm_eps >= 0.0f && c->norm_eps < 1.0f, "norm_eps %g outside [0, 1)", (double)c->norm_eps);
    RANGE(c->embed_scale >= 0.0f && c->embed_scale < 1e6f, "embed_scale %g outside [0, 1e6)", (double)c->embed_scale);
    RANGE(c->pad_id >= -1 && c->pad_id < c->tgt_vocab, "pad_id %d outside [-1, %lld)", (int)c->pad_id,
          (long long)c->tgt_vocab);
    RANGE(c->max_len >= 2 && c->max_len <= 1 << 20, "max_len %lld outside [2, 1048576]", (long long)c->max_len);
    RANGE(c->dropout >= 0.0f && c->dropout < 1.0f, "dropout %g outside [0, 1)", (double)c->dropout);
    RANGE(c->attn_dropout >= 0.0f && c->attn_dropout < 1.0f, "attn_dropout %g outside [0, 1)", (double)c->attn_dropout);
    RANGE(c->ffn_dropout >= 0.0f && c->ffn_dropout < 1.0f, "ffn_dropout %g outside [0, 1)", (double)c->ffn_dropout);
    RANGE(c->label_smoothing >= 0.0f && c->label_smoothing < 1.0f, "label_smoothing %g outside [0, 1)",
          (double)c->label_smoothing);
    if (def && def->check) { /* the registered kind's own judgement of the dims */
        tg_attn_dims dims = tg__attn_dims(c);
        tg_status st = def->check(&dims, def->user);
        if (st) return tg_error_prefix(st, "model config: attention kind '%s' does not fit d_model %lld, heads %lld",
                                       def->name, (long long)c->d_model, (long long)c->heads);
    }
    RANGE(c->src_vocab >= 5 && c->tgt_vocab >= 5, "vocabularies need at least one token besides the 4 specials");
    RANGE(!c->share_embeddings || c->src_vocab == c->tgt_vocab,
          "share_embeddings needs one joint vocabulary (sizes %lld and %lld)", (long long)c->src_vocab,
          (long long)c->tgt_vocab);
    return TG_OK;
}

const char *tg__model_src_embed_name(const tg_model_config *c) {
    return c->share_embeddings ? "embed.weight" : "src_embed.weight";
}
const char *tg__model_tgt_embed_name(const tg_model_config *c) {
    return c->share_embeddings ? "embed.weight" : "tgt_embed.weight";
}
const char *tg__model_out_proj_name(const tg_model_config *c) {
    return (c->share_embeddings || c->tie_output) ? tg__model_tgt_embed_name(c) : "out_proj.weight";
}
