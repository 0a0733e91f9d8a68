/* The memory planner and the executor, tested on a Transformer-sized graph built by hand from
 * the public ops (2 encoder + 2 decoder layers, 4 heads, masked softmax, dropout, residual +
 * post-LN, ReLU FFN, label-smoothed cross-entropy, tg_backward):
 *  - planner on and off give bit-identical losses, kept tensors and parameter gradients
 *    (kernels must not depend on addresses), and the planned peak is well below the sum of
 *    all intermediates;
 *  - pruning: a branch nobody needs is not executed and its parameter gets no gradient;
 *  - kept intermediates survive the run; unkept ones cannot be read;
 *  - re-running a graph accumulates gradients again (exactly twice the first run's);
 *  - in-place reuse never overwrites a value that a later op (forward or backward) still
 *    reads: constructed cases, checked against host arithmetic;
 *  - a product that only a permuted copy reads is written into the copy's buffer (heads merged
 *    and split), bit-identical to the unplanned graph through re-plans;
 *  - a product reading an embedding lookup (a decoder's gathered keys and values) reads the
 *    table's rows itself, the lookup never made, bit-identical to the unfused graph;
 *  - runs are bit-exact for a thread count, and 1 vs 2 threads agree to float tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "tg_check.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        tg_status st_ = (call);                                                                    \
        ck_assert_msg(st_ == TG_OK, "%s failed: %s", #call, tg_error_message());                   \
    } while (0)

/* ---------------------------------------------------------------------------------------- */
/* A small Transformer, built from primitive ops                                             */

typedef struct {
    int B, S, T;   /* batch, source length, target length */
    int d, h, dff; /* width, heads, FFN inner width */
    int V;         /* vocabulary (shared by source and target) */
    int enc, dec;  /* layers */
    float p;       /* dropout */
} cfg_t;

static const cfg_t CFG_SMALL = {8, 12, 10, 64, 4, 128, 24, 2, 2, 0.1f};
/* big enough that every elementwise op and most products run on several threads */
static const cfg_t CFG_WIDE = {32, 24, 20, 64, 4, 256, 40, 1, 1, 0.1f};

static void add_param(tg_store *s, tg_rng *r, const char *name, int ndim, const int64_t *shape,
                      int kind /* 0 xavier, 1 small random (biases), 2 ones */) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *w = malloc((size_t)n * sizeof *w);
    ck_assert_ptr_nonnull(w);
    double a = ndim == 2 ? sqrt(6.0 / (double)(shape[0] + shape[1])) : 0.1;
    for (int64_t i = 0; i < n; i++)
        w[i] = kind == 2 ? 1.0f : (float)((2.0 * tg_rng_uniform(r) - 1.0) * a);
    CK(tg_store_add(s, name, ndim, shape, w, true));
    free(w);
}

/* a + b into buf[128] (parameter names are short; snprintf would draw truncation warnings) */
static const char *cat(char *buf, const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    ck_assert(la + lb < 128);
    memcpy(buf, a, la);
    memcpy(buf + la, b, lb + 1);
    return buf;
}

static void add_linear(tg_store *s, tg_rng *r, const char *pre, int out, int in) {
    char nm[128];
    int64_t ws[2] = {out, in}, bs[1] = {out};
    add_param(s, r, cat(nm, pre, ".weight"), 2, ws, 0);
    add_param(s, r, cat(nm, pre, ".bias"), 1, bs, 1);
}

static void add_norm(tg_store *s, tg_rng *r, const char *pre, int d) {
    char nm[128];
    int64_t ds[1] = {d};
    add_param(s, r, cat(nm, pre, ".weight"), 1, ds, 2);
    add_param(s, r, cat(nm, pre, ".bias"), 1, ds, 1);
}

static void add_attn(tg_store *s, tg_rng *r, const char *pre, int d) {
    const char *proj[4] = {".q_proj", ".k_proj", ".v_proj", ".out_proj"};
    char nm[128];
    for (int i = 0; i < 4; i++)
        add_linear(s, r, cat(nm, pre, proj[i]), d, d);
}

/* A store with every parameter of the model (plus two the model never uses), same values for
 * the same seed. */
static tg_store *make_store(tg_backend *b, const cfg_t *c, uint64_t seed) {
    tg_store *s;
    CK(tg_store_new(b, &s));
    tg_rng r;
    tg_rng_init(&r, seed);
    char nm[128];
    int64_t es[2] = {c->V, c->d};
    add_param(s, &r, "embed.weight", 2, es, 0);
    for (int l = 0; l < c->enc; l++) {
        snprintf(nm, sizeof nm, "encoder.layers.%d.self_attn", l);
        add_attn(s, &r, nm, c->d);
        snprintf(nm, sizeof nm, "encoder.layers.%d.ffn.fc1", l);
        add_linear(s, &r, nm, c->dff, c->d);
        snprintf(nm, sizeof nm, "encoder.layers.%d.ffn.fc2", l);
        add_linear(s, &r, nm, c->d, c->dff);
        for (int k = 1; k <= 2; k++) {
            snprintf(nm, sizeof nm, "encoder.layers.%d.norm%d", l, k);
            add_norm(s, &r, nm, c->d);
        }
    }
    for (int l = 0; l < c->dec; l++) {
        snprintf(nm, sizeof nm, "decoder.layers.%d.self_attn", l);
        add_attn(s, &r, nm, c->d);
        snprintf(nm, sizeof nm, "decoder.layers.%d.cross_attn", l);
        add_attn(s, &r, nm, c->d);
        snprintf(nm, sizeof nm, "decoder.layers.%d.ffn.fc1", l);
        add_linear(s, &r, nm, c->dff, c->d);
        snprintf(nm, sizeof nm, "decoder.layers.%d.ffn.fc2", l);
        add_linear(s, &r, nm, c->d, c->dff);
        for (int k = 1; k <= 3; k++) {
            snprintf(nm, sizeof nm, "decoder.layers.%d.norm%d", l, k);
            add_norm(s, &r, nm, c->d);
        }
    }
    int64_t us[2] = {c->d, c->d};
    add_param(s, &r, "unused_branch.weight", 2, us, 0); /* used only by a pruned branch */
    add_param(s, &r, "never_used.weight", 2, us, 0);    /* never put in a graph */
    return s;
}

typedef struct {
    tg_graph *g;
    tg_store *s;
    const cfg_t *c;
} model_t;

static tg_tensor *P(model_t *m, const char *pre, const char *suffix) {
    char nm[128];
    return tg_param(m->g, m->s, cat(nm, pre, suffix));
}

/* y = x W^T + b over the last axis of x [rows, in] */
static tg_tensor *linear(model_t *m, tg_tensor *x, const char *pre) {
    return tg_add(tg_matmul(x, P(m, pre, ".weight"), false, true), P(m, pre, ".bias"));
}

/* [B*L, d] -> [B, h, L, dk] as a view (the head split costs nothing) */
static tg_tensor *heads(model_t *m, tg_tensor *x, int L) {
    const cfg_t *c = m->c;
    int64_t s4[4] = {c->B, L, c->h, c->d / c->h};
    int perm[4] = {0, 2, 1, 3};
    return tg_permute(tg_reshape(x, 4, s4), perm);
}

/* Multi-head attention of xq [B*n, d] over xkv [B*m, d]; mask broadcasts to [B, h, n, m]
 * (nonzero = masked). *probs receives the attention probabilities (before dropout). */
static tg_tensor *attention(model_t *m, tg_tensor *xq, int n, tg_tensor *xkv, int mlen,
                            tg_tensor *mask, const char *pre, tg_tensor **probs) {
    const cfg_t *c = m->c;
    char nm[128];
    cat(nm, pre, ".q_proj");
    tg_tensor *q = heads(m, linear(m, xq, nm), n);
    cat(nm, pre, ".k_proj");
    tg_tensor *k = heads(m, linear(m, xkv, nm), mlen);
    cat(nm, pre, ".v_proj");
    tg_tensor *v = heads(m, linear(m, xkv, nm), mlen);
    tg_tensor *sc = tg_scale(tg_matmul(q, k, false, true), 1.0f / sqrtf((float)(c->d / c->h)));
    tg_tensor *pr = tg_softmax(tg_masked_fill(sc, mask, -INFINITY));
    if (probs) *probs = pr;
    tg_tensor *ctx = tg_matmul(tg_dropout(pr, c->p), v, false, false); /* [B, h, n, dk] */
    int perm[4] = {0, 2, 1, 3};
    int64_t s2[2] = {(int64_t)c->B * n, c->d};
    tg_tensor *merged = tg_reshape(tg_permute(ctx, perm), 2, s2); /* copies (not contiguous) */
    cat(nm, pre, ".out_proj");
    return linear(m, merged, nm);
}

/* post-LN: LayerNorm(x + Dropout(sub)) */
static tg_tensor *residual(model_t *m, tg_tensor *x, tg_tensor *sub, const char *norm) {
    return tg_layer_norm(tg_add(x, tg_dropout(sub, m->c->p)), P(m, norm, ".weight"),
                         P(m, norm, ".bias"), 1e-5f);
}

static tg_tensor *ffn(model_t *m, tg_tensor *x, const char *pre) {
    char nm[128];
    tg_tensor *hdn = tg_relu(linear(m, x, cat(nm, pre, ".fc1")));
    return linear(m, hdn, cat(nm, pre, ".fc2"));
}

typedef struct {
    tg_tensor *loss, *enc_out, *probs0, *unused_out;
    tg_tensor *unused_param;
} built_t;

/* Deterministic batch: source lengths S - b%4, target lengths T - b%3, ids in [4, V). */
static void make_batch(const cfg_t *c, int32_t *src, int32_t *tin, int32_t *tout, float *smask,
                       float *tmask) {
    for (int b = 0; b < c->B; b++) {
        int ls = c->S - b % 4, lt = c->T - b % 3;
        for (int i = 0; i < c->S; i++) {
            src[b * c->S + i] = i < ls ? 4 + (b * 7 + i * 3) % (c->V - 4) : 0;
            smask[b * c->S + i] = i < ls ? 0.0f : 1.0f;
        }
        for (int i = 0; i < c->T; i++) {
            tout[b * c->T + i] = i < lt ? 4 + (b * 5 + i * 11) % (c->V - 4) : 0;
            tin[b * c->T + i] = i == 0 ? 2 : (i < lt ? tout[b * c->T + i - 1] : 0);
            for (int j = 0; j < c->T; j++) /* causal and key padding */
                tmask[(b * c->T + i) * c->T + j] = (j > i || j >= lt) ? 1.0f : 0.0f;
        }
    }
}

/* Build the whole training graph: forward, loss, backward. with_unused adds a branch (a
 * product with "unused_branch.weight") that nothing needs. */
static built_t build(tg_graph *g, tg_store *s, const cfg_t *c, bool with_unused) {
    model_t m = {g, s, c};
    built_t r = {0};
    int B = c->B, S = c->S, T = c->T;
    int32_t *src = malloc(sizeof(int32_t) * (size_t)(B * S));
    int32_t *tin = malloc(sizeof(int32_t) * (size_t)(B * T));
    int32_t *tout = malloc(sizeof(int32_t) * (size_t)(B * T));
    float *smask = malloc(sizeof(float) * (size_t)(B * S));
    float *tmask = malloc(sizeof(float) * (size_t)(B * T * T));
    ck_assert(src && tin && tout && smask && tmask);
    make_batch(c, src, tin, tout, smask, tmask);
    tg_graph_set_seed(g, 1234);
    int64_t sh_s[1] = {(int64_t)B * S}, sh_t[1] = {(int64_t)B * T};
    int64_t sh_sm[4] = {B, 1, 1, S}, sh_tm[4] = {B, 1, T, T};
    tg_tensor *src_ids = tg_input(g, TG_DTYPE_I32, 1, sh_s, src);
    tg_tensor *tin_ids = tg_input(g, TG_DTYPE_I32, 1, sh_t, tin);
    tg_tensor *tgt = tg_input(g, TG_DTYPE_I32, 1, sh_t, tout);
    tg_tensor *src_mask = tg_input(g, TG_DTYPE_F32, 4, sh_sm, smask);
    tg_tensor *tgt_mask = tg_input(g, TG_DTYPE_F32, 4, sh_tm, tmask);
    free(src);
    free(tin);
    free(tout);
    free(smask);
    free(tmask);
    tg_tensor *E = tg_param(g, s, "embed.weight");
    float emb_scale = sqrtf((float)c->d);
    char nm[128], nm2[128];
    /* encoder */
    tg_tensor *x = tg_dropout(tg_scale(tg_embedding(E, src_ids), emb_scale), c->p);
    for (int l = 0; l < c->enc; l++) {
        snprintf(nm, sizeof nm, "encoder.layers.%d.self_attn", l);
        tg_tensor *a = attention(&m, x, S, x, S, src_mask, nm, l == 0 ? &r.probs0 : NULL);
        snprintf(nm2, sizeof nm2, "encoder.layers.%d.norm1", l);
        x = residual(&m, x, a, nm2);
        snprintf(nm, sizeof nm, "encoder.layers.%d.ffn", l);
        snprintf(nm2, sizeof nm2, "encoder.layers.%d.norm2", l);
        x = residual(&m, x, ffn(&m, x, nm), nm2);
    }
    tg_tensor *mem = x;
    r.enc_out = mem;
    if (with_unused) {
        r.unused_param = tg_param(g, s, "unused_branch.weight");
        r.unused_out = tg_relu(tg_matmul(mem, r.unused_param, false, true));
    }
    /* decoder */
    tg_tensor *y = tg_dropout(tg_scale(tg_embedding(E, tin_ids), emb_scale), c->p);
    for (int l = 0; l < c->dec; l++) {
        snprintf(nm, sizeof nm, "decoder.layers.%d.self_attn", l);
        tg_tensor *a = attention(&m, y, T, y, T, tgt_mask, nm, NULL);
        snprintf(nm2, sizeof nm2, "decoder.layers.%d.norm1", l);
        y = residual(&m, y, a, nm2);
        snprintf(nm, sizeof nm, "decoder.layers.%d.cross_attn", l);
        a = attention(&m, y, T, mem, S, src_mask, nm, NULL);
        snprintf(nm2, sizeof nm2, "decoder.layers.%d.norm2", l);
        y = residual(&m, y, a, nm2);
        snprintf(nm, sizeof nm, "decoder.layers.%d.ffn", l);
        snprintf(nm2, sizeof nm2, "decoder.layers.%d.norm3", l);
        y = residual(&m, y, ffn(&m, y, nm), nm2);
    }
    tg_tensor *logits = tg_matmul(y, E, false, true); /* tied output projection */
    r.loss = tg_keep(tg_cross_entropy(logits, tgt, 0.1f, 0, TG_REDUCE_MEAN));
    const char *msg;
    ck_assert_msg(tg_graph_status(g, &msg) == TG_OK, "building: %s", msg);
    CK(tg_backward(g, r.loss));
    return r;
}

/* Gradients of every trainable parameter, concatenated. */
static float *all_grads(tg_store *s, int64_t *n_out) {
    int64_t n = tg_store_total_numel(s), off = 0;
    float *g = malloc((size_t)n * sizeof *g);
    ck_assert_ptr_nonnull(g);
    for (int64_t i = 0; i < tg_store_count(s); i++) {
        int64_t k = tg_store_numel(s, i);
        CK(tg_store_read_grad(s, i, g + off, k));
        off += k;
    }
    *n_out = n;
    return g;
}

typedef struct {
    float loss;
    float *grads, *enc, *probs;
    int64_t ngrad, nenc, nprobs;
    size_t peak, total;
    int64_t nodes, exec;
} result_t;

static void free_result(result_t *r) {
    free(r->grads);
    free(r->enc);
    free(r->probs);
}

/* Build on a fresh store, run once with the given planner setting and thread count. */
static result_t run_model(const cfg_t *c, bool planner, int threads) {
    tg_backend *b;
    CK(tg_backend_cpu_new(threads, &b));
    tg_store *s = make_store(b, c, 42);
    tg_graph *g = tg_graph_new();
    ck_assert_ptr_nonnull(g);
    tg_graph_set_planner(g, planner);
    built_t m = build(g, s, c, false);
    tg_keep(m.enc_out);
    tg_keep(m.probs0);
    CK(tg_graph_run(g, b));
    result_t r = {0};
    r.loss = tg_tensor_item(m.loss);
    r.grads = all_grads(s, &r.ngrad);
    r.enc = tg_test_read_all(m.enc_out);
    r.nenc = tg_tensor_numel(m.enc_out);
    r.probs = tg_test_read_all(m.probs0);
    r.nprobs = tg_tensor_numel(m.probs0);
    r.peak = tg_graph_peak_bytes(g);
    r.total = tg_graph_total_bytes(g);
    r.nodes = tg_graph_node_count(g);
    r.exec = tg_graph_exec_count(g);
    tg_graph_free(g);
    tg_store_free(s);
    tg_backend_free(b);
    return r;
}

static void assert_same(const result_t *a, const result_t *b, const char *what) {
    ck_assert_msg(memcmp(&a->loss, &b->loss, sizeof a->loss) == 0, "%s: loss %.9g vs %.9g", what,
                  (double)a->loss, (double)b->loss);
    ck_assert_int_eq(a->ngrad, b->ngrad);
    for (int64_t i = 0; i < a->ngrad; i++)
        ck_assert_msg(memcmp(&a->grads[i], &b->grads[i], sizeof(float)) == 0,
                      "%s: gradient element %lld: %.9g vs %.9g", what, (long long)i,
                      (double)a->grads[i], (double)b->grads[i]);
    ck_assert_msg(memcmp(a->enc, b->enc, (size_t)a->nenc * sizeof(float)) == 0,
                  "%s: kept encoder output differs", what);
    ck_assert_msg(memcmp(a->probs, b->probs, (size_t)a->nprobs * sizeof(float)) == 0,
                  "%s: kept attention probabilities differ", what);
}

/* ---------------------------------------------------------------------------------------- */

START_TEST(test_planner_on_off_bit_identical) {
    result_t on = run_model(&CFG_SMALL, true, 2), off = run_model(&CFG_SMALL, false, 2);
    ck_assert_msg(isfinite(on.loss) && on.loss > 0.0f, "loss %g", (double)on.loss);
    assert_same(&on, &off, "planner on vs off");
    /* gradients are not trivially zero */
    double norm = 0.0;
    for (int64_t i = 0; i < on.ngrad; i++)
        norm += (double)on.grads[i] * on.grads[i];
    ck_assert_msg(norm > 1e-6, "gradient norm^2 %g", norm);
    /* planner off: every block separate, so its peak is the total */
    ck_assert_uint_eq(off.peak, off.total);
    ck_assert_uint_eq(on.total, off.total);
    ck_assert_int_eq(on.exec, off.exec);
    printf("planner: %lld nodes, %lld executed, peak %zu bytes of %zu total (%.1f %%)\n",
           (long long)on.nodes, (long long)on.exec, on.peak, on.total,
           100.0 * (double)on.peak / (double)on.total);
    ck_assert_msg(on.peak * 2 < on.total, "planned peak %zu not below 50%% of total %zu", on.peak,
                  on.total);
    free_result(&on);
    free_result(&off);
}
END_TEST

/* The kept intermediates are readable and hold what they should: softmax rows sum to 1 with
 * exact zeros on padded keys; layer-norm outputs (gain 1 + bias) have the right mean. */
START_TEST(test_kept_intermediates) {
    const cfg_t *c = &CFG_SMALL;
    result_t r = run_model(c, true, 2);
    int L = c->S, H = c->h;
    for (int b = 0; b < c->B; b++) {
        int ls = c->S - b % 4;
        for (int hh = 0; hh < H; hh++)
            for (int i = 0; i < L; i++) {
                const float *row = r.probs + (((int64_t)b * H + hh) * L + i) * L;
                double sum = 0.0;
                for (int j = 0; j < L; j++) {
                    if (j >= ls)
                        ck_assert_msg(row[j] == 0.0f, "masked key %d has p %g", j, (double)row[j]);
                    ck_assert(row[j] >= 0.0f);
                    sum += row[j];
                }
                tg_assert_close(sum, 1.0, 1e-5, 0.0);
            }
    }
    for (int64_t i = 0; i < r.nenc; i++)
        ck_assert(isfinite(r.enc[i]));
    free_result(&r);
}
END_TEST

/* A tensor that was not kept cannot be read after the run (its buffer was reused). */
START_TEST(test_unkept_not_readable) {
    tg_backend *b;
    CK(tg_backend_cpu_new(1, &b));
    tg_store *s = make_store(b, &CFG_SMALL, 42);
    tg_graph *g = tg_graph_new();
    built_t m = build(g, s, &CFG_SMALL, false);
    float tmp[1];
    ck_assert_int_eq(tg_tensor_read(m.loss, tmp, sizeof tmp), TG_ERR_STATE); /* not run yet */
    CK(tg_graph_run(g, b));
    float *buf = malloc((size_t)tg_tensor_numel(m.enc_out) * sizeof(float));
    ck_assert_int_eq(
        tg_tensor_read(m.enc_out, buf, (size_t)tg_tensor_numel(m.enc_out) * sizeof(float)),
        TG_ERR_STATE);
    tg_assert_msg_has(tg_error_message(), "not kept");
    free(buf);
    tg_graph_free(g);
    tg_store_free(s);
    tg_backend_free(b);
}
END_TEST

/* An unused branch is pruned: the same executed node count as without it, its nodes never run,
 * and the gradient of its parameter (and of a parameter never used) stays zero. */
START_TEST(test_prune_unused_branch) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_store *s1 = make_store(b, &CFG_SMALL, 42), *s2 = make_store(b, &CFG_SMALL, 42);
    tg_graph *g1 = tg_graph_new(), *g2 = tg_graph_new();
    built_t m1 = build(g1, s1, &CFG_SMALL, false);
    built_t m2 = build(g2, s2, &CFG_SMALL, true);
    (void)m1;
    CK(tg_graph_run(g1, b));
    CK(tg_graph_run(g2, b));
    ck_assert_int_gt(tg_graph_node_count(g2), tg_graph_node_count(g1));
    ck_assert_int_eq(tg_graph_exec_count(g2), tg_graph_exec_count(g1));
    ck_assert_int_lt(tg_graph_exec_count(g2), tg_graph_node_count(g2));
    /* no node of the branch was scheduled */
    ck_assert_int_eq(m2.unused_out->pos, -1);
    ck_assert_int_eq(m2.unused_out->src[0]->pos, -1); /* the matmul */
    ck_assert_int_eq(m2.unused_param->pos, -1);
    for (int64_t i = 0; i < tg_graph_node_count(g2); i++) {
        const tg_tensor *t = g2->nodes[i];
        if (t->op == TG_OP_GRAD_ACC)
            ck_assert_msg(t->param != tg_store_find(s2, "unused_branch.weight"),
                          "a gradient node exists for the unused parameter");
    }
    const char *zero_names[2] = {"unused_branch.weight", "never_used.weight"};
    for (int k = 0; k < 2; k++) {
        int64_t i = tg_store_find(s2, zero_names[k]), n = tg_store_numel(s2, i);
        float *gr = malloc((size_t)n * sizeof *gr);
        CK(tg_store_read_grad(s2, i, gr, n));
        for (int64_t j = 0; j < n; j++)
            ck_assert_msg(gr[j] == 0.0f, "%s grad[%lld] = %g", zero_names[k], (long long)j,
                          (double)gr[j]);
        free(gr);
    }
    /* the branch changes nothing else: same loss and gradients as without it */
    ck_assert_float_eq(tg_tensor_item(m1.loss), tg_tensor_item(m2.loss));
    int64_t n1, n2;
    float *gr1 = all_grads(s1, &n1), *gr2 = all_grads(s2, &n2);
    ck_assert_int_eq(n1, n2);
    ck_assert(memcmp(gr1, gr2, (size_t)n1 * sizeof(float)) == 0);
    free(gr1);
    free(gr2);
    /* keeping the branch's output makes it run */
    tg_keep(m2.unused_out);
    CK(tg_graph_run(g2, b));
    ck_assert_int_gt(tg_graph_exec_count(g2), tg_graph_exec_count(g1));
    ck_assert_int_ge(m2.unused_out->pos, 0);
    tg_graph_free(g1);
    tg_graph_free(g2);
    tg_store_free(s1);
    tg_store_free(s2);
    tg_backend_free(b);
}
END_TEST

/* Running a graph again gives the same loss and accumulates the gradients again: after two
 * runs every gradient is exactly twice the first run's (g + g is exact in float). */
START_TEST(test_rerun_accumulates) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_store *s = make_store(b, &CFG_SMALL, 42);
    tg_graph *g = tg_graph_new();
    built_t m = build(g, s, &CFG_SMALL, false);
    CK(tg_graph_run(g, b));
    float l1 = tg_tensor_item(m.loss);
    int64_t n;
    float *g1 = all_grads(s, &n);
    CK(tg_graph_run(g, b));
    float l2 = tg_tensor_item(m.loss);
    float *g2 = all_grads(s, &n);
    ck_assert(memcmp(&l1, &l2, sizeof l1) == 0);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; i++) {
        float twice = g1[i] + g1[i];
        ck_assert_msg(memcmp(&twice, &g2[i], sizeof twice) == 0,
                      "grad %lld: %.9g after 2 runs, %.9g after 1", (long long)i, (double)g2[i],
                      (double)g1[i]);
        nonzero += g1[i] != 0.0f;
    }
    ck_assert_int_gt(nonzero, n / 2);
    /* zero_grad, run again: back to the first run's values */
    CK(tg_store_zero_grad(s));
    CK(tg_graph_run(g, b));
    float *g3 = all_grads(s, &n);
    ck_assert(memcmp(g1, g3, (size_t)n * sizeof(float)) == 0);
    free(g1);
    free(g2);
    free(g3);
    tg_graph_free(g);
    tg_store_free(s);
    tg_backend_free(b);
}
END_TEST

/* Two runs with 2 threads are bit-identical; 1 vs 2 threads agree to float tolerance. The wide
 * configuration puts most elementwise ops above the parallel threshold and the projections on
 * the BLAS path (split across threads). */
START_TEST(test_threads) {
    const cfg_t *c = &CFG_WIDE;
    result_t a = run_model(c, true, 2), b2 = run_model(c, true, 2), one = run_model(c, true, 1);
    assert_same(&a, &b2, "two runs with 2 threads");
    tg_assert_close(one.loss, a.loss, 1e-6, 1e-5);
    double gmax = 0.0;
    for (int64_t i = 0; i < a.ngrad; i++)
        gmax = fmax(gmax, fabs(a.grads[i]));
    for (int64_t i = 0; i < a.ngrad; i++)
        ck_assert_msg(fabs(one.grads[i] - a.grads[i]) <= 1e-4 * gmax + 1e-3 * fabs(a.grads[i]),
                      "grad %lld: 1 thread %.9g, 2 threads %.9g", (long long)i,
                      (double)one.grads[i], (double)a.grads[i]);
    for (int64_t i = 0; i < a.nenc; i++)
        tg_assert_close(one.enc[i], a.enc[i], 1e-5, 1e-4);
    printf("threads: loss 1 thread %.9g, 2 threads %.9g; wide graph peak %zu of %zu bytes\n",
           (double)one.loss, (double)a.loss, a.peak, a.total);
    free_result(&a);
    free_result(&b2);
    free_result(&one);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* In-place reuse                                                                            */

enum { NX = 20000 }; /* above the parallel threshold */

static float xval(int64_t i) {
    return (float)((i * 37 % 101) - 50) / 40.0f;
}

static tg_tensor *input_x(tg_graph *g, int64_t n) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = xval(i);
    int64_t sh[2] = {n / 100, 100};
    tg_tensor *t = tg_input(g, TG_DTYPE_F32, 2, sh, x);
    free(x);
    return t;
}

static void run_both(tg_graph *g, tg_backend *b) {
    CK(tg_graph_run(g, b));
    const char *msg;
    ck_assert_msg(tg_graph_status(g, &msg) == TG_OK, "%s", msg);
}

/* e = exp(x/2) feeds two consumers after it; neither may see the other's in-place write. */
START_TEST(test_inplace_two_consumers) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    for (int planner = 0; planner < 2; planner++) {
        tg_graph *g = tg_graph_new();
        tg_graph_set_planner(g, planner);
        tg_tensor *x = input_x(g, NX);
        tg_tensor *e = tg_exp(tg_scale(x, 0.5f));
        tg_tensor *c1 = tg_scale(e, 2.0f); /* elementwise, could write into e */
        tg_tensor *c2 = tg_tanh(e);        /* reads e after c1 */
        tg_tensor *c3 = tg_relu(e);        /* and again */
        tg_tensor *out = tg_keep(tg_add(tg_add(c1, c2), c3));
        tg_tensor *twice = tg_keep(tg_add(c3, c3)); /* both inputs the same tensor */
        run_both(g, b);
        float *o = tg_test_read_all(out), *tw = tg_test_read_all(twice);
        for (int64_t i = 0; i < NX; i++) {
            float ev = expf(xval(i) * 0.5f);
            float ref = (ev * 2.0f + tanhf(ev)) + ev;
            tg_assert_close(o[i], ref, 1e-6, 1e-6);
            tg_assert_close(tw[i], 2.0f * ev, 1e-6, 1e-6);
        }
        free(o);
        free(tw);
        tg_graph_free(g);
    }
    tg_backend_free(b);
}
END_TEST

/* The second reader goes through a view (reshape) created and consumed later. */
START_TEST(test_inplace_reader_through_view) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_graph *g = tg_graph_new();
    tg_tensor *x = input_x(g, NX);
    tg_tensor *e = tg_exp(tg_scale(x, 0.25f));
    int64_t sh[3] = {NX / 200, 2, 100};
    tg_tensor *v = tg_reshape(e, 3, sh);              /* a view of e's buffer */
    tg_tensor *r = tg_keep(tg_affine(e, 3.0f, 1.0f)); /* kept: e must survive anyway */
    tg_tensor *n1 = tg_neg(e);                        /* may not write into e: v reads it later */
    tg_tensor *w = tg_keep(tg_mul(tg_reshape(n1, 3, sh), v));
    tg_tensor *sl = tg_keep(tg_scale(tg_slice(v, 1, 1, 2), 10.0f)); /* strided view of e */
    run_both(g, b);
    float *rv = tg_test_read_all(r), *wv = tg_test_read_all(w), *sv = tg_test_read_all(sl);
    for (int64_t i = 0; i < NX; i++) {
        float ev = expf(xval(i) * 0.25f);
        tg_assert_close(rv[i], ev * 3.0f + 1.0f, 1e-6, 1e-6);
        tg_assert_close(wv[i], -ev * ev, 1e-6, 1e-6);
    }
    for (int64_t k = 0; k < NX / 200; k++)
        for (int j = 0; j < 100; j++)
            tg_assert_close(sv[k * 100 + j], 10.0f * expf(xval(k * 200 + 100 + j) * 0.25f), 1e-6,
                            1e-6);
    free(rv);
    free(wv);
    free(sv);
    tg_graph_free(g);
    tg_backend_free(b);
}
END_TEST

/* One op reads a buffer both whole and through a broadcast view of its first row: writing the
 * result in place would change row 0 before the other rows have read it. */
START_TEST(test_inplace_input_and_view_of_it) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_graph *g = tg_graph_new();
    tg_tensor *x = input_x(g, NX); /* [NX/100, 100] */
    tg_tensor *e = tg_exp(tg_scale(x, 0.5f));
    tg_tensor *row0 = tg_slice(e, 0, 0, 1); /* [1, 100], a contiguous view of e */
    tg_tensor *d = tg_keep(tg_sub(e, row0));
    run_both(g, b);
    float *dv = tg_test_read_all(d);
    for (int64_t i = 0; i < NX; i++) {
        float ref = expf(xval(i) * 0.5f) - expf(xval(i % 100) * 0.5f);
        tg_assert_close(dv[i], ref, 1e-6, 1e-6);
    }
    free(dv);
    tg_graph_free(g);
    tg_backend_free(b);
}
END_TEST

/* The backward pass reads forward values (tanh's output, relu's input): in-place ops of the
 * forward that come after must not have destroyed them. dL/dx checked against calculus. */
START_TEST(test_inplace_backward_reads_forward) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_graph *g = tg_graph_new();
    tg_tensor *x = tg_requires_grad(input_x(g, NX));
    tg_tensor *y = tg_tanh(tg_scale(x, 1.5f));       /* backward reads y */
    tg_tensor *z = tg_scale(y, 3.0f);                /* y's last forward reader */
    tg_tensor *r = tg_relu(tg_add_scalar(z, -0.5f)); /* backward reads relu's input */
    tg_tensor *q = tg_mul(r, r);                     /* r*r, then in place chains */
    tg_tensor *loss = tg_keep(tg_sum_all(tg_exp(tg_scale(q, 0.01f))));
    CK(tg_backward(g, loss));
    tg_tensor *gx = tg_grad(g, x);
    ck_assert_ptr_nonnull(gx);
    run_both(g, b);
    float *gv = tg_test_read_all(gx);
    double lref = 0.0;
    for (int64_t i = 0; i < NX; i++) {
        double xv = xval(i), yv = tanh(1.5 * xv), zv = 3.0 * yv - 0.5, rv = zv > 0 ? zv : 0.0;
        double ev = exp(0.01 * rv * rv);
        lref += ev;
        /* dL/dx = e * 0.01 * 2r * [z>0] * 3 * (1 - y^2) * 1.5 */
        double gref = ev * 0.02 * rv * (zv > 0 ? 1.0 : 0.0) * 3.0 * (1.0 - yv * yv) * 1.5;
        tg_assert_close(gv[i], gref, 1e-6, 1e-4);
    }
    tg_assert_close(tg_tensor_item(loss), lref, 1e-3, 1e-5);
    free(gv);
    tg_graph_free(g);
    tg_backend_free(b);
}
END_TEST

/* Layout fusion (core/plan.c, into_copies): heads merged after a product, [B, h, n, w] ->
 * [B, n, h·w], and heads split before one (q), whose gradient merges them back. Planned, the two
 * products write straight into their copies' buffers (TG_TF_INTO, the copies fused), a product
 * that something else also reads (kept, or read through a view of its own) is left alone, and
 * every value — forward, kept,
 * gradient — is bit for bit what the unplanned graph computes, through re-plans both ways. */
enum { LB = 3, LH = 4, LN = 7, LW = 5 };

static void layout_graph(tg_graph *g, tg_tensor **out, tg_tensor **gx, tg_tensor **prod,
                         tg_tensor **copy, tg_tensor **bprod, int other) {
    int64_t sx[3] = {LB, LN, LH * LW}, sy[4] = {LB, LH, LW, LN};
    float *x = malloc(sizeof(float) * LB * LN * LH * LW), *y = malloc(sizeof(float) * LB * LH * LW * LN);
    for (int64_t i = 0; i < LB * LN * LH * LW; i++)
        x[i] = xval(i), y[i] = xval(3 * i + 1);
    tg_tensor *X = tg_requires_grad(tg_input(g, TG_DTYPE_F32, 3, sx, x));
    tg_tensor *Y = tg_input(g, TG_DTYPE_F32, 4, sy, y);
    free(x), free(y);
    static const int perm[4] = {0, 2, 1, 3};
    int64_t s4[4] = {LB, LN, LH, LW}, s3[3] = {LB, LN, LH * LW};
    tg_tensor *q = tg_permute(tg_reshape(X, 4, s4), perm); /* split: [B, h, n, w], a view */
    tg_tensor *sc = tg_matmul(q, Y, false, false);         /* [B, h, n, n] */
    tg_tensor *vh = tg_permute(tg_reshape(tg_scale(X, -0.5f), 4, s4), perm); /* a copy of X */
    tg_tensor *o = tg_matmul(tg_softmax(sc), vh, false, false);
    if (other == 1) tg_keep(o);
    if (other == 2) { /* another reader, through a view: not part of the loss */
        int64_t flat[1] = {LB * LH * LN * LW};
        tg_keep(tg_sum_all(tg_reshape(o, 1, flat)));
    }
    tg_tensor *m = tg_reshape(tg_permute(o, perm), 3, s3); /* merge: a copy, then a view */
    *out = tg_keep(tg_tanh(m));
    CK(tg_backward(g, tg_sum_all(tg_mul(*out, *out))));
    *gx = tg_grad(g, X);
    *prod = o;
    *copy = m->src[0];
    /* the gradient of q's split merges heads back: a contiguous copy of a permuted product */
    *bprod = NULL;
    for (int64_t i = 0; i < g->n; i++) {
        tg_tensor *t = g->nodes[i];
        if (t->op == TG_OP_CONT && t->src[0]->op == TG_OP_PERMUTE && t->src[0]->src[0] != o &&
            t->src[0]->src[0]->op == TG_OP_MATMUL)
            *bprod = t->src[0]->src[0];
    }
}

START_TEST(test_into_copies) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    float *ref_out = NULL, *ref_gx = NULL;
    const int64_t n = LB * LN * LH * LW;
    /* keep: the product read by its copy alone; kept; read elsewhere */
    for (int keep = 0; keep < 3; keep++)
        for (int planner = 0; planner < 2; planner++) {
            tg_graph *g = tg_graph_new();
            tg_graph_set_planner(g, planner);
            tg_tensor *out, *gx, *prod, *copy, *bprod;
            layout_graph(g, &out, &gx, &prod, &copy, &bprod, keep);
            ck_assert_ptr_nonnull(bprod);
            ck_assert_int_eq(copy->op, TG_OP_CONT);
            for (int rerun = 0; rerun < 3; rerun++) {
                if (rerun == 1) CK(tg_graph_plan(g, b)); /* undone and laid out again */
                if (rerun == 2) {                         /* and the other way */
                    tg_graph_set_planner(g, !planner);
                    CK(tg_graph_plan(g, b));
                }
                const bool on = rerun == 2 ? !planner : planner;
                run_both(g, b);
                ck_assert_msg(!!(prod->flags & TG_TF_INTO) == (on && !keep),
                              "planner %d, kept %d, run %d: the merge's product into its copy: %d",
                              on, keep, rerun, !!(prod->flags & TG_TF_INTO));
                ck_assert(!!(copy->flags & TG_TF_FUSED) == (on && !keep));
                ck_assert(!!(bprod->flags & TG_TF_INTO) == on);
                if (on && !keep) ck_assert_ptr_eq(prod->data, copy->data);
                float *ov = tg_test_read_all(out), *gv = tg_test_read_all(gx);
                if (!ref_out) {
                    ref_out = ov, ref_gx = gv;
                    continue;
                }
                ck_assert_msg(memcmp(ov, ref_out, sizeof(float) * (size_t)n) == 0,
                              "planner %d kept %d run %d: output differs", on, keep, rerun);
                ck_assert_msg(memcmp(gv, ref_gx, sizeof(float) * (size_t)n) == 0,
                              "planner %d kept %d run %d: gradient differs", on, keep, rerun);
                if (keep == 1) {
                    float *pv = tg_test_read_all(prod); /* the kept product: its own layout */
                    ck_assert(isfinite(pv[0]) && isfinite(pv[LB * LH * LN * LW - 1]));
                    free(pv);
                }
                free(ov), free(gv);
            }
            tg_graph_free(g);
        }
    /* the values themselves: out = tanh(merge(softmax(q Y) v)), v = -x/2 split like q, at one
     * element, on the host */
    double acc = 0.0;
    {
        const int bb = 1, i = 2, hh = 3, c = 4; /* out[b, i, hh*w + c] */
        double sc[LN], mx = -1e30, z = 0.0;
        for (int j = 0; j < LN; j++) {
            sc[j] = 0.0;
            for (int k = 0; k < LW; k++)
                sc[j] += (double)xval(((bb * LN + i) * LH + hh) * LW + k) *
                         (double)xval(3 * (((bb * LH + hh) * LW + k) * LN + j) + 1);
            mx = sc[j] > mx ? sc[j] : mx;
        }
        for (int j = 0; j < LN; j++)
            z += exp(sc[j] - mx);
        for (int j = 0; j < LN; j++)
            acc += exp(sc[j] - mx) / z * -0.5 * (double)xval(((bb * LN + j) * LH + hh) * LW + c);
        tg_assert_close(ref_out[(bb * LN + i) * LH * LW + hh * LW + c], tanh(acc), 1e-5, 1e-5);
    }
    free(ref_out), free(ref_gx);
    tg_backend_free(b);
}
END_TEST

/* Lookup fusion (core/plan.c, fuse_lookups): a decoder step's attention over keys and values
 * gathered by ids from tables ([R, t, w] lookups split into heads), the scores over t keys by
 * dot products (t 9) or tiles (t 20, 4 queries), the context merged into [R, n, h·w] (its
 * product written into its copy). Fused, the lookups are never made (flagged TG_TF_LOOKUP, less
 * memory) and every value is bit for bit what the unfused graph computes; a lookup also read
 * elsewhere — a kept view of it, another kernel — is made as before; an id outside the table is
 * an error, as it is for the lookup's own kernel. */
enum { QR = 3, QH = 3, QW = 8, QV = 40 };

typedef struct {
    tg_tensor *out, *ke, *ve;
} lookup_graph_t;

static lookup_graph_t lookup_graph(tg_graph *g, tg_store *st, int t, int n, int other, int bad) {
    const int64_t w = QH * QW;
    int32_t *ids = malloc(sizeof(int32_t) * QR * (size_t)t);
    float *q = malloc(sizeof(float) * QR * QH * (size_t)n * QW);
    for (int i = 0; i < QR * t; i++)
        ids[i] = (int32_t)((i * 7 + 3) % QV); /* repeats across rows */
    if (bad) ids[QR * t - 2] = QV;
    for (int64_t i = 0; i < QR * QH * n * QW; i++)
        q[i] = xval(5 * i + 2);
    int64_t si[2] = {QR, t}, sq[4] = {QR, QH, n, QW}, s4[4] = {QR, t, QH, QW}, s3[3] = {QR, n, w};
    tg_tensor *I = tg_input(g, TG_DTYPE_I32, 2, si, ids), *Q = tg_input(g, TG_DTYPE_F32, 4, sq, q);
    free(ids), free(q);
    static const int perm[4] = {0, 2, 1, 3};
    lookup_graph_t r;
    r.ke = tg_embedding(tg_param(g, st, "kt"), I);
    r.ve = tg_embedding(tg_param(g, st, "vt"), I);
    tg_tensor *kc = tg_permute(tg_reshape(r.ke, 4, s4), perm); /* [R, h, t, w]: views */
    tg_tensor *vc = tg_permute(tg_reshape(r.ve, 4, s4), perm);
    if (other == 1) tg_keep(kc);
    if (other == 2) tg_keep(tg_sum_all(r.ve));
    tg_tensor *p = tg_softmax(tg_scale(tg_matmul(Q, kc, false, true), 0.35f));
    tg_tensor *o = tg_matmul(p, vc, false, false); /* [R, h, n, w] */
    r.out = tg_keep(tg_reshape(tg_permute(o, perm), 3, s3));
    return r;
}

START_TEST(test_lookup_reads) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_store *st;
    CK(tg_store_new(b, &st));
    tg_rng rng;
    tg_rng_init(&rng, 5);
    const int64_t tab[2] = {QV, QH * QW};
    add_param(st, &rng, "kt", 2, tab, 1);
    add_param(st, &rng, "vt", 2, tab, 1);
    static const int shapes[2][2] = {{9, 1}, {20, 4}}; /* t keys, n queries */
    for (int si = 0; si < 2; si++)
        for (int other = 0; other < 3; other++) {
            const int t = shapes[si][0], n = shapes[si][1];
            float *ref = NULL;
            size_t ref_peak = 0;
            /* unfused, fused, and the planner off */
            for (int mode = 0; mode < 3; mode++) {
                tg_graph *g = tg_graph_new();
                tg_graph_set_fusion(g, mode == 1);
                tg_graph_set_planner(g, mode != 2);
                lookup_graph_t r = lookup_graph(g, st, t, n, other, 0);
                run_both(g, b);
                const bool fused = mode == 1;
                ck_assert_msg(!!(r.ke->flags & TG_TF_LOOKUP) == (fused && other != 1),
                              "t %d, other %d, mode %d: keys' lookup fused %d", t, other, mode,
                              !!(r.ke->flags & TG_TF_LOOKUP));
                ck_assert(!!(r.ve->flags & TG_TF_LOOKUP) == (fused && other != 2));
                float *v = tg_test_read_all(r.out);
                if (!ref) {
                    ref = v;
                    ref_peak = tg_graph_peak_bytes(g);
                } else {
                    ck_assert_msg(memcmp(v, ref, sizeof(float) * QR * QH * (size_t)(n * QW)) == 0,
                                  "t %d, other %d, mode %d: the context differs", t, other, mode);
                    if (fused && !other) ck_assert(tg_graph_peak_bytes(g) < ref_peak);
                    free(v);
                }
                tg_graph_free(g);
            }
            free(ref);
        }
    /* an id outside the table: the fused product says so */
    tg_graph *g = tg_graph_new();
    lookup_graph_t r = lookup_graph(g, st, 9, 1, 0, 1);
    ck_assert(tg_graph_run(g, b) == TG_ERR_INVALID);
    ck_assert(r.ke->flags & TG_TF_LOOKUP);
    tg_assert_msg_has(tg_error_message(), "outside [0, 40)");
    tg_graph_free(g);
    tg_store_free(st);
    tg_backend_free(b);
}
END_TEST

/* A chain of elementwise ops runs in place: the peak is two buffers (the input leaf, which
 * is never overwritten, and one shared by the whole chain), the total one per node. A kept
 * tensor in the middle of the chain is not overwritten. */
START_TEST(test_inplace_chain_peak) {
    tg_backend *b;
    CK(tg_backend_cpu_new(2, &b));
    tg_graph *g = tg_graph_new();
    tg_graph_set_fusion(g, false); /* fused, the chain would need no buffers (tests/test_fuse.c) */
    tg_tensor *x = input_x(g, NX);
    tg_tensor *t = tg_scale(x, 0.5f);
    t = tg_exp(t);
    tg_tensor *mid = tg_keep(t);
    t = tg_scale(t, 2.0f); /* mid is kept: this one needs a new buffer */
    for (int k = 0; k < 6; k++)
        t = tg_tanh(tg_affine(t, 0.9f, 0.1f));
    tg_tensor *out = tg_keep(t);
    run_both(g, b);
    size_t sz = (NX * sizeof(float) + TG_ALIGN - 1) / TG_ALIGN * TG_ALIGN;
    /* x, scale, exp, scale, 12 chain ops */
    ck_assert_uint_eq(tg_graph_total_bytes(g), 16 * sz);
    /* mid (kept, written in place of the first scale) and the chain's buffer, which reuses
     * x's once the first scale has read it */
    ck_assert_uint_eq(tg_graph_peak_bytes(g), 2 * sz);
    float *mv = tg_test_read_all(mid), *ov = tg_test_read_all(out);
    for (int64_t i = 0; i < NX; i++) {
        float m = expf(xval(i) * 0.5f), v = m * 2.0f;
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

/* Planning without running reports the same numbers as the run, and prunes the same. */
START_TEST(test_plan_without_run) {
    tg_backend *b;
    CK(tg_backend_cpu_new(1, &b));
    tg_store *s = make_store(b, &CFG_SMALL, 7);
    tg_graph *g = tg_graph_new();
    build(g, s, &CFG_SMALL, true);
    CK(tg_graph_plan(g, b));
    size_t peak = tg_graph_peak_bytes(g), total = tg_graph_total_bytes(g);
    int64_t ex = tg_graph_exec_count(g);
    ck_assert_uint_gt(peak, 0);
    CK(tg_graph_run(g, b));
    ck_assert_uint_eq(tg_graph_peak_bytes(g), peak);
    ck_assert_uint_eq(tg_graph_total_bytes(g), total);
    ck_assert_int_eq(tg_graph_exec_count(g), ex);
    tg_graph_free(g);
    tg_store_free(s);
    tg_backend_free(b);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("planner");
    TCase *tc = tcase_create("transformer");
    tcase_add_test(tc, test_planner_on_off_bit_identical);
    tcase_add_test(tc, test_kept_intermediates);
    tcase_add_test(tc, test_unkept_not_readable);
    tcase_add_test(tc, test_prune_unused_branch);
    tcase_add_test(tc, test_rerun_accumulates);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_plan_without_run);
    suite_add_tcase(s, tc);
    TCase *ip = tcase_create("inplace");
    tcase_add_test(ip, test_inplace_two_consumers);
    tcase_add_test(ip, test_inplace_reader_through_view);
    tcase_add_test(ip, test_inplace_input_and_view_of_it);
    tcase_add_test(ip, test_inplace_backward_reads_forward);
    tcase_add_test(ip, test_inplace_chain_peak);
    tcase_add_test(ip, test_into_copies);
    tcase_add_test(ip, test_lookup_reads);
    suite_add_tcase(s, ip);
    return s;
}
