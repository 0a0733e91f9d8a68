/* Language models on a token stream (train/stream.c, tg_batch_build_lm_blocks, models/generate.c):
 * documents joined with <s> ... </s>, line breaks as ↵, the three document kinds, blocks cut
 * with one id of overlap and every id a target once, a one-line corpus, a block size past the
 * model's positions, and generation that stops at the end-of-text token </s> or runs on past
 * max_len (the context slides) with cached = uncached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tg/decode.h"
#include "tg/model.h"
#include "tg/train.h"
#include "tg_check.h"

static tg_backend *B;
static void setup(void) { ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK); }
static void teardown(void) { tg_backend_free(B); }

/* text written to a temporary file and read back as tg_lines (empty lines allowed) */
static void lines_of(const char *text, tg_lines *out) {
    char path[] = "/tmp/tg_test_stream.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    ck_assert_msg(tg_lines_read(path, true, out) == TG_OK, "%s", tg_error_message());
    unlink(path);
}

/* a vocabulary: the specials, a=4, b=5, c=6, ↵=7 */
static tg_vocab *abc(void) {
    tg_vocab *v;
    ck_assert_int_eq(tg_vocab_new(&v), TG_OK);
    const char *w[] = {"a", "b", "c", TG_STREAM_NEWLINE};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(tg_vocab_add(v, w[i], NULL), TG_OK);
    return v;
}

static void expect_ids(const int32_t *got, int64_t n, const int32_t *want, int64_t wn, const char *what) {
    ck_assert_msg(n == wn, "%s: %lld ids, want %lld", what, (long long)n, (long long)wn);
    for (int64_t i = 0; i < n; i++) ck_assert_msg(got[i] == want[i], "%s: id %lld is %d, want %d", what, (long long)i, got[i], want[i]);
}

/* documents per kind: a file, blank-line-separated paragraphs, lines; empty lines are fine */
START_TEST(test_stream_documents) {
    tg_vocab *v = abc();
    tg_lines f1, f2;
    lines_of("a b\n\n\nc\nb\n", &f1);
    lines_of("c\n", &f2);
    const tg_lines *both[2] = {&f1, &f2};
    int32_t *ids;
    int64_t n;
    tg_stream_options o = {.docs = TG_DOCS_FILE};
    ck_assert_msg(tg_stream_encode(both, 2, v, &o, &ids, &n) == TG_OK, "%s", tg_error_message());
    /* <s> a b ↵ ↵ ↵ c ↵ b </s> <s> c </s>: a file is a document, its line breaks are tokens */
    const int32_t file[] = {2, 4, 5, 7, 7, 7, 6, 7, 5, 3, 2, 6, 3};
    expect_ids(ids, n, file, 13, "file");
    free(ids);
    o.docs = TG_DOCS_PARAGRAPHS;
    ck_assert_int_eq(tg_stream_encode(both, 1, v, &o, &ids, &n), TG_OK);
    const int32_t para[] = {2, 4, 5, 3, 2, 6, 7, 5, 3};
    expect_ids(ids, n, para, 9, "paragraphs");
    free(ids);
    o.docs = TG_DOCS_LINES;
    ck_assert_int_eq(tg_stream_encode(both, 1, v, &o, &ids, &n), TG_OK);
    const int32_t lines[] = {2, 4, 5, 3, 2, 6, 3, 2, 5, 3};
    expect_ids(ids, n, lines, 10, "lines");
    free(ids);
    tg_lines_free(&f1);
    tg_lines_free(&f2);
    tg_vocab_free(v);
}
END_TEST

/* blocks of 4 positions over 10 ids: [0..4], [4..8], [8..9]; the model reads ids[0, len-1)
 * and predicts ids[1, len), so every id but the first is a target exactly once */
START_TEST(test_stream_blocks) {
    int32_t ids[10];
    for (int i = 0; i < 10; i++) ids[i] = 4 + i;
    tg_corpus *c;
    ck_assert_int_eq(tg_corpus_new_stream(ids, 10, 4, &c), TG_OK);
    ck_assert_int_eq(tg_corpus_size(c), 3);
    int64_t n;
    const int32_t *t = tg_corpus_tgt(c, 1, &n);
    ck_assert_int_eq(n, 5);
    ck_assert(t[0] == 8 && t[4] == 12);
    int64_t idx[3] = {0, 1, 2};
    tg_batch b;
    ck_assert_msg(tg_corpus_batch(c, idx, 3, &b) == TG_OK, "%s", tg_error_message());
    ck_assert_int_eq(b.tgt_len, 4);
    ck_assert_int_eq(b.tgt_tokens, 9); /* ids 1..9 */
    const int32_t in0[] = {4, 5, 6, 7}, out0[] = {5, 6, 7, 8}, in2[] = {12, 0, 0, 0}, out2[] = {13, 0, 0, 0};
    expect_ids(b.tgt_in, 4, in0, 4, "block 0 input");
    expect_ids(b.tgt_out, 4, out0, 4, "block 0 targets");
    expect_ids(b.tgt_in + 8, 4, in2, 4, "last block input (padded)");
    expect_ids(b.tgt_out + 8, 4, out2, 4, "last block targets (padded)");
    tg_batch_free(&b);
    tg_corpus_free(c);
    /* a block size that divides n - 1 leaves no short block; 1 id makes no block */
    ck_assert_int_eq(tg_corpus_new_stream(ids, 9, 4, &c), TG_OK);
    ck_assert_int_eq(tg_corpus_size(c), 2);
    tg_corpus_free(c);
    ck_assert_int_eq(tg_corpus_new_stream(ids, 1, 4, &c), TG_OK);
    ck_assert_int_eq(tg_corpus_size(c), 0);
    tg_corpus_free(c);
    ck_assert_int_ne(tg_corpus_new_stream(ids, 10, 0, &c), TG_OK);
}
END_TEST

static tg_model *small_lm(int64_t max_len) {
    tg_model_config c = tg_model_config_lm_default();
    c.d_model = 16;
    c.heads = 2;
    c.dec_layers = 1;
    c.d_ff = 32;
    c.max_len = max_len;
    c.dropout = c.attn_dropout = 0.0f;
    tg_vocab *v = abc();
    tg_model *m;
    ck_assert_int_eq(tg_model_new(&c, v, v, B, 3, &m), TG_OK);
    return m;
}

/* train m on every block of the stream ids[0..n) for `steps` steps; returns the last NLL */
static double train_on(tg_model *m, const int32_t *ids, int64_t n, int64_t block, int steps) {
    tg_corpus *c;
    ck_assert_int_eq(tg_corpus_new_stream(ids, n, block, &c), TG_OK);
    int64_t nb = tg_corpus_size(c), *idx = malloc((size_t)nb * sizeof *idx);
    for (int64_t i = 0; i < nb; i++) idx[i] = i;
    tg_batch b;
    ck_assert_int_eq(tg_corpus_batch(c, idx, nb, &b), TG_OK);
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAM);
    tg_optim *opt;
    ck_assert_int_eq(tg_optim_new(tg_model_store(m), &oc, &opt), TG_OK);
    tg_grad_info gi = {0};
    for (int s = 0; s < steps; s++) {
        const tg_batch *bs[1] = {&b};
        ck_assert_int_eq(tg_store_zero_grad(tg_model_store(m)), TG_OK);
        ck_assert_msg(tg_train_grad(m, bs, 1, NULL, true, &gi) == TG_OK, "%s", tg_error_message());
        ck_assert_int_eq(tg_optim_step(opt, 1e-2f), TG_OK);
    }
    tg_optim_free(opt);
    tg_batch_free(&b);
    tg_corpus_free(c);
    free(idx);
    return gi.nll;
}

/* documents "<s> a b c </s>" in a stream: generation after "a" gives "b c" and stops at the
 * end-of-text token, not at a length */
START_TEST(test_stream_generation_ends_at_eot) {
    tg_model *m = small_lm(8);
    int32_t ids[60];
    for (int i = 0; i < 60; i++) ids[i] = (int32_t[]){2, 4, 5, 6, 3}[i % 5];
    double nll = train_on(m, ids, 60, 8, 150);
    ck_assert_msg(nll < 0.3, "nll %.3f", nll);
    tg_generate_options o = tg_generate_options_default();
    o.sample.temperature = 0.0f;
    o.max_new = 50;
    int32_t p = 4;
    for (int cached = 0; cached < 2; cached++) {
        o.cached = cached;
        tg_generation g;
        ck_assert_int_eq(tg_generate(m, &p, 1, &o, &g), TG_OK);
        ck_assert_msg(g.finished && g.len == 2 && g.ids[0] == 5 && g.ids[1] == 6, "cached %d: %lld tokens, finished %d",
                      cached, (long long)g.len, g.finished);
        tg_generation_free(&g);
    }
    tg_model_free(m);
}
END_TEST

/* one document "a b c a b c ..." without an end in sight: greedy generation runs 40 tokens past
 * the model's 8 positions (the context slides), the same with and without the cache */
START_TEST(test_stream_generation_slides_past_max_len) {
    tg_model *m = small_lm(8);
    int32_t ids[90];
    for (int i = 0; i < 90; i++) ids[i] = i == 0 ? 2 : (int32_t)(4 + (i - 1) % 3);
    double nll = train_on(m, ids, 90, 8, 150);
    ck_assert_msg(nll < 0.3, "nll %.3f", nll);
    tg_generate_options o = tg_generate_options_default();
    o.sample.temperature = 0.0f;
    o.max_new = 40;
    int32_t p = 4;
    tg_generation g[2];
    for (int cached = 0; cached < 2; cached++) {
        o.cached = cached;
        ck_assert_int_eq(tg_generate(m, &p, 1, &o, &g[cached]), TG_OK);
        ck_assert_msg(!g[cached].finished && g[cached].len == 40, "%lld tokens", (long long)g[cached].len);
        for (int i = 0; i < 40; i++) ck_assert_int_eq(g[cached].ids[i], 4 + (i + 1) % 3);
    }
    tg_assert_close(g[0].logprob, g[1].logprob, 1e-4, 1e-4);
    tg_generation_free(&g[0]);
    tg_generation_free(&g[1]);
    tg_model_free(m);
}
END_TEST

/* a block wider than the model's positions is refused by the graph builder */
START_TEST(test_stream_block_past_positions) {
    tg_model *m = small_lm(8);
    int32_t ids[12] = {2, 4, 5, 6, 4, 5, 6, 4, 5, 6, 4, 3};
    tg_corpus *c;
    ck_assert_int_eq(tg_corpus_new_stream(ids, 12, 10, &c), TG_OK);
    int64_t idx = 0;
    tg_batch b;
    ck_assert_int_eq(tg_corpus_batch(c, &idx, 1, &b), TG_OK);
    tg_graph *g = tg_graph_new();
    tg_tensor *l = tg_model_loss(m, g, &b);
    TG_EXPECT_BUILD_ERROR(g, l, TG_ERR_INVALID, "exceeds max_len 8");
    tg_graph_free(g);
    tg_batch_free(&b);
    tg_corpus_free(c);
    tg_model_free(m);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("stream");
    TCase *t = tcase_create("stream");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, test_stream_documents);
    tcase_add_test(t, test_stream_blocks);
    tcase_add_test(t, test_stream_generation_ends_at_eot);
    tcase_add_test(t, test_stream_generation_slides_past_max_len);
    tcase_add_test(t, test_stream_block_past_positions);
    suite_add_tcase(s, t);
    return s;
}
