/* The decoder-only language model family (arch lm) outside the shared stack code: batches of
 * sequences. The model itself is the decoder stack of models/transformer.c without memory
 * (tg__model_decode with memory NULL: no cross-attention), its parameters come from models/init.c,
 * and generation is models/generate.c on the incremental decoder of models/decode.c. */
#include <stdlib.h>

#include "models/model-impl.h"

tg_status tg_batch_build_lm(tg_batch *b, int64_t n, const int32_t *const *seq, const int64_t *seq_n) {
    if (!b || n < 1 || !seq || !seq_n) return tg_error_set(TG_ERR_INVALID, "tg_batch_build_lm: bad arguments");
    /* every source is empty (</s> alone): the language model reads only the target side */
    const int32_t none = 0;
    const int32_t **src = malloc((size_t)n * sizeof *src);
    int64_t *src_n = calloc((size_t)n, sizeof *src_n);
    tg_status st = src && src_n ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_batch_build_lm: out of memory");
    for (int64_t i = 0; st == TG_OK && i < n; i++) src[i] = &none;
    if (st == TG_OK) st = tg_batch_build(b, n, src, src_n, seq, seq_n);
    free(src);
    free(src_n);
    return st;
}
