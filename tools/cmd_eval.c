/* `tg eval`: score hypotheses against references (docs/model.md §3) and print each metric with a
 * sacreBLEU-style signature of what was computed, "NAME|sig = score (details)"; optionally
 * sacreBLEU's paired bootstrap test against a baseline system, and everything as one JSON
 * object (--json) for scripts.
 *
 * References: one line per hypothesis. A line may hold several references joined by " ||| "
 * (the .refs files of the G2P data); WER and PER then use them as docs/model.md §3 says for G2P (a word
 * is right if it matches any reference; PER against the closest). BLEU, chrF, METEOR, ROUGE-L
 * and CIDEr-D take exactly one reference per line.
 * WER has two meanings in docs/model.md §3: word-level Levenshtein distance / reference words (the
 * default for single references), and for G2P the share of words whose whole phoneme string is
 * wrong (mode g2p: chosen by --g2p, and automatically when a reference line holds " ||| " or
 * the reference file ends in .refs). The signature says which. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/json.h"
#include "tg/metrics.h"
#include "tg/train.h"
#include "tools/cli.h"
#include "tools/commands.h"

static const char SYNOPSIS[] =
    "--hyp FILE --ref FILE [--metric bleu,chrf,wer,per,meteor,rouge_l,cider] [--tokenize 13a|none] [--g2p]\n"
    "       [--baseline FILE --paired-bs [--samples N] [--seed S]] [--json]";
static const char DESCRIPTION[] =
    "Corpus metrics of hypotheses against references (one line each; several references per line\n"
    "joined by \" ||| \" for WER/PER). BLEU and chrF as sacreBLEU 2.x computes them, METEOR as NLTK\n"
    "(exact + Porter stems, no WordNet), ROUGE-L as rouge-score, CIDEr-D as pycocoevalcap; METEOR,\n"
    "ROUGE-L and WER in percent. --paired-bs: sacreBLEU's paired bootstrap test of --hyp against\n"
    "--baseline. See docs/tool.md for the exact definitions.";

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
static char report[8192];
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    size_t used = strlen(report);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(report + used, sizeof report - used, fmt, ap);
    va_end(ap);
}

/* The metrics in the order they are printed: option name, printed name, library id (-1: PER,
 * which has no bootstrap statistics). */
static const struct {
    const char *name, *label;
    int id;
} METRICS[] = {
    {"bleu", "BLEU", TG_METRIC_BLEU},       {"chrf", "chrF2", TG_METRIC_CHRF},
    {"wer", "WER", TG_METRIC_WER},          {"per", "PER", -1},
    {"meteor", "METEOR", TG_METRIC_METEOR}, {"rouge_l", "ROUGE-L", TG_METRIC_ROUGE_L},
    {"cider", "CIDEr-D", TG_METRIC_CIDER},
};
#define NMETRICS (sizeof METRICS / sizeof METRICS[0])

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

/* JSON output: obj[key] = number / string (errors surface when the tree is printed). */
static tg_status jnum(tg_json *obj, const char *key, double v) {
    return tg_json_object_set(obj, key, tg_json_new_number(v));
}
static tg_status jstr(tg_json *obj, const char *key, const char *s) {
    return tg_json_object_set(obj, key, tg_json_new_string(s, strlen(s)));
}

/* What one metric produced: the score on the printed scale and its signature. */
typedef struct scored {
    bool on;
    double score;
    char sig[128];
} scored;

typedef struct eval_ctx {
    const char *const *H, *const *R; /* hypotheses, first references */
    size_t n;
    tg_metric_bleu_options bo;
    tg_json *details; /* per-metric details for --json */
} eval_ctx;

static tg_status detail(eval_ctx *c, const char *name, tg_json *obj) {
    return tg_json_object_set(c->details, name, obj);
}

/* BLEU, chrF, METEOR, ROUGE-L, CIDEr-D and single-reference WER: one metric into *out and its
 * line into the report. */
static tg_status run_metric(eval_ctx *c, size_t m, scored *out) {
    tg_status st = TG_OK;
    tg_json *d = tg_json_new_object();
    if (!d) return tg_error_set(TG_ERR_NOMEM, "out of memory");
    const char *label = METRICS[m].label;
    switch (METRICS[m].id) {
    case TG_METRIC_BLEU: {
        tg_metric_bleu_result b;
        st = tg_metric_bleu(c->H, c->R, c->n, &c->bo, &b);
        if (st != TG_OK) break;
        out->score = b.score;
        snprintf(out->sig, sizeof out->sig, "%s", b.signature);
        say("BLEU|%s = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)\n",
            b.signature, b.score, b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.bp,
            b.ref_len ? (double)b.sys_len / (double)b.ref_len : 0.0, (long long)b.sys_len, (long long)b.ref_len);
        tg_json *p = tg_json_new_array();
        for (int k = 0; k < 4; k++)
            if (p) tg_json_array_append(p, tg_json_new_number(b.precisions[k]));
        st = tg_json_object_set(d, "precisions", p);
        if (st == TG_OK) st = jnum(d, "bp", b.bp);
        if (st == TG_OK) st = jnum(d, "sys_len", (double)b.sys_len);
        if (st == TG_OK) st = jnum(d, "ref_len", (double)b.ref_len);
        break;
    }
    case TG_METRIC_CHRF: {
        tg_metric_chrf_result r;
        st = tg_metric_chrf(c->H, c->R, c->n, &r);
        if (st != TG_OK) break;
        out->score = r.score;
        snprintf(out->sig, sizeof out->sig, "%s", r.signature);
        say("chrF2|%s = %.2f\n", r.signature, r.score);
        break;
    }
    case TG_METRIC_WER: {
        tg_metric_wer_result w;
        st = tg_metric_wer(c->H, c->R, c->n, &w);
        if (st != TG_OK) break;
        out->score = 100.0 * w.wer;
        snprintf(out->sig, sizeof out->sig, "nrefs:1|mode:levenshtein|version:tgraph");
        say("WER|%s = %.2f (errors = %lld ref_words = %lld)\n", out->sig, out->score, (long long)w.errors,
            (long long)w.ref_words);
        st = jnum(d, "errors", (double)w.errors);
        if (st == TG_OK) st = jnum(d, "ref_words", (double)w.ref_words);
        break;
    }
    default: {
        tg_metric_mean_result r;
        tg_bleu_tokenize tok = c->bo.tokenize;
        int id = METRICS[m].id;
        st = id == TG_METRIC_METEOR    ? tg_metric_meteor(c->H, c->R, c->n, tok, NULL, &r)
             : id == TG_METRIC_ROUGE_L ? tg_metric_rouge_l(c->H, c->R, c->n, tok, NULL, &r)
                                       : tg_metric_cider(c->H, c->R, c->n, tok, NULL, &r);
        if (st != TG_OK) break;
        out->score = id == TG_METRIC_CIDER ? r.score : 100.0 * r.score;
        snprintf(out->sig, sizeof out->sig, "%s", r.signature);
        say("%s|%s = %.*f\n", label, r.signature, id == TG_METRIC_CIDER ? 4 : 2, out->score);
    }
    }
    if (st == TG_OK && tg_json_size(d) > 0) st = detail(c, METRICS[m].name, d);
    else tg_json_free(d);
    out->on = st == TG_OK;
    return st;
}

/* sacreBLEU's paired bootstrap of the hypotheses against the baseline for every metric. */
static tg_status paired_bs(eval_ctx *c, const char *const *B, const scored *sc, size_t samples, uint64_t seed,
                           tg_json *res) {
    tg_status st = TG_OK;
    for (size_t m = 0; st == TG_OK && m < NMETRICS; m++) {
        if (!sc[m].on) continue;
        tg_metric_stats sb = {0}, ss = {0};
        tg_metric_bootstrap_result r;
        st = tg_metric_stats_compute((tg_metric_id)METRICS[m].id, B, c->R, c->n, &c->bo, &sb);
        if (st == TG_OK) st = tg_metric_stats_compute((tg_metric_id)METRICS[m].id, c->H, c->R, c->n, &c->bo, &ss);
        if (st == TG_OK) st = tg_metric_paired_bootstrap(&sb, &ss, samples, seed, &r);
        tg_metric_stats_free(&sb);
        tg_metric_stats_free(&ss);
        if (st != TG_OK) break;
        int dig = METRICS[m].id == TG_METRIC_CIDER ? 4 : 2;
        say("paired-bs|%s|samples:%zu|seed:%llu: baseline = %.*f (%.*f ± %.*f) system = %.*f (%.*f ± %.*f) "
            "diff = %+.*f p = %.4f\n",
            METRICS[m].label, samples, (unsigned long long)seed, dig, r.baseline, dig, r.baseline_mean, dig,
            r.baseline_ci, dig, r.system, dig, r.system_mean, dig, r.system_ci, dig, r.system - r.baseline,
            r.p_value);
        tg_json *o = tg_json_new_object();
        if (!o) return tg_error_set(TG_ERR_NOMEM, "out of memory");
        const char *keys[] = {"baseline", "system", "diff", "baseline_mean", "baseline_ci", "system_mean",
                              "system_ci", "p_value"};
        double vals[] = {r.baseline,    r.system,      r.system - r.baseline, r.baseline_mean,
                         r.baseline_ci, r.system_mean, r.system_ci,           r.p_value};
        for (size_t k = 0; st == TG_OK && k < sizeof vals / sizeof vals[0]; k++)
            st = jnum(o, keys[k], vals[k]);
        if (st == TG_OK) st = tg_json_object_set(res, METRICS[m].name, o);
        else tg_json_free(o);
    }
    return st;
}

int tg_cmd_eval(int argc, char **argv) {
    const char *cmd = "eval", *hyp = NULL, *ref = NULL, *metric = "bleu,chrf", *tok = "13a", *base = NULL;
    bool g2p = false, pbs = false, json = false;
    int64_t samples = 1000, seed = 12345;
    tg_opt opts[] = {
        {"hyp", TG_OPT_STRING, &hyp, 0, 0, NULL, "FILE", "hypotheses, one per line (required)", 0, 0},
        {"ref", TG_OPT_STRING, &ref, 0, 0, NULL, "FILE", "references, parallel to --hyp (required)", 0, 0},
        {"metric", TG_OPT_STRING, &metric, 0, 0, NULL, "LIST",
         "comma-separated: bleu, chrf, wer, per, meteor, rouge_l, cider", 0, 0},
        {"tokenize", TG_OPT_CHOICE, &tok, 0, 0, "13a|none", NULL,
         "words for BLEU, METEOR, ROUGE-L, CIDEr-D: sacreBLEU's 13a, or the tokens as given", 0, 0},
        {"g2p", TG_OPT_BOOL, &g2p, 0, 0, NULL, NULL, "WER = share of wrong words (G2P) even with single references", 0,
         0},
        {"baseline", TG_OPT_STRING, &base, 0, 0, NULL, "FILE", "baseline system's hypotheses for --paired-bs", 0, 0},
        {"paired-bs", TG_OPT_BOOL, &pbs, 0, 0, NULL, NULL, "paired bootstrap resampling test against --baseline", 0,
         0},
        {"samples", TG_OPT_INT, &samples, 1, 1e7, NULL, "N", "bootstrap resamples (sacreBLEU: 1000)", 0, 0},
        {"seed", TG_OPT_INT, &seed, 0, 9007199254740992.0, NULL, "S", "bootstrap seed (sacreBLEU's default 12345)",
         0, 0},
        {"json", TG_OPT_BOOL, &json, 0, 0, NULL, NULL, "print one JSON object instead of text", 0, 0},
        {0},
    };
    tg_cli_set_usage(SYNOPSIS, DESCRIPTION);
    int rc = tg_cli_parse(cmd, opts, argc, argv, NULL, 0, NULL);
    if (rc == TG_CLI_HELP) return TG_EXIT_OK;
    if (rc) return TG_EXIT_USAGE;
    if (!hyp || !ref) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--hyp and --ref are required");
    if (pbs != (base != NULL)) return tg_cli_fail(cmd, TG_EXIT_USAGE, "--paired-bs and --baseline go together");
    /* every name between commas known: "bleu," or "" names no metric after the comma */
    for (const char *p = metric;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p), m = 0;
        if (len == 0)
            return tg_cli_fail(cmd, TG_EXIT_USAGE, "--metric '%s' has an empty name (a list such as bleu,chrf)", metric);
        while (m < NMETRICS && !(strlen(METRICS[m].name) == len && !strncmp(p, METRICS[m].name, len))) m++;
        if (m == NMETRICS)
            return tg_cli_fail(cmd, TG_EXIT_USAGE,
                               "unknown metric '%.*s' (bleu, chrf, wer, per, meteor, rouge_l, cider)", (int)len, p);
        if (!e) break;
        p = e + 1;
    }

    report[0] = '\0';
    tg_lines lh = {0}, lr = {0}, lb = {0};
    char ***refs = NULL;
    size_t *nrefs = NULL;
    bool multi = false;
    const char **first = NULL;
    tg_json *root = tg_json_new_object(), *scores = tg_json_new_object(), *sigs = tg_json_new_object();
    eval_ctx c = {0};
    c.details = tg_json_new_object();
    tg_status st = root && scores && sigs && c.details ? TG_OK : tg_error_set(TG_ERR_NOMEM, "out of memory");
    if (st == TG_OK) st = tg_lines_read(hyp, true, &lh); /* an empty hypothesis is a valid output */
    if (st == TG_OK) st = tg_lines_read(ref, true, &lr);
    if (st == TG_OK) st = tg_lines_check_parallel(&lh, &lr);
    if (st == TG_OK && base) st = tg_lines_read(base, true, &lb);
    if (st == TG_OK && base) st = tg_lines_check_parallel(&lb, &lr);
    if (st == TG_OK && lh.n == 0) st = tg_error_set(TG_ERR_FORMAT, "'%s' is empty", hyp);
    if (st == TG_OK) st = split_refs(&lr, &refs, &nrefs, &multi);
    if (st == TG_OK && !(first = malloc((size_t)lh.n * sizeof *first))) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; st == TG_OK && i < lh.n; i++) first[i] = refs[i][0];
    size_t rl = strlen(ref);
    bool g2p_mode = g2p || multi || (rl >= 5 && !strcmp(ref + rl - 5, ".refs"));
    c.H = (const char *const *)lh.line;
    c.R = first;
    c.n = (size_t)lh.n;
    c.bo = tg_metric_bleu_options_default();
    c.bo.tokenize = !strcmp(tok, "none") ? TG_BLEU_TOKENIZE_NONE : TG_BLEU_TOKENIZE_13A;
    bool single_only = false; /* a metric that takes one reference per line was asked for */
    for (size_t m = 0; m < NMETRICS; m++)
        if (METRICS[m].id >= 0 && METRICS[m].id != TG_METRIC_WER && has_metric(metric, METRICS[m].name))
            single_only = true;
    if (st == TG_OK && multi && single_only) {
        int64_t i = 0;
        while (nrefs[i] < 2) i++;
        st = tg_error_set(TG_ERR_INVALID, "'%s' line %lld holds several references (\" ||| \"): only WER and PER take more than one",
                          ref, (long long)(i + 1));
    }
    if (st == TG_OK && pbs && (has_metric(metric, "per") || (g2p_mode && has_metric(metric, "wer"))))
        st = tg_error_set(TG_ERR_INVALID, "--paired-bs supports bleu, chrf, wer (not in G2P mode), meteor, rouge_l, cider");
    scored sc[NMETRICS];
    memset(sc, 0, sizeof sc);
    tg_metric_g2p_result g = {0};
    bool need_g2p = has_metric(metric, "per") || (has_metric(metric, "wer") && g2p_mode);
    if (st == TG_OK && need_g2p) st = tg_metric_g2p(c.H, (const char *const *const *)refs, nrefs, c.n, &g);
    for (size_t m = 0; st == TG_OK && m < NMETRICS; m++) {
        if (!has_metric(metric, METRICS[m].name)) continue;
        if (METRICS[m].id == TG_METRIC_WER && g2p_mode) {
            sc[m].score = 100.0 * g.wer;
            snprintf(sc[m].sig, sizeof sc[m].sig, "nrefs:%s|mode:g2p|version:tgraph", multi ? "var" : "1");
            say("WER|%s = %.2f (words_wrong = %lld words = %lld)\n", sc[m].sig, sc[m].score, (long long)g.words_wrong,
                (long long)g.words);
            tg_json *d = tg_json_new_object();
            st = jnum(d, "words_wrong", (double)g.words_wrong);
            if (st == TG_OK) st = jnum(d, "words", (double)g.words);
            st = st == TG_OK ? detail(&c, "wer", d) : (tg_json_free(d), st);
        } else if (METRICS[m].id < 0) {
            sc[m].score = 100.0 * g.per;
            snprintf(sc[m].sig, sizeof sc[m].sig, "nrefs:%s|ref:closest|version:tgraph", multi ? "var" : "1");
            say("PER|%s = %.2f (phone_errors = %lld ref_phones = %lld)\n", sc[m].sig, sc[m].score,
                (long long)g.phone_errors, (long long)g.ref_phones);
            tg_json *d = tg_json_new_object();
            st = jnum(d, "phone_errors", (double)g.phone_errors);
            if (st == TG_OK) st = jnum(d, "ref_phones", (double)g.ref_phones);
            st = st == TG_OK ? detail(&c, "per", d) : (tg_json_free(d), st);
        } else {
            st = run_metric(&c, m, &sc[m]);
        }
        sc[m].on = true;
        if (st == TG_OK) st = jnum(scores, METRICS[m].name, sc[m].score);
        if (st == TG_OK) st = jstr(sigs, METRICS[m].name, sc[m].sig);
    }
    tg_json *bs = NULL;
    if (st == TG_OK && pbs) {
        tg_json *res = tg_json_new_object();
        bs = tg_json_new_object();
        st = res && bs ? TG_OK : tg_error_set(TG_ERR_NOMEM, "out of memory");
        if (st == TG_OK) st = paired_bs(&c, (const char *const *)lb.line, sc, (size_t)samples, (uint64_t)seed, res);
        else tg_json_free(res), res = NULL;
        if (st == TG_OK) st = jstr(bs, "baseline", base);
        if (st == TG_OK) st = jnum(bs, "samples", (double)samples);
        if (st == TG_OK) st = jnum(bs, "seed", (double)seed);
        if (res) st = st == TG_OK ? tg_json_object_set(bs, "metrics", res) : (tg_json_free(res), st);
    }
    if (st == TG_OK) st = jstr(root, "hyp", hyp);
    if (st == TG_OK) st = jstr(root, "ref", ref);
    if (st == TG_OK) st = jnum(root, "sentences", (double)c.n);
    if (st == TG_OK) st = tg_json_object_set(root, "scores", scores), scores = NULL;
    if (st == TG_OK) st = tg_json_object_set(root, "signatures", sigs), sigs = NULL;
    if (st == TG_OK) st = tg_json_object_set(root, "details", c.details), c.details = NULL;
    if (st == TG_OK && bs) st = tg_json_object_set(root, "paired_bs", bs), bs = NULL;
    char *text = NULL;
    if (st == TG_OK && json) st = tg_json_print(root, 2, &text, NULL);
    if (st) tg_cli_fail(cmd, TG_EXIT_RUNTIME, "%s", tg_error_message());
    else if (json) printf("%s\n", text);
    else fputs(report, stdout);
    free(text);
    tg_json_free(root);
    tg_json_free(scores);
    tg_json_free(sigs);
    tg_json_free(c.details);
    tg_json_free(bs);
    for (int64_t i = 0; refs && i < lr.n; i++) free(refs[i]);
    free(refs);
    free(nrefs);
    free(first);
    tg_lines_free(&lh);
    tg_lines_free(&lr);
    tg_lines_free(&lb);
    return st ? TG_EXIT_RUNTIME : TG_EXIT_OK;
}
