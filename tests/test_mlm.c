/* The encoder-only masked language model family (arch mlm): PyTorch float64 reference scores
 * for every attention kind (fixtures from tests/fixtures/make_mlm_fixtures.py), BERT's 80/10/10
 * masking rule, the corpus and its batches, save -> load, training to a masked-token accuracy,
 * and the errors of the wrong family. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tg/decode.h"
#include "tg/model.h"
#include "tg/ops.h"
#include "tg/train.h"
#include "tg_check.h"

static tg_backend *B;
static void setup(void) { ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK); }
static void teardown(void) { tg_backend_free(B); }

#define NROWS 6
static const char *kinds[] = {"mha",        "fixed_head", "talking_heads", "interacting", "interacting_pairwise",
                              "mha_modern",            /* RMSNorm, SwiGLU, RoPE */
                              "talking_heads_window"}; /* restricted, window 2 */

static tg_model *load_fixture(const char *kind) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/mlm/mlm_%s.safetensors", TG_TEST_DATA, kind);
    tg_model *m = NULL;
    ck_assert_msg(tg_model_load(path, B, &m) == TG_OK, "%s", tg_error_message());
    ck_assert_int_eq(tg_model_cfg(m)->arch, TG_ARCH_MLM);
    return m;
}

/* scores of the rows of masked.txt: input and targets ("_" = none) */
static void score_rows(tg_model *m, double *scores) {
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/fixtures/mlm/masked.txt", TG_TEST_DATA);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int32_t *in[NROWS], *tg[NROWS];
    int64_t len[NROWS];
    const tg_vocab *v = tg_model_src_vocab(m);
    for (int r = 0; r < NROWS; r++) {
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        line[strcspn(line, "\n")] = '\0';
        char *tab = strchr(line, '\t');
        ck_assert_ptr_nonnull(tab);
        *tab = '\0';
        int64_t n2;
        ck_assert_int_eq(tg_vocab_encode(v, line, &in[r], &len[r]), TG_OK);
        ck_assert_int_eq(tg_vocab_encode(v, tab + 1, &tg[r], &n2), TG_OK);
        ck_assert_int_eq(n2, len[r]);
        char *save = NULL, *w = strtok_r(tab + 1, " ", &save);
        for (int64_t j = 0; w; j++, w = strtok_r(NULL, " ", &save))
            if (!strcmp(w, "_")) tg[r][j] = TG_PAD;
    }
    fclose(f);
    tg_batch b;
    ck_assert_int_eq(tg_batch_build_mlm(&b, NROWS, (const int32_t *const *)in, (const int32_t *const *)tg, len), TG_OK);
    ck_assert_msg(tg_model_score(m, &b, scores) == TG_OK, "%s", tg_error_message());
    tg_batch_free(&b);
    for (int r = 0; r < NROWS; r++) {
        free(in[r]);
        free(tg[r]);
    }
}

START_TEST(test_mlm_fixture_scores) {
    tg_model *m = load_fixture(kinds[_i]);
    double got[NROWS];
    score_rows(m, got);
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/mlm/mlm_%s.scores", TG_TEST_DATA, kinds[_i]);
    tg_test_expect_scores(path, got, NROWS, 1e-4, kinds[_i]);
    tg_model_free(m);
}
END_TEST

static tg_vocab *small_vocab(int words) {
    tg_vocab *v;
    ck_assert_int_eq(tg_vocab_new(&v), TG_OK);
    char w[16];
    for (int i = 0; i < words; i++) {
        snprintf(w, sizeof w, "w%d", i);
        ck_assert_int_eq(tg_vocab_add(v, w, NULL), TG_OK);
    }
    ck_assert_int_eq(tg_vocab_add(v, "<mask>", NULL), TG_OK);
    return v;
}

/* 15 % chosen; of those 80 % <mask>, 10 % random, 10 % unchanged; specials never chosen */
START_TEST(test_mlm_mask_rule) {
    tg_vocab *v = small_vocab(40);
    int32_t mask = tg_vocab_id(v, "<mask>");
    enum { N = 40000 };
    int32_t *ids = malloc(N * sizeof *ids), *in = malloc(N * sizeof *in), *tg = malloc(N * sizeof *tg);
    for (int i = 0; i < N; i++) ids[i] = i % 10 == 0 ? TG_UNK : 4 + i % 40;
    tg_rng r;
    tg_rng_init(&r, 5);
    ck_assert_int_eq(tg_mlm_mask(v, ids, N, 0.15, &r, in, tg), TG_OK);
    int chosen = 0, masked = 0, same = 0, special = 0;
    for (int i = 0; i < N; i++) {
        if (tg[i] == TG_PAD) {
            ck_assert_int_eq(in[i], ids[i]); /* not chosen: untouched */
            continue;
        }
        chosen++;
        special += ids[i] < 4;
        ck_assert_int_eq(tg[i], ids[i]);
        masked += in[i] == mask;
        same += in[i] == ids[i];
        ck_assert(in[i] >= 4 && in[i] < tg_vocab_size(v));
    }
    ck_assert_int_eq(special, 0);
    tg_assert_close(chosen / (0.9 * N), 0.15, 0.006, 0);
    tg_assert_close((double)masked / chosen, 0.8, 0.02, 0);
    /* unchanged: the 10 % kept plus the random draws that hit the same id (1/40 of 10 %: the
     * draws are of the 40 ordinary tokens, never <mask>) */
    tg_assert_close((double)same / chosen, 0.1 + 0.1 / 40, 0.015, 0);
    /* a short sequence still gets one target; a sequence of specials none */
    int32_t two[2] = {5, 6}, sp[2] = {TG_UNK, TG_EOS};
    ck_assert_int_eq(tg_mlm_mask(v, two, 2, 1e-9, &r, in, tg), TG_OK);
    ck_assert_int_eq((tg[0] != TG_PAD) + (tg[1] != TG_PAD), 1);
    ck_assert_int_eq(tg_mlm_mask(v, sp, 2, 0.5, &r, in, tg), TG_OK);
    ck_assert(tg[0] == TG_PAD && tg[1] == TG_PAD);
    ck_assert_int_eq(tg_mlm_mask(v, two, 2, 0.0, &r, in, tg), TG_ERR_INVALID);
    free(ids);
    free(in);
    free(tg);
    tg_vocab_free(v);
}
END_TEST

START_TEST(test_mlm_save_load) {
    tg_model *m = load_fixture("interacting");
    char path[] = "/tmp/tg_test_mlm_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(tg_model_save(m, path), TG_OK);
    tg_model *r = NULL;
    ck_assert_msg(tg_model_load(path, B, &r) == TG_OK, "%s", tg_error_message());
    unlink(path);
    ck_assert_int_eq(tg_model_cfg(r)->arch, TG_ARCH_MLM);
    ck_assert_int_eq(tg_model_cfg(r)->dec_layers, 0);
    double s1[NROWS], s2[NROWS];
    score_rows(m, s1);
    score_rows(r, s2);
    for (int i = 0; i < NROWS; i++) ck_assert(s1[i] == s2[i]);
    tg_model_free(m);
    tg_model_free(r);
}
END_TEST

START_TEST(test_mlm_wrong_family) {
    tg_model *m = load_fixture("mha");
    int32_t p[1] = {5};
    tg_generation gen;
    ck_assert_int_eq(tg_generate(m, p, 1, NULL, &gen), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "a masked language model (arch mlm)");
    const int32_t *src[1] = {p};
    int64_t sn[1] = {1};
    tg_nbest *res = NULL;
    ck_assert_int_eq(tg_decode(m, src, sn, 1, NULL, &res), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "has no decoder");
    /* a vocabulary without <mask> */
    tg_vocab *v;
    ck_assert_int_eq(tg_vocab_new(&v), TG_OK);
    ck_assert_int_eq(tg_vocab_add(v, "a", NULL), TG_OK);
    tg_model_config c = tg_model_config_mlm_default();
    c.d_model = 8;
    c.heads = 2;
    c.enc_layers = 1;
    c.d_ff = 8;
    tg_model *bad = NULL;
    ck_assert_int_eq(tg_model_new(&c, v, v, B, 1, &bad), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "needs the token <mask>");
    c.dec_layers = 1;
    c.src_vocab = c.tgt_vocab = 10;
    ck_assert_int_eq(tg_model_config_check(&c), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "is an encoder");
    tg_model_free(m);
}
END_TEST

/* a small MLM learns which word follows which: masked-token accuracy far above chance */
START_TEST(test_mlm_trains) {
    tg_vocab *v = small_vocab(12);
    tg_model_config c = tg_model_config_mlm_default();
    c.d_model = 32;
    c.heads = 2;
    c.enc_layers = 2;
    c.d_ff = 64;
    c.max_len = 16;
    c.dropout = c.attn_dropout = 0.0f;
    tg_model *m;
    ck_assert_int_eq(tg_model_new(&c, v, v, B, 3, &m), TG_OK);
    ck_assert_int_lt(tg_store_find(tg_model_store(m), "decoder.norm.weight"), 0);
    /* counting sequences: w_k w_{k+1} ... (mod 12), 8 long; every masked word is predictable */
    enum { NS = 48, L = 8 };
    char text[NS][128], *lp[NS];
    for (int s = 0; s < NS; s++) {
        int o = 0;
        for (int j = 0; j < L; j++) o += snprintf(text[s] + o, sizeof text[s] - (size_t)o, "%sw%d", j ? " " : "", (s + j) % 12);
        lp[s] = text[s];
    }
    tg_lines lines = {.n = NS, .line = lp, .buf = NULL, .path = "counting"};
    tg_corpus_options co = {.max_len = 16};
    tg_corpus *corpus;
    ck_assert_int_eq(tg_corpus_new_mlm(&lines, v, &co, 0.3, 9, &corpus), TG_OK);
    ck_assert_int_eq(tg_corpus_size(corpus), NS);
    int64_t idx[NS];
    for (int i = 0; i < NS; i++) idx[i] = i;
    tg_batch b;
    ck_assert_int_eq(tg_corpus_batch(corpus, idx, NS, &b), TG_OK);
    ck_assert_int_eq(b.src_len, b.tgt_len);
    ck_assert(b.tgt_tokens >= NS && b.tgt_tokens < NS * L / 2);
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAM);
    tg_optim *opt;
    ck_assert_int_eq(tg_optim_new(tg_model_store(m), &oc, &opt), TG_OK);
    int64_t right0, total;
    ck_assert_int_eq(tg_model_mlm_accuracy(m, &b, &right0, &total), TG_OK);
    ck_assert_int_eq(total, b.tgt_tokens);
    for (int step = 0; step < 150; step++) {
        const tg_batch *bs[1] = {&b};
        tg_grad_info gi;
        ck_assert_int_eq(tg_store_zero_grad(tg_model_store(m)), TG_OK);
        ck_assert_msg(tg_train_grad(m, bs, 1, NULL, true, &gi) == TG_OK, "%s", tg_error_message());
        ck_assert_int_eq(gi.tgt_tokens, b.tgt_tokens);
        ck_assert_int_eq(tg_optim_step(opt, 3e-3f), TG_OK);
    }
    int64_t right;
    ck_assert_int_eq(tg_model_mlm_accuracy(m, &b, &right, &total), TG_OK);
    ck_assert_msg(right > 0.9 * (double)total, "masked accuracy %lld / %lld (before training %lld)", (long long)right,
                  (long long)total, (long long)right0);
    tg_batch_free(&b);
    tg_corpus_free(corpus);
    tg_optim_free(opt);
    tg_model_free(m);
}
END_TEST

/* counting sequences w_k w_{k+1} ... (mod 12), 8 long: NS lines in text/lp */
enum { CNT_NS = 48, CNT_L = 8 };
static tg_lines counting(char text[][128], char **lp) {
    for (int s = 0; s < CNT_NS; s++) {
        int o = 0;
        for (int j = 0; j < CNT_L; j++)
            o += snprintf(text[s] + o, 128 - (size_t)o, "%sw%d", j ? " " : "", (s + j) % 12);
        lp[s] = text[s];
    }
    return (tg_lines){.n = CNT_NS, .line = lp, .buf = NULL, .path = "counting"};
}

/* the masks of batch (epoch, index) of a batcher over c, as the batch's model input */
static void masks_at(tg_batcher *bt, int64_t epoch, int32_t *out, int64_t *n) {
    ck_assert_int_eq(tg_batcher_seek(bt, epoch, 0), TG_OK);
    tg_batch b;
    ck_assert_int_eq(tg_batcher_next(bt, &b), TG_OK);
    *n = b.size * b.src_len;
    memcpy(out, b.src, (size_t)*n * sizeof *out);
    tg_batch_free(&b);
}

/* dynamic masking (RoBERTa): the same batch position masks differently in another epoch, the
 * same again in the same epoch (a resumed run draws the same); static masking repeats */
START_TEST(test_mlm_dynamic_masks) {
    tg_vocab *v = small_vocab(12);
    char text[CNT_NS][128], *lp[CNT_NS];
    tg_lines lines = counting(text, lp);
    tg_corpus_options co = {.max_len = 16};
    tg_corpus *dyn, *stat;
    ck_assert_int_eq(tg_corpus_new_mlm_dynamic(&lines, v, &co, 0.15, 9, &dyn), TG_OK);
    ck_assert_int_eq(tg_corpus_new_mlm(&lines, v, &co, 0.15, 9, &stat), TG_OK);
    tg_corpus *cs[2] = {dyn, stat};
    for (int k = 0; k < 2; k++) {
        tg_batcher *bt;
        /* no shuffling: batch 0 holds the same sequences in every epoch */
        ck_assert_int_eq(tg_batcher_new(cs[k], 100000, 5, false, &bt), TG_OK);
        static int32_t e0[4096], e1[4096], e0b[4096];
        int64_t n0, n1, n0b;
        masks_at(bt, 0, e0, &n0);
        masks_at(bt, 1, e1, &n1);
        masks_at(bt, 0, e0b, &n0b);
        ck_assert(n0 == n1 && n0 == n0b && n0 >= CNT_NS * CNT_L);
        int64_t differ = 0, again = 0;
        for (int64_t i = 0; i < n0; i++) {
            differ += e0[i] != e1[i];
            again += e0[i] != e0b[i];
        }
        ck_assert_int_eq(again, 0);
        if (k == 0) ck_assert_msg(differ > 20, "epochs 0 and 1 differ in %lld inputs", (long long)differ);
        else ck_assert_int_eq(differ, 0);
        tg_batcher_free(bt);
    }
    tg_corpus_free(dyn);
    tg_corpus_free(stat);
    tg_vocab_free(v);
}
END_TEST

/* trained with dynamic masks on counting sequences, the model fills "w3 w4 <mask> w6 w7" with
 * w5 (tg_model_mlm_probs, what tg fill-mask prints) */
START_TEST(test_mlm_fill_mask_known) {
    tg_vocab *v = small_vocab(12);
    tg_model_config c = tg_model_config_mlm_default();
    c.d_model = 32;
    c.heads = 2;
    c.enc_layers = 2;
    c.d_ff = 64;
    c.max_len = 16;
    c.dropout = c.attn_dropout = 0.0f;
    tg_model *m;
    ck_assert_int_eq(tg_model_new(&c, v, v, B, 3, &m), TG_OK);
    const tg_vocab *mv = tg_model_tgt_vocab(m);
    char text[CNT_NS][128], *lp[CNT_NS];
    tg_lines lines = counting(text, lp);
    tg_corpus_options co = {.max_len = 16};
    tg_corpus *corpus;
    ck_assert_int_eq(tg_corpus_new_mlm_dynamic(&lines, mv, &co, 0.3, 9, &corpus), TG_OK);
    tg_batcher *bt;
    ck_assert_int_eq(tg_batcher_new(corpus, 100000, 5, true, &bt), TG_OK);
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAM);
    tg_optim *opt;
    ck_assert_int_eq(tg_optim_new(tg_model_store(m), &oc, &opt), TG_OK);
    for (int step = 0; step < 200; step++) { /* a batch per epoch: new masks every step */
        tg_batch b;
        ck_assert_int_eq(tg_batcher_next(bt, &b), TG_OK);
        const tg_batch *bs[1] = {&b};
        tg_grad_info gi;
        ck_assert_int_eq(tg_store_zero_grad(tg_model_store(m)), TG_OK);
        ck_assert_msg(tg_train_grad(m, bs, 1, NULL, true, &gi) == TG_OK, "%s", tg_error_message());
        ck_assert_int_eq(tg_optim_step(opt, 3e-3f), TG_OK);
        tg_batch_free(&b);
    }
    int32_t ids[5] = {tg_vocab_id(mv, "w3"), tg_vocab_id(mv, "w4"), tg_vocab_id(mv, "<mask>"), tg_vocab_id(mv, "w6"),
                      tg_vocab_id(mv, "w7")};
    int64_t V = tg_vocab_size(mv);
    float *p = malloc((size_t)(5 * V) * sizeof *p);
    ck_assert_msg(tg_model_mlm_probs(m, ids, 5, p) == TG_OK, "%s", tg_error_message());
    int32_t want = tg_vocab_id(mv, "w5");
    ck_assert_int_eq(tg_argmax(p + 2 * V, V), want);
    ck_assert_msg(p[2 * V + want] > 0.5f, "P(w5) = %.3f", (double)p[2 * V + want]);
    double sum = 0;
    for (int64_t t = 0; t < V; t++) sum += p[2 * V + t];
    tg_assert_close(sum, 1.0, 1e-4, 0);
    /* the wrong family */
    tg_model *lm;
    tg_model_config lc = tg_model_config_lm_default();
    lc.d_model = 8, lc.heads = 2, lc.dec_layers = 1, lc.d_ff = 8, lc.max_len = 8;
    tg_vocab *v2 = small_vocab(4);
    ck_assert_int_eq(tg_model_new(&lc, v2, v2, B, 1, &lm), TG_OK);
    ck_assert_int_eq(tg_model_mlm_probs(lm, ids, 5, p), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "not a masked language model (arch lm)");
    tg_model_free(lm);
    free(p);
    tg_optim_free(opt);
    tg_batcher_free(bt);
    tg_corpus_free(corpus);
    tg_model_free(m);
}
END_TEST

/* the classification head on the first token against PyTorch: each row's class log-probabilities */
START_TEST(test_mlm_classify_fixture) {
    char path[1024], *rows[NROWS];
    snprintf(path, sizeof path, "%s/fixtures/mlm/mlm_mha_cls.safetensors", TG_TEST_DATA);
    tg_model *m = NULL;
    ck_assert_msg(tg_model_load(path, B, &m) == TG_OK, "%s", tg_error_message());
    ck_assert_int_eq(tg_model_cfg(m)->classes, 3);
    snprintf(path, sizeof path, "%s/fixtures/mlm/masked.txt", TG_TEST_DATA);
    ck_assert_int_eq(tg_test_read_lines(path, rows, NROWS), NROWS);
    int32_t *ids[NROWS];
    int64_t len[NROWS], S = 0;
    for (int r = 0; r < NROWS; r++) {
        rows[r][strcspn(rows[r], "\t")] = '\0'; /* the input column */
        ck_assert_int_eq(tg_vocab_encode(tg_model_src_vocab(m), rows[r], &ids[r], &len[r]), TG_OK);
        if (len[r] + 1 > S) S = len[r] + 1;
    }
    int32_t *flat = calloc((size_t)(NROWS * S), sizeof *flat); /* tokens + </s>, <pad> after */
    for (int r = 0; r < NROWS; r++) {
        memcpy(flat + r * S, ids[r], (size_t)len[r] * sizeof *flat);
        flat[r * S + len[r]] = TG_EOS;
        free(ids[r]);
        free(rows[r]);
    }
    tg_graph *g = tg_graph_new();
    tg_graph_set_training(g, false);
    tg_tensor *lp = tg_keep(tg_log_softmax(tg_model_classify(m, g, flat, NROWS, S)));
    ck_assert_msg(lp != NULL, "%s", tg_error_message());
    float got[NROWS * 3];
    ck_assert_int_eq(tg_graph_run(g, B), TG_OK);
    ck_assert_int_eq(tg_tensor_read(lp, got, sizeof got), TG_OK);
    double gd[NROWS * 3];
    for (int i = 0; i < NROWS * 3; i++) gd[i] = got[i];
    snprintf(path, sizeof path, "%s/fixtures/mlm/mlm_mha_cls.cls", TG_TEST_DATA);
    tg_test_expect_scores(path, gd, NROWS * 3, 1e-4, "mlm_mha_cls");
    tg_graph_free(g);
    /* a model without a head */
    tg_model *plain = load_fixture("mha");
    g = tg_graph_new();
    ck_assert_ptr_null(tg_model_classify(plain, g, flat, 1, 1));
    free(flat);
    const char *msg;
    ck_assert_int_eq(tg_graph_status(g, &msg), TG_ERR_INVALID);
    tg_assert_msg_has(msg, "has no classification head");
    tg_graph_free(g);
    tg_model_free(plain);
    tg_model_free(m);
}
END_TEST


/* BERT's vocabulary layout ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, ordinary
 * tokens on both sides of them): tg_corpus_new_mlm_ids never chooses a special token, its random
 * replacements are ordinary tokens from both ranges, and every batch row ends with [SEP] */
START_TEST(test_mlm_bert_layout_masks) {
    enum { V = 150, NS = 400, L = 14 };
    static const int32_t special[5] = {0, 100, 101, 102, 103};
    static int32_t rows[NS][L];
    const int32_t *ids[NS];
    int64_t len[NS];
    for (int i = 0; i < NS; i++) { /* [CLS] w ... with an [UNK] and ids next to the specials */
        rows[i][0] = 101;
        for (int j = 1; j < L; j++) rows[i][j] = j == 5 ? 100 : j % 3 == 0 ? 99 + (j % 2) * 5 : 1 + (i * 7 + j * 13) % 98;
        ids[i] = rows[i];
        len[i] = L;
    }
    tg_mlm_layout lay = {.vocab_size = V, .mask = 103, .eos = 102, .special = special, .nspecial = 5};
    tg_corpus *c;
    ck_assert_int_eq(tg_corpus_new_mlm_ids(NS, ids, len, &lay, 0.3, 7, &c), TG_OK);
    tg_batcher *bt;
    ck_assert_int_eq(tg_batcher_new(c, 1000000, 3, false, &bt), TG_OK);
    int64_t chosen = 0, masked = 0, low = 0, high = 0, seen = 0;
    for (int epoch = 0; epoch < 4; epoch++) {
        tg_batch b;
        ck_assert_int_eq(tg_batcher_seek(bt, epoch, 0), TG_OK);
        ck_assert_int_eq(tg_batcher_next(bt, &b), TG_OK);
        ck_assert_int_eq(b.src_len, L + 1);
        ck_assert_int_eq(b.size, NS);
        for (int64_t r = 0; r < b.size; r++) {
            /* one batch of every row in order (no shuffling, equal lengths) */
            const int32_t *in = b.src + r * b.src_len, *tg = b.tgt_out + r * b.tgt_len, *orig = rows[r];
            ck_assert_int_eq(in[L], 102); /* [SEP] appended, never a target */
            ck_assert_int_eq(tg[L], TG_PAD);
            for (int j = 0; j < L; j++) {
                seen++;
                bool sp = orig[j] == 0 || (orig[j] >= 100 && orig[j] <= 103);
                if (tg[j] == TG_PAD) continue;
                chosen++;
                ck_assert_msg(!sp, "a special token (%d) chosen at %d", orig[j], j);
                if (in[j] == 103) masked++;
                else if (in[j] != tg[j]) { /* a random replacement: ordinary */
                    ck_assert_msg(in[j] > 0 && (in[j] < 100 || in[j] > 103) && in[j] < V, "replacement %d", in[j]);
                    low += in[j] < 100;
                    high += in[j] > 103;
                }
            }
            for (int j = 0; j < L; j++) /* specials stay themselves */
                if (orig[j] == 100 || orig[j] == 101) ck_assert_int_eq(in[j], orig[j]);
        }
        tg_batch_free(&b);
    }
    ck_assert_msg(chosen > 0.2 * seen, "%lld of %lld chosen", (long long)chosen, (long long)seen);
    tg_assert_close((double)masked / (double)chosen, 0.8, 0.03, 0);
    /* ordinary ids 1..99 and 104..149: 99 and 46 of 145 */
    ck_assert_msg(low > 0 && high > 0, "random replacements below [UNK] %lld, above [MASK] %lld", (long long)low,
                  (long long)high);
    tg_batcher_free(bt);
    tg_corpus_free(c);
    /* a layout whose ids are outside the vocabulary, or specials out of order: refused */
    static const int32_t unordered[2] = {101, 100};
    tg_mlm_layout bad = {.vocab_size = V, .mask = 103, .eos = 102, .special = unordered, .nspecial = 2};
    ck_assert_int_eq(tg_corpus_new_mlm_ids(NS, ids, len, &bad, 0.3, 7, &c), TG_ERR_INVALID);
    bad = lay;
    bad.mask = V;
    ck_assert_int_eq(tg_corpus_new_mlm_ids(NS, ids, len, &bad, 0.3, 7, &c), TG_ERR_INVALID);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("mlm");
    TCase *t = tcase_create("mlm");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_loop_test(t, test_mlm_fixture_scores, 0, (int)(sizeof kinds / sizeof kinds[0]));
    tcase_add_test(t, test_mlm_mask_rule);
    tcase_add_test(t, test_mlm_save_load);
    tcase_add_test(t, test_mlm_wrong_family);
    tcase_add_test(t, test_mlm_trains);
    tcase_add_test(t, test_mlm_dynamic_masks);
    tcase_add_test(t, test_mlm_bert_layout_masks);
    tcase_add_test(t, test_mlm_fill_mask_known);
    tcase_add_test(t, test_mlm_classify_fixture);
    suite_add_tcase(s, t);
    return s;
}
