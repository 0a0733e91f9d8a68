/* The planner's elementwise fusion (core/fuse.c) on the CPU backend:
 *  - the chains of a Transformer's FFN and residual (bias + GELU + dropout, dropout +
 *    residual add) and of masked attention (scale + masks + softmax; dropout + softmax's
 *    backward), forward and backward, form
 *    as intended (which nodes are members, which need no buffer), and fused runs give the
 *    same bits as unfused ones (planner off) for outputs and every gradient, on 1 and 2 threads;
 *  - a member read by a node before the chain's tail is not fused (it would be read before it
 *    is computed); a kept member keeps its buffer and its value;
 *  - chains stop at TG_CHAIN_MAX members and long ones still compute the right values;
 *  - dropout over tiles that start anywhere (thread shares, tile ends, inside a chain) keeps
 *    exactly the elements the Philox reference keeps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/isa.h"
#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "tg/rng.h"
#include "tg_check.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        tg_status st_ = (call);                                                                    \
        ck_assert_msg(st_ == TG_OK, "%s failed: %s", #call, tg_error_message());                   \
    } while (0)

static float val(int64_t i, int salt) {
    return (float)(((i * 37 + salt * 11) % 101) - 50) / 40.0f;
}

static tg_tensor *input(tg_graph *g, int ndim, const int64_t *shape, int salt, bool grad) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *x = malloc((size_t)n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = val(i, salt);
    tg_tensor *t = tg_input(g, TG_DTYPE_F32, ndim, shape, x);
    free(x);
    return grad ? tg_requires_grad(t) : t;
}

static void assert_same_bits(const tg_tensor *a, const tg_tensor *b, const char *what) {
    int64_t n = tg_tensor_numel(a);
    ck_assert_int_eq(n, tg_tensor_numel(b));
    float *x = tg_test_read_all(a), *y = tg_test_read_all(b);
    ck_assert_msg(memcmp(x, y, (size_t)n * sizeof *x) == 0, "%s: fused and unfused runs differ",
                  what);
    free(x);
    free(y);
}

static bool chained(const tg_tensor *t) {
    return (t->flags & TG_TF_CHAINED) != 0;
}
static bool transient(const tg_tensor *t) {
    return (t->flags & TG_TF_TRANSIENT) != 0;
}

/* The first node of graph g with op `op` whose source k is `src` or a view of it (NULL: none). */
static tg_tensor *reader(tg_graph *g, tg_op op, const tg_tensor *src, int k) {
    for (int64_t i = 0; i < g->n; i++) {
        tg_tensor *t = g->nodes[i];
        if (t->op == op && t->nsrc > k && t->src[k] && tg__tensor_root(t->src[k]) == src) return t;
    }
    return NULL;
}

/* ---- an FFN block with a residual: r = x + dropout(gelu(x W1 + b1) W2), loss = sum(r r); the
 * activation and the residual read through reshapes, as the model's layers do ---- */

enum { R = 320, D = 64, F = 128 }; /* R x F = 40,960 elements: shared by two threads */

typedef struct {
    tg_graph *g;
    tg_tensor *x, *w1, *b1, *w2, *h, *a, *d, *dr, *r, *loss;
} ffn_t;

static ffn_t ffn(bool planner) {
    ffn_t f;
    f.g = tg_graph_new();
    tg_graph_set_planner(f.g, planner);
    tg_graph_set_seed(f.g, 42);
    int64_t sx[2] = {R, D}, sw1[2] = {D, F}, sb1[1] = {F}, sw2[2] = {F, D};
    f.x = input(f.g, 2, sx, 1, true);
    f.w1 = input(f.g, 2, sw1, 2, true);
    f.b1 = input(f.g, 1, sb1, 3, true);
    f.w2 = input(f.g, 2, sw2, 4, true);
    f.h = tg_add(tg_scale(tg_matmul(f.x, f.w1, false, false), 0.125f), f.b1);
    int64_t s3[3] = {R / 8, 8, F};
    f.a = tg_gelu(tg_reshape(f.h, 3, s3));
    f.d = tg_dropout(f.a, 0.1f);
    f.dr = tg_dropout(tg_matmul(f.d, f.w2, false, false), 0.1f);
    f.r = tg_keep(tg_add(f.x, tg_reshape(f.dr, 2, sx)));
    f.loss = tg_keep(tg_sum_all(tg_mul(f.r, f.r)));
    CK(tg_backward(f.g, f.loss));
    return f;
}

/* A feed-forward layer with ReLU and no dropout, h = relu(x W1 + b1) W2: the bias add's output
 * (the pre-activation) needs no buffer, since ReLU's gradient is taken from its output, which
 * the second product and W2's gradient read anyway; same bits as the planner off. */
START_TEST(test_relu_preactivation_transient) {
    for (int threads = 1; threads <= 2; threads++) {
        tg_backend *b;
        CK(tg_backend_cpu_new(threads, &b));
        tg_graph *g[2];
        tg_tensor *pre[2], *act[2], *grads[2][3];
        for (int k = 0; k < 2; k++) {
            g[k] = tg_graph_new();
            tg_graph_set_planner(g[k], k == 0);
            int64_t sx[2] = {R, D}, sw1[2] = {D, F}, sb1[1] = {F}, sw2[2] = {F, D};
            tg_tensor *x = input(g[k], 2, sx, 1, true), *w1 = input(g[k], 2, sw1, 2, true),
                      *b1 = input(g[k], 1, sb1, 3, true), *w2 = input(g[k], 2, sw2, 4, true);
            pre[k] = tg_add(tg_matmul(x, w1, false, false), b1);
            act[k] = tg_relu(pre[k]);
            tg_tensor *out = tg_matmul(act[k], w2, false, false);
            CK(tg_backward(g[k], tg_keep(tg_sum_all(tg_mul(out, out)))));
            grads[k][0] = tg_keep(tg_grad(g[k], x));
            grads[k][1] = tg_keep(tg_grad(g[k], w1));
            grads[k][2] = tg_keep(tg_grad(g[k], b1));
            CK(tg_graph_run(g[k], b));
        }
        ck_assert(chained(pre[0]) && transient(pre[0]) && pre[0]->data == NULL);
        ck_assert(act[0]->chain_prev == pre[0] && !transient(act[0]));
        for (int i = 0; i < 3; i++)
            assert_same_bits(grads[0][i], grads[1][i], "relu layer gradient");
        tg_graph_free(g[0]);
        tg_graph_free(g[1]);
        tg_backend_free(b);
    }
}
END_TEST

START_TEST(test_ffn_chains) {
    for (int threads = 1; threads <= 2; threads++) {
        tg_backend *b;
        CK(tg_backend_cpu_new(threads, &b));
        ffn_t on = ffn(true), off = ffn(false);
        CK(tg_graph_run(on.g, b));
        CK(tg_graph_run(off.g, b));
        /* forward: scale -> add(bias) -> gelu -> dropout; add(bias) keeps its buffer (gelu_back
         * reads it), scale and gelu need none */
        tg_tensor *sc = on.h->src[0];
        ck_assert(sc->op == TG_OP_SCALE && chained(sc) && transient(sc));
        ck_assert(on.h->chain_prev == sc && chained(on.h) && !transient(on.h));
        ck_assert(on.a->chain_prev == on.h && chained(on.a) && transient(on.a));
        ck_assert(on.d->chain_prev == on.a && !chained(on.d) && on.d->block >= 0);
        ck_assert(on.a->data == NULL && on.h->data != NULL);
        /* dropout -> residual add; the product r r is part of that chain too (r is kept) */
        ck_assert(on.r->chain_prev == on.dr && chained(on.dr) && transient(on.dr));
        tg_tensor *sq = reader(on.g, TG_OP_MUL, on.r, 0);
        ck_assert(sq && sq->chain_prev == on.r && chained(on.r) && !transient(on.r));
        /* backward: the gradient through dropout feeds gelu_back in one chain */
        tg_tensor *gb = reader(on.g, TG_OP_GELU_BACK, on.h, 0);
        ck_assert_ptr_nonnull(gb);
        ck_assert(gb->chain_prev == gb->src[1] && gb->src[1]->op == TG_OP_DROPOUT);
        ck_assert(transient(gb->src[1]));
        /* unfused: nothing chained */
        ck_assert(!chained(off.a) && off.d->chain_prev == NULL);
        assert_same_bits(on.r, off.r, "r");
        assert_same_bits(on.loss, off.loss, "loss");
        const char *names[4] = {"dx", "dW1", "db1", "dW2"};
        tg_tensor *ins_on[4] = {on.x, on.w1, on.b1, on.w2},
                  *ins_off[4] = {off.x, off.w1, off.b1, off.w2};
        for (int i = 0; i < 4; i++)
            assert_same_bits(tg_grad(on.g, ins_on[i]), tg_grad(off.g, ins_off[i]), names[i]);
        tg_graph_free(on.g);
        tg_graph_free(off.g);
        tg_backend_free(b);
    }
}
END_TEST

/* ---- masked attention: softmax(masked_fill(masked_fill(scale(s), pad), causal)) ---- */

enum { B = 4, H = 4 };

static tg_tensor *scores(tg_graph *g, int64_t T, tg_tensor **s_out, tg_tensor **m_out) {
    int64_t ss[4] = {B, H, T, T}, sp[4] = {B, 1, 1, T};
    tg_tensor *s = input(g, 4, ss, 5, true);
    int32_t pad[B * 64];
    for (int64_t i = 0; i < B * T; i++)
        pad[i] = (i % T) >= T - 3 * (i / T); /* row b: 3b padded keys */
    tg_tensor *pm = tg_input(g, TG_DTYPE_I32, 4, sp, pad);
    tg_tensor *l = tg_masked_fill(tg_scale(s, 0.25f), pm, -INFINITY);
    tg_tensor *m = tg_masked_fill(l, tg_causal_mask(g, T, T), -INFINITY);
    *s_out = s;
    *m_out = m;
    return tg_keep(tg_softmax(m));
}

/* Rows of 12 (the backward's eight-rows-at-a-time path) and 40; the loss weights the
 * probabilities by w, then by dropout, so the backward's softmax_back ends a chain too. */
START_TEST(test_attention_chain) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    const int64_t lens[2] = {12, 40};
    for (int li = 0; li < 2; li++) {
        int64_t T = lens[li];
        tg_tensor *p[2], *s[2], *m[2];
        tg_graph *g[2];
        for (int k = 0; k < 2; k++) {
            g[k] = tg_graph_new();
            tg_graph_set_planner(g[k], k == 0);
            p[k] = scores(g[k], T, &s[k], &m[k]);
            tg_tensor *w = input(g[k], 4, (int64_t[]){B, H, T, T}, 6, false);
            CK(tg_backward(g[k], tg_sum_all(tg_mul(tg_dropout(p[k], 0.2f), w))));
            CK(tg_graph_run(g[k], b));
        }
        /* scale -> pad mask -> causal mask -> softmax: one node, no buffer but the output's */
        tg_tensor *l = m[0]->src[0], *sc = l->src[0];
        ck_assert(sc->op == TG_OP_SCALE && transient(sc) && l->chain_prev == sc && transient(l));
        ck_assert(m[0]->chain_prev == l && transient(m[0]) && p[0]->chain_prev == m[0]);
        tg_tensor *sb = reader(g[0], TG_OP_SOFTMAX_BACK, p[0], 0);
        ck_assert(sb && sb->chain_prev == sb->src[1] && transient(sb->src[1]));
        assert_same_bits(p[0], p[1], "probabilities");
        assert_same_bits(tg_grad(g[0], s[0]), tg_grad(g[1], s[1]), "dscores");
        /* a row's masked entries get probability 0 */
        float *pv = tg_test_read_all(p[0]);
        ck_assert_float_eq(pv[((3 * H + 1) * T + (T - 1)) * T + (T - 2)], 0.0f); /* padded */
        ck_assert_float_eq(pv[5 * T + 6], 0.0f);                                 /* causal */
        ck_assert(pv[5 * T + 5] > 0.0f);
        free(pv);
        for (int k = 0; k < 2; k++)
            tg_graph_free(g[k]);
    }
    tg_backend_free(b);
}
END_TEST

/* A softmax whose rows do not fit in a tile is not fused (log-softmax over a vocabulary). */
START_TEST(test_long_rows_not_fused) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_graph *g = tg_graph_new();
    int64_t sh[2] = {8, TG_CHAIN_TILE + 1};
    tg_tensor *x = input(g, 2, sh, 12, false);
    tg_tensor *sc = tg_scale(x, 0.5f);
    tg_tensor *y = tg_keep(tg_log_softmax(sc));
    CK(tg_graph_run(g, b));
    ck_assert(y->chain_prev == NULL && !chained(sc) && sc->block >= 0);
    float *yv = tg_test_read_all(y);
    for (int r = 0; r < 8; r++) {
        double mx = -1e30, s = 0;
        for (int64_t j = 0; j < sh[1]; j++)
            mx = fmax(mx, 0.5 * val(r * sh[1] + j, 12));
        for (int64_t j = 0; j < sh[1]; j++)
            s += exp(0.5 * val(r * sh[1] + j, 12) - mx);
        for (int64_t j = 0; j < sh[1]; j += 97)
            tg_assert_close(yv[r * sh[1] + j], (float)(0.5 * val(r * sh[1] + j, 12) - mx - log(s)),
                            1e-5, 1e-5);
    }
    free(yv);
    tg_graph_free(g);
    tg_backend_free(b);
}
END_TEST

/* ---- the rules ---- */

enum { NX = 24000 };

/* e = exp(x) is summed (a reader before b) and then b = e + sum: e cannot wait for b's
 * kernel, so b may not take e into its chain. */
START_TEST(test_reader_before_tail) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_graph *g = tg_graph_new();
    int64_t sh[2] = {NX / 100, 100};
    tg_tensor *x = input(g, 2, sh, 7, false);
    tg_tensor *e = tg_exp(tg_scale(x, 0.5f));
    tg_tensor *sum = tg_sum(e, 1, true);
    tg_tensor *y = tg_keep(tg_add(e, sum));
    CK(tg_graph_run(g, b));
    ck_assert(y->chain_prev == NULL && !chained(e) && e->chain_prev == e->src[0]);
    float *yv = tg_test_read_all(y);
    for (int64_t r = 0; r < NX / 100; r++) {
        double s = 0;
        for (int j = 0; j < 100; j++)
            s += exp(0.5 * val(r * 100 + j, 7));
        for (int j = 0; j < 100; j++)
            tg_assert_close(yv[r * 100 + j], (float)(exp(0.5 * val(r * 100 + j, 7)) + s), 1e-5,
                            1e-4);
    }
    free(yv);
    tg_graph_free(g);
    tg_backend_free(b);
}
END_TEST

START_TEST(test_kept_member) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_graph *g = tg_graph_new();
    int64_t sh[1] = {NX};
    tg_tensor *x = input(g, 1, sh, 8, false);
    tg_tensor *t = tg_keep(tg_tanh(x));
    tg_tensor *y = tg_keep(tg_affine(t, 3.0f, 1.0f));
    CK(tg_graph_run(g, b));
    ck_assert(y->chain_prev == t && chained(t) && !transient(t));
    float *tv = tg_test_read_all(t), *yv = tg_test_read_all(y);
    for (int64_t i = 0; i < NX; i++) {
        tg_assert_close(tv[i], tanhf(val(i, 8)), 1e-6, 2e-7);
        ck_assert_float_eq(yv[i], tv[i] * 3.0f + 1.0f);
    }
    free(tv);
    free(yv);
    tg_graph_free(g);
    tg_backend_free(b);
}
END_TEST

/* tests/test_planner.c's in-place chain, fused: x, scale, exp (kept), scale, then 6 times
 * affine + tanh. Chains of 8 and 7; only the kept exp and the two tails need buffers (the
 * second tail in place of the first); the total still counts a buffer per node. */
START_TEST(test_fused_peak) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_graph *g = tg_graph_new();
    int64_t sh[1] = {NX};
    tg_tensor *x = input(g, 1, sh, 11, false);
    tg_tensor *mid = tg_keep(tg_exp(tg_scale(x, 0.5f)));
    tg_tensor *t = tg_scale(mid, 2.0f);
    for (int k = 0; k < 6; k++)
        t = tg_tanh(tg_affine(t, 0.9f, 0.1f));
    tg_tensor *out = tg_keep(t);
    CK(tg_graph_run(g, b));
    size_t sz = (NX * sizeof(float) + TG_ALIGN - 1) / TG_ALIGN * TG_ALIGN;
    ck_assert_uint_eq(tg_graph_total_bytes(g), 16 * sz);
    ck_assert_uint_eq(tg_graph_peak_bytes(g),
                      3 * sz); /* x (an input is never overwritten), mid, tail */
    tg_tensor *head = out;
    while (head->chain_prev)
        head = head->chain_prev;
    ck_assert(chained(mid) && !transient(mid) && out->block == head->src[0]->block);
    float *mv = tg_test_read_all(mid), *ov = tg_test_read_all(out);
    for (int64_t i = 0; i < NX; i++) {
        float m = expf(val(i, 11) * 0.5f), v = m * 2.0f;
        tg_assert_close(mv[i], m, 1e-7, 1e-6);
        for (int k = 0; k < 6; k++)
            v = tanhf(v * 0.9f + 0.1f);
        tg_assert_close(ov[i], v, 1e-6, 1e-5);
    }
    free(mv);
    free(ov);
    tg_graph_free(g);
    tg_backend_free(b);
}
END_TEST

/* 19 elementwise ops in a row: chains of TG_CHAIN_MAX, values as on the host */
START_TEST(test_long_chain) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_graph *g = tg_graph_new();
    int64_t sh[1] = {NX};
    tg_tensor *x = input(g, 1, sh, 9, false), *y = x;
    for (int i = 0; i < 19; i++)
        y = i % 2 ? tg_affine(y, 0.5f, 0.25f) : tg_relu(y);
    tg_keep(y);
    CK(tg_graph_run(g, b));
    int longest = 0, cur = 0; /* members per chain, walking back from the last op */
    for (tg_tensor *m = y; m != x; m = m->src[0]) {
        cur++;
        if (!m->chain_prev) {
            longest = cur > longest ? cur : longest;
            cur = 0;
        }
    }
    ck_assert_int_eq(longest, TG_CHAIN_MAX);
    float *yv = tg_test_read_all(y);
    for (int64_t i = 0; i < NX; i++) {
        float v = val(i, 9);
        for (int k = 0; k < 19; k++)
            v = k % 2 ? v * 0.5f + 0.25f : (v > 0.0f ? v : 0.0f);
        ck_assert_float_eq(yv[i], v);
    }
    free(yv);
    tg_graph_free(g);
    tg_backend_free(b);
}
END_TEST

/* Dropout of n elements (odd sizes; the second thread's share starts off any block boundary)
 * against the Philox reference: element e kept iff unit(word e%4 of group e/4) >= p, at every
 * instruction-set level the process has (isa.h: 32, 16 or 1 counters at a time). */
START_TEST(test_dropout_tiles) {
    const int64_t sizes[] = {37, 1000, 40001, 65557};
    const tg_cpu_isa_level start = tg_cpu_isa();
    for (int run = 0; run < 2 * ((int)start + 1); run++) {
        const int threads = 1 + run % 2;
        tg__cpu_isa_cap((tg_cpu_isa_level)(start - run / 2));
        tg_backend *b;
        CK(tg_backend_cpu_new(threads, &b));
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si];
            tg_graph *g = tg_graph_new();
            tg_graph_set_seed(g, 0x123456789abcULL);
            tg_tensor *x = input(g, 1, &n, 10, false);
            tg_tensor *dr = tg_dropout(tg_add_scalar(x, 100.0f), 0.3f); /* inside a chain */
            tg_tensor *y = tg_keep(tg_affine(dr, 2.0f, 0.5f));
            CK(tg_graph_run(g, b));
            ck_assert(dr->op == TG_OP_DROPOUT && chained(dr) && y->chain_prev == dr);
            uint32_t key[2] = {dr->p.dropout.seed_lo, dr->p.dropout.seed_hi};
            float *yv = tg_test_read_all(y);
            for (int64_t e = 0; e < n; e++) {
                uint32_t ctr[4] = {(uint32_t)(e / 4), 0, dr->p.dropout.stream, 0}, w[4];
                tg_philox4x32(ctr, key, w);
                bool keep = tg_u32_to_unit(w[e % 4]) >= 0.3f;
                float kept = keep ? (val(e, 10) + 100.0f) * (1.0f / (1.0f - 0.3f)) : 0.0f;
                float ref = kept * 2.0f + 0.5f;
                ck_assert_msg(yv[e] == ref, "n %lld element %lld: %g, reference %g", (long long)n,
                              (long long)e, yv[e], ref);
            }
            free(yv);
            tg_graph_free(g);
        }
        tg_backend_free(b);
    }
    tg__cpu_isa_cap(start);
}
END_TEST

/* The keep test at its boundary: p set to an element's own unit value u keeps it (u >= p), the
 * next float above u drops it, below and above 1/2 (where p 2^24 is a whole number or not),
 * every element against the Philox reference, at every level the process has. A threshold off
 * by one word step fails it. */
static void dropout_at(float p, int64_t n, bool *kept) {
    tg_backend *b;
    CK(tg_backend_cpu_new(1, &b));
    tg_graph *g = tg_graph_new();
    tg_graph_set_seed(g, 0xfeedULL);
    tg_tensor *dr = tg_keep(tg_dropout(tg_add_scalar(input(g, 1, &n, 11, false), 100.0f), p));
    CK(tg_graph_run(g, b));
    ck_assert_uint_eq(dr->p.dropout.stream, 0);
    float *v = tg_test_read_all(dr);
    for (int64_t e = 0; e < n; e++)
        kept[e] = v[e] != 0.0f;
    free(v);
    tg_graph_free(g);
    tg_backend_free(b);
}

START_TEST(test_dropout_threshold_edge) {
    enum { N = 4096 };
    const uint32_t key[2] = {0xfeedu, 0};
    float u[N];
    uint32_t low[N];
    for (int e = 0; e < N; e++) {
        uint32_t ctr[4] = {(uint32_t)(e / 4), 0, 0, 0}, w[4];
        tg_philox4x32(ctr, key, w);
        u[e] = tg_u32_to_unit(w[e % 4]);
        low[e] = w[e % 4] & 0xffu;
    }
    /* an element with u in (0.01, 0.49), one in (0.51, 0.99), each with a word whose low byte
     * (below the unit value's 24 bits) is 0: at p = u its word equals the threshold exactly */
    int picks[2] = {-1, -1};
    for (int e = 0; e < N; e++) {
        if (low[e] != 0) continue;
        if (picks[0] < 0 && u[e] > 0.01f && u[e] < 0.49f) picks[0] = e;
        if (picks[1] < 0 && u[e] > 0.51f && u[e] < 0.99f) picks[1] = e;
    }
    ck_assert(picks[0] >= 0 && picks[1] >= 0);
    static bool kept[N];
    const tg_cpu_isa_level start = tg_cpu_isa();
    for (int level = (int)start; level >= 0; level--) {
        tg__cpu_isa_cap((tg_cpu_isa_level)level);
        for (int i = 0; i < 2; i++)
            for (int above = 0; above < 2; above++) {
                const int pe = picks[i];
                const float p = above ? nextafterf(u[pe], 1.0f) : u[pe];
                dropout_at(p, N, kept);
                ck_assert_msg(kept[pe] == !above, "%s: element %d (u %.9g) at p %.9g",
                              tg_cpu_isa_name(), pe, (double)u[pe], (double)p);
                for (int e = 0; e < N; e++)
                    ck_assert_msg(kept[e] == (u[e] >= p), "%s p %.9g element %d (u %.9g)",
                                  tg_cpu_isa_name(), (double)p, e, (double)u[e]);
            }
    }
    tg__cpu_isa_cap(start);
}
END_TEST

/* Broadcast operands gathered tile by tile (k_elementwise.c: operand): x [B, h, n, n] through
 * a masked fill by an i32 mask and an add of an f32 operand, each broadcast from every shape
 * of ones and full dims — a padding mask [B, 1, 1, n] (rows that repeat), a causal mask
 * [1, 1, n, n] (dims merged), [B, 1, n, 1] (the last dim broadcast), ... — at odd sizes, so
 * that tiles and the members' shares start inside rows and inside runs of repeated rows, on 1
 * and 2 threads, fused into one chain and not; every element against the broadcast by hand. */
static int64_t bcast_index(const int64_t *shape, const int64_t *oshape, int64_t e) {
    int64_t idx = 0, stride = 1;
    for (int i = 3; i >= 0; i--) {
        const int64_t c = e % oshape[i];
        e /= oshape[i];
        if (shape[i] > 1) idx += c * stride;
        stride *= shape[i];
    }
    return idx;
}

static void broadcast_operands(int64_t n) {
    const int64_t B = 3, h = 5, xs[4] = {B, h, n, n}, N = B * h * n * n;
    float *ref = malloc((size_t)N * sizeof *ref);
    for (int mask_shape = 0; mask_shape < 16; mask_shape++) {
        /* bit i of mask_shape: dim i of the operands is full, else 1 */
        int64_t ms[4];
        for (int i = 0; i < 4; i++)
            ms[i] = (mask_shape >> i) & 1 ? xs[i] : 1;
        const int64_t mn = ms[0] * ms[1] * ms[2] * ms[3];
        int32_t *mask = malloc((size_t)mn * sizeof *mask);
        for (int64_t i = 0; i < mn; i++)
            mask[i] = (int32_t)((i * 7 + 3) % 5 == 0);
        for (int threads = 1; threads <= 2; threads++)
            for (int fused = 0; fused < 2; fused++) {
                tg_backend *b;
                CK(tg_backend_cpu_new(threads, &b));
                tg_graph *g = tg_graph_new();
                tg_graph_set_fusion(g, fused);
                tg_tensor *x = input(g, 4, xs, 3, false);
                tg_tensor *y =
                    tg_keep(tg_add(tg_masked_fill(tg_scale(x, 0.5f),
                                                  tg_input(g, TG_DTYPE_I32, 4, ms, mask), -7.0f),
                                   input(g, 4, ms, 5, false)));
                CK(tg_graph_run(g, b));
                ck_assert(chained(y->src[0]) == (fused == 1));
                for (int64_t e = 0; e < N; e++) {
                    const int64_t k = bcast_index(ms, xs, e);
                    ref[e] = (mask[k] ? -7.0f : val(e, 3) * 0.5f) + val(k, 5);
                }
                float *v = tg_test_read_all(y);
                for (int64_t e = 0; e < N; e++)
                    ck_assert_msg(v[e] == ref[e],
                                  "operands [%lld,%lld,%lld,%lld], %d threads, fused %d: element "
                                  "%lld is %g, by hand %g",
                                  (long long)ms[0], (long long)ms[1], (long long)ms[2],
                                  (long long)ms[3], threads, fused, (long long)e, (double)v[e],
                                  (double)ref[e]);
                free(v);
                tg_graph_free(g);
                tg_backend_free(b);
            }
        free(mask);
    }
    free(ref);
}

/* n 33: tiles start inside rows; n 32: rows of n·n = 1024 values, a tile's, so that tiles meet
 * the same column and length again and take what the last one gathered where that is right */
START_TEST(test_broadcast_operands) {
    broadcast_operands(33);
    broadcast_operands(32);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("fuse");
    TCase *tc = tcase_create("chains");
    tcase_add_test(tc, test_ffn_chains);
    tcase_add_test(tc, test_relu_preactivation_transient);
    tcase_add_test(tc, test_attention_chain);
    tcase_add_test(tc, test_long_rows_not_fused);
    tcase_add_test(tc, test_reader_before_tail);
    tcase_add_test(tc, test_kept_member);
    tcase_add_test(tc, test_fused_peak);
    tcase_add_test(tc, test_long_chain);
    tcase_add_test(tc, test_dropout_tiles);
    tcase_add_test(tc, test_dropout_threshold_edge);
    tcase_add_test(tc, test_broadcast_operands);
    suite_add_tcase(s, tc);
    return s;
}
