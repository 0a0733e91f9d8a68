/* Text helpers shared by the metrics: UTF-8 decoding and validation, Python-compatible
 * whitespace splitting, byte buffers and clipped n-gram matching (see metrics-impl.h). */
#include "train/metrics-impl.h"

#include <stdlib.h>
#include <string.h>

int tg__text_utf8_next(const char *s, size_t len, size_t *pos, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = *pos;
    unsigned c = u[i];
    if (c < 0x80) {
        *cp = c;
        *pos = i + 1;
        return 0;
    }
    /* Number of continuation bytes and the allowed range of the first one: the narrowed
     * ranges after E0, ED, F0 and F4 exclude overlong forms, UTF-16 surrogates
     * (U+D800..U+DFFF) and code points above U+10FFFF (RFC 3629, Table 3-7 of Unicode). */
    int extra;
    unsigned lo = 0x80, hi = 0xBF;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        extra = 1;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        extra = 2;
        v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        extra = 3;
        v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return -1;
    }
    if (len - i - 1 < (size_t)extra) return -1;
    for (int k = 1; k <= extra; k++) {
        unsigned b = u[i + (size_t)k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return -1;
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    *pos = i + 1 + (size_t)extra;
    return 0;
}

tg_status tg__text_utf8_check(const char *fn, const char *what, size_t idx, const char *s) {
    size_t len = strlen(s), pos = 0;
    uint32_t cp;
    while (pos < len) {
        if (tg__text_utf8_next(s, len, &pos, &cp) != 0)
            return tg_error_set(TG_ERR_FORMAT,
                                "%s: %s[%zu] is not valid UTF-8 (byte 0x%02x at offset %zu)", fn,
                                what, idx, (unsigned)(unsigned char)s[pos], pos);
    }
    return TG_OK;
}

int tg__text_is_space(uint32_t cp) {
    /* Python's str.isspace(): bidi class WS, B or S, or category Zs. */
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    if (cp < 0x85) return 0;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t tg__text_rstrip_len(const char *s, size_t len) {
    size_t pos = 0, end = 0;
    uint32_t cp;
    while (pos < len) {
        if (tg__text_utf8_next(s, len, &pos, &cp) != 0) {
            pos++; /* callers validate first; never loop forever on bad input */
            end = pos;
            continue;
        }
        if (!tg__text_is_space(cp)) end = pos;
    }
    return end;
}

tg_status tg__text_toks_push(tg__text_toks *out, const char *p, size_t len) {
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 32;
        tg__text_tok *v = realloc(out->v, cap * sizeof *v);
        if (!v) return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu words)", cap);
        out->v = v;
        out->cap = cap;
    }
    out->v[out->n].p = p;
    out->v[out->n].len = len;
    out->n++;
    return TG_OK;
}

tg_status tg__text_split(const char *s, size_t len, tg__text_toks *out) {
    out->n = 0;
    size_t pos = 0, start = 0;
    int in_word = 0;
    while (pos < len) {
        size_t here = pos;
        uint32_t cp;
        if (tg__text_utf8_next(s, len, &pos, &cp) != 0) {
            pos = here + 1; /* invalid byte: part of a word (callers validate first) */
            cp = 0xFFFD;
        }
        if (tg__text_is_space(cp)) {
            if (in_word) {
                tg_status st = tg__text_toks_push(out, s + start, here - start);
                if (st != TG_OK) return st;
                in_word = 0;
            }
        } else if (!in_word) {
            in_word = 1;
            start = here;
        }
    }
    return in_word ? tg__text_toks_push(out, s + start, len - start) : TG_OK;
}

void tg__text_toks_free(tg__text_toks *t) {
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

tg_status tg__text_buf_reserve(tg__text_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return TG_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu bytes)", cap);
    b->p = p;
    b->cap = cap;
    return TG_OK;
}

tg_status tg__text_buf_append(tg__text_buf *b, const char *p, size_t n) {
    tg_status st = tg__text_buf_reserve(b, n);
    if (st != TG_OK) return st;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return TG_OK;
}

void tg__text_buf_free(tg__text_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

int tg__text_ngram_cmp(const void *a, const void *b) {
    const tg__text_ngram *x = a, *y = b;
    for (int k = 0; k < TG__NGRAM_MAX; k++)
        if (x->s[k] != y->s[k]) return x->s[k] < y->s[k] ? -1 : 1;
    return 0;
}

/* Fill *dst (grown as needed) with the sorted order-n n-grams of sym[0, ns); returns count. */
static tg_status collect(const uint32_t *sym, size_t ns, int n, tg__text_ngram **dst, size_t *cap,
                         size_t *count) {
    size_t m = ns >= (size_t)n ? ns - (size_t)n + 1 : 0;
    *count = m;
    if (m == 0) return TG_OK;
    if (m > *cap) {
        tg__text_ngram *v = realloc(*dst, m * sizeof *v);
        if (!v) return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu n-grams)", m);
        *dst = v;
        *cap = m;
    }
    for (size_t i = 0; i < m; i++) {
        tg__text_ngram *g = &(*dst)[i];
        memset(g, 0, sizeof *g);
        memcpy(g->s, sym + i, (size_t)n * sizeof *sym);
    }
    qsort(*dst, m, sizeof **dst, tg__text_ngram_cmp);
    return TG_OK;
}

tg_status tg__text_ngram_match(const uint32_t *hyp, size_t nh, const uint32_t *ref, size_t nr,
                               int n, tg__text_ngram_scratch *sc, int64_t *hyp_total,
                               int64_t *ref_total, int64_t *match) {
    size_t mh, mr;
    tg_status st = collect(hyp, nh, n, &sc->h, &sc->hcap, &mh);
    if (st == TG_OK) st = collect(ref, nr, n, &sc->r, &sc->rcap, &mr);
    if (st != TG_OK) return st;
    /* Merge the two sorted lists run by run: each distinct n-gram contributes
     * min(#hyp, #ref), the clipped count of Papineni et al. (2002). */
    int64_t m = 0;
    size_t i = 0, j = 0;
    while (i < mh && j < mr) {
        int c = tg__text_ngram_cmp(&sc->h[i], &sc->r[j]);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            size_t i2 = i, j2 = j;
            while (i2 < mh && tg__text_ngram_cmp(&sc->h[i2], &sc->h[i]) == 0)
                i2++;
            while (j2 < mr && tg__text_ngram_cmp(&sc->r[j2], &sc->r[j]) == 0)
                j2++;
            m += (int64_t)((i2 - i) < (j2 - j) ? (i2 - i) : (j2 - j));
            i = i2;
            j = j2;
        }
    }
    *hyp_total = (int64_t)mh;
    *ref_total = (int64_t)mr;
    *match = m;
    return TG_OK;
}

void tg__text_ngram_scratch_free(tg__text_ngram_scratch *sc) {
    free(sc->h);
    free(sc->r);
    memset(sc, 0, sizeof *sc);
}

tg_status tg__text_check_corpus(const char *fn, const char *const *hyps, const char *const *refs,
                                int check_refs, size_t n, const void *out) {
    if (!hyps) return tg_error_set(TG_ERR_INVALID, "%s: hyps is NULL", fn);
    if (check_refs && !refs) return tg_error_set(TG_ERR_INVALID, "%s: refs is NULL", fn);
    if (!out) return tg_error_set(TG_ERR_INVALID, "%s: out is NULL", fn);
    if (n == 0) return tg_error_set(TG_ERR_INVALID, "%s: n = 0 (empty corpus)", fn);
    for (size_t i = 0; i < n; i++) {
        if (!hyps[i]) return tg_error_set(TG_ERR_INVALID, "%s: hyps[%zu] is NULL", fn, i);
        tg_status st = tg__text_utf8_check(fn, "hyps", i, hyps[i]);
        if (st != TG_OK) return st;
        if (!check_refs) continue;
        if (!refs[i]) return tg_error_set(TG_ERR_INVALID, "%s: refs[%zu] is NULL", fn, i);
        st = tg__text_utf8_check(fn, "refs", i, refs[i]);
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

tg_status tg__text_utf8_append(tg__text_buf *b, const uint32_t *cp, size_t n) {
    tg_status st = tg__text_buf_reserve(b, 4 * n);
    if (st != TG_OK) return st;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[i];
        unsigned char *o = (unsigned char *)b->p + b->len;
        if (c < 0x80) {
            o[0] = (unsigned char)c;
            b->len += 1;
        } else if (c < 0x800) {
            o[0] = (unsigned char)(0xC0 | (c >> 6));
            o[1] = (unsigned char)(0x80 | (c & 0x3F));
            b->len += 2;
        } else if (c < 0x10000) {
            o[0] = (unsigned char)(0xE0 | (c >> 12));
            o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            o[2] = (unsigned char)(0x80 | (c & 0x3F));
            b->len += 3;
        } else {
            o[0] = (unsigned char)(0xF0 | (c >> 18));
            o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            o[3] = (unsigned char)(0x80 | (c & 0x3F));
            b->len += 4;
        }
    }
    b->p[b->len] = '\0';
    return TG_OK;
}

tg_status tg__text_words(const char *s, tg_bleu_tokenize tok, tg__text_buf *buf,
                         tg__text_toks *out) {
    size_t len = tg__text_rstrip_len(s, strlen(s));
    if (tok == TG_BLEU_TOKENIZE_NONE) return tg__text_split(s, len, out);
    tg_status st = tg__tokenize_13a(s, len, buf);
    return st == TG_OK ? tg__text_split(buf->p, buf->len, out) : st;
}

/* A word and its index in the caller's list, for sorting. */
struct word_pos {
    tg__text_tok t;
    size_t pos;
};

static int word_cmp(const void *a, const void *b) {
    const tg__text_tok *x = &((const struct word_pos *)a)->t, *y = &((const struct word_pos *)b)->t;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return memcmp(x->p, y->p, x->len);
}

tg_status tg__text_intern(const tg__text_tok *w, size_t m, uint32_t *ids, uint32_t *n_distinct) {
    if (m > UINT32_MAX) return tg_error_set(TG_ERR_INVALID, "%zu words are too many", m);
    *n_distinct = 0;
    if (m == 0) return TG_OK;
    struct word_pos *order = malloc(m * sizeof *order);
    if (!order) return tg_error_set(TG_ERR_NOMEM, "out of memory (%zu words)", m);
    for (size_t i = 0; i < m; i++) {
        order[i].t = w[i];
        order[i].pos = i;
    }
    qsort(order, m, sizeof *order, word_cmp);
    uint32_t id = 0;
    for (size_t i = 0; i < m; i++) {
        if (i > 0 && word_cmp(&order[i - 1], &order[i]) != 0) id++;
        ids[order[i].pos] = id;
    }
    *n_distinct = id + 1;
    free(order);
    return TG_OK;
}
