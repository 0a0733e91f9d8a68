/* The small-matrix path of the CPU GEMM: our own register-blocked kernel for the many small
 * products of attention (batch = B·h up to thousands, M, N = sequence lengths 8..64,
 * K = head width 16..64), where a loop of cblas_sgemm calls spends most of its time in
 * per-call overhead and OpenBLAS does not split such calls across threads.
 *
 * Blocking (the GotoBLAS/BLIS scheme reduced to what small products need):
 *   C is cut into MR×NR = 6×16 tiles. A tile's 6×16 sums live in 12 AVX registers
 *   (6 rows × 2 vectors of 8) for the whole k loop; each k step broadcasts 6 elements of op(A),
 *   loads 16 of op(B) and issues 12 FMAs — 12 independent accumulators cover the FMA latency
 *   of two FMA pipes, and 8 loads per 12 FMAs stay within two load ports.
 *   Edge tiles use the same code with mr < 6 rows (the unused accumulators are compiled out)
 *   and an 8-wide panel when at most 8 columns remain. Where the CPU has AVX-512F a tile is
 *   6 rows × up to 64 columns (4 zmm a row, 24 accumulators; below), a quarter of the tiles
 *   for attention's 64-wide heads, with the same bits. Panels of one vector (8 columns; 16 and
 *   32 with AVX-512F) go in tiles of up to 12 rows, same bits again. Both instruction sets' tiles
 *   are one template, gemm_tiles.h.
 *
 * Operands:
 *   op(A) is never copied: the kernel reads element (i,p) at a[i*rs + p*cs], i.e. rs = lda,
 *   cs = 1 when !trans_a (6 row streams) and rs = 1, cs = lda when trans_a (6 consecutive
 *   floats per k — already the layout a packed panel would have).
 *   op(B) is read in place when !trans_b and the panel is full (row p of the panel is 8 or 16
 *   consecutive floats of B). Otherwise — trans_b (Q·Kᵀ) or the last, narrower panel — a
 *   KC×16 block of op(B) is packed into a contiguous, zero-padded buffer on the stack
 *   (transposed with 8×8 AVX shuffles when trans_b), so the kernel never reads past the end
 *   of B and needs no masked loads in its loop. Packing takes at most KC = 256 values of k at
 *   a time; a product with a longer packed K is accumulated into C chunk by chunk (beta only
 *   on the first chunk). Q·Kᵀ over fewer than 16 keys, or of one or two query rows, is the
 *   exception: no panel, each score a dot product of a query row and a key row read in place
 *   (dot_block, below).
 *
 * Parallelism: tasks are (product b, block of rows or columns of C), handed out dynamically to
 * the members of the thread team (so a core that the shared machine takes away for a while does
 * not stall the others). Each element of
 * C is summed over k by one thread in a fixed order whatever the partition and whichever
 * thread runs it, so results do not depend on the thread count or the schedule (they do
 * depend on AVX2 vs the portable kernel).
 */
#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/isa.h"

#include <string.h>

#if TG_CPU_X86
#include <immintrin.h>
#endif

enum {
    MR = 6,     /* rows of a register tile */
    NR = 16,    /* columns of a register tile (two AVX vectors) */
    KC = 256,   /* values of k packed at a time: KC×NR floats = 16 KiB, half of a 32-KiB L1d */
    NR512 = 64, /* the AVX-512 kernel's widest panel (4 zmm vectors) */
};

/* Below this many flops in the whole batched call member 0 does it alone: handing out tasks
 * and waiting for the others costs a few microseconds, the time of ~2^17 flops. */
#define TG_GEMM_SMALL_SERIAL_FLOPS (1 << 17)

/* One ISA's kernel and packers, called through pointers by the generic driver.
 * kern: for the m rows of C at c (tiles of MR rows, the last one shorter) and the nc columns
 * of one panel of op(B) that is w = 8 or 16 floats wide (columns nc..w-1 are padding):
 *     C[i][j] = alpha * sum_p a[i*rs + p*cs] * b[p*ldbp + j] + beta * C[i][j]
 * with beta 0 not reading C. ab = {alpha, beta}, passed in memory so that the two floats are
 * not held in vector registers through the k loop (12 accumulators + 2 vectors of B + 1
 * broadcast already take 15 of the 16; with alpha and beta there too, GCC spilled one
 * accumulator and the kernel ran at half speed).
 * pack_b:  buf[p*w + j] = src[p*ld + j]  for p < kc, j < nc; zero for nc <= j < w.
 * pack_bt: buf[p*w + j] = src[j*ld + p]  (the same for a transposed B). */
typedef struct small_isa {
    int nr; /* the widest panel the kernel takes: NR (AVX2, portable) or NR512 (AVX-512F) */
    void (*kern)(int64_t m, int w, int nc, int64_t kc, const float *a, int64_t rs, int64_t cs,
                 const float *b, int64_t ldbp, float *c, int64_t ldc, const float *ab);
    void (*pack_b)(const float *src, int64_t ld, int64_t kc, int nc, int w, float *buf);
    void (*pack_bt)(const float *src, int64_t ld, int64_t kc, int nc, int w, float *buf);
} small_isa;

/* ---------------------------------------------------------------- portable kernel ---- */

static void kern_portable(int64_t m, int w, int nc, int64_t kc, const float *a, int64_t rs,
                          int64_t cs, const float *b, int64_t ldbp, float *c, int64_t ldc,
                          const float *ab) {
    const float alpha = ab[0], beta = ab[1];
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
        const int mr = m - i0 < MR ? (int)(m - i0) : MR;
        const float *at = a + i0 * rs;
        float acc[MR][NR];
        for (int i = 0; i < mr; i++)
            for (int j = 0; j < w; j++)
                acc[i][j] = 0.0f;
        for (int64_t p = 0; p < kc; p++) {
            const float *bp = b + p * ldbp;
            for (int i = 0; i < mr; i++) {
                const float ai = at[i * rs + p * cs];
                for (int j = 0; j < w; j++)
                    acc[i][j] += ai * bp[j];
            }
        }
        for (int i = 0; i < mr; i++) {
            float *cr = c + (i0 + i) * ldc;
            for (int j = 0; j < nc; j++) {
                const float t = alpha * acc[i][j];
                cr[j] = beta == 0.0f ? t : beta * cr[j] + t;
            }
        }
    }
}

static void pack_b_portable(const float *src, int64_t ld, int64_t kc, int nc, int w, float *buf) {
    for (int64_t p = 0; p < kc; p++)
        for (int j = 0; j < w; j++)
            buf[p * w + j] = j < nc ? src[p * ld + j] : 0.0f;
}

static void pack_bt_portable(const float *src, int64_t ld, int64_t kc, int nc, int w, float *buf) {
    for (int64_t p = 0; p < kc; p++)
        for (int j = 0; j < w; j++)
            buf[p * w + j] = j < nc ? src[j * ld + p] : 0.0f;
}

static const small_isa isa_portable = {NR, kern_portable, pack_b_portable, pack_bt_portable};

/* ------------------------------------------------------------------ AVX2+FMA kernel ---- */
#if TG_CPU_X86
#define TG_AVX2 TG_TARGET_AVX2

/* Write one row of a tile: cr[0:nc] = alpha*x + beta*cr, x = (x0, x1). */
static inline __attribute__((always_inline)) TG_AVX2 void
store_row_avx2(float *cr, __m256 x0, __m256 x1, int nv, int nc, float alpha, float beta) {
    const __m256 va = _mm256_set1_ps(alpha);
    x0 = _mm256_mul_ps(va, x0);
    x1 = _mm256_mul_ps(va, x1);
    if (nc == 8 * nv) {
        if (beta == 0.0f) {
            _mm256_storeu_ps(cr, x0);
            if (nv > 1) _mm256_storeu_ps(cr + 8, x1);
        } else {
            const __m256 vb = _mm256_set1_ps(beta);
            _mm256_storeu_ps(cr, _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr), x0));
            if (nv > 1) _mm256_storeu_ps(cr + 8, _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr + 8), x1));
        }
        return;
    }
    /* Partial row: a whole vector if there is one, then the rest one float at a time (the same
     * FMA rounding as the vector path). */
    float t[16];
    _mm256_storeu_ps(t, x0);
    _mm256_storeu_ps(t + 8, x1);
    int j = 0;
    if (nc >= 8) {
        _mm256_storeu_ps(
            cr, beta == 0.0f ? x0 : _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_loadu_ps(cr), x0));
        j = 8;
    }
    if (beta == 0.0f)
        for (; j < nc; j++)
            cr[j] = t[j];
    else
        for (; j < nc; j++)
            cr[j] =
                _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(beta), _mm_set_ss(cr[j]), _mm_set_ss(t[j])));
}

/* The AVX2 tile (gemm_tiles.h): 6 rows of 1 or 2 vectors, or up to 12 rows of one vector for a
 * panel 8 floats wide — 6 rows of one vector are 6 chains of dependent FMAs, which wait on the
 * FMAs' latency; 12 keep the two FMA units busy (12 accumulators, one vector of B, one
 * broadcast: 14 of the 16 AVX registers). */
#define SFX avx2
#define FN TG_AVX2
#define V __m256
#define W 8
#define VZERO _mm256_setzero_ps
#define VLOADU _mm256_loadu_ps
#define VBCAST _mm256_broadcast_ss
#define VFMA _mm256_fmadd_ps
#define STORE_ROW(cr, x0, x1, x2, x3) store_row_avx2(cr, x0, nv > 1 ? x1 : x0, nv, nc, alpha, beta)
#include "backends/cpu/gemm_tiles.h"

/* One function per tile shape (mr rows, nv vectors) of an ISA's tile, so that each is
 * register-allocated on its own: inlined all into one function, GCC kept the 512-bit kernel's
 * accumulators on the stack. */
#define TG_TILE_FN(isa, attr, mr, nv)                                                              \
    __attribute__((noinline)) attr static void isa##_##mr##_##nv(                                  \
        int nc, int64_t kc, const float *a, int64_t rs, int64_t cs, const float *b, int64_t ldbp,  \
        float *c, int64_t ldc, const float *ab) {                                                  \
        isa(mr, nv, nc, kc, a, rs, cs, b, ldbp, c, ldc, ab);                                       \
    }
/* clang-format off */
#define TG_TILE_FNS(isa, attr, nv)                                                                 \
    TG_TILE_FN(isa, attr, 1, nv) TG_TILE_FN(isa, attr, 2, nv) TG_TILE_FN(isa, attr, 3, nv)        \
    TG_TILE_FN(isa, attr, 4, nv) TG_TILE_FN(isa, attr, 5, nv) TG_TILE_FN(isa, attr, 6, nv)
#define TG_TALL_FNS(isa, attr, nv)                                                                 \
    TG_TILE_FN(isa, attr, 7, nv) TG_TILE_FN(isa, attr, 8, nv) TG_TILE_FN(isa, attr, 9, nv)        \
    TG_TILE_FN(isa, attr, 10, nv) TG_TILE_FN(isa, attr, 11, nv) TG_TILE_FN(isa, attr, 12, nv)
TG_TILE_FNS(tile_avx2, TG_AVX2, 1) TG_TILE_FNS(tile_avx2, TG_AVX2, 2)
TG_TALL_FNS(tile_avx2, TG_AVX2, 1)

/* All the tiles of one panel of op(B) for the kernel whose tile functions are pre_<mr>_<nv>
 * (TG_TILE_FN): whole 6-row tiles, then the shorter last one, the switch turning the run-time
 * row count into the tile function built for it. Used by kern_avx2 and kern_avx512, in scope
 * of their arguments. */
#define TG_TILE(pre, mr, nv)                                                                       \
    pre##_##mr##_##nv(nc, kc, a + i * rs, rs, cs, b, ldbp, c + i * ldc, ldc, ab)
#define TG_PANEL(pre, nv)                                                                          \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + MR <= m; i += MR)                                                               \
            TG_TILE(pre, 6, nv);                                                                   \
        switch (m - i) {                                                                           \
        case 5: TG_TILE(pre, 5, nv); break;                                                        \
        case 4: TG_TILE(pre, 4, nv); break;                                                        \
        case 3: TG_TILE(pre, 3, nv); break;                                                        \
        case 2: TG_TILE(pre, 2, nv); break;                                                        \
        case 1: TG_TILE(pre, 1, nv); break;                                                        \
        default: break;                                                                            \
        }                                                                                          \
    } while (0)

/* The tiles of a panel (AVX2: nv = 1 only; AVX-512: nv = 1 or 2) in tiles of up to 12 rows, the
 * last 7-11 rows in one tile, 1-6 in a 6-row one (TG_TILE_FN names) */
#define TG_TALL_PANEL(pre, nv)                                                                     \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + 12 <= m; i += 12)                                                               \
            TG_TILE(pre, 12, nv);                                                                 \
        switch (m - i) {                                                                           \
        case 11: TG_TILE(pre, 11, nv); break;                                                     \
        case 10: TG_TILE(pre, 10, nv); break;                                                     \
        case 9: TG_TILE(pre, 9, nv); break;                                                       \
        case 8: TG_TILE(pre, 8, nv); break;                                                       \
        case 7: TG_TILE(pre, 7, nv); break;                                                       \
        case 6: TG_TILE(pre, 6, nv); break;                                                        \
        case 5: TG_TILE(pre, 5, nv); break;                                                        \
        case 4: TG_TILE(pre, 4, nv); break;                                                        \
        case 3: TG_TILE(pre, 3, nv); break;                                                        \
        case 2: TG_TILE(pre, 2, nv); break;                                                        \
        case 1: TG_TILE(pre, 1, nv); break;                                                        \
        default: break;                                                                            \
        }                                                                                          \
    } while (0)

/* A panel 16 floats wide (2 vectors) or 8 (1) */
TG_AVX2 static void kern_avx2(int64_t m, int w, int nc, int64_t kc, const float *a, int64_t rs,
                              int64_t cs, const float *b, int64_t ldbp, float *c, int64_t ldc,
                              const float *ab) {
    /* clang-format on (the macro calls above end without a semicolon) */
    if (w == 16)
        TG_PANEL(tile_avx2, 2);
    else
        TG_TALL_PANEL(tile_avx2, 1);
}

/* Non-transposed panel that cannot be read in place (the narrower last one): row by row,
 * whole vectors, a masked load for the last partial vector (masked-off lanes read as zero and
 * are not touched in memory, so nothing past the end of B is read), zeros beyond. */
TG_AVX2 static void pack_b_avx2(const float *src, int64_t ld, int64_t kc, int nc, int w,
                                float *buf) {
    const int full = nc >> 3, rem = nc & 7;
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t p = 0; p < kc; p++) {
        const float *s = src + p * ld;
        float *d = buf + p * w;
        int v = 0;
        for (; v < full; v++)
            _mm256_storeu_ps(d + 8 * v, _mm256_loadu_ps(s + 8 * v));
        if (rem) {
            _mm256_storeu_ps(d + 8 * v, _mm256_maskload_ps(s + 8 * v, mask));
            v++;
        }
        for (; 8 * v < w; v++)
            _mm256_storeu_ps(d + 8 * v, _mm256_setzero_ps());
    }
}

/* Transposing pack: 8 rows of B (8 columns of op(B)) × 8 values of k at a time through the
 * classic unpack / shuffle / permute2f128 8×8 transpose; rows past nc enter as zero vectors,
 * so the padding comes out of the same shuffles. The last kc % 8 values one at a time. */
TG_AVX2 static void pack_bt_avx2(const float *src, int64_t ld, int64_t kc, int nc, int w,
                                 float *buf) {
    const __m256 z = _mm256_setzero_ps();
    for (int j = 0; j < w; j += 8) {
        const int rem = nc - j; /* columns of this group that exist (<= 0: all padding) */
        const float *s = src + j * ld;
        float *d = buf + j;
        if (rem <= 0) {
            for (int64_t p = 0; p < kc; p++)
                _mm256_storeu_ps(d + p * w, z);
            continue;
        }
        int64_t p = 0;
        for (; p + 8 <= kc; p += 8) {
#define TG_LD(q) (rem > (q) ? _mm256_loadu_ps(s + (q)*ld + p) : z)
            const __m256 r0 = TG_LD(0), r1 = TG_LD(1), r2 = TG_LD(2), r3 = TG_LD(3);
            const __m256 r4 = TG_LD(4), r5 = TG_LD(5), r6 = TG_LD(6), r7 = TG_LD(7);
#undef TG_LD
            const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float *o = d + p * w;
            _mm256_storeu_ps(o + 0 * w, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(o + 1 * w, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(o + 2 * w, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(o + 3 * w, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(o + 4 * w, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(o + 5 * w, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(o + 6 * w, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(o + 7 * w, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
        for (; p < kc; p++)
            for (int q = 0; q < 8; q++)
                d[p * w + q] = q < rem ? s[q * ld + p] : 0.0f;
    }
}

static const small_isa isa_avx2 = {NR, kern_avx2, pack_b_avx2, pack_bt_avx2};

/* Q·Kᵀ over a few keys (op(B) = Bᵀ with N < 16, K = 8, 16, 32 or 64): a tile's 16 lanes would
 * hold N keys (10 of 16 for a g2p-small head) and op(B) would be transposed into a panel per
 * product first (a quarter of the time). Instead each score is a dot product of two rows read
 * in place: query row i times key row j, 8 lanes of partial sums, two queries × four keys at a
 * time, each query's four accumulators folded into four sums with three horizontal adds and
 * one add of the halves. Every score is folded by the same steps, whichever group it is
 * in: (l0 + l1) + (l2 + l3), plus (l4 + l5) + (l6 + l7), lane l summing k = l, l + 8, ... in
 * order. The AVX-512 path uses this kernel too (the same bits on both). */
/* The first folding steps of accumulators s0..s3: lane j of each half holds s_j's
 * (l0 + l1) + (l2 + l3) (low half) or (l4 + l5) + (l6 + l7) (high half) */
static inline __attribute__((always_inline)) TG_AVX2 __m256 hadd4(__m256 s0, __m256 s1, __m256 s2,
                                                                  __m256 s3) {
    return _mm256_hadd_ps(_mm256_hadd_ps(s0, s1), _mm256_hadd_ps(s2, s3));
}

/* The four sums of accumulators s0..s3 (their 8 lanes each folded as said above), times alpha */
static inline __attribute__((always_inline)) TG_AVX2 __m128 fold4(__m256 s0, __m256 s1, __m256 s2,
                                                                  __m256 s3, float alpha) {
    const __m256 h = hadd4(s0, s1, s2, s3);
    return _mm_mul_ps(_mm_set1_ps(alpha),
                      _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* cr[0:cnt] = r (beta 0) or beta·cr + r, cnt <= 4 */
static inline __attribute__((always_inline)) TG_AVX2 void store4(float *cr, __m128 r, int cnt,
                                                                 float beta) {
    if (beta == 0.0f) {
        /* plain stores of 1, 2 or 3 floats: a masked store (vmaskmovps) is microcoded on AMD */
        if (cnt == 4) {
            _mm_storeu_ps(cr, r);
        } else if (cnt == 1) {
            _mm_store_ss(cr, r);
        } else {
            _mm_storel_pi((__m64 *)cr, r);
            if (cnt == 3) _mm_store_ss(cr + 2, _mm_movehl_ps(r, r));
        }
        return;
    }
    float t[4];
    _mm_storeu_ps(t, r);
    for (int x = 0; x < cnt; x++)
        cr[x] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(beta), _mm_set_ss(cr[x]), _mm_set_ss(t[x])));
}

/* Two query rows × four keys at a time: 8 accumulators, each k step two loads of the queries,
 * four of the keys and 8 FMAs (a missing row or key reads a present one; its sums are not
 * stored). The last one or two keys of a row (N = 10: keys 8 and 9) take two keys' loads and
 * FMAs only, the same sums in the same order. (The two loops are written out: one helper over
 * an array of accumulators compiled to a slower 4-key loop.) */
static inline __attribute__((always_inline)) TG_AVX2 void
dot_rows_avx2(const int kv, int64_t m, int n, const float *a, int64_t lda, const float *b,
              int64_t ldb, float *c, int64_t ldc, float alpha, float beta) {
    const bool plain = alpha == 1.0f && beta == 0.0f; /* C = A·Bᵀ: no scaling to do */
    for (int64_t i = 0; i < m; i += 2) {
        const bool two = m - i > 1;
        const float *q0 = a + i * lda, *q1 = two ? q0 + lda : q0;
        float *c0 = c + i * ldc;
        for (int j0 = 0; j0 < n; j0 += 4) {
            const int cnt = n - j0 < 4 ? n - j0 : 4;
            const float *k0 = b + (int64_t)j0 * ldb;
            const float *k1 = cnt > 1 ? k0 + ldb : k0, *k2 = cnt > 2 ? k0 + 2 * ldb : k0;
            const float *k3 = cnt > 3 ? k0 + 3 * ldb : k0;
            __m256 s00 = _mm256_setzero_ps(), s01 = s00, s02 = s00, s03 = s00;
            __m256 s10 = s00, s11 = s00, s12 = s00, s13 = s00;
            if (cnt <= 2) {
                for (int v = 0; v < kv; v++) {
                    const __m256 x0 = _mm256_loadu_ps(q0 + 8 * v), x1 = _mm256_loadu_ps(q1 + 8 * v);
                    const __m256 y0 = _mm256_loadu_ps(k0 + 8 * v), y1 = _mm256_loadu_ps(k1 + 8 * v);
                    s00 = _mm256_fmadd_ps(x0, y0, s00);
                    s01 = _mm256_fmadd_ps(x0, y1, s01);
                    s10 = _mm256_fmadd_ps(x1, y0, s10);
                    s11 = _mm256_fmadd_ps(x1, y1, s11);
                }
                s02 = s03 = s00, s12 = s13 = s10; /* folded with the rest, never stored */
            } else {
                for (int v = 0; v < kv; v++) {
                    const __m256 x0 = _mm256_loadu_ps(q0 + 8 * v), x1 = _mm256_loadu_ps(q1 + 8 * v);
                    const __m256 y0 = _mm256_loadu_ps(k0 + 8 * v), y1 = _mm256_loadu_ps(k1 + 8 * v);
                    const __m256 y2 = _mm256_loadu_ps(k2 + 8 * v), y3 = _mm256_loadu_ps(k3 + 8 * v);
                    s00 = _mm256_fmadd_ps(x0, y0, s00);
                    s01 = _mm256_fmadd_ps(x0, y1, s01);
                    s02 = _mm256_fmadd_ps(x0, y2, s02);
                    s03 = _mm256_fmadd_ps(x0, y3, s03);
                    s10 = _mm256_fmadd_ps(x1, y0, s10);
                    s11 = _mm256_fmadd_ps(x1, y1, s11);
                    s12 = _mm256_fmadd_ps(x1, y2, s12);
                    s13 = _mm256_fmadd_ps(x1, y3, s13);
                }
            }
            if (plain && cnt == 4 && two) {
                /* both rows' four sums in one vector: the same folding steps per score */
                const __m256 w0 = hadd4(s00, s01, s02, s03), w1 = hadd4(s10, s11, s12, s13);
                const __m256 r = _mm256_add_ps(_mm256_permute2f128_ps(w0, w1, 0x20),
                                               _mm256_permute2f128_ps(w0, w1, 0x31));
                _mm_storeu_ps(c0 + j0, _mm256_castps256_ps128(r));
                _mm_storeu_ps(c0 + ldc + j0, _mm256_extractf128_ps(r, 1));
                continue;
            }
            store4(c0 + j0, fold4(s00, s01, s02, s03, alpha), cnt, beta);
            if (two) store4(c0 + ldc + j0, fold4(s10, s11, s12, s13, alpha), cnt, beta);
        }
    }
}

/* One function per K (the k loop unrolled). */
#define TG_DOT_FN(kv)                                                                              \
    __attribute__((noinline)) TG_AVX2 static void dot_rows_##kv(                                   \
        int64_t m, int n, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,      \
        int64_t ldc, float alpha, float beta) {                                                    \
        dot_rows_avx2(kv, m, n, a, lda, b, ldb, c, ldc, alpha, beta);                              \
    }
TG_DOT_FN(1) TG_DOT_FN(2) TG_DOT_FN(4) TG_DOT_FN(8)
#undef TG_DOT_FN

typedef void (*dot_fn)(int64_t, int, const float *, int64_t, const float *, int64_t, float *,
                       int64_t, float, float);

/* The dot-product kernel for the call's shape (above), or NULL where the tiles take it. Besides
 * Q·Kᵀ over fewer than 16 keys, one or two query rows over any number of keys (a decoder's
 * step: one new position per hypothesis and head against its cached keys): there every key row
 * is used once or twice, and packing them into panels would cost more than the products. */
static dot_fn dot_kernel(const tg_cpu_gemm_args *g) {
    if (!g->trans_b || g->trans_a || (g->N >= NR && g->M > 2) || tg__cpu_stats.gemm.no_small_dot)
        return NULL;
    switch (g->K) {
    case 8: return dot_rows_1;
    case 16: return dot_rows_2;
    case 32: return dot_rows_4;
    case 64: return dot_rows_8;
    default: return NULL;
    }
}

/* Rows [i0, i1) of the product at A, B, C by dot products where dot_kernel has one; false
 * (nothing done) otherwise */
static bool dot_block(const tg_cpu_gemm_args *g, const float *A, const float *B, int64_t ldb,
                      float *C, int64_t i0, int64_t i1) {
    const dot_fn f = dot_kernel(g);
    if (!f) return false;
    f(i1 - i0, (int)g->N, A + i0 * g->lda, g->lda, B, ldb, C + i0 * g->ldc, g->ldc, g->alpha,
      g->beta);
    return true;
}

/* ---------------------------------------------------------------- AVX-512F kernel ---- */

/* Where the CPU has AVX-512F (isa.h): tiles of 6 rows × up to 64 columns, 4 zmm vectors a
 * row, 24 accumulators — an attention product's 64 value columns in one tile instead of four,
 * so that the per-tile work (its set-up and stores) is a quarter. Each element is computed
 * as the AVX2 kernel computes it (the k sum with one FMA per k in order, alpha times that
 * sum, then beta·C plus it in one FMA): the same bits. A row's last, partial vector goes
 * through the AVX2 kernel's row store (masked 512-bit stores are slow on AMD cores). */
#define TG_AVX512 TG_TARGET_AVX512

/* cr[0:min(n, 16)] = alpha*x + beta*cr (n <= 0: nothing) */
static inline __attribute__((always_inline)) TG_AVX512 void store_vec512(float *cr, __m512 x, int n,
                                                                         float alpha, float beta) {
    if (n >= 16) {
        x = _mm512_mul_ps(_mm512_set1_ps(alpha), x);
        _mm512_storeu_ps(
            cr, beta == 0.0f ? x : _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_loadu_ps(cr), x));
    } else if (n > 0) {
        store_row_avx2(cr, _mm512_castps512_ps256(x),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)),
                       n > 8 ? 2 : 1, n, alpha, beta);
    }
}

/* The AVX-512 tile (gemm_tiles.h): 6 rows of 1-4 vectors, 24 accumulators at most; panels of one
 * or two vectors (16 or 32 columns: attention's P·V and Pᵀ·dO with heads of 16 or 32, or a
 * product's last columns) in up to 12 rows, since a 6-row tile of one vector holds only 6
 * accumulators, each a chain of dependent FMAs, too few to cover the FMAs' latency, and P·V
 * over 10 keys would take two tiles (and two calls, with their set-up and stores). */
#define SFX avx512
#define FN TG_AVX512
#define V __m512
#define W 16
#define VZERO _mm512_setzero_ps
#define VLOADU _mm512_loadu_ps
#define VBCAST(p) _mm512_set1_ps(*(p))
#define VFMA _mm512_fmadd_ps
#define STORE_ROW(cr, x0, x1, x2, x3)                                                              \
    do {                                                                                           \
        store_vec512(cr, x0, nc, alpha, beta);                                                     \
        if (nv > 1) store_vec512((cr) + 16, x1, nc - 16, alpha, beta);                             \
        if (nv > 2) store_vec512((cr) + 32, x2, nc - 32, alpha, beta);                             \
        if (nv > 3) store_vec512((cr) + 48, x3, nc - 48, alpha, beta);                             \
    } while (0)
#include "backends/cpu/gemm_tiles.h"

/* clang-format off */
TG_TILE_FNS(tile_avx512, TG_AVX512, 1) TG_TILE_FNS(tile_avx512, TG_AVX512, 2)
TG_TILE_FNS(tile_avx512, TG_AVX512, 3) TG_TILE_FNS(tile_avx512, TG_AVX512, 4)
TG_TALL_FNS(tile_avx512, TG_AVX512, 1) TG_TALL_FNS(tile_avx512, TG_AVX512, 2)
#undef TG_TALL_FNS
#undef TG_TILE_FNS
#undef TG_TILE_FN

/* A panel 16, 32, 48 or 64 floats wide (1-4 vectors). A panel 8 wide (at most 8 columns:
 * heads of width 8) is the AVX2 kernel's, which reads it in place where a 16-wide one would
 * pad and pack it. */
TG_AVX512 static void kern_avx512(int64_t m, int w, int nc, int64_t kc, const float *a,
                                  int64_t rs, int64_t cs, const float *b, int64_t ldbp, float *c,
                                  int64_t ldc, const float *ab) {
    /* clang-format on (the macro calls above end without a semicolon) */
    if (w == 8) {
        kern_avx2(m, w, nc, kc, a, rs, cs, b, ldbp, c, ldc, ab);
        return;
    }
    switch (w) {
    case 16: TG_TALL_PANEL(tile_avx512, 1); break;
    case 32: TG_TALL_PANEL(tile_avx512, 2); break;
    case 48: TG_PANEL(tile_avx512, 3); break;
    default: TG_PANEL(tile_avx512, 4); break;
    }
}
#undef TG_PANEL
#undef TG_TALL_PANEL
#undef TG_TILE

static const small_isa isa_avx512 = {NR512, kern_avx512, pack_b_avx2, pack_bt_avx2};
#endif

/* The kernels of each instruction-set level (isa.h) */
static const small_isa *const isas[TG_CPU_ISA_LEVELS] = {
    [TG_CPU_ISA_PORTABLE] = &isa_portable,
#if TG_CPU_X86
    [TG_CPU_ISA_AVX2] = &isa_avx2,
    [TG_CPU_ISA_AVX512] = &isa_avx512,
#endif
};

void tg__cpu_gemm_pack_transposed(const float *src, int64_t ld, int64_t kc, int nc, int w,
                                  float *buf) {
    /* the 512-bit level packs as the AVX2 one does */
    isas[tg_cpu_isa()]->pack_bt(src, ld, kc, nc, w, buf);
}

/* ------------------------------------------------------------------------ driver ---- */

/* Whether `rows` rows of a matrix with leading dimension ld, one or two cache lines of each,
 * stay in half of a 32-KiB L1d (8 ways × 64 sets of 64-byte lines; set = address bits 6..11).
 * Rows a multiple of 4 KiB apart all land in one set, 2 KiB apart in two: a 16-float panel of B
 * read in place with ldb = 512 (a head of a d = 512 model as a strided view) keeps only 16 lines
 * in L1, and packing it is faster. */
static bool fits_l1(int64_t ld, int64_t rows) {
    /* g = gcd(ld*4 mod 4096, 4096) = 2^lg, a power of two: 4096 / g is a shift (this runs once
     * a product) */
    const uint64_t x = (uint64_t)ld * 4 % 4096;
    int lg = x != 0 ? __builtin_ctzll(x) : 12;
    if (lg < 6) lg = 6; /* rows not line-aligned spread over every set */
    const int64_t lines_per_row = (ld * 4) % 64 == 0 ? 1 : 2;
    return rows * lines_per_row <= 8 * (4096 >> lg) / 2;
}

/* The width of a panel of op(B) holding nc columns: 8 or 16 (AVX2, portable), 8 or a multiple
 * of 16 (AVX-512) */
static int panel_width(const small_isa *isa, int64_t nc) {
    return nc <= 8 ? 8 : isa->nr == NR ? 16 : (int)(nc + 15) / 16 * 16;
}

/* Rows [i0, i1) × columns [j0, j1) of the product at A, B (leading dimension ldb), C (j0 a
 * multiple of NR): for each panel of op(B) (in place or packed, a chunk of k at a time), all the
 * row tiles. */
static void block_at(const tg_cpu_gemm_args *g, const small_isa *isa, const float *A,
                     const float *B, int64_t ldb, float *C, int64_t i0, int64_t i1, int64_t j0,
                     int64_t j1) {
    float buf[KC * NR512] __attribute__((aligned(64)));
    const int64_t K = g->K, lda = g->lda, ldc = g->ldc;
    const int64_t rs = g->trans_a ? 1 : lda, cs = g->trans_a ? lda : 1;
#if TG_CPU_X86
    if (isa != &isa_portable && j0 == 0 && j1 == g->N && dot_block(g, A, B, ldb, C, i0, i1))
        return;
#endif
    const bool b_fits = fits_l1(ldb, K);

    for (int64_t j = j0; j < j1; j += isa->nr) {
        const int nc = (int)tg_cpu_gemm_imin(isa->nr, j1 - j);
        const int w = panel_width(isa, nc);
        /* A full-width panel of a non-transposed B is read in place when its K rows stay in
         * L1 across the row tiles. Either way k goes in chunks of KC, so that the sums (and
         * their bits) do not depend on the panel or on reading in place. */
        const bool direct = !g->trans_b && nc == w && b_fits;
        for (int64_t p0 = 0; p0 < K; p0 += KC) {
            const int64_t kc = tg_cpu_gemm_imin(KC, K - p0);
            const float *bp = buf;
            int64_t ldbp = w;
            if (direct) {
                bp = B + p0 * ldb + j;
                ldbp = ldb;
            } else if (g->trans_b) {
                isa->pack_bt(B + j * ldb + p0, ldb, kc, nc, w, buf);
            } else {
                isa->pack_b(B + p0 * ldb + j, ldb, kc, nc, w, buf);
            }
            /* Later chunks of k add to what the first chunk wrote. */
            const float ab[2] = {g->alpha, p0 == 0 ? g->beta : 1.0f};
            const float *ap = g->trans_a ? A + p0 * lda + i0 : A + i0 * lda + p0;
            isa->kern(i1 - i0, w, nc, kc, ap, rs, cs, bp, ldbp, C + i0 * ldc + j, ldc, ab);
        }
    }
}

/* A product of the call: item i of outer item o (gemm.h: tg_cpu_gemm_batched2), o * batch + i
 * counted from 0. A run of tasks steps through the products without dividing (two 64-bit
 * divisions per product cost as much as a tiny product's kernel). */
typedef struct product {
    int64_t o, i;
} product;

static product product_of(const tg_cpu_gemm_args *g, int64_t t) {
    return (product){t / g->batch, t % g->batch};
}

static void product_next(const tg_cpu_gemm_args *g, product *q) {
    if (++q->i == g->batch) q->i = 0, q->o++;
}

/* Product q's op(B) read through a lookup (gemm.h: tg_cpu_lookup): its stored rows copied from
 * the table's rows into a buffer in this core's cache, then computed from there. */
static __attribute__((noinline)) void lookup_block(const tg_cpu_gemm_args *g, const small_isa *isa,
                                                   product q, const float *A, float *C,
                                                   int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    float rows[TG_CPU_GEMM_LOOKUP_MAX] __attribute__((aligned(64)));
    const tg_cpu_lookup *l = g->lookup_b;
    const int64_t x = l->off + q.o * g->ostride_b + q.i * g->stride_b;
    const int64_t r0 = x / l->w, col = x % l->w;
    const int64_t nrow = g->trans_b ? g->N : g->K, len = g->trans_b ? g->K : g->N;
    for (int64_t p = 0; p < nrow; p++) {
        const int64_t id = l->ids[r0 + p];
        memcpy(rows + p * len, l->table + (id >= 0 && id < l->rows ? id : 0) * l->w + col,
               (size_t)len * sizeof(float));
    }
    block_at(g, isa, A, rows, len, C, i0, i1, j0, j1);
}

/* Rows [i0, i1) × columns [j0, j1) of product q. */
static void small_block(const tg_cpu_gemm_args *g, const small_isa *isa, product q, int64_t i0,
                        int64_t i1, int64_t j0, int64_t j1) {
    const float *A, *B;
    float *C;
    tg_cpu_gemm_product_at(g, q.o, q.i, &A, &B, &C);
    if (g->lookup_b)
        lookup_block(g, isa, q, A, C, i0, i1, j0, j1);
    else
        block_at(g, isa, A, B, g->ldb, C, i0, i1, j0, j1);
}

/* How the products are cut into tasks: each product into `blocks` blocks of `size` rows
 * (by_cols false) or columns (by_cols true). */
typedef struct split {
    bool by_cols;
    int64_t blocks, size;
} split;

/* Whole products [t0, t1) where each is one panel of op(B) read in place and one chunk of k
 * (attention's P·V and Pᵀ·dO, heads of 8-64), or dot products (Q·Kᵀ over a few keys):
 * block_at's set-up, the same for every product, done once for the run (a quarter of a tiny
 * product's time), and the kernel called with block_at's arguments (so the same bits). False,
 * with nothing done, where the products are not such. */
static bool direct_run(const tg_cpu_gemm_args *g, const small_isa *isa, split sp, int64_t t0,
                       int64_t t1) {
    if (sp.blocks != 1 || g->lookup_b) return false;
    const float *A, *B;
    float *C;
#if TG_CPU_X86
    const dot_fn dot = dot_kernel(g);
    if (dot) {
        for (product q = product_of(g, t0); t0 < t1; t0++, product_next(g, &q)) {
            tg_cpu_gemm_product_at(g, q.o, q.i, &A, &B, &C);
            dot(g->M, (int)g->N, A, g->lda, B, g->ldb, C, g->ldc, g->alpha, g->beta);
        }
        return true;
    }
#endif
    const int64_t N = g->N, K = g->K;
    const int w = panel_width(isa, N);
    if (g->trans_b || N > isa->nr || N != w || K > KC || !fits_l1(g->ldb, K)) return false;
    const int64_t rs = g->trans_a ? 1 : g->lda, cs = g->trans_a ? g->lda : 1;
    const float ab[2] = {g->alpha, g->beta};
    for (product q = product_of(g, t0); t0 < t1; t0++, product_next(g, &q)) {
        tg_cpu_gemm_product_at(g, q.o, q.i, &A, &B, &C);
        isa->kern(g->M, w, (int)N, K, A, rs, cs, B, g->ldb, C, g->ldc, ab);
    }
    return true;
}

/* Tasks [t0, t1): task t is block t % blocks of product t / blocks */
static void run_tasks(const tg_cpu_gemm_args *g, const small_isa *isa, split sp, int64_t t0,
                      int64_t t1) {
    if (t0 >= t1 || (isa != &isa_portable && direct_run(g, isa, sp, t0, t1))) return;
    product q = product_of(g, t0 / sp.blocks);
    for (int64_t t = t0, blk = t0 % sp.blocks; t < t1; t++) {
        const int64_t lo = blk * sp.size;
        if (sp.by_cols)
            small_block(g, isa, q, 0, g->M, lo, tg_cpu_gemm_imin(lo + sp.size, g->N));
        else
            small_block(g, isa, q, lo, tg_cpu_gemm_imin(lo + sp.size, g->M), 0, g->N);
        if (++blk == sp.blocks) {
            blk = 0;
            product_next(g, &q);
        }
    }
}

void tg_cpu_gemm_small_par(const tg_cpu_gemm_args *g, tg_cpu_par *p, bool portable) {
    if (tg_cpu_gemm_trivial(g, p)) return;
    const small_isa *isa = isas[portable ? TG_CPU_ISA_PORTABLE : tg_cpu_isa()];
    int nthreads = p->nth;
    const int64_t batch = tg_cpu_gemm_count(g), M = g->M, N = g->N;
    const double flops = 2.0 * (double)batch * (double)M * (double)N * (double)g->K;
    if (flops < TG_GEMM_SMALL_SERIAL_FLOPS) nthreads = 1;

    /* Tasks. With a batch of at least 4 products per thread the products alone balance the
     * threads. Otherwise each product is cut into about 4·threads/batch blocks of whole tiles,
     * along its longer side in tiles: rows (6 per tile) or columns (16 per tile). Cutting a
     * wide product into rows would make every task pack all of op(B) for a few row tiles. */
    const int64_t mtiles = (M + MR - 1) / MR, ntiles = (N + NR - 1) / NR;
    split sp = {ntiles > mtiles, 1, ntiles > mtiles ? N : M};
    if (nthreads > 1 && batch < 4 * (int64_t)nthreads) {
        const int64_t tiles = sp.by_cols ? ntiles : mtiles, unit = sp.by_cols ? NR : MR;
        const int64_t want = tg_cpu_gemm_imin(tiles, (4 * (int64_t)nthreads + batch - 1) / batch);
        sp.size = (tiles + want - 1) / want * unit;
        sp.blocks = ((sp.by_cols ? N : M) + sp.size - 1) / sp.size;
    }
    const int64_t ntasks = batch * sp.blocks;
    const int nt = (int)tg_cpu_gemm_imin(nthreads, ntasks);
    if (nt <= 1) {
        if (p->ith == 0) run_tasks(g, isa, sp, 0, ntasks);
        return;
    }
    /* A share of a node claimed by whichever thread comes (cpu.c's graph walk: no team
     * counter): contiguous blocks of tasks. */
    if (!p->team) {
        int64_t lo, hi;
        tg_cpu_share(p, ntasks, true, &lo, &hi);
        run_tasks(g, isa, sp, lo, hi);
        return;
    }
    /* Dynamic hand-out in chunks of ~1/8 of a member's share: cheap (one atomic per chunk)
     * and it keeps both cores busy when the other processes of a shared machine take one. */
    const int64_t chunk = ntasks / (8 * (int64_t)nt) > 0 ? ntasks / (8 * (int64_t)nt) : 1;
    for (int64_t t0 = tg_cpu_next(p, chunk); t0 < ntasks; t0 = tg_cpu_next(p, chunk))
        run_tasks(g, isa, sp, t0, tg_cpu_gemm_imin(t0 + chunk, ntasks));
}
