/* Helpers of the fuzz harnesses (tests/fuzz/fuzz.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

int tg_fuzz_tmpfile(const uint8_t *data, size_t size, char *buf, size_t n) {
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/tg-fuzz-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(buf);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    close(fd);
    if (done == size) return 0;
    unlink(buf);
    return -1;
}

char **tg_fuzz_lines(const uint8_t *data, size_t size, size_t *count) {
    size_t n = 1;
    for (size_t i = 0; i < size; i++) n += data[i] == '\n';
    /* the pointers, then a copy of the text with each '\n' made a NUL */
    char **lines = malloc(n * sizeof *lines + size + 1);
    if (!lines) return NULL;
    char *text = (char *)(lines + n);
    memcpy(text, data, size);
    text[size] = '\0';
    size_t k = 0;
    lines[k++] = text;
    for (size_t i = 0; i < size; i++)
        if (text[i] == '\n') {
            text[i] = '\0';
            lines[k++] = text + i + 1;
        }
    *count = k;
    return lines;
}
