/* Internals of the tokenizers (models/tokenizer.c and the tok_*.c files of each kind). */
#ifndef TG_TOK_IMPL_H
#define TG_TOK_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg/tokenizer.h"

/* ---- Unicode (models/tok_unicode.c over the generated models/tok_unicode_tables.c) ---- */
enum { TG_UNI_OTHER = 1, TG_UNI_PUNCT = 2, TG_UNI_LETTER = 4, TG_UNI_NUMBER = 8, TG_UNI_MARK_NS = 16 };
typedef struct tg__uni_range {
    uint32_t lo, hi;
    int32_t flags;
} tg__uni_range;
extern const int32_t tg__uni_class_n, tg__uni_lower_n, tg__uni_strip_n;
extern const tg__uni_range tg__uni_class[];
extern const uint32_t tg__uni_lower_cp[], tg__uni_strip_cp[];
extern const char *const tg__uni_lower_to[], *const tg__uni_strip_to[];

/* The code point at s[*i..len), *i advanced past it; a byte of bad UTF-8 is returned as
 * U+FFFD and skipped alone. */
uint32_t tg__utf8_next(const char *s, size_t len, size_t *i);
/* UTF-8 of cp into out (4 bytes room); returns the byte count. */
int tg__utf8_put(uint32_t cp, char *out);
int32_t tg__uni_flags(uint32_t cp);
/* White_Space (Rust's char::is_whitespace, which BERT's and GPT-2's pre-tokenizers use) */
bool tg__uni_space(uint32_t cp);
/* The lower-case (full mapping) or accent-stripped (NFD without Mn) UTF-8 of cp, or NULL when
 * it maps to itself. Accent stripping of a Hangul syllable writes its jamo into buf (>= 13). */
const char *tg__uni_lower(uint32_t cp);
const char *tg__uni_strip(uint32_t cp, char *buf);

/* ---- a growable byte string and id list ---- */
typedef struct tg__buf {
    char *p;
    size_t n, cap;
} tg__buf;
bool tg__buf_put(tg__buf *b, const char *s, size_t n);
typedef struct tg__ids {
    int32_t *p;
    int64_t n, cap;
} tg__ids;
bool tg__ids_put(tg__ids *l, int32_t id);

/* ---- the tokenizer ---- */
typedef struct tg__bpe_merge tg__bpe_merge;

struct tg_tokenizer {
    tg_tok_kind kind;
    const tg_vocab *vocab;
    tg_vocab *owned;                 /* the vocabulary when the tokenizer owns it */
    int32_t pad, unk, bos, eos, mask; /* -1: none */
    bool add_bos, add_eos;           /* the post-processor: bos + text + eos */
    int64_t max_length;              /* truncation of the whole output; 0: none */
    char **added;                    /* special tokens matched verbatim in the raw text */
    int64_t nadded;
    /* WordPiece */
    bool clean_text, chinese_chars, strip_accents, lowercase;
    char prefix[16];
    int64_t max_word_chars;
    /* byte-level BPE */
    bool add_prefix_space;
    char **merges; /* "a b", rank = index */
    int64_t nmerges;
    tg__bpe_merge *table; /* (left id, right id) -> rank, merged id; open addressing */
    int64_t table_size;
    /* sentencepiece BPE: the spm.model bytes (stored in the metadata as base64), its pieces
     * (index = piece id) with their scores and types, and its normalizer */
    uint8_t *spm;
    size_t spm_len;
    tg_vocab *spm_pieces;
    float *spm_score;
    int8_t *spm_type;
    int64_t spm_n;
    bool spm_dummy, spm_trim, spm_escape;
    const uint8_t *spm_map, *spm_trie; /* the precompiled character map, its trie (in spm) */
    size_t spm_map_len, spm_repl_len;
    uint32_t spm_trie_units;
    const char *spm_repl; /* the replacement strings, NUL-terminated, at the trie's values */
};

/* sentencepiece BPE (models/tok_spm.c): read spm.model's bytes (copied) into t; the pieces of
 * a text (malloc'ed strings); free what the kind owns; base64 of bytes (malloc'ed) and back */
tg_status tg__spm_load(tg_tokenizer *t, const uint8_t *bytes, size_t len, const char *origin);
tg_status tg__spm_pieces(const tg_tokenizer *t, const char *s, size_t len, char ***toks, int64_t *n);
void tg__spm_free(tg_tokenizer *t);
char *tg__base64(const uint8_t *p, size_t n);
tg_status tg__unbase64(const char *s, uint8_t **out, size_t *n);
/* the ids of one piece of text with no special tokens in it (the kinds' own encoders) */
tg_status tg__wordpiece_encode(const tg_tokenizer *t, const char *s, size_t len, tg__ids *out);
tg_status tg__bpe_encode(const tg_tokenizer *t, const char *s, size_t len, tg__ids *out);
/* BPE's merge table from t->merges over t->vocab */
tg_status tg__bpe_prepare(tg_tokenizer *t);
/* The tokenizer as a Hugging Face tokenizer.json (malloc'ed): the export's. */
tg_status tg__tokenizer_hf_json(const tg_tokenizer *t, char **out);
/* GPT-2's byte <-> printable character mapping: the UTF-8 of byte b's character */
const char *tg__bpe_byte_char(unsigned b);
/* the byte of a mapped character, -1 if none */
int tg__bpe_char_byte(uint32_t cp);

#endif
