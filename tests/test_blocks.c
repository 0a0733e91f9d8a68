/* The blocks of later Transformers as options of the model families: RMSNorm (norm_kind rms),
 * SwiGLU (activation swiglu) and rotary positions (pos rope). An encoder-decoder against its
 * PyTorch float64 fixture (tests/fixtures/make_modern_fixtures.py; the language-model and
 * masked-LM fixtures with these blocks are in test_lm.c and test_mlm.c), cached decoding against
 * full recomputation with RoPE, finite-difference checks of whole models built of the blocks
 * (tg_gradcheck over every parameter), and the configuration rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/decode.h"
#include "tg/gradcheck.h"
#include "tg/model.h"
#include "tg_check.h"

static tg_backend *B;
static void setup(void) { ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK); }
static void teardown(void) { tg_backend_free(B); }

#define NPAIRS 8

static tg_model *load_modern(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/modern/encdec_modern.safetensors", TG_TEST_DATA);
    tg_model *m = NULL;
    ck_assert_msg(tg_model_load(path, B, &m) == TG_OK, "%s", tg_error_message());
    const tg_model_config *c = tg_model_cfg(m);
    ck_assert(c->rope && c->swiglu && c->rms_norm && c->arch == TG_ARCH_ENCDEC);
    ck_assert_int_lt(tg_store_find(tg_model_store(m), "decoder.layers.0.norm1.bias"), 0);
    ck_assert_int_ge(tg_store_find(tg_model_store(m), "encoder.layers.1.ffn.fc3.weight"), 0);
    return m;
}

/* encode the fixture pairs: ids[i] (source or target side) */
static void pairs(tg_model *m, int32_t **sid, int64_t *sn, int32_t **tid, int64_t *tn) {
    char path[1024], *src[NPAIRS], *tgt[NPAIRS];
    snprintf(path, sizeof path, "%s/fixtures/models/pairs.src", TG_TEST_DATA);
    ck_assert_int_eq(tg_test_read_lines(path, src, NPAIRS), NPAIRS);
    snprintf(path, sizeof path, "%s/fixtures/models/pairs.tgt", TG_TEST_DATA);
    ck_assert_int_eq(tg_test_read_lines(path, tgt, NPAIRS), NPAIRS);
    for (int i = 0; i < NPAIRS; i++) {
        ck_assert_int_eq(tg_vocab_encode(tg_model_src_vocab(m), src[i], &sid[i], &sn[i]), TG_OK);
        ck_assert_int_eq(tg_vocab_encode(tg_model_tgt_vocab(m), tgt[i], &tid[i], &tn[i]), TG_OK);
        free(src[i]);
        free(tgt[i]);
    }
}

START_TEST(test_modern_encdec_fixture) {
    tg_model *m = load_modern();
    int32_t *sid[NPAIRS], *tid[NPAIRS];
    int64_t sn[NPAIRS], tn[NPAIRS];
    pairs(m, sid, sn, tid, tn);
    tg_batch b;
    ck_assert_int_eq(tg_batch_build(&b, NPAIRS, (const int32_t *const *)sid, sn, (const int32_t *const *)tid, tn), TG_OK);
    double got[NPAIRS];
    ck_assert_msg(tg_model_score(m, &b, got) == TG_OK, "%s", tg_error_message());
    tg_batch_free(&b);
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/modern/encdec_modern.scores", TG_TEST_DATA);
    tg_test_expect_scores(path, got, NPAIRS, 1e-4, "encdec_modern");
    /* beam search on the cached decoder = on the full recomputation (RoPE positions of a
     * cached step are the cache's) */
    tg_decode_options o = tg_decode_options_default();
    o.beam = 3;
    o.max_len_b = 10;
    tg_nbest *a = NULL, *r = NULL;
    ck_assert_int_eq(tg_decode(m, (const int32_t *const *)sid, sn, NPAIRS, &o, &a), TG_OK);
    ck_assert_int_eq(tg_decode_full(m, (const int32_t *const *)sid, sn, NPAIRS, &o, &r), TG_OK);
    for (int i = 0; i < NPAIRS; i++) {
        ck_assert_int_eq(a[i].hyp[0].len, r[i].hyp[0].len);
        for (int64_t k = 0; k < a[i].hyp[0].len; k++) ck_assert_int_eq(a[i].hyp[0].ids[k], r[i].hyp[0].ids[k]);
        tg_assert_close(a[i].hyp[0].logprob, r[i].hyp[0].logprob, 1e-4, 1e-4);
    }
    tg_decode_free(a, NPAIRS);
    tg_decode_free(r, NPAIRS);
    for (int i = 0; i < NPAIRS; i++) {
        free(sid[i]);
        free(tid[i]);
    }
    tg_model_free(m);
}
END_TEST

typedef struct {
    tg_model *m;
    const tg_batch *b;
} loss_ctx;

static tg_tensor *model_loss(tg_graph *g, tg_tensor **x, void *ctx) {
    (void)x;
    loss_ctx *c = ctx;
    return tg_model_loss(c->m, g, c->b);
}

/* d(loss)/d(every parameter) of a tiny model of each family built of the blocks, against
 * central differences (tg_gradcheck: the engine's own rule) */
START_TEST(test_blocks_gradcheck) {
    static const tg_model_arch arch[3] = {TG_ARCH_ENCDEC, TG_ARCH_LM, TG_ARCH_MLM};
    tg_vocab *v;
    ck_assert_int_eq(tg_vocab_new(&v), TG_OK);
    const char *w[] = {"a", "b", "c", "<mask>"};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(tg_vocab_add(v, w[i], NULL), TG_OK);
    tg_model_config c = arch[_i] == TG_ARCH_LM    ? tg_model_config_lm_default()
                        : arch[_i] == TG_ARCH_MLM ? tg_model_config_mlm_default()
                                                  : tg_model_config_default();
    c.d_model = 4;
    c.heads = 2;
    c.enc_layers = arch[_i] == TG_ARCH_LM ? 0 : 1;
    c.dec_layers = arch[_i] == TG_ARCH_MLM ? 0 : 1;
    c.d_ff = 4;
    c.max_len = 8;
    c.dropout = c.attn_dropout = 0.0f;
    c.label_smoothing = 0.0f;
    c.share_embeddings = true;
    c.learned_pos = false;
    c.rope = c.swiglu = c.rms_norm = true;
    c.pre_norm = _i != 1;
    c.attention = _i == 2 ? TG_ATTN_TALKING_HEADS : TG_ATTN_MHA;
    tg_model *m;
    ck_assert_msg(tg_model_new(&c, v, v, B, 11, &m) == TG_OK, "%s", tg_error_message());
    const int32_t s0[3] = {4, 5, 6}, s1[2] = {6, 4}, t0[3] = {7, 4, 5}, t1[2] = {5, 5};
    const int32_t *src[2] = {s0, s1}, *tgt[2] = {t0, t1};
    int64_t sn[2] = {3, 2}, tn[2] = {3, 2};
    tg_batch b;
    if (arch[_i] == TG_ARCH_LM) ck_assert_int_eq(tg_batch_build_lm(&b, 2, tgt, tn), TG_OK);
    else if (arch[_i] == TG_ARCH_MLM) {
        const int32_t m0[3] = {7, 5, 7}, g0[3] = {4, TG_PAD, 6}, m1[2] = {6, 7}, g1[2] = {TG_PAD, 4};
        const int32_t *in[2] = {m0, m1}, *tg[2] = {g0, g1};
        ck_assert_int_eq(tg_batch_build_mlm(&b, 2, in, tg, sn), TG_OK);
    } else ck_assert_int_eq(tg_batch_build(&b, 2, src, sn, tgt, tn), TG_OK);
    loss_ctx ctx = {m, &b};
    tg_gradcheck_options o = tg_gradcheck_options_default();
    o.store = tg_model_store(m);
    tg_gradcheck_result res;
    tg_status st = tg_gradcheck(model_loss, &ctx, 0, NULL, B, &o, &res);
    ck_assert_msg(st == TG_OK, "%s: %s", tg_model_arch_name(arch[_i]), tg_error_message());
    ck_assert_int_eq(res.checked, tg_store_total_numel(tg_model_store(m)));
    tg_batch_free(&b);
    tg_model_free(m);
}
END_TEST

START_TEST(test_blocks_config) {
    tg_model_config c = tg_model_config_lm_default();
    c.src_vocab = c.tgt_vocab = 10;
    c.rope = true;
    ck_assert_int_eq(tg_model_config_check(&c), TG_ERR_INVALID); /* and learned positions */
    tg_assert_msg_has(tg_error_message(), "rope or learned");
    c.learned_pos = false;
    ck_assert_int_eq(tg_model_config_check(&c), TG_OK);
    c.attention = TG_ATTN_FIXED_HEAD;
    c.head_dim = 5;
    ck_assert_int_eq(tg_model_config_check(&c), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "head dim 5 is odd");
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("blocks");
    TCase *t = tcase_create("blocks");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, test_modern_encdec_fixture);
    tcase_add_loop_test(t, test_blocks_gradcheck, 0, 3);
    tcase_add_test(t, test_blocks_config);
    suite_add_tcase(s, t);
    return s;
}
