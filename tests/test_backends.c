/* Backends as a module: the registry (tg_backend_new by name) and the kernel geometry that
 * every backend shares (core/backend-helpers.h): broadcast strides, the GEMM plan of a batched
 * matmul, and sum_to's reduced dims, checked on shapes whose answers are worked out by hand. */
#include <stdio.h>
#include <string.h>

#include "core/backend-helpers.h"
#include "core/backend-impl.h"
#include "tg/tg.h"
#include "tg_check.h"

START_TEST(test_registry_names_and_cpu) {
    ck_assert_str_eq(tg_backend_names(), "cpu|cuda");
    tg_backend *b = NULL;
    tg_backend_options o = {.threads = 3};
    ck_assert_msg(tg_backend_new("cpu", &o, &b) == TG_OK, "%s", tg_error_message());
    ck_assert_str_eq(tg_backend_name(b), "cpu");
    ck_assert_int_eq(tg_backend_threads(b), 3);
    tg_backend_free(b);
    ck_assert_int_eq(tg_backend_new("cpu", NULL, &b), TG_OK); /* defaults */
    ck_assert_int_ge(tg_backend_threads(b), 1);
    tg_backend_free(b);
}
END_TEST

/* supports_op is answered from the backend's kernels: the CPU backend has one for every op a
 * graph runs, and none for leaves and views (which run no kernel) */
START_TEST(test_cpu_supports_op_truthfully) {
    tg_backend *b;
    ck_assert_int_eq(tg_backend_cpu_new(1, &b), TG_OK);
    for (int op = 0; op < TG_OP_COUNT; op++) {
        bool view = op == TG_OP_NONE || op == TG_OP_RESHAPE || op == TG_OP_PERMUTE || op == TG_OP_SLICE;
        ck_assert_msg(b->vt->supports_op(b, (tg_op)op) == !view, "cpu supports_op(%s) = %d", tg_op_name((tg_op)op),
                      (int)b->vt->supports_op(b, (tg_op)op));
    }
    ck_assert(!b->vt->supports_op(b, TG_OP_COUNT));
    tg_backend_free(b);
}
END_TEST

/* The op table assembled from the op family files (core/ops/) has exactly one row per op,
 * with a name, and a gradient rule exactly for the ops that are neither backward-only nor
 * without gradient (leaf excepted). */
START_TEST(test_op_table_has_one_row_per_op) {
    char msg[256];
    ck_assert_msg(tg__op_table_check(msg, sizeof msg), "%s", msg);
    for (int op = 1; op < TG_OP_COUNT; op++) {
        bool rule = tg__grad_rule((tg_op)op) != NULL;
        bool want = !tg_op_is_backward_only((tg_op)op) && !tg_op_has_no_gradient((tg_op)op);
        ck_assert_msg(rule == want, "op %s: gradient rule %d, expected %d", tg_op_name((tg_op)op),
                      (int)rule, (int)want);
    }
    ck_assert_str_eq(tg_op_name(TG_OP_COUNT), "unknown-op");
    ck_assert_ptr_null(tg__grad_rule(TG_OP_COUNT));
}
END_TEST

START_TEST(test_registry_errors) {
    tg_backend *b = (tg_backend *)&b;
    ck_assert_int_eq(tg_backend_new("tpu", NULL, &b), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "unknown backend 'tpu' (registered: cpu|cuda)");
    ck_assert_ptr_null(b);
    ck_assert_int_eq(tg_backend_new(NULL, NULL, &b), TG_ERR_INVALID);
    ck_assert_int_eq(tg_backend_new("cpu", NULL, NULL), TG_ERR_INVALID);
    tg_backend_options bad = {.threads = -1};
    ck_assert_int_eq(tg_backend_new("cpu", &bad, &b), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "threads out of range");
    /* cuda answers as its constructor does: no CUDA in the build, or no GPU, or a GPU */
    tg_status st = tg_backend_new("cuda", NULL, &b);
    if (!tg_have_cuda()) {
        ck_assert_int_eq(st, TG_ERR_UNSUPPORTED);
        tg_assert_msg_has(tg_error_message(), "no CUDA backend");
    } else {
        ck_assert_msg(st == TG_OK || st == TG_ERR_BACKEND, "%s", tg_error_message());
    }
    if (st == TG_OK) {
        ck_assert_str_eq(tg_backend_name(b), "cuda");
        ck_assert(tg_dist_can_use_nccl(b) == tg_have_nccl());
        tg_backend_free(b);
    }
    /* NCCL never applies to the CPU backend */
    ck_assert_int_eq(tg_backend_new("cpu", NULL, &b), TG_OK);
    ck_assert(!tg_dist_can_use_nccl(b));
    tg_backend_free(b);
}
END_TEST

/* cuBLAS is opened by the first CUDA backend, never at program start (backends/cuda/
 * blas_load.c: linking it costs every process ~150 MiB and ~0.8 s). So a process that only
 * makes CPU backends, or asks for a CUDA backend on a machine without a GPU, never maps it; one
 * that made a CUDA backend has. Registered only in a build with CUDA. */
static bool mapped(const char *lib) {
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

START_TEST(test_cublas_opened_lazily) {
    tg_backend *b;
    ck_assert_int_eq(tg_backend_new("cpu", NULL, &b), TG_OK);
    tg_backend_free(b);
    ck_assert_msg(!mapped("libcublas"), "cuBLAS mapped in a CPU-only process");
    tg_status st = tg_backend_cuda_new(0, &b);
    ck_assert_msg(st == TG_OK || st == TG_ERR_BACKEND, "%s", tg_error_message());
    ck_assert(mapped("libcublas") == (st == TG_OK));
    if (st == TG_OK) tg_backend_free(b);
}
END_TEST

/* ---- geometry ---- */

static tg_graph *G;
static void setup(void) { G = tg_graph_new(); }
static void teardown(void) { tg_graph_free(G); }

static tg_tensor *zeros(int nd, const int64_t *s) { return tg_full(G, 0.0f, nd, s); }

START_TEST(test_bcast_strides) {
    int64_t xs[2] = {3, 1}, ts[3] = {2, 3, 4};
    int64_t st[3];
    tg__geom_bcast_strides(zeros(2, xs), zeros(3, ts), st);
    /* x [3,1] against [2,3,4]: no dim 0 (0), dim 1 steps 1, dim 2 broadcast (0) */
    ck_assert(st[0] == 0 && st[1] == 1 && st[2] == 0);
}
END_TEST

START_TEST(test_mm_plan_collapses_batches) {
    /* A [2,3,4,5] x B [5,6] broadcast over both batch dims: one batch of 6 products with
     * B's batch stride 0, A's stride 20, C's stride 24 */
    int64_t as[4] = {2, 3, 4, 5}, bs[2] = {5, 6};
    tg_tensor *c = tg_matmul(zeros(4, as), zeros(2, bs), false, false);
    ck_assert_ptr_nonnull(c);
    tg_mm_plan p;
    tg__geom_mm_plan(c, &p);
    ck_assert(p.M == 4 && p.N == 6 && p.K == 5 && p.nb == 2);
    ck_assert(p.first == 0 && p.inner == 6 && p.outer == 1);
    ck_assert(p.sa == 20 && p.sb == 0 && p.sc == 24);
    ck_assert(!p.a.trans && p.a.ld == 5 && !p.b.trans && p.b.ld == 6);
    /* B [2,1,5,6] broadcast over dim 1 only: dim 0 (stride 30) cannot join dim 1 (stride 0) */
    int64_t b4[4] = {2, 1, 5, 6};
    c = tg_matmul(zeros(4, as), zeros(4, b4), false, false);
    tg__geom_mm_plan(c, &p);
    ck_assert(p.first == 1 && p.inner == 3 && p.outer == 2);
    ck_assert(p.sa == 20 && p.sb == 0 && p.sc == 24);
    int64_t oa, ob, oc;
    tg__geom_mm_offsets(&p, c, 1, &oa, &ob, &oc);
    ck_assert(oa == 60 && ob == 30 && oc == 72);
    /* a transposed view (columns contiguous) flips the flag instead of a copy: A^T of [5,4] */
    int64_t at[2] = {5, 4}, b2[2] = {5, 6};
    c = tg_matmul(tg_transpose(zeros(2, at), 0, 1), zeros(2, b2), false, false);
    tg__geom_mm_plan(c, &p);
    ck_assert(p.a.trans && p.a.ld == 4 && p.inner == 1 && p.outer == 1);
}
END_TEST

START_TEST(test_sumto_plan) {
    int64_t xs[3] = {2, 3, 4}, bias[1] = {4}, mid[3] = {2, 1, 4};
    tg_tensor *x = zeros(3, xs);
    tg_sumto_plan p;
    tg__geom_sumto_plan(zeros(1, bias), x, &p); /* a bias gradient: [6, 4] -> [4] */
    ck_assert(p.lead_block && p.R == 6 && p.C == 4 && p.red[0] && p.red[1] && !p.red[2]);
    tg__geom_sumto_plan(zeros(3, mid), x, &p); /* the middle dim: the general case */
    ck_assert(!p.lead_block && !p.red[0] && p.red[1] && !p.red[2]);
    ck_assert(p.nout == 8 && p.nred == 3 && p.xstride[0] == 12 && p.xstride[1] == 4 && p.xstride[2] == 1);
}
END_TEST

/* The CPU kernels' instruction-set cap (backends/cpu/isa.h): names checked, a cap lowers the
 * level and a result computed at each level agrees; a level above the CPU's is refused by name
 * and the best one kept; the backend option does the same. (Each Check test runs in a process
 * of its own, so the caps set here end with it.) */
START_TEST(test_cpu_isa_cap) {
    const char *start = tg_cpu_isa_name();
    ck_assert(!strcmp(start, "portable") || !strcmp(start, "avx2") || !strcmp(start, "avx512"));
    TG_EXPECT_STATUS(tg_cpu_set_isa("sse9"), TG_ERR_INVALID, "'sse9' is not one of");
    TG_EXPECT_STATUS(tg_cpu_set_isa(NULL), TG_ERR_INVALID, "is not one of");
    ck_assert_str_eq(tg_cpu_isa_name(), start);
    tg_backend *be = NULL;
    TG_EXPECT_STATUS(tg_backend_new("cpu", &(tg_backend_options){.threads = 1, .cpu_isa = "x"}, &be),
                     TG_ERR_INVALID, "'x' is not one of");
    ck_assert_ptr_null(be);
    /* the same softmax at every level the CPU has: within float rounding of each other */
    static const char *const levels[] = {"portable", "avx2", "avx512"};
    float ref[40] = {0};
    for (int l = 0; l < 3; l++) {
        const tg_status st = tg_cpu_set_isa(levels[l]);
        if (st != TG_OK) { /* above this CPU: refused by name, its best kept */
            ck_assert_int_eq(st, TG_ERR_UNSUPPORTED);
            tg_assert_msg_has(tg_error_message(), "this CPU lacks");
            ck_assert_str_eq(tg_cpu_isa_name(), levels[l - 1]);
            break;
        }
        ck_assert_str_eq(tg_cpu_isa_name(), levels[l]);
        ck_assert_int_eq(tg_backend_new("cpu", &(tg_backend_options){.threads = 2}, &be), TG_OK);
        tg_graph *g = tg_graph_new();
        ck_assert_ptr_nonnull(g);
        float xs[40];
        for (int i = 0; i < 40; i++) xs[i] = (float)((i * 7) % 13) * 0.37f - 2.0f;
        tg_tensor *y = tg_keep(tg_softmax(tg_gelu(tg_input(g, TG_DTYPE_F32, 2, (int64_t[]){4, 10}, xs))));
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(tg_graph_run(g, be), TG_OK);
        float got[40];
        ck_assert_int_eq(tg_tensor_read(y, got, sizeof got), TG_OK);
        for (int i = 0; i < 40; i++) {
            if (l > 0) ck_assert_float_eq_tol(got[i], ref[i], 1e-6f);
            ref[i] = got[i];
        }
        tg_graph_free(g);
        tg_backend_free(be);
    }
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("backends");
    TCase *tr = tcase_create("registry");
    tcase_add_test(tr, test_registry_names_and_cpu);
    tcase_add_test(tr, test_registry_errors);
    tcase_add_test(tr, test_cpu_supports_op_truthfully);
    tcase_add_test(tr, test_op_table_has_one_row_per_op);
    tcase_add_test(tr, test_cpu_isa_cap);
    if (tg_have_cuda()) tcase_add_test(tr, test_cublas_opened_lazily);
    suite_add_tcase(s, tr);
    TCase *tg = tcase_create("geometry");
    tcase_add_checked_fixture(tg, setup, teardown);
    tcase_add_test(tg, test_bcast_strides);
    tcase_add_test(tg, test_mm_plan_collapses_batches);
    tcase_add_test(tg, test_sumto_plan);
    suite_add_tcase(s, tg);
    return s;
}
