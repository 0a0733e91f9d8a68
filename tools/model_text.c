/* The tokenizer every command that takes a model reads text with (tools/model_text.h). */
#include <stdio.h>
#include <string.h>

#include "tools/model_text.h"

static const char SPACE[] = "\xE2\x96\x81"; /* "▁", a run of white space between characters */

/* One UTF-8 character? */
static bool one_char(const char *s) {
    size_t n = strlen(s), w = (unsigned char)s[0] < 0x80 ? 1 : (unsigned char)s[0] < 0xE0 ? 2 : (unsigned char)s[0] < 0xF0 ? 3 : 4;
    return n == w;
}

/* A checkpoint without a tokenizer: is its vocabulary that of a --chars model (every ordinary
 * token one character, and "▁" among them), of a words model (some ordinary token longer), or
 * can it not tell (single characters without "▁": G2P's space-separated letters, say)? */
typedef enum { VOCAB_UNCLEAR, VOCAB_CHARS, VOCAB_WORDS } vocab_look;
static vocab_look look(const tg_vocab *v) {
    bool space = false;
    for (int32_t i = 4; i < tg_vocab_size(v); i++) {
        const char *t = tg_vocab_token(v, i);
        if (!strcmp(t, "<mask>")) continue;
        if (!one_char(t)) return VOCAB_WORDS;
        space |= !strcmp(t, SPACE);
    }
    return space ? VOCAB_CHARS : VOCAB_UNCLEAR;
}

int tg_tool_model_text(const char *cmd, const char *path, const tg_model *m, const tg_opt *chars_opt,
                       tg_text_options *to, const tg_tokenizer **foreign) {
    const tg_tokenizer *t = tg_model_tokenizer(m);
    bool given = chars_opt && chars_opt->on_cli, chars = given && *(const bool *)chars_opt->dst;
    memset(to, 0, sizeof *to);
    if (foreign) *foreign = NULL;
    if (t) {
        tg_tok_kind k = tg_tokenizer_kind(t);
        const char *name = tg_tokenizer_kind_name(k);
        if (k == TG_TOK_SPM_BPE) { /* the classic layout; raw text cut into its pieces */
            if (given)
                return tg_cli_fail(cmd, TG_EXIT_USAGE, "'%s' carries its tokenizer (%s): --%schars does not apply", path,
                                   name, chars ? "" : "no-");
            to->tokenizer = t;
            return 0;
        }
        if (k != TG_TOK_WORDS && k != TG_TOK_CHARS) {
            if (given)
                return tg_cli_fail(cmd, TG_EXIT_USAGE, "'%s' carries its tokenizer (%s): --%schars does not apply", path,
                                   name, chars ? "" : "no-");
            if (!foreign)
                return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "'%s' carries a %s tokenizer with its own special tokens (an "
                                   "imported model): tg %s reads text as tgraph's words or characters only", path, name, cmd);
            *foreign = t;
            return 0;
        }
        if (given && chars != (k == TG_TOK_CHARS))
            return tg_cli_fail(cmd, TG_EXIT_USAGE, "'%s' was trained on %s (its stored tokenizer): --%schars contradicts it",
                               path, k == TG_TOK_CHARS ? "characters" : "whitespace words", chars ? "" : "no-");
        to->chars = k == TG_TOK_CHARS;
        return 0;
    }
    vocab_look l = chars_opt ? look(tg_model_src_vocab(m)) : VOCAB_UNCLEAR; /* no --chars: words, as ever */
    if (!chars && l == VOCAB_CHARS)
        return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "'%s' stores no tokenizer and its vocabulary is single characters with "
                           "'\xE2\x96\x81' (a model trained with --chars): give --chars", path);
    if (chars && l == VOCAB_WORDS)
        return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "'%s' stores no tokenizer and its vocabulary holds words, not single "
                           "characters: it was not trained with --chars", path);
    fprintf(stderr, "tg %s: '%s' stores no tokenizer (trained before tokenizers travelled): reading %s\n", cmd, path,
            chars ? "characters (--chars)" : "whitespace words");
    to->chars = chars;
    return 0;
}

int tg_tool_model_tokenizer(const char *cmd, const char *path, const tg_model *m, const tg_opt *chars_opt,
                            tg_tokenizer **own, const tg_tokenizer **tok) {
    tg_text_options to;
    const tg_tokenizer *foreign = NULL;
    *own = NULL;
    *tok = NULL;
    int rc = tg_tool_model_text(cmd, path, m, chars_opt, &to, &foreign);
    if (rc) return rc;
    if ((*tok = tg_model_tokenizer(m))) return 0;
    if (tg_tokenizer_new_simple(to.chars ? TG_TOK_CHARS : TG_TOK_WORDS, tg_model_src_vocab(m), own))
        return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    *tok = *own;
    return 0;
}

tg_status tg_tool_load_model(const char *cmd, const char *path, const char *backend, int64_t threads, tg_model_arch arch,
                             const char *needs, tg_backend **be, tg_model **m) {
    *be = NULL;
    *m = NULL;
    tg_status st = !strcmp(backend, "cuda") ? tg_backend_cuda_new(0, be) : tg_backend_cpu_new((int)threads, be);
    if (st == TG_OK) st = tg_model_load(path, *be, m);
    tg_model_arch a = st == TG_OK ? tg_model_cfg(*m)->arch : arch;
    if (a != arch)
        st = tg_error_set(TG_ERR_INVALID, "'%s' is %s (arch %s): tg %s %s", path,
                          a == TG_ARCH_MLM ? "a masked language model" : a == TG_ARCH_LM ? "a language model"
                                                                                   : "an encoder-decoder model",
                          tg_model_arch_name(a), cmd, needs);
    return st;
}
