/* What the fuzz harnesses share: libFuzzer's entry point, which every harness defines and
 * which tests/fuzz/driver.c (the corpus replayed in every ./test.sh) or libFuzzer calls, and
 * small helpers. A harness must not leak, crash or trip a sanitizer on any input; errors are
 * values and are simply ignored. */
#ifndef TG_FUZZ_H
#define TG_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Write data to a private temporary file (readers that take a path); its path in buf. Returns
 * 0 on success. The caller removes it. */
int tg_fuzz_tmpfile(const uint8_t *data, size_t size, char *buf, size_t n);

/* Cut data into NUL-terminated lines (at '\n'; NUL bytes end a line early): *lines (one
 * block, free() it) and their count. */
char **tg_fuzz_lines(const uint8_t *data, size_t size, size_t *count);

#endif
