/* bench_gemm: the CPU GEMM engine (backends/cpu/gemm.c) against raw OpenBLAS on
 * Transformer-shaped products.
 *
 *   bench_gemm [seconds-per-timing [filter]]
 *
 * (default 0.02 s per timing; 2 threads, 9 rounds; filter: run only the rows whose kind
 * starts with it, e.g. "proj", "attn" or "heads")
 *
 * Projections (batch 1): Y = X·W with X 1280×K, W K×N, and the two backward products
 * dX = dY·Wᵀ (trans_b) and dW = Xᵀ·dY (trans_a). Peer: ONE cblas_sgemm call with OpenBLAS
 * on 2 threads of its own. Ours: tg_cpu_gemm_batched(nthreads = 2), OpenBLAS on 1 thread.
 *
 * Attention ("attn", batch = B·h contiguous products of n×n and n×dk matrices): scores Q·Kᵀ
 * ([n×dk]·[dk×n], trans_b), context P·V ([n×n]·[n×dk]) and the backward dV = Pᵀ·dO
 * ([n×n]ᵀ·[n×dk], trans_a). Peer: a plain loop of cblas_sgemm calls over the batch with
 * OpenBLAS on 2 threads; also shown ("omp loop"): the same calls shared over 2 OpenMP threads,
 * OpenBLAS on 1. "heads" rows: the same products as a model makes them, the heads of
 * [B, n, h, dk] tensors read through strided views (rows h·dk apart), one
 * tg_cpu_gemm_batched2() call for all B·h products.
 *
 * Every contender is timed in turn within each round (interleaved, so that the machine's noise
 * hits all alike; a 0.15 s pause after the peer lets OpenBLAS's threads stop spinning). A timing
 * runs the call repeatedly for about the given seconds and gives seconds per call. The table
 * shows GFLOP/s (2·batch·M·N·K flops per call) of the median round, ours / peer, and the same
 * for the best round (what the code does when the shared machine leaves it alone). */
#include "backends/cpu/gemm.h"
#include "backends/cpu/isa.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 9
#define NTHREADS 2

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* outer·h products; operand X of a product is a rows×cols matrix inside a buffer laid out as
 * [outer][rows][h][cols] (h = 1: contiguous matrices one after another). */
typedef struct shape {
    const char *kind;
    int64_t outer, h, M, N, K;
    bool ta, tb;
} shape;

enum { C_OURS, C_PEER, C_OMPLOOP, C_COUNT };

typedef struct bench {
    shape s;
    float *a, *b, *c;
    int64_t lda, ldb, ldc; /* h·cols */
    int64_t sa, sb, sc;    /* between heads: cols */
    int64_t osa, osb, osc; /* between outer items: rows·h·cols */
} bench;

static void peer_one(const bench *x, int64_t t) {
    const shape *s = &x->s;
    const int64_t o = t / s->h, i = t % s->h;
    cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
                (blasint)s->M, (blasint)s->N, (blasint)s->K, 1.0f, x->a + o * x->osa + i * x->sa,
                (blasint)x->lda, x->b + o * x->osb + i * x->sb, (blasint)x->ldb, 0.0f,
                x->c + o * x->osc + i * x->sc, (blasint)x->ldc);
}

static void call(const bench *x, int who) {
    const shape *s = &x->s;
    const int64_t n = s->outer * s->h;
    switch (who) {
    case C_OURS:
        if (s->h == 1)
            tg_cpu_gemm_batched(s->outer, s->ta, s->tb, s->M, s->N, s->K, 1.0f, x->a, x->lda,
                                x->osa, x->b, x->ldb, x->osb, 0.0f, x->c, x->ldc, x->osc, NTHREADS);
        else
            tg_cpu_gemm_batched2(s->outer, x->osa, x->osb, x->osc, s->h, s->ta, s->tb, s->M, s->N,
                                 s->K, 1.0f, x->a, x->lda, x->sa, x->b, x->ldb, x->sb, 0.0f, x->c,
                                 x->ldc, x->sc, NTHREADS);
        break;
    case C_PEER:
        for (int64_t t = 0; t < n; t++)
            peer_one(x, t);
        break;
    case C_OMPLOOP:
#pragma omp parallel for num_threads(NTHREADS) schedule(static)
        for (int64_t t = 0; t < n; t++)
            peer_one(x, t);
        break;
    }
}

/* Seconds per call, running about `budget` seconds (after one warm-up call). */
static double time_calls(const bench *x, int who, double budget) {
    openblas_set_num_threads(who == C_PEER ? NTHREADS : 1);
    call(x, who);
    int reps = 0;
    double t0 = now(), t = t0;
    do {
        call(x, who);
        reps++;
        t = now();
    } while (t - t0 < budget);
    return (t - t0) / reps;
}

/* Operands start on a 64-byte line, as every tensor of a tgraph graph does (its allocator's
 * TG_ALIGN): rows 16 bytes off a line, as a large malloc() gives them, make the small path's
 * dot-product kernel (Q·Kᵀ over a few keys) 1.1–1.4× slower (docs/log/2026-12-03.md). */
static float *filled(int64_t n) {
    float *p = aligned_alloc(64, ((size_t)n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_gemm: out of memory (%lld floats)\n", (long long)n);
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    return p;
}

static const char *filter = "";

/* Ours runs as a product inside a graph's run does: where the team pins its members (one per
 * CPU of the process: backends/cpu/team.c), this thread (member 0) stays on the first CPU for
 * the whole benchmark, where a call from an unpinned thread would pin and release it around
 * every call (~6 µs a call, which a graph pays once per run). Our team, OpenMP's threads and
 * OpenBLAS's start first, with the process's whole mask. Returns the CPU, or -1 (not pinned:
 * the process has other than NTHREADS CPUs, so the team pins nothing). */
static int pin_like_a_graph_run(void) {
    float x = 1.0f, y = 0.0f;
    tg_cpu_gemm_batched(1, false, false, 1, 1, 1, 1.0f, &x, 1, 0, &x, 1, 0, 0.0f, &y, 1, 0,
                        NTHREADS);
#pragma omp parallel num_threads(NTHREADS)
    (void)omp_get_thread_num(); /* starts OpenMP's threads */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != NTHREADS) return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            CPU_ZERO(&set);
            CPU_SET(c, &set);
            return sched_setaffinity(0, sizeof set, &set) == 0 ? c : -1;
        }
    return -1;
}

static void run(shape s, bool batched, double budget) {
    if (strncmp(s.kind, filter, strlen(filter)) != 0) return;
    bench x = {.s = s};
    const int64_t ra = s.ta ? s.K : s.M, ca = s.ta ? s.M : s.K;
    const int64_t rb = s.tb ? s.N : s.K, cb = s.tb ? s.K : s.N;
    x.lda = s.h * ca, x.ldb = s.h * cb, x.ldc = s.h * s.N;
    x.sa = ca, x.sb = cb, x.sc = s.N;
    x.osa = ra * x.lda, x.osb = rb * x.ldb, x.osc = s.M * x.ldc;
    x.a = filled(s.outer * x.osa), x.b = filled(s.outer * x.osb), x.c = filled(s.outer * x.osc);

    const int ncont = batched ? 3 : 2;
    double t[C_COUNT][ROUNDS];
    /* Each round: the peer, a pause, then ours (and the OpenMP loop). OpenBLAS's worker
     * threads keep spinning for ~0.1 s (2^28 cycles) after a threaded call before they sleep;
     * without the pause they would take a core from the contender timed next. */
    static const int order[C_COUNT] = {C_PEER, C_OURS, C_OMPLOOP};
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < ncont; k++) {
            const int w = order[k];
            t[w][r] = time_calls(&x, w, budget);
            if (w == C_PEER) nanosleep(&(struct timespec){0, 150000000}, NULL);
        }
    const int64_t batch = s.outer * s.h;
    const double flops = 2.0 * (double)batch * (double)s.M * (double)s.N * (double)s.K;
    double med[C_COUNT], best[C_COUNT];
    for (int w = 0; w < ncont; w++) {
        qsort(t[w], ROUNDS, sizeof(double), cmp_double);
        med[w] = flops / t[w][ROUNDS / 2] * 1e-9;
        best[w] = flops / t[w][0] * 1e-9;
    }
    tg_cpu_gemm_args ga = {
        .batch = batch, .M = s.M, .N = s.N, .K = s.K, .trans_a = s.ta, .trans_b = s.tb};
    static const char *const path_names[] = {[TG_CPU_GEMM_SMALL] = "small",
                                             [TG_CPU_GEMM_BLAS] = "blas",
                                             [TG_CPU_GEMM_PACKED] = "packed"};
    const char *path = path_names[tg_cpu_gemm_choose(&ga, NTHREADS)];
    printf("%-12s %5lld %5lld %5lld %5lld  %c%c  %-5s %7.1f %7.1f", s.kind, (long long)batch,
           (long long)s.M, (long long)s.N, (long long)s.K, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', path,
           med[C_OURS], med[C_PEER]);
    if (batched)
        printf(" %7.1f", med[C_OMPLOOP]);
    else
        printf(" %7s", "-");
    printf("  %5.2f   %7.1f %7.1f  %5.2f\n", med[C_OURS] / med[C_PEER], best[C_OURS], best[C_PEER],
           best[C_OURS] / best[C_PEER]);
    fflush(stdout);
    free(x.a), free(x.b), free(x.c);
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 0.02;
    if (budget <= 0) budget = 0.02;
    if (argc > 2) filter = argv[2];
    const char *wait = getenv("OMP_WAIT_POLICY");
    const int cpu = pin_like_a_graph_run();
    printf("bench_gemm: %d threads, kernel %s%s, %d interleaved timings of ~%.0f ms, operands "
           "64-byte aligned, OMP_WAIT_POLICY=%s\n",
           NTHREADS, tg_cpu_isa_level_name(tg_cpu_isa()),
           tg_cpu_isa() >= TG_CPU_ISA_AVX512 ? " (512-bit tiles: AVX-512F)" : "", ROUNDS, budget * 1e3,
           wait ? wait : "(unset)");
    if (cpu >= 0)
        printf("calling thread on CPU %d for the whole run (as member 0 of a graph's run)\n", cpu);
    else
        printf("calling thread not pinned (the team pins only with one member per CPU)\n");
    printf("peer: one cblas_sgemm on %d OpenBLAS threads (proj), a loop of cblas_sgemm calls on "
           "%d OpenBLAS threads (attn, heads)\n",
           NTHREADS, NTHREADS);
    printf("%-12s %5s %5s %5s %5s  %-3s %-5s %7s %7s %7s  %5s   %7s %7s  %5s\n", "kind", "batch",
           "M", "N", "K", "op", "path", "ours", "peer", "omploop", "ratio", "ours", "peer",
           "ratio");
    printf("%-12s %5s %5s %5s %5s  %-3s %-5s %23s  %5s   %15s  %5s\n", "", "", "", "", "", "", "",
           "median GFLOP/s", "", "best GFLOP/s", "");

    /* Projections: X (1280×K) · W (K×N); dX = dY·Wᵀ; dW = Xᵀ·dY. */
    static const int64_t proj[][2] = {{256, 256}, {1024, 256}, {256, 1024}, {1024, 1024}};
    for (size_t i = 0; i < sizeof proj / sizeof proj[0]; i++) {
        const int64_t M = 1280, N = proj[i][0], K = proj[i][1];
        run((shape){"proj fwd", 1, 1, M, N, K, false, false}, false, budget);
        run((shape){"proj dX", 1, 1, M, K, N, false, true}, false, budget);
        run((shape){"proj dW", 1, 1, K, N, M, true, false}, false, budget);
    }
    /* Output projections over a vocabulary: the translation models of docs/log/experiments.md §8 (about
     * 2,000 target tokens per batch, d 128, 7,816 pieces) and nmt-small (1,024 tokens, d 512,
     * 8,000): logits = H·Eᵀ, dH = dZ·E, dE = dZᵀ·H. */
    static const int64_t vocab[][3] = {{2000, 7816, 128}, {1024, 8000, 512}};
    for (size_t i = 0; i < sizeof vocab / sizeof vocab[0]; i++) {
        const int64_t T = vocab[i][0], V = vocab[i][1], d = vocab[i][2];
        run((shape){"vocab fwd", 1, 1, T, V, d, false, true}, false, budget);
        run((shape){"vocab dH", 1, 1, T, d, V, false, false}, false, budget);
        run((shape){"vocab dE", 1, 1, V, d, T, true, false}, false, budget);
    }
    /* Attention: scores Q·Kᵀ, context P·V, backward dV = Pᵀ·dO. */
    static const int64_t batches[] = {512, 2048}, ns[] = {10, 32}, dks[] = {16, 32, 64};
    for (int bi = 0; bi < 2; bi++)
        for (int ni = 0; ni < 2; ni++)
            for (int di = 0; di < 3; di++) {
                const int64_t B = batches[bi], n = ns[ni], dk = dks[di];
                run((shape){"attn QK^T", B, 1, n, n, dk, false, true}, true, budget);
                run((shape){"attn PV", B, 1, n, dk, n, false, false}, true, budget);
                run((shape){"attn P^T dO", B, 1, n, dk, n, true, false}, true, budget);
            }
    /* Heads as strided views: nmt-small (B 32, h 8, n 32, dk 64) and g2p-small (B 128, h 4,
     * n 10, dk 64; and with h 32, heads of 8) attention, every operand in [B, n, h, dk] (or
     * [B, n, h, n]) layout. */
    static const int64_t heads[][4] = {{32, 8, 32, 64}, {128, 4, 10, 64}, {128, 32, 10, 8}};
    for (int i = 0; i < 3; i++) {
        const int64_t B = heads[i][0], h = heads[i][1], n = heads[i][2], dk = heads[i][3];
        run((shape){"heads QK^T", B, h, n, n, dk, false, true}, true, budget);
        run((shape){"heads PV", B, h, n, dk, n, false, false}, true, budget);
        run((shape){"heads P^T dO", B, h, n, dk, n, true, false}, true, budget);
    }
    return 0;
}
