/* The small-matrix path of the CPU GEMM: our own register-blocked kernel for the many small
 * products of attention (batch = B·h up to thousands, M, N = sequence lengths 8..64,
 * K = head width 16..64), where a loop of cblas_sgemm calls spends most of its time in
 * per-call overhead and OpenBLAS does not split such calls across threads.
 *
 * Blocking (the GotoBLAS/BLIS scheme reduced to what small products need):
 *   C is cut into MR×NR = 6×16 tiles. A tile's 6×16 sums live in 12 AVX registers
 *   (6 rows × 2 vectors of 8) for the whole k loop; each k step broadcasts 6 elements of op(A),
 *   loads 16 of op(B) and issues 12 FMAs — 12 independent accumulators hide the 4-cycle FMA
 *   latency on Zen 3's two FMA pipes, and 8 loads per 12 FMAs stay under its load ports.
 *   Edge tiles use the same code with mr < 6 rows (the unused accumulators are compiled out)
 *   and an 8-wide panel when at most 8 columns remain.
 *
 * Operands:
 *   op(A) is never copied: the kernel reads element (i,p) at a[i*rs + p*cs], i.e. rs = lda,
 *   cs = 1 when !trans_a (6 row streams) and rs = 1, cs = lda when trans_a (6 consecutive
 *   floats per k — already the layout a packed panel would have).
 *   op(B) is read in place when !trans_b and the panel is full (row p of the panel is 16
 *   consecutive floats of B). Otherwise — trans_b (Q·Kᵀ) or the last, narrower panel — a
 *   KC×16 block of op(B) is packed into a contiguous, zero-padded buffer on the stack
 *   (transposed with 8×8 AVX shuffles when trans_b), so the kernel never reads past the end
 *   of B and needs no masked loads. Packing is at most KC = 256 rows of k at a time; a product
 *   with a longer packed K is accumulated into C chunk by chunk (beta only on the first chunk).
 *
 * Parallelism: tasks are (product b, block of rows of C), statically scheduled. Each element of
 * C is summed over k by one thread in a fixed order whatever the partition, so results do not
 * even depend on the thread count (they do depend on AVX2 vs the portable kernel).
 */
#include "backends/cpu/gemm.h"

#include <omp.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TG_GEMM_X86 1
#else
#define TG_GEMM_X86 0
#endif

enum {
    MR = 6,   /* rows of a register tile */
    NR = 16,  /* columns of a register tile (two AVX vectors) */
    KC = 256, /* rows of k packed at a time: KC×NR floats = 16 KiB, half of Zen 3's L1d */
};

/* Below this many flops in the whole batched call we stay on the calling thread: waking the
 * OpenMP team costs a few microseconds, the time of ~2^17 flops. */
#define TG_GEMM_SMALL_SERIAL_FLOPS (1 << 17)

/* One ISA's kernel and transposing packer, called through pointers by the generic driver.
 * kern: C[0:mr, 0:nc] = alpha * Σ_p a[i*rs + p*cs] * b[p*ldbp + j] + beta * C (beta 0: C is
 * not read), for a panel of b that is w = 8 or 16 floats wide (columns nc..w-1 are padding).
 * pack_bt: buf[p*w + j] = src[j*ld + p] for p < kc, j < nc; zero for nc <= j < w. */
typedef struct small_isa {
    void (*kern)(int mr, int w, int nc, int64_t kc, const float *a, int64_t rs, int64_t cs,
                 const float *b, int64_t ldbp, float *c, int64_t ldc, float alpha, float beta);
    void (*pack_bt)(const float *src, int64_t ld, int64_t kc, int nc, int w, float *buf);
} small_isa;

/* ---------------------------------------------------------------- portable kernel ---- */

static void kern_portable(int mr, int w, int nc, int64_t kc, const float *a, int64_t rs,
                          int64_t cs, const float *b, int64_t ldbp, float *c, int64_t ldc,
                          float alpha, float beta) {
    float acc[MR][NR];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < w; j++) acc[i][j] = 0.0f;
    for (int64_t p = 0; p < kc; p++) {
        const float *bp = b + p * ldbp;
        for (int i = 0; i < mr; i++) {
            float ai = a[i * rs + p * cs];
            for (int j = 0; j < w; j++) acc[i][j] += ai * bp[j];
        }
    }
    for (int i = 0; i < mr; i++) {
        float *cr = c + i * ldc;
        for (int j = 0; j < nc; j++) {
            float t = alpha * acc[i][j];
            cr[j] = beta == 0.0f ? t : beta * cr[j] + t;
        }
    }
}

static void pack_bt_portable(const float *src, int64_t ld, int64_t kc, int nc, int w,
                             float *buf) {
    for (int j = 0; j < nc; j++) {
        const float *s = src + j * ld;
        for (int64_t p = 0; p < kc; p++) buf[p * w + j] = s[p];
    }
    for (int64_t p = 0; p < kc; p++)
        for (int j = nc; j < w; j++) buf[p * w + j] = 0.0f;
}

static const small_isa isa_portable = {kern_portable, pack_bt_portable};

/* Non-transposed op(B) panel that cannot be read in place (the narrower last panel): copy
 * kc rows of nc floats, zero-padded to w. */
static void pack_b(const float *src, int64_t ld, int64_t kc, int nc, int w, float *buf) {
    for (int64_t p = 0; p < kc; p++) {
        memcpy(buf + p * w, src + p * ld, (size_t)nc * sizeof(float));
        memset(buf + p * w + nc, 0, (size_t)(w - nc) * sizeof(float));
    }
}

/* ------------------------------------------------------------------ AVX2+FMA kernel ---- */
#if TG_GEMM_X86
#define TG_AVX2 __attribute__((target("avx2,fma")))

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
    /* Partial row: whole vectors first, then the rest one float at a time (the same FMA
     * rounding as the vector path). */
    float t[16];
    _mm256_storeu_ps(t, x0);
    _mm256_storeu_ps(t + 8, x1);
    int j = 0;
    if (nc >= 8) {
        _mm256_storeu_ps(cr, beta == 0.0f ? x0
                                          : _mm256_fmadd_ps(_mm256_set1_ps(beta),
                                                            _mm256_loadu_ps(cr), x0));
        j = 8;
    }
    for (; j < nc; j++)
        cr[j] = beta == 0.0f ? t[j]
                             : _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(beta), _mm_set_ss(cr[j]),
                                                          _mm_set_ss(t[j])));
}

/* The tile kernel, specialised by the constants mr (1..6) and nv (1 or 2 vectors) at each
 * call site in kern_avx2(): the `if (mr > i)` / `if (nv > 1)` tests fold away, leaving
 * mr*nv accumulators in registers. */
#define TG_ROW(i)                                                                          \
    if (mr > i) {                                                                          \
        const __m256 ai = _mm256_broadcast_ss(a + (i)*rs + p * cs);                        \
        c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                                        \
        if (nv > 1) c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);                            \
    }
#define TG_STORE(i)                                                                        \
    if (mr > i) store_row_avx2(c + (i)*ldc, c##i##0, c##i##1, nv, nc, alpha, beta);

static inline __attribute__((always_inline)) TG_AVX2 void
tile_avx2(const int mr, const int nv, int nc, int64_t kc, const float *a, int64_t rs, int64_t cs,
          const float *b, int64_t ldbp, float *c, int64_t ldc, float alpha, float beta) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t p = 0; p < kc; p++) {
        const __m256 b0 = _mm256_loadu_ps(b + p * ldbp);
        const __m256 b1 = nv > 1 ? _mm256_loadu_ps(b + p * ldbp + 8) : b0;
        TG_ROW(0) TG_ROW(1) TG_ROW(2) TG_ROW(3) TG_ROW(4) TG_ROW(5)
    }
    TG_STORE(0) TG_STORE(1) TG_STORE(2) TG_STORE(3) TG_STORE(4) TG_STORE(5)
}
#undef TG_ROW
#undef TG_STORE

TG_AVX2 static void kern_avx2(int mr, int w, int nc, int64_t kc, const float *a, int64_t rs,
                              int64_t cs, const float *b, int64_t ldbp, float *c, int64_t ldc,
                              float alpha, float beta) {
#define TG_CASE(m, v)                                                                      \
    case m: tile_avx2(m, v, nc, kc, a, rs, cs, b, ldbp, c, ldc, alpha, beta); break;
    if (w == 16) {
        switch (mr) {
            TG_CASE(6, 2) TG_CASE(5, 2) TG_CASE(4, 2) TG_CASE(3, 2) TG_CASE(2, 2) TG_CASE(1, 2)
        }
    } else {
        switch (mr) {
            TG_CASE(6, 1) TG_CASE(5, 1) TG_CASE(4, 1) TG_CASE(3, 1) TG_CASE(2, 1) TG_CASE(1, 1)
        }
    }
#undef TG_CASE
}

/* Transposing pack: 8 rows of B (8 columns of op(B)) × 8 values of k at a time through the
 * classic unpack / shuffle / permute2f128 8×8 transpose; edges one float at a time. */
TG_AVX2 static void pack_bt_avx2(const float *src, int64_t ld, int64_t kc, int nc, int w,
                                 float *buf) {
    int j = 0;
    for (; j + 8 <= nc; j += 8) {
        const float *s = src + j * ld;
        int64_t p = 0;
        for (; p + 8 <= kc; p += 8) {
            __m256 r0 = _mm256_loadu_ps(s + 0 * ld + p), r1 = _mm256_loadu_ps(s + 1 * ld + p);
            __m256 r2 = _mm256_loadu_ps(s + 2 * ld + p), r3 = _mm256_loadu_ps(s + 3 * ld + p);
            __m256 r4 = _mm256_loadu_ps(s + 4 * ld + p), r5 = _mm256_loadu_ps(s + 5 * ld + p);
            __m256 r6 = _mm256_loadu_ps(s + 6 * ld + p), r7 = _mm256_loadu_ps(s + 7 * ld + p);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float *d = buf + p * w + j;
            _mm256_storeu_ps(d + 0 * w, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(d + 1 * w, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(d + 2 * w, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(d + 3 * w, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(d + 4 * w, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(d + 5 * w, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(d + 6 * w, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(d + 7 * w, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
        for (; p < kc; p++)
            for (int jj = 0; jj < 8; jj++) buf[p * w + j + jj] = s[jj * ld + p];
    }
    for (; j < nc; j++) {
        const float *s = src + j * ld;
        for (int64_t p = 0; p < kc; p++) buf[p * w + j] = s[p];
    }
    if (nc < w)
        for (int64_t p = 0; p < kc; p++)
            for (int jj = nc; jj < w; jj++) buf[p * w + jj] = 0.0f;
}

static const small_isa isa_avx2 = {kern_avx2, pack_bt_avx2};

static bool have_avx2_fma(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
static bool have_avx2_fma(void) { return false; }
#endif

const char *tg_cpu_gemm_small_isa(void) { return have_avx2_fma() ? "avx2+fma" : "portable"; }

/* ------------------------------------------------------------------------ driver ---- */

static int64_t imin(int64_t x, int64_t y) { return x < y ? x : y; }

/* Rows [i0, i1) of product bi. */
static void small_block(const tg_cpu_gemm_args *g, const small_isa *isa, int64_t bi, int64_t i0,
                        int64_t i1) {
    float buf[KC * NR] __attribute__((aligned(32)));
    const float *A = g->a + bi * g->stride_a;
    const float *B = g->b + bi * g->stride_b;
    float *C = g->c + bi * g->stride_c;
    const int64_t N = g->N, K = g->K, lda = g->lda, ldb = g->ldb, ldc = g->ldc;
    const int64_t rs = g->trans_a ? 1 : lda, cs = g->trans_a ? lda : 1;

    for (int64_t j0 = 0; j0 < N; j0 += NR) {
        const int nc = (int)imin(NR, N - j0);
        const int w = nc > 8 ? 16 : 8;
        /* A full-width panel of a non-transposed B is read in place, all of K at once. */
        const bool direct = !g->trans_b && nc == w;
        const int64_t kstep = direct ? K : KC;
        for (int64_t p0 = 0; p0 < K; p0 += kstep) {
            const int64_t kc = imin(kstep, K - p0);
            const float *bp = buf;
            int64_t ldbp = w;
            if (direct) {
                bp = B + p0 * ldb + j0;
                ldbp = ldb;
            } else if (g->trans_b) {
                isa->pack_bt(B + j0 * ldb + p0, ldb, kc, nc, w, buf);
            } else {
                pack_b(B + p0 * ldb + j0, ldb, kc, nc, w, buf);
            }
            /* Later chunks of k add to what the first chunk wrote. */
            const float beta = p0 == 0 ? g->beta : 1.0f;
            for (int64_t i = i0; i < i1; i += MR) {
                const int mr = (int)imin(MR, i1 - i);
                const float *ap = g->trans_a ? A + p0 * lda + i : A + i * lda + p0;
                isa->kern(mr, w, nc, kc, ap, rs, cs, bp, ldbp, C + i * ldc + j0, ldc, g->alpha,
                          beta);
            }
        }
    }
}

void tg_cpu_gemm_small(const tg_cpu_gemm_args *g, int nthreads, bool portable) {
    if (tg_cpu_gemm_trivial(g)) return;
    const small_isa *isa = &isa_portable;
#if TG_GEMM_X86
    if (!portable && have_avx2_fma()) isa = &isa_avx2;
#else
    (void)portable;
#endif
    if (nthreads < 1) nthreads = 1;
    const int64_t batch = g->batch, M = g->M;
    const double flops = 2.0 * (double)batch * (double)M * (double)g->N * (double)g->K;
    if (flops < TG_GEMM_SMALL_SERIAL_FLOPS) nthreads = 1;

    /* Tasks: (product, block of rows). With a batch of at least 4 products per thread the
     * products alone balance the threads; otherwise cut each product into row blocks (whole
     * 6-row tiles) so that there are about 4 tasks per thread. */
    const int64_t mpanels = (M + MR - 1) / MR;
    int64_t mblocks = 1;
    if (nthreads > 1 && batch < 4 * (int64_t)nthreads)
        mblocks = imin(mpanels, (4 * (int64_t)nthreads + batch - 1) / batch);
    const int64_t rows = (mpanels + mblocks - 1) / mblocks * MR;
    mblocks = (M + rows - 1) / rows;
    const int64_t ntasks = batch * mblocks;
    const int nt = (int)imin(nthreads, ntasks);

#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t t = 0; t < ntasks; t++) {
        const int64_t bi = t / mblocks, i0 = (t % mblocks) * rows;
        small_block(g, isa, bi, i0, imin(i0 + rows, M));
    }
}
