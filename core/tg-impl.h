/* Internal structures of the core: tensors, graphs, stores and the backend table.
 * Not installed; shared by core/, autograd/, backends/ and train/. */
#ifndef TG_IMPL_H
#define TG_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/ops/params.h"
#include "tg/backend.h"
#include "tg/error.h"
#include "tg/graph.h"
#include "tg/ops.h"
#include "tg/store.h"
#include "tg/tensor.h"
#include "tg/update.h"

#define TG_MAX_SRC 8
#define TG_ALIGN 64

/* tensor flags */
enum {
    TG_TF_INPUT = 1u << 0,     /* leaf with host data copied in at run time */
    TG_TF_PARAM = 1u << 1,     /* leaf bound to a store parameter */
    TG_TF_KEEP = 1u << 2,      /* value survives the run */
    TG_TF_REQ_GRAD = 1u << 3,  /* depends on something that requires a gradient */
    TG_TF_SINK = 1u << 4,      /* side effect: always executed */
    TG_TF_NEEDED = 1u << 5,    /* planner: reached from a root */
    TG_TF_WANT_GRAD = 1u << 6, /* input whose gradient the user asked for */
    TG_TF_ACCUM = 1u << 7,   /* planner: writes by adding into a store gradient (fused grad_acc) */
    TG_TF_FUSED = 1u << 8,   /* planner: runs nothing, another node does its work */
    TG_TF_CHAINED = 1u << 9, /* planner: inside a fused elementwise chain, run by its tail */
    TG_TF_TRANSIENT = 1u << 10, /* planner: a chained node nothing else reads: no buffer */
    TG_TF_INTO = 1u << 11,      /* planner: a matmul writing into the buffer of its copy (base) */
    /* planner: an embedding lookup that its one reader, a matmul, reads through (the table's
     * rows, by the ids): no buffer, runs nothing */
    TG_TF_LOOKUP = 1u << 12
};

struct tg_tensor {
    tg_graph *graph;
    int64_t id; /* creation index: srcs always have smaller ids */
    tg_op op;
    tg_dtype dtype;
    int ndim;
    int64_t shape[TG_MAX_DIMS];
    int64_t stride[TG_MAX_DIMS]; /* in elements */
    int nsrc;
    tg_tensor *src[TG_MAX_SRC]; /* entries may be NULL for optional inputs */
    tg__op_params p;            /* the op's named parameters (core/ops/params.h) */
    tg_tensor *base;  /* storage owner when this is a view, else NULL */
    int64_t offset;   /* element offset into the storage owner (views) */
    uint32_t flags;
    tg_tensor *grad;  /* gradient being accumulated (backward) */
    /* backward: the gradients of slices of this tensor that meet end to end along one axis,
     * gathered as one concatenation of [slice_lo, slice_hi) on slice_axis (tg__grad_slice) and
     * added to grad, zero-padded, when it is taken (tg__grad_take) */
    tg_tensor *slice_grad;
    int64_t slice_lo, slice_hi;
    int slice_axis;
    void *data;       /* resolved at run time */
    void *host;       /* INPUT: host copy owned by the graph */
    tg_store *store;  /* PARAM / GRAD_ACC */
    int64_t param;    /* index in store */
    /* planner */
    int64_t pos;      /* position in execution order (-1: not executed) */
    int64_t block;    /* storage block index (-1: none) */
    tg_tensor *chain_prev; /* fused elementwise chain: the member before this one (core/fuse.c) */
    char name[64];
};

struct tg_graph {
    tg_tensor **nodes;
    int64_t n, cap;
    void **chunks; /* tensors are allocated in chunks; pointers stay stable */
    int64_t nchunks, chunk_used;
    tg_status status;
    char msg[512];
    bool training, grad_enabled, planner, fusion, backward_done;
    bool find_nonfinite; /* tg_graph_find_nonfinite's run: node by node, values checked */
    uint64_t seed;
    tg_grad_hook grad_hook; /* tg_graph_set_grad_hook */
    void *grad_hook_ctx;
    int32_t next_stream;
    /* plan */
    bool planned, ran;
    tg_backend *plan_backend;
    int64_t *order, nexec;
    size_t peak, total;
    int64_t nblocks;
    size_t *block_off; /* offset of each storage block in the workspace */
    void *ws;
    size_t ws_size;
    tg_backend *ws_backend;
};

typedef struct tg_param_entry {
    char name[128];
    int ndim;
    int64_t shape[TG_MAX_DIMS];
    int64_t numel;
    bool trainable;
    float *data;       /* backend memory: slabs[slab].data + off */
    float *grad;       /* slabs[slab].grad + off, NULL if not trainable */
    int64_t slab, off; /* off in floats */
} tg_param_entry;

/* Parameters live in slabs (store.c): runs of them in one backend block, their gradients at the
 * same offsets in a second. The trainable ones and the frozen ones (no gradients) fill
 * separate slabs, so the trainable parameters' data, gradients and an optimizer's moments
 * (train/optim.c, same layout) are each contiguous, parameter after parameter. */
typedef struct tg_store_slab {
    float *data, *grad; /* grad NULL in a slab of frozen parameters */
    int64_t cap, used;  /* floats; [0, used) zeroed but for the parameters' values */
} tg_store_slab;

struct tg_store {
    tg_backend *backend;
    tg_param_entry *p;
    int64_t n, cap;
    tg_store_slab *slabs;
    int64_t nslabs, cap_slabs;
    int64_t open[2]; /* the slab that takes new parameters, frozen [0] and trainable [1]; -1 none */
    int made[2];     /* slabs made in each series (their sizes double) */
    bool scratch;    /* tg__store_new_scratch: slabs from the backend's alloc, not alloc_lasting */
};

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

/* The backend table (a table of function pointers plus a capability query, as ggml's backends). */
typedef struct tg_backend_vtable {
    const char *name;
    void *(*alloc)(tg_backend *b, size_t bytes); /* NULL + error set on failure */
    /* Optional (NULL: alloc): memory that lives as long as a store, its slabs (core/store.c) —
     * the CPU backend maps big blocks of it on huge pages. Freed by free. */
    void *(*alloc_lasting)(tg_backend *b, size_t bytes);
    void (*free)(tg_backend *b, void *p, size_t bytes);
    tg_status (*copy_in)(tg_backend *b, void *dst, const void *src, size_t bytes);
    tg_status (*copy_out)(tg_backend *b, void *dst, const void *src, size_t bytes);
    tg_status (*memset0)(tg_backend *b, void *dst, size_t bytes);
    bool (*supports_op)(tg_backend *b, tg_op op);
    tg_status (*run_node)(tg_backend *b, tg_tensor *node);
    /* Optional (NULL: the executor calls run_node node by node). Run nodes[0..n) in order, in
     * one go on the backend's own threads: a node flagged TG_TF_INPUT copies its host data in,
     * one flagged TG_TF_FUSED runs nothing, any other runs its kernel. When `after` is not
     * NULL, after(ctx, i) is called on the calling thread once node i is complete (nodes
     * after i may already be running on other threads). On failure *failed is the index of
     * the node that failed and the error is set on the calling thread. */
    tg_status (*run_graph)(tg_backend *b, tg_tensor *const *nodes, int64_t n,
                           void (*after)(void *ctx, int64_t i), void *ctx, int64_t *failed);
    tg_status (*sync)(tg_backend *b);
    /* optimizer and store maths on backend memory; optim_update with zero_g leaves g zero */
    tg_status (*optim_update)(tg_backend *b, const tg_optim_config *cfg, float lr, int64_t step,
                              float *w, float *g, float *m, float *v, int64_t n, bool zero_g);
    tg_status (*sumsq)(tg_backend *b, const float *x, int64_t n, double *out);
    tg_status (*scale)(tg_backend *b, float *x, int64_t n, float s);
    void (*destroy)(tg_backend *b);
    /* the matmul, sum_to and layer_norm_gamma_back kernels honour TG_TF_ACCUM (add into their
     * output instead of overwriting it), so the planner may fuse a parameter's grad_acc into
     * its producer */
    bool accumulates;
    /* the matmul kernel writes its output through the node's strides (batch strides and row
     * stride; the last dim contiguous), so the planner may lay a product out for the copy it
     * feeds (core/plan.c: TG_TF_INTO) */
    bool strided_out;
    /* the kernel of a TG_OPF_TILE node whose chain_prev is set runs its whole chain (the
     * members linked by chain_prev, the earlier ones flagged TG_TF_CHAINED and never run on
     * their own; a TG_TF_TRANSIENT one has no buffer), so the planner may fuse chains */
    bool chains;
    /* buffers are host memory: a kept tensor's values may be read where they lie (its data)
     * until its graph runs again or is freed, without a copy_out (a decoder's log-probabilities,
     * models/decode.c) */
    bool host_memory;
    /* Optional: whether the kernel of matmul node m can read its operand B (src[1]) — a view of
     * an embedding lookup of a parameter table by input ids, [.., w] — from the table's rows
     * itself (the ids say which), so that the planner need not make the lookup (core/plan.c:
     * TG_TF_LOOKUP) */
    bool (*reads_lookup)(tg_backend *b, const tg_tensor *m);
    /* Optional: a weight w [rows, cols] (backend memory) that many products x·wᵀ will read
     * unchanged until released, such as a decoder's (models/decode.c): the backend may prepare
     * it once (the CPU backend packs it for its GEMM). Counted: each keep is released once. */
    void (*keep_weight)(tg_backend *b, const float *w, int64_t rows, int64_t cols);
    void (*release_weight)(tg_backend *b, const float *w, int64_t rows, int64_t cols);
} tg_backend_vtable;

struct tg_backend {
    const tg_backend_vtable *vt;
    int nthreads;
    /* bytes held and their peak (tg__backend_account): atomic, since threads sharing the
     * backend allocate at once (include/tg/backend.h) */
    _Atomic size_t in_use, peak;
    void *impl;
};

/* ---- core helpers (core/graph.c, core/tensor.c) ---- */
tg_tensor *tg__graph_new(tg_graph *g, tg_op op, tg_dtype dt, int ndim, const int64_t *shape);
/* Attach inputs (NULL allowed for optional ones) and propagate REQ_GRAD. */
void tg__graph_set_src(tg_tensor *t, int nsrc, tg_tensor *const *src);
/* A view of x with a new shape/strides/offset (relative to x's own offset). */
tg_tensor *tg__graph_view(tg_tensor *x, tg_op op, int ndim, const int64_t *shape,
                          const int64_t *stride, int64_t extra_offset);
/* Record a build error on g (first one wins); always returns NULL. */
tg_tensor *tg__graph_fail(tg_graph *g, tg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool tg__tensor_is_contiguous(const tg_tensor *t);
/* May node m run while node q runs (both bound to their memory: after the planner and
 * binding): m writes nothing q reads or writes, and reads nothing q writes — by the bytes
 * their elements occupy (core/hazard.c). Symmetric in what it forbids. */
bool tg__nodes_independent(const tg_tensor *m, const tg_tensor *q);
void tg__tensor_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
int64_t tg__tensor_numel(int ndim, const int64_t *shape);
/* Normalise a possibly negative axis; -1 if out of range. */
int tg__tensor_axis(int axis, int ndim);
/* NumPy broadcast of two shapes into out (returns false if incompatible). */
bool tg__tensor_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                          int64_t *out);
bool tg__tensor_same_shape(const tg_tensor *a, const tg_tensor *b);
/* x itself if contiguous, else a CONT copy. */
tg_tensor *tg__op_cont(tg_tensor *x);
/* Storage owner of t (t itself if not a view). */
/* The nodes of tg_graph_find_nonfinite's run (core/finite.c) */
tg_status tg__finite_run(tg_backend *b, tg_tensor *const *list, int64_t n, int64_t *failed);
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
/* The tensor whose buffer t views (t itself if it is not a view); const or not, as strchr */
static inline tg_tensor *tg__tensor_root(const tg_tensor *t) {
    return (tg_tensor *)(t->base ? t->base : t);
}
static inline size_t tg__tensor_nbytes(const tg_tensor *t) {
    return (size_t)tg__tensor_numel(t->ndim, t->shape) * tg_dtype_size(t->dtype);
}

/* The op table (core/op_table.c, assembled from the op family files in core/ops/). */
/* TG_OPF_TILE: elementwise, output element e is a function of element e of each full-size
 * input and of the broadcast inputs at e's coordinates, so a chain of such ops can run tile
 * by tile in one pass (core/fuse.c). */
enum {
    TG_OPF_INPLACE = 1,
    TG_OPF_VIEW = 2,
    TG_OPF_BACKWARD_ONLY = 4,
    TG_OPF_NO_GRAD = 8,
    TG_OPF_TILE = 16
};
unsigned tg__op_flags(tg_op op);
/* An op's gradient rule: adds the gradients of node's inputs given dy, that of its output (NULL
 * for backward-only ops and ops with no gradient). */
typedef void (*tg_grad_rule)(tg_tensor *node, tg_tensor *dy);
tg_grad_rule tg__grad_rule(tg_op op);
/* True when every op has exactly one row in the families; otherwise false with msg set. */
bool tg__op_table_check(char *msg, size_t n);
/* Add `contrib` to src's gradient, summing broadcast dimensions away. */
void tg__grad_accum(tg_tensor *src, tg_tensor *contrib);
/* dy, the gradient of src's slice [lo, hi) on axis a, into src's gradient: joined to the
 * slices before it when they meet end to end (one concatenation instead of a zero-padded copy
 * per slice and their sum), else added (core/grad.c). */
void tg__grad_slice(tg_tensor *src, int a, int64_t lo, int64_t hi, tg_tensor *dy);
/* t's whole gradient so far (its gathered slices added in): what its gradient rule reads. */
tg_tensor *tg__grad_take(tg_tensor *t);

/* The planner's elementwise fusion (core/fuse.c): on g->order[0 .. nexec), links chains by
 * chain_prev, flags their members and moves them next to their tails. At most TG_CHAIN_MAX
 * members per chain (a backend's chain kernel may keep a tile of each). */
#define TG_CHAIN_MAX 8
/* Elements per tile of a backend's chain kernel (4 KiB: a chain's tiles stay in L1; a multiple
 * of the 32 elements of the CPU's AVX2 dropout block). A row op (softmax) may end a chain when
 * its rows fit in a tile. */
#define TG_CHAIN_TILE 1024
tg_status tg__plan_fuse_chains(tg_graph *g);


/* TG_PROFILE (core/profile.c): whether it is set, and one node's time in seconds */
bool tg__profile_on(void);
void tg__profile_node(const tg_tensor *t, double sec);
/* True when x is a member of the chain that ends at tail (tail itself included). */
static inline bool tg__chain_has(const tg_tensor *tail, const tg_tensor *x) {
    for (const tg_tensor *m = tail; m; m = m->chain_prev)
        if (m == x) return true;
    return false;
}

/* What the layers above core ask of a backend and of a store's memory (core/backend_query.c),
 * so that they read neither the backend table nor a store's entries. */
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

/* backend memory accounting helpers (core/backend.c) */
void tg__backend_account(tg_backend *b, ptrdiff_t delta);
/* b's alloc_lasting where it has one, else its alloc */
void *tg__backend_alloc_lasting(tg_backend *b, size_t bytes);

#endif
