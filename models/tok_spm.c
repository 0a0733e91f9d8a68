/* Sentencepiece BPE (the model datasets/prep_bible.py trains with spm_train --model_type=bpe):
 * its spm.model (a ModelProto in protobuf wire format) read for the pieces, their scores and
 * types, and the normalizer; encoding as sentencepiece does it:
 *  1. normalise: at each position the longest match of the precompiled character map (a
 *     darts-clone double-array trie over UTF-8, then the replacement strings: NFKC and the
 *     rule's extras for nmt_nfkc), else the character itself (bad UTF-8: U+FFFD, one byte);
 *     white space trimmed and collapsed (remove_extra_whitespaces), "▁" put first
 *     (add_dummy_prefix) and for every space (escape_whitespaces);
 *  2. one symbol per character, then repeatedly the adjacent pair whose concatenation is a
 *     piece of the highest score merged (ties: the leftmost), until no pair is a piece.
 * The pieces are the tokens; the model's vocabulary maps them to ids (a piece it lacks: <unk>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/tok-impl.h"

#define SPACE "\xE2\x96\x81" /* U+2581, sentencepiece's space */

typedef struct {
    const uint8_t *p, *end;
} pb;

static bool pb_varint(pb *b, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* the next field: its number, wire type, and for length-delimited ones the bytes (sub) or for
 * varints and fixed32 the value */
static bool pb_field(pb *b, uint32_t *field, int *wire, pb *sub, uint64_t *val) {
    uint64_t key;
    if (!pb_varint(b, &key)) return false;
    *field = (uint32_t)(key >> 3);
    *wire = (int)(key & 7);
    switch (*wire) {
    case 0: return pb_varint(b, val);
    case 1:
        if (b->end - b->p < 8) return false;
        b->p += 8;
        return true;
    case 2: {
        uint64_t n;
        if (!pb_varint(b, &n) || n > (uint64_t)(b->end - b->p)) return false;
        sub->p = b->p;
        sub->end = b->p + n;
        b->p += n;
        return true;
    }
    case 5:
        if (b->end - b->p < 4) return false;
        *val = (uint64_t)b->p[0] | (uint64_t)b->p[1] << 8 | (uint64_t)b->p[2] << 16 | (uint64_t)b->p[3] << 24;
        b->p += 4;
        return true;
    default: return false;
    }
}

enum { PIECE_NORMAL = 1, PIECE_UNKNOWN = 2, PIECE_CONTROL = 3, PIECE_USER = 4, PIECE_UNUSED = 5, PIECE_BYTE = 6 };

static tg_status spm_parse(tg_tokenizer *t, const char *origin) {
    pb b = {t->spm, t->spm + t->spm_len}, sub;
    uint32_t f;
    int w;
    uint64_t v;
    int64_t cap = 0;
    int model_type = 1; /* UNIGRAM, the proto's default */
    bool byte_fallback = false, ws_suffix = false;
    tg_status st = tg_vocab_new_empty(&t->spm_pieces);
    t->spm_dummy = t->spm_trim = t->spm_escape = true;
    while (st == TG_OK && b.p < b.end) {
        if (!pb_field(&b, &f, &w, &sub, &v)) return tg_error_set(TG_ERR_FORMAT, "%s: not a sentencepiece model (bad protobuf)", origin);
        if (f == 1 && w == 2) { /* SentencePiece { piece = 1; score = 2; type = 3 } */
            char piece[256] = "";
            float score = 0.0f;
            int type = PIECE_NORMAL;
            pb e = sub, s2;
            while (e.p < e.end) {
                if (!pb_field(&e, &f, &w, &s2, &v)) return tg_error_set(TG_ERR_FORMAT, "%s: a bad piece", origin);
                if (f == 1 && w == 2) {
                    size_t n = (size_t)(s2.end - s2.p);
                    if (n >= sizeof piece) return tg_error_set(TG_ERR_FORMAT, "%s: a piece of %zu bytes", origin, n);
                    memcpy(piece, s2.p, n);
                    piece[n] = '\0';
                } else if (f == 2 && w == 5) {
                    uint32_t u = (uint32_t)v;
                    memcpy(&score, &u, sizeof score);
                } else if (f == 3 && w == 0) type = (int)v;
            }
            if (t->spm_n == cap) {
                cap = cap ? 2 * cap : 1024;
                float *sc = realloc(t->spm_score, (size_t)cap * sizeof *sc);
                if (sc) t->spm_score = sc;
                int8_t *ty = realloc(t->spm_type, (size_t)cap);
                if (ty) t->spm_type = ty;
                if (!sc || !ty) return tg_error_set(TG_ERR_NOMEM, "%s: out of memory", origin);
            }
            int32_t id;
            if ((st = tg_vocab_add(t->spm_pieces, piece, &id))) return tg_error_prefix(st, "%s: piece %lld", origin, (long long)t->spm_n);
            if (id != t->spm_n) return tg_error_set(TG_ERR_FORMAT, "%s: piece '%s' appears twice", origin, piece);
            t->spm_score[t->spm_n] = score;
            t->spm_type[t->spm_n] = (int8_t)type;
            t->spm_n++;
            if (type == PIECE_USER)
                return tg_error_set(TG_ERR_UNSUPPORTED, "%s: user-defined symbols ('%s') are not supported", origin, piece);
        } else if (f == 2 && w == 2) { /* TrainerSpec */
            pb e = sub, s2;
            while (e.p < e.end) {
                if (!pb_field(&e, &f, &w, &s2, &v)) return tg_error_set(TG_ERR_FORMAT, "%s: a bad trainer_spec", origin);
                if (f == 3 && w == 0) model_type = (int)v;
                if (f == 24 && w == 0) ws_suffix = v != 0;
                if (f == 35 && w == 0) byte_fallback = v != 0;
            }
        } else if (f == 3 && w == 2) { /* NormalizerSpec */
            pb e = sub, s2;
            while (e.p < e.end) {
                if (!pb_field(&e, &f, &w, &s2, &v)) return tg_error_set(TG_ERR_FORMAT, "%s: a bad normalizer_spec", origin);
                if (f == 2 && w == 2) t->spm_map = s2.p, t->spm_map_len = (size_t)(s2.end - s2.p);
                if (f == 3 && w == 0) t->spm_dummy = v != 0;
                if (f == 4 && w == 0) t->spm_trim = v != 0;
                if (f == 5 && w == 0) t->spm_escape = v != 0;
            }
        }
    }
    if (st) return st;
    if (model_type != 2)
        return tg_error_set(TG_ERR_UNSUPPORTED, "%s: sentencepiece model type %d is not supported (BPE, 2)", origin, model_type);
    if (byte_fallback || ws_suffix)
        return tg_error_set(TG_ERR_UNSUPPORTED, "%s: byte fallback or whitespace as suffix is not supported", origin);
    if (t->spm_n < 1) return tg_error_set(TG_ERR_FORMAT, "%s: a sentencepiece model without pieces", origin);
    if (t->spm_map_len) { /* uint32 trie size, the trie's units, then the replacement strings */
        uint32_t n;
        memcpy(&n, t->spm_map, 4);
        if (t->spm_map_len < 4 || n % 4 || n > t->spm_map_len - 4)
            return tg_error_set(TG_ERR_FORMAT, "%s: a bad precompiled character map", origin);
        t->spm_trie = t->spm_map + 4;
        t->spm_trie_units = n / 4;
        t->spm_repl = (const char *)t->spm_map + 4 + n;
        t->spm_repl_len = t->spm_map_len - 4 - n;
    }
    return TG_OK;
}

static uint32_t unit(const tg_tokenizer *t, uint32_t i) {
    uint32_t u;
    memcpy(&u, t->spm_trie + 4 * (size_t)i, 4);
    return u;
}

/* darts-clone's common prefix search: the longest key of the trie that s[0..len) starts with,
 * its length (0: none) and value */
static size_t trie_longest(const tg_tokenizer *t, const uint8_t *s, size_t len, uint32_t *value) {
    if (!t->spm_trie_units) return 0;
    size_t best = 0;
    uint32_t u = unit(t, 0), pos = (u >> 10) << ((u & (1u << 9)) >> 6);
    for (size_t i = 0; i < len; i++) {
        pos ^= s[i];
        if (pos >= t->spm_trie_units) break;
        u = unit(t, pos);
        if ((u & ((1u << 31) | 0xFF)) != s[i]) break;
        pos ^= (u >> 10) << ((u & (1u << 9)) >> 6);
        if ((u >> 8) & 1) {
            if (pos >= t->spm_trie_units) break;
            best = i + 1;
            *value = unit(t, pos) & ((1u << 31) - 1);
        }
    }
    return best;
}

/* the normalised form of s[0..len) at *i: its bytes (*out, *n) and *i advanced */
static void norm_prefix(const tg_tokenizer *t, const char *s, size_t len, size_t *i, const char **out, size_t *n) {
    uint32_t value = 0;
    size_t m = trie_longest(t, (const uint8_t *)s + *i, len - *i, &value);
    if (m > 0 && value < t->spm_repl_len) {
        *out = t->spm_repl + value;
        *n = strnlen(*out, t->spm_repl_len - value);
        *i += m;
        return;
    }
    size_t at = *i;
    uint32_t cp = tg__utf8_next(s, len, i);
    if (cp == 0xFFFD && !(len - at >= 3 && !memcmp(s + at, "\xEF\xBF\xBD", 3))) {
        *out = "\xEF\xBF\xBD"; /* a byte of bad UTF-8 */
        *n = 3;
        return;
    }
    *out = s + at;
    *n = *i - at;
}

static tg_status normalize(const tg_tokenizer *t, const char *s, size_t len, tg__buf *o) {
    size_t i = 0;
    const char *p;
    size_t n;
    bool ok = true;
    if (t->spm_trim) /* leading white space */
        while (i < len) {
            size_t j = i;
            norm_prefix(t, s, len, &j, &p, &n);
            if (n != 1 || *p != ' ') break;
            i = j;
        }
    if (i == len) return TG_OK;
    if (t->spm_dummy) ok = tg__buf_put(o, t->spm_escape ? SPACE : " ", t->spm_escape ? 3 : 1);
    bool prev_space = t->spm_trim;
    while (ok && i < len) {
        norm_prefix(t, s, len, &i, &p, &n);
        if (prev_space)
            while (n > 0 && *p == ' ') p++, n--;
        for (size_t k = 0; ok && k < n; k++)
            ok = t->spm_escape && p[k] == ' ' ? tg__buf_put(o, SPACE, 3) : tg__buf_put(o, p + k, 1);
        if (n > 0) prev_space = p[n - 1] == ' ';
        prev_space = prev_space && t->spm_trim;
    }
    if (ok && t->spm_trim) { /* trailing white space */
        size_t sl = t->spm_escape ? 3 : 1;
        while (o->n >= sl && !memcmp(o->p + o->n - sl, t->spm_escape ? SPACE : " ", sl)) o->n -= sl;
    }
    return ok ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
}

/* the score of piece s[0..n) when it is one the merges may make (normal, unused or byte) */
static bool piece_score(const tg_tokenizer *t, const char *s, size_t n, char *buf, size_t cap, float *score) {
    if (n >= cap) return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    int32_t id = tg_vocab_find(t->spm_pieces, buf);
    if (id < 0 || t->spm_type[id] == PIECE_UNKNOWN || t->spm_type[id] == PIECE_CONTROL) return false;
    *score = t->spm_score[id];
    return true;
}

tg_status tg__spm_pieces(const tg_tokenizer *t, const char *s, size_t len, char ***toks, int64_t *ntok) {
    *toks = NULL;
    *ntok = 0;
    tg__buf o = {0};
    tg_status st = normalize(t, s, len, &o);
    size_t n = 0, *at = NULL, *sz = NULL;
    if (st == TG_OK && o.n) {
        at = malloc(o.n * sizeof *at), sz = malloc(o.n * sizeof *sz);
        if (!at || !sz) st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
        for (size_t i = 0; st == TG_OK && i < o.n;) { /* one symbol per character */
            size_t j = i;
            tg__utf8_next(o.p, o.n, &j);
            at[n] = i, sz[n++] = j - i;
            i = j;
        }
    }
    char buf[1024];
    /* ps[k], ok[k]: the score of merging symbols k and k + 1, and whether that makes a piece;
     * after a merge only the pairs beside it change */
    float *ps = st == TG_OK && n > 1 ? calloc(n, sizeof *ps) : NULL;
    bool *ok = ps ? calloc(n, sizeof *ok) : NULL;
    if (n > 1 && st == TG_OK && !ok) st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t k = 0; st == TG_OK && k + 1 < n; k++) ok[k] = piece_score(t, o.p + at[k], sz[k] + sz[k + 1], buf, sizeof buf, &ps[k]);
    while (st == TG_OK && n > 1) { /* the best merge, leftmost among equals */
        size_t best = n;
        for (size_t k = 0; k + 1 < n; k++)
            if (ok[k] && (best == n || ps[k] > ps[best])) best = k;
        if (best == n) break;
        sz[best] += sz[best + 1];
        memmove(at + best + 1, at + best + 2, (n - best - 2) * sizeof *at);
        memmove(sz + best + 1, sz + best + 2, (n - best - 2) * sizeof *sz);
        memmove(ps + best + 1, ps + best + 2, (n - best - 2) * sizeof *ps);
        memmove(ok + best + 1, ok + best + 2, (n - best - 2) * sizeof *ok);
        n--;
        if (best > 0) ok[best - 1] = piece_score(t, o.p + at[best - 1], sz[best - 1] + sz[best], buf, sizeof buf, &ps[best - 1]);
        if (best + 1 < n) ok[best] = piece_score(t, o.p + at[best], sz[best] + sz[best + 1], buf, sizeof buf, &ps[best]);
    }
    free(ps);
    free(ok);
    /* a run of pieces the model lacks is one piece, as sentencepiece's output merges them
     * (unknown either way; a known piece never holds an unknown character) */
    size_t m = 0;
    bool prev_unk = false;
    for (size_t k = 0; st == TG_OK && k < n; k++) {
        float sc;
        bool unk = sz[k] >= sizeof buf || !piece_score(t, o.p + at[k], sz[k], buf, sizeof buf, &sc);
        if (unk && prev_unk) sz[m - 1] += sz[k];
        else at[m] = at[k], sz[m++] = sz[k];
        prev_unk = unk;
    }
    n = m;
    char **r = st == TG_OK ? calloc(n ? n : 1, sizeof *r) : NULL;
    if (st == TG_OK && !r) st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t k = 0; st == TG_OK && k < n; k++)
        if (!(r[k] = strndup(o.p + at[k], sz[k]))) st = tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    free(o.p), free(at), free(sz);
    if (st) {
        for (size_t k = 0; r && k < n; k++) free(r[k]);
        free(r);
        return st;
    }
    *toks = r;
    *ntok = (int64_t)n;
    return TG_OK;
}

/* ---- base64, the metadata form of the model's bytes ---- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *tg__base64(const uint8_t *p, size_t n) {
    char *o = malloc(4 * ((n + 2) / 3) + 1), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *q++ = B64[v >> 18 & 63], *q++ = B64[v >> 12 & 63];
        *q++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *q = '\0';
    return o;
}

tg_status tg__unbase64(const char *s, uint8_t **out, size_t *n) {
    size_t len = strlen(s);
    uint8_t *o = malloc(len / 4 * 3 + 1);
    if (!o) return tg_error_set(TG_ERR_NOMEM, "tokenizer: out of memory");
    size_t k = 0;
    uint32_t v = 0;
    int bits = 0;
    for (size_t i = 0; i < len && s[i] != '='; i++) {
        const char *c = strchr(B64, s[i]);
        if (!c || !s[i]) {
            free(o);
            return tg_error_set(TG_ERR_FORMAT, "not base64 (byte %zu)", i);
        }
        v = v << 6 | (uint32_t)(c - B64);
        if ((bits += 6) >= 8) o[k++] = (uint8_t)(v >> (bits -= 8));
    }
    *out = o;
    *n = k;
    return TG_OK;
}

tg_status tg__spm_load(tg_tokenizer *t, const uint8_t *bytes, size_t len, const char *origin) {
    if (!(t->spm = malloc(len ? len : 1))) return tg_error_set(TG_ERR_NOMEM, "%s: out of memory", origin);
    memcpy(t->spm, bytes, len);
    t->spm_len = len;
    return spm_parse(t, origin);
}

void tg__spm_free(tg_tokenizer *t) {
    free(t->spm);
    free(t->spm_score);
    free(t->spm_type);
    tg_vocab_free(t->spm_pieces);
}
