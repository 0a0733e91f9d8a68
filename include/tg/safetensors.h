/* tgraph — safetensors files (checkpoints, docs/model.md §4).
 *
 * Layout: an 8-byte little-endian u64 header length N, N bytes of JSON header, then the data
 * buffer. The header maps each tensor name to {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]} (offsets relative to the start of the data buffer, end
 * exclusive) and may hold "__metadata__": {"key": "string value", ...}. Tensor bytes are
 * little-endian, row-major.
 *
 * Reading (tg_st_open) loads the whole file into memory and validates it as strictly as the
 * Python `safetensors` package does: header length within the file (and <= 100 MB), header
 * strict JSON/UTF-8 whose top level is an object, every entry with a known dtype, a shape of
 * non-negative integers and data_offsets [begin, end] with begin <= end <= buffer size,
 * end - begin == element size * product(shape), tensors that neither overlap nor leave gaps
 * and together cover the whole data buffer, metadata values that are strings. Entry fields
 * other than dtype/shape/data_offsets are ignored (as the Python package does). Errors name
 * the file and the tensor, e.g. "tg_st_open: 'ckpt.safetensors': header length
 * 9223372036854775807 exceeds file size 1024".
 *
 * Writing (tg_st_writer_*) lays tensors out as the Python package does: sorted by dtype in
 * descending tg_st_dtype order (which is by element size, largest first), then by name
 * (byte order), so every tensor starts at a multiple of its element size; the header
 * (compact JSON, "__metadata__" first, then tensors in data order) is padded with spaces to
 * a multiple of 8 bytes. With at most one metadata key the file is byte-identical to what
 * the Python package writes for the same tensors. Saving is atomic: "<path>.tmp.<pid>", fsync,
 * rename().
 *
 * Not thread-safe per object; distinct objects may be used from distinct threads. */
#ifndef TG_SAFETENSORS_H
#define TG_SAFETENSORS_H

#include "tg/export.h"

#include <stddef.h>
#include <stdint.h>

#include "tg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of the safetensors format that have whole-byte elements. F32 and I32 are
 * what tgraph computes with; the others can be read (and written byte-for-byte). The order
 * is the Rust crate's Dtype order, which its writer sorts by (see tg_st_writer_save). */
typedef enum tg_st_dtype {
    TG_ST_BOOL, /* 1 byte, 0 or 1 */
    TG_ST_U8,
    TG_ST_I8,
    TG_ST_F8_E5M2, /* float8, raw bytes only */
    TG_ST_F8_E4M3, /* float8, raw bytes only */
    TG_ST_I16,
    TG_ST_U16,
    TG_ST_F16,  /* IEEE 754 binary16 */
    TG_ST_BF16, /* bfloat16: the top 16 bits of a binary32 */
    TG_ST_I32,
    TG_ST_U32,
    TG_ST_F32,
    TG_ST_F64,
    TG_ST_I64,
    TG_ST_U64,
    TG_ST_DTYPE_COUNT
} tg_st_dtype;

/* The format's name of a dtype ("F32", "BF16", ...); "?" if out of range. */
TG_API const char *tg_st_dtype_name(tg_st_dtype dt);

/* Bytes per element of a dtype (1, 2, 4 or 8); 0 if out of range. */
TG_API size_t tg_st_dtype_size(tg_st_dtype dt);

/* Look up a dtype by its format name (case-sensitive, e.g. "F32"). TG_ERR_NOT_FOUND if
 * unknown. */
TG_API tg_status tg_st_dtype_parse(const char *name, tg_st_dtype *out);

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct tg_st_file tg_st_file;

/* Read and validate the file at path. On success *out owns all memory (close with
 * tg_st_close); on failure *out is NULL and the message names the file and the problem.
 * TG_ERR_IO for files that cannot be read, TG_ERR_FORMAT for malformed contents,
 * TG_ERR_NOMEM when the file does not fit in memory. path is copied. */
TG_API tg_status tg_st_open(const char *path, tg_st_file **out);

/* As tg_st_open, from len bytes in memory (copied; the caller keeps data). name is used in
 * messages and returned by tg_st_path (copied; NULL gives "<memory>"). */
TG_API tg_status tg_st_open_memory(const void *data, size_t len, const char *name, tg_st_file **out);

/* Free everything tg_st_open allocated; every pointer obtained from f becomes invalid.
 * NULL is fine. */
TG_API void tg_st_close(tg_st_file *f);

/* The path (or name) the file was opened with; owned by f. */
TG_API const char *tg_st_path(const tg_st_file *f);

/* Number of tensors (the "__metadata__" entry is not one). */
TG_API size_t tg_st_count(const tg_st_file *f);

/* Name of tensor i, 0 <= i < count, in the order the header lists them; NULL if out of
 * range. Owned by f. */
TG_API const char *tg_st_name(const tg_st_file *f, size_t i);

/* Index of the tensor called name. TG_ERR_NOT_FOUND (with a message naming the file) if
 * there is none; *index is untouched then. O(log n). */
TG_API tg_status tg_st_find(const tg_st_file *f, const char *name, size_t *index);

/* Element type, number of dimensions, shape and element count of tensor i. The shape array
 * has ndim entries (none for a scalar: ndim 0, numel 1) and is owned by f. i must be in
 * range (out of range gives TG_ST_DTYPE_COUNT / 0 / NULL / 0). */
TG_API tg_st_dtype tg_st_tensor_dtype(const tg_st_file *f, size_t i);
TG_API int tg_st_tensor_ndim(const tg_st_file *f, size_t i);
TG_API const int64_t *tg_st_tensor_shape(const tg_st_file *f, size_t i);
TG_API size_t tg_st_tensor_numel(const tg_st_file *f, size_t i);

/* Raw little-endian bytes of tensor i (tg_st_tensor_nbytes of them), owned by f and valid
 * until tg_st_close. The pointer is aligned to the element size when the file's header
 * length is a multiple of 8 and tensors are laid out by alignment (files written by tgraph
 * or by the Python package); files from other writers may give unaligned pointers, so copy
 * with memcpy or use tg_st_read_f32 rather than casting blindly. */
TG_API const void *tg_st_tensor_data(const tg_st_file *f, size_t i);
TG_API size_t tg_st_tensor_nbytes(const tg_st_file *f, size_t i);

/* Convert tensor i to float32 into dst (caller-owned, count floats). count must equal
 * tg_st_tensor_numel. F32 copies; F16, BF16 and F64 convert (F64 rounds to nearest, values
 * beyond float range become +-inf); integer and bool types convert to the nearest float.
 * The float8 types give TG_ERR_UNSUPPORTED. Works regardless of alignment or host
 * byte order. */
TG_API tg_status tg_st_read_f32(const tg_st_file *f, size_t i, float *dst, size_t count);

/* Value of metadata key (NUL-terminated, owned by f), or NULL if absent. */
TG_API const char *tg_st_metadata(const tg_st_file *f, const char *key);

/* Number of metadata entries, and key/value of entry i in header order (NULL if out of
 * range). Owned by f. */
TG_API size_t tg_st_metadata_count(const tg_st_file *f);
TG_API const char *tg_st_metadata_key(const tg_st_file *f, size_t i);
TG_API const char *tg_st_metadata_value(const tg_st_file *f, size_t i);

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct tg_st_writer tg_st_writer;

/* A new, empty writer owned by the caller (free with tg_st_writer_free). NULL with the
 * error set when out of memory. */
TG_API tg_st_writer *tg_st_writer_new(void);

/* Free a writer and the tensor data it copied. NULL is fine. */
TG_API void tg_st_writer_free(tg_st_writer *w);

/* Add a tensor. name (non-empty UTF-8, not "__metadata__", unique in this writer: a
 * duplicate is TG_ERR_INVALID) and shape (ndim entries, each >= 0; ndim 0 is a scalar) are
 * copied. data holds numel * element-size bytes in little-endian order (may be NULL when
 * numel is 0); it is COPIED, so the caller may free or reuse it at once. */
TG_API tg_status tg_st_writer_add(tg_st_writer *w, const char *name, tg_st_dtype dtype, int ndim,
                           const int64_t *shape, const void *data);

/* As tg_st_writer_add, but data is only REFERENCED: it must stay valid and unchanged until
 * tg_st_writer_save returns (saves large checkpoints without a second copy in memory). */
TG_API tg_status tg_st_writer_add_ref(tg_st_writer *w, const char *name, tg_st_dtype dtype, int ndim,
                               const int64_t *shape, const void *data);

/* Set metadata key to value (both NUL-terminated UTF-8, copied). Setting a key again
 * replaces its value. */
TG_API tg_status tg_st_writer_set_metadata(tg_st_writer *w, const char *key, const char *value);

/* Number of tensors added so far. */
TG_API size_t tg_st_writer_count(const tg_st_writer *w);

/* Write the file atomically: everything goes to "<path>.tmp.<pid>", which is fsync'ed and
 * then rename()d over path, and the directory is fsync'ed. On any failure the temporary file
 * is removed and an existing file at path is left untouched. The writer is not consumed:
 * it may be saved again or freed. path is not retained. If path is a symbolic link, the link
 * itself is replaced by the new file (rename() semantics), not its target. */
TG_API tg_status tg_st_writer_save(tg_st_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#endif
