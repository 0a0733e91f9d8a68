/* Internal structure of the trainer, shared by train/trainer.c (the loop) and train/state.c (the
 * training state file). */
#ifndef TG_TRAIN_IMPL_H
#define TG_TRAIN_IMPL_H

#include "tg/train.h"

#define TG_TRAIN_MAX_META 8

/* Tests (train/optim.c): an optimizer step in one pass per parameter (off) instead of one per
 * run of parameters with the same group (on, the default); returns the previous setting */
bool tg__optim_runs(bool on);
/* Tests: how many passes over the backend's memory o's last step made */
int64_t tg__optim_passes(const tg_optim *o);

/* Mark a corpus of (masked input, target) pairs: its batches are tg_batch_build_mlm's
 * (train/data.c; set by tg_corpus_new_mlm). */
void tg__train_corpus_set_mlm(tg_corpus *c);
/* Mark a corpus of (sequence, class) pairs: its batches are classification batches
 * (b->classify), eos appended to every sequence (train/data.c; set by tg_corpus_new_classify). */
void tg__train_corpus_set_classify(tg_corpus *c, int32_t eos);
/* Mark a corpus of token-stream blocks: its batches are tg_batch_build_lm_blocks's
 * (train/data.c; set by tg_corpus_new_stream). */
void tg__train_corpus_set_stream(tg_corpus *c);
/* Mark a corpus of plain sequences (the target side) as a masked language model's with masks
 * drawn anew for every batch (train/data.c; set by tg_corpus_new_mlm_dynamic and
 * tg_corpus_new_mlm_ids): special[0..nspecial) (ascending; copied) are never masked nor drawn
 * (NULL: docs/model.md §4's four and the mask), eos ends every sequence of a batch. */
tg_status tg__train_corpus_set_mlm_dynamic(tg_corpus *c, double p, uint64_t seed, int32_t mask, int32_t vocab_size,
                                           const int32_t *special, int64_t nspecial, int32_t eos);
/* tg_corpus_batch of a batch of epoch `epoch`: a dynamically masked corpus draws example i's
 * masks from (seed, epoch, i), so every epoch masks anew and any batch can be built again. */
tg_status tg__corpus_batch_at(const tg_corpus *c, const int64_t *idx, int64_t n, int64_t epoch, tg_batch *out);

struct tg_trainer {
    tg_model *m;
    const tg_corpus *train, *dev;
    tg_train_config cfg;
    char *out_dir; /* copy of cfg.out_dir (NULL: no files) */
    tg_optim *opt;
    tg_batcher *bt;
    tg_rng drop_rng; /* draws one dropout seed per batch */
    int64_t step;    /* optimizer steps done */
    int64_t tokens;  /* target tokens trained on, all runs */
    double elapsed_before; /* seconds of training in earlier runs (restored from state) */
    double run_start;      /* monotonic clock at the start of tg_trainer_run */
    int64_t steps_at_start;
    FILE *metrics; /* out_dir/metrics.jsonl while running */
    char metrics_path[4096];
    double first_loss; /* of this trainer's first step: the divergence bound's base */
    int64_t above_bound; /* steps in a row with a loss past that bound */
    char *meta_key[TG_TRAIN_MAX_META], *meta_val[TG_TRAIN_MAX_META];
    int nmeta;
    /* progress: sums since the last log line */
    double win_loss, win_nll, win_tokens_t, win_time0;
    int64_t win_tokens;
    double last_bar;
    double last_loss, last_lr;
    double win_comm_s; /* all-reduce waits since the last log line */
    int64_t win_steps;
    bool writer; /* writes files and progress: alone, or rank 0 of a group */
    int64_t **last_idx; /* in a group: sentence indices of the step's k global batches */
    int64_t *last_epoch; /* and the epoch each came from (a dynamically masked corpus's masks) */
    int64_t nlast_idx;
    bool bar_open; /* a progress bar is on the current terminal line */
};

/* Seconds on the monotonic clock. */
double tg__train_now(void);
/* The training directory (train/rundir.c): the model file name of a save at `step`; make
 * dir/as another name of dir/model_file, atomically; remove the model files other than keep
 * (NULL: all); cut metrics.jsonl after the last line of a step <= step. */
tg_status tg__train_model_file(int64_t step, char *buf, size_t n);
tg_status tg__train_dir_publish(const char *dir, const char *model_file, const char *as);
tg_status tg__train_dir_drop_models(const char *dir, const char *keep);
tg_status tg__train_metrics_truncate(const char *path, int64_t step, bool *ended);
/* FNV-1a over every parameter's float bytes, in store order. */
tg_status tg__train_model_hash(tg_model *m, uint64_t *out);

#endif
