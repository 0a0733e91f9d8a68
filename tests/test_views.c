/* Views: reshape, permute/transpose and slice cost nothing (no node that copies, no storage of
 * their own: they point into their storage owner with strides and an offset), and kept views
 * read back correctly — including views of computed intermediates, which the memory planner
 * must keep alive and never overwrite in place. Reads internal fields (core/tg-impl.h) to
 * check strides, offsets and storage owners. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/graph-impl.h"
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

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define IN(data, ...) tg_input(G, TG_DTYPE_F32, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), (data))
#define EXPECT_SHAPE(t, ...) expect_ints((t)->shape, (t)->ndim, SHAPE(__VA_ARGS__), NDIM(__VA_ARGS__), "shape")
#define EXPECT_STRIDE(t, ...) expect_ints((t)->stride, (t)->ndim, SHAPE(__VA_ARGS__), NDIM(__VA_ARGS__), "stride")

static void expect_ints(const int64_t *got, int ngot, const int64_t *want, int nwant, const char *what) {
    ck_assert_msg(ngot == nwant, "%s has %d entries, expected %d", what, ngot, nwant);
    for (int i = 0; i < nwant; i++)
        ck_assert_msg(got[i] == want[i], "%s[%d] = %lld, expected %lld", what, i, (long long)got[i],
                      (long long)want[i]);
}

static void run_ok(void) {
    const char *msg;
    ck_assert_msg(tg_graph_status(G, &msg) == TG_OK, "graph build failed: %s", msg);
    ck_assert_msg(tg_graph_run(G, B) == TG_OK, "tg_graph_run failed: %s", tg_error_message());
}

static float *iota(int64_t n) {
    float *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)i;
    return v;
}

/* read the kept tensor t and compare with want[] exactly (views copy, never compute) */
static void expect_exact(const tg_tensor *t, const float *want, int64_t n) {
    ck_assert_int_eq(tg_tensor_numel(t), n);
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ck_assert_int_eq(tg_tensor_read(t, v, (size_t)n * sizeof *v), TG_OK);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(v[i] == want[i], "element %lld = %g, expected %g", (long long)i, (double)v[i],
                      (double)want[i]);
    free(v);
}

/* Number of nodes of op `op` in the graph. */
static int count_op(tg_graph *g, tg_op op) {
    int c = 0;
    for (int64_t i = 0; i < g->n; i++) c += g->nodes[i]->op == op;
    return c;
}

/* ================================ reshape ================================ */

START_TEST(test_reshape_is_a_view) {
    float *x = iota(24);
    tg_tensor *in = IN(x, 2, 3, 4);
    int64_t n0 = tg_graph_node_count(G);
    tg_tensor *r = tg_keep(tg_reshape(in, 2, SHAPE(4, 6)));
    ck_assert_int_eq(tg_graph_node_count(G), n0 + 1); /* just the view node */
    ck_assert_int_eq(tg_tensor_op(r), TG_OP_RESHAPE);
    ck_assert_ptr_eq(r->base, in);
    ck_assert_int_eq(r->offset, 0);
    EXPECT_SHAPE(r, 4, 6);
    EXPECT_STRIDE(r, 6, 1);
    run_ok();
    /* only the input's buffer exists: 96 bytes (rounded to the 64-byte alignment) */
    ck_assert_uint_eq(tg_graph_total_bytes(G), 128);
    expect_exact(r, x, 24);
    free(x);
}
END_TEST

START_TEST(test_reshape_infer_minus_one) {
    float *x = iota(24);
    tg_tensor *in = IN(x, 2, 3, 4);
    tg_tensor *a = tg_reshape(in, 2, SHAPE(-1, 4));
    tg_tensor *b = tg_reshape(in, 3, SHAPE(2, -1, 3));
    tg_tensor *c = tg_keep(tg_reshape(in, 1, SHAPE(-1)));
    ck_assert_int_eq(tg_graph_status(G, NULL), TG_OK);
    EXPECT_SHAPE(a, 6, 4);
    EXPECT_SHAPE(b, 2, 4, 3);
    EXPECT_SHAPE(c, 24);
    ck_assert_int_eq(tg_tensor_dim(b, -2), 4);
    run_ok();
    expect_exact(c, x, 24);
    free(x);
}
END_TEST

START_TEST(test_reshape_to_and_from_scalar) {
    float v = 3.5f;
    tg_tensor *s = tg_reshape(IN(&v, 1, 1), 0, NULL);
    ck_assert_int_eq(tg_tensor_ndim(s), 0);
    tg_tensor *back = tg_keep(tg_reshape(s, 3, SHAPE(1, 1, -1)));
    EXPECT_SHAPE(back, 1, 1, 1);
    tg_keep(s);
    run_ok();
    ck_assert_float_eq(tg_tensor_item(s), 3.5f);
    ck_assert_float_eq(tg_tensor_item(back), 3.5f);
}
END_TEST

START_TEST(test_reshape_of_reshape_shares_owner) {
    float *x = iota(12);
    tg_tensor *in = IN(x, 12);
    tg_tensor *r = tg_keep(tg_reshape(tg_reshape(in, 2, SHAPE(3, 4)), 3, SHAPE(2, 2, 3)));
    ck_assert_ptr_eq(r->base, in); /* the storage owner, not the intermediate view */
    EXPECT_STRIDE(r, 6, 3, 1);
    run_ok();
    expect_exact(r, x, 12);
    free(x);
}
END_TEST

START_TEST(test_reshape_of_row_slice_is_a_view) {
    /* rows 1..3 of [4,3] are contiguous: reshaping them needs no copy */
    float *x = iota(12);
    tg_tensor *in = IN(x, 4, 3);
    tg_tensor *r = tg_keep(tg_reshape(tg_slice(in, 0, 1, 3), 1, SHAPE(6)));
    ck_assert_int_eq(count_op(G, TG_OP_CONT), 0);
    ck_assert_ptr_eq(r->base, in);
    ck_assert_int_eq(r->offset, 3);
    run_ok();
    expect_exact(r, x + 3, 6);
    free(x);
}
END_TEST

START_TEST(test_reshape_of_permuted_view_copies) {
    /* a transposed view is not contiguous: reshape inserts one contiguous copy */
    float *x = iota(6);
    tg_tensor *t = tg_transpose(IN(x, 2, 3), 0, 1); /* [3,2]: 0 3 / 1 4 / 2 5 */
    tg_tensor *r = tg_keep(tg_reshape(t, 1, SHAPE(6)));
    ck_assert_int_eq(count_op(G, TG_OP_CONT), 1);
    ck_assert_int_eq(r->base->op, TG_OP_CONT);
    run_ok();
    const float want[6] = {0, 3, 1, 4, 2, 5};
    expect_exact(r, want, 6);
    free(x);
}
END_TEST

START_TEST(test_reshape_of_column_slice_copies) {
    float *x = iota(12);
    tg_tensor *r = tg_keep(tg_reshape(tg_slice(IN(x, 3, 4), 1, 1, 3), 1, SHAPE(-1)));
    ck_assert_int_eq(count_op(G, TG_OP_CONT), 1);
    run_ok();
    const float want[6] = {1, 2, 5, 6, 9, 10};
    expect_exact(r, want, 6);
    free(x);
}
END_TEST

/* ================================ permute / transpose ================================ */

START_TEST(test_permute_strides_and_values) {
    float *x = iota(24);
    tg_tensor *in = IN(x, 2, 3, 4);
    int64_t n0 = tg_graph_node_count(G);
    tg_tensor *p = tg_keep(tg_permute(in, (const int[]){2, 0, 1}));
    ck_assert_int_eq(tg_graph_node_count(G), n0 + 1);
    ck_assert_int_eq(tg_tensor_op(p), TG_OP_PERMUTE);
    ck_assert_ptr_eq(p->base, in);
    EXPECT_SHAPE(p, 4, 2, 3);
    EXPECT_STRIDE(p, 1, 12, 4);
    run_ok();
    ck_assert_uint_eq(tg_graph_total_bytes(G), 128); /* no copy was made */
    float want[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) want[(i * 2 + j) * 3 + k] = x[(j * 3 + k) * 4 + i];
    expect_exact(p, want, 24);
    free(x);
}
END_TEST

START_TEST(test_transpose_negative_axes) {
    float *x = iota(24);
    tg_tensor *t = tg_keep(tg_transpose(IN(x, 2, 3, 4), -1, -2));
    EXPECT_SHAPE(t, 2, 4, 3);
    EXPECT_STRIDE(t, 12, 1, 4);
    ck_assert_int_eq(t->p.permute.perm[0], 0);
    ck_assert_int_eq(t->p.permute.perm[1], 2);
    ck_assert_int_eq(t->p.permute.perm[2], 1);
    run_ok();
    float want[24];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) want[(b * 4 + i) * 3 + j] = x[(b * 3 + j) * 4 + i];
    expect_exact(t, want, 24);
    free(x);
}
END_TEST

START_TEST(test_transpose_same_axis_and_double_transpose) {
    float *x = iota(6);
    tg_tensor *in = IN(x, 2, 3);
    tg_tensor *same = tg_keep(tg_transpose(in, 1, 1));
    tg_tensor *back = tg_transpose(tg_transpose(in, 0, 1), 0, 1);
    EXPECT_STRIDE(same, 3, 1);
    EXPECT_STRIDE(back, 3, 1);
    ck_assert(tg__tensor_is_contiguous(back));
    /* contiguous() of a view that happens to be contiguous is the identity */
    ck_assert_ptr_eq(tg_contiguous(back), back);
    tg_keep(back);
    run_ok();
    expect_exact(same, x, 6);
    expect_exact(back, x, 6);
    free(x);
}
END_TEST

START_TEST(test_permute_6d) {
    /* [1,2,1,3,2,2] permuted by (5,3,1,0,4,2) */
    int64_t n = 24;
    float *x = iota(n);
    const int64_t s[6] = {1, 2, 1, 3, 2, 2};
    const int perm[6] = {5, 3, 1, 0, 4, 2};
    tg_tensor *p = tg_keep(tg_permute(tg_input(G, TG_DTYPE_F32, 6, s, x), perm));
    EXPECT_SHAPE(p, 2, 3, 2, 1, 2, 1);
    run_ok();
    int64_t xs[6], os[6], ostr[6];
    tg__tensor_contiguous_strides(6, s, xs);
    for (int i = 0; i < 6; i++) os[i] = s[perm[i]];
    tg__tensor_contiguous_strides(6, os, ostr);
    float want[24];
    for (int64_t e = 0; e < n; e++) {
        /* output index -> input offset */
        int64_t q = e, off = 0;
        for (int i = 0; i < 6; i++) {
            int64_t c = q / ostr[i];
            q %= ostr[i];
            off += c * xs[perm[i]];
        }
        want[e] = x[off];
    }
    expect_exact(p, want, n);
    free(x);
}
END_TEST

/* ================================ slice ================================ */

START_TEST(test_slice_offsets_and_values) {
    float *x = iota(20);
    tg_tensor *in = IN(x, 4, 5);
    tg_tensor *cols = tg_keep(tg_slice(in, 1, 1, 4));
    tg_tensor *rows = tg_keep(tg_slice(in, -2, 2, 4));
    ck_assert_int_eq(tg_tensor_op(cols), TG_OP_SLICE);
    EXPECT_SHAPE(cols, 4, 3);
    EXPECT_STRIDE(cols, 5, 1);
    ck_assert_int_eq(cols->offset, 1);
    EXPECT_SHAPE(rows, 2, 5);
    ck_assert_int_eq(rows->offset, 10);
    ck_assert(tg__tensor_is_contiguous(rows));
    ck_assert(!tg__tensor_is_contiguous(cols));
    run_ok();
    ck_assert_uint_eq(tg_graph_total_bytes(G), 128); /* 80 bytes of input, nothing else */
    const float wc[12] = {1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18};
    expect_exact(cols, wc, 12);
    expect_exact(rows, x + 10, 10);
    free(x);
}
END_TEST

START_TEST(test_slice_of_slice) {
    float *x = iota(20);
    tg_tensor *in = IN(x, 4, 5);
    tg_tensor *s = tg_keep(tg_slice(tg_slice(tg_slice(in, 0, 1, 4), 0, 1, 3), 1, 2, 5));
    ck_assert_ptr_eq(s->base, in);
    ck_assert_int_eq(s->offset, 2 * 5 + 2);
    EXPECT_SHAPE(s, 2, 3);
    run_ok();
    const float want[6] = {12, 13, 14, 17, 18, 19};
    expect_exact(s, want, 6);
    free(x);
}
END_TEST

START_TEST(test_slice_of_permute_and_permute_of_slice) {
    float *x = iota(24);
    tg_tensor *in = IN(x, 2, 3, 4);
    /* permute to [4,2,3], take [1:3] of the first axis */
    tg_tensor *a = tg_keep(tg_slice(tg_permute(in, (const int[]){2, 0, 1}), 0, 1, 3));
    /* slice [:, 1:3, :] -> [2,2,4], then swap the first two axes */
    tg_tensor *b = tg_keep(tg_permute(tg_slice(in, 1, 1, 3), (const int[]){1, 0, 2}));
    EXPECT_SHAPE(a, 2, 2, 3);
    EXPECT_SHAPE(b, 2, 2, 4);
    ck_assert_int_eq(count_op(G, TG_OP_CONT), 0);
    run_ok();
    float wa[12], wb[16];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) wa[(i * 2 + j) * 3 + k] = x[(j * 3 + k) * 4 + (i + 1)];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 4; k++) wb[(i * 2 + j) * 4 + k] = x[(j * 3 + (i + 1)) * 4 + k];
    expect_exact(a, wa, 12);
    expect_exact(b, wb, 16);
    free(x);
}
END_TEST

START_TEST(test_empty_slice) {
    float *x = iota(12);
    tg_tensor *e = tg_keep(tg_slice(IN(x, 3, 4), 1, 2, 2));
    EXPECT_SHAPE(e, 3, 0);
    run_ok();
    float dummy;
    ck_assert_int_eq(tg_tensor_read(e, &dummy, 0), TG_OK);
    free(x);
}
END_TEST

START_TEST(test_full_slice_is_whole_tensor) {
    float *x = iota(6);
    tg_tensor *s = tg_keep(tg_slice(IN(x, 2, 3), 1, 0, 3));
    ck_assert(tg__tensor_is_contiguous(s));
    run_ok();
    expect_exact(s, x, 6);
    free(x);
}
END_TEST

/* ================================ contiguous ================================ */

START_TEST(test_contiguous_identity_and_copy) {
    float *x = iota(6);
    tg_tensor *in = IN(x, 2, 3);
    ck_assert_ptr_eq(tg_contiguous(in), in);
    tg_tensor *t = tg_transpose(in, 0, 1);
    tg_tensor *c = tg_keep(tg_contiguous(t));
    ck_assert_int_eq(tg_tensor_op(c), TG_OP_CONT);
    ck_assert_ptr_null(c->base);
    EXPECT_STRIDE(c, 2, 1);
    run_ok();
    const float want[6] = {0, 3, 1, 4, 2, 5};
    expect_exact(c, want, 6);
    free(x);
}
END_TEST

START_TEST(test_contiguous_of_6d_strided) {
    float *x = iota(64);
    const int64_t s[6] = {2, 2, 2, 2, 2, 2};
    tg_tensor *in = tg_input(G, TG_DTYPE_F32, 6, s, x);
    tg_tensor *p = tg_permute(tg_slice(in, 5, 1, 2), (const int[]){5, 4, 3, 2, 1, 0}); /* [1,2,2,2,2,2] */
    tg_tensor *c = tg_keep(tg_contiguous(p));
    run_ok();
    float want[32];
    /* c[0,a,b,cc,d,e] = x[e,d,cc,b,a,1] */
    for (int e = 0; e < 32; e++) {
        int a = (e >> 4) & 1, b = (e >> 3) & 1, cc = (e >> 2) & 1, d = (e >> 1) & 1, f = e & 1;
        want[e] = x[f * 32 + d * 16 + cc * 8 + b * 4 + a * 2 + 1];
    }
    expect_exact(c, want, 32);
    free(x);
}
END_TEST

/* ================================ views as inputs of ops ================================ */

START_TEST(test_binary_op_on_views) {
    float *x = iota(6), y[6] = {10, 20, 30, 40, 50, 60};
    /* a transposed view plus a contiguous tensor: x^T [3,2] + y [3,2] */
    tg_tensor *s = tg_keep(tg_add(tg_transpose(IN(x, 2, 3), 0, 1), IN(y, 3, 2)));
    /* slice + slice of the same tensor */
    tg_tensor *in = IN(y, 2, 3);
    tg_tensor *d = tg_keep(tg_sub(tg_slice(in, 1, 1, 3), tg_slice(in, 1, 0, 2)));
    run_ok();
    const float ws[6] = {10, 23, 31, 44, 52, 65};
    expect_exact(s, ws, 6);
    const float wd[4] = {10, 10, 10, 10};
    expect_exact(d, wd, 4);
    free(x);
}
END_TEST

START_TEST(test_matmul_reads_views_without_copy) {
    float *a = iota(12), *b = iota(12);
    tg_tensor *ta = IN(a, 4, 3), *tb = IN(b, 4, 3);
    /* A^T B as a view: [3,4] x [4,3] */
    tg_tensor *y = tg_keep(tg_matmul(tg_transpose(ta, 0, 1), tb, false, false));
    /* head split of a [1,2,2,3] tensor: [B,n,h,d] -> [B,h,n,d] */
    tg_tensor *q = tg_permute(tg_reshape(ta, 4, SHAPE(1, 2, 2, 3)), (const int[]){0, 2, 1, 3});
    tg_tensor *z = tg_keep(tg_matmul(q, q, false, true));
    ck_assert_int_eq(count_op(G, TG_OP_CONT), 0);
    run_ok();
    float wy[9], wz[8];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            float s = 0;
            for (int k = 0; k < 4; k++) s += a[k * 3 + i] * b[k * 3 + j];
            wy[i * 3 + j] = s;
        }
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                float s = 0;
                for (int k = 0; k < 3; k++) s += a[(i * 2 + h) * 3 + k] * a[(j * 2 + h) * 3 + k];
                wz[(h * 2 + i) * 2 + j] = s;
            }
    expect_exact(y, wy, 9); /* small integers: exact in float */
    expect_exact(z, wz, 8);
    free(a);
    free(b);
}
END_TEST

/* Attention's products on head views of [B, n, h, d] tensors with B > 1: the B·h products
 * are one call of two batch levels (backends/cpu/k_matmul.c), and a view whose outer batch
 * dims do not merge (the two leading dims swapped) still loops over them. Exact on small
 * integers against plain loops. */
static float head_elem(const float *x, int64_t n, int64_t h, int64_t d, int64_t b, int64_t hi,
                       int64_t i, int64_t k) {
    return x[((b * n + i) * h + hi) * d + k];
}

START_TEST(test_matmul_head_views_many_sequences) {
    enum { NB = 3, N = 4, H = 2, D = 3 };
    float *x = malloc(NB * N * H * D * sizeof *x), *pm = malloc(NB * H * N * N * sizeof *pm);
    for (int i = 0; i < NB * N * H * D; i++)
        x[i] = (float)(i % 7 - 3);
    for (int i = 0; i < NB * H * N * N; i++)
        pm[i] = (float)(i % 5 - 2);
    const int perm[4] = {0, 2, 1, 3};
    tg_tensor *q = tg_permute(IN(x, NB, N, H, D), perm);
    tg_tensor *s = tg_keep(tg_matmul(q, q, false, true)); /* Q·Kᵀ [B, h, n, n] */
    tg_tensor *o = tg_keep(tg_matmul(IN(pm, NB, H, N, N), q, false, false)); /* P·V */
    /* [2, 3, n, h, d] seen as [3, 2, h, n, d]: the leading dims' strides do not merge */
    tg_tensor *q5 = tg_permute(IN(x, 2, 3, 2, H, D), (const int[]){1, 0, 3, 2, 4});
    tg_tensor *s5 = tg_keep(tg_matmul(q5, q5, false, true));
    ck_assert_int_eq(count_op(G, TG_OP_CONT), 0);
    run_ok();
    float ws[NB * H * N * N], wo[NB * H * N * D], w5[3 * 2 * H * 2 * 2];
    for (int b = 0; b < NB; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < N; i++) {
                for (int j = 0; j < N; j++) {
                    float acc = 0;
                    for (int k = 0; k < D; k++)
                        acc +=
                            head_elem(x, N, H, D, b, h, i, k) * head_elem(x, N, H, D, b, h, j, k);
                    ws[((b * H + h) * N + i) * N + j] = acc;
                }
                for (int k = 0; k < D; k++) {
                    float acc = 0;
                    for (int j = 0; j < N; j++)
                        acc +=
                            pm[((b * H + h) * N + i) * N + j] * head_elem(x, N, H, D, b, h, j, k);
                    wo[((b * H + h) * N + i) * D + k] = acc;
                }
            }
    /* s5[c, a, h, i, j] = sum_k x[a, c, i, h, k] x[a, c, j, h, k], x as [2, 3, 2, H, D] */
    for (int c = 0; c < 3; c++)
        for (int a = 0; a < 2; a++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 2; j++) {
                        float acc = 0;
                        for (int k = 0; k < D; k++)
                            acc += x[(((a * 3 + c) * 2 + i) * H + h) * D + k] *
                                   x[(((a * 3 + c) * 2 + j) * H + h) * D + k];
                        w5[(((c * 2 + a) * H + h) * 2 + i) * 2 + j] = acc;
                    }
    expect_exact(s, ws, NB * H * N * N);
    expect_exact(o, wo, NB * H * N * D);
    expect_exact(s5, w5, 3 * 2 * H * 2 * 2);
    free(x);
    free(pm);
}
END_TEST

START_TEST(test_matmul_fully_strided_view_copies) {
    /* last two dims of a [2,3,4] permuted by (2,0,1) -> [4,2,3] have strides (12, 4): neither
     * rows nor columns are contiguous, so matmul copies that operand first */
    float *x = iota(24), w[3] = {1, -1, 2};
    tg_tensor *p = tg_permute(IN(x, 2, 3, 4), (const int[]){2, 0, 1});
    tg_tensor *y = tg_keep(tg_matmul(p, IN(w, 3, 1), false, false));
    ck_assert_int_eq(count_op(G, TG_OP_CONT), 1);
    run_ok();
    float want[8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) {
            float s = 0;
            for (int k = 0; k < 3; k++) s += x[(j * 3 + k) * 4 + i] * w[k];
            want[i * 2 + j] = s;
        }
    expect_exact(y, want, 8);
    free(x);
}
END_TEST

START_TEST(test_reduction_of_view) {
    float *x = iota(12);
    tg_tensor *s = tg_keep(tg_sum(tg_transpose(IN(x, 3, 4), 0, 1), 1, false)); /* row sums of x^T */
    run_ok();
    const float want[4] = {12, 15, 18, 21};
    expect_exact(s, want, 4);
    free(x);
}
END_TEST

/* ================================ kept views and the planner ================================ */

START_TEST(test_kept_view_of_intermediate) {
    /* y = 2x is an intermediate; a kept slice of it must survive later ops that would
     * otherwise reuse y's buffer */
    float *x = iota(16);
    tg_tensor *y = tg_scale(IN(x, 4, 4), 2.0f);
    tg_tensor *v = tg_keep(tg_slice(y, 0, 1, 3));
    tg_tensor *h = y;
    for (int i = 0; i < 6; i++) h = tg_add_scalar(tg_exp(tg_scale(h, 0.01f)), -1.0f);
    tg_keep(h);
    run_ok();
    float want[8];
    for (int i = 0; i < 8; i++) want[i] = 2.0f * x[4 + i];
    expect_exact(v, want, 8);
    free(x);
}
END_TEST

START_TEST(test_kept_view_blocks_in_place) {
    /* neg(y) is an elementwise op and y's last direct reader: it would run in place, but a kept
     * transposed view of y still needs y's values */
    float *x = iota(6);
    tg_tensor *y = tg_scale(IN(x, 2, 3), 1.0f);
    tg_tensor *v = tg_keep(tg_transpose(y, 0, 1));
    tg_tensor *n = tg_keep(tg_neg(y));
    run_ok();
    const float wv[6] = {0, 3, 1, 4, 2, 5};
    expect_exact(v, wv, 6);
    const float wn[6] = {-0.0f, -1, -2, -3, -4, -5};
    expect_exact(n, wn, 6);
    ck_assert(n->block != y->block);
    free(x);
}
END_TEST

START_TEST(test_in_place_without_kept_view) {
    /* control for the test above: without the kept view, neg runs in y's buffer (unfused:
     * fused, y would need no buffer at all) */
    tg_graph_set_fusion(G, false);
    float *x = iota(6);
    tg_tensor *y = tg_scale(IN(x, 2, 3), 1.0f);
    tg_tensor *n = tg_keep(tg_neg(y));
    run_ok();
    const float wn[6] = {-0.0f, -1, -2, -3, -4, -5};
    expect_exact(n, wn, 6);
    ck_assert_int_eq(n->block, y->block);
    free(x);
}
END_TEST

START_TEST(test_view_read_through_later_view_op) {
    /* a view of y read by an op late in the graph keeps y alive until then */
    float *x = iota(8);
    tg_tensor *y = tg_scale(IN(x, 2, 4), 3.0f);
    tg_tensor *late = tg_slice(y, 1, 2, 4);
    tg_tensor *h = tg_exp(tg_scale(y, -1.0f));
    for (int i = 0; i < 4; i++) h = tg_tanh(tg_add_scalar(h, 0.5f));
    tg_tensor *out = tg_keep(tg_add(tg_sum(h, 1, true), late));
    run_ok();
    float *hv = malloc(8 * sizeof *hv);
    for (int i = 0; i < 8; i++) {
        float t = expf(-3.0f * x[i]);
        for (int k = 0; k < 4; k++) t = tanhf(t + 0.5f);
        hv[i] = t;
    }
    float v[4];
    ck_assert_int_eq(tg_tensor_read(out, v, sizeof v), TG_OK);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 2; c++) {
            float s = hv[r * 4] + hv[r * 4 + 1] + hv[r * 4 + 2] + hv[r * 4 + 3];
            tg_assert_close(v[r * 2 + c], s + 3.0f * x[r * 4 + 2 + c], 1e-5, 1e-6);
        }
    free(hv);
    free(x);
}
END_TEST

START_TEST(test_kept_scalar_view_item) {
    float *x = iota(6);
    tg_tensor *e = tg_keep(tg_reshape(tg_slice(tg_slice(IN(x, 2, 3), 0, 1, 2), 1, 2, 3), 0, NULL));
    run_ok();
    ck_assert_float_eq(tg_tensor_item(e), 5.0f);
    free(x);
}
END_TEST

START_TEST(test_view_of_input_read_after_run) {
    float *x = iota(12);
    tg_tensor *v = tg_keep(tg_transpose(tg_slice(IN(x, 3, 4), 1, 1, 4), 0, 1)); /* [3,3] */
    run_ok();
    const float want[9] = {1, 5, 9, 2, 6, 10, 3, 7, 11};
    expect_exact(v, want, 9);
    free(x);
}
END_TEST

START_TEST(test_expand_then_reshape) {
    float x[3] = {1, 2, 3};
    tg_tensor *e = tg_expand(IN(x, 3, 1), 2, SHAPE(3, 2));
    tg_tensor *r = tg_keep(tg_reshape(e, 1, SHAPE(-1)));
    ck_assert_int_eq(tg_tensor_op(e), TG_OP_EXPAND); /* expand materialises */
    ck_assert_ptr_eq(r->base, e);
    run_ok();
    const float want[6] = {1, 1, 2, 2, 3, 3};
    expect_exact(r, want, 6);
}
END_TEST

START_TEST(test_i32_views) {
    int32_t ids[6] = {0, 1, 2, 3, 4, 5};
    float tab[12];
    for (int i = 0; i < 12; i++) tab[i] = (float)i;
    tg_tensor *in = tg_input(G, TG_DTYPE_I32, 2, SHAPE(2, 3), ids);
    tg_tensor *t = tg_transpose(in, 0, 1); /* ids 0 3 1 4 2 5 */
    ck_assert_int_eq(tg_tensor_dtype(t), TG_DTYPE_I32);
    tg_tensor *e = tg_keep(tg_embedding(IN(tab, 6, 2), t));
    tg_keep(t);
    run_ok();
    int32_t got[6];
    ck_assert_int_eq(tg_tensor_read(t, got, sizeof got), TG_OK);
    const int32_t wt[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(got[i], wt[i]);
    const float we[12] = {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11};
    expect_exact(e, we, 12);
}
END_TEST

START_TEST(test_shape_accessors) {
    float *x = iota(24);
    tg_tensor *t = tg_permute(IN(x, 2, 3, 4), (const int[]){1, 2, 0});
    int64_t s[TG_MAX_DIMS];
    ck_assert_int_eq(tg_tensor_shape(t, s), 3);
    ck_assert(s[0] == 3 && s[1] == 4 && s[2] == 2);
    ck_assert_int_eq(tg_tensor_dim(t, -1), 2);
    ck_assert_int_eq(tg_tensor_dim(t, 0), 3);
    ck_assert_int_eq(tg_tensor_dim(t, 3), -1);
    ck_assert_int_eq(tg_tensor_numel(t), 24);
    char buf[32];
    ck_assert_str_eq(tg_shape_str(buf, sizeof buf, 3, s), "[3,4,2]");
    ck_assert_str_eq(tg_shape_str(buf, sizeof buf, 0, s), "[]");
    ck_assert_str_eq(tg_tensor_name(tg_tensor_set_name(t, "heads%d", 4)), "heads4");
    free(x);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("views");
    TCase *tc = tcase_create("views");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_reshape_is_a_view);
    tcase_add_test(tc, test_reshape_infer_minus_one);
    tcase_add_test(tc, test_reshape_to_and_from_scalar);
    tcase_add_test(tc, test_reshape_of_reshape_shares_owner);
    tcase_add_test(tc, test_reshape_of_row_slice_is_a_view);
    tcase_add_test(tc, test_reshape_of_permuted_view_copies);
    tcase_add_test(tc, test_reshape_of_column_slice_copies);
    tcase_add_test(tc, test_permute_strides_and_values);
    tcase_add_test(tc, test_transpose_negative_axes);
    tcase_add_test(tc, test_transpose_same_axis_and_double_transpose);
    tcase_add_test(tc, test_permute_6d);
    tcase_add_test(tc, test_slice_offsets_and_values);
    tcase_add_test(tc, test_slice_of_slice);
    tcase_add_test(tc, test_slice_of_permute_and_permute_of_slice);
    tcase_add_test(tc, test_empty_slice);
    tcase_add_test(tc, test_full_slice_is_whole_tensor);
    tcase_add_test(tc, test_contiguous_identity_and_copy);
    tcase_add_test(tc, test_contiguous_of_6d_strided);
    tcase_add_test(tc, test_binary_op_on_views);
    tcase_add_test(tc, test_matmul_reads_views_without_copy);
    tcase_add_test(tc, test_matmul_head_views_many_sequences);
    tcase_add_test(tc, test_matmul_fully_strided_view_copies);
    tcase_add_test(tc, test_reduction_of_view);
    tcase_add_test(tc, test_kept_view_of_intermediate);
    tcase_add_test(tc, test_kept_view_blocks_in_place);
    tcase_add_test(tc, test_in_place_without_kept_view);
    tcase_add_test(tc, test_view_read_through_later_view_op);
    tcase_add_test(tc, test_kept_scalar_view_item);
    tcase_add_test(tc, test_view_of_input_read_after_run);
    tcase_add_test(tc, test_expand_then_reshape);
    tcase_add_test(tc, test_i32_views);
    tcase_add_test(tc, test_shape_accessors);
    suite_add_tcase(s, tc);
    return s;
}
