/* main() for every Check suite (runs tg_test_suite() and exits 1 on any failure), the
 * shared assertions of tg_check.h, and small file readers the suites share. */
#include "tg_check.h"

#include <stdio.h>
#include <stdlib.h>

float *tg_test_read_all(const tg_tensor *t) {
    ck_assert_ptr_nonnull(t);
    int64_t n = tg_tensor_numel(t);
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    tg_status st = tg_tensor_read(t, v, (size_t)n * sizeof *v);
    ck_assert_msg(st == TG_OK, "tg_tensor_read: %s", tg_error_message());
    return v;
}

int tg_test_read_lines(const char *path, char **out, int max) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char buf[4096];
    int n = 0;
    while (n < max && fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = '\0';
        out[n++] = strdup(buf);
    }
    fclose(f);
    return n;
}

void tg_test_read_doubles(const char *path, double *out, int n) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    for (int i = 0; i < n; i++) ck_assert_msg(fscanf(f, "%lf", &out[i]) == 1, "%s: number %d missing", path, i + 1);
    fclose(f);
}

void tg_test_expect_scores(const char *path, const double *got, int n, double rtol, const char *label) {
    double *want = malloc((size_t)n * sizeof *want);
    ck_assert_ptr_nonnull(want);
    tg_test_read_doubles(path, want, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= rtol * fabs(want[i]), "%s entry %d: %.9f, PyTorch %.9f", label, i + 1,
                      got[i], want[i]);
    free(want);
}

int main(void) {
    SRunner *sr = srunner_create(tg_test_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

void tg_expect_build_error(const tg_graph *g, const tg_tensor *t, tg_status st, const char *frag,
                           const char *what) {
    ck_assert_msg(t == NULL, "%s should have failed", what);
    const char *msg = NULL;
    tg_status got = tg_graph_status(g, &msg);
    ck_assert_msg(got == st, "%s: status %s (%s), expected %s", what, tg_status_name(got), msg,
                  tg_status_name(st));
    tg_assert_msg_has(msg, frag);
    tg_assert_msg_has(tg_error_message(), frag);
}
