/* main() for every Check suite (runs tg_test_suite() and exits 1 on any failure), and the
 * shared assertions of tg_check.h. */
#include "tg_check.h"

#include <stdlib.h>

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
