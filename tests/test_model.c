/* The model zoo against docs/model.md: PyTorch reference scores for every attention kind and both
 * norm placements (fixtures from tests/fixtures/make_model_fixtures.py), the identities of
 * docs/model.md §2, masking, and save -> load -> score. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/graph-impl.h"
#include "models/model-impl.h"
#include "tg/model.h"
#include "tg_check.h"

static tg_backend *B;
static void setup(void) { ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK); }
static void teardown(void) { tg_backend_free(B); }

#define NPAIRS 8
static char *lines_src[NPAIRS], *lines_tgt[NPAIRS];

/* score sentence pairs with a model, batched as given */
static void score_pairs(tg_model *m, char **src, char **tgt, int n, double *scores) {
    int32_t *sid[NPAIRS], *tid[NPAIRS];
    int64_t sn[NPAIRS], tn[NPAIRS];
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(tg_vocab_encode(tg_model_src_vocab(m), src[i], &sid[i], &sn[i]), TG_OK);
        ck_assert_int_eq(tg_vocab_encode(tg_model_tgt_vocab(m), tgt[i], &tid[i], &tn[i]), TG_OK);
    }
    tg_batch b;
    ck_assert_int_eq(tg_batch_build(&b, n, (const int32_t *const *)sid, sn, (const int32_t *const *)tid, tn), TG_OK);
    ck_assert_msg(tg_model_score(m, &b, scores) == TG_OK, "%s", tg_error_message());
    tg_batch_free(&b);
    for (int i = 0; i < n; i++) {
        free(sid[i]);
        free(tid[i]);
    }
}

static const char *fixtures[] = {
    "mha_post", "mha_pre", "fixed_head_post", "fixed_head_pre", "talking_heads_post",
    "talking_heads_pre", "interacting_post", "interacting_pre", "interacting_pairwise_post",
    "interacting_pairwise_pre",
};

/* tg score equals PyTorch's float64 reference (relative 1e-4, the float32 budget the fixture
 * README states), for each pair, all pairs in one padded batch and each pair alone. */
START_TEST(test_fixture_scores) {
    char path[512];
    snprintf(path, sizeof path, "%s/fixtures/models/pairs.src", TG_TEST_DATA);
    int n = tg_test_read_lines(path, lines_src, NPAIRS);
    snprintf(path, sizeof path, "%s/fixtures/models/pairs.tgt", TG_TEST_DATA);
    ck_assert_int_eq(tg_test_read_lines(path, lines_tgt, NPAIRS), n);
    snprintf(path, sizeof path, "%s/fixtures/models/%s.safetensors", TG_TEST_DATA, fixtures[_i]);
    tg_model *m;
    ck_assert_msg(tg_model_load(path, B, &m) == TG_OK, "%s", tg_error_message());
    snprintf(path, sizeof path, "%s/fixtures/models/%s.scores", TG_TEST_DATA, fixtures[_i]);
    FILE *f = fopen(path, "r");
    ck_assert(f != NULL);
    double ref[NPAIRS], got[NPAIRS], one;
    for (int i = 0; i < n; i++) ck_assert_int_eq(fscanf(f, "%lf", &ref[i]), 1);
    fclose(f);
    score_pairs(m, lines_src, lines_tgt, n, got);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(fabs(got[i] - ref[i]) <= 1e-4 * fabs(ref[i]) + 1e-5, "%s pair %d: %.9f vs %.9f",
                      fixtures[_i], i, got[i], ref[i]);
        score_pairs(m, &lines_src[i], &lines_tgt[i], 1, &one);
        ck_assert_msg(fabs(one - got[i]) <= 1e-5 * fabs(got[i]) + 1e-6, "%s pair %d alone: %.9f vs batched %.9f",
                      fixtures[_i], i, one, got[i]);
    }
    tg_model_free(m);
    for (int i = 0; i < n; i++) {
        free(lines_src[i]);
        free(lines_tgt[i]);
    }
}
END_TEST

/* ---- identities of docs/model.md §2 on one attention sub-layer ---- */

static tg_model *tiny_from(const tg_model_config *c);

static tg_model *tiny_opts(tg_attn_kind kind, int64_t heads, int64_t head_dim, bool literal, bool no_out_proj) {
    tg_model_config c = tg_model_config_default();
    c.no_out_proj = no_out_proj;
    c.d_model = 8;
    c.heads = heads;
    c.enc_layers = 1;
    c.dec_layers = 1;
    c.d_ff = 16;
    c.attention = kind;
    c.head_dim = head_dim;
    c.interacting_literal = literal;
    c.max_len = 32;
    c.share_embeddings = true;
    return tiny_from(&c);
}

/* a model of configuration c over the tiny models' vocabulary of 6 tokens */
static tg_model *tiny_from(const tg_model_config *c) {
    tg_vocab *v;
    ck_assert_int_eq(tg_vocab_new(&v), TG_OK);
    for (int i = 0; i < 6; i++) {
        char t[8];
        snprintf(t, sizeof t, "t%d", i);
        tg_vocab_add(v, t, NULL);
    }
    tg_model *m;
    ck_assert_msg(tg_model_new(c, v, v, B, 7, &m) == TG_OK, "%s", tg_error_message());
    return m;
}

static tg_model *tiny(tg_attn_kind kind, int64_t heads, int64_t head_dim, bool literal) {
    return tiny_opts(kind, heads, head_dim, literal, false);
}

/* copy every parameter of `from` that `to` has with the same size; perturb biases so they count */
static void copy_params(tg_model *from, tg_model *to) {
    tg_store *a = tg_model_store(from), *b = tg_model_store(to);
    for (int64_t i = 0; i < tg_store_count(b); i++) {
        int64_t j = tg_store_find(a, tg_store_name(b, i));
        if (j < 0 || tg_store_numel(a, j) != tg_store_numel(b, i)) continue;
        int64_t n = tg_store_numel(a, j);
        float *w = malloc((size_t)n * 4);
        tg_store_read(a, j, w, n);
        tg_store_write(b, i, w, n);
        free(w);
    }
}

static void randomize_biases(tg_model *m) {
    tg_store *s = tg_model_store(m);
    tg_rng r;
    tg_rng_init(&r, 99);
    for (int64_t i = 0; i < tg_store_count(s); i++) {
        if (!strstr(tg_store_name(s, i), "bias")) continue;
        int64_t n = tg_store_numel(s, i);
        float *w = malloc((size_t)n * 4);
        for (int64_t k = 0; k < n; k++) w[k] = (float)(0.3 * tg_rng_normal(&r));
        tg_store_write(s, i, w, n);
        free(w);
    }
}

#define BB 2
#define NQ 3
#define NK 4
/* out = attention(xq, xkv, mask) of one sub-layer; optionally gradients w.r.t. xq and xkv */
static void attend(tg_model *m, float *out, float *gq, float *gkv) {
    float xq[BB * NQ * 8], xkv[BB * NK * 8], mask[BB * NK] = {0, 0, 0, 1, 0, 0, 1, 1};
    tg_rng r;
    tg_rng_init(&r, 5);
    for (int i = 0; i < BB * NQ * 8; i++) xq[i] = (float)tg_rng_normal(&r);
    for (int i = 0; i < BB * NK * 8; i++) xkv[i] = (float)tg_rng_normal(&r);
    tg_graph *g = tg_graph_new();
    tg_graph_set_training(g, false);
    int64_t sq[3] = {BB, NQ, 8}, sk[3] = {BB, NK, 8}, sm[4] = {BB, 1, 1, NK};
    tg_tensor *q = tg_requires_grad(tg_input(g, TG_DTYPE_F32, 3, sq, xq));
    tg_tensor *kv = tg_requires_grad(tg_input(g, TG_DTYPE_F32, 3, sk, xkv));
    tg_tensor *y = tg_keep(tg_model_attention(m, g, "encoder.layers.0.self_attn", q, kv,
                                              tg_input(g, TG_DTYPE_F32, 4, sm, mask)));
    ck_assert_msg(y != NULL, "%s", tg_error_message());
    tg_tensor *w = tg_full(g, 1.0f, 3, sq);
    ck_assert_int_eq(tg_backward(g, tg_sum_all(tg_mul(tg_mul(y, y), w))), TG_OK);
    tg_tensor *dq = tg_grad(g, q), *dkv = tg_grad(g, kv);
    ck_assert_msg(tg_graph_run(g, B) == TG_OK, "%s", tg_error_message());
    ck_assert_int_eq(tg_tensor_read(y, out, sizeof(float) * BB * NQ * 8), TG_OK);
    if (gq) ck_assert_int_eq(tg_tensor_read(dq, gq, sizeof(float) * BB * NQ * 8), TG_OK);
    if (gkv) ck_assert_int_eq(tg_tensor_read(dkv, gkv, sizeof(float) * BB * NK * 8), TG_OK);
    tg_graph_free(g);
}

static void assert_close_arrays(const float *a, const float *b, int n, double tol, const char *what) {
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(a[i] - b[i]) <= tol * (1.0 + fabs(b[i])), "%s[%d]: %.8g vs %.8g", what, i, a[i], b[i]);
}

static void check_same(tg_model *a, tg_model *b, bool grads, const char *what) {
    float ya[BB * NQ * 8], yb[BB * NQ * 8], qa[BB * NQ * 8], qb[BB * NQ * 8], ka[BB * NK * 8], kb[BB * NK * 8];
    attend(a, ya, qa, ka);
    attend(b, yb, qb, kb);
    assert_close_arrays(ya, yb, BB * NQ * 8, 1e-5, what);
    if (grads) {
        assert_close_arrays(qa, qb, BB * NQ * 8, 1e-5, what);
        assert_close_arrays(ka, kb, BB * NK * 8, 1e-5, what);
    }
}

START_TEST(test_fixed_head_equals_mha) {
    tg_model *mha = tiny(TG_ATTN_MHA, 2, 0, false), *fh = tiny(TG_ATTN_FIXED_HEAD, 2, 4, false);
    randomize_biases(mha);
    copy_params(mha, fh);
    check_same(mha, fh, true, "fixed_head(d_p = d/h) vs mha");
    tg_model_free(mha);
    tg_model_free(fh);
}
END_TEST

START_TEST(test_talking_heads_identity_equals_mha) {
    tg_model *mha = tiny(TG_ATTN_MHA, 2, 0, false), *th = tiny(TG_ATTN_TALKING_HEADS, 2, 0, false);
    randomize_biases(mha);
    copy_params(mha, th); /* pre/post mixing stay at their identity initialisation */
    check_same(mha, th, true, "talking_heads(I, I) vs mha");
    tg_model_free(mha);
    tg_model_free(th);
}
END_TEST

START_TEST(test_talking_heads_mixing_matters) {
    tg_model *mha = tiny(TG_ATTN_MHA, 2, 0, false), *th = tiny(TG_ATTN_TALKING_HEADS, 2, 0, false);
    copy_params(mha, th);
    tg_store *s = tg_model_store(th);
    float p[4] = {0.2f, 0.8f, 0.9f, 0.1f};
    ck_assert_int_eq(tg_store_write(s, tg_store_find(s, "encoder.layers.0.self_attn.pre_softmax_proj"), p, 4), TG_OK);
    float ya[BB * NQ * 8], yb[BB * NQ * 8];
    attend(mha, ya, NULL, NULL);
    attend(th, yb, NULL, NULL);
    double diff = 0;
    for (int i = 0; i < BB * NQ * 8; i++) diff += fabs(ya[i] - yb[i]);
    ck_assert_msg(diff > 1e-3, "mixing matrix had no effect (%g)", diff);
    tg_model_free(mha);
    tg_model_free(th);
}
END_TEST

START_TEST(test_interacting_literal_equals_summed) {
    for (int h = 1; h <= 4; h *= 2) {
        tg_model *lit = tiny(TG_ATTN_INTERACTING, h, 0, true), *sum = tiny(TG_ATTN_INTERACTING, h, 0, false);
        randomize_biases(lit);
        copy_params(lit, sum);
        check_same(lit, sum, true, "interacting literal vs summed");
        tg_model_free(lit);
        tg_model_free(sum);
    }
}
END_TEST

/* interacting without output projection (the authors' public code) == interacting whose W_O is
 * the identity and b_O zero; it has no out_proj parameters, and save/load keeps the option */
START_TEST(test_interacting_no_out_proj) {
    for (int h = 1; h <= 4; h *= 2) {
        tg_model *np = tiny_opts(TG_ATTN_INTERACTING, h, 0, false, true), *it = tiny(TG_ATTN_INTERACTING, h, 0, false);
        randomize_biases(it);
        copy_params(it, np);
        tg_store *s = tg_model_store(it);
        for (int64_t i = 0; i < tg_store_count(s); i++) {
            const char *name = tg_store_name(s, i);
            if (!strstr(name, "out_proj.")) continue;
            ck_assert_msg(tg_store_find(tg_model_store(np), name) < 0, "no_out_proj model has %s", name);
            int64_t n = tg_store_numel(s, i);
            float *w = calloc((size_t)n, 4);
            if (strstr(name, "weight"))
                for (int64_t k = 0; k < 8; k++) w[k * 8 + k] = 1.0f; /* [d, d] identity, d = 8 */
            tg_store_write(s, i, w, n);
            free(w);
        }
        check_same(np, it, true, "interacting no_out_proj vs interacting with W_O = I");
        tg_model_free(it);
        /* the saved configuration keeps the option (a model without it would lack out_proj) */
        char path[] = "/tmp/tg_model_XXXXXX";
        int fd = mkstemp(path);
        ck_assert(fd >= 0);
        close(fd);
        tg_model *back;
        ck_assert_msg(tg_model_save(np, path) == TG_OK, "%s", tg_error_message());
        ck_assert_msg(tg_model_load(path, B, &back) == TG_OK, "%s", tg_error_message());
        ck_assert(tg_model_cfg(back)->no_out_proj);
        check_same(np, back, false, "no_out_proj after save/load");
        unlink(path);
        tg_model_free(back);
        tg_model_free(np);
    }
    /* only an option of the interacting kind */
    tg_model_config c = tg_model_config_default();
    c.src_vocab = c.tgt_vocab = 10;
    c.no_out_proj = true;
    ck_assert_int_eq(tg_model_config_check(&c), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "no_out_proj applies to the interacting kind only");
}
END_TEST

/* interacting_sqrt_h (a diagnostic reading: logits over sqrt(d_k h)) equals interacting whose
 * query projection, weight and bias, is divided by sqrt(h); values and gradients, 2 and 4 heads,
 * and the option survives a save and load; it is refused on other kinds */
START_TEST(test_interacting_sqrt_h) {
    for (int h = 2; h <= 4; h *= 2) {
        tg_model *it = tiny(TG_ATTN_INTERACTING, h, 0, false);
        tg_model_config c = *tg_model_cfg(it);
        c.interacting_sqrt_h = true;
        tg_model *sq = tiny_from(&c);
        randomize_biases(it);
        copy_params(it, sq);
        tg_store *s = tg_model_store(it);
        const char *names[2] = {"encoder.layers.0.self_attn.q_proj.weight",
                                "encoder.layers.0.self_attn.q_proj.bias"};
        for (int k = 0; k < 2; k++) {
            int64_t i = tg_store_find(s, names[k]), n = tg_store_numel(s, i);
            float w[64];
            tg_store_read(s, i, w, n);
            for (int64_t x = 0; x < n; x++) w[x] /= sqrtf((float)h);
            tg_store_write(s, i, w, n);
        }
        check_same(sq, it, true, "interacting_sqrt_h vs interacting with W_Q / sqrt(h)");
        char path[] = "/tmp/tg_model_XXXXXX";
        int fd = mkstemp(path);
        ck_assert(fd >= 0);
        close(fd);
        tg_model *back;
        ck_assert_msg(tg_model_save(sq, path) == TG_OK, "%s", tg_error_message());
        ck_assert_msg(tg_model_load(path, B, &back) == TG_OK, "%s", tg_error_message());
        ck_assert(tg_model_cfg(back)->interacting_sqrt_h);
        check_same(sq, back, false, "interacting_sqrt_h after save/load");
        unlink(path);
        tg_model_free(back);
        tg_model_free(sq);
        tg_model_free(it);
    }
    tg_model_config c = tg_model_config_default();
    c.src_vocab = c.tgt_vocab = 10;
    c.interacting_sqrt_h = true;
    ck_assert_int_eq(tg_model_config_check(&c), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "interacting_sqrt_h applies to the interacting kind only");
}
END_TEST

/* interacting(W_Q) == mha(W_Q') where every head block of W_Q' is the sum of W_Q's blocks */
START_TEST(test_interacting_equals_mha_with_summed_query) {
    tg_model *it = tiny(TG_ATTN_INTERACTING, 2, 0, false), *mha = tiny(TG_ATTN_MHA, 2, 0, false);
    randomize_biases(it);
    copy_params(it, mha);
    tg_store *s = tg_model_store(mha);
    const char *names[2] = {"encoder.layers.0.self_attn.q_proj.weight", "encoder.layers.0.self_attn.q_proj.bias"};
    for (int k = 0; k < 2; k++) {
        int64_t i = tg_store_find(s, names[k]), n = tg_store_numel(s, i), row = n / 8; /* d = 8 rows */
        float w[64], sum[64] = {0};
        tg_store_read(s, i, w, n);
        /* rows [h*4, h*4+4) are head h; d_k = 4 */
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < row; c++) sum[(r % 4) * row + c] += w[r * row + c];
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < row; c++) w[r * row + c] = sum[(r % 4) * row + c];
        tg_store_write(s, i, w, n);
    }
    check_same(it, mha, false, "interacting vs mha(summed query)");
    tg_model_free(it);
    tg_model_free(mha);
}
END_TEST

START_TEST(test_pairwise_one_head_equals_mha) {
    tg_model *pw = tiny(TG_ATTN_INTERACTING_PAIRWISE, 1, 0, false), *mha = tiny(TG_ATTN_MHA, 1, 0, false);
    randomize_biases(pw);
    copy_params(pw, mha);
    check_same(pw, mha, true, "pairwise(h = 1) vs mha");
    tg_model_free(pw);
    tg_model_free(mha);
}
END_TEST

/* a padded key must not change the output; the fully masked case gives no NaN */
START_TEST(test_padding_keys_do_not_matter) {
    tg_model *m = tiny((tg_attn_kind)_i, 2, 0, false);
    tg_batch b1, b2;
    int32_t s1[3] = {4, 5, 6}, t1[2] = {7, 8}, s2[1] = {4};
    const int32_t *sp[2] = {s1, s2}, *tp[2] = {t1, t1};
    int64_t sn[2] = {3, 1}, tn[2] = {2, 2};
    double alone, batched[2];
    ck_assert_int_eq(tg_batch_build(&b1, 1, sp + 1, sn + 1, tp + 1, tn + 1), TG_OK);
    ck_assert_int_eq(tg_batch_build(&b2, 2, sp, sn, tp, tn), TG_OK);
    ck_assert_int_eq(tg_model_score(m, &b1, &alone), TG_OK);
    ck_assert_int_eq(tg_model_score(m, &b2, batched), TG_OK);
    ck_assert_msg(fabs(alone - batched[1]) < 1e-5, "%s: %.8f alone vs %.8f padded", tg_attn_kind_name((tg_attn_kind)_i),
                  alone, batched[1]);
    ck_assert(isfinite(batched[0]));
    tg_batch_free(&b1);
    tg_batch_free(&b2);
    tg_model_free(m);
}
END_TEST

START_TEST(test_save_load_score_identical) {
    tg_model *m = tiny((tg_attn_kind)_i, 2, 3, false), *m2;
    randomize_biases(m);
    char path[] = "/tmp/tg_model_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    ck_assert_msg(tg_model_save(m, path) == TG_OK, "%s", tg_error_message());
    ck_assert_msg(tg_model_load(path, B, &m2) == TG_OK, "%s", tg_error_message());
    int32_t s[3] = {4, 5, 9}, t[2] = {7, 8};
    const int32_t *sp[1] = {s}, *tp[1] = {t};
    int64_t sn[1] = {3}, tn[1] = {2};
    tg_batch b;
    double a, c;
    ck_assert_int_eq(tg_batch_build(&b, 1, sp, sn, tp, tn), TG_OK);
    ck_assert_int_eq(tg_model_score(m, &b, &a), TG_OK);
    ck_assert_int_eq(tg_model_score(m2, &b, &c), TG_OK);
    ck_assert_msg(a == c, "%.9f vs %.9f", a, c);
    ck_assert_int_eq(tg_model_cfg(m2)->attention, (tg_attn_kind)_i);
    tg_batch_free(&b);
    tg_model_free(m);
    tg_model_free(m2);
    unlink(path);
}
END_TEST

START_TEST(test_bad_config_errors) {
    tg_model_config c = tg_model_config_default();
    c.src_vocab = c.tgt_vocab = 10;
    c.heads = 3; /* 512 % 3 != 0 */
    ck_assert_int_eq(tg_model_config_check(&c), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "not a multiple of heads");
    tg_attn_kind k;
    ck_assert_int_eq(tg_attn_kind_parse("bogus", &k), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "unknown attention kind 'bogus'");
    c = tg_model_config_default();
    c.src_vocab = c.tgt_vocab = 10;
    c.dropout = 1.5f;
    ck_assert_int_eq(tg_model_config_check(&c), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "dropout");
    ck_assert_int_eq(tg_model_max_heads(256, 7.5), 34);
}
END_TEST

START_TEST(test_load_errors) {
    tg_model *m;
    ck_assert_int_eq(tg_model_load("/nonexistent/x.safetensors", B, &m), TG_ERR_IO);
    /* a checkpoint whose shapes disagree with its config: rewrite d_ff in the metadata */
    tg_model *t = tiny(TG_ATTN_MHA, 2, 0, false);
    char path[] = "/tmp/tg_model_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ck_assert_int_eq(tg_model_save(t, path), TG_OK);
    FILE *f = fopen(path, "r+b");
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    char *p = memmem(buf, n, "\\\"d_ff\\\":16", 11);
    ck_assert_msg(p != NULL, "d_ff not found in header");
    p[10] = '8'; /* d_ff 18: same byte length, wrong shapes */
    fseek(f, 0, SEEK_SET);
    fwrite(buf, 1, n, f);
    fclose(f);
    ck_assert_int_eq(tg_model_load(path, B, &m), TG_ERR_SHAPE);
    tg_assert_msg_has(tg_error_message(), "ffn.fc1.weight' has shape [16,8], the config implies [18,8]");
    /* a truncated checkpoint */
    ck_assert_int_eq(truncate(path, 100), 0);
    ck_assert_int_eq(tg_model_load(path, B, &m), TG_ERR_FORMAT);
    unlink(path);
    tg_model_free(t);
}
END_TEST

/* ---- restricted self-attention: the banded O(r·n·d) path equals the dense masked one ---- */

/* Logits of an encoder-decoder with window 2 over sequences of n = 9 (S = T = 9, the second
 * sentence padded: padding and causal masks in band coordinates), the sum of squared logits as
 * the loss, and every parameter gradient; *bands = band_scores nodes in the graph. */
static void window_run(tg_model *m, float *logits, int64_t nlog, float *grads, int64_t ngrad, int *bands) {
    int32_t s0[8] = {4, 5, 6, 7, 8, 9, 4, 5}, s1[5] = {9, 8, 7, 6, 5}, t0[8] = {5, 4, 7, 6, 9, 8, 5, 4};
    int32_t t1[6] = {6, 6, 7, 7, 8, 8};
    const int32_t *src[2] = {s0, s1}, *tgt[2] = {t0, t1};
    int64_t sn[2] = {8, 5}, tn[2] = {8, 6};
    tg_batch b;
    ck_assert_int_eq(tg_batch_build(&b, 2, src, sn, tgt, tn), TG_OK);
    ck_assert_int_eq(b.src_len, 9);
    ck_assert_int_eq(b.tgt_len, 9);
    tg_store *st = tg_model_store(m);
    ck_assert_int_eq(tg_store_zero_grad(st), TG_OK);
    tg_graph *g = tg_graph_new();
    tg_graph_set_training(g, false);
    tg_tensor *y = tg_keep(tg_model_logits(m, g, &b));
    ck_assert_msg(y != NULL, "%s", tg_error_message());
    ck_assert_int_eq(tg_tensor_numel(y), nlog);
    ck_assert_int_eq(tg_backward(g, tg_sum_all(tg_mul(y, y))), TG_OK);
    *bands = 0;
    for (int64_t i = 0; i < g->n; i++) *bands += g->nodes[i]->op == TG_OP_BAND_SCORES;
    ck_assert_msg(tg_graph_run(g, B) == TG_OK, "%s", tg_error_message());
    ck_assert_int_eq(tg_tensor_read(y, logits, sizeof(float) * (size_t)nlog), TG_OK);
    int64_t off = 0;
    for (int64_t i = 0; i < tg_store_count(st); i++) {
        int64_t n = tg_store_numel(st, i);
        ck_assert(off + n <= ngrad);
        ck_assert_int_eq(tg_store_read_grad(st, i, grads + off, n), TG_OK);
        off += n;
    }
    tg_graph_free(g);
    tg_batch_free(&b);
}

/* For mha, fixed_head, talking_heads, interacting (summed, literal, and with logits over
 * sqrt(heads)) and mha with RoPE:
 * logits and gradients of the banded path within 2e-6 (relative to 1 + |value|) of the dense
 * masked path; interacting_pairwise, which keeps the dense path, builds no banded op. */
START_TEST(test_window_banded_equals_dense) {
    static const tg_attn_kind kinds[8] = {TG_ATTN_MHA, TG_ATTN_FIXED_HEAD, TG_ATTN_TALKING_HEADS, TG_ATTN_INTERACTING,
                                          TG_ATTN_INTERACTING, TG_ATTN_MHA, TG_ATTN_INTERACTING_PAIRWISE,
                                          TG_ATTN_INTERACTING};
    tg_model *m = tiny_opts(kinds[_i], 2, 0, _i == 4, false);
    m->cfg.window = 2;
    m->cfg.interacting_sqrt_h = _i == 7;
    m->cfg.rope = _i == 5;
    randomize_biases(m);
    tg_store *st = tg_model_store(m);
    for (int64_t i = 0; i < tg_store_count(st); i++) { /* talking-heads: mixing matrices that mix */
        if (!strstr(tg_store_name(st, i), "softmax_proj")) continue;
        float p[4] = {0.2f, 0.8f, 0.9f, -0.3f};
        ck_assert_int_eq(tg_store_write(st, i, p, 4), TG_OK);
    }
    int64_t nlog = 2 * 9 * tg_vocab_size(tg_model_tgt_vocab(m)), ngrad = 0;
    for (int64_t i = 0; i < tg_store_count(tg_model_store(m)); i++) ngrad += tg_store_numel(tg_model_store(m), i);
    float *la = malloc(sizeof(float) * (size_t)nlog), *lb = malloc(sizeof(float) * (size_t)nlog);
    float *ga = malloc(sizeof(float) * (size_t)ngrad), *gb = malloc(sizeof(float) * (size_t)ngrad);
    int banded, dense;
    window_run(m, la, nlog, ga, ngrad, &banded);
    m->dense_window = true;
    window_run(m, lb, nlog, gb, ngrad, &dense);
    ck_assert_int_eq(dense, 0);
    if (kinds[_i] == TG_ATTN_INTERACTING_PAIRWISE) ck_assert_int_eq(banded, 0);
    else ck_assert_msg(banded >= 2, "%d banded score nodes", banded); /* encoder and decoder self-attention */
    for (int64_t i = 0; i < nlog; i++)
        ck_assert_msg(fabs(la[i] - lb[i]) <= 2e-6 * (1.0 + fabs(lb[i])), "case %d logit %lld: %.9g vs %.9g", _i,
                      (long long)i, la[i], lb[i]);
    /* gradients are long sums (embedding rows, projections over every position) whose order
     * differs between the paths: compared relative to the largest gradient */
    double gmax = 0, gdiff = 0;
    for (int64_t i = 0; i < ngrad; i++) {
        gmax = fmax(gmax, fabs(gb[i]));
        gdiff = fmax(gdiff, fabs(ga[i] - gb[i]));
    }
    ck_assert_msg(gdiff <= 1e-6 * gmax, "case %d: gradients differ by %.3g, max |gradient| %.4g", _i, gdiff, gmax);
    free(la);
    free(lb);
    free(ga);
    free(gb);
    tg_model_free(m);
}
END_TEST

/* The banded path's mask is built from what the mask's builder says it masks (tg__attn_band),
 * never read back from a mask: tg_model_attention given a program's own mask takes the dense
 * path (no band_scores node); here the mask masks nothing, so it equals the banded path
 * without a mask up to rounding. */
START_TEST(test_window_mask_not_read) {
    tg_model *m = tiny(TG_ATTN_MHA, 2, 0, false);
    m->cfg.window = 1;
    enum { N = 7 };
    float x[N * 8], zero[N] = {0}, out[2][N * 8];
    tg_rng r;
    tg_rng_init(&r, 9);
    for (int i = 0; i < N * 8; i++) x[i] = (float)tg_rng_normal(&r);
    int64_t sx[3] = {1, N, 8}, sm[4] = {1, 1, 1, N};
    for (int k = 0; k < 2; k++) {
        tg_graph *g = tg_graph_new();
        tg_graph_set_training(g, false);
        tg_tensor *xi = tg_input(g, TG_DTYPE_F32, 3, sx, x);
        tg_tensor *mask = k ? tg_input(g, TG_DTYPE_F32, 4, sm, zero) : NULL; /* masks nothing */
        tg_tensor *y = tg_keep(tg_model_attention(m, g, "encoder.layers.0.self_attn", xi, xi, mask));
        ck_assert_msg(y != NULL, "%s", tg_error_message());
        int bands = 0;
        for (int64_t i = 0; i < g->n; i++) bands += g->nodes[i]->op == TG_OP_BAND_SCORES;
        ck_assert_int_eq(bands, k ? 0 : 1);
        ck_assert_int_eq(tg_graph_run(g, B), TG_OK);
        ck_assert_int_eq(tg_tensor_read(y, out[k], sizeof out[k]), TG_OK);
        tg_graph_free(g);
    }
    assert_close_arrays(out[1], out[0], N * 8, 2e-6, "dense with a mask vs banded");
    tg_model_free(m);
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_fixture_scores, 0, (int)(sizeof fixtures / sizeof fixtures[0]));
    tcase_add_test(tc, test_fixed_head_equals_mha);
    tcase_add_test(tc, test_talking_heads_identity_equals_mha);
    tcase_add_test(tc, test_talking_heads_mixing_matters);
    tcase_add_test(tc, test_interacting_literal_equals_summed);
    tcase_add_test(tc, test_interacting_no_out_proj);
    tcase_add_test(tc, test_interacting_sqrt_h);
    tcase_add_test(tc, test_interacting_equals_mha_with_summed_query);
    tcase_add_test(tc, test_pairwise_one_head_equals_mha);
    tcase_add_loop_test(tc, test_padding_keys_do_not_matter, 0, 5);
    tcase_add_loop_test(tc, test_save_load_score_identical, 0, 5);
    tcase_add_test(tc, test_bad_config_errors);
    tcase_add_test(tc, test_load_errors);
    tcase_add_loop_test(tc, test_window_banded_equals_dense, 0, 8);
    tcase_add_test(tc, test_window_mask_not_read);
    suite_add_tcase(s, tc);
    return s;
}
