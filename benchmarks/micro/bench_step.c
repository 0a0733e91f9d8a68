/* Training-step benchmark: forward + label-smoothed cross-entropy + backward + Adam of the
 * Transformer on random token batches, the same shapes as benchmarks/peer/train_step.py
 * (every source and target exactly --src-len / --tgt-len positions, </s> included).
 * Prints one JSON object: ms_per_step (median of --steps timed steps after --warmup-steps),
 * tokens_per_s (target tokens per second at the median), peak_rss_mib, workspace bytes,
 * gflop_per_step (the matrix products' 2 M N K) and gflops at the median, and the machine's
 * FMA peak measured in the same run (fma_peak_gflops: after every timed step, --threads
 * threads each run 12 independent chains of 8-wide FMAs for ~20 ms; the median) with
 * gflops_of_peak = gflops ÷ that peak: a shared or throttled host's clock moves both. On a CPU
 * with AVX-512 also fma512_peak_gflops (16-wide FMAs, three bursts after the timed steps, the
 * median) and gflops_of_peak512: there the packed GEMM's kernels are 512 bits wide, and this is
 * the peak they run against (each burst's threads pinned one per CPU).
 * --fusion ab alternates steps with elementwise fusion on and off (tg_graph_set_fusion) and
 * adds both medians and workspaces, and their ratio, measured side by side in one run.
 * --split-k on|off|ab: weight gradients cut along k on 2+ threads (backends/cpu/gemm_split_k.c;
 * off: by rows of C, as before it); ab alternates steps and adds the "off" median and the
 * ratio, so that both settings meet the host in the same state.
 * --optim-runs on|off|ab: Adam's step in one pass per run of parameters with the same group
 * (train/optim.c; off: one per parameter); ab as above.
 * --step-zero-grad on|off|ab: the gradients zeroed in the update's pass (tg_optim_step_zero_grad;
 * off: tg_optim_step, then tg_store_zero_grad); ab as above.
 * --inplace-a on|off|ab: the 512-bit packed kernels reading op(A) in place where they can
 * (backends/cpu/gemm_packed.c; off: from packed panels only); ab as above.
 * --noise ab: alternates two identical settings; its ratio is the run-to-run noise that the
 * others' ratios are read against. One setting at a time may be ab.
 * --huge-pages on|off: the store's slabs, the optimizer's moments and the workspaces on 2-MiB pages
 * (backends/cpu/cpu.c: HUGE_MIN; off: from the heap, 4-KiB pages). For the whole run (the store
 * is made once).
 * With 2 threads or more also core_rtt_ns: the round trip of a cache line between the first two
 * CPUs (benchmarks/micro/core_rtt.h) before the first timed step and after the last — on a virtual
 * machine the host may hold the cores near each other or far apart, and the step's time
 * follows (docs/log/2026-12-05.md). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "benchmarks/micro/core_rtt.h"
#include "core/backend-helpers.h"
#include "core/tg-impl.h"
#include "tg/model.h"
#include "tg/tg.h"
#include "train/train-impl.h"

/* Floating-point operations of the graph's matrix products (2 M N K each, batches counted):
 * the work a step must do, whatever the rest costs, for GFLOP/s against the FMA peak. */
static double matmul_flops(const tg_graph *g) {
    double f = 0;
    for (int64_t i = 0; i < g->n; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_MATMUL || !(t->flags & TG_TF_NEEDED)) continue;
        tg_mm_plan p;
        tg__geom_mm_plan(t, &p);
        f += 2.0 * (double)tg_tensor_numel(t) * (double)p.K;
    }
    return f;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the FMA peak, measured: 12 chains × 8 floats × 2 flops per iteration ---- */
enum { FMA_ITERS = 10000000 }; /* 1.92 Gflop per thread: ~20 ms at a Zen 3 core's ~96 GFLOP/s */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FMA_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
__attribute__((target("avx2,fma"))) static void fma_burst(float *out) {
    const __m256 b = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + (float)(i));
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, b, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
    FMA_CHAINS(DECL)
    for (long k = 0; k < FMA_ITERS; k++) {
        FMA_CHAINS(STEP)
    }
    __m256 s = _mm256_setzero_ps();
    FMA_CHAINS(SUM)
    float v[8];
    _mm256_storeu_ps(v, s);
    *out = v[0]; /* keeps the chains alive */
}

/* The same 12 chains 16 floats wide, where the CPU has AVX-512: a CPU whose 512-bit FMAs run at
 * full rate (Zen 5, many Xeons) has twice fma_burst's peak, which the packed GEMM's 512-bit
 * kernels (and a peer's) may reach: reported beside it, not instead. */
__attribute__((target("avx512f"))) static void fma512_burst(float *out) {
    const __m512 b = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
#define DECL512(i) __m512 a##i = _mm512_set1_ps(1.0f + (float)(i));
#define STEP512(i) a##i = _mm512_fmadd_ps(a##i, b, c);
#define SUM512(i) s = _mm512_add_ps(s, a##i);
    FMA_CHAINS(DECL512)
    for (long k = 0; k < FMA_ITERS / 2; k++) {
        FMA_CHAINS(STEP512)
    }
    __m512 s = _mm512_setzero_ps();
    FMA_CHAINS(SUM512)
    *out = _mm512_reduce_add_ps(s); /* keeps the chains alive */
}

/* One burst thread: it starts when the caller says go (every thread created), so that thread
 * creation's skew (up to ~1 ms, a tenth of a 512-bit burst) is not timed. */
typedef struct {
    void (*burst)(float *sink);
    _Atomic int *go;
    float sink;
    double end;
} burst_arg;

static void *burst_thread(void *p) {
    burst_arg *a = p;
    while (!atomic_load(a->go))
        sched_yield();
    a->burst(&a->sink);
    a->end = now();
    return NULL;
}

/* GFLOP/s of `threads` threads running burst (wide floats per FMA, iters iterations) at once,
 * from the go to the last one's end; with `pin`, thread i on the i-th CPU this thread may use
 * (where there are enough). The 512-bit bursts after the timed steps pin: left to the
 * scheduler, their two threads sometimes shared one CPU and the peak read 222 or 361 GFLOP/s
 * instead of ~414 (2 of 11 runs on a 2-vCPU Xeon; a ratio to it of 1.12 instead of 0.60). The
 * bursts after each step do not: the team's members still wait there (team.c: they yield for
 * 20 ms after a run), and a burst pinned beside one read 185-194 instead of 223. */
static double run_bursts(long threads, void (*burst)(float *), int wide, long iters, bool pin) {
    pthread_t th[64];
    burst_arg arg[64];
    _Atomic int go = 0;
    if (threads > 64) threads = 64;
    int cpus[64];
    pin = pin && core_rtt_cpus(cpus, 64) >= threads;
    long started = 0;
    for (; started < threads; started++) {
        arg[started] = (burst_arg){.burst = burst, .go = &go};
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (pin) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpus[started], &one);
            pthread_attr_setaffinity_np(&attr, sizeof one, &one);
        }
        const int err = pthread_create(&th[started], &attr, burst_thread, &arg[started]);
        pthread_attr_destroy(&attr);
        if (err) break;
    }
    if (started == 0) return 0.0;
    const double t0 = now();
    atomic_store(&go, 1);
    double end = t0;
    for (long i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (arg[i].end > end) end = arg[i].end;
    }
    return (double)started * (double)iters * 12 * wide * 2 / (end - t0) * 1e-9;
}

/* GFLOP/s of `threads` threads running fma_burst at once; 0 without AVX2 + FMA. */
static double fma_peak(long threads) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0.0;
    return run_bursts(threads, fma_burst, 8, FMA_ITERS, false);
}

/* The same with 512-bit FMAs; 0 without AVX-512F. */
static double fma512_peak(long threads) {
    if (!__builtin_cpu_supports("avx512f")) return 0.0;
    return run_bursts(threads, fma512_burst, 16, FMA_ITERS / 2, true);
}
#else
static double fma_peak(long threads) {
    (void)threads;
    return 0.0;
}

static double fma512_peak(long threads) {
    (void)threads;
    return 0.0;
}
#endif

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static long opt(int argc, char **argv, const char *name, long dflt) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return strtol(argv[i + 1], NULL, 10);
    return dflt;
}

static const char *sopt(int argc, char **argv, const char *name, const char *dflt) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return dflt;
}

static tg_vocab *vocab(long n) {
    tg_vocab *v;
    if (tg_vocab_new(&v)) return NULL;
    for (long i = 4; i < n; i++) {
        char t[32];
        snprintf(t, sizeof t, "w%ld", i);
        tg_vocab_add(v, t, NULL);
    }
    return v;
}

#define CHECK(x)                                                        \
    do {                                                                \
        if ((x) != TG_OK) {                                             \
            fprintf(stderr, "bench_step: %s\n", tg_error_message());    \
            return 1;                                                   \
        }                                                               \
    } while (0)

/* Settings a run may alternate step by step (ab) to compare them against one state of the host:
 * the option, how the JSON names the "off" steps' median and the ratio, and the setter. */
static bool fusion_on = true;
static void set_fusion(bool on) {
    fusion_on = on;
}
static void set_split_k(bool on) {
    tg__cpu_stats.gemm.no_split_k = !on;
}
static void set_optim_runs(bool on) {
    tg__optim_runs(on);
}
static bool step_zero_on = true;
static void set_step_zero(bool on) {
    step_zero_on = on;
}
static void set_inplace_a(bool on) {
    tg__cpu_stats.gemm.no_inplace_a = !on;
}
static void set_nothing(bool on) {
    (void)on;
}
static const struct {
    const char *flag, *off_ms, *ratio;
    void (*set)(bool);
} TOGGLES[] = {
    {"--fusion", "ms_per_step_unfused", "fused_over_unfused", set_fusion},
    {"--split-k", "ms_per_step_split_k_off", "split_k_on_over_off", set_split_k},
    {"--optim-runs", "ms_per_step_optim_runs_off", "optim_runs_on_over_off", set_optim_runs},
    {"--step-zero-grad", "ms_per_step_zero_grad_apart", "step_zero_grad_over_apart", set_step_zero},
    {"--inplace-a", "ms_per_step_inplace_a_off", "inplace_a_on_over_off", set_inplace_a},
    {"--noise", "ms_per_step_noise_b", "noise_a_over_b", set_nothing},
};
enum { NTOGGLES = sizeof TOGGLES / sizeof TOGGLES[0] };

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: bench_step [--d-model 256 --heads 4 --layers 3 --d-ff 1024 --attention mha\n"
               "  --head-dim 0 --literal 0 --src-vocab 30 --tgt-vocab 45 --batch 128 --src-len 10\n"
               "  --tgt-len 10 --threads 2 --steps 20 --warmup-steps 3 --fusion on|off|ab\n"
               "  --split-k on|off|ab --optim-runs on|off|ab\n"
               "  --step-zero-grad on|off|ab --inplace-a on|off|ab --noise ab\n"
               "  --huge-pages on|off]\n");
        return 0;
    }
    tg_model_config c = tg_model_config_default();
    c.d_model = opt(argc, argv, "--d-model", 256);
    c.heads = opt(argc, argv, "--heads", 4);
    c.enc_layers = c.dec_layers = opt(argc, argv, "--layers", 3);
    c.d_ff = opt(argc, argv, "--d-ff", 1024);
    c.head_dim = opt(argc, argv, "--head-dim", 0);
    c.interacting_literal = opt(argc, argv, "--literal", 0) != 0;
    CHECK(tg_attn_kind_parse(sopt(argc, argv, "--attention", "mha"), &c.attention));
    long B = opt(argc, argv, "--batch", 128), S = opt(argc, argv, "--src-len", 10);
    long T = opt(argc, argv, "--tgt-len", 10), steps = opt(argc, argv, "--steps", 20);
    long warm = opt(argc, argv, "--warmup-steps", 3), threads = opt(argc, argv, "--threads", 2);
    c.max_len = (S > T ? S : T) + 2;
    const char *huge = sopt(argc, argv, "--huge-pages", "on");
    if (strcmp(huge, "on") && strcmp(huge, "off")) {
        fprintf(stderr, "bench_step: --huge-pages must be on or off, not '%s'\n", huge);
        return 2;
    }
    tg__cpu_huge_pages(!strcmp(huge, "on"));
    tg_backend *be;
    CHECK(tg_backend_cpu_new((int)threads, &be));
    tg_model *m;
    CHECK(tg_model_new(&c, vocab(opt(argc, argv, "--src-vocab", 30)), vocab(opt(argc, argv, "--tgt-vocab", 45)),
                       be, 1, &m));
    c = *tg_model_cfg(m); /* vocabulary sizes filled in */
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAM);
    tg_optim *o;
    CHECK(tg_optim_new(tg_model_store(m), &oc, &o));
    tg_rng r;
    tg_rng_init(&r, 1);
    int32_t *src = malloc(sizeof(int32_t) * (size_t)(B * S)), *tgt = malloc(sizeof(int32_t) * (size_t)(B * T));
    const int32_t **sp = malloc(sizeof *sp * (size_t)B), **tp = malloc(sizeof *tp * (size_t)B);
    int64_t *sn = malloc(sizeof *sn * (size_t)B), *tn = malloc(sizeof *tn * (size_t)B);
    /* each setting on or off for every step, or (at most one) alternating: ab_i */
    const char *val[NTOGGLES];
    int ab_i = -1;
    for (int i = 0; i < NTOGGLES; i++) {
        val[i] = sopt(argc, argv, TOGGLES[i].flag, "on");
        const bool ab = !strcmp(val[i], "ab");
        if (!ab && strcmp(val[i], "on") && strcmp(val[i], "off")) {
            fprintf(stderr, "bench_step: %s must be on, off or ab, not '%s'\n", TOGGLES[i].flag,
                    val[i]);
            return 2;
        }
        if (ab && ab_i >= 0) {
            fprintf(stderr, "bench_step: %s and %s cannot both alternate (ab)\n",
                    TOGGLES[ab_i].flag, TOGGLES[i].flag);
            return 2;
        }
        if (ab) ab_i = i;
    }
    const char *fusion = val[0];
    if (ab_i >= 0 && steps < 2) steps = 2;
    /* ms[0..]: the steps with the alternating setting on (all of them without one); ms_off: the
     * others. A run with a setting off and none alternating keeps its steps in ms_off. */
    double *ms = malloc(sizeof *ms * (size_t)steps),
           *ms_off = malloc(sizeof *ms_off * (size_t)steps),
           *peaks = malloc(sizeof *peaks * (size_t)steps);
    long n_peak = 0;
    long n_on = 0, n_off = 0;
    size_t ws = 0, ws_off = 0;
    double flops = 0;
    /* where the host holds the cores, before the timed steps and after them (header) */
    double rtt[2] = {-1.0, -1.0};
    int cpus[2];
    const bool probe_rtt = threads > 1 && core_rtt_cpus(cpus, 2) == 2;
    for (long step = 0; step < warm + steps; step++) {
        if (step == warm && probe_rtt) rtt[0] = core_rtt_ns(cpus[0], cpus[1], 20000);
        if (step == warm) tg_profile_reset(); /* TG_PROFILE: the timed steps only */
        for (long i = 0; i < B; i++) {
            for (long k = 0; k < S - 1; k++) src[i * S + k] = 4 + (int32_t)tg_rng_below(&r, (uint64_t)c.src_vocab - 4);
            for (long k = 0; k < T - 1; k++) tgt[i * T + k] = 4 + (int32_t)tg_rng_below(&r, (uint64_t)c.tgt_vocab - 4);
            sp[i] = src + i * S;
            tp[i] = tgt + i * T;
            sn[i] = S - 1;
            tn[i] = T - 1;
        }
        tg_batch b;
        CHECK(tg_batch_build(&b, B, sp, sn, tp, tn));
        double t0 = now();
        tg_graph *g = tg_graph_new();
        tg_graph_set_seed(g, (uint64_t)step);
        /* first: the alternating setting's "on" step, or without one, every setting on */
        bool first = ab_i < 0 || step % 2 == 0;
        for (int i = 0; i < NTOGGLES; i++) {
            const bool on = i == ab_i ? step % 2 == 0 : strcmp(val[i], "off") != 0;
            TOGGLES[i].set(on);
            if (ab_i < 0) first = first && on;
        }
        tg_graph_set_fusion(g, fusion_on);
        tg_tensor *loss = tg_keep(tg_model_loss(m, g, &b));
        CHECK(tg_backward(g, loss));
        CHECK(tg_graph_run(g, be));
        float lr = 1e-4f;
        if (step_zero_on) {
            CHECK(tg_optim_step_zero_grad(o, lr));
        } else {
            CHECK(tg_optim_step(o, lr));
            CHECK(tg_store_zero_grad(tg_model_store(m)));
        }
        *(first ? &ws : &ws_off) = tg_graph_peak_bytes(g);
        flops = matmul_flops(g);
        tg_graph_free(g);
        if (step >= warm) {
            if (first)
                ms[n_on++] = 1e3 * (now() - t0);
            else
                ms_off[n_off++] = 1e3 * (now() - t0);
        }
        tg_batch_free(&b);
        if (step >= warm) peaks[n_peak++] = fma_peak(be->nthreads);
    }
    if (probe_rtt) rtt[1] = core_rtt_ns(cpus[0], cpus[1], 20000);
    if (getenv("TG_PROFILE")) tg_profile_report(stderr);
    if (ab_i < 0 && n_off) { /* a setting off, none alternating: those steps are the steps */
        memcpy(ms, ms_off, sizeof *ms * (size_t)n_off);
        n_on = n_off;
        n_off = 0;
        ws = ws_off;
    }
    qsort(ms, (size_t)n_on, sizeof *ms, cmp);
    qsort(ms_off, (size_t)n_off, sizeof *ms_off, cmp);
    double med = ms[n_on / 2];
    qsort(peaks, (size_t)n_peak, sizeof *peaks, cmp);
    double peak = n_peak ? peaks[n_peak / 2] : 0.0, gflops = flops * 1e-9 / (med / 1e3);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf(
        "{\"impl\": \"tgraph\", \"attention\": \"%s\", \"heads\": %lld, \"ms_per_step\": %.2f, "
        "\"tokens_per_s\": %.1f, \"peak_rss_mib\": %.1f, \"workspace_mib\": %.1f, \"params\": "
        "%lld, "
        "\"threads\": %ld, \"fusion\": \"%s\", \"huge_pages\": \"%s\", \"gflop_per_step\": %.3f, "
        "\"gflops\": %.1f",
        tg_attn_kind_name(c.attention), (long long)c.heads, med, (double)(B * T) / (med / 1e3),
        (double)ru.ru_maxrss / 1024.0, (double)ws / 1048576.0,
        (long long)tg_store_total_numel(tg_model_store(m)), threads, fusion, huge, flops * 1e-9,
        gflops);
    if (peak > 0)
        printf(", \"fma_peak_gflops\": %.1f, \"gflops_of_peak\": %.3f", peak, gflops / peak);
    /* the 512-bit peak, where there is one: the median of three bursts after the timed steps,
     * once the team's members sleep (they yield for 20 ms after a run: team.c) */
    nanosleep(&(struct timespec){.tv_nsec = 30000000}, NULL);
    double p512[3];
    for (int i = 0; i < 3; i++)
        p512[i] = fma512_peak(be->nthreads);
    qsort(p512, 3, sizeof *p512, cmp);
    if (p512[1] > 0)
        printf(", \"fma512_peak_gflops\": %.1f, \"gflops_of_peak512\": %.3f", p512[1],
               gflops / p512[1]);
    if (rtt[0] > 0 && rtt[1] > 0) printf(", \"core_rtt_ns\": [%.0f, %.0f]", rtt[0], rtt[1]);
    if (ab_i == 0) printf(", \"workspace_mib_unfused\": %.1f", (double)ws_off / 1048576.0);
    if (ab_i >= 0)
        printf(", \"%s\": %.2f, \"%s\": %.3f, \"steps_each\": %ld", TOGGLES[ab_i].off_ms,
               ms_off[n_off / 2], TOGGLES[ab_i].ratio, med / ms_off[n_off / 2], n_off);
    printf("}\n");
    tg_optim_free(o);
    tg_model_free(m);
    tg_backend_free(be);
    free(src);
    free(tgt);
    free(sp);
    free(tp);
    free(sn);
    free(tn);
    free(ms);
    free(ms_off);
    free(peaks);
    return 0;
}
