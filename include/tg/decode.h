/* tgraph — decoding a Transformer (docs/model.md §1 "Decoding"): greedy and beam search with
 * the GNMT length penalty, batched over sentences, on an incremental decoder that caches keys
 * and values.
 *
 * Two layers:
 *  - tg_decoder: the model side. The encoder runs once; each tg_decoder_step feeds one token per
 *    hypothesis ("row") and returns the next-token logits. In cached mode every decoder layer
 *    keeps the self-attention keys/values of earlier positions and the cross-attention
 *    keys/values of the memory in backend buffers, so a step costs O(current length). In full
 *    mode (the reference) every step re-runs the decoder stack over the whole prefix through the
 *    same code that scores and trains.
 *  - tg_decode / tg_decode_full: the search (greedy or beam) on top of a decoder.
 *
 * Lengths: the maximum output length of a source of S tokens (without </s>) is
 * L = min(floor(max_len_a * S + max_len_b), model max_len) tokens counting </s> (at least 1);
 * a hypothesis that reaches L tokens without </s> stops there and is marked unfinished. */
#ifndef TG_DECODE_H
#define TG_DECODE_H

#include "tg/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "tg/model.h"
#include "tg/sample.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the incremental decoder ---- */
typedef struct tg_decoder tg_decoder;

/* Encode n sources (token ids without specials; </s> is appended, shorter ones are padded) and
 * prepare a decoder for up to max_rows hypotheses per step and max_steps steps (positions).
 * cached = false gives the no-cache reference (full re-run of the decoder each step). The model
 * is borrowed and must outlive the decoder, and its weights must not change while the decoder
 * exists (the memory's keys and values, and on the CPU the packed weights of the steps'
 * products, are computed from them once); src is copied. Free with tg_decoder_free.
 * A language model (arch lm) has no source: src and src_n must be NULL, and the n "sentences"
 * are independent sequences, each started by feeding <s> at step 0. */
TG_API tg_status tg_decoder_new(tg_model *m, const int32_t *const *src, const int64_t *src_n, int64_t n,
                         int64_t max_rows, int64_t max_steps, bool cached, tg_decoder **out);
TG_API void tg_decoder_free(tg_decoder *d);

/* Many decoders in turn (a file translated batch by batch: each tg_decode or tg_generate call
 * makes one): the weights the steps read, which each decoder prepares on the backend when it is
 * made and gives back when it is freed (on the CPU, packed for its GEMM), stay prepared from
 * tg_decoder_hold_weights until the matching tg_decoder_release_weights, so that no decoder in
 * between prepares them again. The weights must not change in between (no training step).
 * Calls nest; a release without a hold does nothing; tg_model_free releases the holds left.
 * Errors: a NULL model. */
TG_API tg_status tg_decoder_hold_weights(tg_model *m);
TG_API void tg_decoder_release_weights(tg_model *m);

/* One step: `rows` hypotheses (1..max_rows) each append one decoder input token. At step 0,
 * parent[r] is the sentence (0..n-1) of row r; at later steps parent[r] is the row of the
 * previous step that row r continues (rows may be dropped, duplicated and reordered: beam
 * search). tokens[r] is the token at this position (<s> at step 0, then the previous choice;
 * never <pad>). Writes the logits of the next token, [rows, V_tgt] row-major, into the
 * caller's array `logits`. */
TG_API tg_status tg_decoder_step(tg_decoder *d, int64_t rows, const int32_t *parent, const int32_t *tokens,
                          float *logits);
/* Steps taken so far (= the position of the next token). */
TG_API int64_t tg_decoder_steps(const tg_decoder *d);

/* ---- search ---- */
typedef enum tg_decode_strategy {
    TG_DECODE_AUTO = 0, /* greedy when beam == 1, else beam search */
    TG_DECODE_GREEDY,   /* argmax at every step (beam ignored) */
    TG_DECODE_BEAM,     /* beam search, also for beam == 1 */
} tg_decode_strategy;

typedef struct tg_decode_options {
    int64_t beam;       /* beam size K >= 1 (default 4, the paper's) */
    double alpha;       /* length penalty exponent >= 0 (default 0.6) */
    double max_len_a;   /* maximum output length = a * source length + b (defaults 1, 50) */
    int64_t max_len_b;
    int64_t nbest;      /* hypotheses returned per sentence, 1..beam (default 1) */
    tg_decode_strategy strategy;
} tg_decode_options;

/* beam 4, alpha 0.6, a = 1, b = 50, nbest 1, TG_DECODE_AUTO. */
TG_API tg_decode_options tg_decode_options_default(void);

/* GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| counting </s>. */
TG_API double tg_decode_length_penalty(int64_t len, double alpha);

typedef struct tg_hypothesis {
    int32_t *ids;    /* target ids, without <s> and </s> (malloc'ed; owned by the result) */
    int64_t len;     /* number of ids */
    double logprob;  /* log P(Y|X), natural log, </s> included when finished */
    double score;    /* logprob / lp(Y), |Y| = len + finished */
    bool finished;   /* ended with </s> (false: stopped at the maximum length) */
} tg_hypothesis;

typedef struct tg_nbest {
    int64_t count;     /* 1..nbest hypotheses (fewer only for a tiny vocabulary) */
    tg_hypothesis *hyp; /* best first: finished ones by score, then unfinished ones by score */
} tg_nbest;

/* Decode n sentences (token ids of the source vocabulary, without specials) in one batch with
 * the incremental decoder. Greedy and beam search never emit <pad> or <s> (log P is still over
 * the whole vocabulary). On success *out is a malloc'ed array of n results, freed with
 * tg_decode_free(*out, n). opts may be NULL (the defaults). */
TG_API tg_status tg_decode(tg_model *m, const int32_t *const *src, const int64_t *src_n, int64_t n,
                    const tg_decode_options *opts, tg_nbest **out);
/* The same search on the no-cache reference decoder (slow; for tests and checks). */
TG_API tg_status tg_decode_full(tg_model *m, const int32_t *const *src, const int64_t *src_n, int64_t n,
                         const tg_decode_options *opts, tg_nbest **out);
/* Free the results of tg_decode (NULL is allowed). */
TG_API void tg_decode_free(tg_nbest *r, int64_t n);

/* ---- generation from a language model (arch lm; models/generate.c) ---- */
typedef struct tg_generate_options {
    int64_t max_new;          /* tokens to generate at most (default 100) */
    tg_sample_options sample; /* temperature (0 = greedy), top_k, top_p */
    uint64_t seed;            /* the sampling RNG's seed (default 1) */
    bool cached;              /* true (default): cached keys/values, one step per token;
                               * false: the whole prefix recomputed per token (the reference) */
} tg_generate_options;

/* max_new 100, temperature 1, top_k 0, top_p 1, seed 1, cached. */
TG_API tg_generate_options tg_generate_options_default(void);

typedef struct tg_generation {
    int32_t *ids;    /* generated ids after the prompt, without </s> (malloc'ed) */
    int64_t len;
    double logprob;  /* log P of the generated ids (and </s> when finished) under the model at
                      * temperature 1, whatever the sampling options */
    bool finished;   /* ended with </s> (false: max_new reached) */
} tg_generation;

/* Continue `prompt` (n >= 0 ids of the model's vocabulary, without <s>): <s> and the prompt are
 * fed one token per step, then tokens are drawn (tg_sample) until </s> or max_new tokens. Past
 * the model's max_len positions the context slides: the last max_len / 2 tokens are read again
 * from position 0 and drawing goes on. <pad> and <s> are never drawn. A model whose stored
 * tokenizer has a layout of its own (an imported GPT-2) uses its special ids: the prompt alone
 * (its start token only before an empty prompt), its end token ends, its pad_id (none: -1) is
 * never drawn. Errors: an encoder-decoder model, a prompt with the pad id or an id outside the
 * vocabulary, or a prompt that with <s> does not fit in max_len. On success *out owns its ids
 * (tg_generation_free). */
TG_API tg_status tg_generate(tg_model *m, const int32_t *prompt, int64_t n, const tg_generate_options *opts,
                      tg_generation *out);
TG_API void tg_generation_free(tg_generation *g);

#ifdef __cplusplus
}
#endif
#endif
