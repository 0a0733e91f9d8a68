/* The decoder-only language model family (arch lm) outside the shared stack code: batches of
 * sequences. The model itself is the decoder stack of models/transformer.c without memory
 * (tg__model_decode with memory NULL: no cross-attention), its parameters come from models/init.c,
 * and generation is models/generate.c on the incremental decoder of models/decode.c. */
#include <stdlib.h>
#include <string.h>

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

tg_status tg_batch_build_lm_blocks(tg_batch *b, int64_t n, const int32_t *const *seq, const int64_t *len) {
    return tg__batch_build_lm_blocks_pad(b, n, seq, len, TG_PAD);
}

tg_status tg__batch_build_lm_blocks_pad(tg_batch *b, int64_t n, const int32_t *const *seq, const int64_t *len, int32_t pad) {
    if (!b || n < 1 || !seq || !len) return tg_error_set(TG_ERR_INVALID, "tg_batch_build_lm_blocks: bad arguments");
    memset(b, 0, sizeof *b);
    int64_t T = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!seq[i] || len[i] < 2)
            return tg_error_set(TG_ERR_INVALID, "tg_batch_build_lm_blocks: window %lld has %lld ids (2 at least)",
                                (long long)i, (long long)len[i]);
        if (len[i] - 1 > T) T = len[i] - 1;
    }
    b->size = n;
    b->src_len = 1;
    b->tgt_len = T;
    b->src = malloc((size_t)n * sizeof *b->src);
    b->tgt_in = calloc((size_t)(n * T), sizeof *b->tgt_in); /* <pad> = 0 after a short window */
    b->tgt_out = calloc((size_t)(n * T), sizeof *b->tgt_out);
    if (!b->src || !b->tgt_in || !b->tgt_out) {
        tg_batch_free(b);
        return tg_error_set(TG_ERR_NOMEM, "tg_batch_build_lm_blocks: out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        b->src[i] = TG_EOS;
        memcpy(b->tgt_in + i * T, seq[i], (size_t)(len[i] - 1) * sizeof *seq[i]);
        memcpy(b->tgt_out + i * T, seq[i] + 1, (size_t)(len[i] - 1) * sizeof *seq[i]);
        for (int64_t j = len[i] - 1; j < T; j++) b->tgt_out[i * T + j] = pad; /* no target past the window */
        b->tgt_tokens += len[i] - 1;
    }
    b->src_tokens = n;
    return TG_OK;
}
