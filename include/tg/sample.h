/* tgraph — choosing tokens from logits: argmax, top-k and seeded sampling (temperature, top-k,
 * top-p). These are host-side helpers over a float array (read the logits with
 * tg_tensor_read first), not graph ops: a choice is not differentiable, and decoding reads the
 * logits to the host at every step anyway. */
#ifndef TG_SAMPLE_H
#define TG_SAMPLE_H

#include "tg/export.h"

#include <stdint.h>

#include "tg/error.h"
#include "tg/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Index of the largest of x[0..n) (the first one on ties; NaN never wins); -1 when n < 1. */
TG_API int64_t tg_argmax(const float *x, int64_t n);
/* Indices of the k largest entries of x[0..n), largest first (ties: lower index first), into
 * idx[0..min(k, n)); returns min(k, n) (0 when k < 1 or n < 1). */
TG_API int64_t tg_top_k(const float *x, int64_t n, int64_t k, int64_t *idx);

typedef struct tg_sample_options {
    float temperature; /* p ∝ exp(logit / T); 0 = greedy (argmax, no draw) */
    int64_t top_k;     /* keep the k most likely tokens (0 = all) */
    float top_p;       /* then the smallest most-likely-first set with mass >= p (1 = all) */
} tg_sample_options;

/* temperature 1, top_k 0, top_p 1: plain sampling from softmax(logits). */
TG_API tg_sample_options tg_sample_options_default(void);

/* Draw one index from logits[0..n) under the options, consuming one uniform of rng (none when
 * greedy), into *out. Entries at -inf are never drawn; the filters keep at least the most
 * likely token. Errors: n < 1, a bad option (T < 0, top_k < 0, top_p outside (0, 1]), or no
 * finite logit. */
TG_API tg_status tg_sample(const float *logits, int64_t n, const tg_sample_options *opt, tg_rng *rng, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
