/* Attention kinds registered by a program (tg/attn_kinds.h) and the public layers (tg/layers.h):
 * ALiBi (Press et al. 2022) registered from outside the zoo trains in every family, survives
 * save -> load, and decodes with cached = uncached (generation, beam search); the registration
 * errors (twice, a built-in's name, a bad name), a kind whose dims do not fit (its check) or
 * whose forward returns the wrong shape; and tg_layers_attention equal to the zoo's MHA on the
 * same parameters, grouped-query attention's parameter shapes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tg/tg.h"
#include "tg_check.h"

static tg_backend *B;
static void setup(void) { ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK); }
static void teardown(void) { tg_backend_free(B); }

/* ALiBi: multi-head attention with no positions but a score bias -slope_h * distance, slopes
 * 2^(-8 (h+1) / H); self-attention only (the queries the last n of the m positions), the
 * encoder's both ways (|i - j|), cross-attention without a bias */
static tg_status alibi_init(tg_params *p, const char *prefix, const tg_attn_dims *d, void *user) {
    (void)user;
    return tg_layers_attention_init(p, prefix, d->d_model, d->heads, d->heads);
}

static tg_tensor *alibi_forward(tg_graph *g, tg_store *s, const char *prefix, const tg_attn_dims *d, tg_tensor *xq,
                                tg_tensor *xkv, tg_tensor *mask, bool self, void *user) {
    (void)user;
    tg_tensor *bias = NULL;
    if (self && xq && xkv) {
        int64_t H = d->heads, n = tg_tensor_dim(xq, 1), m = tg_tensor_dim(xkv, 1);
        float *b = malloc((size_t)(H * n * m) * sizeof *b);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < m; j++)
                    b[(h * n + i) * m + j] = -(float)pow(2.0, -8.0 * (double)(h + 1) / (double)H) *
                                             (float)llabs(m - n + i - j);
        int64_t shape[4] = {1, H, n, m};
        bias = tg_input(g, TG_DTYPE_F32, 4, shape, b);
        free(b);
    }
    return tg_layers_attention(g, s, prefix, xq, xkv, mask, bias, d->heads, d->heads, d->dropout);
}

static tg_status at_most_8_heads(const tg_attn_dims *d, void *user) {
    (void)user;
    return d->heads <= 8 ? TG_OK : tg_error_set(TG_ERR_INVALID, "ALiBi's slopes are tuned for up to 8 heads, not %lld",
                                                 (long long)d->heads);
}

/* a kind that returns its keys: the wrong shape when m != n */
static tg_tensor *wrong_forward(tg_graph *g, tg_store *s, const char *prefix, const tg_attn_dims *d, tg_tensor *xq,
                                tg_tensor *xkv, tg_tensor *mask, bool self, void *user) {
    (void)g, (void)s, (void)prefix, (void)d, (void)xq, (void)mask, (void)self, (void)user;
    return xkv;
}

static tg_attn_kind ALIBI, WRONG;

static void register_once(void) {
    static bool done;
    if (done) return;
    tg_attn_kind_def def = {.name = "alibi", .check = at_most_8_heads, .init = alibi_init, .forward = alibi_forward};
    ck_assert_msg(tg_attn_kind_register(&def, &ALIBI) == TG_OK, "%s", tg_error_message());
    tg_attn_kind_def w = {.name = "wrong_shape", .init = alibi_init, .forward = wrong_forward};
    ck_assert_int_eq(tg_attn_kind_register(&w, &WRONG), TG_OK);
    done = true;
}

static tg_vocab *vocab(void) {
    tg_vocab *v;
    ck_assert_int_eq(tg_vocab_new(&v), TG_OK);
    char w[8];
    for (int i = 0; i < 8; i++) {
        snprintf(w, sizeof w, "w%d", i);
        ck_assert_int_eq(tg_vocab_add(v, w, NULL), TG_OK);
    }
    ck_assert_int_eq(tg_vocab_add(v, "<mask>", NULL), TG_OK);
    return v;
}

static tg_model_config small(tg_model_arch arch) {
    tg_model_config c = arch == TG_ARCH_LM ? tg_model_config_lm_default()
                        : arch == TG_ARCH_MLM ? tg_model_config_mlm_default() : tg_model_config_default();
    c.d_model = 16;
    c.heads = 2;
    c.enc_layers = arch == TG_ARCH_LM ? 0 : 1;
    c.dec_layers = arch == TG_ARCH_MLM ? 0 : 1;
    c.d_ff = 32;
    c.max_len = 16;
    c.dropout = c.attn_dropout = 0.0f;
    c.learned_pos = false;
    c.attention = ALIBI;
    return c;
}

/* steps of Adam on one batch; returns (first NLL, last NLL) */
static void fit(tg_model *m, const tg_batch *b, int steps, double *first, double *last) {
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAM);
    tg_optim *opt;
    ck_assert_int_eq(tg_optim_new(tg_model_store(m), &oc, &opt), TG_OK);
    for (int s = 0; s < steps; s++) {
        tg_grad_info gi;
        ck_assert_int_eq(tg_store_zero_grad(tg_model_store(m)), TG_OK);
        ck_assert_msg(tg_train_grad(m, &b, 1, NULL, true, &gi) == TG_OK, "%s", tg_error_message());
        ck_assert_int_eq(tg_optim_step(opt, 1e-2f), TG_OK);
        if (s == 0) *first = gi.nll;
        *last = gi.nll;
    }
    tg_optim_free(opt);
}

/* a language model with ALiBi learns its sequences, saves and loads under the kind's name, and
 * generates the same tokens and log-probabilities with and without the cache */
START_TEST(test_registered_kind_lm) {
    register_once();
    ck_assert_str_eq(tg_attn_kind_name(ALIBI), "alibi");
    tg_model_config c = small(TG_ARCH_LM);
    tg_vocab *v = vocab();
    tg_model *m;
    ck_assert_msg(tg_model_new(&c, v, v, B, 3, &m) == TG_OK, "%s", tg_error_message());
    ck_assert_int_ge(tg_store_find(tg_model_store(m), "decoder.layers.0.self_attn.q_proj.weight"), 0);
    const int32_t s0[6] = {4, 5, 6, 7, 8, 9}, s1[4] = {9, 8, 7, 6};
    const int32_t *seqs[2] = {s0, s1};
    int64_t ns[2] = {6, 4};
    tg_batch b;
    ck_assert_int_eq(tg_batch_build_lm(&b, 2, seqs, ns), TG_OK);
    double first, last;
    fit(m, &b, 80, &first, &last);
    ck_assert_msg(last < 0.2 * first, "nll %.3f -> %.3f", first, last);
    char path[] = "/tmp/tg_test_alibi.XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ck_assert_int_eq(tg_model_save(m, path), TG_OK);
    tg_model *m2;
    ck_assert_msg(tg_model_load(path, B, &m2) == TG_OK, "%s", tg_error_message());
    unlink(path);
    ck_assert_int_eq(tg_model_cfg(m2)->attention, ALIBI);
    tg_generate_options o = tg_generate_options_default();
    o.sample.temperature = 0.0f;
    o.max_new = 10;
    int32_t p[2] = {4, 5};
    tg_generation g[2];
    for (int cached = 0; cached < 2; cached++) {
        o.cached = cached;
        ck_assert_msg(tg_generate(m2, p, 2, &o, &g[cached]) == TG_OK, "%s", tg_error_message());
    }
    ck_assert_msg(g[1].finished && g[1].len == 4 && g[1].ids[0] == 6 && g[1].ids[3] == 9, "%lld tokens",
                  (long long)g[1].len);
    ck_assert_int_eq(g[0].len, g[1].len);
    for (int64_t i = 0; i < g[0].len; i++) ck_assert_int_eq(g[0].ids[i], g[1].ids[i]);
    tg_assert_close(g[0].logprob, g[1].logprob, 1e-4, 1e-4);
    tg_generation_free(&g[0]);
    tg_generation_free(&g[1]);
    tg_batch_free(&b);
    tg_model_free(m);
    tg_model_free(m2);
}
END_TEST

/* an encoder-decoder with ALiBi everywhere (encoder self, decoder self, cross without a bias)
 * learns to copy, and beam search gives the same hypotheses cached and uncached; a masked
 * language model with it trains */
START_TEST(test_registered_kind_encdec_mlm) {
    register_once();
    tg_model_config c = small(TG_ARCH_ENCDEC);
    c.share_embeddings = true;
    tg_vocab *v = vocab();
    tg_model *m;
    ck_assert_msg(tg_model_new(&c, v, v, B, 5, &m) == TG_OK, "%s", tg_error_message());
    const int32_t a[4] = {4, 5, 6, 7}, b2[3] = {8, 9, 4}, c3[5] = {7, 6, 5, 4, 8};
    const int32_t *src[3] = {a, b2, c3};
    int64_t sn[3] = {4, 3, 5};
    tg_batch b;
    ck_assert_int_eq(tg_batch_build(&b, 3, src, sn, src, sn), TG_OK);
    double first, last;
    fit(m, &b, 120, &first, &last);
    ck_assert_msg(last < 0.2 * first, "nll %.3f -> %.3f", first, last);
    tg_decode_options o = tg_decode_options_default();
    o.beam = 2;
    tg_nbest *r1, *r2;
    ck_assert_msg(tg_decode(m, src, sn, 3, &o, &r1) == TG_OK, "%s", tg_error_message());
    ck_assert_msg(tg_decode_full(m, src, sn, 3, &o, &r2) == TG_OK, "%s", tg_error_message());
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(r1[i].hyp[0].len, r2[i].hyp[0].len);
        for (int64_t k = 0; k < r1[i].hyp[0].len; k++) ck_assert_int_eq(r1[i].hyp[0].ids[k], r2[i].hyp[0].ids[k]);
        tg_assert_close(r1[i].hyp[0].logprob, r2[i].hyp[0].logprob, 1e-4, 1e-4);
    }
    ck_assert_int_eq(r1[0].hyp[0].len, 4); /* copied */
    ck_assert_int_eq(r1[0].hyp[0].ids[2], 6);
    tg_decode_free(r1, 3);
    tg_decode_free(r2, 3);
    tg_batch_free(&b);
    tg_model_free(m);

    c = small(TG_ARCH_MLM);
    v = vocab();
    ck_assert_msg(tg_model_new(&c, v, v, B, 5, &m) == TG_OK, "%s", tg_error_message());
    int32_t in[4] = {4, 5, 12, 7}, tg[4] = {0, 0, 6, 0}; /* <mask> is id 12 */
    const int32_t *ins[1] = {in}, *tgs[1] = {tg};
    int64_t len = 4;
    ck_assert_int_eq(tg_batch_build_mlm(&b, 1, ins, tgs, &len), TG_OK);
    fit(m, &b, 40, &first, &last);
    ck_assert_msg(last < 0.2 * first, "mlm nll %.3f -> %.3f", first, last);
    tg_batch_free(&b);
    tg_model_free(m);
}
END_TEST

/* registering twice, a built-in's name, a bad name, no forward; a model whose dims the kind
 * refuses; a forward that returns the wrong shape */
START_TEST(test_registered_kind_errors) {
    register_once();
    tg_attn_kind k;
    tg_attn_kind_def def = {.name = "alibi", .init = alibi_init, .forward = alibi_forward};
    ck_assert_int_eq(tg_attn_kind_register(&def, &k), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "the attention kind 'alibi' exists already (registered before)");
    def.name = "mha";
    ck_assert_int_eq(tg_attn_kind_register(&def, &k), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "'mha' exists already (a built-in kind)");
    def.name = "Bad-Name";
    ck_assert_int_eq(tg_attn_kind_register(&def, &k), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "bad name 'Bad-Name'");
    def.name = "no_forward";
    def.forward = NULL;
    ck_assert_int_eq(tg_attn_kind_register(&def, &k), TG_ERR_INVALID);
    tg_attn_kind parsed;
    ck_assert_int_eq(tg_attn_kind_parse("alibi", &parsed), TG_OK);
    ck_assert_int_eq(parsed, ALIBI);
    ck_assert_int_eq(tg_attn_kind_parse("no_forward", &parsed), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "or one the program registers with tg_attn_kind_register");

    tg_model_config c = small(TG_ARCH_LM);
    c.d_model = 32;
    c.heads = 16;
    tg_model *m;
    tg_vocab *v = vocab();
    ck_assert_int_eq(tg_model_new(&c, v, v, B, 1, &m), TG_ERR_INVALID); /* the vocabulary is freed */
    tg_assert_msg_has(tg_error_message(), "attention kind 'alibi' does not fit d_model 32, heads 16");
    tg_assert_msg_has(tg_error_message(), "tuned for up to 8 heads, not 16");
    c = small(TG_ARCH_LM);
    c.rope = true;
    v = vocab();
    ck_assert_int_eq(tg_model_new(&c, v, v, B, 1, &m), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "apply to the built-in attention kinds, not 'alibi'");

    c = small(TG_ARCH_ENCDEC);
    c.attention = WRONG;
    c.share_embeddings = true;
    v = vocab();
    ck_assert_int_eq(tg_model_new(&c, v, v, B, 1, &m), TG_OK);
    const int32_t a[4] = {4, 5, 6, 7}, t2[2] = {8, 9};
    const int32_t *src[1] = {a}, *tgt[1] = {t2};
    int64_t sn = 4, tn = 2;
    tg_batch b;
    ck_assert_int_eq(tg_batch_build(&b, 1, src, &sn, tgt, &tn), TG_OK);
    tg_graph *g = tg_graph_new();
    tg_tensor *loss = tg_model_loss(m, g, &b);
    TG_EXPECT_BUILD_ERROR(g, loss, TG_ERR_SHAPE, "attention kind 'wrong_shape' (decoder.layers.0.cross_attn): the "
                                                 "forward returned [1,5,16] for queries [1,3,16]");
    tg_graph_free(g);
    tg_batch_free(&b);
    tg_model_free(m);
}
END_TEST

/* tg_layers_attention with as many key/value heads as heads is the zoo's multi-head attention on
 * the same parameters; with fewer, its key/value projections are narrower */
START_TEST(test_layers_attention_is_mha) {
    tg_model_config c = tg_model_config_lm_default();
    c.d_model = 16, c.heads = 4, c.dec_layers = 1, c.d_ff = 16, c.max_len = 8;
    tg_vocab *v = vocab();
    tg_model *m;
    ck_assert_int_eq(tg_model_new(&c, v, v, B, 9, &m), TG_OK);
    float x[2 * 5 * 16];
    tg_rng r;
    tg_rng_init(&r, 4);
    for (int i = 0; i < 2 * 5 * 16; i++) x[i] = (float)tg_rng_normal(&r);
    int64_t shape[3] = {2, 5, 16};
    tg_graph *g = tg_graph_new();
    tg_graph_set_training(g, false);
    tg_tensor *xi = tg_input(g, TG_DTYPE_F32, 3, shape, x);
    const char *p = "decoder.layers.0.self_attn";
    int64_t cm[4] = {1, 1, 5, 5};
    tg_tensor *zoo = tg_keep(tg_model_attention(m, g, p, xi, xi, tg_reshape(tg_causal_mask(g, 5, 5), 4, cm)));
    tg_tensor *ours = tg_keep(tg_layers_attention(g, tg_model_store(m), p, xi, xi,
                                                  tg_reshape(tg_causal_mask(g, 5, 5), 4, cm), NULL, 4, 4, 0.0f));
    ck_assert_msg(tg_graph_run(g, B) == TG_OK, "%s", tg_error_message());
    float *a = tg_test_read_all(zoo), *b = tg_test_read_all(ours);
    for (int i = 0; i < 2 * 5 * 16; i++) tg_assert_close(a[i], b[i], 1e-5, 1e-5);
    free(a);
    free(b);
    tg_graph_free(g);
    tg_model_free(m);
    /* grouped-query parameters: 4 heads of 4, 2 key/value heads */
    tg_store *s;
    ck_assert_int_eq(tg_store_new(B, &s), TG_OK);
    tg_params *pp;
    ck_assert_int_eq(tg_params_new(s, 1, 0.25, &pp), TG_OK);
    ck_assert_int_eq(tg_layers_attention_init(pp, "att", 16, 4, 2), TG_OK);
    int64_t i = tg_store_find(s, "att.k_proj.weight");
    ck_assert_int_ge(i, 0);
    ck_assert_int_eq(tg_layers_attention_init(pp, "att", 16, 4, 2), TG_ERR_INVALID); /* names taken */
    ck_assert_int_eq(tg_layers_attention_init(pp, "att3", 16, 4, 3), TG_ERR_INVALID); /* 3 does not divide 4 */
    tg_assert_msg_has(tg_error_message(), "key/value heads the heads");
    tg_params_free(pp);
    tg_store_free(s);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("attn_kinds");
    TCase *t = tcase_create("attn_kinds");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, test_registered_kind_lm);
    tcase_add_test(t, test_registered_kind_encdec_mlm);
    tcase_add_test(t, test_registered_kind_errors);
    tcase_add_test(t, test_layers_attention_is_mha);
    suite_add_tcase(s, t);
    return s;
}
