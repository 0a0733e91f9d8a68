/* `tg import`, `tg export`, `tg tokenize` and `tg embed`: Hugging Face models in and out, and
 * the tokenizer and sentence embeddings of a model (docs/tool.md). Text files are read whole
 * and split on '\n'; every line is one input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/hf.h"
#include "tg/tokenizer.h"
#include "tools/model_text.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef struct {
    char *buf;
    char **line;
    int64_t n;
} lines;

static int read_lines(const char *cmd, const char *path, lines *l) {
    size_t len;
    memset(l, 0, sizeof *l);
    if (!(l->buf = tg_cli_read_file(path, &len))) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "cannot read '%s': %s", path, strerror(errno));
    int64_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += l->buf[i] == '\n';
    l->line = malloc((size_t)cap * sizeof *l->line);
    if (!l->line) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "out of memory");
    for (char *p = l->buf; *p || p == l->buf;) {
        if (!*p) break;
        char *e = strchr(p, '\n');
        l->line[l->n++] = p;
        if (!e) break;
        *e = '\0';
        p = e + 1;
    }
    return 0;
}

static void free_lines(lines *l) {
    free(l->buf);
    free(l->line);
}

/* the model and the tokenizer it reads text with (tools/model_text.h) */
static int open_model(const char *cmd, const char *path, int64_t threads, const tg_opt *chars, tg_backend **be, tg_model **m,
                      tg_tokenizer **own, const tg_tokenizer **tok) {
    tg_status st = tg_backend_new("cpu", &(tg_backend_options){.threads = (int)threads, .device = 0}, be);
    if (st == TG_OK) st = tg_model_load(path, *be, m);
    if (st) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    return tg_tool_model_tokenizer(cmd, path, *m, chars, own, tok);
}

int tg_cmd_import(int argc, char **argv) {
    const char *cmd = "import", *from = NULL, *out = NULL;
    tg_opt opts[] = {
        {"from", TG_OPT_CHOICE, &from, 0, 0, "hf", "KIND", "the source's kind: hf (a Hugging Face directory) (required)", 0, 0},
        {"out", TG_OPT_STRING, &out, 0, 0, NULL, "M", "the tgraph checkpoint to write (required)", 0, 0},
        {0},
    };
    tg_cli_set_usage("--from hf DIR --out M", "Convert a Hugging Face model directory (config.json, model.safetensors, "
                     "tokenizer.json;\nBERT or GPT-2) into a tgraph checkpoint that carries its tokenizer.");
    const char *pos[1];
    int npos = 0;
    int rc = tg_cli_parse(cmd, opts, argc, argv, pos, 1, &npos);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!from || !out || npos != 1) return tg_cli_fail(cmd, TG_EXIT_USAGE, "give --from hf, the directory and --out");
    tg_backend *be = NULL;
    tg_model *m = NULL;
    tg_status st = tg_backend_cpu_new(1, &be);
    if (st == TG_OK) st = tg_hf_import(pos[0], be, &m);
    if (st == TG_OK) st = tg_model_save(m, out);
    if (st == TG_OK) {
        const tg_model_config *c = tg_model_cfg(m);
        fprintf(stderr, "tg import: %s -> %s (%s, %lld layers, d %lld, %lld heads, vocabulary %lld, tokenizer %s)\n", pos[0],
                out, tg_model_arch_name(c->arch), (long long)(c->enc_layers + c->dec_layers), (long long)c->d_model,
                (long long)c->heads, (long long)c->tgt_vocab, tg_tokenizer_kind_name(tg_tokenizer_kind(tg_model_tokenizer(m))));
    }
    tg_model_free(m);
    tg_backend_free(be);
    return st ? tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message()) : TG_EXIT_OK;
}

int tg_cmd_export(int argc, char **argv) {
    const char *cmd = "export", *to = NULL, *model = NULL;
    tg_opt opts[] = {
        {"to", TG_OPT_CHOICE, &to, 0, 0, "hf", "KIND", "the target's kind: hf (a Hugging Face directory) (required)", 0, 0},
        {0},
    };
    tg_cli_set_usage("--to hf M DIR", "Write a checkpoint (encoder or language model in BERT's or GPT-2's layout) as a "
                     "Hugging Face\ndirectory: config.json, model.safetensors and tokenizer.json.");
    const char *pos[2];
    int npos = 0;
    int rc = tg_cli_parse(cmd, opts, argc, argv, pos, 2, &npos);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!to || npos != 2) return tg_cli_fail(cmd, TG_EXIT_USAGE, "give --to hf, the checkpoint and the directory");
    model = pos[0];
    tg_backend *be = NULL;
    tg_model *m = NULL;
    tg_status st = tg_backend_cpu_new(1, &be);
    if (st == TG_OK) st = tg_model_load(model, be, &m);
    if (st == TG_OK) st = tg_hf_export(m, pos[1]);
    if (st == TG_OK) fprintf(stderr, "tg export: %s -> %s\n", model, pos[1]);
    tg_model_free(m);
    tg_backend_free(be);
    return st ? tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message()) : TG_EXIT_OK;
}

int tg_cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize", *model = NULL, *text = NULL;
    bool chars = false, pieces = false;
    tg_opt opts[] = {
        {"model", TG_OPT_STRING, &model, 0, 0, NULL, "M", "checkpoint (required)", 0, 0},
        {"text", TG_OPT_STRING, &text, 0, 0, NULL, "FILE", "one input per line (required)", 0, 0},
        {"chars", TG_OPT_BOOL, &chars, 0, 0, NULL, NULL, "characters (a checkpoint that stores no tokenizer)", 0, 0},
        {"pieces", TG_OPT_BOOL, &pieces, 0, 0, NULL, NULL,
         "print the tokens as strings (no special tokens, no truncation), not their ids", 0, 0},
        {0},
    };
    tg_cli_set_usage("--model M --text FILE [--pieces]", "Print the ids of each line as the model's tokenizer makes them (its "
                     "special tokens and\ntruncation included), space-separated, one line per input line.");
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!model || !text) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--model and --text are required");
    tg_backend *be = NULL;
    tg_model *m = NULL;
    tg_tokenizer *own = NULL;
    const tg_tokenizer *tok = NULL;
    lines l;
    rc = open_model(cmd, model, 1, tg_cli_find(opts, "chars"), &be, &m, &own, &tok);
    if (!rc) rc = read_lines(cmd, text, &l);
    int64_t cut = 0;
    for (int64_t i = 0; !rc && i < l.n; i++) {
        int32_t *ids;
        int64_t n;
        bool trunc = false;
        if (pieces) { /* the tokens themselves, as spm_encode --output_format=piece prints them */
            char **p;
            if (tg_tokenizer_pieces(tok, l.line[i], strlen(l.line[i]), &p, &n)) {
                rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "'%s' line %lld: %s", text, (long long)i + 1, tg_error_message());
                break;
            }
            for (int64_t j = 0; j < n; j++) {
                printf(j ? " %s" : "%s", p[j]);
                free(p[j]);
            }
            printf("\n");
            free(p);
            continue;
        }
        if (tg_tokenizer_encode(tok, l.line[i], strlen(l.line[i]), &ids, &n, &trunc)) {
            rc = tg_cli_fail(cmd, TG_EXIT_RUNTIME, "'%s' line %lld: %s", text, (long long)i + 1, tg_error_message());
            break;
        }
        cut += trunc;
        for (int64_t j = 0; j < n; j++) printf(j ? " %d" : "%d", ids[j]);
        printf("\n");
        free(ids);
    }
    if (!rc && cut)
        fprintf(stderr, "tg tokenize: %lld lines truncated to %lld tokens (the model's maximum)\n", (long long)cut,
                (long long)tg_tokenizer_max_length(tok));
    if (!rc) free_lines(&l);
    tg_tokenizer_free(own);
    tg_model_free(m);
    tg_backend_free(be);
    return rc;
}
