/* A key/value cache for incremental decoding (tg/kv_cache.h). Each (layer, key or value) is a
 * store entry [max_len * slots, width] (slots: the rows the cache was made for), position-major:
 * the row that step row r appends at position p is table row p * slots + r. A row's history is
 * the list of table rows of its positions, kept on the host (hist): a step's rows are ordered
 * freely (tg_kv_cache_reorder: beam search keeps a row's ancestors' rows and writes its own new
 * positions at its own index), and nothing in the tables is ever moved. A step gathers each
 * row's history with tg_embedding (a row lookup: on the CPU the product that reads the gathered
 * rows reads the table itself, core/plan.c) and commit copies the step's rows (kept tensors)
 * into the table at positions len..len+n-1. The tables are not initialised: only rows written
 * by a commit are ever read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "core/store-impl.h"
#include "tg/kv_cache.h"

struct tg_kv_cache {
    tg_store *store;
    int layers;
    int64_t slots, max_len, width, len;
    int64_t rows;      /* rows of the sequences cached so far (the last committed step's) */
    int32_t *hist;     /* [slots, max_len]: the slot of row r's position p (table row p * slots + slot) */
    int32_t *next;     /* the same for the step's rows after tg_kv_cache_reorder */
    int64_t step_rows; /* rows of the step (tg_kv_cache_reorder); 0: rows, in order */
    int64_t step_n;    /* n of the current step (0: nothing appended yet) */
    tg_tensor **fresh; /* [layers * 2]: this step's kept rows, NULL where not appended */
    float *buf, *tbuf; /* host staging for one table's new rows, and them position-major */
    int64_t buf_cap;   /* floats each holds */
};

static int64_t entry(int layer, int which) { return (int64_t)layer * 2 + which; }

static void forget_step(tg_kv_cache *c) {
    c->step_rows = 0;
    c->step_n = 0;
    for (int i = 0; i < 2 * c->layers; i++) c->fresh[i] = NULL;
}

tg_status tg_kv_cache_new(tg_backend *b, int layers, int64_t rows, int64_t max_len, int64_t width, tg_kv_cache **out) {
    if (out) *out = NULL;
    if (!b || !out) return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_new: NULL argument");
    if (layers < 1 || rows < 1 || max_len < 1 || width < 1 || rows > INT32_MAX)
        return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_new: %d layers, %lld rows, max_len %lld, width %lld (each >= 1)",
                            layers, (long long)rows, (long long)max_len, (long long)width);
    tg_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return tg_error_set(TG_ERR_NOMEM, "tg_kv_cache_new: out of memory");
    c->layers = layers;
    c->slots = c->rows = rows;
    c->max_len = max_len;
    c->width = width;
    c->fresh = calloc((size_t)layers * 2, sizeof *c->fresh);
    c->hist = malloc((size_t)(rows * max_len) * sizeof *c->hist);
    c->next = malloc((size_t)(rows * max_len) * sizeof *c->next);
    /* a scratch store: caches are made and freed over and over (a decoder's, per batch) */
    tg_status st = c->fresh && c->hist && c->next ? tg__store_new_scratch(b, &c->store)
                                                  : tg_error_set(TG_ERR_NOMEM, "tg_kv_cache_new: out of memory");
    int64_t shape[2] = {max_len * rows, width};
    char name[32];
    for (int l = 0; st == TG_OK && l < layers; l++)
        for (int w = 0; st == TG_OK && w < 2; w++) {
            snprintf(name, sizeof name, "%c.%d", w ? 'v' : 'k', l);
            st = tg__store_add_unset(c->store, name, 2, shape);
        }
    if (st) {
        tg_kv_cache_free(c);
        return st;
    }
    *out = c;
    return TG_OK;
}

void tg_kv_cache_free(tg_kv_cache *c) {
    if (!c) return;
    tg_store_free(c->store);
    free(c->fresh);
    free(c->hist);
    free(c->next);
    free(c->buf);
    free(c->tbuf);
    free(c);
}

int64_t tg_kv_cache_len(const tg_kv_cache *c) { return c ? c->len : 0; }

int64_t tg_kv_cache_rows(const tg_kv_cache *c) {
    if (!c) return 0;
    return c->step_rows ? c->step_rows : c->rows;
}

void tg_kv_cache_reset(tg_kv_cache *c) {
    if (!c) return;
    c->len = 0;
    c->rows = c->slots;
    forget_step(c);
}

tg_status tg_kv_cache_reorder(tg_kv_cache *c, int64_t rows, const int32_t *parent) {
    if (!c) return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_reorder: cache is NULL");
    if (rows < 1 || rows > c->slots)
        return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_reorder: %lld rows (1..%lld, the rows the cache was made for)",
                            (long long)rows, (long long)c->slots);
    if (!parent && rows > c->rows)
        return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_reorder: %lld rows continue %lld without parents",
                            (long long)rows, (long long)c->rows);
    for (int64_t r = 0; parent && r < rows; r++)
        if (parent[r] < 0 || parent[r] >= c->rows)
            return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_reorder: row %lld: parent %d outside [0, %lld)",
                                (long long)r, parent[r], (long long)c->rows);
    forget_step(c);
    for (int64_t r = 0; c->len > 0 && r < rows; r++)
        memcpy(c->next + r * c->max_len, c->hist + (parent ? parent[r] : r) * c->max_len,
               (size_t)c->len * sizeof *c->next);
    c->step_rows = rows;
    return TG_OK;
}

static tg_tensor *bad_table(tg_graph *g, const tg_kv_cache *c, const char *who, int layer, int which) {
    if (!c) return tg__graph_fail(g, TG_ERR_INVALID, "%s: cache is NULL", who);
    if (layer < 0 || layer >= c->layers || which < 0 || which > 1)
        return tg__graph_fail(g, TG_ERR_INVALID, "%s: layer %d / table %d outside %d layers x {keys, values}", who,
                              layer, which, c->layers);
    return NULL;
}

tg_tensor *tg_kv_cache_past(tg_graph *g, tg_kv_cache *c, int layer, int which) {
    if (!g) return NULL;
    if (!c || layer < 0 || layer >= c->layers || which < 0 || which > 1)
        return bad_table(g, c, "tg_kv_cache_past", layer, which);
    if (c->len == 0) return NULL;
    int64_t R = tg_kv_cache_rows(c), len = c->len;
    const int32_t *h = c->step_rows ? c->next : c->hist;
    int32_t *ids = malloc((size_t)(R * len) * sizeof *ids);
    if (!ids) return tg__graph_fail(g, TG_ERR_NOMEM, "tg_kv_cache_past: out of memory");
    for (int64_t r = 0; r < R; r++)
        for (int64_t p = 0; p < len; p++) ids[r * len + p] = (int32_t)(p * c->slots + h[r * c->max_len + p]);
    int64_t s[2] = {R, len};
    tg_tensor *idt = tg_input(g, TG_DTYPE_I32, 2, s, ids);
    free(ids);
    char name[32];
    snprintf(name, sizeof name, "%c.%d", which ? 'v' : 'k', layer);
    return tg_embedding(tg_param(g, c->store, name), idt);
}

tg_tensor *tg_kv_cache_append(tg_graph *g, tg_kv_cache *c, int layer, int which, tg_tensor *x) {
    if (!g || !x) return NULL;
    if (!c || layer < 0 || layer >= c->layers || which < 0 || which > 1)
        return bad_table(g, c, "tg_kv_cache_append", layer, which);
    int64_t R = tg_kv_cache_rows(c), n = x->ndim == 3 ? x->shape[1] : -1;
    if (x->ndim != 3 || x->shape[0] != R || x->shape[2] != c->width || x->dtype != TG_DTYPE_F32) {
        char s[96];
        return tg__graph_fail(g, TG_ERR_SHAPE, "tg_kv_cache_append: new rows %s, the step has [%lld, n, %lld] f32",
                              tg_shape_str(s, sizeof s, x->ndim, x->shape), (long long)R, (long long)c->width);
    }
    if (c->step_n && n != c->step_n)
        return tg__graph_fail(g, TG_ERR_SHAPE, "tg_kv_cache_append: %lld new positions, this step's others have %lld",
                              (long long)n, (long long)c->step_n);
    if (c->fresh[entry(layer, which)])
        return tg__graph_fail(g, TG_ERR_INVALID, "tg_kv_cache_append: layer %d %s appended twice in one step", layer,
                              which ? "values" : "keys");
    if (c->len + n > c->max_len)
        return tg__graph_fail(g, TG_ERR_INVALID, "tg_kv_cache_append: %lld cached + %lld new positions exceed max_len %lld",
                              (long long)c->len, (long long)n, (long long)c->max_len);
    c->step_n = n;
    return c->fresh[entry(layer, which)] = tg_keep(x);
}

tg_tensor *tg_kv_cache_extend(tg_graph *g, tg_kv_cache *c, int layer, int which, tg_tensor *x) {
    tg_tensor *now = tg_kv_cache_append(g, c, layer, which, x);
    if (!now || c->len == 0) return now;
    tg_tensor *past[2] = {tg_kv_cache_past(g, c, layer, which), now};
    return tg_concat(past, 2, 1);
}

/* room for n floats in each staging buffer */
static bool staging(tg_kv_cache *c, int64_t n) {
    if (n <= c->buf_cap) return true;
    float *a = realloc(c->buf, (size_t)n * sizeof *a);
    if (a) c->buf = a;
    float *b = a ? realloc(c->tbuf, (size_t)n * sizeof *b) : NULL;
    if (b) c->tbuf = b;
    if (!a || !b) return false;
    c->buf_cap = n;
    return true;
}

tg_status tg_kv_cache_commit(tg_kv_cache *c) {
    if (!c) return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_commit: cache is NULL");
    const int64_t n = c->step_n, w = c->width, R = tg_kv_cache_rows(c), S = c->slots;
    tg_status st = n && !staging(c, R * n * w) ? tg_error_set(TG_ERR_NOMEM, "out of memory") : TG_OK;
    tg_backend *b = c->store->backend;
    for (int i = 0; st == TG_OK && n && i < 2 * c->layers; i++) {
        if (!c->fresh[i]) continue;
        st = tg_tensor_read(c->fresh[i], c->buf, (size_t)(R * n * w) * sizeof *c->buf);
        const float *rows = c->buf; /* [n, R, w]: position-major, as the table */
        if (n > 1) {
            for (int64_t r = 0; r < R; r++)
                for (int64_t j = 0; j < n; j++)
                    memcpy(c->tbuf + (j * R + r) * w, c->buf + (r * n + j) * w, (size_t)w * sizeof *c->buf);
            rows = c->tbuf;
        }
        float *table = c->store->p[i].data; /* entries were added in (layer, which) order */
        if (st == TG_OK && R == S) /* positions len..len+n-1 of every slot: one block */
            st = b->vt->copy_in(b, table + c->len * S * w, rows, (size_t)(n * R * w) * sizeof *rows);
        for (int64_t j = 0; st == TG_OK && R < S && j < n; j++)
            st = b->vt->copy_in(b, table + (c->len + j) * S * w, rows + j * R * w, (size_t)(R * w) * sizeof *rows);
    }
    if (st) return tg_error_prefix(st, "tg_kv_cache_commit");
    /* the step's rows become the cached sequences: their histories, then their new positions */
    if (c->step_rows) {
        int32_t *h = c->hist;
        c->hist = c->next;
        c->next = h;
    }
    c->rows = R;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < n; j++) c->hist[r * c->max_len + c->len + j] = (int32_t)r;
    c->len += n;
    forget_step(c);
    return TG_OK;
}
