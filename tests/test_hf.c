/* Models in and out (issue 57): checkpoint errors that name their cause, the model features of
 * BERT and GPT-2 in the zoo's families, tokenizers that travel in the checkpoint, and imported
 * Hugging Face models against transformers' own outputs on the tiny committed fixtures of
 * tests/fixtures/hf (made by tests/fixtures/make_hf_fixtures.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tg/decode.h"
#include "tg/hf.h"
#include "tg/model.h"
#include "tg/safetensors.h"
#include "tg/tokenizer.h"
#include "tg/train.h"
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

/* ---- imported models against transformers (float64 references) ---- */

typedef struct {
    tg_st_file *f;
} expected;

static expected open_expected(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/hf/%s/expected.safetensors", TG_TEST_DATA, dir);
    expected e;
    ck_assert_msg(tg_st_open(path, &e.f) == TG_OK, "%s", tg_error_message());
    return e;
}

/* tensor name.i of the reference as floats (malloc'ed), its element count in *n */
static float *ref(expected e, const char *name, int i, size_t *n) {
    char key[64];
    snprintf(key, sizeof key, "%s.%d", name, i);
    size_t k;
    ck_assert_msg(tg_st_find(e.f, key, &k) == TG_OK, "%s", tg_error_message());
    *n = tg_st_tensor_numel(e.f, k);
    float *x = malloc(*n * sizeof *x + 1);
    ck_assert_int_eq(tg_st_read_f32(e.f, k, x, *n), TG_OK);
    return x;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

static tg_model *import(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/hf/%s", TG_TEST_DATA, dir);
    tg_model *m = NULL;
    ck_assert_msg(tg_hf_import(path, B, &m) == TG_OK, "%s", tg_error_message());
    return m;
}

/* logits [n, V] of one sequence ids[0..n): encoder (mlm) or language model (lm) */
static float *logits_of(tg_model *m, const int32_t *ids, int64_t n) {
    tg_batch b = {.size = 1, .src_len = n, .tgt_len = n, .src = (int32_t *)ids, .tgt_in = (int32_t *)ids,
                  .tgt_out = (int32_t *)ids};
    tg_graph *g = tg_graph_new();
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    tg_tensor *l = tg_keep(tg_model_logits(m, g, &b));
    ck_assert_msg(l != NULL, "%s", tg_error_message());
    ck_assert_msg(tg_graph_run(g, B) == TG_OK, "%s", tg_error_message());
    float *x = tg_test_read_all(l);
    tg_graph_free(g);
    return x;
}

/* Every sentence of the BERT fixture: the tokenizer's ids equal HF's, and the final hidden
 * states, the masked-LM logits (BertForMaskedLM's head) and the mean-pooled normalised
 * embedding equal transformers' to 1e-5. Token-type embeddings, the embedding LayerNorm,
 * eps 1e-12, embedding scale 1 and the exact GELU each move these by more than that. */
START_TEST(test_bert_import_equals_transformers) {
    tg_model *m = import("bert");
    const tg_model_config *c = tg_model_cfg(m);
    ck_assert(c->arch == TG_ARCH_MLM && c->gelu_erf && c->embed_norm && c->mlm_head && c->type_vocab == 2);
    ck_assert(c->pool == TG_POOL_MEAN && c->normalize);
    const tg_tokenizer *t = tg_model_tokenizer(m);
    ck_assert_int_eq(tg_tokenizer_special(t, "unk"), 100);
    ck_assert_int_eq(tg_tokenizer_special(t, "bos"), 101);
    expected e = open_expected("bert");
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/hf/bert/sentences.txt", TG_TEST_DATA);
    char *lines[16];
    int ns = tg_test_read_lines(path, lines, 16);
    ck_assert_int_ge(ns, 5);
    int64_t d = c->d_model, V = c->tgt_vocab;
    double worst[3] = {0};
    for (int i = 0; i < ns; i++) {
        int32_t *ids;
        int64_t n;
        ck_assert_int_eq(tg_tokenizer_encode(t, lines[i], strlen(lines[i]), &ids, &n, NULL), TG_OK);
        size_t nr;
        float *rid = ref(e, "ids", i, &nr);
        ck_assert_int_eq((int64_t)nr, n);
        for (int64_t j = 0; j < n; j++) ck_assert_int_eq(ids[j], (int32_t)rid[j]);
        /* hidden states */
        tg_graph *g = tg_graph_new();
        tg_graph_set_training(g, false);
        tg_tensor *h = tg_keep(tg_model_encode(m, g, ids, 1, n, NULL));
        ck_assert_msg(h && tg_graph_run(g, B) == TG_OK, "%s", tg_error_message());
        float *hx = tg_test_read_all(h), *rh = ref(e, "hidden", i, &nr);
        ck_assert_int_eq((int64_t)nr, n * d);
        worst[0] = fmax(worst[0], max_diff(hx, rh, nr));
        tg_graph_free(g);
        float *lx = logits_of(m, ids, n), *rl = ref(e, "logits", i, &nr);
        ck_assert_int_eq((int64_t)nr, n * V);
        worst[1] = fmax(worst[1], max_diff(lx, rl, nr));
        float emb[64], *re = ref(e, "embedding", i, &nr);
        ck_assert_int_eq(tg_model_embed(m, ids, 1, n, c->pool, c->normalize, emb), TG_OK);
        worst[2] = fmax(worst[2], max_diff(emb, re, nr));
        free(hx), free(rh), free(lx), free(rl), free(re), free(rid), free(ids), free(lines[i]);
    }
    fprintf(stderr, "bert fixture: max |diff| hidden %.3g, logits %.3g, embedding %.3g\n", worst[0], worst[1], worst[2]);
    ck_assert_msg(worst[0] < 1e-5 && worst[1] < 1e-5 && worst[2] < 1e-5, "hidden %g logits %g embedding %g", worst[0],
                  worst[1], worst[2]);
    tg_st_close(e.f);
    tg_model_free(m);
}
END_TEST

/* GPT-2: byte-level BPE ids, logits to 1e-5, and greedy continuation equal to transformers'
 * generate (12 tokens, the whole prefix re-run each step). */
/* tg train --init of an imported GPT-2 trains on a stream of its byte-level BPE: a one-line
 * document is its ids and <|endoftext|> (no start token), and the loss of that stream (what the
 * first step of a continued run measures) is the cross-entropy of transformers' logits: each id
 * predicting the next, the last <|endoftext|> (id 0 here, which a loss ignoring id 0 as padding
 * would leave out) */
START_TEST(test_gpt2_stream_loss_equals_transformers) {
    tg_model *m = import("gpt2");
    const tg_tokenizer *t = tg_model_tokenizer(m);
    int64_t V = tg_model_cfg(m)->tgt_vocab;
    int32_t eot = tg_tokenizer_special(t, "eos");
    expected e = open_expected("gpt2");
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/hf/gpt2/sentences.txt", TG_TEST_DATA);
    char *lines[16];
    int ns = tg_test_read_lines(path, lines, 16);
    for (int i = 0; i < ns; i++) {
        char *one[1] = {lines[i]};
        tg_lines l = {.n = 1, .line = one, .buf = NULL, .path = (char *)"sentence"};
        const tg_lines *texts[1] = {&l};
        tg_stream_options so = {.text = {.tokenizer = t}, .docs = TG_DOCS_LINES};
        int32_t *ids;
        int64_t n;
        ck_assert_msg(tg_stream_encode(texts, 1, tg_model_tgt_vocab(m), &so, &ids, &n) == TG_OK, "%s", tg_error_message());
        size_t nr;
        float *rid = ref(e, "ids", i, &nr), *rl = ref(e, "logits", i, &nr);
        int64_t k = (int64_t)nr / V; /* the sentence's ids, then <|endoftext|> */
        ck_assert_int_eq(n, k + 1);
        ck_assert_int_eq(ids[k], eot);
        double hf = 0.0;
        for (int64_t j = 0; j < k; j++) {
            ck_assert_int_eq(ids[j], (int32_t)rid[j]);
            int32_t next = j + 1 < k ? (int32_t)rid[j + 1] : eot;
            double mx = -INFINITY, sum = 0.0;
            for (int64_t v = 0; v < V; v++) mx = fmax(mx, rl[j * V + v]);
            for (int64_t v = 0; v < V; v++) sum += exp(rl[j * V + v] - mx);
            hf += -(rl[j * V + next] - mx - log(sum));
        }
        tg_corpus *c;
        ck_assert_int_eq(tg_corpus_new_stream(ids, n, tg_model_cfg(m)->max_len, &c), TG_OK);
        tg_corpus_set_target_pad(c, tg_model_cfg(m)->pad_id);
        tg_eval_info info;
        ck_assert_msg(tg_train_evaluate(m, c, 100000, &info) == TG_OK, "%s", tg_error_message());
        ck_assert_int_eq(info.tgt_tokens, k);
        ck_assert_msg(fabs(info.nll - hf / (double)k) < 1e-5, "sentence %d: loss %.8f, transformers' %.8f", i, info.nll,
                      hf / (double)k);
        tg_corpus_free(c);
        free(ids), free(rid), free(rl), free(lines[i]);
    }
    tg_st_close(e.f);
    tg_model_free(m);
}
END_TEST

/* tg_model_mlm_probs (what tg fill-mask reads) of an imported BERT: the ids as its tokenizer
 * makes them, [CLS] ... [SEP] with nothing appended, give the softmax of transformers' logits */
START_TEST(test_bert_mlm_probs_equal_transformers) {
    tg_model *m = import("bert");
    const tg_tokenizer *t = tg_model_tokenizer(m);
    expected e = open_expected("bert");
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/hf/bert/sentences.txt", TG_TEST_DATA);
    char *lines[16];
    int ns = tg_test_read_lines(path, lines, 16);
    int64_t V = tg_model_cfg(m)->tgt_vocab;
    double worst = 0.0;
    for (int i = 0; i < ns; i++) {
        int32_t *ids;
        int64_t n;
        ck_assert_int_eq(tg_tokenizer_encode(t, lines[i], strlen(lines[i]), &ids, &n, NULL), TG_OK);
        float *p = malloc((size_t)(n * V) * sizeof *p);
        ck_assert_msg(tg_model_mlm_probs(m, ids, n, p) == TG_OK, "%s", tg_error_message());
        size_t nr;
        float *rl = ref(e, "logits", i, &nr);
        ck_assert_int_eq((int64_t)nr, n * V);
        for (int64_t r = 0; r < n; r++) {
            double mx = -INFINITY, sum = 0.0;
            for (int64_t v = 0; v < V; v++) mx = fmax(mx, rl[r * V + v]);
            for (int64_t v = 0; v < V; v++) sum += exp(rl[r * V + v] - mx);
            for (int64_t v = 0; v < V; v++) worst = fmax(worst, fabs(p[r * V + v] - exp(rl[r * V + v] - mx) / sum));
        }
        free(p), free(rl), free(ids), free(lines[i]);
    }
    ck_assert_msg(worst < 1e-6, "probabilities differ by %g", worst);
    tg_st_close(e.f);
    tg_model_free(m);
}
END_TEST

START_TEST(test_gpt2_import_equals_transformers) {
    tg_model *m = import("gpt2");
    const tg_model_config *c = tg_model_cfg(m);
    ck_assert(c->arch == TG_ARCH_LM && c->pad_id == -1 && !c->gelu_erf && c->pre_norm);
    const tg_tokenizer *t = tg_model_tokenizer(m);
    expected e = open_expected("gpt2");
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/hf/gpt2/sentences.txt", TG_TEST_DATA);
    char *lines[16];
    int ns = tg_test_read_lines(path, lines, 16);
    int64_t V = c->tgt_vocab;
    double worst = 0.0;
    for (int i = 0; i < ns; i++) {
        int32_t *ids;
        int64_t n;
        ck_assert_int_eq(tg_tokenizer_encode(t, lines[i], strlen(lines[i]), &ids, &n, NULL), TG_OK);
        size_t nr;
        float *rid = ref(e, "ids", i, &nr);
        ck_assert_msg((int64_t)nr == n, "sentence %d: %lld ids, HF %zu", i, (long long)n, nr);
        for (int64_t j = 0; j < n; j++) ck_assert_int_eq(ids[j], (int32_t)rid[j]);
        float *lx = logits_of(m, ids, n), *rl = ref(e, "logits", i, &nr);
        ck_assert_int_eq((int64_t)nr, n * V);
        worst = fmax(worst, max_diff(lx, rl, nr));
        free(lx);
        float *rg = ref(e, "greedy", i, &nr);
        int32_t seq[64];
        memcpy(seq, ids, (size_t)n * sizeof *seq);
        for (size_t k = 0; k < nr; k++) {
            float *l = logits_of(m, seq, n + (int64_t)k);
            seq[n + (int64_t)k] = (int32_t)tg_argmax(l + (n + (int64_t)k - 1) * V, V);
            free(l);
            ck_assert_msg(seq[n + (int64_t)k] == (int32_t)rg[k], "sentence %d greedy token %zu: %d, HF %d", i, k,
                          seq[n + (int64_t)k], (int)rg[k]);
        }
        /* tg_generate, cached and not: the prompt alone (no start token), id 0 a token like
         * any other (GPT-2 has no padding: a decoder that masked or refused id 0 differs) */
        for (int cached = 0; cached < 2; cached++) {
            tg_generate_options go = tg_generate_options_default();
            go.max_new = (int64_t)nr;
            go.sample.temperature = 0.0f;
            go.cached = cached;
            tg_generation gen;
            ck_assert_msg(tg_generate(m, ids, n, &go, &gen) == TG_OK, "%s", tg_error_message());
            int32_t eot = tg_tokenizer_special(t, "eos");
            ck_assert_msg(gen.len == (int64_t)nr || (gen.finished && (int32_t)rg[gen.len] == eot),
                          "sentence %d: %lld tokens generated, HF %zu", i, (long long)gen.len, nr);
            for (int64_t k = 0; k < gen.len; k++)
                ck_assert_msg(gen.ids[k] == (int32_t)rg[k], "sentence %d tg_generate (cached %d) token %lld: %d, HF %d", i,
                              cached, (long long)k, gen.ids[k], (int)rg[k]);
            tg_generation_free(&gen);
        }
        char *text = NULL;
        ck_assert_int_eq(tg_tokenizer_decode(t, ids, n, &text), TG_OK);
        ck_assert_str_eq(text, lines[i]); /* byte-level BPE round-trips the text */
        free(text), free(rl), free(rg), free(rid), free(ids), free(lines[i]);
    }
    /* no prompt: the text starts at <|endoftext|>, id 0 in this vocabulary, fed to the decoder
     * (refused as padding, or masked as a padding key without the cache, before the pad id came
     * from the model); cached and full agree */
    tg_generation g2[2];
    for (int cached = 0; cached < 2; cached++) {
        tg_generate_options go = tg_generate_options_default();
        go.max_new = 8;
        go.sample.temperature = 0.0f;
        go.cached = cached;
        ck_assert_msg(tg_generate(m, NULL, 0, &go, &g2[cached]) == TG_OK, "%s", tg_error_message());
    }
    ck_assert_int_eq(g2[0].len, g2[1].len);
    for (int64_t k = 0; k < g2[0].len; k++) ck_assert_int_eq(g2[0].ids[k], g2[1].ids[k]);
    tg_generation_free(&g2[0]), tg_generation_free(&g2[1]);
    fprintf(stderr, "gpt2 fixture: max |diff| logits %.3g\n", worst);
    ck_assert_msg(worst < 1e-5, "logits differ by %g", worst);
    tg_st_close(e.f);
    tg_model_free(m);
}
END_TEST

/* An imported model saved and loaded: the new config keys, the vocabulary in BERT's layout and
 * the tokenizer come back, and the embeddings are bit-identical. */
START_TEST(test_imported_model_save_load) {
    tg_model *m = import("bert");
    char path[] = "/tmp/tg_hf_save_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_msg(tg_model_save(m, path) == TG_OK, "%s", tg_error_message());
    tg_model *l = NULL;
    ck_assert_msg(tg_model_load(path, B, &l) == TG_OK, "%s", tg_error_message());
    const tg_model_config *a = tg_model_cfg(m), *b = tg_model_cfg(l);
    ck_assert(a->type_vocab == b->type_vocab && a->embed_norm == b->embed_norm && a->gelu_erf == b->gelu_erf &&
              a->mlm_head == b->mlm_head && a->norm_eps == b->norm_eps && a->embed_scale == b->embed_scale &&
              a->pad_id == b->pad_id && a->pool == b->pool && a->normalize == b->normalize);
    ck_assert_str_eq(tg_vocab_token(tg_model_src_vocab(l), 100), "[UNK]");
    const tg_tokenizer *t = tg_model_tokenizer(l);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(tg_tokenizer_kind(t), TG_TOK_WORDPIECE);
    int32_t *ids;
    int64_t n;
    ck_assert_int_eq(tg_tokenizer_encode(t, "The earth was formless.", 23, &ids, &n, NULL), TG_OK);
    float e1[64], e2[64];
    ck_assert_int_eq(tg_model_embed(m, ids, 1, n, TG_POOL_MEAN, true, e1), TG_OK);
    ck_assert_int_eq(tg_model_embed(l, ids, 1, n, TG_POOL_MEAN, true, e2), TG_OK);
    ck_assert(memcmp(e1, e2, 32 * sizeof *e1) == 0);
    free(ids);
    tg_model_free(l);
    tg_model_free(m);
    unlink(path);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("hf");
    TCase *tc = tcase_create("hf");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_load_names_a_foreign_format);
    tcase_add_test(tc, test_wordpiece_equals_hf);
    tcase_add_test(tc, test_bert_import_equals_transformers);
    tcase_add_test(tc, test_gpt2_import_equals_transformers);
    tcase_add_test(tc, test_bert_mlm_probs_equal_transformers);
    tcase_add_test(tc, test_gpt2_stream_loss_equals_transformers);
    tcase_add_test(tc, test_imported_model_save_load);
    suite_add_tcase(s, tc);
    return s;
}
