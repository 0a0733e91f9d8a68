/* Models in and out (issue 57): checkpoint errors that name their cause, the model features of
 * BERT and GPT-2 in the zoo's families, tokenizers that travel in the checkpoint, and imported
 * Hugging Face models against transformers' own outputs on the tiny committed fixtures of
 * tests/fixtures/hf (made by tests/fixtures/make_hf_fixtures.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tg/model.h"
#include "tg/safetensors.h"
#include "tg/tokenizer.h"
#include "tg_check.h"

static tg_backend *B;
static void setup(void) { ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK); }
static void teardown(void) { tg_backend_free(B); }

/* A safetensors file that is not a tgraph checkpoint (a Hugging Face one says format "pt"):
 * tg_model_load's message says so. It used to be wiped by the out_proj.weight lookup. */
START_TEST(test_load_names_a_foreign_format) {
    char path[] = "/tmp/tg_hf_pt_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    tg_st_writer *w = tg_st_writer_new();
    float x[2] = {1, 2};
    int64_t s[1] = {2};
    ck_assert_int_eq(tg_st_writer_set_metadata(w, "format", "pt"), TG_OK);
    ck_assert_int_eq(tg_st_writer_add(w, "embeddings.word_embeddings.weight", TG_ST_F32, 1, s, x), TG_OK);
    ck_assert_int_eq(tg_st_writer_save(w, path), TG_OK);
    tg_st_writer_free(w);
    tg_model *m = NULL;
    TG_EXPECT_STATUS(tg_model_load(path, B, &m), TG_ERR_FORMAT, "format is 'pt', expected 'tgraph'");
    ck_assert_ptr_null(m);
    unlink(path);
}
END_TEST

/* a whole file (malloc'ed, NUL-terminated), its length in *len */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(fread(p, 1, (size_t)n, f), (size_t)n);
    p[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return p;
}

static tg_tokenizer *hf_tokenizer(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/hf/%s/tokenizer.json", TG_TEST_DATA, dir);
    size_t n;
    char *text = slurp(path, &n);
    tg_tokenizer *t = NULL;
    ck_assert_msg(tg_tokenizer_from_hf(text, n, path, &t) == TG_OK, "%s", tg_error_message());
    free(text);
    return t;
}

/* Every line of a fixture's lines.txt encodes to the ids HF's tokenizer gave (ids.txt). */
static void expect_fixture_ids(const char *dir, int min_lines) {
    tg_tokenizer *t = hf_tokenizer(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/hf/%s/lines.txt", TG_TEST_DATA, dir);
    char *lines = slurp(path, NULL);
    snprintf(path, sizeof path, "%s/fixtures/hf/%s/ids.txt", TG_TEST_DATA, dir);
    char *want = slurp(path, NULL);
    int count = 0, bad = 0;
    char *lp = lines, *wp = want;
    while (*lp) {
        char *le = strchr(lp, '\n'), *we = strchr(wp, '\n');
        ck_assert_ptr_nonnull(le);
        ck_assert_ptr_nonnull(we);
        *we = '\0';
        int32_t *ids;
        int64_t n;
        ck_assert_msg(tg_tokenizer_encode(t, lp, (size_t)(le - lp), &ids, &n, NULL) == TG_OK, "%s", tg_error_message());
        char got[16384];
        size_t o = 0;
        for (int64_t i = 0; i < n && o + 16 < sizeof got; i++) o += (size_t)snprintf(got + o, sizeof got - o, i ? " %d" : "%d", ids[i]);
        got[o] = '\0';
        if (strcmp(got, wp)) {
            if (bad++ < 5) fprintf(stderr, "line %d: '%.*s'\n  got  %s\n  want %s\n", count + 1, (int)(le - lp), lp, got, wp);
        }
        free(ids);
        count++;
        lp = le + 1;
        wp = we + 1;
    }
    ck_assert_msg(bad == 0, "%s: %d of %d lines differ from HF's ids", dir, bad, count);
    ck_assert_int_ge(count, min_lines);
    free(lines);
    free(want);
    tg_tokenizer_free(t);
}

/* BERT's WordPiece (bert-base-uncased's tokenizer.json) equals HF's tokenizer on every line:
 * Bible verses, CMUdict words, accents, CJK, emoji, control characters, very long words, lines
 * past the maximum length (truncated to 128 with [SEP] kept), special tokens in the text. */
START_TEST(test_wordpiece_equals_hf) { expect_fixture_ids("wordpiece", 2000); }
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("hf");
    TCase *tc = tcase_create("hf");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_load_names_a_foreign_format);
    tcase_add_test(tc, test_wordpiece_equals_hf);
    suite_add_tcase(s, tc);
    return s;
}
