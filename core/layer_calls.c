/* The calls through which the layers above core (models, parallel, train, tools) reach a
 * store's layout and memory and a backend: they see neither the store's fields nor the backend
 * table (core/tg-impl.h; tests/test_layers.py checks it). Each is a field read or one call
 * through the table. */
#include "core/backend-impl.h"
#include "core/store-impl.h"

/* ---- a store's layout and memory ---- */

int64_t tg__store_nslabs(const tg_store *s) { return s->nslabs; }

bool tg__store_slab(const tg_store *s, int64_t k, int64_t *cap, int64_t *used) {
    const tg_store_slab *sl = &s->slabs[k];
    if (cap) *cap = sl->cap;
    if (used) *used = sl->used;
    return sl->grad != NULL;
}

void tg__store_place(const tg_store *s, int64_t i, int64_t *slab, int64_t *off) {
    *slab = s->p[i].slab;
    *off = s->p[i].off;
}

float *tg__store_grad_memory(tg_store *s, int64_t i) { return s->p[i].grad; }

tg_status tg__store_update(tg_store *s, int64_t i, int64_t n, const tg_optim_config *cfg, float lr,
                           int64_t step, float *m, float *v, bool zero_g) {
    const tg_param_entry *e = &s->p[i];
    return s->backend->vt->optim_update(s->backend, cfg, lr, step, e->data, e->grad, m, v, n, zero_g);
}

tg_status tg__store_zero_grad_of(tg_store *s, int64_t i) {
    if (!s->p[i].grad) return TG_OK;
    return s->backend->vt->memset0(s->backend, s->p[i].grad, (size_t)s->p[i].numel * sizeof(float));
}

/* ---- backend memory ---- */

void tg__backend_free(tg_backend *b, void *p, size_t bytes) { b->vt->free(b, p, bytes); }

tg_status tg__backend_copy_in(tg_backend *b, void *dst, const void *src, size_t bytes) {
    return b->vt->copy_in(b, dst, src, bytes);
}

tg_status tg__backend_copy_out(tg_backend *b, void *dst, const void *src, size_t bytes) {
    return b->vt->copy_out(b, dst, src, bytes);
}

tg_status tg__backend_memset0(tg_backend *b, void *dst, size_t bytes) {
    return b->vt->memset0(b, dst, bytes);
}
