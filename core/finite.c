/* Where a non-finite value comes from (tg_graph_find_nonfinite): the graph run again node by
 * node, each node's inputs read before it runs (an in-place node overwrites them) and its
 * output after, so that the first node that made a NaN, or an infinity from finite inputs (an
 * overflow), is named. An infinity made from infinite inputs is no origin: masks put -inf into
 * attention logits on purpose, and a softmax turns them into zeros. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "core/store-impl.h"

/* The first value of t's storage (its root's, for a view: a superset) that is NaN (nan_only)
 * or not finite: its index, or -1; its value in *v. -2 when it cannot be read (error set). */
static int64_t first_bad(tg_backend *b, const tg_tensor *t, bool nan_only, float *v) {
    const tg_tensor *r = tg__tensor_root(t);
    if (r->dtype != TG_DTYPE_F32 || !r->data) return -1;
    const int64_t n = tg_tensor_numel(r);
    const float *x = r->data;
    float *copy = NULL;
    if (!b->vt->host_memory) {
        if (!(copy = malloc((size_t)(n ? n : 1) * sizeof *copy))) {
            tg_error_set(TG_ERR_NOMEM, "tg_graph_find_nonfinite: out of memory");
            return -2;
        }
        if (b->vt->copy_out(b, copy, r->data, (size_t)n * sizeof *copy)) {
            free(copy);
            return -2;
        }
        x = copy;
    }
    int64_t at = -1;
    for (int64_t i = 0; i < n && at < 0; i++)
        if (nan_only ? isnan(x[i]) : !isfinite(x[i])) at = i, *v = x[i];
    free(copy);
    return at;
}

/* "node 12 (matmul name [4, 8])", or "parameter 'name' [4, 8]" */
static void describe(const tg_tensor *t, char *out, size_t size) {
    const tg_tensor *r = tg__tensor_root(t);
    int k;
    if (r->flags & TG_TF_PARAM)
        k = snprintf(out, size, "parameter '%s' [", r->store->p[r->param].name);
    else if (r->flags & TG_TF_INPUT)
        k = snprintf(out, size, "input %lld%s%s [", (long long)r->id, r->name[0] ? " " : "", r->name);
    else
        k = snprintf(out, size, "node %lld (%s%s%s) [", (long long)r->id, tg_op_name(r->op), r->name[0] ? " " : "",
                     r->name);
    for (int d = 0; d < r->ndim && k > 0 && (size_t)k < size; d++)
        k += snprintf(out + k, size - (size_t)k, d ? ", %lld" : "%lld", (long long)r->shape[d]);
    if (k > 0 && (size_t)k < size) snprintf(out + k, size - (size_t)k, "]");
}

/* Whether x is one of the chain members that node t runs (t itself included) */
static bool in_chain(const tg_tensor *t, const tg_tensor *x) {
    for (const tg_tensor *c = t; c; c = c->chain_prev)
        if (c == tg__tensor_root(x)) return true;
    return false;
}

/* Node t's inputs, and those of the chain members it runs (core/fuse.c), into in[]: what the
 * node reads from before it, not the members it computes itself. */
static int inputs_of(const tg_tensor *t, const tg_tensor **in, int max) {
    int n = 0;
    for (const tg_tensor *c = t; c; c = c->chain_prev)
        for (int s = 0; s < c->nsrc && n < max; s++)
            if (c->src[s] && !(c->src[s]->flags & TG_TF_TRANSIENT) && !in_chain(t, c->src[s])) in[n++] = c->src[s];
    return n;
}

/* t's inputs described, ", " between them */
static void list_inputs(const tg_tensor *t, char *out, size_t size) {
    enum { MAX_IN = 8 };
    const tg_tensor *in[MAX_IN];
    const int n = inputs_of(t, in, MAX_IN);
    size_t k = 0;
    out[0] = '\0';
    for (int s = 0; s < n && k + 2 < size; s++) {
        if (s) k += (size_t)snprintf(out + k, size - k, ", ");
        if (k < size) describe(in[s], out + k, size - k);
        k = strlen(out);
    }
}

/* Node t, about to run: the first of its inputs holding a NaN (*nan_in), and whether any holds
 * an infinity or a NaN (*bad_in). */
static tg_status check_inputs(tg_backend *b, const tg_tensor *t, const tg_tensor **nan_in, bool *bad_in,
                              int64_t *at, float *v) {
    enum { MAX_IN = 64 };
    const tg_tensor *in[MAX_IN];
    const int n = inputs_of(t, in, MAX_IN);
    *nan_in = NULL;
    *bad_in = false;
    for (int s = 0; s < n; s++) {
        float x;
        const int64_t i = first_bad(b, in[s], false, &x);
        if (i == -2) return TG_ERR_NOMEM;
        if (i < 0) continue;
        *bad_in = true;
        const int64_t j = isnan(x) ? i : first_bad(b, in[s], true, &x);
        if (j == -2) return TG_ERR_NOMEM;
        if (j >= 0 && !*nan_in) *nan_in = in[s], *at = j, *v = x;
    }
    return TG_OK;
}

/* The run of tg_graph_find_nonfinite (core/exec.c calls it for the nodes of tg_graph_run):
 * TG_ERR_NUMERIC naming the origin, with *failed left as it was; another failure sets *failed. */
tg_status tg__finite_run(tg_backend *b, tg_tensor *const *list, int64_t n, int64_t *failed) {
    char what[256], from[512];
    for (int64_t i = 0; i < n; i++) {
        tg_tensor *t = list[i];
        tg_status st = TG_OK;
        if (t->flags & TG_TF_INPUT) {
            st = b->vt->copy_in(b, t->data, t->host, tg__tensor_nbytes(t));
        } else if (!(t->flags & TG_TF_FUSED)) {
            const tg_tensor *nan_in;
            bool bad_in;
            int64_t in_at = 0;
            float in_v = 0.0f, v = 0.0f;
            st = check_inputs(b, t, &nan_in, &bad_in, &in_at, &in_v);
            if (!st) st = b->vt->run_node(b, t);
            const int64_t at = st ? -1 : first_bad(b, t, bad_in, &v);
            if (at == -2) st = TG_ERR_NOMEM;
            if (at >= 0) {
                describe(t, what, sizeof what);
                if (nan_in) {
                    describe(nan_in, from, sizeof from);
                    return tg_error_set(TG_ERR_NUMERIC, "%s reads %g at element %lld of its input %s", what,
                                        (double)(isnan(in_v) ? fabsf(in_v) : in_v), (long long)in_at, from);
                }
                list_inputs(t, from, sizeof from);
                return tg_error_set(TG_ERR_NUMERIC, "%s made %g at element %lld from %s inputs (%s)", what,
                                    (double)(isnan(v) ? fabsf(v) : v), (long long)at, bad_in ? "infinite" : "finite", from);
            }
        }
        if (st) {
            *failed = i;
            return st;
        }
    }
    return TG_OK;
}

tg_status tg_graph_find_nonfinite(tg_graph *g, tg_backend *b) {
    if (!g || !b) return tg_error_set(TG_ERR_INVALID, "tg_graph_find_nonfinite: graph or backend is NULL");
    g->find_nonfinite = true;
    tg_status st = tg_graph_run(g, b);
    g->find_nonfinite = false;
    return st;
}
