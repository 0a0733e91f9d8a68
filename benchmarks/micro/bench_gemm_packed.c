/* bench_gemm_packed: the packed path of the CPU GEMM (backends/cpu/gemm_packed.c) against
 * OpenBLAS, one thread each, on the projections of these models.
 *
 *   bench_gemm_packed [rounds]      (default 5)
 *
 * tg_cpu_gemm_packed_block() — our packed GEMM: op(B) packed into 16-column panels KC = 256
 * values of k at a time, op(A) into 6-row panels up to 144 rows at a time, inline-assembly
 * micro-kernels (6×16; where the CPU has AVX-512F 6×64 and 6×32) — against OpenBLAS's cblas_sgemm
 * on one thread, at the shapes one member of a 2-thread team gets in g2p-small and nmt-small
 * (tokens / 2 rows; dX = dY·Wᵀ; dW = Xᵀ·dY over half the tokens where the graph runner cuts it
 * along k (backends/cpu/gemm_split_k.c: the projections' and g2p's feed-forward weight
 * gradients), else half its rows; the nmt logits over a vocabulary of 8000 and their gradients). If
 * BLIS is installed (Debian libblis4: libblis.so.4), its cblas_sgemm is timed too, loaded with
 * dlopen, as the reference of a tuned packed implementation. Each micro-kernel alone (operands in
 * L1/L2, no packing, no C traffic) is timed first: what the loop nest around them loses is the
 * rest.
 *
 * Every contender runs in turn within each round (interleaved, so the machine's noise hits all
 * alike); a timing repeats the call for ~30 ms. Printed: GFLOP/s (2·M·N·K per call) of the
 * median round, the ratios to OpenBLAS, and which path tgraph's rule (tg_cpu_gemm_choose)
 * gives each product ("packed": this GEMM, "blas": OpenBLAS). Results are checked against
 * OpenBLAS first (largest difference < 1e-4 of the largest value). */
#include "backends/cpu/gemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MR = 6, NR = 16, KC = 256 };

void openblas_set_num_threads(int);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int,
                         int, float, const float *, int, const float *, int, float, float *, int);
static sgemm_fn blis_sgemm;

typedef struct {
    const char *name;
    long M, N, K;
    bool ta, tb;
} shape;

static const float *A, *B;
static float *C;

static void call(int who, const shape *s) {
    long lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    if (who == 1) {
        if (!tg_cpu_gemm_packed_block(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C,
                                      s->N, NULL, 0))
            abort(); /* checked available in main */
        return;
    }
    sgemm_fn f = who == 0 ? (sgemm_fn)cblas_sgemm : blis_sgemm;
    f(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
      (int)s->M, (int)s->N, (int)s->K, 1.0f, A, (int)lda, B, (int)ldb, 0.0f, C, (int)s->N);
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static float *abuf, *bbuf;

/* Seconds per call of a micro-kernel alone, 16·w columns wide (w panels: 1 the 6×16 kernel,
 * 2 and 4 the 512-bit 6×32 and 6×64 ones): 20 A panels (L2) against w B panels (L1; four are
 * 64 KiB, which L2 holds where L1 does not). */
static double kernel_alone(int w) {
    float t[MR * 4 * NR];
    double t0 = now();
    long calls = 0;
    do {
        for (int r = 0; r < 20; r++) {
            const float *a = abuf + r * MR * KC;
            tg_cpu_gemm_packed_kernel(w, KC, a, 0, false, bbuf, t, w * NR, false);
        }
        calls += 20;
    } while (now() - t0 < 0.03);
    return (now() - t0) / (double)calls;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1) rounds = 1;
    if (!tg_cpu_gemm_packed_available()) {
        printf("bench_gemm_packed: the packed path needs x86-64 with AVX2 and FMA; nothing "
               "measured\n");
        return 0;
    }
    openblas_set_num_threads(1);
    void *blis = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
    if (blis) blis_sgemm = (sgemm_fn)dlsym(blis, "cblas_sgemm");
    const shape shapes[] = {
        {"g2p fwd  XW", 640, 256, 256, 0, 0},    {"g2p ffn1 XW", 640, 1024, 256, 0, 0},
        {"g2p ffn2 XW", 640, 256, 1024, 0, 0},   {"g2p dX  dYWt", 640, 256, 1024, 0, 1},
        {"g2p dX  dYWt", 640, 1024, 256, 0, 1},  {"g2p dW  XtdY", 256, 256, 640, 1, 0},
        {"g2p dW  XtdY", 256, 1024, 640, 1, 0},  {"g2p dW  XtdY", 1024, 256, 640, 1, 0},
        {"nmt fwd  XW", 512, 512, 512, 0, 0},    {"nmt ffn1 XW", 512, 2048, 512, 0, 0},
        {"nmt dX  dYWt", 512, 512, 2048, 0, 1},  {"nmt dW  XtdY", 512, 512, 512, 1, 0},
        {"nmt logits", 512, 8000, 512, 0, 1},    {"nmt dX logits", 512, 512, 8000, 0, 0},
        {"nmt dEmb", 8000, 512, 512, 1, 0},      {"1024 fwd XW", 640, 1024, 1024, 0, 0},
        {"1024 dX dYWt", 640, 1024, 1024, 0, 1}, {"1024 dW XtdY", 512, 1024, 1280, 1, 0},
    };
    const int ns = (int)(sizeof shapes / sizeof *shapes), nc = blis_sgemm ? 3 : 2;
    size_t big = (size_t)1 << 23; /* floats: every operand of every shape fits */
    float *a = malloc(big * 4), *b = malloc(big * 4), *ref = malloc(big * 4);
    C = malloc(big * 4);
    abuf = aligned_alloc(64, 20 * MR * KC * sizeof(float));
    bbuf = aligned_alloc(64, 4 * NR * KC * sizeof(float));
    if (!a || !b || !ref || !C || !abuf || !bbuf) return 1;
    for (size_t i = 0; i < big; i++)
        a[i] = (float)(i % 13) * 0.1f - 0.6f, b[i] = (float)(i % 7) * 0.1f - 0.3f;
    for (size_t i = 0; i < 20 * MR * KC; i++)
        abuf[i] = 0.01f * (float)(i % 17);
    for (size_t i = 0; i < 4 * NR * KC; i++)
        bbuf[i] = 0.01f * (float)(i % 19);
    A = a, B = b;

    printf("bench_gemm_packed: ONE thread; OpenBLAS cblas_sgemm (1 thread) against tgraph's packed "
           "GEMM (tg_cpu_gemm_packed_block)%s; median of %d interleaved rounds of ~30 ms\n",
           blis_sgemm ? " and BLIS (libblis.so.4)" : " (BLIS not installed)", rounds);
    for (int s = 0; s < ns; s++) { /* correctness first */
        long mn = shapes[s].M * shapes[s].N;
        call(0, &shapes[s]);
        memcpy(ref, C, (size_t)mn * 4);
        for (int w = 1; w < nc; w++) {
            call(w, &shapes[s]);
            double e = 0, m = 0;
            for (long i = 0; i < mn; i++)
                e = fmax(e, fabs(C[i] - ref[i])), m = fmax(m, fabs(ref[i]));
            if (e > 1e-4 * m) {
                fprintf(stderr, "bench_gemm_packed: %s contender %d differs (%g of %g)\n",
                        shapes[s].name, w, e, m);
                return 1;
            }
        }
    }
    const int nk = tg_cpu_gemm_packed_is_wide() ? 3 : 1; /* kernels timed alone: 1, 2, 4 panels */
    double *kt = malloc(sizeof(double) * (size_t)(3 * rounds)),
           *t = malloc(sizeof(double) * (size_t)(ns * 3 * rounds));
    for (int r = 0; r < rounds; r++) {
        for (int w = 0; w < nk; w++)
            kt[w * rounds + r] = kernel_alone(1 << w);
        for (int s = 0; s < ns; s++)
            for (int w = 0; w < nc; w++) {
                double t0 = now();
                long calls = 0;
                do
                    call(w, &shapes[s]), calls++;
                while (now() - t0 < 0.03);
                t[(s * 3 + w) * rounds + r] = (now() - t0) / (double)calls;
            }
    }
    for (int w = 0; w < nk; w++) {
        double *v = kt + w * rounds;
        qsort(v, (size_t)rounds, sizeof *v, cmp);
        printf("micro-kernel 6x%d alone (A panels in L2, B panels in L1 or L2, no packing): %.1f "
               "GFLOP/s\n",
               NR << w, 2.0 * MR * (NR << w) * KC / v[rounds / 2] * 1e-9);
    }
    printf("%-13s %5s %5s %5s  %s  %-6s  %8s %8s %8s  %7s %7s\n", "product", "M", "N", "K", "op",
           "rule", "OpenBLAS", "packed", "BLIS", "pk/OB", "BLIS/OB");
    double lr[2] = {0, 0}, lr_rule = 0;
    int n_rule = 0;
    for (int s = 0; s < ns; s++) {
        const shape *x = &shapes[s];
        double g[3] = {0, 0, 0};
        for (int w = 0; w < nc; w++) {
            double *v = t + (s * 3 + w) * rounds;
            qsort(v, (size_t)rounds, sizeof *v, cmp);
            g[w] = 2.0 * x->M * x->N * x->K / v[rounds / 2] * 1e-9;
        }
        for (int w = 1; w < nc; w++)
            lr[w - 1] += log(g[w] / g[0]);
        /* the path tgraph's rule (backends/cpu/gemm.c) gives this product */
        const tg_cpu_gemm_args ga = {
            .batch = 1, .M = x->M, .N = x->N, .K = x->K, .trans_a = x->ta, .trans_b = x->tb};
        const bool packed = tg_cpu_gemm_choose(&ga, 1) == TG_CPU_GEMM_PACKED;
        if (packed) lr_rule += log(g[1] / g[0]), n_rule++;
        printf("%-13s %5ld %5ld %5ld  %c%c  %-6s  %8.1f %8.1f %8.1f  %7.2f %7.2f\n", x->name, x->M,
               x->N, x->K, x->ta ? 'T' : 'N', x->tb ? 'T' : 'N', packed ? "packed" : "blas", g[0],
               g[1], g[2], g[1] / g[0], nc > 2 ? g[2] / g[0] : 0.0);
    }
    printf("geometric mean: packed / OpenBLAS %.2f", exp(lr[0] / ns));
    if (nc > 2) printf(", BLIS / OpenBLAS %.2f", exp(lr[1] / ns));
    if (n_rule)
        printf("; packed / OpenBLAS on the %d products the rule gives the packed path %.2f", n_rule,
               exp(lr_rule / n_rule));
    printf(" (GFLOP/s, 2·M·N·K per call)\n");
    return 0;
}
