/* `tg train`'s defaults per model family. The encoder-decoder keeps the Transformer paper's
 * base model and recipe (docs/model.md §1: N 6, d 512, noam with 4,000 warm-up steps, Adam
 * β2 0.98, ε 1e-9). A language model (lm) and a masked language model (mlm) get a model sized
 * to the training data and a short warm-up proportionate to the run, with PyTorch's Adam
 * (β2 0.999, ε 1e-8), since they do not follow that recipe: the base model with a 4,000-step
 * warm-up barely moves in the first minutes on a small text. */
#ifndef TG_TOOLS_TRAIN_DEFAULTS_H
#define TG_TOOLS_TRAIN_DEFAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "tg/model.h"

typedef struct tg_family_defaults {
    const char *size;                          /* "small", "medium", "large" */
    int64_t d_model, heads, layers, d_ff;      /* layers: decoder (lm) or encoder (mlm) */
    int64_t max_len;                           /* positions: lm blocks, mlm's longest line */
    int64_t max_tokens;                        /* batch budget */
    double lr, beta2, eps, clip;               /* constant, or cosine to lr / 10 with --steps */
} tg_family_defaults;

/* Training tokens estimated from the bytes of the files of a comma-separated list: a byte per
 * character (--chars), else 6 bytes per word; -1 when a file cannot be read. */
int64_t tg_family_tokens_estimate(const char *list, bool chars);

/* The defaults of family lm or mlm for about `tokens` training tokens: small below 1 M tokens,
 * medium below 20 M, large beyond. */
void tg_family_defaults_get(tg_model_arch arch, int64_t tokens, tg_family_defaults *out);

/* Warm-up steps proportionate to the run: a twentieth of the steps when the run's length is known
 * (steps, or epochs of about tokens / max_tokens batches), else half an epoch's batches;
 * at least 10 (half the steps of a shorter run), at most 2,000. */
int64_t tg_family_warmup(int64_t steps, int64_t epochs, int64_t tokens, int64_t max_tokens);

/* The per-family defaults as text for `tg train --help` (written into buf of n bytes). */
void tg_family_describe(char *buf, size_t n);

#endif
