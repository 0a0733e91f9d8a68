/* ROUGE-L (Lin 2004) as the rouge-score package computes it (rouge_scorer._score_lcs), on
 * lower-cased whitespace tokens, no stemming; the corpus score is the mean of the sentence
 * F-measures. With l the length of the longest common subsequence of the hypothesis (t words)
 * and the reference (r words):
 *   P = l / t,  R = l / r,  F = 2 P R / (P + R)   (0 if P + R = 0, or if either is empty).
 * rouge-score's own tokenizer lower-cases and keeps only [a-z0-9] runs, which would delete
 * every accented letter of Spanish; tgraph keeps the words as given (after the optional 13a
 * tokenization) and lower-cases them with Python's str.lower(), which is what the fixtures
 * pass to RougeScorer as its tokenizer. */
#include "tg/metrics.h"
#include "train/metric_words.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* LCS length by dynamic programming over one row: row[j] = LCS(h[0, i), r[0, j)). */
static size_t lcs(const uint32_t *h, size_t nh, const uint32_t *r, size_t nr, size_t *row) {
    for (size_t j = 0; j <= nr; j++)
        row[j] = 0;
    for (size_t i = 1; i <= nh; i++) {
        size_t diag = 0; /* LCS(i - 1, j - 1) */
        for (size_t j = 1; j <= nr; j++) {
            size_t up = row[j];
            row[j] = h[i - 1] == r[j - 1] ? diag + 1 : (up > row[j - 1] ? up : row[j - 1]);
            diag = up;
        }
    }
    return row[nr];
}

tg_status tg_metric_rouge_l(const char *const *hyps, const char *const *refs, size_t n, tg_bleu_tokenize tok,
                            double *sentence_scores, tg_metric_mean_result *out) {
    static const char fn[] = "tg_metric_rouge_l";
    tg_status st = tg__check_corpus(fn, hyps, refs, 1, n, out);
    if (st != TG_OK) return st;
    tg__corpus c;
    st = tg__corpus_build(hyps, refs, n, tok, 1, 0, &c);
    if (st != TG_OK) return tg_error_prefix(st, "%s", fn);
    size_t longest = 0;
    for (size_t s = 0; s < 2 * n; s++)
        if (c.len[s] > longest) longest = c.len[s];
    size_t *row = malloc((longest + 1) * sizeof *row);
    if (!row) st = tg_error_set(TG_ERR_NOMEM, "%s: out of memory", fn);
    double sum = 0.0;
    for (size_t i = 0; st == TG_OK && i < n; i++) {
        size_t nh = c.len[2 * i], nr = c.len[2 * i + 1];
        double f = 0.0;
        if (nh > 0 && nr > 0) {
            size_t l = lcs(c.ids + c.off[2 * i], nh, c.ids + c.off[2 * i + 1], nr, row);
            double p = (double)l / (double)nh, r = (double)l / (double)nr;
            if (p + r > 0) f = 2 * p * r / (p + r);
        }
        if (sentence_scores) sentence_scores[i] = f;
        sum += f;
    }
    free(row);
    tg__corpus_free(&c);
    if (st != TG_OK) return st;
    memset(out, 0, sizeof *out);
    out->score = sum / (double)n;
    snprintf(out->signature, sizeof out->signature, "nrefs:1|case:lc|tok:%s|stem:no|version:tgraph",
             tok == TG_BLEU_TOKENIZE_13A ? "13a" : "none");
    return TG_OK;
}
