/* Every class of user error: the call returns the right status AND a message that says what
 * and where (checked by fragment; the matmul message in full). Build errors are recorded on
 * the graph (first one wins) and also set the thread's message; run-time errors come back
 * from tg_graph_run; store, optimizer and backend calls return their status directly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"
#include "tg_check.h"

static tg_backend *B;
static tg_graph *G;

static void setup(void) {
    ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK);
    G = tg_graph_new();
    ck_assert_ptr_nonnull(G);
    tg_error_clear();
}
static void teardown(void) {
    tg_graph_free(G);
    tg_backend_free(B);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define ZEROS(...) tg_full(G, 0.0f, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__))
#define IN(data, ...) tg_input(G, TG_DTYPE_F32, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), (data))
#define IN_I32(data, ...) tg_input(G, TG_DTYPE_I32, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), (data))

/* tg_check.h's assertions on this file's graph G */
#define EXPECT_BUILD_ERROR(t, st, frag) TG_EXPECT_BUILD_ERROR(G, t, st, frag)
#define EXPECT_STATUS TG_EXPECT_STATUS

/* ================================ shapes ================================ */

START_TEST(test_matmul_inner_dimension_message) {
    tg_tensor *y = tg_matmul(ZEROS(8, 16), ZEROS(12, 4), false, false);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "tg_matmul: inner dimensions differ: [8,16] x [12,4]");
    const char *msg;
    tg_graph_status(G, &msg);
    ck_assert_str_eq(msg, "tg_matmul: inner dimensions differ: [8,16] x [12,4]");
}
END_TEST

START_TEST(test_matmul_transposed_mismatch_names_transpose) {
    tg_tensor *y = tg_matmul(ZEROS(8, 16), ZEROS(12, 4), false, true);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "[8,16] x [12,4]^T");
}
END_TEST

START_TEST(test_matmul_batch_and_rank_errors) {
    tg_tensor *y = tg_matmul(ZEROS(2, 3, 4), ZEROS(3, 4, 5), false, false);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "batch dimensions of [2,3,4] and [3,4,5] do not broadcast");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_matmul(ZEROS(4), ZEROS(4, 2), false, false);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "operands need 2+ dimensions");
}
END_TEST

START_TEST(test_broadcast_failure) {
    tg_tensor *y = tg_add(ZEROS(2, 3), ZEROS(4));
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "tg_add: shapes [2,3] and [4] do not broadcast");
}
END_TEST

START_TEST(test_broadcast_failure_each_binary_op) {
    const char *names[4] = {"tg_add", "tg_sub", "tg_mul", "tg_div"};
    for (int op = 0; op < 4; op++) {
        tg_graph_free(G);
        G = tg_graph_new();
        tg_tensor *a = ZEROS(2, 3, 4), *b = ZEROS(3, 2, 4);
        tg_tensor *y = op == 0 ? tg_add(a, b) : op == 1 ? tg_sub(a, b) : op == 2 ? tg_mul(a, b) : tg_div(a, b);
        EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, names[op]);
        tg_assert_msg_has(tg_error_message(), "[2,3,4] and [3,2,4]");
    }
}
END_TEST

START_TEST(test_masked_fill_mask_shape) {
    tg_tensor *y = tg_masked_fill(ZEROS(2, 3), ZEROS(2, 4), 0.0f);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "tg_masked_fill: mask [2,4] does not broadcast to [2,3]");
    tg_graph_free(G);
    G = tg_graph_new();
    /* a mask larger than x would enlarge the result: refused */
    y = tg_masked_fill(ZEROS(3), ZEROS(2, 3), 0.0f);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "mask [2,3] does not broadcast to [3]");
}
END_TEST

START_TEST(test_reshape_element_count) {
    tg_tensor *y = tg_reshape(ZEROS(2, 3), 2, SHAPE(4, 2));
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "tg_reshape: [2,3] has 6 elements, [4,2] has 8");
}
END_TEST

START_TEST(test_reshape_bad_minus_one) {
    tg_tensor *y = tg_reshape(ZEROS(2, 3), 2, SHAPE(4, -1));
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "cannot infer -1 reshaping [2,3] (6 elements) to [4,-1]");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_reshape(ZEROS(2, 3), 2, SHAPE(-1, -1));
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "tg_reshape: [2,3] to [-1,-1]: more than one -1");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_reshape(ZEROS(2, 3), 2, SHAPE(-2, -3));
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "[2,3] to [-2,-3]: negative dimension -2");
}
END_TEST

START_TEST(test_bad_permutation) {
    tg_tensor *y = tg_permute(ZEROS(2, 3, 4), (const int[]){0, 0, 1});
    EXPECT_BUILD_ERROR(y, TG_ERR_INVALID, "tg_permute: entry 1 (=0) is not a permutation of 0..2");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_permute(ZEROS(2, 3), (const int[]){0, 2});
    EXPECT_BUILD_ERROR(y, TG_ERR_INVALID, "entry 1 (=2)");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_transpose(ZEROS(2, 3), 0, 2);
    EXPECT_BUILD_ERROR(y, TG_ERR_INVALID, "tg_transpose: axes 0, 2 out of range for 2 dims");
}
END_TEST

START_TEST(test_slice_out_of_range) {
    tg_tensor *y = tg_slice(ZEROS(2, 3), 1, 1, 5);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "tg_slice: range [1, 5) outside axis 1 of size 3");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_slice(ZEROS(2, 3), 0, -1, 1);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "range [-1, 1)");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_slice(ZEROS(2, 3), 1, 2, 1);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "range [2, 1)");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_slice(ZEROS(2, 3), 2, 0, 1);
    EXPECT_BUILD_ERROR(y, TG_ERR_INVALID, "tg_slice: axis 2 out of range for 2 dims");
}
END_TEST

START_TEST(test_concat_shape_mismatch) {
    tg_tensor *xs[3] = {ZEROS(2, 2), ZEROS(2, 2), ZEROS(3, 3)};
    tg_tensor *y = tg_concat(xs, 3, 1);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "tg_concat: input 2 [3,3] does not fit input 0 [2,2] on axis 1");
    tg_graph_free(G);
    G = tg_graph_new();
    tg_tensor *ys[2] = {ZEROS(2, 2), ZEROS(2, 2, 1)};
    EXPECT_BUILD_ERROR(tg_concat(ys, 2, 0), TG_ERR_SHAPE, "input 1 [2,2,1] does not fit");
    tg_graph_free(G);
    G = tg_graph_new();
    tg_tensor *zs[2] = {ZEROS(2, 2), ZEROS(2, 2)};
    EXPECT_BUILD_ERROR(tg_concat(zs, 2, 2), TG_ERR_INVALID, "tg_concat: axis 2 out of range");
}
END_TEST

START_TEST(test_concat_no_inputs_and_dtype_mismatch) {
    tg_tensor *one[1] = {ZEROS(2)};
    ck_assert_ptr_null(tg_concat(one, 0, 0));
    tg_assert_msg_has(tg_error_message(), "tg_concat: no inputs");
    int32_t ids[2] = {0, 1};
    tg_tensor *xs[2] = {ZEROS(2), IN_I32(ids, 2)};
    EXPECT_BUILD_ERROR(tg_concat(xs, 2, 0), TG_ERR_DTYPE, "tg_concat: input 1 is i32, input 0 is f32");
}
END_TEST

START_TEST(test_expand_sum_to_pad_errors) {
    EXPECT_BUILD_ERROR(tg_expand(ZEROS(2, 3), 2, SHAPE(4, 3)), TG_ERR_SHAPE,
                       "tg_expand: [2,3] does not broadcast to [4,3]");
    tg_graph_free(G);
    G = tg_graph_new();
    EXPECT_BUILD_ERROR(tg_sum_to(ZEROS(2, 3), 1, SHAPE(2)), TG_ERR_SHAPE,
                       "tg_sum_to: [2] does not broadcast to [2,3]");
    tg_graph_free(G);
    G = tg_graph_new();
    EXPECT_BUILD_ERROR(tg_pad(ZEROS(2, 3), 1, -1, 0), TG_ERR_INVALID, "tg_pad: axis 1 / padding -1,0 invalid");
}
END_TEST

START_TEST(test_reduction_axis_errors) {
    EXPECT_BUILD_ERROR(tg_sum(ZEROS(2, 3), 2, false), TG_ERR_INVALID, "tg_sum: axis 2 out of range for 2 dims");
    tg_graph_free(G);
    G = tg_graph_new();
    EXPECT_BUILD_ERROR(tg_mean(ZEROS(2, 3), -3, false), TG_ERR_INVALID, "tg_mean: axis -3 out of range");
    tg_graph_free(G);
    G = tg_graph_new();
    EXPECT_BUILD_ERROR(tg_max(ZEROS(2, 0), 1, false), TG_ERR_SHAPE, "tg_max: max over an empty axis");
}
END_TEST

/* ================================ dtypes ================================ */

START_TEST(test_i32_into_add) {
    int32_t v[3] = {1, 2, 3};
    tg_tensor *y = tg_add(IN_I32(v, 3), ZEROS(3));
    EXPECT_BUILD_ERROR(y, TG_ERR_DTYPE, "tg_add: expected f32, got i32");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_exp(IN_I32(v, 3));
    EXPECT_BUILD_ERROR(y, TG_ERR_DTYPE, "tg_exp: expected f32, got i32");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_softmax(IN_I32(v, 3)); /* a row op through the unary builder: named as the public function */
    EXPECT_BUILD_ERROR(y, TG_ERR_DTYPE, "tg_softmax: expected f32, got i32");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_matmul(ZEROS(3, 1), IN_I32(v, 1, 3), false, false);
    EXPECT_BUILD_ERROR(y, TG_ERR_DTYPE, "tg_matmul: expected f32, got i32");
}
END_TEST

START_TEST(test_f32_ids_into_embedding) {
    float ids[3] = {0, 1, 2};
    tg_tensor *y = tg_embedding(ZEROS(5, 4), IN(ids, 3));
    EXPECT_BUILD_ERROR(y, TG_ERR_DTYPE, "tg_embedding: ids must be i32, got f32");
    tg_graph_free(G);
    G = tg_graph_new();
    int32_t iv[3] = {0, 1, 2};
    y = tg_embedding(ZEROS(5), IN_I32(iv, 3));
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "tg_embedding: table [5] must be [V, d]");
}
END_TEST

/* ================================ layer norm, losses, dropout ================================ */

START_TEST(test_layer_norm_gamma_shape) {
    tg_tensor *y = tg_layer_norm(ZEROS(2, 4), ZEROS(5), NULL, 1e-5f);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "tg_layer_norm: gamma [5] does not match [4] of [2,4]");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_layer_norm(ZEROS(2, 4), ZEROS(4), ZEROS(1, 4), 1e-5f);
    EXPECT_BUILD_ERROR(y, TG_ERR_SHAPE, "beta [1,4] does not match [4]");
    tg_graph_free(G);
    G = tg_graph_new();
    y = tg_layer_norm(ZEROS(2, 4), NULL, NULL, 0.0f);
    EXPECT_BUILD_ERROR(y, TG_ERR_INVALID, "tg_layer_norm: eps must be > 0");
}
END_TEST

START_TEST(test_cross_entropy_shapes) {
    int32_t y2[2] = {0, 1}, y3[3] = {0, 1, 2};
    tg_tensor *l = tg_cross_entropy(ZEROS(2, 3, 4), IN_I32(y2, 2), 0.0f, -1, TG_REDUCE_MEAN);
    EXPECT_BUILD_ERROR(l, TG_ERR_SHAPE, "tg_cross_entropy: logits [2,3,4] must be [N, V] and targets [2] [N]");
    tg_graph_free(G);
    G = tg_graph_new();
    l = tg_cross_entropy(ZEROS(2, 4), IN_I32(y3, 3), 0.0f, -1, TG_REDUCE_MEAN);
    EXPECT_BUILD_ERROR(l, TG_ERR_SHAPE, "logits [2,4] must be [N, V] and targets [3] [N]");
    tg_graph_free(G);
    G = tg_graph_new();
    l = tg_cross_entropy(ZEROS(2, 4), ZEROS(2), 0.0f, -1, TG_REDUCE_MEAN);
    EXPECT_BUILD_ERROR(l, TG_ERR_DTYPE, "tg_cross_entropy: targets must be i32, got f32");
    tg_graph_free(G);
    G = tg_graph_new();
    l = tg_cross_entropy(ZEROS(2, 4), IN_I32(y2, 2), 0.0f, -1, (tg_reduction)7);
    EXPECT_BUILD_ERROR(l, TG_ERR_INVALID, "unknown reduction 7");
}
END_TEST

START_TEST(test_cross_entropy_smoothing_range) {
    const float bad[4] = {1.0f, -0.1f, 1.5f, NAN};
    const char *frag[4] = {"smoothing 1 outside [0, 1)", "smoothing -0.1 outside", "smoothing 1.5 outside",
                           "smoothing nan outside"};
    for (int i = 0; i < 4; i++) {
        tg_graph_free(G);
        G = tg_graph_new();
        int32_t y[2] = {0, 1};
        tg_tensor *l = tg_cross_entropy(ZEROS(2, 4), IN_I32(y, 2), bad[i], -1, TG_REDUCE_MEAN);
        EXPECT_BUILD_ERROR(l, TG_ERR_INVALID, frag[i]);
        tg_assert_msg_has(tg_error_message(), "tg_cross_entropy");
    }
}
END_TEST

START_TEST(test_dropout_p_out_of_range) {
    const float bad[4] = {1.0f, -0.1f, 2.0f, NAN};
    const char *frag[4] = {"tg_dropout: p = 1 outside [0, 1)", "p = -0.1 outside", "p = 2 outside", "p = nan"};
    for (int i = 0; i < 4; i++) {
        tg_graph_free(G);
        G = tg_graph_new();
        EXPECT_BUILD_ERROR(tg_dropout(ZEROS(4), bad[i]), TG_ERR_INVALID, frag[i]);
    }
    /* also refused in inference mode, where dropout is otherwise the identity */
    tg_graph_free(G);
    G = tg_graph_new();
    tg_graph_set_training(G, false);
    EXPECT_BUILD_ERROR(tg_dropout(ZEROS(4), 1.0f), TG_ERR_INVALID, "tg_dropout: p = 1");
}
END_TEST

/* ================================ NULL propagation ================================ */

START_TEST(test_null_propagation_keeps_first_error) {
    tg_tensor *a = ZEROS(8, 16), *b = ZEROS(12, 4);
    tg_tensor *bad = tg_matmul(a, b, false, false); /* first error */
    ck_assert_ptr_null(bad);
    ck_assert_ptr_null(tg_add(bad, a));
    ck_assert_ptr_null(tg_relu(tg_add(a, bad)));
    /* a second, different error: recorded on the thread, but the graph keeps the first */
    ck_assert_ptr_null(tg_reshape(a, 2, SHAPE(3, 3)));
    tg_assert_msg_has(tg_error_message(), "tg_reshape");
    const char *msg;
    ck_assert_int_eq(tg_graph_status(G, &msg), TG_ERR_SHAPE);
    ck_assert_str_eq(msg, "tg_matmul: inner dimensions differ: [8,16] x [12,4]");
    /* running or differentiating a failed graph reports that first error */
    EXPECT_STATUS(tg_graph_run(G, B), TG_ERR_SHAPE, "inner dimensions differ");
    EXPECT_STATUS(tg_backward(G, bad), TG_ERR_SHAPE, "inner dimensions differ");
}
END_TEST

START_TEST(test_every_builder_propagates_null) {
    tg_tensor *x = ZEROS(2, 3), *n = NULL;
    int32_t ids[2] = {0, 1};
    tg_tensor *id = IN_I32(ids, 2);
    tg_tensor *nl[1] = {NULL}, *mix[2] = {x, NULL};
    tg_tensor *results[] = {
        tg_reshape(n, 1, SHAPE(6)), tg_permute(n, (const int[]){1, 0}), tg_transpose(n, 0, 1),
        tg_slice(n, 0, 0, 1), tg_contiguous(n), tg_concat(nl, 1, 0), tg_concat(mix, 2, 0),
        tg_pad(n, 0, 1, 1), tg_expand(n, 2, SHAPE(2, 3)), tg_add(n, x), tg_add(x, n), tg_sub(n, x),
        tg_mul(x, n), tg_div(n, n), tg_scale(n, 2), tg_affine(n, 1, 1), tg_add_scalar(n, 1),
        tg_neg(n), tg_exp(n), tg_log(n), tg_sqrt(n), tg_rsqrt(n), tg_tanh(n), tg_relu(n), tg_gelu(n),
        tg_silu(n),
        tg_masked_fill(n, x, 0), tg_masked_fill(x, n, 0), tg_dropout(n, 0.1f), tg_sum(n, 0, false),
        tg_mean(n, 0, true), tg_max(n, 0, false), tg_sum_all(n), tg_mean_all(n),
        tg_sum_to(n, 1, SHAPE(3)), tg_softmax(n), tg_log_softmax(n),
        tg_layer_norm(n, NULL, NULL, 1e-5f), tg_matmul(n, x, false, true), tg_matmul(x, n, false, false),
        tg_embedding(n, id), tg_embedding(x, n), tg_cross_entropy(n, id, 0, -1, TG_REDUCE_MEAN),
        tg_cross_entropy(x, n, 0, -1, TG_REDUCE_MEAN), tg_keep(n), tg_requires_grad(n),
        tg_tensor_set_name(n, "x"), tg_input(NULL, TG_DTYPE_F32, 1, SHAPE(1), ids),
        tg_full(NULL, 0, 1, SHAPE(1)), tg_param(NULL, NULL, "w"),
    };
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++)
        ck_assert_msg(results[i] == NULL, "builder %zu did not return NULL", i);
    /* NULL inputs alone record nothing: the error that made them was recorded already */
    ck_assert_int_eq(tg_graph_status(G, NULL), TG_OK);
}
END_TEST

START_TEST(test_inputs_from_different_graphs) {
    tg_graph *g2 = tg_graph_new();
    tg_tensor *a = ZEROS(2), *b = tg_full(g2, 1.0f, 1, SHAPE(2));
    EXPECT_BUILD_ERROR(tg_add(a, b), TG_ERR_INVALID, "tg_add: inputs belong to different graphs");
    tg_graph_free(G);
    G = tg_graph_new();
    tg_tensor *xs[2] = {ZEROS(2), b};
    EXPECT_BUILD_ERROR(tg_concat(xs, 2, 0), TG_ERR_INVALID, "tg_concat: input 1 belongs to a different graph");
    tg_graph_free(g2);
}
END_TEST

START_TEST(test_leaf_errors) {
    EXPECT_BUILD_ERROR(tg_input(G, TG_DTYPE_F32, 1, SHAPE(3), NULL), TG_ERR_INVALID, "tg_input: data is NULL");
    tg_graph_free(G);
    G = tg_graph_new();
    float v[1] = {0};
    EXPECT_BUILD_ERROR(tg_input(G, TG_DTYPE_F32, 7, SHAPE(1, 1, 1, 1, 1, 1, 1), v), TG_ERR_SHAPE,
                       "tg_input: 7 dimensions (at most 6)");
    tg_graph_free(G);
    G = tg_graph_new();
    EXPECT_BUILD_ERROR(tg_full(G, 0, 2, SHAPE(2, -3)), TG_ERR_SHAPE, "negative dimension -3");
    tg_graph_free(G);
    G = tg_graph_new();
    EXPECT_BUILD_ERROR(tg_requires_grad(tg_exp(ZEROS(2))), TG_ERR_INVALID,
                       "tg_requires_grad: only f32 leaf tensors can require a gradient");
    tg_graph_free(G);
    G = tg_graph_new();
    tg_assert_msg_has(tg_status_name(tg_graph_status(NULL, NULL)), "invalid");
    const char *msg;
    ck_assert_int_eq(tg_graph_status(NULL, &msg), TG_ERR_INVALID);
    ck_assert_str_eq(msg, "no graph");
}
END_TEST

/* ================================ autograd ================================ */

START_TEST(test_backward_non_scalar) {
    float v[6] = {1, 2, 3, 4, 5, 6};
    tg_tensor *x = tg_requires_grad(IN(v, 2, 3));
    EXPECT_STATUS(tg_backward(G, tg_exp(x)), TG_ERR_SHAPE, "tg_backward: loss must be a scalar, got [2,3]");
}
END_TEST

START_TEST(test_backward_twice) {
    float v[3] = {1, 2, 3};
    tg_tensor *loss = tg_sum_all(tg_exp(tg_requires_grad(IN(v, 3))));
    ck_assert_int_eq(tg_backward(G, loss), TG_OK);
    EXPECT_STATUS(tg_backward(G, loss), TG_ERR_STATE, "tg_backward: called twice on one graph");
}
END_TEST

START_TEST(test_backward_in_inference_mode) {
    tg_graph_set_grad_enabled(G, false);
    float v[3] = {1, 2, 3};
    tg_tensor *loss = tg_sum_all(tg_exp(tg_requires_grad(IN(v, 3))));
    ck_assert_ptr_nonnull(loss);
    EXPECT_STATUS(tg_backward(G, loss), TG_ERR_STATE, "tg_backward: the graph is in inference mode");
}
END_TEST

START_TEST(test_backward_null_or_foreign_loss) {
    EXPECT_STATUS(tg_backward(G, NULL), TG_ERR_INVALID, "tg_backward: no loss (graph error: none)");
    tg_graph *g2 = tg_graph_new();
    tg_tensor *l = tg_full(g2, 1.0f, 0, NULL);
    EXPECT_STATUS(tg_backward(G, l), TG_ERR_INVALID, "tg_backward: loss is not in this graph");
    tg_graph_free(g2);
}
END_TEST

/* ================================ reading results ================================ */

START_TEST(test_read_not_kept) {
    float v[3] = {1, 2, 3}, out[3];
    tg_tensor *mid = tg_exp(IN(v, 3));
    tg_tensor *y = tg_keep(tg_neg(mid));
    ck_assert_int_eq(tg_graph_run(G, B), TG_OK);
    EXPECT_STATUS(tg_tensor_read(mid, out, sizeof out), TG_ERR_STATE, "was not kept (call tg_keep before running)");
    tg_assert_msg_has(tg_error_message(), "(exp)");
    ck_assert_int_eq(tg_tensor_read(y, out, sizeof out), TG_OK);
    /* a tensor the run never computed is not readable either */
    tg_tensor *unused = tg_scale(mid, 2.0f);
    EXPECT_STATUS(tg_tensor_read(unused, out, sizeof out), TG_ERR_STATE, "was not kept");
}
END_TEST

START_TEST(test_read_kept_after_run_needs_a_new_run) {
    /* mid's buffer is reused in place by neg; keeping it after the run cannot bring its values
     * back: reading must fail until the graph runs again, then give exp(v) */
    float v[3] = {0, 1, 2}, out[3];
    tg_tensor *mid = tg_exp(tg_scale(IN(v, 3), 1.0f));
    tg_keep(tg_neg(mid));
    ck_assert_int_eq(tg_graph_run(G, B), TG_OK);
    tg_keep(mid);
    EXPECT_STATUS(tg_tensor_read(mid, out, sizeof out), TG_ERR_STATE, "was not kept");
    ck_assert_int_eq(tg_graph_run(G, B), TG_OK);
    ck_assert_int_eq(tg_tensor_read(mid, out, sizeof out), TG_OK);
    for (int i = 0; i < 3; i++) tg_assert_close(out[i], exp(v[i]), 1e-6, 1e-6);
}
END_TEST

START_TEST(test_read_before_run) {
    float v[3] = {1, 2, 3}, out[3];
    tg_tensor *y = tg_keep(tg_exp(IN(v, 3)));
    EXPECT_STATUS(tg_tensor_read(y, out, sizeof out), TG_ERR_STATE, "tg_tensor_read: the graph has not been run");
    ck_assert(isnan(tg_tensor_item(tg_keep(tg_sum_all(y)))));
    tg_assert_msg_has(tg_error_message(), "has not been run");
}
END_TEST

START_TEST(test_read_wrong_byte_count) {
    float v[6] = {1, 2, 3, 4, 5, 6}, out[6];
    tg_tensor *y = tg_keep(tg_exp(IN(v, 2, 3)));
    ck_assert_int_eq(tg_graph_run(G, B), TG_OK);
    EXPECT_STATUS(tg_tensor_read(y, out, 8), TG_ERR_INVALID, "tg_tensor_read: 8 bytes requested, tensor has 24");
    EXPECT_STATUS(tg_tensor_read(y, NULL, 24), TG_ERR_INVALID, "tensor or destination is NULL");
    ck_assert(isnan(tg_tensor_item(y)));
    tg_assert_msg_has(tg_error_message(), "tg_tensor_item: not a scalar f32 tensor");
}
END_TEST

/* ================================ run-time errors ================================ */

START_TEST(test_embedding_id_out_of_range_at_run) {
    int32_t ids[4] = {1, 0, 7, 2};
    tg_tensor *y = tg_keep(tg_embedding(ZEROS(5, 3), IN_I32(ids, 4)));
    ck_assert_ptr_nonnull(y); /* ids are data: only the run can check them */
    ck_assert_int_eq(tg_graph_status(G, NULL), TG_OK);
    EXPECT_STATUS(tg_graph_run(G, B), TG_ERR_INVALID, "tg_embedding: id 7 at position 2 outside [0, 5)");
    tg_assert_msg_has(tg_error_message(), "(embedding)");
    /* the failed run left nothing readable */
    float out[12];
    EXPECT_STATUS(tg_tensor_read(y, out, sizeof out), TG_ERR_STATE, "has not been run");
}
END_TEST

START_TEST(test_embedding_negative_id_at_run) {
    int32_t ids[2] = {-1, 0};
    tg_keep(tg_embedding(ZEROS(5, 3), IN_I32(ids, 2)));
    EXPECT_STATUS(tg_graph_run(G, B), TG_ERR_INVALID, "id -1 at position 0 outside [0, 5)");
}
END_TEST

START_TEST(test_cross_entropy_target_out_of_range_at_run) {
    int32_t y[3] = {0, 9, -100};
    tg_keep(tg_cross_entropy(ZEROS(3, 4), IN_I32(y, 3), 0.1f, -100, TG_REDUCE_MEAN));
    EXPECT_STATUS(tg_graph_run(G, B), TG_ERR_INVALID, "tg_cross_entropy: target 9 at row 1 outside [0, 4)");
    tg_graph_free(G);
    G = tg_graph_new();
    int32_t z[2] = {-2, 0};
    tg_keep(tg_cross_entropy(ZEROS(2, 4), IN_I32(z, 2), 0.0f, -100, TG_REDUCE_NONE));
    EXPECT_STATUS(tg_graph_run(G, B), TG_ERR_INVALID, "target -2 at row 0");
}
END_TEST

/* tg_graph_find_nonfinite names the node that made the first NaN or overflow. */
START_TEST(test_find_nonfinite_overflow) {
    /* 3e38 is finite; the product's sums overflow: inf, then softmax of inf: NaN */
    float x[4] = {3e38f, 3e38f, 1.0f, 2.0f}, w[4] = {2.0f, 2.0f, 1.0f, 1.0f};
    int64_t s[2] = {2, 2};
    tg_tensor *a = tg_input(G, TG_DTYPE_F32, 2, s, x), *b = tg_input(G, TG_DTYPE_F32, 2, s, w);
    tg_tensor *y = tg_keep(tg_softmax(tg_relu(tg_matmul(a, b, false, false))));
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(tg_graph_run(G, B), TG_OK); /* a run does not look at values */
    float out[4];
    ck_assert_int_eq(tg_tensor_read(y, out, sizeof out), TG_OK);
    ck_assert(isnan(out[0]));
    EXPECT_STATUS(tg_graph_find_nonfinite(G, B), TG_ERR_NUMERIC, "(matmul) [2, 2] made inf at element 0 from finite inputs");
}
END_TEST

START_TEST(test_find_nonfinite_nan_parameter) {
    tg_store *st;
    ck_assert_int_eq(tg_store_new(B, &st), TG_OK);
    float w[3] = {1.0f, NAN, 2.0f};
    int64_t n = 3;
    ck_assert_int_eq(tg_store_add(st, "layer.weight", 1, &n, w, false), TG_OK);
    float x[3] = {1.0f, 2.0f, 3.0f};
    tg_tensor *y = tg_keep(tg_mul(tg_input(G, TG_DTYPE_F32, 1, &n, x), tg_param(G, st, "layer.weight")));
    ck_assert_ptr_nonnull(y);
    EXPECT_STATUS(tg_graph_find_nonfinite(G, B), TG_ERR_NUMERIC,
                  "reads nan at element 1 of its input parameter 'layer.weight' [3]");
    tg_graph_free(G);
    G = NULL;
    tg_store_free(st);
}
END_TEST

START_TEST(test_find_nonfinite_mask_is_no_origin) {
    /* a masked logit is -inf by design; the softmax gives zeros: nothing to report */
    float x[4] = {1.0f, 2.0f, 3.0f, 4.0f}, m[4] = {0.0f, 1.0f, 0.0f, 0.0f};
    int64_t s[2] = {2, 2};
    tg_tensor *l = tg_masked_fill(tg_input(G, TG_DTYPE_F32, 2, s, x), tg_input(G, TG_DTYPE_F32, 2, s, m), -INFINITY);
    tg_tensor *y = tg_keep(tg_softmax(tg_scale(l, 2.0f)));
    ck_assert_ptr_nonnull(y);
    float out[4], again[4];
    ck_assert_int_eq(tg_graph_run(G, B), TG_OK);
    ck_assert_int_eq(tg_tensor_read(y, out, sizeof out), TG_OK);
    ck_assert_int_eq(tg_graph_find_nonfinite(G, B), TG_OK);
    ck_assert_int_eq(tg_tensor_read(y, again, sizeof again), TG_OK);
    ck_assert(out[1] == 0.0f && isfinite(out[0]));
    ck_assert(!memcmp(out, again, sizeof out)); /* node by node: the same bits */
}
END_TEST

START_TEST(test_run_null_arguments) {
    EXPECT_STATUS(tg_graph_run(NULL, B), TG_ERR_INVALID, "tg_graph_run: graph or backend is NULL");
    EXPECT_STATUS(tg_graph_run(G, NULL), TG_ERR_INVALID, "tg_graph_run: graph or backend is NULL");
}
END_TEST

/* ================================ store ================================ */

START_TEST(test_store_duplicate_name) {
    tg_store *s;
    ck_assert_int_eq(tg_store_new(B, &s), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "w", 2, SHAPE(2, 3), NULL, true), TG_OK);
    EXPECT_STATUS(tg_store_add(s, "w", 1, SHAPE(4), NULL, true), TG_ERR_INVALID,
                  "tg_store_add: parameter 'w' already exists");
    ck_assert_int_eq(tg_store_count(s), 1);
    EXPECT_STATUS(tg_store_add(s, "", 1, SHAPE(4), NULL, true), TG_ERR_INVALID, "empty or longer than 127 bytes");
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    EXPECT_STATUS(tg_store_add(s, longname, 1, SHAPE(4), NULL, true), TG_ERR_INVALID, "longer than 127 bytes");
    tg_store_free(s);
}
END_TEST

START_TEST(test_param_unknown_name) {
    tg_store *s;
    ck_assert_int_eq(tg_store_new(B, &s), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "w", 1, SHAPE(3), NULL, true), TG_OK);
    EXPECT_BUILD_ERROR(tg_param(G, s, "nope"), TG_ERR_NOT_FOUND, "tg_param: no parameter 'nope' in the store");
    tg_graph_free(G);
    G = tg_graph_new();
    EXPECT_BUILD_ERROR(tg_param(G, NULL, "w"), TG_ERR_INVALID, "tg_param: store or name is NULL");
    tg_store_free(s);
}
END_TEST

START_TEST(test_store_bad_shape) {
    tg_store *s;
    ck_assert_int_eq(tg_store_new(B, &s), TG_OK);
    EXPECT_STATUS(tg_store_add(s, "w", 2, SHAPE(3, 0), NULL, true), TG_ERR_SHAPE,
                  "tg_store_add: 'w': dimension 1 is 0");
    EXPECT_STATUS(tg_store_add(s, "w", 1, SHAPE(-4), NULL, true), TG_ERR_SHAPE, "dimension 0 is -4");
    EXPECT_STATUS(tg_store_add(s, "w", 7, SHAPE(1, 1, 1, 1, 1, 1, 1), NULL, true), TG_ERR_SHAPE,
                  "'w': bad number of dimensions 7");
    ck_assert_int_eq(tg_store_count(s), 0);
    tg_store_free(s);
}
END_TEST

START_TEST(test_store_read_wrong_count) {
    tg_store *s;
    float buf[8];
    ck_assert_int_eq(tg_store_new(B, &s), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "w", 2, SHAPE(2, 3), NULL, true), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "frozen", 1, SHAPE(2), NULL, false), TG_OK);
    EXPECT_STATUS(tg_store_read(s, 0, buf, 5), TG_ERR_SHAPE, "tg_store_read: 'w' has 6 elements, 5 given");
    EXPECT_STATUS(tg_store_write(s, 0, buf, 8), TG_ERR_SHAPE, "tg_store_write: 'w' has 6 elements, 8 given");
    EXPECT_STATUS(tg_store_read_grad(s, 0, buf, 7), TG_ERR_SHAPE, "tg_store_read_grad: 'w' has 6 elements");
    EXPECT_STATUS(tg_store_read(s, 2, buf, 6), TG_ERR_NOT_FOUND, "tg_store_read: no parameter 2 (store has 2)");
    EXPECT_STATUS(tg_store_read(s, -1, buf, 6), TG_ERR_NOT_FOUND, "no parameter -1");
    EXPECT_STATUS(tg_store_read_grad(s, 1, buf, 2), TG_ERR_STATE, "'frozen' is not trainable");
    EXPECT_STATUS(tg_store_read(s, 0, NULL, 6), TG_ERR_INVALID, "store or buffer is NULL");
    ck_assert_int_eq(tg_store_read(s, 0, buf, 6), TG_OK);
    tg_store_free(s);
}
END_TEST

START_TEST(test_param_on_other_backend) {
    tg_backend *b2;
    tg_store *s;
    ck_assert_int_eq(tg_backend_cpu_new(1, &b2), TG_OK);
    ck_assert_int_eq(tg_store_new(b2, &s), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "w", 1, SHAPE(3), NULL, true), TG_OK);
    tg_keep(tg_exp(tg_param(G, s, "w")));
    EXPECT_STATUS(tg_graph_run(G, B), TG_ERR_INVALID, "parameter 'w' lives on backend cpu, graph runs on cpu");
    tg_store_free(s);
    tg_backend_free(b2);
}
END_TEST

/* ================================ optimizer, clipping ================================ */

START_TEST(test_optim_config_out_of_range) {
    tg_store *s;
    tg_optim *o = (tg_optim *)&o; /* must be reset to NULL on failure */
    ck_assert_int_eq(tg_store_new(B, &s), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "w", 1, SHAPE(3), NULL, true), TG_OK);
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_ADAM);
    switch (_i) {
    case 0: c.beta1 = 1.0f; break;
    case 1: c.beta2 = -0.5f; break;
    case 2: c.eps = 0.0f; break;
    case 3: c.momentum = 1.0f; break;
    case 4: c.weight_decay = -1.0f; break;
    case 5: c.kind = (tg_optim_kind)7; break;
    case 6: c.beta1 = NAN; break;
    }
    const char *frag[7] = {"tg_optim_new: betas (1, 0.98) outside [0, 1)", "betas (0.9, -0.5) outside",
                           "tg_optim_new: eps must be > 0", "tg_optim_new: momentum 1 outside [0, 1)",
                           "tg_optim_new: weight decay -1 < 0", "unknown optimizer kind 7", "betas (nan"};
    EXPECT_STATUS(tg_optim_new(s, &c, &o), TG_ERR_INVALID, frag[_i]);
    ck_assert_ptr_null(o);
    tg_store_free(s);
}
END_TEST

START_TEST(test_optim_step_bad_lr) {
    tg_store *s;
    tg_optim *o;
    ck_assert_int_eq(tg_store_new(B, &s), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "w", 1, SHAPE(3), NULL, true), TG_OK);
    tg_optim_config c = tg_optim_defaults(TG_OPTIM_SGD);
    ck_assert_int_eq(tg_optim_new(s, &c, &o), TG_OK);
    EXPECT_STATUS(tg_optim_step(o, -0.1f), TG_ERR_INVALID, "tg_optim_step: learning rate -0.1 must be >= 0");
    EXPECT_STATUS(tg_optim_step(o, NAN), TG_ERR_INVALID, "learning rate nan");
    ck_assert_int_eq(tg_optim_steps(o), 0);
    float st[3];
    EXPECT_STATUS(tg_optim_read_state(o, 0, 1, st, 3), TG_ERR_NOT_FOUND, "'w' has no slot 1");
    EXPECT_STATUS(tg_optim_read_state(o, 0, 0, st, 2), TG_ERR_SHAPE, "'w' has 3 elements, 2 given");
    tg_optim_free(o);
    tg_store_free(s);
}
END_TEST

START_TEST(test_clip_grad_non_finite) {
    tg_store *s;
    ck_assert_int_eq(tg_store_new(B, &s), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "a", 1, SHAPE(3), NULL, true), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "b", 1, SHAPE(2), NULL, true), TG_OK);
    float ga[3] = {1, NAN, 2}, gb[2] = {3, 4};
    ck_assert_int_eq(tg_store_write_grad(s, 0, ga, 3), TG_OK);
    ck_assert_int_eq(tg_store_write_grad(s, 1, gb, 2), TG_OK);
    double norm = 0;
    EXPECT_STATUS(tg_store_clip_grad(s, 1.0, &norm), TG_ERR_NUMERIC, "tg_store_clip_grad: gradient norm is nan");
    ck_assert(isnan(norm));
    /* the gradients were left as they were (no scaling by NaN) */
    float back[2];
    ck_assert_int_eq(tg_store_read_grad(s, 1, back, 2), TG_OK);
    ck_assert(back[0] == 3 && back[1] == 4);
    ga[1] = INFINITY;
    ck_assert_int_eq(tg_store_write_grad(s, 0, ga, 3), TG_OK);
    EXPECT_STATUS(tg_store_clip_grad(s, 1.0, NULL), TG_ERR_NUMERIC, "gradient norm is inf");
    EXPECT_STATUS(tg_store_clip_grad(s, 0.0, NULL), TG_ERR_INVALID, "tg_store_clip_grad: max_norm 0 must be > 0");
    tg_store_free(s);
}
END_TEST

/* ================================ backends ================================ */

START_TEST(test_num_threads_env_invalid) {
    const char *bad[6] = {"abc", "0", "-2", "4097", "3x", " "};
    const char *old = getenv("TG_NUM_THREADS");
    char *saved = old ? strdup(old) : NULL;
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(setenv("TG_NUM_THREADS", bad[i], 1), 0);
        tg_backend *b = (tg_backend *)&b;
        EXPECT_STATUS(tg_backend_cpu_new(0, &b), TG_ERR_INVALID, "is not a thread count in 1..4096");
        char frag[64];
        snprintf(frag, sizeof frag, "tg_backend_cpu_new: TG_NUM_THREADS='%s'", bad[i]);
        tg_assert_msg_has(tg_error_message(), frag);
        ck_assert_ptr_null(b);
    }
    /* a valid value is used; an explicit count wins over the variable */
    ck_assert_int_eq(setenv("TG_NUM_THREADS", "3", 1), 0);
    tg_backend *b;
    ck_assert_int_eq(tg_backend_cpu_new(0, &b), TG_OK);
    ck_assert_int_eq(tg_backend_threads(b), 3);
    tg_backend_free(b);
    ck_assert_int_eq(tg_backend_cpu_new(1, &b), TG_OK);
    ck_assert_int_eq(tg_backend_threads(b), 1);
    tg_backend_free(b);
    if (saved) setenv("TG_NUM_THREADS", saved, 1);
    else unsetenv("TG_NUM_THREADS");
    free(saved);
}
END_TEST

START_TEST(test_thread_count_out_of_range) {
    tg_backend *b;
    EXPECT_STATUS(tg_backend_cpu_new(-1, &b), TG_ERR_INVALID, "tg_backend_cpu_new: -1 threads out of range");
    EXPECT_STATUS(tg_backend_set_threads(B, 0), TG_ERR_INVALID, "tg_backend_set_threads: 0 threads out of range");
    ck_assert_int_eq(tg_backend_threads(B), 2);
    EXPECT_STATUS(tg_backend_cpu_new(1, NULL), TG_ERR_INVALID, "out is NULL");
}
END_TEST

START_TEST(test_cuda_in_cpu_build) {
    tg_backend *b = (tg_backend *)&b;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (!tg_have_cuda()) {
        ck_assert_int_eq(st, TG_ERR_UNSUPPORTED);
        tg_assert_msg_has(tg_error_message(), "tg_backend_cuda_new: this build has no CUDA backend");
        ck_assert_ptr_null(b);
    } else {
        /* a CUDA build: a GPU or a clear backend error, never a crash */
        ck_assert_msg(st == TG_OK || st == TG_ERR_BACKEND, "status %s: %s", tg_status_name(st),
                      tg_error_message());
        if (st == TG_OK) tg_backend_free(b);
        else ck_assert(strlen(tg_error_message()) > 0);
    }
}
END_TEST

/* ================================ error module ================================ */

START_TEST(test_error_module) {
    ck_assert_str_eq(tg_status_name(TG_OK), "ok");
    ck_assert_str_eq(tg_status_name(TG_ERR_SHAPE), "shape error");
    ck_assert_str_eq(tg_status_name(TG_ERR_NUMERIC), "numeric error");
    ck_assert_str_eq(tg_status_name((tg_status)99), "unknown error");
    ck_assert_int_eq(tg_error_set(TG_ERR_IO, "cannot open '%s'", "x.bin"), TG_ERR_IO);
    ck_assert_int_eq(tg_error_prefix(TG_ERR_IO, "loading %d", 3), TG_ERR_IO);
    ck_assert_str_eq(tg_error_message(), "loading 3: cannot open 'x.bin'");
    tg_error_clear();
    ck_assert_str_eq(tg_error_message(), "");
    ck_assert_str_eq(tg_op_name(TG_OP_MATMUL), "matmul");
    ck_assert_str_eq(tg_op_name((tg_op)1000), "unknown-op");
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("build");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_matmul_inner_dimension_message);
    tcase_add_test(tc, test_matmul_transposed_mismatch_names_transpose);
    tcase_add_test(tc, test_matmul_batch_and_rank_errors);
    tcase_add_test(tc, test_broadcast_failure);
    tcase_add_test(tc, test_broadcast_failure_each_binary_op);
    tcase_add_test(tc, test_masked_fill_mask_shape);
    tcase_add_test(tc, test_reshape_element_count);
    tcase_add_test(tc, test_reshape_bad_minus_one);
    tcase_add_test(tc, test_bad_permutation);
    tcase_add_test(tc, test_slice_out_of_range);
    tcase_add_test(tc, test_concat_shape_mismatch);
    tcase_add_test(tc, test_concat_no_inputs_and_dtype_mismatch);
    tcase_add_test(tc, test_expand_sum_to_pad_errors);
    tcase_add_test(tc, test_reduction_axis_errors);
    tcase_add_test(tc, test_i32_into_add);
    tcase_add_test(tc, test_f32_ids_into_embedding);
    tcase_add_test(tc, test_layer_norm_gamma_shape);
    tcase_add_test(tc, test_cross_entropy_shapes);
    tcase_add_test(tc, test_cross_entropy_smoothing_range);
    tcase_add_test(tc, test_dropout_p_out_of_range);
    tcase_add_test(tc, test_null_propagation_keeps_first_error);
    tcase_add_test(tc, test_every_builder_propagates_null);
    tcase_add_test(tc, test_inputs_from_different_graphs);
    tcase_add_test(tc, test_leaf_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("autograd_and_reads");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_backward_non_scalar);
    tcase_add_test(tc, test_backward_twice);
    tcase_add_test(tc, test_backward_in_inference_mode);
    tcase_add_test(tc, test_backward_null_or_foreign_loss);
    tcase_add_test(tc, test_read_not_kept);
    tcase_add_test(tc, test_read_kept_after_run_needs_a_new_run);
    tcase_add_test(tc, test_read_before_run);
    tcase_add_test(tc, test_read_wrong_byte_count);
    suite_add_tcase(s, tc);

    tc = tcase_create("run");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_embedding_id_out_of_range_at_run);
    tcase_add_test(tc, test_embedding_negative_id_at_run);
    tcase_add_test(tc, test_cross_entropy_target_out_of_range_at_run);
    tcase_add_test(tc, test_run_null_arguments);
    tcase_add_test(tc, test_find_nonfinite_overflow);
    tcase_add_test(tc, test_find_nonfinite_nan_parameter);
    tcase_add_test(tc, test_find_nonfinite_mask_is_no_origin);
    suite_add_tcase(s, tc);

    tc = tcase_create("store_optim_backend");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_store_duplicate_name);
    tcase_add_test(tc, test_param_unknown_name);
    tcase_add_test(tc, test_store_bad_shape);
    tcase_add_test(tc, test_store_read_wrong_count);
    tcase_add_test(tc, test_param_on_other_backend);
    tcase_add_loop_test(tc, test_optim_config_out_of_range, 0, 7);
    tcase_add_test(tc, test_optim_step_bad_lr);
    tcase_add_test(tc, test_clip_grad_non_finite);
    tcase_add_test(tc, test_num_threads_env_invalid);
    tcase_add_test(tc, test_thread_count_out_of_range);
    tcase_add_test(tc, test_cuda_in_cpu_build);
    tcase_add_test(tc, test_error_module);
    suite_add_tcase(s, tc);
    return s;
}
