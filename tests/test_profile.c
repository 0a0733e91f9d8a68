/* TG_PROFILE's report (core/profile.c): node times by op, and the matrix products by shape —
 * M, N, K, batch count and transposes, calls, time and GFLOP/s — counted over graph runs
 * (the times of such small products round to 0 ms; only their counts and shapes are checked),
 * and tg_profile_reset, which forgets them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"
#include "tg_check.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        tg_status st_ = (call);                                                                    \
        ck_assert_msg(st_ == TG_OK, "%s failed: %s", #call, tg_error_message());                   \
    } while (0)

typedef struct {
    long long m, n, k, batch, calls;
    char op[3];
} shape_row;

/* The report's lines read back: the matmul op line's calls, and the shape lines; false when the
 * report is empty. */
static bool read_report(shape_row rows[8], int *nrows, long long *matmul_calls) {
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    tg_profile_report(f);
    const bool any = ftell(f) > 0;
    rewind(f);
    char line[256];
    bool in_shapes = false;
    *nrows = 0;
    *matmul_calls = -1;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "matmul by shape:", 16)) {
            in_shapes = true;
            continue;
        }
        if (!in_shapes) {
            char name[32];
            long long calls;
            if (sscanf(line, "%31s %lld", name, &calls) == 2 && !strcmp(name, "matmul"))
                *matmul_calls = calls;
            continue;
        }
        shape_row r;
        double ms, share, gflops;
        ck_assert_msg(sscanf(line, "%lld %lld %lld %lld %2s %lld %lf %lf%% %lf", &r.m, &r.n, &r.k,
                             &r.batch, r.op, &r.calls, &ms, &share, &gflops) == 9,
                      "shape line '%s'", line);
        ck_assert_msg(ms >= 0 && share >= 0 && share <= 100 && gflops >= 0, "shape line '%s'",
                      line);
        ck_assert_int_lt(*nrows, 8);
        rows[(*nrows)++] = r;
    }
    fclose(f);
    return any;
}

/* Each of the five shapes of the graph below on one line of its own with `calls` calls, and the
 * op line matmul 5 × calls (want's own calls field is unused: 0). */
static void check_shapes(long long calls) {
    static const shape_row want[5] = {{4, 6, 5, 1, 0, "NT"},
                                      {4, 6, 5, 1, 0, "NN"},
                                      {4, 3, 5, 1, 0, "NN"},
                                      {3, 7, 2, 2, 0, "NT"},
                                      {3, 7, 2, 1, 0, "NT"}};
    shape_row rows[8];
    int nrows;
    long long matmul_calls;
    ck_assert(read_report(rows, &nrows, &matmul_calls));
    ck_assert_int_eq(matmul_calls, 5 * calls);
    ck_assert_int_eq(nrows, 5);
    for (int w = 0; w < 5; w++) {
        int hits = 0;
        for (int i = 0; i < nrows; i++)
            hits += rows[i].m == want[w].m && rows[i].n == want[w].n && rows[i].k == want[w].k &&
                    rows[i].batch == want[w].batch && rows[i].calls == calls &&
                    !strcmp(rows[i].op, want[w].op);
        ck_assert_msg(hits == 1, "shape %lldx%lldx%lld batch %lld %s: %d rows", want[w].m,
                      want[w].n, want[w].k, want[w].batch, want[w].op, hits);
    }
}

/* Five products in one graph run twice — 4 × 6 × 5 with op(B) transposed and not, a batch of
 * two 3 × 7 × 2 and one alone, 4 × 3 × 5 — : the report has each shape once (the same M, N, K
 * with other transposes or another batch count on lines of their own) with 2 calls, and the op
 * line matmul 10 calls. tg_profile_reset then empties the report, and one more run counts
 * once. */
START_TEST(test_report_by_shape) {
    setenv("TG_PROFILE", "1", 1); /* read at the first graph run of the process */
    tg_backend *b;
    CK(tg_backend_cpu_new(1, &b));
    float buf[64];
    for (int i = 0; i < 64; i++)
        buf[i] = 0.01f * (float)(i % 17) - 0.05f;
    const int64_t sx[2] = {4, 5}, sw[2] = {6, 5}, sw2[2] = {5, 6}, sv[2] = {5, 3},
                  sp[3] = {2, 3, 2}, sq[3] = {2, 7, 2};
    tg_graph *g = tg_graph_new();
    tg_tensor *x = tg_input(g, TG_DTYPE_F32, 2, sx, buf);
    tg_keep(tg_matmul(x, tg_input(g, TG_DTYPE_F32, 2, sw, buf), false, true));
    tg_keep(tg_matmul(x, tg_input(g, TG_DTYPE_F32, 2, sw2, buf), false, false));
    tg_keep(tg_matmul(x, tg_input(g, TG_DTYPE_F32, 2, sv, buf), false, false));
    tg_keep(tg_matmul(tg_input(g, TG_DTYPE_F32, 2, sp + 1, buf),
                      tg_input(g, TG_DTYPE_F32, 2, sq + 1, buf), false, true));
    tg_keep(tg_matmul(tg_input(g, TG_DTYPE_F32, 3, sp, buf), tg_input(g, TG_DTYPE_F32, 3, sq, buf),
                      false, true));
    CK(tg_graph_run(g, b));
    CK(tg_graph_run(g, b));
    check_shapes(2);

    tg_profile_reset();
    shape_row rows[8];
    int nrows;
    long long matmul_calls;
    ck_assert_msg(!read_report(rows, &nrows, &matmul_calls), "a report after the reset");
    CK(tg_graph_run(g, b));
    check_shapes(1);
    tg_graph_free(g);
    tg_backend_free(b);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("profile");
    TCase *tc = tcase_create("profile");
    tcase_add_test(tc, test_report_by_shape);
    suite_add_tcase(s, tc);
    return s;
}
