/* tgraph — graphs: define, then run.
 *
 * A model builds a fresh graph for every batch: leaves (inputs, constants, parameters from a
 * store), then ops (ops.h), then optionally tg_backward (autograd.h). tg_graph_run plans memory
 * for the whole graph (forward and backward together) and executes it on a backend.
 *
 * Errors while building are recorded on the graph: a graph-building call that fails returns
 * NULL and later calls given NULL return NULL too, so a builder checks once, at the end, with
 * tg_graph_status(). Graphs grow as needed: there is no node limit and no arena to size. */
#ifndef TG_GRAPH_H
#define TG_GRAPH_H

#include "tg/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg/backend.h"
#include "tg/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_graph tg_graph;
typedef struct tg_store tg_store;

/* A new empty graph; NULL only when out of memory. Free with tg_graph_free. */
TG_API tg_graph *tg_graph_new(void);
/* Free the graph, its tensors and its workspace (NULL is allowed). */
TG_API void tg_graph_free(tg_graph *g);

/* TG_OK, or the first error recorded while building (its message in *msg if msg != NULL;
 * the string is owned by the graph). */
TG_API tg_status tg_graph_status(const tg_graph *g, const char **msg);

/* Training mode (default true): dropout active. In inference mode dropout is the identity. */
TG_API void tg_graph_set_training(tg_graph *g, bool training);
TG_API bool tg_graph_training(const tg_graph *g);
/* Gradient mode (default true): parameters require gradients. Off = inference mode: no tensor
 * requires a gradient and tg_backward is an error. */
TG_API void tg_graph_set_grad_enabled(tg_graph *g, bool enabled);
/* Seed of the counter-based RNG that dropout draws from (default 0). Each dropout op gets its
 * own stream id in creation order, so the same seed and graph give the same masks on every
 * backend. */
TG_API void tg_graph_set_seed(tg_graph *g, uint64_t seed);
/* A function tg_graph_run calls when a parameter's gradient for this graph is final: after the
 * node that accumulates it into the store has been issued to the backend (on the CPU: done; on
 * a GPU: enqueued on the backend's stream, so work enqueued after it sees the gradient). Once per
 * parameter that receives a gradient; none in a graph without tg_backward. NULL: no hook. Used
 * to start gradient all-reduces while backward goes on (tg_dist_grad_ready). */
typedef void (*tg_grad_hook)(void *ctx, const tg_store *store, int64_t param);
TG_API void tg_graph_set_grad_hook(tg_graph *g, tg_grad_hook fn, void *ctx);
/* Memory planner on (default) or off (every intermediate gets its own buffer: for tests). */
TG_API void tg_graph_set_planner(tg_graph *g, bool enabled);
/* Elementwise fusion on (default) or off. With the planner on, a backend that can (the CPU)
 * runs chains of elementwise ops (bias + activation + dropout, dropout + residual add, scale +
 * masks + softmax, and their gradients) as one pass over tiles that stay in cache; an
 * intermediate that nothing else reads gets no buffer. Results are bit-identical either way
 * (docs/design.md). */
TG_API void tg_graph_set_fusion(tg_graph *g, bool enabled);

/* Leaves. Input data is copied at the call (the caller keeps ownership of `data`). */
TG_API tg_tensor *tg_input(tg_graph *g, tg_dtype dtype, int ndim, const int64_t *shape, const void *data);
/* A tensor filled with `value`. */
TG_API tg_tensor *tg_full(tg_graph *g, float value, int ndim, const int64_t *shape);
/* The parameter `name` of a store, as a leaf of this graph. If the graph is in gradient mode
 * and the parameter is trainable, tg_backward accumulates its gradient into the store. */
TG_API tg_tensor *tg_param(tg_graph *g, tg_store *store, const char *name);

/* tg_param with a printf-style name: tg_paramf(g, store, "layers.%d.w", i). A name longer than
 * 127 bytes is an error recorded on the graph. */
TG_API tg_tensor *tg_paramf(tg_graph *g, tg_store *store, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- leaves that model writers reach for (values computed on the host at the call) ---- */
/* i32 [n]: start, start+1, ..., start+n-1 (the positions of a learned position table). */
TG_API tg_tensor *tg_arange(tg_graph *g, int64_t start, int64_t n);
/* f32 [nq, nk] causal mask, 1 = masked: the nq queries are the last nq of nk positions (query i
 * sits at position nk - nq + i) and may not see a later key j > nk - nq + i. nq == nk is the
 * usual square mask; nq = 1 is one new position over a cache. Broadcasts to [B, h, nq, nk]
 * in tg_masked_fill(scores, mask, -INFINITY). */
TG_API tg_tensor *tg_causal_mask(tg_graph *g, int64_t nq, int64_t nk);
/* f32 [B, 1, 1, T] key padding mask, 1 = masked where ids[b*T + t] == pad (host ids, [B, T]).
 * Combine with a causal mask by tg_add: any value != 0 masks. */
TG_API tg_tensor *tg_padding_mask(tg_graph *g, const int32_t *ids, int64_t B, int64_t T, int32_t pad);

/* Ask for d(loss)/d(t) of a leaf input: call before building ops on t. tg_grad(g, t) then
 * returns the gradient tensor after tg_backward. Returns t. */
TG_API tg_tensor *tg_requires_grad(tg_tensor *t);

/* Keep t's value after tg_graph_run, readable with tg_tensor_read. Returns t. */
TG_API tg_tensor *tg_keep(tg_tensor *t);

/* Plan memory without running (the run plans too). Needs a backend for its alignment rules. */
TG_API tg_status tg_graph_plan(tg_graph *g, tg_backend *b);
/* Bytes of the planned workspace (peak of live intermediates), and what they would be with
 * every intermediate in a buffer of its own. Valid after tg_graph_plan or tg_graph_run. */
TG_API size_t tg_graph_peak_bytes(const tg_graph *g);
TG_API size_t tg_graph_total_bytes(const tg_graph *g);
/* Number of nodes built, and number executed by the last plan (unused branches are pruned). */
TG_API int64_t tg_graph_node_count(const tg_graph *g);
TG_API int64_t tg_graph_exec_count(const tg_graph *g);

/* Execute the graph on backend b (the backend of any store it uses). Computes everything needed
 * by kept tensors and parameter-gradient accumulation. A graph may be run again (same values,
 * gradients accumulate again). */
TG_API tg_status tg_graph_run(tg_graph *g, tg_backend *b);

/* Where a non-finite value that a run of g on b gave comes from: g is run again node by node,
 * every float input of a node read before it runs and its output after, and the first node
 * that made a NaN, or an infinity from finite inputs (an overflow), is named in a
 * TG_ERR_NUMERIC error: "node 41 (matmul) [8, 16] made inf at element 7 from finite inputs",
 * or, for a NaN that a node reads from a parameter or an input, that tensor. TG_OK when no node
 * made one (an infinity that came from infinite inputs, such as a mask's -inf, is no origin).
 * Without a finding the results are tg_graph_run's, bit for bit; with one the run stops at the
 * node named (run g again to read its outputs). Slower: a diagnosis, once a value is found wrong. */
TG_API tg_status tg_graph_find_nonfinite(tg_graph *g, tg_backend *b);

/* With TG_PROFILE set in the environment, graph runs time every op; this prints the totals per
 * op (calls, milliseconds, share) to `out` (a FILE *), then the matrix products by shape (M, N,
 * K, batch count, transposes: calls, milliseconds, share, GFLOP/s), the slowest first. */
TG_API void tg_profile_report(void *out);
/* Forget what the profile has counted so far: a benchmark calls it after its warm-up runs,
 * whose first-touch page faults (a graph's buffers are fresh pages on its first run) land on
 * whichever nodes write those buffers first — the forward products, mostly. */
TG_API void tg_profile_reset(void);

#ifdef __cplusplus
}
#endif
#endif
