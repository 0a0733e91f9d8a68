/* GPU test: the CUDA backend against the CPU backend, op by op and on a training step.
 *
 * Exits 77 (meson: skipped) when the CUDA backend cannot be created (no GPU, no driver), after
 * printing why. It does not use Check: Check forks a child per test, and a CUDA context does
 * not survive fork(); a plain harness also builds on GPU machines without libcheck.
 *
 * What is compared (every check is named in the output and counted; any failure exits 1):
 *  - every op, forward value and input gradients of L = sum(y * R) (R fixed random weights),
 *    on random inputs large enough to use several thread blocks, CPU vs GPU. Metric: the
 *    normalised max error max|gpu - cpu| / max|cpu| over the tensor (non-finite entries must
 *    match exactly), at most 1e-5 (1e-2 when TG_CUDA_TF32=1 lets cuBLAS use TF32);
 *  - the GPU run repeated: bit-identical (no atomics in any float result);
 *  - dropout: masks and values bit-identical to the CPU's (same Philox counters);
 *  - optimizer updates (SGD with momentum, Adam, AdamW): parameters and moments bit-identical
 *    (both sides do the same float operations; exactness needs a CPU build without FMA
 *    contraction, i.e. without -Dnative=true, else 1e-6);
 *  - the store maths (gradient norm, scaling), id/target validation errors, out-of-memory;
 *  - every op of the op table occurs in some compared graph, and supports_op is true for all;
 *  - a training step of a small Transformer-like stack (embedding, attention with a causal
 *    mask, layer norm, GELU FFN, tied output, smoothed cross-entropy, dropout, SGD with
 *    momentum) run three times on both backends: losses and parameters within 1e-4. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "tg/tg.h"

static int n_checks, n_failed;
static double TOL = 1e-5;
static bool ops_seen[TG_OP_COUNT];

#define CHECK(cond, ...)                                          \
    do {                                                          \
        n_checks++;                                               \
        if (!(cond)) {                                            \
            n_failed++;                                           \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);           \
            printf(__VA_ARGS__);                                  \
            printf("\n");                                         \
        }                                                         \
    } while (0)

/* ---- random inputs ---- */

typedef enum { K_NORMAL = 0, K_POSITIVE, K_AWAY0, K_DISTINCT } kind;

static void fill(float *x, int64_t n, kind k, tg_rng *r) {
    for (int64_t i = 0; i < n; i++) {
        double u = tg_rng_uniform(r);
        switch (k) {
        case K_POSITIVE: x[i] = (float)(0.5 + 1.5 * u); break;
        case K_AWAY0: x[i] = (float)((0.1 + 1.4 * u) * (tg_rng_uniform(r) < 0.5 ? -1 : 1)); break;
        case K_DISTINCT: x[i] = (float)(0.25 * (double)i - 0.1 * (double)n + 0.05 * u); break;
        default: x[i] = (float)tg_rng_normal(r); break;
        }
    }
    if (k == K_DISTINCT)
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)tg_rng_below(r, (uint64_t)i + 1);
            float t = x[i];
            x[i] = x[j];
            x[j] = t;
        }
}

/* max|g - c| / max|c|; non-finite entries must agree exactly. */
static double norm_err(const float *g, const float *c, int64_t n) {
    double maxabs = 0.0, maxdiff = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(c[i]) || !isfinite(g[i])) {
            if (!(isnan(c[i]) && isnan(g[i])) && c[i] != g[i]) return INFINITY;
            continue;
        }
        maxabs = fmax(maxabs, fabs((double)c[i]));
        maxdiff = fmax(maxdiff, fabs((double)g[i] - (double)c[i]));
    }
    return maxabs > 0.0 ? maxdiff / maxabs : maxdiff;
}

/* ---- op cases ---- */

#define MAXIN 4
#define S(...) {__VA_ARGS__}

typedef struct {
    const char *name;
    int n;
    int ndim[MAXIN];
    int64_t shape[MAXIN][TG_MAX_DIMS];
    kind kind[MAXIN];
    tg_tensor *(*build)(tg_graph *g, tg_tensor **x);
} op_case;

typedef struct {
    int64_t ny, nel[MAXIN];
    float *y, *grad[MAXIN];
} result;

static void result_free(result *r) {
    free(r->y);
    for (int k = 0; k < MAXIN; k++) free(r->grad[k]);
    memset(r, 0, sizeof *r);
}

/* Build y = case(x), L = sum(y * R), its gradients; run on b; read y and the gradients. */
static bool run_case(const op_case *c, tg_backend *b, float **xs, result *out) {
    memset(out, 0, sizeof *out);
    tg_graph *g = tg_graph_new();
    tg_graph_set_seed(g, 0x1234abcd9876ull);
    tg_tensor *in[MAXIN], *gr[MAXIN] = {0};
    for (int k = 0; k < c->n; k++)
        in[k] = tg_requires_grad(tg_input(g, TG_DTYPE_F32, c->ndim[k], c->shape[k], xs[k]));
    tg_tensor *y = tg_keep(c->build(g, in));
    bool ok = y != NULL;
    if (ok) {
        int64_t ys[TG_MAX_DIMS];
        int ynd = tg_tensor_shape(y, ys);
        out->ny = tg_tensor_numel(y);
        float *R = malloc((size_t)out->ny * 4 + 4);
        tg_rng r;
        tg_rng_init(&r, 99);
        for (int64_t i = 0; i < out->ny; i++) R[i] = (float)(0.5 + tg_rng_uniform(&r)) * (i % 2 ? -1.0f : 1.0f);
        tg_tensor *loss = tg_sum_all(tg_mul(y, tg_input(g, TG_DTYPE_F32, ynd, ys, R)));
        free(R);
        ok = tg_backward(g, loss) == TG_OK;
        for (int k = 0; ok && k < c->n; k++) gr[k] = tg_grad(g, in[k]);
    }
    for (int64_t i = 0; i < g->n; i++) ops_seen[g->nodes[i]->op] = true;
    if (ok) ok = tg_graph_run(g, b) == TG_OK;
    if (ok) {
        out->y = malloc((size_t)out->ny * 4 + 4);
        ok = tg_tensor_read(y, out->y, (size_t)out->ny * 4) == TG_OK;
        for (int k = 0; ok && k < c->n; k++) {
            out->nel[k] = tg__tensor_numel(c->ndim[k], c->shape[k]);
            out->grad[k] = calloc((size_t)out->nel[k] + 1, 4);
            if (gr[k]) ok = tg_tensor_read(gr[k], out->grad[k], (size_t)out->nel[k] * 4) == TG_OK;
        }
    }
    if (!ok) printf("  %s on %s: %s\n", c->name, tg_backend_name(b), tg_error_message());
    tg_graph_free(g);
    return ok;
}

#define B1(name, expr) \
    static tg_tensor *name(tg_graph *g, tg_tensor **x) { (void)g; return (expr); }

B1(b_add, tg_add(x[0], x[1]))
B1(b_sub, tg_sub(x[0], x[1]))
B1(b_mul, tg_mul(x[0], x[1]))
B1(b_div, tg_div(x[0], x[1]))
B1(b_affine, tg_affine(x[0], -1.5f, 0.25f))
B1(b_exp, tg_exp(x[0]))
B1(b_log, tg_log(x[0]))
B1(b_sqrt, tg_sqrt(x[0]))
B1(b_rsqrt, tg_rsqrt(x[0]))
B1(b_tanh, tg_tanh(x[0]))
B1(b_relu, tg_relu(x[0]))
B1(b_gelu, tg_gelu(x[0]))
B1(b_silu, tg_silu(x[0]))
B1(b_gelu_erf, tg_gelu_erf(x[0]))
B1(b_sum0, tg_sum(x[0], 0, false))
B1(b_sum_last, tg_sum(x[0], -1, true))
B1(b_sum_mid, tg_sum(x[0], 1, false))
B1(b_mean, tg_mean(x[0], 1, false))
B1(b_max, tg_max(x[0], 1, false))
B1(b_softmax, tg_softmax(x[0]))
B1(b_log_softmax, tg_log_softmax(x[0]))
B1(b_ln, tg_layer_norm(x[0], x[1], x[2], 1e-5f))
B1(b_ln_plain, tg_layer_norm(x[0], NULL, NULL, 1e-5f))
B1(b_mm, tg_matmul(x[0], x[1], false, false))
B1(b_mm_tt, tg_matmul(x[0], x[1], true, true))
B1(b_mm_nt, tg_matmul(x[0], x[1], false, true))
B1(b_mm_tn, tg_matmul(x[0], x[1], true, false))
B1(b_mm_view, tg_matmul(tg_transpose(x[0], 1, 2), x[1], false, false))
B1(b_slice, tg_slice(x[0], 1, 3, 17))
B1(b_pad, tg_pad(x[0], 0, 2, 3))
B1(b_dropout, tg_dropout(x[0], 0.3f))

static tg_tensor *b_permute(tg_graph *g, tg_tensor **x) {
    (void)g;
    int p[4] = {2, 0, 3, 1};
    return tg_contiguous(tg_permute(x[0], p));
}
static tg_tensor *b_reshape_view(tg_graph *g, tg_tensor **x) {
    (void)g;
    int64_t s[2] = {-1, 6};
    return tg_reshape(tg_transpose(x[0], 0, 2), 2, s);
}
static tg_tensor *b_concat(tg_graph *g, tg_tensor **x) {
    (void)g;
    tg_tensor *xs[3] = {x[0], x[1], x[0]};
    return tg_concat(xs, 3, 1);
}
static tg_tensor *b_concat_many(tg_graph *g, tg_tensor **x) {
    (void)g;
    tg_tensor *xs[11];
    for (int i = 0; i < 11; i++) xs[i] = tg_scale(x[0], (float)(i + 1));
    return tg_concat(xs, 11, 0);
}
static tg_tensor *b_expand(tg_graph *g, tg_tensor **x) {
    (void)g;
    int64_t s[3] = {5, 30, 40};
    return tg_expand(x[0], 3, s);
}
static tg_tensor *b_sum_to_mid(tg_graph *g, tg_tensor **x) {
    (void)g;
    int64_t s[3] = {6, 1, 20};
    return tg_sum_to(x[0], 3, s);
}
static tg_tensor *b_sum_to_lead(tg_graph *g, tg_tensor **x) {
    (void)g;
    int64_t s[1] = {48};
    return tg_sum_to(x[0], 1, s);
}
static tg_tensor *b_masked_fill_i32(tg_graph *g, tg_tensor **x) {
    int32_t m[40];
    for (int i = 0; i < 40; i++) m[i] = (i * 7) % 3 == 0;
    int64_t s[2] = {1, 40};
    return tg_masked_fill(x[0], tg_input(g, TG_DTYPE_I32, 2, s, m), -3.0f);
}
static tg_tensor *b_masked_fill_f32(tg_graph *g, tg_tensor **x) {
    float m[30];
    for (int i = 0; i < 30; i++) m[i] = (float)(i % 4 == 1);
    int64_t s[3] = {30, 1, 1};
    return tg_masked_fill(x[0], tg_input(g, TG_DTYPE_F32, 3, s, m), 2.5f);
}
/* attention-style masking: causal [12, 12] and padding [16, 1, 1, 12]; batch element 3 has
 * every key masked, so its rows must come out as zeros */
static tg_tensor *b_masked_softmax(tg_graph *g, tg_tensor **x) {
    int32_t causal[144], pad[16 * 12];
    for (int i = 0; i < 12; i++)
        for (int j = 0; j < 12; j++) causal[i * 12 + j] = j > i;
    for (int b = 0; b < 16; b++)
        for (int j = 0; j < 12; j++) pad[b * 12 + j] = b == 3 || j >= 12 - b % 5;
    int64_t sc[2] = {12, 12}, sp[4] = {16, 1, 1, 12};
    tg_tensor *m = tg_masked_fill(x[0], tg_input(g, TG_DTYPE_I32, 2, sc, causal), -INFINITY);
    m = tg_masked_fill(m, tg_input(g, TG_DTYPE_I32, 4, sp, pad), -INFINITY);
    return tg_softmax(m);
}
/* embedding with repeated ids from an input leaf (host-side id check) */
static tg_tensor *b_embedding(tg_graph *g, tg_tensor **x) {
    int32_t ids[8 * 40];
    for (int i = 0; i < 8 * 40; i++) ids[i] = (i * 37 + i / 7) % 50;
    int64_t s[2] = {8, 40};
    return tg_embedding(x[0], tg_input(g, TG_DTYPE_I32, 2, s, ids));
}
/* ids computed on the device (concat, then a transposed copy): device-side id check */
static tg_tensor *b_embedding_dev(tg_graph *g, tg_tensor **x) {
    int32_t a[4 * 30], b[3 * 30];
    for (int i = 0; i < 4 * 30; i++) a[i] = (i * 13) % 50;
    for (int i = 0; i < 3 * 30; i++) b[i] = (i * 29 + 3) % 50;
    int64_t sa[2] = {4, 30}, sb[2] = {3, 30};
    tg_tensor *parts[2] = {tg_input(g, TG_DTYPE_I32, 2, sa, a), tg_input(g, TG_DTYPE_I32, 2, sb, b)};
    tg_tensor *ids = tg_contiguous(tg_transpose(tg_concat(parts, 2, 0), 0, 1));
    return tg_embedding(x[0], ids);
}
static tg_tensor *ce(tg_graph *g, tg_tensor *logits, float eps, tg_reduction red) {
    int64_t n = tg_tensor_dim(logits, 0), v = tg_tensor_dim(logits, 1);
    int32_t *y = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) y[i] = (int32_t)((i * 131 + 7) % v);
    for (int64_t i = 0; i < n; i += 5) y[i] = 0; /* ignored rows */
    tg_tensor *t = tg_input(g, TG_DTYPE_I32, 1, &n, y);
    free(y);
    return tg_cross_entropy(logits, t, eps, 0, red);
}
static tg_tensor *b_ce_mean(tg_graph *g, tg_tensor **x) { return ce(g, x[0], 0.1f, TG_REDUCE_MEAN); }
static tg_tensor *b_ce_sum(tg_graph *g, tg_tensor **x) { return ce(g, x[0], 0.0f, TG_REDUCE_SUM); }
static tg_tensor *b_ce_none(tg_graph *g, tg_tensor **x) { return ce(g, x[0], 0.2f, TG_REDUCE_NONE); }
static tg_tensor *ce_nll(tg_graph *g, tg_tensor *logits, float eps, tg_reduction red) {
    int64_t n = tg_tensor_dim(logits, 0), v = tg_tensor_dim(logits, 1);
    int32_t *y = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        y[i] = (int32_t)((i * 131 + 7) % v);
    for (int64_t i = 0; i < n; i += 5)
        y[i] = 0; /* ignored rows */
    tg_tensor *t = tg_input(g, TG_DTYPE_I32, 1, &n, y);
    free(y);
    return tg_cross_entropy_with_nll(logits, t, eps, 0, red);
}
static tg_tensor *b_ce_nll_sum(tg_graph *g, tg_tensor **x) {
    return ce_nll(g, x[0], 0.1f, TG_REDUCE_SUM);
}
static tg_tensor *b_ce_nll_none(tg_graph *g, tg_tensor **x) {
    return ce_nll(g, x[0], 0.1f, TG_REDUCE_NONE);
}

/* [B, T, h*dk] -> [B, h, T, dk], a strided view that matmul reads in place */
static tg_tensor *heads(tg_tensor *x, int h) {
    int64_t s[4] = {tg_tensor_dim(x, 0), tg_tensor_dim(x, 1), h, tg_tensor_dim(x, 2) / h};
    int p[4] = {0, 2, 1, 3};
    return tg_permute(tg_reshape(x, 4, s), p);
}
static tg_tensor *b_attention(tg_graph *g, tg_tensor **x) {
    (void)g;
    tg_tensor *q = heads(x[0], 4), *k = heads(x[1], 4), *v = heads(x[2], 4);
    tg_tensor *p = tg_softmax(tg_scale(tg_matmul(q, k, false, true), 0.25f));
    int perm[4] = {0, 2, 1, 3};
    tg_tensor *o = tg_permute(tg_matmul(p, v, false, false), perm);
    int64_t s[3] = {tg_tensor_dim(x[0], 0), tg_tensor_dim(x[0], 1), tg_tensor_dim(x[0], 2)};
    return tg_reshape(o, 3, s);
}
/* banded attention: r = 16 windows cut by both ends of 100 positions; the -inf fill goes
 * through a softmax (the banded attention core); fill 0 for band_scores alone */
B1(b_band_scores, tg_band_scores(x[0], x[1], 16, 0.0f))
B1(b_band_mix, tg_band_mix(x[0], x[1], 3))
static tg_tensor *b_band_attention(tg_graph *g, tg_tensor **x) {
    (void)g;
    tg_tensor *s = tg_scale(tg_band_scores(x[0], x[1], 16, -INFINITY), 0.125f);
    return tg_band_mix(tg_softmax(s), x[2], 16);
}

static const op_case cases[] = {
    {"add_broadcast", 2, {3, 1}, {S(64, 33, 40), S(40)}, {0}, b_add},
    {"sub_broadcast_both", 2, {3, 2}, {S(7, 1, 50), S(30, 50)}, {0}, b_sub},
    {"mul", 2, {2, 2}, {S(1000, 129), S(1000, 129)}, {0}, b_mul},
    {"div_column", 2, {2, 2}, {S(300, 64), S(300, 1)}, {K_NORMAL, K_POSITIVE}, b_div},
    {"affine", 1, {1}, {S(5000)}, {0}, b_affine},
    {"exp", 1, {2}, {S(257, 31)}, {0}, b_exp},
    {"log", 1, {2}, {S(257, 31)}, {K_POSITIVE}, b_log},
    {"sqrt", 1, {2}, {S(257, 31)}, {K_POSITIVE}, b_sqrt},
    {"rsqrt", 1, {2}, {S(257, 31)}, {K_POSITIVE}, b_rsqrt},
    {"tanh", 1, {2}, {S(257, 31)}, {0}, b_tanh},
    {"relu", 1, {2}, {S(257, 31)}, {K_AWAY0}, b_relu},
    {"gelu", 1, {2}, {S(257, 31)}, {0}, b_gelu},
    {"sum_axis0_columns", 1, {2}, {S(300, 70)}, {0}, b_sum0},
    {"sum_last_keepdim_rows", 1, {2}, {S(50, 1000)}, {0}, b_sum_last},
    {"sum_middle_axis", 1, {3}, {S(8, 600, 40)}, {0}, b_sum_mid},
    {"mean", 1, {3}, {S(6, 20, 9)}, {0}, b_mean},
    {"max", 1, {3}, {S(20, 50, 7)}, {K_DISTINCT}, b_max},
    {"softmax_short_rows", 1, {2}, {S(300, 10)}, {0}, b_softmax},
    {"softmax_long_rows", 1, {2}, {S(20, 3000)}, {0}, b_softmax},
    {"log_softmax", 1, {2}, {S(40, 5000)}, {0}, b_log_softmax},
    {"masked_softmax", 1, {4}, {S(16, 4, 12, 12)}, {0}, b_masked_softmax},
    {"layer_norm_affine", 3, {2, 1, 1}, {S(128, 512), S(512), S(512)}, {0}, b_ln},
    {"layer_norm_plain", 1, {3}, {S(64, 3, 700)}, {0}, b_ln_plain},
    {"matmul", 2, {2, 2}, {S(64, 128), S(128, 96)}, {0}, b_mm},
    {"matmul_batched_bcast", 2, {4, 2}, {S(4, 3, 33, 17), S(17, 25)}, {0}, b_mm},
    {"matmul_bcast_both", 2, {4, 4}, {S(3, 1, 5, 6), S(1, 4, 6, 7)}, {0}, b_mm},
    {"matmul_tt", 2, {3, 3}, {S(2, 40, 30), S(2, 50, 40)}, {0}, b_mm_tt},
    {"matmul_nt", 2, {3, 3}, {S(2, 30, 40), S(1, 50, 40)}, {0}, b_mm_nt},
    {"matmul_tn", 2, {2, 2}, {S(40, 30), S(40, 50)}, {0}, b_mm_tn},
    {"matmul_view", 2, {3, 3}, {S(2, 64, 48), S(2, 64, 20)}, {0}, b_mm_view},
    {"attention_heads", 3, {3, 3, 3}, {S(2, 10, 64), S(2, 12, 64), S(2, 12, 64)}, {0}, b_attention},
    {"band_scores", 2, {4, 4}, {S(2, 4, 100, 64), S(2, 4, 90, 64)}, {0}, b_band_scores},
    {"band_mix", 2, {3, 3}, {S(8, 50, 7), S(8, 60, 33)}, {0}, b_band_mix},
    {"band_attention",
     3,
     {4, 4, 4},
     {S(2, 4, 100, 64), S(2, 4, 100, 64), S(2, 4, 100, 64)},
     {0},
     b_band_attention},
    {"permute_contiguous", 1, {4}, {S(3, 5, 7, 11)}, {0}, b_permute},
    {"reshape_of_view", 1, {3}, {S(4, 6, 5)}, {0}, b_reshape_view},
    {"slice", 1, {2}, {S(30, 20)}, {0}, b_slice},
    {"concat", 2, {2, 2}, {S(20, 30), S(20, 7)}, {0}, b_concat},
    {"concat_grouped", 1, {2}, {S(3, 50)}, {0}, b_concat_many},
    {"pad", 1, {2}, {S(20, 33)}, {0}, b_pad},
    {"expand", 1, {2}, {S(30, 1)}, {0}, b_expand},
    {"sum_to_middle", 1, {3}, {S(6, 7, 20)}, {0}, b_sum_to_mid},
    {"sum_to_leading", 1, {3}, {S(40, 30, 48)}, {0}, b_sum_to_lead},
    {"masked_fill_i32", 1, {2}, {S(60, 40)}, {0}, b_masked_fill_i32},
    {"masked_fill_f32", 1, {3}, {S(30, 8, 9)}, {0}, b_masked_fill_f32},
    {"dropout", 1, {2}, {S(1000, 37)}, {0}, b_dropout},
    {"embedding", 1, {2}, {S(50, 64)}, {0}, b_embedding},
    {"embedding_device_ids", 1, {2}, {S(50, 300)}, {0}, b_embedding_dev},
    {"cross_entropy_mean_smoothed", 1, {2}, {S(64, 1000)}, {0}, b_ce_mean},
    {"cross_entropy_sum", 1, {2}, {S(64, 1000)}, {0}, b_ce_sum},
    {"cross_entropy_none", 1, {2}, {S(64, 1000)}, {0}, b_ce_none},
    {"cross_entropy_with_nll_sum", 1, {2}, {S(64, 1000)}, {0}, b_ce_nll_sum},
    {"cross_entropy_with_nll_none", 1, {2}, {S(64, 1000)}, {0}, b_ce_nll_none},
    /* ops added later go last: a case's inputs come from its index (seed 1000 + index) */
    {"silu", 1, {2}, {S(257, 31)}, {0}, b_silu},
    {"gelu_erf", 1, {2}, {S(257, 31)}, {0}, b_gelu_erf},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void test_ops(tg_backend *cpu, tg_backend *gpu) {
    for (int ci = 0; ci < NCASES; ci++) {
        const op_case *c = &cases[ci];
        float *xs[MAXIN] = {0};
        tg_rng r;
        tg_rng_init(&r, 1000 + (uint64_t)ci);
        for (int k = 0; k < c->n; k++) {
            int64_t n = tg__tensor_numel(c->ndim[k], c->shape[k]);
            xs[k] = malloc((size_t)n * 4 + 4);
            fill(xs[k], n, c->kind[k], &r);
        }
        result rc, rg, rg2;
        bool ok_c = run_case(c, cpu, xs, &rc), ok_g = run_case(c, gpu, xs, &rg);
        bool ok_g2 = ok_g && run_case(c, gpu, xs, &rg2);
        CHECK(ok_c && ok_g && ok_g2, "%s: a run failed", c->name);
        if (ok_c && ok_g && ok_g2) {
            double e = norm_err(rg.y, rc.y, rc.ny), worst = e;
            CHECK(e <= TOL, "%s: forward error %.3g > %.1g", c->name, e, TOL);
            CHECK(memcmp(rg.y, rg2.y, (size_t)rg.ny * 4) == 0, "%s: GPU forward not repeatable", c->name);
            for (int k = 0; k < c->n; k++) {
                e = norm_err(rg.grad[k], rc.grad[k], rc.nel[k]);
                worst = fmax(worst, e);
                CHECK(e <= TOL, "%s: gradient of input %d error %.3g > %.1g", c->name, k, e, TOL);
                CHECK(memcmp(rg.grad[k], rg2.grad[k], (size_t)rg.nel[k] * 4) == 0,
                      "%s: GPU gradient %d not repeatable", c->name, k);
            }
            if (c->build == b_dropout) { /* same mask, same values: bit for bit */
                CHECK(memcmp(rg.y, rc.y, (size_t)rc.ny * 4) == 0, "dropout: forward not bit-identical");
                CHECK(memcmp(rg.grad[0], rc.grad[0], (size_t)rc.nel[0] * 4) == 0,
                      "dropout: gradient not bit-identical");
                int64_t zeros = 0;
                for (int64_t i = 0; i < rc.ny; i++) zeros += rc.y[i] == 0.0f;
                CHECK(zeros > rc.ny / 5 && zeros < rc.ny * 2 / 5, "dropout: %lld of %lld dropped",
                      (long long)zeros, (long long)rc.ny);
            }
            printf("  %-30s normalised max error %.2e\n", c->name, worst);
        }
        if (ok_c) result_free(&rc);
        if (ok_g) result_free(&rg);
        if (ok_g2) result_free(&rg2);
        for (int k = 0; k < c->n; k++) free(xs[k]);
    }
}

/* ---- optimizer and store maths ---- */

static tg_store *make_store(tg_backend *b, const float *w1, const float *w2, const float *g1,
                            const float *g2) {
    tg_store *s;
    int64_t s1[1] = {1000}, s2[2] = {33, 7};
    if (tg_store_new(b, &s) != TG_OK) return NULL;
    if (tg_store_add(s, "w1", 1, s1, w1, true) != TG_OK || tg_store_add(s, "w2", 2, s2, w2, true) != TG_OK ||
        tg_store_write_grad(s, 0, g1, 1000) != TG_OK || tg_store_write_grad(s, 1, g2, 231) != TG_OK) {
        tg_store_free(s);
        return NULL;
    }
    return s;
}

static void test_optim(tg_backend *cpu, tg_backend *gpu) {
    float w1[1000], w2[231], g1[1000], g2[231];
    tg_rng r;
    tg_rng_init(&r, 5);
    fill(w1, 1000, K_NORMAL, &r);
    fill(w2, 231, K_NORMAL, &r);
    fill(g1, 1000, K_NORMAL, &r);
    fill(g2, 231, K_NORMAL, &r);
#ifdef __FMA__
    double tol = 1e-6; /* the CPU side may fuse a*b+c: not bit-exact then */
#else
    double tol = 0.0;
#endif
    const tg_optim_kind kinds[3] = {TG_OPTIM_SGD, TG_OPTIM_ADAM, TG_OPTIM_ADAMW};
    const char *names[3] = {"sgd", "adam", "adamw"};
    for (int ki = 0; ki < 3; ki++) {
        tg_store *sc = make_store(cpu, w1, w2, g1, g2), *sg = make_store(gpu, w1, w2, g1, g2);
        CHECK(sc && sg, "%s: store creation: %s", names[ki], tg_error_message());
        if (!sc || !sg) {
            tg_store_free(sc);
            tg_store_free(sg);
            continue;
        }
        tg_optim_config cfg = tg_optim_defaults(kinds[ki]);
        cfg.weight_decay = 0.01f;
        tg_optim *oc, *og;
        CHECK(tg_optim_new(sc, &cfg, &oc) == TG_OK && tg_optim_new(sg, &cfg, &og) == TG_OK, "%s: optim_new",
              names[ki]);
        bool ok = true;
        for (int step = 0; step < 3 && ok; step++)
            ok = tg_optim_step(oc, 1e-3f) == TG_OK && tg_optim_step(og, 1e-3f) == TG_OK;
        CHECK(ok, "%s: step failed: %s", names[ki], tg_error_message());
        for (int64_t p = 0; ok && p < 2; p++) {
            int64_t n = tg_store_numel(sc, p);
            float *a = malloc((size_t)n * 4), *bb = malloc((size_t)n * 4);
            CHECK(tg_store_read(sc, p, a, n) == TG_OK && tg_store_read(sg, p, bb, n) == TG_OK, "read");
            double e = norm_err(bb, a, n);
            CHECK(tol == 0.0 ? memcmp(a, bb, (size_t)n * 4) == 0 : e <= tol,
                  "%s: parameter %lld differs (normalised error %.3g)", names[ki], (long long)p, e);
            for (int which = 0; which < 2; which++) {
                if (kinds[ki] == TG_OPTIM_SGD && which == 1) continue;
                CHECK(tg_optim_read_state(oc, p, which, a, n) == TG_OK &&
                          tg_optim_read_state(og, p, which, bb, n) == TG_OK,
                      "read state");
                e = norm_err(bb, a, n);
                CHECK(tol == 0.0 ? memcmp(a, bb, (size_t)n * 4) == 0 : e <= tol,
                      "%s: moment %d of parameter %lld differs (%.3g)", names[ki], which, (long long)p, e);
            }
            free(a);
            free(bb);
        }
        printf("  optimizer %-6s identical after 3 steps\n", names[ki]);
        /* store maths: norm, scaling */
        double nc = 0, ng = 0;
        CHECK(tg_store_grad_norm(sc, &nc) == TG_OK && tg_store_grad_norm(sg, &ng) == TG_OK, "grad norm");
        CHECK(fabs(nc - ng) <= 1e-5 * nc, "grad norm cpu %.9g gpu %.9g", nc, ng);
        CHECK(tg_store_scale_grad(sc, 0.5f) == TG_OK && tg_store_scale_grad(sg, 0.5f) == TG_OK, "scale");
        float a[231], bb[231];
        CHECK(tg_store_read_grad(sc, 1, a, 231) == TG_OK && tg_store_read_grad(sg, 1, bb, 231) == TG_OK &&
                  memcmp(a, bb, sizeof a) == 0,
              "scaled gradients differ");
        tg_optim_free(oc);
        tg_optim_free(og);
        tg_store_free(sc);
        tg_store_free(sg);
    }
}

/* ---- errors ---- */

static tg_status run_embedding_with(tg_backend *b, int32_t bad, bool device_ids) {
    tg_graph *g = tg_graph_new();
    float tab[50 * 4] = {0};
    int32_t ids[6] = {1, 2, 3, bad, 4, 5};
    int64_t st[2] = {50, 4}, si[1] = {6}, half[1] = {3};
    tg_tensor *t = tg_input(g, TG_DTYPE_F32, 2, st, tab), *id;
    if (device_ids) {
        tg_tensor *p[2] = {tg_input(g, TG_DTYPE_I32, 1, half, ids), tg_input(g, TG_DTYPE_I32, 1, half, ids + 3)};
        id = tg_concat(p, 2, 0);
    } else {
        id = tg_input(g, TG_DTYPE_I32, 1, si, ids);
    }
    tg_keep(tg_embedding(t, id));
    tg_status s = tg_graph_run(g, b);
    tg_graph_free(g);
    return s;
}

static void test_errors(tg_backend *gpu) {
    for (int dev = 0; dev < 2; dev++) {
        tg_status s = run_embedding_with(gpu, 50, dev);
        CHECK(s == TG_ERR_INVALID && strstr(tg_error_message(), "tg_embedding: id 50 at position 3"),
              "bad id (%s path): status %d, message '%s'", dev ? "device" : "host", (int)s,
              tg_error_message());
        s = run_embedding_with(gpu, 7, dev);
        CHECK(s == TG_OK, "good ids after an error (%s path): %s", dev ? "device" : "host", tg_error_message());
    }
    /* bad cross-entropy target */
    tg_graph *g = tg_graph_new();
    float lg[3 * 4] = {0};
    int32_t y[3] = {1, 9, 2};
    int64_t sl[2] = {3, 4}, sy[1] = {3};
    tg_keep(tg_cross_entropy(tg_input(g, TG_DTYPE_F32, 2, sl, lg), tg_input(g, TG_DTYPE_I32, 1, sy, y), 0.1f,
                             -1, TG_REDUCE_MEAN));
    tg_status s = tg_graph_run(g, gpu);
    CHECK(s == TG_ERR_INVALID && strstr(tg_error_message(), "tg_cross_entropy: target 9 at row 1"),
          "bad target: status %d, message '%s'", (int)s, tg_error_message());
    tg_graph_free(g);
    /* out of device memory: a clear error, and the backend still works afterwards */
    tg_store *st;
    CHECK(tg_store_new(gpu, &st) == TG_OK, "store");
    int64_t huge[2] = {(int64_t)1 << 20, (int64_t)1 << 20}; /* 4 TiB */
    s = tg_store_add(st, "huge", 2, huge, NULL, false);
    CHECK(s == TG_ERR_NOMEM && strstr(tg_error_message(), "out of device memory"),
          "4 TiB parameter: status %d, message '%s'", (int)s, tg_error_message());
    tg_store_free(st);
    CHECK(run_embedding_with(gpu, 7, true) == TG_OK, "backend unusable after out-of-memory: %s",
          tg_error_message());
    /* every op has a kernel: the executor never has to refuse a graph */
    for (int op = 1; op < TG_OP_COUNT; op++)
        CHECK(gpu->vt->supports_op(gpu, (tg_op)op), "CUDA backend lacks op %s", tg_op_name((tg_op)op));
}

/* ---- a training step of a small Transformer-like stack ---- */

enum { TB = 4, TT = 9, TD = 32, TH = 4, TV = 40, TF = 64 };

static tg_store *train_store(tg_backend *b) {
    tg_store *s;
    if (tg_store_new(b, &s) != TG_OK) return NULL;
    tg_rng r;
    tg_rng_init(&r, 77);
    struct { const char *name; int nd; int64_t s0, s1; float scale, shift; } P[] = {
        {"emb", 2, TV, TD, 0.18f, 0}, {"wq", 2, TD, TD, 0.2f, 0},  {"wk", 2, TD, TD, 0.2f, 0},
        {"wv", 2, TD, TD, 0.2f, 0},   {"wo", 2, TD, TD, 0.2f, 0},  {"g1", 1, TD, 0, 0.1f, 1},
        {"b1", 1, TD, 0, 0.1f, 0},    {"w1", 2, TF, TD, 0.2f, 0},  {"c1", 1, TF, 0, 0.1f, 0},
        {"w2", 2, TD, TF, 0.15f, 0},  {"c2", 1, TD, 0, 0.1f, 0},   {"g2", 1, TD, 0, 0.1f, 1},
        {"b2", 1, TD, 0, 0.1f, 0},
    };
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        int64_t shape[2] = {P[i].s0, P[i].s1}, n = P[i].nd == 2 ? P[i].s0 * P[i].s1 : P[i].s0;
        float *v = malloc((size_t)n * 4);
        for (int64_t k = 0; k < n; k++) v[k] = P[i].shift + P[i].scale * (float)tg_rng_normal(&r);
        tg_status st = tg_store_add(s, P[i].name, P[i].nd, shape, v, true);
        free(v);
        if (st) {
            tg_store_free(s);
            return NULL;
        }
    }
    return s;
}

static tg_tensor *linear(tg_graph *g, tg_store *s, tg_tensor *x, const char *w, const char *bias) {
    tg_tensor *y = tg_matmul(x, tg_param(g, s, w), false, true);
    return bias ? tg_add(y, tg_param(g, s, bias)) : y;
}

/* Post-LN block: x = LN(x + Dropout(MHA(x))); x = LN(x + FFN(x)); logits tied to emb. */
static tg_tensor *train_loss(tg_graph *g, tg_store *s, const int32_t *ids, const int32_t *tgt) {
    int64_t si[2] = {TB, TT}, sn[1] = {TB * TT}, sm[2] = {TT, TT};
    int32_t causal[TT * TT];
    for (int i = 0; i < TT; i++)
        for (int j = 0; j < TT; j++) causal[i * TT + j] = j > i;
    tg_tensor *x = tg_scale(tg_embedding(tg_param(g, s, "emb"), tg_input(g, TG_DTYPE_I32, 2, si, ids)),
                            sqrtf((float)TD));
    x = tg_dropout(x, 0.1f);
    tg_tensor *q = heads(linear(g, s, x, "wq", NULL), TH), *k = heads(linear(g, s, x, "wk", NULL), TH);
    tg_tensor *v = heads(linear(g, s, x, "wv", NULL), TH);
    tg_tensor *sc = tg_scale(tg_matmul(q, k, false, true), 1.0f / sqrtf((float)(TD / TH)));
    sc = tg_masked_fill(sc, tg_input(g, TG_DTYPE_I32, 2, sm, causal), -INFINITY);
    tg_tensor *p = tg_dropout(tg_softmax(sc), 0.1f);
    int perm[4] = {0, 2, 1, 3};
    int64_t s3[3] = {TB, TT, TD};
    tg_tensor *att = tg_reshape(tg_permute(tg_matmul(p, v, false, false), perm), 3, s3);
    x = tg_layer_norm(tg_add(x, tg_dropout(linear(g, s, att, "wo", NULL), 0.1f)), tg_param(g, s, "g1"),
                      tg_param(g, s, "b1"), 1e-5f);
    tg_tensor *h = linear(g, s, tg_gelu(linear(g, s, x, "w1", "c1")), "w2", "c2");
    x = tg_layer_norm(tg_add(x, h), tg_param(g, s, "g2"), tg_param(g, s, "b2"), 1e-5f);
    int64_t s2[2] = {TB * TT, TD};
    tg_tensor *logits = tg_matmul(tg_reshape(x, 2, s2), tg_param(g, s, "emb"), false, true);
    return tg_cross_entropy(logits, tg_input(g, TG_DTYPE_I32, 1, sn, tgt), 0.1f, 0, TG_REDUCE_MEAN);
}

/* SGD with momentum here: Adam's first steps are about lr * sign(g), which would turn float
 * noise in a near-zero gradient component into a full-size difference (Adam itself is
 * compared exactly in test_optim). */
static bool train(tg_backend *b, float losses[3], float **params, int64_t *nparams) {
    tg_store *s = train_store(b);
    tg_optim *o = NULL;
    tg_optim_config cfg = tg_optim_defaults(TG_OPTIM_SGD);
    if (!s || tg_optim_new(s, &cfg, &o) != TG_OK) {
        tg_store_free(s);
        return false;
    }
    bool ok = true;
    for (int step = 0; step < 3 && ok; step++) {
        /* the same batch and dropout masks every step: the loss must fall */
        int32_t ids[TB * TT], tgt[TB * TT];
        for (int i = 0; i < TB * TT; i++) {
            ids[i] = 1 + (i * 7) % (TV - 1);
            tgt[i] = (i % TT) >= TT - 1 - i / TT ? 0 : 1 + (i * 11) % (TV - 1); /* padding = 0 */
        }
        tg_graph *g = tg_graph_new();
        tg_graph_set_seed(g, 4242);
        tg_tensor *loss = tg_keep(train_loss(g, s, ids, tgt));
        for (int64_t i = 0; i < g->n; i++) ops_seen[g->nodes[i]->op] = true;
        ok = loss && tg_store_zero_grad(s) == TG_OK && tg_backward(g, loss) == TG_OK;
        for (int64_t i = 0; ok && i < g->n; i++) ops_seen[g->nodes[i]->op] = true;
        ok = ok && tg_graph_run(g, b) == TG_OK && tg_optim_step(o, 0.05f) == TG_OK;
        if (ok) losses[step] = tg_tensor_item(loss);
        tg_graph_free(g);
    }
    if (!ok) printf("  training on %s: %s\n", tg_backend_name(b), tg_error_message());
    int64_t total = tg_store_total_numel(s), off = 0;
    *params = malloc((size_t)total * 4);
    *nparams = total;
    for (int64_t i = 0; ok && i < tg_store_count(s); i++) {
        ok = tg_store_read(s, i, *params + off, tg_store_numel(s, i)) == TG_OK;
        off += tg_store_numel(s, i);
    }
    tg_optim_free(o);
    tg_store_free(s);
    return ok;
}

static void test_training(tg_backend *cpu, tg_backend *gpu) {
    float lc[3] = {0}, lg[3] = {0}, *pc = NULL, *pg = NULL;
    int64_t nc = 0, ng = 0;
    bool okc = train(cpu, lc, &pc, &nc), okg = train(gpu, lg, &pg, &ng);
    CHECK(okc && okg && nc == ng, "training runs");
    if (okc && okg && nc == ng) {
        double tol = TOL > 1e-5 ? TOL : 1e-4;
        for (int i = 0; i < 3; i++)
            CHECK(fabs((double)lc[i] - lg[i]) <= tol * fabs((double)lc[i]), "step %d loss cpu %.8g gpu %.8g",
                  i, (double)lc[i], (double)lg[i]);
        double e = norm_err(pg, pc, nc);
        CHECK(e <= tol, "parameters after 3 SGD steps: normalised error %.3g", e);
        CHECK(lc[0] > 2.0f && lc[2] < lc[0], "the loss should fall: %g -> %g", (double)lc[0], (double)lc[2]);
        printf("  training losses cpu %.6f %.6f %.6f, gpu %.6f %.6f %.6f, parameter error %.2e\n",
               (double)lc[0], (double)lc[1], (double)lc[2], (double)lg[0], (double)lg[1], (double)lg[2], e);
    }
    free(pc);
    free(pg);
}

int main(void) {
    tg_backend *gpu = NULL, *cpu = NULL;
    if (!tg_have_cuda()) {
        printf("test_gpu: skipped: this build has no CUDA backend\n");
        return 77;
    }
    if (tg_backend_cuda_new(0, &gpu) != TG_OK) {
        printf("test_gpu: skipped: %s\n", tg_error_message());
        return 77;
    }
    if (tg_backend_cpu_new(0, &cpu) != TG_OK) {
        printf("test_gpu: CPU backend: %s\n", tg_error_message());
        tg_backend_free(gpu);
        return 1;
    }
    const char *tf32 = getenv("TG_CUDA_TF32");
    if (tf32 && strcmp(tf32, "1") == 0) TOL = 1e-2;
    printf("test_gpu: CUDA backend up; tolerance %.0e (normalised max error)\n", TOL);
    printf("ops:\n");
    test_ops(cpu, gpu);
    printf("optimizers and store:\n");
    test_optim(cpu, gpu);
    printf("errors:\n");
    test_errors(gpu);
    printf("training step:\n");
    test_training(cpu, gpu);
    for (int op = 1; op < TG_OP_COUNT; op++)
        CHECK(ops_seen[op], "op %s was not compared on the GPU", tg_op_name((tg_op)op));
    printf("test_gpu: %d checks, %d failed; peak GPU memory %.1f MiB\n", n_checks, n_failed,
           (double)tg_backend_peak_bytes(gpu) / 1048576.0);
    tg_backend_free(cpu);
    tg_backend_free(gpu);
    return n_failed ? 1 : 0;
}
