/* What the layers above core (models/, train/, parallel/) ask of a backend and a store's
 * memory, as functions: they do not read the backend table or the store's entries. */
#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "core/store-impl.h"
#include "core/tg-impl.h"

bool tg__backend_host_memory(const tg_backend *b) { return b && b->vt->host_memory; }

const float *tg__tensor_host_view(const tg_tensor *t, const tg_backend *b) {
    if (!t || !tg__backend_host_memory(b) || t->dtype != TG_DTYPE_F32 || !(t->flags & TG_TF_KEEP) ||
        !tg__tensor_is_contiguous(t))
        return NULL;
    return t->data;
}

/* keep_weight or release_weight of the store's backend on entry i, a 2-D weight */
static void weight_call(tg_store *s, int64_t i, bool keep) {
    if (!s || i < 0 || i >= s->n || s->p[i].ndim != 2) return;
    tg_backend *b = s->backend;
    void (*fn)(tg_backend *, const float *, int64_t, int64_t) = keep ? b->vt->keep_weight : b->vt->release_weight;
    if (fn) fn(b, s->p[i].data, s->p[i].shape[0], s->p[i].shape[1]);
}

void tg__store_keep_weight(tg_store *s, int64_t i) { weight_call(s, i, true); }
void tg__store_release_weight(tg_store *s, int64_t i) { weight_call(s, i, false); }
