/* main() for every Check suite: runs tg_test_suite() and exits 1 on any failure. */
#include "tg_check.h"

#include <stdlib.h>

int main(void) {
    SRunner *sr = srunner_create(tg_test_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
