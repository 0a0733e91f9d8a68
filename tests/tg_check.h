/* Shared harness for tgraph's Check suites: each test file defines tg_test_suite();
 * tg_check.c supplies main(), runs it and exits non-zero on any failure. */
#ifndef TG_CHECK_H
#define TG_CHECK_H
#include <check.h>
#include <math.h>
#include <string.h>

Suite *tg_test_suite(void);

/* Assert that a message contains a fragment (for error-message tests). */
#define tg_assert_msg_has(msg, frag)                                                       \
    ck_assert_msg(strstr((msg), (frag)) != NULL, "message \"%s\" lacks \"%s\"", (msg), (frag))

/* Assert |a-b| <= atol + rtol*|b| for floats, naming the value. */
#define tg_assert_close(a, b, atol, rtol)                                                  \
    do {                                                                                   \
        double a_ = (a), b_ = (b);                                                         \
        ck_assert_msg(fabs(a_ - b_) <= (atol) + (rtol)*fabs(b_),                           \
                      "%s = %.9g, expected %s = %.9g", #a, a_, #b, b_);                    \
    } while (0)

/* Directory of tests/ in the source tree (fixtures live in tests/fixtures). */
#ifndef TG_TEST_DATA
#define TG_TEST_DATA "tests"
#endif

#endif
