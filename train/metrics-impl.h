/* Internals shared by the metric files (bleu.c, chrf.c, edit_distance.c, metrics_text.c,
 * unicode_lower.c, porter.c, metric_words.c, meteor.c, rouge_l.c, cider.c, metric_stats.c).
 * Not installed, not part of the public API: names carry the tg__ prefix.
 *
 * Text model: every metric takes UTF-8 C strings. Splitting into words follows Python's
 * str.split() with no argument (what sacreBLEU does), i.e. on the 29 Unicode code points for
 * which str.isspace() is true, not only on ASCII blanks: U+00A0 (no-break space) separates
 * words in sacreBLEU and therefore here too. */
#ifndef TG_METRICS_IMPL_H
#define TG_METRICS_IMPL_H

#include "tg/error.h"
#include "tg/metrics.h"

#include <stddef.h>
#include <stdint.h>

/* A word: a byte range inside a caller's string (not NUL-terminated, not owned). */
typedef struct tg__text_tok {
    const char *p;
    size_t len;
} tg__text_tok;

/* A growable array of words; free with tg__text_toks_free(). */
typedef struct tg__text_toks {
    tg__text_tok *v;
    size_t n, cap;
} tg__text_toks;

/* A growable byte buffer, always NUL-terminated once anything was appended. */
typedef struct tg__text_buf {
    char *p;
    size_t len, cap;
} tg__text_buf;

/* The longest n-gram any metric here counts (chrF's default character order). */
#define TG__NGRAM_MAX 6

/* An n-gram as up to TG__NGRAM_MAX symbols (token ids or code points); unused slots are 0. */
typedef struct tg__text_ngram {
    uint32_t s[TG__NGRAM_MAX];
} tg__text_ngram;

/* Scratch space for n-gram counting, reused across segments; free with tg__text_ngram_scratch_free.
 */
typedef struct tg__text_ngram_scratch {
    tg__text_ngram *h, *r;
    size_t hcap, rcap;
} tg__text_ngram_scratch;

/* Decode one code point of valid UTF-8 at s[*pos] (len bytes in all), advancing *pos.
 * Returns 0, or -1 (and leaves *pos) on a malformed, overlong, surrogate or > U+10FFFF
 * sequence — the same sequences Python's strict UTF-8 decoder rejects. */
int tg__text_utf8_next(const char *s, size_t len, size_t *pos, uint32_t *cp);

/* TG_OK if s is valid UTF-8, else TG_ERR_FORMAT with "<fn>: <what>[<idx>] is not valid UTF-8
 * (byte 0x.. at offset ..)". */
tg_status tg__text_utf8_check(const char *fn, const char *what, size_t idx, const char *s);

/* 1 if Python's str.isspace() is true for the code point. */
int tg__text_is_space(uint32_t cp);

/* Length of s[0, len) after Python's str.rstrip() (trailing Unicode whitespace removed).
 * s must be valid UTF-8. */
size_t tg__text_rstrip_len(const char *s, size_t len);

/* Replace out's contents by the words of s[0, len) (valid UTF-8), split like str.split(). */
tg_status tg__text_split(const char *s, size_t len, tg__text_toks *out);
void tg__text_toks_free(tg__text_toks *t);
/* Append the word p[0, len) to t. */
tg_status tg__text_toks_push(tg__text_toks *t, const char *p, size_t len);

/* sacreBLEU's 13a tokenization of s[0, len) (valid UTF-8) into out (replaced): the tokens
 * joined by single spaces, NUL-terminated (see tokenize_13a.c). */
tg_status tg__tokenize_13a(const char *s, size_t len, tg__text_buf *out);

/* Argument checks shared by the corpus metrics: hyps, refs (if check_refs) and out non-NULL,
 * n >= 1, every sentence non-NULL and valid UTF-8. Errors name fn and the sentence. */
tg_status tg__text_check_corpus(const char *fn, const char *const *hyps, const char *const *refs,
                                int check_refs, size_t n, const void *out);

/* Buffer helpers; each returns TG_OK or TG_ERR_NOMEM. */
tg_status tg__text_buf_reserve(tg__text_buf *b, size_t extra);
tg_status tg__text_buf_append(tg__text_buf *b, const char *p, size_t n);
void tg__text_buf_free(tg__text_buf *b);

/* Count the order-n n-grams of hyp[0, nh) and ref[0, nr) (1 <= n <= TG__NGRAM_MAX):
 * *hyp_total = nh - n + 1 (or 0), *ref_total likewise, and *match = sum over distinct n-grams
 * g of min(count_hyp(g), count_ref(g)) — the "clipped" matches of BLEU and chrF. Counting is
 * done by sorting both lists and merging them, so it needs no hash table and is
 * deterministic. */
tg_status tg__text_ngram_match(const uint32_t *hyp, size_t nh, const uint32_t *ref, size_t nr,
                               int n, tg__text_ngram_scratch *sc, int64_t *hyp_total,
                               int64_t *ref_total, int64_t *match);
void tg__text_ngram_scratch_free(tg__text_ngram_scratch *sc);
/* qsort comparison of two tg__text_ngram (lexicographic over the symbols). */
int tg__text_ngram_cmp(const void *a, const void *b);

/* The words of one sentence as BLEU sees them: right-stripped (str.rstrip()), then split on
 * whitespace (tok NONE) or 13a-tokenized and split (buf holds the tokenized text). */
tg_status tg__text_words(const char *s, tg_bleu_tokenize tok, tg__text_buf *buf,
                         tg__text_toks *out);

/* Number the m words w[] so that equal words (same bytes) get equal ids 0 .. *n_distinct-1,
 * ordered by (length, bytes). */
tg_status tg__text_intern(const tg__text_tok *w, size_t m, uint32_t *ids, uint32_t *n_distinct);

/* Levenshtein distance between two word sequences (unit cost for insertion, deletion and
 * substitution; words equal when their bytes are equal). *row must be NULL or a block from an
 * earlier call with *rowcap entries; it is grown with realloc and the caller frees it. */
tg_status tg__metric_levenshtein(const tg__text_toks *a, const tg__text_toks *b, int64_t **row,
                                 size_t *rowcap, int64_t *dist);

/* Append the code points cp[0, n) to b as UTF-8. */
tg_status tg__text_utf8_append(tg__text_buf *b, const uint32_t *cp, size_t n);

/* Python's str.lower() of one code point (the simple mapping; see unicode_lower.c). */
uint32_t tg__text_lower_cp(uint32_t cp);
/* Python's str.lower() of a word in[0, n) into out (room for 2n code points: U+0130 becomes
 * two); returns the number written. */
size_t tg__text_lower(const uint32_t *in, size_t n, uint32_t *out);

/* NLTK's PorterStemmer().stem() of a lower-cased word w[0, n), in place (see porter.c);
 * returns the stem's length (never more than n). */
size_t tg__porter_stem(uint32_t *w, size_t n);

/* ---- per-sentence statistics (metric_stats.c, the paired bootstrap) ---- */

/* BLEU: matches of orders 1..4, hypothesis n-grams of orders 1..4, hyp words, ref words. */
#define TG__BLEU_STATS 10
/* Per sentence i < n, the BLEU statistics into rows[i * TG__BLEU_STATS ..] (if rows) and
 * added to sum[] (if sum). */
tg_status tg__bleu_rows(const char *const *hyps, const char *const *refs, size_t n,
                        tg_bleu_tokenize tok, double *rows, int64_t sum[TG__BLEU_STATS]);
/* Corpus BLEU from summed statistics. */
double tg__bleu_score(const double sum[TG__BLEU_STATS], tg_bleu_smooth smooth);

/* chrF: {hyp n-grams (0 without ref n-grams), ref n-grams, matches} for orders 1..6. */
#define TG__CHRF_STATS 18
tg_status tg__chrf_rows(const char *const *hyps, const char *const *refs, size_t n, double *rows,
                        int64_t sum[TG__CHRF_STATS]);
/* Corpus chrF from summed statistics; *prec, *rec (fractions) and *eff get the details. */
double tg__chrf_score(const double sum[TG__CHRF_STATS], double *prec, double *rec, int *eff);

#endif
