/* What the core offers the library's other layers beyond the public API: internal functions on
 * its handles (tg_tensor, tg_graph, tg_store, tg_backend), and no struct definitions. Not
 * installed.
 *
 * The structs are defined by concern in core/graph-impl.h (tensors, graphs, the op table),
 * core/store-impl.h (stores) and core/backend-impl.h (the backend table), which core/,
 * autograd/ and backends/ include. models/, parallel/, train/ and tools/ include this header
 * only, so they reach a store's memory and the backend through the functions below: a field
 * access or a call through the backend table there does not compile, and tests/test_layers.py
 * fails on an include of the struct headers above backends. */
#ifndef TG_IMPL_H
#define TG_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tg/backend.h"
#include "tg/error.h"
#include "tg/graph.h"
#include "tg/ops.h"
#include "tg/store.h"
#include "tg/tensor.h"
#include "tg/update.h"

/* ---- graphs (core/graph.c, core/tensor.c) ---- */

/* Record a build error on g (first one wins); always returns NULL. */
tg_tensor *tg__graph_fail(tg_graph *g, tg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool tg__tensor_is_contiguous(const tg_tensor *t);
/* NumPy broadcast of two shapes into out (returns false if incompatible). */
bool tg__tensor_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                          int64_t *out);

/* ---- stores (core/store.c) ---- */

/* A store made and freed over and over, such as a decoder's key and value tables (a store a
 * batch of sentences): its slabs come from the backend's alloc, whose freed blocks serve the
 * next one's (the CPU backend's cache of freed blocks), not from alloc_lasting, which maps a
 * new block for each — `tg translate` then spent a fifth of its time in the kernel zeroing
 * new pages. */
tg_status tg__store_new_scratch(tg_backend *b, tg_store **out);

/* tg_store_add of a frozen parameter whose values are left as the memory holds them, for a
 * table whose every read is of an element written first: a decoder's key and value tables,
 * sized for the longest output (max_steps rows a hypothesis) but written, and read, only as far
 * as the steps go. Zeroing them all touched every page of them for every batch of sentences. */
tg_status tg__store_add_unset(tg_store *s, const char *name, int ndim, const int64_t *shape);
/* Tests: with on, tg__store_add_unset fills the values with NaN, so that reading an element
 * before writing it shows; returns the previous setting. */
bool tg__store_poison_unset(bool on);

/* ---- a store's layout and memory, for the layers above core (core/layer_calls.c) ---- */

/* Parameters live in slabs of backend memory (core/store-impl.h): runs of them in one block,
 * their gradients at the same offsets in a second block; trainable and frozen parameters fill
 * separate slabs. An optimizer lays its moments out the same way (train/optim.c). */
int64_t tg__store_nslabs(const tg_store *s);
/* Slab k's size and the floats in use at its start ([0, used) zeroed but for the parameters'
 * values); true when it holds trainable parameters (it has a block of gradients). */
bool tg__store_slab(const tg_store *s, int64_t k, int64_t *cap, int64_t *used);
/* The slab of parameter i and its offset there, in floats. */
void tg__store_place(const tg_store *s, int64_t i, int64_t *slab, int64_t *off);
/* Parameter i's gradient in backend memory (NULL when it is frozen): for a collective that sums
 * it in place on the device (parallel/dist_nccl.c). */
float *tg__store_grad_memory(tg_store *s, int64_t i);
/* The backend's update rule over n floats of the weights and gradients from parameter i's on
 * (a run of parameters of one slab, padding included), with moments m and v (backend memory,
 * NULL where the rule has none) at step `step`; with zero_g the gradients are left zero. */
tg_status tg__store_update(tg_store *s, int64_t i, int64_t n, const tg_optim_config *cfg, float lr,
                           int64_t step, float *m, float *v, bool zero_g);
/* Zero parameter i's gradient (none: nothing to do). */
tg_status tg__store_zero_grad_of(tg_store *s, int64_t i);

/* ---- backend memory, for the layers above core (core/backend.c, core/layer_calls.c) ---- */

/* b's alloc_lasting where it has one, else its alloc (NULL and the error set on failure) */
void *tg__backend_alloc_lasting(tg_backend *b, size_t bytes);
/* b's free, copies between host and backend memory, and zeroing, on memory of b's */
void tg__backend_free(tg_backend *b, void *p, size_t bytes);
tg_status tg__backend_copy_in(tg_backend *b, void *dst, const void *src, size_t bytes);
tg_status tg__backend_copy_out(tg_backend *b, void *dst, const void *src, size_t bytes);
tg_status tg__backend_memset0(tg_backend *b, void *dst, size_t bytes);

/* ---- what the layers above core ask of a backend and of a store (core/backend_query.c) ---- */

/* b keeps its buffers in host memory (vt->host_memory) */
bool tg__backend_host_memory(const tg_backend *b);
/* Where kept f32 tensor t's values lie, to be read in place, when b — the backend its graph ran
 * on — keeps its buffers in host memory and t is contiguous: valid until the graph runs again
 * or is freed. NULL otherwise (read t with tg_tensor_read). */
const float *tg__tensor_host_view(const tg_tensor *t, const tg_backend *b);
/* Hand weight i of s (a 2-D parameter w, read as x·wᵀ by many products until released) to the
 * store's backend to prepare once (vt->keep_weight: the CPU backend packs it for its GEMM), and
 * give it back; counted, each keep released once. Nothing where the backend prepares nothing
 * or i is not a 2-D entry. */
void tg__store_keep_weight(tg_store *s, int64_t i);
void tg__store_release_weight(tg_store *s, int64_t i);

/* ---- files (core/io.c) ---- */

/* File-system calls of the writers with a fault-injection point in front of each (core/io.c,
 * TG_FAULT_INJECT): -1 with errno set on failure, real or injected. */
int tg__io_fault(const char *op, const char *path); /* 0, or the errno to fail with */
int tg__io_open(const char *path, int flags, int mode);
int tg__io_write(int fd, const void *buf, size_t n, const char *path); /* all n bytes */
struct iovec;
int tg__io_writev(int fd, struct iovec *iov, int n, const char *path); /* all of it; iov is used up */
int tg__io_fsync(int fd, const char *path);
int tg__io_close(int fd, const char *path);
int tg__io_rename(const char *from, const char *to);
int tg__io_link(const char *from, const char *to);
int tg__io_unlink(const char *path);
int tg__io_fsync_dir(const char *path); /* the directory holding path */
int tg__io_fflush(FILE *f, const char *path);

/* FNV-1a over n bytes, continuing from h (start from TG_FNV1A_INIT): the fingerprints of
 * parameters that resumed runs and process groups compare. */
#define TG_FNV1A_INIT 1469598103934665603ull
static inline uint64_t tg__fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* TG_PROFILE (core/profile.c): whether it is set */
bool tg__profile_on(void);

#endif
