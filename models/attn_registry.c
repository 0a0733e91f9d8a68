/* Attention kinds registered by programs (tg/attn_kinds.h): a table after the built-in kinds.
 * Ids are TG_ATTN_COUNT + i for the i-th registration. An entry is written whole before the
 * count that publishes it (release), and readers load the count first (acquire), so a lookup
 * needs no lock; registrations take one. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "models/model-impl.h"

enum { MAX_KINDS = 32, MAX_NAME = 31 };

static struct {
    tg_attn_kind_def def;
    char name[MAX_NAME + 1];
} kinds[MAX_KINDS];
static atomic_int nkinds;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

bool tg__attn_is_registered(tg_attn_kind k) {
    int n = atomic_load_explicit(&nkinds, memory_order_acquire);
    return (int)k >= TG_ATTN_COUNT && (int)k < TG_ATTN_COUNT + n;
}

const tg_attn_kind_def *tg_attn_kind_def_get(tg_attn_kind k) {
    return tg__attn_is_registered(k) ? &kinds[(int)k - TG_ATTN_COUNT].def : NULL;
}

tg_attn_dims tg__attn_dims(const tg_model_config *c) {
    return (tg_attn_dims){c->d_model, c->heads, c->heads > 0 ? c->d_model / c->heads : 0, c->attn_dropout};
}

tg_status tg_attn_kind_register(const tg_attn_kind_def *def, tg_attn_kind *out) {
    if (!def || !out || !def->name || !def->init || !def->forward)
        return tg_error_set(TG_ERR_INVALID, "tg_attn_kind_register: a NULL definition, name, init or forward");
    size_t len = strlen(def->name);
    bool ok = len >= 1 && len <= MAX_NAME;
    for (size_t i = 0; ok && i < len; i++) {
        char ch = def->name[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
    }
    if (!ok)
        return tg_error_set(TG_ERR_INVALID, "tg_attn_kind_register: bad name '%s' (1 to %d characters of a-z, 0-9, _)",
                            def->name, MAX_NAME);
    pthread_mutex_lock(&lock);
    tg_attn_kind prev;
    tg_status st = TG_OK;
    int n = atomic_load_explicit(&nkinds, memory_order_relaxed);
    if (tg_attn_kind_parse(def->name, &prev) == TG_OK)
        st = tg_error_set(TG_ERR_INVALID, "tg_attn_kind_register: the attention kind '%s' exists already (%s)", def->name,
                          (int)prev < TG_ATTN_COUNT ? "a built-in kind" : "registered before");
    else if (n == MAX_KINDS)
        st = tg_error_set(TG_ERR_INVALID, "tg_attn_kind_register: %d kinds registered already (the most)", MAX_KINDS);
    if (st == TG_OK) {
        memcpy(kinds[n].name, def->name, len + 1);
        kinds[n].def = *def;
        kinds[n].def.name = kinds[n].name;
        atomic_store_explicit(&nkinds, n + 1, memory_order_release);
        *out = (tg_attn_kind)(TG_ATTN_COUNT + n);
    }
    pthread_mutex_unlock(&lock);
    return st;
}
