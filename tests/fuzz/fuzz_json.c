/* Fuzz harness: the JSON parser (core/json.c), and printing what it accepted. */
#include <stdlib.h>

#include "fuzz.h"
#include "tg/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_json *v = NULL;
    if (tg_json_parse((const char *)data, size, &v) == TG_OK) {
        char *text = NULL;
        size_t len;
        if (tg_json_print(v, 2, &text, &len) == TG_OK) {
            /* what we print, we read back */
            tg_json *w = NULL;
            if (tg_json_parse(text, len, &w) != TG_OK) abort();
            tg_json_free(w);
        }
        free(text);
    }
    tg_json_free(v);
    return 0;
}
