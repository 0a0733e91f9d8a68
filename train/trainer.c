/* The training loop (docs/model.md §1 "Training recipe"): gradient accumulation over k batches,
 * global-norm clipping, the learning-rate schedule, dev-set evaluation, JSON-lines metrics,
 * a progress display, periodic checkpoints and a clean stop on request.
 *
 * Reproducibility: everything random in a step comes from the batcher's (seed, epoch) shuffle
 * and from one dropout seed per batch drawn from a counter-based RNG whose (seed, counter) is
 * saved in the training state; so a resumed run repeats exactly what the straight run does. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tg/autograd.h"
#include "tg/json.h"
#include "tg/ops.h"
#include "core/tg-impl.h"
#include "train/train-impl.h"

double tg__train_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- configuration -------------------------------------------------------------------------- */

tg_train_config tg_train_config_default(void) {
    tg_train_config c;
    memset(&c, 0, sizeof c);
    c.optim = tg_optim_defaults(TG_OPTIM_ADAM);
    c.lr = tg_lr_schedule_default(0);
    c.max_tokens = 4096;
    c.accum = 1;
    c.seed = 1;
    c.shuffle = true;
    c.log_interval = 100;
    return c;
}

tg_status tg_train_config_check(const tg_train_config *c) {
    if (!c) return tg_error_set(TG_ERR_INVALID, "train config: NULL");
    if (c->max_tokens < 1)
        return tg_error_set(TG_ERR_INVALID, "train config: token budget %lld < 1", (long long)c->max_tokens);
    if (c->accum < 1 || c->accum > 65536)
        return tg_error_set(TG_ERR_INVALID, "train config: accum %lld outside [1, 65536]", (long long)c->accum);
    if (!(c->clip >= 0.0) || !isfinite(c->clip))
        return tg_error_set(TG_ERR_INVALID, "train config: clip %g must be >= 0", c->clip);
    if (c->max_steps < 0 || c->max_epochs < 0 || !(c->max_minutes >= 0.0))
        return tg_error_set(TG_ERR_INVALID, "train config: negative step, epoch or time limit");
    if (c->max_steps == 0 && c->max_epochs == 0 && c->max_minutes == 0.0)
        return tg_error_set(TG_ERR_INVALID, "train config: no stop condition (set steps, epochs or minutes)");
    if (c->eval_interval < 0 || c->save_interval < 0 || c->log_interval < 1 || c->keep_checkpoints < 0)
        return tg_error_set(TG_ERR_INVALID, "train config: intervals must be >= 0 (log interval >= 1)");
    if (c->progress < TG_PROGRESS_AUTO || c->progress > TG_PROGRESS_NONE)
        return tg_error_set(TG_ERR_INVALID, "train config: unknown progress mode %d", (int)c->progress);
    return tg_lr_schedule_check(&c->lr);
}

static const char *optim_name(tg_optim_kind k) {
    return k == TG_OPTIM_SGD ? "sgd" : k == TG_OPTIM_ADAMW ? "adamw" : "adam";
}

tg_status tg_train_config_json(const tg_train_config *c, char **out) {
    if (!c || !out) return tg_error_set(TG_ERR_INVALID, "tg_train_config_json: NULL argument");
    char buf[2048];
    int n = snprintf(buf, sizeof buf,
                     "{\"optimizer\":\"%s\",\"beta1\":%.9g,\"beta2\":%.9g,\"eps\":%.9g,\"weight_decay\":%.9g,"
                     "\"momentum\":%.9g,\"schedule\":\"%s\",\"lr\":%.17g,\"factor\":%.17g,\"warmup\":%lld,"
                     "\"min_lr\":%.17g,\"total_steps\":%lld,\"max_tokens\":%lld,\"accum\":%lld,\"clip\":%.17g,"
                     "\"steps\":%lld,\"epochs\":%lld,\"minutes\":%.17g,\"seed\":%llu,\"shuffle\":%s,"
                     "\"eval_interval\":%lld,\"save_interval\":%lld,\"log_interval\":%lld,"
                     "\"keep_checkpoints\":%lld}",
                     optim_name(c->optim.kind), (double)c->optim.beta1, (double)c->optim.beta2,
                     (double)c->optim.eps, (double)c->optim.weight_decay, (double)c->optim.momentum,
                     tg_lr_kind_name(c->lr.kind), c->lr.lr, c->lr.factor, (long long)c->lr.warmup, c->lr.min_lr,
                     (long long)c->lr.total_steps, (long long)c->max_tokens, (long long)c->accum, c->clip,
                     (long long)c->max_steps, (long long)c->max_epochs, c->max_minutes,
                     (unsigned long long)c->seed, c->shuffle ? "true" : "false", (long long)c->eval_interval,
                     (long long)c->save_interval, (long long)c->log_interval, (long long)c->keep_checkpoints);
    if (n < 0 || n >= (int)sizeof buf) return tg_error_set(TG_ERR_INVALID, "tg_train_config_json: too long");
    *out = strdup(buf);
    return *out ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_train_config_json: out of memory");
}

/* ---- one gradient over k batches ----------------------------------------------------------- */

/* Build and run the graph of one batch: the summed label-smoothed loss scaled by 1/total (so
 * the k gradients add up to the gradient of the mean over all k batches' tokens), backward
 * when `grad`, and the summed loss and NLL read back. */
static tg_status batch_loss(tg_model *m, const tg_batch *b, double scale, uint64_t seed, bool training, bool grad,
                            tg_dist *hook, double *loss_sum, double *nll_sum) {
    tg_graph *g = tg_graph_new();
    if (!g) return tg_error_set(TG_ERR_NOMEM, "tg_train: out of memory");
    /* the last batch of a data-parallel step: start each bucket's all-reduce once final */
    if (hook) tg_graph_set_grad_hook(g, tg_dist_grad_ready, hook);
    tg_graph_set_training(g, training);
    tg_graph_set_grad_enabled(g, grad);
    tg_graph_set_seed(g, seed);
    float ls = b->classify ? 0.0f : tg_model_cfg(m)->label_smoothing;
    int64_t n = b->size * b->tgt_len;
    /* a classification batch: one class per sequence (tgt_out [B]) from the classification head */
    tg_tensor *logits = b->classify ? tg_model_classify(m, g, b->src, b->size, b->src_len) : tg_model_logits(m, g, b);
    tg_tensor *y = tg_input(g, TG_DTYPE_I32, 1, &n, b->tgt_out);
    /* class 0 is a class; a model without padding (GPT-2, pad_id -1) has its own id 0 */
    const int32_t ignore = b->classify ? -1 : tg_model_cfg(m)->pad_id;
    /* {loss, nll}: with smoothing, the NLL comes from the same pass over the logits */
    tg_tensor *pair = ls != 0.0f
                          ? tg_keep(tg_cross_entropy_with_nll(logits, y, ls, ignore, TG_REDUCE_SUM))
                          : NULL;
    tg_tensor *loss = pair ? tg_reshape(tg_slice(pair, 0, 0, 1), 0, NULL)
                           : tg_keep(tg_cross_entropy(logits, y, 0.0f, ignore, TG_REDUCE_SUM));
    tg_status st = tg_graph_status(g, NULL);
    if (st == TG_OK && grad) st = tg_backward(g, tg_scale(loss, (float)scale));
    if (st == TG_OK) st = tg_graph_status(g, NULL);
    if (st == TG_OK) st = tg_graph_run(g, tg_model_backend(m));
    float lq[2] = {0.0f, 0.0f};
    if (st == TG_OK)
        st = pair ? tg_tensor_read(pair, lq, sizeof lq) : tg_tensor_read(loss, lq, sizeof lq[0]);
    /* an evaluation's non-finite loss: the node it came from (a graph without gradients runs
     * again as it ran; a training step's is a diverging run, which the trainer tells) */
    if (st == TG_OK && !grad && !(isfinite(lq[0]) && isfinite(lq[1]))) {
        const double bad = isfinite(lq[0]) ? lq[1] : lq[0];
        st = tg_graph_find_nonfinite(g, tg_model_backend(m));
        st = st == TG_OK ? tg_error_set(TG_ERR_NUMERIC, "the loss is %g", isnan(bad) ? fabs(bad) : bad)
                         : tg_error_prefix(st, "the loss is %g", isnan(bad) ? fabs(bad) : bad);
    }
    tg_graph_free(g);
    *loss_sum = lq[0];
    *nll_sum = pair ? lq[1] : lq[0];
    return st;
}

tg_status tg_train_grad(tg_model *m, const tg_batch *const *batches, int64_t k, const uint64_t *seeds,
                        bool training, tg_grad_info *info) {
    if (!m || !batches || k < 1) return tg_error_set(TG_ERR_INVALID, "tg_train_grad: no batches");
    tg_grad_info gi = {0};
    for (int64_t i = 0; i < k; i++) {
        if (!batches[i] || !batches[i]->tgt_out)
            return tg_error_set(TG_ERR_INVALID, "tg_train_grad: batch %lld has no targets", (long long)i);
        gi.src_tokens += batches[i]->src_tokens;
        gi.tgt_tokens += batches[i]->tgt_tokens;
        gi.sentences += batches[i]->size;
    }
    if (gi.tgt_tokens < 1) return tg_error_set(TG_ERR_INVALID, "tg_train_grad: no target tokens");
    double scale = 1.0 / (double)gi.tgt_tokens, ls = 0.0, nl = 0.0;
    for (int64_t i = 0; i < k; i++) {
        double l, q;
        tg_status st = batch_loss(m, batches[i], scale, seeds ? seeds[i] : 0, training, true, NULL, &l, &q);
        if (st) return st;
        ls += l;
        nl += q;
    }
    gi.loss = ls * scale;
    gi.nll = nl * scale;
    if (info) *info = gi;
    return TG_OK;
}

/* Summed loss, NLL, target tokens and sentences of the batches i with i % size == rank. */
static tg_status evaluate_part(tg_model *m, const tg_corpus *c, int64_t max_tokens, int rank, int size,
                               double sums[5]) {
    tg_batcher *bt;
    tg_status st = tg_batcher_new(c, max_tokens, 0, false, &bt);
    if (st) return st;
    for (int64_t i = 0; st == TG_OK && i < tg_batcher_count(bt); i++) {
        tg_batch b;
        st = tg_batcher_next(bt, &b);
        if (st || i % size != rank) {
            if (st == TG_OK) tg_batch_free(&b);
            continue;
        }
        double l, q;
        st = batch_loss(m, &b, 1.0, 0, false, false, NULL, &l, &q);
        sums[0] += l;
        sums[1] += q;
        sums[2] += (double)b.tgt_tokens;
        sums[3] += (double)b.size;
        if (st == TG_OK && tg_model_cfg(m)->arch == TG_ARCH_MLM) { /* the masked tokens (classes) predicted right */
            int64_t right = 0, total = 0;
            st = b.classify ? tg_model_classify_accuracy(m, &b, &right, &total) : tg_model_mlm_accuracy(m, &b, &right, &total);
            sums[4] += (double)right;
        }
        tg_batch_free(&b);
    }
    tg_batcher_free(bt);
    return st;
}

static void eval_info(const double sums[5], tg_eval_info *e) {
    e->tgt_tokens = (int64_t)sums[2];
    e->sentences = (int64_t)sums[3];
    e->loss = sums[0] / sums[2];
    e->nll = sums[1] / sums[2];
    e->ppl = exp(e->nll);
    e->accuracy = sums[2] > 0 ? sums[4] / sums[2] : 0.0;
}

tg_status tg_train_evaluate(tg_model *m, const tg_corpus *c, int64_t max_tokens, tg_eval_info *out) {
    if (!m || !c || !out) return tg_error_set(TG_ERR_INVALID, "tg_train_evaluate: NULL argument");
    if (!tg_corpus_tgt(c, 0, NULL)) return tg_error_set(TG_ERR_INVALID, "tg_train_evaluate: corpus has no targets");
    double sums[5] = {0};
    tg_status st = evaluate_part(m, c, max_tokens, 0, 1, sums);
    if (st) return st;
    eval_info(sums, out);
    return TG_OK;
}

/* The dev loss with the batches shared out over the ranks of t's group (alone: all of them). */
static tg_status trainer_evaluate(tg_trainer *t, tg_eval_info *out) {
    tg_dist *d = t->cfg.dist;
    if (tg_dist_size(d) == 1) return tg_train_evaluate(t->m, t->dev, t->cfg.max_tokens, out);
    double sums[5] = {0};
    tg_status st = evaluate_part(t->m, t->dev, t->cfg.max_tokens, tg_dist_rank(d), tg_dist_size(d), sums);
    st = tg_dist_agree(d, st);
    if (st == TG_OK) st = tg_dist_sum(d, sums, 5);
    if (st == TG_OK) eval_info(sums, out);
    return st;
}

/* ---- the trainer ---------------------------------------------------------------------------- */

void tg_trainer_free(tg_trainer *t) {
    if (!t) return;
    tg_optim_free(t->opt);
    tg_batcher_free(t->bt);
    if (t->metrics) fclose(t->metrics);
    for (int i = 0; i < t->nmeta; i++) {
        free(t->meta_key[i]);
        free(t->meta_val[i]);
    }
    for (int64_t i = 0; i < t->nlast_idx; i++) free(t->last_idx[i]);
    free(t->last_idx);
    free(t->last_epoch);
    free(t->out_dir);
    free(t);
}

tg_status tg_trainer_new(tg_model *m, const tg_corpus *train, const tg_corpus *dev, const tg_train_config *cfg,
                         tg_trainer **out) {
    if (!m || !train || !cfg || !out) return tg_error_set(TG_ERR_INVALID, "tg_trainer_new: NULL argument");
    *out = NULL;
    if (!tg_corpus_tgt(train, 0, NULL))
        return tg_error_set(TG_ERR_INVALID, "tg_trainer_new: the training corpus is empty or has no targets");
    if (dev && (tg_corpus_size(dev) < 1 || !tg_corpus_tgt(dev, 0, NULL)))
        return tg_error_set(TG_ERR_INVALID, "tg_trainer_new: the dev corpus is empty or has no targets");
    tg_train_config c = *cfg;
    if (c.lr.d_model == 0) c.lr.d_model = tg_model_cfg(m)->d_model;
    if (c.lr.kind == TG_LR_COSINE && c.lr.total_steps == 0) c.lr.total_steps = c.max_steps;
    tg_status st = tg_train_config_check(&c);
    if (st) return st;
    tg_trainer *t = calloc(1, sizeof *t);
    if (!t) return tg_error_set(TG_ERR_NOMEM, "tg_trainer_new: out of memory");
    t->m = m;
    t->train = train;
    t->dev = dev;
    t->cfg = c;
    if (c.out_dir && !(t->out_dir = strdup(c.out_dir))) st = tg_error_set(TG_ERR_NOMEM, "tg_trainer_new: out of memory");
    t->cfg.out_dir = t->out_dir;
    /* the dropout RNG is keyed apart from the batcher's shuffle, both from the one seed */
    tg_rng_init(&t->drop_rng, c.seed ^ 0xD80F0D80F0D80F0Dull);
    if (st == TG_OK) st = tg_optim_new(tg_model_store(m), &c.optim, &t->opt);
    if (st == TG_OK && c.no_decay_vectors) st = tg_optim_no_decay_on_vectors(t->opt, NULL);
    if (st == TG_OK) st = tg_batcher_new(train, c.max_tokens, c.seed, c.shuffle, &t->bt);
    if (st == TG_OK) st = tg_store_zero_grad(tg_model_store(m));
    t->writer = tg_dist_rank(c.dist) == 0;
    if (!t->writer) t->cfg.progress = TG_PROGRESS_NONE;
    if (tg_dist_size(c.dist) > 1) {
        /* lay the gradient buckets out and sum the zero gradients once: every rank knows the
         * group works (or why not) before the first step */
        if (st == TG_OK) st = tg_dist_grad_begin(c.dist, tg_model_store(m));
        st = tg_dist_agree(c.dist, st);
        if (st == TG_OK) st = tg_dist_agree(c.dist, tg_dist_grad_end(c.dist, false, NULL));
    }
    if (st) {
        tg_trainer_free(t);
        return st;
    }
    *out = t;
    return TG_OK;
}

tg_status tg_trainer_set_metadata(tg_trainer *t, const char *key, const char *value) {
    if (!t || !key || !value) return tg_error_set(TG_ERR_INVALID, "tg_trainer_set_metadata: NULL argument");
    if (!strcmp(key, "format") || !strcmp(key, "state") || !strcmp(key, "train_config"))
        return tg_error_set(TG_ERR_INVALID, "tg_trainer_set_metadata: key '%s' is reserved", key);
    int i = 0;
    while (i < t->nmeta && strcmp(t->meta_key[i], key)) i++;
    if (i == TG_TRAIN_MAX_META) return tg_error_set(TG_ERR_INVALID, "tg_trainer_set_metadata: too many keys");
    char *v = strdup(value), *k = i < t->nmeta ? t->meta_key[i] : strdup(key);
    if (!v || !k) {
        free(v);
        if (i == t->nmeta) free(k);
        return tg_error_set(TG_ERR_NOMEM, "tg_trainer_set_metadata: out of memory");
    }
    if (i < t->nmeta) free(t->meta_val[i]);
    else t->nmeta++;
    t->meta_key[i] = k;
    t->meta_val[i] = v;
    return TG_OK;
}

int64_t tg_trainer_steps(const tg_trainer *t) { return t ? t->step : 0; }
int64_t tg_trainer_epoch(const tg_trainer *t) { return t ? tg_batcher_epoch(t->bt) : 0; }
tg_model *tg_trainer_model(tg_trainer *t) { return t ? t->m : NULL; }

/* One rank's share of a data-parallel step: slice r of each of the k global batches b[]
 * (contiguous sentences; an empty slice adds nothing), its gradient scaled by the global
 * target-token count, then the all-reduce that sums the slices' gradients, agreement on errors,
 * and the loss sums of every rank. Every rank calls it, and the same collectives, even after a
 * local failure. */
static tg_status dist_grad(tg_trainer *t, tg_status st, tg_batch *b, int64_t k, const uint64_t *seeds,
                           tg_grad_info *gi, double *comm_s) {
    tg_dist *d = t->cfg.dist;
    int64_t r = tg_dist_rank(d), n = tg_dist_size(d);
    tg_grad_info g = {0};
    for (int64_t i = 0; st == TG_OK && i < k; i++) {
        g.src_tokens += b[i].src_tokens;
        g.tgt_tokens += b[i].tgt_tokens;
        g.sentences += b[i].size;
    }
    double scale = g.tgt_tokens > 0 ? 1.0 / (double)g.tgt_tokens : 0.0, sums[2] = {0.0, 0.0};
    tg_batch *part = calloc((size_t)k, sizeof *part);
    int64_t last = -1;
    if (st == TG_OK && !part) st = tg_error_set(TG_ERR_NOMEM, "tg_trainer_step: out of memory");
    for (int64_t i = 0; st == TG_OK && i < k; i++) {
        int64_t lo = b[i].size * r / n, hi = b[i].size * (r + 1) / n;
        if (hi > lo) {
            st = tg__corpus_batch_at(t->train, t->last_idx[i] + lo, hi - lo, t->last_epoch[i], &part[i]);
            last = i;
        }
    }
    if (st == TG_OK && g.tgt_tokens < 1) st = tg_error_set(TG_ERR_INVALID, "tg_trainer_step: no target tokens");
    if (st == TG_OK) st = tg_dist_grad_begin(d, tg_model_store(t->m));
    /* every rank is ready to exchange, or every rank stops here */
    st = tg_dist_agree(d, st);
    if (st == TG_OK) {
        for (int64_t i = 0; st == TG_OK && i <= last; i++) {
            if (part[i].size == 0) continue;
            /* rank r draws its own dropout masks (a stream per rank) */
            uint64_t seed = seeds[i] ^ ((uint64_t)r * 0x9E3779B97F4A7C15ull);
            double l, q;
            st = batch_loss(t->m, &part[i], scale, seed, true, true, i == last ? d : NULL, &l, &q);
            sums[0] += l;
            sums[1] += q;
        }
        /* a rank that failed still sends its buckets, then everyone learns of the failure */
        tg_status cs = tg_dist_grad_end(d, st != TG_OK, comm_s);
        st = tg_dist_agree(d, st ? st : cs);
        if (st == TG_OK) st = tg_dist_sum(d, sums, 2);
    }
    for (int64_t i = 0; part && i < k; i++) tg_batch_free(&part[i]);
    free(part);
    g.loss = sums[0] * scale;
    g.nll = sums[1] * scale;
    *gi = g;
    return st;
}

/* The error of a run whose numbers went bad, with what usually causes it. */
static tg_status diverged(const char *what, double lr) {
    return tg_error_set(TG_ERR_NUMERIC, "%s: training diverged (learning rate %.3g at this step): lower the learning "
                        "rate, lengthen the warm-up or clip the gradient norm", what, lr);
}

tg_status tg_trainer_step(tg_trainer *t, tg_step_info *info) {
    if (!t) return tg_error_set(TG_ERR_INVALID, "tg_trainer_step: NULL trainer");
    int64_t k = t->cfg.accum;
    bool group = tg_dist_size(t->cfg.dist) > 1;
    tg_batch *b = calloc((size_t)k, sizeof *b);
    const tg_batch **bp = malloc((size_t)k * sizeof *bp);
    uint64_t *seeds = malloc((size_t)k * sizeof *seeds);
    tg_status st = (b && bp && seeds) ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_trainer_step: out of memory");
    if (st == TG_OK && group && t->nlast_idx < k) {
        int64_t **p = realloc(t->last_idx, (size_t)k * sizeof *p);
        if (p) t->last_idx = p;
        int64_t *e = p ? realloc(t->last_epoch, (size_t)k * sizeof *e) : NULL;
        if (e) t->last_epoch = e;
        if (p && e) {
            for (int64_t i = t->nlast_idx; i < k; i++) p[i] = NULL;
            t->last_idx = p;
            t->nlast_idx = k;
        } else {
            st = tg_error_set(TG_ERR_NOMEM, "tg_trainer_step: out of memory");
        }
    }
    int64_t got = 0;
    for (; st == TG_OK && got < k; got++) {
        if (group) t->last_epoch[got] = tg_batcher_epoch(t->bt); /* the epoch of the batch next */
        st = tg_batcher_next(t->bt, &b[got]);
        if (st) break;
        bp[got] = &b[got];
        uint64_t hi = tg_rng_u32(&t->drop_rng);
        seeds[got] = (hi << 32) | tg_rng_u32(&t->drop_rng);
        if (group) { /* keep the batch's sentence indices: the ranks cut it into slices */
            int64_t nidx;
            const int64_t *idx = tg_batcher_last(t->bt, &nidx);
            int64_t *copy = realloc(t->last_idx[got], (size_t)(nidx ? nidx : 1) * sizeof *copy);
            if (!copy) {
                st = tg_error_set(TG_ERR_NOMEM, "tg_trainer_step: out of memory");
                got++;
                break;
            }
            memcpy(copy, idx, (size_t)nidx * sizeof *copy);
            t->last_idx[got] = copy;
        }
    }
    tg_step_info si = {0};
    tg_store *s = tg_model_store(t->m);
    /* in a group, a local failure so far still goes through dist_grad's collectives */
    if (group) st = dist_grad(t, st, b, k, seeds, &si.grad, &si.comm_s);
    bool agreed = st == TG_OK; /* a group's failure so far is known to every rank already */
    if (!group && st == TG_OK) st = tg_train_grad(t->m, bp, k, seeds, true, &si.grad);
    if (st == TG_OK) {
        st = t->cfg.clip > 0.0 ? tg_store_clip_grad(s, t->cfg.clip, &si.grad_norm) : tg_store_grad_norm(s, &si.grad_norm);
        char what[64] = "";
        if (st == TG_OK && !isfinite(si.grad.loss)) snprintf(what, sizeof what, "the loss is %g", si.grad.loss);
        else if (st == TG_OK && !isfinite(si.grad_norm)) snprintf(what, sizeof what, "the gradient norm is %g", si.grad_norm);
        if (what[0]) st = diverged(what, tg_lr_at(&t->cfg.lr, t->step + 1));
        if (st) st = tg_error_prefix(st, "step %lld", (long long)(t->step + 1));
    }
    if (st == TG_OK) { /* the update zeroes the gradients in its pass; else zero them here */
        si.lr = tg_lr_at(&t->cfg.lr, t->step + 1);
        st = tg_optim_step_zero_grad(t->opt, (float)si.lr);
    } else {
        tg_store_zero_grad(s);
    }
    /* errors after the exchange (clipping, update) are local: agree on them too */
    if (group && agreed) st = tg_dist_agree(t->cfg.dist, st);
    if (st == TG_OK) {
        t->step++;
        t->tokens += si.grad.tgt_tokens;
        si.step = t->step;
        si.epoch = tg_batcher_epoch(t->bt);
        if (info) *info = si;
    }
    for (int64_t i = 0; i < got; i++) tg_batch_free(&b[i]);
    free(b);
    free(bp);
    free(seeds);
    return st;
}

/* ---- metrics and progress ---- */

static void json_num(FILE *f, const char *key, double x) {
    if (isfinite(x)) fprintf(f, ",\"%s\":%.9g", key, x);
    else fprintf(f, ",\"%s\":null", key);
}

static double elapsed(const tg_trainer *t) { return t->elapsed_before + (tg__train_now() - t->run_start); }

static void fmt_time(char *buf, size_t n, double s) {
    if (!(s >= 0.0) || !isfinite(s)) {
        snprintf(buf, n, "?");
        return;
    }
    long v = (long)(s + 0.5);
    if (v >= 3600) snprintf(buf, n, "%ldh%02ldm", v / 3600, (v / 60) % 60);
    else if (v >= 60) snprintf(buf, n, "%ldm%02lds", v / 60, v % 60);
    else snprintf(buf, n, "%lds", v);
}

/* Seconds left: the nearest of the step, epoch and time limits, at this run's pace. */
static double eta(const tg_trainer *t) {
    double run = tg__train_now() - t->run_start;
    int64_t done = t->step - t->steps_at_start;
    if (done < 1 || run <= 0.0) return NAN;
    double per_step = run / (double)done, best = INFINITY;
    if (t->cfg.max_steps > 0) best = fmin(best, (double)(t->cfg.max_steps - t->step) * per_step);
    if (t->cfg.max_epochs > 0) {
        double nb = (double)tg_batcher_count(t->bt);
        double left = ((double)(t->cfg.max_epochs - tg_batcher_epoch(t->bt)) * nb - (double)tg_batcher_index(t->bt));
        best = fmin(best, left / (double)t->cfg.accum * per_step);
    }
    if (t->cfg.max_minutes > 0.0) best = fmin(best, t->cfg.max_minutes * 60.0 - elapsed(t));
    return best < 0.0 ? 0.0 : best;
}

static FILE *log_stream(const tg_trainer *t) { return t->cfg.log ? t->cfg.log : stderr; }

static bool use_bar(const tg_trainer *t) {
    if (t->cfg.progress == TG_PROGRESS_BAR) return true;
    return t->cfg.progress == TG_PROGRESS_AUTO && isatty(fileno(log_stream(t)));
}

static void end_bar(tg_trainer *t) {
    if (t->bar_open) fputc('\n', log_stream(t));
    t->bar_open = false;
}

static void draw_bar(tg_trainer *t, double tok_s) {
    FILE *f = log_stream(t);
    char e[32], bar[24] = "";
    fmt_time(e, sizeof e, eta(t));
    if (t->cfg.max_steps > 0) {
        int w = 20, fill = (int)((double)w * (double)t->step / (double)t->cfg.max_steps);
        if (fill > w) fill = w;
        for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
        bar[w] = '\0';
        fprintf(f, "\r\033[Kstep %lld/%lld [%s]", (long long)t->step, (long long)t->cfg.max_steps, bar);
    } else {
        fprintf(f, "\r\033[Kstep %lld epoch %lld", (long long)t->step, (long long)tg_batcher_epoch(t->bt));
    }
    fprintf(f, " loss %.4f lr %.3g %.0f tok/s ETA %s", t->last_loss, t->last_lr, tok_s, e);
    fflush(f);
    t->bar_open = true;
}

/* A metrics line is out of the buffer and at the kernel, or the run stops: a log that silently
 * loses lines (a full disk) is worse than no run. */
static tg_status metrics_flush(tg_trainer *t) {
    if (tg__io_fflush(t->metrics, t->metrics_path) == 0) return TG_OK;
    tg_status st = tg_error_set(TG_ERR_IO, "cannot write '%s': %s", t->metrics_path, strerror(errno));
    __fpurge(t->metrics); /* what was reported unwritten must not appear at fclose */
    return st;
}

static tg_status log_train(tg_trainer *t, const tg_step_info *si, bool line) {
    double now = tg__train_now(), span = now - t->win_time0;
    double tok_s = span > 0.0 ? (double)t->win_tokens / span : 0.0;
    if (use_bar(t) && t->cfg.progress != TG_PROGRESS_NONE && (line || now - t->last_bar > 0.2)) {
        draw_bar(t, tok_s);
        t->last_bar = now;
    }
    if (!line) return TG_OK;
    double loss = t->win_tokens_t > 0 ? t->win_loss / t->win_tokens_t : NAN;
    double nll = t->win_tokens_t > 0 ? t->win_nll / t->win_tokens_t : NAN;
    if (t->metrics) {
        fprintf(t->metrics, "{\"event\":\"train\",\"step\":%lld,\"epoch\":%lld", (long long)si->step,
                (long long)si->epoch);
        json_num(t->metrics, "epoch_progress",
                 (double)tg_batcher_index(t->bt) / (double)tg_batcher_count(t->bt));
        json_num(t->metrics, "loss", loss);
        json_num(t->metrics, "nll", nll);
        json_num(t->metrics, "lr", si->lr);
        json_num(t->metrics, "grad_norm", si->grad_norm);
        fprintf(t->metrics, ",\"tgt_tokens\":%lld", (long long)t->tokens);
        json_num(t->metrics, "tokens_per_s", tok_s);
        json_num(t->metrics, "elapsed_s", elapsed(t));
        if (tg_dist_size(t->cfg.dist) > 1) {
            fprintf(t->metrics, ",\"ranks\":%d", tg_dist_size(t->cfg.dist));
            json_num(t->metrics, "allreduce_ms", t->win_steps ? 1e3 * t->win_comm_s / (double)t->win_steps : NAN);
        }
        fprintf(t->metrics, "}\n");
        tg_status st = metrics_flush(t);
        if (st) return st;
    }
    if (!use_bar(t) && t->cfg.progress != TG_PROGRESS_NONE) {
        char e[32], el[32];
        fmt_time(e, sizeof e, eta(t));
        fmt_time(el, sizeof el, elapsed(t));
        fprintf(log_stream(t), "step %lld epoch %lld loss %.4f lr %.3g grad-norm %.3g %.0f tok/s elapsed %s ETA %s\n",
                (long long)si->step, (long long)si->epoch, loss, si->lr, si->grad_norm, tok_s, el, e);
        fflush(log_stream(t));
    }
    t->win_loss = t->win_nll = t->win_tokens_t = t->win_comm_s = 0.0;
    t->win_tokens = t->win_steps = 0;
    t->win_time0 = now;
    return TG_OK;
}

tg_status tg_trainer_eval(tg_trainer *t, tg_eval_info *out) {
    if (!t) return tg_error_set(TG_ERR_INVALID, "tg_trainer_eval: NULL trainer");
    if (!t->dev) return tg_error_set(TG_ERR_STATE, "tg_trainer_eval: no dev corpus");
    tg_eval_info e;
    tg_status st = trainer_evaluate(t, &e);
    if (st) return tg_error_prefix(st, "dev evaluation at step %lld", (long long)t->step);
    if (t->metrics) {
        fprintf(t->metrics, "{\"event\":\"dev\",\"step\":%lld,\"epoch\":%lld", (long long)t->step,
                (long long)tg_batcher_epoch(t->bt));
        json_num(t->metrics, "loss", e.loss);
        json_num(t->metrics, "nll", e.nll);
        json_num(t->metrics, "ppl", e.ppl);
        if (tg_model_cfg(t->m)->arch == TG_ARCH_MLM) json_num(t->metrics, "accuracy", e.accuracy);
        fprintf(t->metrics, ",\"tgt_tokens\":%lld,\"sentences\":%lld", (long long)e.tgt_tokens,
                (long long)e.sentences);
        json_num(t->metrics, "elapsed_s", elapsed(t));
        fprintf(t->metrics, "}\n");
        if ((st = metrics_flush(t))) return st;
    }
    if (t->cfg.progress != TG_PROGRESS_NONE) {
        end_bar(t);
        /* each family counts its own data: blocks of a stream, masked tokens, sentences */
        tg_model_arch a = tg_model_cfg(t->m)->arch;
        if (a == TG_ARCH_MLM && tg_model_cfg(t->m)->classes > 0) /* a classification run's targets are classes */
            fprintf(log_stream(t), "dev step %lld: loss %.4f, accuracy %.1f %% (%lld sequences)\n", (long long)t->step,
                    e.loss, 100.0 * e.accuracy, (long long)e.sentences);
        else if (a == TG_ARCH_MLM)
            fprintf(log_stream(t), "dev step %lld: loss %.4f ppl %.3f, masked-token accuracy %.1f %% (%lld masked tokens "
                                   "in %lld sequences)\n", (long long)t->step, e.loss, e.ppl, 100.0 * e.accuracy,
                    (long long)e.tgt_tokens, (long long)e.sentences);
        else
            fprintf(log_stream(t), "dev step %lld: loss %.4f nll %.4f ppl %.3f (%lld %s)\n", (long long)t->step, e.loss,
                    e.nll, e.ppl, (long long)e.sentences, a == TG_ARCH_LM ? "sequences" : "sentences");
        fflush(log_stream(t));
    }
    if (out) *out = e;
    return TG_OK;
}

/* ---- checkpoints kept by step number ---- */

static tg_status keep_checkpoint(tg_trainer *t) {
    char path[4096], mfile[64];
    /* another name of the model file just saved (no second write) */
    snprintf(path, sizeof path, "checkpoint-%lld.safetensors", (long long)t->step);
    tg_status st = tg__train_model_file(t->step, mfile, sizeof mfile);
    if (st == TG_OK) st = tg__train_dir_publish(t->out_dir, mfile, path);
    if (st) return st;
    /* delete the oldest beyond the last keep_checkpoints; the steps are ours, so look them up
     * by number downwards from the current step instead of listing the directory */
    int64_t kept = 0;
    for (int64_t s = t->step; s >= 1; s--) {
        snprintf(path, sizeof path, "%s/checkpoint-%lld.safetensors", t->out_dir, (long long)s);
        if (access(path, F_OK) != 0) continue;
        if (++kept > t->cfg.keep_checkpoints && tg__io_unlink(path) != 0 && errno != ENOENT)
            return tg_error_set(TG_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
    }
    return TG_OK;
}

/* Rank 0 (or the lone process) writes; in a group every rank learns whether it worked, and
 * the ranks' parameters are compared bit for bit, so a divergence cannot go unnoticed into a
 * checkpoint. */
static tg_status save_all(tg_trainer *t) {
    tg_status st = TG_OK;
    if (t->writer) {
        st = tg_trainer_save(t, t->out_dir);
        if (st == TG_OK && t->cfg.keep_checkpoints > 0) st = keep_checkpoint(t);
    }
    if (tg_dist_size(t->cfg.dist) > 1) {
        st = tg_dist_agree(t->cfg.dist, st);
        if (st == TG_OK) st = tg_dist_check_params(t->cfg.dist, tg_model_store(t->m));
        if (st) st = tg_error_prefix(st, "step %lld", (long long)t->step);
    }
    return st;
}

/* A finite loss can diverge too (Adam with a learning rate far too high settles at losses of
 * 1e5): past DIVERGE_FACTOR times the larger of the run's first loss and ln(V) (a uniform
 * guess) on DIVERGE_STEPS steps in a row, no sound run recovers; stop instead of training on. */
#define DIVERGE_FACTOR 3.0
#define DIVERGE_STEPS 10
static tg_status check_divergence(tg_trainer *t, double loss) {
    if (t->first_loss == 0.0) t->first_loss = fmax(loss, log((double)tg_model_cfg(t->m)->tgt_vocab));
    double bound = DIVERGE_FACTOR * t->first_loss;
    t->above_bound = loss > bound ? t->above_bound + 1 : 0;
    if (t->above_bound < DIVERGE_STEPS) return TG_OK;
    char what[128];
    snprintf(what, sizeof what, "step %lld: the loss is %g, above %.3g (3 x its start) for %d steps in a row",
             (long long)t->step, loss, bound, DIVERGE_STEPS);
    return diverged(what, tg_lr_at(&t->cfg.lr, t->step));
}

/* Why to stop before the next step (1 requested, 2 time limit), the same on every rank. */
static tg_status stop_flags(tg_trainer *t, volatile sig_atomic_t *stop, int *flags) {
    double f = (stop && *stop) ? 1.0 : 0.0;
    if (t->cfg.max_minutes > 0.0 && elapsed(t) >= t->cfg.max_minutes * 60.0) f += 2.0;
    tg_status st = tg_dist_size(t->cfg.dist) > 1 ? tg_dist_max(t->cfg.dist, &f, 1) : TG_OK;
    *flags = (int)f;
    return st;
}

tg_status tg_trainer_run(tg_trainer *t, volatile sig_atomic_t *stop) {
    if (!t) return tg_error_set(TG_ERR_INVALID, "tg_trainer_run: NULL trainer");
    tg_status st = TG_OK;
    bool ended = false; /* a resumed run that had finished: metrics.jsonl ends with its "end" */
    if (t->out_dir && t->writer) {
        char *path = t->metrics_path;
        snprintf(path, sizeof t->metrics_path, "%s/metrics.jsonl", t->out_dir);
        if (mkdir(t->out_dir, 0777) != 0 && errno != EEXIST)
            st = tg_error_set(TG_ERR_IO, "cannot create directory '%s': %s", t->out_dir, strerror(errno));
        /* lines past the step we start from were logged by a run that crashed before saving
         * them: this run logs those steps again */
        else if ((st = tg__train_metrics_truncate(path, t->step, &ended)) == TG_OK &&
                 !(t->metrics = fopen(path, "a")))
            st = tg_error_set(TG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    }
    st = tg_dist_agree(t->cfg.dist, st);
    if (st == TG_OK && tg_dist_size(t->cfg.dist) > 1) { /* rank 0 read it: every rank acts on it */
        double e = ended;
        st = tg_dist_max(t->cfg.dist, &e, 1);
        ended = e > 0.0;
    }
    if (st) return st;
    t->run_start = t->win_time0 = tg__train_now();
    t->last_bar = 0.0;
    t->steps_at_start = t->step;
    int64_t last_eval = -1, last_save = -1;
    bool interrupted = false;
    tg_step_info si = {0};
    for (;;) {
        int flags;
        st = stop_flags(t, stop, &flags);
        if (st) break;
        if (flags & 1) {
            interrupted = true;
            break;
        }
        if (t->cfg.max_steps > 0 && t->step >= t->cfg.max_steps) break;
        if (t->cfg.max_epochs > 0 && tg_batcher_epoch(t->bt) >= t->cfg.max_epochs) break;
        if (flags & 2) break;
        st = tg_trainer_step(t, &si);
        if (st) break;
        /* TG_PROFILE: from the run's second step on (the first writes its graph's buffers into
         * fresh pages, and the page faults would land on its first nodes) */
        if (t->step == t->steps_at_start + 1) tg_profile_reset();
        t->win_comm_s += si.comm_s;
        t->win_steps++;
        t->win_loss += si.grad.loss * (double)si.grad.tgt_tokens;
        t->win_nll += si.grad.nll * (double)si.grad.tgt_tokens;
        t->win_tokens_t += (double)si.grad.tgt_tokens;
        t->win_tokens += si.grad.src_tokens + si.grad.tgt_tokens;
        t->last_loss = si.grad.loss;
        t->last_lr = si.lr;
        bool line = t->step % t->cfg.log_interval == 0;
        st = log_train(t, &si, line);
        if (line) st = tg_dist_agree(t->cfg.dist, st); /* rank 0 alone writes the metrics */
        if (st == TG_OK) st = check_divergence(t, si.grad.loss); /* the loss is the group's */
        if (st) break;
        if (t->dev && t->cfg.eval_interval > 0 && t->step % t->cfg.eval_interval == 0) {
            st = tg_dist_agree(t->cfg.dist, tg_trainer_eval(t, NULL));
            if (st) break;
            last_eval = t->step;
        }
        if (t->out_dir && t->cfg.save_interval > 0 && t->step % t->cfg.save_interval == 0) {
            st = save_all(t);
            if (st) break;
            last_save = t->step;
        }
    }
    /* a resumed run that had finished and took no step: its last evaluation, save and "end" are
     * on record already */
    const bool done_before = ended && t->step == t->steps_at_start && !interrupted;
    if (st == TG_OK && t->win_tokens_t > 0) st = tg_dist_agree(t->cfg.dist, log_train(t, &si, true)); /* the last window */
    if (st == TG_OK && t->dev && last_eval != t->step && !interrupted && !done_before)
        st = tg_dist_agree(t->cfg.dist, tg_trainer_eval(t, NULL));
    if (st == TG_OK && t->out_dir && last_save != t->step && !done_before) st = save_all(t);
    end_bar(t);
    if (tg__profile_on() && t->writer && t->step > t->steps_at_start + 1) {
        fprintf(log_stream(t),
                "TG_PROFILE: steps %lld-%lld of this run (with the evaluations among them)\n",
                (long long)t->steps_at_start + 2, (long long)t->step);
        tg_profile_report(log_stream(t));
    }
    if (t->metrics) {
        if (st == TG_OK && !done_before) {
            fprintf(t->metrics, "{\"event\":\"%s\",\"step\":%lld,\"epoch\":%lld", interrupted ? "interrupted" : "end",
                    (long long)t->step, (long long)tg_batcher_epoch(t->bt));
            json_num(t->metrics, "elapsed_s", elapsed(t));
            fprintf(t->metrics, "}\n");
            st = metrics_flush(t);
        }
        if (fclose(t->metrics) != 0 && st == TG_OK)
            st = tg_error_set(TG_ERR_IO, "cannot write '%s': %s", t->metrics_path, strerror(errno));
        t->metrics = NULL;
    }
    t->elapsed_before += tg__train_now() - t->run_start;
    t->run_start = tg__train_now();
    if (st == TG_OK && interrupted)
        return tg_error_set(TG_ERR_INTERRUPTED, "interrupted at step %lld%s%s", (long long)t->step,
                            t->out_dir ? "; checkpoint saved in " : "", t->out_dir ? t->out_dir : "");
    return st;
}
