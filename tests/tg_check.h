/* Shared harness for tgraph's Check suites: each test file defines tg_test_suite();
 * tg_check.c supplies main(), runs it and exits non-zero on any failure. */
#ifndef TG_CHECK_H
#define TG_CHECK_H
#include <check.h>
#include <math.h>
#include <string.h>

#include "tg/tg.h"

Suite *tg_test_suite(void);

/* Assert that a message contains a fragment (for error-message tests). */
#define tg_assert_msg_has(msg, frag)                                                       \
    ck_assert_msg(strstr((msg), (frag)) != NULL, "message \"%s\" lacks \"%s\"", (msg), (frag))

/* A call returned status st with the thread's message containing frag. */
#define TG_EXPECT_STATUS(call, st, frag)                                                   \
    do {                                                                                   \
        tg_status got_ = (call);                                                           \
        ck_assert_msg(got_ == (st), "%s returned %s (%s), expected %s", #call,             \
                      tg_status_name(got_), tg_error_message(), tg_status_name(st));       \
        tg_assert_msg_has(tg_error_message(), (frag));                                     \
    } while (0)

/* A graph builder returned NULL (t), graph g recorded status st with a message containing
 * frag, and the thread's message says the same (tg_check.c). */
#define TG_EXPECT_BUILD_ERROR(g, t, st, frag) tg_expect_build_error((g), (t), (st), (frag), #t)
void tg_expect_build_error(const tg_graph *g, const tg_tensor *t, tg_status st, const char *frag,
                           const char *what);

/* Assert |a-b| <= atol + rtol*|b| for floats, naming the value. */
#define tg_assert_close(a, b, atol, rtol)                                                  \
    do {                                                                                   \
        double a_ = (a), b_ = (b);                                                         \
        ck_assert_msg(fabs(a_ - b_) <= (atol) + (rtol)*fabs(b_),                           \
                      "%s = %.9g, expected %s = %.9g", #a, a_, #b, b_);                    \
    } while (0)

/* A kept f32 tensor read into a malloc'ed array (caller frees); fails the test on error. */
float *tg_test_read_all(const tg_tensor *t);

/* Up to max lines of a text file (without '\n', strdup'ed: free each) into out; returns the
 * count. Fails the test when the file cannot be opened. */
int tg_test_read_lines(const char *path, char **out, int max);
/* Exactly n numbers of a text file (one or more per line) into out; fails the test otherwise. */
void tg_test_read_doubles(const char *path, double *out, int n);
/* got[0..n) against the n reference numbers of the file at path (a PyTorch fixture's scores),
 * each within rtol relative; a failure names `label` and the entry. */
void tg_test_expect_scores(const char *path, const double *got, int n, double rtol, const char *label);

/* Directory of tests/ in the source tree (fixtures live in tests/fixtures). */
#ifndef TG_TEST_DATA
#define TG_TEST_DATA "tests"
#endif

#endif
