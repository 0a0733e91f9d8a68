/* Optimizers, gradient clipping and the parameter store, checked against hand-computed values;
 * Philox-4x32-10 against the known-answer vectors of Random123 (kat_vectors), and the sequential
 * generator's uniform and normal draws for sanity.
 *
 * Reference updates are computed here in double from the formulas (docs/model.md §1 training recipe;
 * Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019) and compared with the float32
 * results to a relative 1e-5. */
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
static void setup(void) {
    ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK);
}
static void teardown(void) {
    tg_backend_free(B);
}

/* Two trainable parameters (w: 2×3, b: 4) and a frozen one (f: 2). */
enum { NW = 6, NB = 4, NF = 2, STEPS = 3 };
static const float W0[NW] = {0.5f, -1.25f, 2.0f, 0.0f, -0.3f, 1.5f};
static const float B0[NB] = {0.1f, -0.2f, 0.3f, 1.0f};
static const float F0[NF] = {7.0f, -7.0f};

/* gradient of element i at step t (1-based), varied in sign and size */
static float gradv(int p, int i, int t) {
    return (float)(0.3 * ((i * 7 + p * 3 + t * 5) % 11 - 5) + 0.05 * t) * (p ? 0.1f : 1.0f);
}

static tg_store *make_store(void) {
    tg_store *s;
    CK(tg_store_new(B, &s));
    int64_t ws[2] = {2, 3}, bs[1] = {NB}, fs[1] = {NF};
    CK(tg_store_add(s, "w", 2, ws, W0, true));
    CK(tg_store_add(s, "b", 1, bs, B0, true));
    CK(tg_store_add(s, "f", 1, fs, F0, false));
    return s;
}

static void set_grads(tg_store *s, int t) {
    float gw[NW], gb[NB];
    for (int i = 0; i < NW; i++)
        gw[i] = gradv(0, i, t);
    for (int i = 0; i < NB; i++)
        gb[i] = gradv(1, i, t);
    CK(tg_store_write_grad(s, 0, gw, NW));
    CK(tg_store_write_grad(s, 1, gb, NB));
}

/* Reference optimizer state for one parameter, in double. */
typedef struct {
    double w[NW], m[NW], v[NW];
} ref_t;

static void ref_step(const tg_optim_config *c, double lr, int t, int p, ref_t *r, int n) {
    for (int i = 0; i < n; i++) {
        double g = gradv(p, i, t), w = r->w[i];
        if (c->kind == TG_OPTIM_SGD) {
            g += c->weight_decay * w;
            if (c->momentum > 0) {
                r->m[i] = c->momentum * r->m[i] + g;
                g = r->m[i];
            }
            r->w[i] = w - lr * g;
            continue;
        }
        bool decoupled = c->kind == TG_OPTIM_ADAMW;
        if (!decoupled) g += c->weight_decay * w;
        double b1 = c->beta1, b2 = c->beta2;
        r->m[i] = b1 * r->m[i] + (1 - b1) * g;
        r->v[i] = b2 * r->v[i] + (1 - b2) * g * g;
        double mhat = r->m[i] / (1 - pow(b1, t)), vhat = r->v[i] / (1 - pow(b2, t));
        double upd = lr * mhat / (sqrt(vhat) + c->eps);
        r->w[i] = w - upd - (decoupled ? lr * c->weight_decay * w : 0.0);
    }
}

/* Run STEPS steps of an optimizer and compare every weight (and the moments) with the
 * reference after each step; the frozen parameter must not move. */
static void check_optimizer(const tg_optim_config *c, const char *what) {
    tg_store *s = make_store();
    tg_optim *o;
    CK(tg_optim_new(s, c, &o));
    ref_t rw = {0}, rb = {0};
    for (int i = 0; i < NW; i++)
        rw.w[i] = W0[i];
    for (int i = 0; i < NB; i++)
        rb.w[i] = B0[i];
    const double lr[STEPS] = {0.1, 0.05, 0.02};
    for (int t = 1; t <= STEPS; t++) {
        set_grads(s, t);
        CK(tg_optim_step(o, (float)lr[t - 1]));
        ck_assert_int_eq(tg_optim_steps(o), t);
        ref_step(c, (float)lr[t - 1], t, 0, &rw, NW);
        ref_step(c, (float)lr[t - 1], t, 1, &rb, NB);
        float w[NW], b[NB], f[NF];
        CK(tg_store_read(s, 0, w, NW));
        CK(tg_store_read(s, 1, b, NB));
        CK(tg_store_read(s, 2, f, NF));
        for (int i = 0; i < NW; i++)
            ck_assert_msg(fabs(w[i] - rw.w[i]) <= 1e-6 + 1e-5 * fabs(rw.w[i]),
                          "%s step %d: w[%d] = %.9g, reference %.9g", what, t, i, (double)w[i],
                          rw.w[i]);
        for (int i = 0; i < NB; i++)
            ck_assert_msg(fabs(b[i] - rb.w[i]) <= 1e-6 + 1e-5 * fabs(rb.w[i]),
                          "%s step %d: b[%d] = %.9g, reference %.9g", what, t, i, (double)b[i],
                          rb.w[i]);
        ck_assert(memcmp(f, F0, sizeof f) == 0);
        /* the moments, where the optimizer keeps them */
        bool has_m = c->kind != TG_OPTIM_SGD || c->momentum > 0, has_v = c->kind != TG_OPTIM_SGD;
        float m[NW];
        if (has_m) {
            CK(tg_optim_read_state(o, 0, 0, m, NW));
            for (int i = 0; i < NW; i++)
                tg_assert_close(m[i], rw.m[i], 1e-6, 1e-5);
        } else {
            ck_assert_int_eq(tg_optim_read_state(o, 0, 0, m, NW), TG_ERR_NOT_FOUND);
        }
        if (has_v) {
            CK(tg_optim_read_state(o, 0, 1, m, NW));
            for (int i = 0; i < NW; i++)
                tg_assert_close(m[i], rw.v[i], 1e-9, 1e-5);
        }
    }
    tg_optim_free(o);
    tg_store_free(s);
}

START_TEST(test_sgd_plain) {
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_SGD);
    c.momentum = 0.0f;
    check_optimizer(&c, "sgd");
    /* one step by hand: w = w0 - lr g */
    tg_store *s = make_store();
    tg_optim *o;
    CK(tg_optim_new(s, &c, &o));
    set_grads(s, 1);
    CK(tg_optim_step(o, 0.5f));
    float w[NW];
    CK(tg_store_read(s, 0, w, NW));
    for (int i = 0; i < NW; i++)
        ck_assert_float_eq(w[i], W0[i] - 0.5f * gradv(0, i, 1));
    tg_optim_free(o);
    tg_store_free(s);
}
END_TEST

START_TEST(test_sgd_momentum) {
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_SGD);
    c.momentum = 0.9f;
    check_optimizer(&c, "sgd momentum");
}
END_TEST

START_TEST(test_sgd_weight_decay) {
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_SGD);
    c.momentum = 0.5f;
    c.weight_decay = 0.1f;
    check_optimizer(&c, "sgd momentum + weight decay");
    c.momentum = 0.0f;
    check_optimizer(&c, "sgd weight decay");
}
END_TEST

START_TEST(test_adam) {
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_ADAM);
    ck_assert_int_eq(c.kind, TG_OPTIM_ADAM);
    ck_assert_float_eq(c.beta1, 0.9f);
    ck_assert_float_eq(c.beta2, 0.98f);
    ck_assert_float_eq(c.eps, 1e-9f);
    ck_assert_float_eq(c.weight_decay, 0.0f);
    check_optimizer(&c, "adam");
    /* the first bias-corrected step moves every weight by lr against the gradient's sign */
    tg_store *s = make_store();
    tg_optim *o;
    CK(tg_optim_new(s, &c, &o));
    set_grads(s, 1);
    CK(tg_optim_step(o, 0.01f));
    float w[NW];
    CK(tg_store_read(s, 0, w, NW));
    for (int i = 0; i < NW; i++) {
        float g = gradv(0, i, 1);
        tg_assert_close(w[i], W0[i] - (g > 0 ? 0.01 : g < 0 ? -0.01 : 0.0), 1e-6, 0.0);
    }
    tg_optim_free(o);
    tg_store_free(s);
}
END_TEST

START_TEST(test_adam_weight_decay) {
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_ADAM);
    c.weight_decay = 0.05f;
    check_optimizer(&c, "adam + L2");
}
END_TEST

START_TEST(test_adamw) {
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_ADAMW);
    ck_assert_float_gt(c.weight_decay, 0.0f);
    c.weight_decay = 0.1f;
    check_optimizer(&c, "adamw");
    /* decoupled: with zero gradient the weight only decays, w = w0 (1 - lr wd) */
    tg_store *s = make_store();
    tg_optim *o;
    CK(tg_optim_new(s, &c, &o));
    CK(tg_store_zero_grad(s));
    CK(tg_optim_step(o, 0.5f));
    float w[NW];
    CK(tg_store_read(s, 0, w, NW));
    for (int i = 0; i < NW; i++)
        tg_assert_close(w[i], W0[i] * (1.0 - 0.5 * 0.1), 1e-7, 1e-6);
    tg_optim_free(o);
    tg_store_free(s);
}
END_TEST

START_TEST(test_optim_bad_config) {
    tg_store *s = make_store();
    tg_optim *o = (tg_optim *)1;
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_ADAM);
    c.beta2 = 1.0f;
    ck_assert_int_eq(tg_optim_new(s, &c, &o), TG_ERR_INVALID);
    ck_assert_ptr_null(o);
    c = tg_optim_defaults(TG_OPTIM_ADAM);
    c.eps = 0.0f;
    ck_assert_int_eq(tg_optim_new(s, &c, &o), TG_ERR_INVALID);
    c = tg_optim_defaults(TG_OPTIM_SGD);
    c.momentum = -0.1f;
    ck_assert_int_eq(tg_optim_new(s, &c, &o), TG_ERR_INVALID);
    c = tg_optim_defaults(TG_OPTIM_SGD);
    c.weight_decay = -1.0f;
    ck_assert_int_eq(tg_optim_new(s, &c, &o), TG_ERR_INVALID);
    c = tg_optim_defaults(TG_OPTIM_ADAM);
    CK(tg_optim_new(s, &c, &o));
    ck_assert_int_eq(tg_optim_step(o, -1.0f), TG_ERR_INVALID);
    ck_assert_int_eq(tg_optim_step(o, NAN), TG_ERR_INVALID);
    ck_assert_int_eq(tg_optim_steps(o), 0);
    tg_optim_free(o);
    tg_store_free(s);
}
END_TEST

/* The state read out of one optimizer and written into a fresh one (what a checkpoint does)
 * continues the run exactly: same weights, bit for bit, after further steps. */
START_TEST(test_optim_state_roundtrip) {
    const tg_optim_kind kinds[2] = {TG_OPTIM_ADAM, TG_OPTIM_SGD};
    for (int k = 0; k < 2; k++) {
        tg_optim_config c = tg_optim_defaults(kinds[k]);
        tg_store *s1 = make_store(), *s2 = make_store();
        tg_optim *o1, *o2;
        CK(tg_optim_new(s1, &c, &o1));
        for (int t = 1; t <= 2; t++) {
            set_grads(s1, t);
            CK(tg_optim_step(o1, 0.01f));
        }
        /* checkpoint: weights and state of o1 into s2 / o2 */
        CK(tg_optim_new(s2, &c, &o2));
        for (int64_t i = 0; i < 2; i++) {
            int64_t n = tg_store_numel(s1, i);
            float buf[NW];
            CK(tg_store_read(s1, i, buf, n));
            CK(tg_store_write(s2, i, buf, n));
            for (int which = 0; which < (kinds[k] == TG_OPTIM_SGD ? 1 : 2); which++) {
                CK(tg_optim_read_state(o1, i, which, buf, n));
                CK(tg_optim_write_state(o2, i, which, buf, n));
                float back[NW];
                CK(tg_optim_read_state(o2, i, which, back, n));
                ck_assert(memcmp(buf, back, (size_t)n * sizeof(float)) == 0);
            }
        }
        tg_optim_set_steps(o2, tg_optim_steps(o1));
        ck_assert_int_eq(tg_optim_steps(o2), 2);
        for (int t = 3; t <= 4; t++) {
            set_grads(s1, t);
            set_grads(s2, t);
            CK(tg_optim_step(o1, 0.01f));
            CK(tg_optim_step(o2, 0.01f));
        }
        for (int64_t i = 0; i < 2; i++) {
            float a[NW], b[NW];
            int64_t n = tg_store_numel(s1, i);
            CK(tg_store_read(s1, i, a, n));
            CK(tg_store_read(s2, i, b, n));
            ck_assert_msg(memcmp(a, b, (size_t)n * sizeof(float)) == 0, "kind %d param %lld", k,
                          (long long)i);
        }
        /* errors: bad slot, bad size, index out of range, a frozen parameter has no state */
        float buf[NW];
        ck_assert_int_eq(tg_optim_read_state(o1, 0, 2, buf, NW), TG_ERR_INVALID);
        ck_assert_int_eq(tg_optim_read_state(o1, 0, 0, buf, NW - 1), TG_ERR_SHAPE);
        ck_assert_int_eq(tg_optim_write_state(o1, 0, 0, buf, NW + 1), TG_ERR_SHAPE);
        ck_assert_int_eq(tg_optim_read_state(o1, 3, 0, buf, NW), TG_ERR_INVALID);
        ck_assert_int_eq(tg_optim_read_state(o1, 2, 0, buf, NF), TG_ERR_NOT_FOUND);
        if (kinds[k] == TG_OPTIM_SGD)
            ck_assert_int_eq(tg_optim_read_state(o1, 0, 1, buf, NW), TG_ERR_NOT_FOUND);
        tg_optim_free(o1);
        tg_optim_free(o2);
        tg_store_free(s1);
        tg_store_free(s2);
    }
}
END_TEST

/* ---- gradients: norm, clipping, scaling, zeroing ---- */

START_TEST(test_clip_grad) {
    tg_store *s = make_store();
    set_grads(s, 2);
    double ss = 0.0;
    for (int i = 0; i < NW; i++)
        ss += (double)gradv(0, i, 2) * gradv(0, i, 2);
    for (int i = 0; i < NB; i++)
        ss += (double)gradv(1, i, 2) * gradv(1, i, 2);
    double norm_ref = sqrt(ss), norm;
    CK(tg_store_grad_norm(s, &norm));
    tg_assert_close(norm, norm_ref, 0.0, 1e-6);
    /* max above the norm: reported, nothing changes */
    CK(tg_store_clip_grad(s, norm_ref * 1.5, &norm));
    tg_assert_close(norm, norm_ref, 0.0, 1e-6);
    float gw[NW], gb[NB];
    CK(tg_store_read_grad(s, 0, gw, NW));
    CK(tg_store_read_grad(s, 1, gb, NB));
    for (int i = 0; i < NW; i++)
        ck_assert_float_eq(gw[i], gradv(0, i, 2));
    for (int i = 0; i < NB; i++)
        ck_assert_float_eq(gb[i], gradv(1, i, 2));
    /* max below the norm: every gradient scaled by max / norm, the norm becomes max */
    double maxn = norm_ref / 4.0;
    CK(tg_store_clip_grad(s, maxn, &norm));
    tg_assert_close(norm, norm_ref, 0.0, 1e-6);
    CK(tg_store_read_grad(s, 0, gw, NW));
    CK(tg_store_read_grad(s, 1, gb, NB));
    for (int i = 0; i < NW; i++)
        tg_assert_close(gw[i], gradv(0, i, 2) * maxn / norm_ref, 1e-7, 1e-6);
    for (int i = 0; i < NB; i++)
        tg_assert_close(gb[i], gradv(1, i, 2) * maxn / norm_ref, 1e-7, 1e-6);
    CK(tg_store_grad_norm(s, &norm));
    tg_assert_close(norm, maxn, 0.0, 1e-6);
    /* NULL norm_out is allowed */
    CK(tg_store_clip_grad(s, maxn / 2.0, NULL));
    CK(tg_store_grad_norm(s, &norm));
    tg_assert_close(norm, maxn / 2.0, 0.0, 1e-6);
    /* bad max, non-finite gradients */
    ck_assert_int_eq(tg_store_clip_grad(s, 0.0, NULL), TG_ERR_INVALID);
    gw[3] = INFINITY;
    CK(tg_store_write_grad(s, 0, gw, NW));
    ck_assert_int_eq(tg_store_clip_grad(s, 1.0, &norm), TG_ERR_NUMERIC);
    ck_assert(isinf(norm));
    gw[3] = NAN;
    CK(tg_store_write_grad(s, 0, gw, NW));
    ck_assert_int_eq(tg_store_clip_grad(s, 1.0, NULL), TG_ERR_NUMERIC);
    tg_store_free(s);
}
END_TEST

/* A norm over many elements (several chunks, two threads) matches a double sum. */
START_TEST(test_grad_norm_large) {
    tg_store *s;
    CK(tg_store_new(B, &s));
    enum { N = 100003 };
    float *g = malloc(N * sizeof *g);
    double ss = 0.0;
    for (int i = 0; i < N; i++) {
        g[i] = (float)((i % 13) - 6) * 0.01f;
        ss += (double)g[i] * g[i];
    }
    int64_t sh[1] = {N};
    CK(tg_store_add(s, "big", 1, sh, NULL, true));
    CK(tg_store_write_grad(s, 0, g, N));
    double norm;
    CK(tg_store_grad_norm(s, &norm));
    tg_assert_close(norm, sqrt(ss), 0.0, 1e-5);
    CK(tg_store_scale_grad(s, 0.5f));
    CK(tg_store_grad_norm(s, &norm));
    tg_assert_close(norm, 0.5 * sqrt(ss), 0.0, 1e-5);
    free(g);
    tg_store_free(s);
}
END_TEST

/* A parameter big enough for the store maths to run on the team (backends/cpu/cpu.c: run_vec,
 * shares taken by their owners first, then by whoever is free; zeroing in 4 KiB chunks): on 1,
 * 2 and 3 threads every element takes each Adam step exactly once (against the double
 * reference; a share run twice or never moves some weights wrongly), the weights are the same
 * bits on every count, and zero_grad leaves no element of the gradient, nor anything of the
 * parameter's neighbour, changed but the gradients. N is not a whole number of chunks or shares. */
START_TEST(test_store_maths_on_the_team) {
    enum { N = 3 * 16384 + 4099 };
    float *g = malloc(N * sizeof *g), *w = malloc(N * sizeof *w), *w1 = malloc(N * sizeof *w1);
    ck_assert(g && w && w1);
    for (int threads = 1; threads <= 3; threads++) {
        tg_backend *be;
        CK(tg_backend_cpu_new(threads, &be));
        tg_store *s;
        CK(tg_store_new(be, &s));
        int64_t sh[1] = {N}, sb[1] = {NB};
        CK(tg_store_add(s, "big", 1, sh, NULL, true));
        CK(tg_store_add(s, "b", 1, sb, B0, true));
        tg_optim_config c = tg_optim_defaults(TG_OPTIM_ADAM);
        tg_optim *o;
        CK(tg_optim_new(s, &c, &o));
        for (int t = 1; t <= 2; t++) {
            for (int i = 0; i < N; i++)
                g[i] = gradv(0, i, t);
            CK(tg_store_write_grad(s, 0, g, N));
            CK(tg_optim_step(o, 0.01f));
        }
        CK(tg_store_read(s, 0, w, N));
        for (int i = 0; i < N; i++) {
            /* two Adam steps from 0, in double, for element i */
            double m = 0, v = 0, x = 0;
            for (int t = 1; t <= 2; t++) {
                double gi = gradv(0, i, t);
                m = c.beta1 * m + (1 - c.beta1) * gi;
                v = c.beta2 * v + (1 - c.beta2) * gi * gi;
                x -= (double)0.01f * (m / (1 - pow(c.beta1, t))) /
                     (sqrt(v / (1 - pow(c.beta2, t))) + c.eps);
            }
            ck_assert_msg(fabs(w[i] - x) <= 1e-6 + 1e-5 * fabs(x),
                          "%d threads: w[%d] = %.9g, reference %.9g", threads, i, (double)w[i], x);
        }
        if (threads == 1)
            memcpy(w1, w, N * sizeof *w);
        else
            ck_assert_msg(memcmp(w, w1, N * sizeof *w) == 0, "%d threads: not 1 thread's bits",
                          threads);
        CK(tg_store_zero_grad(s));
        CK(tg_store_read_grad(s, 0, g, N));
        for (int i = 0; i < N; i++)
            ck_assert_msg(g[i] == 0.0f, "%d threads: gradient %d = %g after zero_grad", threads, i,
                          (double)g[i]);
        float b[NB];
        CK(tg_store_read(s, 1, b, NB));
        for (int i = 0; i < NB; i++) /* its gradient was zero: Adam leaves it */
            ck_assert_float_eq(b[i], B0[i]);
        CK(tg_store_read(s, 0, g, N));
        ck_assert(memcmp(g, w, N * sizeof *w) == 0);
        tg_optim_free(o);
        tg_store_free(s);
        tg_backend_free(be);
    }
    free(g), free(w), free(w1);
}
END_TEST

START_TEST(test_zero_grad) {
    tg_store *s = make_store();
    set_grads(s, 1);
    double norm;
    CK(tg_store_grad_norm(s, &norm));
    ck_assert(norm > 0.0);
    CK(tg_store_zero_grad(s));
    float gw[NW], gb[NB];
    CK(tg_store_read_grad(s, 0, gw, NW));
    CK(tg_store_read_grad(s, 1, gb, NB));
    for (int i = 0; i < NW; i++)
        ck_assert_float_eq(gw[i], 0.0f);
    for (int i = 0; i < NB; i++)
        ck_assert_float_eq(gb[i], 0.0f);
    CK(tg_store_grad_norm(s, &norm));
    ck_assert(norm == 0.0);
    /* weights are untouched */
    CK(tg_store_read(s, 0, gw, NW));
    ck_assert(memcmp(gw, W0, sizeof gw) == 0);
    tg_store_free(s);
}
END_TEST

/* ---- the store API ---- */

START_TEST(test_store_api) {
    tg_store *s = make_store();
    ck_assert_ptr_eq(tg_store_backend(s), B);
    ck_assert_int_eq(tg_store_count(s), 3);
    ck_assert_int_eq(tg_store_total_numel(s), NW + NB + NF);
    ck_assert_int_eq(tg_store_find(s, "w"), 0);
    ck_assert_int_eq(tg_store_find(s, "b"), 1);
    ck_assert_int_eq(tg_store_find(s, "f"), 2);
    ck_assert_int_eq(tg_store_find(s, "nope"), -1);
    ck_assert_str_eq(tg_store_name(s, 1), "b");
    ck_assert_ptr_null(tg_store_name(s, 3));
    int64_t sh[TG_MAX_DIMS];
    ck_assert_int_eq(tg_store_shape(s, 0, sh), 2);
    ck_assert_int_eq(sh[0], 2);
    ck_assert_int_eq(sh[1], 3);
    ck_assert_int_eq(tg_store_shape(s, 1, sh), 1);
    ck_assert_int_eq(sh[0], NB);
    ck_assert_int_eq(tg_store_numel(s, 0), NW);
    ck_assert_int_eq(tg_store_numel(s, 7), -1);
    ck_assert(tg_store_trainable(s, 0));
    ck_assert(!tg_store_trainable(s, 2));
    /* read back the initial values; write and read again */
    float w[NW], w2[NW] = {1, 2, 3, 4, 5, 6};
    CK(tg_store_read(s, 0, w, NW));
    ck_assert(memcmp(w, W0, sizeof w) == 0);
    CK(tg_store_write(s, 0, w2, NW));
    CK(tg_store_read(s, 0, w, NW));
    ck_assert(memcmp(w, w2, sizeof w) == 0);
    /* a fresh trainable parameter starts with zero gradient; NULL init gives zeros */
    int64_t zs[3] = {2, 2, 2};
    CK(tg_store_add(s, "z", 3, zs, NULL, true));
    float z[8];
    CK(tg_store_read(s, 3, z, 8));
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq(z[i], 0.0f);
    CK(tg_store_read_grad(s, 3, z, 8));
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq(z[i], 0.0f);
    ck_assert_int_eq(tg_store_total_numel(s), NW + NB + NF + 8);
    /* errors */
    ck_assert_int_eq(tg_store_add(s, "w", 1, zs, NULL, true), TG_ERR_INVALID); /* duplicate */
    tg_assert_msg_has(tg_error_message(), "'w'");
    ck_assert_int_eq(tg_store_add(s, "", 1, zs, NULL, true), TG_ERR_INVALID);
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    ck_assert_int_eq(tg_store_add(s, longname, 1, zs, NULL, true), TG_ERR_INVALID);
    int64_t bad[2] = {3, 0};
    ck_assert_int_eq(tg_store_add(s, "bad", 2, bad, NULL, true), TG_ERR_SHAPE);
    ck_assert_int_eq(tg_store_add(s, "bad", TG_MAX_DIMS + 1, zs, NULL, true), TG_ERR_SHAPE);
    ck_assert_int_eq(tg_store_count(s), 4);
    ck_assert_int_eq(tg_store_read(s, 0, w, NW - 1), TG_ERR_SHAPE);
    ck_assert_int_eq(tg_store_write(s, 9, w, NW), TG_ERR_NOT_FOUND);
    ck_assert_int_eq(tg_store_read_grad(s, 2, w, NF), TG_ERR_STATE); /* frozen: no gradient */
    ck_assert_int_eq(tg_store_write_grad(s, 2, w, NF), TG_ERR_STATE);
    ck_assert_int_eq(tg_store_read(s, 0, NULL, NW), TG_ERR_INVALID);
    /* a scalar parameter (ndim 0) */
    CK(tg_store_add(s, "scalar", 0, NULL, w2, true));
    ck_assert_int_eq(tg_store_numel(s, 4), 1);
    CK(tg_store_read(s, 4, z, 1));
    ck_assert_float_eq(z[0], 1.0f);
    tg_store_free(s);
}
END_TEST

/* A parameter used by a graph: tg_backward accumulates into the store, the optimizer reads
 * it from there (a one-step end-to-end check: loss = sum(w * x), dL/dw = x). */
START_TEST(test_store_graph_gradient) {
    tg_store *s = make_store();
    tg_graph *g = tg_graph_new();
    float xv[NW] = {1, -2, 3, -4, 5, -6};
    int64_t sh[2] = {2, 3};
    tg_tensor *loss =
        tg_keep(tg_sum_all(tg_mul(tg_param(g, s, "w"), tg_input(g, TG_DTYPE_F32, 2, sh, xv))));
    CK(tg_backward(g, loss));
    CK(tg_graph_run(g, B));
    float gw[NW];
    CK(tg_store_read_grad(s, 0, gw, NW));
    for (int i = 0; i < NW; i++)
        ck_assert_float_eq(gw[i], xv[i]);
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_SGD);
    c.momentum = 0.0f;
    tg_optim *o;
    CK(tg_optim_new(s, &c, &o));
    CK(tg_optim_step(o, 0.25f));
    float w[NW];
    CK(tg_store_read(s, 0, w, NW));
    for (int i = 0; i < NW; i++)
        ck_assert_float_eq(w[i], W0[i] - 0.25f * xv[i]);
    tg_optim_free(o);
    tg_graph_free(g);
    tg_store_free(s);
}
END_TEST

/* ---- random numbers ---- */

/* Random123 1.09, examples/kat_vectors, philox4x32 10 rounds: counter, key -> expected. */
START_TEST(test_philox_kat) {
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[3] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int k = 0; k < 3; k++) {
        uint32_t out[4];
        tg_philox4x32(kat[k].ctr, kat[k].key, out);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(out[i] == kat[k].out[i], "vector %d word %d: 0x%08x, expected 0x%08x", k,
                          i, out[i], kat[k].out[i]);
    }
}
END_TEST

START_TEST(test_u32_to_unit) {
    ck_assert_float_eq(tg_u32_to_unit(0), 0.0f);
    ck_assert(tg_u32_to_unit(0xffffffffu) < 1.0f);
    ck_assert_float_eq(tg_u32_to_unit(0x80000000u), 0.5f);
}
END_TEST

START_TEST(test_rng_sequences) {
    enum { N = 200000 };
    tg_rng r1, r2, r3;
    tg_rng_init(&r1, 12345);
    tg_rng_init(&r2, 12345);
    tg_rng_init(&r3, 12346);
    int same_seed_diff = 0, other_seed_same = 0;
    for (int i = 0; i < 1000; i++) {
        uint32_t a = tg_rng_u32(&r1), b = tg_rng_u32(&r2), c = tg_rng_u32(&r3);
        same_seed_diff += a != b;
        other_seed_same += a == c;
    }
    ck_assert_int_eq(same_seed_diff, 0);
    ck_assert_int_le(other_seed_same, 1);
    /* uniform: in [0, 1), mean 1/2, variance 1/12, both halves and all deciles populated */
    tg_rng_init(&r1, 7);
    double s = 0, s2 = 0;
    int dec[10] = {0};
    for (int i = 0; i < N; i++) {
        double u = tg_rng_uniform(&r1);
        ck_assert(u >= 0.0 && u < 1.0);
        s += u;
        s2 += u * u;
        dec[(int)(u * 10)]++;
    }
    double mean = s / N, var = s2 / N - mean * mean;
    tg_assert_close(mean, 0.5, 0.005, 0.0);
    tg_assert_close(var, 1.0 / 12.0, 0.002, 0.0);
    for (int k = 0; k < 10; k++)
        ck_assert_msg(abs(dec[k] - N / 10) < N / 100, "decile %d: %d", k, dec[k]);
    /* normal: mean 0, variance 1, ~68.3 % within one sigma, symmetric */
    tg_rng_init(&r1, 8);
    s = s2 = 0;
    int in1 = 0, pos = 0;
    for (int i = 0; i < N; i++) {
        double z = tg_rng_normal(&r1);
        ck_assert(isfinite(z));
        s += z;
        s2 += z * z;
        in1 += fabs(z) < 1.0;
        pos += z > 0;
    }
    mean = s / N;
    var = s2 / N - mean * mean;
    tg_assert_close(mean, 0.0, 0.01, 0.0);
    tg_assert_close(var, 1.0, 0.02, 0.0);
    tg_assert_close((double)in1 / N, 0.6827, 0.005, 0.0);
    tg_assert_close((double)pos / N, 0.5, 0.005, 0.0);
    /* below: in range, every value hit about equally */
    int hits[7] = {0};
    for (int i = 0; i < 70000; i++) {
        uint64_t v = tg_rng_below(&r1, 7);
        ck_assert(v < 7);
        hits[v]++;
    }
    for (int k = 0; k < 7; k++)
        ck_assert_msg(abs(hits[k] - 10000) < 500, "value %d: %d", k, hits[k]);
    ck_assert_int_eq(tg_rng_below(&r1, 1), 0);
    ck_assert_int_eq(tg_rng_below(&r1, 0), 0);
}
END_TEST

/* Dropout draws from Philox exactly as documented: element e of the dropout op with stream id
 * k (its creation index among the graph's dropouts) is kept iff
 * tg_u32_to_unit(word e%4 of Philox(counter (e/4, 0, k, 0), key = seed)) >= p, and kept values
 * are scaled by 1/(1-p). The length is not a multiple of 4 or of the kernel's blocks, so every
 * code path (vector blocks, scalar tail, partial last group) is checked; the backward pass
 * applies the same mask; 1 and 2 threads agree bit for bit. */
START_TEST(test_dropout_mask_is_philox) {
    enum { N = 70001 };
    const float p = 0.25f;
    const uint64_t seed = 0x123456789abcdefULL;
    float *ones = malloc(N * sizeof *ones), *out[2][2], *grad = malloc(N * sizeof *grad);
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    for (int th = 0; th < 2; th++) {
        tg_backend *b;
        CK(tg_backend_cpu_new(th + 1, &b));
        tg_graph *g = tg_graph_new();
        tg_graph_set_seed(g, seed);
        int64_t sh[1] = {N};
        tg_tensor *x = tg_requires_grad(tg_input(g, TG_DTYPE_F32, 1, sh, ones));
        tg_tensor *d0 = tg_keep(tg_dropout(x, p)), *d1 = tg_keep(tg_dropout(x, p));
        CK(tg_backward(g, tg_sum_all(d0)));
        tg_tensor *gx = tg_grad(g, x);
        CK(tg_graph_run(g, b));
        for (int k = 0; k < 2; k++) {
            out[th][k] = malloc(N * sizeof(float));
            CK(tg_tensor_read(k ? d1 : d0, out[th][k], N * sizeof(float)));
        }
        CK(tg_tensor_read(gx, grad, N * sizeof(float)));
        ck_assert(memcmp(grad, out[th][0], N * sizeof(float)) == 0); /* d(sum d0)/dx = mask/(1-p) */
        tg_graph_free(g);
        tg_backend_free(b);
    }
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const float scale = 1.0f / (1.0f - p);
    int64_t kept = 0;
    for (int k = 0; k < 2; k++) {
        for (int e = 0; e < N; e++) {
            uint32_t ctr[4] = {(uint32_t)(e / 4), 0, (uint32_t)k, 0}, r[4];
            tg_philox4x32(ctr, key, r);
            float want = tg_u32_to_unit(r[e % 4]) >= p ? scale : 0.0f;
            ck_assert_msg(out[0][k][e] == want, "stream %d element %d: %g, expected %g", k, e,
                          (double)out[0][k][e], (double)want);
            kept += want != 0.0f;
        }
        ck_assert(memcmp(out[0][k], out[1][k], N * sizeof(float)) == 0);
        ck_assert(memcmp(out[0][0], out[0][1], N * sizeof(float)) != 0); /* streams differ */
    }
    tg_assert_close((double)kept / (2.0 * N), 1.0 - p, 0.01, 0.0);
    for (int th = 0; th < 2; th++)
        for (int k = 0; k < 2; k++)
            free(out[th][k]);
    free(ones);
    free(grad);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optimizers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_sgd_plain);
    tcase_add_test(tc, test_sgd_momentum);
    tcase_add_test(tc, test_sgd_weight_decay);
    tcase_add_test(tc, test_adam);
    tcase_add_test(tc, test_adam_weight_decay);
    tcase_add_test(tc, test_adamw);
    tcase_add_test(tc, test_optim_bad_config);
    tcase_add_test(tc, test_optim_state_roundtrip);
    suite_add_tcase(s, tc);
    TCase *st = tcase_create("store");
    tcase_add_checked_fixture(st, setup, teardown);
    tcase_add_test(st, test_clip_grad);
    tcase_add_test(st, test_grad_norm_large);
    tcase_add_test(st, test_zero_grad);
    tcase_add_test(st, test_store_maths_on_the_team);
    tcase_add_test(st, test_store_api);
    tcase_add_test(st, test_store_graph_gradient);
    suite_add_tcase(s, st);
    TCase *rn = tcase_create("rng");
    tcase_add_test(rn, test_philox_kat);
    tcase_add_test(rn, test_u32_to_unit);
    tcase_add_test(rn, test_rng_sequences);
    tcase_add_test(rn, test_dropout_mask_is_philox);
    suite_add_tcase(s, rn);
    return s;
}
