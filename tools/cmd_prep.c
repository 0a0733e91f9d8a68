/* `tg prep`: read a (parallel) corpus, check it, build its vocabularies and print the statistics
 * that choose a model: sentence counts, mean lengths per side (tokens without and with </s>)
 * and the interacting-head paper's bound h_max = floor(d / n̄) (docs/model.md §2.4), n̄ the mean
 * token length of the sequences, both sides pooled, without </s>. With --out the vocabularies
 * are written (one token per line, index = id) for `tg train --src-vocab/--tgt-vocab`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tg/train.h"
#include "tools/cli.h"
#include "tools/commands.h"

static const char SYNOPSIS[] = "--src FILE [--tgt FILE] [--joint] [--chars] [--d-model D] [--out DIR]";
static const char DESCRIPTION[] =
    "Check a corpus (UTF-8, no empty lines, parallel line counts), build its vocabularies and print\n"
    "sentence counts, mean lengths (tokens per sentence, without and with </s>) and\n"
    "h_max = floor(d_model / n) (docs/model.md §2.4), n = mean tokens per sequence over both sides, without </s>.";

int tg_cmd_prep(int argc, char **argv) {
    const char *src = NULL, *tgt = NULL, *out = NULL;
    bool joint = false, chars = false;
    int64_t d_model = 512, heads = 0, min_count = 1, max_vocab = 0;
    tg_opt opts[] = {
        {"src", TG_OPT_STRING, &src, 0, 0, NULL, "FILE", "source side, one sentence per line (required)", 0, 0},
        {"tgt", TG_OPT_STRING, &tgt, 0, 0, NULL, "FILE", "target side, parallel to --src", 0, 0},
        {"joint", TG_OPT_BOOL, &joint, 0, 0, NULL, NULL, "one vocabulary for both sides", 0, 0},
        {"chars", TG_OPT_BOOL, &chars, 0, 0, NULL, NULL, "tokens are characters (spaces become \xE2\x96\x81)", 0, 0},
        {"d-model", TG_OPT_INT, &d_model, 1, 65536, NULL, "D", "model width for h_max", 0, 0},
        {"heads", TG_OPT_INT, &heads, 0, 1024, NULL, "H", "warn when H > h_max (0: no check)", 0, 0},
        {"min-count", TG_OPT_INT, &min_count, 1, 1e9, NULL, "N", "keep tokens seen at least N times", 0, 0},
        {"max-vocab", TG_OPT_INT, &max_vocab, 0, 1e9, NULL, "N", "at most N entries per vocabulary (0: all)", 0, 0},
        {"out", TG_OPT_STRING, &out, 0, 0, NULL, "DIR", "write vocab.src and vocab.tgt (or vocab.joint) here", 0, 0},
        {0},
    };
    const char *cmd = "prep";
    tg_cli_set_usage(SYNOPSIS, DESCRIPTION);
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!src) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--src is required (see tg prep --help)");
    if (max_vocab != 0 && max_vocab < 5) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--max-vocab must be 0 or >= 5");

    tg_lines ls = {0}, lt = {0};
    tg_vocab *sv = NULL, *tv = NULL;
    tg_corpus *c = NULL;
    tg_text_options to = {.chars = chars};
    tg_corpus_options co = {.text = to};
    tg_status st = tg_lines_read(src, false, &ls);
    if (st == TG_OK && tgt) st = tg_lines_read(tgt, false, &lt);
    if (st == TG_OK && tgt) st = tg_lines_check_parallel(&ls, &lt);
    if (st == TG_OK && ls.n == 0) st = tg_error_set(TG_ERR_FORMAT, "'%s' is empty", src);
    const tg_lines *both[2] = {&ls, &lt}, *one_t[1] = {&lt};
    if (st == TG_OK) st = tg_vocab_build(both, (joint && tgt) ? 2 : 1, &to, min_count, max_vocab, &sv);
    if (st == TG_OK && tgt) {
        if (joint) tv = sv;
        else st = tg_vocab_build(one_t, 1, &to, min_count, max_vocab, &tv);
    }
    if (st == TG_OK) st = tg_corpus_new(&ls, tgt ? &lt : NULL, sv, tv, &co, &c);
    if (st == TG_OK && out) {
        char p[4096];
        if (mkdir(out, 0777) != 0 && errno != EEXIST)
            st = tg_error_set(TG_ERR_IO, "cannot create directory '%s': %s", out, strerror(errno));
        if (st == TG_OK && joint && tgt) {
            snprintf(p, sizeof p, "%s/vocab.joint", out);
            st = tg_vocab_save(sv, p);
        } else if (st == TG_OK) {
            snprintf(p, sizeof p, "%s/vocab.src", out);
            st = tg_vocab_save(sv, p);
            if (st == TG_OK && tgt) {
                snprintf(p, sizeof p, "%s/vocab.tgt", out);
                st = tg_vocab_save(tv, p);
            }
        }
    }
    if (st) {
        tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    } else {
        tg_corpus_stats s;
        tg_corpus_stats_get(c, &s);
        printf("corpus: %lld %s ('%s'%s%s%s), tokens: %s\n", (long long)s.pairs, tgt ? "sentence pairs" : "sentences",
               src, tgt ? ", '" : "", tgt ? tgt : "", tgt ? "'" : "", chars ? "characters" : "whitespace-separated");
        printf("%-28s %12s %12s\n", "", "source", "target");
        printf("%-28s %12lld %12lld\n", "sentences", (long long)s.pairs, (long long)(tgt ? s.pairs : 0));
        printf("%-28s %12lld %12lld\n", "tokens (without </s>)", (long long)s.src_tokens, (long long)s.tgt_tokens);
        printf("%-28s %12.3f %12.3f\n", "mean length, without </s>", s.src_mean, s.tgt_mean);
        printf("%-28s %12.3f %12.3f\n", "mean length, with </s>", s.src_mean + 1, tgt ? s.tgt_mean + 1 : 0.0);
        printf("%-28s %12lld %12lld\n", "max length, without </s>", (long long)s.src_max, (long long)s.tgt_max);
        printf("%-28s %12lld %12lld%s\n", "vocabulary (incl. 4 specials)", (long long)tg_vocab_size(sv),
               (long long)tg_vocab_size(tv), joint && tgt ? "  (joint)" : "");
        int64_t hmax = tg_model_max_heads(d_model, s.mean_len);
        printf("n̄ = mean tokens per sequence (%s, without </s>) = %.3f\n", tgt ? "both sides pooled" : "source",
               s.mean_len);
        printf("h_max = floor(d_model / n̄) = floor(%lld / %.3f) = %lld   (docs/model.md §2.4)\n", (long long)d_model,
               s.mean_len, (long long)hmax);
        if (tgt)
            printf("per side: h_max(source) = %lld, h_max(target) = %lld\n",
                   (long long)tg_model_max_heads(d_model, s.src_mean), (long long)tg_model_max_heads(d_model, s.tgt_mean));
        if (heads > 0 && heads > hmax)
            fprintf(stderr, "tg prep: warning: %lld heads > h_max = %lld for this corpus at d_model %lld "
                            "(head width %lld < mean length %.1f: the low-rank bottleneck of docs/model.md §2.2/2.4)\n",
                    (long long)heads, (long long)hmax, (long long)d_model, (long long)(d_model / heads), s.mean_len);
        if (out) printf("vocabularies written to %s/\n", out);
    }
    tg_corpus_free(c);
    if (tv != sv) tg_vocab_free(tv);
    tg_vocab_free(sv);
    tg_lines_free(&ls);
    tg_lines_free(&lt);
    return st ? TG_EXIT_RUNTIME : TG_EXIT_OK;
}
