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

Suite *tg_test_suite(void) {
    Suite *s = suite_create("hf");
    TCase *tc = tcase_create("hf");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_load_names_a_foreign_format);
    suite_add_tcase(s, tc);
    return s;
}
