/* tgraph — a key/value cache for incremental decoding in hand-written models.
 *
 * Graphs are define-then-run and die after a step, so the keys and values of earlier positions
 * live here, in backend memory, between the steps of a decoder: each step's graph feeds only
 * the new positions, asks for "the cached rows followed by this step's" per layer, and after
 * the run commits this step's rows. A token then costs one small step instead of a pass over
 * the whole prefix. (The model zoo's own decoder, include/tg/decode.h, keeps its caches the
 * same way and also reorders them for beam search.)
 *
 *   tg_kv_cache *c; tg_kv_cache_new(backend, layers, rows, max_len, width, &c);
 *   per step:  k_all = tg_kv_cache_extend(g, c, layer, 0, k_new);   // [rows, len + n, width]
 *              v_all = tg_kv_cache_extend(g, c, layer, 1, v_new);
 *              mask  = tg_causal_mask(g, n, len + n);               // the new n see the past
 *              ... tg_graph_run(g, backend); tg_kv_cache_commit(c); tg_graph_free(g);
 */
#ifndef TG_KV_CACHE_H
#define TG_KV_CACHE_H

#include "tg/export.h"

#include <stdint.h>

#include "tg/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_kv_cache tg_kv_cache;

/* Key and value tables of `layers` layers for `rows` independent sequences of up to max_len
 * positions of `width` floats (e.g. heads * head width), zero-filled, on backend b (borrowed). */
TG_API tg_status tg_kv_cache_new(tg_backend *b, int layers, int64_t rows, int64_t max_len, int64_t width, tg_kv_cache **out);
TG_API void tg_kv_cache_free(tg_kv_cache *c);
/* Positions cached so far: the position of the next token. */
TG_API int64_t tg_kv_cache_len(const tg_kv_cache *c);
/* In a step's graph: the cached keys (which = 0) or values (which = 1) of `layer` followed by
 * x [rows, n, width], this step's own; returns [rows, len + n, width] (x itself when nothing is
 * cached). x is kept and appended by tg_kv_cache_commit. Every (layer, which) at most once per
 * step, all with the same n; len + n must not exceed max_len (an error on the graph). */
TG_API tg_tensor *tg_kv_cache_extend(tg_graph *g, tg_kv_cache *c, int layer, int which, tg_tensor *x);
/* After tg_graph_run of the step's graph (before freeing it): append the step's rows of every
 * extended table; len grows by n. */
TG_API tg_status tg_kv_cache_commit(tg_kv_cache *c);
/* Forget the cached positions (len = 0), e.g. to start a new sequence. */
TG_API void tg_kv_cache_reset(tg_kv_cache *c);

#ifdef __cplusplus
}
#endif
#endif
