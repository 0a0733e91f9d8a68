/* Parameter gradients through the store: values against closed forms, accumulation over
 * runs, and the planner's fused accumulation (a matmul / sum_to writing straight into the
 * store's gradient) against the unfused path (forced by keeping the gradient tensor). */
#include <math.h>
#include <stdlib.h>

#include "core/backend-impl.h"
#include "core/graph-impl.h"
#include "tg_check.h"

static tg_backend *B;
static void setup(void) { ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK); }
static void teardown(void) { tg_backend_free(B); }

enum { N = 5, I = 4, O = 3 };

/* loss = sum((x W^T + b) * R): dW = R^T x, db = column sums of R */
static void run_linear(tg_store *s, const float *x, const float *R, bool keep_grads, int runs) {
    tg_graph *g = tg_graph_new();
    int64_t sx[2] = {N, I}, sr[2] = {N, O};
    tg_tensor *w = tg_param(g, s, "w"), *b = tg_param(g, s, "b");
    tg_tensor *y = tg_add(tg_matmul(tg_input(g, TG_DTYPE_F32, 2, sx, x), w, false, true), b);
    tg_tensor *loss = tg_sum_all(tg_mul(y, tg_input(g, TG_DTYPE_F32, 2, sr, R)));
    ck_assert_int_eq(tg_backward(g, loss), TG_OK);
    if (keep_grads) {
        ck_assert_ptr_nonnull(tg_grad(g, w));
        ck_assert_ptr_nonnull(tg_grad(g, b));
    }
    for (int r = 0; r < runs; r++) ck_assert_msg(tg_graph_run(g, B) == TG_OK, "%s", tg_error_message());
    /* fused: the weight and bias gradients are not workspace tensors */
    bool fused = false;
    for (int64_t i = 0; i < g->n; i++)
        if (g->nodes[i]->flags & TG_TF_FUSED) fused = true;
    ck_assert_int_eq(fused, !keep_grads);
    tg_graph_free(g);
}

static tg_store *make_store(void) {
    tg_store *s;
    ck_assert_int_eq(tg_store_new(B, &s), TG_OK);
    float w[O * I], b[O];
    for (int i = 0; i < O * I; i++) w[i] = 0.1f * (float)(i - 5);
    for (int i = 0; i < O; i++) b[i] = (float)i;
    int64_t sw[2] = {O, I}, sb[1] = {O};
    ck_assert_int_eq(tg_store_add(s, "w", 2, sw, w, true), TG_OK);
    ck_assert_int_eq(tg_store_add(s, "b", 1, sb, b, true), TG_OK);
    return s;
}

START_TEST(test_param_grads_closed_form_and_accumulation) {
    float x[N * I], R[N * O];
    for (int i = 0; i < N * I; i++) x[i] = (float)((i * 7) % 11) - 5.0f;
    for (int i = 0; i < N * O; i++) R[i] = (float)((i * 3) % 5) - 2.0f;
    for (int keep = 0; keep <= 1; keep++)
        for (int runs = 1; runs <= 2; runs++) {
            tg_store *s = make_store();
            /* a non-zero starting gradient: accumulation must add to it */
            float g0[O * I], gb0[O];
            for (int i = 0; i < O * I; i++) g0[i] = 0.5f;
            for (int i = 0; i < O; i++) gb0[i] = -1.0f;
            ck_assert_int_eq(tg_store_write_grad(s, 0, g0, O * I), TG_OK);
            ck_assert_int_eq(tg_store_write_grad(s, 1, gb0, O), TG_OK);
            run_linear(s, x, R, keep, runs);
            float gw[O * I], gb[O];
            ck_assert_int_eq(tg_store_read_grad(s, 0, gw, O * I), TG_OK);
            ck_assert_int_eq(tg_store_read_grad(s, 1, gb, O), TG_OK);
            for (int o = 0; o < O; o++) {
                double db = 0;
                for (int n = 0; n < N; n++) db += R[n * O + o];
                tg_assert_close(gb[o], gb0[o] + runs * db, 1e-5, 1e-6);
                for (int i = 0; i < I; i++) {
                    double dw = 0;
                    for (int n = 0; n < N; n++) dw += R[n * O + o] * x[n * I + i];
                    tg_assert_close(gw[o * I + i], g0[o * I + i] + runs * dw, 1e-4, 1e-6);
                }
            }
            tg_store_free(s);
        }
}
END_TEST

/* a trainable parameter that the loss does not reach keeps a zero gradient */
/* The gradient of a tensor cut into slices that tile an axis (a fused projection's Q, K and V)
 * is one concatenation of theirs, not a zero-padded copy per slice and their sum; with a gap
 * between the slices it is a sum again; the values are the closed form's either way:
 * loss = sum(2·q⊙k + v) for x = [q | k | v] (columns 0-1, 2-3, 4-5) gives dq = 2k, dk = 2q,
 * dv = 1, and without k (columns 2-3 unused) dq = 2, dv = 1, zero between. */
START_TEST(test_slice_gradients_gathered) {
    enum { R = 3, C = 6 };
    float x[R * C];
    for (int i = 0; i < R * C; i++)
        x[i] = 0.25f * (float)(i - 7);
    for (int gap = 0; gap < 2; gap++) {
        tg_graph *g = tg_graph_new();
        int64_t sx[2] = {R, C};
        tg_tensor *xt = tg_input(g, TG_DTYPE_F32, 2, sx, x);
        tg_requires_grad(xt);
        tg_tensor *q = tg_slice(xt, 1, 0, 2), *k = tg_slice(xt, 1, 2, 4),
                  *v = tg_slice(xt, 1, 4, 6);
        tg_tensor *y = gap ? tg_scale(q, 2.0f) : tg_mul(tg_scale(q, 2.0f), k);
        tg_tensor *loss = tg_add(tg_sum_all(y), tg_sum_all(v));
        ck_assert_int_eq(tg_backward(g, loss), TG_OK);
        tg_tensor *dx = tg_grad(g, xt);
        ck_assert_ptr_nonnull(dx);
        ck_assert_int_eq(dx->op, gap ? TG_OP_ADD : TG_OP_CONCAT);
        if (!gap) ck_assert_int_eq(dx->nsrc, 3);
        ck_assert_msg(tg_graph_run(g, B) == TG_OK, "%s", tg_error_message());
        float d[R * C];
        ck_assert_int_eq(tg_tensor_read(dx, d, sizeof d), TG_OK);
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                const float *xr = x + r * C;
                float want = c < 2   ? (gap ? 2.0f : 2.0f * xr[c + 2])
                             : c < 4 ? (gap ? 0.0f : 2.0f * xr[c - 2])
                                     : 1.0f;
                ck_assert_msg(d[r * C + c] == want, "gap %d: dx[%d][%d] = %g, want %g", gap, r, c,
                              d[r * C + c], want);
            }
        tg_graph_free(g);
    }
}
END_TEST

START_TEST(test_unused_param_gradient_stays_zero) {
    tg_store *s = make_store();
    int64_t su[1] = {7};
    ck_assert_int_eq(tg_store_add(s, "unused", 1, su, NULL, true), TG_OK);
    float x[N * I] = {1}, R[N * O] = {1};
    run_linear(s, x, R, false, 1);
    float gu[7];
    ck_assert_int_eq(tg_store_read_grad(s, 2, gu, 7), TG_OK);
    for (int i = 0; i < 7; i++) ck_assert(gu[i] == 0.0f);
    tg_store_free(s);
}
END_TEST

/* Column sums over many rows (backends/cpu/k_reduce.c): the rows in blocks of 128, each
 * block's rows added in order from 0 and the block sums in block order from 0 — the same bits
 * on 1, 2 and 3 threads, whether a graph run's shares cut the rows (a bias gradient [R, C] ->
 * [C]) or the columns, and with the planner's fused accumulation into the store gradient (and
 * without it: keep_grads). R = 1000 rows: 7 whole blocks and one of 104; C = 200 columns: 3 of
 * the kernel's 64-column steps and a narrower one. loss = sum((x + b) * Rm) gives db = the
 * column sums of Rm, added to the starting gradient -1. Fails if the rows are summed in one
 * run, in another block order, or a share's blocks are left out. */
enum { SR = 1000, SC = 200, SUM_ROWS = 128 };

static void column_sums_by_hand(const float *x, float *want) {
    for (int c = 0; c < SC; c++) {
        float sum = 0.0f;
        for (int k0 = 0; k0 < SR; k0 += SUM_ROWS) {
            float blk = 0.0f;
            for (int k = k0; k < SR && k < k0 + SUM_ROWS; k++)
                blk += x[k * SC + c];
            sum += blk;
        }
        want[c] = sum;
    }
}

START_TEST(test_column_sums_in_row_blocks) {
    float *x = malloc(sizeof(float) * SR * SC), *rm = malloc(sizeof(float) * SR * SC);
    ck_assert(x && rm);
    for (int e = 0; e < SR * SC; e++) { /* values whose sums round: the order shows */
        x[e] = (float)sin(0.37 * e + 0.1) * 3.1f;
        rm[e] = (float)cos(0.11 * e) * 1.7f + 0.01f * (float)(e % 13);
    }
    float want[SC], wantb[SC], got[SC];
    column_sums_by_hand(x, want);
    column_sums_by_hand(rm, wantb);
    for (int c = 0; c < SC; c++)
        wantb[c] = -1.0f + wantb[c];
    const int64_t sx[2] = {SR, SC}, sb[1] = {SC};
    for (int threads = 1; threads <= 3; threads++) {
        tg_backend *be;
        ck_assert_int_eq(tg_backend_cpu_new(threads, &be), TG_OK);
        for (int run = 0; run < 2; run++) { /* the forward op */
            tg_graph *g = tg_graph_new();
            tg_tensor *y = tg_keep(tg_sum_to(tg_input(g, TG_DTYPE_F32, 2, sx, x), 1, sb));
            ck_assert_int_eq(tg_graph_run(g, be), TG_OK);
            ck_assert_int_eq(tg_tensor_read(y, got, sizeof got), TG_OK);
            tg_graph_free(g);
            for (int c = 0; c < SC; c++)
                ck_assert_msg(got[c] == want[c], "%d threads: sum %d = %.9g, by hand %.9g", threads,
                              c, got[c], want[c]);
        }
        for (int keep = 0; keep <= 1; keep++) { /* a bias gradient, accumulated */
            tg_store *s;
            ck_assert_int_eq(tg_store_new(be, &s), TG_OK);
            ck_assert_int_eq(tg_store_add(s, "b", 1, sb, NULL, true), TG_OK);
            float g0[SC];
            for (int c = 0; c < SC; c++)
                g0[c] = -1.0f;
            ck_assert_int_eq(tg_store_write_grad(s, 0, g0, SC), TG_OK);
            tg_graph *g = tg_graph_new();
            tg_tensor *b = tg_param(g, s, "b");
            tg_tensor *y = tg_add(tg_input(g, TG_DTYPE_F32, 2, sx, x), b);
            tg_tensor *loss = tg_sum_all(tg_mul(y, tg_input(g, TG_DTYPE_F32, 2, sx, rm)));
            ck_assert_int_eq(tg_backward(g, loss), TG_OK);
            if (keep) ck_assert_ptr_nonnull(tg_grad(g, b));
            ck_assert_int_eq(tg_graph_run(g, be), TG_OK);
            bool fused = false;
            for (int64_t i = 0; i < g->n; i++)
                if (g->nodes[i]->op == TG_OP_SUM_TO && (g->nodes[i]->flags & TG_TF_ACCUM))
                    fused = true;
            ck_assert_int_eq(fused, !keep);
            tg_graph_free(g);
            ck_assert_int_eq(tg_store_read_grad(s, 0, got, SC), TG_OK);
            for (int c = 0; c < SC; c++)
                ck_assert_msg(got[c] == wantb[c], "%d threads, keep %d: db %d = %.9g, by hand %.9g",
                              threads, keep, c, got[c], wantb[c]);
            tg_store_free(s);
        }
        tg_backend_free(be);
    }
    free(x), free(rm);
}
END_TEST

/* Layer norm's dgamma (layer_norm_gamma_back, backends/cpu/k_rows.c): the bits of the unfused
 * graph sum_to(mul(dy, layer_norm(x))) — which it replaced — on 1, 2 and 3 threads, fused into
 * the store gradient (ACCUM) and not (keep_grads), for rows of 200 (AVX2 rows, a column tail
 * past the 64-column steps), 256, 64 (too little work to share) and 4100 (a row at a time),
 * and row counts across the 128-row blocks. loss = sum(LN(x;
 * gamma, beta) * Rm) gives dgamma = sum over rows of Rm * xhat, added to the starting -1. Fails
 * if a row, a block or a share is left out or summed out of order, xhat is made otherwise, the
 * products are contracted into multiply-adds, or the accumulation overwrites. */
static float *wave(int64_t n, double f, double ph, float amp, float off) {
    float *v = malloc(sizeof(float) * (size_t)n);
    ck_assert_ptr_nonnull(v);
    for (int64_t e = 0; e < n; e++)
        v[e] = (float)sin(f * (double)e + ph) * amp + off * (float)(e % 7);
    return v;
}

START_TEST(test_layer_norm_dgamma_bits) {
    static const int64_t shapes[][2] = {{1000, 200}, {300, 256}, {20, 64}, {130, 4100}};
    const float eps = 1e-5f;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t R = shapes[k][0], D = shapes[k][1], sx[2] = {R, D}, sd[1] = {D};
        float *x = wave(R * D, 0.37, 0.1, 3.1f, 0.2f), *rm = wave(R * D, 0.11, 1.3, 1.7f, 0.01f);
        float *ref = malloc(sizeof(float) * (size_t)D), *got = malloc(sizeof(float) * (size_t)D);
        ck_assert(ref && got);
        { /* the unfused graph, one thread */
            tg_backend *b1;
            ck_assert_int_eq(tg_backend_cpu_new(1, &b1), TG_OK);
            tg_graph *g = tg_graph_new();
            tg_tensor *xh = tg_layer_norm(tg_input(g, TG_DTYPE_F32, 2, sx, x), NULL, NULL, eps);
            tg_tensor *y =
                tg_keep(tg_sum_to(tg_mul(tg_input(g, TG_DTYPE_F32, 2, sx, rm), xh), 1, sd));
            ck_assert_int_eq(tg_graph_run(g, b1), TG_OK);
            ck_assert_int_eq(tg_tensor_read(y, ref, sizeof(float) * (size_t)D), TG_OK);
            tg_graph_free(g);
            tg_backend_free(b1);
        }
        for (int64_t c = 0; c < D; c += 37) { /* and the reference is dgamma (in double) */
            double want = 0.0;
            for (int64_t r = 0; r < R; r++) {
                const float *xr = x + r * D;
                double mu = 0.0, var = 0.0;
                for (int64_t j = 0; j < D; j++)
                    mu += xr[j];
                mu /= (double)D;
                for (int64_t j = 0; j < D; j++)
                    var += (xr[j] - mu) * (xr[j] - mu);
                want += rm[r * D + c] * (xr[c] - mu) / sqrt(var / (double)D + eps);
            }
            ck_assert_msg(fabs(ref[c] - want) <= 1e-4 * (1.0 + fabs(want)),
                          "[%lld, %lld]: column %lld %.9g, in double %.9g", (long long)R,
                          (long long)D, (long long)c, (double)ref[c], want);
        }
        for (int threads = 1; threads <= 3; threads++) {
            tg_backend *be;
            ck_assert_int_eq(tg_backend_cpu_new(threads, &be), TG_OK);
            for (int keep = 0; keep <= 1; keep++) {
                tg_store *s;
                ck_assert_int_eq(tg_store_new(be, &s), TG_OK);
                ck_assert_int_eq(tg_store_add(s, "g", 1, sd, NULL, true), TG_OK);
                ck_assert_int_eq(tg_store_add(s, "b", 1, sd, NULL, true), TG_OK);
                for (int64_t c = 0; c < D; c++)
                    got[c] = -1.0f;
                ck_assert_int_eq(tg_store_write_grad(s, 0, got, D), TG_OK);
                tg_graph *g = tg_graph_new();
                tg_tensor *gm = tg_param(g, s, "g");
                tg_tensor *y = tg_layer_norm(tg_input(g, TG_DTYPE_F32, 2, sx, x), gm,
                                             tg_param(g, s, "b"), eps);
                tg_tensor *loss = tg_sum_all(tg_mul(y, tg_input(g, TG_DTYPE_F32, 2, sx, rm)));
                ck_assert_int_eq(tg_backward(g, loss), TG_OK);
                if (keep) ck_assert_ptr_nonnull(tg_grad(g, gm));
                ck_assert_int_eq(tg_graph_run(g, be), TG_OK);
                int ops = 0, fused = 0;
                for (int64_t i = 0; i < g->n; i++)
                    if (g->nodes[i]->op == TG_OP_LAYER_NORM_GAMMA_BACK)
                        ops++, fused += (g->nodes[i]->flags & TG_TF_ACCUM) != 0;
                ck_assert_int_eq(ops, 1);
                ck_assert_int_eq(fused, !keep);
                tg_graph_free(g);
                ck_assert_int_eq(tg_store_read_grad(s, 0, got, D), TG_OK);
                for (int64_t c = 0; c < D; c++)
                    ck_assert_msg(got[c] == -1.0f + ref[c],
                                  "[%lld, %lld], %d threads, keep %d: dgamma %lld = %.9g, "
                                  "unfused %.9g",
                                  (long long)R, (long long)D, threads, keep, (long long)c,
                                  (double)got[c], (double)(-1.0f + ref[c]));
                tg_store_free(s);
            }
            tg_backend_free(be);
        }
        free(x), free(rm), free(ref), free(got);
    }
}
END_TEST

/* The CPU allocator's cache of freed blocks stays bounded (1 GiB) however many different sizes
 * come and go (bucketed batches give workspaces of many sizes), and reuses a fitting block. */
START_TEST(test_allocator_cache_is_bounded) {
    tg_backend *b = B;
    size_t base = b->in_use;
    for (int i = 0; i < 40; i++) {
        size_t sz = ((size_t)100 << 20) + (size_t)i * ((size_t)37 << 20); /* 100 MiB .. 1.5 GiB */
        void *p = b->vt->alloc(b, sz);
        ck_assert_ptr_nonnull(p);
        b->vt->free(b, p, sz);
        ck_assert_msg(b->in_use - base <= ((size_t)1 << 30) + 4096, "cache holds %zu bytes", b->in_use - base);
    }
    void *p = b->vt->alloc(b, (size_t)64 << 20), *q;
    b->vt->free(b, p, (size_t)64 << 20);
    q = b->vt->alloc(b, (size_t)60 << 20);
    ck_assert_ptr_eq(p, q); /* reused */
    b->vt->free(b, q, (size_t)60 << 20);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("autograd");
    TCase *tc = tcase_create("params");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_param_grads_closed_form_and_accumulation);
    tcase_add_test(tc, test_unused_param_gradient_stays_zero);
    tcase_add_test(tc, test_slice_gradients_gathered);
    tcase_add_test(tc, test_allocator_cache_is_bounded);
    tcase_add_test(tc, test_column_sums_in_row_blocks);
    tcase_add_test(tc, test_layer_norm_dgamma_bits);
    suite_add_tcase(s, tc);
    return s;
}
