/* tgraph — counter-based random numbers (Philox-4x32-10, Salmon et al., SC 2011).
 *
 * Counter-based: the value for (key, counter) is a pure function, so any backend, any thread
 * and any order of evaluation produce the same numbers. Dropout uses key = graph seed and
 * counter = (element index, op stream id). */
#ifndef TG_RNG_H
#define TG_RNG_H

#include "tg/export.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Four 32-bit random words for counter ctr[4] and key key[2]. */
TG_API void tg_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Uniform float in [0, 1) from a 32-bit word (24 high bits). */
static inline float tg_u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* A small sequential generator for initialisation and data shuffling, built on Philox. */
typedef struct tg_rng {
    uint64_t seed;
    uint64_t counter;
} tg_rng;

/* Seed the generator; the next 32 random bits. */
TG_API void tg_rng_init(tg_rng *r, uint64_t seed);
TG_API uint32_t tg_rng_u32(tg_rng *r);
/* Uniform in [0, 1). */
TG_API double tg_rng_uniform(tg_rng *r);
/* Standard normal (Box–Muller). */
TG_API double tg_rng_normal(tg_rng *r);
/* Uniform integer in [0, n). */
TG_API uint64_t tg_rng_below(tg_rng *r, uint64_t n);

#ifdef __cplusplus
}
#endif
#endif
