/* Running a planned graph on a backend, and reading results back. */
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "core/store-impl.h"

static double now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tg_status tg__exec_plan(tg_graph *g, tg_backend *b);

/* What the calling thread does once node i of a run is complete: the gradient hook (data
 * parallelism starts a bucket's all-reduce) and, under TG_PROFILE, the node's time (from the
 * previous node's completion to this one's). */
typedef struct {
    tg_graph *g;
    tg_backend *b;
    tg_tensor **list;
    bool prof;
    double t0;
} run_ctx;

static void after_node(void *ctx, int64_t i) {
    run_ctx *r = ctx;
    tg_tensor *t = r->list[i];
    if (r->prof && !(t->flags & (TG_TF_INPUT | TG_TF_FUSED))) {
        r->b->vt->sync(r->b);
        tg__profile_node(t, now_sec() - r->t0);
    }
    if (t->op == TG_OP_GRAD_ACC && r->g->grad_hook) r->g->grad_hook(r->g->grad_hook_ctx, t->store, t->param);
    if (r->prof) r->t0 = now_sec();
}

/* The nodes a backend without run_graph runs, one call each. */
static tg_status run_each(tg_backend *b, tg_tensor *const *list, int64_t n, run_ctx *r,
                          int64_t *failed) {
    for (int64_t i = 0; i < n; i++) {
        tg_tensor *t = list[i];
        tg_status st = TG_OK;
        if (t->flags & TG_TF_INPUT)
            st = b->vt->copy_in(b, t->data, t->host, tg__tensor_nbytes(t));
        else if (!(t->flags & TG_TF_FUSED)) st = b->vt->run_node(b, t);
        if (st) {
            *failed = i;
            return st;
        }
        if (r) after_node(r, i);
    }
    return TG_OK;
}

void tg__exec_release_workspace(tg_graph *g) {
    if (g->ws && g->ws_backend) g->ws_backend->vt->free(g->ws_backend, g->ws, g->ws_size);
    g->ws = NULL;
    g->ws_size = 0;
    g->ws_backend = NULL;
}

/* Storage owners first, then views (fusion may have moved a view's base after it in the
 * order); a view of a chain member without a buffer has none either. */
static tg_status bind_data(tg_graph *g) {
    char *ws = g->ws;
    for (int64_t p = 0; p < g->nexec; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        if (t->base) continue;
        if (t->flags & TG_TF_PARAM) {
            t->data = t->store->p[t->param].data;
        } else if (t->op == TG_OP_GRAD_ACC || (t->flags & TG_TF_ACCUM)) {
            t->data = t->store->p[t->param].grad;
        } else if (t->block >= 0) {
            t->data = ws + g->block_off[t->block];
        } else if (t->flags & TG_TF_TRANSIENT) {
            t->data = NULL; /* lives in its chain tail's tiles */
        } else {
            return tg_error_set(TG_ERR_STATE, "tg_graph_run: tensor %lld (%s) has no storage",
                                (long long)t->id, tg_op_name(t->op));
        }
    }
    for (int64_t p = 0; p < g->nexec; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        if (!t->base) continue;
        char *base = t->base->data;
        t->data = base ? base + (size_t)t->offset * tg_dtype_size(t->dtype) : NULL;
    }
    return TG_OK;
}

tg_status tg_graph_run(tg_graph *g, tg_backend *b) {
    if (!g || !b) return tg_error_set(TG_ERR_INVALID, "tg_graph_run: graph or backend is NULL");
    if (g->status != TG_OK) return tg_error_set(g->status, "%s", g->msg);
    if (!g->planned || g->plan_backend != b) {
        g->plan_backend = b;
        tg_status st = tg__exec_plan(g, b);
        if (st) return st;
    }
    /* a backend that lacks an op says so: no silent fallback */
    for (int64_t p = 0; p < g->nexec; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        if (t->op != TG_OP_NONE && !t->base && !b->vt->supports_op(b, t->op))
            return tg_error_set(TG_ERR_UNSUPPORTED, "tg_graph_run: backend %s has no kernel for op %s",
                                b->vt->name, tg_op_name(t->op));
        if (t->store && t->store->backend != b)
            return tg_error_set(TG_ERR_INVALID,
                                "tg_graph_run: parameter '%s' lives on backend %s, graph runs on %s",
                                t->store->p[t->param].name, t->store->backend->vt->name, b->vt->name);
    }
    if (g->ws_backend != b || g->ws_size < g->peak) {
        tg__exec_release_workspace(g);
        if (g->peak) {
            g->ws = b->vt->alloc(b, g->peak);
            if (!g->ws)
                return tg_error_prefix(TG_ERR_NOMEM, "tg_graph_run: workspace of %zu bytes", g->peak);
            g->ws_size = g->peak;
            g->ws_backend = b;
        }
    }
    tg_status st = bind_data(g);
    if (st) return st;
    g->ran = false;
    /* The nodes to run, in order: inputs (copied in), kernels, and the gradient accumulations
     * when a hook waits for them (a fused one runs nothing: its producer, earlier in the list,
     * was the last writer of the gradient). Views and fused nodes cost nothing; a fused
     * elementwise chain runs as its tail (core/fuse.c). */
    tg_tensor **list = malloc((size_t)(g->nexec ? g->nexec : 1) * sizeof *list);
    if (!list) return tg_error_set(TG_ERR_NOMEM, "tg_graph_run: out of memory");
    int64_t n = 0;
    for (int64_t p = 0; p < g->nexec; p++) {
        tg_tensor *t = g->nodes[g->order[p]];
        if ((t->op == TG_OP_GRAD_ACC && g->grad_hook) || (t->flags & TG_TF_INPUT) ||
            !(t->op == TG_OP_NONE || (tg__op_flags(t->op) & TG_OPF_VIEW) ||
              (t->flags & (TG_TF_FUSED | TG_TF_CHAINED))))
            list[n++] = t;
    }
    const bool prof = tg__profile_on();
    run_ctx r = {.g = g, .b = b, .list = list, .prof = prof, .t0 = prof ? now_sec() : 0.0};
    bool need_after = r.prof || g->grad_hook;
    int64_t failed = -1;
    if (g->find_nonfinite)
        st = tg__finite_run(b, list, n, &failed);
    else if (b->vt->run_graph)
        st = b->vt->run_graph(b, list, n, need_after ? after_node : NULL, &r, &failed);
    else
        st = run_each(b, list, n, need_after ? &r : NULL, &failed);
    if (st && failed < 0) { /* tg__finite_run's finding names its node already */
        free(list);
        return st;
    }
    if (st) {
        tg_tensor *t = list[failed];
        free(list);
        return tg_error_prefix(st, "node %lld (%s%s%s)", (long long)t->id, tg_op_name(t->op),
                               t->name[0] ? " " : "", t->name);
    }
    free(list);
    st = b->vt->sync(b);
    if (st) return st;
    g->ran = true;
    return TG_OK;
}

tg_status tg_tensor_read(const tg_tensor *t, void *dst, size_t bytes) {
    if (!t || !dst) return tg_error_set(TG_ERR_INVALID, "tg_tensor_read: tensor or destination is NULL");
    tg_graph *g = t->graph;
    size_t need = tg__tensor_nbytes(t);
    if (bytes != need)
        return tg_error_set(TG_ERR_INVALID, "tg_tensor_read: %zu bytes requested, tensor has %zu",
                            bytes, need);
    if (!g->ran) return tg_error_set(TG_ERR_STATE, "tg_tensor_read: the graph has not been run");
    if (!(t->flags & (TG_TF_KEEP | TG_TF_PARAM)) || !(t->flags & TG_TF_NEEDED))
        return tg_error_set(TG_ERR_STATE,
                            "tg_tensor_read: tensor %lld (%s) was not kept (call tg_keep before running)",
                            (long long)t->id, tg_op_name(t->op));
    tg_backend *b = g->ws_backend ? g->ws_backend : (t->store ? t->store->backend : NULL);
    if (!b) return tg_error_set(TG_ERR_STATE, "tg_tensor_read: no backend holds the tensor");
    if (need == 0) return TG_OK;
    if (tg__tensor_is_contiguous(t)) return b->vt->copy_out(b, dst, t->data, need);
    /* a strided view: copy the spanned storage, then gather on the host */
    size_t es = tg_dtype_size(t->dtype);
    int64_t span = 1;
    for (int i = 0; i < t->ndim; i++) span += (t->shape[i] - 1) * t->stride[i];
    char *tmp = malloc((size_t)span * es);
    if (!tmp) return tg_error_set(TG_ERR_NOMEM, "tg_tensor_read: out of memory");
    tg_status st = b->vt->copy_out(b, tmp, t->data, (size_t)span * es);
    if (st == TG_OK) {
        int64_t n = tg_tensor_numel(t), idx[TG_MAX_DIMS] = {0};
        for (int64_t k = 0; k < n; k++) {
            int64_t off = 0;
            for (int i = 0; i < t->ndim; i++) off += idx[i] * t->stride[i];
            memcpy((char *)dst + (size_t)k * es, tmp + (size_t)off * es, es);
            for (int i = t->ndim - 1; i >= 0; i--) {
                if (++idx[i] < t->shape[i]) break;
                idx[i] = 0;
            }
        }
    }
    free(tmp);
    return st;
}

float tg_tensor_item(const tg_tensor *t) {
    float v;
    if (!t || tg_tensor_numel(t) != 1 || t->dtype != TG_DTYPE_F32) {
        tg_error_set(TG_ERR_INVALID, "tg_tensor_item: not a scalar f32 tensor");
        return NAN;
    }
    if (tg_tensor_read(t, &v, sizeof v) != TG_OK) return NAN;
    return v;
}
