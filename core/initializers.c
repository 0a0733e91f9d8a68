/* Initialisers of store parameters (tg/init.h): fill a host copy in element order from a
 * sequential tg_rng, then one tg_store_write. */
#include <math.h>
#include <stdlib.h>

#include "core/store-impl.h"
#include "tg/init.h"

typedef enum { K_NORMAL, K_UNIFORM, K_CONSTANT, K_SCALE } kind;

/* fan_in, fan_out of a parameter as PyTorch's _calculate_fan_in_and_fan_out */
static void fans(const tg_param_entry *e, double *fin, double *fout) {
    if (e->ndim < 2) {
        *fin = *fout = (double)(e->numel > 0 ? e->numel : 1);
        return;
    }
    double rf = 1.0;
    for (int d = 2; d < e->ndim; d++) rf *= (double)e->shape[d];
    *fout = (double)e->shape[0] * rf;
    *fin = (double)e->shape[1] * rf;
}

/* a, b: (mean, std), (lo, hi), (value, -) or (factor, -) */
static tg_status fill(tg_store *s, const char *who, const char *name, kind k, double a, double b, tg_rng *rng,
                      double xavier_gain, bool xavier) {
    if (!s || !name || (!rng && (k == K_NORMAL || k == K_UNIFORM)))
        return tg_error_set(TG_ERR_INVALID, "%s: NULL argument", who);
    int64_t i = tg_store_find(s, name);
    if (i < 0) return tg_error_set(TG_ERR_NOT_FOUND, "%s: no parameter '%s' in the store", who, name);
    const tg_param_entry *e = &s->p[i];
    if (xavier) {
        double fin, fout;
        fans(e, &fin, &fout);
        if (k == K_UNIFORM) {
            b = xavier_gain * sqrt(6.0 / (fin + fout));
            a = -b;
        } else {
            a = 0.0;
            b = xavier_gain * sqrt(2.0 / (fin + fout));
        }
    }
    if ((k == K_NORMAL && !(b >= 0.0)) || (k == K_UNIFORM && !(a <= b)) || !isfinite(a) || !isfinite(b))
        return tg_error_set(TG_ERR_INVALID, "%s: '%s': bad range or deviation (%g, %g)", who, name, a, b);
    float *w = malloc((size_t)(e->numel > 0 ? e->numel : 1) * sizeof *w);
    if (!w) return tg_error_set(TG_ERR_NOMEM, "%s: out of memory for '%s'", who, name);
    tg_status st = k == K_SCALE ? tg_store_read(s, i, w, e->numel) : TG_OK;
    for (int64_t j = 0; st == TG_OK && j < e->numel; j++) {
        switch (k) {
        case K_NORMAL: w[j] = (float)(a + b * tg_rng_normal(rng)); break;
        case K_UNIFORM: w[j] = (float)(a + (b - a) * tg_rng_uniform(rng)); break;
        case K_CONSTANT: w[j] = (float)a; break;
        case K_SCALE: w[j] = (float)((double)w[j] * a); break;
        }
    }
    if (st == TG_OK) st = tg_store_write(s, i, w, e->numel);
    free(w);
    return st;
}

tg_status tg_init_normal(tg_store *s, const char *name, double mean, double std, tg_rng *rng) {
    return fill(s, "tg_init_normal", name, K_NORMAL, mean, std, rng, 0.0, false);
}
tg_status tg_init_uniform(tg_store *s, const char *name, double lo, double hi, tg_rng *rng) {
    return fill(s, "tg_init_uniform", name, K_UNIFORM, lo, hi, rng, 0.0, false);
}
tg_status tg_init_xavier_uniform(tg_store *s, const char *name, double gain, tg_rng *rng) {
    return fill(s, "tg_init_xavier_uniform", name, K_UNIFORM, 0.0, 0.0, rng, gain, true);
}
tg_status tg_init_xavier_normal(tg_store *s, const char *name, double gain, tg_rng *rng) {
    return fill(s, "tg_init_xavier_normal", name, K_NORMAL, 0.0, 0.0, rng, gain, true);
}
tg_status tg_init_constant(tg_store *s, const char *name, float value) {
    return fill(s, "tg_init_constant", name, K_CONSTANT, value, 0.0, NULL, 0.0, false);
}
tg_status tg_init_scale(tg_store *s, const char *name, double factor) {
    return fill(s, "tg_init_scale", name, K_SCALE, factor, 0.0, NULL, 0.0, false);
}
