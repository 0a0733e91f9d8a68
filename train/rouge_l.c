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

#include <stdlib.h>

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

static tg_status setup(const tg__metric_corpus *c, void **ctx) {
    *ctx = malloc((c->longest + 1) * sizeof(size_t));
    return *ctx ? TG_OK : tg_error_set(TG_ERR_NOMEM, "out of memory");
}

static double sentence(const tg__metric_corpus *c, size_t i, void *row) {
    size_t nh = c->len[2 * i], nr = c->len[2 * i + 1];
    if (nh == 0 || nr == 0) return 0.0;
    size_t l = lcs(c->ids + c->off[2 * i], nh, c->ids + c->off[2 * i + 1], nr, row);
    double p = (double)l / (double)nh, r = (double)l / (double)nr;
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
}

tg_status tg_metric_rouge_l(const char *const *hyps, const char *const *refs, size_t n,
                            tg_bleu_tokenize tok, double *sentence_scores,
                            tg_metric_mean_result *out) {
    static const tg__metric_mean_spec spec = {1, 0, setup, sentence, free, "stem:no"};
    return tg__metric_mean("tg_metric_rouge_l", hyps, refs, n, tok, &spec, sentence_scores, out);
}
