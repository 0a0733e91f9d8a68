/* Train a small MLP on three interleaved 2-D spirals with tgraph: a parameter store, Xavier
 * initialisation, a fresh graph per step, tg_backward, gradient clipping and Adam.
 * Usage: mlp [threshold]  -- exits 0 when the final loss is below threshold (default 0.05). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tg/tg.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != TG_OK) {                                                                     \
            fprintf(stderr, "mlp: %s failed: %s\n", #call, tg_error_message());                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

enum { N = 300, CLASSES = 3, HIDDEN = 64, STEPS = 1000 };
static const double PI = 3.14159265358979323846;

/* A linear layer's weight [out, in], Xavier-uniform, and bias [out], zeros. */
static tg_status add_layer(tg_store *s, tg_rng *r, const char *w, const char *b, int out, int in) {
    float *init = malloc(sizeof(float) * (size_t)(out * in));
    if (!init) return tg_error_set(TG_ERR_NOMEM, "mlp: out of memory");
    double a = sqrt(6.0 / (in + out));
    for (int i = 0; i < out * in; i++)
        init[i] = (float)((2.0 * tg_rng_uniform(r) - 1.0) * a);
    int64_t ws[2] = {out, in}, bs[1] = {out};
    tg_status st = tg_store_add(s, w, 2, ws, init, true);
    free(init);
    return st != TG_OK ? st : tg_store_add(s, b, 1, bs, NULL, true);
}

/* y = x W^T + b */
static tg_tensor *linear(tg_graph *g, tg_store *s, tg_tensor *x, const char *w, const char *b) {
    return tg_add(tg_matmul(x, tg_param(g, s, w), false, true), tg_param(g, s, b));
}

int main(int argc, char **argv) {
    double threshold = argc > 1 ? atof(argv[1]) : 0.05;
    static float xy[N][2];
    static int32_t label[N];
    tg_rng rng;
    tg_rng_init(&rng, 1);
    for (int i = 0; i < N; i++) { /* class c: radius t, angle 3 pi t + 2 pi c / 3, plus noise */
        int c = i % CLASSES;
        double t = (double)(i / CLASSES) / (N / CLASSES);
        double angle = 3.0 * PI * t + 2.0 * PI * c / CLASSES + 0.1 * tg_rng_normal(&rng);
        xy[i][0] = (float)(t * cos(angle));
        xy[i][1] = (float)(t * sin(angle));
        label[i] = c;
    }
    tg_backend *cpu;
    tg_store *store;
    tg_optim *adam;
    CHECK(tg_backend_cpu_new(0, &cpu)); /* threads: TG_NUM_THREADS, else all cores */
    CHECK(tg_store_new(cpu, &store));
    CHECK(add_layer(store, &rng, "fc1.weight", "fc1.bias", HIDDEN, 2));
    CHECK(add_layer(store, &rng, "fc2.weight", "fc2.bias", HIDDEN, HIDDEN));
    CHECK(add_layer(store, &rng, "out.weight", "out.bias", CLASSES, HIDDEN));
    tg_optim_config cfg = tg_optim_defaults(TG_OPTIM_ADAM);
    CHECK(tg_optim_new(store, &cfg, &adam));

    float loss = NAN;
    for (int step = 1; step <= STEPS; step++) {
        /* build: inputs, forward, loss, backward (errors surface at tg_backward) */
        tg_graph *g = tg_graph_new();
        int64_t xs[2] = {N, 2}, ys[1] = {N};
        tg_tensor *x = tg_input(g, TG_DTYPE_F32, 2, xs, xy);
        tg_tensor *y = tg_input(g, TG_DTYPE_I32, 1, ys, label);
        tg_tensor *h = tg_relu(linear(g, store, x, "fc1.weight", "fc1.bias"));
        h = tg_relu(linear(g, store, h, "fc2.weight", "fc2.bias"));
        tg_tensor *logits = linear(g, store, h, "out.weight", "out.bias");
        tg_tensor *l = tg_keep(tg_cross_entropy(logits, y, 0.0f, -1, TG_REDUCE_MEAN));
        CHECK(tg_backward(g, l));
        /* run: gradients accumulate into the store; then clip, update, clear */
        CHECK(tg_graph_run(g, cpu));
        loss = tg_tensor_item(l);
        tg_graph_free(g);
        double norm;
        CHECK(tg_store_clip_grad(store, 1.0, &norm));
        CHECK(tg_optim_step_zero_grad(adam, 0.01f)); /* update, and zero the gradients */
        if (step == 1 || step % 100 == 0)
            printf("step %4d  loss %.4f  gradient norm %.3f\n", step, loss, norm);
    }
    tg_optim_free(adam);
    tg_store_free(store);
    tg_backend_free(cpu);
    if (!(loss < threshold)) {
        fprintf(stderr, "mlp: final loss %.4f is not below %g\n", loss, threshold);
        return 1;
    }
    printf("final loss %.4f < %g\n", loss, threshold);
    return 0;
}
