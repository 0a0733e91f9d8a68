/* Internal structure of the core's stores: parameters in slabs of backend memory. Shared by
 * core/, autograd/ and backends/ — the layers above them reach a store through the public
 * tg/store.h and core/tg-impl.h (tests/test_layers.py). */
#ifndef TG_STORE_IMPL_H
#define TG_STORE_IMPL_H

#include "core/tg-impl.h"

typedef struct tg_param_entry {
    char name[128];
    int ndim;
    int64_t shape[TG_MAX_DIMS];
    int64_t numel;
    bool trainable;
    float *data;       /* backend memory: slabs[slab].data + off */
    float *grad;       /* slabs[slab].grad + off, NULL if not trainable */
    int64_t slab, off; /* off in floats */
} tg_param_entry;

/* Parameters live in slabs (store.c): runs of them in one backend block, their gradients at the
 * same offsets in a second. The trainable ones and the frozen ones (no gradients) fill
 * separate slabs, so the trainable parameters' data, gradients and an optimizer's moments
 * (train/optim.c, same layout) are each contiguous, parameter after parameter. */
typedef struct tg_store_slab {
    float *data, *grad; /* grad NULL in a slab of frozen parameters */
    int64_t cap, used;  /* floats; [0, used) zeroed but for the parameters' values */
} tg_store_slab;

struct tg_store {
    tg_backend *backend;
    tg_param_entry *p;
    int64_t n, cap;
    tg_store_slab *slabs;
    int64_t nslabs, cap_slabs;
    int64_t open[2]; /* the slab that takes new parameters, frozen [0] and trainable [1]; -1 none */
    int made[2];     /* slabs made in each series (their sizes double) */
    bool scratch;    /* tg__store_new_scratch: slabs from the backend's alloc, not alloc_lasting */
};

#endif
