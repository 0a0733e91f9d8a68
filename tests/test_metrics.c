/* Tests of the metrics module (include/tg/metrics.h, docs/model.md §3).
 *
 * Two kinds of oracle:
 * - small examples computed by hand (the arithmetic is in the comments);
 * - reference values in tests/fixtures/metrics/, written by
 *   tests/fixtures/make_metric_fixtures.py with sacreBLEU 2.6.0 (BLEU none/13a, exp/none
 *   smoothing, chrF, the 13a tokenizer, the paired bootstrap test), NLTK 3.10.4's corpus_bleu
 *   (an independent BLEU; NLTK floors each sentence's n-gram denominator at 1, so it is
 *   compared on the subset of hypotheses with >= 4 tokens, which the fixture lists),
 *   nltk.edit_distance (WER, G2P), NLTK's meteor_score and PorterStemmer, rouge-score 0.1.2
 *   (ROUGE-L) and pycocoevalcap 1.2 (CIDEr-D).
 * Scores are compared with relative tolerance 1e-6 (plus 1e-9 absolute for zeros), METEOR,
 * ROUGE-L and CIDEr-D with 1e-9 (they follow the Python code's floating-point steps); counts,
 * lengths and stems exactly; bootstrap estimates within their Monte-Carlo error (see
 * test_paired_bootstrap_vs_sacrebleu). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getline */
#endif
#include "tg_check.h"

#include "tg/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define RTOL 1e-6
#define ATOL 1e-9
#define FIXDIR TG_TEST_DATA "/fixtures/metrics/"

/* ---- fixture loading -------------------------------------------------------------------- */

typedef struct lines {
    char **v;
    size_t n;
} lines;

/* Lines of FIXDIR/name without their '\n' (an empty line is an empty string). Kept for the
 * life of the test process. */
static lines read_lines(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s%s", FIXDIR, name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open fixture %s", path);
    lines L = {NULL, 0};
    size_t cap = 0;
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t len;
    while ((len = getline(&buf, &bufcap, f)) >= 0) {
        if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
        if (L.n == cap) {
            cap = cap ? 2 * cap : 64;
            L.v = realloc(L.v, cap * sizeof *L.v);
            ck_assert(L.v != NULL);
        }
        L.v[L.n] = strdup(buf);
        ck_assert(L.v[L.n] != NULL);
        L.n++;
    }
    free(buf);
    fclose(f);
    return L;
}

static void free_lines(lines *L) {
    for (size_t i = 0; i < L->n; i++)
        free(L->v[i]);
    free(L->v);
    L->v = NULL;
    L->n = 0;
}

static lines expected_kv; /* "key value" lines of expected.txt */

/* The value string of key in expected.txt; fails the test if absent. */
static const char *fx(const char *key) {
    if (!expected_kv.v) expected_kv = read_lines("expected.txt");
    size_t kl = strlen(key);
    for (size_t i = 0; i < expected_kv.n; i++) {
        const char *l = expected_kv.v[i];
        if (strncmp(l, key, kl) == 0 && l[kl] == ' ') return l + kl + 1;
    }
    ck_abort_msg("key %s missing from expected.txt", key);
    return NULL;
}

/* The number stored under the printf-formatted key; fails the test if absent or not a number. */
static double fx_num(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static double fx_num(const char *fmt, ...) {
    char key[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(key, sizeof key, fmt, ap);
    va_end(ap);
    char *end;
    const char *s = fx(key);
    double v = strtod(s, &end);
    ck_assert_msg(end != s && *end == '\0', "value of %s is not a number: %s", key, s);
    return v;
}

/* The hypothesis/reference corpus, checked against corpus.n. */
static lines hyps_fx, refs_fx;
static void load_corpus(void) {
    if (!hyps_fx.v) hyps_fx = read_lines("sentences.hyp");
    if (!refs_fx.v) refs_fx = read_lines("sentences.ref");
    ck_assert_uint_eq(hyps_fx.n, refs_fx.n);
    ck_assert_uint_eq(hyps_fx.n, (size_t)fx_num("corpus.n"));
}

#define HYPS ((const char *const *)hyps_fx.v)
#define REFS ((const char *const *)refs_fx.v)

static const char *tok_name(tg_bleu_tokenize t) {
    return t == TG_BLEU_TOKENIZE_13A ? "13a" : "none";
}
static const char *smooth_name(tg_bleu_smooth s) {
    return s == TG_BLEU_SMOOTH_EXP ? "exp" : "none";
}

/* ---- BLEU by hand ----------------------------------------------------------------------- */

static tg_metric_bleu_result bleu1(const char *h, const char *r, tg_bleu_tokenize tok,
                                   tg_bleu_smooth sm) {
    tg_metric_bleu_options o = {tok, sm};
    tg_metric_bleu_result res;
    tg_status st = tg_metric_bleu(&h, &r, 1, &o, &res);
    ck_assert_msg(st == TG_OK, "tg_metric_bleu failed: %s", tg_error_message());
    return res;
}

START_TEST(test_bleu_perfect_match) {
    const char *h[] = {"The cat sat on the mat.", "Él comió, ¿no?"};
    tg_metric_bleu_result r;
    ck_assert_int_eq(tg_metric_bleu(h, h, 2, NULL, &r), TG_OK);
    tg_assert_close(r.score, 100.0, 1e-12, 0);
    tg_assert_close(r.bp, 1.0, 0, 0);
    for (int k = 0; k < 4; k++)
        tg_assert_close(r.precisions[k], 100.0, 1e-12, 0);
    /* 13a: "The cat sat on the mat ." (7) + "Él comió , ¿no ?" (5) */
    ck_assert_int_eq(r.sys_len, 12);
    ck_assert_int_eq(r.ref_len, 12);
    ck_assert_str_eq(r.signature, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:tgraph");
    r = bleu1("a b c d", "a b c d", TG_BLEU_TOKENIZE_NONE, TG_BLEU_SMOOTH_NONE);
    tg_assert_close(r.score, 100.0, 1e-12, 0);
    ck_assert_str_eq(r.signature, "nrefs:1|case:mixed|eff:no|tok:none|smooth:none|version:tgraph");
}
END_TEST

START_TEST(test_bleu_empty_hypothesis) {
    /* c = 0 < r = 3: BP = 0 by sacreBLEU's convention, no n-grams, score 0. */
    tg_metric_bleu_result r = bleu1("", "a b c", TG_BLEU_TOKENIZE_13A, TG_BLEU_SMOOTH_EXP);
    ck_assert_int_eq(r.sys_len, 0);
    ck_assert_int_eq(r.ref_len, 3);
    tg_assert_close(r.bp, 0.0, 0, 0);
    tg_assert_close(r.score, 0.0, 0, 0);
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(r.totals[k], 0);
    /* nothing matches at all: score 0 even with exp smoothing (sacreBLEU #141) */
    r = bleu1("x y z w", "a b c d", TG_BLEU_TOKENIZE_NONE, TG_BLEU_SMOOTH_EXP);
    tg_assert_close(r.score, 0.0, 0, 0);
    tg_assert_close(r.precisions[0], 0.0, 0, 0);
}
END_TEST

START_TEST(test_bleu_brevity_penalty) {
    /* All 6 hypothesis words in order: p_n = 100 for n = 1..4; c = 6 < r = 8, so
     * BP = exp(1 - 8/6) = exp(-1/3) and BLEU = 100 exp(-1/3) = 71.6531310573789. */
    tg_metric_bleu_result r =
        bleu1("a b c d e f", "a b c d e f g h", TG_BLEU_TOKENIZE_NONE, TG_BLEU_SMOOTH_NONE);
    tg_assert_close(r.bp, exp(-1.0 / 3.0), 0, 1e-15);
    tg_assert_close(r.score, 71.6531310573789, 0, 1e-12);
    for (int k = 0; k < 4; k++)
        tg_assert_close(r.precisions[k], 100.0, 0, 1e-15);
    /* a longer hypothesis is not rewarded: BP = 1 */
    r = bleu1("a b c d e f g h", "a b c d e f", TG_BLEU_TOKENIZE_NONE, TG_BLEU_SMOOTH_NONE);
    tg_assert_close(r.bp, 1.0, 0, 0);
}
END_TEST

START_TEST(test_bleu_smoothing_by_hand) {
    /* hyp "a b c d", ref "a b d c": 1-grams 4/4; 2-grams {ab,bc,cd} vs {ab,bd,dc}: 1/3;
     * 3-grams {abc,bcd} vs {abd,bdc}: 0/2; 4-grams 0/1. exp smoothing: the first zero order
     * gets 100/(2·2) = 25, the second 100/(4·1) = 25, so
     * BLEU = (100 · 100/3 · 25 · 25)^(1/4) = 37.9917842825796 (sacreBLEU: 37.99178428257963);
     * without smoothing 0. */
    tg_metric_bleu_result r =
        bleu1("a b c d", "a b d c", TG_BLEU_TOKENIZE_NONE, TG_BLEU_SMOOTH_EXP);
    double want = pow(100.0 * (100.0 / 3.0) * 25.0 * 25.0, 0.25);
    tg_assert_close(r.score, want, 0, 1e-12);
    const double p[4] = {100.0, 100.0 / 3.0, 25.0, 25.0};
    const int64_t c[4] = {4, 1, 0, 0}, t[4] = {4, 3, 2, 1};
    for (int k = 0; k < 4; k++) {
        tg_assert_close(r.precisions[k], p[k], 0, 1e-12);
        ck_assert_int_eq(r.counts[k], c[k]);
        ck_assert_int_eq(r.totals[k], t[k]);
    }
    r = bleu1("a b c d", "a b d c", TG_BLEU_TOKENIZE_NONE, TG_BLEU_SMOOTH_NONE);
    tg_assert_close(r.score, 0.0, 0, 0);
    tg_assert_close(r.precisions[1], 100.0 / 3.0, 0, 1e-12);
    tg_assert_close(r.precisions[2], 0.0, 0, 0);
}
END_TEST

START_TEST(test_bleu_clipping) {
    /* "the" appears once in the reference, so 4 hypothesis copies count once: p1 = 1/4.
     * Higher orders: 0/3, 0/2, 0/1 -> exp: 100/6, 100/8, 100/8. BP = 1 (c = 4 > r = 2).
     * (25 · 100/6 · 12.5 · 12.5)^(1/4) = 15.9735776061568 (sacreBLEU: 15.97357760615681) */
    tg_metric_bleu_result r =
        bleu1("the the the the", "the cat", TG_BLEU_TOKENIZE_NONE, TG_BLEU_SMOOTH_EXP);
    ck_assert_int_eq(r.counts[0], 1);
    ck_assert_int_eq(r.totals[0], 4);
    ck_assert_int_eq(r.totals[3], 1);
    double want = pow(25.0 * (100.0 / 6.0) * 12.5 * 12.5, 0.25);
    tg_assert_close(r.score, want, 0, 1e-12);
}
END_TEST

START_TEST(test_bleu_unicode_whitespace) {
    /* U+00A0 and U+3000 separate words (Python's str.split), tabs and runs of blanks too. */
    tg_metric_bleu_result r = bleu1("a\xc2\xa0"
                                    "b\xe3\x80\x80"
                                    "c\t\td",
                                    "a b c d", TG_BLEU_TOKENIZE_NONE, TG_BLEU_SMOOTH_NONE);
    ck_assert_int_eq(r.sys_len, 4);
    tg_assert_close(r.score, 100.0, 1e-12, 0);
    /* trailing whitespace is stripped before tokenizing, as sacreBLEU's rstrip() */
    r = bleu1("a b c d \xe2\x80\x83\n", "a b c d", TG_BLEU_TOKENIZE_13A, TG_BLEU_SMOOTH_NONE);
    tg_assert_close(r.score, 100.0, 1e-12, 0);
    /* ... which matters for 13a: rstrip removes the final "\n" before 13a could delete "-\n",
     * so "well-" keeps its dash (sacreBLEU: 100 against "a b c well-", 0 against "... well") */
    r = bleu1("a b c well-\n", "a b c well-", TG_BLEU_TOKENIZE_13A, TG_BLEU_SMOOTH_NONE);
    tg_assert_close(r.score, 100.0, 1e-12, 0);
    r = bleu1("a b c well-\n", "a b c well", TG_BLEU_TOKENIZE_13A, TG_BLEU_SMOOTH_NONE);
    tg_assert_close(r.score, 0.0, 0, 0);
}
END_TEST

/* ---- the 13a tokenizer ------------------------------------------------------------------ */

static void check_13a(const char *in, const char *want) {
    char *out = NULL;
    ck_assert_msg(tg_metric_tokenize_13a(in, &out) == TG_OK, "%s", tg_error_message());
    ck_assert_msg(strcmp(out, want) == 0, "13a(\"%s\") = \"%s\", expected \"%s\"", in, out, want);
    free(out);
}

START_TEST(test_tokenize_13a_by_hand) {
    check_13a("Hello, world!", "Hello , world !");
    check_13a("Hello, world! It's 3.5-4.0.", "Hello , world ! It's 3.5 - 4.0 .");
    check_13a("It costs $3,500.75.", "It costs $ 3,500.75 .");           /* digit.digit kept */
    check_13a("The 1990-2000 well-known", "The 1990 - 2000 well-known"); /* dash after digit */
    /* sequential replacements: &amp;lt; -> &lt; -> <, but &amp;quot; -> &quot; (the &quot;
     * pass already ran), whose & and ; are then split off like other punctuation */
    check_13a("&quot;hi&quot; &amp;lt; &amp;quot;", "\" hi \" < & quot ;");
    check_13a("a<skipped>b", "ab");
    check_13a("well-\nknown x\ny", "wellknown x y");
    check_13a("café. d.h.", "café . d . h .");
    check_13a("(a)[b]{c}<d>", "( a ) [ b ] { c } < d >");
    check_13a("end-\n", "end"); /* no rstrip inside the tokenizer (BLEU strips first) */
    check_13a("   ", "");
    check_13a("", "");
}
END_TEST

START_TEST(test_tokenize_13a_vs_sacrebleu) {
    load_corpus();
    lines th = read_lines("tok13a.hyp"), tr = read_lines("tok13a.ref");
    ck_assert_uint_eq(th.n, hyps_fx.n);
    ck_assert_uint_eq(tr.n, refs_fx.n);
    for (size_t i = 0; i < th.n; i++) {
        check_13a(hyps_fx.v[i], th.v[i]);
        check_13a(refs_fx.v[i], tr.v[i]);
    }
    free_lines(&th);
    free_lines(&tr);
}
END_TEST

/* ---- BLEU against sacreBLEU and NLTK ---------------------------------------------------- */

START_TEST(test_bleu_corpus_vs_sacrebleu) {
    load_corpus();
    const tg_bleu_tokenize toks[2] = {TG_BLEU_TOKENIZE_13A, TG_BLEU_TOKENIZE_NONE};
    const tg_bleu_smooth sms[2] = {TG_BLEU_SMOOTH_EXP, TG_BLEU_SMOOTH_NONE};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            tg_metric_bleu_options o = {toks[a], sms[b]};
            tg_metric_bleu_result r;
            ck_assert_int_eq(tg_metric_bleu(HYPS, REFS, hyps_fx.n, &o, &r), TG_OK);
            const char *t = tok_name(toks[a]), *s = smooth_name(sms[b]);
            tg_assert_close(r.score, fx_num("corpus.bleu.%s.%s.score", t, s), ATOL, RTOL);
            tg_assert_close(r.bp, fx_num("corpus.bleu.%s.%s.bp", t, s), ATOL, RTOL);
            ck_assert_int_eq(r.sys_len, (int64_t)fx_num("corpus.bleu.%s.%s.sys_len", t, s));
            ck_assert_int_eq(r.ref_len, (int64_t)fx_num("corpus.bleu.%s.%s.ref_len", t, s));
            for (int k = 0; k < 4; k++) {
                tg_assert_close(r.precisions[k], fx_num("corpus.bleu.%s.%s.p%d", t, s, k + 1), ATOL,
                                RTOL);
                ck_assert_int_eq(r.counts[k],
                                 (int64_t)fx_num("corpus.bleu.%s.%s.count%d", t, s, k + 1));
                ck_assert_int_eq(r.totals[k],
                                 (int64_t)fx_num("corpus.bleu.%s.%s.total%d", t, s, k + 1));
            }
        }
}
END_TEST

START_TEST(test_bleu_sentences_vs_sacrebleu) {
    /* Each pair as a one-sentence corpus: exercises short lines, zero orders and smoothing. */
    load_corpus();
    const tg_bleu_tokenize toks[2] = {TG_BLEU_TOKENIZE_13A, TG_BLEU_TOKENIZE_NONE};
    const tg_bleu_smooth sms[2] = {TG_BLEU_SMOOTH_EXP, TG_BLEU_SMOOTH_NONE};
    int nonzero_differ = 0; /* exp and none must differ somewhere, or the test is weak */
    for (size_t i = 0; i < hyps_fx.n; i++)
        for (int a = 0; a < 2; a++) {
            double sc[2];
            for (int b = 0; b < 2; b++) {
                sc[b] = bleu1(hyps_fx.v[i], refs_fx.v[i], toks[a], sms[b]).score;
                double want =
                    fx_num("seg.%zu.bleu.%s.%s.score", i, tok_name(toks[a]), smooth_name(sms[b]));
                ck_assert_msg(fabs(sc[b] - want) <= ATOL + RTOL * fabs(want),
                              "sentence %zu tok %s smooth %s: %.12g, sacreBLEU %.12g", i,
                              tok_name(toks[a]), smooth_name(sms[b]), sc[b], want);
            }
            nonzero_differ += sc[0] != sc[1];
        }
    ck_assert_int_gt(nonzero_differ, 0);
}
END_TEST

/* BLEU of the fixture pairs listed (comma-separated) under key. */
static double bleu_subset(const char *key, tg_bleu_tokenize tok, tg_bleu_smooth sm) {
    const char *list = fx(key);
    const char *h[64], *r[64];
    size_t n = 0;
    for (const char *p = list; *p;) {
        char *end;
        long i = strtol(p, &end, 10);
        ck_assert(end != p && i >= 0 && (size_t)i < hyps_fx.n && n < 64);
        h[n] = hyps_fx.v[i];
        r[n] = refs_fx.v[i];
        n++;
        p = *end == ',' ? end + 1 : end;
    }
    ck_assert_uint_ge(n, 15);
    tg_metric_bleu_options o = {tok, sm};
    tg_metric_bleu_result res;
    ck_assert_int_eq(tg_metric_bleu(h, r, n, &o, &res), TG_OK);
    return res.score;
}

START_TEST(test_bleu_vs_nltk) {
    load_corpus();
    for (int a = 0; a < 2; a++) {
        tg_bleu_tokenize tok = a ? TG_BLEU_TOKENIZE_13A : TG_BLEU_TOKENIZE_NONE;
        const char *t = tok_name(tok);
        char key[64];
        snprintf(key, sizeof key, "corpus.nltk.%s.subset", t);
        double none = bleu_subset(key, tok, TG_BLEU_SMOOTH_NONE);
        double exps = bleu_subset(key, tok, TG_BLEU_SMOOTH_EXP);
        tg_assert_close(none, fx_num("corpus.nltk.%s.none.score", t), ATOL, RTOL);
        tg_assert_close(exps, fx_num("corpus.nltk.%s.method3.score", t), ATOL, RTOL);
    }
}
END_TEST

/* ---- chrF ------------------------------------------------------------------------------- */

static double chrf1(const char *h, const char *r) {
    tg_metric_chrf_result res;
    ck_assert_msg(tg_metric_chrf(&h, &r, 1, &res) == TG_OK, "%s", tg_error_message());
    return res.score;
}

START_TEST(test_chrf_by_hand) {
    tg_assert_close(chrf1("Guten Tag!", "Guten Tag!"), 100.0, 1e-12, 0);
    tg_assert_close(chrf1("a b", "ab"), 100.0, 1e-12, 0); /* whitespace is removed */
    tg_assert_close(chrf1("", "abc"), 0.0, 0, 0);
    /* hyp "ab", ref "abc": n=1: P = 2/2, R = 2/3; n=2: P = 1/1, R = 1/2; n >= 3: no hyp
     * n-grams, not effective. P = 1, R = 7/12, F2 = 5·(7/12)/(4 + 7/12) = 35/55 = 7/11. */
    tg_metric_chrf_result r;
    const char *h = "ab", *ref = "abc";
    ck_assert_int_eq(tg_metric_chrf(&h, &ref, 1, &r), TG_OK);
    tg_assert_close(r.score, 700.0 / 11.0, 0, 1e-12);
    tg_assert_close(r.precision, 100.0, 0, 1e-12);
    tg_assert_close(r.recall, 700.0 / 12.0, 0, 1e-12);
    ck_assert_int_eq(r.effective_order, 2);
    ck_assert_str_eq(r.signature, "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:tgraph");
}
END_TEST

START_TEST(test_chrf_counts_characters) {
    /* "niño" vs "nino", 4 characters each (5 and 4 bytes): n=1: 3 of 4 match (n, i, o);
     * n=2: {ni, iñ, ño} vs {ni, in, no}: 1/3; n=3: 0/2; n=4: 0/1; P = R = (3/4 + 1/3)/4
     * = 13/48, so chrF = 100 · 13/48. Counting bytes would give 5-character n-grams. */
    tg_metric_chrf_result r;
    const char *h = "ni\xc3\xb1o", *ref = "nino";
    ck_assert_int_eq(tg_metric_chrf(&h, &ref, 1, &r), TG_OK);
    tg_assert_close(r.score, 1300.0 / 48.0, 0, 1e-12);
    ck_assert_int_eq(r.effective_order, 4);
}
END_TEST

START_TEST(test_chrf_vs_sacrebleu) {
    load_corpus();
    tg_metric_chrf_result r;
    ck_assert_int_eq(tg_metric_chrf(HYPS, REFS, hyps_fx.n, &r), TG_OK);
    tg_assert_close(r.score, fx_num("corpus.chrf.score"), ATOL, RTOL);
    /* our signature = sacreBLEU's with its version replaced by ours */
    char sig[128];
    snprintf(sig, sizeof sig, "%s|version:tgraph", fx("corpus.chrf.signature"));
    ck_assert_str_eq(r.signature, sig);
    for (size_t i = 0; i < hyps_fx.n; i++) {
        double got = chrf1(hyps_fx.v[i], refs_fx.v[i]);
        double want = fx_num("seg.%zu.chrf.score", i);
        ck_assert_msg(fabs(got - want) <= ATOL + RTOL * fabs(want),
                      "sentence %zu: chrF %.12g, sacreBLEU %.12g", i, got, want);
    }
}
END_TEST

/* ---- errors ----------------------------------------------------------------------------- */

START_TEST(test_argument_errors) {
    const char *h[] = {"a b", NULL}, *r[] = {"a b", "c"};
    tg_metric_bleu_result b;
    tg_metric_chrf_result c;
    tg_metric_wer_result w;
    ck_assert_int_eq(tg_metric_bleu(h, r, 0, NULL, &b), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "n = 0");
    ck_assert_int_eq(tg_metric_bleu(NULL, r, 1, NULL, &b), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "hyps is NULL");
    ck_assert_int_eq(tg_metric_bleu(h, r, 1, NULL, NULL), TG_ERR_INVALID);
    ck_assert_int_eq(tg_metric_bleu(h, r, 2, NULL, &b), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "tg_metric_bleu: hyps[1] is NULL");
    tg_metric_bleu_options bad = {(tg_bleu_tokenize)7, TG_BLEU_SMOOTH_EXP};
    ck_assert_int_eq(tg_metric_bleu(h, r, 1, &bad, &b), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "tokenize");
    ck_assert_int_eq(tg_metric_chrf(h, NULL, 1, &c), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "tg_metric_chrf: refs is NULL");
    ck_assert_int_eq(tg_metric_chrf(h, r, 0, &c), TG_ERR_INVALID);
    ck_assert_int_eq(tg_metric_wer(r, h, 2, &w), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "refs[1] is NULL");
    ck_assert_int_eq(tg_metric_tokenize_13a("x", NULL), TG_ERR_INVALID);
    int64_t d;
    ck_assert_int_eq(tg_metric_edit_distance(NULL, "a", &d), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "hyp is NULL");
}
END_TEST

START_TEST(test_invalid_utf8) {
    /* a stray continuation byte, an overlong "/", a UTF-16 surrogate, a truncated sequence */
    const char *bad[] = {"ab\x80", "\xc0\xaf", "x \xed\xa0\x80", "caf\xc3"};
    const char *good = "ok";
    for (int k = 0; k < 4; k++) {
        tg_metric_chrf_result c;
        tg_metric_bleu_result b;
        tg_metric_wer_result w;
        ck_assert_int_eq(tg_metric_chrf(&good, &bad[k], 1, &c), TG_ERR_FORMAT);
        tg_assert_msg_has(tg_error_message(), "tg_metric_chrf: refs[0] is not valid UTF-8");
        ck_assert_int_eq(tg_metric_chrf(&bad[k], &good, 1, &c), TG_ERR_FORMAT);
        tg_assert_msg_has(tg_error_message(), "hyps[0] is not valid UTF-8");
        ck_assert_int_eq(tg_metric_bleu(&bad[k], &good, 1, NULL, &b), TG_ERR_FORMAT);
        ck_assert_int_eq(tg_metric_wer(&good, &bad[k], 1, &w), TG_ERR_FORMAT);
        char *out = NULL;
        ck_assert_int_eq(tg_metric_tokenize_13a(bad[k], &out), TG_ERR_FORMAT);
        ck_assert_ptr_null(out);
    }
    tg_metric_chrf_result c;
    ck_assert_int_eq(tg_metric_chrf(&good, &bad[0], 1, &c), TG_ERR_FORMAT);
    tg_assert_msg_has(tg_error_message(), "byte 0x80 at offset 2");
    /* the largest code point and 4-byte sequences are fine */
    const char *ok = "\xf4\x8f\xbf\xbf \xf0\x9f\x98\x80";
    ck_assert_int_eq(tg_metric_chrf(&ok, &ok, 1, &c), TG_OK);
    tg_assert_close(c.score, 100.0, 1e-12, 0);
}
END_TEST

/* ---- edit distance and WER -------------------------------------------------------------- */

START_TEST(test_edit_distance_by_hand) {
    int64_t d = -1;
    /* the classic kitten -> sitting, one letter per word: k->s, e->i, insert g = 3 */
    ck_assert_int_eq(tg_metric_edit_distance("k i t t e n", "s i t t i n g", &d), TG_OK);
    ck_assert_int_eq(d, 3);
    ck_assert_int_eq(tg_metric_edit_distance("", "a b c", &d), TG_OK);
    ck_assert_int_eq(d, 3);
    ck_assert_int_eq(tg_metric_edit_distance("a b c", "", &d), TG_OK);
    ck_assert_int_eq(d, 3);
    ck_assert_int_eq(tg_metric_edit_distance("  a\tb  ", "a b", &d), TG_OK);
    ck_assert_int_eq(d, 0);
    /* words, not characters: "ab" vs "a b" is one substitution plus one insertion */
    ck_assert_int_eq(tg_metric_edit_distance("ab", "a b", &d), TG_OK);
    ck_assert_int_eq(d, 2);
}
END_TEST

START_TEST(test_wer_by_hand) {
    /* pair 1: one deletion ("the"); pair 2: b->x and insert d = 2; WER = 3 / (6 + 4). */
    const char *h[] = {"the cat sat on mat", "a b c"};
    const char *r[] = {"the cat sat on the mat", "a x c d"};
    tg_metric_wer_result w;
    ck_assert_int_eq(tg_metric_wer(h, r, 2, &w), TG_OK);
    ck_assert_int_eq(w.errors, 3);
    ck_assert_int_eq(w.ref_words, 10);
    tg_assert_close(w.wer, 0.3, 0, 1e-15);
    const char *e[] = {"", " "};
    ck_assert_int_eq(tg_metric_wer(h, e, 2, &w), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "WER is undefined");
}
END_TEST

START_TEST(test_wer_vs_nltk) {
    load_corpus();
    tg_metric_wer_result w;
    ck_assert_int_eq(tg_metric_wer(HYPS, REFS, hyps_fx.n, &w), TG_OK);
    ck_assert_int_eq(w.errors, (int64_t)fx_num("corpus.wer.errors"));
    ck_assert_int_eq(w.ref_words, (int64_t)fx_num("corpus.wer.ref_words"));
    tg_assert_close(w.wer, fx_num("corpus.wer.wer"), 0, 1e-12);
    for (size_t i = 0; i < hyps_fx.n; i++) {
        int64_t d;
        ck_assert_int_eq(tg_metric_edit_distance(hyps_fx.v[i], refs_fx.v[i], &d), TG_OK);
        ck_assert_int_eq(d, (int64_t)fx_num("seg.%zu.wer.errors", i));
    }
}
END_TEST

/* ---- G2P -------------------------------------------------------------------------------- */

START_TEST(test_g2p_by_hand) {
    /* word 0: exact match, 3 phonemes; word 1: matches the second reference (3);
     * word 2: distance 1 to both references, the first (3 phonemes) is the closest;
     * word 3: two deletions against a 4-phoneme reference.
     * WER = 2/4; PER = (0 + 0 + 1 + 2) / (3 + 3 + 3 + 4) = 3/13. */
    const char *hyp[] = {"K AE1 T", "R IY1 D", "K AE1 T S", "T AH0"};
    const char *r0[] = {"K AE1 T"}, *r1[] = {"R EH1 D", "R IY1 D"};
    const char *r2[] = {"K AE1 T", "K AE1 T S IH0"}, *r3[] = {"T AH0 M EY1"};
    const char *const *refs[] = {r0, r1, r2, r3};
    const size_t nr[] = {1, 2, 2, 1};
    tg_metric_g2p_result g;
    ck_assert_int_eq(tg_metric_g2p(hyp, refs, nr, 4, &g), TG_OK);
    ck_assert_int_eq(g.words, 4);
    ck_assert_int_eq(g.words_wrong, 2);
    ck_assert_int_eq(g.phone_errors, 3);
    ck_assert_int_eq(g.ref_phones, 13);
    tg_assert_close(g.wer, 0.5, 0, 1e-15);
    tg_assert_close(g.per, 3.0 / 13.0, 0, 1e-15);
    /* listing the 5-phoneme reference first makes it the closest: 3/15 */
    const char *r2b[] = {"K AE1 T S IH0", "K AE1 T"};
    refs[2] = r2b;
    ck_assert_int_eq(tg_metric_g2p(hyp, refs, nr, 4, &g), TG_OK);
    tg_assert_close(g.per, 3.0 / 15.0, 0, 1e-15);
}
END_TEST

START_TEST(test_g2p_vs_fixture) {
    lines L = read_lines("g2p.txt");
    ck_assert_uint_eq(L.n, (size_t)fx_num("g2p.words"));
    const char **hyp = calloc(L.n, sizeof *hyp);
    const char ***refs = calloc(L.n, sizeof *refs);
    size_t *nr = calloc(L.n, sizeof *nr);
    ck_assert(hyp && refs && nr);
    for (size_t i = 0; i < L.n; i++) { /* hyp<TAB>ref1<TAB>ref2... (fields split in place) */
        refs[i] = calloc(8, sizeof **refs);
        ck_assert(refs[i] != NULL);
        char *p = L.v[i], *tab = strchr(p, '\t');
        ck_assert(tab != NULL);
        *tab = '\0';
        hyp[i] = p;
        for (p = tab + 1; p; nr[i]++) {
            ck_assert_uint_lt(nr[i], 8);
            refs[i][nr[i]] = p;
            tab = strchr(p, '\t');
            if (tab) *tab = '\0';
            p = tab ? tab + 1 : NULL;
        }
        /* each word alone: its distance and closest-reference length */
        tg_metric_g2p_result one;
        const char *const *ri = refs[i];
        tg_status st = tg_metric_g2p(&hyp[i], &ri, &nr[i], 1, &one);
        ck_assert_msg(st == TG_OK, "word %zu: %s", i, tg_error_message());
        ck_assert_int_eq(one.phone_errors, (int64_t)fx_num("g2p.%zu.distance", i));
        ck_assert_int_eq(one.ref_phones, (int64_t)fx_num("g2p.%zu.ref_phones", i));
    }
    tg_metric_g2p_result g;
    ck_assert_int_eq(tg_metric_g2p(hyp, (const char *const *const *)refs, nr, L.n, &g), TG_OK);
    ck_assert_int_eq(g.words_wrong, (int64_t)fx_num("g2p.words_wrong"));
    ck_assert_int_eq(g.phone_errors, (int64_t)fx_num("g2p.phone_errors"));
    ck_assert_int_eq(g.ref_phones, (int64_t)fx_num("g2p.ref_phones"));
    tg_assert_close(g.wer, fx_num("g2p.wer"), 0, 1e-12);
    tg_assert_close(g.per, fx_num("g2p.per"), 0, 1e-12);
    for (size_t i = 0; i < L.n; i++)
        free(refs[i]);
    free(refs);
    free(hyp);
    free(nr);
    free_lines(&L);
}
END_TEST

START_TEST(test_g2p_errors) {
    const char *hyp[] = {"A B", "C"};
    const char *r0[] = {"A B"}, *r1[] = {"C", NULL};
    const char *const *refs[] = {r0, r1};
    size_t nr[] = {1, 0};
    tg_metric_g2p_result g;
    ck_assert_int_eq(tg_metric_g2p(hyp, refs, nr, 2, &g), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "word 1 has no reference");
    nr[1] = 2;
    ck_assert_int_eq(tg_metric_g2p(hyp, refs, nr, 2, &g), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "refs[1][1] is NULL");
    ck_assert_int_eq(tg_metric_g2p(hyp, refs, NULL, 2, &g), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "n_refs is NULL");
    ck_assert_int_eq(tg_metric_g2p(hyp, NULL, nr, 2, &g), TG_ERR_INVALID);
    ck_assert_int_eq(tg_metric_g2p(hyp, refs, nr, 0, &g), TG_ERR_INVALID);
    const char *rbad[] = {"\xff"};
    refs[0] = rbad;
    nr[1] = 1;
    ck_assert_int_eq(tg_metric_g2p(hyp, refs, nr, 2, &g), TG_ERR_FORMAT);
    const char *empty[] = {""};
    refs[0] = empty;
    refs[1] = empty;
    ck_assert_int_eq(tg_metric_g2p(hyp, refs, nr, 2, &g), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "PER is undefined");
}
END_TEST

/* ---- Porter stemmer, METEOR, ROUGE-L, CIDEr-D ------------------------------------------------ */

START_TEST(test_porter_vs_nltk) {
    /* porter.tsv: word<TAB>nltk PorterStemmer().stem(word), for rule-by-rule cases, NLTK's
     * irregular forms, y, short, accented and odd words, and a sample of CMUdict. Exact. */
    lines L = read_lines("porter.tsv");
    ck_assert_uint_gt(L.n, 1000);
    size_t bad = 0;
    for (size_t i = 0; i < L.n; i++) {
        char *tab = strchr(L.v[i], '\t');
        ck_assert(tab != NULL);
        *tab = '\0';
        char *stem = NULL;
        ck_assert_int_eq(tg_metric_porter_stem(L.v[i], &stem), TG_OK);
        if (strcmp(stem, tab + 1) != 0 && bad++ < 20)
            fprintf(stderr, "stem(%s) = %s, NLTK %s\n", L.v[i], stem, tab + 1);
        free(stem);
    }
    ck_assert_uint_eq(bad, 0);
    free_lines(&L);
}
END_TEST

typedef tg_status (*mean_metric)(const char *const *, const char *const *, size_t, tg_bleu_tokenize,
                                 double *, tg_metric_mean_result *);

static const struct {
    const char *name;
    mean_metric fn;
} MEAN_METRICS[] = {
    {"meteor", tg_metric_meteor}, {"rouge_l", tg_metric_rouge_l}, {"cider", tg_metric_cider}};

/* Corpus and sentence scores of the three metrics on fixture files hyp/ref, against the keys
 * "<prefix>.<tok>.<metric>.score" and ".seg<i>". Tolerance: the Python code and ours take the
 * same floating-point steps except the order of a few sums (CIDEr's dictionary order), so
 * they agree to ~1e-15; 1e-9 relative (plus 1e-12 absolute for zeros) leaves room for libm. */
static void check_mean_metrics(const char *hypf, const char *reff, const char *prefix,
                               tg_bleu_tokenize tok) {
    lines H = read_lines(hypf), R = read_lines(reff);
    ck_assert_uint_eq(H.n, R.n);
    double *seg = malloc(H.n * sizeof *seg);
    ck_assert(seg != NULL);
    const char *tn = tok == TG_BLEU_TOKENIZE_13A ? "13a" : "none";
    for (size_t m = 0; m < sizeof MEAN_METRICS / sizeof MEAN_METRICS[0]; m++) {
        tg_metric_mean_result r;
        tg_status st = MEAN_METRICS[m].fn((const char *const *)H.v, (const char *const *)R.v, H.n,
                                          tok, seg, &r);
        ck_assert_msg(st == TG_OK, "%s: %s", MEAN_METRICS[m].name, tg_error_message());
        for (size_t i = 0; i < H.n; i++) {
            double want = fx_num("%s.%s.%s.seg%zu", prefix, tn, MEAN_METRICS[m].name, i);
            ck_assert_msg(fabs(seg[i] - want) <= 1e-12 + 1e-9 * fabs(want),
                          "%s %s sentence %zu: %.17g, want %.17g", prefix, MEAN_METRICS[m].name, i,
                          seg[i], want);
        }
        tg_assert_close(r.score, fx_num("%s.%s.%s.score", prefix, tn, MEAN_METRICS[m].name), 1e-12,
                        1e-9);
        ck_assert_ptr_nonnull(
            strstr(r.signature, tok == TG_BLEU_TOKENIZE_13A ? "tok:13a" : "tok:none"));
    }
    free(seg);
    free_lines(&H);
    free_lines(&R);
}

START_TEST(test_mean_metrics_pretokenised) {
    /* Spanish, case, stems that match where words do not, repeats, reordering, empty lines */
    check_mean_metrics("words.hyp", "words.ref", "words", TG_BLEU_TOKENIZE_NONE);
    /* random pairs: repeated words, exact and stem matches competing for the same words */
    check_mean_metrics("rand.hyp", "rand.ref", "rand", TG_BLEU_TOKENIZE_NONE);
}
END_TEST

START_TEST(test_mean_metrics_detokenised) {
    check_mean_metrics("sentences.hyp", "sentences.ref", "corpus", TG_BLEU_TOKENIZE_NONE);
    check_mean_metrics("sentences.hyp", "sentences.ref", "corpus", TG_BLEU_TOKENIZE_13A);
}
END_TEST

START_TEST(test_lower_case_vs_python) {
    /* lower.hyp holds every code point Python's str.lower() changes (and words with capital
     * sigma), lower.ref their lower-case forms: ROUGE-L lower-cases both sides, so each line
     * scores 1 exactly when our str.lower() agrees with Python's. */
    lines H = read_lines("lower.hyp"), R = read_lines("lower.ref");
    ck_assert_uint_eq(H.n, (size_t)fx_num("lower.n"));
    ck_assert_uint_eq(H.n, R.n);
    double *seg = malloc(H.n * sizeof *seg);
    ck_assert(seg != NULL);
    tg_metric_mean_result r;
    ck_assert_int_eq(tg_metric_rouge_l((const char *const *)H.v, (const char *const *)R.v, H.n,
                                       TG_BLEU_TOKENIZE_NONE, seg, &r),
                     TG_OK);
    size_t bad = 0;
    for (size_t i = 0; i < H.n; i++)
        if (seg[i] != 1.0 && bad++ < 10) fprintf(stderr, "lower(%s) != %s\n", H.v[i], R.v[i]);
    ck_assert_uint_eq(bad, 0);
    free(seg);
    free_lines(&H);
    free_lines(&R);
}
END_TEST

START_TEST(test_meteor_by_hand) {
    /* hyp "the cats sat" / ref "The cat sat": "the" and "sat" match exactly, "cats" ~ "cat"
     * by stem: m = 3, P = R = 1, Fmean = 1, one chunk: penalty 0.5 (1/3)^3, so
     * METEOR = 1 - 0.5/27. Swapped order "sat the cats": matches (0,2) (1,0) (2,1): chunks
     * {0->2} {1->0, 2->1} = 2, METEOR = 1 - 0.5 (2/3)^3. */
    const char *h[] = {"the cats sat", "sat the cats", "", "a"},
               *r[] = {"The cat sat", "the cat sat", "a", ""};
    double seg[4];
    tg_metric_mean_result res;
    ck_assert_int_eq(tg_metric_meteor(h, r, 4, TG_BLEU_TOKENIZE_NONE, seg, &res), TG_OK);
    tg_assert_close(seg[0], 1 - 0.5 / 27, 0, 1e-15);
    tg_assert_close(seg[1], 1 - 0.5 * pow(2.0 / 3.0, 3), 0, 1e-15);
    tg_assert_close(seg[2], 0.0, 0, 0);
    tg_assert_close(seg[3], 0.0, 0, 0);
    tg_assert_close(res.score, (seg[0] + seg[1]) / 4, 0, 1e-15);
    ck_assert_str_eq(res.signature,
                     "nrefs:1|case:lc|tok:none|stem:porter|syn:no|a:0.9|b:3|g:0.5|version:tgraph");
}
END_TEST

START_TEST(test_rouge_l_by_hand) {
    /* "a b c d" vs "a c b d e": LCS 3 ("a b d"), P = 3/4, R = 3/5, F = 2PR/(P+R) = 2/3;
     * case is ignored ("A" = "a"), accents are kept ("é" != "e"). */
    const char *h[] = {"A b c d", "é"}, *r[] = {"a c b d e", "e"};
    double seg[2];
    tg_metric_mean_result res;
    ck_assert_int_eq(tg_metric_rouge_l(h, r, 2, TG_BLEU_TOKENIZE_NONE, seg, &res), TG_OK);
    tg_assert_close(seg[0], 2.0 / 3.0, 0, 1e-15);
    tg_assert_close(seg[1], 0.0, 0, 0);
    tg_assert_close(res.score, 1.0 / 3.0, 0, 1e-15);
}
END_TEST

START_TEST(test_cider_by_hand) {
    /* Two sentences, identical hyp and ref in each: sim_n = 1 for every order with n-grams,
     * length penalty 1. Sentence 0 "a b c d" has n-grams of all 4 orders: 10. But an n-gram
     * present in every reference has idf log(2) - log(2) = 0: "a" occurs in both references,
     * so its weight is 0 and still the vectors are equal: cosine 1. Sentence 1 "a" has only
     * a unigram, of weight 0: the norms are 0, no division, sim = 0 for all orders: 0. */
    const char *h[] = {"a b c d", "a"}, *r[] = {"a b c d", "a"};
    double seg[2];
    tg_metric_mean_result res;
    ck_assert_int_eq(tg_metric_cider(h, r, 2, TG_BLEU_TOKENIZE_NONE, seg, &res), TG_OK);
    tg_assert_close(seg[0], 10.0, 0, 1e-12);
    tg_assert_close(seg[1], 0.0, 0, 0);
    /* one sentence alone: N = 1, every weight log 1 - log 1 = 0: score 0 */
    ck_assert_int_eq(tg_metric_cider(h, r, 1, TG_BLEU_TOKENIZE_NONE, seg, &res), TG_OK);
    tg_assert_close(res.score, 0.0, 0, 0);
    /* argument errors as for the other metrics */
    ck_assert_int_eq(tg_metric_cider(h, r, 0, TG_BLEU_TOKENIZE_NONE, seg, &res), TG_ERR_INVALID);
    ck_assert_int_eq(tg_metric_meteor(h, NULL, 1, TG_BLEU_TOKENIZE_NONE, seg, &res),
                     TG_ERR_INVALID);
    const char *bad[] = {"\xc3"};
    ck_assert_int_eq(tg_metric_rouge_l(bad, r, 1, TG_BLEU_TOKENIZE_NONE, seg, &res), TG_ERR_FORMAT);
}
END_TEST

/* ---- per-sentence statistics and paired bootstrap ------------------------------------------ */

START_TEST(test_stats_score_equals_corpus_score) {
    /* the score of all rows summed is the corpus metric itself, for every metric */
    load_corpus();
    size_t n = hyps_fx.n;
    for (int m = 0; m < TG_METRIC_COUNT; m++) {
        tg_metric_stats st;
        ck_assert_int_eq(tg_metric_stats_compute((tg_metric_id)m, HYPS, REFS, n, NULL, &st), TG_OK);
        double got = tg_metric_stats_score(&st, NULL, 0), want = 0;
        switch (m) {
        case TG_METRIC_BLEU:
            want = fx_num("corpus.bleu.13a.exp.score");
            break;
        case TG_METRIC_CHRF:
            want = fx_num("corpus.chrf.score");
            break;
        case TG_METRIC_WER:
            want = 100 * fx_num("corpus.wer.wer");
            break;
        case TG_METRIC_METEOR:
            want = 100 * fx_num("corpus.13a.meteor.score");
            break;
        case TG_METRIC_ROUGE_L:
            want = 100 * fx_num("corpus.13a.rouge_l.score");
            break;
        default:
            want = fx_num("corpus.13a.cider.score");
        }
        ck_assert_msg(fabs(got - want) <= 1e-9 * fabs(want) + 1e-12, "%s: %.17g, want %.17g",
                      tg_metric_name(m), got, want);
        tg_metric_stats_free(&st);
    }
    ck_assert_ptr_null(tg_metric_name(TG_METRIC_COUNT));
}
END_TEST

/* Bootstrap fixture: bs.ref with systems bs.base, bs.good, bs.noise. */
static lines bs_ref, bs_sys[3];
static const char *const BS_NAMES[3] = {"base", "good", "noise"};
static void load_bs(void) {
    if (bs_ref.v) return;
    bs_ref = read_lines("bs.ref");
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "bs.%s", BS_NAMES[k]);
        bs_sys[k] = read_lines(name);
        ck_assert_uint_eq(bs_sys[k].n, bs_ref.n);
    }
    ck_assert_uint_eq(bs_ref.n, (size_t)fx_num("bs.n"));
}

static tg_metric_stats bs_stats(tg_metric_id m, int sys) {
    tg_metric_stats st;
    tg_status s = tg_metric_stats_compute(m, (const char *const *)bs_sys[sys].v,
                                          (const char *const *)bs_ref.v, bs_ref.n, NULL, &st);
    ck_assert_msg(s == TG_OK, "%s", tg_error_message());
    return st;
}

START_TEST(test_paired_bootstrap_vs_sacrebleu) {
    /* sacreBLEU 2.6.0's PairedTest(test_type="bs", n_samples=1000), seed 12345, against ours
     * (1000 resamples, our own RNG). Scores on the whole corpus must agree to 1e-9. The
     * bootstrap quantities are Monte-Carlo estimates of the same numbers from two independent
     * streams of resamples, so they may differ by their sampling error; we allow 5 standard
     * deviations of the difference of two estimates:
     * - p: each is a binomial proportion over 1000 resamples, sd sqrt(p (1-p) / 1000);
     * - mean: each has sd s / sqrt(1000), s the bootstrap sd ~ ci / 1.96: diff sd 0.023 ci;
     * - ci: the 2.5% / 97.5% quantiles of 1000 draws of a near-normal have sd ~0.085 s each,
     *   so the half-width has sd ~0.03 ci, and a difference of two ~0.043 ci. */
    load_bs();
    const size_t N = 1000;
    for (int m = 0; m < 2; m++) {
        const char *mn = m == 0 ? "bleu" : "chrf";
        tg_metric_stats base = bs_stats((tg_metric_id)m, 0);
        for (int k = 1; k < 3; k++) {
            tg_metric_stats sys = bs_stats((tg_metric_id)m, k);
            tg_metric_bootstrap_result r;
            ck_assert_int_eq(tg_metric_paired_bootstrap(&base, &sys, N, 12345, &r), TG_OK);
            tg_assert_close(r.baseline, fx_num("bs.%s.base.score", mn), 0, 1e-9);
            tg_assert_close(r.system, fx_num("bs.%s.%s.score", mn, BS_NAMES[k]), 0, 1e-9);
            double p = fx_num("bs.%s.%s.p", mn, BS_NAMES[k]);
            double sd = sqrt(2 * fmax(p * (1 - p), 1.0 / N) / N);
            ck_assert_msg(fabs(r.p_value - p) <= 5 * sd, "%s %s: p %g, sacreBLEU %g", mn,
                          BS_NAMES[k], r.p_value, p);
            for (int which = 0; which < 2; which++) {
                const char *sn = which ? BS_NAMES[k] : "base";
                double mean = which ? r.system_mean : r.baseline_mean,
                       ci = which ? r.system_ci : r.baseline_ci;
                double want_ci = fx_num("bs.%s.%s.ci", mn, sn);
                tg_assert_close(mean, fx_num("bs.%s.%s.mean", mn, sn), 5 * 0.023 * want_ci, 0);
                tg_assert_close(ci, want_ci, 5 * 0.043 * want_ci, 0);
            }
            if (k == 1) { /* a clear improvement: both tests say p < 0.01 (here p = 1/1001) */
                ck_assert(p < 0.01);
                ck_assert(r.p_value < 0.01);
            }
            tg_metric_stats_free(&sys);
        }
        tg_metric_stats_free(&base);
    }
}
END_TEST

START_TEST(test_paired_bootstrap_properties) {
    load_bs();
    for (int m = 0; m < TG_METRIC_COUNT; m++) {
        tg_metric_stats base = bs_stats((tg_metric_id)m, 0), good = bs_stats((tg_metric_id)m, 1);
        tg_metric_bootstrap_result a, b, c;
        /* identical systems: every resampled difference is 0, so is the real one: p is
         * sacreBLEU's 1 / (samples + 1) (its fixture says so for BLEU and chrF), and the two
         * intervals are the same */
        ck_assert_int_eq(tg_metric_paired_bootstrap(&base, &base, 200, 7, &a), TG_OK);
        ck_assert(a.system == a.baseline);
        ck_assert(a.p_value == 1.0 / 201);
        ck_assert(a.system_mean == a.baseline_mean && a.system_ci == a.baseline_ci);
        ck_assert(a.system_ci > 0);
        /* seeded: the same seed gives the same numbers, another seed other resamples */
        ck_assert_int_eq(tg_metric_paired_bootstrap(&base, &good, 200, 7, &b), TG_OK);
        ck_assert_int_eq(tg_metric_paired_bootstrap(&base, &good, 200, 7, &c), TG_OK);
        ck_assert(memcmp(&b, &c, sizeof b) == 0);
        ck_assert_int_eq(tg_metric_paired_bootstrap(&base, &good, 200, 8, &c), TG_OK);
        ck_assert(b.system_mean != c.system_mean);
        ck_assert(b.system == c.system && b.baseline == c.baseline);
        /* bs.good has 20% of its words corrupted, bs.base 50%: better (lower for WER) by far */
        ck_assert_msg(b.p_value < 0.01, "%s: p = %g", tg_metric_name(m), b.p_value);
        ck_assert_msg(m == TG_METRIC_WER ? b.system < b.baseline : b.system > b.baseline, "%s",
                      tg_metric_name(m));
        ck_assert(b.system_mean - b.system_ci < b.system && b.system < b.system_mean + b.system_ci);
        tg_metric_stats_free(&base);
        tg_metric_stats_free(&good);
    }
    /* the fixture records sacreBLEU's own p for a system against itself */
    tg_assert_close(fx_num("bs.bleu.same.p"), 1.0 / 1001, 0, 1e-15);
}
END_TEST

START_TEST(test_paired_bootstrap_errors) {
    load_bs();
    tg_metric_stats bleu = bs_stats(TG_METRIC_BLEU, 0), chrf = bs_stats(TG_METRIC_CHRF, 0);
    tg_metric_bootstrap_result r;
    ck_assert_int_eq(tg_metric_paired_bootstrap(&bleu, &chrf, 10, 1, &r), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "differ");
    ck_assert_int_eq(tg_metric_paired_bootstrap(&bleu, &bleu, 0, 1, &r), TG_ERR_INVALID);
    ck_assert_int_eq(tg_metric_paired_bootstrap(&bleu, NULL, 10, 1, &r), TG_ERR_INVALID);
    tg_metric_stats st;
    const char *h[] = {"a"};
    ck_assert_int_eq(tg_metric_stats_compute(TG_METRIC_COUNT, h, h, 1, NULL, &st), TG_ERR_INVALID);
    ck_assert_int_eq(tg_metric_stats_compute(TG_METRIC_BLEU, h, h, 0, NULL, &st), TG_ERR_INVALID);
    tg_metric_stats_free(&bleu);
    tg_metric_stats_free(&chrf);
}
END_TEST

START_TEST(test_bleu_empty_lines) {
    /* one empty line each (a fuzzer found a NULL pointer offset here): BLEU 0, lengths 0 */
    const char *e[] = {""};
    tg_metric_bleu_result r;
    ck_assert_int_eq(tg_metric_bleu(e, e, 1, NULL, &r), TG_OK);
    tg_assert_close(r.score, 0.0, 0, 0);
    ck_assert_int_eq(r.sys_len, 0);
    tg_metric_mean_result mr;
    double seg;
    ck_assert_int_eq(tg_metric_meteor(e, e, 1, TG_BLEU_TOKENIZE_13A, &seg, &mr), TG_OK);
    ck_assert_int_eq(tg_metric_rouge_l(e, e, 1, TG_BLEU_TOKENIZE_13A, &seg, &mr), TG_OK);
    ck_assert_int_eq(tg_metric_cider(e, e, 1, TG_BLEU_TOKENIZE_13A, &seg, &mr), TG_OK);
    tg_assert_close(mr.score, 0.0, 0, 0);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("bleu");
    tcase_add_test(tc, test_bleu_perfect_match);
    tcase_add_test(tc, test_bleu_empty_hypothesis);
    tcase_add_test(tc, test_bleu_brevity_penalty);
    tcase_add_test(tc, test_bleu_smoothing_by_hand);
    tcase_add_test(tc, test_bleu_clipping);
    tcase_add_test(tc, test_bleu_unicode_whitespace);
    tcase_add_test(tc, test_tokenize_13a_by_hand);
    tcase_add_test(tc, test_tokenize_13a_vs_sacrebleu);
    tcase_add_test(tc, test_bleu_corpus_vs_sacrebleu);
    tcase_add_test(tc, test_bleu_sentences_vs_sacrebleu);
    tcase_add_test(tc, test_bleu_vs_nltk);
    suite_add_tcase(s, tc);
    tc = tcase_create("chrf");
    tcase_add_test(tc, test_chrf_by_hand);
    tcase_add_test(tc, test_chrf_counts_characters);
    tcase_add_test(tc, test_chrf_vs_sacrebleu);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_argument_errors);
    tcase_add_test(tc, test_invalid_utf8);
    suite_add_tcase(s, tc);
    tc = tcase_create("edit_distance");
    tcase_add_test(tc, test_edit_distance_by_hand);
    tcase_add_test(tc, test_wer_by_hand);
    tcase_add_test(tc, test_wer_vs_nltk);
    tcase_add_test(tc, test_g2p_by_hand);
    tcase_add_test(tc, test_g2p_vs_fixture);
    tcase_add_test(tc, test_g2p_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("text");
    tcase_add_test(tc, test_porter_vs_nltk);
    tcase_add_test(tc, test_lower_case_vs_python);
    tcase_add_test(tc, test_meteor_by_hand);
    tcase_add_test(tc, test_rouge_l_by_hand);
    tcase_add_test(tc, test_cider_by_hand);
    tcase_add_test(tc, test_mean_metrics_pretokenised);
    tcase_add_test(tc, test_mean_metrics_detokenised);
    tcase_add_test(tc, test_bleu_empty_lines);
    suite_add_tcase(s, tc);
    tc = tcase_create("bootstrap");
    tcase_add_test(tc, test_stats_score_equals_corpus_score);
    tcase_add_test(tc, test_paired_bootstrap_vs_sacrebleu);
    tcase_add_test(tc, test_paired_bootstrap_properties);
    tcase_add_test(tc, test_paired_bootstrap_errors);
    suite_add_tcase(s, tc);
    return s;
}
