/* Backend-independent entry points (the vtable is filled by each backend; the registry of
 * backends by name is backends/registry.c). */
#include <stdlib.h>

#include "core/backend-impl.h"

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
