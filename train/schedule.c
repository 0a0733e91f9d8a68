/* Learning-rate schedules (docs/model.md §1 "Training recipe").
 *
 * noam (Vaswani et al. 2017, eq. 3): lr(step) = factor · d^-0.5 · min(step^-0.5, step · w^-1.5),
 * step from 1: a linear rise for w steps to factor · (d·w)^-0.5, then decay as step^-0.5. The two
 * branches meet at step = w. The other schedules take a peak rate `lr` and, when warmup w > 0,
 * rise linearly as lr · step / w for step < w, reaching lr at step = w. */
#include <math.h>
#include <string.h>

#include "tg/train.h"

static const char *const names[] = {"noam", "constant", "inverse_sqrt", "cosine"};

const char *tg_lr_kind_name(tg_lr_kind k) {
    return (k >= TG_LR_NOAM && k <= TG_LR_COSINE) ? names[k] : "unknown";
}

tg_status tg_lr_kind_parse(const char *name, tg_lr_kind *out) {
    if (!name || !out) return tg_error_set(TG_ERR_INVALID, "tg_lr_kind_parse: NULL argument");
    for (int k = 0; k <= TG_LR_COSINE; k++) {
        const char *a = name, *b = names[k];
        while (*a && *b && (*a == *b || (*a == '-' && *b == '_'))) a++, b++;
        if (!*a && !*b) {
            *out = (tg_lr_kind)k;
            return TG_OK;
        }
    }
    return tg_error_set(TG_ERR_INVALID, "unknown learning-rate schedule '%s' (noam, constant, inverse_sqrt, cosine)",
                        name);
}

tg_lr_schedule tg_lr_schedule_default(int64_t d_model) {
    tg_lr_schedule s = {.kind = TG_LR_NOAM, .lr = 1e-3, .factor = 1.0, .d_model = d_model,
                        .warmup = 4000, .total_steps = 0, .min_lr = 0.0};
    return s;
}

tg_status tg_lr_schedule_check(const tg_lr_schedule *s) {
    if (!s) return tg_error_set(TG_ERR_INVALID, "lr schedule: NULL");
    if (s->kind < TG_LR_NOAM || s->kind > TG_LR_COSINE)
        return tg_error_set(TG_ERR_INVALID, "lr schedule: unknown kind %d", (int)s->kind);
    if (s->warmup < 0) return tg_error_set(TG_ERR_INVALID, "lr schedule: warmup %lld < 0", (long long)s->warmup);
    if (s->kind == TG_LR_NOAM) {
        if (!(s->factor > 0.0 && isfinite(s->factor)))
            return tg_error_set(TG_ERR_INVALID, "lr schedule: noam factor %g must be > 0", s->factor);
        if (s->d_model < 1) return tg_error_set(TG_ERR_INVALID, "lr schedule: noam needs d_model >= 1");
        if (s->warmup < 1) return tg_error_set(TG_ERR_INVALID, "lr schedule: noam needs warmup >= 1");
        return TG_OK;
    }
    if (!(s->lr > 0.0 && isfinite(s->lr)))
        return tg_error_set(TG_ERR_INVALID, "lr schedule: lr %g must be > 0", s->lr);
    if (s->kind == TG_LR_COSINE) {
        if (s->total_steps <= s->warmup)
            return tg_error_set(TG_ERR_INVALID,
                                "lr schedule: cosine needs total steps (%lld) > warmup (%lld); set a step limit",
                                (long long)s->total_steps, (long long)s->warmup);
        if (!(s->min_lr >= 0.0 && s->min_lr <= s->lr))
            return tg_error_set(TG_ERR_INVALID, "lr schedule: min_lr %g outside [0, lr]", s->min_lr);
    }
    return TG_OK;
}

double tg_lr_at(const tg_lr_schedule *s, int64_t step) {
    if (!s) return 0.0;
    double t = step < 1 ? 1.0 : (double)step, w = (double)s->warmup;
    switch (s->kind) {
    case TG_LR_NOAM: {
        double ww = w < 1.0 ? 1.0 : w;
        return s->factor / sqrt((double)s->d_model) * fmin(1.0 / sqrt(t), t * pow(ww, -1.5));
    }
    case TG_LR_CONSTANT:
        return (w > 0.0 && t < w) ? s->lr * t / w : s->lr;
    case TG_LR_INVERSE_SQRT:
        if (w <= 0.0) return s->lr / sqrt(t);
        return t < w ? s->lr * t / w : s->lr * sqrt(w / t);
    case TG_LR_COSINE: {
        if (w > 0.0 && t < w) return s->lr * t / w;
        double span = (double)s->total_steps - w;
        if (span <= 0.0 || t >= (double)s->total_steps) return s->min_lr;
        double p = (t - w) / span; /* 0 at the end of warmup, 1 at total_steps */
        return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1.0 + cos(M_PI * p));
    }
    }
    return 0.0;
}
