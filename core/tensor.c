/* Shapes, strides and tensor accessors. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/graph-impl.h"

size_t tg_dtype_size(tg_dtype dt) { return dt == TG_DTYPE_I32 ? 4 : 4; }

const char *tg_dtype_name(tg_dtype dt) { return dt == TG_DTYPE_I32 ? "i32" : "f32"; }

int64_t tg__tensor_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void tg__tensor_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i];
    }
}

bool tg__tensor_is_contiguous(const tg_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

int tg__tensor_axis(int axis, int ndim) {
    if (axis < 0) axis += ndim;
    return (axis < 0 || axis >= ndim) ? -1 : axis;
}

bool tg__tensor_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                          int64_t *out) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da != db && da != 1 && db != 1) return false;
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return true;
}

bool tg__tensor_same_shape(const tg_tensor *a, const tg_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

char *tg_shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t k = 0;
    if (size == 0) return buf;
    k += (size_t)snprintf(buf + k, size - k, "[");
    for (int i = 0; i < ndim && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
    return buf;
}

int tg_tensor_ndim(const tg_tensor *t) { return t->ndim; }

int64_t tg_tensor_dim(const tg_tensor *t, int axis) {
    int a = tg__tensor_axis(axis, t->ndim);
    return a < 0 ? -1 : t->shape[a];
}

int tg_tensor_shape(const tg_tensor *t, int64_t shape[TG_MAX_DIMS]) {
    for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
    return t->ndim;
}

int64_t tg_tensor_numel(const tg_tensor *t) {
    return tg__tensor_numel(t->ndim, t->shape);
}
tg_dtype tg_tensor_dtype(const tg_tensor *t) { return t->dtype; }
const char *tg_tensor_name(const tg_tensor *t) { return t->name; }
tg_op tg_tensor_op(const tg_tensor *t) { return t->op; }

tg_tensor *tg_tensor_set_name(tg_tensor *t, const char *fmt, ...) {
    if (!t) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    return t;
}
