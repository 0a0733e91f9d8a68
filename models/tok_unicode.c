/* The Unicode a tokenizer needs: UTF-8 decoding, character classes, lower-casing and accent
 * stripping (tables generated into models/tok_unicode_tables.c by tools/make_unicode_tables.py),
 * and white space. */
#include <stdlib.h>
#include <string.h>

#include "models/tok-impl.h"

uint32_t tg__utf8_next(const char *s, size_t len, size_t *i) {
    const unsigned char *u = (const unsigned char *)s + *i;
    size_t left = len - *i;
    uint32_t c = u[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || (size_t)n > left) {
        *i += 1;
        return 0xFFFD;
    }
    if (n == 1) {
        *i += 1;
        return c;
    }
    uint32_t cp = c & (0x7Fu >> n);
    for (int k = 1; k < n; k++) {
        if ((u[k] & 0xC0) != 0x80) {
            *i += 1;
            return 0xFFFD;
        }
        cp = (cp << 6) | (u[k] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { /* overlong, surrogate */
        *i += 1;
        return 0xFFFD;
    }
    *i += (size_t)n;
    return cp;
}

int tg__utf8_put(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int32_t tg__uni_flags(uint32_t cp) {
    int32_t lo = 0, hi = tg__uni_class_n - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        if (cp < tg__uni_class[mid].lo) hi = mid - 1;
        else if (cp > tg__uni_class[mid].hi) lo = mid + 1;
        else return tg__uni_class[mid].flags;
    }
    return 0;
}

bool tg__uni_space(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

static int32_t find(const uint32_t *cps, int32_t n, uint32_t cp) {
    int32_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        if (cp < cps[mid]) hi = mid - 1;
        else if (cp > cps[mid]) lo = mid + 1;
        else return mid;
    }
    return -1;
}

const char *tg__uni_lower(uint32_t cp) {
    if (cp < 0x80) return NULL; /* the caller lower-cases ASCII itself */
    int32_t k = find(tg__uni_lower_cp, tg__uni_lower_n, cp);
    return k < 0 ? NULL : tg__uni_lower_to[k];
}

const char *tg__uni_strip(uint32_t cp, char *buf) {
    if (cp < 0xC0) return NULL;
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: L V (T) jamo (Unicode ch. 3.12) */
        uint32_t s = cp - 0xAC00, t = s % 28;
        int n = tg__utf8_put(0x1100 + s / 588, buf);
        n += tg__utf8_put(0x1161 + (s % 588) / 28, buf + n);
        if (t) n += tg__utf8_put(0x11A7 + t, buf + n);
        buf[n] = '\0';
        return buf;
    }
    int32_t k = find(tg__uni_strip_cp, tg__uni_strip_n, cp);
    return k < 0 ? NULL : tg__uni_strip_to[k];
}

bool tg__buf_put(tg__buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

bool tg__ids_put(tg__ids *l, int32_t id) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 32;
        int32_t *p = realloc(l->p, (size_t)cap * sizeof *p);
        if (!p) return false;
        l->p = p;
        l->cap = cap;
    }
    l->p[l->n++] = id;
    return true;
}
