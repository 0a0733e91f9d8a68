/* The op suites' shared fixture and checks (ops_check.h). */
#include "ops_check.h"

#include <math.h>
#include <stdlib.h>

tg_backend *B;
tg_graph *G;

void setup(void) {
    ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK);
    G = tg_graph_new();
    ck_assert_ptr_nonnull(G);
}
void teardown(void) {
    tg_graph_free(G);
    tg_backend_free(B);
}

void run_ok(void) {
    const char *msg;
    tg_status st = tg_graph_status(G, &msg);
    ck_assert_msg(st == TG_OK, "graph build failed: %s", msg);
    st = tg_graph_run(G, B);
    ck_assert_msg(st == TG_OK, "tg_graph_run failed: %s", tg_error_message());
}

void expect_shape(const tg_tensor *t, int ndim, const int64_t *shape) {
    ck_assert_ptr_nonnull(t);
    int64_t s[TG_MAX_DIMS];
    ck_assert_int_eq(tg_tensor_shape(t, s), ndim);
    for (int i = 0; i < ndim; i++)
        ck_assert_msg(s[i] == shape[i], "dim %d is %lld, expected %lld", i, (long long)s[i],
                      (long long)shape[i]);
}

void expect_vals(const tg_tensor *t, const double *want, int64_t n, double atol, double rtol,
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

int64_t bcast_index(int64_t e, int on, const int64_t *os, int xn, const int64_t *xs) {
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

float pat(int64_t e, int salt) {
    return (float)(((e * 7 + salt * 3) % 13) - 6) * 0.25f + (float)((e + salt) % 5) * 0.0625f;
}
float *pattern(int64_t n, int salt) {
    float *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t e = 0; e < n; e++)
        v[e] = pat(e, salt);
    return v;
}
