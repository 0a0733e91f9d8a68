/* The training state: everything besides the parameters that a resumed run needs to continue
 * bit-exactly, in a second safetensors file next to the model checkpoint.
 *
 * Tensors: "optim.m.<param>" and "optim.v.<param>" (F32, the parameter's shape): the first and
 * second moments (SGD: momentum in "m"). __metadata__:
 *   format        "tgraph-train-state"
 *   train_config  the tg_train_config as JSON (tg_train_config_json)
 *   state         JSON: step, optimizer steps, epoch and batch index of the batcher, the data
 *                 seed, the dropout RNG (seed, counter), tokens, elapsed seconds, and the
 *                 fingerprints of the corpus and of the model parameters saved with it.
 *                 64-bit integers are hex strings (a JSON number holds only 53 bits).
 *   model_file    the name of the model checkpoint saved with it, ".tg-model-<step>.safetensors"
 *   ...           any keys set with tg_trainer_set_metadata
 * The model checkpoint is written first, then the state, whose rename is the save's commit
 * point (train/rundir.c); the state also holds the model's fingerprint, so a state paired with
 * a different checkpoint is refused on resume. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/json.h"
#include "tg/safetensors.h"
#include "core/tg-impl.h"
#include "train/train-impl.h"

#define STATE_FORMAT "tgraph-train-state"

tg_status tg__train_model_hash(tg_model *m, uint64_t *out) {
    tg_store *s = tg_model_store(m);
    uint64_t h = TG_FNV1A_INIT;
    float *buf = NULL;
    for (int64_t i = 0; i < tg_store_count(s); i++) {
        int64_t n = tg_store_numel(s, i);
        float *p = realloc(buf, (size_t)n * sizeof *p);
        if (!p) {
            free(buf);
            return tg_error_set(TG_ERR_NOMEM, "model hash: out of memory");
        }
        buf = p;
        tg_status st = tg_store_read(s, i, buf, n);
        if (st) {
            free(buf);
            return st;
        }
        h = tg__fnv1a(h, buf, (size_t)n * sizeof(float));
    }
    free(buf);
    *out = h;
    return TG_OK;
}

static bool has_slot(const tg_optim_config *c, int which) {
    if (c->kind != TG_OPTIM_SGD) return true;
    return which == 0 && c->momentum > 0.0f;
}

tg_status tg_trainer_save(tg_trainer *t, const char *dir) {
    if (!t || !dir) return tg_error_set(TG_ERR_INVALID, "tg_trainer_save: NULL argument");
    char mpath[4096], spath[4096], mfile[64];
    tg_status st = tg__train_model_file(t->step, mfile, sizeof mfile);
    if (st) return st;
    if (snprintf(mpath, sizeof mpath, "%s/%s", dir, mfile) >= (int)sizeof mpath ||
        snprintf(spath, sizeof spath, "%s/state.safetensors", dir) >= (int)sizeof spath)
        return tg_error_set(TG_ERR_INVALID, "tg_trainer_save: directory name too long");
    st = tg_model_save(t->m, mpath);
    if (st) return st;
    uint64_t mh;
    st = tg__train_model_hash(t->m, &mh);
    if (st) return st;
    tg_store *s = tg_model_store(t->m);
    tg_st_writer *w = tg_st_writer_new();
    if (!w) return tg_error_set(TG_ERR_NOMEM, "tg_trainer_save: out of memory");
    char *cfg = NULL, state[1024];
    double el = t->elapsed_before + (t->run_start > 0.0 ? tg__train_now() - t->run_start : 0.0);
    snprintf(state, sizeof state,
             "{\"step\":%lld,\"optim_steps\":%lld,\"epoch\":%lld,\"batch_index\":%lld,\"data_seed\":\"%016" PRIx64
             "\",\"rng_seed\":\"%016" PRIx64 "\",\"rng_counter\":\"%016" PRIx64 "\",\"tokens\":%lld,"
             "\"elapsed_s\":%.3f,\"corpus_hash\":\"%016" PRIx64 "\",\"corpus_pairs\":%lld,"
             "\"model_hash\":\"%016" PRIx64 "\",\"threads\":%d}",
             (long long)t->step, (long long)tg_optim_steps(t->opt), (long long)tg_batcher_epoch(t->bt),
             (long long)tg_batcher_index(t->bt), t->cfg.seed, t->drop_rng.seed, t->drop_rng.counter,
             (long long)t->tokens, el, tg_corpus_hash(t->train), (long long)tg_corpus_size(t->train), mh,
             tg_backend_threads(tg_model_backend(t->m)));
    st = tg_train_config_json(&t->cfg, &cfg);
    if (st == TG_OK) st = tg_st_writer_set_metadata(w, "format", STATE_FORMAT);
    if (st == TG_OK) st = tg_st_writer_set_metadata(w, "train_config", cfg);
    if (st == TG_OK) st = tg_st_writer_set_metadata(w, "state", state);
    if (st == TG_OK) st = tg_st_writer_set_metadata(w, "model_file", mfile);
    for (int i = 0; st == TG_OK && i < t->nmeta; i++) st = tg_st_writer_set_metadata(w, t->meta_key[i], t->meta_val[i]);
    float *buf = NULL;
    for (int64_t i = 0; st == TG_OK && i < tg_store_count(s); i++) {
        if (!tg_store_trainable(s, i)) continue;
        int64_t n = tg_store_numel(s, i), shape[TG_MAX_DIMS];
        int nd = tg_store_shape(s, i, shape);
        for (int which = 0; st == TG_OK && which < 2; which++) {
            if (!has_slot(&t->cfg.optim, which)) continue;
            float *p = realloc(buf, (size_t)n * sizeof *p);
            if (!p) {
                st = tg_error_set(TG_ERR_NOMEM, "tg_trainer_save: out of memory");
                break;
            }
            buf = p;
            char name[256];
            snprintf(name, sizeof name, "optim.%c.%s", which ? 'v' : 'm', tg_store_name(s, i));
            st = tg_optim_read_state(t->opt, i, which, buf, n);
            if (st == TG_OK) st = tg_st_writer_add(w, name, TG_ST_F32, nd, shape, buf);
        }
    }
    if (st == TG_OK) st = tg_st_writer_save(w, spath); /* the commit point (train/rundir.c) */
    if (st == TG_OK) st = tg__train_dir_publish(dir, mfile, "model.safetensors");
    if (st == TG_OK) st = tg__train_dir_drop_models(dir, mfile);
    free(buf);
    free(cfg);
    tg_st_writer_free(w);
    return st;
}

/* ---- loading ---- */

static tg_status get_i64(const tg_json *o, const char *key, int64_t *v, const char *path) {
    if (tg_json_int64(tg_json_get(o, key), v) != TG_OK)
        return tg_error_set(TG_ERR_FORMAT, "'%s': state lacks integer '%s'", path, key);
    return TG_OK;
}

static tg_status get_hex(const tg_json *o, const char *key, uint64_t *v, const char *path) {
    const char *s = tg_json_string(tg_json_get(o, key));
    char *end = NULL;
    if (s && *s) *v = strtoull(s, &end, 16);
    if (!s || !*s || !end || *end)
        return tg_error_set(TG_ERR_FORMAT, "'%s': state lacks hex string '%s'", path, key);
    return TG_OK;
}

/* Moments that the update could have made: finite, and second moments (which) not negative (a
 * running mean of squares). A NaN there would surface steps later as a diverged run. */
static tg_status check_moments(const float *x, int64_t n, int which, const char *name, const char *path) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || (which == 1 && x[i] < 0.0f))
            return tg_error_set(TG_ERR_NUMERIC, "'%s': optimizer state '%s' holds %g at index %lld (a diverged or "
                                "damaged training state)", path, name, (double)(isnan(x[i]) ? fabsf(x[i]) : x[i]),
                                (long long)i);
    return TG_OK;
}

tg_status tg_trainer_load_state(tg_trainer *t, const char *path) {
    if (!t || !path) return tg_error_set(TG_ERR_INVALID, "tg_trainer_load_state: NULL argument");
    tg_st_file *f = NULL;
    tg_status st = tg_st_open(path, &f);
    if (st) return st;
    tg_json *o = NULL;
    const char *fmt = tg_st_metadata(f, "format"), *text = tg_st_metadata(f, "state");
    if (!fmt || strcmp(fmt, STATE_FORMAT))
        st = tg_error_set(TG_ERR_FORMAT, "'%s' is not a training state (format '%s', expected '%s')", path,
                          fmt ? fmt : "(absent)", STATE_FORMAT);
    else if (!text)
        st = tg_error_set(TG_ERR_FORMAT, "'%s': no 'state' in __metadata__", path);
    else if ((st = tg_json_parse(text, strlen(text), &o)) != TG_OK)
        st = tg_error_prefix(st, "'%s': state", path);
    int64_t step = 0, osteps = 0, epoch = 0, index = 0, tokens = 0;
    uint64_t seed = 0, rs = 0, rc = 0, ch = 0, mh = 0, cur;
    if (st == TG_OK) st = get_i64(o, "step", &step, path);
    if (st == TG_OK) st = get_i64(o, "optim_steps", &osteps, path);
    if (st == TG_OK) st = get_i64(o, "epoch", &epoch, path);
    if (st == TG_OK) st = get_i64(o, "batch_index", &index, path);
    if (st == TG_OK) st = get_i64(o, "tokens", &tokens, path);
    if (st == TG_OK) st = get_hex(o, "data_seed", &seed, path);
    if (st == TG_OK) st = get_hex(o, "rng_seed", &rs, path);
    if (st == TG_OK) st = get_hex(o, "rng_counter", &rc, path);
    if (st == TG_OK) st = get_hex(o, "corpus_hash", &ch, path);
    if (st == TG_OK) st = get_hex(o, "model_hash", &mh, path);
    double el = tg_json_number(tg_json_get(o, "elapsed_s"));
    tg_json_free(o);
    if (st == TG_OK && ch != tg_corpus_hash(t->train))
        st = tg_error_set(TG_ERR_INVALID,
                          "'%s': the training data differ from those of the run being resumed "
                          "(other files, vocabulary or options)", path);
    if (st == TG_OK && (st = tg__train_model_hash(t->m, &cur)) == TG_OK && cur != mh)
        st = tg_error_set(TG_ERR_INVALID, "'%s' does not belong to the model checkpoint next to it", path);
    if (st == TG_OK && seed != t->cfg.seed)
        st = tg_error_set(TG_ERR_INVALID, "'%s': seed %llu differs from the configured %llu", path,
                          (unsigned long long)seed, (unsigned long long)t->cfg.seed);
    tg_store *s = tg_model_store(t->m);
    float *buf = NULL;
    for (int64_t i = 0; st == TG_OK && i < tg_store_count(s); i++) {
        if (!tg_store_trainable(s, i)) continue;
        int64_t n = tg_store_numel(s, i);
        for (int which = 0; st == TG_OK && which < 2; which++) {
            if (!has_slot(&t->cfg.optim, which)) continue;
            char name[256];
            size_t k;
            snprintf(name, sizeof name, "optim.%c.%s", which ? 'v' : 'm', tg_store_name(s, i));
            if (tg_st_find(f, name, &k) != TG_OK || (int64_t)tg_st_tensor_numel(f, k) != n) {
                st = tg_error_set(TG_ERR_FORMAT, "'%s': optimizer state '%s' missing or of the wrong size "
                                  "(another optimizer or model?)", path, name);
                break;
            }
            float *p = realloc(buf, (size_t)n * sizeof *p);
            if (!p) {
                st = tg_error_set(TG_ERR_NOMEM, "tg_trainer_load_state: out of memory");
                break;
            }
            buf = p;
            st = tg_st_read_f32(f, k, buf, (size_t)n);
            if (st == TG_OK) st = check_moments(buf, n, which, name, path);
            if (st == TG_OK) st = tg_optim_write_state(t->opt, i, which, buf, n);
        }
    }
    free(buf);
    if (st == TG_OK) st = tg_batcher_seek(t->bt, epoch, index);
    if (st == TG_OK) {
        tg_optim_set_steps(t->opt, osteps);
        t->step = step;
        t->tokens = tokens;
        t->drop_rng.seed = rs;
        t->drop_rng.counter = rc;
        t->elapsed_before = el > 0.0 ? el : 0.0;
    }
    tg_st_close(f);
    return st;
}
