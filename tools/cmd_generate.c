/* `tg generate`: continue prompts with a decoder-only language model (arch lm): greedy or
 * sampled (temperature, top-k, top-p, seeded), with cached keys/values so that a token costs
 * one decoder step (tg_generate, models/generate.c).
 *
 * Everything is checked before anything is generated (the model's family, every prompt's
 * tokens and length), and the output is written only when every prompt has been continued, so
 * a bad input writes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/decode.h"
#include "tg/train.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/model_text.h"

static const char SYNOPSIS[] =
    "--model M [--prompt TEXT | --input FILE] [--max-new N] [--greedy | --temperature T --top-k K --top-p P]\n"
    "                [--seed S] [--chars] [--output FILE]";
static const char DESCRIPTION[] =
    "Continue each prompt (--prompt, or each line of --input; none: generate from <s>) with a\n"
    "language model trained by tg train --arch lm, and print prompt and continuation, one after\n"
    "the other; generation stops at --max-new tokens or at </s>, the end-of-text token (a line\n"
    "break of the training text is the token U+21B5, printed as a new line). Sampling draws from softmax(logits / T) restricted to the top k tokens and then to the\n"
    "top-p nucleus; --greedy takes the most likely token. The prompt is read with the model's\n"
    "stored tokenizer; --chars only for a checkpoint that stores none (trained with --chars).";

/* Append the text of tokens to a growing buffer: words joined by spaces, or characters with
 * U+2581 read as a space. */
static int append(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t n = strlen(s);
    if (*len + n + 2 > *cap) {
        size_t c = (*cap ? *cap * 2 : 256) + n;
        char *p = realloc(*buf, c);
        if (!p) return -1;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
    return 0;
}

static int append_tokens(char **buf, size_t *len, size_t *cap, const tg_vocab *v, const int32_t *ids, int64_t n,
                         bool chars, bool *first) {
    for (int64_t i = 0; i < n; i++) {
        const char *t = tg_vocab_token(v, ids[i]);
        bool nl = !strcmp(t, TG_STREAM_NEWLINE); /* a line break of a token stream */
        if (chars && !strcmp(t, "\xe2\x96\x81")) t = " ";
        if (nl) t = "\n";
        if (!chars && !*first && !nl && append(buf, len, cap, " ")) return -1;
        if (append(buf, len, cap, t)) return -1;
        *first = nl; /* no space opens a line */
    }
    return 0;
}

int tg_cmd_generate(int argc, char **argv) {
    const char *cmd = "generate", *model = NULL, *prompt = NULL, *input = NULL, *output = NULL, *backend = "cpu";
    int64_t max_new = 100, top_k = 0, seed = 1, threads = 0;
    double temperature = 1.0, top_p = 1.0;
    bool greedy = false, chars = false, no_cache = false;
    tg_opt opts[] = {
        {"model", TG_OPT_STRING, &model, 0, 0, NULL, "M", "language model checkpoint (required)", 0, 0},
        {"prompt", TG_OPT_STRING, &prompt, 0, 0, NULL, "TEXT", "the prompt", 0, 0},
        {"input", TG_OPT_STRING, &input, 0, 0, NULL, "FILE", "prompts, one per line", 0, 0},
        {"output", TG_OPT_STRING, &output, 0, 0, NULL, "FILE", "write to FILE (default: standard output)", 0, 0},
        {"max-new", TG_OPT_INT, &max_new, 1, 1 << 20, NULL, "N",
         "tokens to generate at most per prompt (or until </s>, the end of the text)", 0, 0},
        {"max-new-tokens", TG_OPT_INT, &max_new, 1, 1 << 20, NULL, "N", "the same as --max-new", 0, 0},
        {"greedy", TG_OPT_BOOL, &greedy, 0, 0, NULL, NULL, "take the most likely token (temperature 0)", 0, 0},
        {"temperature", TG_OPT_FLOAT, &temperature, 0, 100, NULL, "T", "sampling temperature (0: greedy)", 0, 0},
        {"top-k", TG_OPT_INT, &top_k, 0, 1 << 30, NULL, "K", "sample from the K most likely tokens (0: all)", 0, 0},
        {"top-p", TG_OPT_FLOAT, &top_p, 1e-9, 1, NULL, "P", "then from the smallest set of mass >= P", 0, 0},
        {"seed", TG_OPT_INT, &seed, 0, 9007199254740992.0, NULL, "S", "sampling seed", 0, 0},
        {"chars", TG_OPT_BOOL, &chars, 0, 0, NULL, NULL, "characters (a checkpoint that stores no tokenizer)", 0, 0},
        {"no-cache", TG_OPT_BOOL, &no_cache, 0, 0, NULL, NULL, "recompute the whole prefix per token (slow; a check)", 0, 0},
        TG_TOOL_BACKEND_OPTS(&threads, &backend),
        {0},
    };
    tg_cli_set_usage(SYNOPSIS, DESCRIPTION);
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!model) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--model is required");
    if (prompt && input) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--prompt and --input exclude each other");
    if (greedy && (tg_cli_find(opts, "temperature")->set || top_k || tg_cli_find(opts, "top-p")->set))
        return tg_cli_fail(cmd, TG_EXIT_USAGE, "--greedy takes no --temperature, --top-k or --top-p");

    tg_backend *be = NULL;
    tg_model *m = NULL;
    tg_lines lines = {0};
    int64_t np = input ? 0 : 1;
    int32_t **ids = NULL;
    int64_t *len = NULL;
    tg_generation *gen = NULL;
    char *text = NULL;
    size_t tlen = 0, tcap = 0;
    tg_status st = tg_tool_load_model(cmd, model, backend, threads, TG_ARCH_LM, "continues a language model (tg train --arch lm)",
                                      &be, &m);
    if (st == TG_OK && input) {
        st = tg_lines_read(input, true, &lines);
        np = lines.n;
    }
    if (st == TG_OK && (!(ids = calloc((size_t)np + 1, sizeof *ids)) || !(len = calloc((size_t)np + 1, sizeof *len)) ||
                        !(gen = calloc((size_t)np + 1, sizeof *gen))))
        st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    /* the stored tokenizer: words or characters (to), or an imported model's own (foreign) */
    tg_text_options to = {0};
    const tg_tokenizer *foreign = NULL;
    if (st == TG_OK && (rc = tg_tool_model_text(cmd, model, m, tg_cli_find(opts, "chars"), &to, &foreign))) st = TG_ERR_INVALID;
    chars = to.chars;
    /* every prompt: tokens and length, before anything is generated */
    int64_t max_len = st == TG_OK ? tg_model_cfg(m)->max_len : 0;
    for (int64_t i = 0; st == TG_OK && i < np; i++) {
        const char *p = input ? lines.line[i] : prompt ? prompt : "";
        char **toks = NULL;
        int64_t nt = 0;
        if (foreign) {
            st = tg_tokenizer_encode(foreign, p, strlen(p), &ids[i], &nt, NULL);
        } else {
            st = tg_tokenize(p, &to, &toks, &nt);
            if (st == TG_OK && !(ids[i] = malloc((size_t)(nt + 1) * sizeof **ids))) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
            for (int64_t k = 0; st == TG_OK && k < nt; k++) ids[i][k] = tg_vocab_id(tg_model_tgt_vocab(m), toks[k]);
            tg_tokens_free(toks, nt);
        }
        len[i] = nt;
        if (st == TG_OK && nt + 1 > max_len)
            st = tg_error_set(TG_ERR_INVALID, "%s%lld: the prompt has %lld tokens; the model takes at most %lld (+ <s>)",
                              input ? "prompt on line " : "prompt ", (long long)(i + 1), (long long)nt,
                              (long long)(max_len - 1));
    }
    tg_generate_options go = tg_generate_options_default();
    go.max_new = max_new;
    go.seed = (uint64_t)seed;
    go.cached = !no_cache;
    go.sample.temperature = greedy ? 0.0f : (float)temperature;
    go.sample.top_k = top_k;
    go.sample.top_p = (float)top_p;
    if (st == TG_OK) st = tg_decoder_hold_weights(m); /* prepared once for every prompt's decoder */
    for (int64_t i = 0; st == TG_OK && i < np; i++) {
        go.seed = (uint64_t)seed + (uint64_t)i; /* each prompt its own stream */
        st = tg_generate(m, ids[i], len[i], &go, &gen[i]);
        bool first = true;
        const tg_tokenizer *dec = foreign ? foreign : to.tokenizer; /* text through a tokenizer */
        if (st == TG_OK && dec) { /* the tokenizer's own text of prompt and continuation */
            int32_t *all = malloc((size_t)(len[i] + gen[i].len + 1) * sizeof *all);
            char *s = NULL;
            if (!all) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
            if (st == TG_OK) {
                if (len[i]) memcpy(all, ids[i], (size_t)len[i] * sizeof *all);
                if (gen[i].len) memcpy(all + len[i], gen[i].ids, (size_t)gen[i].len * sizeof *all);
                st = tg_tokenizer_decode(dec, all, len[i] + gen[i].len, &s);
            }
            if (st == TG_OK && (append(&text, &tlen, &tcap, s) || append(&text, &tlen, &tcap, "\n")))
                st = tg_error_set(TG_ERR_NOMEM, "out of memory");
            free(all);
            free(s);
        } else if (st == TG_OK &&
            (append_tokens(&text, &tlen, &tcap, tg_model_tgt_vocab(m), ids[i], len[i], chars, &first) ||
             append_tokens(&text, &tlen, &tcap, tg_model_tgt_vocab(m), gen[i].ids, gen[i].len, chars, &first) ||
             append(&text, &tlen, &tcap, "\n")))
            st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    }
    tg_decoder_release_weights(m);
    if (st == TG_OK) { /* only now: the output */
        FILE *f = output ? fopen(output, "w") : stdout;
        if (!f) st = tg_error_set(TG_ERR_IO, "cannot write '%s'", output);
        else {
            if (tlen && fwrite(text, 1, tlen, f) != tlen) st = tg_error_set(TG_ERR_IO, "cannot write the output");
            if ((f != stdout ? fclose(f) : fflush(f)) != 0 && st == TG_OK) st = tg_error_set(TG_ERR_IO, "cannot write the output");
        }
    }
    for (int64_t i = 0; i < np; i++) {
        if (ids) free(ids[i]);
        if (gen) tg_generation_free(&gen[i]);
    }
    free(ids);
    free(len);
    free(gen);
    free(text);
    tg_lines_free(&lines);
    tg_model_free(m);
    tg_backend_free(be);
    if (rc) return rc; /* the tokenizer's refusal, printed */
    if (st) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    return TG_EXIT_OK;
}
