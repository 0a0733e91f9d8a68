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

/* A word and its position in the concatenation [hyp words, ref words]. */
struct word_pos {
    tg__tok t;
    size_t pos;
};

/* Scratch reused across sentences. */
typedef struct bleu_ws {
    tg__buf hbuf, rbuf;      /* tokenized text (13a only) */
    tg__toks htok, rtok;     /* words */
    uint32_t *ids;           /* word ids: hyp words first, then ref words */
    struct word_pos *order;  /* words sorted for id assignment */
    size_t cap;              /* entries of ids and order */
    tg__ngram_scratch ngram; /* n-gram sorting */
} bleu_ws;

static void bleu_ws_free(bleu_ws *w) {
    tg__buf_free(&w->hbuf);
    tg__buf_free(&w->rbuf);
    tg__toks_free(&w->htok);
    tg__toks_free(&w->rtok);
    free(w->ids);
    free(w->order);
    tg__ngram_scratch_free(&w->ngram);
}

static int word_cmp(const void *a, const void *b) {
    const tg__tok *x = &((const struct word_pos *)a)->t, *y = &((const struct word_pos *)b)->t;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return memcmp(x->p, y->p, x->len);
}

/* Words of one sentence: rstrip (as BLEU._preprocess_segment), then tokenize. */
static tg_status words(const char *s, tg_bleu_tokenize tok, tg__buf *buf, tg__toks *out) {
    size_t len = tg__rstrip_len(s, strlen(s));
    if (tok == TG_BLEU_TOKENIZE_NONE) return tg__split(s, len, out);
    tg_status st = tg__tokenize_13a(s, len, buf);
    return st == TG_OK ? tg__split(buf->p, buf->len, out) : st;
}

/* Map equal words of hyp and ref to equal small integers, so n-grams become fixed-size keys:
 * sort all words by (length, bytes) and number the distinct runs. */
static tg_status assign_ids(bleu_ws *w) {
    size_t nh = w->htok.n, m = nh + w->rtok.n;
    if (m == 0) return TG_OK;
    if (m > UINT32_MAX)
        return tg_error_set(TG_ERR_INVALID, "sentence pair of %zu words is too long", m);
    if (m > w->cap) {
        uint32_t *ids = realloc(w->ids, m * sizeof *ids);
        if (ids) w->ids = ids;
        struct word_pos *ord = realloc(w->order, m * sizeof *ord);
        if (ord) w->order = ord;
        if (!ids || !ord) return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu words)", m);
        w->cap = m;
    }
    for (size_t i = 0; i < m; i++) {
        w->order[i].t = i < nh ? w->htok.v[i] : w->rtok.v[i - nh];
        w->order[i].pos = i;
    }
    qsort(w->order, m, sizeof *w->order, word_cmp);
    uint32_t id = 0;
    for (size_t i = 0; i < m; i++) {
        if (i > 0 && word_cmp(&w->order[i - 1], &w->order[i]) != 0) id++;
        w->ids[w->order[i].pos] = id;
    }
    return TG_OK;
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

tg_status tg_metric_bleu(const char *const *hyps, const char *const *refs, size_t n,
                         const tg_metric_bleu_options *opt, tg_metric_bleu_result *out) {
    static const char fn[] = "tg_metric_bleu";
    tg_status st = tg__check_corpus(fn, hyps, refs, 1, n, out);
    if (st != TG_OK) return st;
    tg_metric_bleu_options o = opt ? *opt : tg_metric_bleu_options_default();
    if (o.tokenize != TG_BLEU_TOKENIZE_NONE && o.tokenize != TG_BLEU_TOKENIZE_13A)
        return tg_error_set(TG_ERR_INVALID, "%s: unknown tokenize option %d", fn, (int)o.tokenize);
    if (o.smooth != TG_BLEU_SMOOTH_EXP && o.smooth != TG_BLEU_SMOOTH_NONE)
        return tg_error_set(TG_ERR_INVALID, "%s: unknown smooth option %d", fn, (int)o.smooth);

    tg_metric_bleu_result r;
    memset(&r, 0, sizeof r);
    bleu_ws w;
    memset(&w, 0, sizeof w);
    size_t i = 0;
    for (; st == TG_OK && i < n; i++) {
        st = words(hyps[i], o.tokenize, &w.hbuf, &w.htok);
        if (st == TG_OK) st = words(refs[i], o.tokenize, &w.rbuf, &w.rtok);
        if (st == TG_OK) st = assign_ids(&w);
        size_t nh = w.htok.n, nr = w.rtok.n;
        /* two empty lines have no n-grams (and no ids yet: w.ids + nh would offset NULL) */
        for (int k = 0; st == TG_OK && nh + nr > 0 && k < MAX_ORDER; k++) {
            int64_t ht, rt, m;
            st = tg__ngram_match(w.ids, nh, w.ids + nh, nr, k + 1, &w.ngram, &ht, &rt, &m);
            r.counts[k] += m;
            r.totals[k] += ht;
        }
        r.sys_len += (int64_t)nh;
        r.ref_len += (int64_t)nr;
    }
    bleu_ws_free(&w);
    if (st != TG_OK) return tg_error_prefix(st, "%s: sentence %zu", fn, i - 1);

    compute_bleu(&r, o.smooth);
    snprintf(r.signature, sizeof r.signature,
             "nrefs:1|case:mixed|eff:no|tok:%s|smooth:%s|version:tgraph",
             o.tokenize == TG_BLEU_TOKENIZE_13A ? "13a" : "none",
             o.smooth == TG_BLEU_SMOOTH_EXP ? "exp" : "none");
    *out = r;
    return TG_OK;
}
