/* Backend-independent entry points (the vtable is filled by each backend) and the registry of
 * backends by name. */
#include <stdlib.h>
#include <string.h>

#include "core/tg-impl.h"

void tg_backend_free(tg_backend *b) {
    if (b) b->vt->destroy(b);
}

const char *tg_backend_name(const tg_backend *b) { return b ? b->vt->name : "none"; }
int tg_backend_threads(const tg_backend *b) { return b ? b->nthreads : 0; }
size_t tg_backend_peak_bytes(const tg_backend *b) { return b ? b->peak : 0; }

tg_status tg_backend_set_threads(tg_backend *b, int n) {
    if (!b) return tg_error_set(TG_ERR_INVALID, "tg_backend_set_threads: backend is NULL");
    if (n < 1 || n > 4096)
        return tg_error_set(TG_ERR_INVALID, "tg_backend_set_threads: %d threads out of range", n);
    b->nthreads = n;
    return TG_OK;
}

void tg__backend_account(tg_backend *b, ptrdiff_t delta) {
    const size_t now = atomic_fetch_add(&b->in_use, (size_t)delta) + (size_t)delta;
    size_t peak = atomic_load(&b->peak);
    while (now > peak && !atomic_compare_exchange_weak(&b->peak, &peak, now)) {
    }
}

void *tg__backend_alloc_lasting(tg_backend *b, size_t bytes) {
    return b->vt->alloc_lasting ? b->vt->alloc_lasting(b, bytes) : b->vt->alloc(b, bytes);
}

#ifndef TG_HAVE_CUDA
bool tg_have_cuda(void) { return false; }
tg_status tg_backend_cuda_new(int device, tg_backend **out) {
    (void)device;
    if (out) *out = NULL;
    return tg_error_set(TG_ERR_UNSUPPORTED, "tg_backend_cuda_new: this build has no CUDA backend");
}
#endif

/* ---- the registry ---- */

static tg_status cpu_create(const tg_backend_options *o, tg_backend **out) {
    return tg_backend_cpu_new(o->threads, out);
}
static tg_status cuda_create(const tg_backend_options *o, tg_backend **out) {
    return tg_backend_cuda_new(o->device, out);
}

/* One row per backend; a new backend adds its row (docs/extending.md). The CUDA row is there
 * in every build: without CUDA its constructor says so, which is clearer than "unknown". */
static const struct {
    const char *name;
    tg_status (*create)(const tg_backend_options *o, tg_backend **out);
} registry[] = {
    {"cpu", cpu_create},
    {"cuda", cuda_create},
};
enum { NREG = sizeof registry / sizeof registry[0] };

const char *tg_backend_names(void) {
    static _Thread_local char names[64]; /* built on first use, per thread: no race */
    if (!names[0])
        for (int i = 0; i < NREG; i++) {
            if (i) strcat(names, "|");
            strcat(names, registry[i].name);
        }
    return names;
}

tg_status tg_backend_new(const char *name, const tg_backend_options *opts, tg_backend **out) {
    if (out) *out = NULL;
    if (!name || !out) return tg_error_set(TG_ERR_INVALID, "tg_backend_new: NULL argument");
    tg_backend_options o = opts ? *opts : (tg_backend_options){0, 0};
    for (int i = 0; i < NREG; i++)
        if (!strcmp(name, registry[i].name)) return registry[i].create(&o, out);
    return tg_error_set(TG_ERR_INVALID, "tg_backend_new: unknown backend '%s' (registered: %s)",
                        name, tg_backend_names());
}
