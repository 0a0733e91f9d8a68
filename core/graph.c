/* Graph construction: node allocation, leaves, views, error recording. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/graph-impl.h"
#include "core/store-impl.h"

/* Tensors are allocated in chunks so that pointers handed to the user stay valid while the
 * graph grows; building a node costs one bump of an index, not a malloc. */
#define TG_CHUNK 256

tg_graph *tg_graph_new(void) {
    tg_graph *g = calloc(1, sizeof *g);
    if (!g) {
        tg_error_set(TG_ERR_NOMEM, "tg_graph_new: out of memory");
        return NULL;
    }
    g->training = true;
    g->grad_enabled = true;
    g->planner = true;
    g->fusion = true;
    g->chunk_used = TG_CHUNK;
    return g;
}

void tg__exec_release_workspace(tg_graph *g);

void tg_graph_free(tg_graph *g) {
    if (!g) return;
    tg__exec_release_workspace(g);
    for (int64_t i = 0; i < g->n; i++) free(g->nodes[i]->host);
    for (int64_t i = 0; i < g->nchunks; i++) free(g->chunks[i]);
    free(g->chunks);
    free(g->nodes);
    free(g->order);
    free(g->block_off);
    free(g);
}

tg_status tg_graph_status(const tg_graph *g, const char **msg) {
    if (!g) {
        if (msg) *msg = "no graph";
        return TG_ERR_INVALID;
    }
    if (msg) *msg = g->msg;
    return g->status;
}

void tg_graph_set_training(tg_graph *g, bool training) { g->training = training; }
bool tg_graph_training(const tg_graph *g) { return g->training; }
void tg_graph_set_grad_enabled(tg_graph *g, bool enabled) { g->grad_enabled = enabled; }
void tg_graph_set_seed(tg_graph *g, uint64_t seed) { g->seed = seed; }
void tg_graph_set_grad_hook(tg_graph *g, tg_grad_hook fn, void *ctx) {
    if (!g) return;
    g->grad_hook = fn;
    g->grad_hook_ctx = ctx;
}
void tg_graph_set_planner(tg_graph *g, bool enabled) {
    g->planner = enabled;
    g->planned = false;
}
void tg_graph_set_fusion(tg_graph *g, bool enabled) {
    g->fusion = enabled;
    g->planned = false;
}
int64_t tg_graph_node_count(const tg_graph *g) { return g->n; }
int64_t tg_graph_exec_count(const tg_graph *g) { return g->nexec; }
size_t tg_graph_peak_bytes(const tg_graph *g) { return g->peak; }
size_t tg_graph_total_bytes(const tg_graph *g) { return g->total; }

tg_tensor *tg__graph_fail(tg_graph *g, tg_status st, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tg_error_set(st, "%s", buf);
    if (g && g->status == TG_OK) {
        g->status = st;
        snprintf(g->msg, sizeof g->msg, "%s", buf);
    }
    return NULL;
}

tg_tensor *tg__graph_new(tg_graph *g, tg_op op, tg_dtype dt, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TG_MAX_DIMS)
        return tg__graph_fail(g, TG_ERR_SHAPE, "%s: %d dimensions (at most %d)", tg_op_name(op),
                              ndim, TG_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return tg__graph_fail(g, TG_ERR_SHAPE, "%s: negative dimension %lld", tg_op_name(op),
                                  (long long)shape[i]);
    if (g->n == g->cap) {
        int64_t cap = g->cap ? 2 * g->cap : 1024;
        tg_tensor **nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes)
            return tg__graph_fail(g, TG_ERR_NOMEM, "graph: out of memory for %lld nodes",
                                  (long long)cap);
        g->nodes = nodes;
        g->cap = cap;
    }
    if (g->chunk_used == TG_CHUNK) {
        void **chunks = realloc(g->chunks, (size_t)(g->nchunks + 1) * sizeof *chunks);
        if (!chunks) return tg__graph_fail(g, TG_ERR_NOMEM, "graph: out of memory");
        g->chunks = chunks;
        g->chunks[g->nchunks] = malloc(TG_CHUNK * sizeof(tg_tensor));
        if (!g->chunks[g->nchunks]) return tg__graph_fail(g, TG_ERR_NOMEM, "graph: out of memory");
        g->nchunks++;
        g->chunk_used = 0;
    }
    tg_tensor *t = (tg_tensor *)g->chunks[g->nchunks - 1] + g->chunk_used++;
    memset(t, 0, sizeof *t);
    t->graph = g;
    t->id = g->n;
    t->op = op;
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    tg__tensor_contiguous_strides(ndim, t->shape, t->stride);
    t->param = -1;
    t->pos = -1;
    t->block = -1;
    g->nodes[g->n++] = t;
    g->planned = false;
    return t;
}

void tg__graph_set_src(tg_tensor *t, int nsrc, tg_tensor *const *src) {
    t->nsrc = nsrc;
    for (int i = 0; i < nsrc; i++) {
        t->src[i] = src[i];
        if (src[i] && (src[i]->flags & TG_TF_REQ_GRAD) && !(tg__op_flags(t->op) & TG_OPF_NO_GRAD))
            t->flags |= TG_TF_REQ_GRAD;
    }
}

tg_tensor *tg__graph_view(tg_tensor *x, tg_op op, int ndim, const int64_t *shape,
                          const int64_t *stride, int64_t extra_offset) {
    tg_tensor *t = tg__graph_new(x->graph, op, x->dtype, ndim, shape);
    if (!t) return NULL;
    for (int i = 0; i < ndim; i++) t->stride[i] = stride[i];
    t->base = tg__tensor_root(x);
    t->offset = x->offset + extra_offset;
    tg__graph_set_src(t, 1, &x);
    return t;
}

static bool check_leaf_shape(tg_graph *g, const char *fn, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TG_MAX_DIMS) {
        tg__graph_fail(g, TG_ERR_SHAPE, "%s: %d dimensions (at most %d)", fn, ndim, TG_MAX_DIMS);
        return false;
    }
    if (ndim > 0 && !shape) {
        tg__graph_fail(g, TG_ERR_INVALID, "%s: shape is NULL", fn);
        return false;
    }
    return true;
}

tg_tensor *tg_input(tg_graph *g, tg_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    if (!g) return NULL;
    if (!check_leaf_shape(g, "tg_input", ndim, shape)) return NULL;
    if (!data) return tg__graph_fail(g, TG_ERR_INVALID, "tg_input: data is NULL");
    if (dtype != TG_DTYPE_F32 && dtype != TG_DTYPE_I32)
        return tg__graph_fail(g, TG_ERR_DTYPE, "tg_input: unknown dtype %d", (int)dtype);
    tg_tensor *t = tg__graph_new(g, TG_OP_NONE, dtype, ndim, shape);
    if (!t) return NULL;
    size_t bytes = tg__tensor_nbytes(t);
    t->host = malloc(bytes ? bytes : 1);
    if (!t->host)
        return tg__graph_fail(g, TG_ERR_NOMEM, "tg_input: out of memory (%zu bytes)", bytes);
    memcpy(t->host, data, bytes);
    t->flags |= TG_TF_INPUT;
    return t;
}

tg_tensor *tg_full(tg_graph *g, float value, int ndim, const int64_t *shape) {
    if (!g) return NULL;
    if (!check_leaf_shape(g, "tg_full", ndim, shape)) return NULL;
    tg_tensor *t = tg__graph_new(g, TG_OP_FILL, TG_DTYPE_F32, ndim, shape);
    if (t) t->p.fill.value = value;
    return t;
}

tg_tensor *tg_param(tg_graph *g, tg_store *s, const char *name) {
    if (!g) return NULL;
    if (!s || !name) return tg__graph_fail(g, TG_ERR_INVALID, "tg_param: store or name is NULL");
    int64_t i = tg_store_find(s, name);
    if (i < 0)
        return tg__graph_fail(g, TG_ERR_NOT_FOUND, "tg_param: no parameter '%s' in the store",
                              name);
    tg_param_entry *e = &s->p[i];
    tg_tensor *t = tg__graph_new(g, TG_OP_NONE, TG_DTYPE_F32, e->ndim, e->shape);
    if (!t) return NULL;
    t->flags |= TG_TF_PARAM;
    t->store = s;
    t->param = i;
    if (g->grad_enabled && e->trainable) t->flags |= TG_TF_REQ_GRAD;
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

tg_tensor *tg_requires_grad(tg_tensor *t) {
    if (!t) return NULL;
    if (t->op != TG_OP_NONE || t->dtype != TG_DTYPE_F32)
        return tg__graph_fail(t->graph, TG_ERR_INVALID,
                              "tg_requires_grad: only f32 leaf tensors can require a gradient");
    if (t->graph->grad_enabled) t->flags |= TG_TF_REQ_GRAD | TG_TF_WANT_GRAD;
    return t;
}

tg_tensor *tg_keep(tg_tensor *t) {
    if (!t) return NULL;
    if (!(t->flags & TG_TF_KEEP)) {
        t->flags |= TG_TF_KEEP;
        /* Kept only now: if the graph already ran, the planner may have reused this tensor's
         * buffer, so it must not be readable until the next run (tg_tensor_read requires
         * NEEDED, which the next plan sets again). Parameters live in the store: unaffected. */
        if (!(t->flags & TG_TF_PARAM)) t->flags &= ~(uint32_t)TG_TF_NEEDED;
        t->graph->planned = false;
    }
    return t;
}
