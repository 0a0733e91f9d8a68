/* A key/value cache for incremental decoding (tg/kv_cache.h). Each (layer, key or value) is a
 * store entry [rows * max_len, width]: position p of sequence r is table row r * max_len + p.
 * A step gathers rows 0..len-1 of every sequence with tg_embedding (a row lookup) and
 * concatenates the step's own rows; commit copies the step's rows (kept tensors) into the
 * table at positions len..len+n-1. */
#include <stdio.h>
#include <stdlib.h>

#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "core/store-impl.h"
#include "tg/kv_cache.h"

struct tg_kv_cache {
    tg_store *store;
    int layers;
    int64_t rows, max_len, width, len;
    int64_t step_n;    /* n of the current step (0: nothing extended yet) */
    tg_tensor **fresh; /* [layers * 2]: this step's kept rows, NULL where not extended */
    float *buf;        /* host staging for one table's new rows */
};

static int64_t entry(int layer, int which) { return (int64_t)layer * 2 + which; }

tg_status tg_kv_cache_new(tg_backend *b, int layers, int64_t rows, int64_t max_len, int64_t width, tg_kv_cache **out) {
    if (out) *out = NULL;
    if (!b || !out) return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_new: NULL argument");
    if (layers < 1 || rows < 1 || max_len < 1 || width < 1)
        return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_new: %d layers, %lld rows, max_len %lld, width %lld (each >= 1)",
                            layers, (long long)rows, (long long)max_len, (long long)width);
    tg_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return tg_error_set(TG_ERR_NOMEM, "tg_kv_cache_new: out of memory");
    c->layers = layers;
    c->rows = rows;
    c->max_len = max_len;
    c->width = width;
    c->fresh = calloc((size_t)layers * 2, sizeof *c->fresh);
    c->buf = malloc((size_t)(rows * max_len * width) * sizeof *c->buf);
    tg_status st = c->fresh && c->buf ? tg_store_new(b, &c->store) : tg_error_set(TG_ERR_NOMEM, "tg_kv_cache_new: out of memory");
    int64_t shape[2] = {rows * max_len, width};
    char name[32];
    for (int l = 0; st == TG_OK && l < layers; l++)
        for (int w = 0; st == TG_OK && w < 2; w++) {
            snprintf(name, sizeof name, "%c.%d", w ? 'v' : 'k', l);
            st = tg_store_add(c->store, name, 2, shape, NULL, false);
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
    free(c->buf);
    free(c);
}

int64_t tg_kv_cache_len(const tg_kv_cache *c) { return c ? c->len : 0; }

void tg_kv_cache_reset(tg_kv_cache *c) {
    if (!c) return;
    c->len = 0;
    c->step_n = 0;
    for (int i = 0; i < 2 * c->layers; i++) c->fresh[i] = NULL;
}

tg_tensor *tg_kv_cache_extend(tg_graph *g, tg_kv_cache *c, int layer, int which, tg_tensor *x) {
    if (!g || !x) return NULL;
    if (!c) return tg__graph_fail(g, TG_ERR_INVALID, "tg_kv_cache_extend: cache is NULL");
    if (layer < 0 || layer >= c->layers || which < 0 || which > 1)
        return tg__graph_fail(
            g, TG_ERR_INVALID,
            "tg_kv_cache_extend: layer %d / table %d outside %d layers x {keys, values}", layer,
            which, c->layers);
    int64_t n = x->ndim == 3 ? x->shape[1] : -1;
    if (x->ndim != 3 || x->shape[0] != c->rows || x->shape[2] != c->width || x->dtype != TG_DTYPE_F32) {
        char s[96];
        return tg__graph_fail(
            g, TG_ERR_SHAPE, "tg_kv_cache_extend: new rows %s, the cache holds [%lld, n, %lld] f32",
            tg_shape_str(s, sizeof s, x->ndim, x->shape), (long long)c->rows, (long long)c->width);
    }
    if (c->step_n && n != c->step_n)
        return tg__graph_fail(
            g, TG_ERR_SHAPE, "tg_kv_cache_extend: %lld new positions, this step's others have %lld",
            (long long)n, (long long)c->step_n);
    if (c->fresh[entry(layer, which)])
        return tg__graph_fail(g, TG_ERR_INVALID,
                              "tg_kv_cache_extend: layer %d %s extended twice in one step", layer,
                              which ? "values" : "keys");
    if (c->len + n > c->max_len)
        return tg__graph_fail(
            g, TG_ERR_INVALID,
            "tg_kv_cache_extend: %lld cached + %lld new positions exceed max_len %lld",
            (long long)c->len, (long long)n, (long long)c->max_len);
    c->step_n = n;
    c->fresh[entry(layer, which)] = tg_keep(x);
    if (c->len == 0) return x;
    int32_t *ids = malloc((size_t)(c->rows * c->len) * sizeof *ids);
    if (!ids) return tg__graph_fail(g, TG_ERR_NOMEM, "tg_kv_cache_extend: out of memory");
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t p = 0; p < c->len; p++) ids[r * c->len + p] = (int32_t)(r * c->max_len + p);
    int64_t s[2] = {c->rows, c->len};
    tg_tensor *idt = tg_input(g, TG_DTYPE_I32, 2, s, ids);
    free(ids);
    char name[32];
    snprintf(name, sizeof name, "%c.%d", which ? 'v' : 'k', layer);
    tg_tensor *past[2] = {tg_embedding(tg_param(g, c->store, name), idt), x};
    return tg_concat(past, 2, 1);
}

tg_status tg_kv_cache_commit(tg_kv_cache *c) {
    if (!c) return tg_error_set(TG_ERR_INVALID, "tg_kv_cache_commit: cache is NULL");
    int64_t n = c->step_n, w = c->width;
    tg_status st = TG_OK;
    tg_backend *b = c->store->backend;
    for (int i = 0; st == TG_OK && i < 2 * c->layers; i++) {
        if (!c->fresh[i]) continue;
        st = tg_tensor_read(c->fresh[i], c->buf, (size_t)(c->rows * n * w) * sizeof *c->buf);
        float *table = c->store->p[i].data; /* entries were added in (layer, which) order */
        for (int64_t r = 0; st == TG_OK && r < c->rows; r++)
            st = b->vt->copy_in(b, table + (r * c->max_len + c->len) * w, c->buf + r * n * w, (size_t)(n * w) * sizeof *c->buf);
    }
    if (st) return tg_error_prefix(st, "tg_kv_cache_commit");
    c->len += n;
    c->step_n = 0;
    for (int i = 0; i < 2 * c->layers; i++) c->fresh[i] = NULL;
    return TG_OK;
}
