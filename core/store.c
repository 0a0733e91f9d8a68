/* The parameter store: named persistent f32 tensors and their gradients on a backend. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "core/store-impl.h"

tg_status tg_store_new(tg_backend *b, tg_store **out) {
    if (!b || !out) return tg_error_set(TG_ERR_INVALID, "tg_store_new: backend or out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return tg_error_set(TG_ERR_NOMEM, "tg_store_new: out of memory");
    (*out)->backend = b;
    (*out)->open[0] = (*out)->open[1] = -1;
    return TG_OK;
}

tg_status tg__store_new_scratch(tg_backend *b, tg_store **out) {
    tg_status st = tg_store_new(b, out);
    if (st == TG_OK) (*out)->scratch = true;
    return st;
}

void tg_store_free(tg_store *s) {
    if (!s) return;
    tg_backend *b = s->backend;
    for (int64_t i = 0; i < s->nslabs; i++) {
        const size_t bytes = (size_t)s->slabs[i].cap * sizeof(float);
        b->vt->free(b, s->slabs[i].data, bytes);
        if (s->slabs[i].grad) b->vt->free(b, s->slabs[i].grad, bytes);
    }
    free(s->slabs);
    free(s->p);
    free(s);
}

/* ---- slabs ----
 * A store's parameters are carved from slabs, in the order they are added, each on a 64-byte
 * line, the values between them zero; one gradient slab per trainable slab, at the same
 * offsets. A series' slabs double from 8 MiB to 256 MiB (with the CPU backend's block header;
 * a parameter bigger than the next slab gets one of its own size), so that a small model
 * takes little and a big one a few slabs. Why slabs rather than a block per parameter:
 *   - slabs come from the backend's alloc_lasting, which the CPU backend maps, for blocks of
 *     8 MiB and more, on 2-MiB huge pages (backends/cpu/cpu.c), so an optimizer's streams over
 *     weights, gradients and moments meet 2-MiB pages, not 4-KiB ones, and a 512th of the TLB
 *     misses: Adam's step over g2p-small's 22 MB of weights took 3.1 ms instead of 3.6
 *     (docs/log/2026-12-05.md);
 *   - zeroing the gradients, scaling them, and an optimizer's step (train/optim.c) run over a
 *     slab or a run of parameters at a time, not a pass of the backend's thread team per
 *     parameter.
 * A slab's memory is resident only as far as it is used (up to a huge page past it). Slabs are
 * never given back before the store is freed: a store only grows. */
enum { SLAB_MIN = 8 << 20, SLAB_DOUBLINGS = 5, PARAM_ALIGN = TG_ALIGN / (int)sizeof(float) };

/* Floats of a series' slab after `made` slabs (the backend's block header included, a whole
 * number of huge pages) */
static int64_t slab_floats(int made) {
    const int64_t bytes = (int64_t)SLAB_MIN << (made < SLAB_DOUBLINGS ? made : SLAB_DOUBLINGS);
    return (bytes - TG_ALIGN) / (int64_t)sizeof(float);
}

static int64_t padded(int64_t numel) {
    return (numel + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
}

/* A slab with room for `want` floats in the series of trainable (or frozen) parameters: the
 * open one, else a new one, which becomes the open one unless it is a big parameter's own.
 * Returns its index, or -1 with the error set. */
static int64_t slab_for(tg_store *s, int64_t want, bool trainable) {
    const int64_t o = s->open[trainable];
    if (o >= 0 && s->slabs[o].cap - s->slabs[o].used >= want) return o;
    if (s->nslabs == s->cap_slabs) {
        const int64_t cap = s->cap_slabs ? 2 * s->cap_slabs : 8;
        tg_store_slab *sl = realloc(s->slabs, (size_t)cap * sizeof *sl);
        if (!sl) {
            tg_error_set(TG_ERR_NOMEM, "out of memory");
            return -1;
        }
        s->slabs = sl;
        s->cap_slabs = cap;
    }
    tg_backend *b = s->backend;
    const int64_t next = slab_floats(s->made[trainable]), cap = want > next ? want : next;
    const size_t bytes = (size_t)cap * sizeof(float);
    void *(*alloc)(tg_backend *, size_t) = s->scratch ? b->vt->alloc : tg__backend_alloc_lasting;
    tg_store_slab sl = {.cap = cap};
    if (!(sl.data = alloc(b, bytes))) return -1;
    if (trainable && !(sl.grad = alloc(b, bytes))) {
        b->vt->free(b, sl.data, bytes);
        return -1;
    }
    s->slabs[s->nslabs] = sl;
    if (want <= next) { /* a big parameter's own slab stays out of the series */
        s->open[trainable] = s->nslabs;
        s->made[trainable]++;
    }
    return s->nslabs++;
}

tg_backend *tg_store_backend(const tg_store *s) { return s->backend; }

int64_t tg_store_find(const tg_store *s, const char *name) {
    if (!s || !name) return -1;
    for (int64_t i = 0; i < s->n; i++)
        if (strcmp(s->p[i].name, name) == 0) return i;
    return -1;
}

static atomic_bool poison_unset;

bool tg__store_poison_unset(bool on) {
    return atomic_exchange(&poison_unset, on);
}

/* numel values at data set to NaN (tg__store_poison_unset) */
static tg_status poison(tg_backend *b, float *data, int64_t numel) {
    float *nan = malloc((size_t)numel * sizeof *nan);
    if (!nan) return tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < numel; i++)
        nan[i] = NAN;
    tg_status st = b->vt->copy_in(b, data, nan, (size_t)numel * sizeof *nan);
    free(nan);
    return st;
}

/* tg_store_add, or with zero false tg__store_add_unset */
static tg_status store_add(tg_store *s, const char *name, int ndim, const int64_t *shape,
                           const float *init, bool trainable, bool zero) {
    if (!s || !name) return tg_error_set(TG_ERR_INVALID, "tg_store_add: store or name is NULL");
    if (!name[0] || strlen(name) >= sizeof s->p[0].name)
        return tg_error_set(TG_ERR_INVALID, "tg_store_add: name '%s' empty or longer than %zu bytes",
                            name, sizeof s->p[0].name - 1);
    if (tg_store_find(s, name) >= 0)
        return tg_error_set(TG_ERR_INVALID, "tg_store_add: parameter '%s' already exists", name);
    if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim > 0 && !shape))
        return tg_error_set(TG_ERR_SHAPE, "tg_store_add: '%s': bad number of dimensions %d", name, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] <= 0)
            return tg_error_set(TG_ERR_SHAPE, "tg_store_add: '%s': dimension %d is %lld", name, i,
                                (long long)shape[i]);
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        tg_param_entry *p = realloc(s->p, (size_t)cap * sizeof *p);
        if (!p) return tg_error_set(TG_ERR_NOMEM, "tg_store_add: out of memory");
        s->p = p;
        s->cap = cap;
    }
    tg_param_entry *e = &s->p[s->n];
    memset(e, 0, sizeof *e);
    strcpy(e->name, name);
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->numel = tg__tensor_numel(ndim, shape);
    e->trainable = trainable;
    tg_backend *b = s->backend;
    const int64_t room = padded(e->numel), k = slab_for(s, room, trainable);
    if (k < 0) return tg_error_prefix(TG_ERR_NOMEM, "tg_store_add: '%s'", name);
    tg_store_slab *sl = &s->slabs[k];
    e->slab = k;
    e->off = sl->used;
    e->data = sl->data + e->off;
    e->grad = trainable ? sl->grad + e->off : NULL;
    /* the whole room zeroed (the padding stays zero: optimizer steps over it leave it so),
     * then the values; an unset entry's values are left as they are (NaN for tests) */
    const size_t bytes = (size_t)e->numel * sizeof(float),
                 room_bytes = (size_t)room * sizeof(float);
    tg_status st = zero                         ? b->vt->memset0(b, e->data, room_bytes)
                   : atomic_load(&poison_unset) ? poison(b, e->data, e->numel)
                                                : TG_OK;
    if (st == TG_OK && init) st = b->vt->copy_in(b, e->data, init, bytes);
    if (st == TG_OK && trainable) st = b->vt->memset0(b, e->grad, room_bytes);
    if (st != TG_OK) return tg_error_prefix(st, "tg_store_add: '%s'", name);
    sl->used += room;
    s->n++;
    return TG_OK;
}

tg_status tg_store_add(tg_store *s, const char *name, int ndim, const int64_t *shape,
                       const float *init, bool trainable) {
    return store_add(s, name, ndim, shape, init, trainable, true);
}

tg_status tg__store_add_unset(tg_store *s, const char *name, int ndim, const int64_t *shape) {
    return store_add(s, name, ndim, shape, NULL, false, false);
}

int64_t tg_store_count(const tg_store *s) { return s ? s->n : 0; }
const char *tg_store_name(const tg_store *s, int64_t i) {
    return (s && i >= 0 && i < s->n) ? s->p[i].name : NULL;
}
int tg_store_shape(const tg_store *s, int64_t i, int64_t shape[TG_MAX_DIMS]) {
    if (!s || i < 0 || i >= s->n) return -1;
    for (int k = 0; k < s->p[i].ndim; k++) shape[k] = s->p[i].shape[k];
    return s->p[i].ndim;
}
int64_t tg_store_numel(const tg_store *s, int64_t i) {
    return (s && i >= 0 && i < s->n) ? s->p[i].numel : -1;
}
bool tg_store_trainable(const tg_store *s, int64_t i) {
    return s && i >= 0 && i < s->n && s->p[i].trainable;
}
int64_t tg_store_total_numel(const tg_store *s) {
    int64_t n = 0;
    for (int64_t i = 0; s && i < s->n; i++) n += s->p[i].numel;
    return n;
}

static tg_status check_index(const tg_store *s, int64_t i, int64_t n, const void *buf,
                             const char *fn, bool want_grad) {
    if (!s || !buf) return tg_error_set(TG_ERR_INVALID, "%s: store or buffer is NULL", fn);
    if (i < 0 || i >= s->n)
        return tg_error_set(TG_ERR_NOT_FOUND, "%s: no parameter %lld (store has %lld)", fn,
                            (long long)i, (long long)s->n);
    if (n != s->p[i].numel)
        return tg_error_set(TG_ERR_SHAPE, "%s: '%s' has %lld elements, %lld given", fn,
                            s->p[i].name, (long long)s->p[i].numel, (long long)n);
    if (want_grad && !s->p[i].grad)
        return tg_error_set(TG_ERR_STATE, "%s: '%s' is not trainable", fn, s->p[i].name);
    return TG_OK;
}

tg_status tg_store_read(const tg_store *s, int64_t i, float *dst, int64_t n) {
    tg_status st = check_index(s, i, n, dst, "tg_store_read", false);
    return st ? st : s->backend->vt->copy_out(s->backend, dst, s->p[i].data, (size_t)n * 4);
}
tg_status tg_store_write(tg_store *s, int64_t i, const float *src, int64_t n) {
    tg_status st = check_index(s, i, n, src, "tg_store_write", false);
    return st ? st : s->backend->vt->copy_in(s->backend, s->p[i].data, src, (size_t)n * 4);
}
tg_status tg_store_read_grad(const tg_store *s, int64_t i, float *dst, int64_t n) {
    tg_status st = check_index(s, i, n, dst, "tg_store_read_grad", true);
    return st ? st : s->backend->vt->copy_out(s->backend, dst, s->p[i].grad, (size_t)n * 4);
}
tg_status tg_store_write_grad(tg_store *s, int64_t i, const float *src, int64_t n) {
    tg_status st = check_index(s, i, n, src, "tg_store_write_grad", true);
    return st ? st : s->backend->vt->copy_in(s->backend, s->p[i].grad, src, (size_t)n * 4);
}

tg_status tg_store_zero_grad(tg_store *s) {
    if (!s) return tg_error_set(TG_ERR_INVALID, "tg_store_zero_grad: store is NULL");
    for (int64_t i = 0; i < s->nslabs; i++) {
        const tg_store_slab *sl = &s->slabs[i];
        if (!sl->grad || !sl->used) continue;
        tg_status st = s->backend->vt->memset0(s->backend, sl->grad, (size_t)sl->used * 4);
        if (st) return st;
    }
    return TG_OK;
}

tg_status tg_store_grad_norm(tg_store *s, double *norm) {
    if (!s || !norm) return tg_error_set(TG_ERR_INVALID, "tg_store_grad_norm: NULL argument");
    double total = 0.0;
    for (int64_t i = 0; i < s->nslabs; i++) { /* a slab at a time: its padding is zero */
        const tg_store_slab *sl = &s->slabs[i];
        if (!sl->grad || !sl->used) continue;
        double part;
        tg_status st = s->backend->vt->sumsq(s->backend, sl->grad, sl->used, &part);
        if (st) return st;
        total += part;
    }
    *norm = sqrt(total);
    return TG_OK;
}

tg_status tg_store_scale_grad(tg_store *s, float factor) {
    if (!s) return tg_error_set(TG_ERR_INVALID, "tg_store_scale_grad: store is NULL");
    if (isfinite(factor)) { /* a slab at a time: its padding is zero and stays so */
        for (int64_t i = 0; i < s->nslabs; i++) {
            const tg_store_slab *sl = &s->slabs[i];
            if (!sl->grad || !sl->used) continue;
            tg_status st = s->backend->vt->scale(s->backend, sl->grad, sl->used, factor);
            if (st) return st;
        }
        return TG_OK;
    }
    for (int64_t i = 0; i < s->n; i++) { /* 0 · inf would be NaN: the parameters' values only */
        if (!s->p[i].grad) continue;
        tg_status st = s->backend->vt->scale(s->backend, s->p[i].grad, s->p[i].numel, factor);
        if (st) return st;
    }
    return TG_OK;
}

tg_status tg_store_clip_grad(tg_store *s, double max_norm, double *norm_out) {
    if (!(max_norm > 0.0))
        return tg_error_set(TG_ERR_INVALID, "tg_store_clip_grad: max_norm %g must be > 0", max_norm);
    double norm;
    tg_status st = tg_store_grad_norm(s, &norm);
    if (st) return st;
    if (norm_out) *norm_out = norm;
    if (!isfinite(norm))
        return tg_error_set(TG_ERR_NUMERIC, "tg_store_clip_grad: gradient norm is %g", norm);
    if (norm > max_norm) return tg_store_scale_grad(s, (float)(max_norm / norm));
    return TG_OK;
}
