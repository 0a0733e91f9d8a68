/* CPU kernels of the elementwise ops: fill, broadcasting binary ops, unary maths, masks and
 * dropout, one function per op, registered at the end. Loops are flat over contiguous memory
 * so the compiler vectorises them. */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/vmath.h"
#include "core/backend-helpers.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h> /* AVX2 dropout, compiled with a target attribute, used if the CPU has it */
#define TG_DROPOUT_AVX2 1
#else
#define TG_DROPOUT_AVX2 0
#endif

/* Offset in x of the first element of output row r (rows = all dims but the last). */
static inline int64_t row_offset(int64_t r, int nd, const int64_t *shape, const int64_t *st) {
    int64_t off = 0;
    for (int i = nd - 2; i >= 0; i--) {
        off += (r % shape[i]) * st[i];
        r /= shape[i];
    }
    return off;
}

#define BINARY_LOOP(EXPR)                                                                          \
    do {                                                                                           \
        if (na == n && nb == n) {                                                                  \
            TG_CPU_FOR(p, i, n, n > TG_PAR_MIN) {                                                  \
                float x = a[i], y = b[i];                                                          \
                o[i] = (EXPR);                                                                     \
            }                                                                                      \
        } else {                                                                                   \
            int64_t sa[TG_MAX_DIMS], sb[TG_MAX_DIMS];                                              \
            tg__geom_bcast_strides(t->src[0], t, sa);                                              \
            tg__geom_bcast_strides(t->src[1], t, sb);                                              \
            int nd = t->ndim;                                                                      \
            int64_t inner = nd ? t->shape[nd - 1] : 1, rows = n / (inner ? inner : 1);             \
            int64_t ia = nd ? sa[nd - 1] : 0, ib = nd ? sb[nd - 1] : 0;                            \
            TG_CPU_FOR(p, r, rows, n > TG_PAR_MIN) {                                               \
                const float *ar = a + row_offset(r, nd, t->shape, sa);                             \
                const float *br = b + row_offset(r, nd, t->shape, sb);                             \
                float *orow = o + r * inner;                                                       \
                if (ia && ib) {                                                                    \
                    for (int64_t j = 0; j < inner; j++) {                                          \
                        float x = ar[j], y = br[j];                                                \
                        orow[j] = (EXPR);                                                          \
                    }                                                                              \
                } else if (ia) {                                                                   \
                    float y = br[0];                                                               \
                    for (int64_t j = 0; j < inner; j++) {                                          \
                        float x = ar[j];                                                           \
                        orow[j] = (EXPR);                                                          \
                    }                                                                              \
                } else if (ib) {                                                                   \
                    float x = ar[0];                                                               \
                    for (int64_t j = 0; j < inner; j++) {                                          \
                        float y = br[j];                                                           \
                        orow[j] = (EXPR);                                                          \
                    }                                                                              \
                } else {                                                                           \
                    float x = ar[0], y = br[0];                                                    \
                    for (int64_t j = 0; j < inner; j++)                                            \
                        orow[j] = (EXPR);                                                          \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* exp, tanh, GELU and its derivative: the vector maths of vmath.c on this member's share */
#define VMATH(CALL)                                                                       \
    do {                                                                                  \
        int64_t lo, hi;                                                                   \
        tg_cpu_share(p, n, n > TG_PAR_MIN, &lo, &hi);                                     \
        if (hi > lo) CALL;                                                                \
    } while (0)

#define UNARY_LOOP(EXPR)                                                                  \
    TG_CPU_FOR(p, i, n, n > TG_PAR_MIN) {                                                 \
        float x = a[i];                                                                   \
        o[i] = (EXPR);                                                                    \
    }

/* same-shape op of two inputs (x = src0, y = src1) */
#define PAIR_LOOP(EXPR)                                                                   \
    TG_CPU_FOR(p, i, n, n > TG_PAR_MIN) {                                                 \
        float x = a[i], y = b[i];                                                         \
        o[i] = (EXPR);                                                                    \
    }

/* Dropout. The mask word of element e is word e%4 of Philox-4x32-10 at counter
 * (e/4 low, e/4 high, stream, 0) with key = the graph seed: the same numbers as tg_philox4x32
 * (core/rng.c) on every backend. Element e is kept when tg_u32_to_unit(word) >= p.
 * Philox costs ~5 ns per element as scalar code (7 with a call per group), so x86 CPUs with
 * AVX2 run 8 counters side by side in the lanes of AVX registers (~1.4 ns per element); both
 * paths do the same integer and float operations, so their results are identical. */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* the scalar path (tails, CPUs without AVX2) uses the one Philox of core/rng.c */
static inline void philox_group(int64_t gi, uint32_t stream, const uint32_t key[2],
                                uint32_t out[4]) {
    const uint32_t ctr[4] = {(uint32_t)gi, (uint32_t)((uint64_t)gi >> 32), stream, 0};
    tg_philox4x32(ctr, key, out);
}

/* Groups [g0, g1) of 4 elements (the last may be partial: elements >= n are skipped). */
static void dropout_scalar(const float *a, float *o, int64_t n, int64_t g0, int64_t g1,
                           uint32_t stream, const uint32_t key[2], float p, float ks) {
    for (int64_t gi = g0; gi < g1; gi++) {
        uint32_t r[4];
        philox_group(gi, stream, key, r);
        for (int k = 0; k < 4; k++) {
            int64_t e = gi * 4 + k;
            if (e < n) o[e] = tg_u32_to_unit(r[k]) >= p ? a[e] * ks : 0.0f;
        }
    }
}

#if TG_DROPOUT_AVX2
/* Whole groups [g0, g1), g1 - g0 a multiple of 8, every element < n. Lane l of c0..c3 holds
 * the counter of group gi + l; a round's 32x32 -> 64-bit products come from _mm256_mul_epu32
 * on the even lanes and on the odd lanes shifted down, their halves blended back in place.
 * The four words of the 8 groups are then transposed into element order (4 x 8 -> 8 x 4). */
__attribute__((target("avx2"))) static void dropout_avx2(const float *a, float *o, int64_t g0,
                                                         int64_t g1, uint32_t stream,
                                                         const uint32_t key[2], float p, float ks) {
    const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 vp = _mm256_set1_ps(p), vks = _mm256_set1_ps(ks);
    const __m256 unit = _mm256_set1_ps(1.0f / 16777216.0f);
    for (int64_t gi = g0; gi < g1; gi += 8) {
        __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)gi), lane);
        uint32_t hi[8]; /* high words of the counters: equal unless gi crosses 2^32 */
        for (int l = 0; l < 8; l++) hi[l] = (uint32_t)((uint64_t)(gi + l) >> 32);
        __m256i c1 = _mm256_loadu_si256((const __m256i *)hi);
        __m256i c2 = _mm256_set1_epi32((int)stream), c3 = _mm256_setzero_si256();
        uint32_t k0 = key[0], k1 = key[1];
        for (int r = 0; r < 10; r++) {
            __m256i pe0 = _mm256_mul_epu32(c0, m0);
            __m256i po0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
            __m256i pe1 = _mm256_mul_epu32(c2, m1);
            __m256i po1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
            __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pe0, 32), po0, 0xAA);
            __m256i lo0 = _mm256_blend_epi32(pe0, _mm256_slli_epi64(po0, 32), 0xAA);
            __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pe1, 32), po1, 0xAA);
            __m256i lo1 = _mm256_blend_epi32(pe1, _mm256_slli_epi64(po1, 32), 0xAA);
            c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
            c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
            c1 = lo1;
            c3 = lo0;
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        /* t: pairs of words; u0..u3: groups (0,4), (1,5), (2,6), (3,7); w: elements in order */
        __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
        __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
        __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
        __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
        __m256i w[4] = {_mm256_permute2x128_si256(u0, u1, 0x20),
                        _mm256_permute2x128_si256(u2, u3, 0x20),
                        _mm256_permute2x128_si256(u0, u1, 0x31),
                        _mm256_permute2x128_si256(u2, u3, 0x31)};
        int64_t e0 = gi * 4;
        for (int j = 0; j < 4; j++) {
            /* tg_u32_to_unit: (float)(r >> 8) / 2^24, exact */
            __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w[j], 8)), unit);
            __m256 keep = _mm256_cmp_ps(u, vp, _CMP_GE_OQ);
            __m256 x = _mm256_loadu_ps(a + e0 + 8 * j);
            _mm256_storeu_ps(o + e0 + 8 * j, _mm256_and_ps(_mm256_mul_ps(x, vks), keep));
        }
    }
}
#endif

static void dropout(tg_cpu_par *par, const tg_tensor *t, const float *a, float *o, int64_t n) {
    float p = t->p.dropout.p, keep_scale = 1.0f / (1.0f - p);
    uint32_t key[2] = {t->p.dropout.seed_lo, t->p.dropout.seed_hi};
    uint32_t stream = t->p.dropout.stream;
    int64_t groups = (n + 3) / 4, done = 0;
#if TG_DROPOUT_AVX2
    if (__builtin_cpu_supports("avx2")) {
        /* blocks of 64 whole groups (256 elements) in parallel; the rest below */
        enum { BLK = 64 };
        int64_t nblk = n / (4 * BLK);
        TG_CPU_FOR(par, bi, nblk, n > TG_PAR_MIN)
            dropout_avx2(a, o, bi * BLK, (bi + 1) * BLK, stream, key, p, keep_scale);
        done = nblk * BLK;
    }
#endif
    TG_CPU_FOR(par, k, groups - done, n - 4 * done > TG_PAR_MIN)
        dropout_scalar(a, o, n, done + k, done + k + 1, stream, key, p, keep_scale);
}

/* The operands every elementwise kernel starts from: n outputs o, inputs a and b (NULL when
 * absent) with na and nb elements. */
#define ELEMENTWISE_ARGS                                                  \
    int64_t n = tg_tensor_numel(t);                                       \
    float *o = F32(t);                                                    \
    const float *a = t->nsrc > 0 ? F32(t->src[0]) : NULL;                 \
    const float *b = t->nsrc > 1 ? F32(t->src[1]) : NULL;                 \
    int64_t na = t->nsrc > 0 ? tg_tensor_numel(t->src[0]) : 0;            \
    int64_t nb = t->nsrc > 1 ? tg_tensor_numel(t->src[1]) : 0;            \
    (void)a, (void)b, (void)na, (void)nb
/* A kernel whose body is one loop statement over the operands above. */
#define ELEMENTWISE_KERNEL(name, LOOP)                                    \
    static tg_status name(tg_cpu_par *p, tg_tensor *t) {                  \
        ELEMENTWISE_ARGS;                                                 \
        LOOP;                                                             \
        return TG_OK;                                                     \
    }

static tg_status fill(tg_cpu_par *p, tg_tensor *t) {
    ELEMENTWISE_ARGS;
    float v = t->p.fill.value;
    TG_CPU_FOR(p, i, n, n > TG_PAR_MIN) o[i] = v;
    return TG_OK;
}
ELEMENTWISE_KERNEL(add, BINARY_LOOP(x + y))
ELEMENTWISE_KERNEL(sub, BINARY_LOOP(x - y))
ELEMENTWISE_KERNEL(mul, BINARY_LOOP(x * y))
ELEMENTWISE_KERNEL(div_, BINARY_LOOP(x / y))
static tg_status scale(tg_cpu_par *p, tg_tensor *t) {
    ELEMENTWISE_ARGS;
    float s = t->p.scale.mul, c = t->p.scale.add;
    UNARY_LOOP(x * s + c);
    return TG_OK;
}
ELEMENTWISE_KERNEL(exp_, VMATH(tg_cpu_vexp(a + lo, o + lo, hi - lo)))
ELEMENTWISE_KERNEL(log_, UNARY_LOOP(logf(x)))
ELEMENTWISE_KERNEL(sqrt_, UNARY_LOOP(sqrtf(x)))
ELEMENTWISE_KERNEL(rsqrt, UNARY_LOOP(1.0f / sqrtf(x)))
ELEMENTWISE_KERNEL(tanh_, VMATH(tg_cpu_vtanh(a + lo, o + lo, hi - lo)))
ELEMENTWISE_KERNEL(relu, UNARY_LOOP(x > 0.0f ? x : 0.0f))
ELEMENTWISE_KERNEL(gelu, VMATH(tg_cpu_vgelu(a + lo, o + lo, hi - lo)))
ELEMENTWISE_KERNEL(relu_back, PAIR_LOOP(x > 0.0f ? y : 0.0f))
ELEMENTWISE_KERNEL(gelu_back, VMATH(tg_cpu_vgelu_back(a + lo, b + lo, o + lo, hi - lo)))
/* SiLU (the maths: core/ops/elementwise.c): plain loops that the compiler vectorises, the exp
 * being the branch-free tg_fast_expf (clamped, so 1 + exp(-x) stays finite) */
ELEMENTWISE_KERNEL(silu, UNARY_LOOP(x / (1.0f + tg_fast_expf(-x))))
ELEMENTWISE_KERNEL(silu_back, PAIR_LOOP(y * (1.0f / (1.0f + tg_fast_expf(-x))) *
                                        (1.0f + x * (1.0f - 1.0f / (1.0f + tg_fast_expf(-x))))))

static tg_status masked_fill(tg_cpu_par *p, tg_tensor *t) {
    ELEMENTWISE_ARGS;
    const tg_tensor *m = t->src[1];
    float v = t->p.masked_fill.value;
    int64_t sm[TG_MAX_DIMS];
    tg__geom_bcast_strides(m, t, sm);
    int nd = t->ndim;
    int64_t inner = nd ? t->shape[nd - 1] : 1, rows = inner ? n / inner : 0;
    int64_t im = nd ? sm[nd - 1] : 0;
    bool is_i32 = m->dtype == TG_DTYPE_I32;
    const void *mp = m->data;
    TG_CPU_FOR(p, r, rows, n > TG_PAR_MIN) {
        int64_t mo = row_offset(r, nd, t->shape, sm);
        const float *ar = a + r * inner;
        float *orow = o + r * inner;
        for (int64_t j = 0; j < inner; j++) {
            int64_t k = mo + j * im;
            bool on = is_i32 ? ((const int32_t *)mp)[k] != 0 : ((const float *)mp)[k] != 0.0f;
            orow[j] = on ? v : ar[j];
        }
    }
    return TG_OK;
}

static tg_status dropout_kernel(tg_cpu_par *p, tg_tensor *t) {
    ELEMENTWISE_ARGS;
    dropout(p, t, a, o, n);
    return TG_OK;
}

/* The family's kernels, registered by op (backends/cpu/cpu.c assembles the families). */
TG__CPU_KERNELS(elementwise) = {
    [TG_OP_FILL] = fill,
    [TG_OP_ADD] = add,
    [TG_OP_SUB] = sub,
    [TG_OP_MUL] = mul,
    [TG_OP_DIV] = div_,
    [TG_OP_SCALE] = scale,
    [TG_OP_EXP] = exp_,
    [TG_OP_LOG] = log_,
    [TG_OP_SQRT] = sqrt_,
    [TG_OP_RSQRT] = rsqrt,
    [TG_OP_TANH] = tanh_,
    [TG_OP_RELU] = relu,
    [TG_OP_GELU] = gelu,
    [TG_OP_RELU_BACK] = relu_back,
    [TG_OP_GELU_BACK] = gelu_back,
    [TG_OP_MASKED_FILL] = masked_fill,
    [TG_OP_DROPOUT] = dropout_kernel,
    [TG_OP_SILU] = silu,
    [TG_OP_SILU_BACK] = silu_back,
};
TG__CPU_KERNELS_CHECK(elementwise);
