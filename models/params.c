/* Making parameters (tg/layers.h tg_params): initial values drawn on the host in element order
 * (docs/model.md §1 initialisation), into a store of the caller's or into a model being built
 * (models/init.c, whose seed and draw order they then follow). */
#include <math.h>
#include <stdlib.h>

#include "models/model-impl.h"
#include "tg/layers.h"

struct tg_params {
    tg_store *store; /* standalone: the caller's store */
    tg_rng own;
    double sd;
    tg_model *m; /* inside a model being built: its parameters and RNG */
    tg_rng *mrng;
};

void tg__params_fill(float *w, int ndim, const int64_t *shape, tg_init_kind k, tg_rng *r, double sd) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    /* fans of the PyTorch layout [out, in, ...]: the trailing axes multiply fan_in */
    double fan_out = (double)shape[0], fan_in = ndim > 1 ? (double)(n / shape[0]) : (double)shape[0];
    double a = ndim > 1 ? sqrt(6.0 / (fan_in + fan_out)) : 0.0;
    int64_t cols = ndim > 1 ? shape[ndim - 1] : 1;
    for (int64_t i = 0; i < n; i++) {
        switch (k) {
        case TG_INIT_XAVIER: w[i] = (float)((2.0 * tg_rng_uniform(r) - 1.0) * a); break;
        case TG_INIT_ZEROS: w[i] = 0.0f; break;
        case TG_INIT_ONES: w[i] = 1.0f; break;
        case TG_INIT_NORMAL: w[i] = (float)(tg_rng_normal(r) * sd); break;
        case TG_INIT_EYE: w[i] = (i / cols == i % cols) ? 1.0f : 0.0f; break;
        }
    }
}

tg_params *tg__params_of_model(tg_model *m, tg_rng *r) {
    tg_params *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->m = m;
    p->mrng = r;
    return p;
}

tg_status tg_params_new(tg_store *s, uint64_t seed, double normal_sd, tg_params **out) {
    if (!s || !out || !(normal_sd >= 0.0)) return tg_error_set(TG_ERR_INVALID, "tg_params_new: NULL argument or bad sd");
    tg_params *p = calloc(1, sizeof *p);
    if (!p) return tg_error_set(TG_ERR_NOMEM, "tg_params_new: out of memory");
    p->store = s;
    tg_rng_init(&p->own, seed);
    p->sd = normal_sd;
    *out = p;
    return TG_OK;
}

void tg_params_free(tg_params *p) { free(p); }

tg_status tg_params_add(tg_params *p, const char *name, int ndim, const int64_t *shape, tg_init_kind init) {
    if (!p || !name || !shape || ndim < 1 || ndim > 4)
        return tg_error_set(TG_ERR_INVALID, "tg_params_add: NULL argument or %d dimensions (1 to 4)", ndim);
    if ((int)init < TG_INIT_XAVIER || init > TG_INIT_EYE)
        return tg_error_set(TG_ERR_INVALID, "tg_params_add: '%s': unknown initialisation %d", name, (int)init);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 1 || shape[d] > (int64_t)1 << 40)
            return tg_error_set(TG_ERR_INVALID, "tg_params_add: '%s': dimension %d is %lld", name, d, (long long)shape[d]);
        n *= shape[d];
    }
    if (init == TG_INIT_EYE && (ndim != 2 || shape[0] != shape[1]))
        return tg_error_set(TG_ERR_INVALID, "tg_params_add: '%s': the identity needs a square matrix", name);
    if (p->m) return tg__model_param_add(p->m, p->mrng, name, ndim, shape, init);
    if (tg_store_find(p->store, name) >= 0)
        return tg_error_set(TG_ERR_INVALID, "tg_params_add: '%s' exists already", name);
    float *w = malloc((size_t)n * sizeof *w);
    if (!w) return tg_error_set(TG_ERR_NOMEM, "tg_params_add: out of memory for '%s'", name);
    tg__params_fill(w, ndim, shape, init, &p->own, p->sd);
    tg_status st = tg_store_add(p->store, name, ndim, shape, w, true);
    free(w);
    return st;
}
