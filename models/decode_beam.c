/* Greedy and beam search (docs/model.md §1 "Decoding") on the incremental decoder of decode.c.
 *
 * Scores: log P(Y|X) is the sum of log softmax over the whole target vocabulary (each step's
 * computed by the backend in float, summed in double on the host); a hypothesis scores log P(Y|X) /
 * lp(Y) with the GNMT penalty lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| counting </s>. <pad> and <s> are
 * never chosen (they are not outputs, and a generated <pad> would be masked as padding by
 * the decoder's self-attention); they still count in the softmax.
 *
 * Beam search, per sentence (the rule of the PyTorch reference benchmarks/peer/tg_torch.py):
 * every live hypothesis is expanded over the vocabulary; of the best 2K candidates by log P,
 * those ending in </s> and ranked within the first K finish (scored with the penalty), the others
 * refill the beam up to K. A sentence stops when K hypotheses have finished ("all beams
 * finished": early stop), when no live candidate is left, or at its maximum length, where the
 * live hypotheses are kept as unfinished ones that rank after every finished hypothesis.
 * All sentences of a batch advance together: a step feeds the live rows of every sentence. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"
#include "tg/decode.h"

tg_decode_options tg_decode_options_default(void) {
    tg_decode_options o = {.beam = 4, .alpha = 0.6, .max_len_a = 1.0, .max_len_b = 50, .nbest = 1,
                           .strategy = TG_DECODE_AUTO};
    return o;
}

double tg_decode_length_penalty(int64_t len, double alpha) { return pow((5.0 + (double)len) / 6.0, alpha); }

void tg_decode_free(tg_nbest *r, int64_t n) {
    if (!r) return;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; r[i].hyp && j < r[i].count; j++) free(r[i].hyp[j].ids);
        free(r[i].hyp);
    }
    free(r);
}

static tg_status check_options(const tg_decode_options *o) {
    if (o->strategy < TG_DECODE_AUTO || o->strategy > TG_DECODE_BEAM)
        return tg_error_set(TG_ERR_INVALID, "tg_decode: unknown strategy %d", (int)o->strategy);
    if (o->beam < 1 || o->beam > 100000)
        return tg_error_set(TG_ERR_INVALID, "tg_decode: beam size %lld outside [1, 100000]", (long long)o->beam);
    bool greedy = o->strategy == TG_DECODE_GREEDY || (o->strategy == TG_DECODE_AUTO && o->beam == 1);
    int64_t kmax = greedy ? 1 : o->beam;
    if (o->nbest < 1 || o->nbest > kmax)
        return tg_error_set(TG_ERR_INVALID, "tg_decode: nbest %lld outside [1, %lld]%s", (long long)o->nbest,
                            (long long)kmax, greedy ? " (greedy decoding gives one hypothesis)" : " (the beam size)");
    if (!isfinite(o->alpha) || o->alpha < 0)
        return tg_error_set(TG_ERR_INVALID, "tg_decode: length penalty alpha %g must be finite and >= 0", o->alpha);
    if (!isfinite(o->max_len_a) || o->max_len_a < 0 || o->max_len_b < 0)
        return tg_error_set(TG_ERR_INVALID, "tg_decode: maximum length a = %g, b = %lld must be >= 0", o->max_len_a,
                            (long long)o->max_len_b);
    return TG_OK;
}

/* Maximum output length, counting </s>: floor(a * S + b), capped by max_len, at least 1. */
static int64_t out_limit(const tg_model_config *c, const tg_decode_options *o, int64_t S) {
    double L = floor(o->max_len_a * (double)S + (double)o->max_len_b);
    if (L > (double)c->max_len) L = (double)c->max_len;
    return L < 1 ? 1 : (int64_t)L;
}

static bool allowed(int64_t w) { return w != TG_PAD && w != TG_BOS; }

static tg_status set_hyp(tg_hypothesis *h, const int32_t *ids, int64_t len, double logprob, bool finished,
                         double alpha) {
    h->ids = malloc((size_t)(len > 0 ? len : 1) * sizeof *h->ids);
    if (!h->ids) return tg_error_set(TG_ERR_NOMEM, "tg_decode: out of memory for a hypothesis");
    if (len > 0) memcpy(h->ids, ids, (size_t)len * sizeof *ids);
    h->len = len;
    h->logprob = logprob;
    h->finished = finished;
    h->score = logprob / tg_decode_length_penalty(len + (finished ? 1 : 0), alpha);
    return TG_OK;
}

/* ---- greedy ---- */

static tg_status greedy(tg_decoder *d, int64_t n, int64_t V, const int64_t *limit, int64_t lmax, double alpha,
                        tg_nbest *res) {
    int32_t *parent = malloc((size_t)n * sizeof *parent), *tok = malloc((size_t)n * sizeof *tok);
    int64_t *rs = malloc((size_t)n * sizeof *rs), *gen = calloc((size_t)n, sizeof *gen);
    int32_t *ids = malloc((size_t)(n * lmax) * sizeof *ids);
    double *logp = calloc((size_t)n, sizeof *logp);
    float *lp = malloc((size_t)(n * V) * sizeof *lp); /* a step's log-probabilities */
    tg_status st = TG_OK;
    if (!parent || !tok || !rs || !gen || !ids || !logp || !lp)
        st = tg_error_set(TG_ERR_NOMEM, "tg_decode: out of memory");
    int64_t rows = n;
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        parent[i] = (int32_t)i;
        tok[i] = TG_BOS;
        rs[i] = i;
    }
    while (st == TG_OK && rows > 0) {
        const float *lpv; /* the step's values, in lp or where the backend holds them */
        st = tg__decoder_step(d, rows, parent, tok, lp, true, &lpv);
        if (st) break;
        int64_t k = 0;
        for (int64_t r = 0; r < rows; r++) {
            const float *x = lpv + r * V;
            int64_t s = rs[r], best = -1;
            for (int64_t w = 0; w < V; w++) /* the first maximum, as argmax */
                if (allowed(w) && (best < 0 || x[w] > x[best])) best = w;
            logp[s] += (double)x[best];
            gen[s]++;
            bool eos = best == TG_EOS;
            if (!eos) ids[s * lmax + gen[s] - 1] = (int32_t)best;
            if (eos || gen[s] >= limit[s]) {
                res[s].count = 1;
                st = set_hyp(&res[s].hyp[0], ids + s * lmax, gen[s] - (eos ? 1 : 0), logp[s], eos, alpha);
                if (st) break;
                continue;
            }
            parent[k] = (int32_t)r;
            tok[k] = (int32_t)best;
            rs[k++] = s;
        }
        rows = k;
    }
    free(parent);
    free(tok);
    free(rs);
    free(gen);
    free(ids);
    free(logp);
    free(lp);
    return st;
}

/* ---- beam search ---- */

typedef struct {
    double v;    /* cumulative log P */
    int64_t row; /* the live row it extends */
    int32_t w;   /* the token */
} cand;

/* best first; ties by row, then token, so the order is deterministic */
static int cand_cmp(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    if (a->v != b->v) return a->v > b->v ? -1 : 1;
    if (a->row != b->row) return a->row < b->row ? -1 : 1;
    return (a->w > b->w) - (a->w < b->w);
}

/* finished / unfinished hypotheses collected for one sentence */
typedef struct {
    tg_hypothesis *h;
    int64_t n, cap;
    int64_t nfinished;
} hyp_list;

static tg_status list_add(hyp_list *l, const int32_t *ids, int64_t len, double logprob, bool finished,
                          double alpha) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 8;
        tg_hypothesis *h = realloc(l->h, (size_t)cap * sizeof *h);
        if (!h) return tg_error_set(TG_ERR_NOMEM, "tg_decode: out of memory");
        l->h = h;
        l->cap = cap;
    }
    tg_status st = set_hyp(&l->h[l->n], ids, len, logprob, finished, alpha);
    if (st == TG_OK) {
        l->n++;
        l->nfinished += finished;
    }
    return st;
}

/* a hypothesis and the order it was found in */
typedef struct {
    tg_hypothesis h;
    int64_t order;
} ordered_hyp;

/* finished before unfinished, then by score, then by the order found (a stable sort) */
static int ordered_cmp(const void *pa, const void *pb) {
    const ordered_hyp *a = pa, *b = pb;
    if (a->h.finished != b->h.finished) return a->h.finished ? -1 : 1;
    if (a->h.score != b->h.score) return a->h.score > b->h.score ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* Move the best nbest hypotheses of a list into a result; free the rest. */
static tg_status list_finish(hyp_list *l, int64_t nbest, tg_nbest *res) {
    ordered_hyp *o = malloc((size_t)(l->n > 0 ? l->n : 1) * sizeof *o);
    if (!o) return tg_error_set(TG_ERR_NOMEM, "tg_decode: out of memory");
    for (int64_t i = 0; i < l->n; i++) o[i] = (ordered_hyp){l->h[i], i};
    qsort(o, (size_t)l->n, sizeof *o, ordered_cmp);
    res->count = l->n < nbest ? l->n : nbest;
    for (int64_t i = 0; i < l->n; i++) {
        if (i < res->count)
            res->hyp[i] = o[i].h;
        else
            free(o[i].h.ids);
    }
    free(o);
    free(l->h);
    memset(l, 0, sizeof *l);
    return TG_OK;
}

/* Insert (x, w) into the descending top list (tv, tw) of at most c entries; equal values keep
 * the earlier (smaller) token first. */
static void top_insert(double *tv, int32_t *tw, int64_t *cnt, int64_t c, double x, int32_t w) {
    if (*cnt == c && !(x > tv[c - 1])) return;
    int64_t i = *cnt < c ? (*cnt)++ : c - 1;
    while (i > 0 && tv[i - 1] < x) {
        tv[i] = tv[i - 1];
        tw[i] = tw[i - 1];
        i--;
    }
    tv[i] = x;
    tw[i] = w;
}

/* The c best allowed tokens of a row of log-probabilities x[0..V) into (tv, tw), descending;
 * returns how many. Once the list is full only a value above its last can enter (top_insert), so
 * the row is first compared 64 values at a time against that bound (a test the compiler vectorises)
 * and a block with none above it is passed over: most of a vocabulary is. The same list as
 * top_insert over every value. */
int64_t tg__decode_row_top(const float *x, int64_t V, int64_t c, double *tv, int32_t *tw) {
    int64_t cnt = 0, w = 0;
    for (; w < V && cnt < c; w++)
        if (allowed(w)) top_insert(tv, tw, &cnt, c, (double)x[w], (int32_t)w);
    while (w < V) {
        const int64_t end = V - w < 64 ? V : w + 64;
        const float bound = (float)tv[c - 1]; /* exact: the list holds floats */
        int above = 0;
        for (int64_t j = w; j < end; j++)
            above |= x[j] > bound;
        if (above)
            for (int64_t j = w; j < end; j++)
                if (allowed(j)) top_insert(tv, tw, &cnt, c, (double)x[j], (int32_t)j);
        w = end;
    }
    return cnt;
}

typedef struct {
    int32_t *parent, *tok, *pre; /* pre: [max_rows, lmax] tokens generated so far */
    int64_t *rs;
    double *cum;
} beam_rows;

static void rows_free(beam_rows *b) {
    free(b->parent);
    free(b->tok);
    free(b->pre);
    free(b->rs);
    free(b->cum);
}

static bool rows_alloc(beam_rows *b, int64_t R, int64_t lmax) {
    b->parent = malloc((size_t)R * sizeof *b->parent);
    b->tok = malloc((size_t)R * sizeof *b->tok);
    b->pre = malloc((size_t)(R * lmax) * sizeof *b->pre);
    b->rs = malloc((size_t)R * sizeof *b->rs);
    b->cum = malloc((size_t)R * sizeof *b->cum);
    return b->parent && b->tok && b->pre && b->rs && b->cum;
}

static tg_status beam_search(tg_decoder *d, int64_t n, int64_t V, const int64_t *limit, int64_t lmax,
                             const tg_decode_options *o, tg_nbest *res) {
    int64_t K = o->beam, C = 2 * K, R = n * K;
    beam_rows cur = {0}, nxt = {0};
    hyp_list *lists = calloc((size_t)n, sizeof *lists);
    float *lp = malloc((size_t)(R * V) * sizeof *lp); /* a step's log-probabilities */
    cand *cands = malloc((size_t)(K * C) * sizeof *cands);
    double *tv = malloc((size_t)C * sizeof *tv);
    int32_t *tw = malloc((size_t)C * sizeof *tw);
    tg_status st = TG_OK;
    if (!rows_alloc(&cur, R, lmax) || !rows_alloc(&nxt, R, lmax) || !lists || !lp || !cands ||
        !tv || !tw)
        st = tg_error_set(TG_ERR_NOMEM, "tg_decode: out of memory for beam size %lld", (long long)K);
    int64_t rows = n;
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        cur.parent[i] = (int32_t)i;
        cur.tok[i] = TG_BOS;
        cur.rs[i] = i;
        cur.cum[i] = 0.0;
    }
    for (int64_t t = 0; st == TG_OK && rows > 0; t++) {
        const float *lpv; /* the step's values, in lp or where the backend holds them */
        st = tg__decoder_step(d, rows, cur.parent, cur.tok, lp, true, &lpv);
        if (st) break;
        int64_t nk = 0;
        for (int64_t r0 = 0; st == TG_OK && r0 < rows;) {
            int64_t s = cur.rs[r0], r1 = r0;
            while (r1 < rows && cur.rs[r1] == s) r1++; /* the live rows of sentence s */
            int64_t nc = 0;
            for (int64_t b = r0; b < r1; b++) {
                const int64_t cnt = tg__decode_row_top(lpv + b * V, V, C, tv, tw);
                for (int64_t j = 0; j < cnt; j++)
                    cands[nc++] = (cand){cur.cum[b] + tv[j], b, tw[j]};
            }
            qsort(cands, (size_t)nc, sizeof *cands, cand_cmp);
            if (nc > C) nc = C;
            hyp_list *l = &lists[s];
            int64_t live0 = nk;
            for (int64_t rank = 0; st == TG_OK && rank < nc; rank++) {
                const cand *c = &cands[rank];
                const int32_t *pre = cur.pre + c->row * lmax;
                if (c->w == TG_EOS) {
                    if (rank < K) st = list_add(l, pre, t, c->v, true, o->alpha);
                } else if (nk - live0 < K) {
                    nxt.parent[nk] = (int32_t)c->row;
                    nxt.tok[nk] = c->w;
                    nxt.rs[nk] = s;
                    nxt.cum[nk] = c->v;
                    memcpy(nxt.pre + nk * lmax, pre, (size_t)t * sizeof *pre);
                    nxt.pre[nk * lmax + t] = c->w;
                    nk++;
                }
                if (nk - live0 >= K && l->nfinished >= K) break;
            }
            bool done = l->nfinished >= K || nk == live0;
            if (!done && t + 1 >= limit[s]) { /* the length limit: live ones end unfinished */
                for (int64_t j = live0; st == TG_OK && j < nk; j++)
                    st = list_add(l, nxt.pre + j * lmax, t + 1, nxt.cum[j], false, o->alpha);
                done = true;
            }
            if (done) {
                nk = live0;
                if (st == TG_OK) st = list_finish(l, o->nbest, &res[s]);
            }
            r0 = r1;
        }
        beam_rows tmp = cur;
        cur = nxt;
        nxt = tmp;
        rows = nk;
    }
    for (int64_t i = 0; lists && i < n; i++) {
        for (int64_t j = 0; j < lists[i].n; j++) free(lists[i].h[j].ids);
        free(lists[i].h);
    }
    free(lists);
    rows_free(&cur);
    rows_free(&nxt);
    free(lp);
    free(cands);
    free(tv);
    free(tw);
    return st;
}

/* ---- entry points ---- */

static tg_status run(tg_model *m, const int32_t *const *src, const int64_t *src_n, int64_t n,
                     const tg_decode_options *opts, bool cached, tg_nbest **out) {
    if (out) *out = NULL;
    if (!m || !src || !src_n || !out || n < 1)
        return tg_error_set(TG_ERR_INVALID, "tg_decode: NULL argument or no sentences (n = %lld)", (long long)n);
    tg_decode_options o = opts ? *opts : tg_decode_options_default();
    tg_status st = check_options(&o);
    if (st) return st;
    bool use_greedy = o.strategy == TG_DECODE_GREEDY || (o.strategy == TG_DECODE_AUTO && o.beam == 1);
    int64_t K = use_greedy ? 1 : o.beam;
    const tg_model_config *c = tg_model_cfg(m);
    int64_t *limit = malloc((size_t)n * sizeof *limit), lmax = 1;
    tg_nbest *res = calloc((size_t)n, sizeof *res);
    if (!limit || !res) {
        free(limit);
        free(res);
        return tg_error_set(TG_ERR_NOMEM, "tg_decode: out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        limit[i] = out_limit(c, &o, src_n[i] > 0 ? src_n[i] : 0);
        if (limit[i] > lmax) lmax = limit[i];
        res[i].hyp = calloc((size_t)o.nbest, sizeof *res[i].hyp);
        if (!res[i].hyp) st = tg_error_set(TG_ERR_NOMEM, "tg_decode: out of memory");
    }
    tg_decoder *d = NULL;
    if (st == TG_OK) st = tg_decoder_new(m, src, src_n, n, n * K, lmax, cached, &d);
    if (st == TG_OK)
        st = use_greedy ? greedy(d, n, c->tgt_vocab, limit, lmax, o.alpha, res)
                        : beam_search(d, n, c->tgt_vocab, limit, lmax, &o, res);
    tg_decoder_free(d);
    free(limit);
    if (st != TG_OK) {
        tg_decode_free(res, n);
        return st;
    }
    *out = res;
    return TG_OK;
}

tg_status tg_decode(tg_model *m, const int32_t *const *src, const int64_t *src_n, int64_t n,
                    const tg_decode_options *opts, tg_nbest **out) {
    return run(m, src, src_n, n, opts, true, out);
}

tg_status tg_decode_full(tg_model *m, const int32_t *const *src, const int64_t *src_n, int64_t n,
                         const tg_decode_options *opts, tg_nbest **out) {
    return run(m, src, src_n, n, opts, false, out);
}
