/* tgraph — evaluation metrics (docs/model.md §3): corpus BLEU and chrF computed exactly as
 * sacreBLEU 2.x computes them, word error rate, the G2P word/phoneme error rates, METEOR (as
 * NLTK, without WordNet), ROUGE-L (as rouge-score), CIDEr-D (as pycocoevalcap), and
 * sacreBLEU's paired bootstrap significance test over per-sentence statistics.
 *
 * Conventions shared by every function here:
 * - Texts are NUL-terminated UTF-8 strings; invalid UTF-8 is a TG_ERR_FORMAT error that names
 *   the sentence and the byte offset. chrF counts Unicode characters, not bytes.
 * - Words are what Python's str.split() yields: runs separated by Unicode whitespace (ASCII
 *   blanks, and also U+00A0 no-break space, U+2000..U+200A, U+3000, ...), as in sacreBLEU.
 * - A corpus is n parallel arrays of sentences, n >= 1. n = 0, a NULL array, a NULL sentence or
 *   a NULL result pointer is a TG_ERR_INVALID error; nothing is written to *out on error.
 * - All pointers passed in are borrowed for the duration of the call and never kept; results
 *   are plain structs the caller owns (no heap memory inside them).
 */
#ifndef TG_METRICS_H
#define TG_METRICS_H

#include "tg/export.h"

#include "tg/error.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- BLEU ------------------------------------------------------------------------------- */

/* How sentences are split into words before BLEU counts n-grams. */
typedef enum tg_bleu_tokenize {
    TG_BLEU_TOKENIZE_NONE = 0, /* the tokens as given: split on whitespace only */
    TG_BLEU_TOKENIZE_13A = 1   /* sacreBLEU's "13a" (mteval-v13a.pl) tokenizer, its default */
} tg_bleu_tokenize;

/* How a zero n-gram precision is treated (sacreBLEU's smooth_method). */
typedef enum tg_bleu_smooth {
    /* "exp" (sacreBLEU's default; NIST / mteval-v13a; Chen & Cherry 2014 method 3): the k-th
     * order with no match gets precision 1 / (2^k · total_n) instead of 0. */
    TG_BLEU_SMOOTH_EXP = 0,
    /* "none": a zero precision makes the score 0 (Papineni et al. 2002 as written). */
    TG_BLEU_SMOOTH_NONE = 1
} tg_bleu_smooth;

typedef struct tg_metric_bleu_options {
    tg_bleu_tokenize tokenize;
    tg_bleu_smooth smooth;
} tg_metric_bleu_options;

/* sacreBLEU's defaults: 13a tokenization, exp smoothing (what sacrebleu.corpus_bleu uses). */
TG_API tg_metric_bleu_options tg_metric_bleu_options_default(void);

typedef struct tg_metric_bleu_result {
    double score;         /* corpus BLEU in [0, 100]: bp · exp(mean_n log precisions[n]) */
    double precisions[4]; /* n-gram precisions n = 1..4 in percent, after smoothing */
    double bp;            /* brevity penalty: 1 if sys_len >= ref_len, else exp(1 - r/c) */
    int64_t counts[4];    /* clipped n-gram matches, summed over the corpus */
    int64_t totals[4];    /* hypothesis n-grams, summed over the corpus */
    int64_t sys_len;      /* hypothesis words (after tokenization) */
    int64_t ref_len;      /* reference words (after tokenization) */
    /* What was computed, in sacreBLEU's format, e.g.
     * "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:tgraph". */
    char signature[80];
} tg_metric_bleu_result;

/* Corpus BLEU-4 of hyps[i] against the single reference refs[i], i < n, as
 * sacrebleu.corpus_bleu(hyps, [refs], tokenize=..., smooth_method=...).score computes it:
 * each sentence is right-stripped and tokenized, clipped n-gram matches and totals (n = 1..4)
 * and lengths are summed over the corpus, then
 *   BLEU = BP · exp( (1/4) Σ_n log p_n ),  p_n = 100 · counts[n] / totals[n],
 *   BP = 1 if c >= r, exp(1 - r/c) if 0 < c < r, 0 if c = 0   (c = sys_len, r = ref_len).
 * If no n-gram of any order matches, the score is 0 and all precisions are 0 (sacreBLEU
 * #141). An order with no hypothesis n-grams at all has precision 0 (score 0).
 * opt may be NULL for tg_metric_bleu_options_default(). Writes *out on success. */
TG_API tg_status tg_metric_bleu(const char *const *hyps, const char *const *refs, size_t n,
                         const tg_metric_bleu_options *opt, tg_metric_bleu_result *out);

/* sacreBLEU's 13a tokenization of one line: the tokens joined by single spaces, e.g.
 * "Hello, world! It's 3.5-4.0." -> "Hello , world ! It's 3.5 - 4.0 .". Like sacreBLEU's
 * Tokenizer13a()(text) it does not strip the line first (tg_metric_bleu does, as sacreBLEU's
 * BLEU does), so a final "-\n" is deleted here. On success *out is a new NUL-terminated
 * string the caller releases with free(). */
TG_API tg_status tg_metric_tokenize_13a(const char *text, char **out);

/* ---- chrF ------------------------------------------------------------------------------- */

typedef struct tg_metric_chrf_result {
    double score;        /* corpus chrF2 in [0, 100] */
    double precision;    /* character n-gram precision averaged over effective orders, % */
    double recall;       /* the same for recall, % */
    int effective_order; /* orders n in 1..6 with hypothesis and reference n-grams */
    /* e.g. "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:tgraph" */
    char signature[80];
} tg_metric_chrf_result;

/* Corpus chrF (Popović 2015) of hyps[i] against the single reference refs[i], i < n, as
 * sacrebleu.corpus_chrf(hyps, [refs]).score computes it (char_order 6, word_order 0, beta 2,
 * whitespace removed, case kept, no eps smoothing). Per sentence, whitespace is deleted and
 * for each order n = 1..6 the character n-gram counts hyp_n, ref_n and clipped matches m_n are
 * taken; hyp_n counts only when the reference has n-grams of that order. Summed over the
 * corpus, P_n = m_n / hyp_n and R_n = m_n / ref_n are averaged over the orders where both
 * hyp_n > 0 and ref_n > 0, and chrF = 100 · (1 + β²) P R / (β² P + R), β = 2 (0 if P + R = 0).
 * Characters are Unicode code points. Writes *out on success. */
TG_API tg_status tg_metric_chrf(const char *const *hyps, const char *const *refs, size_t n,
                         tg_metric_chrf_result *out);

/* ---- edit distances --------------------------------------------------------------------- */

/* Word-level Levenshtein distance between hyp and ref (unit costs for substitution,
 * insertion and deletion; words compared byte for byte). Writes *dist on success. */
TG_API tg_status tg_metric_edit_distance(const char *hyp, const char *ref, int64_t *dist);

typedef struct tg_metric_wer_result {
    double wer;        /* errors / ref_words (may exceed 1 with many insertions) */
    int64_t errors;    /* Σ_i Levenshtein(hyp_i, ref_i) over words */
    int64_t ref_words; /* Σ_i words(ref_i) */
} tg_metric_wer_result;

/* Corpus word error rate: Σ_i word-Levenshtein(hyps[i], refs[i]) / Σ_i words(refs[i]).
 * A corpus whose references hold no words at all is a TG_ERR_INVALID error (WER undefined).
 * Writes *out on success. */
TG_API tg_status tg_metric_wer(const char *const *hyps, const char *const *refs, size_t n,
                        tg_metric_wer_result *out);

typedef struct tg_metric_g2p_result {
    double wer;           /* words_wrong / words */
    double per;           /* phone_errors / ref_phones */
    int64_t words;        /* n */
    int64_t words_wrong;  /* words whose hypothesis equals none of the references */
    int64_t phone_errors; /* Σ_i min_j Levenshtein(hyp_i, refs[i][j]) over phonemes */
    int64_t ref_phones;   /* Σ_i length of the closest reference of word i */
} tg_metric_g2p_result;

/* G2P metrics (docs/model.md §3) for n words. hyps[i] is the predicted pronunciation of word i and
 * refs[i][0 .. n_refs[i]) its accepted pronunciations, all as phonemes separated by
 * whitespace (so "AH0  B" equals "AH0 B"); n_refs[i] >= 1. With d_ij the phoneme-level
 * Levenshtein distance between hyps[i] and refs[i][j]:
 *   word i is wrong    iff  d_ij > 0 for every j (it matches no reference exactly);
 *   closest reference  j*(i) = the j with the smallest d_ij, the first listed on ties;
 *   WER = #wrong / n;   PER = Σ_i d_ij*(i) / Σ_i |refs[i][j*(i)]|   (|.| = phonemes).
 * PER is thus a corpus-level micro average (one division at the end), like WER above. A
 * corpus whose closest references hold no phonemes at all is a TG_ERR_INVALID error.
 * Writes *out on success. */
TG_API tg_status tg_metric_g2p(const char *const *hyps, const char *const *const *refs,
                        const size_t *n_refs, size_t n, tg_metric_g2p_result *out);

/* ---- METEOR, ROUGE-L, CIDEr-D: means of sentence scores ---------------------------------- */

/* Words: the line right-stripped and split on whitespace (tok NONE: pre-tokenised text), or
 * sacreBLEU's 13a tokenization of it (tok 13A), exactly as BLEU splits them. */

typedef struct tg_metric_mean_result {
    double score; /* mean of the sentence scores, on the scale of the package it follows */
    /* What was computed, e.g. "nrefs:1|case:lc|tok:none|stem:no|version:tgraph". */
    char signature[96];
} tg_metric_mean_result;

/* METEOR as nltk.translate.meteor_score.meteor_score([ref_words], hyp_words) with WordNet
 * left out: words lower-cased (Python's str.lower()), exact then NLTK-Porter-stem matches,
 * alpha 0.9, beta 3, gamma 0.5 (train/meteor.c has the formula and NLTK's alignment order).
 * Each sentence score is in [0, 1]; *out gets their mean. sentence_scores, if not NULL,
 * receives the n sentence scores. */
TG_API tg_status tg_metric_meteor(const char *const *hyps, const char *const *refs, size_t n,
                           tg_bleu_tokenize tok, double *sentence_scores,
                           tg_metric_mean_result *out);

/* ROUGE-L F-measure as the rouge-score package computes it (no stemming) on lower-cased
 * words: with l = |LCS(hyp, ref)|, P = l/|hyp|, R = l/|ref|, F = 2PR/(P+R), 0 when either
 * side is empty. Sentence scores in [0, 1]; *out gets their mean. */
TG_API tg_status tg_metric_rouge_l(const char *const *hyps, const char *const *refs, size_t n,
                            tg_bleu_tokenize tok, double *sentence_scores,
                            tg_metric_mean_result *out);

/* CIDEr-D as pycocoevalcap's Cider().compute_score computes it on the words as given (case
 * kept): n-grams 1..4, tf-idf vectors with the document frequencies of the n references,
 * clipped cosine similarity, Gaussian length penalty sigma 6, times 10 (train/cider.c).
 * Sentence scores in [0, 10] (about); *out gets their mean. */
TG_API tg_status tg_metric_cider(const char *const *hyps, const char *const *refs, size_t n,
                          tg_bleu_tokenize tok, double *sentence_scores,
                          tg_metric_mean_result *out);

/* ---- per-sentence statistics and paired bootstrap resampling ------------------------------ */

typedef enum tg_metric_id {
    TG_METRIC_BLEU = 0, /* corpus BLEU from summed n-gram statistics (10 per sentence) */
    TG_METRIC_CHRF,     /* corpus chrF from summed character n-gram statistics (18) */
    TG_METRIC_WER,      /* Σ errors / Σ reference words, in percent (2) */
    TG_METRIC_METEOR,   /* mean sentence METEOR, x 100 (1) */
    TG_METRIC_ROUGE_L,  /* mean sentence ROUGE-L F-measure, x 100 (1) */
    TG_METRIC_CIDER,    /* mean sentence CIDEr-D, its own scale (1); IDF from all n references */
    TG_METRIC_COUNT
} tg_metric_id;

/* "bleu", "chrf", "wer", "meteor", "rouge_l", "cider" (NULL for an unknown id). */
TG_API const char *tg_metric_name(tg_metric_id metric);

/* The sufficient statistics of every sentence of a corpus for one metric: what sacreBLEU's
 * _extract_corpus_statistics keeps, so that the corpus score of any multiset of sentences
 * (a bootstrap resample) is a function of the sum of their rows. */
typedef struct tg_metric_stats {
    tg_metric_id metric;
    tg_metric_bleu_options opt; /* BLEU's tokenize and smooth; tokenize also for the word metrics */
    size_t n;                   /* sentences */
    size_t width;               /* statistics per sentence */
    double *v;                  /* n x width, row-major; owned, free with tg_metric_stats_free */
} tg_metric_stats;

/* Statistics of hyps[i] against refs[i], i < n, for metric (opt NULL: BLEU's defaults; WER
 * ignores opt and splits on whitespace as tg_metric_wer does). For CIDEr-D the document
 * frequencies come from all n references and stay fixed: resampling sentences does not
 * re-estimate the IDF. On success *out owns new memory. */
TG_API tg_status tg_metric_stats_compute(tg_metric_id metric, const char *const *hyps,
                                  const char *const *refs, size_t n,
                                  const tg_metric_bleu_options *opt, tg_metric_stats *out);

/* The corpus score of the sentences idx[0, m) (repeats allowed), or of all n when idx is
 * NULL, on the scale `tg eval` prints: BLEU, chrF in [0, 100]; WER, METEOR, ROUGE-L in
 * percent; CIDEr-D as pycocoevalcap. A resample whose references hold no words has WER 100
 * if it has errors, else 0 (sacreBLEU's TER convention). */
TG_API double tg_metric_stats_score(const tg_metric_stats *s, const size_t *idx, size_t m);
TG_API void tg_metric_stats_free(tg_metric_stats *s);

typedef struct tg_metric_bootstrap_result {
    double baseline, system;           /* scores on the whole corpus */
    double baseline_mean, baseline_ci; /* mean and 95% CI half-width over the resamples */
    double system_mean, system_ci;
    double p_value;
    size_t samples;
    uint64_t seed;
} tg_metric_bootstrap_result;

/* sacreBLEU's paired bootstrap resampling test (significance.py, --paired-bs; Koehn 2004):
 * `samples` resamples of n sentence indices drawn uniformly with replacement (tg_rng seeded
 * with seed: reproducible, but not numpy's draws), the same indices for both systems. On
 * each resample both corpus scores are recomputed from the summed statistics. With
 * d_s = |system_s - baseline_s| on resample s and d = |system - baseline| on the corpus:
 *   p = (#{s : d_s - mean(d) > d} + 1) / (samples + 1),
 * and for each system mean = the mean resampled score, ci = (x_(u) - x_(l)) / 2 with the
 * sorted scores x, l = samples / 40 and u = samples - l - 1 (a 95% interval). Identical
 * systems give d_s = 0 and p = 1 / (samples + 1), as in sacreBLEU. baseline and system must
 * be statistics of the same metric over the same n sentences; samples >= 1. */
TG_API tg_status tg_metric_paired_bootstrap(const tg_metric_stats *baseline, const tg_metric_stats *system,
                                     size_t samples, uint64_t seed,
                                     tg_metric_bootstrap_result *out);

/* ---- stemming --------------------------------------------------------------------------- */

/* NLTK's PorterStemmer().stem(word) (default NLTK_EXTENSIONS mode): the word lower-cased as
 * Python's str.lower() does, then stemmed (see train/porter.c for NLTK's departures from
 * Porter 1980). Letters other than a e i o u y (accented ones included) count as consonants.
 * On success *out is a new NUL-terminated UTF-8 string the caller releases with free(). */
TG_API tg_status tg_metric_porter_stem(const char *word, char **out);

#ifdef __cplusplus
}
#endif
#endif
