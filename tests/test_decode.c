/* Decoding (docs/model.md §1 "Decoding"): the cached incremental decoder against the full re-run for
 * every attention kind, greedy and beam search, the length penalty and limit, batching, n-best
 * lists, and the greedy outputs of the PyTorch fixtures (tests/fixtures/models). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "models/model-impl.h"
#include "tg/decode.h"
#include "tg/model.h"
#include "tg/rng.h"
#include "tg_check.h"

static tg_backend *B;
/* The decoders' key and value tables are not zeroed (decode.c: only rows written by earlier
 * steps are read); here they start as NaN, so that a read of any other row spoils the results. */
static void setup(void) {
    ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK);
    tg__store_poison_unset(true);
}
static void teardown(void) {
    tg__store_poison_unset(false);
    tg_backend_free(B);
}

#define NTOK 10 /* ordinary tokens t0..t9 after the four specials */

/* A model of config c (its vocabulary: the specials and t0..t9, shared), with biases and
 * LayerNorm parameters moved away from their initial values so that every parameter matters. */
static tg_model *model_with(const tg_model_config *cfg, uint64_t seed) {
    tg_model_config c = *cfg;
    tg_vocab *v;
    ck_assert_int_eq(tg_vocab_new(&v), TG_OK);
    for (int i = 0; i < NTOK; i++) {
        char t[8];
        snprintf(t, sizeof t, "t%d", i);
        ck_assert_int_eq(tg_vocab_add(v, t, NULL), TG_OK);
    }
    tg_model *m;
    ck_assert_msg(tg_model_new(&c, v, v, B, seed, &m) == TG_OK, "%s", tg_error_message());
    tg_store *s = tg_model_store(m);
    tg_rng r;
    tg_rng_init(&r, seed + 100);
    for (int64_t i = 0; i < tg_store_count(s); i++) {
        const char *name = tg_store_name(s, i);
        bool bias = strstr(name, "bias") != NULL, norm = strstr(name, "norm") != NULL,
             mix = strstr(name, "softmax_proj") != NULL;
        if (!bias && !norm && !mix) continue;
        int64_t n = tg_store_numel(s, i);
        float *w = malloc((size_t)n * sizeof *w);
        ck_assert_int_eq(tg_store_read(s, i, w, n), TG_OK);
        for (int64_t k = 0; k < n; k++) w[k] += (float)((bias ? 0.3 : 0.2) * tg_rng_normal(&r));
        ck_assert_int_eq(tg_store_write(s, i, w, n), TG_OK);
        free(w);
    }
    return m;
}

/* A random model (d 16, 2 + 2 layers, d_ff 32) */
static tg_model *random_model(tg_attn_kind kind, bool pre_norm, bool learned_pos, bool literal,
                              uint64_t seed) {
    tg_model_config c = tg_model_config_default();
    c.d_model = 16;
    c.heads = kind == TG_ATTN_FIXED_HEAD ? 3 : 4;
    c.head_dim = kind == TG_ATTN_FIXED_HEAD ? 5 : 0;
    c.enc_layers = 2;
    c.dec_layers = 2;
    c.d_ff = 32;
    c.attention = kind;
    c.interacting_literal = literal;
    c.pre_norm = pre_norm;
    c.learned_pos = learned_pos;
    c.max_len = 40;
    c.share_embeddings = true;
    return model_with(&c, seed);
}

/* sources of the random-model tests: different lengths, so the batch is padded */
static const int32_t S0[] = {4, 5, 6, 7, 8}, S1[] = {9, 4}, S2[] = {10, 11, 12, 13, 5, 6, 1, 8}, S3[] = {13};
static const int32_t *const SRC[4] = {S0, S1, S2, S3};
static const int64_t SRC_N[4] = {5, 2, 8, 1};

static void assert_same_hyp(const tg_hypothesis *a, const tg_hypothesis *b, double tol, const char *what) {
    ck_assert_msg(a->len == b->len && a->finished == b->finished, "%s: lengths %lld/%lld, finished %d/%d", what,
                  (long long)a->len, (long long)b->len, a->finished, b->finished);
    for (int64_t k = 0; k < a->len; k++)
        ck_assert_msg(a->ids[k] == b->ids[k], "%s: token %lld: %d vs %d", what, (long long)k, a->ids[k], b->ids[k]);
    ck_assert_msg(fabs(a->score - b->score) <= tol * (1 + fabs(b->score)), "%s: score %.9f vs %.9f", what, a->score,
                  b->score);
    ck_assert_msg(fabs(a->logprob - b->logprob) <= tol * (1 + fabs(b->logprob)), "%s: logprob %.9f vs %.9f", what,
                  a->logprob, b->logprob);
}

/* ---- the cached decoder equals the full re-run ---- */

/* Drive a cached and a full decoder with the same rows, parents and tokens, beam-search-like:
 * rows are duplicated, dropped and reordered at random; the logits must agree at every step. */
static void check_incremental(tg_model *m, const char *what) {
    enum { R = 8, T = 12 };
    int64_t V = tg_model_cfg(m)->tgt_vocab;
    tg_decoder *dc, *df;
    ck_assert_msg(tg_decoder_new(m, SRC, SRC_N, 4, R, T, true, &dc) == TG_OK, "%s", tg_error_message());
    ck_assert_msg(tg_decoder_new(m, SRC, SRC_N, 4, R, T, false, &df) == TG_OK, "%s", tg_error_message());
    float *lc = malloc((size_t)(R * V) * sizeof *lc), *lf = malloc((size_t)(R * V) * sizeof *lf);
    int32_t parent[R], tok[R];
    tg_rng r;
    tg_rng_init(&r, 42);
    int64_t rows = 4, prev = 4;
    for (int64_t i = 0; i < 4; i++) {
        parent[i] = (int32_t)i;
        tok[i] = TG_BOS;
    }
    for (int64_t t = 0; t < T; t++) {
        ck_assert_msg(tg_decoder_step(dc, rows, parent, tok, lc) == TG_OK, "%s: %s", what, tg_error_message());
        ck_assert_msg(tg_decoder_step(df, rows, parent, tok, lf) == TG_OK, "%s: %s", what, tg_error_message());
        for (int64_t k = 0; k < rows * V; k++) {
            double e = fabs(lc[k] - lf[k]) / (1 + fabs(lf[k]));
            ck_assert_msg(e <= 1e-5, "%s: step %lld, row %lld, token %lld: cached %.8f vs full %.8f", what,
                          (long long)t, (long long)(k / V), (long long)(k % V), lc[k], lf[k]);
        }
        prev = rows;
        rows = 1 + (int64_t)tg_rng_below(&r, R);
        for (int64_t i = 0; i < rows; i++) {
            parent[i] = (int32_t)tg_rng_below(&r, (uint64_t)prev);
            tok[i] = (int32_t)(TG_EOS + (int64_t)tg_rng_below(&r, (uint64_t)(V - TG_EOS))); /* </s> .. last */
        }
    }
    ck_assert_int_eq(tg_decoder_steps(dc), T);
    free(lc);
    free(lf);
    tg_decoder_free(dc);
    tg_decoder_free(df);
}

/* every kind x {post, pre}, plus interacting's literal all-pairs form (the last _i) */
START_TEST(test_incremental_equals_full) {
    char what[96];
    bool literal = _i == 2 * TG_ATTN_COUNT;
    tg_attn_kind kind = literal ? TG_ATTN_INTERACTING : (tg_attn_kind)(_i / 2);
    bool pre = literal || _i % 2, learned = _i % 4 == 1;
    snprintf(what, sizeof what, "%s%s %s-LN", tg_attn_kind_name(kind), literal ? " (literal)" : "",
             pre ? "pre" : "post");
    tg_model *m = random_model(kind, pre, learned, literal, 11 + (uint64_t)_i);
    check_incremental(m, what);
    tg_model_free(m);
}
END_TEST

/* the whole search on both decoders: same hypotheses (beam 3, 2-best, and greedy) */
START_TEST(test_decode_equals_decode_full) {
    tg_model *m = random_model((tg_attn_kind)_i, _i % 2, false, false, 3 + (uint64_t)_i);
    for (int beam = 1; beam <= 3; beam += 2) {
        tg_decode_options o = tg_decode_options_default();
        o.beam = beam;
        o.nbest = beam == 3 ? 2 : 1;
        o.max_len_b = 6;
        tg_nbest *a, *b;
        ck_assert_msg(tg_decode(m, SRC, SRC_N, 4, &o, &a) == TG_OK, "%s", tg_error_message());
        ck_assert_msg(tg_decode_full(m, SRC, SRC_N, 4, &o, &b) == TG_OK, "%s", tg_error_message());
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(a[i].count, b[i].count);
            for (int64_t j = 0; j < a[i].count; j++) assert_same_hyp(&a[i].hyp[j], &b[i].hyp[j], 1e-5, "cached vs full");
        }
        tg_decode_free(a, 4);
        tg_decode_free(b, 4);
    }
    tg_model_free(m);
}
END_TEST

/* A search reads each step's log-probabilities where the CPU backend holds them (decode.c:
 * run_step, a view) instead of a copy: the view holds the same bits as the copy
 * tg_decoder_step's caller gets (from a second decoder given the same rows), and stays intact
 * while other graphs run on the backend until the decoder's next step (the step's graph is
 * held: freed, its workspace would be the next graph's). */
START_TEST(test_step_view) {
    tg_model_config c = tg_model_config_default();
    c.d_model = 32, c.heads = 2, c.enc_layers = 1, c.dec_layers = 1, c.d_ff = 64, c.max_len = 40;
    tg_model *m = model_with(&c, 5);
    const int64_t V = tg_model_cfg(m)->tgt_vocab;
    enum { R = 4 };
    tg_decoder *d, *e, *f;
    ck_assert(tg_decoder_new(m, SRC, SRC_N, 4, R, 4, true, &d) == TG_OK);
    ck_assert(tg_decoder_new(m, SRC, SRC_N, 4, R, 4, true, &e) == TG_OK);
    ck_assert(tg_decoder_new(m, SRC, SRC_N, 4, R, 4, true, &f) == TG_OK);
    int32_t parent[R] = {0, 1, 2, 3}, other[R] = {3, 2, 1, 0};
    int32_t tok[R] = {TG_BOS, TG_BOS, TG_BOS, TG_BOS};
    float *buf = malloc((size_t)(R * V) * sizeof *buf),
          *ref = malloc((size_t)(R * V) * sizeof *ref);
    const float *view = NULL;
    ck_assert_msg(tg__decoder_step(d, R, parent, tok, buf, true, &view) == TG_OK, "%s",
                  tg_error_message());
    ck_assert(view != buf); /* where the backend holds them */
    /* the same rows copied out by another decoder; then a step of other rows (other values, a
     * graph of the same shapes) runs while the view is still read */
    ck_assert(tg__decoder_step(f, R, parent, tok, ref, true, NULL) == TG_OK);
    ck_assert(tg__decoder_step(e, R, other, tok, buf, true, NULL) == TG_OK);
    ck_assert(memcmp(buf, ref, (size_t)(R * V) * sizeof *ref) != 0);
    ck_assert(memcmp(view, ref, (size_t)(R * V) * sizeof *ref) == 0);
    float s = 0.0f;
    for (int64_t w = 0; w < V; w++)
        s += expf(view[w]);
    tg_assert_close(s, 1.0, 1e-5, 0.0); /* log-probabilities */
    tg_decoder_free(f);
    tg_decoder_free(e);
    tg_decoder_free(d);
    free(buf), free(ref);
    tg_model_free(m);
}
END_TEST

/* A decoder hands its layers' weights to the backend for its life (decode.c: keep_weights): on
 * the CPU a step of 32 rows reads them packed once (the GEMM's kept operands, which give the
 * bits of packing per product: test_gemm's test_kept_b); two decoders share them and the last
 * one freed releases them. */
START_TEST(test_decoder_keeps_weights) {
    tg_model_config c = tg_model_config_default();
    c.d_model = 64, c.heads = 4, c.enc_layers = 1, c.dec_layers = 1, c.d_ff = 256, c.max_len = 40;
    c.share_embeddings = true;
    tg_model *m = model_with(&c, 9);
    enum { R = 32 };
    const int64_t V = tg_model_cfg(m)->tgt_vocab;
    /* one layer's matrices but the memory's key and value projections — self q, k, v, out,
     * cross q, out, fc1, fc2 — and the output projection (the shared embedding), whose
     * product (R rows × the vocabulary) is cut by columns */
    const int want = tg_cpu_gemm_packed_available() ? 9 : 0;
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 0);
    tg_decoder *d1, *d2;
    ck_assert_msg(tg_decoder_new(m, SRC, SRC_N, 4, R, 4, true, &d1) == TG_OK, "%s",
                  tg_error_message());
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), want);
    ck_assert_msg(tg_decoder_new(m, SRC, SRC_N, 4, R, 4, true, &d2) == TG_OK, "%s",
                  tg_error_message());
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), want);
    float *l = malloc((size_t)(R * V) * sizeof *l);
    int32_t parent[R], tok[R];
    for (int r = 0; r < R; r++)
        parent[r] = r % 4, tok[r] = TG_BOS;
    const int hits = atomic_load(&tg__cpu_stats.gemm.kept_hits);
    ck_assert_msg(tg_decoder_step(d1, R, parent, tok, l) == TG_OK, "%s", tg_error_message());
    if (want) ck_assert_int_gt(atomic_load(&tg__cpu_stats.gemm.kept_hits), hits);
    tg_decoder_free(d1);
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), want);
    tg_decoder_free(d2);
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 0);
    free(l);
    tg_model_free(m);
}
END_TEST

/* tg_decoder_hold_weights keeps the weights prepared between decoders (tg translate's batches):
 * kept with no decoder alive, still kept after each tg_decode's decoder is freed, the results
 * those of decoding without the hold; released by the matching call; holds nest; a release
 * without a hold, and a NULL model, do nothing (the latter an error for the hold). */
START_TEST(test_decoder_hold_weights) {
    tg_model_config c = tg_model_config_default();
    c.d_model = 64, c.heads = 4, c.enc_layers = 1, c.dec_layers = 1, c.d_ff = 256, c.max_len = 40;
    tg_model *m = model_with(&c, 9);
    const int want = tg_cpu_gemm_packed_available() ? 9 : 0; /* as test_decoder_keeps_weights */
    tg_decode_options o = tg_decode_options_default();
    tg_nbest *plain, *held;
    ck_assert_msg(tg_decode(m, SRC, SRC_N, 4, &o, &plain) == TG_OK, "%s", tg_error_message());
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 0);
    ck_assert(tg_decoder_hold_weights(m) == TG_OK);
    ck_assert(tg_decoder_hold_weights(m) == TG_OK);
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), want);
    for (int round = 0; round < 2; round++) {
        ck_assert_msg(tg_decode(m, SRC, SRC_N, 4, &o, &held) == TG_OK, "%s", tg_error_message());
        ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), want);
        for (int i = 0; i < 4; i++) {
            const tg_hypothesis *a = &plain[i].hyp[0], *b = &held[i].hyp[0];
            ck_assert_int_eq(a->len, b->len);
            ck_assert(memcmp(a->ids, b->ids, (size_t)a->len * sizeof *a->ids) == 0);
            ck_assert(a->score == b->score);
        }
        tg_decode_free(held, 4);
    }
    tg_decoder_release_weights(m);
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), want); /* one hold left */
    tg_decoder_release_weights(m);
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 0);
    tg_decoder_release_weights(m); /* none held: nothing */
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 0);
    ck_assert(tg_decoder_hold_weights(NULL) == TG_ERR_INVALID);
    tg_decoder_release_weights(NULL);
    tg_decode_free(plain, 4);
    ck_assert(tg_decoder_hold_weights(m) == TG_OK); /* left held: tg_model_free releases it */
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), want);
    tg_model_free(m);
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 0);
}
END_TEST

/* ---- search ---- */

static tg_nbest *decode(tg_model *m, const int32_t *const *src, const int64_t *n, int64_t count, int64_t beam,
                        int64_t nbest, tg_decode_strategy how, int64_t len_b) {
    tg_decode_options o = tg_decode_options_default();
    o.beam = beam;
    o.nbest = nbest;
    o.strategy = how;
    o.max_len_b = len_b;
    tg_nbest *r;
    ck_assert_msg(tg_decode(m, src, n, count, &o, &r) == TG_OK, "%s", tg_error_message());
    return r;
}

START_TEST(test_beam1_equals_greedy) {
    for (int k = 0; k < TG_ATTN_COUNT; k++) {
        tg_model *m = random_model((tg_attn_kind)k, k % 2, k == 2, false, 20 + (uint64_t)k);
        tg_nbest *g = decode(m, SRC, SRC_N, 4, 1, 1, TG_DECODE_GREEDY, 50);
        tg_nbest *b = decode(m, SRC, SRC_N, 4, 1, 1, TG_DECODE_BEAM, 50);
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(g[i].count, 1);
            ck_assert_int_eq(b[i].count, 1);
            assert_same_hyp(&g[i].hyp[0], &b[i].hyp[0], 0.0, "beam 1 vs greedy");
        }
        tg_decode_free(g, 4);
        tg_decode_free(b, 4);
        tg_model_free(m);
    }
}
END_TEST

/* Beam search keeps the greedy path unless K better ones push it out, so on these models its
 * best hypothesis ranks at least as high (finished first, then by score) as greedy's. This is
 * what beam search is for, not a theorem: the models and seeds are fixed. The same hypothesis
 * may score a few ulps apart in the two: a step's products have other shapes with 4 rows a
 * sentence than with 1 (1 or 2 rows: the dot-product kernel), and other rounding. */
static bool ranks_at_least(const tg_hypothesis *a, const tg_hypothesis *b) {
    if (a->finished != b->finished) return a->finished;
    return a->score >= b->score - 1e-6 * (1.0 + fabs(b->score));
}

START_TEST(test_beam_at_least_greedy) {
    int better = 0;
    for (int k = 0; k < TG_ATTN_COUNT; k++) {
        tg_model *m = random_model((tg_attn_kind)k, k % 2, false, false, 30 + (uint64_t)k);
        tg_nbest *g = decode(m, SRC, SRC_N, 4, 1, 1, TG_DECODE_GREEDY, 10);
        tg_nbest *b = decode(m, SRC, SRC_N, 4, 4, 1, TG_DECODE_AUTO, 10);
        for (int i = 0; i < 4; i++) {
            ck_assert_msg(ranks_at_least(&b[i].hyp[0], &g[i].hyp[0]),
                          "model %d sentence %d: beam %.6f (finished %d) below greedy %.6f (finished %d)", k, i,
                          b[i].hyp[0].score, b[i].hyp[0].finished, g[i].hyp[0].score, g[i].hyp[0].finished);
            better += !ranks_at_least(&g[i].hyp[0], &b[i].hyp[0]);
        }
        tg_decode_free(g, 4);
        tg_decode_free(b, 4);
        tg_model_free(m);
    }
    ck_assert_msg(better > 0, "beam search never beat greedy: the test would not notice a beam that is greedy");
}
END_TEST

START_TEST(test_length_penalty) {
    /* by hand: ((5 + 5) / 6)^0.6 = exp(0.6 ln(5/3)) = exp(0.306495) = 1.358655; lp(1) = 1 */
    tg_assert_close(tg_decode_length_penalty(5, 0.6), 1.3586552, 0, 1e-7);
    tg_assert_close(tg_decode_length_penalty(1, 0.6), 1.0, 0, 1e-15);
    tg_assert_close(tg_decode_length_penalty(19, 1.0), 4.0, 0, 1e-15);
    tg_assert_close(tg_decode_length_penalty(7, 0.0), 1.0, 0, 0);
    /* every hypothesis: score = logprob / lp(len + finished) */
    tg_model *m = random_model(TG_ATTN_MHA, false, false, false, 5);
    for (int a = 0; a < 3; a++) {
        tg_decode_options o = tg_decode_options_default();
        o.alpha = a * 0.6;
        o.beam = 3;
        o.nbest = 3;
        o.max_len_b = 8;
        tg_nbest *r;
        ck_assert_int_eq(tg_decode(m, SRC, SRC_N, 4, &o, &r), TG_OK);
        for (int i = 0; i < 4; i++)
            for (int64_t j = 0; j < r[i].count; j++) {
                const tg_hypothesis *h = &r[i].hyp[j];
                double lp = pow((5.0 + (double)(h->len + h->finished)) / 6.0, o.alpha);
                tg_assert_close(h->score, h->logprob / lp, 1e-12, 1e-12);
                ck_assert(h->logprob < 0);
            }
        tg_decode_free(r, 4);
    }
    tg_model_free(m);
}
END_TEST

/* |Y| (with </s>) <= floor(a * S + b), and <= the model's max_len */
START_TEST(test_max_length) {
    tg_model *m = random_model(TG_ATTN_TALKING_HEADS, false, false, false, 8);
    struct {
        double a;
        int64_t b;
    } cases[4] = {{0, 1}, {0, 3}, {2, 1}, {1, 50}}; /* the last: capped by max_len 40 */
    for (int c = 0; c < 4; c++)
        for (int beam = 1; beam <= 3; beam += 2) {
            tg_decode_options o = tg_decode_options_default();
            o.max_len_a = cases[c].a;
            o.max_len_b = cases[c].b;
            o.beam = beam;
            tg_nbest *r;
            ck_assert_int_eq(tg_decode(m, SRC, SRC_N, 4, &o, &r), TG_OK);
            int64_t hit = 0;
            for (int i = 0; i < 4; i++) {
                int64_t lim = (int64_t)floor(cases[c].a * (double)SRC_N[i] + (double)cases[c].b);
                if (lim > 40) lim = 40;
                const tg_hypothesis *h = &r[i].hyp[0];
                ck_assert_msg(h->len + h->finished <= lim, "a %g b %lld beam %d sentence %d: %lld tokens > %lld",
                              cases[c].a, (long long)cases[c].b, beam, i, (long long)(h->len + h->finished),
                              (long long)lim);
                if (!h->finished) ck_assert_int_eq(h->len, lim); /* unfinished only at the limit */
                hit += h->len + h->finished == lim;
            }
            if (cases[c].b <= 3) ck_assert_msg(hit > 0, "no output reached the limit: the test proves nothing");
            tg_decode_free(r, 4);
        }
    tg_model_free(m);
}
END_TEST

/* four padded sentences at once give what each gives alone */
START_TEST(test_batched_equals_single) {
    tg_model *m = random_model((tg_attn_kind)_i, true, _i % 2, false, 50 + (uint64_t)_i);
    for (int beam = 1; beam <= 3; beam += 2) {
        tg_nbest *all = decode(m, SRC, SRC_N, 4, beam, beam, TG_DECODE_AUTO, 12);
        for (int i = 0; i < 4; i++) {
            tg_nbest *one = decode(m, &SRC[i], &SRC_N[i], 1, beam, beam, TG_DECODE_AUTO, 12);
            ck_assert_int_eq(one[0].count, all[i].count);
            for (int64_t j = 0; j < one[0].count; j++) assert_same_hyp(&all[i].hyp[j], &one[0].hyp[j], 1e-5, "batched");
            tg_decode_free(one, 1);
        }
        tg_decode_free(all, 4);
    }
    tg_model_free(m);
}
END_TEST

/* n-best: ordered, distinct, and its head is the 1-best */
START_TEST(test_nbest) {
    tg_model *m = random_model(TG_ATTN_INTERACTING_PAIRWISE, false, false, false, 9);
    tg_nbest *one = decode(m, SRC, SRC_N, 4, 5, 1, TG_DECODE_AUTO, 10);
    tg_nbest *r = decode(m, SRC, SRC_N, 4, 5, 4, TG_DECODE_AUTO, 10);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(r[i].count, 4);
        assert_same_hyp(&r[i].hyp[0], &one[i].hyp[0], 0.0, "n-best head");
        for (int64_t j = 1; j < 4; j++) {
            const tg_hypothesis *a = &r[i].hyp[j - 1], *b = &r[i].hyp[j];
            ck_assert(a->finished >= b->finished);
            if (a->finished == b->finished) ck_assert(a->score >= b->score);
            for (int64_t k = 0; k < j; k++) {
                const tg_hypothesis *c = &r[i].hyp[k];
                ck_assert_msg(c->len != b->len || c->finished != b->finished ||
                                  memcmp(c->ids, b->ids, (size_t)b->len * sizeof *b->ids) != 0,
                              "sentence %d: hypotheses %lld and %lld are equal", i, (long long)k, (long long)j);
            }
        }
    }
    tg_decode_free(one, 4);
    tg_decode_free(r, 4);
    tg_model_free(m);
}
END_TEST

START_TEST(test_errors) {
    tg_model *m = random_model(TG_ATTN_MHA, false, false, false, 1);
    tg_nbest *r = (tg_nbest *)&r;
    tg_decode_options o = tg_decode_options_default();
    o.beam = 0;
    ck_assert_int_eq(tg_decode(m, SRC, SRC_N, 4, &o, &r), TG_ERR_INVALID);
    ck_assert_ptr_null(r);
    tg_assert_msg_has(tg_error_message(), "beam size 0");
    o = tg_decode_options_default();
    o.nbest = 5;
    ck_assert_int_eq(tg_decode(m, SRC, SRC_N, 4, &o, &r), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "nbest 5 outside [1, 4]");
    o = tg_decode_options_default();
    o.alpha = -1;
    ck_assert_int_eq(tg_decode(m, SRC, SRC_N, 4, &o, &r), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "alpha");
    o = tg_decode_options_default();
    o.strategy = TG_DECODE_GREEDY;
    o.nbest = 2;
    ck_assert_int_eq(tg_decode(m, SRC, SRC_N, 4, &o, &r), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "greedy decoding gives one hypothesis");
    int32_t bad[1] = {99}, lng[40];
    const int32_t *pb[1] = {bad}, *pl[1] = {lng};
    int64_t nb = 1, nl = 40;
    ck_assert_int_eq(tg_decode(m, pb, &nb, 1, NULL, &r), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "id 99 outside the source vocabulary");
    for (int i = 0; i < 40; i++) lng[i] = 4;
    ck_assert_int_eq(tg_decode(m, pl, &nl, 1, NULL, &r), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "max_len is 40");
    /* the step API */
    tg_decoder *d;
    ck_assert_int_eq(tg_decoder_new(m, SRC, SRC_N, 4, 4, 2, true, &d), TG_OK);
    float logits[4 * 14];
    int32_t parent[4] = {0, 1, 2, 4}, tok[4] = {TG_BOS, TG_BOS, TG_BOS, TG_BOS};
    ck_assert_int_eq(tg_decoder_step(d, 4, parent, tok, logits), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "parent 4 outside [0, 4)");
    parent[3] = 3;
    tok[1] = TG_PAD;
    ck_assert_int_eq(tg_decoder_step(d, 4, parent, tok, logits), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "<pad>");
    tok[1] = TG_BOS;
    ck_assert_int_eq(tg_decoder_step(d, 5, parent, tok, logits), TG_ERR_INVALID);
    ck_assert_int_eq(tg_decoder_step(d, 4, parent, tok, logits), TG_OK);
    ck_assert_int_eq(tg_decoder_step(d, 4, parent, tok, logits), TG_OK);
    ck_assert_int_eq(tg_decoder_step(d, 4, parent, tok, logits), TG_ERR_INVALID);
    tg_assert_msg_has(tg_error_message(), "beyond the 2 steps");
    tg_decoder_free(d);
    tg_model_free(m);
}
END_TEST

/* log P(Y|X) by teacher forcing <s> Y through the training graph (tg_model_logits): the sum of
 * log softmax over Y's tokens, plus </s> after Y if `eos` */
static double forced_logprob(tg_model *m, const int32_t *src, int64_t sn, const int32_t *y, int64_t yn, bool eos) {
    tg_batch b;
    ck_assert_int_eq(tg_batch_build(&b, 1, &src, &sn, &y, &yn), TG_OK);
    int64_t V = tg_model_cfg(m)->tgt_vocab, T = b.tgt_len;
    tg_graph *g = tg_graph_new();
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    tg_tensor *l = tg_keep(tg_model_logits(m, g, &b));
    ck_assert_msg(l && tg_graph_run(g, B) == TG_OK, "%s", tg_error_message());
    float *x = malloc((size_t)(T * V) * sizeof *x);
    ck_assert_int_eq(tg_tensor_read(l, x, (size_t)(T * V) * sizeof *x), TG_OK);
    double lp = 0;
    for (int64_t t = 0; t < yn + eos; t++) {
        double mx = -INFINITY, z = 0;
        for (int64_t w = 0; w < V; w++) mx = fmax(mx, x[t * V + w]);
        for (int64_t w = 0; w < V; w++) z += exp(x[t * V + w] - mx);
        lp += x[t * V + b.tgt_out[t]] - mx - log(z);
    }
    free(x);
    tg_graph_free(g);
    tg_batch_free(&b);
    return lp;
}

/* the log-probability accumulated while decoding is the teacher-forced one of the output; for
 * finished outputs that is the model's score (docs/model.md §4), checked on the fixtures below */
START_TEST(test_logprob_equals_forced) {
    tg_model *m = random_model((tg_attn_kind)_i, _i % 2, true, false, 70 + (uint64_t)_i);
    tg_nbest *r = decode(m, SRC, SRC_N, 4, 3, 3, TG_DECODE_AUTO, 6);
    for (int i = 0; i < 4; i++)
        for (int64_t j = 0; j < r[i].count; j++) {
            const tg_hypothesis *h = &r[i].hyp[j];
            tg_assert_close(h->logprob, forced_logprob(m, SRC[i], SRC_N[i], h->ids, h->len, h->finished), 1e-5, 1e-5);
        }
    tg_decode_free(r, 4);
    tg_model_free(m);
}
END_TEST

/* ---- the PyTorch fixtures ---- */

static const char *fixtures[] = {
    "mha_post", "mha_pre", "fixed_head_post", "fixed_head_pre", "talking_heads_post",
    "talking_heads_pre", "interacting_post", "interacting_pre", "interacting_pairwise_post",
    "interacting_pairwise_pre",
};

#define NPAIRS 8
/* greedy decoding of pairs.src equals PyTorch's, token strings, all pairs in one batch; beam
 * search on these fitted models finds an output at least as good */
START_TEST(test_fixture_greedy) {
    char path[512], *src[NPAIRS], *want[NPAIRS];
    snprintf(path, sizeof path, "%s/fixtures/models/pairs.src", TG_TEST_DATA);
    int n = tg_test_read_lines(path, src, NPAIRS);
    snprintf(path, sizeof path, "%s/fixtures/models/%s.greedy", TG_TEST_DATA, fixtures[_i]);
    ck_assert_int_eq(tg_test_read_lines(path, want, NPAIRS), n);
    ck_assert_int_eq(n, NPAIRS);
    snprintf(path, sizeof path, "%s/fixtures/models/%s.safetensors", TG_TEST_DATA, fixtures[_i]);
    tg_model *m;
    ck_assert_msg(tg_model_load(path, B, &m) == TG_OK, "%s", tg_error_message());
    int32_t *ids[NPAIRS];
    int64_t len[NPAIRS];
    for (int i = 0; i < n; i++) ck_assert_int_eq(tg_vocab_encode(tg_model_src_vocab(m), src[i], &ids[i], &len[i]), TG_OK);
    tg_nbest *g = decode(m, (const int32_t *const *)ids, len, n, 1, 1, TG_DECODE_AUTO, 50);
    tg_nbest *b = decode(m, (const int32_t *const *)ids, len, n, 4, 1, TG_DECODE_AUTO, 50);
    const tg_vocab *tv = tg_model_tgt_vocab(m);
    for (int i = 0; i < n; i++) {
        char got[4096] = "";
        const tg_hypothesis *h = &g[i].hyp[0];
        ck_assert_msg(h->finished, "%s pair %d: no </s>", fixtures[_i], i);
        for (int64_t k = 0; k < h->len; k++) {
            if (k) strcat(got, " ");
            strcat(got, tg_vocab_token(tv, h->ids[k]));
        }
        ck_assert_msg(strcmp(got, want[i]) == 0, "%s pair %d: greedy \"%s\", PyTorch \"%s\"", fixtures[_i], i, got,
                      want[i]);
        ck_assert_msg(ranks_at_least(&b[i].hyp[0], h), "%s pair %d: beam %.6f below greedy %.6f", fixtures[_i], i,
                      b[i].hyp[0].score, h->score);
        /* its log-probability is the model's score of (source, output) */
        tg_batch bt;
        const int32_t *tp[1] = {h->ids};
        double sc;
        ck_assert_int_eq(tg_batch_build(&bt, 1, (const int32_t *const *)&ids[i], &len[i], tp, &h->len), TG_OK);
        ck_assert_int_eq(tg_model_score(m, &bt, &sc), TG_OK);
        tg_batch_free(&bt);
        tg_assert_close(h->logprob, sc, 1e-6, 1e-5);
        free(src[i]);
        free(want[i]);
        free(ids[i]);
    }
    tg_decode_free(g, n);
    tg_decode_free(b, n);
    tg_model_free(m);
}
END_TEST

/* ---- beam search's candidates from a row ---- */

typedef struct {
    float v;
    int32_t w;
} scored;

static int by_value_then_token(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    if (a->v != b->v) return a->v > b->v ? -1 : 1;
    return (a->w > b->w) - (a->w < b->w);
}

/* tg__decode_row_top against sorting the whole row, for vocabularies around its 64-value blocks
 * (which it passes over when none of their values could enter the list) and list sizes 1-9:
 * values from a few levels (ties), -inf among them, the best ones early, late, or at <pad> and
 * <s> (never candidates), rising rows (every block has a new best) and falling ones. */
START_TEST(test_row_top) {
    static const int64_t vs[] = {3, 5, 63, 64, 65, 66, 127, 128, 129, 200, 1000, 7816};
    tg_rng r;
    tg_rng_init(&r, 7);
    for (int iv = 0; iv < (int)(sizeof vs / sizeof vs[0]); iv++)
        for (int64_t c = 1; c <= 9; c++)
            for (int kind = 0; kind < 5; kind++) {
                const int64_t V = vs[iv];
                float *x = malloc((size_t)V * sizeof *x);
                scored *all = malloc((size_t)V * sizeof *all);
                double tv[9];
                int32_t tw[9];
                ck_assert(x && all);
                for (int64_t w = 0; w < V; w++) {
                    x[w] = (float)(int)(tg_rng_uniform(&r) * 7.0) - 3.0f; /* ties */
                    if (tg_rng_uniform(&r) < 0.1) x[w] = -INFINITY;
                    if (kind == 1) x[w] += (float)w * 0.01f; /* rising: the best at the end */
                    if (kind == 2) x[w] -= (float)w * 0.01f;
                }
                if (kind == 3) x[TG_PAD] = x[TG_BOS] = 100.0f; /* the best ones are not outputs */
                if (kind == 4 && V > 100) x[V - 1] = x[V / 2] = 50.0f; /* lone bests late */
                int64_t n = 0;
                for (int64_t w = 0; w < V; w++)
                    if (w != TG_PAD && w != TG_BOS) all[n++] = (scored){x[w], (int32_t)w};
                qsort(all, (size_t)n, sizeof *all, by_value_then_token);
                const int64_t want = n < c ? n : c, got = tg__decode_row_top(x, V, c, tv, tw);
                ck_assert_int_eq(got, want);
                for (int64_t j = 0; j < want; j++)
                    ck_assert_msg(tw[j] == all[j].w && tv[j] == (double)all[j].v,
                                  "V %lld, c %lld, kind %d: #%lld is token %d (%g), not %d (%g)",
                                  (long long)V, (long long)c, kind, (long long)j, tw[j], tv[j],
                                  all[j].w, (double)all[j].v);
                free(x);
                free(all);
            }
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("decode");
    TCase *tc = tcase_create("decode");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_incremental_equals_full, 0, 2 * TG_ATTN_COUNT + 1);
    tcase_add_loop_test(tc, test_decode_equals_decode_full, 0, TG_ATTN_COUNT);
    tcase_add_test(tc, test_decoder_keeps_weights);
    tcase_add_test(tc, test_decoder_hold_weights);
    tcase_add_test(tc, test_step_view);
    tcase_add_test(tc, test_row_top);
    tcase_add_test(tc, test_beam1_equals_greedy);
    tcase_add_test(tc, test_beam_at_least_greedy);
    tcase_add_test(tc, test_length_penalty);
    tcase_add_test(tc, test_max_length);
    tcase_add_loop_test(tc, test_batched_equals_single, 0, TG_ATTN_COUNT);
    tcase_add_test(tc, test_nbest);
    tcase_add_test(tc, test_errors);
    tcase_add_loop_test(tc, test_logprob_equals_forced, 0, TG_ATTN_COUNT);
    tcase_add_loop_test(tc, test_fixture_greedy, 0, (int)(sizeof fixtures / sizeof fixtures[0]));
    suite_add_tcase(s, tc);
    return s;
}
