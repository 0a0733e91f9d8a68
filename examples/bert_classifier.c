/* A small BERT-style encoder classifier written with the public layers (tg/layers.h): token
 * embeddings with learned positions, post-LN encoder layers of multi-head self-attention and a
 * GELU feed-forward, and a linear head on the first token, <cls> (Devlin et al. 2019). Each
 * layer's parameters are one call (…_init) and its forward one call over the same names, so the
 * whole model is its forward function below and a table of sizes.
 * The task: a "review" of 4 to 12 words says good or bad more often; the class is which. It
 * needs the encoder to count across the sequence, not to look at one position.
 * Usage: bert_classifier [min_accuracy [steps]] -- exits 0 when the accuracy on 200 held-out
 * reviews reaches min_accuracy (default 0.9). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tg/tg.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != TG_OK) {                                                                     \
            fprintf(stderr, "bert_classifier: %s failed: %s\n", #call, tg_error_message());        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

enum { D = 32, HEADS = 4, LAYERS = 2, FF = 64, MAXLEN = 13, CLASSES = 2, BATCH = 32 };
/* ids: <pad> 0, <cls> 1, then the words */
static const char *words[] = {"<pad>", "<cls>", "good", "bad", "the", "film", "was", "a", "very", "plot"};
enum { PAD = 0, CLS = 1, GOOD = 2, BAD = 3, V = 10 };

static tg_status init(tg_store *s) {
    tg_params *p;
    tg_status st = tg_params_new(s, 7, 1.0 / sqrt((double)D), &p); /* embeddings N(0, 1/d) */
    char n[64];
    if (st == TG_OK) st = tg_layers_embed_init(p, "embed", V, D, MAXLEN, TG_POS_LEARNED);
    for (int l = 0; st == TG_OK && l < LAYERS; l++) {
        snprintf(n, sizeof n, "layers.%d.attn", l);
        st = tg_layers_attention_init(p, n, D, HEADS, HEADS);
        snprintf(n, sizeof n, "layers.%d.ffn", l);
        if (st == TG_OK) st = tg_layers_ffn_init(p, n, D, FF, TG_FFN_GELU);
        for (int k = 1; st == TG_OK && k <= 2; k++) {
            snprintf(n, sizeof n, "layers.%d.norm%d", l, k);
            st = tg_layers_norm_init(p, n, D, false);
        }
    }
    if (st == TG_OK) st = tg_layers_linear_init(p, "cls_head", D, CLASSES, true);
    tg_params_free(p);
    return st;
}

/* class logits [B, CLASSES] of ids [B, T] (<cls> first, right-padded with <pad>) */
static tg_tensor *forward(tg_graph *g, tg_store *s, const int32_t *ids, int64_t B, int64_t T) {
    tg_tensor *mask = tg_padding_mask(g, ids, B, T, PAD); /* [B,1,1,T]: no attention to padding */
    tg_tensor *x = tg_layers_embed(g, s, "embed", ids, B, T, 0, TG_POS_LEARNED, 0.1f);
    char a[64], f[64], n1[64], n2[64];
    for (int l = 0; l < LAYERS; l++) { /* post-LN, as BERT: x = LN(x + sublayer(x)) */
        snprintf(a, sizeof a, "layers.%d.attn", l);
        snprintf(f, sizeof f, "layers.%d.ffn", l);
        snprintf(n1, sizeof n1, "layers.%d.norm1", l);
        snprintf(n2, sizeof n2, "layers.%d.norm2", l);
        x = tg_layers_norm(g, s, n1, tg_add(x, tg_layers_attention(g, s, a, x, x, mask, NULL, HEADS, HEADS, 0.1f)), false, 0.0f);
        x = tg_layers_norm(g, s, n2, tg_add(x, tg_layers_ffn(g, s, f, x, TG_FFN_GELU, 0.0f)), false, 0.0f);
    }
    int64_t first[2] = {B, D};
    return tg_layers_linear(g, s, "cls_head", tg_reshape(tg_slice(x, 1, 0, 1), 2, first), true);
}

/* a review of 4..12 words after <cls>, good and bad in different numbers; its class 1 when good
 * wins. Returns its length with <cls>; ids right-padded to MAXLEN. */
static int64_t review(tg_rng *r, int32_t *ids, int32_t *label) {
    int64_t n = 4 + (int64_t)tg_rng_below(r, 9), good = 0, bad = 0;
    do {
        good = bad = 0;
        ids[0] = CLS;
        for (int64_t i = 1; i <= n; i++) {
            ids[i] = 2 + (int32_t)tg_rng_below(r, V - 2);
            good += ids[i] == GOOD;
            bad += ids[i] == BAD;
        }
    } while (good == bad);
    for (int64_t i = n + 1; i < MAXLEN; i++) ids[i] = PAD;
    *label = good > bad;
    return n + 1;
}

int main(int argc, char **argv) {
    double want = argc > 1 ? atof(argv[1]) : 0.9;
    int steps = argc > 2 ? atoi(argv[2]) : 400;
    tg_backend *cpu;
    tg_store *s;
    tg_optim *opt;
    CHECK(tg_backend_cpu_new(0, &cpu));
    CHECK(tg_store_new(cpu, &s));
    CHECK(init(s));
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAMW);
    oc.beta2 = 0.999f, oc.eps = 1e-8f; /* PyTorch's Adam, as BERT's fine-tuning recipes */
    CHECK(tg_optim_new(s, &oc, &opt));
    CHECK(tg_optim_no_decay_on_vectors(opt, NULL));
    printf("bert_classifier: %lld parameters; words:", (long long)tg_store_total_numel(s));
    for (int i = 2; i < V; i++) printf(" %s", words[i]);
    printf("\n");
    tg_rng rng;
    tg_rng_init(&rng, 3);
    static int32_t ids[BATCH * MAXLEN], labels[BATCH];
    for (int step = 1; step <= steps; step++) {
        for (int b = 0; b < BATCH; b++) review(&rng, ids + b * MAXLEN, &labels[b]);
        tg_graph *g = tg_graph_new();
        tg_graph_set_seed(g, (uint64_t)step); /* dropout masks */
        int64_t nb = BATCH;
        tg_tensor *loss = tg_keep(tg_cross_entropy(forward(g, s, ids, BATCH, MAXLEN),
                                                   tg_input(g, TG_DTYPE_I32, 1, &nb, labels), 0.0f, -1, TG_REDUCE_MEAN));
        CHECK(tg_graph_status(g, NULL));
        CHECK(tg_backward(g, loss));
        CHECK(tg_graph_run(g, cpu));
        float l = tg_tensor_item(loss);
        tg_graph_free(g);
        CHECK(tg_store_clip_grad(s, 1.0, NULL));
        CHECK(tg_optim_step_zero_grad(opt, (float)(2e-3 * (step < 40 ? step / 40.0 : 1.0))));
        if (step % 100 == 0 || step == 1) printf("step %4d  loss %.4f\n", step, l);
    }
    /* 200 held-out reviews (another seed), dropout off */
    tg_rng_init(&rng, 99);
    static int32_t test[200 * MAXLEN], truth[200];
    for (int k = 0; k < 200; k++) review(&rng, test + k * MAXLEN, &truth[k]);
    tg_graph *g = tg_graph_new();
    tg_graph_set_training(g, false);
    tg_graph_set_grad_enabled(g, false);
    tg_tensor *logits = tg_keep(forward(g, s, test, 200, MAXLEN));
    CHECK(tg_graph_run(g, cpu));
    static float lg[200 * CLASSES];
    CHECK(tg_tensor_read(logits, lg, sizeof lg));
    tg_graph_free(g);
    int right = 0;
    for (int k = 0; k < 200; k++) right += tg_argmax(lg + k * CLASSES, CLASSES) == truth[k];
    printf("accuracy on 200 held-out reviews: %.1f %%\n", right / 2.0);
    tg_optim_free(opt);
    tg_store_free(s);
    tg_backend_free(cpu);
    return right >= want * 200 ? 0 : 1;
}
