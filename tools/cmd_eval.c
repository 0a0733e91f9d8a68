/* `tg eval`: score hypotheses against references (SPEC.md §3) and print each metric with a
 * sacreBLEU-style signature of what was computed, "NAME|sig = score (details)".
 *
 * References: one line per hypothesis. A line may hold several references joined by " ||| "
 * (the .refs files of the G2P data); WER and PER then use them as SPEC §3 says for G2P (a word
 * is right if it matches any reference; PER against the closest). BLEU and chrF take exactly one
 * reference per line.
 * WER has two meanings in SPEC §3: word-level Levenshtein distance / reference words (the
 * default for single references), and for G2P the share of words whose whole phoneme string is
 * wrong (mode g2p: chosen by --g2p, and automatically when a reference line holds " ||| " or
 * the reference file ends in .refs). The signature says which. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/metrics.h"
#include "tg/train.h"
#include "tools/cli.h"
#include "tools/commands.h"

static const char SYNOPSIS[] = "--hyp FILE --ref FILE [--metric bleu,chrf,wer,per] [--tokenize 13a|none] [--g2p]";
static const char DESCRIPTION[] =
    "Corpus metrics of hypotheses against references (one line each; several references per line\n"
    "joined by \" ||| \" for WER/PER). BLEU and chrF as sacreBLEU 2.x computes them.";

#define REF_SEP " ||| "

/* Split every reference line on " ||| " (in place). */
static tg_status split_refs(const tg_lines *r, char ****refs, size_t **nrefs, bool *multi) {
    *refs = calloc((size_t)(r->n ? r->n : 1), sizeof **refs);
    *nrefs = calloc((size_t)(r->n ? r->n : 1), sizeof **nrefs);
    if (!*refs || !*nrefs) return tg_error_set(TG_ERR_NOMEM, "out of memory");
    *multi = false;
    for (int64_t i = 0; i < r->n; i++) {
        size_t k = 1;
        for (const char *p = r->line[i]; (p = strstr(p, REF_SEP)); p += strlen(REF_SEP)) k++;
        char **v = malloc(k * sizeof *v);
        if (!v) return tg_error_set(TG_ERR_NOMEM, "out of memory");
        (*refs)[i] = v;
        (*nrefs)[i] = k;
        if (k > 1) *multi = true;
        char *p = r->line[i];
        for (size_t j = 0; j < k; j++) {
            v[j] = p;
            char *e = strstr(p, REF_SEP);
            if (e) {
                *e = '\0';
                p = e + strlen(REF_SEP);
            }
        }
    }
    return TG_OK;
}

/* Results are collected and printed only when every metric succeeded. */
static char report[4096];
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    size_t used = strlen(report);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(report + used, sizeof report - used, fmt, ap);
    va_end(ap);
}

static bool has_metric(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

int tg_cmd_eval(int argc, char **argv) {
    const char *cmd = "eval", *hyp = NULL, *ref = NULL, *metric = "bleu,chrf", *tok = "13a";
    bool g2p = false;
    tg_opt opts[] = {
        {"hyp", TG_OPT_STRING, &hyp, 0, 0, NULL, "FILE", "hypotheses, one per line (required)", 0, 0},
        {"ref", TG_OPT_STRING, &ref, 0, 0, NULL, "FILE", "references, parallel to --hyp (required)", 0, 0},
        {"metric", TG_OPT_STRING, &metric, 0, 0, NULL, "LIST", "comma-separated: bleu, chrf, wer, per", 0, 0},
        {"tokenize", TG_OPT_CHOICE, &tok, 0, 0, "13a|none", NULL,
         "BLEU tokenisation: sacreBLEU's 13a, or the tokens as given", 0, 0},
        {"g2p", TG_OPT_BOOL, &g2p, 0, 0, NULL, NULL, "WER = share of wrong words (G2P) even with single references", 0,
         0},
        {0},
    };
    tg_cli_set_usage(SYNOPSIS, DESCRIPTION);
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!hyp || !ref) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--hyp and --ref are required");
    for (const char *p = metric; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!((len == 4 && !strncmp(p, "bleu", 4)) || (len == 4 && !strncmp(p, "chrf", 4)) ||
              (len == 3 && !strncmp(p, "wer", 3)) || (len == 3 && !strncmp(p, "per", 3))))
            return tg_cli_fail(cmd, TG_EXIT_USAGE, "unknown metric '%.*s' (bleu, chrf, wer, per)", (int)len, p);
        p = e ? e + 1 : p + len;
    }

    report[0] = '\0';
    tg_lines lh = {0}, lr = {0};
    char ***refs = NULL;
    size_t *nrefs = NULL;
    bool multi = false;
    const char **first = NULL;
    tg_status st = tg_lines_read(hyp, true, &lh); /* an empty hypothesis is a valid output */
    if (st == TG_OK) st = tg_lines_read(ref, true, &lr);
    if (st == TG_OK) st = tg_lines_check_parallel(&lh, &lr);
    if (st == TG_OK && lh.n == 0) st = tg_error_set(TG_ERR_FORMAT, "'%s' is empty", hyp);
    if (st == TG_OK) st = split_refs(&lr, &refs, &nrefs, &multi);
    if (st == TG_OK && !(first = malloc((size_t)lh.n * sizeof *first))) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; st == TG_OK && i < lh.n; i++) first[i] = refs[i][0];
    size_t rl = strlen(ref);
    bool g2p_mode = g2p || multi || (rl >= 5 && !strcmp(ref + rl - 5, ".refs"));
    const char *const *H = (const char *const *)lh.line;
    size_t n = (size_t)lh.n;
    if (st == TG_OK && multi && (has_metric(metric, "bleu") || has_metric(metric, "chrf"))) {
        int64_t i = 0;
        while (nrefs[i] < 2) i++;
        st = tg_error_set(TG_ERR_INVALID,
                          "'%s' line %lld holds several references (\" ||| \"): BLEU and chrF take one per line",
                          ref, (long long)(i + 1));
    }
    if (st == TG_OK && has_metric(metric, "bleu")) {
        tg_metric_bleu_options bo = tg_metric_bleu_options_default();
        bo.tokenize = !strcmp(tok, "none") ? TG_BLEU_TOKENIZE_NONE : TG_BLEU_TOKENIZE_13A;
        tg_metric_bleu_result b;
        st = tg_metric_bleu(H, first, n, &bo, &b);
        if (st == TG_OK)
            say("BLEU|%s = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)\n",
                   b.signature, b.score, b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.bp,
                   b.ref_len ? (double)b.sys_len / (double)b.ref_len : 0.0, (long long)b.sys_len, (long long)b.ref_len);
    }
    if (st == TG_OK && has_metric(metric, "chrf")) {
        tg_metric_chrf_result c;
        st = tg_metric_chrf(H, first, n, &c);
        if (st == TG_OK) say("chrF2|%s = %.2f\n", c.signature, c.score);
    }
    tg_metric_g2p_result g = {0};
    bool need_g2p = has_metric(metric, "per") || (has_metric(metric, "wer") && g2p_mode);
    if (st == TG_OK && need_g2p)
        st = tg_metric_g2p(H, (const char *const *const *)refs, nrefs, n, &g);
    if (st == TG_OK && has_metric(metric, "wer")) {
        if (g2p_mode) {
            say("WER|nrefs:%s|mode:g2p|version:tgraph = %.2f (words_wrong = %lld words = %lld)\n",
                   multi ? "var" : "1", 100.0 * g.wer, (long long)g.words_wrong, (long long)g.words);
        } else {
            tg_metric_wer_result w;
            st = tg_metric_wer(H, first, n, &w);
            if (st == TG_OK)
                say("WER|nrefs:1|mode:levenshtein|version:tgraph = %.2f (errors = %lld ref_words = %lld)\n",
                       100.0 * w.wer, (long long)w.errors, (long long)w.ref_words);
        }
    }
    if (st == TG_OK && has_metric(metric, "per"))
        say("PER|nrefs:%s|ref:closest|version:tgraph = %.2f (phone_errors = %lld ref_phones = %lld)\n",
               multi ? "var" : "1", 100.0 * g.per, (long long)g.phone_errors, (long long)g.ref_phones);
    if (st) tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    else fputs(report, stdout);
    for (int64_t i = 0; refs && i < lr.n; i++) free(refs[i]);
    free(refs);
    free(nrefs);
    free(first);
    tg_lines_free(&lh);
    tg_lines_free(&lr);
    return st ? TG_EXIT_RUNTIME : TG_EXIT_OK;
}
