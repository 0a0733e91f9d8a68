/* Corpus chrF (Popović 2015) as sacreBLEU 2.x computes it by default (metrics/chrf.py:
 * char_order 6, word_order 0, beta 2, whitespace False, lowercase False, eps_smoothing False).
 *
 * Per sentence: delete whitespace (''.join(line.split())), then for n = 1..6 take the
 * character n-gram multisets H_n, R_n of hypothesis and reference and record
 *   [ |H_n| if R_n is non-empty else 0,  |R_n|,  Σ_g min(H_n(g), R_n(g)) ].
 * These triples are summed over the corpus; _compute_f_score then averages precision and
 * recall over the "effective" orders (both counts > 0) and combines them once:
 *   chrF = 100 · (1 + β²) P R / (β² P + R).
 * Characters are code points, so "ñ" is one character whether it takes 2 bytes or not. */
#include "tg/metrics.h"
#include "train/metrics-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAR_ORDER 6
#define BETA 2

/* Code points of s without its whitespace, into *cp (grown as needed). */
static tg_status code_points(const char *s, uint32_t **cp, size_t *cap, size_t *count) {
    size_t len = strlen(s), pos = 0, m = 0;
    if (len > *cap) { /* a code point takes at least one byte */
        uint32_t *v = realloc(*cp, (len ? len : 1) * sizeof *v);
        if (!v) return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu characters)", len);
        *cp = v;
        *cap = len;
    }
    while (pos < len) {
        uint32_t c;
        if (tg__text_utf8_next(s, len, &pos, &c) != 0)
            return tg_error_set(TG_ERR_FORMAT, "invalid UTF-8 at offset %zu", pos);
        if (!tg__text_is_space(c)) (*cp)[m++] = c;
    }
    *count = m;
    return TG_OK;
}

tg_status tg__chrf_rows(const char *const *hyps, const char *const *refs, size_t n, double *rows,
                        int64_t sum[TG__CHRF_STATS]) {
    tg_status st = TG_OK;
    uint32_t *hc = NULL, *rc = NULL;
    size_t hcap = 0, rcap = 0, i = 0;
    tg__text_ngram_scratch sc;
    memset(&sc, 0, sizeof sc);
    for (; st == TG_OK && i < n; i++) {
        size_t nh = 0, nr = 0;
        st = code_points(hyps[i], &hc, &hcap, &nh);
        if (st == TG_OK) st = code_points(refs[i], &rc, &rcap, &nr);
        for (int k = 0; st == TG_OK && k < CHAR_ORDER; k++) {
            int64_t ht, rt, m;
            st = tg__text_ngram_match(hc, nh, rc, nr, k + 1, &sc, &ht, &rt, &m);
            int64_t row[3] = {rt > 0 ? ht : 0, rt, m}; /* "hyp_count if ref_ngrams else 0" */
            for (int j = 0; st == TG_OK && j < 3; j++) {
                if (rows) rows[i * TG__CHRF_STATS + (size_t)(3 * k + j)] = (double)row[j];
                if (sum) sum[3 * k + j] += row[j];
            }
        }
    }
    free(hc);
    free(rc);
    tg__text_ngram_scratch_free(&sc);
    return st == TG_OK ? TG_OK : tg_error_prefix(st, "sentence %zu", i - 1);
}

double tg__chrf_score(const double sum[TG__CHRF_STATS], double *prec, double *rec, int *eff_out) {
    /* CHRF._compute_f_score with eps_smoothing False, in the same order of operations. */
    const double factor = BETA * BETA;
    double avg_prec = 0.0, avg_rec = 0.0, score = 0.0;
    int eff = 0;
    for (int k = 0; k < CHAR_ORDER; k++) {
        double n_hyp = sum[3 * k], n_ref = sum[3 * k + 1], n_match = sum[3 * k + 2];
        if (n_hyp > 0 && n_ref > 0) {
            avg_prec += n_match / n_hyp;
            avg_rec += n_match / n_ref;
            eff++;
        }
    }
    if (eff > 0) {
        avg_prec /= eff;
        avg_rec /= eff;
    }
    if (avg_prec + avg_rec != 0.0) {
        score = (1 + factor) * avg_prec * avg_rec;
        score /= (factor * avg_prec) + avg_rec;
        score *= 100;
    }
    if (prec) *prec = avg_prec;
    if (rec) *rec = avg_rec;
    if (eff_out) *eff_out = eff;
    return score;
}

tg_status tg_metric_chrf(const char *const *hyps, const char *const *refs, size_t n,
                         tg_metric_chrf_result *out) {
    static const char fn[] = "tg_metric_chrf";
    tg_status st = tg__text_check_corpus(fn, hyps, refs, 1, n, out);
    if (st != TG_OK) return st;
    int64_t sum[TG__CHRF_STATS] = {0};
    st = tg__chrf_rows(hyps, refs, n, NULL, sum);
    if (st != TG_OK) return tg_error_prefix(st, "%s", fn);
    double dsum[TG__CHRF_STATS];
    for (int k = 0; k < TG__CHRF_STATS; k++)
        dsum[k] = (double)sum[k];
    tg_metric_chrf_result r;
    memset(&r, 0, sizeof r);
    double p, rc;
    r.score = tg__chrf_score(dsum, &p, &rc, &r.effective_order);
    r.precision = 100.0 * p;
    r.recall = 100.0 * rc;
    snprintf(r.signature, sizeof r.signature,
             "nrefs:1|case:mixed|eff:yes|nc:%d|nw:0|space:no|version:tgraph", CHAR_ORDER);
    *out = r;
    return TG_OK;
}
