/* CPU kernels of the elementwise ops. Every op flagged TG_OPF_TILE is one tile function here:
 * its maths over a run of elements [e0, e0 + n), operands given as contiguous arrays (a
 * broadcast operand gathered first). One kernel runs them all: it cuts the member's share of
 * the output into tiles of TG_CHAIN_TILE elements and, for a fused chain (core/fuse.c), runs every
 * member's tile function on the tile before moving on, so intermediates stay in L1 and a
 * member nothing else reads never reaches memory. An unfused op is a chain of one. Each
 * element goes through the same tile function either way: fusion does not change results. */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/vmath.h"
#include "core/backend-helpers.h"
#include "tg/rng.h"

#if TG_CPU_X86
#include <immintrin.h> /* dropout's Philox on AVX2 and AVX-512 (isa.h) */
#endif

/* The output rows (all dims but the last) of a broadcast operand, walked in order: idx is
 * row r's index over dims [0, nd - 1), off the offset in x of its first element. Dividing r
 * into idx once and stepping it from row to row costs a few compares per row; dividing every
 * row (three 64-bit divisions for attention's [B, h, n, n]) cost more than the masked fill
 * or bias add the values feed. */
typedef struct rows_walk {
    int nd;
    const int64_t *shape, *st;
    int64_t idx[TG_MAX_DIMS], off;
} rows_walk;

static void rows_walk_start(rows_walk *w, int64_t r, int nd, const int64_t *shape,
                            const int64_t *st) {
    w->nd = nd, w->shape = shape, w->st = st, w->off = 0;
    for (int i = nd - 2; i >= 0; i--) {
        w->idx[i] = r % shape[i];
        w->off += w->idx[i] * st[i];
        r /= shape[i];
    }
}

static inline void rows_walk_next(rows_walk *w) {
    for (int i = w->nd - 2; i >= 0; i--) {
        w->off += w->st[i];
        if (++w->idx[i] < w->shape[i]) return;
        w->off -= w->idx[i] * w->st[i];
        w->idx[i] = 0;
    }
}

/* ---- tile functions: o[i] = f(a[i], b[i]) for element e0 + i, i < n ---- */

typedef void (*tile_fn)(const tg_tensor *t, const float *a, const float *b, float *o, int64_t e0,
                        int64_t n);

#define TILE_FN(name, BODY)                                                                        \
    TG_CPU_BODY void name##_body(const tg_tensor *t, const float *a, const float *b, float *o,      \
                                 int64_t e0, int64_t n) {                                          \
        (void)t, (void)a, (void)b, (void)e0;                                                       \
        BODY;                                                                                      \
    }                                                                                              \
    TG_CPU_BY_LEVEL(, name, (const tg_tensor *t, const float *a, const float *b, float *o,         \
                             int64_t e0, int64_t n), (t, a, b, o, e0, n))
/* x = a[i] (and y = b[i]) */
#define EACH1(EXPR)                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                              \
        float x = a[i];                                                                            \
        o[i] = (EXPR);                                                                             \
    }
#define EACH2(EXPR)                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                              \
        float x = a[i], y = b[i];                                                                  \
        o[i] = (EXPR);                                                                             \
    }

TILE_FN(add_tile, EACH2(x + y))
TILE_FN(sub_tile, EACH2(x - y))
TILE_FN(mul_tile, EACH2((x * y)))
TILE_FN(div_tile, EACH2(x / y))
TILE_FN(scale_tile, float s = t->p.scale.mul; float c = t->p.scale.add; EACH1(x * s + c))
TILE_FN(exp_tile, tg_cpu_vexp(a, o, n))
TILE_FN(log_tile, EACH1(logf(x)))
TILE_FN(sqrt_tile, EACH1(sqrtf(x)))
TILE_FN(rsqrt_tile, EACH1(1.0f / sqrtf(x)))
TILE_FN(tanh_tile, tg_cpu_vtanh(a, o, n))
TILE_FN(relu_tile, EACH1(x > 0.0f ? x : 0.0f))
TILE_FN(gelu_tile, tg_cpu_vgelu(a, o, n))
/* the backward ops read (x, dy) */
TILE_FN(relu_back_tile, EACH2(x > 0.0f ? y : 0.0f))
TILE_FN(gelu_back_tile, tg_cpu_vgelu_back(a, b, o, n))
/* SiLU (the maths: core/ops/elementwise.c): plain loops that the compiler vectorises, the exp
 * being the branch-free tg_fast_expf (clamped, so 1 + exp(-x) stays finite) */
TILE_FN(silu_tile, EACH1(x / (1.0f + tg_fast_expf(-x))))
TILE_FN(silu_back_tile, EACH2(y *(1.0f / (1.0f + tg_fast_expf(-x))) *
                              (1.0f + x * (1.0f - 1.0f / (1.0f + tg_fast_expf(-x))))))
/* exact GELU (the maths: core/ops/elementwise.c) with libm's erff, accurate to an ulp:
 * imported BERT models are checked against PyTorch's to 1e-5 */
TILE_FN(gelu_erf_tile, EACH1(0.5f * x * (1.0f + erff(x * 0.70710678118654752f))))
TILE_FN(gelu_erf_back_tile, EACH2(y * (0.5f * (1.0f + erff(x * 0.70710678118654752f)) +
                                       x * 0.39894228040143268f * expf(-0.5f * x * x))))
/* b: the mask, gathered as 1.0 / 0.0 (an i32 mask converted) */
TILE_FN(masked_fill_tile, float v = t->p.masked_fill.value; EACH2(y != 0.0f ? v : x))

/* Dropout. The mask word of element e is word e%4 of Philox-4x32-10 at counter
 * (e/4 low, e/4 high, stream, 0) with key = the graph seed: the same numbers as tg_philox4x32
 * (core/rng.c) on every backend. Element e is kept when tg_u32_to_unit(word) >= p.
 * Philox costs ~5 ns per element as scalar code (7 with a call per group), so x86 CPUs with
 * AVX2 run 16 counters at once in the lanes of AVX registers (dropout_avx2), and CPUs with
 * AVX-512F 32 (dropout_avx512); every path computes the same words and makes the same keep test
 * (the vector paths as an integer compare: keep_threshold), so their results are identical. */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* Elements [e, e1) with a[k], o[k] at element e0 + k; the scalar path (tile ends, CPUs without
 * AVX2) uses the one Philox of core/rng.c. */
static void dropout_scalar(const float *a, float *o, int64_t e0, int64_t e, int64_t e1,
                           uint32_t stream, const uint32_t key[2], float p, float ks) {
    while (e < e1) {
        int64_t gi = e / 4;
        const uint32_t ctr[4] = {(uint32_t)gi, (uint32_t)((uint64_t)gi >> 32), stream, 0};
        uint32_t r[4];
        tg_philox4x32(ctr, key, r);
        for (; e < e1 && e / 4 == gi; e++)
            o[e - e0] = tg_u32_to_unit(r[e % 4]) >= p ? a[e - e0] * ks : 0.0f;
    }
}

#if TG_CPU_X86
/* tg_u32_to_unit(r) >= p as an integer test: u = (r >> 8) / 2^24 exactly, so u >= p holds
 * when r >> 8 >= p 2^24 (exact: a float times a power of two), i.e. r >> 8 >= ceil(p 2^24) = T,
 * i.e. r >= 256 T; p < 1 (tg_dropout) keeps 256 T below 2^32. One unsigned compare instead of a
 * shift, a conversion, a multiply and a float compare; the same decisions. */
static inline uint32_t keep_threshold(float p) {
    return (uint32_t)ceilf(p * 16777216.0f) << 8;
}

#define AVX2_FN TG_TARGET_AVX2 static inline

/* The Philox counters of 8 groups, lane l holding group g + l's words c[0..3]. */
AVX2_FN void philox8_start(__m256i c[4], int64_t g, uint32_t stream) {
    c[0] = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)g),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    /* high words of the counters: all equal unless the block crosses a multiple of 2^32 (a
     * vector loaded from eight scalar stores would stall on store forwarding every block) */
    if ((uint64_t)g >> 32 == (uint64_t)(g + 7) >> 32) {
        c[1] = _mm256_set1_epi32((int)(uint32_t)((uint64_t)g >> 32));
    } else {
        uint32_t hi[8];
        for (int l = 0; l < 8; l++)
            hi[l] = (uint32_t)((uint64_t)(g + l) >> 32);
        c[1] = _mm256_loadu_si256((const __m256i *)hi);
    }
    c[2] = _mm256_set1_epi32((int)stream);
    c[3] = _mm256_setzero_si256();
}

/* One Philox round on 8 counters: the 32x32 -> 64-bit products come from _mm256_mul_epu32 on
 * the even lanes and on the odd lanes shifted down, their halves blended back in place. */
AVX2_FN void philox8_round(__m256i c[4], uint32_t k0, uint32_t k1) {
    const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
    __m256i pe0 = _mm256_mul_epu32(c[0], m0);
    __m256i po0 = _mm256_mul_epu32(_mm256_srli_epi64(c[0], 32), m0);
    __m256i pe1 = _mm256_mul_epu32(c[2], m1);
    __m256i po1 = _mm256_mul_epu32(_mm256_srli_epi64(c[2], 32), m1);
    __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pe0, 32), po0, 0xAA);
    __m256i lo0 = _mm256_blend_epi32(pe0, _mm256_slli_epi64(po0, 32), 0xAA);
    __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pe1, 32), po1, 0xAA);
    __m256i lo1 = _mm256_blend_epi32(pe1, _mm256_slli_epi64(po1, 32), 0xAA);
    c[0] = _mm256_xor_si256(_mm256_xor_si256(hi1, c[1]), _mm256_set1_epi32((int)k0));
    c[2] = _mm256_xor_si256(_mm256_xor_si256(hi0, c[3]), _mm256_set1_epi32((int)k1));
    c[1] = lo1;
    c[3] = lo0;
}

/* The 32 elements of 8 groups from their Philox words: the four words transposed into element
 * order (4 x 8 -> 8 x 4; t: pairs of words, u0..u3: groups (0,4), (1,5), (2,6), (3,7)), then
 * kept (scaled) or zeroed. */
AVX2_FN void dropout8_apply(const __m256i c[4], const float *a, float *o, uint32_t thr, float ks) {
    __m256i t0 = _mm256_unpacklo_epi32(c[0], c[1]), t1 = _mm256_unpackhi_epi32(c[0], c[1]);
    __m256i t2 = _mm256_unpacklo_epi32(c[2], c[3]), t3 = _mm256_unpackhi_epi32(c[2], c[3]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i w[4] = {
        _mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u2, u3, 0x20),
        _mm256_permute2x128_si256(u0, u1, 0x31), _mm256_permute2x128_si256(u2, u3, 0x31)};
    const __m256i tv = _mm256_set1_epi32((int)thr);
    for (int j = 0; j < 4; j++) {
        /* r >= thr, unsigned: max(r, thr) == r */
        __m256 keep = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_max_epu32(w[j], tv), w[j]));
        __m256 x = _mm256_loadu_ps(a + 8 * j);
        _mm256_storeu_ps(o + 8 * j, _mm256_and_ps(_mm256_mul_ps(x, _mm256_set1_ps(ks)), keep));
    }
}

/* Whole groups [g0, g1), g1 - g0 a multiple of L, a[0] and o[0] at element 4 g0, an element kept
 * where its word is at least thr (keep_threshold, computed once per tile): L counters
 * side by side in the lanes of a vector register (VEC: __m256i, L 8 on AVX2; __m512i, L 16 on
 * AVX-512F), and two such blocks of L groups at once: the ten rounds of one block are a chain
 * of ~60 dependent operations that the CPU overlaps little with the next block's, and two
 * chains interleaved take about a quarter less time per element (four gain nothing more). */
#define DROPOUT_FN(NAME, ATTR, VEC, L, START, ROUND, APPLY)                                        \
    ATTR static void NAME(const float *a, float *o, int64_t g0, int64_t g1, uint32_t stream,       \
                          const uint32_t key[2], uint32_t thr, float ks) {                         \
        int64_t gi = g0;                                                                           \
        for (; gi + 2 * (L) <= g1; gi += 2 * (L)) {                                                \
            VEC c[2][4];                                                                           \
            START(c[0], gi, stream);                                                               \
            START(c[1], gi + (L), stream);                                                         \
            uint32_t k0 = key[0], k1 = key[1];                                                     \
            for (int r = 0; r < 10; r++, k0 += PHILOX_W0, k1 += PHILOX_W1) {                       \
                ROUND(c[0], k0, k1);                                                               \
                ROUND(c[1], k0, k1);                                                               \
            }                                                                                      \
            const int64_t e = (gi - g0) * 4;                                                       \
            APPLY(c[0], a + e, o + e, thr, ks);                                                    \
            APPLY(c[1], a + e + 4 * (L), o + e + 4 * (L), thr, ks);                                \
        }                                                                                          \
        if (gi < g1) { /* a last block of L groups alone */                                        \
            VEC c[4];                                                                              \
            START(c, gi, stream);                                                                  \
            uint32_t k0 = key[0], k1 = key[1];                                                     \
            for (int r = 0; r < 10; r++, k0 += PHILOX_W0, k1 += PHILOX_W1)                         \
                ROUND(c, k0, k1);                                                                  \
            const int64_t e = (gi - g0) * 4;                                                       \
            APPLY(c, a + e, o + e, thr, ks);                                                       \
        }                                                                                          \
    }
DROPOUT_FN(dropout_avx2, TG_TARGET_AVX2, __m256i, 8, philox8_start, philox8_round,
           dropout8_apply)
#undef AVX2_FN

/* With AVX-512F (isa.h) and BMI2 (PDEP, checked beside it) 16 counters per register: a product's
 * high and low words are put back in place by one two-source permute each, and the round's two XORs
 * are one ternary-logic instruction, so a round of 16 counters takes 12 instructions where AVX2
 * takes 36. */
#define AVX512_FN TG_TARGET_AVX512 static inline

AVX512_FN void philox16_start(__m512i c[4], int64_t g, uint32_t stream) {
    c[0] =
        _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)g),
                         _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    if ((uint64_t)g >> 32 == (uint64_t)(g + 15) >> 32) { /* as philox8_start */
        c[1] = _mm512_set1_epi32((int)(uint32_t)((uint64_t)g >> 32));
    } else {
        uint32_t hi[16];
        for (int l = 0; l < 16; l++)
            hi[l] = (uint32_t)((uint64_t)(g + l) >> 32);
        c[1] = _mm512_loadu_si512(hi);
    }
    c[2] = _mm512_set1_epi32((int)stream);
    c[3] = _mm512_setzero_si512();
}

/* pe: the 64-bit products of the even lanes, po: of the odd lanes (each at the even lane
 * below it); lane 2i of the result is dword 2i + odd of pe, lane 2i + 1 dword 2i + odd of po
 * (index 16 + j: po's dword j). */
#define PHILOX_PICK(odd)                                                                           \
    _mm512_setr_epi32(odd, 16 + odd, 2 + odd, 18 + odd, 4 + odd, 20 + odd, 6 + odd, 22 + odd,      \
                      8 + odd, 24 + odd, 10 + odd, 26 + odd, 12 + odd, 28 + odd, 14 + odd,         \
                      30 + odd)

AVX512_FN void philox16_round(__m512i c[4], uint32_t k0, uint32_t k1) {
    const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
    const __m512i lo = PHILOX_PICK(0), hi = PHILOX_PICK(1);
    __m512i pe0 = _mm512_mul_epu32(c[0], m0);
    __m512i po0 = _mm512_mul_epu32(_mm512_srli_epi64(c[0], 32), m0);
    __m512i pe1 = _mm512_mul_epu32(c[2], m1);
    __m512i po1 = _mm512_mul_epu32(_mm512_srli_epi64(c[2], 32), m1);
    /* 0x96: a ^ b ^ c */
    c[0] = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi32(pe1, hi, po1), c[1],
                                     _mm512_set1_epi32((int)k0), 0x96);
    c[2] = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi32(pe0, hi, po0), c[3],
                                     _mm512_set1_epi32((int)k1), 0x96);
    c[1] = _mm512_permutex2var_epi32(pe1, lo, po1);
    c[3] = _mm512_permutex2var_epi32(pe0, lo, po0);
}

/* The 64 elements of 16 groups: element 4g + w (group g, word w) is kept when word w of group g
 * passes the keep test. The test runs on the words as they lie (lane g of c[w]), giving four
 * 16-bit masks, and PDEP spreads mask w's bit g to bit 4g + w of one 64-bit mask, whose 16-bit
 * quarters then select the kept elements of the four vectors of 16: the words never need
 * transposing into element order (16 shuffles, on the port the rounds' permutes already load;
 * ~1.1x the rate of transposing them). A zeroed lane is +0, as in dropout8_apply. */
AVX512_FN void dropout16_apply(const __m512i c[4], const float *a, float *o, uint32_t thr,
                               float ks) {
    const __m512i tv = _mm512_set1_epi32((int)thr);
    uint64_t keep = 0;
    for (int w = 0; w < 4; w++)
        keep |= _pdep_u64(_cvtmask16_u32(_mm512_cmp_epu32_mask(c[w], tv, _MM_CMPINT_NLT)),
                          0x1111111111111111ull << w);
    for (int j = 0; j < 4; j++)
        _mm512_storeu_ps(o + 16 * j,
                         _mm512_maskz_mul_ps(_cvtu32_mask16((uint32_t)(keep >> (16 * j))),
                                             _mm512_loadu_ps(a + 16 * j), _mm512_set1_ps(ks)));
}

DROPOUT_FN(dropout_avx512, TG_TARGET_AVX512, __m512i, 16, philox16_start,
           philox16_round, dropout16_apply)
#undef AVX512_FN
#undef DROPOUT_FN
#endif

/* Dropout over elements [e0, e0 + n): whole blocks of 8 groups at the vector levels (of 16
 * first at AVX-512), the ends and the portable level scalar. */
static void dropout_tile(const tg_tensor *t, const float *a, const float *b, float *o, int64_t e0,
                         int64_t n) {
    (void)b;
    float p = t->p.dropout.p, keep_scale = 1.0f / (1.0f - p);
    uint32_t key[2] = {t->p.dropout.seed_lo, t->p.dropout.seed_hi};
    uint32_t stream = t->p.dropout.stream;
    int64_t e = e0, e1 = e0 + n;
#if TG_CPU_X86
    int64_t ea = (e0 + 31) / 32 * 32, eb = e1 / 32 * 32;
    const tg_cpu_isa_level level = tg_cpu_isa();
    if (eb > ea && level >= TG_CPU_ISA_AVX2) {
        dropout_scalar(a, o, e0, e0, ea, stream, key, p, keep_scale);
        const uint32_t thr = keep_threshold(p); /* once for the tile's vector blocks */
        int64_t em = ea; /* [ea, em): blocks of 16 groups on AVX-512 */
        if (level >= TG_CPU_ISA_AVX512) { /* AVX-512F and BMI2's PDEP */
            em = ea + (eb - ea) / 64 * 64;
            dropout_avx512(a + (ea - e0), o + (ea - e0), ea / 4, em / 4, stream, key, thr,
                           keep_scale);
        }
        dropout_avx2(a + (em - e0), o + (em - e0), em / 4, eb / 4, stream, key, thr, keep_scale);
        e = eb;
    }
#endif
    dropout_scalar(a, o, e0, e, e1, stream, key, p, keep_scale);
}

static const tile_fn tiles[TG_OP_COUNT] = {
    [TG_OP_ADD] = add_tile,
    [TG_OP_SUB] = sub_tile,
    [TG_OP_MUL] = mul_tile,
    [TG_OP_DIV] = div_tile,
    [TG_OP_SCALE] = scale_tile,
    [TG_OP_EXP] = exp_tile,
    [TG_OP_LOG] = log_tile,
    [TG_OP_SQRT] = sqrt_tile,
    [TG_OP_RSQRT] = rsqrt_tile,
    [TG_OP_TANH] = tanh_tile,
    [TG_OP_RELU] = relu_tile,
    [TG_OP_GELU] = gelu_tile,
    [TG_OP_RELU_BACK] = relu_back_tile,
    [TG_OP_GELU_BACK] = gelu_back_tile,
    [TG_OP_MASKED_FILL] = masked_fill_tile,
    [TG_OP_DROPOUT] = dropout_tile,
    [TG_OP_SILU] = silu_tile,
    [TG_OP_SILU_BACK] = silu_back_tile,
    [TG_OP_GELU_ERF] = gelu_erf_tile,
    [TG_OP_GELU_ERF_BACK] = gelu_erf_back_tile,
};

/* ---- the kernel ---- */

/* t's dims merged where s's broadcast strides st let one run cover both (st[i] = st[i+1]·
 * shape[i+1]: s contiguous across them, or broadcast along both): a causal mask [n, n] under
 * attention's [B, h, n, n] scores becomes rows of n·n values, and a padding mask [B, 1, 1, n]
 * becomes [B, h·n, n] with the middle dim broadcast. Returns the number of merged dims. */
static int merge_dims(const tg_tensor *t, const int64_t *st, int64_t *shape, int64_t *mst) {
    int m = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (m > 0 && mst[m - 1] == st[i] * t->shape[i]) {
            shape[m - 1] *= t->shape[i];
            mst[m - 1] = st[i];
        } else {
            shape[m] = t->shape[i];
            mst[m++] = st[i];
        }
    }
    return m;
}

/* dst[have .. total) filled with copies of dst[0 .. have), doubling the copied span each time */
static void repeat_fill(float *dst, int64_t have, int64_t total) {
    while (have < total) {
        const int64_t c = have < total - have ? have : total - have;
        memcpy(dst + have, dst, (size_t)c * sizeof *dst);
        have += c;
    }
}

/* One row's values: len of them from s at off, is apart (an i32 mask as 1.0 / 0.0) */
static void gather_row(const tg_tensor *s, int64_t off, int64_t is, int64_t len, float *dst) {
    if (s->dtype == TG_DTYPE_I32) {
        const int32_t *src = I32(s) + off;
        if (is == 1)
            for (int64_t j = 0; j < len; j++)
                dst[j] = src[j] != 0 ? 1.0f : 0.0f;
        else
            for (int64_t j = 0; j < len; j++)
                dst[j] = src[j * is] != 0 ? 1.0f : 0.0f;
    } else if (is == 1) {
        memcpy(dst, F32(s) + off, (size_t)len * sizeof *dst);
    } else {
        const float *src = F32(s) + off;
        for (int64_t j = 0; j < len; j++)
            dst[j] = src[j * is];
    }
}

/* Operand s of node t over t's elements [e0, e0 + n): a pointer into s when s has t's size
 * (f32), else its values gathered into buf through broadcast strides, a run per row of t's
 * merged dims (merge_dims), rows that repeat (the dim above the rows broadcast: a padding mask
 * over the heads and query positions) copied from the first by doubling: gathered row by row,
 * attention's masks over rows of 10 keys cost ~4 cycles a value, more than the chain they feed.
 * Where s gives every merged row the same values (a bias; a causal mask,
 * rows of n·n), they depend only on the first column and n, and *key records them: a tile that
 * meets the same key (most tiles of a bias add: 1024-element tiles of 256- or 1024-wide rows)
 * takes buf as it is. */
static const float *operand(const tg_tensor *s, const tg_tensor *t, int64_t e0, int64_t n,
                            float *buf, tg_gathered_key *key) {
    if (s->dtype == TG_DTYPE_F32 && tg_tensor_numel(s) == tg_tensor_numel(t)) return F32(s) + e0;
    if (t->ndim == 0) {
        gather_row(s, 0, 0, n, buf);
        return buf;
    }
    int64_t st[TG_MAX_DIMS], shape[TG_MAX_DIMS], mst[TG_MAX_DIMS];
    tg__geom_bcast_strides(s, t, st);
    const int m = merge_dims(t, st, shape, mst);
    const int64_t w = shape[m - 1], is = mst[m - 1];
    if (w > 0 && key->src == s && key->t == t && key->col == e0 % w && key->len == n) return buf;
    /* the same row under every row (the merged dims above it broadcast): periodic in w */
    const bool same_rows = m == 1 || (m == 2 && mst[0] == 0);
    *key = same_rows && w > 0 ? (tg_gathered_key){s, t, e0 % w, n} : (tg_gathered_key){0};
    rows_walk rw;
    rows_walk_start(&rw, e0 / w, m, shape, mst);
    for (int64_t k = 0, c = e0 % w; k < n; c = 0) {
        const int64_t len = w - c < n - k ? w - c : n - k;
        gather_row(s, rw.off + c * is, is, len, buf + k);
        /* a whole row whose next rows are the same (the dim above broadcast): copies */
        int64_t rows = 1;
        if (c == 0 && len == w && m >= 2 && mst[m - 2] == 0) {
            rows = shape[m - 2] - rw.idx[m - 2];
            repeat_fill(buf + k, w, rows * w < n - k ? rows * w : n - k);
            rw.idx[m - 2] += rows - 1; /* the broadcast dim's offset does not move */
        }
        k += rows * w - c < n - k ? rows * w - c : n - k;
        rows_walk_next(&rw);
    }
    return buf;
}

tg_status tg__cpu_chain_start(tg_chain_tiles *c, tg_tensor *t, bool with_t) {
    if (!with_t) t = t->chain_prev;
    int k = 0;
    for (tg_tensor *x = t; x && k < TG_CHAIN_MAX; x = x->chain_prev)
        k++;
    c->k = k;
    c->gathered_key[0] = c->gathered_key[1] = (tg_gathered_key){0};
    for (tg_tensor *x = t; x && k > 0; x = x->chain_prev) { /* head first */
        if (!tiles[x->op] || x->nsrc > 2)
            return tg_error_set(TG_ERR_UNSUPPORTED, "cpu: op %s has no tile function",
                                tg_op_name(x->op));
        c->m[--k] = x;
    }
    return TG_OK;
}

const float *tg__cpu_chain_input(tg_chain_tiles *c, const tg_tensor *x, int s, int64_t e0,
                                 int64_t len) {
    const tg_tensor *src = x->src[s];
    /* members are read directly or through a reshape (core/fuse.c) */
    const tg_tensor *root = src && src->base ? src->base : src;
    for (int i = c->k - 1; i >= 0; i--)
        if (c->m[i] == root) return c->val[i];
    return src ? operand(src, x, e0, len, c->gathered[s], &c->gathered_key[s]) : NULL;
}

void tg__cpu_chain_run(tg_chain_tiles *c, int64_t e0, int64_t len) {
    for (int j = 0; j < c->k; j++) {
        const tg_tensor *x = c->m[j];
        const float *a = x->nsrc > 0 ? tg__cpu_chain_input(c, x, 0, e0, len) : NULL;
        const float *b = x->nsrc > 1 ? tg__cpu_chain_input(c, x, 1, e0, len) : NULL;
        float *o = (x->flags & TG_TF_TRANSIENT) ? c->tmp[j] : F32(x) + e0;
        tiles[x->op](x, a, b, o, e0, len);
        c->val[j] = o;
    }
}

/* Member p's share of node t and of the chain t ends (t->chain_prev, ...), tile by tile. */
static tg_status tile_kernel(tg_cpu_par *p, tg_tensor *t) {
    tg_chain_tiles c;
    tg_status st = tg__cpu_chain_start(&c, t, true);
    if (st) return st;
    int64_t n = tg_tensor_numel(t), lo, hi;
    tg_cpu_share(p, n, n > TG_PAR_MIN, &lo, &hi);
    for (int64_t e0 = lo; e0 < hi; e0 += TG_CHAIN_TILE)
        tg__cpu_chain_run(&c, e0, hi - e0 < TG_CHAIN_TILE ? hi - e0 : TG_CHAIN_TILE);
    return TG_OK;
}

TG_CPU_BODY tg_status fill_body(tg_cpu_par *p, tg_tensor *t) {
    int64_t n = tg_tensor_numel(t);
    float *o = F32(t), v = t->p.fill.value;
    TG_CPU_FOR(p, i, n, n > TG_PAR_MIN) o[i] = v;
    return TG_OK;
}
TG_CPU_BY_LEVEL_RET(, tg_status, fill, (tg_cpu_par *p, tg_tensor *t), (p, t))

/* The family's kernels, registered by op (backends/cpu/cpu.c assembles the families). */
TG__CPU_KERNELS(elementwise) = {
    [TG_OP_FILL] = fill,
    [TG_OP_ADD] = tile_kernel,
    [TG_OP_SUB] = tile_kernel,
    [TG_OP_MUL] = tile_kernel,
    [TG_OP_DIV] = tile_kernel,
    [TG_OP_SCALE] = tile_kernel,
    [TG_OP_EXP] = tile_kernel,
    [TG_OP_LOG] = tile_kernel,
    [TG_OP_SQRT] = tile_kernel,
    [TG_OP_RSQRT] = tile_kernel,
    [TG_OP_TANH] = tile_kernel,
    [TG_OP_RELU] = tile_kernel,
    [TG_OP_GELU] = tile_kernel,
    [TG_OP_RELU_BACK] = tile_kernel,
    [TG_OP_GELU_BACK] = tile_kernel,
    [TG_OP_MASKED_FILL] = tile_kernel,
    [TG_OP_DROPOUT] = tile_kernel,
    [TG_OP_SILU] = tile_kernel,
    [TG_OP_SILU_BACK] = tile_kernel,
    [TG_OP_GELU_ERF] = tile_kernel,
    [TG_OP_GELU_ERF_BACK] = tile_kernel,
};
TG__CPU_KERNELS_CHECK(elementwise);
