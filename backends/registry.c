/* The registry of backends by name (tg_backend_new), and the CUDA entry points of a build
 * without CUDA. Above core: it names each backend's constructor. */
#include <stdio.h>
#include <string.h>

#include "core/tg-impl.h"

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
    if (o->cpu_isa) {
        tg_status st = tg_cpu_set_isa(o->cpu_isa);
        if (st == TG_ERR_UNSUPPORTED) /* a cap above the CPU: said, and its best level used */
            fprintf(stderr, "tgraph: %s\n", tg_error_message());
        else if (st != TG_OK)
            return st;
    }
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
    tg_backend_options o = opts ? *opts : (tg_backend_options){0};
    for (int i = 0; i < NREG; i++)
        if (!strcmp(name, registry[i].name)) return registry[i].create(&o, out);
    return tg_error_set(TG_ERR_INVALID, "tg_backend_new: unknown backend '%s' (registered: %s)",
                        name, tg_backend_names());
}
