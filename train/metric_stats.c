/* Per-sentence sufficient statistics of every corpus metric, the corpus score of any multiset
 * of sentences from them, and sacreBLEU's paired bootstrap resampling test on top. */
#include "tg/metrics.h"
#include "tg/rng.h"
#include "train/metrics-impl.h"

#include <stdlib.h>
#include <string.h>

static const char *const NAMES[TG_METRIC_COUNT] = {"bleu",   "chrf",    "wer",
                                                   "meteor", "rouge_l", "cider"};

const char *tg_metric_name(tg_metric_id metric) {
    return (unsigned)metric < TG_METRIC_COUNT ? NAMES[metric] : NULL;
}

static size_t width_of(tg_metric_id m) {
    return m == TG_METRIC_BLEU   ? TG__BLEU_STATS
           : m == TG_METRIC_CHRF ? TG__CHRF_STATS
           : m == TG_METRIC_WER  ? 2
                                 : 1;
}

/* WER rows: {word-level Levenshtein distance, reference words}. */
static tg_status wer_rows(const char *const *hyps, const char *const *refs, size_t n, double *v) {
    tg__text_toks words = {0};
    tg_status st = TG_OK;
    for (size_t i = 0; st == TG_OK && i < n; i++) {
        int64_t d;
        st = tg_metric_edit_distance(hyps[i], refs[i], &d);
        if (st == TG_OK) st = tg__text_split(refs[i], strlen(refs[i]), &words);
        v[2 * i] = (double)d;
        v[2 * i + 1] = (double)words.n;
    }
    tg__text_toks_free(&words);
    return st;
}

tg_status tg_metric_stats_compute(tg_metric_id metric, const char *const *hyps,
                                  const char *const *refs, size_t n,
                                  const tg_metric_bleu_options *opt, tg_metric_stats *out) {
    static const char fn[] = "tg_metric_stats_compute";
    if ((unsigned)metric >= TG_METRIC_COUNT)
        return tg_error_set(TG_ERR_INVALID, "%s: unknown metric %d", fn, (int)metric);
    tg_status st = tg__text_check_corpus(fn, hyps, refs, 1, n, out);
    if (st != TG_OK) return st;
    tg_metric_stats s = {metric, opt ? *opt : tg_metric_bleu_options_default(), n, width_of(metric),
                         NULL};
    s.v = calloc(n * s.width, sizeof *s.v);
    if (!s.v) return tg_error_set(TG_ERR_NOMEM, "%s: out of memory (%zu sentences)", fn, n);
    tg_metric_mean_result mr;
    switch (metric) {
    case TG_METRIC_BLEU:
        st = tg__bleu_rows(hyps, refs, n, s.opt.tokenize, s.v, NULL);
        break;
    case TG_METRIC_CHRF:
        st = tg__chrf_rows(hyps, refs, n, s.v, NULL);
        break;
    case TG_METRIC_WER:
        st = wer_rows(hyps, refs, n, s.v);
        break;
    case TG_METRIC_METEOR:
        st = tg_metric_meteor(hyps, refs, n, s.opt.tokenize, s.v, &mr);
        break;
    case TG_METRIC_ROUGE_L:
        st = tg_metric_rouge_l(hyps, refs, n, s.opt.tokenize, s.v, &mr);
        break;
    default:
        st = tg_metric_cider(hyps, refs, n, s.opt.tokenize, s.v, &mr);
        break;
    }
    if (st != TG_OK) {
        free(s.v);
        return tg_error_prefix(st, "%s (%s)", fn, NAMES[metric]);
    }
    *out = s;
    return TG_OK;
}

double tg_metric_stats_score(const tg_metric_stats *s, const size_t *idx, size_t m) {
    double sum[TG__CHRF_STATS] = {0}; /* the widest row */
    size_t w = s->width, count = idx ? m : s->n;
    for (size_t k = 0; k < count; k++) {
        const double *row = s->v + (idx ? idx[k] : k) * w;
        for (size_t j = 0; j < w; j++)
            sum[j] += row[j];
    }
    switch (s->metric) {
    case TG_METRIC_BLEU:
        return tg__bleu_score(sum, s->opt.smooth);
    case TG_METRIC_CHRF:
        return tg__chrf_score(sum, NULL, NULL, NULL);
    case TG_METRIC_WER:
        return sum[1] > 0 ? 100.0 * sum[0] / sum[1] : sum[0] > 0 ? 100.0 : 0.0;
    case TG_METRIC_CIDER:
        return count ? sum[0] / (double)count : 0.0;
    default:
        return count ? 100.0 * sum[0] / (double)count : 0.0;
    }
}

void tg_metric_stats_free(tg_metric_stats *s) {
    if (!s) return;
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* sacreBLEU's estimate_ci: the mean, and half the distance between the sorted scores at
 * n // 40 and n - n // 40 - 1 (sorts x). */
static void estimate_ci(double *x, size_t n, double *mean, double *ci) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    *mean = sum / (double)n;
    qsort(x, n, sizeof *x, cmp_double);
    size_t lo = n / 40, hi = n - lo - 1;
    *ci = 0.5 * (x[hi] - x[lo]);
}

tg_status tg_metric_paired_bootstrap(const tg_metric_stats *baseline, const tg_metric_stats *system,
                                     size_t samples, uint64_t seed,
                                     tg_metric_bootstrap_result *out) {
    static const char fn[] = "tg_metric_paired_bootstrap";
    if (!baseline || !system || !out || !baseline->v || !system->v)
        return tg_error_set(TG_ERR_INVALID, "%s: a NULL or freed argument", fn);
    if (baseline->metric != system->metric || baseline->n != system->n ||
        baseline->width != system->width)
        return tg_error_set(TG_ERR_INVALID,
                            "%s: baseline (%s, %zu sentences) and system (%s, %zu) differ", fn,
                            tg_metric_name(baseline->metric), baseline->n,
                            tg_metric_name(system->metric), system->n);
    if (samples == 0) return tg_error_set(TG_ERR_INVALID, "%s: samples = 0", fn);
    size_t n = baseline->n;
    size_t *idx = malloc(n * sizeof *idx);
    double *bl = malloc(samples * sizeof *bl), *sy = malloc(samples * sizeof *sy),
           *d = malloc(samples * sizeof *d);
    if (!idx || !bl || !sy || !d) {
        free(idx), free(bl), free(sy), free(d);
        return tg_error_set(TG_ERR_NOMEM, "%s: out of memory (%zu samples of %zu)", fn, samples, n);
    }
    tg_rng rng;
    tg_rng_init(&rng, seed);
    for (size_t s = 0; s < samples; s++) {
        for (size_t k = 0; k < n; k++)
            idx[k] = (size_t)tg_rng_below(&rng, n);
        bl[s] = tg_metric_stats_score(baseline, idx, n);
        sy[s] = tg_metric_stats_score(system, idx, n);
    }
    tg_metric_bootstrap_result r = {0};
    r.baseline = tg_metric_stats_score(baseline, NULL, 0);
    r.system = tg_metric_stats_score(system, NULL, 0);
    r.samples = samples;
    r.seed = seed;
    /* _paired_bs_test: centre the resampled absolute differences on their mean (the null
     * hypothesis) and count how often they exceed the observed one. */
    double dmean = 0.0,
           real = r.system > r.baseline ? r.system - r.baseline : r.baseline - r.system;
    for (size_t s = 0; s < samples; s++) {
        d[s] = sy[s] > bl[s] ? sy[s] - bl[s] : bl[s] - sy[s];
        dmean += d[s];
    }
    dmean /= (double)samples;
    size_t c = 0;
    for (size_t s = 0; s < samples; s++)
        c += d[s] - dmean > real;
    r.p_value = (double)(c + 1) / (double)(samples + 1);
    estimate_ci(bl, samples, &r.baseline_mean, &r.baseline_ci);
    estimate_ci(sy, samples, &r.system_mean, &r.system_ci);
    free(idx), free(bl), free(sy), free(d);
    *out = r;
    return TG_OK;
}
