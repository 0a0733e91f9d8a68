/* Fuzz harness: text input (train/data.c): the line reader with and without empty lines, the
 * vocabulary file reader, vocabularies built from the lines (words and characters) and the
 * corpus encoded with them. */
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "tg/train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[256];
    if (tg_fuzz_tmpfile(data, size, path, sizeof path)) return 0;
    tg_vocab *v = NULL;
    if (tg_vocab_read(path, &v) == TG_OK) tg_vocab_free(v);
    for (int allow_empty = 0; allow_empty < 2; allow_empty++) {
        tg_lines l;
        if (tg_lines_read(path, allow_empty, &l) != TG_OK) continue;
        for (int chars = 0; chars < 2; chars++) {
            tg_text_options to = {.chars = chars};
            const tg_lines *texts[1] = {&l};
            tg_vocab *b = NULL;
            if (tg_vocab_build(texts, 1, &to, 1, chars ? 0 : 16, &b) != TG_OK) continue;
            tg_corpus_options co = {.text = to, .max_len = 8, .skip_long = true};
            tg_corpus *c = NULL;
            if (tg_corpus_new(&l, &l, b, b, &co, &c) == TG_OK) tg_corpus_free(c);
            tg_vocab_free(b);
        }
        tg_lines_free(&l);
    }
    unlink(path);
    return 0;
}
