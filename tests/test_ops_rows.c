/* Forward values of the row ops (softmax, log-softmax, layer norm), the products (matmul and the
 * banded attention ops), the embedding lookup and the label-smoothed cross-entropy (ops.h)
 * against values computed by hand or here in double precision from the op's definition (biased
 * variance, docs/model.md §1's label-smoothed cross-entropy), on a 2-thread CPU backend
 * (ops_check.h). The elementwise, reduction and layout ops are in test_ops.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_check.h"

/* ================================ softmax ================================ */

/* softmax (or log-softmax) of each row of x [rows, n], in double */
static void softmax_ref(const float *x, int64_t rows, int64_t n, bool lg, double *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < n; j++) m = xr[j] > m ? xr[j] : m;
        for (int64_t j = 0; j < n; j++) s += exp(xr[j] - m);
        for (int64_t j = 0; j < n; j++) out[r * n + j] = lg ? xr[j] - m - log(s) : exp(xr[j] - m) / s;
    }
}

START_TEST(test_softmax_by_hand) {
    /* softmax(0, ln 2, ln 5) = (1, 2, 5) / 8 */
    float x[3] = {0, 0.69314718f, 1.60943791f};
    tg_tensor *y = tg_keep(tg_softmax(IN(x, 1, 3)));
    run_ok();
    EXPECT(y, 1e-6, 0.125, 0.25, 0.625);
}
END_TEST

START_TEST(test_softmax_rows_3d) {
    float *x = pattern(2 * 3 * 5, 6);
    tg_tensor *y = tg_keep(tg_softmax(IN(x, 2, 3, 5)));
    run_ok();
    EXPECT_SHAPE(y, 2, 3, 5);
    double want[30];
    softmax_ref(x, 6, 5, false, want);
    expect_vals(y, want, 30, 1e-7, 1e-5, "softmax");
    float *v = tg_test_read_all(y);
    for (int r = 0; r < 6; r++) {
        double s = 0;
        for (int j = 0; j < 5; j++) s += v[r * 5 + j];
        tg_assert_close(s, 1.0, 1e-6, 0);
    }
    free(v);
    free(x);
}
END_TEST

START_TEST(test_softmax_huge_logits) {
    /* 1000 + (0, 1, 2): naive exp overflows; the stable form gives softmax(0, 1, 2) */
    float x[6] = {1000, 1001, 1002, -1000, -1001, -999};
    tg_tensor *y = tg_keep(tg_softmax(IN(x, 2, 3)));
    run_ok();
    double e1 = exp(1.0), e2 = exp(2.0), z = 1 + e1 + e2;
    double ea = exp(-1.0), eb = exp(-2.0), w = ea + eb + 1;
    EXPECT(y, 1e-6, 1 / z, e1 / z, e2 / z, ea / w, eb / w, 1 / w);
}
END_TEST

START_TEST(test_softmax_neg_inf_entries) {
    /* -inf gets probability exactly 0; the rest renormalise: (0, -inf, ln 3) -> (1/4, 0, 3/4) */
    float x[6] = {0, -INFINITY, 1.09861229f, -INFINITY, 5, -INFINITY};
    tg_tensor *y = tg_keep(tg_softmax(IN(x, 2, 3)));
    run_ok();
    EXPECT(y, 1e-6, 0.25, 0, 0.75, 0, 1, 0);
    float v[6];
    ck_assert_int_eq(tg_tensor_read(y, v, sizeof v), TG_OK);
    ck_assert(v[1] == 0.0f && v[3] == 0.0f && v[5] == 0.0f);
}
END_TEST

START_TEST(test_softmax_fully_masked_row_gives_zeros) {
    float x[6] = {-INFINITY, -INFINITY, -INFINITY, 1, 2, 3};
    tg_tensor *y = tg_keep(tg_softmax(IN(x, 2, 3)));
    run_ok();
    double want[6] = {0, 0, 0};
    softmax_ref(x + 3, 1, 3, false, want + 3);
    expect_vals(y, want, 6, 1e-7, 1e-5, "softmax"); /* also asserts: no NaN */
}
END_TEST

START_TEST(test_log_softmax_values) {
    float *x = pattern(4 * 7, 7);
    tg_tensor *y = tg_keep(tg_log_softmax(IN(x, 4, 7)));
    run_ok();
    double want[28];
    softmax_ref(x, 4, 7, true, want);
    expect_vals(y, want, 28, 1e-6, 1e-6, "log_softmax");
    free(x);
}
END_TEST

START_TEST(test_log_softmax_by_hand_and_huge) {
    /* log_softmax(0, ln 3) = (ln 1/4, ln 3/4); with 1000 added nothing changes */
    float x[4] = {0, 1.09861229f, 1000, 1001.09861229f};
    tg_tensor *y = tg_keep(tg_log_softmax(IN(x, 2, 2)));
    run_ok();
    EXPECT(y, 1e-4, -1.3862943611198906, -0.2876820724517809, -1.3862943611198906,
           -0.2876820724517809);
}
END_TEST

START_TEST(test_log_softmax_neg_inf) {
    float x[6] = {0, -INFINITY, 0, -INFINITY, -INFINITY, -INFINITY};
    tg_tensor *y = tg_keep(tg_log_softmax(IN(x, 2, 3)));
    run_ok();
    /* masked entry -inf; fully masked row -inf everywhere, never NaN */
    EXPECT(y, 1e-6, -0.6931471805599453, -INFINITY, -0.6931471805599453, -INFINITY, -INFINITY,
           -INFINITY);
}
END_TEST

/* ================================ layer norm ================================ */

/* (x - mean) / sqrt(var + eps) * gamma + beta per row, biased variance, in double */
static void layer_norm_ref(const float *x, int64_t rows, int64_t d, const float *gm, const float *bt,
                           double eps, double *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        double mu = 0, var = 0;
        for (int64_t j = 0; j < d; j++) mu += xr[j];
        mu /= (double)d;
        for (int64_t j = 0; j < d; j++) var += (xr[j] - mu) * (xr[j] - mu);
        var /= (double)d;
        for (int64_t j = 0; j < d; j++) {
            double v = (xr[j] - mu) / sqrt(var + eps);
            out[r * d + j] = v * (gm ? gm[j] : 1.0) + (bt ? bt[j] : 0.0);
        }
    }
}

START_TEST(test_layer_norm_by_hand) {
    /* row (1,2,3,4): mean 2.5, biased var 1.25; row (10,10,10,14): mean 11, var 3 */
    float x[8] = {1, 2, 3, 4, 10, 10, 10, 14};
    tg_tensor *y = tg_keep(tg_layer_norm(IN(x, 2, 4), NULL, NULL, 1e-5f));
    run_ok();
    double r1 = 1 / sqrt(1.25 + 1e-5), r2 = 1 / sqrt(3 + 1e-5);
    EXPECT(y, 2e-6, -1.5 * r1, -0.5 * r1, 0.5 * r1, 1.5 * r1, -r2, -r2, -r2, 3 * r2);
}
END_TEST

START_TEST(test_layer_norm_gamma_beta) {
    float x[8] = {1, 2, 3, 4, 10, 10, 10, 14};
    float gm[4] = {1, 2, 0.5f, -1}, bt[4] = {0, 0.1f, -0.2f, 3};
    tg_tensor *y = tg_keep(tg_layer_norm(IN(x, 2, 4), IN(gm, 4), IN(bt, 4), 1e-5f));
    run_ok();
    double want[8];
    layer_norm_ref(x, 2, 4, gm, bt, 1e-5, want);
    expect_vals(y, want, 8, 2e-6, 1e-6, "layer_norm");
    /* by hand, element 0: (1 - 2.5)/sqrt(1.25 + 1e-5) * 1 + 0 = -1.3416354 */
    tg_assert_close(want[0], -1.3416354, 1e-6, 0);
}
END_TEST

START_TEST(test_layer_norm_gamma_only_beta_only) {
    float x[6] = {0, 3, 6, -1, 0, 1};
    float gm[3] = {2, 2, 2}, bt[3] = {1, 1, 1};
    tg_tensor *in = IN(x, 2, 3);
    tg_tensor *yg = tg_keep(tg_layer_norm(in, IN(gm, 3), NULL, 1e-5f));
    tg_tensor *yb = tg_keep(tg_layer_norm(in, NULL, IN(bt, 3), 1e-5f));
    run_ok();
    double wg[6], wb[6];
    layer_norm_ref(x, 2, 3, gm, NULL, 1e-5, wg);
    layer_norm_ref(x, 2, 3, NULL, bt, 1e-5, wb);
    expect_vals(yg, wg, 6, 2e-6, 1e-6, "layer_norm gamma");
    expect_vals(yb, wb, 6, 2e-6, 1e-6, "layer_norm beta");
}
END_TEST

START_TEST(test_layer_norm_constant_row_and_eps) {
    /* a constant row has var 0: output 0 (+ beta), finite thanks to eps; a row of
     * (-a, a) has var a^2, so with a = 0.01 eps = 1e-5 visibly shrinks it: a / sqrt(a^2 + eps) */
    float x[4] = {7, 7, -0.01f, 0.01f};
    float bt[2] = {0.5f, -0.5f};
    tg_tensor *y = tg_keep(tg_layer_norm(IN(x, 2, 2), NULL, IN(bt, 2), 1e-5f));
    run_ok();
    double s = 0.01 / sqrt(1e-4 + 1e-5);
    EXPECT(y, 1e-5, 0.5, -0.5, 0.5 - s, -0.5 + s);
}
END_TEST

START_TEST(test_layer_norm_large_mean_3d) {
    /* rows with a mean of 1000 and small spread: a one-pass E[x^2]-E[x]^2 would lose it */
    float x[2 * 2 * 4];
    for (int i = 0; i < 16; i++) x[i] = 1000.0f + 0.5f * (float)(i % 4) + (float)(i / 4);
    tg_tensor *y = tg_keep(tg_layer_norm(IN(x, 2, 2, 4), NULL, NULL, 1e-5f));
    run_ok();
    EXPECT_SHAPE(y, 2, 2, 4);
    double want[16];
    layer_norm_ref(x, 4, 4, NULL, NULL, 1e-5, want);
    expect_vals(y, want, 16, 1e-4, 0, "layer_norm");
}
END_TEST

/* ================================ matmul ================================ */

/* C = op(A) op(B) for contiguous A, B with batch broadcasting, in double. Shapes of A and B
 * are the stored ones (before the transposes). */
static void matmul_ref(const float *a, int an, const int64_t *as, bool ta, const float *b, int bn,
                       const int64_t *bs, bool tb, int on, const int64_t *os, double *out) {
    int64_t M = os[on - 2], N = os[on - 1];
    int64_t K = ta ? as[an - 2] : as[an - 1];
    int64_t nbatch = 1;
    for (int i = 0; i < on - 2; i++) nbatch *= os[i];
    int64_t amat = as[an - 2] * as[an - 1], bmat = bs[bn - 2] * bs[bn - 1];
    for (int64_t bi = 0; bi < nbatch; bi++) {
        const float *A = a + bcast_index(bi, on - 2, os, an - 2, as) * amat;
        const float *Bm = b + bcast_index(bi, on - 2, os, bn - 2, bs) * bmat;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) {
                    double x = ta ? A[k * M + i] : A[i * K + k];
                    double y = tb ? Bm[j * K + k] : Bm[k * N + j];
                    s += x * y;
                }
                out[(bi * M + i) * N + j] = s;
            }
    }
}

START_TEST(test_matmul_by_hand) {
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    tg_tensor *y = tg_keep(tg_matmul(IN(a, 2, 3), IN(b, 3, 2), false, false));
    run_ok();
    EXPECT_SHAPE(y, 2, 2);
    EXPECT(y, 0, 58, 64, 139, 154);
}
END_TEST

/* all four transpose combinations: _i = 2*trans_a + trans_b; logical [5,7] x [7,6] */
START_TEST(test_matmul_transpose_combos) {
    bool ta = _i / 2, tb = _i % 2;
    int64_t as[2] = {ta ? 7 : 5, ta ? 5 : 7}, bs[2] = {tb ? 6 : 7, tb ? 7 : 6};
    float *a = pattern(35, 8), *b = pattern(42, 9);
    tg_tensor *y = tg_keep(tg_matmul(tg_input(G, TG_DTYPE_F32, 2, as, a),
                                     tg_input(G, TG_DTYPE_F32, 2, bs, b), ta, tb));
    run_ok();
    EXPECT_SHAPE(y, 5, 6);
    double want[30];
    matmul_ref(a, 2, as, ta, b, 2, bs, tb, 2, SHAPE(5, 6), want);
    expect_vals(y, want, 30, 1e-5, 1e-5, "matmul");
    free(a);
    free(b);
}
END_TEST

START_TEST(test_matmul_transpose_by_hand) {
    /* A^T B^T with A [3,2], B [2,3]: (B A)^T */
    float a[6] = {1, 4, 2, 5, 3, 6}, b[6] = {7, 9, 11, 8, 10, 12};
    tg_tensor *y = tg_keep(tg_matmul(IN(a, 3, 2), IN(b, 2, 3), true, true));
    run_ok();
    EXPECT(y, 0, 58, 64, 139, 154);
}
END_TEST

START_TEST(test_matmul_batched) {
    float *a = pattern(3 * 4 * 5, 10), *b = pattern(3 * 5 * 2, 11);
    tg_tensor *y = tg_keep(tg_matmul(IN(a, 3, 4, 5), IN(b, 3, 5, 2), false, false));
    run_ok();
    EXPECT_SHAPE(y, 3, 4, 2);
    double want[24];
    matmul_ref(a, 3, SHAPE(3, 4, 5), false, b, 3, SHAPE(3, 5, 2), false, 3, SHAPE(3, 4, 2), want);
    expect_vals(y, want, 24, 1e-5, 1e-5, "matmul");
    free(a);
    free(b);
}
END_TEST

START_TEST(test_matmul_broadcast_batch) {
    /* a [2,1,3,4] x b [3,4,5] -> [2,3,3,5]; and b^T: a [2,1,3,4] x [1,5,4]^T */
    float *a = pattern(2 * 3 * 4, 12), *b = pattern(3 * 4 * 5, 13);
    tg_tensor *ta = IN(a, 2, 1, 3, 4);
    tg_tensor *y = tg_keep(tg_matmul(ta, IN(b, 3, 4, 5), false, false));
    tg_tensor *z = tg_keep(tg_matmul(ta, IN(b, 1, 5, 4), false, true));
    run_ok();
    EXPECT_SHAPE(y, 2, 3, 3, 5);
    EXPECT_SHAPE(z, 2, 1, 3, 5);
    double want[90];
    matmul_ref(a, 4, SHAPE(2, 1, 3, 4), false, b, 3, SHAPE(3, 4, 5), false, 4, SHAPE(2, 3, 3, 5), want);
    expect_vals(y, want, 90, 1e-5, 1e-5, "matmul bcast");
    matmul_ref(a, 4, SHAPE(2, 1, 3, 4), false, b, 3, SHAPE(1, 5, 4), true, 4, SHAPE(2, 1, 3, 5), want);
    expect_vals(z, want, 30, 1e-5, 1e-5, "matmul bcast nt");
    free(a);
    free(b);
}
END_TEST

START_TEST(test_matmul_batched_times_matrix) {
    /* [2,3,4] x [4,2]: the 2-D operand broadcasts over the batch (a linear layer) */
    float *a = pattern(24, 14), *b = pattern(8, 15);
    tg_tensor *y = tg_keep(tg_matmul(IN(a, 2, 3, 4), IN(b, 4, 2), false, false));
    run_ok();
    EXPECT_SHAPE(y, 2, 3, 2);
    double want[12];
    matmul_ref(a, 3, SHAPE(2, 3, 4), false, b, 2, SHAPE(4, 2), false, 3, SHAPE(2, 3, 2), want);
    expect_vals(y, want, 12, 1e-5, 1e-5, "matmul");
    free(a);
    free(b);
}
END_TEST

START_TEST(test_matmul_transposed_view_operand) {
    /* transpose(A) as a view equals trans_a = true on A */
    float *a = pattern(4 * 3, 16), *b = pattern(4 * 5, 17);
    tg_tensor *ta = IN(a, 4, 3), *tb = IN(b, 4, 5);
    tg_tensor *y1 = tg_keep(tg_matmul(tg_transpose(ta, 0, 1), tb, false, false));
    tg_tensor *y2 = tg_keep(tg_matmul(ta, tb, true, false));
    /* a transposed view with trans = true is A itself */
    tg_tensor *y3 = tg_keep(tg_matmul(tg_transpose(tg_transpose(ta, 0, 1), 0, 1), tb, true, false));
    run_ok();
    double want[15];
    matmul_ref(a, 2, SHAPE(4, 3), true, b, 2, SHAPE(4, 5), false, 2, SHAPE(3, 5), want);
    expect_vals(y1, want, 15, 1e-5, 1e-5, "matmul(view)");
    expect_vals(y2, want, 15, 1e-5, 1e-5, "matmul(trans)");
    expect_vals(y3, want, 15, 1e-5, 1e-5, "matmul(view of view)");
    free(a);
    free(b);
}
END_TEST

START_TEST(test_matmul_sliced_view_operand) {
    /* columns 1..4 of X [4,6] (rows contiguous, row stride 6) times Y [3,2] */
    float *x = pattern(24, 18), y[6] = {1, -1, 2, 0.5f, -3, 1};
    tg_tensor *v = tg_slice(IN(x, 4, 6), 1, 1, 4);
    tg_tensor *r = tg_keep(tg_matmul(v, IN(y, 3, 2), false, false));
    /* and rows 1..3 of X^T: a slice of a transposed view */
    tg_tensor *w = tg_slice(tg_transpose(IN(x, 4, 6), 0, 1), 0, 1, 3); /* [2,4] */
    tg_tensor *r2 = tg_keep(tg_matmul(w, IN(x, 4, 6), false, false));  /* [2,6] */
    run_ok();
    double want[12];
    float xs[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) xs[i * 3 + j] = x[i * 6 + 1 + j];
    matmul_ref(xs, 2, SHAPE(4, 3), false, y, 2, SHAPE(3, 2), false, 2, SHAPE(4, 2), want);
    expect_vals(r, want, 8, 1e-5, 1e-5, "matmul(slice)");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 6; j++) {
            double s = 0;
            for (int k = 0; k < 4; k++) s += (double)x[k * 6 + 1 + i] * x[k * 6 + j];
            want[i * 6 + j] = s;
        }
    expect_vals(r2, want, 12, 1e-5, 1e-5, "matmul(slice of transpose)");
    free(x);
}
END_TEST

START_TEST(test_matmul_head_split_views) {
    /* attention head split: X [B=2, n=3, h=2, dk=4] permuted to [B, h, n, dk] (a view whose
     * rows are contiguous but whose batch strides do not collapse); Q K^T per head */
    float *q = pattern(48, 19), *k = pattern(48, 20);
    int perm[4] = {0, 2, 1, 3};
    tg_tensor *Q = tg_permute(IN(q, 2, 3, 2, 4), perm), *K = tg_permute(IN(k, 2, 3, 2, 4), perm);
    tg_tensor *s = tg_keep(tg_matmul(Q, K, false, true));
    run_ok();
    EXPECT_SHAPE(s, 2, 2, 3, 3);
    double want[36];
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    double acc = 0;
                    for (int d = 0; d < 4; d++)
                        acc += (double)q[((b * 3 + i) * 2 + h) * 4 + d] * k[((b * 3 + j) * 2 + h) * 4 + d];
                    want[((b * 2 + h) * 3 + i) * 3 + j] = acc;
                }
    expect_vals(s, want, 36, 1e-5, 1e-5, "QK^T");
    free(q);
    free(k);
}
END_TEST

START_TEST(test_matmul_vector_shapes) {
    /* [3,4] x [4,1] and [1,4] x [4,3] */
    float a[12], b[4] = {1, 2, 3, 4};
    for (int i = 0; i < 12; i++) a[i] = (float)i;
    tg_tensor *ta = IN(a, 3, 4);
    tg_tensor *y = tg_keep(tg_matmul(ta, IN(b, 4, 1), false, false));
    tg_tensor *z = tg_keep(tg_matmul(IN(b, 1, 4), ta, false, true));
    run_ok();
    EXPECT_SHAPE(y, 3, 1);
    EXPECT(y, 0, 20, 60, 100);
    EXPECT_SHAPE(z, 1, 3);
    EXPECT(z, 0, 20, 60, 100);
}
END_TEST

START_TEST(test_matmul_large_threaded) {
    /* large enough for the blocked, multi-threaded GEMM path */
    enum { M = 67, K = 129, N = 71 };
    float *a = pattern(M * K, 21), *b = pattern(K * N, 22);
    tg_tensor *y = tg_keep(tg_matmul(IN(a, M, K), IN(b, K, N), false, false));
    tg_tensor *z = tg_keep(tg_matmul(IN(a, M, K), IN(b, N, K), false, true));
    run_ok();
    double *want = malloc(M * N * sizeof *want);
    matmul_ref(a, 2, SHAPE(M, K), false, b, 2, SHAPE(K, N), false, 2, SHAPE(M, N), want);
    expect_vals(y, want, M * N, 1e-4, 1e-5, "matmul large");
    matmul_ref(a, 2, SHAPE(M, K), false, b, 2, SHAPE(N, K), true, 2, SHAPE(M, N), want);
    expect_vals(z, want, M * N, 1e-4, 1e-5, "matmul large nt");
    free(want);
    free(a);
    free(b);
}
END_TEST

/* ================================ embedding ================================ */

START_TEST(test_embedding_rows) {
    float tab[15];
    for (int i = 0; i < 15; i++) tab[i] = (float)i * 0.5f;
    int32_t ids[4] = {4, 0, 4, 2};
    tg_tensor *y = tg_keep(tg_embedding(IN(tab, 5, 3), IN_I32(ids, 4)));
    run_ok();
    EXPECT_SHAPE(y, 4, 3);
    EXPECT(y, 0, 6, 6.5, 7, 0, 0.5, 1, 6, 6.5, 7, 3, 3.5, 4);
}
END_TEST

START_TEST(test_embedding_2d_ids) {
    float tab[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t ids[6] = {3, 2, 1, 0, 0, 3};
    tg_tensor *y = tg_keep(tg_embedding(IN(tab, 4, 2), IN_I32(ids, 2, 3)));
    run_ok();
    EXPECT_SHAPE(y, 2, 3, 2);
    EXPECT(y, 0, 7, 8, 5, 6, 3, 4, 1, 2, 1, 2, 7, 8);
}
END_TEST

/* ================================ cross-entropy ================================ */

/* docs/model.md §1: q(k) = (1 - eps)[k = y] + eps / V, loss_row = -sum_k q(k) log softmax(x)_k */
static double ce_row_ref(const float *x, int64_t V, int32_t y, double eps) {
    double m = -INFINITY, s = 0, loss = 0;
    for (int64_t k = 0; k < V; k++) m = x[k] > m ? x[k] : m;
    for (int64_t k = 0; k < V; k++) s += exp(x[k] - m);
    for (int64_t k = 0; k < V; k++) {
        double q = (k == y ? 1.0 - eps : 0.0) + eps / (double)V;
        loss -= q * (x[k] - m - log(s));
    }
    return loss;
}

START_TEST(test_cross_entropy_by_hand) {
    /* uniform logits over V = 4: loss ln 4 whatever the smoothing; logits (0, ln 3) with
     * target 1: -ln(3/4) */
    float x[6] = {0, 0, 0, 0, 0, 1.09861229f};
    int32_t y4[1] = {2}, y2[1] = {1};
    tg_tensor *l1 = tg_keep(tg_cross_entropy(IN(x, 1, 4), IN_I32(y4, 1), 0.0f, -100, TG_REDUCE_MEAN));
    tg_tensor *l2 = tg_keep(tg_cross_entropy(IN(x, 1, 4), IN_I32(y4, 1), 0.1f, -100, TG_REDUCE_MEAN));
    tg_tensor *l3 = tg_keep(tg_cross_entropy(IN(x + 4, 1, 2), IN_I32(y2, 1), 0.0f, -100, TG_REDUCE_SUM));
    /* smoothing 0.1 on (0, ln 3), target 1: q = (0.05, 0.95):
     * -(0.05 ln 1/4 + 0.95 ln 3/4) = 0.0693147 + 0.2732980 = 0.3426127 */
    tg_tensor *l4 = tg_keep(tg_cross_entropy(IN(x + 4, 1, 2), IN_I32(y2, 1), 0.1f, -100, TG_REDUCE_SUM));
    run_ok();
    ck_assert_int_eq(tg_tensor_ndim(l1), 0);
    tg_assert_close(tg_tensor_item(l1), 1.3862943611198906, 1e-6, 0);
    tg_assert_close(tg_tensor_item(l2), 1.3862943611198906, 1e-6, 0);
    tg_assert_close(tg_tensor_item(l3), 0.2876820724517809, 1e-6, 0);
    tg_assert_close(tg_tensor_item(l4), 0.34261270, 1e-6, 0);
}
END_TEST

/* logits [5,6], targets with one ignored row; _i: 0 = smoothing 0, 1 = smoothing 0.1 */
START_TEST(test_cross_entropy_reductions) {
    float eps = _i ? 0.1f : 0.0f;
    float *x = pattern(30, 23);
    int32_t y[5] = {1, 5, -1, 0, 3};
    tg_tensor *lx = IN(x, 5, 6), *ly = IN_I32(y, 5);
    tg_tensor *mean = tg_keep(tg_cross_entropy(lx, ly, eps, -1, TG_REDUCE_MEAN));
    tg_tensor *sum = tg_keep(tg_cross_entropy(lx, ly, eps, -1, TG_REDUCE_SUM));
    tg_tensor *none = tg_keep(tg_cross_entropy(lx, ly, eps, -1, TG_REDUCE_NONE));
    run_ok();
    double rows[5], total = 0;
    for (int i = 0; i < 5; i++) {
        rows[i] = y[i] == -1 ? 0.0 : ce_row_ref(x + i * 6, 6, y[i], eps);
        total += rows[i];
    }
    EXPECT_SHAPE(none, 5);
    expect_vals(none, rows, 5, 1e-6, 1e-6, "ce none");
    ck_assert_int_eq(tg_tensor_ndim(sum), 0);
    tg_assert_close(tg_tensor_item(sum), total, 1e-5, 1e-6);
    tg_assert_close(tg_tensor_item(mean), total / 4, 1e-6, 1e-6); /* 4 non-ignored rows */
    free(x);
}
END_TEST

START_TEST(test_cross_entropy_all_ignored_mean_is_zero) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    int32_t y[2] = {0, 0};
    tg_tensor *m = tg_keep(tg_cross_entropy(IN(x, 2, 3), IN_I32(y, 2), 0.1f, 0, TG_REDUCE_MEAN));
    tg_tensor *s = tg_keep(tg_cross_entropy(IN(x, 2, 3), IN_I32(y, 2), 0.1f, 0, TG_REDUCE_SUM));
    run_ok();
    ck_assert_float_eq(tg_tensor_item(m), 0.0f);
    ck_assert_float_eq(tg_tensor_item(s), 0.0f);
}
END_TEST

START_TEST(test_cross_entropy_huge_and_masked_logits) {
    /* shifting logits by 1000 changes nothing; a -inf logit (never the target) has
     * probability 0 and, without smoothing, no effect */
    float x[8] = {1000, 1001, 1002, 1003, 0, -INFINITY, 1, 2};
    int32_t y[2] = {2, 3};
    tg_tensor *l = tg_keep(tg_cross_entropy(IN(x, 2, 4), IN_I32(y, 2), 0.0f, -100, TG_REDUCE_NONE));
    run_ok();
    float ref0[4] = {0, 1, 2, 3}, ref1[3] = {0, 1, 2};
    EXPECT(l, 1e-5, ce_row_ref(ref0, 4, 2, 0), ce_row_ref(ref1, 3, 2, 0));
}
END_TEST

START_TEST(test_cross_entropy_many_rows_threaded) {
    /* N*V above the parallel threshold: same values as the per-row reference */
    enum { N = 300, V = 97 };
    float *x = pattern(N * V, 24);
    int32_t *y = malloc(N * sizeof *y);
    double total = 0;
    for (int i = 0; i < N; i++) {
        y[i] = (i * 31) % V;
        total += ce_row_ref(x + i * V, V, y[i], 0.1);
    }
    tg_tensor *l = tg_keep(tg_cross_entropy(IN(x, N, V), IN_I32(y, N), 0.1f, -1, TG_REDUCE_MEAN));
    run_ok();
    tg_assert_close(tg_tensor_item(l), total / N, 1e-5, 1e-5);
    free(x);
    free(y);
}
END_TEST

/* A reduced cross-entropy runs as several shares of its node (k_nn.c: the last share to finish
 * sums the rows): the total is the same bits for 1, 2 and 3 threads, and is the row losses
 * (REDUCE_NONE) summed in row order in double, whichever share summed them. */
START_TEST(test_cross_entropy_total_any_threads) {
    enum { N = 257, V = 331 };
    float *x = pattern(N * V, 25);
    int32_t *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++)
        y[i] = i % 7 == 3 ? -1 : (i * 37) % V;
    float got[2], rows[N]; /* 1 thread's total and mean, its row losses */
    for (int t = 1; t <= 3; t++) {
        tg_backend *b;
        ck_assert_int_eq(tg_backend_cpu_new(t, &b), TG_OK);
        for (int rep = 0; rep < 5; rep++) { /* the shares race differently each run */
            tg_graph *g = tg_graph_new();
            tg_tensor *lx = tg_input(g, TG_DTYPE_F32, 2, SHAPE(N, V), x);
            tg_tensor *ly = tg_input(g, TG_DTYPE_I32, 1, SHAPE(N), y);
            tg_tensor *sum = tg_keep(tg_cross_entropy(lx, ly, 0.1f, -1, TG_REDUCE_SUM));
            tg_tensor *mean = tg_keep(tg_cross_entropy(lx, ly, 0.1f, -1, TG_REDUCE_MEAN));
            tg_tensor *none = tg_keep(tg_cross_entropy(lx, ly, 0.1f, -1, TG_REDUCE_NONE));
            ck_assert_int_eq(tg_graph_run(g, b), TG_OK);
            float s = tg_tensor_item(sum), m = tg_tensor_item(mean);
            if (t == 1 && rep == 0) {
                ck_assert_int_eq(tg_tensor_read(none, rows, sizeof rows), TG_OK);
                got[0] = s, got[1] = m;
            }
            ck_assert_msg(memcmp(&s, &got[0], sizeof s) == 0 && memcmp(&m, &got[1], sizeof m) == 0,
                          "%d threads, run %d: total %.9g / mean %.9g, 1 thread %.9g / %.9g", t,
                          rep, s, m, got[0], got[1]);
            tg_graph_free(g);
        }
        tg_backend_free(b);
    }
    double total = 0;
    int count = 0;
    for (int i = 0; i < N; i++)
        total += rows[i], count += y[i] != -1;
    ck_assert((float)total == got[0] && (float)(total / count) == got[1]);
    free(x);
    free(y);
}
END_TEST

/* tg_cross_entropy_with_nll: each column has the bits of tg_cross_entropy with its smoothing
 * (the loss at eps, the NLL at 0), for every reduction and 1 or 3 threads; and the gradient of
 * the loss column alone (the NLL column weighted 0, as a trainer backpropagates) has the plain
 * loss's gradient bits. */
START_TEST(test_cross_entropy_with_nll_columns) {
    enum { N = 203, V = 157 };
    float *x = pattern(N * V, 26);
    int32_t *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++)
        y[i] = i % 9 == 4 ? -1 : (i * 41) % V;
    for (int t = 1; t <= 3; t += 2)
        for (int red = TG_REDUCE_MEAN; red <= TG_REDUCE_NONE; red++) {
            tg_backend *b;
            ck_assert_int_eq(tg_backend_cpu_new(t, &b), TG_OK);
            tg_graph *g = tg_graph_new();
            tg_tensor *lx = tg_input(g, TG_DTYPE_F32, 2, SHAPE(N, V), x);
            tg_tensor *ly = tg_input(g, TG_DTYPE_I32, 1, SHAPE(N), y);
            tg_tensor *pair =
                tg_keep(tg_cross_entropy_with_nll(lx, ly, 0.1f, -1, (tg_reduction)red));
            tg_tensor *loss = tg_keep(tg_cross_entropy(lx, ly, 0.1f, -1, (tg_reduction)red));
            tg_tensor *nll = tg_keep(tg_cross_entropy(lx, ly, 0.0f, -1, (tg_reduction)red));
            const int64_t rows = red == TG_REDUCE_NONE ? N : 1;
            ck_assert_int_eq(tg_tensor_ndim(pair), red == TG_REDUCE_NONE ? 2 : 1);
            ck_assert_int_eq(tg_tensor_dim(pair, -1), 2);
            ck_assert_int_eq(tg_graph_run(g, b), TG_OK);
            float *p = tg_test_read_all(pair), *l = tg_test_read_all(loss),
                  *q = tg_test_read_all(nll);
            for (int64_t i = 0; i < rows; i++)
                ck_assert_msg(memcmp(&p[2 * i], &l[i], 4) == 0 &&
                                  memcmp(&p[2 * i + 1], &q[i], 4) == 0,
                              "threads %d reduction %d row %lld: %.9g %.9g against %.9g %.9g", t,
                              red, (long long)i, p[2 * i], p[2 * i + 1], l[i], q[i]);
            free(p), free(l), free(q);
            tg_graph_free(g);

            /* the gradients: d/dx of sum(w * loss column) against the plain loss's */
            float *w = pattern(2 * rows, 27);
            for (int64_t i = 0; i < rows; i++)
                w[2 * i + 1] = 0.0f;
            float *w1 = malloc((size_t)rows * sizeof *w1);
            for (int64_t i = 0; i < rows; i++)
                w1[i] = w[2 * i];
            float *gr[2];
            for (int v = 0; v < 2; v++) {
                g = tg_graph_new();
                lx = tg_requires_grad(tg_input(g, TG_DTYPE_F32, 2, SHAPE(N, V), x));
                ly = tg_input(g, TG_DTYPE_I32, 1, SHAPE(N), y);
                tg_tensor *o = v ? tg_cross_entropy_with_nll(lx, ly, 0.1f, -1, (tg_reduction)red)
                                 : tg_cross_entropy(lx, ly, 0.1f, -1, (tg_reduction)red);
                tg_tensor *wt = v ? tg_input(g, TG_DTYPE_F32, tg_tensor_ndim(o),
                                             red == TG_REDUCE_NONE ? SHAPE(N, 2) : SHAPE(2), w)
                                  : tg_input(g, TG_DTYPE_F32, tg_tensor_ndim(o), SHAPE(N), w1);
                ck_assert_int_eq(tg_backward(g, tg_sum_all(tg_mul(o, wt))), TG_OK);
                tg_tensor *dx = tg_keep(tg_grad(g, lx));
                ck_assert_int_eq(tg_graph_run(g, b), TG_OK);
                gr[v] = tg_test_read_all(dx);
                tg_graph_free(g);
            }
            ck_assert_msg(memcmp(gr[0], gr[1], sizeof(float) * N * V) == 0,
                          "threads %d reduction %d: the loss column's gradient differs", t, red);
            free(gr[0]), free(gr[1]), free(w), free(w1);
            tg_backend_free(b);
        }
    free(x);
    free(y);
}
END_TEST

/* =========================== banded attention =========================== */

START_TEST(test_band_scores_by_hand) {
    /* n = m = 3, d_k = 1, r = 1: S[i, j] = q_i k_{i+j-1}; keys before 0 or after 2 are -inf */
    float q[3] = {1, 2, 3}, k[3] = {1, 10, 100};
    tg_tensor *s = tg_keep(tg_band_scores(IN(q, 1, 3, 1), IN(k, 1, 3, 1), 1, -INFINITY));
    run_ok();
    EXPECT_SHAPE(s, 1, 3, 3);
    EXPECT(s, 0, -INFINITY, 1, 10, 2, 20, 200, 30, 300, -INFINITY);
}
END_TEST

START_TEST(test_band_mix_by_hand) {
    /* O_i = sum_j P[i, j] V_{i+j-1}, V rows (1, 0), (0, 1), (1, 1); -inf entries at missing keys
     * are never read */
    float p[9] = {-INFINITY, 0.5f, 0.5f, 0.25f, 0.25f, 0.5f, 1, 2, -INFINITY};
    float v[6] = {1, 0, 0, 1, 1, 1};
    tg_tensor *o = tg_keep(tg_band_mix(IN(p, 1, 3, 3), IN(v, 1, 3, 2), 1));
    run_ok();
    EXPECT_SHAPE(o, 1, 3, 2);
    /* row 0: 0.5 (1,0) + 0.5 (0,1); row 1: 0.25 (1,0) + 0.25 (0,1) + 0.5 (1,1); row 2: 1 (0,1) + 2 (1,1) */
    EXPECT(o, 0, 0.5, 0.5, 0.75, 0.75, 2, 3);
}
END_TEST

/* band_scores against the dense Q K^T (matmul) and band_mix against the dense P V with P
 * scattered back to [n, m], over shapes where the window is cut by both ends, m != n, and
 * r >= n (case 2: every key of every query inside the band). fill 7 marks missing keys. */
START_TEST(test_band_ops_match_dense) {
    static const int64_t cfg[3][4] = {{5, 5, 3, 2}, {6, 4, 4, 1}, {3, 4, 5, 4}}; /* n, m, d, r */
    int64_t n = cfg[_i][0], m = cfg[_i][1], d = cfg[_i][2], r = cfg[_i][3], w = 2 * r + 1, nb = 2;
    float *q = pattern(nb * n * d, 1), *k = pattern(nb * m * d, 2), *v = pattern(nb * m * d, 3);
    float *p = pattern(nb * n * w, 4);
    int64_t sq[3] = {nb, n, d}, sk[3] = {nb, m, d}, sp[3] = {nb, n, w};
    tg_tensor *Q = tg_input(G, TG_DTYPE_F32, 3, sq, q), *K = tg_input(G, TG_DTYPE_F32, 3, sk, k);
    tg_tensor *V = tg_input(G, TG_DTYPE_F32, 3, sk, v), *P = tg_input(G, TG_DTYPE_F32, 3, sp, p);
    tg_tensor *s = tg_keep(tg_band_scores(Q, K, r, 7.0f)), *o = tg_keep(tg_band_mix(P, V, r));
    tg_tensor *dense = tg_keep(tg_matmul(Q, K, false, true));
    run_ok();
    EXPECT_SHAPE(s, nb, n, w);
    EXPECT_SHAPE(o, nb, n, d);
    float *sv = tg_test_read_all(s), *ov = tg_test_read_all(o), *dv = tg_test_read_all(dense);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < w; j++) {
                int64_t t = i + j - r;
                float want = (t < 0 || t >= m) ? 7.0f : dv[(b * n + i) * m + t];
                tg_assert_close(sv[(b * n + i) * w + j], want, 1e-5, 1e-6);
            }
            for (int64_t c = 0; c < d; c++) {
                double want = 0;
                for (int64_t j = 0; j < w; j++) {
                    int64_t t = i + j - r;
                    if (t >= 0 && t < m) want += (double)p[(b * n + i) * w + j] * v[(b * m + t) * d + c];
                }
                tg_assert_close(ov[(b * n + i) * d + c], want, 1e-5, 1e-6);
            }
        }
    free(sv);
    free(ov);
    free(dv);
    free(q);
    free(k);
    free(v);
    free(p);
}
END_TEST

/* 300 rows × 33 columns × 64 channels: enough work for both team members; equal to one thread */
START_TEST(test_band_ops_threaded) {
    int64_t n = 150, d = 64, r = 16, w = 33;
    float *q = pattern(2 * n * d, 5), *k = pattern(2 * n * d, 6);
    int64_t sq[3] = {2, n, d};
    tg_tensor *Q = tg_input(G, TG_DTYPE_F32, 3, sq, q), *K = tg_input(G, TG_DTYPE_F32, 3, sq, k);
    tg_tensor *s = tg_keep(tg_band_scores(Q, K, r, 0.0f));
    tg_tensor *o = tg_keep(tg_band_mix(tg_softmax(s), K, r));
    run_ok();
    float *s2 = tg_test_read_all(s), *o2 = tg_test_read_all(o);
    tg_backend *one;
    ck_assert_int_eq(tg_backend_cpu_new(1, &one), TG_OK);
    tg_graph *g1 = tg_graph_new();
    tg_tensor *Q1 = tg_input(g1, TG_DTYPE_F32, 3, sq, q), *K1 = tg_input(g1, TG_DTYPE_F32, 3, sq, k);
    tg_tensor *s1 = tg_keep(tg_band_scores(Q1, K1, r, 0.0f));
    tg_tensor *o1 = tg_keep(tg_band_mix(tg_softmax(s1), K1, r));
    ck_assert_int_eq(tg_graph_run(g1, one), TG_OK);
    float *a = tg_test_read_all(s1), *b = tg_test_read_all(o1);
    ck_assert(memcmp(a, s2, sizeof(float) * (size_t)(2 * n * w)) == 0);
    ck_assert(memcmp(b, o2, sizeof(float) * (size_t)(2 * n * d)) == 0);
    free(a);
    free(b);
    free(s2);
    free(o2);
    tg_graph_free(g1);
    tg_backend_free(one);
    free(q);
    free(k);
}
END_TEST

/* Bad shapes and r mark the graph with a message naming the op. */
START_TEST(test_band_errors) {
    static const char *want[5] = {"r = -1", "differ in d_k", "equal leading dimensions", "2r+1 = 5",
                                  "equal leading dimensions"};
    float x[64] = {0};
    tg_graph *g = tg_graph_new();
    int64_t a[3] = {2, 3, 4}, b[3] = {2, 3, 5}, c[3] = {1, 3, 4}, p[3] = {2, 3, 3};
    tg_tensor *A = tg_input(g, TG_DTYPE_F32, 3, a, x), *Bt = tg_input(g, TG_DTYPE_F32, 3, b, x);
    tg_tensor *C = tg_input(g, TG_DTYPE_F32, 3, c, x), *P = tg_input(g, TG_DTYPE_F32, 3, p, x);
    tg_tensor *y = NULL;
    switch (_i) {
    case 0: y = tg_band_scores(A, A, -1, 0.0f); break;
    case 1: y = tg_band_scores(A, Bt, 1, 0.0f); break;
    case 2: y = tg_band_scores(A, C, 1, 0.0f); break; /* batch 2 against 1: no broadcasting */
    case 3: y = tg_band_mix(P, A, 2); break;           /* 3 columns, r = 2 needs 5 */
    default: y = tg_band_mix(P, tg_reshape(A, 2, (int64_t[]){6, 4}), 1); break;
    }
    ck_assert_ptr_null(y);
    const char *msg;
    ck_assert_int_ne(tg_graph_status(g, &msg), TG_OK);
    ck_assert_msg(strstr(msg, want[_i]) && strstr(msg, "band"), "message: %s", msg);
    tg_graph_free(g);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("ops_rows");
    TCase *tc = tcase_create("rows");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_softmax_by_hand);
    tcase_add_test(tc, test_softmax_rows_3d);
    tcase_add_test(tc, test_softmax_huge_logits);
    tcase_add_test(tc, test_softmax_neg_inf_entries);
    tcase_add_test(tc, test_softmax_fully_masked_row_gives_zeros);
    tcase_add_test(tc, test_log_softmax_values);
    tcase_add_test(tc, test_log_softmax_by_hand_and_huge);
    tcase_add_test(tc, test_log_softmax_neg_inf);
    tcase_add_test(tc, test_layer_norm_by_hand);
    tcase_add_test(tc, test_layer_norm_gamma_beta);
    tcase_add_test(tc, test_layer_norm_gamma_only_beta_only);
    tcase_add_test(tc, test_layer_norm_constant_row_and_eps);
    tcase_add_test(tc, test_layer_norm_large_mean_3d);
    suite_add_tcase(s, tc);

    tc = tcase_create("matmul");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_matmul_by_hand);
    tcase_add_loop_test(tc, test_matmul_transpose_combos, 0, 4);
    tcase_add_test(tc, test_matmul_transpose_by_hand);
    tcase_add_test(tc, test_matmul_batched);
    tcase_add_test(tc, test_matmul_broadcast_batch);
    tcase_add_test(tc, test_matmul_batched_times_matrix);
    tcase_add_test(tc, test_matmul_transposed_view_operand);
    tcase_add_test(tc, test_matmul_sliced_view_operand);
    tcase_add_test(tc, test_matmul_head_split_views);
    tcase_add_test(tc, test_matmul_vector_shapes);
    tcase_add_test(tc, test_matmul_large_threaded);
    suite_add_tcase(s, tc);

    tc = tcase_create("lookup_loss");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_embedding_rows);
    tcase_add_test(tc, test_embedding_2d_ids);
    tcase_add_test(tc, test_cross_entropy_by_hand);
    tcase_add_loop_test(tc, test_cross_entropy_reductions, 0, 2);
    tcase_add_test(tc, test_cross_entropy_all_ignored_mean_is_zero);
    tcase_add_test(tc, test_cross_entropy_huge_and_masked_logits);
    tcase_add_test(tc, test_cross_entropy_total_any_threads);
    tcase_add_test(tc, test_cross_entropy_with_nll_columns);
    tcase_add_test(tc, test_cross_entropy_many_rows_threaded);
    suite_add_tcase(s, tc);

    tc = tcase_create("band");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_band_scores_by_hand);
    tcase_add_test(tc, test_band_mix_by_hand);
    tcase_add_loop_test(tc, test_band_ops_match_dense, 0, 3);
    tcase_add_test(tc, test_band_ops_threaded);
    tcase_add_loop_test(tc, test_band_errors, 0, 5);
    suite_add_tcase(s, tc);
    return s;
}
