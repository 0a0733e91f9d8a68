/* Optimizers over a store: the update itself runs on the store's backend (one fused pass per
 * run of parameters, below); this file owns the state buffers, the step count and the
 * parameter groups (a weight decay and a learning-rate scale per parameter). */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg-impl.h"
#include "tg/optim.h"
#include "train/train-impl.h"

/* The moments mirror the store's slabs of trainable parameters (tg__store_slab): slab k's
 * moments at ms[k] and vs[k], a parameter's at its offset in its slab. So a run of parameters
 * with the same weight decay and learning-rate scale is one contiguous range of weights,
 * gradients and moments, which tg_optim_step updates in one pass: the padding between the
 * parameters is zero in all four, and an update leaves a zero weight with a zero gradient
 * and zero moments zero (Adam's step is 0 / (0 + eps); the decay of 0 is 0). */
struct tg_optim {
    tg_store *store;
    int64_t n; /* the store's parameters when the optimizer was made: the ones it updates */
    tg_optim_config cfg;
    int64_t steps;
    float **m, **v;   /* per parameter, NULL where unused */
    float **ms, **vs; /* per store slab, NULL where unused (frozen slabs) */
    int64_t nslabs;
    float *wd, *lr_scale; /* per parameter: its group's weight decay and learning-rate scale */
    int64_t passes;       /* the backend passes of the last step (tests) */
};

int64_t tg__optim_passes(const tg_optim *o) {
    return o ? o->passes : 0;
}

/* Tests: one pass per parameter (off) instead of one per run of them (on, the default) */
static bool runs_on = true;

bool tg__optim_runs(bool on) {
    const bool was = runs_on;
    runs_on = on;
    return was;
}

tg_optim_config tg_optim_defaults(tg_optim_kind kind) {
    tg_optim_config c = {.kind = kind, .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.98f,
                         .eps = 1e-9f, .weight_decay = 0.0f};
    if (kind == TG_OPTIM_ADAMW) c.weight_decay = 0.01f;
    return c;
}

static tg_status check_config(const tg_optim_config *c) {
    if (c->kind < TG_OPTIM_SGD || c->kind > TG_OPTIM_ADAMW)
        return tg_error_set(TG_ERR_INVALID, "tg_optim_new: unknown optimizer kind %d", (int)c->kind);
    if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
        return tg_error_set(TG_ERR_INVALID, "tg_optim_new: momentum %g outside [0, 1)", (double)c->momentum);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return tg_error_set(TG_ERR_INVALID, "tg_optim_new: betas (%g, %g) outside [0, 1)",
                            (double)c->beta1, (double)c->beta2);
    if (!(c->eps > 0.0f)) return tg_error_set(TG_ERR_INVALID, "tg_optim_new: eps must be > 0");
    if (!(c->weight_decay >= 0.0f))
        return tg_error_set(TG_ERR_INVALID, "tg_optim_new: weight decay %g < 0", (double)c->weight_decay);
    return TG_OK;
}

void tg_optim_free(tg_optim *o) {
    if (!o) return;
    tg_backend *b = tg_store_backend(o->store);
    for (int64_t k = 0; k < o->nslabs; k++) {
        int64_t cap;
        tg__store_slab(o->store, k, &cap, NULL);
        const size_t bytes = (size_t)cap * 4;
        if (o->ms && o->ms[k]) tg__backend_free(b, o->ms[k], bytes);
        if (o->vs && o->vs[k]) tg__backend_free(b, o->vs[k], bytes);
    }
    free(o->ms);
    free(o->vs);
    free(o->m);
    free(o->v);
    free(o->wd);
    free(o->lr_scale);
    free(o);
}

/* A slab's moments: cap floats, the first `used` zeroed (the rest is never read) */
static float *zeros(tg_backend *b, int64_t cap, int64_t used) {
    float *p = tg__backend_alloc_lasting(b, (size_t)cap * 4);
    if (p && used && tg__backend_memset0(b, p, (size_t)used * 4) != TG_OK) {
        tg__backend_free(b, p, (size_t)cap * 4);
        return NULL;
    }
    return p;
}

tg_status tg_optim_new(tg_store *s, const tg_optim_config *cfg, tg_optim **out) {
    if (!s || !cfg || !out) return tg_error_set(TG_ERR_INVALID, "tg_optim_new: NULL argument");
    *out = NULL;
    tg_status st = check_config(cfg);
    if (st) return st;
    tg_optim *o = calloc(1, sizeof *o);
    if (!o) return tg_error_set(TG_ERR_NOMEM, "tg_optim_new: out of memory");
    o->store = s;
    o->n = tg_store_count(s);
    o->cfg = *cfg;
    o->nslabs = tg__store_nslabs(s);
    const int64_t n = o->n ? o->n : 1, ns = o->nslabs ? o->nslabs : 1;
    o->m = calloc((size_t)n, sizeof *o->m);
    o->v = calloc((size_t)n, sizeof *o->v);
    o->ms = calloc((size_t)ns, sizeof *o->ms);
    o->vs = calloc((size_t)ns, sizeof *o->vs);
    o->wd = calloc((size_t)n, sizeof *o->wd);
    o->lr_scale = calloc((size_t)n, sizeof *o->lr_scale);
    if (!o->m || !o->v || !o->ms || !o->vs || !o->wd || !o->lr_scale) {
        tg_optim_free(o);
        return tg_error_set(TG_ERR_NOMEM, "tg_optim_new: out of memory");
    }
    bool need_m = cfg->kind != TG_OPTIM_SGD || cfg->momentum > 0.0f;
    bool need_v = cfg->kind != TG_OPTIM_SGD;
    for (int64_t k = 0; k < o->nslabs; k++) {
        int64_t cap, used;
        if (!tg__store_slab(s, k, &cap, &used)) continue; /* frozen: no gradients, no moments */
        if ((need_m && !(o->ms[k] = zeros(tg_store_backend(s), cap, used))) ||
            (need_v && !(o->vs[k] = zeros(tg_store_backend(s), cap, used)))) {
            tg_optim_free(o);
            return tg_error_prefix(TG_ERR_NOMEM, "tg_optim_new: moments");
        }
    }
    for (int64_t i = 0; i < o->n; i++) {
        o->wd[i] = cfg->weight_decay;
        o->lr_scale[i] = 1.0f;
        if (!tg_store_trainable(s, i)) continue;
        int64_t slab, off;
        tg__store_place(s, i, &slab, &off);
        if (need_m) o->m[i] = o->ms[slab] + off;
        if (need_v) o->v[i] = o->vs[slab] + off;
    }
    *out = o;
    return TG_OK;
}

/* One update; with zero, each run's gradients zeroed in its pass (the backend's zero_g) */
static tg_status step(tg_optim *o, float lr, bool zero, const char *fn) {
    if (!o) return tg_error_set(TG_ERR_INVALID, "%s: optimizer is NULL", fn);
    if (!(lr >= 0.0f) || lr != lr)
        return tg_error_set(TG_ERR_INVALID, "%s: learning rate %g must be >= 0", fn, (double)lr);
    o->steps++;
    o->passes = 0;
    tg_store *s = o->store;
    tg_optim_config c = o->cfg;
    for (int64_t i = 0, j; i < o->n; i = j) {
        j = i + 1;
        if (!tg_store_trainable(s, i)) continue;
        /* the run i..j-1: the next trainable parameters in the same slab, with the same group
         * (the frozen ones between them lie in other slabs), up to the end of the last one */
        int64_t slab, off;
        tg__store_place(s, i, &slab, &off);
        int64_t end = off + tg_store_numel(s, i);
        for (int64_t q = j; runs_on && q < o->n; q++) {
            if (!tg_store_trainable(s, q)) continue;
            int64_t qslab, qoff;
            tg__store_place(s, q, &qslab, &qoff);
            if (qslab != slab || o->wd[q] != o->wd[i] || o->lr_scale[q] != o->lr_scale[i]) break;
            end = qoff + tg_store_numel(s, q);
            j = q + 1;
        }
        c.weight_decay = o->wd[i];
        tg_status st = tg__store_update(s, i, end - off, &c, lr * o->lr_scale[i], o->steps, o->m[i],
                                        o->v[i], zero);
        if (st) return tg_error_prefix(st, "%s: '%s'", fn, tg_store_name(s, i));
        o->passes++;
    }
    return TG_OK;
}

tg_status tg_optim_step(tg_optim *o, float lr) {
    return step(o, lr, false, "tg_optim_step");
}

tg_status tg_optim_step_zero_grad(tg_optim *o, float lr) {
    tg_status st = step(o, lr, true, "tg_optim_step_zero_grad");
    if (!o) return st;
    /* the gradients no run took: parameters added after the optimizer; all of them after an
     * error (a run may have stopped half way) */
    tg_store *s = o->store;
    for (int64_t i = st == TG_OK ? o->n : 0; i < tg_store_count(s); i++) {
        tg_status z = tg__store_zero_grad_of(s, i);
        if (st == TG_OK) st = z;
    }
    return st;
}

tg_status tg_optim_set_group(tg_optim *o, const char *pattern, float weight_decay, float lr_scale,
                             int64_t *matched) {
    if (matched) *matched = 0;
    if (!o || !pattern) return tg_error_set(TG_ERR_INVALID, "tg_optim_set_group: NULL argument");
    if (!(weight_decay >= 0.0f && weight_decay <= 1e30f) || !(lr_scale >= 0.0f && lr_scale <= 1e30f))
        return tg_error_set(TG_ERR_INVALID,
                            "tg_optim_set_group '%s': weight decay %g and learning-rate scale %g must be finite and >= 0",
                            pattern, (double)weight_decay, (double)lr_scale);
    int64_t k = 0;
    for (int64_t i = 0; i < o->n; i++) {
        if (fnmatch(pattern, tg_store_name(o->store, i), 0) != 0) continue;
        o->wd[i] = weight_decay;
        o->lr_scale[i] = lr_scale;
        k++;
    }
    if (matched) *matched = k;
    return TG_OK;
}

tg_status tg_optim_no_decay_on_vectors(tg_optim *o, int64_t *matched) {
    /* keeps each vector's learning-rate scale: only the decay changes */
    if (!o) return tg_error_set(TG_ERR_INVALID, "tg_optim_no_decay_on_vectors: optimizer is NULL");
    int64_t k = 0;
    int64_t shape[TG_MAX_DIMS];
    for (int64_t i = 0; i < o->n; i++)
        if (tg_store_shape(o->store, i, shape) < 2) {
            o->wd[i] = 0.0f;
            k++;
        }
    if (matched) *matched = k;
    return TG_OK;
}

tg_status tg_optim_group_of(const tg_optim *o, int64_t i, float *weight_decay, float *lr_scale) {
    if (!o || i < 0 || i >= o->n)
        return tg_error_set(TG_ERR_INVALID, "tg_optim_group_of: bad parameter index %lld", (long long)i);
    if (weight_decay) *weight_decay = o->wd[i];
    if (lr_scale) *lr_scale = o->lr_scale[i];
    return TG_OK;
}

int64_t tg_optim_steps(const tg_optim *o) { return o ? o->steps : 0; }
void tg_optim_set_steps(tg_optim *o, int64_t steps) {
    if (o) o->steps = steps;
}

static tg_status state_check(const tg_optim *o, int64_t i, int which, int64_t n, float ***arr) {
    if (!o || i < 0 || i >= o->n || which < 0 || which > 1)
        return tg_error_set(TG_ERR_INVALID, "tg_optim state: bad parameter index %lld or slot %d",
                            (long long)i, which);
    const char *name = tg_store_name(o->store, i);
    const int64_t numel = tg_store_numel(o->store, i);
    if (n != numel)
        return tg_error_set(TG_ERR_SHAPE, "tg_optim state: '%s' has %lld elements, %lld given", name,
                            (long long)numel, (long long)n);
    *arr = which ? o->v : o->m;
    if (!(*arr)[i]) return tg_error_set(TG_ERR_NOT_FOUND, "tg_optim state: '%s' has no slot %d", name, which);
    return TG_OK;
}

tg_status tg_optim_read_state(const tg_optim *o, int64_t i, int which, float *dst, int64_t n) {
    float **arr = NULL;
    tg_status st = state_check(o, i, which, n, &arr);
    if (st) return st;
    return tg__backend_copy_out(tg_store_backend(o->store), dst, arr[i], (size_t)n * 4);
}

tg_status tg_optim_write_state(tg_optim *o, int64_t i, int which, const float *src, int64_t n) {
    float **arr = NULL;
    tg_status st = state_check(o, i, which, n, &arr);
    if (st) return st;
    return tg__backend_copy_in(tg_store_backend(o->store), arr[i], src, (size_t)n * 4);
}
