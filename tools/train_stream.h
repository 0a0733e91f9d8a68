/* `tg train --arch lm`: the training text as a token stream cut into blocks (train/stream.c),
 * read from one or more files, with a dev file or a held-out tail of the stream as dev data. */
#ifndef TG_TOOLS_TRAIN_STREAM_H
#define TG_TOOLS_TRAIN_STREAM_H

#include "tg/train.h"

typedef struct tg_lm_texts {
    int n;           /* files */
    tg_lines *files; /* each read whole, empty lines allowed */
} tg_lm_texts;

/* Read the files of a comma-separated list ("a.txt,b.txt"; one file is the usual case). On
 * failure *out is empty; the message names the file. */
tg_status tg_lm_texts_read(const char *list, tg_lm_texts *out);
void tg_lm_texts_free(tg_lm_texts *t);

/* The vocabulary of a new run: read from vocab_file when not NULL, else built from the texts
 * (tg_vocab_build: min_count, max_size); the line-break token TG_STREAM_NEWLINE is added when
 * absent. */
tg_status tg_lm_vocab(const tg_lm_texts *t, const tg_text_options *to, const char *vocab_file, int64_t min_count,
                      int64_t max_size, tg_vocab **out);

typedef struct tg_lm_data {
    int64_t tokens, dev_tokens; /* ids in the training stream and in the dev stream (or tail) */
    int64_t documents;          /* documents in the training texts */
    bool held_out;              /* the dev data is the training stream's tail */
} tg_lm_data;

/* Training and dev corpora of blocks of `block` positions: the training texts' stream; dev is the
 * dev texts' stream when dev_texts is not NULL, else the last `holdout` share of the training
 * stream (0: no dev), cut off before the training blocks are. Errors: a stream too short for one
 * training block of two ids. */
tg_status tg_lm_corpora(const tg_lm_texts *train, const tg_lm_texts *dev_texts, const tg_vocab *v,
                        const tg_stream_options *so, int64_t block, double holdout, tg_corpus **train_out,
                        tg_corpus **dev_out, tg_lm_data *info);

#endif
