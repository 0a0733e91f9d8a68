/* The layout op family: leaves, views (reshape, permute, slice: no data moves) and the copies
 * (contiguous, concat, pad, expand), with their shape rules and gradient rules. Kernels:
 * backends/cpu/k_layout.c, backends/cuda/cuda_ops.c (+ k_layout.cu). */
#include <stdlib.h>
#include <string.h>

#include "core/ops/ops-impl.h"

tg_tensor *tg__op_cont(tg_tensor *x) {
    if (!x) return NULL;
    if (tg__tensor_is_contiguous(x)) return x;
    tg_tensor *t = tg__graph_new(x->graph, TG_OP_CONT, x->dtype, x->ndim, x->shape);
    if (t) tg__graph_set_src(t, 1, &x);
    return t;
}

tg_tensor *tg_contiguous(tg_tensor *x) {
    return tg__op_cont(x);
}

tg_tensor *tg_reshape(tg_tensor *x, int ndim, const int64_t *shape) {
    TG__OP_CHECK(x);
    tg_graph *g = x->graph;
    if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim > 0 && !shape))
        return tg__graph_fail(g, TG_ERR_SHAPE, "tg_reshape: bad number of dimensions %d", ndim);
    /* every message names the shape as requested (with its -1), the input shape too */
    char req[96], a[96];
    tg_shape_str(req, sizeof req, ndim, shape);
    TG__OP_SHAPESTR(a, x);
    int64_t s[TG_MAX_DIMS], known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (s[i] == -1) {
            if (infer >= 0)
                return tg__graph_fail(g, TG_ERR_SHAPE, "tg_reshape: %s to %s: more than one -1", a,
                                      req);
            infer = i;
        } else if (s[i] < 0) {
            return tg__graph_fail(g, TG_ERR_SHAPE, "tg_reshape: %s to %s: negative dimension %lld",
                                  a, req, (long long)s[i]);
        } else {
            known *= s[i];
        }
    }
    int64_t n = tg_tensor_numel(x);
    if (infer >= 0) {
        if (known == 0 || n % known != 0)
            return tg__graph_fail(g, TG_ERR_SHAPE,
                                  "tg_reshape: cannot infer -1 reshaping %s (%lld elements) to %s",
                                  a, (long long)n, req);
        s[infer] = n / known;
    }
    if (tg__tensor_numel(ndim, s) != n) {
        char b[96];
        return tg__graph_fail(g, TG_ERR_SHAPE, "tg_reshape: %s has %lld elements, %s has %lld", a,
                              (long long)n, tg_shape_str(b, sizeof b, ndim, s),
                              (long long)tg__tensor_numel(ndim, s));
    }
    tg_tensor *c = tg__op_cont(x);
    TG__OP_CHECK(c);
    int64_t st[TG_MAX_DIMS];
    tg__tensor_contiguous_strides(ndim, s, st);
    return tg__graph_view(c, TG_OP_RESHAPE, ndim, s, st, 0);
}

tg_tensor *tg_permute(tg_tensor *x, const int *perm) {
    TG__OP_CHECK(x);
    if (!perm) return tg__graph_fail(x->graph, TG_ERR_INVALID, "tg_permute: perm is NULL");
    int64_t s[TG_MAX_DIMS], st[TG_MAX_DIMS];
    bool seen[TG_MAX_DIMS] = {false};
    for (int i = 0; i < x->ndim; i++) {
        int p = perm[i];
        if (p < 0 || p >= x->ndim || seen[p])
            return tg__graph_fail(x->graph, TG_ERR_INVALID,
                                  "tg_permute: entry %d (=%d) is not a permutation of 0..%d", i, p,
                                  x->ndim - 1);
        seen[p] = true;
        s[i] = x->shape[p];
        st[i] = x->stride[p];
    }
    tg_tensor *t = tg__graph_view(x, TG_OP_PERMUTE, x->ndim, s, st, 0);
    if (t)
        for (int i = 0; i < x->ndim; i++) t->p.permute.perm[i] = perm[i];
    return t;
}

tg_tensor *tg_transpose(tg_tensor *x, int axis0, int axis1) {
    TG__OP_CHECK(x);
    int a = tg__tensor_axis(axis0, x->ndim), b = tg__tensor_axis(axis1, x->ndim);
    if (a < 0 || b < 0)
        return tg__graph_fail(x->graph, TG_ERR_INVALID,
                              "tg_transpose: axes %d, %d out of range for %d dims", axis0, axis1,
                              x->ndim);
    int perm[TG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return tg_permute(x, perm);
}

tg_tensor *tg_slice(tg_tensor *x, int axis, int64_t start, int64_t end) {
    TG__OP_CHECK(x);
    int a = tg__tensor_axis(axis, x->ndim);
    if (a < 0)
        return tg__graph_fail(x->graph, TG_ERR_INVALID,
                              "tg_slice: axis %d out of range for %d dims", axis, x->ndim);
    if (start < 0 || end < start || end > x->shape[a])
        return tg__graph_fail(x->graph, TG_ERR_SHAPE,
                              "tg_slice: range [%lld, %lld) outside axis %d of size %lld",
                              (long long)start, (long long)end, axis, (long long)x->shape[a]);
    int64_t s[TG_MAX_DIMS];
    memcpy(s, x->shape, sizeof s);
    s[a] = end - start;
    tg_tensor *t = tg__graph_view(x, TG_OP_SLICE, x->ndim, s, x->stride, start * x->stride[a]);
    if (t) {
        t->p.slice.axis = a;
        t->p.slice.start = start;
    }
    return t;
}

static tg_tensor *concat_some(tg_tensor *const *xs, int n, int a) {
    tg_tensor *src[TG_MAX_SRC];
    int64_t s[TG_MAX_DIMS];
    memcpy(s, xs[0]->shape, sizeof s);
    s[a] = 0;
    for (int i = 0; i < n; i++) {
        src[i] = tg__op_cont(xs[i]);
        TG__OP_CHECK(src[i]);
        s[a] += xs[i]->shape[a];
    }
    tg_tensor *t = tg__graph_new(xs[0]->graph, TG_OP_CONCAT, xs[0]->dtype, xs[0]->ndim, s);
    TG__OP_CHECK(t);
    tg__graph_set_src(t, n, src);
    t->p.concat.axis = a;
    return t;
}

tg_tensor *tg_concat(tg_tensor *const *xs, int n, int axis) {
    if (!xs || n < 1) { /* no tensor, so no graph to record on: the thread's message only */
        tg_error_set(TG_ERR_INVALID, "tg_concat: no inputs (n = %d)", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) TG__OP_CHECK(xs[i]);
    tg_graph *g = xs[0]->graph;
    for (int i = 1; i < n; i++)
        if (xs[i]->graph != g)
            return tg__graph_fail(g, TG_ERR_INVALID,
                                  "tg_concat: input %d belongs to a different graph", i);
    int a = tg__tensor_axis(axis, xs[0]->ndim);
    if (a < 0) return tg__graph_fail(g, TG_ERR_INVALID, "tg_concat: axis %d out of range", axis);
    for (int i = 1; i < n; i++) {
        if (xs[i]->dtype != xs[0]->dtype)
            return tg__graph_fail(g, TG_ERR_DTYPE, "tg_concat: input %d is %s, input 0 is %s", i,
                                  tg_dtype_name(xs[i]->dtype), tg_dtype_name(xs[0]->dtype));
        bool ok = xs[i]->ndim == xs[0]->ndim;
        for (int d = 0; ok && d < xs[0]->ndim; d++)
            if (d != a && xs[i]->shape[d] != xs[0]->shape[d]) ok = false;
        if (!ok) {
            char s0[96], si[96];
            return tg__graph_fail(g, TG_ERR_SHAPE,
                                  "tg_concat: input %d %s does not fit input 0 %s on axis %d", i,
                                  TG__OP_SHAPESTR(si, xs[i]), TG__OP_SHAPESTR(s0, xs[0]), axis);
        }
    }
    if (n == 1) return xs[0];
    /* More inputs than a node holds: concatenate in groups, then the groups (recursively:
     * more than TG_MAX_SRC^2 inputs make more than TG_MAX_SRC groups). */
    if (n > TG_MAX_SRC) {
        int np = (n + TG_MAX_SRC - 1) / TG_MAX_SRC;
        tg_tensor **parts = malloc((size_t)np * sizeof *parts);
        if (!parts)
            return tg__graph_fail(g, TG_ERR_NOMEM, "tg_concat: out of memory for %d inputs", n);
        for (int j = 0; j < np; j++) {
            int i = j * TG_MAX_SRC, k = n - i < TG_MAX_SRC ? n - i : TG_MAX_SRC;
            parts[j] = k == 1 ? xs[i] : concat_some(xs + i, k, a);
            if (!parts[j]) {
                free(parts);
                return NULL;
            }
        }
        tg_tensor *t = tg_concat(parts, np, a);
        free(parts);
        return t;
    }
    return concat_some(xs, n, a);
}

tg_tensor *tg_pad(tg_tensor *x, int axis, int64_t before, int64_t after) {
    TG__OP_CHECK(x);
    int a = tg__tensor_axis(axis, x->ndim);
    if (a < 0 || before < 0 || after < 0)
        return tg__graph_fail(x->graph, TG_ERR_INVALID,
                              "tg_pad: axis %d / padding %lld,%lld invalid", axis,
                              (long long)before, (long long)after);
    tg_tensor *c = tg__op_cont(x);
    TG__OP_CHECK(c);
    int64_t s[TG_MAX_DIMS];
    memcpy(s, x->shape, sizeof s);
    s[a] += before + after;
    tg_tensor *t = tg__graph_new(x->graph, TG_OP_PAD, x->dtype, x->ndim, s);
    TG__OP_CHECK(t);
    tg__graph_set_src(t, 1, &c);
    t->p.pad.axis = a;
    t->p.pad.before = before;
    t->p.pad.after = after;
    return t;
}

tg_tensor *tg_expand(tg_tensor *x, int ndim, const int64_t *shape) {
    TG__OP_CHECK(x);
    if (ndim < 0 || ndim > TG_MAX_DIMS || !tg__op_broadcasts_to(x->ndim, x->shape, ndim, shape)) {
        char a[96], b[96];
        return tg__graph_fail(x->graph, TG_ERR_SHAPE, "tg_expand: %s does not broadcast to %s",
                              TG__OP_SHAPESTR(a, x), tg_shape_str(b, sizeof b, ndim, shape));
    }
    tg_tensor *c = tg__op_cont(x);
    TG__OP_CHECK(c);
    tg_tensor *t = tg__graph_new(x->graph, TG_OP_EXPAND, x->dtype, ndim, shape);
    if (t) tg__graph_set_src(t, 1, &c);
    return t;
}

/* ---- gradient rules ---- */

#define X(i) (node->src[i])

/* reshape: dy reshaped back to the input's shape */
static void g_reshape(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_reshape(dy, X(0)->ndim, X(0)->shape));
}

/* permute by perm: dy permuted by the inverse permutation (inv[perm[i]] = i) */
static void g_permute(tg_tensor *node, tg_tensor *dy) {
    int inv[TG_MAX_DIMS];
    for (int i = 0; i < node->ndim; i++) inv[node->p.permute.perm[i]] = i;
    tg__grad_accum(X(0), tg_permute(dy, inv));
}

/* slice: dy in the slice's range of the source's gradient, zero elsewhere (slices that tile
 * an axis, as a fused Q/K/V projection's or RoPE's halves, become one concatenation) */
static void g_slice(tg_tensor *node, tg_tensor *dy) {
    int a = node->p.slice.axis;
    int64_t start = node->p.slice.start;
    tg__grad_slice(X(0), a, start, start + node->shape[a], dy);
}

/* contiguous copy: the identity */
static void g_identity(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), dy);
}

/* concat: input i gets its own range of dy along the axis */
static void g_concat(tg_tensor *node, tg_tensor *dy) {
    int a = node->p.concat.axis;
    int64_t off = 0;
    for (int i = 0; i < node->nsrc; i++) {
        int64_t len = X(i)->shape[a];
        tg__grad_accum(X(i), tg_slice(dy, a, off, off + len));
        off += len;
    }
}

/* pad: the unpadded range of dy */
static void g_pad(tg_tensor *node, tg_tensor *dy) {
    int a = node->p.pad.axis;
    int64_t before = node->p.pad.before;
    tg__grad_accum(X(0), tg_slice(dy, a, before, before + X(0)->shape[a]));
}

/* expand (broadcast): dy summed over the stretched dimensions */
static void g_expand(tg_tensor *node, tg_tensor *dy) {
    tg__grad_accum(X(0), tg_sum_to(dy, X(0)->ndim, X(0)->shape));
}

/* ---- the family's rows ---- */

TG__OP_FAMILY(layout) = {
    [TG_OP_NONE] = {"leaf", 0, NULL}, /* inputs and parameters: core/graph.c */
    [TG_OP_RESHAPE] = {"reshape", TG_OPF_VIEW, g_reshape},
    [TG_OP_PERMUTE] = {"permute", TG_OPF_VIEW, g_permute},
    [TG_OP_SLICE] = {"slice", TG_OPF_VIEW, g_slice},
    [TG_OP_CONT] = {"contiguous", 0, g_identity},
    [TG_OP_CONCAT] = {"concat", 0, g_concat},
    [TG_OP_PAD] = {"pad", 0, g_pad},
    [TG_OP_EXPAND] = {"expand", 0, g_expand},
};
TG__OP_FAMILY_CHECK(layout);
