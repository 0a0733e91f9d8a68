/* The error contract at the model layer: every model entry point, given each bad input it can
 * get (ids out of range, a length past max_len, an empty batch, a mismatched mask or input,
 * NULL), returns NULL or an error status, and the graph (for graph builders) and the thread's
 * message name the cause -- never "ok", never a downstream op. Every graph-building case runs
 * on each attention variant, both norm placements and both position encodings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/decode.h"
#include "tg/tg.h"
#include "tg_check.h"

static tg_backend *B;
static tg_model *M;
static tg_graph *G;

enum { SRC_V = 10, TGT_V = 8, MAX_LEN = 8, D = 8 }; /* vocabulary sizes include the 4 specials */

static tg_vocab *vocab(int n) {
    tg_vocab *v;
    ck_assert_int_eq(tg_vocab_new(&v), TG_OK);
    for (int i = 4; i < n; i++) {
        char t[16];
        snprintf(t, sizeof t, "t%d", i);
        ck_assert_int_eq(tg_vocab_add(v, t, NULL), TG_OK);
    }
    return v;
}

/* configuration _i of the loop: every attention kind x norm x positions (NCONFIGS) */
static tg_model *model_of(int i) {
    tg_model_config c = tg_model_config_default();
    c.d_model = D;
    c.heads = 2;
    c.enc_layers = 1;
    c.dec_layers = 1;
    c.d_ff = 16;
    c.attention = (tg_attn_kind)(i % TG_ATTN_COUNT);
    c.head_dim = c.attention == TG_ATTN_FIXED_HEAD ? 3 : 0;
    c.pre_norm = (i / TG_ATTN_COUNT) % 2;
    c.learned_pos = (i / (2 * TG_ATTN_COUNT)) % 2;
    c.max_len = MAX_LEN;
    c.share_embeddings = false;
    c.tie_output = true;
    tg_model *m;
    ck_assert_msg(tg_model_new(&c, vocab(SRC_V), vocab(TGT_V), B, 7, &m) == TG_OK, "%s", tg_error_message());
    return m;
}
#define NCONFIGS (4 * TG_ATTN_COUNT)

static void setup(void) {
    ck_assert_int_eq(tg_backend_cpu_new(1, &B), TG_OK);
    G = tg_graph_new();
    ck_assert_ptr_nonnull(G);
    tg_error_clear();
}
static void teardown(void) {
    tg_graph_free(G);
    tg_model_free(M);
    M = NULL;
    tg_backend_free(B);
}

/* a fresh graph for the next case of a test */
static void fresh(void) {
    tg_graph_free(G);
    G = tg_graph_new();
    tg_error_clear();
}

/* tg_check.h's assertions on this file's graph G */
#define EXPECT_BUILD_ERROR(t, st, frag) TG_EXPECT_BUILD_ERROR(G, t, st, frag)
#define EXPECT_STATUS TG_EXPECT_STATUS

/* A valid batch of 2: sources [2, 4] (with </s>), targets [2, 3] (<s> + tokens / tokens + </s>). */
static int32_t src_ids[2 * 4] = {4, 5, 9, TG_EOS, 6, TG_EOS, TG_PAD, TG_PAD};
static int32_t tin_ids[2 * 3] = {TG_BOS, 4, 7, TG_BOS, 5, TG_PAD};
static int32_t tout_ids[2 * 3] = {4, 7, TG_EOS, 5, TG_EOS, TG_PAD};
static int32_t long_ids[2 * (MAX_LEN + 1)]; /* 4s: one position past max_len */

static tg_batch good_batch(void) {
    tg_batch b = {2, 4, 3, src_ids, tin_ids, tout_ids, 5, 5, false};
    return b;
}

/* the valid batch builds everywhere: so a failure below is the bad input's doing */
START_TEST(test_valid_inputs_build) {
    M = model_of(_i);
    tg_batch b = good_batch();
    ck_assert_ptr_nonnull(tg_model_logits(M, G, &b));
    ck_assert_ptr_nonnull(tg_model_loss(M, G, &b));
    ck_assert_ptr_nonnull(tg_model_encode(M, G, b.src, b.size, b.src_len, NULL));
    int64_t s[3] = {2, 3, D}, mk[4] = {2, 1, 3, 3};
    tg_tensor *x = tg_full(G, 0.5f, 3, s);
    ck_assert_ptr_nonnull(tg_model_attention(M, G, "decoder.layers.0.self_attn", x, x, tg_full(G, 0, 4, mk)));
    ck_assert_int_eq(tg_graph_status(G, NULL), TG_OK);
    double sc[2];
    ck_assert_msg(tg_model_score(M, &b, sc) == TG_OK, "%s", tg_error_message());
}
END_TEST

START_TEST(test_ids_out_of_range) {
    M = model_of(_i);
    tg_batch b = good_batch();
    int32_t bad_src[8], bad_tin[6], bad_tout[6];
    memcpy(bad_src, src_ids, sizeof bad_src);
    memcpy(bad_tin, tin_ids, sizeof bad_tin);
    memcpy(bad_tout, tout_ids, sizeof bad_tout);
    bad_src[5] = SRC_V; /* [1,1] */
    b.src = bad_src;
    EXPECT_BUILD_ERROR(tg_model_logits(M, G, &b), TG_ERR_INVALID,
                       "tg_model_encode: source id 10 at [1,1] is outside the vocabulary (10 ids)");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_loss(M, G, &b), TG_ERR_INVALID, "source id 10 at [1,1]");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_encode(M, G, b.src, 2, 4, NULL), TG_ERR_INVALID,
                       "tg_model_encode: source id 10 at [1,1] is outside the vocabulary");
    double sc[2];
    EXPECT_STATUS(tg_model_score(M, &b, sc), TG_ERR_INVALID, "source id 10 at [1,1]");
    fresh();
    bad_src[5] = -3;
    EXPECT_BUILD_ERROR(tg_model_encode(M, G, b.src, 2, 4, NULL), TG_ERR_INVALID, "source id -3 at [1,1]");
    /* a target id valid in the source vocabulary but not in the target one */
    fresh();
    b.src = src_ids;
    bad_tin[2] = 9;
    b.tgt_in = bad_tin;
    EXPECT_BUILD_ERROR(tg_model_logits(M, G, &b), TG_ERR_INVALID,
                       "tg_model_logits: target id 9 at [0,2] is outside the vocabulary (8 ids)");
    EXPECT_STATUS(tg_model_score(M, &b, sc), TG_ERR_INVALID, "target id 9 at [0,2]");
    /* the output side of the loss */
    fresh();
    b.tgt_in = tin_ids;
    bad_tout[4] = 8;
    b.tgt_out = bad_tout;
    EXPECT_BUILD_ERROR(tg_model_loss(M, G, &b), TG_ERR_INVALID, "tg_model_loss: target output id 8 at [1,1]");
    EXPECT_STATUS(tg_model_score(M, &b, sc), TG_ERR_INVALID, "tg_model_score: target output id 8 at [1,1]");
    /* the symptom: backward of a failed loss reports the real cause */
    fresh();
    b.tgt_out = tout_ids;
    b.src = bad_src;
    tg_tensor *loss = tg_model_loss(M, G, &b);
    EXPECT_STATUS(tg_backward(G, loss), TG_ERR_INVALID, "source id -3");
}
END_TEST

START_TEST(test_length_past_max_len) {
    M = model_of(_i);
    for (size_t k = 0; k < sizeof long_ids / sizeof long_ids[0]; k++) long_ids[k] = 4;
    tg_batch b = good_batch();
    b.src = long_ids;
    b.src_len = MAX_LEN + 1;
    EXPECT_BUILD_ERROR(tg_model_logits(M, G, &b), TG_ERR_INVALID,
                       "tg_model_encode: source sequence of 9 tokens exceeds max_len 8");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_loss(M, G, &b), TG_ERR_INVALID, "source sequence of 9 tokens exceeds max_len 8");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_encode(M, G, long_ids, 2, MAX_LEN + 1, NULL), TG_ERR_INVALID,
                       "tg_model_encode: source sequence of 9 tokens exceeds max_len 8");
    double sc[2];
    EXPECT_STATUS(tg_model_score(M, &b, sc), TG_ERR_INVALID, "source sequence of 9 tokens exceeds max_len 8");
    /* the backward of the failed loss names it too (it used to say "no loss (graph error: none)") */
    fresh();
    tg_tensor *loss = tg_model_loss(M, G, &b);
    EXPECT_STATUS(tg_backward(G, loss), TG_ERR_INVALID, "exceeds max_len 8");
    fresh();
    b = good_batch();
    b.tgt_in = long_ids;
    b.tgt_out = long_ids;
    b.tgt_len = MAX_LEN + 1;
    EXPECT_BUILD_ERROR(tg_model_logits(M, G, &b), TG_ERR_INVALID, "target sequence of 9 tokens exceeds max_len 8");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_loss(M, G, &b), TG_ERR_INVALID, "target sequence of 9 tokens exceeds max_len 8");
    EXPECT_STATUS(tg_model_score(M, &b, sc), TG_ERR_INVALID, "target sequence of 9 tokens exceeds max_len 8");
}
END_TEST

START_TEST(test_empty_batch) {
    M = model_of(_i);
    tg_batch b = good_batch();
    b.size = 0;
    EXPECT_BUILD_ERROR(tg_model_logits(M, G, &b), TG_ERR_INVALID, "tg_model_encode: empty batch (0 source sentences");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_loss(M, G, &b), TG_ERR_INVALID, "empty batch");
    double sc[2];
    EXPECT_STATUS(tg_model_score(M, &b, sc), TG_ERR_INVALID, "empty batch");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_encode(M, G, src_ids, 0, 4, NULL), TG_ERR_INVALID, "tg_model_encode: empty batch");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_encode(M, G, src_ids, 2, 0, NULL), TG_ERR_INVALID,
                       "empty batch (2 source sentences of 0 tokens)");
    fresh();
    b = good_batch();
    b.tgt_len = 0;
    EXPECT_BUILD_ERROR(tg_model_logits(M, G, &b), TG_ERR_INVALID, "empty batch (2 target sentences of 0 tokens)");
}
END_TEST

START_TEST(test_null_arguments) {
    M = model_of(_i);
    tg_batch b = good_batch();
    b.tgt_in = NULL;
    EXPECT_BUILD_ERROR(tg_model_logits(M, G, &b), TG_ERR_INVALID, "tg_model_logits: NULL argument or batch without targets");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_loss(M, G, &b), TG_ERR_INVALID, "batch without targets");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_logits(M, G, NULL), TG_ERR_INVALID, "NULL argument");
    fresh();
    b = good_batch();
    b.src = NULL;
    EXPECT_BUILD_ERROR(tg_model_logits(M, G, &b), TG_ERR_INVALID, "tg_model_encode: source ids are NULL");
    fresh();
    EXPECT_BUILD_ERROR(tg_model_encode(M, G, NULL, 2, 4, NULL), TG_ERR_INVALID, "tg_model_encode: source ids are NULL");
    b = good_batch();
    b.tgt_out = NULL;
    fresh();
    EXPECT_BUILD_ERROR(tg_model_loss(M, G, &b), TG_ERR_INVALID, "tg_model_loss: target output ids are NULL");
    double sc[2];
    EXPECT_STATUS(tg_model_score(M, &b, sc), TG_ERR_INVALID, "batch without targets");
    EXPECT_STATUS(tg_model_score(M, NULL, sc), TG_ERR_INVALID, "tg_model_score: NULL argument");
    fresh();
    int64_t s[3] = {2, 3, D};
    tg_tensor *x = tg_full(G, 0.5f, 3, s);
    EXPECT_BUILD_ERROR(tg_model_attention(M, G, "encoder.layers.0.self_attn", NULL, x, NULL), TG_ERR_INVALID,
                       "tg_model_attention: NULL input");
    /* a NULL input after an earlier error keeps that error */
    fresh();
    int64_t bad[2] = {5, 5};
    ck_assert_ptr_null(tg_reshape(tg_full(G, 0, 3, s), 2, bad));
    EXPECT_BUILD_ERROR(tg_model_attention(M, G, "encoder.layers.0.self_attn", NULL, NULL, NULL), TG_ERR_SHAPE,
                       "tg_reshape");
}
END_TEST

/* tg_model_attention: masks and inputs that do not fit [B,n,d] x [B,m,d] -> [B,1,n,m] */
START_TEST(test_attention_mismatched_masks_and_inputs) {
    M = model_of(_i);
    const char *p = "decoder.layers.0.cross_attn";
    int64_t sq[3] = {2, 4, D}, skv[3] = {2, 5, D};
    tg_tensor *xq = tg_full(G, 0.5f, 3, sq), *xkv = tg_full(G, 0.25f, 3, skv);
    struct {
        int64_t shape[4];
        int nd;
        const char *frag;
    } masks[] = {
        {{1, 1, 1, 21}, 4, "mask [1,1,1,21] does not broadcast to [B,1,n,m] = [2,1,4,5]"},
        {{2, 2, 4, 5}, 4, "mask [2,2,4,5] does not broadcast"}, /* a per-head mask */
        {{3, 1, 4, 5}, 4, "mask [3,1,4,5] does not broadcast"}, /* another batch */
        {{2, 1, 5, 4}, 4, "mask [2,1,5,4] does not broadcast"}, /* transposed */
        {{2, 4, 5}, 3, "mask [2,4,5] does not broadcast"},       /* not 4-D */
    };
    for (size_t k = 0; k < sizeof masks / sizeof masks[0]; k++) {
        fresh();
        xq = tg_full(G, 0.5f, 3, sq);
        xkv = tg_full(G, 0.25f, 3, skv);
        tg_tensor *mask = tg_full(G, 0, masks[k].nd, masks[k].shape);
        EXPECT_BUILD_ERROR(tg_model_attention(M, G, p, xq, xkv, mask), TG_ERR_SHAPE, masks[k].frag);
    }
    /* broadcastable masks are fine */
    fresh();
    int64_t ok[4] = {1, 1, 1, 5};
    xq = tg_full(G, 0.5f, 3, sq);
    xkv = tg_full(G, 0.25f, 3, skv);
    ck_assert_ptr_nonnull(tg_model_attention(M, G, p, xq, xkv, tg_full(G, 0, 4, ok)));
    /* inputs of the wrong width, rank or batch */
    int64_t wide[3] = {2, 5, D + 1}, flat[2] = {10, D}, other[3] = {3, 5, D};
    int64_t *bad[3] = {wide, flat, other};
    int nd[3] = {3, 2, 3};
    const char *frag[3] = {"inputs [2,4,8] and [2,5,9] are not [B,n,8] and [B,m,8]", "inputs [2,4,8] and [10,8]",
                           "inputs [2,4,8] and [3,5,8]"};
    for (int k = 0; k < 3; k++) {
        fresh();
        xq = tg_full(G, 0.5f, 3, sq);
        EXPECT_BUILD_ERROR(tg_model_attention(M, G, p, xq, tg_full(G, 0, nd[k], bad[k]), NULL), TG_ERR_SHAPE, frag[k]);
    }
    /* a prefix with no parameters */
    fresh();
    xq = tg_full(G, 0.5f, 3, sq);
    EXPECT_BUILD_ERROR(tg_model_attention(M, G, "decoder.layers.7.self_attn", xq, xq, NULL), TG_ERR_NOT_FOUND,
                       "no parameter 'decoder.layers.7.self_attn.");
}
END_TEST

/* Batches are built by tg_batch_build, which returns a status naming the cause. */
START_TEST(test_batch_build) {
    static const int32_t s0[] = {4, 5}, t0[] = {6};
    const int32_t *src[1] = {s0}, *tgt[1] = {t0};
    int64_t sn = 2, tn = 1, neg = -1;
    tg_batch b;
    EXPECT_STATUS(tg_batch_build(&b, 0, src, &sn, tgt, &tn), TG_ERR_INVALID, "tg_batch_build: empty batch");
    EXPECT_STATUS(tg_batch_build(&b, 1, src, &neg, tgt, &tn), TG_ERR_INVALID, "negative length in sentence 0");
    EXPECT_STATUS(tg_batch_build(&b, 1, src, &sn, tgt, NULL), TG_ERR_INVALID, "NULL argument");
    ck_assert_int_eq(tg_batch_build(&b, 1, src, &sn, tgt, &tn), TG_OK);
    ck_assert(b.size == 1 && b.src_len == 3 && b.tgt_len == 2);
    tg_batch_free(&b);
}
END_TEST

/* Decoding entry points return a status and name the cause in the thread's message. */
START_TEST(test_decoding_entry_points) {
    M = model_of(_i);
    static const int32_t s0[] = {4, 5, 6}, s1[] = {7}, bad[] = {4, SRC_V};
    const int32_t *src[2] = {s0, s1}, *srcbad[1] = {bad}, *srclong[1] = {long_ids};
    int64_t n[2] = {3, 1}, nbad = 2, nlong = MAX_LEN;
    for (size_t k = 0; k < sizeof long_ids / sizeof long_ids[0]; k++) long_ids[k] = 4;
    tg_decoder *d = NULL;
    EXPECT_STATUS(tg_decoder_new(M, src, n, 0, 2, 4, true, &d), TG_ERR_INVALID, "0 sentences");
    ck_assert_ptr_null(d);
    EXPECT_STATUS(tg_decoder_new(M, srcbad, &nbad, 1, 2, 4, true, &d), TG_ERR_INVALID,
                  "token 1: id 10 outside the source vocabulary");
    EXPECT_STATUS(tg_decoder_new(M, srclong, &nlong, 1, 2, 4, false, &d), TG_ERR_INVALID,
                  "has 8 tokens (+ </s>), the model's max_len is 8");
    EXPECT_STATUS(tg_decoder_new(M, src, n, 2, 2, MAX_LEN + 1, true, &d), TG_ERR_INVALID,
                  "9 steps exceed the model's max_len 8");
    EXPECT_STATUS(tg_decoder_new(NULL, src, n, 2, 2, 4, true, &d), TG_ERR_INVALID, "NULL argument");
    ck_assert_ptr_null(d);
    /* steps */
    ck_assert_msg(tg_decoder_new(M, src, n, 2, 2, 2, true, &d) == TG_OK, "%s", tg_error_message());
    float logits[2 * TGT_V];
    int32_t parent[2] = {0, 2}, tok[2] = {TG_BOS, TG_BOS};
    EXPECT_STATUS(tg_decoder_step(d, 2, parent, tok, logits), TG_ERR_INVALID, "parent 2 outside [0, 2)");
    parent[1] = 1;
    tok[0] = TGT_V;
    EXPECT_STATUS(tg_decoder_step(d, 2, parent, tok, logits), TG_ERR_INVALID,
                  "token 8 is <pad> or outside the target vocabulary (8)");
    tok[0] = TG_BOS;
    EXPECT_STATUS(tg_decoder_step(d, 3, parent, tok, logits), TG_ERR_INVALID, "3 rows (1..2 allowed)");
    EXPECT_STATUS(tg_decoder_step(d, 0, parent, tok, logits), TG_ERR_INVALID, "0 rows");
    ck_assert_msg(tg_decoder_step(d, 2, parent, tok, logits) == TG_OK, "%s", tg_error_message());
    ck_assert_msg(tg_decoder_step(d, 2, parent, tok, logits) == TG_OK, "%s", tg_error_message());
    EXPECT_STATUS(tg_decoder_step(d, 2, parent, tok, logits), TG_ERR_INVALID, "step 2 beyond the 2 steps");
    tg_decoder_free(d);
    /* the searches */
    tg_nbest *r = NULL;
    tg_status (*search[2])(tg_model *, const int32_t *const *, const int64_t *, int64_t, const tg_decode_options *,
                           tg_nbest **) = {tg_decode, tg_decode_full};
    for (int k = 0; k < 2; k++) {
        EXPECT_STATUS(search[k](M, src, n, 0, NULL, &r), TG_ERR_INVALID, "no sentences (n = 0)");
        EXPECT_STATUS(search[k](M, srcbad, &nbad, 1, NULL, &r), TG_ERR_INVALID, "id 10 outside the source vocabulary");
        EXPECT_STATUS(search[k](M, srclong, &nlong, 1, NULL, &r), TG_ERR_INVALID, "max_len is 8");
        tg_decode_options o = tg_decode_options_default();
        o.beam = 0;
        EXPECT_STATUS(search[k](M, src, n, 2, &o, &r), TG_ERR_INVALID, "beam size 0");
        ck_assert_ptr_null(r);
    }
}
END_TEST

/* A finite but huge weight: every number a model gives from it fails, naming the product that
 * overflowed and its parameter -- a dev evaluation's loss, a score, a decoder's step. */
START_TEST(test_huge_weight_named) {
    const char *w = "decoder.layers.0.ffn.fc1.weight";
    ck_assert_int_eq(tg_model_load(TG_TEST_DATA "/fixtures/models/mha_pre.safetensors", B, &M), TG_OK);
    tg_store *st = tg_model_store(M);
    const int64_t i = tg_store_find(st, w), n = tg_store_numel(st, i);
    float *big = malloc((size_t)n * sizeof *big);
    for (int64_t k = 0; k < n; k++) big[k] = 3e38f;
    ck_assert_int_eq(tg_store_write(st, i, big, n), TG_OK);
    free(big);
    tg_lines src = {0}, tgt = {0};
    ck_assert_int_eq(tg_lines_read(TG_TEST_DATA "/fixtures/models/pairs.src", false, &src), TG_OK);
    ck_assert_int_eq(tg_lines_read(TG_TEST_DATA "/fixtures/models/pairs.tgt", false, &tgt), TG_OK);
    tg_corpus *c;
    tg_corpus_options co = {.max_len = tg_model_cfg(M)->max_len};
    ck_assert_int_eq(tg_corpus_new(&src, &tgt, tg_model_src_vocab(M), tg_model_tgt_vocab(M), &co, &c), TG_OK);
    tg_eval_info e;
    TG_EXPECT_STATUS(tg_train_evaluate(M, c, 1000, &e), TG_ERR_NUMERIC, "the loss is nan");
    tg_assert_msg_has(tg_error_message(), "(matmul)");
    tg_assert_msg_has(tg_error_message(), "from finite inputs");
    tg_assert_msg_has(tg_error_message(), "parameter 'decoder.layers.0.ffn.fc1.weight'");
    int64_t idx[2] = {0, 1};
    tg_batch b;
    ck_assert_int_eq(tg_corpus_batch(c, idx, 2, &b), TG_OK);
    double scores[2];
    TG_EXPECT_STATUS(tg_model_score(M, &b, scores), TG_ERR_NUMERIC, "parameter 'decoder.layers.0.ffn.fc1.weight'");
    tg_batch_free(&b);
    tg_corpus_free(c);
    tg_lines_free(&src);
    tg_lines_free(&tgt);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("model_errors");
    TCase *tc = tcase_create("model_errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_valid_inputs_build, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_ids_out_of_range, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_length_past_max_len, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_empty_batch, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_null_arguments, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_attention_mismatched_masks_and_inputs, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_decoding_entry_points, 0, TG_ATTN_COUNT); /* every kind, post-LN */
    tcase_add_test(tc, test_batch_build);
    tcase_add_test(tc, test_huge_weight_named);
    suite_add_tcase(s, tc);
    return s;
}
