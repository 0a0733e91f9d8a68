/* Leaf helpers for model writers: tg_paramf, positions (arange) and attention masks, built on
 * the host at the call and copied in like any tg_input. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/tg-impl.h"

tg_tensor *tg_paramf(tg_graph *g, tg_store *store, const char *fmt, ...) {
    if (!g) return NULL;
    if (!fmt) return tg__graph_fail(g, TG_ERR_INVALID, "tg_paramf: format is NULL");
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof name)
        return tg__graph_fail(g, TG_ERR_INVALID, "tg_paramf: name '%s...' longer than %zu bytes",
                              name, sizeof name - 1);
    return tg_param(g, store, name);
}

/* A host buffer of n elements of 4 bytes, or NULL with the error on the graph. */
static void *host(tg_graph *g, const char *who, int64_t n) {
    void *p = n >= 0 ? malloc((size_t)(n > 0 ? n : 1) * 4) : NULL;
    if (!p)
        tg__graph_fail(g, n < 0 ? TG_ERR_SHAPE : TG_ERR_NOMEM, "%s: %s", who,
                       n < 0 ? "negative size" : "out of memory");
    return p;
}

tg_tensor *tg_arange(tg_graph *g, int64_t start, int64_t n) {
    if (!g) return NULL;
    if (start < INT32_MIN || n < 0 || start + n - 1 > INT32_MAX)
        return tg__graph_fail(g, TG_ERR_SHAPE, "tg_arange: [%lld, %lld) is not an i32 range",
                              (long long)start, (long long)(start + n));
    int32_t *v = host(g, "tg_arange", n);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) v[i] = (int32_t)(start + i);
    tg_tensor *t = tg_input(g, TG_DTYPE_I32, 1, &n, v);
    free(v);
    return t;
}

tg_tensor *tg_causal_mask(tg_graph *g, int64_t nq, int64_t nk) {
    if (!g) return NULL;
    if (nq < 1 || nk < nq)
        return tg__graph_fail(g, TG_ERR_SHAPE,
                              "tg_causal_mask: %lld queries over %lld keys (need 1 <= nq <= nk)",
                              (long long)nq, (long long)nk);
    float *m = host(g, "tg_causal_mask", nq * nk);
    if (!m) return NULL;
    for (int64_t i = 0; i < nq; i++)
        for (int64_t j = 0; j < nk; j++) m[i * nk + j] = j > nk - nq + i ? 1.0f : 0.0f;
    int64_t s[2] = {nq, nk};
    tg_tensor *t = tg_input(g, TG_DTYPE_F32, 2, s, m);
    free(m);
    return t;
}

tg_tensor *tg_padding_mask(tg_graph *g, const int32_t *ids, int64_t B, int64_t T, int32_t pad) {
    if (!g) return NULL;
    if (!ids) return tg__graph_fail(g, TG_ERR_INVALID, "tg_padding_mask: ids is NULL");
    if (B < 1 || T < 1)
        return tg__graph_fail(g, TG_ERR_SHAPE, "tg_padding_mask: shape [%lld,%lld] is empty",
                              (long long)B, (long long)T);
    float *m = host(g, "tg_padding_mask", B * T);
    if (!m) return NULL;
    for (int64_t i = 0; i < B * T; i++) m[i] = ids[i] == pad ? 1.0f : 0.0f;
    int64_t s[4] = {B, 1, 1, T};
    tg_tensor *t = tg_input(g, TG_DTYPE_F32, 4, s, m);
    free(m);
    return t;
}
