/* tgraph — training: learning-rate schedules, corpora and batching, the training loop, training
 * state for bit-exact resumption, and checkpoint averaging (docs/model.md §1 "Training recipe").
 *
 * The pieces, bottom up:
 *   tg_lr_*       learning rate as a function of the step (noam, constant, inverse-sqrt, cosine)
 *   tg_lines_*    a text file read whole and validated (UTF-8, no empty lines)
 *   tg_vocab_build / tg_corpus_*   vocabularies from text, and parallel corpora of token ids
 *   tg_batcher_*  length-bucketed batches to a token budget, shuffled from a seed per epoch
 *   tg_train_grad one gradient over k accumulated batches
 *   tg_trainer_*  the loop: accumulation, clipping, schedule, dev evaluation, JSON-lines
 *                 metrics, progress display, periodic checkpoints, stop on request, resume
 *   tg_checkpoint_average   parameter mean of k checkpoints
 *
 * Reproducibility: with the same seed, data, configuration and thread count, a run is bit-exact,
 * and a run stopped and resumed from its state file gives the same bits as one run straight. */
#ifndef TG_TRAIN_H
#define TG_TRAIN_H

#include "tg/export.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tg/dist.h"
#include "tg/model.h"
#include "tg/optim.h"
#include "tg/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- learning-rate schedules (train/schedule.c) ------------------------------------------- */

typedef enum tg_lr_kind {
    /* Vaswani et al.: factor · d^-0.5 · min(step^-0.5, step · warmup^-1.5) */
    TG_LR_NOAM = 0,
    /* lr, after a linear warmup lr · step / warmup when warmup > 0 */
    TG_LR_CONSTANT,
    /* fairseq's inverse_sqrt: lr · step / warmup during warmup, then lr · sqrt(warmup / step)
     * (with warmup 0: lr / sqrt(step)) */
    TG_LR_INVERSE_SQRT,
    /* linear warmup to lr, then min_lr + (lr - min_lr) · (1 + cos(π · t)) / 2 with
     * t = (step - warmup) / (total_steps - warmup), min_lr after total_steps */
    TG_LR_COSINE,
} tg_lr_kind;

typedef struct tg_lr_schedule {
    tg_lr_kind kind;
    double lr;           /* peak / base rate (all but noam) */
    double factor;       /* noam's factor (the paper: 1) */
    int64_t d_model;     /* noam's d */
    int64_t warmup;      /* warmup steps (noam needs >= 1) */
    int64_t total_steps; /* cosine: the step where the rate reaches min_lr */
    double min_lr;       /* cosine floor */
} tg_lr_schedule;

/* The paper's schedule: noam, factor 1, warmup 4000, for d_model d. */
TG_API tg_lr_schedule tg_lr_schedule_default(int64_t d_model);
/* Check a schedule's fields; the message names the first bad one. */
TG_API tg_status tg_lr_schedule_check(const tg_lr_schedule *s);
/* The learning rate of step `step` (counted from 1; step < 1 is treated as 1). */
TG_API double tg_lr_at(const tg_lr_schedule *s, int64_t step);
/* "noam", "constant", "inverse_sqrt", "cosine"; parse accepts '-' for '_' too. */
TG_API const char *tg_lr_kind_name(tg_lr_kind k);
TG_API tg_status tg_lr_kind_parse(const char *name, tg_lr_kind *out);

/* ---- text files (train/data.c) ------------------------------------------------------------- */

/* The lines of a text file, without their '\n' (and a '\r' before it). */
typedef struct tg_lines {
    int64_t n;
    char **line; /* n pointers into one buffer */
    char *buf;
    char *path; /* copy of the path, for messages */
} tg_lines;

/* Read a whole file. Every line must be valid UTF-8 without NUL bytes; unless allow_empty, a
 * line that is empty or only white space is an error. Errors name the file and the line (and
 * the byte for bad UTF-8): "'a.src' line 3: empty line". On success *out owns the memory
 * (tg_lines_free); on failure *out is zeroed. */
TG_API tg_status tg_lines_read(const char *path, bool allow_empty, tg_lines *out);
TG_API void tg_lines_free(tg_lines *l);
/* Both files must have the same number of lines: "'a.src' has 10 lines but 'a.tgt' has 9". */
TG_API tg_status tg_lines_check_parallel(const tg_lines *a, const tg_lines *b);

/* ---- tokenisation and vocabularies ---- */

/* Tokens of a line: runs of non-white-space (words), or with chars = true every Unicode
 * character, where each run of white space between characters becomes the token "▁" (U+2581,
 * as sentencepiece writes a space); with a tokenizer, its pieces (tg_tokenizer_pieces: a
 * sentencepiece model's, read from raw text), chars then unused. */
struct tg_tokenizer;
typedef struct tg_text_options {
    bool chars;
    const struct tg_tokenizer *tokenizer; /* NULL: words or characters */
} tg_text_options;

/* Split line into tokens: *toks (malloc'ed array of malloc'ed strings; free with
 * tg_tokens_free) and their count *n. The line must be valid UTF-8. */
TG_API tg_status tg_tokenize(const char *line, const tg_text_options *opt, char ***toks, int64_t *n);
TG_API void tg_tokens_free(char **toks, int64_t n);

/* A vocabulary of every token that occurs at least min_count (>= 1) times in the given texts
 * (one or more files: two for a joint vocabulary), after the four specials, ordered by
 * descending count and then by byte order (so it does not depend on the order of lines).
 * max_size > 0 keeps only the most frequent max_size - 4 tokens. *out is owned by the caller. */
TG_API tg_status tg_vocab_build(const tg_lines *const *texts, int ntexts, const tg_text_options *opt,
                         int64_t min_count, int64_t max_size, tg_vocab **out);
/* Write a vocabulary as one token per line (the specials included, index = id), atomically;
 * read one back (the first four lines must be the specials). */
TG_API tg_status tg_vocab_save(const tg_vocab *v, const char *path);
TG_API tg_status tg_vocab_read(const char *path, tg_vocab **out);

/* ---- parallel corpora of token ids ---- */

typedef struct tg_corpus tg_corpus;

typedef struct tg_corpus_options {
    tg_text_options text;
    /* Longest sentence the model takes, in tokens including </s> (tg_model_config.max_len).
     * 0 = no limit. */
    int64_t max_len;
    /* A longer sentence pair is skipped and counted (training) or is an error naming the line
     * (scoring). */
    bool skip_long;
} tg_corpus_options;

/* Encode parallel lines with the vocabularies (unknown tokens -> <unk>). src and tgt must have
 * the same line count (else the tg_lines_check_parallel error). tgt may be NULL for a
 * source-only corpus. The vocabularies are borrowed for the call only. *out is owned by the
 * caller (tg_corpus_free). */
TG_API tg_status tg_corpus_new(const tg_lines *src, const tg_lines *tgt, const tg_vocab *src_vocab,
                        const tg_vocab *tgt_vocab, const tg_corpus_options *opt, tg_corpus **out);
/* A corpus from token ids already encoded (without specials), copied: for tests and synthetic
 * tasks. tgt and tgt_n may be NULL. */
TG_API tg_status tg_corpus_from_ids(int64_t n, const int32_t *const *src, const int64_t *src_n,
                             const int32_t *const *tgt, const int64_t *tgt_n, tg_corpus **out);
/* A language model's corpus (arch lm): every line of `text` one sequence (the target side;
 * the sources are empty), encoded with the model's one vocabulary. Options and errors as
 * tg_corpus_new. */
TG_API tg_status tg_corpus_new_lm(const tg_lines *text, const tg_vocab *vocab, const tg_corpus_options *opt,
                           tg_corpus **out);
/* A masked language model's corpus (arch mlm): every line of `text` masked once by BERT's rule
 * (tg_mlm_mask, probability p, from an RNG seeded with `seed`: static masking, the same masks
 * every epoch); pair i is (masked input, targets), batched by tg_batch_build_mlm. Lines longer
 * than opt->max_len (tokens + </s>) are skipped or an error as tg_corpus_new. The vocabulary
 * must hold <mask>. */
TG_API tg_status tg_corpus_new_mlm(const tg_lines *text, const tg_vocab *vocab, const tg_corpus_options *opt, double p,
                            uint64_t seed, tg_corpus **out);
/* ---- token streams for language models (train/stream.c) ---- */

/* What a document is when texts become one token stream. */
typedef enum tg_docs_kind {
    TG_DOCS_FILE = 0,   /* each text (file) is one document; blank lines are line breaks */
    TG_DOCS_PARAGRAPHS, /* blank-line-separated paragraphs are the documents */
    TG_DOCS_LINES,      /* every non-blank line is a document */
} tg_docs_kind;

typedef struct tg_stream_options {
    tg_text_options text;
    tg_docs_kind docs;
} tg_stream_options;

/* The token of a line break inside a document: "↵" (U+21B5), as "▁" stands for a space. */
extern const char TG_STREAM_NEWLINE[];

/* The texts as one stream of ids: every document is <s>, its tokens, </s> (</s> is the
 * end-of-text token between documents), the line breaks inside a document the token
 * TG_STREAM_NEWLINE (<unk> when the vocabulary lacks it); empty lines are allowed. *ids is
 * malloc'ed (caller frees), *n its length. Errors name the file. */
TG_API tg_status tg_stream_encode(const tg_lines *const *texts, int ntexts, const tg_vocab *v, const tg_stream_options *o,
                           int32_t **ids, int64_t *n);
/* A language model's corpus (arch lm) of blocks of a token stream ids[0..n) (copied): block i
 * holds ids [i·block, (i+1)·block] (block + 1 ids; the last may be shorter), the model reading
 * the first `block` and predicting the next ones (tg_batch_build_lm_blocks). A stream of n ids
 * has ceil((n - 1) / block) blocks; fewer than 2 ids give an empty corpus. */
TG_API tg_status tg_corpus_new_stream(const int32_t *ids, int64_t n, int64_t block, tg_corpus **out);
/* A masked language model's corpus with dynamic masking (RoBERTa, Liu et al. 2019): the lines
 * are kept plain, and every batch masks its sequences anew by BERT's rule (probability p), example
 * i of a batch of epoch e from an RNG seeded with (seed, e, i): new masks every epoch, the same
 * ones for the same position in the data (resuming, and a group's ranks, draw the same). Batches
 * and errors as tg_corpus_new_mlm; tg_corpus_batch builds epoch 0's. */
TG_API tg_status tg_corpus_new_mlm_dynamic(const tg_lines *text, const tg_vocab *vocab, const tg_corpus_options *opt,
                                    double p, uint64_t seed, tg_corpus **out);
/* The special tokens of a masked language model whose vocabulary has a layout of its own (an
 * imported BERT: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103; tools take them from the
 * model's tokenizer, tg_tokenizer_special_ids). */
typedef struct tg_mlm_layout {
    int32_t vocab_size;
    int32_t mask;           /* the mask token */
    int32_t eos;            /* appended to every sequence by its batches ([SEP]) */
    const int32_t *special; /* ids never masked nor drawn as random replacements, ascending */
    int64_t nspecial;
} tg_mlm_layout;
/* A masked language model's corpus of sequences already encoded (ids[i][0..len[i]), each
 * without its final eos: BERT's [CLS] w1 ... wn), masked anew for every batch as
 * tg_corpus_new_mlm_dynamic does, by BERT's rule over the layout's ordinary tokens only. */
TG_API tg_status tg_corpus_new_mlm_ids(int64_t n, const int32_t *const *ids, const int64_t *len, const tg_mlm_layout *l,
                                       double p, uint64_t seed, tg_corpus **out);
/* A classification corpus (a masked language model with a classification head,
 * tg_model_classify): sequence i (ids[i][0..len[i]), without its final eos) of class
 * classes[i] >= 0; its batches append eos to every sequence and are classification batches
 * (tg_batch.classify: the loss is the cross-entropy of the class logits). */
TG_API tg_status tg_corpus_new_classify(int64_t n, const int32_t *const *ids, const int64_t *len, const int32_t *classes,
                                        int32_t eos, tg_corpus **out);
/* The target of a token-stream corpus's positions past a short last window: the model's pad
 * id (tg_model_config.pad_id; default 0, <pad>), -1 for a model without padding (GPT-2, whose
 * id 0 is a token), so that the loss, which ignores the pad id, ignores them. */
TG_API void tg_corpus_set_target_pad(tg_corpus *c, int32_t pad);
TG_API void tg_corpus_free(tg_corpus *c);
/* Number of sentence pairs kept, and of pairs skipped as too long. */
TG_API int64_t tg_corpus_size(const tg_corpus *c);
TG_API int64_t tg_corpus_skipped(const tg_corpus *c);
/* Line number (1-based, in the input files) of kept pair i. */
TG_API int64_t tg_corpus_line(const tg_corpus *c, int64_t i);
/* Ids of pair i (without specials), owned by the corpus; *n gets the length. tgt is NULL for a
 * source-only corpus. */
TG_API const int32_t *tg_corpus_src(const tg_corpus *c, int64_t i, int64_t *n);
TG_API const int32_t *tg_corpus_tgt(const tg_corpus *c, int64_t i, int64_t *n);
/* A 64-bit fingerprint of the ids (FNV-1a), to check on resume that the data are the same. */
TG_API uint64_t tg_corpus_hash(const tg_corpus *c);
/* Build the batch of pairs idx[0..n) (tg_batch_build; free with tg_batch_free). */
TG_API tg_status tg_corpus_batch(const tg_corpus *c, const int64_t *idx, int64_t n, tg_batch *out);

typedef struct tg_corpus_stats {
    int64_t pairs;
    int64_t src_tokens, tgt_tokens; /* without </s> */
    int64_t src_max, tgt_max;       /* longest sentence, without </s> */
    double src_mean, tgt_mean;      /* mean tokens per sentence, without </s> (+1 with it) */
    /* n̄ of docs/model.md §2.4: mean tokens per sequence over both sides pooled, without </s>
     * (source-only corpus: the source mean) */
    double mean_len;
} tg_corpus_stats;
/* The statistics of corpus c into *out. */
TG_API void tg_corpus_stats_get(const tg_corpus *c, tg_corpus_stats *out);

/* ---- batching ---- */

typedef struct tg_batcher tg_batcher;

/* Batches of corpus c (borrowed; must outlive the batcher). Each epoch: the pair indices are
 * shuffled with an RNG seeded from (seed, epoch) (when shuffle is true), stably sorted by
 * (source length, target length), cut greedily into batches whose padded size
 * B · (S + T) (S, T the longest source/target in the batch, </s> and <s> included) stays within
 * max_tokens — a pair alone over the budget forms a batch of its own — and the batch order is
 * shuffled. Without shuffle, pairs keep their order within a length and the batches come in
 * length order. Every pair is in exactly one batch per epoch; the epoch's batches depend only
 * on (seed, epoch), so a position (epoch, index) is the whole state. */
TG_API tg_status tg_batcher_new(const tg_corpus *c, int64_t max_tokens, uint64_t seed, bool shuffle,
                         tg_batcher **out);
TG_API void tg_batcher_free(tg_batcher *b);
/* The next batch (moving to the next epoch after the last batch of one). *out is owned by the
 * caller (tg_batch_free). */
TG_API tg_status tg_batcher_next(tg_batcher *b, tg_batch *out);
/* Pair indices of the batch last returned (owned by the batcher, valid until the next call). */
TG_API const int64_t *tg_batcher_last(const tg_batcher *b, int64_t *n);
/* Current position: completed epochs and the index of the next batch within the epoch. */
TG_API int64_t tg_batcher_epoch(const tg_batcher *b);
TG_API int64_t tg_batcher_index(const tg_batcher *b);
/* Number of batches of an epoch (the same for every epoch). */
TG_API int64_t tg_batcher_count(const tg_batcher *b);
/* Jump to a position (for resuming). */
TG_API tg_status tg_batcher_seek(tg_batcher *b, int64_t epoch, int64_t index);

/* ---- one gradient over accumulated batches (train/trainer.c) ------------------------------ */

typedef struct tg_grad_info {
    double loss;        /* label-smoothed loss, mean over the k batches' target tokens */
    double nll;         /* the same without smoothing (cross-entropy per token) */
    int64_t src_tokens; /* non-pad tokens of the k batches */
    int64_t tgt_tokens;
    int64_t sentences;
} tg_grad_info;

/* Add to the store's gradients d(L)/dθ with L = Σ_b Σ_tokens loss / Σ_b tgt_tokens over the k
 * batches: the gradient of one batch holding all k (the mean over every target token), so k
 * accumulated half-batches equal one full batch up to float rounding. Gradients are not zeroed
 * first. Batch b runs with dropout seed seeds[b] (seeds may be NULL: seed 0); training mode
 * (dropout on) when `training`. Batches and seeds are borrowed. */
TG_API tg_status tg_train_grad(tg_model *m, const tg_batch *const *batches, int64_t k,
                        const uint64_t *seeds, bool training, tg_grad_info *info);

/* Loss over a whole corpus, dropout off, no gradients: label-smoothed loss and NLL per target
 * token (perplexity = exp(nll)). Batches of max_tokens as tg_batcher without shuffling. */
typedef struct tg_eval_info {
    double loss, nll, ppl;
    int64_t tgt_tokens, sentences;
    /* masked language models (arch mlm): the masked tokens predicted right (argmax), as a share
     * of tgt_tokens (the masked ones); 0 for the other families */
    double accuracy;
} tg_eval_info;
TG_API tg_status tg_train_evaluate(tg_model *m, const tg_corpus *c, int64_t max_tokens, tg_eval_info *out);

/* ---- the training loop ---- */

typedef enum tg_progress_mode {
    TG_PROGRESS_AUTO = 0, /* a bar when the log stream is a terminal, else plain lines */
    TG_PROGRESS_BAR,
    TG_PROGRESS_LINES,
    TG_PROGRESS_NONE,
} tg_progress_mode;

typedef struct tg_train_config {
    tg_optim_config optim; /* docs/model.md §1: Adam 0.9 / 0.98 / 1e-9 */
    bool no_decay_vectors; /* no weight decay on biases and norms (tg_optim_no_decay_on_vectors) */
    tg_lr_schedule lr;
    int64_t max_tokens;    /* token budget of one batch (padded source + target tokens) */
    int64_t accum;         /* batches accumulated per optimizer step (>= 1) */
    double clip;           /* global gradient-norm clipping threshold, 0 = off */
    /* Stop conditions, 0 = unlimited (at least one of the three must be set). */
    int64_t max_steps;
    int64_t max_epochs;
    double max_minutes;
    uint64_t seed;         /* data order and dropout (the model's init seed is separate) */
    bool shuffle;          /* default true */
    int64_t eval_interval; /* steps between dev evaluations (0: only at the end) */
    int64_t save_interval; /* steps between checkpoints (0: only at the end) */
    int64_t log_interval;  /* steps between metrics lines (>= 1) */
    int64_t keep_checkpoints; /* also keep the last N checkpoints as checkpoint-<step>.safetensors */
    const char *out_dir;   /* model.safetensors, state.safetensors, metrics.jsonl; NULL = no files */
    /* Data-parallel group (borrowed; NULL or one process: train alone). Every rank runs the same
     * trainer on the same data and configuration: each step's k global batches are cut into
     * `size` contiguous slices of sentences, rank r computes the gradient of slice r (scaled by
     * the global token count), the gradients are summed across the ranks (tg_dist_grad_*), and
     * every rank takes the same optimizer step. Only rank 0 writes files and progress; dev
     * evaluation is shared out by batches; stop requests, time limits and errors are agreed so
     * that every rank stops at the same step. */
    tg_dist *dist;
    FILE *log;             /* progress output (NULL: stderr) */
    tg_progress_mode progress;
} tg_train_config;

/* Defaults: docs/model.md §1's Adam and noam schedule (d_model from the model when 0), 4096 tokens,
 * accum 1, no clipping, seed 1, shuffle, log every 100 steps, no limits set. */
TG_API tg_train_config tg_train_config_default(void);
TG_API tg_status tg_train_config_check(const tg_train_config *c);
/* The configuration as compact JSON (stored in the state file); *out malloc'ed, caller frees. */
TG_API tg_status tg_train_config_json(const tg_train_config *c, char **out);

typedef struct tg_trainer tg_trainer;

/* A trainer of model m (borrowed) on corpus train (borrowed; dev may be NULL). The optimizer
 * state is created here. cfg is copied (out_dir and log are borrowed). */
TG_API tg_status tg_trainer_new(tg_model *m, const tg_corpus *train, const tg_corpus *dev,
                         const tg_train_config *cfg, tg_trainer **out);
TG_API void tg_trainer_free(tg_trainer *t);

typedef struct tg_step_info {
    int64_t step;    /* optimizer steps done, this one included */
    int64_t epoch;   /* completed epochs */
    double lr;
    double grad_norm; /* before clipping */
    tg_grad_info grad; /* over every rank's share of the step */
    double comm_s;     /* seconds this rank waited for the gradient all-reduce (0 alone) */
} tg_step_info;

/* One optimizer step: k = accum batches, gradient, clipping, lr of the new step, update. */
TG_API tg_status tg_trainer_step(tg_trainer *t, tg_step_info *info);

/* Steps until a stop condition or until *stop (may be NULL; set it from a signal handler)
 * becomes non-zero; evaluates, logs and saves on the way and saves at the end (when out_dir
 * is set). Returns TG_ERR_INTERRUPTED after saving when stopped through the flag. */
TG_API tg_status tg_trainer_run(tg_trainer *t, volatile sig_atomic_t *stop);

/* Evaluate on the dev corpus (TG_ERR_STATE if there is none); appends a metrics line. */
TG_API tg_status tg_trainer_eval(tg_trainer *t, tg_eval_info *out);

/* Save the model checkpoint and the training state in dir (train/state.c) as one commit: a
 * crash at any instant leaves either this save or the previous one complete (train/rundir.c).
 * Visible results: dir/model.safetensors and dir/state.safetensors (which names the model file
 * saved with it, dir/.tg-model-<step>.safetensors, a second name of model.safetensors). */
TG_API tg_status tg_trainer_save(tg_trainer *t, const char *dir);
/* Restore the training state written by tg_trainer_save into a trainer built on the same data
 * with the model loaded from the same directory: optimizer moments and step count, batch
 * position, RNG. Checks that the model and the data are those of the saved run. */
TG_API tg_status tg_trainer_load_state(tg_trainer *t, const char *state_path);

/* Extra metadata for the state file (key and value copied; e.g. the tool's options, so that a
 * resumed run can restore them). Keys "format", "state" and "train_config" are reserved. */
TG_API tg_status tg_trainer_set_metadata(tg_trainer *t, const char *key, const char *value);

/* Optimizer steps taken, the current epoch, and the model being trained. */
TG_API int64_t tg_trainer_steps(const tg_trainer *t);
TG_API int64_t tg_trainer_epoch(const tg_trainer *t);
TG_API tg_model *tg_trainer_model(tg_trainer *t);

/* ---- the training directory (train/rundir.c) ---------------------------------------------- */

/* An exclusive advisory lock (flock) on dir/.tg-train.lock, held until tg_train_dir_unlock or
 * the process ends; TG_ERR_STATE naming the holder's pid when another process holds it. */
typedef struct tg_train_lock tg_train_lock;
TG_API tg_status tg_train_dir_lock(const char *dir, tg_train_lock **out);
TG_API void tg_train_dir_unlock(tg_train_lock *l);
/* The model checkpoint of dir's last complete save (the one its state names), to resume from:
 * dir/.tg-model-<step>.safetensors, or dir/model.safetensors when the state names none. */
TG_API tg_status tg_train_dir_model_path(const char *dir, char *buf, size_t n);
/* Under the lock, before training: remove temporary files and model files that no state
 * names (left by a crash), and make model.safetensors the last complete save's model; with
 * clear, first remove the old run (state, model, metrics.jsonl, checkpoint-<step> files). */
TG_API tg_status tg_train_dir_tidy(const char *dir, bool clear);

/* ---- checkpoint averaging (train/average.c) ----------------------------------------------- */

/* out = element-wise mean of the parameters of the k >= 1 checkpoints paths[0..k) (accumulated
 * in double), which must have the same configuration, vocabularies, names and shapes; the
 * first one's metadata is kept. Written atomically. */
TG_API tg_status tg_checkpoint_average(const char *const *paths, int64_t k, const char *out_path);

#ifdef __cplusplus
}
#endif
#endif
