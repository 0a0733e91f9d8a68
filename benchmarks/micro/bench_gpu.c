/* bench_gpu: a Transformer training step (forward, label-smoothed cross-entropy, backward,
 * Adam, gradient reset) on the CUDA backend.
 *
 *   bench_gpu [--config nmt-small|g2p-small|base] [--attention mha] [--heads N]
 *             [--batch B] [--len L] [--steps 20] [--warmup-steps 3] [--check 1]
 *
 * Configurations (docs/results.md §4): g2p-small d 256, h 4, 3+3 layers, d_ff 1024, vocabularies
 * 30/45, 128 x 10 tokens; nmt-small d 512, h 8, 6+6, d_ff 2048, vocabulary 8000 (separate
 * source/target tables here), 32 x 32 tokens; base: nmt-small with 64 x 64 tokens.
 * Each step builds a fresh graph (as training does), so the time includes graph building and
 * planning on the host. A step's optimizer update and gradient reset are enqueued
 * asynchronously and finished by the next step's run, so the median over steady-state steps
 * is the true step time.
 * --check 1 (default) first runs one step of the same model (same seed, same batch, same
 * dropout masks) on the CPU backend and on the GPU and prints both losses.
 * Prints one JSON object per line; exits 77 with a message when there is no usable GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tg/model.h"
#include "tg/tg.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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
        if (tg_vocab_add(v, t, NULL)) {
            tg_vocab_free(v);
            return NULL;
        }
    }
    return v;
}

#define CHECK(x)                                                      \
    do {                                                              \
        if ((x) != TG_OK) {                                           \
            fprintf(stderr, "bench_gpu: %s\n", tg_error_message());   \
            exit(1);                                                  \
        }                                                             \
    } while (0)

typedef struct {
    tg_model_config cfg;
    long src_vocab, tgt_vocab, B, S, T;
} setup;

/* A random batch: every sentence exactly S-1 / T-1 tokens (</s> and <s> added by the batch). */
static void make_batch(const setup *su, tg_rng *r, tg_batch *b) {
    long B = su->B, S = su->S, T = su->T;
    int32_t *src = malloc(sizeof(int32_t) * (size_t)(B * S)), *tgt = malloc(sizeof(int32_t) * (size_t)(B * T));
    const int32_t **sp = malloc(sizeof *sp * (size_t)B), **tp = malloc(sizeof *tp * (size_t)B);
    int64_t *sn = malloc(sizeof *sn * (size_t)B), *tn = malloc(sizeof *tn * (size_t)B);
    for (long i = 0; i < B; i++) {
        for (long k = 0; k < S - 1; k++) src[i * S + k] = 4 + (int32_t)tg_rng_below(r, (uint64_t)su->src_vocab - 4);
        for (long k = 0; k < T - 1; k++) tgt[i * T + k] = 4 + (int32_t)tg_rng_below(r, (uint64_t)su->tgt_vocab - 4);
        sp[i] = src + i * S;
        tp[i] = tgt + i * T;
        sn[i] = S - 1;
        tn[i] = T - 1;
    }
    CHECK(tg_batch_build(b, B, sp, sn, tp, tn));
    free(src);
    free(tgt);
    free(sp);
    free(tp);
    free(sn);
    free(tn);
}

static tg_model *make_model(const setup *su, tg_backend *be) {
    tg_model *m;
    CHECK(tg_model_new(&su->cfg, vocab(su->src_vocab), vocab(su->tgt_vocab), be, 1, &m));
    return m;
}

/* One training step; returns the loss. */
static float step(tg_model *m, tg_optim *o, tg_backend *be, const tg_batch *b, uint64_t seed,
                  size_t *ws) {
    tg_graph *g = tg_graph_new();
    tg_graph_set_seed(g, seed);
    tg_tensor *loss = tg_keep(tg_model_loss(m, g, b));
    CHECK(tg_backward(g, loss));
    CHECK(tg_graph_run(g, be));
    float l = tg_tensor_item(loss);
    CHECK(tg_optim_step(o, 1e-4f));
    CHECK(tg_store_zero_grad(tg_model_store(m)));
    if (ws) *ws = tg_graph_peak_bytes(g);
    tg_graph_free(g);
    return l;
}

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: bench_gpu [--config nmt-small|g2p-small|base] [--attention mha] [--heads N]\n"
               "  [--batch B] [--len L] [--steps 20] [--warmup-steps 3] [--check 1]\n");
        return 0;
    }
    tg_backend *gpu;
    if (tg_backend_cuda_new(0, &gpu) != TG_OK) {
        printf("bench_gpu: no GPU: %s\n", tg_error_message());
        return 77;
    }
    setup su;
    su.cfg = tg_model_config_default();
    const char *config = sopt(argc, argv, "--config", "nmt-small");
    if (!strcmp(config, "g2p-small")) {
        su.cfg.d_model = 256;
        su.cfg.heads = 4;
        su.cfg.enc_layers = su.cfg.dec_layers = 3;
        su.cfg.d_ff = 1024;
        su.src_vocab = 30;
        su.tgt_vocab = 45;
        su.B = 128;
        su.S = su.T = 10;
    } else if (!strcmp(config, "nmt-small") || !strcmp(config, "base")) {
        su.cfg.d_model = 512;
        su.cfg.heads = 8;
        su.cfg.enc_layers = su.cfg.dec_layers = 6;
        su.cfg.d_ff = 2048;
        su.src_vocab = su.tgt_vocab = 8000;
        su.B = strcmp(config, "base") ? 32 : 64;
        su.S = su.T = strcmp(config, "base") ? 32 : 64;
    } else {
        fprintf(stderr, "bench_gpu: unknown --config '%s'\n", config);
        return 2;
    }
    su.cfg.heads = opt(argc, argv, "--heads", su.cfg.heads);
    su.B = opt(argc, argv, "--batch", su.B);
    su.S = su.T = opt(argc, argv, "--len", su.S);
    CHECK(tg_attn_kind_parse(sopt(argc, argv, "--attention", "mha"), &su.cfg.attention));
    su.cfg.max_len = su.S + 2;
    long steps = opt(argc, argv, "--steps", 20), warm = opt(argc, argv, "--warmup-steps", 3);
    if (steps < 1) steps = 1;
    tg_rng r;

    if (opt(argc, argv, "--check", 1)) {
        /* the same initialisation (seeded), batch and dropout masks on both backends */
        tg_backend *cpu;
        CHECK(tg_backend_cpu_new(0, &cpu));
        float loss[2];
        double secs[2];
        for (int k = 0; k < 2; k++) {
            tg_backend *be = k ? gpu : cpu;
            tg_model *m = make_model(&su, be);
            tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAM);
            tg_optim *o;
            CHECK(tg_optim_new(tg_model_store(m), &oc, &o));
            tg_batch b;
            tg_rng_init(&r, 7);
            make_batch(&su, &r, &b);
            double t0 = now();
            loss[k] = step(m, o, be, &b, 99, NULL);
            secs[k] = now() - t0;
            tg_batch_free(&b);
            tg_optim_free(o);
            tg_model_free(m);
        }
        printf("{\"check\": \"first step loss\", \"cpu\": %.7f, \"gpu\": %.7f, \"rel_diff\": %.3g, "
               "\"cpu_threads\": %d, \"cpu_s\": %.3f, \"gpu_first_step_s\": %.3f}\n",
               (double)loss[0], (double)loss[1], fabs((double)loss[0] - loss[1]) / fabs((double)loss[0]),
               tg_backend_threads(cpu), secs[0], secs[1]);
        tg_backend_free(cpu);
    }

    tg_model *m = make_model(&su, gpu);
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAM);
    tg_optim *o;
    CHECK(tg_optim_new(tg_model_store(m), &oc, &o));
    double *ms = malloc(sizeof *ms * (size_t)steps);
    size_t ws = 0;
    float last = 0.0f;
    tg_rng_init(&r, 1);
    for (long s = 0; s < warm + steps; s++) {
        tg_batch b;
        make_batch(&su, &r, &b); /* host work outside the timed region */
        double t0 = now();
        last = step(m, o, gpu, &b, (uint64_t)s, &ws);
        if (s >= warm) ms[s - warm] = 1e3 * (now() - t0);
        tg_batch_free(&b);
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp);
    double med = ms[steps / 2];
    const char *tf32 = getenv("TG_CUDA_TF32");
    printf("{\"impl\": \"tgraph-cuda\", \"config\": \"%s\", \"attention\": \"%s\", \"heads\": %lld, "
           "\"batch\": %ld, \"len\": %ld, \"ms_per_step\": %.3f, \"min_ms\": %.3f, \"max_ms\": %.3f, "
           "\"tokens_per_s\": %.1f, \"workspace_mib\": %.1f, \"gpu_peak_mib\": %.1f, \"params\": %lld, "
           "\"tf32\": %s, \"last_loss\": %.5f}\n",
           config, tg_attn_kind_name(su.cfg.attention), (long long)su.cfg.heads, su.B, su.S, med, ms[0],
           ms[steps - 1], (double)(su.B * su.T) / (med / 1e3), (double)ws / 1048576.0,
           (double)tg_backend_peak_bytes(gpu) / 1048576.0, (long long)tg_store_total_numel(tg_model_store(m)),
           tf32 && !strcmp(tf32, "1") ? "true" : "false", (double)last);
    free(ms);
    tg_optim_free(o);
    tg_model_free(m);
    tg_backend_free(gpu);
    return 0;
}
