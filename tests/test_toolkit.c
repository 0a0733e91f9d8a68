/* The model writer's toolkit: tg_paramf, positions and masks, argmax / top-k / seeded sampling,
 * initialisers, the public gradient checker, optimizer parameter groups and the key/value
 * cache for incremental decoding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"
#include "tg_check.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        tg_status st_ = (call);                                                                    \
        ck_assert_msg(st_ == TG_OK, "%s failed: %s", #call, tg_error_message());                   \
    } while (0)

static tg_backend *B;
static void setup(void) { ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK); }
static void teardown(void) { tg_backend_free(B); }

/* Run g and read the kept tensor t (n floats or ints) into dst. */
static void run_read(tg_graph *g, tg_tensor *t, void *dst, size_t bytes) {
    ck_assert_ptr_nonnull(t);
    CK(tg_graph_run(g, B));
    CK(tg_tensor_read(t, dst, bytes));
}

START_TEST(test_arange_and_masks) {
    tg_graph *g = tg_graph_new();
    tg_tensor *a = tg_keep(tg_arange(g, 3, 4));
    tg_tensor *sq = tg_keep(tg_causal_mask(g, 3, 3));
    tg_tensor *tail = tg_keep(tg_causal_mask(g, 2, 4));
    int32_t ids[6] = {5, 6, 0, 7, 0, 0};
    tg_tensor *pad = tg_keep(tg_padding_mask(g, ids, 2, 3, 0));
    int64_t s[TG_MAX_DIMS];
    ck_assert_int_eq(tg_tensor_shape(pad, s), 4);
    ck_assert(s[0] == 2 && s[1] == 1 && s[2] == 1 && s[3] == 3);
    int32_t av[4];
    float m1[9], m2[8], m3[6];
    run_read(g, a, av, sizeof av);
    run_read(g, sq, m1, sizeof m1);
    run_read(g, tail, m2, sizeof m2);
    run_read(g, pad, m3, sizeof m3);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(av[i], 3 + i);
    static const float e1[9] = {0, 1, 1, 0, 0, 1, 0, 0, 0};
    static const float e2[8] = {0, 0, 0, 1, 0, 0, 0, 0}; /* queries at positions 2 and 3 of 4 */
    static const float e3[6] = {0, 0, 1, 0, 1, 1};
    ck_assert(!memcmp(m1, e1, sizeof e1));
    ck_assert(!memcmp(m2, e2, sizeof e2));
    ck_assert(!memcmp(m3, e3, sizeof e3));
    ck_assert_ptr_null(tg_causal_mask(g, 4, 2));
    const char *msg;
    ck_assert_int_eq(tg_graph_status(g, &msg), TG_ERR_SHAPE);
    tg_assert_msg_has(msg, "tg_causal_mask: 4 queries over 2 keys");
    tg_graph_free(g);
}
END_TEST

START_TEST(test_paramf) {
    tg_store *s;
    CK(tg_store_new(B, &s));
    int64_t shape[1] = {2};
    CK(tg_store_add(s, "layers.3.w", 1, shape, NULL, true));
    tg_graph *g = tg_graph_new();
    tg_tensor *p = tg_paramf(g, s, "layers.%d.%s", 3, "w");
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(tg_tensor_name(p), "layers.3.w");
    ck_assert_ptr_null(tg_paramf(g, s, "layers.%d.w", 4));
    const char *msg;
    ck_assert_int_eq(tg_graph_status(g, &msg), TG_ERR_NOT_FOUND);
    tg_assert_msg_has(msg, "no parameter 'layers.4.w'");
    tg_graph_free(g);
    g = tg_graph_new();
    ck_assert_ptr_null(tg_paramf(g, s, "%0200d", 1));
    ck_assert_int_eq(tg_graph_status(g, &msg), TG_ERR_INVALID);
    tg_assert_msg_has(msg, "longer than 127 bytes");
    tg_graph_free(g);
    tg_store_free(s);
}
END_TEST

START_TEST(test_argmax_top_k) {
    const float x[6] = {0.5f, 3.0f, -1.0f, 3.0f, NAN, 2.0f};
    ck_assert_int_eq(tg_argmax(x, 6), 1); /* first of the tie, NaN never wins */
    ck_assert_int_eq(tg_argmax(x, 0), -1);
    int64_t idx[6];
    ck_assert_int_eq(tg_top_k(x, 6, 3, idx), 3);
    ck_assert(idx[0] == 1 && idx[1] == 3 && idx[2] == 5);
    ck_assert_int_eq(tg_top_k(x, 6, 10, idx), 6);
    ck_assert(idx[3] == 0 && idx[4] == 2 && idx[5] == 4); /* NaN last */
    ck_assert_int_eq(tg_top_k(x, 6, 0, idx), 0);
}
END_TEST

/* frequencies of N draws against the probabilities the options imply */
static void draw_freq(const float *lg, int n, const tg_sample_options *o, uint64_t seed, double *f, int N) {
    tg_rng r;
    tg_rng_init(&r, seed);
    for (int i = 0; i < n; i++) f[i] = 0;
    for (int k = 0; k < N; k++) {
        int64_t t;
        CK(tg_sample(lg, n, o, &r, &t));
        ck_assert(t >= 0 && t < n);
        f[t] += 1.0 / N;
    }
}

START_TEST(test_sample) {
    /* probabilities 0.5, 0.25, 0.125, 0.125 and a token at -inf */
    const float lg[5] = {logf(4), logf(2), 0.0f, 0.0f, -INFINITY};
    double f[5];
    enum { N = 40000 };
    tg_sample_options o = tg_sample_options_default();
    draw_freq(lg, 5, &o, 7, f, N);
    const double p[5] = {0.5, 0.25, 0.125, 0.125, 0};
    for (int i = 0; i < 5; i++) tg_assert_close(f[i], p[i], 0.012, 0.0);
    ck_assert(f[4] == 0.0);
    /* temperature 0.5 squares the odds: 16:4:1:1 */
    o.temperature = 0.5f;
    draw_freq(lg, 5, &o, 8, f, N);
    tg_assert_close(f[0], 16.0 / 22, 0.012, 0.0);
    tg_assert_close(f[1], 4.0 / 22, 0.012, 0.0);
    /* top-k 2: 2:1 */
    o = tg_sample_options_default();
    o.top_k = 2;
    draw_freq(lg, 5, &o, 9, f, N);
    tg_assert_close(f[0], 2.0 / 3, 0.012, 0.0);
    ck_assert(f[2] == 0.0 && f[3] == 0.0);
    /* top-p 0.7: the nucleus is {0, 1} (mass 0.75 >= 0.7), renormalised 2:1 */
    o = tg_sample_options_default();
    o.top_p = 0.7f;
    draw_freq(lg, 5, &o, 10, f, N);
    tg_assert_close(f[0], 2.0 / 3, 0.012, 0.0);
    ck_assert(f[2] == 0.0 && f[3] == 0.0);
    /* top-p below the largest probability keeps the most likely token only */
    o.top_p = 0.1f;
    draw_freq(lg, 5, &o, 11, f, 100);
    tg_assert_close(f[0], 1.0, 1e-9, 0.0);
    /* greedy draws nothing; the same seed repeats the same sequence */
    o = tg_sample_options_default();
    o.temperature = 0.0f;
    int64_t t;
    CK(tg_sample(lg, 5, &o, NULL, &t));
    ck_assert_int_eq(t, 0);
    tg_rng r1, r2;
    tg_rng_init(&r1, 3);
    tg_rng_init(&r2, 3);
    o = tg_sample_options_default();
    for (int k = 0; k < 50; k++) {
        int64_t a, b;
        CK(tg_sample(lg, 5, &o, &r1, &a));
        CK(tg_sample(lg, 5, &o, &r2, &b));
        ck_assert_int_eq(a, b);
    }
    /* errors */
    o.top_p = 0.0f;
    ck_assert_int_eq(tg_sample(lg, 5, &o, &r1, &t), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "top_p 0");
    const float dead[2] = {-INFINITY, -INFINITY};
    o = tg_sample_options_default();
    ck_assert_int_eq(tg_sample(dead, 2, &o, &r1, &t), TG_ERR_NUMERIC);
}
END_TEST

START_TEST(test_initializers) {
    tg_store *s;
    CK(tg_store_new(B, &s));
    int64_t big[2] = {200, 300}, vec[1] = {1000};
    CK(tg_store_add(s, "w", 2, big, NULL, true));
    CK(tg_store_add(s, "b", 1, vec, NULL, true));
    tg_rng r;
    tg_rng_init(&r, 5);
    float *w = malloc(60000 * sizeof *w);
    /* N(1, 0.02^2): sample moments of 60,000 draws */
    CK(tg_init_normal(s, "w", 1.0, 0.02, &r));
    CK(tg_store_read(s, 0, w, 60000));
    double m = 0, v = 0;
    for (int i = 0; i < 60000; i++) m += w[i] / 60000.0;
    for (int i = 0; i < 60000; i++) v += (w[i] - m) * (w[i] - m) / 60000.0;
    tg_assert_close(m, 1.0, 1e-3, 0);
    tg_assert_close(sqrt(v), 0.02, 0, 0.02);
    /* scaled: the same values times 0.5 */
    CK(tg_init_scale(s, "w", 0.5));
    float w2[10];
    float *all = malloc(60000 * sizeof *all);
    CK(tg_store_read(s, 0, all, 60000));
    for (int i = 0; i < 10; i++) w2[i] = all[i];
    for (int i = 0; i < 10; i++) tg_assert_close(w2[i], 0.5 * w[i], 0, 1e-6);
    /* Xavier uniform: a = sqrt(6 / (300 + 200)), values fill (-a, a) */
    CK(tg_init_xavier_uniform(s, "w", 1.0, &r));
    CK(tg_store_read(s, 0, w, 60000));
    double a = sqrt(6.0 / 500.0), lo = 1, hi = -1;
    for (int i = 0; i < 60000; i++) {
        lo = fmin(lo, w[i]);
        hi = fmax(hi, w[i]);
    }
    ck_assert(lo >= -a && hi < a && lo < -0.99 * a && hi > 0.99 * a);
    /* Xavier normal: std = sqrt(2 / 500) */
    CK(tg_init_xavier_normal(s, "w", 2.0, &r));
    CK(tg_store_read(s, 0, w, 60000));
    v = 0;
    for (int i = 0; i < 60000; i++) v += (double)w[i] * w[i] / 60000.0;
    tg_assert_close(sqrt(v), 2.0 * sqrt(2.0 / 500.0), 0, 0.02);
    CK(tg_init_uniform(s, "b", -3.0, -2.0, &r));
    CK(tg_store_read(s, 1, w, 1000));
    for (int i = 0; i < 1000; i++) ck_assert(w[i] >= -3.0f && w[i] < -2.0f);
    CK(tg_init_constant(s, "b", 1.0f));
    CK(tg_store_read(s, 1, w, 1000));
    for (int i = 0; i < 1000; i++) ck_assert(w[i] == 1.0f);
    /* the same seed gives the same values */
    tg_rng_init(&r, 9);
    CK(tg_init_normal(s, "b", 0, 1, &r));
    CK(tg_store_read(s, 1, w, 1000));
    tg_rng_init(&r, 9);
    CK(tg_init_normal(s, "b", 0, 1, &r));
    CK(tg_store_read(s, 1, all, 1000));
    ck_assert(!memcmp(w, all, 1000 * sizeof *w));
    ck_assert_int_eq(tg_init_normal(s, "nope", 0, 1, &r), TG_ERR_NOT_FOUND);
    tg_assert_msg_has(tg_error_message(), "no parameter 'nope'");
    ck_assert_int_eq(tg_init_normal(s, "b", 0, -1, &r), TG_ERR_INVALID);
    free(w);
    free(all);
    tg_store_free(s);
}
END_TEST

/* A user layer: y = LN(tanh(x W^T + b)) * x2, with W, b and the norm's gain in a store. */
static tg_tensor *user_layer(tg_graph *g, tg_tensor **x, void *ctx) {
    tg_store *s = ctx;
    tg_tensor *h = tg_add(tg_matmul(x[0], tg_param(g, s, "fc.weight"), false, true), tg_param(g, s, "fc.bias"));
    return tg_mul(tg_layer_norm(tg_tanh(h), tg_param(g, s, "norm.weight"), NULL, 1e-5f), x[1]);
}

START_TEST(test_gradcheck_public) {
    tg_store *s;
    CK(tg_store_new(B, &s));
    int64_t ws[2] = {4, 3}, bs[1] = {4};
    CK(tg_store_add(s, "fc.weight", 2, ws, NULL, true));
    CK(tg_store_add(s, "fc.bias", 1, bs, NULL, true));
    CK(tg_store_add(s, "norm.weight", 1, bs, NULL, true));
    CK(tg_store_add(s, "frozen", 1, bs, NULL, false));
    tg_rng r;
    tg_rng_init(&r, 1);
    CK(tg_init_xavier_uniform(s, "fc.weight", 1.0, &r));
    CK(tg_init_normal(s, "fc.bias", 0.0, 0.5, &r));
    CK(tg_init_normal(s, "norm.weight", 1.0, 0.3, &r));
    float x0[6], x1[8];
    for (int i = 0; i < 6; i++) x0[i] = (float)tg_rng_normal(&r);
    for (int i = 0; i < 8; i++) x1[i] = (float)tg_rng_normal(&r);
    tg_gradcheck_input in[2] = {{2, {2, 3}, x0}, {2, {2, 4}, x1}};
    tg_gradcheck_options o = tg_gradcheck_options_default();
    o.store = s;
    tg_gradcheck_result res;
    CK(tg_gradcheck(user_layer, s, 2, in, B, &o, &res));
    ck_assert_int_eq(res.checked, 6 + 8 + 12 + 4 + 4); /* the frozen parameter is not checked */
    ck_assert(res.worst <= 1.0 && res.worst >= 0.0);
    ck_assert(strlen(res.where) > 0);
    /* values are restored */
    float w[12], w0[12];
    CK(tg_store_read(s, 0, w, 12));
    tg_rng_init(&r, 1);
    CK(tg_init_xavier_uniform(s, "fc.weight", 1.0, &r));
    CK(tg_store_read(s, 0, w0, 12));
    ck_assert(!memcmp(w, w0, sizeof w));
    /* a tolerance nothing meets: the worst entry is named */
    o.atol = 1e-12;
    o.rtol = 1e-12;
    ck_assert_int_eq(tg_gradcheck(user_layer, s, 2, in, B, &o, &res), TG_ERR_NUMERIC);
    tg_assert_msg_has(tg_error_message(), res.where);
    tg_assert_msg_has(tg_error_message(), "entries checked");
    ck_assert(res.worst > 1.0);
    /* a build error is reported as such */
    in[1].ndim = 1; /* the same 8 values as [8]: does not broadcast against [2, 4] */
    in[1].shape[0] = 8;
    o = tg_gradcheck_options_default();
    ck_assert_int_eq(tg_gradcheck(user_layer, s, 2, in, B, &o, &res), TG_ERR_SHAPE);
    tg_assert_msg_has(tg_error_message(), "tg_gradcheck: build");
    tg_store_free(s);
}
END_TEST

/* SGD without momentum and zero gradients: only weight decay moves a parameter,
 * w <- w - lr * lr_scale * wd * w, so the groups are visible exactly. */
START_TEST(test_optim_groups) {
    tg_store *s;
    CK(tg_store_new(B, &s));
    int64_t ms[2] = {2, 2}, vs[1] = {2};
    const float one[4] = {1, 1, 1, 1};
    CK(tg_store_add(s, "layers.0.fc.weight", 2, ms, one, true));
    CK(tg_store_add(s, "layers.0.fc.bias", 1, vs, one, true));
    CK(tg_store_add(s, "layers.0.norm.weight", 1, vs, one, true));
    CK(tg_store_add(s, "embed.weight", 2, ms, one, true));
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_SGD);
    c.momentum = 0.0f;
    c.weight_decay = 0.5f;
    tg_optim *o;
    CK(tg_optim_new(s, &c, &o));
    int64_t k;
    CK(tg_optim_no_decay_on_vectors(o, &k));
    ck_assert_int_eq(k, 2);
    CK(tg_optim_set_group(o, "embed.*", 0.5f, 2.0f, &k));
    ck_assert_int_eq(k, 1);
    CK(tg_optim_set_group(o, "*.nothing", 0.0f, 1.0f, &k));
    ck_assert_int_eq(k, 0);
    float wd, ls;
    CK(tg_optim_group_of(o, 1, &wd, &ls));
    ck_assert(wd == 0.0f && ls == 1.0f);
    CK(tg_store_zero_grad(s));
    CK(tg_optim_step(o, 0.1f));
    float v[4];
    CK(tg_store_read(s, 0, v, 4));
    tg_assert_close(v[0], 1.0 - 0.1 * 0.5, 0, 1e-6); /* decayed */
    CK(tg_store_read(s, 1, v, 2));
    ck_assert(v[0] == 1.0f && v[1] == 1.0f);         /* bias spared */
    CK(tg_store_read(s, 2, v, 2));
    ck_assert(v[0] == 1.0f);                         /* norm gain spared */
    CK(tg_store_read(s, 3, v, 4));
    tg_assert_close(v[0], 1.0 - 0.1 * 2.0 * 0.5, 0, 1e-6); /* twice the rate */
    ck_assert_int_eq(tg_optim_set_group(o, "x", -1.0f, 1.0f, NULL), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "weight decay -1");
    tg_optim_free(o);
    /* AdamW: decoupled decay w -= lr * wd * w on the matrix only, after no_decay_on_vectors */
    c = tg_optim_defaults(TG_OPTIM_ADAMW);
    c.weight_decay = 0.1f;
    CK(tg_optim_new(s, &c, &o));
    CK(tg_optim_no_decay_on_vectors(o, NULL));
    CK(tg_store_read(s, 1, v, 2));
    float b0 = v[0];
    CK(tg_optim_step(o, 0.01f));
    CK(tg_store_read(s, 1, v, 2));
    ck_assert(v[0] == b0);
    tg_optim_free(o);
    tg_store_free(s);
}
END_TEST

/* one causal attention of x over itself, o = softmax(q k^T / 2 + causal) v with q = k = v = x
 * rows [1, n, 4], the n queries the last of nk = len + n positions */
static tg_tensor *toy_attention(tg_graph *g, tg_tensor *q, tg_tensor *k, tg_tensor *v) {
    int64_t n = tg_tensor_dim(q, 1), nk = tg_tensor_dim(k, 1);
    tg_tensor *s = tg_scale(tg_matmul(q, k, false, true), 0.5f);
    s = tg_masked_fill(s, tg_causal_mask(g, n, nk), -INFINITY);
    return tg_matmul(tg_softmax(s), v, false, false);
}

/* incremental decoding with the cache (steps of 1, 2 and 1 positions) = the full pass */
START_TEST(test_kv_cache) {
    enum { T = 4, W = 4 };
    float x[2][T * W]; /* two rows (sequences) */
    tg_rng r;
    tg_rng_init(&r, 3);
    for (int i = 0; i < 2 * T * W; i++) x[i / (T * W)][i % (T * W)] = (float)tg_rng_normal(&r);
    tg_graph *g = tg_graph_new();
    int64_t s3[3] = {2, T, W};
    tg_tensor *xs = tg_input(g, TG_DTYPE_F32, 3, s3, x);
    tg_tensor *full = tg_keep(toy_attention(g, xs, xs, xs));
    float want[2 * T * W], got[2 * T * W];
    run_read(g, full, want, sizeof want);
    tg_graph_free(g);
    tg_kv_cache *c;
    CK(tg_kv_cache_new(B, 1, 2, T, W, &c));
    static const int steps[3] = {1, 2, 1};
    int64_t at = 0;
    for (int st = 0; st < 3; st++) {
        int64_t n = steps[st], sn[3] = {2, n, W};
        float xn[2 * T * W];
        for (int b = 0; b < 2; b++)
            for (int64_t i = 0; i < n * W; i++) xn[b * n * W + i] = x[b][at * W + i];
        g = tg_graph_new();
        tg_graph_set_grad_enabled(g, false);
        tg_tensor *q = tg_input(g, TG_DTYPE_F32, 3, sn, xn);
        tg_tensor *k = tg_kv_cache_extend(g, c, 0, 0, q), *v = tg_kv_cache_extend(g, c, 0, 1, q);
        ck_assert_int_eq(tg_tensor_dim(k, 1), at + n);
        tg_tensor *o = tg_keep(toy_attention(g, q, k, v));
        float part[2 * T * W];
        run_read(g, o, part, (size_t)(2 * n * W) * sizeof *part);
        CK(tg_kv_cache_commit(c));
        tg_graph_free(g);
        for (int b = 0; b < 2; b++)
            for (int64_t i = 0; i < n * W; i++) got[b * T * W + at * W + i] = part[b * n * W + i];
        at += n;
        ck_assert_int_eq(tg_kv_cache_len(c), at);
    }
    for (int i = 0; i < 2 * T * W; i++) tg_assert_close(got[i], want[i], 1e-6, 1e-5);
    /* full: one more position is an error on the graph; extending twice too */
    g = tg_graph_new();
    int64_t s1[3] = {2, 1, W};
    tg_tensor *one = tg_input(g, TG_DTYPE_F32, 3, s1, x[0]);
    ck_assert_ptr_null(tg_kv_cache_extend(g, c, 0, 0, one));
    const char *msg;
    ck_assert_int_eq(tg_graph_status(g, &msg), TG_ERR_INVALID);
    tg_assert_msg_has(msg, "4 cached + 1 new positions exceed max_len 4");
    tg_graph_free(g);
    tg_kv_cache_reset(c);
    g = tg_graph_new();
    one = tg_input(g, TG_DTYPE_F32, 3, s1, x[0]);
    ck_assert_ptr_nonnull(tg_kv_cache_extend(g, c, 0, 0, one));
    ck_assert_ptr_null(tg_kv_cache_extend(g, c, 0, 0, one));
    ck_assert_int_eq(tg_graph_status(g, &msg), TG_ERR_INVALID);
    tg_assert_msg_has(msg, "appended twice in one step");
    tg_graph_free(g);
    tg_kv_cache_free(c);
}
END_TEST

/* Rows [rows, n, W] whose every value says where it was made: 1000 * step + 10 * row + position
 * within the step, plus channel / 100. */
static void kv_rows(float *x, int step, int64_t rows, int64_t n, int64_t W) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t w = 0; w < W; w++)
                x[(r * n + j) * W + w] = (float)(1000 * step + 10 * r + j) + (float)w / 100.0f;
}

/* Beam search's use of the cache: steps of 2, 2, 1 and 3 positions whose rows are reordered by
 * parents (rows fewer, one row continued twice, then all rows again), read back with
 * tg_kv_cache_past (each row's ancestors' rows, exactly) and with tg_kv_cache_extend. */
START_TEST(test_kv_cache_reorder) {
    enum { ROWS = 3, T = 8, W = 2 };
    tg_kv_cache *c;
    CK(tg_kv_cache_new(B, 2, ROWS, T, W, &c));
    ck_assert_int_eq(tg_kv_cache_rows(c), ROWS);
    float want[ROWS][T * W], next[ROWS][T * W]; /* each row's expected history */
    static const int n_of[4] = {2, 2, 1, 3}, rows_of[4] = {3, 2, 3, 3};
    static const int32_t parents[4][ROWS] = {{0, 1, 2}, {2, 0, 0}, {1, 1, 0}, {2, 1, 0}};
    int64_t len = 0;
    for (int step = 0; step < 4; step++) {
        const int64_t R = rows_of[step], n = n_of[step];
        CK(tg_kv_cache_reorder(c, R, parents[step]));
        ck_assert_int_eq(tg_kv_cache_rows(c), R);
        for (int64_t r = 0; r < R; r++) memcpy(next[r], want[parents[step][r]], (size_t)(len * W) * sizeof(float));
        float x[ROWS * 3 * W];
        kv_rows(x, step, R, n, W);
        tg_graph *g = tg_graph_new();
        int64_t sx[3] = {R, n, W};
        tg_tensor *xt = tg_input(g, TG_DTYPE_F32, 3, sx, x);
        tg_tensor *past = tg_keep(tg_kv_cache_past(g, c, 0, 0));
        tg_tensor *kept = tg_kv_cache_append(g, c, 0, 0, xt);
        ck_assert_ptr_eq(kept, xt);
        tg_tensor *all = tg_keep(tg_kv_cache_extend(g, c, 1, 1, xt)); /* layer 1's values */
        if (len == 0) {
            ck_assert_ptr_null(past);
            ck_assert_int_eq(tg_graph_status(g, NULL), TG_OK); /* nothing cached is no error */
            ck_assert_ptr_eq(all, xt);
        } else {
            ck_assert_int_eq(tg_tensor_dim(past, 0), R);
            ck_assert_int_eq(tg_tensor_dim(past, 1), len);
        }
        ck_assert_int_eq(tg_tensor_dim(all, 1), len + n);
        CK(tg_graph_run(g, B));
        float got[ROWS * T * W];
        if (len > 0) {
            CK(tg_tensor_read(past, got, (size_t)(R * len * W) * sizeof *got));
            for (int64_t r = 0; r < R; r++)
                for (int64_t i = 0; i < len * W; i++)
                    ck_assert_msg(got[r * len * W + i] == next[r][i], "step %d row %lld value %lld: %g, want %g", step,
                                  (long long)r, (long long)i, got[r * len * W + i], next[r][i]);
        }
        CK(tg_tensor_read(all, got, (size_t)(R * (len + n) * W) * sizeof *got));
        for (int64_t r = 0; r < R; r++) {
            memcpy(next[r] + len * W, x + r * n * W, (size_t)(n * W) * sizeof(float));
            for (int64_t i = 0; i < (len + n) * W; i++) ck_assert_float_eq(got[r * (len + n) * W + i], next[r][i]);
        }
        CK(tg_kv_cache_commit(c));
        tg_graph_free(g);
        len += n;
        ck_assert_int_eq(tg_kv_cache_len(c), len);
        memcpy(want, next, sizeof want);
    }
    tg_kv_cache_free(c);
}
END_TEST

/* tg_kv_cache_reorder's arguments, and a step abandoned (appended to, never committed) is
 * forgotten by the next reorder */
START_TEST(test_kv_cache_reorder_errors) {
    tg_kv_cache *c;
    CK(tg_kv_cache_new(B, 1, 2, 4, 2, &c));
    TG_EXPECT_STATUS(tg_kv_cache_reorder(c, 0, NULL), TG_ERR_INVALID, "0 rows (1..2");
    TG_EXPECT_STATUS(tg_kv_cache_reorder(c, 3, NULL), TG_ERR_INVALID, "3 rows (1..2");
    const int32_t bad[2] = {0, 2}, one[1] = {1}, two[2] = {0, 0};
    TG_EXPECT_STATUS(tg_kv_cache_reorder(c, 2, bad), TG_ERR_INVALID, "row 1: parent 2 outside [0, 2)");
    TG_EXPECT_STATUS(tg_kv_cache_reorder(NULL, 1, NULL), TG_ERR_INVALID, "cache is NULL");
    float x[4] = {1, 2, 3, 4};
    int64_t s1[3] = {1, 1, 2}, s2[3] = {2, 1, 2};
    CK(tg_kv_cache_reorder(c, 1, one));
    tg_graph *g = tg_graph_new();
    ck_assert_ptr_null(tg_kv_cache_append(g, c, 0, 0, tg_input(g, TG_DTYPE_F32, 3, s2, x))); /* the step has 1 row */
    const char *msg;
    ck_assert_int_eq(tg_graph_status(g, &msg), TG_ERR_SHAPE);
    tg_assert_msg_has(msg, "the step has [1, n, 2] f32");
    tg_graph_free(g);
    g = tg_graph_new();
    ck_assert_ptr_nonnull(tg_kv_cache_append(g, c, 0, 0, tg_input(g, TG_DTYPE_F32, 3, s1, x)));
    tg_graph_free(g); /* abandoned: never run, never committed */
    CK(tg_kv_cache_reorder(c, 1, one));
    g = tg_graph_new();
    tg_tensor *k = tg_kv_cache_append(g, c, 0, 0, tg_input(g, TG_DTYPE_F32, 3, s1, x));
    ck_assert_ptr_nonnull(k);
    CK(tg_graph_run(g, B));
    CK(tg_kv_cache_commit(c));
    tg_graph_free(g);
    ck_assert_int_eq(tg_kv_cache_len(c), 1);
    ck_assert_int_eq(tg_kv_cache_rows(c), 1);
    /* one committed row: without parents a step cannot have two */
    TG_EXPECT_STATUS(tg_kv_cache_reorder(c, 2, NULL), TG_ERR_INVALID, "2 rows continue 1 without parents");
    CK(tg_kv_cache_reorder(c, 2, two));
    g = tg_graph_new();
    tg_tensor *p = tg_keep(tg_kv_cache_past(g, c, 0, 0));
    CK(tg_graph_run(g, B));
    float got[4];
    CK(tg_tensor_read(p, got, sizeof got));
    for (int i = 0; i < 4; i++) ck_assert_float_eq(got[i], x[i % 2]);
    tg_graph_free(g);
    g = tg_graph_new();
    ck_assert_ptr_null(tg_kv_cache_past(g, c, 1, 0));
    ck_assert_int_eq(tg_graph_status(g, &msg), TG_ERR_INVALID);
    tg_assert_msg_has(msg, "layer 1 / table 0 outside 1 layers");
    tg_graph_free(g);
    tg_kv_cache_reset(c);
    ck_assert_int_eq(tg_kv_cache_len(c), 0);
    ck_assert_int_eq(tg_kv_cache_rows(c), 2);
    tg_kv_cache_free(c);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("toolkit");
    TCase *t = tcase_create("toolkit");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, test_arange_and_masks);
    tcase_add_test(t, test_paramf);
    tcase_add_test(t, test_argmax_top_k);
    tcase_add_test(t, test_sample);
    tcase_add_test(t, test_initializers);
    tcase_add_test(t, test_gradcheck_public);
    tcase_add_test(t, test_optim_groups);
    tcase_add_test(t, test_kv_cache);
    tcase_add_test(t, test_kv_cache_reorder);
    tcase_add_test(t, test_kv_cache_reorder_errors);
    suite_add_tcase(s, t);
    return s;
}
