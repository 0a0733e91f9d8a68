/* Attention cost benchmark (issue: cost of the variants against the number of heads).
 *
 * For every variant and h in {1, 2, 4, 8, 16, 32}: forward + backward time and planned peak
 * memory of one attention sub-layer (projections included) on x [B, n, d], and optionally of a
 * whole training step (--step). Beside each measurement, the paper's prediction for the
 * attention core relative to MHA at the same h (interacting literal ≈ (h+1)/2, summed ≈ 1,
 * talking-heads ≈ 1 + h/d_k, pairwise ≈ h: h^2 pairs instead of h), and a FLOP count of the
 * whole sub-layer (projections dilute the core's ratio).
 * Usage: bench_attention [--d-model 256 --batch 64 --len 10 --reps 5 --threads 2 --step 0]
 *
 * With --window R: the cost of restricted (local-window) self-attention against the sequence
 * length instead, n = 64, 128, ... up to --max-len (default 2048), --heads h (default 4),
 * batch 1 unless --batch is given: MHA with full attention, with the window as a mask on the
 * dense n×n scores (O(n²·d)), and with the banded kernels band_scores/band_mix (O(r·n·d)),
 * forward + backward of one sub-layer, projections included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/model-impl.h" /* tg_model.dense_window: the masked window path */
#include "tg/model.h"
#include "tg/tg.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static long opt(int argc, char **argv, const char *name, long dflt) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return strtol(argv[i + 1], NULL, 10);
    return dflt;
}

typedef struct {
    const char *label;
    tg_attn_kind kind;
    bool literal;
} variant;

static const variant variants[] = {
    {"mha", TG_ATTN_MHA, false},
    {"fixed_head", TG_ATTN_FIXED_HEAD, false},
    {"talking_heads", TG_ATTN_TALKING_HEADS, false},
    {"interacting", TG_ATTN_INTERACTING, false},
    {"interacting_literal", TG_ATTN_INTERACTING, true},
    {"interacting_pairwise", TG_ATTN_INTERACTING_PAIRWISE, false},
};

/* paper's prediction for the attention core relative to MHA */
static double core_prediction(const variant *v, double h, double dk) {
    switch (v->kind) {
    case TG_ATTN_TALKING_HEADS: return 1.0 + h / dk;
    case TG_ATTN_INTERACTING: return v->literal ? (h + 1.0) / 2.0 : 1.0;
    case TG_ATTN_INTERACTING_PAIRWISE: return h;
    default: return 1.0;
    }
}

/* forward FLOPs of the sub-layer (matmuls only): projections + core */
static double flops(const variant *v, double B, double n, double d, double h, double dk) {
    double proj = 2 * B * n * d * (3 * h * dk), out_in = v->kind == TG_ATTN_INTERACTING_PAIRWISE ? h * h * dk : h * dk;
    proj += 2 * B * n * out_in * d;
    double pair = 2 * B * n * n * dk; /* one head's QK^T or AV */
    double core = 2 * h * pair;
    if (v->kind == TG_ATTN_TALKING_HEADS) core += 2 * 2 * B * h * h * n * n;
    if (v->kind == TG_ATTN_INTERACTING && v->literal) core = (h * h + h) * pair;
    if (v->kind == TG_ATTN_INTERACTING_PAIRWISE) core = 2 * h * h * pair;
    return proj + core;
}

static tg_vocab *vocab(void) {
    tg_vocab *v;
    if (tg_vocab_new(&v)) return NULL;
    tg_vocab_add(v, "a", NULL);
    return v;
}

/* median fwd+bwd ms of one sub-layer; *peak = planned workspace bytes */
/* window > 0: restricted self-attention, banded unless dense_window (the mask path) */
static int measure_w(const variant *v, long h, long d, long B, long n, long reps, long window, bool dense_window,
                     tg_backend *be, double *ms, size_t *peak) {
    tg_model_config c = tg_model_config_default();
    c.d_model = d;
    c.heads = h;
    c.enc_layers = 1;
    c.dec_layers = 1;
    c.d_ff = 4 * d;
    c.attention = v->kind;
    c.interacting_literal = v->literal;
    c.attn_dropout = 0.1f;
    c.window = window;
    if (c.max_len < n) c.max_len = n;
    tg_model *m;
    if (tg_model_new(&c, vocab(), vocab(), be, 1, &m) != TG_OK) return -1;
    m->dense_window = dense_window;
    float *x = malloc(sizeof(float) * (size_t)(B * n * d));
    tg_rng r;
    tg_rng_init(&r, 3);
    for (long i = 0; i < B * n * d; i++) x[i] = (float)tg_rng_normal(&r);
    double *t = malloc(sizeof(double) * (size_t)(reps + 1));
    int rc = 0;
    for (long k = 0; k <= reps && rc == 0; k++) {
        double t0 = now();
        tg_graph *g = tg_graph_new();
        int64_t s[3] = {B, n, d};
        tg_tensor *in = tg_requires_grad(tg_input(g, TG_DTYPE_F32, 3, s, x));
        tg_tensor *y = tg_model_attention(m, g, "encoder.layers.0.self_attn", in, in, NULL);
        tg_tensor *loss = tg_mean_all(tg_mul(y, y));
        if (tg_backward(g, loss) != TG_OK || !tg_grad(g, in) || tg_graph_run(g, be) != TG_OK) rc = -1;
        *peak = tg_graph_peak_bytes(g);
        tg_graph_free(g);
        if (k > 0) t[k - 1] = 1e3 * (now() - t0); /* the first run warms caches */
        tg_store_zero_grad(tg_model_store(m));
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    *ms = t[reps / 2];
    free(t);
    free(x);
    tg_model_free(m);
    return rc;
}

static int measure(const variant *v, long h, long d, long B, long n, long reps, tg_backend *be, double *ms,
                   size_t *peak) {
    return measure_w(v, h, d, B, n, reps, 0, false, be, ms, peak);
}

/* --window R: full, masked-window and banded-window MHA against n; "x n" columns: time relative to
 * the previous (half as long) n, ~2 for linear growth, ~4 for quadratic */
static int window_scan(long d, long h, long B, long r, long max_len, long reps, long threads, tg_backend *be) {
    const variant *mha = &variants[0];
    printf("# restricted self-attention, window r = %ld: one MHA sub-layer, forward + backward, x [%ld, n, %ld], "
           "h = %ld, %ld threads, median of %ld\n", r, B, d, h, threads, reps);
    printf("%6s %10s %10s %10s %8s %8s %8s %10s %10s %10s\n", "n", "full ms", "mask ms", "band ms", "full x n",
           "mask x n", "band x n", "full MiB", "mask MiB", "band MiB");
    double prev[3] = {0, 0, 0};
    for (long n = 64; n <= max_len; n *= 2) {
        double ms[3];
        size_t peak[3];
        for (int k = 0; k < 3; k++)
            if (measure_w(mha, h, d, B, n, reps, k ? r : 0, k == 1, be, &ms[k], &peak[k]) != 0) {
                fprintf(stderr, "bench_attention: n=%ld: %s\n", n, tg_error_message());
                return 1;
            }
        printf("%6ld %10.2f %10.2f %10.2f", n, ms[0], ms[1], ms[2]);
        bool first = prev[0] == 0;
        for (int k = 0; k < 3; k++) {
            if (!first) printf(" %8.2f", ms[k] / prev[k]);
            else printf(" %8s", "-");
            prev[k] = ms[k];
        }
        printf(" %10.1f %10.1f %10.1f\n", (double)peak[0] / 1048576.0, (double)peak[1] / 1048576.0,
               (double)peak[2] / 1048576.0);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: bench_attention [--d-model 256] [--batch 64] [--len 10] [--reps 5] [--threads 2]\n"
               "       bench_attention --window R [--max-len 2048] [--heads 4] [--batch 1] [--d-model 256] [--reps 5]\n");
        return 0;
    }
    long d = opt(argc, argv, "--d-model", 256), B = opt(argc, argv, "--batch", 64), n = opt(argc, argv, "--len", 10);
    long reps = opt(argc, argv, "--reps", 5), threads = opt(argc, argv, "--threads", 2);
    if (d < 32 || B < 1 || n < 1 || reps < 1 || threads < 1) {
        fprintf(stderr, "bench_attention: options out of range (d-model >= 32, others >= 1)\n");
        return 2;
    }
    tg_backend *be;
    if (tg_backend_cpu_new((int)threads, &be) != TG_OK) {
        fprintf(stderr, "bench_attention: %s\n", tg_error_message());
        return 1;
    }
    long window = opt(argc, argv, "--window", 0);
    if (window > 0) {
        long h = opt(argc, argv, "--heads", 4), max_len = opt(argc, argv, "--max-len", 2048);
        int rc = h >= 1 && d % h == 0 && max_len >= 64
                     ? window_scan(d, h, opt(argc, argv, "--batch", 1), window, max_len, reps, threads, be)
                     : 2;
        if (rc == 2) fprintf(stderr, "bench_attention: --heads must divide --d-model and --max-len be >= 64\n");
        tg_backend_free(be);
        return rc;
    }
    static const long heads[] = {1, 2, 4, 8, 16, 32};
    printf("# one attention sub-layer, forward + backward, x [%ld, %ld, %ld], %ld threads, median of %ld\n", B, n, d,
           threads, reps);
    printf("%-22s %4s %10s %10s %9s %12s %12s\n", "variant", "h", "ms", "x mha", "flops x", "paper core x",
           "peak MiB");
    for (size_t hi = 0; hi < sizeof heads / sizeof heads[0]; hi++) {
        long h = heads[hi];
        if (d % h) continue;
        double mha_ms = 0, mha_fl = 0;
        for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
            const variant *v = &variants[vi];
            double ms;
            size_t peak;
            if (measure(v, h, d, B, n, reps, be, &ms, &peak) != 0) {
                fprintf(stderr, "bench_attention: %s h=%ld: %s\n", v->label, h, tg_error_message());
                continue;
            }
            double fl = flops(v, (double)B, (double)n, (double)d, (double)h, (double)(d / h));
            if (vi == 0) {
                mha_ms = ms;
                mha_fl = fl;
            }
            printf("%-22s %4ld %10.2f %10.2f %9.2f %12.2f %12.1f\n", v->label, h, ms, ms / mha_ms, fl / mha_fl,
                   core_prediction(v, (double)h, (double)(d / h)), (double)peak / 1048576.0);
            fflush(stdout);
        }
    }
    tg_backend_free(be);
    return 0;
}
