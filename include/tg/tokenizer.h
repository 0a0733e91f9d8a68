/* tgraph — tokenizers that travel with the model (docs/model.md "Tokenizers").
 *
 * A tokenizer turns a line of UTF-8 text into the ids of its model's vocabulary, special tokens
 * and truncation included. Kinds: whitespace words, characters (a run of white space becomes
 * the token "▁"), WordPiece as BERT's tokenizer.json describes it, and byte-level BPE as
 * GPT-2's. A checkpoint stores its tokenizer in __metadata__ (key "tokenizer", beside the
 * vocabulary), so every command encodes text the way the model was trained. */
#ifndef TG_TOKENIZER_H
#define TG_TOKENIZER_H

#include "tg/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg/error.h"
#include "tg/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_tok_kind {
    TG_TOK_WORDS,     /* runs of non-white-space; unknown -> the unknown token */
    TG_TOK_CHARS,     /* every character; a run of white space between characters is "▁" */
    TG_TOK_WORDPIECE, /* BERT: cleaning, CJK and punctuation splitting, lower-casing, accent
                       * stripping, greedy longest-match WordPiece with a "##" prefix */
    TG_TOK_BPE_BYTES, /* GPT-2: bytes mapped to printable characters, regex pre-splitting,
                       * BPE merges by rank */
    TG_TOK_SPM_BPE,   /* sentencepiece BPE (spm_train --model_type=bpe: the Bible's data script):
                       * its normaliser, "▁" for spaces, merges by piece score; over the classic
                       * vocabulary layout, the pieces the model was trained on */
} tg_tok_kind;

typedef struct tg_tokenizer tg_tokenizer;

/* A tokenizer from a Hugging Face tokenizer.json (text[0..len)); origin names the file in
 * messages. Supported: model WordPiece with BertNormalizer / BertPreTokenizer, model BPE with
 * the ByteLevel pre-tokenizer; anything else is TG_ERR_UNSUPPORTED naming the type. The
 * tokenizer owns its vocabulary (tg_tokenizer_take_vocab hands it to a model). */
TG_API tg_status tg_tokenizer_from_hf(const char *text, size_t len, const char *origin, tg_tokenizer **out);
/* A tokenizer of kind words or chars over the classic vocabulary layout (<pad> <unk> <s> </s>
 * at ids 0-3), borrowing v. add_eos appends </s> (the encoder-decoder's source side). */
TG_API tg_status tg_tokenizer_new_simple(tg_tok_kind kind, const tg_vocab *v, tg_tokenizer **out);
/* The tokenizer stored in a checkpoint's metadata (json, as tg_tokenizer_to_json wrote it) over
 * the checkpoint's vocabulary v (borrowed: it must outlive the tokenizer). */
TG_API tg_status tg_tokenizer_from_json(const char *json, const char *origin, const tg_vocab *v, tg_tokenizer **out);
/* A sentencepiece BPE tokenizer from the bytes of its spm.model (origin names the file in
 * messages), with no vocabulary yet: tg_tokenizer_pieces works, tg_model_set_tokenizer gives it
 * the model's (the classic layout: <pad> <unk> <s> </s>, then the pieces the data held). Other
 * model types, byte fallback and user-defined symbols are TG_ERR_UNSUPPORTED. */
TG_API tg_status tg_tokenizer_from_spm(const void *bytes, size_t len, const char *origin, tg_tokenizer **out);
/* The tokens of a line of text as strings, without special tokens: words, characters (and "▁"),
 * WordPiece pieces, byte-level BPE's mapped pieces, sentencepiece pieces ("▁the"). A
 * sentencepiece tokenizer refuses text that holds "▁" (U+2581): that is text already cut into
 * pieces, and this tokenizer reads raw text. *toks: malloc'ed strings (tg_tokens_free). */
TG_API tg_status tg_tokenizer_pieces(const tg_tokenizer *t, const char *text, size_t len, char ***toks, int64_t *n);
/* The metadata text of a tokenizer (malloc'ed, caller frees): everything but the vocabulary. */
TG_API tg_status tg_tokenizer_to_json(const tg_tokenizer *t, char **out);
TG_API void tg_tokenizer_free(tg_tokenizer *t);

/* Ids of one line of text (valid UTF-8, without its newline) with the tokenizer's special
 * tokens, truncated to its maximum length (*truncated says whether; may be NULL). *ids is
 * malloc'ed (caller frees). */
TG_API tg_status tg_tokenizer_encode(const tg_tokenizer *t, const char *text, size_t len, int32_t **ids, int64_t *n,
                              bool *truncated);
/* The text of ids (specials skipped), malloc'ed. */
TG_API tg_status tg_tokenizer_decode(const tg_tokenizer *t, const int32_t *ids, int64_t n, char **out);

/* Which kind of tokenizer t is. */
TG_API tg_tok_kind tg_tokenizer_kind(const tg_tokenizer *t);
/* The kind's name, as the checkpoint metadata and `tg inspect` write it. */
TG_API const char *tg_tokenizer_kind_name(tg_tok_kind k);
/* The vocabulary t maps tokens with (borrowed: valid while t is). */
TG_API const tg_vocab *tg_tokenizer_vocab(const tg_tokenizer *t);
/* The vocabulary it owns (from tg_tokenizer_from_hf), handed over: the caller owns it, and the
 * tokenizer keeps borrowing it. NULL when it owns none. */
TG_API tg_vocab *tg_tokenizer_take_vocab(tg_tokenizer *t);
/* Special token ids: "pad", "unk", "bos" (BERT's [CLS]), "eos" ([SEP]), "mask"; -1 if none. */
TG_API int32_t tg_tokenizer_special(const tg_tokenizer *t, const char *role);
/* Every special token's id (the roles above and the added tokens matched verbatim: BERT's
 * [PAD] [UNK] [CLS] [SEP] [MASK]), ascending, once each: *ids malloc'ed (caller frees). */
TG_API tg_status tg_tokenizer_special_ids(const tg_tokenizer *t, int32_t **ids, int64_t *n);
/* Longest output (special tokens included) before truncation; 0: no limit. */
TG_API int64_t tg_tokenizer_max_length(const tg_tokenizer *t);
TG_API void tg_tokenizer_set_max_length(tg_tokenizer *t, int64_t max_length);

/* The tokenizer that travels with a model (NULL when its checkpoint stores none: then the
 * tools' --chars option and whitespace words apply, as before tokenizers travelled). */
TG_API const tg_tokenizer *tg_model_tokenizer(const tg_model *m);
/* Give the model a tokenizer over its vocabulary (ownership passes, even on failure): its
 * vocabulary must be the model's, token for token. tg_model_save stores it. */
TG_API tg_status tg_model_set_tokenizer(tg_model *m, tg_tokenizer *t);

#ifdef __cplusplus
}
#endif
#endif
