/* Vocabularies: an array of tokens and an open-addressing hash from token to id. */
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"

struct tg_vocab {
    char **tok;
    int64_t n, cap;
    int32_t *slot; /* hash table of ids, -1 empty */
    int64_t nslot;
};

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int64_t find_slot(const tg_vocab *v, const char *t) {
    uint64_t i = hash(t) & (uint64_t)(v->nslot - 1);
    while (v->slot[i] >= 0 && strcmp(v->tok[v->slot[i]], t) != 0) i = (i + 1) & (uint64_t)(v->nslot - 1);
    return (int64_t)i;
}

static tg_status grow(tg_vocab *v) {
    int64_t ns = v->nslot ? 2 * v->nslot : 256;
    int32_t *slot = malloc((size_t)ns * sizeof *slot);
    if (!slot) return tg_error_set(TG_ERR_NOMEM, "tg_vocab: out of memory");
    for (int64_t i = 0; i < ns; i++) slot[i] = -1;
    free(v->slot);
    v->slot = slot;
    v->nslot = ns;
    for (int64_t id = 0; id < v->n; id++) v->slot[find_slot(v, v->tok[id])] = (int32_t)id;
    return TG_OK;
}

void tg_vocab_free(tg_vocab *v) {
    if (!v) return;
    for (int64_t i = 0; i < v->n; i++) free(v->tok[i]);
    free(v->tok);
    free(v->slot);
    free(v);
}

tg_status tg_vocab_add(tg_vocab *v, const char *token, int32_t *id) {
    if (!v || !token || !token[0]) return tg_error_set(TG_ERR_INVALID, "tg_vocab_add: empty token");
    for (const char *p = token; *p; p++)
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            return tg_error_set(TG_ERR_INVALID, "tg_vocab_add: token '%s' contains white space", token);
    if (2 * (v->n + 1) > v->nslot) {
        tg_status st = grow(v);
        if (st) return st;
    }
    int64_t s = find_slot(v, token);
    if (v->slot[s] >= 0) {
        if (id) *id = v->slot[s];
        return TG_OK;
    }
    if (v->n >= INT32_MAX) return tg_error_set(TG_ERR_INVALID, "tg_vocab_add: vocabulary full");
    if (v->n == v->cap) {
        int64_t cap = v->cap ? 2 * v->cap : 64;
        char **tok = realloc(v->tok, (size_t)cap * sizeof *tok);
        if (!tok) return tg_error_set(TG_ERR_NOMEM, "tg_vocab_add: out of memory");
        v->tok = tok;
        v->cap = cap;
    }
    v->tok[v->n] = strdup(token);
    if (!v->tok[v->n]) return tg_error_set(TG_ERR_NOMEM, "tg_vocab_add: out of memory");
    v->slot[s] = (int32_t)v->n;
    if (id) *id = (int32_t)v->n;
    v->n++;
    return TG_OK;
}

tg_status tg_vocab_new(tg_vocab **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_vocab_new: out is NULL");
    tg_vocab *v = calloc(1, sizeof *v);
    if (!v) return tg_error_set(TG_ERR_NOMEM, "tg_vocab_new: out of memory");
    static const char *specials[4] = {"<pad>", "<unk>", "<s>", "</s>"};
    for (int i = 0; i < 4; i++) {
        tg_status st = tg_vocab_add(v, specials[i], NULL);
        if (st) {
            tg_vocab_free(v);
            return st;
        }
    }
    *out = v;
    return TG_OK;
}

tg_status tg_vocab_new_empty(tg_vocab **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_vocab_new_empty: out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_vocab_new_empty: out of memory");
}

int32_t tg_vocab_find(const tg_vocab *v, const char *token) {
    if (!v || !token || !v->nslot) return -1;
    int64_t s = find_slot(v, token);
    return v->slot[s];
}

int32_t tg_vocab_id(const tg_vocab *v, const char *token) {
    if (!v || !token || !v->nslot) return TG_UNK;
    int64_t s = find_slot(v, token);
    return v->slot[s] >= 0 ? v->slot[s] : TG_UNK;
}

const char *tg_vocab_token(const tg_vocab *v, int32_t id) {
    return (v && id >= 0 && id < v->n) ? v->tok[id] : NULL;
}

int64_t tg_vocab_size(const tg_vocab *v) { return v ? v->n : 0; }

tg_status tg_vocab_encode(const tg_vocab *v, const char *line, int32_t **ids, int64_t *n) {
    if (!v || !line || !ids || !n) return tg_error_set(TG_ERR_INVALID, "tg_vocab_encode: NULL argument");
    size_t len = strlen(line), cap = len / 2 + 1, k = 0;
    int32_t *out = malloc(cap * sizeof *out);
    char *buf = malloc(len + 1);
    if (!out || !buf) {
        free(out);
        free(buf);
        return tg_error_set(TG_ERR_NOMEM, "tg_vocab_encode: out of memory");
    }
    const char *p = line;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (!*p) break;
        size_t w = 0;
        while (p[w] && p[w] != ' ' && p[w] != '\t' && p[w] != '\r' && p[w] != '\n') w++;
        memcpy(buf, p, w);
        buf[w] = '\0';
        out[k++] = tg_vocab_id(v, buf);
        p += w;
    }
    free(buf);
    *ids = out;
    *n = (int64_t)k;
    return TG_OK;
}
