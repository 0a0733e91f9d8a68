/* Forward values of the elementwise, masking, dropout, reduction and layout ops (ops.h) against
 * values computed by hand, or computed here in double precision from the op's definition (NumPy
 * broadcasting). Each test builds a small graph on a 2-thread CPU backend (ops_check.h), runs it
 * and compares every element of the kept result; shapes are checked too. The row ops, products,
 * lookups and losses are in test_ops_rows.c; views and layout (reshape, permute, slice,
 * contiguous) in test_views.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_check.h"

/* =========================== elementwise, broadcasting =========================== */

START_TEST(test_add_same_shape) {
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60};
    tg_tensor *y = tg_keep(tg_add(IN(a, 2, 3), IN(b, 2, 3)));
    run_ok();
    EXPECT_SHAPE(y, 2, 3);
    EXPECT(y, 0, 11, 22, 33, 44, 55, 66);
}
END_TEST

START_TEST(test_add_broadcast_row) {
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    tg_tensor *y = tg_keep(tg_add(IN(a, 2, 3), IN(b, 3)));
    run_ok();
    EXPECT_SHAPE(y, 2, 3);
    EXPECT(y, 0, 11, 22, 33, 14, 25, 36);
}
END_TEST

START_TEST(test_add_broadcast_column_by_row) {
    float a[3] = {1, 2, 3}, b[4] = {10, 20, 30, 40};
    tg_tensor *y = tg_keep(tg_add(IN(a, 3, 1), IN(b, 1, 4)));
    run_ok();
    EXPECT_SHAPE(y, 3, 4);
    EXPECT(y, 0, 11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43);
}
END_TEST

START_TEST(test_add_scalar_tensor) {
    float a[6] = {1, 2, 3, 4, 5, 6}, s = 0.5f;
    tg_tensor *y = tg_keep(tg_add(tg_input(G, TG_DTYPE_F32, 0, NULL, &s), IN(a, 2, 3)));
    run_ok();
    EXPECT_SHAPE(y, 2, 3);
    EXPECT(y, 0, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5);
}
END_TEST

START_TEST(test_sub_broadcast_fewer_dims_first) {
    float a[4] = {1, 2, 3, 4}, b[2] = {10, 20};
    tg_tensor *y = tg_keep(tg_sub(IN(a, 4), IN(b, 2, 1)));
    run_ok();
    EXPECT_SHAPE(y, 2, 4);
    EXPECT(y, 0, -9, -8, -7, -6, -19, -18, -17, -16);
}
END_TEST

START_TEST(test_div_broadcast_column) {
    float a[6] = {1, 2, 3, 4, 5, 6}, b[2] = {2, -4};
    tg_tensor *y = tg_keep(tg_div(IN(a, 2, 3), IN(b, 2, 1)));
    run_ok();
    EXPECT(y, 0, 0.5, 1, 1.5, -1, -1.25, -1.5);
}
END_TEST

/* Several broadcasting patterns of every binary op, against a double reference. */
static const struct {
    int na, nb;
    int64_t sa[4], sb[4], so[4];
    int no;
} bcast_cases[] = {
    {3, 2, {2, 3, 4}, {3, 1}, {2, 3, 4}, 3},
    {3, 2, {2, 1, 3}, {4, 1}, {2, 4, 3}, 3},
    {1, 3, {5}, {2, 3, 1}, {2, 3, 5}, 3},
    {4, 4, {2, 1, 3, 1}, {1, 2, 1, 4}, {2, 2, 3, 4}, 4},
    {2, 1, {3, 4}, {1}, {3, 4}, 2},
    {3, 3, {1, 1, 6}, {2, 3, 1}, {2, 3, 6}, 3},
    /* several tiles of TG_CHAIN_TILE (1024) elements, the later ones starting inside a row of
     * 13: the gathering walks the broadcast rows from wherever a tile starts */
    {4, 4, {3, 1, 7, 13}, {1, 5, 1, 13}, {3, 5, 7, 13}, 4},
    {4, 3, {3, 5, 7, 13}, {5, 1, 1}, {3, 5, 7, 13}, 4},
};
#define NBCAST ((int)(sizeof bcast_cases / sizeof bcast_cases[0]))

START_TEST(test_binary_broadcast_patterns) {
    for (int op = 0; op < 4; op++) {
        tg_graph *g = tg_graph_new();
        int c = _i;
        int64_t na = 1, nb = 1, no = 1;
        for (int i = 0; i < bcast_cases[c].na; i++) na *= bcast_cases[c].sa[i];
        for (int i = 0; i < bcast_cases[c].nb; i++) nb *= bcast_cases[c].sb[i];
        for (int i = 0; i < bcast_cases[c].no; i++) no *= bcast_cases[c].so[i];
        float *a = pattern(na, 1), *b = pattern(nb, 2);
        for (int64_t e = 0; e < nb; e++) b[e] = b[e] >= 0 ? b[e] + 0.5f : b[e] - 0.5f; /* no 0 */
        tg_tensor *ta = tg_input(g, TG_DTYPE_F32, bcast_cases[c].na, bcast_cases[c].sa, a);
        tg_tensor *tb = tg_input(g, TG_DTYPE_F32, bcast_cases[c].nb, bcast_cases[c].sb, b);
        tg_tensor *y = op == 0 ? tg_add(ta, tb) : op == 1 ? tg_sub(ta, tb) : op == 2 ? tg_mul(ta, tb)
                                                                                     : tg_div(ta, tb);
        tg_keep(y);
        ck_assert_int_eq(tg_graph_run(g, B), TG_OK);
        ck_assert_int_eq(tg_tensor_ndim(y), bcast_cases[c].no);
        for (int i = 0; i < bcast_cases[c].no; i++)
            ck_assert_int_eq(tg_tensor_dim(y, i), bcast_cases[c].so[i]);
        float *v = tg_test_read_all(y);
        for (int64_t e = 0; e < no; e++) {
            double x = a[bcast_index(e, bcast_cases[c].no, bcast_cases[c].so, bcast_cases[c].na,
                                     bcast_cases[c].sa)];
            double z = b[bcast_index(e, bcast_cases[c].no, bcast_cases[c].so, bcast_cases[c].nb,
                                     bcast_cases[c].sb)];
            double want = op == 0 ? x + z : op == 1 ? x - z : op == 2 ? x * z : x / z;
            ck_assert_msg(fabs(v[e] - want) <= 1e-6 * (1 + fabs(want)),
                          "case %d op %d element %lld: %g vs %g", c, op, (long long)e, (double)v[e], want);
        }
        free(v);
        free(a);
        free(b);
        tg_graph_free(g);
    }
}
END_TEST

static const float UX[6] = {-2, -0.5f, 0, 0.5f, 1, 3};

START_TEST(test_scale) {
    tg_tensor *y = tg_keep(tg_scale(IN(UX, 6), 2.5f));
    run_ok();
    EXPECT(y, 0, -5, -1.25, 0, 1.25, 2.5, 7.5);
}
END_TEST

START_TEST(test_affine) {
    tg_tensor *y = tg_keep(tg_affine(IN(UX, 2, 3), -2.0f, 1.0f));
    run_ok();
    EXPECT_SHAPE(y, 2, 3);
    EXPECT(y, 0, 5, 2, 1, 0, -1, -5);
}
END_TEST

START_TEST(test_add_scalar) {
    tg_tensor *y = tg_keep(tg_add_scalar(IN(UX, 6), 0.25f));
    run_ok();
    EXPECT(y, 0, -1.75, -0.25, 0.25, 0.75, 1.25, 3.25);
}
END_TEST

START_TEST(test_neg) {
    tg_tensor *y = tg_keep(tg_neg(IN(UX, 6)));
    run_ok();
    EXPECT(y, 0, 2, 0.5, 0, -0.5, -1, -3);
}
END_TEST

START_TEST(test_exp) {
    tg_tensor *y = tg_keep(tg_exp(IN(UX, 6)));
    run_ok();
    EXPECT(y, 1e-6, 0.1353352832366127, 0.6065306597126334, 1, 1.6487212707001282,
           2.718281828459045, 20.085536923187668);
}
END_TEST

START_TEST(test_log) {
    float x[6] = {0.5f, 1, 2, 2.718281828f, 10, 0};
    tg_tensor *y = tg_keep(tg_log(IN(x, 6)));
    run_ok();
    EXPECT(y, 1e-6, -0.6931471805599453, 0, 0.6931471805599453, 1, 2.302585092994046, -INFINITY);
}
END_TEST

START_TEST(test_sqrt) {
    float x[5] = {0, 1, 4, 2, 0.25f};
    tg_tensor *y = tg_keep(tg_sqrt(IN(x, 5)));
    run_ok();
    EXPECT(y, 1e-7, 0, 1, 2, 1.4142135623730951, 0.5);
}
END_TEST

START_TEST(test_rsqrt) {
    float x[5] = {1, 4, 0.25f, 2, 0};
    tg_tensor *y = tg_keep(tg_rsqrt(IN(x, 5)));
    run_ok();
    EXPECT(y, 1e-7, 1, 0.5, 2, 0.7071067811865476, INFINITY);
}
END_TEST

START_TEST(test_tanh) {
    float x[6] = {-20, -1, 0, 0.5f, 1, 20};
    tg_tensor *y = tg_keep(tg_tanh(IN(x, 6)));
    run_ok();
    EXPECT(y, 1e-7, -1, -0.7615941559557649, 0, 0.46211715726000974, 0.7615941559557649, 1);
}
END_TEST

START_TEST(test_relu) {
    tg_tensor *y = tg_keep(tg_relu(IN(UX, 6)));
    run_ok();
    EXPECT(y, 0, 0, 0, 0, 0.5, 1, 3);
}
END_TEST

/* The CPU backend computes with subnormals flushed to zero on x86 (backends/cpu/team.h). */
#if defined(__SSE2__)
#include <float.h>
#include <xmmintrin.h>
#define FLUSHES_SUBNORMALS 1
#else
#define FLUSHES_SUBNORMALS 0
#endif

/* ReLU's gradient, taken from its output (core/ops/elementwise.c g_relu): dy where x > 0 and 0
 * elsewhere, bit for bit — at -0, NaN, the smallest subnormal and its negative too (on x86 the
 * subnormal reads as 0, so its gradient is 0). */
START_TEST(test_relu_gradient) {
    float x[8] = {-2.0f, -0.0f, 0.0f, NAN, 1e-45f, -1e-45f, 0.75f, 3.0f};
    float dy[8] = {1.5f, 2.0f, -3.0f, 4.0f, 0.25f, 5.0f, -0.5f, 7.0f};
    tg_tensor *xi = tg_requires_grad(IN(x, 8));
    ck_assert_int_eq(tg_backward(G, tg_sum_all(tg_mul(tg_relu(xi), IN(dy, 8)))), TG_OK);
    tg_tensor *dx = tg_keep(tg_grad(G, xi));
    run_ok();
    float *got = tg_test_read_all(dx);
    for (int i = 0; i < 8; i++) {
        const bool flushed = FLUSHES_SUBNORMALS && fabsf(x[i]) < FLT_MIN;
        const float want = x[i] > 0.0f && !flushed ? dy[i] : 0.0f;
        ck_assert_msg(memcmp(&got[i], &want, sizeof want) == 0, "dx[%d] = %g, want %g (x %g)", i,
                      (double)got[i], (double)want, (double)x[i]);
    }
    free(got);
}
END_TEST

/* Subnormal inputs read as 0 and subnormal results are written as 0 (x86: FTZ and DAZ, on the
 * caller's thread and the team's), and the caller's floating-point control is as it was after
 * the run. Elsewhere the values are IEEE's. Enough elements that the members take shares. */
START_TEST(test_subnormals_flushed) {
    enum { N = 1 << 16 };
    const float a4[4] = {1e-45f, -1e-39f, 1e-20f, 1.5f}, b4[4] = {1.0f, 1.0f, 1e-20f, 2.0f};
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    ck_assert(a && b);
    for (int i = 0; i < N; i++)
        a[i] = a4[i % 4], b[i] = b4[i % 4];
#if FLUSHES_SUBNORMALS
    const unsigned control = _mm_getcsr() & ~0x3Fu;
    ck_assert_msg((control & 0x8040u) == 0, "the test thread starts without FTZ/DAZ");
#endif
    tg_tensor *y = tg_keep(tg_mul(IN(a, N), IN(b, N)));
    run_ok();
#if FLUSHES_SUBNORMALS
    ck_assert_uint_eq(_mm_getcsr() & ~0x3Fu, control);
#endif
    float *got = tg_test_read_all(y);
    for (int i = 0; i < N; i++) {
        const float want = FLUSHES_SUBNORMALS && i % 4 < 3 ? 0.0f : a[i] * b[i];
        ck_assert_msg(got[i] == want, "y[%d] = %g, want %g", i, (double)got[i], (double)want);
    }
    free(got);
    free(a);
    free(b);
}
END_TEST

/* Values from PyTorch 1.13 in float64 (torch.nn.functional.silu, then y.backward(dy) for
 * x.grad), printed with %.9g. */
/* Values from PyTorch 1.13 in float64 (torch.nn.functional.gelu, the exact erf form, then
 * y.backward(dy) for x.grad), printed with %.9g. By hand: gelu(1) = Phi(1) = 0.841344746;
 * d/dx at 1 = Phi(1) + phi(1) = 0.841344746 + 0.241970725 = 1.08331547 (times dy = -1). */
START_TEST(test_gelu_erf_and_its_gradient) {
    float x[9] = {-6, -3, -1, -0.5f, 0, 0.5f, 1, 3, 6};
    float dy[9] = {1, 0.5f, -2, 1, 3, 1, -1, 0.25f, 2};
    tg_tensor *xi = tg_requires_grad(IN(x, 9));
    tg_tensor *y = tg_keep(tg_gelu_erf(xi));
    ck_assert_int_eq(tg_backward(G, tg_sum_all(tg_mul(y, IN(dy, 9)))), TG_OK);
    tg_tensor *dx = tg_keep(tg_grad(G, xi));
    run_ok();
    EXPECT(y, 1e-6, -5.91952587e-09, -0.00404969409, -0.158655254, -0.154268769, 0, 0.345731231,
           0.841344746, 2.99595031, 5.99999999);
    EXPECT(dx, 1e-6, -3.54687095e-08, -0.0059728236, 0.166630941, 0.132504875, 1.5, 0.867495125,
           -1.08331547, 0.252986412, 2.00000007);
}
END_TEST

START_TEST(test_silu_and_its_gradient) {
    float x[9] = {-20, -3, -1, -0.5f, 0, 0.5f, 1, 3, 20};
    float dy[9] = {1, 0.5f, -2, 1, 3, 1, -1, 0.25f, 2};
    tg_tensor *xi = tg_requires_grad(IN(x, 9));
    tg_tensor *y = tg_keep(tg_silu(xi));
    ck_assert_int_eq(tg_backward(G, tg_sum_all(tg_mul(y, IN(dy, 9)))), TG_OK);
    tg_tensor *dx = tg_keep(tg_grad(G, xi));
    run_ok();
    EXPECT(y, 1e-6, -4.12230724e-08, -0.14227762, -0.268941421, -0.188770334, 0, 0.311229666,
           0.731058579, 2.85772238, 20);
    EXPECT(dx, 1e-6, -3.91619187e-08, -0.044052053, -0.144658976, 0.260038813, 1.5, 0.739961187,
           -0.927670512, 0.272026027, 2.00000008);
}
END_TEST

START_TEST(test_gelu_tanh_form) {
    float x[7] = {-3, -1, -0.5f, 0, 0.5f, 1, 3};
    tg_tensor *y = tg_keep(tg_gelu(IN(x, 7)));
    run_ok();
    double want[7];
    for (int i = 0; i < 7; i++) {
        double v = x[i];
        want[i] = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    }
    expect_vals(y, want, 7, 1e-6, 1e-6, "gelu");
    /* by hand: gelu(1) = 0.5 (1 + tanh(0.7978845608 * 1.044715)) = 0.841192 */
    float v[7];
    ck_assert_int_eq(tg_tensor_read(y, v, sizeof v), TG_OK);
    tg_assert_close(v[5], 0.841192, 1e-5, 0);
}
END_TEST

/* ================================ masks ================================ */

START_TEST(test_masked_fill_f32_mask) {
    float x[6] = {1, 2, 3, 4, 5, 6}, m[6] = {0, 1, 0, 0.5f, 0, -2};
    tg_tensor *y = tg_keep(tg_masked_fill(IN(x, 2, 3), IN(m, 2, 3), 9));
    run_ok();
    EXPECT(y, 0, 1, 9, 3, 9, 5, 9); /* any nonzero mask value selects, even 0.5 and -2 */
}
END_TEST

START_TEST(test_masked_fill_i32_broadcast_row) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    int32_t m[3] = {1, 0, -7};
    tg_tensor *y = tg_keep(tg_masked_fill(IN(x, 2, 3), IN_I32(m, 3), -1));
    run_ok();
    EXPECT_SHAPE(y, 2, 3);
    EXPECT(y, 0, -1, 2, -1, -1, 5, -1);
}
END_TEST

START_TEST(test_masked_fill_neg_inf_column_mask) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    int32_t m[2] = {0, 1};
    tg_tensor *y = tg_keep(tg_masked_fill(IN(x, 2, 3), IN_I32(m, 2, 1), -INFINITY));
    run_ok();
    EXPECT(y, 0, 1, 2, 3, -INFINITY, -INFINITY, -INFINITY);
}
END_TEST

START_TEST(test_masked_fill_3d_mask_broadcast) {
    /* x [2,3,4], mask [2,1,4]: mask row b applies to every row of batch b */
    float x[24];
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    float m[8] = {1, 0, 0, 1, 0, 1, 1, 0};
    tg_tensor *y = tg_keep(tg_masked_fill(IN(x, 2, 3, 4), IN(m, 2, 1, 4), -5));
    run_ok();
    double want[24];
    for (int b = 0; b < 2; b++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++) {
                int e = (b * 3 + r) * 4 + c;
                want[e] = m[b * 4 + c] != 0 ? -5 : e;
            }
    expect_vals(y, want, 24, 0, 0, "masked_fill");
}
END_TEST

/* An i32 mask over several tiles, the later ones starting inside a row: a padding-like mask
 * [3,1,1,13] and a causal-like one [1,1,7,13] (each row of a tile gathered from its own mask row),
 * and a per-row one [3,5,7,1] (its last dim broadcast: one value strided across the row). */
START_TEST(test_masked_fill_i32_masks_across_tiles) {
    enum { B = 3, H = 5, N = 7, D = 13, E = B * H * N * D };
    static const int64_t shapes[3][4] = {{B, 1, 1, D}, {1, 1, N, D}, {B, H, N, 1}};
    const int64_t os[4] = {B, H, N, D};
    float *x = pattern(E, 3);
    for (int k = 0; k < 3; k++) {
        int64_t nm = shapes[k][0] * shapes[k][1] * shapes[k][2] * shapes[k][3];
        int32_t *m = malloc((size_t)nm * sizeof *m);
        ck_assert_ptr_nonnull(m);
        for (int64_t i = 0; i < nm; i++)
            m[i] = (int32_t)((i * 5 + k) % 3) - 1; /* -1, 0, 1 */
        tg_tensor *y = tg_keep(tg_masked_fill(tg_input(G, TG_DTYPE_F32, 4, os, x),
                                              tg_input(G, TG_DTYPE_I32, 4, shapes[k], m), -9.0f));
        run_ok();
        double *want = malloc(E * sizeof *want);
        ck_assert_ptr_nonnull(want);
        for (int64_t e = 0; e < E; e++)
            want[e] = m[bcast_index(e, 4, os, 4, shapes[k])] != 0 ? -9.0 : x[e];
        expect_vals(y, want, E, 0, 0, "masked_fill");
        free(want);
        free(m);
    }
    free(x);
}
END_TEST

/* ================================ dropout ================================ */

START_TEST(test_dropout_p0_is_identity) {
    float x[4] = {1, -2, 3, -4};
    tg_tensor *in = IN(x, 4);
    tg_tensor *y = tg_dropout(in, 0.0f);
    ck_assert_ptr_eq(y, in); /* no node at all */
    tg_keep(y);
    run_ok();
    EXPECT(y, 0, 1, -2, 3, -4);
}
END_TEST

START_TEST(test_dropout_inference_is_identity) {
    float x[4] = {1, -2, 3, -4};
    tg_graph_set_training(G, false);
    ck_assert(!tg_graph_training(G));
    tg_tensor *y = tg_keep(tg_scale(tg_dropout(IN(x, 4), 0.5f), 1.0f));
    run_ok();
    EXPECT(y, 0, 1, -2, 3, -4);
}
END_TEST

enum { DN = 100000 };

/* Dropout of a tensor of ones on a fresh graph: the mask as 0/1 in keep[]. */
static void dropout_mask(uint64_t seed, float p, int threads, unsigned char *keep) {
    tg_graph *g = tg_graph_new();
    tg_graph_set_seed(g, seed);
    ck_assert_int_eq(tg_backend_set_threads(B, threads), TG_OK);
    int64_t n = DN;
    tg_tensor *y = tg_keep(tg_dropout(tg_full(g, 1.0f, 1, &n), p));
    ck_assert_int_eq(tg_graph_run(g, B), TG_OK);
    float *v = tg_test_read_all(y);
    float s = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(v[i] == 0.0f || v[i] == s, "element %lld = %.9g, neither 0 nor %.9g", (long long)i,
                      (double)v[i], (double)s);
        keep[i] = v[i] != 0.0f;
    }
    free(v);
    tg_graph_free(g);
}

START_TEST(test_dropout_fraction_and_scale) {
    unsigned char *k = malloc(DN);
    const float ps[3] = {0.1f, 0.3f, 0.5f};
    for (int j = 0; j < 3; j++) {
        dropout_mask(42, ps[j], 2, k); /* also asserts kept values == 1/(1-p) */
        long zeros = 0;
        for (int i = 0; i < DN; i++) zeros += !k[i];
        double frac = (double)zeros / DN; /* std of frac is sqrt(p(1-p)/n) < 0.0016 */
        ck_assert_msg(fabs(frac - ps[j]) < 0.01, "p = %g: fraction of zeros %g", (double)ps[j], frac);
    }
    free(k);
}
END_TEST

START_TEST(test_dropout_values_scaled) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tg_graph_set_seed(G, 7);
    tg_tensor *in = tg_keep(IN(x, 8));
    tg_tensor *y = tg_keep(tg_dropout(in, 0.25f));
    run_ok();
    float v[8];
    ck_assert_int_eq(tg_tensor_read(y, v, sizeof v), TG_OK);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(v[i] == 0.0f || fabsf(v[i] - x[i] / 0.75f) <= 1e-6f * x[i], "element %d = %g",
                      i, (double)v[i]);
    /* the input was not overwritten (input leaves are never written in place) */
    EXPECT(in, 0, 1, 2, 3, 4, 5, 6, 7, 8);
}
END_TEST

START_TEST(test_dropout_same_seed_same_mask) {
    unsigned char *k1 = malloc(DN), *k2 = malloc(DN);
    dropout_mask(1234, 0.3f, 2, k1);
    dropout_mask(1234, 0.3f, 2, k2);
    ck_assert(memcmp(k1, k2, DN) == 0);
    free(k1);
    free(k2);
}
END_TEST

START_TEST(test_dropout_different_seed_different_mask) {
    unsigned char *k1 = malloc(DN), *k2 = malloc(DN);
    dropout_mask(1, 0.3f, 2, k1);
    dropout_mask(2, 0.3f, 2, k2);
    long diff = 0;
    for (int i = 0; i < DN; i++) diff += k1[i] != k2[i];
    /* independent masks differ in 2 p (1-p) = 42% of places */
    ck_assert_msg(diff > DN / 4, "masks differ in only %ld places", diff);
    /* seeds that differ only in the high 32 bits also differ */
    dropout_mask(1, 0.3f, 2, k1);
    dropout_mask(1 | (1ull << 32), 0.3f, 2, k2);
    ck_assert(memcmp(k1, k2, DN) != 0);
    free(k1);
    free(k2);
}
END_TEST

START_TEST(test_dropout_independent_of_thread_count) {
    unsigned char *k1 = malloc(DN), *k2 = malloc(DN);
    dropout_mask(99, 0.2f, 1, k1);
    dropout_mask(99, 0.2f, 2, k2);
    ck_assert(memcmp(k1, k2, DN) == 0);
    free(k1);
    free(k2);
}
END_TEST

START_TEST(test_dropout_two_ops_get_different_streams) {
    int64_t n = 4096;
    tg_graph_set_seed(G, 5);
    tg_tensor *ones = tg_full(G, 1.0f, 1, &n);
    tg_tensor *y1 = tg_keep(tg_dropout(ones, 0.5f));
    tg_tensor *y2 = tg_keep(tg_dropout(ones, 0.5f));
    run_ok();
    float *a = tg_test_read_all(y1), *b = tg_test_read_all(y2);
    int diff = 0;
    for (int64_t i = 0; i < n; i++) diff += (a[i] == 0) != (b[i] == 0);
    ck_assert_msg(diff > n / 4, "two dropout ops share a mask (%d differences)", diff);
    free(a);
    free(b);
}
END_TEST

/* ================================ reductions ================================ */

/* x [2,3,4] reduced over each axis, with and without keepdim: _i = axis*2 + keepdim. */
static void reduce_case(int which, int i) {
    int axis = i / 2;
    bool keep = i % 2;
    const int64_t s[3] = {2, 3, 4};
    float *x = pattern(24, 3);
    tg_tensor *in = IN(x, 2, 3, 4);
    /* alternate positive and negative axis spellings */
    int ax = (axis % 2) ? axis - 3 : axis;
    tg_tensor *y = tg_keep(which == 0 ? tg_sum(in, ax, keep) : which == 1 ? tg_mean(in, ax, keep)
                                                                          : tg_max(in, ax, keep));
    run_ok();
    int64_t os[3];
    int on = 0;
    for (int d = 0; d < 3; d++) {
        if (d != axis) os[on++] = s[d];
        else if (keep) os[on++] = 1;
    }
    expect_shape(y, on, os);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= s[d];
    for (int d = axis + 1; d < 3; d++) inner *= s[d];
    double want[24];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < inner; c++) {
            double acc = which == 2 ? -INFINITY : 0.0;
            for (int64_t k = 0; k < s[axis]; k++) {
                double v = x[(o * s[axis] + k) * inner + c];
                acc = which == 2 ? (v > acc ? v : acc) : acc + v;
            }
            want[o * inner + c] = which == 1 ? acc / (double)s[axis] : acc;
        }
    expect_vals(y, want, outer * inner, 1e-6, 1e-6, which == 0 ? "sum" : which == 1 ? "mean" : "max");
    free(x);
}

START_TEST(test_sum_axis) { reduce_case(0, _i); }
END_TEST
START_TEST(test_mean_axis) { reduce_case(1, _i); }
END_TEST
START_TEST(test_max_axis) { reduce_case(2, _i); }
END_TEST

START_TEST(test_sum_by_hand) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    tg_tensor *in = IN(x, 2, 3);
    tg_tensor *r = tg_keep(tg_sum(in, 1, false)), *c = tg_keep(tg_sum(in, 0, true));
    run_ok();
    EXPECT_SHAPE(r, 2);
    EXPECT(r, 0, 6, 15);
    EXPECT_SHAPE(c, 1, 3);
    EXPECT(c, 0, 5, 7, 9);
}
END_TEST

START_TEST(test_max_negative_and_inf) {
    float x[6] = {-3, -1, -2, -INFINITY, -INFINITY, -INFINITY};
    tg_tensor *y = tg_keep(tg_max(IN(x, 2, 3), -1, false));
    run_ok();
    EXPECT(y, 0, -1, -INFINITY);
}
END_TEST

/* Max over contiguous rows long enough for the 16-lane path: the bits of a scalar scan that
 * keeps the first of equal values and lets a NaN through (the last one): rows of 32–1000 with
 * the maximum in the first lanes, the middle and the tail, -0 before +0 and after it (the
 * later one in an earlier lane), a NaN early and late, and all -inf. */
static float max_scan(const float *x, int64_t n) {
    float m = x[0];
    for (int64_t k = 1; k < n; k++)
        if (x[k] > m || isnan(x[k])) m = x[k];
    return m;
}

START_TEST(test_max_rows_bits) {
    const int64_t lens[] = {32, 33, 47, 48, 1000};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        const int64_t n = lens[li], R = 9;
        float *x = malloc((size_t)(R * n) * sizeof *x), *got = malloc((size_t)R * sizeof *got);
        for (int64_t i = 0; i < R * n; i++)
            x[i] = pat(i, 11) - 3.0f;
        float *r = x;
        r[n / 2] = 9.0f;         /* row 0: the middle */
        r += n, r[0] = 9.0f;     /* row 1: lane 0 */
        r += n, r[n - 1] = 9.0f; /* row 2: the last value (the tail when n % 16) */
        r += n;                  /* row 3: zero maximum, -0 first */
        for (int64_t k = 0; k < n; k++)
            r[k] = -1.0f - (float)k;
        r[3] = -0.0f, r[17] = 0.0f; /* a later value in an earlier lane */
        r += n;                     /* row 4: zero maximum, +0 first */
        for (int64_t k = 0; k < n; k++)
            r[k] = -1.0f - (float)k;
        r[3] = 0.0f, r[17] = -0.0f;
        r += n, r[2] = NAN;      /* row 5: a NaN early */
        r += n, r[n - 1] = -NAN; /* row 6: a NaN last */
        r += n;                  /* row 7: all -inf */
        for (int64_t k = 0; k < n; k++)
            r[k] = -INFINITY;
        /* row 8: as made */
        tg_tensor *y = tg_keep(tg_max(IN(x, R, n), 1, false));
        run_ok();
        ck_assert_int_eq(tg_tensor_read(y, got, (size_t)R * sizeof *got), TG_OK);
        for (int64_t i = 0; i < R; i++) {
            float want = max_scan(x + i * n, n);
            ck_assert_msg(memcmp(&want, &got[i], sizeof want) == 0, "n %lld row %lld: %g, want %g",
                          (long long)n, (long long)i, got[i], want);
        }
        free(x);
        free(got);
        tg_graph_free(G); /* a graph for the next length */
        G = tg_graph_new();
        ck_assert_ptr_nonnull(G);
    }
}
END_TEST

START_TEST(test_sum_all_mean_all) {
    float x[15];
    double s = 0;
    for (int i = 0; i < 15; i++) {
        x[i] = pat(i, 4);
        s += x[i];
    }
    tg_tensor *in = IN(x, 3, 5);
    tg_tensor *sa = tg_keep(tg_sum_all(in)), *ma = tg_keep(tg_mean_all(in));
    run_ok();
    ck_assert_int_eq(tg_tensor_ndim(sa), 0);
    ck_assert_int_eq(tg_tensor_ndim(ma), 0);
    tg_assert_close(tg_tensor_item(sa), s, 1e-6, 1e-6);
    tg_assert_close(tg_tensor_item(ma), s / 15, 1e-6, 1e-6);
}
END_TEST

START_TEST(test_sum_all_large) {
    /* 1..n summed: n(n+1)/2 exactly representable in float for n = 4096 */
    int64_t n = 4096;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i + 1);
    tg_tensor *in = IN(x, 64, 64);
    tg_tensor *s = tg_keep(tg_sum_all(in)), *m = tg_keep(tg_mean_all(in));
    run_ok();
    ck_assert_float_eq(tg_tensor_item(s), 8390656.0f);
    tg_assert_close(tg_tensor_item(m), 2048.5, 0, 1e-7);
    free(x);
}
END_TEST

/* sum_to of x [2,3,4] onto several broadcast-compatible shapes */
static const struct {
    int n;
    int64_t s[3];
} sum_to_cases[] = {
    {2, {3, 1}}, {1, {4}}, {3, {2, 1, 4}}, {3, {1, 3, 1}}, {3, {2, 3, 1}}, {0, {0}}, {2, {1, 1}},
    {3, {1, 1, 4}},
};
#define NSUMTO ((int)(sizeof sum_to_cases / sizeof sum_to_cases[0]))

START_TEST(test_sum_to_patterns) {
    const int64_t xs[3] = {2, 3, 4};
    float *x = pattern(24, 5);
    int tn = sum_to_cases[_i].n;
    const int64_t *ts = sum_to_cases[_i].s;
    tg_tensor *y = tg_keep(tg_sum_to(IN(x, 2, 3, 4), tn, ts));
    run_ok();
    expect_shape(y, tn, ts);
    int64_t nt = 1;
    for (int i = 0; i < tn; i++) nt *= ts[i];
    double want[24] = {0};
    for (int64_t e = 0; e < 24; e++) want[bcast_index(e, 3, xs, tn, ts)] += x[e];
    expect_vals(y, want, nt, 1e-6, 1e-6, "sum_to");
    free(x);
}
END_TEST

/* A bias gradient's column sums ([R, C] -> [C]): each column's rows added in order, in float —
 * over whole blocks of 64 columns (kept in vector registers) and a narrower last block alike. */
START_TEST(test_sum_to_columns_in_order) {
    enum { R = 37, C = 200 };
    float *x = malloc(sizeof(float) * R * C); /* values whose sums round: order shows */
    ck_assert_ptr_nonnull(x);
    for (int e = 0; e < R * C; e++)
        x[e] = (float)sin(0.37 * e + 0.1) * 3.1f;
    tg_tensor *y = tg_keep(tg_sum_to(IN(x, R, C), 1, SHAPE(C)));
    run_ok();
    double want[C];
    for (int c = 0; c < C; c++) {
        float s = 0.0f;
        for (int r = 0; r < R; r++)
            s += x[r * C + c];
        want[c] = s;
    }
    expect_vals(y, want, C, 0.0, 0.0, "column sums");
    free(x);
}
END_TEST

START_TEST(test_expand) {
    float a[3] = {1, 2, 3}, b[4] = {5, 6, 7, 8}, s = 4;
    tg_tensor *ya = tg_keep(tg_expand(IN(a, 3, 1), 3, SHAPE(2, 3, 2)));
    tg_tensor *yb = tg_keep(tg_expand(IN(b, 4), 2, SHAPE(2, 4)));
    tg_tensor *yc = tg_keep(tg_expand(tg_input(G, TG_DTYPE_F32, 0, NULL, &s), 2, SHAPE(2, 2)));
    run_ok();
    EXPECT_SHAPE(ya, 2, 3, 2);
    EXPECT(ya, 0, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
    EXPECT(yb, 0, 5, 6, 7, 8, 5, 6, 7, 8);
    EXPECT(yc, 0, 4, 4, 4, 4);
}
END_TEST

/* ================================ concat, pad ================================ */

START_TEST(test_concat_axis1_by_hand) {
    float a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, c[6] = {7, 8, 9, 10, 11, 12};
    tg_tensor *xs[3] = {IN(a, 2, 2), IN(b, 2, 1), IN(c, 2, 3)};
    tg_tensor *y = tg_keep(tg_concat(xs, 3, 1));
    run_ok();
    EXPECT_SHAPE(y, 2, 6);
    EXPECT(y, 0, 1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12);
}
END_TEST

START_TEST(test_concat_axis0) {
    float a[3] = {1, 2, 3}, b[6] = {4, 5, 6, 7, 8, 9};
    tg_tensor *xs[2] = {IN(a, 1, 3), IN(b, 2, 3)};
    tg_tensor *y = tg_keep(tg_concat(xs, 2, 0));
    run_ok();
    EXPECT_SHAPE(y, 3, 3);
    EXPECT(y, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
}
END_TEST

START_TEST(test_concat_middle_and_negative_axis_3d) {
    float *a = pattern(2 * 1 * 3, 25), *b = pattern(2 * 2 * 3, 26);
    tg_tensor *xs[2] = {IN(a, 2, 1, 3), IN(b, 2, 2, 3)};
    tg_tensor *y = tg_keep(tg_concat(xs, 2, -2));
    run_ok();
    EXPECT_SHAPE(y, 2, 3, 3);
    double want[18];
    for (int i = 0; i < 2; i++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                want[(i * 3 + r) * 3 + c] = r == 0 ? a[i * 3 + c] : b[(i * 2 + r - 1) * 3 + c];
    expect_vals(y, want, 18, 0, 0, "concat");
    free(a);
    free(b);
}
END_TEST

/* n inputs [1,2] (input i holds (i, -i)) concatenated on axis 0, or [2,1] on axis 1 */
static void concat_many(int n, int axis) {
    tg_tensor **xs = malloc((size_t)n * sizeof *xs);
    for (int i = 0; i < n; i++) {
        float v[2] = {(float)i, (float)-i};
        xs[i] = axis == 0 ? IN(v, 1, 2) : IN(v, 2, 1);
    }
    tg_tensor *y = tg_keep(tg_concat(xs, n, axis));
    run_ok();
    double *want = malloc((size_t)n * 2 * sizeof *want);
    for (int i = 0; i < n; i++) {
        if (axis == 0) {
            want[2 * i] = i;
            want[2 * i + 1] = -i;
        } else {
            want[i] = i;
            want[n + i] = -i;
        }
    }
    if (axis == 0) EXPECT_SHAPE(y, n, 2);
    else EXPECT_SHAPE(y, 2, n);
    expect_vals(y, want, 2 * n, 0, 0, "concat many");
    free(want);
    free(xs);
}

START_TEST(test_concat_more_than_8_inputs) { concat_many(11, 0); }
END_TEST
START_TEST(test_concat_17_inputs_axis1) { concat_many(17, 1); }
END_TEST
START_TEST(test_concat_100_inputs) { concat_many(100, 0); }
END_TEST
START_TEST(test_concat_600_inputs_axis1) { concat_many(600, 1); }
END_TEST

START_TEST(test_concat_single_and_i32) {
    float a[2] = {1, 2};
    tg_tensor *x = IN(a, 2);
    tg_tensor *one[1] = {x};
    ck_assert_ptr_eq(tg_concat(one, 1, 0), x);
    int32_t i1[2] = {1, 2}, i2[1] = {3};
    tg_tensor *ids[2] = {IN_I32(i1, 2), IN_I32(i2, 1)};
    tg_tensor *c = tg_concat(ids, 2, 0);
    ck_assert_int_eq(tg_tensor_dtype(c), TG_DTYPE_I32);
    float tab[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    tg_tensor *e = tg_keep(tg_embedding(IN(tab, 4, 2), c)); /* concatenated ids are usable */
    run_ok();
    EXPECT(e, 0, 1, 1, 2, 2, 3, 3);
}
END_TEST

START_TEST(test_pad) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    tg_tensor *in = IN(x, 2, 3);
    tg_tensor *p1 = tg_keep(tg_pad(in, 1, 1, 2));
    tg_tensor *p0 = tg_keep(tg_pad(in, 0, 2, 0));
    tg_tensor *pn = tg_keep(tg_pad(in, -1, 0, 0));
    run_ok();
    EXPECT_SHAPE(p1, 2, 6);
    EXPECT(p1, 0, 0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0, 0);
    EXPECT_SHAPE(p0, 4, 3);
    EXPECT(p0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6);
    EXPECT(pn, 0, 1, 2, 3, 4, 5, 6);
}
END_TEST

START_TEST(test_pad_middle_axis_3d) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tg_tensor *y = tg_keep(tg_pad(IN(x, 2, 2, 2), 1, 1, 1));
    run_ok();
    EXPECT_SHAPE(y, 2, 4, 2);
    EXPECT(y, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8, 0, 0);
}
END_TEST

/* ================================ fill, composition ================================ */

START_TEST(test_full_and_chain) {
    /* relu(2 * full(1.5) - x) over a [2,2] graph with a reused intermediate */
    float x[4] = {1, 2, 3, 4};
    tg_tensor *f = tg_full(G, 1.5f, 2, SHAPE(2, 2));
    tg_tensor *t = tg_sub(tg_scale(f, 2.0f), IN(x, 2, 2));
    tg_tensor *y = tg_keep(tg_add(tg_relu(t), tg_mul(t, t)));
    run_ok();
    /* t = (2, 1, 0, -1): relu + t^2 = (6, 2, 0, 1) */
    EXPECT(y, 0, 6, 2, 0, 1);
}
END_TEST

START_TEST(test_planner_off_bit_identical) {
    /* the same graph with and without the memory planner gives identical bits */
    float *x = pattern(64 * 33, 27), *w = pattern(33 * 17, 28);
    float *out[2];
    for (int planner = 0; planner < 2; planner++) {
        tg_graph *g = tg_graph_new();
        tg_graph_set_planner(g, planner);
        tg_tensor *h = tg_matmul(tg_input(g, TG_DTYPE_F32, 2, SHAPE(64, 33), x),
                                 tg_input(g, TG_DTYPE_F32, 2, SHAPE(33, 17), w), false, false);
        h = tg_gelu(tg_layer_norm(h, NULL, NULL, 1e-5f));
        h = tg_softmax(tg_add(h, tg_scale(tg_tanh(h), 0.5f)));
        tg_tensor *y = tg_keep(tg_sum(h, 0, false));
        ck_assert_int_eq(tg_graph_run(g, B), TG_OK);
        if (planner) ck_assert(tg_graph_peak_bytes(g) < tg_graph_total_bytes(g));
        else ck_assert(tg_graph_peak_bytes(g) == tg_graph_total_bytes(g));
        out[planner] = tg_test_read_all(y);
        tg_graph_free(g);
    }
    ck_assert(memcmp(out[0], out[1], 17 * sizeof(float)) == 0);
    free(out[0]);
    free(out[1]);
    free(x);
    free(w);
}
END_TEST

START_TEST(test_run_twice_same_values) {
    float x[3] = {1, 2, 3};
    tg_tensor *y = tg_keep(tg_exp(tg_scale(IN(x, 3), 0.5f)));
    run_ok();
    float a[3], b[3];
    ck_assert_int_eq(tg_tensor_read(y, a, sizeof a), TG_OK);
    run_ok();
    ck_assert_int_eq(tg_tensor_read(y, b, sizeof b), TG_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("elementwise");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_add_same_shape);
    tcase_add_test(tc, test_add_broadcast_row);
    tcase_add_test(tc, test_add_broadcast_column_by_row);
    tcase_add_test(tc, test_add_scalar_tensor);
    tcase_add_test(tc, test_sub_broadcast_fewer_dims_first);
    tcase_add_test(tc, test_div_broadcast_column);
    tcase_add_loop_test(tc, test_binary_broadcast_patterns, 0, NBCAST);
    tcase_add_test(tc, test_scale);
    tcase_add_test(tc, test_affine);
    tcase_add_test(tc, test_add_scalar);
    tcase_add_test(tc, test_neg);
    tcase_add_test(tc, test_exp);
    tcase_add_test(tc, test_log);
    tcase_add_test(tc, test_sqrt);
    tcase_add_test(tc, test_rsqrt);
    tcase_add_test(tc, test_tanh);
    tcase_add_test(tc, test_relu);
    tcase_add_test(tc, test_relu_gradient);
    tcase_add_test(tc, test_subnormals_flushed);
    tcase_add_test(tc, test_gelu_tanh_form);
    tcase_add_test(tc, test_silu_and_its_gradient);
    tcase_add_test(tc, test_gelu_erf_and_its_gradient);
    tcase_add_test(tc, test_masked_fill_f32_mask);
    tcase_add_test(tc, test_masked_fill_i32_broadcast_row);
    tcase_add_test(tc, test_masked_fill_neg_inf_column_mask);
    tcase_add_test(tc, test_masked_fill_3d_mask_broadcast);
    tcase_add_test(tc, test_masked_fill_i32_masks_across_tiles);
    tcase_add_test(tc, test_full_and_chain);
    suite_add_tcase(s, tc);

    tc = tcase_create("dropout");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_dropout_p0_is_identity);
    tcase_add_test(tc, test_dropout_inference_is_identity);
    tcase_add_test(tc, test_dropout_fraction_and_scale);
    tcase_add_test(tc, test_dropout_values_scaled);
    tcase_add_test(tc, test_dropout_same_seed_same_mask);
    tcase_add_test(tc, test_dropout_different_seed_different_mask);
    tcase_add_test(tc, test_dropout_independent_of_thread_count);
    tcase_add_test(tc, test_dropout_two_ops_get_different_streams);
    suite_add_tcase(s, tc);

    tc = tcase_create("reductions");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_sum_axis, 0, 6);
    tcase_add_loop_test(tc, test_mean_axis, 0, 6);
    tcase_add_loop_test(tc, test_max_axis, 0, 6);
    tcase_add_test(tc, test_sum_by_hand);
    tcase_add_test(tc, test_max_negative_and_inf);
    tcase_add_test(tc, test_max_rows_bits);
    tcase_add_test(tc, test_sum_all_mean_all);
    tcase_add_test(tc, test_sum_all_large);
    tcase_add_loop_test(tc, test_sum_to_patterns, 0, NSUMTO);
    tcase_add_test(tc, test_sum_to_columns_in_order);
    tcase_add_test(tc, test_expand);
    suite_add_tcase(s, tc);

    tc = tcase_create("layout");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_concat_axis1_by_hand);
    tcase_add_test(tc, test_concat_axis0);
    tcase_add_test(tc, test_concat_middle_and_negative_axis_3d);
    tcase_add_test(tc, test_concat_more_than_8_inputs);
    tcase_add_test(tc, test_concat_17_inputs_axis1);
    tcase_add_test(tc, test_concat_100_inputs);
    tcase_add_test(tc, test_concat_600_inputs_axis1);
    tcase_add_test(tc, test_concat_single_and_i32);
    tcase_add_test(tc, test_pad);
    tcase_add_test(tc, test_pad_middle_axis_3d);
    tcase_add_test(tc, test_planner_off_bit_identical);
    tcase_add_test(tc, test_run_twice_same_values);
    suite_add_tcase(s, tc);
    return s;
}
