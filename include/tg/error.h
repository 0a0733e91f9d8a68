/* tgraph — errors are values.
 *
 * Every fallible call returns a tg_status. The message of the most recent error on the
 * calling thread is kept and returned by tg_error_message(); it says what failed and where,
 * e.g. "tg_matmul: inner dimensions differ: [8,16] x [12,4]". Nothing in the library calls
 * abort() or exit() on bad input. */
#ifndef TG_ERROR_H
#define TG_ERROR_H

#include "tg/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_status {
    TG_OK = 0,
    TG_ERR_INVALID,     /* an argument or option out of range */
    TG_ERR_SHAPE,       /* shapes that do not fit together */
    TG_ERR_DTYPE,       /* wrong element type */
    TG_ERR_NOMEM,       /* out of host or device memory */
    TG_ERR_IO,          /* a file could not be opened, read or written */
    TG_ERR_FORMAT,      /* a file or text that is malformed */
    TG_ERR_UNSUPPORTED, /* an op or feature a backend does not have */
    TG_ERR_NUMERIC,     /* NaN or Inf where a finite value is required */
    TG_ERR_NOT_FOUND,   /* a named thing (parameter, key) that does not exist */
    TG_ERR_BACKEND,     /* a failure reported by BLAS, CUDA, MPI, ... */
    TG_ERR_STATE,       /* a call made at the wrong time (e.g. reading an unrun graph) */
    TG_ERR_INTERRUPTED  /* stopped on request (signal) */
} tg_status;

/* The message of the last error set on this thread ("" if none). The pointer stays valid
 * until the next error is set on this thread. */
TG_API const char *tg_error_message(void);

/* A short constant name for a status, e.g. "shape error". */
TG_API const char *tg_status_name(tg_status st);

/* Record an error (printf-style message) and return st, so callers can write
 * `return tg_error_set(TG_ERR_SHAPE, "tg_add: ...");`. Used by the library and by tools. */
TG_API tg_status tg_error_set(tg_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefix the current message with "context: " (for adding a file name or a layer). */
TG_API tg_status tg_error_prefix(tg_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forget the last error on this thread. */
TG_API void tg_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
