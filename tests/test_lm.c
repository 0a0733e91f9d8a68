/* The decoder-only language model family (arch lm): PyTorch float64 reference scores for every
 * attention kind (fixtures from tests/fixtures/make_lm_fixtures.py), cached generation against
 * full recomputation, save -> load, training, and the errors of the wrong family and of a
 * prompt that does not fit. */
#include <math.h>
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

#define NSEQ 6
static const char *kinds[] = {"mha",         "fixed_head", "talking_heads", "interacting", "interacting_pairwise",
                              "mha_modern", "talking_heads_rope", /* RMSNorm, SwiGLU, RoPE */
                              "interacting_window"};              /* restricted, window 2 */

static tg_model *load_fixture(const char *kind) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/lm/lm_%s.safetensors", TG_TEST_DATA, kind);
    tg_model *m = NULL;
    ck_assert_msg(tg_model_load(path, B, &m) == TG_OK, "%s", tg_error_message());
    ck_assert_int_eq(tg_model_cfg(m)->arch, TG_ARCH_LM);
    return m;
}

/* log P of each text line under m, all lines in one padded batch */
static void score_text(tg_model *m, double *scores) {
    char path[1024], *lines[NSEQ];
    snprintf(path, sizeof path, "%s/fixtures/lm/text.txt", TG_TEST_DATA);
    ck_assert_int_eq(tg_test_read_lines(path, lines, NSEQ), NSEQ);
    int32_t *ids[NSEQ];
    int64_t n[NSEQ];
    for (int i = 0; i < NSEQ; i++)
        ck_assert_int_eq(tg_vocab_encode(tg_model_tgt_vocab(m), lines[i], &ids[i], &n[i]), TG_OK);
    tg_batch b;
    ck_assert_int_eq(tg_batch_build_lm(&b, NSEQ, (const int32_t *const *)ids, n), TG_OK);
    ck_assert_msg(tg_model_score(m, &b, scores) == TG_OK, "%s", tg_error_message());
    tg_batch_free(&b);
    for (int i = 0; i < NSEQ; i++) {
        free(ids[i]);
        free(lines[i]);
    }
}

/* tg_model_score of a language model equals PyTorch's float64 reference within 1e-4 relative */
START_TEST(test_lm_fixture_scores) {
    tg_model *m = load_fixture(kinds[_i]);
    double got[NSEQ];
    score_text(m, got);
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/lm/lm_%s.scores", TG_TEST_DATA, kinds[_i]);
    tg_test_expect_scores(path, got, NSEQ, 1e-4, kinds[_i]);
    tg_model_free(m);
}
END_TEST

/* cached generation (one step per token) = full recomputation of the prefix, greedy and
 * sampled, token for token, and the same log-probability */
START_TEST(test_lm_cached_equals_full) {
    tg_model *m = load_fixture(kinds[_i]);
    const tg_vocab *v = tg_model_tgt_vocab(m);
    int32_t prompt[3] = {tg_vocab_id(v, "the"), tg_vocab_id(v, "cat"), tg_vocab_id(v, "sat")};
    for (int mode = 0; mode < 2; mode++) {
        tg_generate_options o = tg_generate_options_default();
        o.max_new = 15;
        o.seed = 11;
        if (mode == 0) o.sample.temperature = 0.0f;
        else {
            o.sample.top_k = 6;
            o.sample.top_p = 0.9f;
        }
        tg_generation a, b;
        ck_assert_msg(tg_generate(m, prompt, 3, &o, &a) == TG_OK, "%s", tg_error_message());
        o.cached = false;
        ck_assert_msg(tg_generate(m, prompt, 3, &o, &b) == TG_OK, "%s", tg_error_message());
        ck_assert_int_eq(a.len, b.len);
        ck_assert(a.finished == b.finished);
        ck_assert(a.len > 0 || a.finished);
        for (int64_t i = 0; i < a.len; i++) ck_assert_int_eq(a.ids[i], b.ids[i]);
        tg_assert_close(a.logprob, b.logprob, 1e-5, 1e-5);
        for (int64_t i = 0; i < a.len; i++) ck_assert(a.ids[i] != TG_PAD && a.ids[i] != TG_BOS);
        tg_generation_free(&a);
        tg_generation_free(&b);
    }
    tg_model_free(m);
}
END_TEST

/* the log-probability of a finished generation from <s> alone is tg_model_score's of its
 * output, for every kind (sampled, so that the tokens are not only argmaxes) */
START_TEST(test_lm_generate_logprob) {
    tg_model *m = load_fixture(kinds[_i]);
    tg_generate_options o = tg_generate_options_default();
    o.max_new = 20;
    int finished = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        o.seed = seed;
        tg_generation gen;
        ck_assert_int_eq(tg_generate(m, NULL, 0, &o, &gen), TG_OK);
        if (gen.finished) {
            finished++;
            const int32_t *p[1] = {gen.ids};
            int64_t n[1] = {gen.len};
            int32_t one = 0;
            if (gen.len == 0) p[0] = &one;
            tg_batch b;
            double s;
            ck_assert_int_eq(tg_batch_build_lm(&b, 1, p, n), TG_OK);
            ck_assert_int_eq(tg_model_score(m, &b, &s), TG_OK);
            tg_batch_free(&b);
            tg_assert_close(gen.logprob, s, 1e-5, 1e-5);
        }
        tg_generation_free(&gen);
    }
    ck_assert_int_gt(finished, 0);
    tg_model_free(m);
}
END_TEST

START_TEST(test_lm_save_load) {
    tg_model *m = load_fixture("talking_heads");
    char path[] = "/tmp/tg_test_lm_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(tg_model_save(m, path), TG_OK);
    tg_model *r = NULL;
    ck_assert_msg(tg_model_load(path, B, &r) == TG_OK, "%s", tg_error_message());
    unlink(path);
    ck_assert_int_eq(tg_model_cfg(r)->arch, TG_ARCH_LM);
    ck_assert_int_eq(tg_model_cfg(r)->enc_layers, 0);
    tg_store *a = tg_model_store(m), *b = tg_model_store(r);
    ck_assert_int_eq(tg_store_count(a), tg_store_count(b));
    for (int64_t i = 0; i < tg_store_count(a); i++) {
        ck_assert_str_eq(tg_store_name(a, i), tg_store_name(b, i));
        int64_t n = tg_store_numel(a, i);
        float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
        ck_assert_int_eq(tg_store_read(a, i, x, n), TG_OK);
        ck_assert_int_eq(tg_store_read(b, i, y, n), TG_OK);
        ck_assert(!memcmp(x, y, (size_t)n * 4));
        free(x);
        free(y);
    }
    double s1[NSEQ], s2[NSEQ];
    score_text(m, s1);
    score_text(r, s2);
    for (int i = 0; i < NSEQ; i++) ck_assert(s1[i] == s2[i]);
    tg_model_free(m);
    tg_model_free(r);
}
END_TEST

/* an old checkpoint (no "arch" in its config) is an encoder-decoder; the wrong family for a
 * call is a clear error */
START_TEST(test_lm_wrong_family) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/models/mha_pre.safetensors", TG_TEST_DATA);
    tg_model *ed = NULL;
    ck_assert_int_eq(tg_model_load(path, B, &ed), TG_OK);
    ck_assert_int_eq(tg_model_cfg(ed)->arch, TG_ARCH_ENCDEC);
    int32_t p[1] = {5};
    tg_generation gen;
    ck_assert_int_eq(tg_generate(ed, p, 1, NULL, &gen), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "encoder-decoder (arch encdec)");
    ck_assert_ptr_null(gen.ids);
    tg_model *lm = load_fixture("mha");
    const int32_t *src[1] = {p};
    int64_t sn[1] = {1};
    tg_nbest *res = NULL;
    ck_assert_int_eq(tg_decode(lm, src, sn, 1, NULL, &res), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "language model (arch lm) has no source");
    tg_graph *g = tg_graph_new();
    ck_assert_ptr_null(tg_model_encode(lm, g, p, 1, 1, NULL));
    tg_assert_msg_has(tg_error_message(), "has no encoder");
    tg_graph_free(g);
    /* a prompt that with <s> does not fit in max_len (24) */
    int32_t longp[24];
    for (int i = 0; i < 24; i++) longp[i] = 5;
    ck_assert_int_eq(tg_generate(lm, longp, 24, NULL, &gen), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "the prompt has 24 tokens (+ <s>), the model's max_len is 24");
    /* fits, with one position left: past it the context slides and generation goes on to
     * max_new (100) or </s> */
    ck_assert_int_eq(tg_generate(lm, longp, 23, NULL, &gen), TG_OK);
    ck_assert_int_le(gen.len, 100);
    tg_generation_free(&gen);
    longp[3] = 999;
    ck_assert_int_eq(tg_generate(lm, longp, 5, NULL, &gen), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "prompt token 3: id 999");
    /* config rules of the family */
    tg_model_config c = tg_model_config_lm_default();
    c.src_vocab = c.tgt_vocab = 10;
    ck_assert_int_eq(tg_model_config_check(&c), TG_OK);
    c.enc_layers = 1;
    ck_assert_int_eq(tg_model_config_check(&c), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "has no encoder");
    c.enc_layers = 0;
    c.share_embeddings = false;
    ck_assert_int_eq(tg_model_config_check(&c), TG_ERR_INVALID);
    tg_model_free(lm);
    tg_model_free(ed);
}
END_TEST

/* a fresh small LM learns three sequences: loss falls, and it then generates one of them */
START_TEST(test_lm_trains) {
    tg_vocab *v;
    ck_assert_int_eq(tg_vocab_new(&v), TG_OK);
    const char *words[] = {"one", "two", "three", "four", "five"};
    for (int i = 0; i < 5; i++) ck_assert_int_eq(tg_vocab_add(v, words[i], NULL), TG_OK);
    tg_model_config c = tg_model_config_lm_default();
    c.d_model = 16;
    c.heads = 2;
    c.dec_layers = 2;
    c.d_ff = 32;
    c.max_len = 16;
    c.dropout = c.attn_dropout = 0.0f;
    tg_model *m;
    ck_assert_int_eq(tg_model_new(&c, v, v, B, 3, &m), TG_OK);
    /* no cross-attention and two norms per layer */
    ck_assert_int_lt(tg_store_find(tg_model_store(m), "decoder.layers.0.cross_attn.q_proj.weight"), 0);
    ck_assert_int_lt(tg_store_find(tg_model_store(m), "decoder.layers.0.norm3.weight"), 0);
    ck_assert_int_ge(tg_store_find(tg_model_store(m), "decoder.layers.1.norm2.weight"), 0);
    const int32_t s0[5] = {4, 5, 6, 7, 8}, s1[3] = {8, 7, 6}, s2[4] = {4, 4, 5, 5};
    const int32_t *seqs[3] = {s0, s1, s2};
    int64_t ns[3] = {5, 3, 4};
    tg_batch b;
    ck_assert_int_eq(tg_batch_build_lm(&b, 3, seqs, ns), TG_OK);
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAM);
    tg_optim *opt;
    ck_assert_int_eq(tg_optim_new(tg_model_store(m), &oc, &opt), TG_OK);
    double first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        const tg_batch *bs[1] = {&b};
        tg_grad_info gi;
        ck_assert_int_eq(tg_store_zero_grad(tg_model_store(m)), TG_OK);
        ck_assert_msg(tg_train_grad(m, bs, 1, NULL, true, &gi) == TG_OK, "%s", tg_error_message());
        ck_assert_int_eq(tg_optim_step(opt, 3e-3f), TG_OK);
        if (step == 0) first = gi.nll;
        last = gi.nll;
    }
    ck_assert_msg(last < 0.25 * first, "nll %.4f -> %.4f", first, last);
    tg_generate_options o = tg_generate_options_default();
    o.sample.temperature = 0.0f;
    int32_t p[2] = {4, 5};
    tg_generation gen;
    ck_assert_int_eq(tg_generate(m, p, 2, &o, &gen), TG_OK);
    ck_assert_msg(gen.finished && gen.len == 3 && gen.ids[0] == 6 && gen.ids[2] == 8, "generated %lld tokens",
                  (long long)gen.len);
    tg_generation_free(&gen);
    tg_batch_free(&b);
    tg_optim_free(opt);
    tg_model_free(m);
}
END_TEST

/* attention weights for looking at: one map per sub-layer; in a language model with a window
 * of 2 every row is a distribution over the keys i-2..i only */
START_TEST(test_attention_maps) {
    tg_model *m = load_fixture("interacting_window");
    const int32_t s[5] = {4, 5, 6, 7, 8};
    const int32_t *p[1] = {s};
    int64_t n = 5;
    tg_batch b;
    ck_assert_int_eq(tg_batch_build_lm(&b, 1, p, &n), TG_OK);
    tg_attn_map *maps;
    int64_t count;
    ck_assert_msg(tg_model_attention_maps(m, &b, &maps, &count) == TG_OK, "%s", tg_error_message());
    ck_assert_int_eq(count, 2);
    ck_assert_str_eq(maps[1].name, "decoder.layers.1.self_attn");
    ck_assert_int_eq(maps[0].ndim, 4);
    int64_t h = maps[0].shape[1], T = maps[0].shape[2];
    ck_assert(maps[0].shape[0] == 1 && h == 2 && T == 6 && maps[0].shape[3] == 6);
    for (int64_t k = 0; k < count; k++)
        for (int64_t a = 0; a < h; a++)
            for (int64_t i = 0; i < T; i++) {
                double sum = 0.0;
                for (int64_t j = 0; j < T; j++) {
                    float w = maps[k].w[(a * T + i) * T + j];
                    if (j > i || j < i - 2) ck_assert_msg(w == 0.0f, "map %lld head %lld [%lld, %lld] = %g", (long long)k,
                                                          (long long)a, (long long)i, (long long)j, (double)w);
                    sum += w;
                }
                tg_assert_close(sum, 1.0, 1e-5, 0);
            }
    tg_attn_maps_free(maps, count);
    tg_batch_free(&b);
    tg_model_free(m);
    /* an encoder-decoder: encoder self, then decoder self and cross per layer */
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/models/interacting_pairwise_post.safetensors", TG_TEST_DATA);
    ck_assert_int_eq(tg_model_load(path, B, &m), TG_OK);
    const int32_t *src[1] = {s}, *tgt[1] = {s};
    int64_t sn = 3, tn = 2;
    ck_assert_int_eq(tg_batch_build(&b, 1, src, &sn, tgt, &tn), TG_OK);
    ck_assert_int_eq(tg_model_attention_maps(m, &b, &maps, &count), TG_OK);
    ck_assert_int_eq(count, 6);
    ck_assert_str_eq(maps[0].name, "encoder.layers.0.self_attn");
    ck_assert_str_eq(maps[3].name, "decoder.layers.0.cross_attn");
    ck_assert_int_eq(maps[3].ndim, 5); /* pairwise: [B, h_i, h_j, n, m] */
    ck_assert(maps[3].shape[3] == 3 && maps[3].shape[4] == 4);
    tg_attn_maps_free(maps, count);
    tg_batch_free(&b);
    tg_model_free(m);
}
END_TEST

/* tg_model_attention_logits, every kind: the weights are those of tg_model_attention_maps (the
 * extra kept tensors change no value beyond float rounding, 1e-6), and the captured logits S are
 * the ones the weights come from: softmax over the keys the causal mask (and window) leave,
 * computed here in double from S, is w, or p for talking heads, whose w is mixed after it. S
 * is taken before the mask, so the masked entries hold finite scores. */
START_TEST(test_attention_logits) {
    tg_model *m = load_fixture(kinds[_i]);
    const tg_model_config *c = tg_model_cfg(m);
    const int32_t s[5] = {4, 5, 6, 7, 8};
    const int32_t *p[1] = {s};
    int64_t n = 5;
    tg_batch b;
    ck_assert_int_eq(tg_batch_build_lm(&b, 1, p, &n), TG_OK);
    tg_attn_map *plain, *maps;
    int64_t count, count2;
    ck_assert_msg(tg_model_attention_maps(m, &b, &plain, &count) == TG_OK, "%s", tg_error_message());
    ck_assert_msg(tg_model_attention_logits(m, &b, &maps, &count2) == TG_OK, "%s", tg_error_message());
    ck_assert_int_eq(count, count2);
    for (int64_t k = 0; k < count; k++) {
        const tg_attn_map *mp = &maps[k];
        ck_assert_ptr_null(plain[k].s);
        ck_assert_ptr_nonnull(mp->s);
        ck_assert_int_eq(mp->p != NULL, c->attention == TG_ATTN_TALKING_HEADS);
        int64_t T = mp->shape[mp->ndim - 1], heads = mp->ndim == 5 ? mp->shape[1] * mp->shape[2] : mp->shape[1];
        ck_assert_int_eq(T, 6);
        ck_assert_int_eq(heads, c->attention == TG_ATTN_INTERACTING_PAIRWISE ? c->heads * c->heads : c->heads);
        for (int64_t e = 0; e < heads * T * T; e++) {
            tg_assert_close(mp->w[e], plain[k].w[e], 1e-6, 0);
            ck_assert(isfinite(mp->s[e]));
        }
        const float *sm = mp->p ? mp->p : mp->w;
        for (int64_t a = 0; a < heads; a++)
            for (int64_t i = 0; i < T; i++) {
                const float *row = mp->s + (a * T + i) * T;
                double mx = -INFINITY, z = 0;
                for (int64_t j = 0; j <= i; j++)
                    if (c->window == 0 || i - j <= c->window) mx = fmax(mx, row[j]);
                for (int64_t j = 0; j <= i; j++)
                    if (c->window == 0 || i - j <= c->window) z += exp(row[j] - mx);
                for (int64_t j = 0; j < T; j++) {
                    bool seen = j <= i && (c->window == 0 || i - j <= c->window);
                    double want = seen ? exp(row[j] - mx) / z : 0.0;
                    ck_assert_msg(fabs(sm[(a * T + i) * T + j] - want) <= 1e-5,
                                  "%s map %lld head %lld [%lld, %lld]: weight %g, softmax of the logits %g", kinds[_i],
                                  (long long)k, (long long)a, (long long)i, (long long)j,
                                  (double)sm[(a * T + i) * T + j], want);
                }
            }
    }
    tg_attn_maps_free(plain, count);
    tg_attn_maps_free(maps, count2);
    tg_batch_free(&b);
    tg_model_free(m);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("lm");
    TCase *t = tcase_create("lm");
    tcase_add_checked_fixture(t, setup, teardown);
    int nk = (int)(sizeof kinds / sizeof kinds[0]);
    tcase_add_loop_test(t, test_lm_fixture_scores, 0, nk);
    tcase_add_loop_test(t, test_lm_cached_equals_full, 0, nk);
    tcase_add_loop_test(t, test_lm_generate_logprob, 0, nk);
    tcase_add_test(t, test_lm_save_load);
    tcase_add_test(t, test_lm_wrong_family);
    tcase_add_test(t, test_lm_trains);
    tcase_add_test(t, test_attention_maps);
    tcase_add_loop_test(t, test_attention_logits, 0, nk);
    suite_add_tcase(s, t);
    return s;
}
