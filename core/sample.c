/* Choosing tokens from logits on the host (tg/sample.h): argmax, top-k, and sampling from
 * softmax(logits / T) restricted to the top k and then to the top-p nucleus (Holtzman et al.
 * 2020: the smallest set of most likely tokens whose probability reaches p). */
#include <math.h>
#include <stdlib.h>

#include "tg/sample.h"

int64_t tg_argmax(const float *x, int64_t n) {
    if (!x || n < 1) return -1;
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
    return best;
}

/* descending by value, then ascending by index (qsort is not stable; the index makes it so) */
static int by_value(const void *a, const void *b, void *keys) {
    const float *v = keys;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    float x = v[i], y = v[j];
    if (x != y) {
        if (y != y || x > y) return -1; /* NaN sorts last */
        if (x != x || y > x) return 1;
    }
    return i < j ? -1 : i > j;
}

/* All n indices sorted most likely first. A full sort: O(n log n) per token is small next to
 * the step that produced the logits. */
static int64_t *sorted(const float *x, int64_t n) {
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    if (!idx) return NULL;
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, by_value, (void *)x);
    return idx;
}

int64_t tg_top_k(const float *x, int64_t n, int64_t k, int64_t *idx) {
    if (!x || !idx || n < 1 || k < 1) return 0;
    if (k > n) k = n;
    if (k == 1) {
        idx[0] = tg_argmax(x, n);
        return 1;
    }
    int64_t *all = sorted(x, n);
    if (!all) return 0;
    for (int64_t i = 0; i < k; i++) idx[i] = all[i];
    free(all);
    return k;
}

tg_sample_options tg_sample_options_default(void) {
    tg_sample_options o = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f};
    return o;
}

tg_status tg_sample(const float *logits, int64_t n, const tg_sample_options *opt, tg_rng *rng, int64_t *out) {
    tg_sample_options o = opt ? *opt : tg_sample_options_default();
    if (!logits || !out || n < 1 || (o.temperature > 0.0f && !rng))
        return tg_error_set(TG_ERR_INVALID, "tg_sample: NULL argument or no logits");
    if (!(o.temperature >= 0.0f) || o.top_k < 0 || !(o.top_p > 0.0f && o.top_p <= 1.0f))
        return tg_error_set(TG_ERR_INVALID, "tg_sample: temperature %g (>= 0), top_k %lld (>= 0), top_p %g (in (0, 1])",
                            (double)o.temperature, (long long)o.top_k, (double)o.top_p);
    int64_t best = tg_argmax(logits, n);
    if (!isfinite(logits[best]) || logits[best] == -INFINITY)
        return tg_error_set(TG_ERR_NUMERIC, "tg_sample: no finite logit (the largest is %g)", (double)logits[best]);
    if (o.temperature == 0.0f) {
        *out = best;
        return TG_OK;
    }
    int64_t *idx = sorted(logits, n);
    double *p = malloc((size_t)n * sizeof *p);
    if (!idx || !p) {
        free(idx);
        free(p);
        return tg_error_set(TG_ERR_NOMEM, "tg_sample: out of memory");
    }
    /* softmax over the k most likely, in sorted order: p_i = exp((x_i - x_max) / T) / Z */
    int64_t k = o.top_k > 0 && o.top_k < n ? o.top_k : n;
    double z = 0.0, mx = logits[idx[0]];
    for (int64_t i = 0; i < k; i++) {
        double x = logits[idx[i]];
        p[i] = x == x ? exp((x - mx) / o.temperature) : 0.0;
        z += p[i];
    }
    /* nucleus: the shortest prefix with mass >= top_p (at least one token) */
    double mass = 0.0;
    int64_t m = 0;
    while (m < k && (m == 0 || mass < (double)o.top_p * z)) {
        mass += p[m];
        m++;
    }
    double u = tg_rng_uniform(rng) * mass, acc = 0.0;
    int64_t pick = idx[0];
    for (int64_t i = 0; i < m; i++) {
        if (p[i] <= 0.0) continue;
        acc += p[i];
        pick = idx[i];
        if (u < acc) break;
    }
    *out = pick;
    free(idx);
    free(p);
    return TG_OK;
}
