/* Fuzz harness: the readers of Hugging Face files. The first byte picks the reader:
 * 'T' -- the rest is a tokenizer.json (models/tokenizer.c): read, encode a few lines, and its
 *        metadata form read back over its vocabulary;
 * 'S' -- the rest is a sentencepiece model (spm.model, models/tok_spm.c): read, and a few lines
 *        cut into its pieces;
 * 'C' -- the rest is a config.json (models/import_hf.c), imported from a directory beside the
 *        tiny BERT fixture's tokenizer.json and model.safetensors (links), so that a config
 *        that parses meets the weights' checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "tg/hf.h"
#include "tg/tokenizer.h"

#ifndef TG_FIXTURES
#define TG_FIXTURES "tests/fixtures"
#endif

static void tokenizer(const char *text, size_t len) {
    tg_tokenizer *t = NULL;
    if (tg_tokenizer_from_hf(text, len, "fuzz", &t) != TG_OK) return;
    static const char *const lines[] = {"Hello, world! [CLS]", "caf\xc3\xa9 \xe6\x9d\xb1 \xf0\x9f\x99\x82", "", "\xff\xfe bad"};
    for (int i = 0; i < 4; i++) {
        int32_t *ids = NULL;
        int64_t n = 0;
        if (tg_tokenizer_encode(t, lines[i], strlen(lines[i]), &ids, &n, NULL) == TG_OK) {
            char *back = NULL;
            tg_tokenizer_decode(t, ids, n, &back);
            free(back);
        }
        free(ids);
    }
    char *meta = NULL;
    if (tg_tokenizer_to_json(t, &meta) == TG_OK) {
        tg_tokenizer *u = NULL;
        if (tg_tokenizer_from_json(meta, "fuzz", tg_tokenizer_vocab(t), &u) != TG_OK) abort(); /* what we write, we read */
        tg_tokenizer_free(u);
    }
    free(meta);
    tg_tokenizer_free(t);
}

static void spm(const uint8_t *data, size_t len) {
    tg_tokenizer *t = NULL;
    if (tg_tokenizer_from_spm(data, len, "fuzz", &t) != TG_OK) return;
    static const char *const lines[] = {"Hello, world!  AB \xef\xbc\xa1", "caf\xc3\xa9 \xe6\x9d\xb1 \xf0\x9f\x99\x82", "", "\xff\xfe bad\t\n"};
    for (int i = 0; i < 4; i++) {
        char **p = NULL;
        int64_t n = 0;
        if (tg_tokenizer_pieces(t, lines[i], strlen(lines[i]), &p, &n) == TG_OK)
            for (int64_t k = 0; k < n; k++) free(p[k]);
        free(p);
    }
    tg_tokenizer_free(t);
}

static void config(const uint8_t *data, size_t len) {
    char dir[] = "/tmp/tg_fuzz_hf_XXXXXX", path[128];
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
        char a[128], b[128];
        snprintf(a, sizeof a, "%s/tokenizer.json", dir);
        snprintf(b, sizeof b, "%s/model.safetensors", dir);
        if (!symlink(TG_FIXTURES "/hf/bert/tokenizer.json", a) && !symlink(TG_FIXTURES "/hf/bert/model.safetensors", b)) {
            tg_backend *be = NULL;
            tg_model *m = NULL;
            if (tg_backend_cpu_new(1, &be) == TG_OK && tg_hf_import(dir, be, &m) == TG_OK) tg_model_free(m);
            tg_backend_free(be);
        }
        unlink(a);
        unlink(b);
    }
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] == 'T') tokenizer((const char *)data + 1, size - 1);
    else if (data[0] == 'C') config(data + 1, size - 1);
    else if (data[0] == 'S') spm(data + 1, size - 1);
    return 0;
}
