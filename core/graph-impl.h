/* Internal structures of the core's graphs: tensors (graph nodes), graphs, the op table, the
 * gradient helpers, the planner's fusion. Shared by core/, autograd/ and backends/ — the layers
 * above them reach graphs through the public headers and core/tg-impl.h (tests/test_layers.py). */
#ifndef TG_GRAPH_IMPL_H
#define TG_GRAPH_IMPL_H

#include "core/ops/params.h"
#include "core/tg-impl.h"

#define TG_MAX_SRC 8

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

/* ---- graph and tensor helpers (core/graph.c, core/tensor.c) ---- */
tg_tensor *tg__graph_new(tg_graph *g, tg_op op, tg_dtype dt, int ndim, const int64_t *shape);
/* Attach inputs (NULL allowed for optional ones) and propagate REQ_GRAD. */
void tg__graph_set_src(tg_tensor *t, int nsrc, tg_tensor *const *src);
/* A view of x with a new shape/strides/offset (relative to x's own offset). */
tg_tensor *tg__graph_view(tg_tensor *x, tg_op op, int ndim, const int64_t *shape,
                          const int64_t *stride, int64_t extra_offset);
/* May node m run while node q runs (both bound to their memory: after the planner and
 * binding): m writes nothing q reads or writes, and reads nothing q writes — by the bytes
 * their elements occupy (core/hazard.c). Symmetric in what it forbids. */
bool tg__nodes_independent(const tg_tensor *m, const tg_tensor *q);
void tg__tensor_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
int64_t tg__tensor_numel(int ndim, const int64_t *shape);
/* Normalise a possibly negative axis; -1 if out of range. */
int tg__tensor_axis(int axis, int ndim);
bool tg__tensor_same_shape(const tg_tensor *a, const tg_tensor *b);
/* x itself if contiguous, else a CONT copy. */
tg_tensor *tg__op_cont(tg_tensor *x);
/* The nodes of tg_graph_find_nonfinite's run (core/finite.c) */
tg_status tg__finite_run(tg_backend *b, tg_tensor *const *list, int64_t n, int64_t *failed);

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

/* one node's time in seconds (TG_PROFILE, core/profile.c) */
void tg__profile_node(const tg_tensor *t, double sec);
/* True when x is a member of the chain that ends at tail (tail itself included). */
static inline bool tg__chain_has(const tg_tensor *tail, const tg_tensor *x) {
    for (const tg_tensor *m = tail; m; m = m->chain_prev)
        if (m == x) return true;
    return false;
}

#endif
