/* bench_ops: tgraph's ops, run through graphs, against the machine's raw ceilings.
 *
 *   bench_ops [--threads 2] [--quick] [--only 1|2|3|4|5|6|7]    (sections below)
 *
 * 1. matmul (tg_matmul in a graph, run again and again) against ONE cblas_sgemm call on the
 *    same shapes with OpenBLAS on the same number of threads; target >= 0.9x.
 * 2. batched attention-shaped products (B·h small products, heads split by a permuted view,
 *    as a model builds them) against a loop of cblas_sgemm calls over the batch with OpenBLAS
 *    on the same threads; target >= 1.5x (the speed issue's table, docs/log/2026-12-06.md).
 * 3. memory-bound ops in GB/s (bytes each op must read and write once) against a triad loop
 *    a[i] = b[i] + s·c[i] (OpenMP, same threads) over the same number of bytes; target >= 0.5x.
 *    Forward ops run as whole graphs (parameter in, kept result out); softmax also as its
 *    kernel alone (the graph run's fixed cost dominates its small g2p shape). Backward ops are
 * timed as their kernel alone: the back node of a forward+backward graph (planner off, so every
 *    input still holds its value) is re-run through the backend's run_node.
 * 4. building + planning one Transformer encoder layer's training graph (forward, loss,
 *    backward; g2p-small shapes) as a % of running it; target < 2 %.
 * 5. fused elementwise chains (core/fuse.c): the same graph with fusion on and off
 *    (tg_graph_set_fusion), alternately, and the fused one's bytes against the triad.
 * 6. section 3's softmax, layer norm and GELU kernels, forward and backward, over ~128 MiB
 *    tensors (from DRAM, as STREAM sizes its arrays) against the triad over the same bytes.
 * 7. the store maths of a training step — zeroing the gradients, their norm, Adam's step, the
 *    step that zeroes the gradients — over g2p-small's parameters, against the triad over the
 *    bytes each must move.
 *
 * Timing: each contender runs in blocks (OpenBLAS's thread count set for the block, one
 * warm-up call, then samples of enough calls to last >= 2 ms); blocks of the two contenders
 * alternate, so the machine's noise hits both alike, and the result is the median sample.
 * Shapes are those of g2p-small (d 256, h 4, d_ff 1024, 128 × 10 tokens) and nmt-small
 * (d 512, h 8, d_ff 2048, 32 × 32 tokens, vocabulary 8000) of docs/log/2026-12-04.md. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backend-impl.h"
#include "core/ops/ops-impl.h"
#include "tg/tg.h"

static int NT = 2;      /* threads for everyone */
static int BLOCKS = 5;  /* alternating blocks per contender */
static int SAMPLES = 5; /* samples per block */
static int ONLY = 0;    /* run only this section (0: all) */
static int nfail = 0, npass = 0;

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "bench_ops: " __VA_ARGS__);                                                \
        fprintf(stderr, ": %s\n", tg_error_message());                                             \
        exit(1);                                                                                   \
    } while (0)
#define CK(x)                                                                                      \
    do {                                                                                           \
        if ((x) != TG_OK) DIE("%s", #x);                                                           \
    } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- timing ---- */

typedef struct {
    void (*fn)(void *);
    void *ctx;
    int blas_threads; /* OpenBLAS threads while this contender runs */
    int iters;        /* calls per sample (calibrated) */
} contender;

static void calibrate(contender *c) {
    openblas_set_num_threads(c->blas_threads);
    c->fn(c->ctx); /* warm-up: first touch, workspace allocation */
    double t0 = now();
    c->fn(c->ctx);
    double t = now() - t0;
    c->iters = t >= 2e-3 ? 1 : (int)(2e-3 / (t > 1e-7 ? t : 1e-7)) + 1;
}

/* Let the thread pools go idle between blocks: OpenBLAS's workers and OpenMP's spin for a
 * while after their last job and would steal a core from the next contender. */
static void cool_down(void) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Median seconds per call of each of n contenders, interleaved by blocks; best[i] gets the
 * fastest sample (what the contender does when the shared machine leaves it alone). */
static void time_all(contender *cs, int n, double *out, double *best) {
    int ns = BLOCKS * SAMPLES;
    double *s = malloc(sizeof(double) * (size_t)(n * ns));
    for (int i = 0; i < n; i++)
        calibrate(&cs[i]);
    for (int blk = 0; blk < BLOCKS; blk++)
        for (int i = 0; i < n; i++) {
            contender *c = &cs[i];
            openblas_set_num_threads(c->blas_threads);
            c->fn(c->ctx);
            for (int k = 0; k < SAMPLES; k++) {
                double t0 = now();
                for (int it = 0; it < c->iters; it++)
                    c->fn(c->ctx);
                s[i * ns + blk * SAMPLES + k] = (now() - t0) / c->iters;
            }
            cool_down();
        }
    for (int i = 0; i < n; i++) {
        out[i] = median(s + i * ns, ns); /* sorts the samples */
        best[i] = s[i * ns];
    }
    free(s);
    openblas_set_num_threads(1);
}

/* The verdict is on the ratio of medians; the ratio of the best samples is shown beside it. */
static void verdict(const char *what, double ratio, double best_ratio, double target, bool above) {
    bool ok = above ? ratio >= target : ratio < target;
    printf("    %-34s %7.2f (best %6.2f)  target %s %.2f  %s\n", what, ratio, best_ratio,
           above ? ">=" : "<", target, ok ? "ok" : "BELOW TARGET");
    if (ok)
        npass++;
    else
        nfail++;
}

/* ---- shared helpers ---- */

static tg_backend *BK;

static float *randbuf(int64_t n, uint64_t seed) {
    float *p = malloc((size_t)n * sizeof *p);
    if (!p) DIE("out of memory");
    tg_rng r;
    tg_rng_init(&r, seed);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(2.0 * tg_rng_uniform(&r) - 1.0);
    return p;
}

static void add_param(tg_store *s, const char *name, int ndim, const int64_t *shape,
                      uint64_t seed) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *v = randbuf(n, seed);
    CK(tg_store_add(s, name, ndim, shape, v, true));
    free(v);
}

typedef struct {
    tg_graph *g;
} graph_ctx;

static void run_graph(void *p) {
    graph_ctx *c = p;
    if (tg_graph_run(c->g, BK) != TG_OK) DIE("tg_graph_run");
}

/* ---- 1. matmul ---- */

typedef struct {
    int M, N, K;
    bool ta, tb;
    const float *a, *b;
    float *c;
} sgemm_ctx;

static void run_sgemm(void *p) {
    sgemm_ctx *s = p;
    cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
                s->M, s->N, s->K, 1.0f, s->a, s->ta ? s->M : s->K, s->b, s->tb ? s->K : s->N, 0.0f,
                s->c, s->N);
}

static void bench_matmul(const char *name, int M, int N, int K, bool ta, bool tb) {
    tg_store *st;
    CK(tg_store_new(BK, &st));
    int64_t sa[2] = {ta ? K : M, ta ? M : K}, sb[2] = {tb ? N : K, tb ? K : N};
    add_param(st, "a", 2, sa, 1);
    add_param(st, "b", 2, sb, 2);
    tg_graph *g = tg_graph_new();
    tg_graph_set_grad_enabled(g, false);
    tg_keep(tg_matmul(tg_param(g, st, "a"), tg_param(g, st, "b"), ta, tb));
    graph_ctx gc = {g};
    sgemm_ctx sc = {M,
                    N,
                    K,
                    ta,
                    tb,
                    randbuf((int64_t)M * K, 1),
                    randbuf((int64_t)K * N, 2),
                    malloc(sizeof(float) * (size_t)M * (size_t)N)};
    contender cs[2] = {{run_graph, &gc, 1, 0}, {run_sgemm, &sc, NT, 0}};
    double t[2], tbest[2];
    time_all(cs, 2, t, tbest);
    double fl = 2.0 * M * N * K * 1e-9;
    printf("  %-36s tgraph %6.1f GFLOP/s   sgemm %6.1f GFLOP/s\n", name, fl / t[0], fl / t[1]);
    verdict("matmul / raw sgemm", t[1] / t[0], tbest[1] / tbest[0], 0.9, true);
    free((void *)sc.a);
    free((void *)sc.b);
    free(sc.c);
    tg_graph_free(g);
    tg_store_free(st);
}

/* ---- 2. batched attention products ---- */

typedef struct {
    int batch, M, N, K;
    bool tb;
    int heads; /* batch = B * heads; operands laid out as the model has them */
    const float *a, *b;
    int64_t lda, ldb, sa_b, sa_h, sb_b, sb_h; /* strides per sample and per head */
    float *c;
} loop_ctx;

static void run_loop(void *p) {
    loop_ctx *s = p;
    for (int i = 0; i < s->batch; i++) {
        int bi = i / s->heads, hi = i % s->heads;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->M, s->N,
                    s->K, 1.0f, s->a + bi * s->sa_b + hi * s->sa_h, (int)s->lda,
                    s->b + bi * s->sb_b + hi * s->sb_h, (int)s->ldb, 0.0f,
                    s->c + (int64_t)i * s->M * s->N, s->N);
    }
}

/* scores: Q·Kᵀ, Q and K [B, n, h, dk] as projected, viewed [B, h, n, dk] */
static void bench_scores(const char *name, int B, int h, int n, int dk) {
    tg_store *st;
    CK(tg_store_new(BK, &st));
    int64_t s[4] = {B, n, h, dk};
    add_param(st, "q", 4, s, 3);
    add_param(st, "k", 4, s, 4);
    tg_graph *g = tg_graph_new();
    tg_graph_set_grad_enabled(g, false);
    int perm[4] = {0, 2, 1, 3};
    tg_keep(tg_matmul(tg_permute(tg_param(g, st, "q"), perm),
                      tg_permute(tg_param(g, st, "k"), perm), false, true));
    graph_ctx gc = {g};
    int64_t nq = (int64_t)B * n * h * dk;
    loop_ctx lc = {B * h,
                   n,
                   n,
                   dk,
                   true,
                   h,
                   randbuf(nq, 3),
                   randbuf(nq, 4),
                   (int64_t)h * dk,
                   (int64_t)h * dk,
                   (int64_t)n * h * dk,
                   dk,
                   (int64_t)n * h * dk,
                   dk,
                   malloc(sizeof(float) * (size_t)(B * h * n * n))};
    contender cs[2] = {{run_graph, &gc, 1, 0}, {run_loop, &lc, NT, 0}};
    double t[2], tbest[2];
    time_all(cs, 2, t, tbest);
    double fl = 2.0 * B * h * n * n * dk * 1e-9;
    printf("  %-36s tgraph %6.1f GFLOP/s   loop  %6.1f GFLOP/s\n", name, fl / t[0], fl / t[1]);
    verdict("batched matmul / loop of sgemm", t[1] / t[0], tbest[1] / tbest[0], 1.5, true);
    free((void *)lc.a);
    free((void *)lc.b);
    free(lc.c);
    tg_graph_free(g);
    tg_store_free(st);
}

/* context: P·V, P [B, h, n, n] contiguous, V [B, n, h, dk] viewed [B, h, n, dk] */
static void bench_context(const char *name, int B, int h, int n, int dk) {
    tg_store *st;
    CK(tg_store_new(BK, &st));
    int64_t sp[4] = {B, h, n, n}, sv[4] = {B, n, h, dk};
    add_param(st, "p", 4, sp, 5);
    add_param(st, "v", 4, sv, 6);
    tg_graph *g = tg_graph_new();
    tg_graph_set_grad_enabled(g, false);
    int perm[4] = {0, 2, 1, 3};
    tg_keep(tg_matmul(tg_param(g, st, "p"), tg_permute(tg_param(g, st, "v"), perm), false, false));
    graph_ctx gc = {g};
    loop_ctx lc = {B * h,
                   n,
                   dk,
                   n,
                   false,
                   h,
                   randbuf((int64_t)B * h * n * n, 5),
                   randbuf((int64_t)B * n * h * dk, 6),
                   n,
                   (int64_t)h * dk,
                   (int64_t)h * n * n,
                   (int64_t)n * n,
                   (int64_t)n * h * dk,
                   dk,
                   malloc(sizeof(float) * (size_t)(B * h * n * dk))};
    contender cs[2] = {{run_graph, &gc, 1, 0}, {run_loop, &lc, NT, 0}};
    double t[2], tbest[2];
    time_all(cs, 2, t, tbest);
    double fl = 2.0 * B * h * n * n * dk * 1e-9;
    printf("  %-36s tgraph %6.1f GFLOP/s   loop  %6.1f GFLOP/s\n", name, fl / t[0], fl / t[1]);
    verdict("batched matmul / loop of sgemm", t[1] / t[0], tbest[1] / tbest[0], 1.5, true);
    free((void *)lc.a);
    free((void *)lc.b);
    free(lc.c);
    tg_graph_free(g);
    tg_store_free(st);
}

/* ---- 3. memory-bound ops ---- */

typedef struct {
    float *a, *b, *c;
    int64_t n;
} triad_ctx;

static void run_triad(void *p) {
    triad_ctx *t = p;
    float *a = t->a, s = 1.0001f;
    const float *b = t->b, *c = t->c;
    int64_t n = t->n;
#pragma omp parallel for num_threads(NT) schedule(static)
    for (int64_t i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}

/* A triad over `bytes` (3 arrays of 4-byte floats, 12 bytes per element), and its GB/s at
 * `sec` seconds per call. */
static triad_ctx triad_new(double bytes) {
    triad_ctx tc;
    tc.n = (int64_t)(bytes / 12.0);
    tc.a = randbuf(tc.n, 7);
    tc.b = randbuf(tc.n, 8);
    tc.c = randbuf(tc.n, 9);
    return tc;
}
static double triad_gbs(const triad_ctx *tc, double sec) { return 12.0 * (double)tc->n / sec * 1e-9; }
static void triad_free(triad_ctx *tc) {
    free(tc->a);
    free(tc->b);
    free(tc->c);
}

typedef struct {
    tg_tensor *node;
} node_ctx;

static void run_node(void *p) {
    node_ctx *c = p;
    if (BK->vt->run_node(BK, c->node) != TG_OK) DIE("run_node %s", tg_op_name(c->node->op));
}

typedef enum { M_SOFTMAX, M_LAYER_NORM, M_ADD, M_MUL, M_GELU, M_RELU, M_DROPOUT } mop;

static tg_tensor *build_op(tg_graph *g, tg_store *st, mop op) {
    tg_tensor *x = tg_param(g, st, "x");
    switch (op) {
    case M_SOFTMAX:
        return tg_softmax(x);
    case M_LAYER_NORM:
        return tg_layer_norm(x, tg_param(g, st, "gamma"), tg_param(g, st, "beta"), 1e-5f);
    case M_ADD:
        return tg_add(x, tg_param(g, st, "y"));
    case M_MUL:
        return tg_mul(x, tg_param(g, st, "y"));
    case M_GELU:
        return tg_gelu(x);
    case M_RELU:
        return tg_relu(x);
    case M_DROPOUT:
        return tg_dropout(x, 0.1f);
    }
    return NULL;
}

/* Compare the op (bytes moved per call) against a triad over the same bytes. */
static void versus_triad(const char *name, contender *op, double bytes) {
    triad_ctx tc = triad_new(bytes);
    contender cs[2] = {*op, {run_triad, &tc, 1, 0}};
    double t[2], tbest[2];
    time_all(cs, 2, t, tbest);
    double gop = bytes / t[0] * 1e-9, gtr = triad_gbs(&tc, t[1]);
    printf("  %-36s tgraph %6.1f GB/s       triad %6.1f GB/s  (%.2f MB)\n", name, gop, gtr,
           bytes * 1e-6);
    verdict("op / triad", gop / gtr, (bytes / tbest[0] * 1e-9) / triad_gbs(&tc, tbest[1]), 0.5, true);
    triad_free(&tc);
}

/* Forward: a graph x -> op -> kept y, run whole. `streams`: tensors of x's size read or
 * written (softmax 2: read x, write y; add 3). */
static void bench_forward(const char *name, mop op, int ndim, const int64_t *shape, int streams) {
    tg_store *st;
    CK(tg_store_new(BK, &st));
    add_param(st, "x", ndim, shape, 10);
    add_param(st, "y", ndim, shape, 11);
    add_param(st, "gamma", 1, shape + ndim - 1, 12);
    add_param(st, "beta", 1, shape + ndim - 1, 13);
    tg_graph *g = tg_graph_new();
    tg_graph_set_grad_enabled(g, false);
    tg_tensor *y = tg_keep(build_op(g, st, op));
    graph_ctx gc = {g};
    contender c = {run_graph, &gc, 1, 0};
    versus_triad(name, &c, (double)streams * 4.0 * (double)tg_tensor_numel(y));
    tg_graph_free(g);
    tg_store_free(st);
}

/* Forward, the kernel alone: the op's node of a graph x -> op -> kept y (planner off) run
 * again and again, without the graph run's fixed cost, which dominates small ops (the 0.4 MB
 * g2p softmax) in bench_forward. */
static void bench_forward_kernel(const char *name, mop op, int ndim, const int64_t *shape, int streams) {
    tg_store *st;
    CK(tg_store_new(BK, &st));
    add_param(st, "x", ndim, shape, 10);
    add_param(st, "y", ndim, shape, 11);
    add_param(st, "gamma", 1, shape + ndim - 1, 12);
    add_param(st, "beta", 1, shape + ndim - 1, 13);
    tg_graph *g = tg_graph_new();
    tg_graph_set_grad_enabled(g, false);
    tg_graph_set_planner(g, false);
    tg_tensor *y = tg_keep(build_op(g, st, op));
    CK(tg_graph_run(g, BK));
    node_ctx nc = {y};
    contender c = {run_node, &nc, 1, 0};
    versus_triad(name, &c, (double)streams * 4.0 * (double)tg_tensor_numel(y));
    tg_graph_free(g);
    tg_store_free(st);
}

/* Backward: the kernel of the op's back node (back_op) in a forward+backward graph of
 * loss = sum(op(x) * r). */
static void bench_backward(const char *name, mop op, tg_op back_op, int ndim, const int64_t *shape,
                           int streams) {
    tg_store *st;
    CK(tg_store_new(BK, &st));
    add_param(st, "x", ndim, shape, 10);
    add_param(st, "y", ndim, shape, 11);
    add_param(st, "gamma", 1, shape + ndim - 1, 12);
    add_param(st, "beta", 1, shape + ndim - 1, 13);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *r = randbuf(n, 14);
    CK(tg_store_add(st, "r", ndim, shape, r, false));
    free(r);
    tg_graph *g = tg_graph_new();
    tg_graph_set_planner(g, false); /* keep every input of the back node intact after the run */
    tg_tensor *y = build_op(g, st, op);
    tg_tensor *loss = tg_sum_all(tg_mul(y, tg_param(g, st, "r")));
    CK(tg_backward(g, loss));
    CK(tg_graph_run(g, BK));
    tg_tensor *node = NULL;
    for (int64_t i = loss->id + 1; i < g->n && !node; i++)
        if (g->nodes[i]->op == back_op && g->nodes[i]->pos >= 0 &&
            tg__tensor_is_contiguous(g->nodes[i]))
            node = g->nodes[i];
    if (!node) DIE("no %s node in the backward of %s", tg_op_name(back_op), name);
    node_ctx nc = {node};
    contender c = {run_node, &nc, 1, 0};
    /* bytes by the size of its first input: dgamma's output is one row */
    versus_triad(name, &c, (double)streams * 4.0 * (double)tg_tensor_numel(node->src[0]));
    tg_graph_free(g);
    tg_store_free(st);
}

/* ---- 4. build + plan vs run: one encoder layer, forward + backward ---- */

static tg_tensor *lin(tg_graph *g, tg_store *s, tg_tensor *x, const char *w, const char *b) {
    return tg_add(tg_matmul(x, tg_param(g, s, w), false, true), tg_param(g, s, b));
}

static tg_graph *build_layer(tg_store *s, int B, int n, int d, int h, const float *mask) {
    tg_graph *g = tg_graph_new();
    tg_graph_set_seed(g, 5);
    int64_t s2[2] = {(int64_t)B * n, d}, s4[4] = {B, n, h, d / h}, sm[4] = {B, 1, 1, n};
    int perm[4] = {0, 2, 1, 3};
    tg_tensor *x = tg_param(g, s, "x");
    tg_tensor *q = tg_permute(tg_reshape(lin(g, s, x, "wq", "bq"), 4, s4), perm);
    tg_tensor *k = tg_permute(tg_reshape(lin(g, s, x, "wk", "bk"), 4, s4), perm);
    tg_tensor *v = tg_permute(tg_reshape(lin(g, s, x, "wv", "bv"), 4, s4), perm);
    tg_tensor *sc = tg_scale(tg_matmul(q, k, false, true), 1.0f / sqrtf((float)(d / h)));
    tg_tensor *p = tg_dropout(
        tg_softmax(tg_masked_fill(sc, tg_input(g, TG_DTYPE_F32, 4, sm, mask), -INFINITY)), 0.1f);
    tg_tensor *ctx = tg_reshape(tg_permute(tg_matmul(p, v, false, false), perm), 2, s2);
    tg_tensor *a = tg_dropout(lin(g, s, ctx, "wo", "bo"), 0.1f);
    x = tg_layer_norm(tg_add(x, a), tg_param(g, s, "g1"), tg_param(g, s, "b1"), 1e-5f);
    tg_tensor *f = lin(g, s, tg_relu(lin(g, s, x, "w1", "c1")), "w2", "c2");
    x = tg_layer_norm(tg_add(x, tg_dropout(f, 0.1f)), tg_param(g, s, "g2"), tg_param(g, s, "b2"),
                      1e-5f);
    tg_tensor *loss = tg_sum_all(tg_mul(x, tg_param(g, s, "r")));
    CK(tg_backward(g, loss));
    return g;
}

static void bench_build_plan(void) {
    const int B = 128, n = 10, d = 256, h = 4, dff = 1024;
    tg_store *s;
    CK(tg_store_new(BK, &s));
    int64_t sx[2] = {(int64_t)B * n, d}, sdd[2] = {d, d}, sd[1] = {d};
    int64_t s1[2] = {dff, d}, s2[2] = {d, dff}, sf[1] = {dff};
    add_param(s, "x", 2, sx, 20);
    const char *wn[4] = {"wq", "wk", "wv", "wo"}, *bn[4] = {"bq", "bk", "bv", "bo"};
    for (int i = 0; i < 4; i++) {
        add_param(s, wn[i], 2, sdd, 21 + (uint64_t)i);
        add_param(s, bn[i], 1, sd, 31 + (uint64_t)i);
    }
    add_param(s, "w1", 2, s1, 41);
    add_param(s, "c1", 1, sf, 42);
    add_param(s, "w2", 2, s2, 43);
    add_param(s, "c2", 1, sd, 44);
    add_param(s, "g1", 1, sd, 45);
    add_param(s, "b1", 1, sd, 46);
    add_param(s, "g2", 1, sd, 47);
    add_param(s, "b2", 1, sd, 48);
    float *mask = calloc((size_t)(B * n), sizeof *mask);
    for (int b = 0; b < B; b++)
        for (int j = n - b % 3; j < n; j++)
            mask[b * n + j] = 1.0f;
    float *r = randbuf((int64_t)B * n * d, 49);
    CK(tg_store_add(s, "r", 2, sx, r, false)); /* fixed weights of the loss sum(x * r) */
    free(r);
    enum { REPS = 15 };
    double tb[REPS], tr[REPS];
    int64_t nodes = 0;
    for (int i = 0; i < REPS + 2; i++) {
        double t0 = now();
        tg_graph *g = build_layer(s, B, n, d, h, mask);
        CK(tg_graph_plan(g, BK));
        double t1 = now();
        CK(tg_graph_run(g, BK));
        double t2 = now();
        nodes = tg_graph_node_count(g);
        tg_graph_free(g);
        if (i >= 2) { /* the first two warm the allocator's cache */
            tb[i - 2] = t1 - t0;
            tr[i - 2] = t2 - t1;
        }
    }
    double b = median(tb, REPS), rr = median(tr, REPS); /* sorted now: [0] is the best */
    printf("  encoder layer fwd+bwd (%lld nodes)      build+plan %.3f ms   run %.2f ms\n",
           (long long)nodes, b * 1e3, rr * 1e3);
    verdict("build+plan / run (%)", 100.0 * b / rr, 100.0 * tb[0] / tr[0], 2.0, false);
    free(mask);
    tg_store_free(s);
}

static void section_matmul(void) {
    printf("\n1. matmul through a graph vs one cblas_sgemm (OpenBLAS on %d threads)\n", NT);
    bench_matmul("g2p proj   1280x256 . (256x256)^T", 1280, 256, 256, false, true);
    bench_matmul("g2p ffn1   1280x256 . (1024x256)^T", 1280, 1024, 256, false, true);
    bench_matmul("g2p ffn2   1280x1024 . (256x1024)^T", 1280, 256, 1024, false, true);
    bench_matmul("g2p dX     1280x1024 . 1024x256", 1280, 256, 1024, false, false);
    bench_matmul("g2p dW     (1280x256)^T . 1280x1024", 256, 1024, 1280, true, false);
    bench_matmul("nmt proj   1024x512 . (512x512)^T", 1024, 512, 512, false, true);
    bench_matmul("nmt ffn1   1024x512 . (2048x512)^T", 1024, 2048, 512, false, true);
    bench_matmul("nmt logits 1024x512 . (8000x512)^T", 1024, 8000, 512, false, true);
}

static void section_attention(void) {
    printf("\n2. batched attention products vs a loop of cblas_sgemm (OpenBLAS on %d threads)\n",
           NT);
    bench_scores("g2p QK^T 512 x [10x64].[64x10]", 128, 4, 10, 64);
    bench_context("g2p PV   512 x [10x10].[10x64]", 128, 4, 10, 64);
    bench_scores("g2p h16 QK^T 2048 x [10x16].[16x10]", 128, 16, 10, 16);
    bench_scores("nmt QK^T 256 x [32x64].[64x32]", 32, 8, 32, 64);
    bench_context("nmt PV   256 x [32x32].[32x64]", 32, 8, 32, 64);
}

static void section_memory(void) {
    printf("\n3. memory-bound ops vs triad a = b + s*c (OpenMP, %d threads), same bytes\n", NT);
    const int64_t att_g[3] = {512, 10, 10}, att_n[3] = {256, 32, 32};
    const int64_t act_g[2] = {1280, 256}, act_n[2] = {1024, 512};
    const int64_t ff_g[2] = {1280, 1024}, ff_n[2] = {1024, 2048};
    bench_forward("softmax      g2p [512,10,10]", M_SOFTMAX, 3, att_g, 2);
    bench_forward("softmax      nmt [256,32,32]", M_SOFTMAX, 3, att_n, 2);
    bench_forward_kernel("softmax (kernel) g2p [512,10,10]", M_SOFTMAX, 3, att_g, 2);
    bench_forward_kernel("softmax (kernel) nmt [256,32,32]", M_SOFTMAX, 3, att_n, 2);
    bench_forward("layer_norm   g2p [1280,256]", M_LAYER_NORM, 2, act_g, 2);
    bench_forward("layer_norm   nmt [1024,512]", M_LAYER_NORM, 2, act_n, 2);
    bench_forward("add          g2p [1280,256]", M_ADD, 2, act_g, 3);
    bench_forward("add          nmt [1024,512]", M_ADD, 2, act_n, 3);
    bench_forward("mul          g2p [1280,256]", M_MUL, 2, act_g, 3);
    bench_forward("gelu         g2p [1280,1024]", M_GELU, 2, ff_g, 2);
    bench_forward("gelu         nmt [1024,2048]", M_GELU, 2, ff_n, 2);
    bench_forward("relu         g2p [1280,1024]", M_RELU, 2, ff_g, 2);
    bench_forward("dropout      g2p [1280,1024]", M_DROPOUT, 2, ff_g, 2);
    bench_forward("dropout      nmt [1024,512]", M_DROPOUT, 2, act_n, 2);
    printf("  backward kernels (read x or y and dy, write dx; dgamma writes one row)\n");
    bench_backward("softmax_back    g2p [512,10,10]", M_SOFTMAX, TG_OP_SOFTMAX_BACK, 3, att_g, 3);
    bench_backward("softmax_back    nmt [256,32,32]", M_SOFTMAX, TG_OP_SOFTMAX_BACK, 3, att_n, 3);
    bench_backward("layer_norm_back g2p [1280,256]", M_LAYER_NORM, TG_OP_LAYER_NORM_BACK, 2, act_g,
                   3);
    bench_backward("layer_norm_back nmt [1024,512]", M_LAYER_NORM, TG_OP_LAYER_NORM_BACK, 2, act_n,
                   3);
    bench_backward("layer_norm_gamma_back g2p [1280,256]", M_LAYER_NORM,
                   TG_OP_LAYER_NORM_GAMMA_BACK, 2, act_g, 2);
    bench_backward("layer_norm_gamma_back nmt [1024,512]", M_LAYER_NORM,
                   TG_OP_LAYER_NORM_GAMMA_BACK, 2, act_n, 2);
    bench_backward("mul (dx = dy*y) g2p [1280,256]", M_MUL, TG_OP_MUL, 2, act_g, 3);
    bench_backward("gelu_back       g2p [1280,1024]", M_GELU, TG_OP_GELU_BACK, 2, ff_g, 3);
    bench_backward("relu_back       g2p [1280,1024]", M_RELU, TG_OP_RELU_BACK, 2, ff_g, 3);
    bench_backward("dropout (back)  g2p [1280,1024]", M_DROPOUT, TG_OP_DROPOUT, 2, ff_g, 2);
}

/* ---- 6. the same kernels from memory ---- */

/* Section 3's kernels over tensors of ~128 MiB each, four times the 32 MiB L3 (STREAM's rule
 * for its arrays), so that every call streams its operands from DRAM, against a triad over the
 * same bytes: section 3 measures them at the models' own sizes, which the caches hold, and
 * there exp's arithmetic bounds softmax and GELU (docs/log/2026-12-04.md); here they meet the
 * memory's bandwidth. Bytes as in STREAM: each tensor read or written once, no write-allocate
 * counted (a kernel that reads one tensor and writes one moves 1.5x the bytes it is credited
 * with, a triad 1.33x: one bound by DRAM reads ~0.9x the triad, not 1x). */
static void section_from_memory(void) {
    printf("\n6. section 3's kernels from memory (~128 MiB per tensor) vs triad, same bytes, "
           "%d threads\n",
           NT);
    const int64_t att[3] = {327680, 10, 10}, act[2] = {131072, 256}, ff[2] = {32768, 1024};
    bench_forward_kernel("softmax (kernel) [327680,10,10]", M_SOFTMAX, 3, att, 2);
    bench_forward_kernel("layer_norm (kernel) [131072,256]", M_LAYER_NORM, 2, act, 2);
    bench_forward_kernel("gelu (kernel)    [32768,1024]", M_GELU, 2, ff, 2);
    bench_backward("softmax_back    [327680,10,10]", M_SOFTMAX, TG_OP_SOFTMAX_BACK, 3, att, 3);
    bench_backward("layer_norm_back [131072,256]", M_LAYER_NORM, TG_OP_LAYER_NORM_BACK, 2, act, 3);
    bench_backward("layer_norm_gamma_back [131072,256]", M_LAYER_NORM, TG_OP_LAYER_NORM_GAMMA_BACK,
                   2, act, 2);
    bench_backward("gelu_back       [32768,1024]", M_GELU, TG_OP_GELU_BACK, 2, ff, 3);
}

/* ---- 7. the store maths ---- */

/* A store of g2p-small's parameter shapes in its model's order (3 + 3 layers, d 256, d_ff 1024,
 * vocabularies 30 and 45: 5.55 M floats), with an Adam over it and its gradients set. */
typedef struct {
    tg_store *st;
    tg_optim *opt;
    int what; /* 0 zero_grad, 1 grad_norm, 2 Adam's step, 3 the step zeroing the gradients */
} store_ctx;

static void store_add(tg_store *st, int *k, int ndim, int64_t a, int64_t b) {
    char name[16];
    snprintf(name, sizeof name, "p%d", (*k)++);
    const int64_t shape[2] = {a, b};
    CK(tg_store_add(st, name, ndim, shape, NULL, true));
}

static tg_store *g2p_store(void) {
    tg_store *st;
    CK(tg_store_new(BK, &st));
    int k = 0;
    store_add(st, &k, 2, 30, 256);
    store_add(st, &k, 2, 45, 256);
    for (int l = 0; l < 6; l++) {
        for (int q = 0; q < (l < 3 ? 4 : 8); q++) { /* attention projections, self and cross */
            store_add(st, &k, 2, 256, 256);
            store_add(st, &k, 1, 256, 0);
        }
        store_add(st, &k, 2, 1024, 256);
        store_add(st, &k, 1, 1024, 0);
        store_add(st, &k, 2, 256, 1024);
        store_add(st, &k, 1, 256, 0);
        for (int q = 0; q < (l < 3 ? 4 : 6); q++) /* layer norms' gains and biases */
            store_add(st, &k, 1, 256, 0);
    }
    store_add(st, &k, 2, 45, 256);
    store_add(st, &k, 1, 45, 0);
    for (int64_t i = 0; i < tg_store_count(st); i++) {
        const int64_t n = tg_store_numel(st, i);
        float *g = randbuf(n, 100 + (uint64_t)i);
        CK(tg_store_write_grad(st, i, g, n));
        free(g);
    }
    return st;
}

static void run_store(void *p) {
    store_ctx *c = p;
    double norm;
    switch (c->what) {
    case 0:
        CK(tg_store_zero_grad(c->st));
        break;
    case 1:
        CK(tg_store_grad_norm(c->st, &norm));
        break;
    case 2:
        CK(tg_optim_step(c->opt, 1e-9f));
        break;
    default:
        CK(tg_optim_step_zero_grad(c->opt, 1e-9f));
    }
}

/* Bytes each must move per parameter value: zeroing writes the gradient, the norm reads it,
 * Adam reads weight, gradient and two moments and writes three of them, the step that zeroes
 * the gradients writes it as well. */
static void section_store(void) {
    printf("\n7. the store maths over g2p-small's parameters (5.55 M floats) vs triad, same bytes, "
           "%d threads\n",
           NT);
    store_ctx c = {.st = g2p_store()};
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAM);
    CK(tg_optim_new(c.st, &oc, &c.opt));
    const double n = (double)tg_store_total_numel(c.st);
    const char *names[4] = {"tg_store_zero_grad", "tg_store_grad_norm", "tg_optim_step (Adam)",
                            "tg_optim_step_zero_grad (Adam)"};
    const double bytes[4] = {4, 4, 28, 32};
    store_ctx ctx[4];
    for (int w = 0; w < 4; w++) {
        ctx[w] = c;
        ctx[w].what = w;
        contender op = {run_store, &ctx[w], 1, 0};
        versus_triad(names[w], &op, bytes[w] * n);
    }
    tg_optim_free(c.opt);
    tg_store_free(c.st);
}

/* ---- 5. fused chains ---- */

typedef enum { C_FFN, C_RESIDUAL, C_MASKS, C_FFN_BACK } chain_kind;

/* The chains a Transformer's training graph forms, on x (and the store's y, bias, h):
 * FFN: h = x + bias (kept: GELU's gradient reads it), y = dropout(gelu(h)); residual:
 * y = x + dropout(y'); masks: y = masked_fill(masked_fill(x / 8, pad), causal); FFN backward:
 * dx = gelu_back(h, dropout(dy)). */
static tg_tensor *build_chain(tg_graph *g, tg_store *st, chain_kind k, int64_t B, int64_t n) {
    tg_tensor *x = tg_param(g, st, "x");
    switch (k) {
    case C_FFN:
        return tg_dropout(tg_gelu(tg_keep(tg_add(x, tg_param(g, st, "bias")))), 0.1f);
    case C_RESIDUAL:
        return tg_add(x, tg_dropout(tg_param(g, st, "y"), 0.1f));
    case C_MASKS: {
        int32_t *pad = calloc((size_t)(B * n), sizeof *pad);
        for (int64_t i = 0; i < B * n; i++)
            pad[i] = i % n >= n - i / n % 4;
        tg_tensor *pm = tg_input(g, TG_DTYPE_I32, 4, (int64_t[]){B, 1, 1, n}, pad);
        free(pad);
        tg_tensor *l = tg_masked_fill(tg_scale(x, 0.125f), pm, -INFINITY);
        return tg_masked_fill(l, tg_causal_mask(g, n, n), -INFINITY);
    }
    case C_FFN_BACK:
        return tg__op_unary(TG_OP_GELU_BACK, tg_param(g, st, "h"), tg_dropout(x, 0.1f));
    }
    return NULL;
}

/* `fused_streams`: tensors of x's size the fused chain reads or writes (the unfused graph moves
 * more: every intermediate is written and read back). */
static void bench_chain(const char *name, chain_kind k, int ndim, const int64_t *shape,
                        int fused_streams) {
    tg_store *st;
    CK(tg_store_new(BK, &st));
    add_param(st, "x", ndim, shape, 10);
    add_param(st, "y", ndim, shape, 11);
    add_param(st, "h", ndim, shape, 12);
    add_param(st, "bias", 1, shape + ndim - 1, 13);
    tg_graph *g[2];
    graph_ctx gc[2];
    for (int f = 0; f < 2; f++) {
        g[f] = tg_graph_new();
        tg_graph_set_grad_enabled(g[f], false);
        tg_graph_set_fusion(g[f], f == 0);
        tg_keep(build_chain(g[f], st, k, shape[0], shape[ndim - 1]));
        gc[f].g = g[f];
    }
    double bytes = (double)fused_streams * 4.0 * (double)tg__tensor_numel(ndim, shape);
    triad_ctx tc = triad_new(bytes);
    contender cs[3] = {
        {run_graph, &gc[0], 1, 0}, {run_graph, &gc[1], 1, 0}, {run_triad, &tc, 1, 0}};
    double t[3], tb[3];
    time_all(cs, 3, t, tb);
    double gfu = bytes / t[0] * 1e-9, gtr = triad_gbs(&tc, t[2]);
    printf("  %-36s fused %7.1f us  unfused %7.1f us  fused %6.1f GB/s  triad %6.1f GB/s\n", name,
           1e6 * t[0], 1e6 * t[1], gfu, gtr);
    verdict("fused / unfused time", t[0] / t[1], tb[0] / tb[1], 1.0, false);
    verdict("fused / triad bandwidth", gfu / gtr, (bytes / tb[0] * 1e-9) / triad_gbs(&tc, tb[2]),
            0.5, true);
    for (int f = 0; f < 2; f++)
        tg_graph_free(g[f]);
    tg_store_free(st);
    triad_free(&tc);
}

static void section_chains(void) {
    printf("\n5. fused elementwise chains vs the same graph unfused, and vs triad (%d threads)\n",
           NT);
    const int64_t ff_g[2] = {1280, 1024}, ff_n[2] = {1024, 2048}, act_g[2] = {1280, 256};
    const int64_t act_n[2] = {1024, 512}, att_n[4] = {32, 8, 32, 32}, att_g[4] = {128, 4, 10, 10};
    bench_chain("bias+gelu+dropout  g2p [1280,1024]", C_FFN, 2, ff_g, 3);
    bench_chain("bias+gelu+dropout  nmt [1024,2048]", C_FFN, 2, ff_n, 3);
    bench_chain("dropout+residual   g2p [1280,256]", C_RESIDUAL, 2, act_g, 3);
    bench_chain("dropout+residual   nmt [1024,512]", C_RESIDUAL, 2, act_n, 3);
    bench_chain("scale+pad+causal   g2p [128,4,10,10]", C_MASKS, 4, att_g, 2);
    bench_chain("scale+pad+causal   nmt [32,8,32,32]", C_MASKS, 4, att_n, 2);
    bench_chain("dropout+gelu_back  g2p [1280,1024]", C_FFN_BACK, 2, ff_g, 3);
    bench_chain("dropout+gelu_back  nmt [1024,2048]", C_FFN_BACK, 2, ff_n, 3);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            NT = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            BLOCKS = 3, SAMPLES = 3;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            ONLY = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_ops [--threads N] [--quick] [--only 1|2|3|4|5|6|7]\n");
            return 2;
        }
    }
    if (NT < 1) NT = 1;
    CK(tg_backend_cpu_new(NT, &BK));
    printf("bench_ops: %d threads for tgraph (its thread team, OpenBLAS on 1) and for each reference\n", NT);
    if (!ONLY || ONLY == 1) section_matmul();
    if (!ONLY || ONLY == 2) section_attention();
    if (!ONLY || ONLY == 3) section_memory();
    if (!ONLY || ONLY == 4) {
        printf("\n4. graph building + planning vs running (g2p-small encoder layer, batch 128 x "
               "10)\n");
        bench_build_plan();
    }
    if (!ONLY || ONLY == 5) section_chains();
    if (!ONLY || ONLY == 6) section_from_memory();
    if (!ONLY || ONLY == 7) section_store();
    printf("\n%d of %d comparisons meet their target\n", npass, npass + nfail);
    tg_backend_free(BK);
    return 0;
}
