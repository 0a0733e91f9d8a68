/* How a command that takes a model reads text (docs/tool.md "Tokenizers"): with the tokenizer
 * the checkpoint stores, so that text is encoded the way the model was trained. */
#ifndef TG_TOOLS_MODEL_TEXT_H
#define TG_TOOLS_MODEL_TEXT_H

#include "tg/tokenizer.h"
#include "tg/train.h"
#include "tools/cli.h"

/* The text options of model m (loaded from path) for command cmd: words, characters or the
 * pieces of its sentencepiece model (to->tokenizer) as its stored tokenizer says. chars_opt is the command's --chars option (NULL: it has none): given on
 * the command line against the stored tokenizer, it is refused (exit status 2). A checkpoint
 * that stores no tokenizer (trained before tokenizers travelled) reads whitespace words, or
 * characters with --chars, as before, and says so on stderr; but where the command has --chars,
 * a vocabulary of single characters with "▁" read as words, or one of words read with --chars,
 * would turn the text into <unk>s: refused (exit status 1) with the flag to give. A stored WordPiece or byte-level
 * BPE tokenizer (an imported model, in its own vocabulary layout) sets *foreign when foreign is
 * not NULL; with foreign NULL the command cannot read such a model and it is refused (exit 1).
 * Returns 0 or the exit status, the message printed. */
int tg_tool_model_text(const char *cmd, const char *path, const tg_model *m, const tg_opt *chars_opt,
                       tg_text_options *to, const tg_tokenizer **foreign);

/* The tokenizer a command encodes with: the stored one, or for a checkpoint without one a
 * words / characters tokenizer over its source vocabulary made into *own (caller frees), as
 * tg_tool_model_text decides. Returns 0 or the exit status, the message printed. */
int tg_tool_model_tokenizer(const char *cmd, const char *path, const tg_model *m, const tg_opt *chars_opt,
                            tg_tokenizer **own, const tg_tokenizer **tok);

/* The options every command that decodes with a model shares: --threads N and --backend. */
#define TG_TOOL_BACKEND_OPTS(threads, backend)                                                                  \
    {"threads", TG_OPT_INT, (threads), 0, 4096, NULL, "N", "CPU threads (0: TG_NUM_THREADS or all cores)", 0, 0}, \
    {"backend", TG_OPT_CHOICE, (backend), 0, 0, "cpu|cuda", NULL, "where to compute (cuda: GPU 0)", 0, 0}

/* The backend (cpu with threads, or cuda: GPU 0) and the model at path for command cmd, which
 * needs the family arch: a model of another family is TG_ERR_INVALID, "'M' is a language model
 * (arch lm): tg CMD " and needs ("needs a masked language model (tg train --arch mlm)"). On
 * failure *be and *m may be set: the caller frees them. */
tg_status tg_tool_load_model(const char *cmd, const char *path, const char *backend, int64_t threads, tg_model_arch arch,
                             const char *needs, tg_backend **be, tg_model **m);

#endif
