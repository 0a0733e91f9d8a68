/* `tg inspect`: what a checkpoint holds: its configuration (docs/model.md §4 metadata), vocabulary
 * sizes, and parameter counts per module (embeddings, each encoder and decoder layer split into
 * attention / feed-forward / norms) and per kind (self- and cross-attention of the configured
 * variant, feed-forward, norms, embeddings). The checkpoint is loaded as `tg score` would load
 * it, so a checkpoint that inspects cleanly also loads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tg/model.h"
#include "tg/safetensors.h"
#include "tg/tokenizer.h"
#include "tools/cli.h"
#include "tools/commands.h"

enum { K_SELF, K_CROSS, K_FFN, K_NORM, K_COUNT };
static const char *const kind_label[K_COUNT] = {"self_attn", "cross_attn", "ffn", "norms"};

static void group(char *buf, size_t n, int64_t x) { /* 1234567 -> "1,234,567" */
    char raw[32];
    int len = snprintf(raw, sizeof raw, "%lld", (long long)x), o = 0;
    for (int i = 0; i < len && o + 2 < (int)n; i++) {
        if (i > 0 && raw[i - 1] != '-' && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
}

static void row(int indent, const char *label, int64_t count) {
    char c[32];
    group(c, sizeof c, count);
    printf("%*s%-*s %14s\n", indent, "", 40 - indent, label, c);
}

/* Any safetensors file that is not a tgraph checkpoint (a Hugging Face model.safetensors, say):
 * its metadata keys and every tensor's name, dtype and shape, and the parameter count. */
static int inspect_tensors(const char *cmd, const tg_st_file *f) {
    const char *path = tg_st_path(f);
    struct stat sb;
    const char *fmt = tg_st_metadata(f, "format");
    printf("file: %s (%lld bytes), safetensors, format %s (not a tgraph checkpoint)\n", path,
           stat(path, &sb) == 0 ? (long long)sb.st_size : -1LL, fmt ? fmt : "(absent)");
    for (size_t i = 0; i < tg_st_metadata_count(f); i++)
        if (strcmp(tg_st_metadata_key(f, i), "format"))
            printf("metadata: %s (%zu bytes)\n", tg_st_metadata_key(f, i), strlen(tg_st_metadata_value(f, i)));
    printf("tensors:\n");
    int64_t total = 0;
    for (size_t i = 0; i < tg_st_count(f); i++) {
        char sh[96];
        int64_t n = (int64_t)tg_st_tensor_numel(f, i);
        printf("  %-52s %-5s %-16s %12lld\n", tg_st_name(f, i), tg_st_dtype_name(tg_st_tensor_dtype(f, i)),
               tg_shape_str(sh, sizeof sh, tg_st_tensor_ndim(f, i), tg_st_tensor_shape(f, i)), (long long)n);
        total += n;
    }
    char c[32];
    group(c, sizeof c, total);
    printf("total: %zu tensors, %s parameters\n", tg_st_count(f), c);
    (void)cmd;
    return TG_EXIT_OK;
}

int tg_cmd_inspect(int argc, char **argv) {
    const char *cmd = "inspect", *path = NULL;
    bool tensors = false;
    tg_opt opts[] = {
        {"model", TG_OPT_STRING, &path, 0, 0, NULL, "M", "checkpoint (.safetensors) (required)", 0, 0},
        {"tensors", TG_OPT_BOOL, &tensors, 0, 0, NULL, NULL, "also list every tensor with its shape", 0, 0},
        {0},
    };
    tg_cli_set_usage("--model M [--tensors]", "Print the configuration and parameter counts of a checkpoint; of any other "
                     "safetensors file, its tensors (names, dtypes, shapes) and parameter count.");
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!path) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--model is required");
    tg_st_file *sf = NULL; /* a safetensors file of another program: its tensors */
    if (tg_st_open(path, &sf) != TG_OK) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    const char *fmt = tg_st_metadata(sf, "format");
    if (!fmt || strcmp(fmt, "tgraph")) {
        rc = inspect_tensors(cmd, sf);
        tg_st_close(sf);
        return rc;
    }
    tg_st_close(sf);
    tg_backend *be = NULL;
    tg_model *m = NULL;
    tg_status st = tg_backend_cpu_new(1, &be);
    if (st == TG_OK) st = tg_model_load(path, be, &m);
    if (st) {
        tg_backend_free(be);
        return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    }
    const tg_model_config *c = tg_model_cfg(m);
    tg_store *s = tg_model_store(m);
    struct stat sb;
    printf("model: %s (%lld bytes)\n", path, stat(path, &sb) == 0 ? (long long)sb.st_size : -1LL);
    printf("family: %s\n", c->arch == TG_ARCH_LM    ? "lm (decoder-only language model)"
                            : c->arch == TG_ARCH_MLM ? "mlm (encoder-only masked language model)"
                                                     : "encdec (encoder-decoder)");
    printf("configuration:\n");
    printf("  d_model %lld, heads %lld (head dim %lld), d_ff %lld\n", (long long)c->d_model, (long long)c->heads,
           (long long)tg_model_head_dim(c), (long long)c->d_ff);
    printf("  encoder layers %lld, decoder layers %lld\n", (long long)c->enc_layers, (long long)c->dec_layers);
    printf("  attention %s%s", tg_attn_kind_name(c->attention),
           c->attention == TG_ATTN_INTERACTING ? (c->interacting_literal ? " (literal all-pairs form)"
                                                                         : " (summed-query form)")
                                               : "");
    if (c->no_out_proj) printf(", no output projection");
    if (c->interacting_sqrt_h) printf(", logits over sqrt(heads)");
    if (c->window > 0) printf(", restricted to a window of %lld", (long long)c->window);
    printf("\n");
    printf("  norm %s (%s), pos %s, activation %s\n", c->pre_norm ? "pre" : "post", c->rms_norm ? "rms" : "layer",
           c->rope ? "rope" : c->learned_pos ? "learned" : "sinusoidal", c->swiglu ? "swiglu" : c->gelu ? "gelu" : "relu");
    printf("  dropout %g, attn_dropout %g, ffn_dropout %g, label_smoothing %g\n", (double)c->dropout,
           (double)c->attn_dropout, (double)c->ffn_dropout, (double)c->label_smoothing);
    printf("  max_len %lld, share_embeddings %s, tie_output %s\n", (long long)c->max_len,
           c->share_embeddings ? "yes" : "no", c->tie_output ? "yes" : "no");
    if (c->arch == TG_ARCH_ENCDEC)
        printf("vocabularies: source %lld, target %lld%s\n", (long long)c->src_vocab, (long long)c->tgt_vocab,
               c->share_embeddings ? " (one shared table)" : "");
    else /* one text, one vocabulary */
        printf("vocabulary: %lld tokens (one table, tied to the output)\n", (long long)c->tgt_vocab);
    const tg_tokenizer *tok = tg_model_tokenizer(m);
    if (tok)
        printf("tokenizer: %s (stored; every command reads text with it)\n", tg_tokenizer_kind_name(tg_tokenizer_kind(tok)));
    else
        printf("tokenizer: none stored (trained before tokenizers travelled: whitespace words, or --chars)\n");

    int64_t ne = c->enc_layers, nd = c->dec_layers;
    int64_t *enc = calloc((size_t)(ne + 1) * K_COUNT, sizeof *enc), *dec = calloc((size_t)(nd + 1) * K_COUNT, sizeof *dec);
    int64_t embed = 0, final_norm = 0, other = 0, total = 0;
    if (!enc || !dec) {
        free(enc);
        free(dec);
        tg_model_free(m);
        tg_backend_free(be);
        return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "out of memory");
    }
    if (tensors) printf("tensors:\n");
    for (int64_t i = 0; i < tg_store_count(s); i++) {
        const char *name = tg_store_name(s, i);
        int64_t n = tg_store_numel(s, i), shape[TG_MAX_DIMS];
        int nds = tg_store_shape(s, i, shape);
        total += n;
        if (tensors) {
            char sh[96];
            printf("  %-52s %-14s %12lld\n", name, tg_shape_str(sh, sizeof sh, nds, shape), (long long)n);
        }
        long long L;
        char sub[64];
        int64_t *layers = NULL, nl = 0;
        if (sscanf(name, "encoder.layers.%lld.%63[a-z_0-9]", &L, sub) == 2) layers = enc, nl = ne;
        else if (sscanf(name, "decoder.layers.%lld.%63[a-z_0-9]", &L, sub) == 2) layers = dec, nl = nd;
        if (layers && L >= 0 && L < nl) {
            int k = !strcmp(sub, "self_attn") ? K_SELF : !strcmp(sub, "cross_attn") ? K_CROSS
                                                   : !strcmp(sub, "ffn")        ? K_FFN
                                                                                : K_NORM;
            layers[L * K_COUNT + k] += n;
        } else if (strstr(name, "embed") == name || strstr(name, "src_embed") == name ||
                   strstr(name, "tgt_embed") == name || strstr(name, "pos_embed") == name ||
                   strstr(name, "out_proj") == name) {
            embed += n;
        } else if (!strncmp(name, "encoder.norm", 12) || !strncmp(name, "decoder.norm", 12)) {
            final_norm += n;
        } else {
            other += n;
        }
    }
    printf("parameters:%*s\n", 45, "count");
    row(2, "embeddings and output", embed);
    int64_t by_kind[2][K_COUNT] = {{0}};
    char label[96];
    for (int side = 0; side < 2; side++) {
        int64_t *layers = side ? dec : enc, nl = side ? nd : ne;
        for (int64_t l = 0; l < nl; l++) {
            int64_t sum = 0;
            for (int k = 0; k < K_COUNT; k++) sum += layers[l * K_COUNT + k];
            snprintf(label, sizeof label, "%s layer %lld", side ? "decoder" : "encoder", (long long)l);
            row(2, label, sum);
            for (int k = 0; k < K_COUNT; k++) {
                if ((side == 0 || c->arch != TG_ARCH_ENCDEC) && k == K_CROSS) continue; /* none there */
                if (k == K_SELF || k == K_CROSS)
                    snprintf(label, sizeof label, "%s (%s)", kind_label[k], tg_attn_kind_name(c->attention));
                else snprintf(label, sizeof label, "%s", kind_label[k]);
                row(4, label, layers[l * K_COUNT + k]);
                by_kind[side][k] += layers[l * K_COUNT + k];
            }
        }
    }
    if (final_norm) row(2, "final norms (pre-LN)", final_norm);
    if (other) row(2, "other", other);
    printf("by kind:\n");
    /* the stacks the family has: a language model no encoder, a masked one no decoder, neither
     * any cross-attention */
    snprintf(label, sizeof label, "encoder self-attention (%s)", tg_attn_kind_name(c->attention));
    if (c->arch != TG_ARCH_LM) row(2, label, by_kind[0][K_SELF]);
    snprintf(label, sizeof label, "decoder self-attention (%s)", tg_attn_kind_name(c->attention));
    if (c->arch != TG_ARCH_MLM) row(2, label, by_kind[1][K_SELF]);
    snprintf(label, sizeof label, "cross-attention (%s)", tg_attn_kind_name(c->attention));
    if (c->arch == TG_ARCH_ENCDEC) row(2, label, by_kind[1][K_CROSS]);
    row(2, "feed-forward", by_kind[0][K_FFN] + by_kind[1][K_FFN]);
    row(2, "layer norms", by_kind[0][K_NORM] + by_kind[1][K_NORM] + final_norm);
    row(2, "embeddings and output", embed);
    snprintf(label, sizeof label, "total (%lld tensors)", (long long)tg_store_count(s));
    row(0, label, total);
    free(enc);
    free(dec);
    tg_model_free(m);
    tg_backend_free(be);
    return TG_EXIT_OK;
}
