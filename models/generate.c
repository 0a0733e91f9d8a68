/* Generation from a decoder-only language model (arch lm) on the incremental decoder of
 * models/decode.c: <s> and the prompt go in one token per step (each step appends to the
 * cached keys/values of every layer), then every drawn token is fed back as the next step, so a
 * token costs one step over the cache, not a pass over the whole prefix. The special ids are
 * docs/model.md §4's, or those of an imported model's tokenizer (GPT-2: <|endoftext|> ends the
 * text, and starts it only when there is no prompt, as transformers' generate does; id 0 is a
 * token like any other, there being no padding). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"
#include "tg/decode.h"

tg_generate_options tg_generate_options_default(void) {
    tg_generate_options o = {.max_new = 100, .sample = tg_sample_options_default(), .seed = 1, .cached = true};
    return o;
}

void tg_generation_free(tg_generation *g) {
    if (!g) return;
    free(g->ids);
    memset(g, 0, sizeof *g);
}

/* start: the id fed before the prompt (-1: none); eos: the id that ends the text; pad: never
 * fed nor drawn (-1: none); bos: never drawn (-1: none) */
typedef struct {
    int32_t start, eos, pad, bos;
} specials;

static specials specials_of(const tg_model *m, int64_t n) {
    const tg_tokenizer *t = m->tok;
    if (!t || tg_tokenizer_kind(t) == TG_TOK_WORDS || tg_tokenizer_kind(t) == TG_TOK_CHARS)
        return (specials){TG_BOS, TG_EOS, TG_PAD, TG_BOS};
    int32_t bos = tg_tokenizer_special(t, "bos"), eos = tg_tokenizer_special(t, "eos");
    return (specials){n == 0 ? bos : -1, eos, m->cfg.pad_id, bos == eos ? -1 : bos};
}

tg_status tg_generate(tg_model *m, const int32_t *prompt, int64_t n, const tg_generate_options *opts,
                      tg_generation *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!m || !out || n < 0 || (n > 0 && !prompt)) return tg_error_set(TG_ERR_INVALID, "tg_generate: NULL argument");
    const tg_model_config *c = &m->cfg;
    tg_generate_options o = opts ? *opts : tg_generate_options_default();
    if (c->arch != TG_ARCH_LM)
        return tg_error_set(TG_ERR_INVALID, "tg_generate: the model is %s (arch %s); generation continues a "
                                            "language model (arch lm)",
                            c->arch == TG_ARCH_MLM ? "a masked language model" : "an encoder-decoder",
                            tg_model_arch_name(c->arch));
    if (o.max_new < 1) return tg_error_set(TG_ERR_INVALID, "tg_generate: max_new %lld < 1", (long long)o.max_new);
    specials sp = specials_of(m, n);
    int64_t lead = sp.start >= 0; /* <s> before the prompt */
    if (n == 0 && !lead)
        return tg_error_set(TG_ERR_INVALID, "tg_generate: an empty prompt, and the model's tokenizer has no start token");
    if (n + lead > c->max_len)
        return tg_error_set(TG_ERR_INVALID, "tg_generate: the prompt has %lld tokens (+ <s>), the model's max_len is %lld",
                            (long long)n, (long long)c->max_len);
    int64_t V = c->tgt_vocab;
    for (int64_t i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] == sp.pad || prompt[i] >= V)
            return tg_error_set(TG_ERR_INVALID, "tg_generate: prompt token %lld: id %d is <pad> or outside the vocabulary (%lld)",
                                (long long)i, prompt[i], (long long)V);
    /* ctx: every token fed so far (<s>, the prompt, then each drawn token); the decoder holds
     * the positions from ctx[w0] on. When its max_len positions are full and more tokens are
     * wanted, the window slides: a new decoder reads the last max_len / 2 tokens again (from
     * position 0, as a block cut from a token stream starts), so generation runs to max_new or
     * </s>, nanoGPT's cropped context done once per max_len / 2 tokens instead of per token. */
    int64_t cap = n + lead + o.max_new, w0 = 0, fed = 0, cache = cap < c->max_len ? cap : c->max_len;
    int32_t *ctx = malloc((size_t)cap * sizeof *ctx);
    tg_decoder *d = NULL;
    tg_status st = tg_decoder_new(m, NULL, NULL, 1, 1, cache, o.cached, &d);
    float *lp = malloc((size_t)V * sizeof *lp);
    out->ids = malloc((size_t)o.max_new * sizeof *out->ids);
    if (st == TG_OK && (!lp || !out->ids || !ctx))
        st = tg_error_set(TG_ERR_NOMEM, "tg_generate: out of memory");
    tg_rng rng;
    tg_rng_init(&rng, o.seed);
    const int32_t parent = 0;
    int64_t len = n + lead;
    if (ctx) {
        if (lead) ctx[0] = sp.start;
        if (n) memcpy(ctx + lead, prompt, (size_t)n * sizeof *ctx);
    }
    while (st == TG_OK) {
        if (fed - w0 == c->max_len) { /* the decoder is full: slide the window */
            tg_decoder_free(d);
            d = NULL;
            w0 = fed - c->max_len / 2;
            fed = w0;
            st = tg_decoder_new(m, NULL, NULL, 1, 1, cache, o.cached, &d);
            if (st != TG_OK) break;
        }
        /* log P under the model (temperature 1, no filters), before the masking below; the
         * sampler's softmax is the same over log-probabilities as over logits */
        st = tg__decoder_step(d, 1, &parent, &ctx[fed], lp, true, NULL); /* lp: masked below */
        if (st != TG_OK) break;
        if (++fed < len) continue; /* still reading the prompt (or the window again) */
        if (sp.pad >= 0) lp[sp.pad] = -INFINITY; /* never drawn */
        if (sp.bos >= 0) lp[sp.bos] = -INFINITY;
        int64_t next;
        st = tg_sample(lp, V, &o.sample, &rng, &next);
        if (st != TG_OK) break;
        out->logprob += (double)lp[next];
        if (next == sp.eos) {
            out->finished = true;
            break;
        }
        out->ids[out->len++] = (int32_t)next;
        ctx[len++] = (int32_t)next;
        if (out->len == o.max_new) break;
    }
    free(ctx);
    free(lp);
    tg_decoder_free(d);
    if (st != TG_OK) {
        tg_generation_free(out);
        return st;
    }
    return TG_OK;
}
