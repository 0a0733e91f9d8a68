/* `tg embed`: one vector per input line from an encoder (arch mlm): the model's tokenizer, the
 * encoder, then pooling and normalisation as the model's configuration says (an imported
 * sentence-transformers model: its Pooling and Normalize modules), --pool and --normalize
 * overriding. Lines are batched by length (fewer padded positions), printed in input order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tokenizer.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/model_text.h"

typedef struct {
    int32_t *ids;
    int64_t n, line;
} seq;

static int by_len(const void *a, const void *b) {
    const seq *x = a, *y = b;
    return x->n != y->n ? (x->n < y->n ? -1 : 1) : (x->line < y->line ? -1 : 1);
}

int tg_cmd_embed(int argc, char **argv) {
    const char *cmd = "embed", *model = NULL, *text = NULL, *pool = NULL, *norm = NULL, *output = NULL;
    int64_t threads = 0, batch = 32;
    tg_opt opts[] = {
        {"model", TG_OPT_STRING, &model, 0, 0, NULL, "M", "an encoder checkpoint (arch mlm) (required)", 0, 0},
        {"text", TG_OPT_STRING, &text, 0, 0, NULL, "FILE", "one input per line (required)", 0, 0},
        {"pool", TG_OPT_CHOICE, &pool, 0, 0, "mean|cls|max", "P", "pooling (default: the model's, else mean)", 0, 0},
        {"normalize", TG_OPT_CHOICE, &norm, 0, 0, "on|off", "X", "unit length (default: the model's)", 0, 0},
        {"batch", TG_OPT_INT, &batch, 1, 4096, NULL, "N", "lines per batch", 0, 0},
        {"threads", TG_OPT_INT, &threads, 0, 4096, NULL, "N", "CPU threads (0: TG_NUM_THREADS or all cores)", 0, 0},
        {"output", TG_OPT_STRING, &output, 0, 0, NULL, "FILE", "write here (whole or not at all) instead of stdout", 0, 0},
        {0},
    };
    tg_cli_set_usage("--model M --text FILE [--pool mean|cls|max] [--normalize on|off] [--batch N] [--threads N] [--output FILE]",
                     "Print one embedding per input line (floats, space-separated).");
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!model || !text) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--model and --text are required");
    tg_backend *be = NULL;
    tg_model *m = NULL;
    tg_status st = tg_backend_new("cpu", &(tg_backend_options){.threads = (int)threads, .device = 0}, &be);
    if (st == TG_OK) st = tg_model_load(model, be, &m);
    if (st) {
        tg_backend_free(be);
        return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    }
    const tg_model_config *c = tg_model_cfg(m);
    const tg_tokenizer *tok = NULL;
    tg_tokenizer *own = NULL;
    size_t len = 0;
    char *buf = NULL;
    if (c->arch != TG_ARCH_MLM) rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "'%s' is not an encoder (arch %s)", model, tg_model_arch_name(c->arch));
    else if ((rc = tg_tool_model_tokenizer(cmd, model, m, NULL, &own, &tok))) {
    } else if (c->pad_id < 0) rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "'%s' has no padding token", model);
    else if (!(buf = tg_cli_read_file(text, &len))) rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "cannot read '%s': %s", text, strerror(errno));
    /* tgraph's own layouts read tokens + </s> (docs/model.md §4): the encoder sees what it was trained on */
    bool eos = !rc && (tg_tokenizer_kind(tok) == TG_TOK_WORDS || tg_tokenizer_kind(tok) == TG_TOK_CHARS ||
                       tg_tokenizer_kind(tok) == TG_TOK_SPM_BPE);
    tg_pool p = !pool ? c->pool : !strcmp(pool, "cls") ? TG_POOL_CLS : !strcmp(pool, "max") ? TG_POOL_MAX : TG_POOL_MEAN;
    bool unit = norm ? !strcmp(norm, "on") : c->normalize;
    int64_t nl = 0, d = c->d_model, cut = 0;
    for (size_t i = 0; !rc && i < len; i++) nl += buf[i] == '\n';
    if (!rc && len && buf[len - 1] != '\n') nl++;
    seq *s = rc ? NULL : calloc((size_t)(nl ? nl : 1), sizeof *s);
    float *emb = rc ? NULL : malloc((size_t)(nl * d + 1) * sizeof *emb);
    if (!rc && (!s || !emb)) rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "out of memory");
    char *p0 = buf;
    for (int64_t i = 0; !rc && i < nl; i++) {
        char *e = strchr(p0, '\n');
        size_t ll = e ? (size_t)(e - p0) : strlen(p0);
        bool trunc;
        if (tg_tokenizer_encode(tok, p0, ll, &s[i].ids, &s[i].n, &trunc))
            rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "'%s' line %lld: %s", text, (long long)i + 1, tg_error_message());
        int32_t *more = !rc && eos ? realloc(s[i].ids, (size_t)(s[i].n + 1) * sizeof *more) : NULL;
        if (more) (s[i].ids = more)[s[i].n++] = TG_EOS;
        else if (!rc && eos) rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "out of memory");
        s[i].line = i;
        cut += trunc;
        p0 = e ? e + 1 : p0 + ll;
    }
    if (!rc) qsort(s, (size_t)nl, sizeof *s, by_len);
    int32_t *ids = NULL;
    for (int64_t b0 = 0; !rc && b0 < nl; b0 += batch) {
        int64_t B = nl - b0 < batch ? nl - b0 : batch, S = s[b0 + B - 1].n;
        if (S < 1) S = 1;
        int32_t *grown = realloc(ids, (size_t)(B * S) * sizeof *ids);
        float *out = malloc((size_t)(B * d) * sizeof *out);
        if (!grown || !out) {
            free(out);
            if (grown) ids = grown;
            rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "out of memory");
            break;
        }
        ids = grown;
        for (int64_t i = 0; i < B; i++)
            for (int64_t j = 0; j < S; j++) ids[i * S + j] = j < s[b0 + i].n ? s[b0 + i].ids[j] : c->pad_id;
        if (tg_model_embed(m, ids, B, S, p, unit, out))
            rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
        for (int64_t i = 0; !rc && i < B; i++) memcpy(emb + s[b0 + i].line * d, out + i * d, (size_t)d * sizeof *emb);
        free(out);
    }
    free(ids);
    FILE *f = NULL;
    char tmp[4200];
    if (!rc) {
        snprintf(tmp, sizeof tmp, "%s.tmp", output ? output : "");
        f = output ? fopen(tmp, "w") : stdout;
        if (!f) rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "cannot write '%s': %s", tmp, strerror(errno));
    }
    for (int64_t i = 0; !rc && i < nl; i++) {
        for (int64_t j = 0; j < d; j++) fprintf(f, j ? " %.7g" : "%.7g", (double)emb[i * d + j]);
        fputc('\n', f);
    }
    if (f && output) {
        bool bad = ferror(f) != 0;
        bad |= fclose(f) != 0;
        if (!rc && (bad || rename(tmp, output))) rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "cannot write '%s': %s", output, strerror(errno));
        if (rc) remove(tmp);
    }
    if (!rc && cut)
        fprintf(stderr, "tg embed: %lld lines truncated to %lld tokens (the model's maximum)\n", (long long)cut,
                (long long)tg_tokenizer_max_length(tok));
    for (int64_t i = 0; s && i < nl; i++) free(s[i].ids);
    free(s);
    free(emb);
    free(buf);
    tg_tokenizer_free(own);
    tg_model_free(m);
    tg_backend_free(be);
    return rc;
}
