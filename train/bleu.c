/* Corpus BLEU-4 (Papineni et al. 2002) as sacreBLEU 2.x computes it (metrics/bleu.py):
 * per sentence, rstrip + tokenize, count clipped n-gram matches against the single reference;
 * sum the statistics over the corpus; then BLEU.compute_bleu with its smoothing. Every
 * floating-point step follows the Python code's order of operations, so scores agree with
 * sacreBLEU's .score to within a few ulps. */
#include "tg/metrics.h"
#include "train/metrics-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ORDER 4

tg_metric_bleu_options tg_metric_bleu_options_default(void) {
    tg_metric_bleu_options o = {TG_BLEU_TOKENIZE_13A, TG_BLEU_SMOOTH_EXP};
    return o;
}

/* Scratch reused across sentences. */
typedef struct bleu_ws {
    tg__text_buf hbuf, rbuf;  /* tokenized text (13a only) */
    tg__text_toks htok, rtok; /* words */
    tg__text_toks all;        /* hyp words then ref words */
    uint32_t *ids;           /* their ids */
    size_t cap;              /* entries of ids */
    tg__text_ngram_scratch ngram; /* n-gram sorting */
} bleu_ws;

static void bleu_ws_free(bleu_ws *w) {
    tg__text_buf_free(&w->hbuf);
    tg__text_buf_free(&w->rbuf);
    tg__text_toks_free(&w->htok);
    tg__text_toks_free(&w->rtok);
    tg__text_toks_free(&w->all);
    free(w->ids);
    tg__text_ngram_scratch_free(&w->ngram);
}

/* One sentence's sufficient statistics (sacreBLEU's _extract_corpus_statistics row):
 * st[0..3] clipped matches of orders 1..4, st[4..7] hypothesis n-grams, st[8] hypothesis
 * words, st[9] reference words. Equal words of hyp and ref get equal small integers, so
 * n-grams become fixed-size keys. */
static tg_status sentence_stats(bleu_ws *w, const char *hyp, const char *ref, tg_bleu_tokenize tok,
                                int64_t st[TG__BLEU_STATS]) {
    tg_status s = tg__text_words(hyp, tok, &w->hbuf, &w->htok);
    if (s == TG_OK) s = tg__text_words(ref, tok, &w->rbuf, &w->rtok);
    if (s != TG_OK) return s;
    size_t nh = w->htok.n, nr = w->rtok.n, m = nh + nr;
    w->all.n = 0;
    for (size_t i = 0; s == TG_OK && i < m; i++) {
        const tg__text_tok *t = i < nh ? &w->htok.v[i] : &w->rtok.v[i - nh];
        s = tg__text_toks_push(&w->all, t->p, t->len);
    }
    if (s == TG_OK && m > w->cap) {
        uint32_t *ids = realloc(w->ids, m * sizeof *ids);
        if (!ids) return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu words)", m);
        w->ids = ids;
        w->cap = m;
    }
    uint32_t distinct;
    if (s == TG_OK) s = tg__text_intern(w->all.v, m, w->ids, &distinct);
    for (int k = 0; s == TG_OK && k < MAX_ORDER; k++) {
        int64_t ht, rt, mt;
        /* with no words at all ids may be NULL: never offset it (undefined behaviour) */
        const uint32_t *rids = m ? w->ids + nh : NULL;
        s = tg__text_ngram_match(w->ids, nh, rids, nr, k + 1, &w->ngram, &ht, &rt, &mt);
        st[k] = mt;
        st[MAX_ORDER + k] = ht;
    }
    st[8] = (int64_t)nh;
    st[9] = (int64_t)nr;
    return s;
}

tg_status tg__bleu_rows(const char *const *hyps, const char *const *refs, size_t n,
                        tg_bleu_tokenize tok, double *rows, int64_t sum[TG__BLEU_STATS]) {
    bleu_ws w;
    memset(&w, 0, sizeof w);
    tg_status st = TG_OK;
    size_t i = 0;
    for (; st == TG_OK && i < n; i++) {
        int64_t row[TG__BLEU_STATS];
        st = sentence_stats(&w, hyps[i], refs[i], tok, row);
        for (int k = 0; st == TG_OK && k < TG__BLEU_STATS; k++) {
            if (rows) rows[i * TG__BLEU_STATS + (size_t)k] = (double)row[k];
            if (sum) sum[k] += row[k];
        }
    }
    bleu_ws_free(&w);
    return st == TG_OK ? TG_OK : tg_error_prefix(st, "sentence %zu", i - 1);
}

static void from_sums(tg_metric_bleu_result *r, const int64_t sum[TG__BLEU_STATS]) {
    memset(r, 0, sizeof *r);
    for (int k = 0; k < MAX_ORDER; k++) {
        r->counts[k] = sum[k];
        r->totals[k] = sum[MAX_ORDER + k];
    }
    r->sys_len = sum[8];
    r->ref_len = sum[9];
}

/* BLEU.compute_bleu of sacreBLEU with max_ngram_order 4, effective_order False. */
static void compute_bleu(tg_metric_bleu_result *r, tg_bleu_smooth smooth) {
    r->bp = 1.0;
    if (r->sys_len < r->ref_len)
        r->bp = r->sys_len > 0 ? exp(1.0 - (double)r->ref_len / (double)r->sys_len) : 0.0;
    for (int k = 0; k < MAX_ORDER; k++)
        r->precisions[k] = 0.0;
    int any = 0;
    for (int k = 0; k < MAX_ORDER; k++)
        any |= r->counts[k] != 0;
    if (!any) { /* early stop when nothing matches (sacreBLEU #141) */
        r->score = 0.0;
        return;
    }
    double smooth_mteval = 1.0;
    for (int k = 0; k < MAX_ORDER; k++) {
        if (r->totals[k] == 0) break; /* this and higher orders keep precision 0 */
        if (r->counts[k] == 0) {
            if (smooth == TG_BLEU_SMOOTH_EXP) {
                smooth_mteval *= 2.0;
                r->precisions[k] = 100.0 / (smooth_mteval * (double)r->totals[k]);
            }
        } else {
            r->precisions[k] = 100.0 * (double)r->counts[k] / (double)r->totals[k];
        }
    }
    /* sacreBLEU's my_log floors log(0) at -9999999999, which makes exp() underflow to 0. */
    double sum = 0.0;
    for (int k = 0; k < MAX_ORDER; k++)
        sum += r->precisions[k] == 0.0 ? -9999999999.0 : log(r->precisions[k]);
    r->score = r->bp * exp(sum / MAX_ORDER);
}

double tg__bleu_score(const double sum[TG__BLEU_STATS], tg_bleu_smooth smooth) {
    int64_t s[TG__BLEU_STATS];
    for (int k = 0; k < TG__BLEU_STATS; k++)
        s[k] = (int64_t)sum[k];
    tg_metric_bleu_result r;
    from_sums(&r, s);
    compute_bleu(&r, smooth);
    return r.score;
}

tg_status tg_metric_bleu(const char *const *hyps, const char *const *refs, size_t n,
                         const tg_metric_bleu_options *opt, tg_metric_bleu_result *out) {
    static const char fn[] = "tg_metric_bleu";
    tg_status st = tg__text_check_corpus(fn, hyps, refs, 1, n, out);
    if (st != TG_OK) return st;
    tg_metric_bleu_options o = opt ? *opt : tg_metric_bleu_options_default();
    if (o.tokenize != TG_BLEU_TOKENIZE_NONE && o.tokenize != TG_BLEU_TOKENIZE_13A)
        return tg_error_set(TG_ERR_INVALID, "%s: unknown tokenize option %d", fn, (int)o.tokenize);
    if (o.smooth != TG_BLEU_SMOOTH_EXP && o.smooth != TG_BLEU_SMOOTH_NONE)
        return tg_error_set(TG_ERR_INVALID, "%s: unknown smooth option %d", fn, (int)o.smooth);

    int64_t sum[TG__BLEU_STATS] = {0};
    st = tg__bleu_rows(hyps, refs, n, o.tokenize, NULL, sum);
    if (st != TG_OK) return tg_error_prefix(st, "%s", fn);
    tg_metric_bleu_result r;
    from_sums(&r, sum);
    compute_bleu(&r, o.smooth);
    snprintf(r.signature, sizeof r.signature,
             "nrefs:1|case:mixed|eff:no|tok:%s|smooth:%s|version:tgraph",
             o.tokenize == TG_BLEU_TOKENIZE_13A ? "13a" : "none",
             o.smooth == TG_BLEU_SMOOTH_EXP ? "exp" : "none");
    *out = r;
    return TG_OK;
}
