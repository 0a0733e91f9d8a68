/* A corpus as word ids: the tokens of every hypothesis and reference (whitespace split, or
 * sacreBLEU's 13a tokenization), optionally lower-cased like Python's str.lower(), numbered so
 * that equal words share an id; plus, on request, NLTK Porter stems numbered the same way.
 * METEOR, ROUGE-L and CIDEr-D then compare integers. */
#include "train/metric_words.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tg__metric_corpus_free(tg__metric_corpus *c) {
    free(c->ids);
    free(c->off);
    free(c->len);
    free(c->stem);
    memset(c, 0, sizeof *c);
}

/* Lower-case s[0, len) (valid UTF-8) into out (appended). cp is scratch of *cap entries. */
static tg_status lower_utf8(const char *s, size_t len, uint32_t **cp, size_t *cap,
                            tg__text_buf *out) {
    if (3 * len > *cap) { /* len code points at most, and lower-casing at most doubles them */
        uint32_t *v = realloc(*cp, 3 * len * sizeof *v);
        if (!v) return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu characters)", len);
        *cp = v;
        *cap = 3 * len;
    }
    size_t pos = 0, n = 0;
    while (pos < len)
        tg__text_utf8_next(s, len, &pos, &(*cp)[n++]);
    size_t m = tg__text_lower(*cp, n, *cp + len);
    return tg__text_utf8_append(out, *cp + len, m);
}

/* Porter stems of the distinct words (their text in words[]), numbered into c->stem. */
static tg_status stem_ids(const tg__text_toks *distinct, tg__metric_corpus *c) {
    size_t m = distinct->n;
    tg__text_buf text = {0};
    size_t *soff = malloc((m ? m : 1) * sizeof *soff);
    uint32_t *cp = NULL;
    size_t cap = 0;
    tg__text_toks stems = {0};
    c->stem = malloc((m ? m : 1) * sizeof *c->stem);
    tg_status st = soff && c->stem ? TG_OK : tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == TG_OK && i < m; i++) {
        const tg__text_tok *w = &distinct->v[i];
        if (w->len > cap) {
            uint32_t *v = realloc(cp, w->len * sizeof *v);
            if (!v) {
                st = tg_error_set(TG_ERR_NOMEM, "out of memory");
                break;
            }
            cp = v;
            cap = w->len;
        }
        size_t pos = 0, n = 0;
        while (pos < w->len)
            tg__text_utf8_next(w->p, w->len, &pos, &cp[n++]);
        soff[i] = text.len;
        st = tg__text_utf8_append(&text, cp, tg__porter_stem(cp, n));
    }
    /* text is complete: now its addresses are stable */
    for (size_t i = 0; st == TG_OK && i < m; i++)
        st = tg__text_toks_push(&stems, text.p + soff[i],
                                (i + 1 < m ? soff[i + 1] : text.len) - soff[i]);
    uint32_t ns;
    if (st == TG_OK) st = tg__text_intern(stems.v, m, c->stem, &ns);
    tg__text_toks_free(&stems);
    tg__text_buf_free(&text);
    free(soff);
    free(cp);
    return st;
}

tg_status tg__metric_corpus_build(const char *const *hyps, const char *const *refs, size_t n,
                                  tg_bleu_tokenize tok, int lower, int stems,
                                  tg__metric_corpus *c) {
    memset(c, 0, sizeof *c);
    c->n = n;
    c->off = malloc(2 * n * sizeof *c->off);
    c->len = malloc(2 * n * sizeof *c->len);
    tg__text_buf tokbuf = {0}, text = {0};
    tg__text_toks words = {0}, all = {0}, distinct = {0};
    size_t *woff = NULL, wcap = 0, nw = 0;
    uint32_t *cp = NULL;
    size_t cpcap = 0;
    tg_status st = c->off && c->len ? TG_OK : tg_error_set(TG_ERR_NOMEM, "out of memory");
    /* pass 1: every sentence's words, lower-cased or not, appended to text */
    for (size_t s = 0; st == TG_OK && s < 2 * n; s++) {
        const char *line = s % 2 ? refs[s / 2] : hyps[s / 2];
        st = tg__text_words(line, tok, &tokbuf, &words);
        c->off[s] = nw;
        c->len[s] = words.n;
        if (st == TG_OK && nw + words.n + 1 > wcap) {
            size_t cap = 2 * (nw + words.n + 1);
            size_t *v = realloc(woff, cap * sizeof *v);
            if (!v)
                st = tg_error_set(TG_ERR_NOMEM, "out of memory");
            else
                woff = v, wcap = cap;
        }
        for (size_t k = 0; st == TG_OK && k < words.n; k++) {
            woff[nw++] = text.len;
            if (lower)
                st = lower_utf8(words.v[k].p, words.v[k].len, &cp, &cpcap, &text);
            else
                st = tg__text_buf_append(&text, words.v[k].p, words.v[k].len);
        }
        if (st != TG_OK)
            st = tg_error_prefix(st, "%s %zu", s % 2 ? "reference" : "hypothesis", s / 2);
    }
    /* pass 2: number the words */
    for (size_t k = 0; st == TG_OK && k < nw; k++)
        st = tg__text_toks_push(&all, text.p + woff[k],
                                (k + 1 < nw ? woff[k + 1] : text.len) - woff[k]);
    if (st == TG_OK && !(c->ids = malloc((nw ? nw : 1) * sizeof *c->ids)))
        st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    if (st == TG_OK) st = tg__text_intern(all.v, nw, c->ids, &c->n_words);
    for (size_t s = 0; st == TG_OK && s < 2 * n; s++)
        if (c->len[s] > c->longest) c->longest = c->len[s];
    if (st == TG_OK && stems) { /* one representative text per id, then their stems */
        tg__text_tok *rep = malloc((c->n_words ? c->n_words : 1) * sizeof *rep);
        if (!rep) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
        for (size_t k = 0; st == TG_OK && k < nw; k++)
            rep[c->ids[k]] = all.v[k];
        distinct.v = rep;
        distinct.n = distinct.cap = c->n_words;
        if (st == TG_OK) st = stem_ids(&distinct, c);
    }
    tg__text_toks_free(&distinct);
    tg__text_toks_free(&all);
    tg__text_toks_free(&words);
    tg__text_buf_free(&tokbuf);
    tg__text_buf_free(&text);
    free(woff);
    free(cp);
    if (st != TG_OK) tg__metric_corpus_free(c);
    return st;
}

tg_status tg__metric_mean(const char *fn, const char *const *hyps, const char *const *refs,
                          size_t n, tg_bleu_tokenize tok, const tg__metric_mean_spec *spec,
                          double *sentence_scores, tg_metric_mean_result *out) {
    tg_status st = tg__text_check_corpus(fn, hyps, refs, 1, n, out);
    if (st != TG_OK) return st;
    tg__metric_corpus c;
    st = tg__metric_corpus_build(hyps, refs, n, tok, spec->lower, spec->stems, &c);
    if (st != TG_OK) return tg_error_prefix(st, "%s", fn);
    void *ctx = NULL;
    if (spec->setup) st = spec->setup(&c, &ctx);
    double sum = 0.0;
    for (size_t i = 0; st == TG_OK && i < n; i++) {
        double v = spec->score(&c, i, ctx);
        if (sentence_scores) sentence_scores[i] = v;
        sum += v;
    }
    if (spec->release) spec->release(ctx);
    tg__metric_corpus_free(&c);
    if (st != TG_OK) return tg_error_prefix(st, "%s", fn);
    memset(out, 0, sizeof *out);
    out->score = sum / (double)n;
    snprintf(out->signature, sizeof out->signature, "nrefs:1|case:%s|tok:%s|%s|version:tgraph",
             spec->lower ? "lc" : "mixed", tok == TG_BLEU_TOKENIZE_13A ? "13a" : "none",
             spec->signature);
    return TG_OK;
}
