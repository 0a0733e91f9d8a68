/* Batches with docs/model.md §4's token conventions: source ids = tokens + </s>; decoder input =
 * <s> + tokens; targets = tokens + </s>; right-padded with <pad>. */
#include <stdlib.h>
#include <string.h>

#include "models/model-impl.h"

void tg_batch_free(tg_batch *b) {
    if (!b) return;
    free(b->src);
    free(b->tgt_in);
    free(b->tgt_out);
    memset(b, 0, sizeof *b);
}

tg_status tg_batch_build(tg_batch *b, int64_t n, const int32_t *const *src, const int64_t *src_n,
                         const int32_t *const *tgt, const int64_t *tgt_n) {
    return tg__batch_build_eos(b, n, src, src_n, tgt, tgt_n, TG_EOS);
}

tg_status tg__batch_build_eos(tg_batch *b, int64_t n, const int32_t *const *src, const int64_t *src_n,
                              const int32_t *const *tgt, const int64_t *tgt_n, int32_t eos) {
    if (!b || n < 1 || !src || !src_n || (tgt && !tgt_n))
        return tg_error_set(TG_ERR_INVALID, "tg_batch_build: empty batch or NULL argument");
    memset(b, 0, sizeof *b);
    int64_t S = 0, T = 0;
    for (int64_t i = 0; i < n; i++) {
        if (src_n[i] < 0 || (tgt && tgt_n[i] < 0))
            return tg_error_set(TG_ERR_INVALID, "tg_batch_build: negative length in sentence %lld", (long long)i);
        if (src_n[i] + 1 > S) S = src_n[i] + 1;
        if (tgt && tgt_n[i] + 1 > T) T = tgt_n[i] + 1;
    }
    b->size = n;
    b->src_len = S;
    b->tgt_len = T;
    b->src = calloc((size_t)(n * S), sizeof *b->src);
    if (tgt) {
        b->tgt_in = calloc((size_t)(n * T), sizeof *b->tgt_in);
        b->tgt_out = calloc((size_t)(n * T), sizeof *b->tgt_out);
    }
    if (!b->src || (tgt && (!b->tgt_in || !b->tgt_out))) {
        tg_batch_free(b);
        return tg_error_set(TG_ERR_NOMEM, "tg_batch_build: out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t *s = b->src + i * S;
        memcpy(s, src[i], (size_t)src_n[i] * sizeof *s);
        s[src_n[i]] = eos;
        b->src_tokens += src_n[i] + 1;
        if (!tgt) continue;
        int32_t *ti = b->tgt_in + i * T, *to = b->tgt_out + i * T;
        ti[0] = TG_BOS;
        memcpy(ti + 1, tgt[i], (size_t)tgt_n[i] * sizeof *ti);
        memcpy(to, tgt[i], (size_t)tgt_n[i] * sizeof *to);
        to[tgt_n[i]] = TG_EOS;
        b->tgt_tokens += tgt_n[i] + 1;
    }
    return TG_OK;
}
