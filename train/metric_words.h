/* Internal: a corpus as word ids for METEOR, ROUGE-L and CIDEr-D (see metric_words.c). */
#ifndef TG_METRIC_WORDS_H
#define TG_METRIC_WORDS_H

#include "train/metrics-impl.h"

typedef struct tg__metric_corpus {
    size_t n;      /* sentence pairs */
    uint32_t *ids; /* every word's id; sentence s (2i = hyp i, 2i + 1 = ref i) is */
    size_t *off;   /*   ids[off[s] .. off[s] + len[s]) */
    size_t *len;
    uint32_t n_words; /* distinct words: ids are < n_words */
    uint32_t *stem;   /* stem[id]: the id of the word's Porter stem (if asked for), else NULL */
    size_t longest;   /* the most words in one sentence */
} tg__metric_corpus;

/* Words of hyps[i] and refs[i], i < n, as tg__text_words() splits them; lower: lower-case each
 * word as Python's str.lower(); stems: also number their NLTK Porter stems. The strings must
 * be valid UTF-8 (tg__text_check_corpus). On error *c is left empty. */
tg_status tg__metric_corpus_build(const char *const *hyps, const char *const *refs, size_t n,
                                  tg_bleu_tokenize tok, int lower, int stems, tg__metric_corpus *c);
void tg__metric_corpus_free(tg__metric_corpus *c);

/* What distinguishes one mean-of-sentences metric (METEOR, ROUGE-L, CIDEr-D). */
typedef struct tg__metric_mean_spec {
    int lower, stems; /* for tg__metric_corpus_build */
    /* Optional: prepare *ctx (scratch, corpus-wide tables) for score(); freed by release(). */
    tg_status (*setup)(const tg__metric_corpus *c, void **ctx);
    double (*score)(const tg__metric_corpus *c, size_t i, void *ctx); /* sentence pair i */
    void (*release)(void *ctx);
    const char *signature; /* the middle of the signature, e.g. "stem:no" */
} tg__metric_mean_spec;

/* The frame they share: check the arguments (errors name fn), build the corpus, score every
 * pair into sentence_scores (if not NULL), and write the mean and the signature
 * "nrefs:1|case:lc|mixed|tok:13a|none|<spec->signature>|version:tgraph" to *out. */
tg_status tg__metric_mean(const char *fn, const char *const *hyps, const char *const *refs,
                          size_t n, tg_bleu_tokenize tok, const tg__metric_mean_spec *spec,
                          double *sentence_scores, tg_metric_mean_result *out);

#endif
