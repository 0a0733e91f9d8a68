/* tgraph — tensors: element types, shapes and read access.
 *
 * A tg_tensor is a node of a graph (see graph.h): it is created by a graph-building call and
 * owned by its graph; it is freed with the graph. Shapes are row-major, dimension 0 outermost
 * (as PyTorch), with up to TG_MAX_DIMS dimensions; a scalar has ndim 0. */
#ifndef TG_TENSOR_H
#define TG_TENSOR_H

#include "tg/export.h"

#include <stddef.h>
#include <stdint.h>

#include "tg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MAX_DIMS 6

typedef enum tg_dtype {
    TG_DTYPE_F32 = 0,
    TG_DTYPE_I32 = 1,
} tg_dtype;

typedef struct tg_tensor tg_tensor;

/* Bytes per element of a dtype. */
TG_API size_t tg_dtype_size(tg_dtype dt);
/* "f32" / "i32". */
TG_API const char *tg_dtype_name(tg_dtype dt);

/* Number of dimensions of t. */
TG_API int tg_tensor_ndim(const tg_tensor *t);
/* Size of dimension `axis`; negative axes count from the end (-1 is the last). */
TG_API int64_t tg_tensor_dim(const tg_tensor *t, int axis);
/* Copies the shape into shape[0..ndim-1]; returns ndim. */
TG_API int tg_tensor_shape(const tg_tensor *t, int64_t shape[TG_MAX_DIMS]);
TG_API int64_t tg_tensor_numel(const tg_tensor *t);
TG_API tg_dtype tg_tensor_dtype(const tg_tensor *t);
/* The tensor's name ("" if unnamed); the string is owned by the tensor. */
TG_API const char *tg_tensor_name(const tg_tensor *t);
/* Set a name (printf-style, truncated to 63 bytes); returns t for chaining. */
TG_API tg_tensor *tg_tensor_set_name(tg_tensor *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Format a shape as "[2,3,4]" into buf (always NUL-terminated); returns buf. */
TG_API char *tg_shape_str(char *buf, size_t size, int ndim, const int64_t *shape);

/* Copy the values of a tensor computed by the last tg_graph_run of its graph into dst
 * (numel elements of its dtype; `bytes` must equal numel*dtype size). Only tensors marked with
 * tg_keep() (and gradients returned by tg_grad) are guaranteed to survive the run: the memory
 * planner reuses the buffers of everything else. */
TG_API tg_status tg_tensor_read(const tg_tensor *t, void *dst, size_t bytes);
/* Convenience: read a kept scalar f32 (e.g. a loss). Returns NAN on error (message set). */
TG_API float tg_tensor_item(const tg_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
