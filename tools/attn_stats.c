/* The statistics of `tg attention --stats`, accumulated one input at a time.
 *
 * Per sub-layer, head and input: S is the n×m logit matrix of the head before the mask (queries
 * × keys; tg_attn_map.s). Its rank is at most min(n, m, width), width being what the kind's
 * algebra allows: d_k for mha, fixed_head, interacting (S = (Σ_i Q_i) K_jᵀ / √d_k, one d_k-wide
 * query per key head) and each pair of interacting_pairwise; h·d_k = d_model for talking heads,
 * whose mixed logits L_j = Σ_i P[i,j] S_i add h matrices of rank ≤ d_k. The low-rank bottleneck
 * (Bhojanapalli et al. 2020) is the case width < min(n, m): the rank cannot reach that of the
 * n×m matrix. Reported per input and averaged over inputs: the numerical rank and the effective
 * rank (tools/spectrum.h), the rank's ratios to d_k, min(n, m) and the bound, how often the width
 * binds and how often the rank attains the bound, the mean attention entropy of the query rows
 * (nats, from the softmax weights: masked keys have weight 0 and add nothing; a fully masked
 * row is skipped), the standard deviation of S's n·m entries (the logits' scale; a decoder's
 * future keys included, as S is taken before the mask) and the effective rank of the weights
 * that multiply V. */
#include "tools/attn_stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/spectrum.h"

/* sums over inputs of one (sub-layer, head) */
typedef struct {
    int64_t count, width_binds, at_bound;
    double n, m, bound, rank, erank, rank_dk, rank_nm, rank_bound, entropy, logit_std, w_erank;
} acc;

struct tg_attn_stats {
    tg_attn_kind kind;
    int64_t heads, dk, d_model, width;
    int64_t subs, per_sub,
        inputs; /* per_sub: heads per sub-layer (h², query × key, for pairwise) */
    char (*name)[160];
    acc *acc; /* [subs][per_sub] */
    double *sv;
    int64_t sv_cap;
};

tg_attn_stats *tg_attn_stats_new(const tg_model_config *c) {
    tg_attn_stats *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->kind = c->attention;
    a->heads = c->heads;
    a->dk = tg_model_head_dim(c);
    a->d_model = c->d_model;
    a->width = c->attention == TG_ATTN_TALKING_HEADS ? c->heads * a->dk : a->dk;
    return a;
}

void tg_attn_stats_free(tg_attn_stats *a) {
    if (!a) return;
    free(a->name);
    free(a->acc);
    free(a->sv);
    free(a);
}

int64_t tg_attn_stats_inputs(const tg_attn_stats *a) {
    return a->inputs;
}

/* the mean over the n rows of x [n, m] (rows summing to > 0) of −Σ_j x_ij ln x_ij */
static double row_entropy(const float *x, int64_t n, int64_t m) {
    double total = 0;
    int64_t rows = 0;
    for (int64_t i = 0; i < n; i++) {
        double h = 0, sum = 0;
        for (int64_t j = 0; j < m; j++) {
            double p = x[i * m + j];
            sum += p;
            if (p > 0) h -= p * log(p);
        }
        if (sum > 0) total += h, rows++;
    }
    return rows ? total / (double)rows : 0;
}

/* the population standard deviation of x[0..len) */
static double stdev(const float *x, int64_t len) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < len; i++)
        mean += x[i];
    mean /= (double)len;
    for (int64_t i = 0; i < len; i++)
        var += ((double)x[i] - mean) * ((double)x[i] - mean);
    return sqrt(var / (double)len);
}

static tg_status one_head(tg_attn_stats *a, acc *t, const float *s, const float *w, const float *p,
                          int64_t n, int64_t m) {
    int64_t k = n < m ? n : m;
    if (k > a->sv_cap) {
        double *nsv = realloc(a->sv, (size_t)k * sizeof *nsv);
        if (!nsv) return tg_error_set(TG_ERR_NOMEM, "attention statistics: out of memory");
        a->sv = nsv;
        a->sv_cap = k;
    }
    if (tg_spectrum_svals(s, n, m, a->sv) != 0)
        return tg_error_set(TG_ERR_NOMEM, "attention statistics: out of memory");
    int64_t rank = tg_spectrum_rank(a->sv, k, n, m), bound = k < a->width ? k : a->width;
    t->count++;
    t->n += (double)n;
    t->m += (double)m;
    t->bound += (double)bound;
    t->rank += (double)rank;
    t->erank += tg_spectrum_erank(a->sv, k);
    t->rank_dk += (double)rank / (double)a->dk;
    t->rank_nm += (double)rank / (double)k;
    t->rank_bound += (double)rank / (double)bound;
    t->width_binds += a->width < k;
    t->at_bound += rank == bound;
    t->entropy += row_entropy(p ? p : w, n, m);
    t->logit_std += stdev(s, n * m);
    if (tg_spectrum_svals(w, n, m, a->sv) != 0)
        return tg_error_set(TG_ERR_NOMEM, "attention statistics: out of memory");
    t->w_erank += tg_spectrum_erank(a->sv, k);
    return TG_OK;
}

tg_status tg_attn_stats_add(tg_attn_stats *a, const tg_attn_map *maps, int64_t count) {
    if (!a || !maps || count <= 0)
        return tg_error_set(TG_ERR_INVALID, "attention statistics: no maps");
    int64_t per = maps[0].ndim == 5 ? maps[0].shape[1] * maps[0].shape[2] : maps[0].shape[1];
    if (a->inputs == 0) {
        a->subs = count;
        a->per_sub = per;
        a->name = calloc((size_t)count, sizeof *a->name);
        a->acc = calloc((size_t)(count * per), sizeof *a->acc);
        if (!a->name || !a->acc)
            return tg_error_set(TG_ERR_NOMEM, "attention statistics: out of memory");
        for (int64_t i = 0; i < count; i++)
            snprintf(a->name[i], sizeof a->name[i], "%s", maps[i].name);
    }
    if (count != a->subs)
        return tg_error_set(TG_ERR_SHAPE, "attention statistics: %lld sub-layers, then %lld",
                            (long long)a->subs, (long long)count);
    for (int64_t i = 0; i < count; i++) {
        const tg_attn_map *mp = &maps[i];
        int64_t heads = mp->ndim == 5 ? mp->shape[1] * mp->shape[2] : mp->shape[1];
        int64_t n = mp->shape[mp->ndim - 2], m = mp->shape[mp->ndim - 1];
        if (strcmp(mp->name, a->name[i]) != 0 || heads != a->per_sub || mp->shape[0] != 1 || !mp->s)
            return tg_error_set(
                TG_ERR_SHAPE,
                "attention statistics: %s is not a batch of one with logits and %lld heads",
                mp->name, (long long)a->per_sub);
        for (int64_t h = 0; h < heads; h++) {
            int64_t off = h * n * m;
            tg_status st = one_head(a, &a->acc[i * a->per_sub + h], mp->s + off, mp->w + off,
                                    mp->p ? mp->p + off : NULL, n, m);
            if (st) return st;
        }
    }
    a->inputs++;
    return TG_OK;
}

/* "3", or "1_2" for query head 1 over key head 2 of interacting_pairwise */
static void head_label(const tg_attn_stats *a, int64_t h, char *buf, size_t len) {
    if (a->kind == TG_ATTN_INTERACTING_PAIRWISE)
        snprintf(buf, len, "%lld_%lld", (long long)(h / a->heads), (long long)(h % a->heads));
    else
        snprintf(buf, len, "%lld", (long long)h);
}

static const char CSV_HEADER[] =
    "sublayer,head,sentences,n_mean,m_mean,d_k,d_over_h,width,bound_mean,rank_mean,erank_mean,"
    "rank_over_dk,rank_over_min_nm,rank_over_bound,width_binds,at_bound,entropy_mean,logit_std_"
    "mean,"
    "weights_erank_mean\n";

tg_status tg_attn_stats_write_csv(const tg_attn_stats *a, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return tg_error_set(TG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    fputs(CSV_HEADER, f);
    char head[48];
    for (int64_t i = 0; i < a->subs; i++)
        for (int64_t h = 0; h < a->per_sub; h++) {
            const acc *t = &a->acc[i * a->per_sub + h];
            double c = t->count ? (double)t->count : 1;
            head_label(a, h, head, sizeof head);
            fprintf(f,
                    "%s,%s,%lld,%.4f,%.4f,%lld,%.4g,%lld,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%."
                    "4f,%.4f,%.4f\n",
                    a->name[i], head, (long long)t->count, t->n / c, t->m / c, (long long)a->dk,
                    (double)a->d_model / (double)a->heads, (long long)a->width, t->bound / c,
                    t->rank / c, t->erank / c, t->rank_dk / c, t->rank_nm / c, t->rank_bound / c,
                    (double)t->width_binds / c, (double)t->at_bound / c, t->entropy / c,
                    t->logit_std / c, t->w_erank / c);
        }
    if (fclose(f) != 0)
        return tg_error_set(TG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return TG_OK;
}

void tg_attn_stats_print(const tg_attn_stats *a, FILE *f) {
    for (int64_t i = 0; i < a->subs; i++) {
        acc s = {0};
        for (int64_t h = 0; h < a->per_sub; h++) {
            const acc *t = &a->acc[i * a->per_sub + h];
            s.count += t->count;
            s.n += t->n, s.m += t->m, s.bound += t->bound, s.rank += t->rank, s.erank += t->erank;
            s.width_binds += t->width_binds, s.at_bound += t->at_bound;
            s.entropy += t->entropy, s.logit_std += t->logit_std;
        }
        double c = s.count ? (double)s.count : 1;
        fprintf(f,
                "%-32s %lld %s  n %.1f  m %.1f  d_k %lld  rank %.2f of bound %.2f (width binds "
                "%.0f%%, at bound "
                "%.0f%%)  erank %.2f  entropy %.3f  logit std %.3f\n",
                a->name[i], (long long)a->per_sub,
                a->kind == TG_ATTN_INTERACTING_PAIRWISE ? "head pairs" : "heads", s.n / c, s.m / c,
                (long long)a->dk, s.rank / c, s.bound / c, 100.0 * (double)s.width_binds / c,
                100.0 * (double)s.at_bound / c, s.erank / c, s.entropy / c, s.logit_std / c);
    }
}
