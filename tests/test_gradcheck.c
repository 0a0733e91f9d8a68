/* Finite-difference gradient checks of every op (method and tolerances: gradcheck.h), and the
 * test that fails when an op of the op table is not covered by any of them. */
#include <math.h>
#include <stdlib.h>

#include "core/tg-impl.h"
#include "gradcheck.h"
#include "tg_check.h"

static tg_backend *B;

#define S(...) {__VA_ARGS__}

static tg_tensor *b_add(tg_graph *g, tg_tensor **x) { (void)g; return tg_add(x[0], x[1]); }
static tg_tensor *b_sub(tg_graph *g, tg_tensor **x) { (void)g; return tg_sub(x[0], x[1]); }
static tg_tensor *b_mul(tg_graph *g, tg_tensor **x) { (void)g; return tg_mul(x[0], x[1]); }
static tg_tensor *b_div(tg_graph *g, tg_tensor **x) { (void)g; return tg_div(x[0], x[1]); }
static tg_tensor *b_affine(tg_graph *g, tg_tensor **x) { (void)g; return tg_affine(x[0], -1.5f, 0.25f); }
static tg_tensor *b_exp(tg_graph *g, tg_tensor **x) { (void)g; return tg_exp(x[0]); }
static tg_tensor *b_log(tg_graph *g, tg_tensor **x) { (void)g; return tg_log(x[0]); }
static tg_tensor *b_sqrt(tg_graph *g, tg_tensor **x) { (void)g; return tg_sqrt(x[0]); }
static tg_tensor *b_rsqrt(tg_graph *g, tg_tensor **x) { (void)g; return tg_rsqrt(x[0]); }
static tg_tensor *b_tanh(tg_graph *g, tg_tensor **x) { (void)g; return tg_tanh(x[0]); }
static tg_tensor *b_relu(tg_graph *g, tg_tensor **x) { (void)g; return tg_relu(x[0]); }
static tg_tensor *b_gelu(tg_graph *g, tg_tensor **x) { (void)g; return tg_gelu(x[0]); }
static tg_tensor *b_silu(tg_graph *g, tg_tensor **x) { (void)g; return tg_silu(x[0]); }
static tg_tensor *b_gelu_erf(tg_graph *g, tg_tensor **x) { (void)g; return tg_gelu_erf(x[0]); }
static tg_tensor *b_neg(tg_graph *g, tg_tensor **x) { (void)g; return tg_neg(x[0]); }
static tg_tensor *b_sum0(tg_graph *g, tg_tensor **x) { (void)g; return tg_sum(x[0], 0, false); }
static tg_tensor *b_sum1k(tg_graph *g, tg_tensor **x) { (void)g; return tg_sum(x[0], -1, true); }
static tg_tensor *b_mean(tg_graph *g, tg_tensor **x) { (void)g; return tg_mean(x[0], 1, false); }
static tg_tensor *b_max(tg_graph *g, tg_tensor **x) { (void)g; return tg_max(x[0], 1, false); }
static tg_tensor *b_softmax(tg_graph *g, tg_tensor **x) { (void)g; return tg_softmax(x[0]); }
static tg_tensor *b_log_softmax(tg_graph *g, tg_tensor **x) { (void)g; return tg_log_softmax(x[0]); }
static tg_tensor *b_ln(tg_graph *g, tg_tensor **x) { (void)g; return tg_layer_norm(x[0], x[1], x[2], 1e-5f); }
static tg_tensor *b_ln_plain(tg_graph *g, tg_tensor **x) { (void)g; return tg_layer_norm(x[0], NULL, NULL, 1e-5f); }
static tg_tensor *b_mm(tg_graph *g, tg_tensor **x) { (void)g; return tg_matmul(x[0], x[1], false, false); }
static tg_tensor *b_mm_tt(tg_graph *g, tg_tensor **x) { (void)g; return tg_matmul(x[0], x[1], true, true); }
static tg_tensor *b_mm_nt(tg_graph *g, tg_tensor **x) { (void)g; return tg_matmul(x[0], x[1], false, true); }
static tg_tensor *b_mm_tn(tg_graph *g, tg_tensor **x) { (void)g; return tg_matmul(x[0], x[1], true, false); }
/* a permuted (non-contiguous) operand is read in place by matmul */
static tg_tensor *b_mm_view(tg_graph *g, tg_tensor **x) {
    (void)g;
    return tg_matmul(tg_transpose(x[0], 1, 2), x[1], false, false);
}
static tg_tensor *b_reshape(tg_graph *g, tg_tensor **x) {
    (void)g;
    int64_t s[2] = {3, -1};
    return tg_mul(tg_reshape(x[0], 2, s), tg_reshape(x[0], 2, s));
}
static tg_tensor *b_permute(tg_graph *g, tg_tensor **x) {
    (void)g;
    int p[3] = {2, 0, 1};
    return tg_contiguous(tg_permute(x[0], p));
}
static tg_tensor *b_reshape_view(tg_graph *g, tg_tensor **x) {
    (void)g; /* reshape of a non-contiguous view copies first */
    int64_t s[1] = {-1};
    return tg_reshape(tg_transpose(x[0], 0, 1), 1, s);
}
static tg_tensor *b_slice(tg_graph *g, tg_tensor **x) { (void)g; return tg_slice(x[0], 1, 1, 3); }
/* slices whose gradients are gathered into one concatenation (autograd/backward.c): three
 * that tile the axis; ones with a gap, an overlap and a use of the whole tensor besides; nine
 * of width 1 (more than a concatenation holds) */
static tg_tensor *b_slices_tile(tg_graph *g, tg_tensor **x) {
    (void)g;
    tg_tensor *q = tg_slice(x[0], 1, 0, 2), *k = tg_slice(x[0], 1, 2, 4),
              *v = tg_slice(x[0], 1, 4, 6);
    return tg_add(tg_mul(tg_scale(q, 2.0f), k), tg_mul(v, v));
}
static tg_tensor *b_slices_mixed(tg_graph *g, tg_tensor **x) {
    (void)g;
    tg_tensor *a = tg_slice(x[0], 1, 0, 3), *b = tg_slice(x[0], 1, 2, 5),
              *c = tg_slice(x[0], 1, 4, 7);
    tg_tensor *y = tg_add(tg_mul(a, b), tg_scale(c, 3.0f));
    return tg_add(y, tg_slice(tg_tanh(x[0]), 1, 1, 4));
}
static tg_tensor *b_slices_many(tg_graph *g, tg_tensor **x) {
    (void)g;
    tg_tensor *s[9], *y = NULL;
    for (int i = 0; i < 9; i++)
        s[i] = tg_slice(x[0], 1, i, i + 1);
    for (int i = 0; i < 9; i++) {
        tg_tensor *t = tg_mul(tg_scale(s[i], (float)(i + 1)), s[(i + 1) % 9]);
        y = y ? tg_add(y, t) : t;
    }
    return y;
}
static tg_tensor *b_concat(tg_graph *g, tg_tensor **x) {
    (void)g;
    tg_tensor *xs[3] = {x[0], x[1], x[0]};
    return tg_concat(xs, 3, 1);
}
static tg_tensor *b_concat_many(tg_graph *g, tg_tensor **x) {
    (void)g; /* more inputs than a node holds: grouped concatenation */
    tg_tensor *xs[11];
    for (int i = 0; i < 11; i++) xs[i] = tg_scale(x[0], (float)(i + 1));
    return tg_concat(xs, 11, 0);
}
static tg_tensor *b_pad(tg_graph *g, tg_tensor **x) { (void)g; return tg_pad(x[0], 0, 1, 2); }
static tg_tensor *b_expand(tg_graph *g, tg_tensor **x) {
    (void)g;
    int64_t s[3] = {2, 3, 4};
    return tg_expand(x[0], 3, s);
}
static tg_tensor *b_sum_to(tg_graph *g, tg_tensor **x) {
    (void)g;
    int64_t s[2] = {3, 1};
    return tg_sum_to(x[0], 2, s);
}
static tg_tensor *b_masked_fill(tg_graph *g, tg_tensor **x) {
    int32_t m[4] = {0, 1, 0, 1};
    int64_t s[2] = {1, 4};
    return tg_masked_fill(x[0], tg_input(g, TG_DTYPE_I32, 2, s, m), -3.0f);
}
/* a masked softmax: -inf entries get probability 0; the fully masked row gives zeros */
static tg_tensor *b_masked_softmax(tg_graph *g, tg_tensor **x) {
    float m[12] = {0, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1};
    int64_t s[2] = {3, 4};
    return tg_softmax(tg_masked_fill(x[0], tg_input(g, TG_DTYPE_F32, 2, s, m), -INFINITY));
}
static tg_tensor *b_dropout(tg_graph *g, tg_tensor **x) { (void)g; return tg_dropout(x[0], 0.3f); }
static tg_tensor *b_embedding(tg_graph *g, tg_tensor **x) {
    int32_t ids[5] = {2, 0, 2, 4, 1};
    int64_t s[1] = {5};
    return tg_embedding(x[0], tg_input(g, TG_DTYPE_I32, 1, s, ids));
}
static tg_tensor *ce(tg_graph *g, tg_tensor *logits, float eps, tg_reduction red) {
    int32_t y[4] = {1, 0, 4, 3};
    int64_t s[1] = {4};
    return tg_cross_entropy(logits, tg_input(g, TG_DTYPE_I32, 1, s, y), eps, 0, red);
}
static tg_tensor *b_ce_mean(tg_graph *g, tg_tensor **x) { return ce(g, x[0], 0.1f, TG_REDUCE_MEAN); }
static tg_tensor *b_ce_sum(tg_graph *g, tg_tensor **x) { return ce(g, x[0], 0.0f, TG_REDUCE_SUM); }
static tg_tensor *b_ce_none(tg_graph *g, tg_tensor **x) { return ce(g, x[0], 0.2f, TG_REDUCE_NONE); }
/* the loss and the NLL beside it: the gradient of both columns (the harness weighs them) */
static tg_tensor *ce_nll(tg_graph *g, tg_tensor *logits, float eps, tg_reduction red) {
    int32_t y[4] = {1, 0, 4, 3};
    int64_t s[1] = {4};
    return tg_cross_entropy_with_nll(logits, tg_input(g, TG_DTYPE_I32, 1, s, y), eps, 0, red);
}
static tg_tensor *b_ce_nll_mean(tg_graph *g, tg_tensor **x) {
    return ce_nll(g, x[0], 0.1f, TG_REDUCE_MEAN);
}
static tg_tensor *b_ce_nll_none(tg_graph *g, tg_tensor **x) {
    return ce_nll(g, x[0], 0.2f, TG_REDUCE_NONE);
}
static tg_tensor *b_bcast_mul(tg_graph *g, tg_tensor **x) { (void)g; return tg_mul(x[0], x[1]); }
static tg_tensor *b_attention(tg_graph *g, tg_tensor **x) {
    (void)g; /* a small attention core: softmax(Q K^T / sqrt d) V, all three differentiable */
    tg_tensor *s = tg_scale(tg_matmul(x[0], x[1], false, true), 0.5f);
    return tg_matmul(tg_softmax(s), x[2], false, false);
}
/* Banded attention: windows cut by both sequence ends (r = 1 over n = 5, m = 4 keys) and
 * wider than the sequence (r = 4 over 3); the fill is 0 so that every output is finite. */
static tg_tensor *b_band_scores(tg_graph *g, tg_tensor **x) { (void)g; return tg_band_scores(x[0], x[1], 1, 0.0f); }
static tg_tensor *b_band_scores_wide(tg_graph *g, tg_tensor **x) { (void)g; return tg_band_scores(x[0], x[1], 4, 0.0f); }
static tg_tensor *b_band_mix(tg_graph *g, tg_tensor **x) { (void)g; return tg_band_mix(x[0], x[1], 1); }
static tg_tensor *b_band_mix_wide(tg_graph *g, tg_tensor **x) { (void)g; return tg_band_mix(x[0], x[1], 4); }
static tg_tensor *b_band_attention(tg_graph *g, tg_tensor **x) {
    (void)g; /* softmax over the band, missing keys at -inf, then the mix: Q, K, V differentiable */
    tg_tensor *s = tg_scale(tg_band_scores(x[0], x[1], 2, -INFINITY), 0.5f);
    return tg_band_mix(tg_softmax(s), x[2], 2);
}

static const gc_case cases[] = {
    {"add_broadcast", 2, {2, 1}, {S(3, 4), S(4)}, {0}, b_add, 0, 0},
    {"sub_broadcast", 2, {3, 2}, {S(2, 3, 1), S(1, 4)}, {0}, b_sub, 0, 0},
    {"mul", 2, {2, 2}, {S(3, 4), S(3, 4)}, {0}, b_mul, 0, 0},
    {"mul_broadcast_both", 2, {2, 2}, {S(3, 1), S(1, 4)}, {0}, b_bcast_mul, 0, 0},
    {"div", 2, {2, 2}, {S(3, 4), S(1, 4)}, {GC_NORMAL, GC_POSITIVE}, b_div, 0, 0},
    {"affine", 1, {2}, {S(3, 4)}, {0}, b_affine, 0, 0},
    {"neg", 1, {1}, {S(5)}, {0}, b_neg, 0, 0},
    {"exp", 1, {2}, {S(3, 4)}, {0}, b_exp, 0, 0},
    {"log", 1, {2}, {S(3, 4)}, {GC_POSITIVE}, b_log, 0, 0},
    {"sqrt", 1, {2}, {S(3, 4)}, {GC_POSITIVE}, b_sqrt, 0, 0},
    {"rsqrt", 1, {2}, {S(3, 4)}, {GC_POSITIVE}, b_rsqrt, 0, 0},
    {"tanh", 1, {2}, {S(3, 4)}, {0}, b_tanh, 0, 0},
    {"relu", 1, {2}, {S(3, 4)}, {GC_AWAY0}, b_relu, 0, 0},
    {"gelu", 1, {2}, {S(3, 4)}, {0}, b_gelu, 0, 0},
    {"silu", 1, {2}, {S(3, 4)}, {0}, b_silu, 0, 0},
    {"gelu_erf", 1, {2}, {S(3, 4)}, {0}, b_gelu_erf, 0, 0},
    {"sum_axis0", 1, {3}, {S(2, 3, 4)}, {0}, b_sum0, 0, 0},
    {"sum_last_keepdim", 1, {3}, {S(2, 3, 4)}, {0}, b_sum1k, 0, 0},
    {"mean", 1, {3}, {S(2, 3, 4)}, {0}, b_mean, 0, 0},
    {"max", 1, {3}, {S(2, 5, 3)}, {GC_DISTINCT}, b_max, 0, 0},
    {"softmax", 1, {2}, {S(3, 5)}, {0}, b_softmax, 0, 0},
    {"log_softmax", 1, {2}, {S(3, 5)}, {0}, b_log_softmax, 0, 0},
    {"masked_softmax", 1, {2}, {S(3, 4)}, {0}, b_masked_softmax, 0, 0},
    {"layer_norm_affine", 3, {2, 1, 1}, {S(3, 6), S(6), S(6)}, {0}, b_ln, 0, 0},
    {"layer_norm_plain", 1, {3}, {S(2, 2, 5)}, {0}, b_ln_plain, 0, 0},
    {"matmul", 2, {2, 2}, {S(3, 4), S(4, 5)}, {0}, b_mm, 0, 0},
    {"matmul_batched_bcast", 2, {3, 2}, {S(2, 3, 4), S(4, 5)}, {0}, b_mm, 0, 0},
    {"matmul_tt", 2, {3, 3}, {S(2, 4, 3), S(2, 5, 4)}, {0}, b_mm_tt, 0, 0},
    {"matmul_nt", 2, {3, 3}, {S(2, 3, 4), S(1, 5, 4)}, {0}, b_mm_nt, 0, 0},
    {"matmul_tn", 2, {2, 2}, {S(4, 3), S(4, 5)}, {0}, b_mm_tn, 0, 0},
    {"matmul_view", 2, {3, 3}, {S(2, 4, 3), S(2, 4, 2)}, {0}, b_mm_view, 0, 0},
    {"reshape", 1, {2}, {S(2, 6)}, {0}, b_reshape, 0, 0},
    {"reshape_of_view", 1, {2}, {S(3, 4)}, {0}, b_reshape_view, 0, 0},
    {"permute_contiguous", 1, {3}, {S(2, 3, 4)}, {0}, b_permute, 0, 0},
    {"slice", 1, {2}, {S(3, 5)}, {0}, b_slice, 0, 0},
    {"slices_tiling", 1, {2}, {S(3, 6)}, {0}, b_slices_tile, 0, 0},
    {"slices_gap_overlap_whole", 1, {2}, {S(3, 8)}, {0}, b_slices_mixed, 0, 0},
    {"slices_many", 1, {2}, {S(2, 9)}, {0}, b_slices_many, 0, 0},
    {"concat", 2, {2, 2}, {S(2, 3), S(2, 2)}, {0}, b_concat, 0, 0},
    {"concat_grouped", 1, {2}, {S(1, 3)}, {0}, b_concat_many, 0, 0},
    {"pad", 1, {2}, {S(2, 3)}, {0}, b_pad, 0, 0},
    {"expand", 1, {2}, {S(3, 1)}, {0}, b_expand, 0, 0},
    {"sum_to", 1, {2}, {S(3, 4)}, {0}, b_sum_to, 0, 0},
    {"masked_fill", 1, {2}, {S(3, 4)}, {0}, b_masked_fill, 0, 0},
    {"dropout", 1, {2}, {S(4, 8)}, {0}, b_dropout, 0, 0},
    {"embedding", 1, {2}, {S(5, 3)}, {0}, b_embedding, 0, 0},
    {"cross_entropy_mean_smoothed", 1, {2}, {S(4, 6)}, {0}, b_ce_mean, 0, 0},
    {"cross_entropy_sum", 1, {2}, {S(4, 6)}, {0}, b_ce_sum, 0, 0},
    {"cross_entropy_none", 1, {2}, {S(4, 6)}, {0}, b_ce_none, 0, 0},
    {"cross_entropy_with_nll_mean", 1, {2}, {S(4, 6)}, {0}, b_ce_nll_mean, 0, 0},
    {"cross_entropy_with_nll_none", 1, {2}, {S(4, 6)}, {0}, b_ce_nll_none, 0, 0},
    {"band_scores_cut_ends", 2, {3, 3}, {S(2, 5, 3), S(2, 4, 3)}, {0}, b_band_scores, 0, 0},
    {"band_scores_r_ge_n", 2, {3, 3}, {S(1, 3, 2), S(1, 3, 2)}, {0}, b_band_scores_wide, 0, 0},
    {"band_mix_cut_ends", 2, {3, 3}, {S(2, 5, 3), S(2, 4, 3)}, {0}, b_band_mix, 0, 0},
    {"band_mix_r_ge_n", 2, {3, 3}, {S(1, 3, 9), S(1, 3, 2)}, {0}, b_band_mix_wide, 0, 0},
    {"band_attention_core",
     3,
     {4, 4, 4},
     {S(1, 2, 6, 4), S(1, 2, 6, 4), S(1, 2, 6, 3)},
     {0},
     b_band_attention,
     0,
     0},
    {"attention_core", 3, {3, 3, 3}, {S(2, 3, 4), S(2, 5, 4), S(2, 5, 2)}, {0}, b_attention, 0, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

START_TEST(test_case) {
    char msg[512];
    ck_assert_msg(gc_run(&cases[_i], B, msg, sizeof msg), "%s", msg);
}
END_TEST

/* Every op of the op table appears in the forward or backward graph of some case (ops with no
 * differentiable input excepted: fill, grad_acc). */
START_TEST(test_every_op_is_gradchecked) {
    bool seen[TG_OP_COUNT] = {false};
    for (int i = 0; i < NCASES; i++) ck_assert_msg(gc_ops_used(&cases[i], seen), "case %s", cases[i].name);
    for (int op = 1; op < TG_OP_COUNT; op++) {
        if (tg_op_has_no_gradient((tg_op)op)) continue;
        ck_assert_msg(seen[op], "op %s has no gradient check", tg_op_name((tg_op)op));
    }
}
END_TEST

static void setup(void) { ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK); }
static void teardown(void) { tg_backend_free(B); }

Suite *tg_test_suite(void) {
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_case, 0, NCASES);
    tcase_add_test(tc, test_every_op_is_gradchecked);
    suite_add_tcase(s, tc);
    return s;
}
