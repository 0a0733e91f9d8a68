/* Forward values of every op (ops.h) against values computed by hand, or computed here in
 * double precision from the op's definition (NumPy broadcasting, biased variance, docs/model.md §1's
 * label-smoothed cross-entropy). Each test builds a small graph on a 2-thread CPU backend,
 * runs it and compares every element of the kept result; shapes are checked too.
 * Views and layout (reshape, permute, slice, contiguous) have their own file, test_views.c. */
#include <math.h>
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
}
static void teardown(void) {
    tg_graph_free(G);
    tg_backend_free(B);
}

/* ---- helpers ---- */
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define IN(data, ...) tg_input(G, TG_DTYPE_F32, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), (data))
#define IN_I32(data, ...) tg_input(G, TG_DTYPE_I32, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), (data))
#define NVALS(...) ((int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)))
/* compare every element of kept tensor t with the listed values */
#define EXPECT(t, atol, ...) \
    expect_vals((t), (const double[]){__VA_ARGS__}, NVALS(__VA_ARGS__), (atol), 1e-6, #t)
#define EXPECT_SHAPE(t, ...) expect_shape((t), NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__))

static void run_ok(void) {
    const char *msg;
    tg_status st = tg_graph_status(G, &msg);
    ck_assert_msg(st == TG_OK, "graph build failed: %s", msg);
    st = tg_graph_run(G, B);
    ck_assert_msg(st == TG_OK, "tg_graph_run failed: %s", tg_error_message());
}

static void expect_shape(const tg_tensor *t, int ndim, const int64_t *shape) {
    ck_assert_ptr_nonnull(t);
    int64_t s[TG_MAX_DIMS];
    ck_assert_int_eq(tg_tensor_shape(t, s), ndim);
    for (int i = 0; i < ndim; i++)
        ck_assert_msg(s[i] == shape[i], "dim %d is %lld, expected %lld", i, (long long)s[i],
                      (long long)shape[i]);
}

/* Element e of t must be within atol + rtol*|want| of want[e]; infinities must match exactly
 * and no element may be NaN. */
static void expect_vals(const tg_tensor *t, const double *want, int64_t n, double atol, double rtol,
                        const char *what) {
    ck_assert_ptr_nonnull(t);
    ck_assert_msg(tg_tensor_numel(t) == n, "%s has %lld elements, expected %lld", what,
                  (long long)tg_tensor_numel(t), (long long)n);
    float *v = tg_test_read_all(t);
    for (int64_t e = 0; e < n; e++) {
        ck_assert_msg(!isnan(v[e]), "%s[%lld] is NaN (expected %.9g)", what, (long long)e, want[e]);
        if (isinf(want[e]))
            ck_assert_msg(v[e] == want[e], "%s[%lld] = %.9g, expected %g", what, (long long)e,
                          (double)v[e], want[e]);
        else
            ck_assert_msg(fabs(v[e] - want[e]) <= atol + rtol * fabs(want[e]),
                          "%s[%lld] = %.9g, expected %.9g", what, (long long)e, (double)v[e],
                          want[e]);
    }
    free(v);
}

/* Offset in a (contiguous) broadcast operand of shape xs[xn] of output element e of shape
 * os[on] (NumPy rules: right-aligned, size-1 dimensions stretch). */
static int64_t bcast_index(int64_t e, int on, const int64_t *os, int xn, const int64_t *xs) {
    int64_t off = 0, stride = 1;
    for (int i = on - 1; i >= 0; i--) {
        int64_t c = e % os[i];
        e /= os[i];
        int xi = i - (on - xn);
        if (xi >= 0) {
            if (xs[xi] != 1) off += c * stride;
            stride *= xs[xi];
        }
    }
    return off;
}

/* A deterministic, sign-mixed, non-repeating-looking pattern for test data. */
static float pat(int64_t e, int salt) {
    return (float)(((e * 7 + salt * 3) % 13) - 6) * 0.25f + (float)((e + salt) % 5) * 0.0625f;
}
static float *pattern(int64_t n, int salt) {
    float *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t e = 0; e < n; e++) v[e] = pat(e, salt);
    return v;
}

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

/* ReLU's gradient, taken from its output (core/ops/elementwise.c g_relu): dy where x > 0 and 0
 * elsewhere, bit for bit — at -0, NaN, the smallest subnormal and its negative too. */
START_TEST(test_relu_gradient) {
    float x[8] = {-2.0f, -0.0f, 0.0f, NAN, 1e-45f, -1e-45f, 0.75f, 3.0f};
    float dy[8] = {1.5f, 2.0f, -3.0f, 4.0f, 0.25f, 5.0f, -0.5f, 7.0f};
    tg_tensor *xi = tg_requires_grad(IN(x, 8));
    ck_assert_int_eq(tg_backward(G, tg_sum_all(tg_mul(tg_relu(xi), IN(dy, 8)))), TG_OK);
    tg_tensor *dx = tg_keep(tg_grad(G, xi));
    run_ok();
    float *got = tg_test_read_all(dx);
    for (int i = 0; i < 8; i++) {
        const float want = x[i] > 0.0f ? dy[i] : 0.0f;
        ck_assert_msg(memcmp(&got[i], &want, sizeof want) == 0, "dx[%d] = %g, want %g (x %g)", i,
                      (double)got[i], (double)want, (double)x[i]);
    }
    free(got);
}
END_TEST

/* Values from PyTorch 1.13 in float64 (torch.nn.functional.silu, then y.backward(dy) for
 * x.grad), printed with %.9g. */
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
    tcase_add_test(tc, test_gelu_tanh_form);
    tcase_add_test(tc, test_silu_and_its_gradient);
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

    tc = tcase_create("rows");
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
