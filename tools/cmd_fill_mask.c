/* `tg fill-mask`: the most likely fillers of each <mask> of a text under a masked language model
 * (arch mlm; tg_model_mlm_probs), with their probabilities, as Hugging Face's fill-mask pipeline
 * shows them.
 *
 * The text is tokenized with the model's stored tokenizer (words or characters) with every "<mask>" one
 * mask token: "<mask>" is first replaced by a private-use character (U+E000), so that in a
 * character model too it stays one token and the spaces around it stay where they were. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/train.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/model_text.h"

static const char SYNOPSIS[] = "--model M --text \"... <mask> ...\" [--top-k K] [--chars] [--threads N] [--backend cpu|cuda]";
static const char DESCRIPTION[] =
    "Print the --top-k most likely fillers of each <mask> in --text under a masked language model\n"
    "(tg train --arch mlm), with their probabilities: first the text with every mask filled by its\n"
    "most likely token, then per mask one line per filler, \"rank probability token\". Specials\n"
    "(<pad>, <unk>, <s>, </s>, <mask>) are never proposed; the probabilities are over the whole\n"
    "vocabulary. The text is read with the model's stored tokenizer; --chars only for a checkpoint\n"
    "that stores none (trained with --chars).";

static const char PLACEHOLDER[] = "\xEE\x80\x80"; /* U+E000 */

/* text with each "<mask>" replaced by PLACEHOLDER (malloc'ed); *masks gets their count */
static char *mark_masks(const char *text, int64_t *masks) {
    char *out = malloc(strlen(text) + 1), *o = out;
    *masks = 0;
    if (!out) return NULL;
    for (const char *p = text; *p;) {
        if (!strncmp(p, "<mask>", 6)) {
            memcpy(o, PLACEHOLDER, 3);
            o += 3;
            p += 6;
            ++*masks;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

/* the text of a token as printed: U+2581 a space (characters), U+21B5 a line break */
static const char *shown(const char *t, bool chars) {
    if (chars && !strcmp(t, "\xE2\x96\x81")) return " ";
    if (!strcmp(t, TG_STREAM_NEWLINE)) return "\n";
    return t;
}

int tg_cmd_fill_mask(int argc, char **argv) {
    const char *cmd = "fill-mask", *model = NULL, *text = NULL, *backend = "cpu";
    int64_t top_k = 5, threads = 0;
    bool chars = false;
    tg_opt opts[] = {
        {"model", TG_OPT_STRING, &model, 0, 0, NULL, "M", "masked language model checkpoint (required)", 0, 0},
        {"text", TG_OPT_STRING, &text, 0, 0, NULL, "TEXT", "text with one or more <mask> (required)", 0, 0},
        {"top-k", TG_OPT_INT, &top_k, 1, 1000, NULL, "K", "fillers shown per mask", 0, 0},
        {"chars", TG_OPT_BOOL, &chars, 0, 0, NULL, NULL, "characters (a checkpoint that stores no tokenizer)", 0, 0},
        TG_TOOL_BACKEND_OPTS(&threads, &backend),
        {0},
    };
    tg_cli_set_usage(SYNOPSIS, DESCRIPTION);
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!model || !text) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--model and --text are required (see tg fill-mask --help)");
    int64_t nmask = 0;
    char *marked = mark_masks(text, &nmask);
    if (!marked) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "out of memory");
    if (nmask == 0) {
        free(marked);
        return tg_cli_fail(cmd, TG_EXIT_USAGE, "--text has no <mask> token to fill: \"%s\"", text);
    }
    tg_backend *be = NULL;
    tg_model *m = NULL;
    char **toks = NULL;
    int64_t nt = 0, V = 0;
    int32_t *ids = NULL;
    float *probs = NULL;
    tg_status st = tg_tool_load_model(cmd, model, backend, threads, TG_ARCH_MLM,
                                      "needs a masked language model (tg train --arch mlm)", &be, &m);
    /* the stored tokenizer: words or characters (to), or an imported model's own (foreign) */
    tg_text_options to = {0};
    const tg_tokenizer *foreign = NULL;
    if (st == TG_OK && (rc = tg_tool_model_text(cmd, model, m, tg_cli_find(opts, "chars"), &to, &foreign))) st = TG_ERR_INVALID;
    chars = to.chars;
    const tg_vocab *v = m ? tg_model_tgt_vocab(m) : NULL;
    int32_t mask = v ? tg_vocab_id(v, "<mask>") : 0, *special = NULL; /* never proposed (foreign) */
    int64_t nspecial = 0;
    if (st == TG_OK && foreign) { /* "<mask>" is the tokenizer's own mask token ([MASK]) */
        mask = tg_tokenizer_special(foreign, "mask");
        const char *mt = mask >= 0 ? tg_vocab_token(v, mask) : NULL;
        char *own = mt ? malloc(strlen(text) / 6 * strlen(mt) + strlen(text) + 1) : NULL, *o = own;
        for (const char *q = text; own && *q;)
            if (!strncmp(q, "<mask>", 6)) o = stpcpy(o, mt), q += 6;
            else *o++ = *q++;
        if (o) *o = '\0';
        bool cut = false;
        st = !mt ? tg_error_set(TG_ERR_INVALID, "'%s': its tokenizer has no mask token", model)
             : !own ? tg_error_set(TG_ERR_NOMEM, "out of memory")
                    : tg_tokenizer_encode(foreign, own, strlen(own), &ids, &nt, &cut);
        if (st == TG_OK && cut)
            st = tg_error_set(TG_ERR_INVALID, "--text is longer than the model's %lld tokens", (long long)tg_tokenizer_max_length(foreign));
        if (st == TG_OK) st = tg_tokenizer_special_ids(foreign, &special, &nspecial);
        nmask = 0; /* a [MASK] written as such counts too */
        for (int64_t i = 0; st == TG_OK && i < nt; i++) nmask += ids[i] == mask;
        free(own);
    } else if (st == TG_OK) {
        st = tg_tokenize(marked, &to, &toks, &nt);
        if (st == TG_OK && !(ids = malloc((size_t)(nt ? nt : 1) * sizeof *ids))) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; st == TG_OK && i < nt; i++) ids[i] = !strcmp(toks[i], PLACEHOLDER) ? mask : tg_vocab_id(v, toks[i]);
        if (st == TG_OK && nt + 1 > tg_model_cfg(m)->max_len)
            st = tg_error_set(TG_ERR_INVALID, "--text has %lld tokens; the model takes at most %lld (+ </s>)", (long long)nt,
                              (long long)tg_model_cfg(m)->max_len - 1);
    }
    if (st == TG_OK) {
        V = tg_vocab_size(v);
        if (!(probs = malloc((size_t)(nt ? nt : 1) * (size_t)V * sizeof *probs))) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    }
    if (st == TG_OK) st = tg_model_mlm_probs(m, ids, nt, probs);
    int64_t k = top_k < V ? top_k : V;
    int32_t *best = st == TG_OK ? malloc((size_t)(nmask * k) * sizeof *best) : NULL;
    if (st == TG_OK && !best) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    /* the k most likely non-special tokens at each mask, by a partial selection */
    for (int64_t i = 0, j = 0; st == TG_OK && i < nt; i++) {
        if (ids[i] != mask) continue;
        const float *p = probs + i * V;
        for (int64_t r = 0; r < k; r++) {
            int32_t arg = -1;
            for (int32_t t = foreign ? 0 : 4, s = 0; t < (int32_t)V; t++) {
                while (s < nspecial && special[s] < t) s++;
                bool taken = t == mask || (s < nspecial && special[s] == t);
                for (int64_t q = 0; q < r && !taken; q++) taken = best[j * k + q] == t;
                if (!taken && (arg < 0 || p[t] > p[arg])) arg = t;
            }
            best[j * k + r] = arg;
        }
        j++;
    }
    if (st == TG_OK) {
        int32_t *fill = foreign ? malloc((size_t)nt * sizeof *fill) : NULL; /* an imported model's: decoded */
        for (int64_t i = 0, j = 0; i < nt; i++) { /* the text, each mask filled by its best */
            int32_t id = ids[i] == mask ? best[j++ * k] : ids[i];
            const char *t = id >= 0 ? tg_vocab_token(v, id) : "?";
            if (fill) fill[i] = id;
            else if (!foreign) printf("%s%s", i > 0 && !chars ? " " : "", shown(t, chars));
        }
        char *filled = NULL;
        if (fill && tg_tokenizer_decode(foreign, fill, nt, &filled) == TG_OK) printf("%s", filled);
        free(filled);
        free(fill);
        printf("\n");
        for (int64_t i = 0, j = 0; i < nt; i++) {
            if (ids[i] != mask) continue;
            printf("<mask> %lld of %lld (token %lld):\n", (long long)j + 1, (long long)nmask, (long long)i + 1);
            for (int64_t r = 0; r < k && best[j * k + r] >= 0; r++)
                printf("  %lld %.4f %s\n", (long long)r + 1, (double)probs[i * V + best[j * k + r]],
                       tg_vocab_token(v, best[j * k + r]));
            j++;
        }
        fflush(stdout);
    }
    free(best);
    free(special);
    free(ids);
    free(probs);
    tg_tokens_free(toks, nt);
    free(marked);
    tg_model_free(m);
    tg_backend_free(be);
    if (rc) return rc; /* the tokenizer's refusal, printed */
    if (st) return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    return TG_EXIT_OK;
}
