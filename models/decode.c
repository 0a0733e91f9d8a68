/* The incremental decoder (docs/model.md §1 "Decoding"): the encoder runs once, then one small
 * graph per step feeds one token per hypothesis ("row") through the decoder stack.
 *
 * Cached mode. Graphs are define-then-run and die after a step, so what the steps share lives
 * outside them, on the model's backend:
 *  - the self-attention keys and values of every layer in a key/value cache (tg/kv_cache.h, the
 *    toolkit's own): the projected keys/values (w = h * d_k, heads not yet split) of every row
 *    at every step so far. Beam search reorders rows (tg_kv_cache_reorder: row r continues its
 *    parent), so a row's history is a chain of parents; the cache keeps it on the host and
 *    nothing is ever moved;
 *  - the memory's keys and values, computed once by the encoder graph, in a store (mem):
 *    cross.L.{k,v} [n * S, w], row i * S + s for sentence i, source position s.
 * A step gathers what each row needs with tg_embedding (a row lookup): its ancestors' self
 * keys/values at steps 0..t-1 (tg_kv_cache_past) and its sentence's memory keys/values (one copy
 * per sentence for a beam's rows: cross_sublayer); self-attention reads the gathered keys/values
 * and the new position's as two parts (tg__attn_core), and after the run the cache appends the
 * new rows (kept: tg_kv_cache_append, tg_kv_cache_commit). A step reads O(t + S) rows per
 * hypothesis and layer: the attention itself costs that much anyway. On the CPU the gathered
 * keys and values are not even made: each is read by one product, which reads the tables' rows
 * itself (core/plan.c: lookup fusion).
 * The attention core is the model's own (tg__attn_core), so all five variants work unchanged:
 * they only need projected K/V; the query is the one new position, and every cached key
 * precedes it, so self-attention needs no mask. A kind registered by the program
 * (tg/attn_kinds.h) is opaque: its cache holds the sub-layer's inputs instead (w = d_model, as
 * keys: the normed positions for self-attention; the memory for cross-attention), and a step
 * calls its forward on the new position over the cached inputs and its own — O(t) rows as well,
 * with the kind's projections of the earlier positions computed again.
 *
 * A language model (arch lm) uses the same decoder without an encoder: no source, no memory
 * and no cross-attention; its "sentences" are independent sequences started by <s>, and a
 * prompt is fed one token per step (tg_generate, models/generate.c).
 *
 * Full mode (the reference for tests): the memory is kept (mem: memory [n * S, d]), but every
 * step re-runs the whole decoder stack (tg__model_decode, the code that scores and trains) over
 * each row's whole prefix with the causal mask, and keeps the logits of the last position. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"
#include "tg/decode.h"

struct tg_decoder {
    tg_model *m;
    bool cached;
    int64_t n, S;               /* sentences, padded source length (incl. </s>) */
    int32_t *src;               /* [n, S] */
    int64_t max_rows, max_steps;
    int64_t step, rows;         /* steps taken; rows of the last step */
    int64_t w;                  /* heads * head width: one projected key row */
    int64_t *sent, *sent_next;  /* [max_rows] sentence of each row */
    int32_t *hist, *hist_next;  /* full: [max_rows, max_steps] the row's tokens so far */
    tg_kv_cache *self;          /* cached: the self-attention keys/values of every layer */
    tg_store *mem;              /* cached: cross K/V tables; full: memory [n * S, d] */
    bool kept;                  /* the weights handed to the backend (keep_weights) */
    tg_graph *held;             /* the last step's graph, while a view of its output is read */
};

static tg_status nomem(const char *what) {
    return tg_error_set(TG_ERR_NOMEM, "tg_decoder: out of memory (%s)", what);
}

/* TG_OK if the graph was built and `out` exists; else the graph's first build error, made the
 * thread's error again (later NULL propagation may have left another message there). */
static tg_status built(const tg_graph *g, const tg_tensor *out) {
    const char *msg;
    tg_status st = tg_graph_status(g, &msg);
    if (st != TG_OK) return tg_error_set(st, "%s", msg);
    return out ? TG_OK : tg_error_prefix(TG_ERR_INVALID, "building the graph");
}

/* Run the encoder once; keep what the steps need: the cross-attention keys/values of every
 * decoder layer (cached) or the memory itself (full). */
static tg_status encode(tg_decoder *d) {
    tg_model *m = d->m;
    const tg_model_config *c = &m->cfg;
    int64_t L = c->dec_layers, n = d->n, S = d->S;
    tg_graph *g = tg_graph_new();
    if (!g) return nomem("graph");
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    tg_tensor *mem = tg_model_encode(m, g, d->src, n, S, NULL);
    int64_t nk = d->cached ? 2 * L : 1;
    tg_tensor **keep = calloc((size_t)nk + 1, sizeof *keep);
    if (!keep) {
        tg_graph_free(g);
        return nomem("encoder outputs");
    }
    char p[192];
    if (d->cached) {
        for (int64_t l = 0; l < L; l++)
            for (int kv = 0; kv < 2; kv++) {
                snprintf(p, sizeof p, "decoder.layers.%lld.cross_attn.%s", (long long)l, kv ? "v_proj" : "k_proj");
                keep[2 * l + kv] = tg_keep(tg_attn_kind_def_get(c->attention) ? mem /* registered: the inputs */
                                                                               : tg__layer_linear(m, g, p, mem, true));
            }
    } else {
        keep[0] = tg_keep(mem);
    }
    tg_status st = TG_OK;
    for (int64_t k = 0; st == TG_OK && k < nk; k++) st = built(g, keep[k]);
    if (st == TG_OK) st = tg_graph_run(g, m->backend);
    int64_t width = d->cached ? d->w : c->d_model;
    float *host = st == TG_OK ? malloc((size_t)(n * S * width) * sizeof *host) : NULL;
    if (st == TG_OK && !host) st = nomem("encoder outputs");
    for (int64_t k = 0; st == TG_OK && k < nk; k++) {
        int64_t shape[2] = {n * S, width};
        if (d->cached)
            snprintf(p, sizeof p, "cross.%lld.%c", (long long)(k / 2), k % 2 ? 'v' : 'k');
        else
            snprintf(p, sizeof p, "memory");
        st = tg_tensor_read(keep[k], host, (size_t)(n * S * width) * sizeof *host);
        if (st == TG_OK) st = tg__model_check_finite(g, m->backend, host, n * S * width, 1, "%s", p);
        if (st == TG_OK) st = tg_store_add(d->mem, p, 2, shape, host, false);
    }
    free(host);
    free(keep);
    tg_graph_free(g);
    return st == TG_OK ? TG_OK : tg_error_prefix(st, "tg_decoder: encoder");
}

/* The weights a step's projections read as x·wᵀ — every matrix of the decoder's layers but the
 * cross-attention's key and value projections (encode uses them once), and the output
 * projection — handed to the backend to prepare once for the decoder's life (keep) and given
 * back by tg_decoder_free (kept across decoders between tg_decoder_hold_weights and
 * tg_decoder_release_weights: the backend counts the holders). The CPU backend packs them for its
 * GEMM, so a step of a few rows packs no weight (the same bits; 64-row products of 512 × 128
 * weights 1.5× faster; the output projection's, cut by columns, each thread reading its part of the
 * vocabulary's panels: docs/log/2026-12-06.md). */
static void keep_weights(tg_model *m, bool keep) {
    tg_store *s = m->store;
    const char *out = tg__model_out_proj_name(&m->cfg);
    int64_t shape[TG_MAX_DIMS];
    for (int64_t i = 0; i < tg_store_count(s); i++) {
        const char *name = tg_store_name(s, i);
        if (tg_store_shape(s, i, shape) == 2 &&
            ((!strncmp(name, "decoder.", 8) && !strstr(name, "cross_attn.k_proj") &&
              !strstr(name, "cross_attn.v_proj")) ||
             !strcmp(name, out))) {
            if (keep) tg__store_keep_weight(s, i);
            else tg__store_release_weight(s, i);
        }
    }
}

tg_status tg_decoder_hold_weights(tg_model *m) {
    if (!m) return tg_error_set(TG_ERR_INVALID, "tg_decoder_hold_weights: model is NULL");
    keep_weights(m, true);
    m->decode_holds++;
    return TG_OK;
}

void tg_decoder_release_weights(tg_model *m) {
    if (!m || m->decode_holds == 0) return;
    m->decode_holds--;
    keep_weights(m, false);
}

tg_status tg_decoder_new(tg_model *m, const int32_t *const *src, const int64_t *src_n, int64_t n,
                         int64_t max_rows, int64_t max_steps, bool cached, tg_decoder **out) {
    if (out) *out = NULL;
    if (!m || !out) return tg_error_set(TG_ERR_INVALID, "tg_decoder_new: NULL argument");
    const tg_model_config *c = &m->cfg;
    bool lm = c->arch == TG_ARCH_LM;
    if (c->arch == TG_ARCH_MLM)
        return tg_error_set(TG_ERR_INVALID, "tg_decoder_new: a masked language model (arch mlm) has no decoder");
    if (lm && src)
        return tg_error_set(TG_ERR_INVALID, "tg_decoder_new: a language model (arch lm) has no source sentences "
                                            "(generate with tg_generate)");
    if (!lm && (!src || !src_n))
        return tg_error_set(TG_ERR_INVALID, "tg_decoder_new: an encoder-decoder model needs source sentences");
    if (n < 1 || max_rows < 1 || max_steps < 1)
        return tg_error_set(TG_ERR_INVALID, "tg_decoder_new: %lld sentences, %lld rows, %lld steps (each must be >= 1)",
                            (long long)n, (long long)max_rows, (long long)max_steps);
    if (max_steps > c->max_len)
        return tg_error_set(TG_ERR_INVALID, "tg_decoder_new: %lld steps exceed the model's max_len %lld",
                            (long long)max_steps, (long long)c->max_len);
    int64_t S = 0;
    for (int64_t i = 0; !lm && i < n; i++) {
        if (src_n[i] < 0 || (src_n[i] > 0 && !src[i]))
            return tg_error_set(TG_ERR_INVALID, "tg_decoder_new: sentence %lld: bad length or NULL ids", (long long)i);
        if (src_n[i] + 1 > c->max_len)
            return tg_error_set(TG_ERR_INVALID, "tg_decoder_new: sentence %lld has %lld tokens (+ </s>), the model's max_len is %lld",
                                (long long)i, (long long)src_n[i], (long long)c->max_len);
        for (int64_t k = 0; k < src_n[i]; k++)
            if (src[i][k] < 0 || src[i][k] >= c->src_vocab)
                return tg_error_set(TG_ERR_INVALID, "tg_decoder_new: sentence %lld, token %lld: id %d outside the source vocabulary (%lld)",
                                    (long long)i, (long long)k, src[i][k], (long long)c->src_vocab);
        if (src_n[i] + 1 > S) S = src_n[i] + 1;
    }
    tg_decoder *d = calloc(1, sizeof *d);
    if (!d) return nomem("decoder");
    d->m = m;
    d->cached = cached;
    d->n = n;
    d->S = S;
    d->max_rows = max_rows;
    d->max_steps = max_steps;
    d->w = tg_attn_kind_def_get(c->attention) ? c->d_model : c->heads * tg_model_head_dim(c);
    d->src = calloc((size_t)(n * S + 1), sizeof *d->src);
    d->sent = malloc((size_t)max_rows * sizeof *d->sent);
    d->sent_next = malloc((size_t)max_rows * sizeof *d->sent_next);
    d->hist = cached ? NULL : malloc((size_t)(max_rows * max_steps) * sizeof *d->hist);
    d->hist_next = cached ? NULL : malloc((size_t)(max_rows * max_steps) * sizeof *d->hist_next);
    tg_status st = TG_OK;
    if (!d->src || !d->sent || !d->sent_next || (!cached && (!d->hist || !d->hist_next)))
        st = nomem("buffers");
    if (st == TG_OK) {
        for (int64_t i = 0; !lm && i < n; i++) {
            if (src_n[i] > 0) memcpy(d->src + i * S, src[i], (size_t)src_n[i] * sizeof *d->src);
            d->src[i * S + src_n[i]] = TG_EOS;
        }
        st = tg__store_new_scratch(m->backend, &d->mem);
    }
    if (st == TG_OK && cached)
        st = tg_kv_cache_new(m->backend, (int)c->dec_layers, max_rows, max_steps, d->w, &d->self);
    if (st == TG_OK && !lm) st = encode(d);
    if (st != TG_OK) {
        tg_decoder_free(d);
        return st;
    }
    keep_weights(m, true);
    d->kept = true;
    *out = d;
    return TG_OK;
}

void tg_decoder_free(tg_decoder *d) {
    if (!d) return;
    if (d->kept) keep_weights(d->m, false);
    tg_graph_free(d->held);
    tg_kv_cache_free(d->self);
    tg_store_free(d->mem);
    free(d->src);
    free(d->sent);
    free(d->sent_next);
    free(d->hist);
    free(d->hist_next);
    free(d);
}

int64_t tg_decoder_steps(const tg_decoder *d) { return d ? d->step : 0; }

/* ---- one step ---- */

typedef struct {
    tg_decoder *d;
    int64_t layer;
    tg_tensor *ids;  /* cross: [R / group, S] table rows of each group's sentence */
    tg_tensor *mask; /* cross: [R / group, 1, 1, S] source padding */
    int64_t group;   /* cross: rows per sentence (memory_inputs) */
} step_ctx;

static tg_tensor *memory_rows(tg_graph *g, tg_decoder *d, int64_t layer, char kv, tg_tensor *ids) {
    char name[64];
    snprintf(name, sizeof name, "cross.%lld.%c", (long long)layer, kv);
    return tg_embedding(tg_param(g, d->mem, name), ids);
}

/* Self-attention of the new position over positions 0..t: the cached K/V rows of the row's
 * ancestors, then this position's own K/V ([R, 1, w] each, appended to the cache), as the two
 * parts of tg__attn_core (concatenating them copied every row's whole history once more: 17 %
 * of a step at 512-wide attention, docs/log/2026-12-06.md). */
static tg_tensor *self_sublayer(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x, void *ctx) {
    step_ctx *s = ctx;
    tg_kv_cache *c = s->d->self;
    int l = (int)s->layer;
    const tg_attn_kind_def *def = tg_attn_kind_def_get(m->cfg.attention);
    if (def) /* the inputs cached: the new position over the earlier ones and itself */
        return tg__attn_registered(m, g, def, prefix, x, tg_kv_cache_extend(g, c, l, 0, x), NULL, true);
    char p[192];
    int64_t h = m->cfg.heads, dk = tg_model_head_dim(&m->cfg);
    snprintf(p, sizeof p, "%s.k_proj", prefix);
    tg_tensor *k = tg_kv_cache_append(g, c, l, 0, tg__layer_linear(m, g, p, x, true));
    snprintf(p, sizeof p, "%s.v_proj", prefix);
    tg_tensor *v = tg_kv_cache_append(g, c, l, 1, tg__layer_linear(m, g, p, x, true));
    tg__attn_kv kv = {tg__attn_split_heads(k, h, dk), tg__attn_split_heads(v, h, dk), NULL, NULL};
    if (tg_kv_cache_len(c) > 0)
        kv = (tg__attn_kv){tg__attn_split_heads(tg_kv_cache_past(g, c, l, 0), h, dk),
                           tg__attn_split_heads(tg_kv_cache_past(g, c, l, 1), h, dk), kv.k, kv.v};
    return tg__attn_core(m, g, prefix, x, kv, NULL, NULL, true);
}

/* Cross-attention over the memory keys/values computed once by the encoder graph. The rows come
 * in groups of k of one sentence (k > 1: a beam; else 1): their queries [R, 1, d] go in as k query
 * positions of their sentence, [R / k, k, d], over one copy of its keys: a cross-attention query
 * sees no position of its own (no mask, rotation or window of the query's), so this is the same
 * attention, and the step gathers a k-th of the keys and values. */
static tg_tensor *cross_sublayer(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *x, void *ctx) {
    step_ctx *s = ctx;
    int64_t h = m->cfg.heads, dk = tg_model_head_dim(&m->cfg), R = tg_tensor_dim(x, 0),
            dm = tg_tensor_dim(x, 2);
    const tg_attn_kind_def *def = tg_attn_kind_def_get(m->cfg.attention);
    if (def) { /* the memory cached: the grouped queries over their sentence's */
        int64_t grouped[3] = {R / s->group, s->group, dm}, rows[3] = {R, 1, dm};
        tg_tensor *mem = memory_rows(g, s->d, s->layer, 'k', s->ids);
        return tg_reshape(tg__attn_registered(m, g, def, prefix, tg_reshape(x, 3, grouped), mem, s->mask, false), 3, rows);
    }
    tg__attn_kv kv = {tg__attn_split_heads(memory_rows(g, s->d, s->layer, 'k', s->ids), h, dk),
                      tg__attn_split_heads(memory_rows(g, s->d, s->layer, 'v', s->ids), h, dk), NULL, NULL};
    int64_t grouped[3] = {R / s->group, s->group, dm}, rows[3] = {R, 1, dm};
    tg_tensor *o = tg__attn_core(m, g, prefix, tg_reshape(x, 3, grouped), kv, s->mask, NULL, false);
    return tg_reshape(o, 3, rows);
}

/* The step's inputs every layer shares; bind_cached fills the one layer's context the stack
 * asks for (used at once, so one scratch context serves every layer). */
typedef struct {
    tg_decoder *d;
    tg_tensor *cross_ids, *mask;
    int64_t group;  /* rows per sentence of cross_ids and mask */
    step_ctx scratch;
} cached_ctx;

static void *bind_cached(void *arg, int64_t layer, bool cross) {
    cached_ctx *c = arg;
    c->scratch = cross ? (step_ctx){c->d, layer, c->cross_ids, c->mask, c->group}
                       : (step_ctx){c->d, layer, NULL, NULL, 1};
    return &c->scratch;
}

/* k when the R rows are groups of k consecutive rows of one sentence each (k the length of the
 * first sentence's run: a beam search's steps after the first), else 1. */
static int64_t rows_per_sentence(const tg_decoder *d, int64_t R) {
    int64_t k = 1;
    while (k < R && d->sent_next[k] == d->sent_next[0])
        k++;
    if (R % k) return 1;
    for (int64_t r = 0; r < R; r++)
        if (d->sent_next[r] != d->sent_next[r - r % k]) return 1;
    return k;
}

/* Inputs shared by both modes: table rows of the sentence of each group of `group` rows in
 * the memory tables ([R / group, S]) and its source padding mask ([R / group, 1, 1, S]). */
static tg_status memory_inputs(tg_graph *g, tg_decoder *d, int64_t R, int64_t group,
                               tg_tensor **ids, tg_tensor **mask) {
    int64_t S = d->S, n = R / group;
    int32_t *mi = malloc((size_t)(n * S) * sizeof *mi);
    float *mk = malloc((size_t)(n * S) * sizeof *mk);
    if (!mi || !mk) {
        free(mi);
        free(mk);
        return nomem("step inputs");
    }
    for (int64_t r = 0; r < n; r++)
        for (int64_t s = 0; s < S; s++) {
            int64_t i = d->sent_next[r * group];
            mi[r * S + s] = (int32_t)(i * S + s);
            mk[r * S + s] = d->src[i * S + s] == TG_PAD ? 1.0f : 0.0f;
        }
    int64_t si[2] = {n, S}, sm[4] = {n, 1, 1, S};
    *ids = tg_input(g, TG_DTYPE_I32, 2, si, mi);
    *mask = tg_input(g, TG_DTYPE_F32, 4, sm, mk);
    free(mi);
    free(mk);
    return TG_OK;
}

/* Run the step's graph and read its [R, V] output: the logits, or with log_probs their rows'
 * log-softmax, computed by the backend in one row kernel (a search needs it for every row at
 * every step: on the host, one double exp a logit, it was three quarters of a beam search's
 * time; as max, exp, sum and log nodes, 15 % of a step's). With view, on a backend whose memory
 * is the host's, where it lies: copying [64, 7,816] out every step was 9 % of a narrow model's
 * beam search (docs/log/); the step keeps g for it (*hold). */
static tg_status run_step(tg_decoder *d, tg_graph *g, tg_tensor *logits_t, int64_t R, float *out,
                          bool log_probs, const float **view, bool *hold) {
    tg_model *m = d->m;
    tg_tensor *y = tg_keep(log_probs && logits_t ? tg_log_softmax(logits_t) : logits_t);
    tg_status st = built(g, y);
    if (st == TG_OK) st = tg_graph_run(g, m->backend);
    if (st != TG_OK) return st;
    const int64_t V = m->cfg.tgt_vocab, n = R * V;
    /* Checked before a search reads them. Log-probabilities: the first of each row. A row whose
     * logits hold a NaN or +inf is NaN throughout (its sum of exponentials is), one with no
     * finite logit is -inf throughout (backends/cpu/vmath.c: a dead row): R reads instead of a
     * pass over R x V values that would cost a search a few per cent of its time. */
    const int64_t stride = log_probs ? V : 1;
    const char *what = log_probs ? "log-probabilities" : "logits";
    const float *in_place = view ? tg__tensor_host_view(y, m->backend) : NULL;
    if (in_place) {
        *view = in_place;
        *hold = true;
        return tg__model_check_finite(g, m->backend, *view, n, stride, "the %s", what);
    }
    if (view) *view = out;
    st = tg_tensor_read(y, out, (size_t)n * sizeof *out);
    return st ? st : tg__model_check_finite(g, m->backend, out, n, stride, "the %s", what);
}

/* Cached step at position t: builds, runs, returns the logits (or log-probabilities) and appends
 * the new K/V rows to the cache. */
static tg_status step_cached(tg_decoder *d, tg_graph *g, int64_t R, const int32_t *tokens,
                             float *out, bool log_probs, const float **view, bool *hold) {
    tg_model *m = d->m;
    const tg_model_config *c = &m->cfg;
    tg_tensor *cross_ids = NULL, *mask = NULL;
    bool lm = c->arch == TG_ARCH_LM;
    const int64_t group = lm ? 1 : rows_per_sentence(d, R);
    tg_status st = lm ? TG_OK : memory_inputs(g, d, R, group, &cross_ids, &mask);
    if (st) return st;
    tg_tensor *y = tg__layer_embed(m, g, tg__model_tgt_embed_name(c), tokens, R, 1, d->step);
    cached_ctx cc = {d, cross_ids, mask, group, {0}};
    tg__model_dec_attn a = {self_sublayer, cross_sublayer, bind_cached, &cc};
    y = tg__model_decoder_stack(m, g, y, &a);
    st = run_step(d, g, tg__model_output_logits(m, g, y), R, out, log_probs, view, hold);
    return st ? st : tg_kv_cache_commit(d->self);
}

/* Full step: the decoder stack over every row's whole prefix [R, t+1], as in training. */
static tg_status step_full(tg_decoder *d, tg_graph *g, int64_t R, float *out, bool log_probs,
                           const float **view, bool *hold) {
    tg_model *m = d->m;
    const tg_model_config *c = &m->cfg;
    int64_t T = d->step + 1, V = c->tgt_vocab;
    int32_t *tok = malloc((size_t)(R * T) * sizeof *tok);
    if (!tok) return nomem("step inputs");
    for (int64_t r = 0; r < R; r++) memcpy(tok + r * T, d->hist_next + r * d->max_steps, (size_t)T * sizeof *tok);
    tg_tensor *ids = NULL, *mask = NULL, *mem = NULL;
    tg_status st = c->arch == TG_ARCH_LM ? TG_OK : memory_inputs(g, d, R, 1, &ids, &mask);
    if (st) {
        free(tok);
        return st;
    }
    if (ids) mem = tg_embedding(tg_param(g, d->mem, "memory"), ids);
    tg_tensor *y = tg__layer_embed(m, g, tg__model_tgt_embed_name(c), tok, R, T, 0);
    const tg__attn_band band = {tok, R, c->pad_id, true}; /* what the causal mask masks */
    tg_tensor *y2 = tg__model_decode(m, g, y, mem, mask,
                                     tg__layer_causal_mask_pad(g, tok, R, T, c->pad_id), &band);
    int64_t s3[3] = {R, T, V};
    tg_tensor *logits =
        tg_contiguous(tg_slice(tg_reshape(tg__model_output_logits(m, g, y2), 3, s3), 1, T - 1, T));
    free(tok);
    return run_step(d, g, logits, R, out, log_probs, view, hold);
}

tg_status tg_decoder_step(tg_decoder *d, int64_t rows, const int32_t *parent, const int32_t *tokens,
                          float *logits) {
    return tg__decoder_step(d, rows, parent, tokens, logits, false, NULL);
}

tg_status tg__decoder_step(tg_decoder *d, int64_t rows, const int32_t *parent,
                           const int32_t *tokens, float *out, bool log_probs, const float **view) {
    if (!d || !parent || !tokens || !out)
        return tg_error_set(TG_ERR_INVALID, "tg_decoder_step: NULL argument");
    const tg_model_config *c = &d->m->cfg;
    int64_t t = d->step, T = d->max_steps;
    if (t >= T)
        return tg_error_set(TG_ERR_INVALID, "tg_decoder_step: step %lld beyond the %lld steps the decoder was made for",
                            (long long)t, (long long)T);
    if (rows < 1 || rows > d->max_rows)
        return tg_error_set(TG_ERR_INVALID, "tg_decoder_step: %lld rows (1..%lld allowed)", (long long)rows,
                            (long long)d->max_rows);
    int64_t up = t == 0 ? d->n : d->rows;
    for (int64_t r = 0; r < rows; r++) {
        if (parent[r] < 0 || parent[r] >= up)
            return tg_error_set(TG_ERR_INVALID, "tg_decoder_step: row %lld: parent %d outside [0, %lld)", (long long)r,
                                parent[r], (long long)up);
        if (tokens[r] < 0 || tokens[r] == c->pad_id || tokens[r] >= c->tgt_vocab)
            return tg_error_set(TG_ERR_INVALID, "tg_decoder_step: row %lld: token %d is <pad> or outside the target vocabulary (%lld)",
                                (long long)r, tokens[r], (long long)c->tgt_vocab);
    }
    /* row bookkeeping: sentence and history (cached: in the cache; full: tokens) of every new row */
    for (int64_t r = 0; r < rows; r++) {
        int64_t p = parent[r];
        d->sent_next[r] = t == 0 ? p : d->sent[p];
        if (d->cached) continue;
        if (t > 0) memcpy(d->hist_next + r * T, d->hist + p * T, (size_t)t * sizeof *d->hist);
        d->hist_next[r * T + t] = tokens[r];
    }
    /* each row continues its parent's cached keys and values; at step 0 nothing is cached (a
     * row's parent is its sentence) */
    tg_status st = d->cached ? tg_kv_cache_reorder(d->self, rows, t == 0 ? NULL : parent) : TG_OK;
    if (st != TG_OK) return tg_error_prefix(st, "tg_decoder_step %lld", (long long)t);
    tg_graph_free(d->held); /* the last step's values, read by now */
    d->held = NULL;
    tg_graph *g = tg_graph_new();
    if (!g) return nomem("graph");
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    bool hold = false;
    st = d->cached ? step_cached(d, g, rows, tokens, out, log_probs, view, &hold)
                   : step_full(d, g, rows, out, log_probs, view, &hold);
    if (st == TG_OK && hold)
        d->held = g;
    else
        tg_graph_free(g);
    if (st != TG_OK) return tg_error_prefix(st, "tg_decoder_step %lld", (long long)t);
    /* commit: the new rows become the current ones */
    int64_t *s = d->sent;
    d->sent = d->sent_next;
    d->sent_next = s;
    int32_t *h = d->hist;
    d->hist = d->hist_next;
    d->hist_next = h;
    d->rows = rows;
    d->step++;
    return TG_OK;
}
