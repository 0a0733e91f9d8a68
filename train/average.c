/* Checkpoint averaging (docs/model.md §1: "parameter mean of the last k checkpoints"; the paper
 * averages the last 5 checkpoints of the base model).
 *
 * θ_avg = (1/k) Σ_i θ_i element by element, summed in double and rounded once to float, over
 * checkpoints of one model: same configuration, vocabularies, tensor names and shapes. Works
 * on the safetensors files directly, so no model is built; the first file's metadata is copied
 * to the output, which is therefore a checkpoint of the same model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tg/safetensors.h"
#include "tg/train.h"

static bool same_meta(const tg_st_file *a, const tg_st_file *b, const char *key) {
    const char *x = tg_st_metadata(a, key), *y = tg_st_metadata(b, key);
    return (!x && !y) || (x && y && !strcmp(x, y));
}

tg_status tg_checkpoint_average(const char *const *paths, int64_t k, const char *out_path) {
    if (!paths || k < 1 || !out_path) return tg_error_set(TG_ERR_INVALID, "tg_checkpoint_average: no checkpoints");
    tg_st_file **f = calloc((size_t)k, sizeof *f);
    if (!f) return tg_error_set(TG_ERR_NOMEM, "tg_checkpoint_average: out of memory");
    tg_status st = TG_OK;
    for (int64_t i = 0; st == TG_OK && i < k; i++) st = tg_st_open(paths[i], &f[i]);
    const char *fmt = st == TG_OK ? tg_st_metadata(f[0], "format") : NULL;
    if (st == TG_OK && (!fmt || strcmp(fmt, "tgraph")))
        st = tg_error_set(TG_ERR_FORMAT, "'%s' is not a tgraph model checkpoint", paths[0]);
    static const char *keys[] = {"format", "config", "src_vocab", "tgt_vocab"};
    for (int64_t i = 1; st == TG_OK && i < k; i++) {
        for (int j = 0; st == TG_OK && j < 4; j++)
            if (!same_meta(f[0], f[i], keys[j]))
                st = tg_error_set(TG_ERR_INVALID, "'%s' and '%s' differ in '%s': not checkpoints of one model",
                                  paths[0], paths[i], keys[j]);
        if (st == TG_OK && tg_st_count(f[i]) != tg_st_count(f[0]))
            st = tg_error_set(TG_ERR_INVALID, "'%s' has %zu tensors, '%s' has %zu", paths[0], tg_st_count(f[0]),
                              paths[i], tg_st_count(f[i]));
    }
    tg_st_writer *w = st == TG_OK ? tg_st_writer_new() : NULL;
    if (st == TG_OK && !w) st = tg_error_set(TG_ERR_NOMEM, "tg_checkpoint_average: out of memory");
    for (size_t j = 0; st == TG_OK && j < tg_st_metadata_count(f[0]); j++)
        st = tg_st_writer_set_metadata(w, tg_st_metadata_key(f[0], j), tg_st_metadata_value(f[0], j));
    float *x = NULL, *acc_f = NULL;
    double *acc = NULL;
    for (size_t t = 0; st == TG_OK && t < tg_st_count(f[0]); t++) {
        const char *name = tg_st_name(f[0], t);
        int nd = tg_st_tensor_ndim(f[0], t);
        const int64_t *shape = tg_st_tensor_shape(f[0], t);
        size_t n = tg_st_tensor_numel(f[0], t);
        if (tg_st_tensor_dtype(f[0], t) != TG_ST_F32) {
            st = tg_error_set(TG_ERR_DTYPE, "'%s': tensor '%s' is not F32", paths[0], name);
            break;
        }
        float *nx = realloc(x, (n ? n : 1) * sizeof *x), *na = NULL;
        if (nx) x = nx;
        if (nx && (na = realloc(acc_f, (n ? n : 1) * sizeof *acc_f))) acc_f = na;
        double *nd_ = (nx && na) ? realloc(acc, (n ? n : 1) * sizeof *acc) : NULL;
        if (!nd_) {
            st = tg_error_set(TG_ERR_NOMEM, "tg_checkpoint_average: out of memory");
            break;
        }
        acc = nd_;
        memset(acc, 0, n * sizeof *acc);
        for (int64_t i = 0; st == TG_OK && i < k; i++) {
            size_t idx;
            if (tg_st_find(f[i], name, &idx) != TG_OK) {
                st = tg_error_set(TG_ERR_INVALID, "'%s' has no tensor '%s'", paths[i], name);
                break;
            }
            bool same = tg_st_tensor_ndim(f[i], idx) == nd && tg_st_tensor_dtype(f[i], idx) == TG_ST_F32;
            for (int d = 0; same && d < nd; d++) same = tg_st_tensor_shape(f[i], idx)[d] == shape[d];
            if (!same) {
                st = tg_error_set(TG_ERR_SHAPE, "'%s': tensor '%s' differs in shape or type from '%s'", paths[i],
                                  name, paths[0]);
                break;
            }
            st = tg_st_read_f32(f[i], idx, x, n);
            for (size_t e = 0; st == TG_OK && e < n; e++) {
                if (!isfinite(x[e]))
                    st = tg_error_set(TG_ERR_NUMERIC, "'%s': parameter '%s' holds %g at index %zu (a diverged or "
                                      "damaged checkpoint)", paths[i], name, (double)x[e], e);
                acc[e] += (double)x[e];
            }
        }
        for (size_t e = 0; st == TG_OK && e < n; e++) acc_f[e] = (float)(acc[e] / (double)k);
        if (st == TG_OK) st = tg_st_writer_add(w, name, TG_ST_F32, nd, shape, acc_f);
    }
    if (st == TG_OK) st = tg_st_writer_save(w, out_path);
    free(x);
    free(acc_f);
    free(acc);
    tg_st_writer_free(w);
    for (int64_t i = 0; i < k; i++) tg_st_close(f[i]);
    free(f);
    return st;
}
