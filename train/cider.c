/* CIDEr-D (Vedantam et al. 2015) as pycocoevalcap's Cider().compute_score computes it
 * (cider/cider_scorer.py), with one reference per sentence and the words as given (split on
 * whitespace, case kept; pycocoevalcap's PTB tokenizer is not part of it).
 *
 * For n = 1..4, each sentence becomes a vector over its n-grams g:
 *   v(g) = tf(g) · (log N − log max(1, df(g))),
 * tf the count of g in the sentence, N the number of sentences, df(g) the number of
 * references containing g (the IDF comes from the references of the corpus scored). Then
 *   sim_n = Σ_g min(v_hyp(g), v_ref(g)) · v_ref(g) / (|v_hyp| |v_ref|)     (the "clipping";
 *           the division only when both norms are non-zero)
 *           · exp(−(l_hyp − l_ref)² / (2 σ²)),   σ = 6   (the Gaussian length penalty),
 * and the sentence score is 10 · (sim_1 + sim_2 + sim_3 + sim_4) / 4; the corpus score is the
 * mean over sentences. pycocoevalcap's "length" l counts the sentence's BIGRAMS (it adds the
 * term frequencies where len(ngram) − 1 == 1), i.e. max(0, words − 1); reproduced as is. */
#include "tg/metrics.h"
#include "train/metric_words.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_N 4
#define SIGMA 6.0

/* n-grams carry word id + 1 in their slots, so a shorter n-gram (trailing 0s) never equals
 * a longer one. */
static size_t ngrams(const uint32_t *w, size_t nw, tg__text_ngram *out) {
    size_t m = 0;
    for (size_t k = 1; k <= MAX_N; k++) {
        for (size_t i = 0; i + k <= nw; i++) {
            memset(&out[m], 0, sizeof out[m]);
            for (size_t j = 0; j < k; j++)
                out[m].s[j] = w[i + j] + 1;
            m++;
        }
    }
    qsort(out, m, sizeof *out, tg__text_ngram_cmp);
    return m;
}

static int order_of(const tg__text_ngram *g) {
    int k = 0;
    while (k < MAX_N && g->s[k])
        k++;
    return k;
}

/* Document frequency of g: the count of g in the sorted distinct list u (with counts df). */
static double doc_freq(const tg__text_ngram *g, const tg__text_ngram *u, const uint32_t *df,
                       size_t nu) {
    size_t lo = 0, hi = nu;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = tg__text_ngram_cmp(&u[mid], g);
        if (c == 0) return df[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0.0;
}

/* A sentence's tf-idf vector: distinct n-grams g[k] (sorted) with weights v[k]; returns the
 * number of distinct n-grams and fills the norms per order. */
static size_t vectorise(tg__text_ngram *g, size_t m, double log_n, const tg__text_ngram *u,
                        const uint32_t *df, size_t nu, double *v, double norm[MAX_N]) {
    size_t d = 0;
    for (int k = 0; k < MAX_N; k++)
        norm[k] = 0.0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && tg__text_ngram_cmp(&g[j], &g[i]) == 0)
            j++;
        double idf = log(fmax(1.0, doc_freq(&g[i], u, df, nu)));
        g[d] = g[i];
        v[d] = (double)(j - i) * (log_n - idf);
        norm[order_of(&g[d]) - 1] += v[d] * v[d];
        d++;
        i = j;
    }
    for (int k = 0; k < MAX_N; k++)
        norm[k] = sqrt(norm[k]);
    return d;
}

/* The document frequencies (distinct n-grams u[k] of the references, df[k] references hold
 * u[k]) and the scratch for one sentence pair. */
typedef struct cider_ws {
    double log_n;
    tg__text_ngram *u;
    uint32_t *df;
    size_t nu;
    tg__text_ngram *gh, *gr;
    double *vh, *vr;
} cider_ws;

static double sentence(const tg__metric_corpus *c, size_t i, void *ctx) {
    cider_ws *w = ctx;
    size_t nh = c->len[2 * i], nr = c->len[2 * i + 1];
    double normh[MAX_N], normr[MAX_N], val[MAX_N] = {0};
    size_t mh = vectorise(w->gh, ngrams(c->ids + c->off[2 * i], nh, w->gh), w->log_n, w->u, w->df,
                          w->nu, w->vh, normh);
    size_t mr = vectorise(w->gr, ngrams(c->ids + c->off[2 * i + 1], nr, w->gr), w->log_n, w->u,
                          w->df, w->nu, w->vr, normr);
    for (size_t a = 0, b = 0; a < mh; a++) { /* both sorted: merge */
        while (b < mr && tg__text_ngram_cmp(&w->gr[b], &w->gh[a]) < 0)
            b++;
        if (b < mr && tg__text_ngram_cmp(&w->gr[b], &w->gh[a]) == 0)
            val[order_of(&w->gh[a]) - 1] += fmin(w->vh[a], w->vr[b]) * w->vr[b];
    }
    double delta = (double)(nh > 1 ? nh - 1 : 0) - (double)(nr > 1 ? nr - 1 : 0);
    for (int k = 0; k < MAX_N; k++) {
        if (normh[k] != 0 && normr[k] != 0) val[k] /= normh[k] * normr[k];
        val[k] *= pow(M_E, -(delta * delta) / (2 * SIGMA * SIGMA)); /* Python's np.e ** x */
    }
    return (val[0] + val[1] + val[2] + val[3]) / MAX_N * 10.0;
}

/* n-grams of all orders of a sentence of nw words */
static size_t count_ngrams(size_t nw) {
    size_t m = 0;
    for (size_t k = 1; k <= MAX_N; k++)
        m += nw >= k ? nw - k + 1 : 0;
    return m;
}

static void release(void *ctx) {
    cider_ws *w = ctx;
    if (!w) return;
    free(w->u);
    free(w->df);
    free(w->gh);
    free(w->gr);
    free(w->vh);
    free(w->vr);
    free(w);
}

/* Document frequencies: the distinct n-grams of each reference, pooled, sorted and counted. */
static tg_status setup(const tg__metric_corpus *c, void **ctx) {
    size_t n = c->n, total = 0, longest = count_ngrams(c->longest) + 1;
    for (size_t i = 0; i < n; i++)
        total += count_ngrams(c->len[2 * i + 1]);
    cider_ws *w = calloc(1, sizeof *w);
    *ctx = w;
    if (!w) return tg_error_set(TG_ERR_NOMEM, "out of memory");
    w->u = malloc((total + 1) * sizeof *w->u);
    w->df = malloc((total + 1) * sizeof *w->df);
    w->gh = malloc(longest * sizeof *w->gh);
    w->gr = malloc(longest * sizeof *w->gr);
    w->vh = malloc(longest * sizeof *w->vh);
    w->vr = malloc(longest * sizeof *w->vr);
    if (!w->u || !w->df || !w->gh || !w->gr || !w->vh || !w->vr)
        return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu n-grams)", total);
    tg__text_ngram *all = w->u;
    size_t na = 0, nu = 0;
    for (size_t i = 0; i < n; i++) {
        size_t base = na, m = ngrams(c->ids + c->off[2 * i + 1], c->len[2 * i + 1], all + base);
        for (size_t k = 0; k < m; k++) /* keep each n-gram once per reference (sorted: runs) */
            if (k == 0 || tg__text_ngram_cmp(&all[base + k], &all[base + k - 1]) != 0)
                all[na++] = all[base + k];
    }
    qsort(all, na, sizeof *all, tg__text_ngram_cmp);
    for (size_t k = 0; k < na; k++) {
        if (nu > 0 && tg__text_ngram_cmp(&all[nu - 1], &all[k]) == 0) {
            w->df[nu - 1]++;
        } else {
            all[nu] = all[k];
            w->df[nu++] = 1;
        }
    }
    w->nu = nu;
    w->log_n = log((double)n);
    return TG_OK;
}

tg_status tg_metric_cider(const char *const *hyps, const char *const *refs, size_t n,
                          tg_bleu_tokenize tok, double *sentence_scores,
                          tg_metric_mean_result *out) {
    static const tg__metric_mean_spec spec = {0,        0,       setup,
                                              sentence, release, "n:4|sigma:6|idf:refs"};
    return tg__metric_mean("tg_metric_cider", hyps, refs, n, tok, &spec, sentence_scores, out);
}
