/* Corpora of the language-model families, one sequence per line, held as parallel corpora so
 * that batching, training, evaluation and scoring are the encoder-decoder's own code:
 *  - arch lm: the sequence is the target side and the sources are empty (an empty source costs
 *    one token, </s>, per sentence in the batch budget);
 *  - arch mlm: (masked sequence, targets at the masked positions), masked once by BERT's rule
 *    (static), or the plain sequences masked anew for every batch (dynamic, train/data.c). */
#include <stdlib.h>

#include "train/train-impl.h"

tg_status tg_corpus_new_lm(const tg_lines *text, const tg_vocab *vocab, const tg_corpus_options *opt,
                           tg_corpus **out) {
    if (!text || !vocab || !out) return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_lm: NULL argument");
    static char empty[1] = "";
    tg_lines none = {.n = text->n, .line = malloc((size_t)(text->n ? text->n : 1) * sizeof(char *)), .buf = NULL,
                     .path = text->path};
    if (!none.line) return tg_error_set(TG_ERR_NOMEM, "tg_corpus_new_lm: out of memory");
    for (int64_t i = 0; i < text->n; i++) none.line[i] = empty;
    tg_status st = tg_corpus_new(&none, text, vocab, vocab, opt, out);
    free(none.line);
    return st;
}

tg_status tg_corpus_new_mlm_dynamic(const tg_lines *text, const tg_vocab *vocab, const tg_corpus_options *opt,
                                   double p, uint64_t seed, tg_corpus **out) {
    if (out) *out = NULL;
    if (!text || !vocab || !out) return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_mlm_dynamic: NULL argument");
    if (!(p > 0.0 && p <= 1.0))
        return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_mlm_dynamic: probability %g outside (0, 1]", p);
    int32_t mask = tg_vocab_id(vocab, "<mask>");
    if (mask == TG_UNK) return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_mlm_dynamic: the vocabulary has no <mask> token");
    tg_status st = tg_corpus_new_lm(text, vocab, opt, out);
    if (st == TG_OK) st = tg__train_corpus_set_mlm_dynamic(*out, p, seed, mask, (int32_t)tg_vocab_size(vocab), NULL, 0, TG_EOS);
    if (st && *out) {
        tg_corpus_free(*out);
        *out = NULL;
    }
    return st;
}

tg_status tg_corpus_new_mlm_ids(int64_t n, const int32_t *const *ids, const int64_t *len, const tg_mlm_layout *l,
                                double p, uint64_t seed, tg_corpus **out) {
    if (out) *out = NULL;
    if (n < 0 || (n > 0 && (!ids || !len)) || !l || !out || (l->nspecial > 0 && !l->special))
        return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_mlm_ids: NULL argument");
    if (!(p > 0.0 && p <= 1.0)) return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_mlm_ids: probability %g outside (0, 1]", p);
    bool ok = l->vocab_size > l->nspecial && l->mask >= 0 && l->mask < l->vocab_size && l->eos < l->vocab_size;
    for (int64_t i = 0; ok && i < l->nspecial; i++)
        ok = l->special[i] >= 0 && l->special[i] < l->vocab_size && (i == 0 || l->special[i] > l->special[i - 1]);
    if (!ok)
        return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_mlm_ids: the layout's ids are outside the vocabulary of %d, "
                            "or its specials are not ascending", (int)l->vocab_size);
    const int32_t none = 0;
    const int32_t **src = malloc((size_t)(n ? n : 1) * sizeof *src);
    int64_t *zero = calloc((size_t)(n ? n : 1), sizeof *zero);
    tg_status st = src && zero ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_corpus_new_mlm_ids: out of memory");
    for (int64_t i = 0; st == TG_OK && i < n; i++) src[i] = &none;
    if (st == TG_OK) st = tg_corpus_from_ids(n, src, zero, ids, len, out);
    if (st == TG_OK)
        st = tg__train_corpus_set_mlm_dynamic(*out, p, seed, l->mask, l->vocab_size, l->special, l->nspecial, l->eos);
    if (st && *out) {
        tg_corpus_free(*out);
        *out = NULL;
    }
    free(src);
    free(zero);
    return st;
}

tg_status tg_corpus_new_mlm(const tg_lines *text, const tg_vocab *vocab, const tg_corpus_options *opt, double p,
                            uint64_t seed, tg_corpus **out) {
    if (out) *out = NULL;
    tg_corpus *lm = NULL;
    tg_status st = tg_corpus_new_lm(text, vocab, opt, &lm);
    if (st) return st;
    int64_t n = tg_corpus_size(lm);
    int32_t **in = calloc((size_t)(n ? n : 1), sizeof *in), **tg = calloc((size_t)(n ? n : 1), sizeof *tg);
    int64_t *len = calloc((size_t)(n ? n : 1), sizeof *len);
    if (!in || !tg || !len) st = tg_error_set(TG_ERR_NOMEM, "tg_corpus_new_mlm: out of memory");
    tg_rng rng;
    tg_rng_init(&rng, seed);
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        const int32_t *ids = tg_corpus_tgt(lm, i, &len[i]);
        in[i] = malloc((size_t)(len[i] + 1) * sizeof **in);
        tg[i] = malloc((size_t)(len[i] + 1) * sizeof **tg);
        if (!in[i] || !tg[i]) st = tg_error_set(TG_ERR_NOMEM, "tg_corpus_new_mlm: out of memory");
        else st = tg_mlm_mask(vocab, ids, len[i], p, &rng, in[i], tg[i]);
    }
    if (st == TG_OK)
        st = tg_corpus_from_ids(n, (const int32_t *const *)in, len, (const int32_t *const *)tg, len, out);
    if (st == TG_OK) tg__train_corpus_set_mlm(*out);
    for (int64_t i = 0; in && tg && i < n; i++) {
        free(in[i]);
        free(tg[i]);
    }
    free(in);
    free(tg);
    free(len);
    tg_corpus_free(lm);
    return st;
}

tg_status tg_corpus_new_classify(int64_t n, const int32_t *const *ids, const int64_t *len, const int32_t *classes,
                                 int32_t eos, tg_corpus **out) {
    if (out) *out = NULL;
    if (n < 0 || (n > 0 && (!ids || !len || !classes)) || !out)
        return tg_error_set(TG_ERR_INVALID, "tg_corpus_new_classify: NULL argument");
    const int32_t **cls = malloc((size_t)(n ? n : 1) * sizeof *cls);
    int64_t *one = malloc((size_t)(n ? n : 1) * sizeof *one);
    tg_status st = cls && one ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_corpus_new_classify: out of memory");
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        if (classes[i] < 0) st = tg_error_set(TG_ERR_INVALID, "tg_corpus_new_classify: sequence %lld has class %d", (long long)i, classes[i]);
        cls[i] = &classes[i];
        one[i] = 1;
    }
    if (st == TG_OK) st = tg_corpus_from_ids(n, ids, len, cls, one, out);
    if (st == TG_OK) tg__train_corpus_set_classify(*out, eos);
    free(cls);
    free(one);
    return st;
}
