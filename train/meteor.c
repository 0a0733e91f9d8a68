/* METEOR (Banerjee & Lavie 2005) exactly as NLTK's nltk.translate.meteor_score.meteor_score
 * computes it with one reference, its defaults (words lower-cased with str.lower, alpha 0.9,
 * beta 3, gamma 0.5) and no WordNet synonyms; the corpus score is the mean of the sentence
 * scores.
 *
 * Alignment, as NLTK builds it: first exact matches, then matches of Porter stems among the
 * words still unmatched (NLTK's synonym stage would come third; with no synonyms it only
 * re-matches equal stems, which the stem stage already took). Each stage walks the
 * hypothesis from its last word to its first and pairs a word with the LAST still unmatched
 * reference word equal to it (NLTK pops the highest position of a list of positions). The
 * matches, ordered by hypothesis position, form chunks: runs where both the hypothesis and
 * the reference positions advance by one. With m matches, c chunks, hypothesis length t and
 * reference length r:
 *   P = m / t,  R = m / r,  Fmean = P R / (alpha P + (1 - alpha) R),
 *   penalty = gamma (c / m)^beta,  METEOR = (1 - penalty) Fmean,
 * and 0 when m = 0 or either side is empty (NLTK catches the ZeroDivisionError). */
#include "tg/metrics.h"
#include "train/metric_words.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ALPHA 0.9
#define BETA 3.0
#define GAMMA 0.5

/* One matching stage over the words still unmatched: key[] maps a word id to what is
 * compared (the id itself, or its stem id). hm[i] / rm[j] hold the partner or -1. */
static void match_stage(const uint32_t *h, size_t nh, const uint32_t *r, size_t nr,
                        const uint32_t *key, int64_t *hm, int64_t *rm) {
    for (size_t i = nh; i-- > 0;) {
        if (hm[i] >= 0) continue;
        uint32_t kh = key ? key[h[i]] : h[i];
        for (size_t j = nr; j-- > 0;) {
            if (rm[j] >= 0 || (key ? key[r[j]] : r[j]) != kh) continue;
            hm[i] = (int64_t)j;
            rm[j] = (int64_t)i;
            break;
        }
    }
}

/* Scratch: the partner of each hypothesis / reference word, or -1. */
typedef struct meteor_ws {
    int64_t *hm, *rm;
} meteor_ws;

static tg_status setup(const tg__metric_corpus *c, void **ctx) {
    meteor_ws *w = calloc(1, sizeof *w);
    size_t m = c->longest ? c->longest : 1;
    if (w) w->hm = malloc(m * sizeof *w->hm), w->rm = malloc(m * sizeof *w->rm);
    *ctx = w;
    return w && w->hm && w->rm ? TG_OK : tg_error_set(TG_ERR_NOMEM, "out of memory");
}

static void release(void *ctx) {
    meteor_ws *w = ctx;
    if (w) free(w->hm), free(w->rm);
    free(w);
}

/* The score of sentence pair s. */
static double sentence(const tg__metric_corpus *c, size_t s, void *ctx) {
    const meteor_ws *w = ctx;
    const uint32_t *h = c->ids + c->off[2 * s], *r = c->ids + c->off[2 * s + 1];
    size_t nh = c->len[2 * s], nr = c->len[2 * s + 1];
    int64_t *hm = w->hm, *rm = w->rm;
    for (size_t i = 0; i < nh; i++)
        hm[i] = -1;
    for (size_t j = 0; j < nr; j++)
        rm[j] = -1;
    match_stage(h, nh, r, nr, NULL, hm, rm);
    match_stage(h, nh, r, nr, c->stem, hm, rm);
    size_t matches = 0, chunks = 0;
    int64_t prev_i = -2, prev_j = -2;
    for (size_t i = 0; i < nh; i++) {
        if (hm[i] < 0) continue;
        matches++;
        if (!((int64_t)i == prev_i + 1 && hm[i] == prev_j + 1)) chunks++;
        prev_i = (int64_t)i;
        prev_j = hm[i];
    }
    if (matches == 0 || nh == 0 || nr == 0) return 0.0;
    /* NLTK's order of operations */
    double precision = (double)matches / (double)nh, recall = (double)matches / (double)nr;
    double fmean = (precision * recall) / (ALPHA * precision + (1 - ALPHA) * recall);
    double frag_frac = (double)chunks / (double)matches;
    double penalty = GAMMA * pow(frag_frac, BETA);
    return (1 - penalty) * fmean;
}

tg_status tg_metric_meteor(const char *const *hyps, const char *const *refs, size_t n,
                           tg_bleu_tokenize tok, double *sentence_scores,
                           tg_metric_mean_result *out) {
    static const tg__metric_mean_spec spec = {
        1, 1, setup, sentence, release, "stem:porter|syn:no|a:0.9|b:3|g:0.5"};
    return tg__metric_mean("tg_metric_meteor", hyps, refs, n, tok, &spec, sentence_scores, out);
}
