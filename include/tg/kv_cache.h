/* tgraph — a key/value cache for incremental decoding.
 *
 * Graphs are define-then-run and die after a step, so the keys and values of earlier positions
 * live here, in backend memory, between the steps of a decoder: each step's graph feeds only
 * the new positions, asks for "the cached rows followed by this step's" per layer, and after
 * the run commits this step's rows. A token then costs one small step instead of a pass over
 * the whole prefix. The model zoo's decoder (include/tg/decode.h: greedy, beam search and
 * generation) runs on it too.
 *
 *   tg_kv_cache *c; tg_kv_cache_new(backend, layers, rows, max_len, width, &c);
 *   per step:  k_all = tg_kv_cache_extend(g, c, layer, 0, k_new);   // [rows, len + n, width]
 *              v_all = tg_kv_cache_extend(g, c, layer, 1, v_new);
 *              mask  = tg_causal_mask(g, n, len + n);               // the new n see the past
 *              ... tg_graph_run(g, backend); tg_kv_cache_commit(c); tg_graph_free(g);
 *
 * Beam search: before a step, tg_kv_cache_reorder(c, rows, parent) says which sequence each of
 * the step's rows continues (rows may be fewer than before, and a row may be continued by
 * several); nothing is copied. A step that reads the cached rows and the new ones apart (two
 * products instead of one over their concatenation) takes tg_kv_cache_past and
 * tg_kv_cache_append in place of tg_kv_cache_extend.
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

/* Key and value tables of `layers` layers for up to `rows` sequences of up to max_len positions
 * of `width` floats (e.g. heads * head width), on backend b (borrowed). The tables are not
 * initialised: only positions committed are ever read. */
TG_API tg_status tg_kv_cache_new(tg_backend *b, int layers, int64_t rows, int64_t max_len, int64_t width, tg_kv_cache **out);
TG_API void tg_kv_cache_free(tg_kv_cache *c);
/* Positions cached so far: the position of the next token. */
TG_API int64_t tg_kv_cache_len(const tg_kv_cache *c);
/* Rows of the step being built: after tg_kv_cache_reorder its rows, else those of the last
 * committed step (at first, the rows the cache was made for). */
TG_API int64_t tg_kv_cache_rows(const tg_kv_cache *c);
/* Start a step of `rows` rows (1..the rows the cache was made for), row r continuing the
 * sequence of row parent[r] of the last committed step (parent NULL: row r continues row r).
 * Forgets what was appended since the last commit (a step whose run failed). The reordering
 * takes effect at tg_kv_cache_commit. */
TG_API tg_status tg_kv_cache_reorder(tg_kv_cache *c, int64_t rows, const int32_t *parent);
/* In a step's graph: the cached keys (which = 0) or values (which = 1) of `layer` of every row
 * of the step, [rows, len, width]; NULL when nothing is cached (len 0: the graph is not marked)
 * or on an error (marked on the graph). */
TG_API tg_tensor *tg_kv_cache_past(tg_graph *g, tg_kv_cache *c, int layer, int which);
/* In a step's graph: x [rows, n, width], this step's keys or values of `layer`, kept and
 * appended by tg_kv_cache_commit; returns x. Every (layer, which) at most once per step, all
 * with the same n; len + n must not exceed max_len (an error on the graph). */
TG_API tg_tensor *tg_kv_cache_append(tg_graph *g, tg_kv_cache *c, int layer, int which, tg_tensor *x);
/* tg_kv_cache_append, and the cached rows followed by x: [rows, len + n, width] (x itself when
 * nothing is cached). */
TG_API tg_tensor *tg_kv_cache_extend(tg_graph *g, tg_kv_cache *c, int layer, int which, tg_tensor *x);
/* After tg_graph_run of the step's graph (before freeing it): append the step's rows of every
 * appended table and make the step's rows (and their order) the cached sequences; len grows by
 * n. Tables not appended to in a step hold nothing at its positions. */
TG_API tg_status tg_kv_cache_commit(tg_kv_cache *c);
/* Forget the cached positions (len = 0, the rows the cache was made for), e.g. to start new
 * sequences. */
TG_API void tg_kv_cache_reset(tg_kv_cache *c);

#ifdef __cplusplus
}
#endif
#endif
