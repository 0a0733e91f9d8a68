/* Philox-4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
 * SC 2011). The same function is used by every backend, so dropout masks agree. */
#include <math.h>

#include "tg/rng.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void tg_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void tg_rng_init(tg_rng *r, uint64_t seed) {
    r->seed = seed;
    r->counter = 0;
}

uint32_t tg_rng_u32(tg_rng *r) {
    uint32_t ctr[4] = {(uint32_t)r->counter, (uint32_t)(r->counter >> 32), 0x5eed, 0};
    uint32_t key[2] = {(uint32_t)r->seed, (uint32_t)(r->seed >> 32)}, out[4];
    r->counter++;
    tg_philox4x32(ctr, key, out);
    return out[0];
}

double tg_rng_uniform(tg_rng *r) {
    uint64_t hi = tg_rng_u32(r) >> 5, lo = tg_rng_u32(r) >> 6; /* 53 random bits */
    return (double)(hi * 67108864u + lo) * (1.0 / 9007199254740992.0);
}

double tg_rng_normal(tg_rng *r) {
    double u1 = tg_rng_uniform(r), u2 = tg_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t tg_rng_below(tg_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    /* rejection sampling avoids modulo bias */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t x = ((uint64_t)tg_rng_u32(r) << 32) | tg_rng_u32(r);
        if (x < lim) return x % n;
    }
}
