/* Tests of the CPU GEMM engine (backends/cpu/gemm.c, gemm_small.c, gemm_packed.c) against a naive
 * double-precision reference.
 *
 * Tolerance (relative, float32): for every element
 *     |c - ref| <= 1e-5 * sqrt(K) * (|alpha| * sum_p |a_ip * b_pj| + |beta * c0_ij|) + 1e-30,
 * i.e. relative to the magnitude of the terms summed, so that cancellation cannot hide or fake
 * an error. Rounding in a K-term float32 sum is ~6e-8 * sqrt(K) of that scale on average and at
 * most ~6e-8 * K; a wrong index, a missing or doubled term, a stale chunk or a garbage lane
 * gives errors of order 1 of that scale.
 *
 * Every shape is run on each engine: the small path with the AVX2 kernel ("small"), the small
 * path forced onto the portable kernel ("portable"), the BLAS path ("blas"), the packed path
 * ("packed": our packed GEMM per block; OpenBLAS where the CPU lacks AVX2+FMA) and the
 * automatic choice ("auto"). */
#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/isa.h"
#include "tg/tg.h"
#include "tg_check.h"

#include <cblas.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { ENG_SMALL, ENG_PORTABLE, ENG_BLAS, ENG_PACKED, ENG_AUTO, ENG_COUNT };
static const char *eng_name[ENG_COUNT] = {"small", "portable", "blas", "packed", "auto"};

/* The path of the big products the packed path does not leave to OpenBLAS. */
static tg_cpu_gemm_path packed_or_blas(void) {
    return tg_cpu_gemm_packed_available() ? TG_CPU_GEMM_PACKED : TG_CPU_GEMM_BLAS;
}

static void run_engine(int eng, const tg_cpu_gemm_args *g, int nthreads) {
    switch (eng) {
    case ENG_SMALL:
        tg_cpu_gemm_run(g, TG_CPU_GEMM_SMALL, nthreads);
        break;
    case ENG_PORTABLE:
        tg_cpu_gemm_small_portable(g, nthreads);
        break;
    case ENG_BLAS:
        tg_cpu_gemm_run(g, TG_CPU_GEMM_BLAS, nthreads);
        break;
    case ENG_PACKED:
        tg_cpu_gemm_run(g, TG_CPU_GEMM_PACKED, nthreads);
        break;
    default:
        tg_cpu_gemm_batched(g->batch, g->trans_a, g->trans_b, g->M, g->N, g->K, g->alpha, g->a,
                            g->lda, g->stride_a, g->b, g->ldb, g->stride_b, g->beta, g->c, g->ldc,
                            g->stride_c, nthreads);
    }
}

/* Deterministic uniform values in [-1, 1). */
static uint64_t rng_state = 88172645463325252ull;
static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A test problem: buffers sized from the strides, padding (beyond the M×K, K×N, M×N parts
 * each ld and stride covers) filled with NaN so that any read of it shows. */
typedef struct problem {
    tg_cpu_gemm_args g;
    float *a, *b, *c, *c0; /* c0: C before the call */
    size_t na, nb, nc;
} problem;

static size_t span(int64_t batch, int64_t stride, int64_t rows, int64_t ld) {
    int64_t nb = stride == 0 ? 1 : batch;
    return (size_t)((nb - 1) * stride + (rows - 1) * ld + ld);
}

/* pad: extra columns in every ld; sa/sb: 0 broadcasts A / B, 1 gives each product its own
 * (with a gap of 7 floats between consecutive matrices). */
static problem make(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                    float beta, int64_t pad, int sa, int sb, bool nan_c) {
    problem pr;
    memset(&pr, 0, sizeof pr);
    tg_cpu_gemm_args *g = &pr.g;
    g->batch = batch, g->M = M, g->N = N, g->K = K, g->trans_a = ta, g->trans_b = tb;
    g->alpha = alpha, g->beta = beta;
    int64_t ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N;
    if (ra < 1) ra = 1;
    if (rb < 1) rb = 1;
    g->lda = ca + pad, g->ldb = cb + pad, g->ldc = N + pad;
    g->stride_a = sa ? ra * g->lda + 7 : 0;
    g->stride_b = sb ? rb * g->ldb + 7 : 0;
    g->stride_c = M * g->ldc + 7;
    pr.na = span(batch, g->stride_a, ra, g->lda);
    pr.nb = span(batch, g->stride_b, rb, g->ldb);
    pr.nc = span(batch, g->stride_c, M, g->ldc);
    pr.a = malloc(pr.na * sizeof(float));
    pr.b = malloc(pr.nb * sizeof(float));
    pr.c = malloc(pr.nc * sizeof(float));
    pr.c0 = malloc(pr.nc * sizeof(float));
    ck_assert(pr.a && pr.b && pr.c && pr.c0);
    for (size_t i = 0; i < pr.na; i++)
        pr.a[i] = NAN;
    for (size_t i = 0; i < pr.nb; i++)
        pr.b[i] = NAN;
    for (size_t i = 0; i < pr.nc; i++)
        pr.c0[i] = NAN;
    int64_t nba = sa ? batch : 1, nbb = sb ? batch : 1;
    for (int64_t x = 0; x < nba; x++)
        for (int64_t r = 0; r < ra; r++)
            for (int64_t q = 0; q < ca; q++)
                pr.a[x * g->stride_a + r * g->lda + q] = frand();
    for (int64_t x = 0; x < nbb; x++)
        for (int64_t r = 0; r < rb; r++)
            for (int64_t q = 0; q < cb; q++)
                pr.b[x * g->stride_b + r * g->ldb + q] = frand();
    for (int64_t x = 0; x < batch; x++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                pr.c0[x * g->stride_c + i * g->ldc + j] = nan_c ? NAN : frand();
    g->a = pr.a, g->b = pr.b, g->c = pr.c;
    return pr;
}

static void release(problem *pr) {
    free(pr->a), free(pr->b), free(pr->c), free(pr->c0);
}

/* Run engine eng on a fresh copy of C and compare with the double reference; padding of C
 * (outside the M×N parts) must come back untouched (still NaN). Returns the worst error in
 * units of the tolerance (<= 1 passes), after asserting. */
static double check(problem *pr, int eng, int nthreads) {
    const tg_cpu_gemm_args *g = &pr->g;
    memcpy(pr->c, pr->c0, pr->nc * sizeof(float));
    run_engine(eng, g, nthreads);
    const double tol = 1e-5 * sqrt((double)(g->K > 1 ? g->K : 1));
    double worst = 0.0;
    for (int64_t x = 0; x < g->batch; x++) {
        const float *A = g->a + x * g->stride_a, *B = g->b + x * g->stride_b;
        for (int64_t i = 0; i < g->M; i++)
            for (int64_t j = 0; j < g->N; j++) {
                double s = 0.0, mag = 0.0;
                for (int64_t p = 0; p < g->K; p++) {
                    double av = g->trans_a ? A[p * g->lda + i] : A[i * g->lda + p];
                    double bv = g->trans_b ? B[j * g->ldb + p] : B[p * g->ldb + j];
                    s += av * bv;
                    mag += fabs(av * bv);
                }
                size_t at = (size_t)(x * g->stride_c + i * g->ldc + j);
                double ref = g->alpha * s, scale = fabs(g->alpha) * mag;
                if (g->beta != 0.0f) {
                    ref += (double)g->beta * pr->c0[at];
                    scale += fabs((double)g->beta * pr->c0[at]);
                }
                double err = fabs((double)pr->c[at] - ref);
                double bound = tol * scale + 1e-30;
                /* ck_abort_msg only on failure: every ck_assert costs Check a pipe write. */
                if (!(err <= bound))
                    ck_abort_msg("%s: batch %lld %s%s M=%lld N=%lld K=%lld: C[%lld][%lld][%lld] = "
                                 "%.9g, reference %.9g (error %.3g > bound %.3g)",
                                 eng_name[eng], (long long)g->batch, g->trans_a ? "T" : "N",
                                 g->trans_b ? "T" : "N", (long long)g->M, (long long)g->N,
                                 (long long)g->K, (long long)x, (long long)i, (long long)j,
                                 pr->c[at], ref, err, bound);
                if (err / bound > worst) worst = err / bound;
            }
    }
    /* C's padding: every float not in some product's M×N block must still be NaN. */
    for (size_t at = 0; at < pr->nc; at++) {
        int64_t x = (int64_t)at / g->stride_c, r = (int64_t)at % g->stride_c;
        bool inside = x < g->batch && r / g->ldc < g->M && r % g->ldc < g->N;
        if (!inside && !isnan(pr->c[at]))
            ck_abort_msg("%s wrote C's padding at %zu", eng_name[eng], at);
    }
    return worst;
}

static void check_all(problem *pr, int nthreads) {
    for (int eng = 0; eng < ENG_COUNT; eng++)
        check(pr, eng, nthreads);
}

static void setup(void) {
    openblas_set_num_threads(1);
}

/* All four transpose combinations, shapes that cover full and partial 6×16 tiles. */
START_TEST(test_transposes) {
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        problem pr = make(3, ta, tb, 17, 33, 65, 1.0f, 0.0f, 0, 1, 1, false);
        check_all(&pr, 2);
        release(&pr);
    }
}
END_TEST

/* Odd sizes 1, 3, 17, 33, 65 in every dimension, every transpose combination. */
START_TEST(test_odd_sizes) {
    static const int64_t sz[] = {1, 3, 17, 33, 65};
    for (int t = 0; t < 4; t++)
        for (int im = 0; im < 5; im++)
            for (int in = 0; in < 5; in++)
                for (int ik = 0; ik < 5; ik++) {
                    problem pr =
                        make(2, t & 1, t & 2, sz[im], sz[in], sz[ik], 0.75f, 0.0f, 0, 1, 1, false);
                    check_all(&pr, 2);
                    release(&pr);
                }
}
END_TEST

/* Panel widths exactly 8, 16, 24, 32 (full 8-wide panels read in place) and row counts around
 * multiples of 6. */
START_TEST(test_tile_edges) {
    static const int64_t ns[] = {8, 16, 24, 32, 40}, ms[] = {5, 6, 7, 12, 13};
    for (int t = 0; t < 4; t++)
        for (int x = 0; x < 5; x++)
            for (int y = 0; y < 5; y++) {
                problem pr = make(2, t & 1, t & 2, ms[y], ns[x], 16, 1.0f, 1.0f, 0, 1, 1, false);
                check_all(&pr, 2);
                release(&pr);
            }
}
END_TEST

/* Strided batches with stride 0 broadcasting A, or B, over the batch. */
START_TEST(test_broadcast) {
    for (int t = 0; t < 4; t++) {
        problem pa = make(5, t & 1, t & 2, 10, 12, 16, 1.0f, 0.0f, 3, 0, 1, false);
        problem pb = make(5, t & 1, t & 2, 10, 12, 16, 1.0f, 0.0f, 3, 1, 0, false);
        problem big = make(3, t & 1, t & 2, 130, 140, 150, 1.0f, 0.0f, 0, 1, 0, false);
        ck_assert_int_eq(pa.g.stride_a, 0);
        ck_assert_int_eq(pb.g.stride_b, 0);
        check_all(&pa, 2);
        check_all(&pb, 2);
        check_all(&big, 2);
        release(&pa), release(&pb), release(&big);
    }
}
END_TEST

/* beta = 1 accumulates into C (and a general beta scales it), with alpha != 1. */
START_TEST(test_beta_accumulate) {
    for (int t = 0; t < 4; t++) {
        problem p1 = make(4, t & 1, t & 2, 19, 21, 23, 0.5f, 1.0f, 0, 1, 1, false);
        problem p2 = make(4, t & 1, t & 2, 19, 21, 23, -2.0f, 0.25f, 0, 1, 1, false);
        problem p3 = make(2, t & 1, t & 2, 140, 150, 160, 0.5f, 1.0f, 0, 1, 1, false);
        check_all(&p1, 2);
        check_all(&p2, 2);
        check_all(&p3, 2);
        release(&p1), release(&p2), release(&p3);
    }
}
END_TEST

/* beta = 0 must not read C: C full of NaN gives finite results on every path. */
START_TEST(test_beta0_nan) {
    for (int t = 0; t < 4; t++) {
        problem p = make(3, t & 1, t & 2, 13, 29, 31, 1.0f, 0.0f, 0, 1, 1, true);
        problem q = make(1, t & 1, t & 2, 200, 150, 100, 1.0f, 0.0f, 0, 1, 1, true);
        check_all(&p, 2);
        check_all(&q, 2);
        for (size_t i = 0; i < 13 * 29; i++)
            if (!isfinite(p.c[i])) ck_abort_msg("C[%zu] = %g is not finite", i, p.c[i]);
        release(&p), release(&q);
    }
}
END_TEST

/* lda > K, ldb > N, ldc > N: padding (NaN) is neither read nor written. */
START_TEST(test_padding) {
    for (int t = 0; t < 4; t++) {
        problem p = make(3, t & 1, t & 2, 17, 33, 65, 1.0f, 1.0f, 5, 1, 1, false);
        problem q = make(2, t & 1, t & 2, 130, 131, 132, 1.0f, 0.0f, 9, 1, 1, false);
        check_all(&p, 2);
        check_all(&q, 2);
        release(&p), release(&q);
    }
}
END_TEST

/* Large shapes take the packed path: a Transformer projection and its two backward products,
 * and a batch that is split inside each product (3 products on 2 threads) or shared out; a
 * tall, narrow product (3000×40, K 200) takes the small path whatever its size. */
START_TEST(test_large_blas) {
    /* Forward Y = X·W (1280×256 · 256×1024), dX = dY·Wᵀ, dW = Xᵀ·dY. */
    problem fw = make(1, false, false, 1280, 1024, 256, 1.0f, 0.0f, 0, 1, 1, false);
    problem dx = make(1, false, true, 1280, 256, 1024, 1.0f, 0.0f, 0, 1, 1, false);
    problem dw = make(1, true, false, 256, 1024, 1280, 1.0f, 1.0f, 0, 1, 1, false);
    problem *ps[3] = {&fw, &dx, &dw};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(tg_cpu_gemm_choose(&ps[i]->g, 2), packed_or_blas());
        check(ps[i], ENG_AUTO, 2);
        release(ps[i]);
    }
    for (int t = 0; t < 4; t++) {
        problem p3 = make(3, t & 1, t & 2, 150, 170, 190, 1.0f, 0.0f, 0, 1, 1, false);
        problem p4 = make(4, t & 1, t & 2, 150, 170, 190, 1.0f, 0.0f, 0, 1, 1, false);
        problem pc = make(1, t & 1, t & 2, 40, 300, 200, 1.0f, 0.0f, 0, 1, 1, false);
        problem tall = make(1, t & 1, t & 2, 3000, 40, 200, 1.0f, 1.0f, 0, 1, 1, false);
        ck_assert_int_eq(tg_cpu_gemm_choose(&p3.g, 2), packed_or_blas());
        ck_assert_int_eq(tg_cpu_gemm_choose(&pc.g, 2), packed_or_blas());
        check(&p3, ENG_AUTO, 2);
        check(&p4, ENG_AUTO, 2);
        check(&pc, ENG_AUTO, 2); /* N > M: split by columns */
        ck_assert_int_eq(tg_cpu_gemm_choose(&tall.g, 2), TG_CPU_GEMM_SMALL);
        check(&tall, ENG_AUTO, 2);
        release(&p3), release(&p4), release(&pc), release(&tall);
    }
}
END_TEST

/* Long K: where op(B) is packed (transposed, or rows too far apart to read in place) the
 * small path takes 256 values of k at a time and accumulates chunk after chunk into C; the
 * first chunk alone sees beta (0 here, over a C full of NaN). */
START_TEST(test_long_k) {
    for (int t = 0; t < 4; t++) {
        problem p = make(2, t & 1, t & 2, 7, 19, 600, 1.0f, 0.0f, 2, 1, 1, true); /* NaN C */
        problem q = make(2, t & 1, t & 2, 5, 9, 3000, -1.5f, 1.0f, 0, 1, 1, false);
        ck_assert_int_eq(tg_cpu_gemm_choose(&q.g, 2), TG_CPU_GEMM_SMALL);
        check_all(&p, 2);
        check_all(&q, 2);
        release(&p), release(&q);
    }
}
END_TEST

/* Attention shapes take the small path; projections and their gradients the packed path
 * while the weight has at most 2^18 values (so does a single product of 32 rows or more under
 * the small path's size); bigger weights and vocabularies the BLAS path —
 * unless the packed path runs its 512-bit kernel (AVX-512F), which takes them too. */
START_TEST(test_path_rule) {
    const tg_cpu_isa_level start = tg_cpu_isa();
    for (int w = 0; w < 2; w++) {
        /* w 0: the 6×16 kernel alone (at most AVX2); w 1: the CPU's default */
        const tg_cpu_gemm_path big =
            tg__cpu_isa_cap(w == 1 || start < TG_CPU_ISA_AVX2 ? start : TG_CPU_ISA_AVX2) >=
                    TG_CPU_ISA_AVX512
                ? TG_CPU_GEMM_PACKED
                : TG_CPU_GEMM_BLAS;
        tg_cpu_gemm_args g = {.batch = 2048, .M = 64, .N = 64, .K = 64};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), TG_CPU_GEMM_SMALL);
        g = (tg_cpu_gemm_args){.batch = 512, .M = 10, .N = 64, .K = 10};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), TG_CPU_GEMM_SMALL);
        g = (tg_cpu_gemm_args){.batch = 1, .M = 1280, .N = 256, .K = 256};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), packed_or_blas());
        g = (tg_cpu_gemm_args){.batch = 1, .M = 1280, .N = 1024, .K = 256, .trans_b = true};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), packed_or_blas());
        g = (tg_cpu_gemm_args){.batch = 1, .M = 1280, .N = 1024, .K = 1024, .trans_b = true};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), big);
        g = (tg_cpu_gemm_args){.batch = 1, .M = 1024, .N = 256, .K = 1024, .trans_a = true};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), packed_or_blas());
        g = (tg_cpu_gemm_args){.batch = 1, .M = 1024, .N = 1024, .K = 1280, .trans_a = true};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), big);
        g = (tg_cpu_gemm_args){.batch = 1, .M = 256, .N = 1024, .K = 1280, .trans_a = true};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), packed_or_blas());
        g = (tg_cpu_gemm_args){.batch = 1, .M = 8000, .N = 512, .K = 1280, .trans_a = true};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), big); /* an embedding's gradient */
        g = (tg_cpu_gemm_args){.batch = 1, .M = 1024, .N = 8000, .K = 512, .trans_b = true};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), big);
        g = (tg_cpu_gemm_args){.batch = 1, .M = 1024, .N = 512, .K = 8000};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), big);
        g = (tg_cpu_gemm_args){.batch = 1, .M = 4096, .N = 64, .K = 64}; /* tall and narrow */
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), TG_CPU_GEMM_SMALL);
        /* a decoder step's projection, 64 hypotheses: one product of 32+ rows under 2^21 */
        g = (tg_cpu_gemm_args){.batch = 1, .M = 64, .N = 128, .K = 128, .trans_b = true};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), packed_or_blas());
        g.M = 31;
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), TG_CPU_GEMM_SMALL);
        g = (tg_cpu_gemm_args){.batch = 2, .M = 64, .N = 128, .K = 128, .trans_b = true};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), TG_CPU_GEMM_SMALL);
        g = (tg_cpu_gemm_args){.batch = 1, .M = 1280, .N = 65, .K = 256};
        ck_assert_int_eq(tg_cpu_gemm_choose(&g, 2), packed_or_blas());
    }
}
END_TEST

/* Nothing to multiply: K = 0 or alpha = 0 give C = beta*C (zeros for beta 0, whatever C held);
 * M = 0 touches nothing. */
START_TEST(test_degenerate) {
    for (int eng = 0; eng < ENG_COUNT; eng++) {
        float c[6] = {NAN, NAN, NAN, 1.0f, 2.0f, 3.0f}, a[1] = {NAN}, b[1] = {NAN};
        tg_cpu_gemm_args g = {.batch = 1,
                              .M = 1,
                              .N = 3,
                              .K = 0,
                              .alpha = 1.0f,
                              .beta = 0.0f,
                              .a = a,
                              .lda = 1,
                              .b = b,
                              .ldb = 3,
                              .c = c,
                              .ldc = 3,
                              .stride_c = 3};
        run_engine(eng, &g, 2);
        for (int j = 0; j < 3; j++)
            ck_assert_float_eq(c[j], 0.0f);
        g.c = c + 3, g.beta = 2.0f, g.K = 1, g.alpha = 0.0f;
        run_engine(eng, &g, 2);
        ck_assert_float_eq(c[3], 2.0f);
        ck_assert_float_eq(c[5], 6.0f);
        g.M = 0, g.beta = 0.0f;
        run_engine(eng, &g, 2);
        ck_assert_float_eq(c[4], 4.0f);
    }
}
END_TEST

/* Bit-identical results: the same call twice on each path; the small path is also identical
 * across thread counts (each element's k sum is done by one thread in the same order, whatever
 * tile computes it). */
START_TEST(test_deterministic) {
    problem p = make(64, false, true, 33, 33, 64, 1.0f, 0.0f, 0, 1, 1, false);
    problem q = make(1, true, false, 300, 400, 500, 1.0f, 0.0f, 0, 1, 1, false);
    size_t bytes = p.nc * sizeof(float), qbytes = q.nc * sizeof(float);
    float *ref = malloc(bytes), *qref = malloc(qbytes);
    ck_assert(ref && qref);
    check(&p, ENG_SMALL, 1);
    memcpy(ref, p.c, bytes);
    for (int nt = 2; nt <= 3; nt++) {
        check(&p, ENG_SMALL, nt);
        ck_assert_msg(memcmp(ref, p.c, bytes) == 0, "small path differs at %d threads", nt);
    }
    /* Two products of 30 rows are cut into blocks of 6 rows on 2 or 3 threads (too few
     * products to share out whole): 6-row tiles there, 12-row ones on one thread (panels of 8,
     * 16 and 32 columns) */
    static const int64_t widths[] = {8, 16, 32};
    for (int wi = 0; wi < 3; wi++)
        for (int ta = 0; ta < 2; ta++) {
            problem r = make(2, ta, false, 30, widths[wi], 300, 1.0f, 0.0f, 0, 1, 1, false);
            const size_t rbytes = r.nc * sizeof(float);
            float *one = malloc(rbytes);
            ck_assert(one);
            check(&r, ENG_SMALL, 1);
            memcpy(one, r.c, rbytes);
            for (int nt = 2; nt <= 3; nt++) {
                check(&r, ENG_SMALL, nt);
                ck_assert_msg(memcmp(one, r.c, rbytes) == 0,
                              "small path 30x%lldx300 (trans_a %d) differs at %d threads",
                              (long long)widths[wi], ta, nt);
            }
            free(one);
            release(&r);
        }
    check(&q, ENG_BLAS, 2);
    memcpy(qref, q.c, qbytes);
    check(&q, ENG_BLAS, 2);
    ck_assert_msg(memcmp(qref, q.c, qbytes) == 0, "BLAS path differs between two runs");
    free(ref), free(qref);
    release(&p), release(&q);
}
END_TEST

/* The index of the first float of got that is not ref's (NaN matching NaN), or -1. */
static long first_diff(const float *ref, const float *got, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(ref[i] == got[i] || (isnan(ref[i]) && isnan(got[i])))) return (long)i;
    return -1;
}

/* The packed path on 1 thread (checked against the reference), then on 2 .. max_threads with
 * the same bits; returns the 1-thread C (the caller frees it). */
static float *packed_same_bits(problem *p, int max_threads) {
    check(p, ENG_PACKED, 1);
    float *ref = malloc(p->nc * sizeof(float));
    ck_assert(ref);
    memcpy(ref, p->c, p->nc * sizeof(float));
    for (int nt = 2; nt <= max_threads; nt++) {
        check(p, ENG_PACKED, nt);
        const long at = first_diff(ref, p->c, p->nc);
        if (at >= 0)
            ck_abort_msg("packed %lldx%lldx%lld (batch %lld) differs at %d threads (C[%ld])",
                         (long long)p->g.M, (long long)p->g.N, (long long)p->g.K,
                         (long long)p->g.batch, nt, at);
    }
    return ref;
}

/* The packed path's blocking: more rows than one block of A (120), more k than one block
 * (256: later blocks add to C), more columns than one block of B (512), edge tiles in every
 * direction, every transpose combination, beta 0 over NaN, 1 and 0.5, alpha 1 and -0.5; and
 * bit-identical results on 1, 2 and 3 threads (each element's k sum is done in one order
 * whatever block of C a thread gets). */
START_TEST(test_packed_blocks) {
    static const int64_t shapes[][3] = {{250, 37, 600}, {13, 4200, 20}, {127, 130, 257}};
    static const float betas[] = {0.0f, 1.0f, 0.5f};
    for (int si = 0; si < 3; si++)
        for (int t = 0; t < 4; t++) {
            const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
            const float beta = betas[(si + t) % 3], alpha = t == 3 ? -0.5f : 1.0f;
            problem p = make(2, t & 1, t & 2, M, N, K, alpha, beta, 3, 1, t != 2, beta == 0.0f);
            free(packed_same_bits(&p, 3));
            release(&p);
        }
}
END_TEST

/* One product on the packed path, cut into blocks of rows that share op(B) packed once
 * (gemm.c, gemm_packed.c): right against the reference and bit-identical to one thread at 2, 3
 * and 4; blocks run one after another on one op(B) buffer, and with every piece of it claimed
 * by a block that never packs it (the others then pack it themselves), give the same bits; and
 * the graph runner's share count for such products. */
START_TEST(test_packed_shared) {
    static const int64_t shapes[][3] = {
        {250, 37, 600}, {13, 4200, 20}, {127, 130, 257}, {300, 530, 300}};
    for (int si = 0; si < 4; si++)
        for (int t = 0; t < 4; t++) {
            const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
            problem p = make(1, t & 1, t & 2, M, N, K, t == 3 ? -0.5f : 1.0f, t == 1 ? 1.0f : 0.0f,
                             2, 1, 1, t != 1);
            float *ref = packed_same_bits(&p, 4);
            if (!tg_cpu_gemm_packed_available()) {
                free(ref);
                release(&p);
                continue;
            }
            /* the blocks by hand: rows [0, 42) and [42, M), with and without a stalled buffer;
             * then columns [0, j) and [j, N), j a multiple of 64 near N / 2 (inside a block of
             * 512 columns of the panels: 4200 columns cut at 2048 + 64) */
            const tg_cpu_gemm_args *g = &p.g;
            for (int how = 0; how < 3; how++) {
                const int64_t jcut = N / 2 / 64 * 64 + (N > 4000 ? 64 : 0);
                if (how == 2 && jcut == 0) continue;
                tg__cpu_stats.gemm.stall_shared = how == 1;
                tg_cpu_shared *sb = tg_cpu_gemm_panels_shared(g->trans_b, g->b, g->ldb, N, K);
                tg__cpu_stats.gemm.stall_shared = false;
                ck_assert_ptr_nonnull(sb);
                memcpy(p.c, p.c0, p.nc * sizeof(float));
                for (int64_t lo = 0; how < 2 && lo < M; lo += 42) {
                    const int64_t len = M - lo < 42 ? M - lo : 42;
                    ck_assert(tg_cpu_gemm_packed_block(g->trans_a, g->trans_b, len, N, K, g->alpha,
                                                       g->trans_a ? g->a + lo : g->a + lo * g->lda,
                                                       g->lda, g->b, g->ldb, g->beta,
                                                       g->c + lo * g->ldc, g->ldc, sb, 0));
                }
                for (int half = 0; how == 2 && half < 2; half++) {
                    const int64_t j0 = half ? jcut : 0, n = half ? N - jcut : jcut;
                    ck_assert(tg_cpu_gemm_packed_block(g->trans_a, g->trans_b, M, n, K, g->alpha,
                                                       g->a, g->lda, g->b, g->ldb, g->beta,
                                                       g->c + j0, g->ldc, sb, j0));
                }
                sb->release(sb);
                static const char *const hows[] = {"shared", "stalled", "shared, by columns"};
                const long at = first_diff(ref, p.c, p.nc);
                if (at >= 0)
                    ck_abort_msg("blocks on one op(B) buffer (%s) %lldx%lldx%lld differ (C[%ld])",
                                 hows[how], (long long)M, (long long)N, (long long)K, at);
            }
            free(ref);
            release(&p);
        }
    tg_cpu_gemm_shared_b_trim();
    if (tg_cpu_gemm_packed_available()) { /* two buffers at most: a third request gets none */
        static const float b1[4] = {1, 2, 3, 4};
        tg_cpu_shared *x = tg_cpu_gemm_panels_shared(false, b1, 2, 2, 2),
                      *y = tg_cpu_gemm_panels_shared(false, b1, 2, 2, 2);
        ck_assert(x && y);
        ck_assert_ptr_null(tg_cpu_gemm_panels_shared(false, b1, 2, 2, 2));
        x->release(x);
        tg_cpu_shared *z = tg_cpu_gemm_panels_shared(false, b1, 2, 2, 2);
        ck_assert_ptr_nonnull(z);
        y->release(y);
        z->release(z);
        tg_cpu_gemm_shared_b_trim();
    }

    /* shares, 8 at most on 2 threads: one packed product of 1280, 600 or 256 rows, cut fine
     * (blocks of 64 rows or more) or one share per member; a batch of two; attention products
     * (the small path: the most) */
    tg_cpu_gemm_args g = {.batch = 1, .M = 1280, .N = 256, .K = 256};
    /* cut fine only on the packed path, which the instruction-set level decides (below AVX2
     * none; at AVX2 weights of at most 2^18 values; at AVX-512 all: gemm.c) */
#define PK (tg_cpu_gemm_choose(&g, 2) == TG_CPU_GEMM_PACKED)
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), PK ? 8 : 2);
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, false), 2);
    g.M = 600, g.K = 1280;
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), PK ? 8 : 2);
    g.M = 256;
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), PK ? 4 : 2);
    g.M = 100;
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), 2);
    /* a weight gradient (op(A) transposed, K the tokens) is cut along k into one block per
     * member; cut fine, each of those into up to most / nthreads blocks of C of 64 or more rows
     * (where C has more rows than columns) or columns (test_split_k); with too few k per
     * share, by rows */
    g.M = 600, g.trans_a = true;
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), 4); /* 2 blocks of 2^16+ values */
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, false), 2);
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 3, 12, true), PK ? 9 : 3); /* partials too many */
    g.M = 256;
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 3, 12, true), 3); /* 256 × 256: one block */
    g.N = 1024;
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), 8); /* 4 blocks of 256 columns */
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, false), 2);
    g.M = 1024, g.N = 256;
    ck_assert_int_eq(tg_cpu_gemm_split_k_blocks(&g, 4), 4); /* rows */
    g.N = 1024;
    ck_assert_int_eq(tg_cpu_gemm_split_k_blocks(&g, 20), 8); /* 16 of 64 columns: at most 8 */
    g.M = 2048, g.N = 48;
    ck_assert_int_eq(tg_cpu_gemm_split_k_blocks(&g, 8), 1); /* 2^16 values at least */
    g.N = 256;
    g.M = 600, g.K = 300;
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), PK ? 8 : 2);
    g.K = 1280, g.trans_a = false;
    g.M = 1280, g.batch = 2;
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), 2);
    /* one product cut by columns (N > M) whose op(B) is too big to share: cut fine, into
     * blocks of 512 columns or more */
    g = (tg_cpu_gemm_args){.batch = 1, .M = 1024, .N = 8000, .K = 512, .trans_b = true};
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), PK ? 8 : 2);
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, false), 2);
    g.N = 1536;
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, true), PK ? 3 : 2);
    g = (tg_cpu_gemm_args){.batch = 512, .M = 10, .N = 10, .K = 64, .trans_b = true};
    ck_assert_int_eq(tg_cpu_gemm_shares(&g, 2, 8, false), 8);
#undef PK
}
END_TEST

/* C by hand as gemm_split_k.c makes it on n shares: share 0's block of k into C with beta,
 * each other share's into a zeroed temporary with beta 0, added to C in share order. */
static void split_k_by_hand(const tg_cpu_gemm_args *g, int n, float *c) {
    const int64_t kb = (g->K + n - 1) / n;
    float *t = malloc(sizeof(float) * (size_t)(g->M * g->N));
    ck_assert(t);
    for (int i = 0; i < n; i++) {
        const int64_t k0 = i * kb, kl = g->K - k0 < kb ? g->K - k0 : kb;
        tg_cpu_gemm_args s = *g;
        s.K = kl, s.a = g->a + k0 * g->lda, s.b = g->trans_b ? g->b + k0 : g->b + k0 * g->ldb;
        if (i > 0)
            s.beta = 0.0f, s.c = t, s.ldc = g->N;
        else
            s.c = c;
        tg_cpu_gemm_run(&s, packed_or_blas(), 1);
        if (i > 0)
            for (int64_t r = 0; r < g->M; r++)
                for (int64_t j = 0; j < g->N; j++)
                    c[r * g->ldc + j] += t[r * g->N + j];
    }
    free(t);
}

/* op(A)·op(B) of A [as0, as1] and B [bs0, bs1] (transposed as ta says) as a graph on be,
 * its C (n floats) read into out */
static void matmul_graph(tg_backend *be, const float *a, const int64_t as[2], bool ta,
                         const float *b, const int64_t bs[2], float *out, int64_t n) {
    tg_graph *g = tg_graph_new();
    tg_tensor *c = tg_keep(tg_matmul(tg_input(g, TG_DTYPE_F32, 2, as, a),
                                     tg_input(g, TG_DTYPE_F32, 2, bs, b), ta, false));
    ck_assert_int_eq(tg_graph_run(g, be), TG_OK);
    ck_assert_int_eq(tg_tensor_read(c, out, sizeof(float) * (size_t)n), TG_OK);
    tg_graph_free(g);
}

/* A weight gradient in a graph run on n blocks of k (gemm_split_k.c), each cut again into nb
 * blocks of C (rows where C has more rows, else columns; nb 1 uncut): the n·nb shares, run one
 * after another in any order as the graph runner may run them, give the bits of the sum
 * written out by hand, (beta·C + S_0) + S_1 + ..., are right against the double reference,
 * and leave C's padding alone; and a graph's Xᵀ·dY on 2 and 3 threads gives those bits too,
 * on every run, and the 1-thread result to rounding. */
START_TEST(test_split_k) {
    for (int n = 2; n <= 3; n++)
        for (int t = 0; t < 6; t++) {
            const int64_t M = t < 4 ? 96 : 40, N = t < 4 ? 70 : 150, K = 256 * n + 37;
            const float alpha = t & 1 ? -0.5f : 1.0f, beta = t & 2 ? 1.0f : 0.0f;
            problem p = make(1, true, t == 3, M, N, K, alpha, beta, 3, 1, 1, beta == 0.0f);
            ck_assert(tg_cpu_gemm_split_k_fits(&p.g, n));
            float *want = malloc(p.nc * sizeof(float));
            ck_assert(want);
            memcpy(want, p.c0, p.nc * sizeof(float));
            split_k_by_hand(&p.g, n, want);
            memcpy(p.c, want, p.nc * sizeof(float)); /* check() compares p.c with the reference */
            for (int nb = 1; nb <= 3; nb++)
                for (int order = 0; order < 3; order++) {
                    memcpy(p.c, p.c0, p.nc * sizeof(float));
                    tg_cpu_shared *_Atomic slot = NULL;
                    const int shares = n * nb;
                    for (int k = 0; k < shares; k++) {
                        /* ascending, descending, or the odd shares first */
                        const int c = order == 0       ? k
                                      : order == 1     ? shares - 1 - k
                                      : k < shares / 2 ? 2 * k + 1
                                                       : 2 * (k - shares / 2);
                        tg_cpu_par par = {.ith = c, .nth = shares, .shared = &slot, .team_size = n};
                        tg_cpu_gemm_run_par(&p.g, TG_CPU_GEMM_AUTO, &par);
                    }
                    tg_cpu_shared *s = atomic_load(&slot);
                    ck_assert_ptr_nonnull(s);
                    s->release(s);
                    const long at = first_diff(want, p.c, p.nc);
                    if (at >= 0)
                        ck_abort_msg("split k on %d x %d shares (order %d, case %d) differs at "
                                     "C[%ld]",
                                     n, nb, order, t, at);
                }
            /* the composition itself against the double reference (and C's padding) */
            check(&p, ENG_PACKED, 1);
            free(want);
            release(&p);
        }

    /* through a graph: Xᵀ·dY, X [K, M] and dY [K, N] */
    enum { GM = 64, GN = 48, GK = 1100 };
    problem p = make(1, true, false, GM, GN, GK, 1.0f, 0.0f, 0, 1, 1, true);
    float *got = malloc(sizeof(float) * GM * GN), *one = malloc(sizeof(float) * GM * GN),
          *want = malloc(sizeof(float) * GM * GN);
    ck_assert(got && one && want);
    for (int threads = 1; threads <= 3; threads++) {
        tg_backend *be;
        ck_assert_int_eq(tg_backend_cpu_new(threads, &be), TG_OK);
        if (threads > 1) {
            memset(want, 0, sizeof(float) * GM * GN);
            tg_cpu_gemm_args wg = p.g; /* unpadded: lda M, ldb and ldc N */
            wg.c = want;
            split_k_by_hand(&wg, threads, want);
        }
        for (int run = 0; run < 3; run++) {
            const int64_t xs[2] = {GK, GM}, ys[2] = {GK, GN};
            matmul_graph(be, p.a, xs, true, p.b, ys, threads == 1 ? one : got, GM * GN);
            if (threads == 1) break;
            const long at = first_diff(want, got, GM * GN);
            if (at >= 0)
                ck_abort_msg("graph on %d threads, run %d: C[%ld] = %.9g, by hand %.9g", threads,
                             run, at, got[at], want[at]);
        }
        if (threads > 1)
            for (int i = 0; i < GM * GN; i++)
                ck_assert_float_eq_tol(got[i], one[i], 1e-4f * (1.0f + fabsf(one[i])));
        tg_backend_free(be);
    }
    free(got), free(one), free(want);
    release(&p);
}
END_TEST

/* After contended runs (every wait's holder taken to be off its core: cpu.c) a weight gradient
 * of 256 × 512 is cut along k and each block into 2 blocks of columns: the bits by hand; and a
 * product of 128 × 1536 over 512 (op(B) too big to share) into 3 blocks of columns: the bits of
 * an uncontended run. */
START_TEST(test_contended_cuts) {
    enum { CM = 256, CN = 512, CK = 1100, WM = 128, WN = 1536, WK = 512 };
    problem w = make(1, false, false, WM, WN, WK, 1.0f, 0.0f, 0, 1, 1, true);
    float *wplain = malloc(sizeof(float) * WM * WN), *wgot = malloc(sizeof(float) * WM * WN);
    ck_assert(wplain && wgot);
    const int64_t was[2] = {WM, WK}, wbs[2] = {WK, WN};
    tg_backend *plain;
    ck_assert_int_eq(tg_backend_cpu_new(2, &plain), TG_OK);
    matmul_graph(plain, w.a, was, false, w.b, wbs, wplain, WM * WN);
    tg_backend_free(plain);
    problem q = make(1, true, false, CM, CN, CK, 1.0f, 0.0f, 0, 1, 1, true);
    tg_cpu_gemm_args cg = q.g; /* unpadded: lda M, ldb and ldc N */
    ck_assert_int_eq(tg_cpu_gemm_shares(&cg, 2, 8, true), 4);
    float *cwant = calloc(CM * CN, sizeof(float)), *cgot = malloc(sizeof(float) * CM * CN);
    ck_assert(cwant && cgot);
    cg.c = cwant;
    split_k_by_hand(&cg, 2, cwant);
    tg_backend *busy;
    ck_assert_int_eq(tg_backend_cpu_new(2, &busy), TG_OK);
    tg__cpu_all_offcore(busy, true);
    for (int run = 0; run < 4 || (run < 100 && tg__cpu_runner_counts(busy).fine_runs < 2); run++) {
        tg_graph *g = tg_graph_new();
        const int64_t xs[2] = {CK, CM}, ys[2] = {CK, CN};
        /* enough nodes that the run counts as contended (cpu.c: CONTENDED_MIN_NODES) */
        tg_tensor *x = tg_input(g, TG_DTYPE_F32, 2, xs, q.a),
                  *y = tg_input(g, TG_DTYPE_F32, 2, ys, q.b);
        for (int i = 0; i < 16; i++)
            x = tg_scale(x, 1.0f), y = tg_scale(y, 1.0f);
        tg_tensor *c = tg_keep(tg_matmul(x, y, true, false));
        tg_tensor *wc = tg_keep(tg_matmul(tg_input(g, TG_DTYPE_F32, 2, was, w.a),
                                          tg_input(g, TG_DTYPE_F32, 2, wbs, w.b), false, false));
        tg_graph_set_fusion(g, false);
        ck_assert_int_eq(tg_graph_run(g, busy), TG_OK);
        ck_assert_int_eq(tg_tensor_read(c, cgot, sizeof(float) * CM * CN), TG_OK);
        ck_assert_int_eq(tg_tensor_read(wc, wgot, sizeof(float) * WM * WN), TG_OK);
        tg_graph_free(g);
        long at = first_diff(cwant, cgot, CM * CN);
        if (at >= 0)
            ck_abort_msg("contended run %d (%lld cut fine): C[%ld] = %.9g, by hand %.9g", run,
                         (long long)tg__cpu_runner_counts(busy).fine_runs, at, cgot[at], cwant[at]);
        at = first_diff(wplain, wgot, WM * WN);
        if (at >= 0)
            ck_abort_msg("contended run %d (%lld cut fine), by columns: C[%ld] = %.9g, plain %.9g",
                         run, (long long)tg__cpu_runner_counts(busy).fine_runs, at, wgot[at], wplain[at]);
    }
    ck_assert_int_ge(tg__cpu_runner_counts(busy).fine_runs, 2);
    tg_backend_free(busy);
    free(cwant), free(cgot), free(wplain), free(wgot);
    release(&q);
    release(&w);
}
END_TEST

/* The packed path's micro-kernel on packed panels: every k remainder (kc = 0..9, and 256),
 * storing or adding to C, against a double reference; columns of C past the tile untouched. */
START_TEST(test_packed_kernel) {
    if (!tg_cpu_gemm_packed_available()) return; /* the path then runs OpenBLAS: tested above */
    enum { LDC = 20 };
    float *a = aligned_alloc(32, 6 * 256 * sizeof(float)),
          *b = aligned_alloc(32, 16 * 256 * sizeof(float));
    ck_assert(a && b);
    static const int64_t kcs[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 256};
    for (int ki = 0; ki < 11; ki++)
        for (int add = 0; add < 2; add++) {
            const int64_t kc = kcs[ki];
            float c[6 * LDC], c0[6 * LDC];
            for (int64_t x = 0; x < 6 * kc; x++)
                a[x] = frand();
            for (int64_t x = 0; x < 16 * kc; x++)
                b[x] = frand();
            for (int x = 0; x < 6 * LDC; x++)
                c[x] = c0[x] = frand();
            tg_cpu_gemm_packed_kernel(1, kc, a, 0, false, b, c, LDC, add);
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < LDC; j++) {
                    double s = add && j < 16 ? c0[i * LDC + j] : 0.0, mag = fabs(s);
                    for (int64_t p = 0; p < kc && j < 16; p++) {
                        s += (double)a[p * 6 + i] * b[p * 16 + j];
                        mag += fabs((double)a[p * 6 + i] * b[p * 16 + j]);
                    }
                    const double want = j < 16 ? s : c0[i * LDC + j];
                    if (!(fabs(c[i * LDC + j] - want) <= 1e-5 * sqrt((double)kc + 1) * mag + 1e-30))
                        ck_abort_msg("kernel kc %lld add %d: C[%d][%d] = %.9g, want %.9g",
                                     (long long)kc, add, i, j, c[i * LDC + j], want);
                }
        }
    free(a), free(b);
}
END_TEST

/* The 6×32 kernel (two 16-column panels, 512-bit FMAs where the CPU has AVX-512) gives the bits
 * of the 6×16 kernel on each half, for every k remainder, storing or adding, columns past the
 * tile untouched; and the packed path's blocks give the same bits with it and without it. */
START_TEST(test_packed_kernel2) {
    if (tg_cpu_isa() < TG_CPU_ISA_AVX512) { /* the kernel is 512-bit code */
        printf("test_packed_kernel2: skipped at the %s level (it needs avx512)\n",
               tg_cpu_isa_level_name(tg_cpu_isa()));
        return;
    }
    enum { LDC = 36 };
    float *a = aligned_alloc(64, 6 * 256 * sizeof(float)),
          *b = aligned_alloc(64, 32 * 256 * sizeof(float));
    ck_assert(a && b);
    static const int64_t kcs[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 256};
    for (int ki = 0; ki < 11; ki++)
        for (int add = 0; add < 2; add++) {
            const int64_t kc = kcs[ki];
            float c[6 * LDC], want[6 * LDC];
            for (int64_t x = 0; x < 6 * kc; x++)
                a[x] = frand();
            for (int64_t x = 0; x < 32 * kc; x++)
                b[x] = frand();
            for (int x = 0; x < 6 * LDC; x++)
                c[x] = want[x] = frand();
            tg_cpu_gemm_packed_kernel(2, kc, a, 0, false, b, c, LDC, add);
            tg_cpu_gemm_packed_kernel(1, kc, a, 0, false, b, want, LDC, add);
            tg_cpu_gemm_packed_kernel(1, kc, a, 0, false, b + 16 * kc, want + 16, LDC, add);
            const long at = first_diff(want, c, 6 * LDC);
            if (at >= 0)
                ck_abort_msg("6x32 kernel kc %lld add %d: C[%ld] = %.9g, 6x16 kernels %.9g",
                             (long long)kc, add, at, c[at], want[at]);
        }
    free(a), free(b);
    /* whole products: 6×32 tiles with edges in every direction, each transpose of op(B) */
    for (int tb = 0; tb < 2; tb++) {
        problem p = make(1, false, tb, 100, 530, 300, 1.0f, 0.0f, 2, 1, 1, true);
        check(&p, ENG_PACKED, 1);
        float *ref = malloc(p.nc * sizeof(float));
        ck_assert(ref);
        memcpy(ref, p.c, p.nc * sizeof(float));
        const tg_cpu_isa_level had = tg_cpu_isa(); /* the reference ran at this level */
        tg__cpu_isa_cap(had < TG_CPU_ISA_AVX2 ? had : TG_CPU_ISA_AVX2);
        check(&p, ENG_PACKED, 2);
        tg__cpu_isa_cap(had);
        const long at = first_diff(ref, p.c, p.nc);
        if (at >= 0)
            ck_abort_msg("packed path with%s the 6x32 kernel differs (C[%ld])",
                         had >= TG_CPU_ISA_AVX512 ? "" : "out", at);
        free(ref);
        release(&p);
    }
}
END_TEST

/* The 6×32 kernel reading op(A) in place — row-major (rows lda apart) or transposed (six values
 * of each of A's rows), NaN around — gives the bits of the same kernel on A packed into a
 * panel, for every k remainder, storing or adding; the three 6×64 kernels (four panels: packed
 * A, and A in place both ways) give the bits of two 6×32 calls, columns past the tile
 * untouched; and whole products on the packed path —
 * each op(A) (transposed: rows up to 1 KiB apart in place, 2.4 KiB packed), N a multiple of 32,
 * K over one block (the in-place rows start at pc), rows not a multiple of 6 (the packed edge
 * panel), each op(B), on 1 and 2 threads — give the same bits with it and without it. */
START_TEST(test_packed_rowa) {
    if (!tg_cpu_gemm_packed_available() || !tg_cpu_gemm_packed_is_wide()) return;
    enum { LDC = 70, LDA = 261 };
    float *a = malloc(6 * LDA * sizeof(float)), *ap = aligned_alloc(64, 6 * 256 * sizeof(float)),
          *b = aligned_alloc(64, 64 * 256 * sizeof(float)),
          *at_ = malloc(256 * LDA * sizeof(float));
    ck_assert(a && ap && b && at_);
    static const int64_t kcs[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 256};
    for (int ki = 0; ki < 11; ki++)
        for (int add = 0; add < 2; add++) {
            const int64_t kc = kcs[ki];
            float c[6 * LDC], want[6 * LDC];
            for (int64_t x = 0; x < 6 * LDA; x++)
                a[x] = NAN;
            for (int64_t i = 0; i < 6; i++)
                for (int64_t q = 0; q < kc; q++)
                    ap[q * 6 + i] = a[i * LDA + q] = frand();
            for (int64_t x = 0; x < 64 * kc; x++)
                b[x] = frand();
            for (int x = 0; x < 6 * LDC; x++)
                c[x] = want[x] = frand();
            float ct[6 * LDC];
            memcpy(ct, c, sizeof c);
            tg_cpu_gemm_packed_kernel(2, kc, a, LDA, false, b, c, LDC, add);
            /* the same op(A) transposed: value p of row i at at_[p·LDA + i], NaN around */
            for (int64_t x = 0; x < 256 * LDA; x++)
                at_[x] = NAN;
            for (int64_t i = 0; i < 6; i++)
                for (int64_t q = 0; q < kc; q++)
                    at_[q * LDA + 3 + i] = a[i * LDA + q];
            tg_cpu_gemm_packed_kernel(2, kc, at_ + 3, LDA, true, b, ct, LDC, add);
            tg_cpu_gemm_packed_kernel(2, kc, ap, 0, false, b, want, LDC, add);
            for (int tr = 0; tr < 2; tr++) {
                const float *got = tr ? ct : c;
                const long at = first_diff(want, got, 6 * LDC);
                if (at >= 0)
                    ck_abort_msg("6x32 kernel on %s A in place, kc %lld add %d: C[%ld] = %.9g, on "
                                 "a packed panel %.9g",
                                 tr ? "transposed" : "row-major", (long long)kc, add, at, got[at],
                                 want[at]);
            }
            float c4[3][6 * LDC];
            for (int x = 0; x < 6 * LDC; x++)
                c4[0][x] = c4[1][x] = c4[2][x] = want[x] = frand();
            tg_cpu_gemm_packed_kernel(4, kc, ap, 0, false, b, c4[0], LDC, add);
            tg_cpu_gemm_packed_kernel(4, kc, a, LDA, false, b, c4[1], LDC, add);
            tg_cpu_gemm_packed_kernel(4, kc, at_ + 3, LDA, true, b, c4[2], LDC, add);
            tg_cpu_gemm_packed_kernel(2, kc, ap, 0, false, b, want, LDC, add);
            tg_cpu_gemm_packed_kernel(2, kc, ap, 0, false, b + 32 * kc, want + 32, LDC, add);
            static const char *const how[] = {"a packed panel", "row-major A in place",
                                              "transposed A in place"};
            for (int v = 0; v < 3; v++) {
                const long at = first_diff(want, c4[v], 6 * LDC);
                if (at >= 0)
                    ck_abort_msg("6x64 kernel on %s, kc %lld add %d: C[%ld] = %.9g, 6x32 kernels "
                                 "%.9g",
                                 how[v], (long long)kc, add, at, c4[v][at], want[at]);
            }
        }
    free(a), free(ap), free(b), free(at_);
    static const int64_t shapes[][3] = {
        {100, 512, 300}, {251, 96, 40}, {7, 64, 513}, {600, 544, 256}};
    for (int si = 0; si < 4; si++)
        for (int t = 0; t < 8; t++) {
            const bool tb = t & 1, ta = t & 4;
            const float beta = t & 2 ? 1.0f : 0.0f;
            problem p = make(1, ta, tb, shapes[si][0], shapes[si][1], shapes[si][2], 1.0f, beta, 3,
                             1, 1, beta == 0.0f);
            float *ref = packed_same_bits(&p, 2); /* in place (the default), checked */
            tg__cpu_stats.gemm.no_inplace_a = true;
            for (int nt = 1; nt <= 2; nt++) {
                check(&p, ENG_PACKED, nt);
                const long at = first_diff(ref, p.c, p.nc);
                if (at >= 0)
                    ck_abort_msg("packed path %lldx%lldx%lld (op(A) %s, op(B) %s) with A in "
                                 "place and packed differ at %d threads (C[%ld])",
                                 (long long)shapes[si][0], (long long)shapes[si][1],
                                 (long long)shapes[si][2], ta ? "T" : "N", tb ? "T" : "N", nt, at);
            }
            tg__cpu_stats.gemm.no_inplace_a = false;
            free(ref);
            release(&p);
        }
}
END_TEST

/* Two batch levels (tg_cpu_gemm_batched2): the heads of [Bo, n, h, dk] tensors, as attention
 * reads them through strided views: product (o, i) = sequence o, head i; rows of every
 * operand h·width floats apart. Also an outer stride 0 (one matrix per head, shared by all
 * sequences). Reference computed here with explicit index arithmetic. */
/* The small path's AVX-512 kernel (tiles up to 64 columns wide; 16- and 32-column panels in tiles
 * of up to 12 rows) against its AVX2 one (16): the same bits for every transpose, panel widths
 * around 16, 32, 48 and 64 and beyond, partial rows, 1 to 25 rows, K past one chunk of k (256),
 * alpha and beta, padded C (which neither writes); each also against the double reference (check).
 * Only where the CPU has AVX-512F. */
START_TEST(test_small_wide) {
    if (tg_cpu_isa() < TG_CPU_ISA_AVX512) return;
    static const int64_t ms[] = {1, 6, 7, 10, 12, 13, 25},
                         ns[] = {1, 8, 10, 16, 17, 33, 48, 64, 130};
    static const int64_t ks[] = {1, 10, 64, 300};
    for (int t = 0; t < 4; t++)
        for (int im = 0; im < 7; im++)
            for (int in = 0; in < 9; in++)
                for (int ik = 0; ik < 4; ik++) {
                    const float beta = (im + in + ik) % 2 ? 0.5f : 0.0f;
                    problem p =
                        make(3, t & 1, t & 2, ms[im], ns[in], ks[ik], 0.75f, beta, 3, 1, 1, false);
                    check(&p, ENG_SMALL, 1);
                    float *wide = malloc(p.nc * sizeof(float));
                    ck_assert(wide);
                    memcpy(wide, p.c, p.nc * sizeof(float));
                    tg__cpu_isa_cap(TG_CPU_ISA_AVX2);
                    check(&p, ENG_SMALL, 1);
                    tg__cpu_isa_cap(TG_CPU_ISA_AVX512);
                    const long at = first_diff(p.c, wide, p.nc);
                    if (at >= 0)
                        ck_abort_msg("small path %s%s %lldx%lldx%lld: AVX-512 and AVX2 differ at "
                                     "C[%ld]",
                                     t & 1 ? "T" : "N", t & 2 ? "T" : "N", (long long)ms[im],
                                     (long long)ns[in], (long long)ks[ik], at);
                    free(wide);
                    release(&p);
                }
}
END_TEST

/* The small path's dot-product kernel for Q·Kᵀ over fewer than 16 keys, or of one or two query
 * rows over any number of keys (K 8, 16, 32, 64): against the double reference for every key
 * count 1..17 and 31, 64, 98 (from 16 keys the tiles, but for 1 and 2 rows), 1, 2, 3, 10 and 11
 * query rows (odd: a row without a partner), alpha 1 / beta 0 and alpha 0.75 / beta 0.5, padded
 * rows (NaN between them: a read past K shows) and padded C (neither written), on 1 and 2 threads;
 * the same bits with the AVX-512 switch off and on (both run this AVX2 kernel); the tiles, switched
 * back, checked too. And a product the kernel does not take (K 48) still right. */
START_TEST(test_small_dot) {
    static const int64_t ks[] = {8, 16, 32, 64}, ms[] = {1, 2, 3, 10, 11}, far[] = {31, 64, 98};
    int wide_dot[4] = {0};
    for (int ik = 0; ik < 4; ik++)
        for (int in = 0; in < 20; in++)
            for (int im = 0; im < 5; im++) {
                const int64_t n = in < 17 ? in + 1 : far[in - 17];
                const bool plain = (n + im) % 2 == 0;
                problem p = make(5, false, true, ms[im], n, ks[ik], plain ? 1.0f : 0.75f,
                                 plain ? 0.0f : 0.5f, 3, 1, 1, plain);
                check(&p, ENG_SMALL, 1 + (int)(n % 2));
                float *got = malloc(p.nc * sizeof(float));
                ck_assert(got);
                memcpy(got, p.c, p.nc * sizeof(float));
                const tg_cpu_isa_level had = tg_cpu_isa();
                tg__cpu_isa_cap(had < TG_CPU_ISA_AVX2 ? had : TG_CPU_ISA_AVX2);
                check(&p, ENG_SMALL, 1);
                tg__cpu_isa_cap(had);
                const long at = first_diff(got, p.c, p.nc);
                if (at >= 0)
                    ck_abort_msg(
                        "small path NT %lldx%lldx%lld: AVX-512 on and off differ at C[%ld]",
                        (long long)ms[im], (long long)n, (long long)ks[ik], at);
                tg__cpu_stats.gemm.no_small_dot = true;
                check(&p, ENG_SMALL, 2);
                tg__cpu_stats.gemm.no_small_dot = false;
                /* which kernel took the product: the two sum in different orders, so the dot
                 * products' bits differ from the tiles' somewhere in most products */
                const bool dot = n < 16 || ms[im] <= 2, differ = first_diff(got, p.c, p.nc) >= 0;
                ck_assert_msg(dot || !differ, "NT %lldx%lldx%lld: the dot kernel took it",
                              (long long)ms[im], (long long)n, (long long)ks[ik]);
                if (dot && n >= 16 && differ) wide_dot[ik]++;
                free(got);
                release(&p);
            }
    const bool vector = tg_cpu_isa() >= TG_CPU_ISA_AVX2; /* the portable kernel has no dot form */
    if (!vector) printf("test_small_dot: which kernel took each product: skipped (portable)\n");
    for (int ik = 0; ik < 4 && vector; ik++) /* of 10: 1 and 2 rows × 16, 17, 31, 64, 98 keys */
        ck_assert_msg(wide_dot[ik] >= 5,
                      "K %lld: the dot kernel took %d products of 1-2 rows over 16+ keys",
                      (long long)ks[ik], wide_dot[ik]);
    problem p = make(3, false, true, 10, 10, 48, 1.0f, 0.0f, 3, 1, 1, true);
    check(&p, ENG_SMALL, 2);
    release(&p);
}
END_TEST

/* Kept operands (gemm.h: tg_cpu_gemm_keep_b): a product whose op(B) is kept reads the kept
 * panels — the bits of the same product packing it itself, on 1 and 2 threads, for B and Bᵀ,
 * shapes with one or several blocks of columns and of k; holders are counted, and the last
 * drop frees it (products then pack again). A product cut by columns reads only its columns'
 * panels (gemm.c: split_product). */
START_TEST(test_kept_b) {
    /* cut by rows sharing op(B) (the first three, at 2 threads), or by columns (N > M): an op(B)
     * too big to share (600 × 1,100; a vocabulary's 7,816 × 128), whose second block starts
     * inside a block of the kept panels at 2 threads (columns 576 and 3,968) */
    static const int64_t shapes[][3] = {
        {64, 512, 128}, {96, 600, 300}, {250, 37, 600}, {40, 1100, 600}, {64, 7816, 128}};
    if (!tg_cpu_gemm_packed_available()) return;
    ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 0);
    for (int si = 0; si < 5; si++)
        for (int tb = 0; tb <= 1; tb++) {
            const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
            const int64_t ldb = tb ? K : N;
            float *a = malloc(sizeof(float) * (size_t)(M * K)),
                  *b = malloc(sizeof(float) * (size_t)(N * K));
            float *ref = malloc(sizeof(float) * (size_t)(M * N)),
                  *c = malloc(sizeof(float) * (size_t)(M * N));
            for (int64_t i = 0; i < M * K; i++)
                a[i] = (float)((i * 37) % 101 - 50) / 64.0f;
            for (int64_t i = 0; i < N * K; i++)
                b[i] = (float)((i * 53) % 97 - 48) / 32.0f;
            tg_cpu_gemm_batched(1, false, tb, M, N, K, 1.0f, a, K, 0, b, ldb, 0, 0.0f, ref, N, 0,
                                2);
            ck_assert(tg_cpu_gemm_keep_b(tb, b, ldb, N, K));
            ck_assert(tg_cpu_gemm_keep_b(tb, b, ldb, N, K)); /* a second holder */
            ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 1);
            for (int th = 1; th <= 2; th++) {
                const int hits = atomic_load(&tg__cpu_stats.gemm.kept_hits);
                memset(c, 0, sizeof(float) * (size_t)(M * N));
                tg_cpu_gemm_batched(1, false, tb, M, N, K, 1.0f, a, K, 0, b, ldb, 0, 0.0f, c, N, 0,
                                    th);
                ck_assert_msg(memcmp(c, ref, sizeof(float) * (size_t)(M * N)) == 0,
                              "%lldx%lldx%lld tb %d, %d threads: the kept op(B) gives other bits",
                              (long long)M, (long long)N, (long long)K, tb, th);
                /* only the packed path reads kept panels, on any number of threads (gemm.c: at
                 * the AVX2 level it leaves weights over 2^18 values to OpenBLAS) */
                const tg_cpu_gemm_args q = {.batch = 1, .M = M, .N = N, .K = K, .trans_b = tb};
                if (tg_cpu_gemm_choose(&q, th) == TG_CPU_GEMM_PACKED)
                    ck_assert_int_gt(atomic_load(&tg__cpu_stats.gemm.kept_hits), hits);
            }
            tg_cpu_gemm_drop_b(tb, b, ldb, N, K);
            ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 1);
            tg_cpu_gemm_drop_b(tb, b, ldb, N, K);
            ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept), 0);
            const int hits = atomic_load(&tg__cpu_stats.gemm.kept_hits);
            tg_cpu_gemm_batched(1, false, tb, M, N, K, 1.0f, a, K, 0, b, ldb, 0, 0.0f, c, N, 0, 2);
            ck_assert_int_eq(atomic_load(&tg__cpu_stats.gemm.kept_hits), hits);
            ck_assert(memcmp(c, ref, sizeof(float) * (size_t)(M * N)) == 0);
            free(a), free(b), free(ref), free(c);
        }
}
END_TEST

START_TEST(test_two_level_batch) {
    const int64_t Bo = 5, h = 3;
    static const int64_t shapes[][3] = {{10, 10, 16}, {32, 16, 32}, {7, 33, 9}, {150, 140, 130}};
    for (int si = 0; si < 4; si++)
        for (int t = 0; t < 4; t++)
            for (int bcast = 0; bcast < 2; bcast++) {
                const bool ta = t & 1, tb = t & 2;
                const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
                const int64_t ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N;
                const int64_t lda = h * ca, ldb = h * cb, ldc = h * N;
                const int64_t osa = ra * lda, osb = bcast ? 0 : rb * ldb, osc = M * ldc;
                float *a = malloc(sizeof(float) * (size_t)(Bo * osa));
                float *b = malloc(sizeof(float) * (size_t)(Bo * rb * ldb));
                float *c = malloc(sizeof(float) * (size_t)(Bo * osc));
                ck_assert(a && b && c);
                for (int64_t x = 0; x < Bo * osa; x++)
                    a[x] = frand();
                for (int64_t x = 0; x < Bo * rb * ldb; x++)
                    b[x] = frand();
                for (int64_t x = 0; x < Bo * osc; x++)
                    c[x] = NAN;
                tg_cpu_gemm_batched2(Bo, osa, osb, osc, h, ta, tb, M, N, K, 1.0f, a, lda, ca, b,
                                     ldb, cb, 0.0f, c, ldc, N, 2);
                const double tol = 1e-5 * sqrt((double)K);
                for (int64_t o = 0; o < Bo; o++)
                    for (int64_t hi = 0; hi < h; hi++)
                        for (int64_t i = 0; i < M; i++)
                            for (int64_t j = 0; j < N; j++) {
                                double s = 0.0, mag = 0.0;
                                for (int64_t p = 0; p < K; p++) {
                                    double av = ta ? a[o * osa + p * lda + hi * ca + i]
                                                   : a[o * osa + i * lda + hi * ca + p];
                                    double bv = tb ? b[o * osb + j * ldb + hi * cb + p]
                                                   : b[o * osb + p * ldb + hi * cb + j];
                                    s += av * bv;
                                    mag += fabs(av * bv);
                                }
                                double got = c[o * osc + i * ldc + hi * N + j];
                                if (!(fabs(got - s) <= tol * mag + 1e-30))
                                    ck_abort_msg("batched2 %s%s %lldx%lldx%lld bcast %d: C(%lld,"
                                                 "%lld)[%lld][%lld] = %.9g, reference %.9g",
                                                 ta ? "T" : "N", tb ? "T" : "N", (long long)M,
                                                 (long long)N, (long long)K, bcast, (long long)o,
                                                 (long long)hi, (long long)i, (long long)j, got, s);
                            }
                free(a), free(b), free(c);
            }
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("gemm");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_transposes);
    tcase_add_test(tc, test_odd_sizes);
    tcase_add_test(tc, test_tile_edges);
    tcase_add_test(tc, test_broadcast);
    tcase_add_test(tc, test_beta_accumulate);
    tcase_add_test(tc, test_beta0_nan);
    tcase_add_test(tc, test_padding);
    tcase_add_test(tc, test_large_blas);
    tcase_add_test(tc, test_long_k);
    tcase_add_test(tc, test_path_rule);
    tcase_add_test(tc, test_degenerate);
    tcase_add_test(tc, test_deterministic);
    tcase_add_test(tc, test_two_level_batch);
    tcase_add_test(tc, test_packed_blocks);
    tcase_add_test(tc, test_packed_kernel);
    tcase_add_test(tc, test_packed_shared);
    tcase_add_test(tc, test_kept_b);
    tcase_add_test(tc, test_split_k);
    tcase_add_test(tc, test_contended_cuts);
    tcase_add_test(tc, test_packed_kernel2);
    tcase_add_test(tc, test_packed_rowa);
    tcase_add_test(tc, test_small_wide);
    tcase_add_test(tc, test_small_dot);
    suite_add_tcase(s, tc);
    return s;
}
