/* tgraph — the parameter store: named persistent tensors (parameters, their gradients and
 * optimizer state) on a backend, outside the per-step graphs.
 *
 * Parameters are f32. Each trainable parameter has a gradient buffer into which every
 * tg_graph_run that ran tg_backward accumulates; tg_store_zero_grad clears them. */
#ifndef TG_STORE_H
#define TG_STORE_H

#include "tg/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg/backend.h"
#include "tg/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_store tg_store;

/* A new empty store on backend b (borrowed: it must outlive the store). */
TG_API tg_status tg_store_new(tg_backend *b, tg_store **out);
TG_API void tg_store_free(tg_store *s);
TG_API tg_backend *tg_store_backend(const tg_store *s);

/* Add parameter `name` (unique, <= 127 bytes) of the given shape, initialised from `init`
 * (numel floats, copied; NULL = zeros). Trainable parameters get a gradient buffer. The
 * parameters share a few large blocks of backend memory (docs/design.md, "Parameter store"),
 * each starting on a 64-byte line. */
TG_API tg_status tg_store_add(tg_store *s, const char *name, int ndim, const int64_t *shape,
                       const float *init, bool trainable);

/* Number of parameters; the i-th name (owned by the store); index of a name or -1. */
TG_API int64_t tg_store_count(const tg_store *s);
TG_API const char *tg_store_name(const tg_store *s, int64_t i);
TG_API int64_t tg_store_find(const tg_store *s, const char *name);
/* Shape of parameter i (returns ndim), its number of elements, whether it is trainable. */
TG_API int tg_store_shape(const tg_store *s, int64_t i, int64_t shape[TG_MAX_DIMS]);
TG_API int64_t tg_store_numel(const tg_store *s, int64_t i);
TG_API bool tg_store_trainable(const tg_store *s, int64_t i);
/* Sum of numel over all parameters. */
TG_API int64_t tg_store_total_numel(const tg_store *s);

/* Host copies in and out of parameter i (n = numel). */
TG_API tg_status tg_store_read(const tg_store *s, int64_t i, float *dst, int64_t n);
TG_API tg_status tg_store_write(tg_store *s, int64_t i, const float *src, int64_t n);
TG_API tg_status tg_store_read_grad(const tg_store *s, int64_t i, float *dst, int64_t n);
TG_API tg_status tg_store_write_grad(tg_store *s, int64_t i, const float *src, int64_t n);

/* Set every gradient to zero. */
TG_API tg_status tg_store_zero_grad(tg_store *s);
/* Global L2 norm of all gradients (double accumulation). */
TG_API tg_status tg_store_grad_norm(tg_store *s, double *norm);
/* Multiply every gradient by `factor`. */
TG_API tg_status tg_store_scale_grad(tg_store *s, float factor);
/* Global-norm clipping: if the norm exceeds max_norm, scale gradients by max_norm / norm.
 * The norm before clipping goes to *norm_out (may be NULL). Non-finite norm: TG_ERR_NUMERIC. */
TG_API tg_status tg_store_clip_grad(tg_store *s, double max_norm, double *norm_out);

#ifdef __cplusplus
}
#endif
#endif
