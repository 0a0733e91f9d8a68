/* A new attention variant added from outside the library: multi-query attention (Shazeer 2019,
 * "Fast Transformer Decoding: One Write-Head is All You Need") — h query heads share one key
 * head and one value head. It is registered with tg_attn_kind_register (tg/attn_kinds.h): its
 * parameters and its forward are written with the public layers (tg/layers.h), and from then on
 * the model zoo uses it for every attention of an encoder-decoder (encoder self, decoder self,
 * cross) in training, checkpoints and cached beam search, as it does its built-in kinds. The
 * model learns to reverse digit sequences and is checked by greedy decoding of held-out ones.
 * Usage: custom_attention [min_accuracy [steps]] -- exits 0 when the exact-match accuracy of
 * greedy decoding on 100 held-out sequences reaches min_accuracy (default 0.8). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != TG_OK) {                                                                     \
            fprintf(stderr, "custom_attention: %s failed: %s\n", #call, tg_error_message());       \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

enum { BATCH = 64, MAXLEN = 8 };

/* ---- the variant: two callbacks ---- */

/* q_proj [h*dk, d]; k_proj and v_proj [dk, d]: one key/value head; out_proj [d, h*dk] */
static tg_status mqa_init(tg_params *p, const char *prefix, const tg_attn_dims *d, void *user) {
    (void)user;
    return tg_layers_attention_init(p, prefix, d->d_model, d->heads, 1);
}

/* softmax(Q K^T / sqrt(dk) + mask) V with K and V broadcast over the h query heads */
static tg_tensor *mqa_forward(tg_graph *g, tg_store *s, const char *prefix, const tg_attn_dims *d, tg_tensor *xq,
                              tg_tensor *xkv, tg_tensor *mask, bool self, void *user) {
    (void)self, (void)user;
    return tg_layers_attention(g, s, prefix, xq, xkv, mask, NULL, d->heads, 1, d->dropout);
}

/* ---- the task: reverse 3..MAXLEN digits ---- */

/* a random digit sequence (ids 4..13: the vocabulary's "0".."9") and its reverse */
static int64_t sample(tg_rng *r, int32_t *src, int32_t *rev) {
    int64_t len = 3 + (int64_t)tg_rng_below(r, MAXLEN - 2);
    for (int64_t i = 0; i < len; i++) src[i] = 4 + (int32_t)tg_rng_below(r, 10);
    for (int64_t i = 0; i < len; i++) rev[i] = src[len - 1 - i];
    return len;
}

int main(int argc, char **argv) {
    double want = argc > 1 ? atof(argv[1]) : 0.8;
    int steps = argc > 2 ? atoi(argv[2]) : 400;
    tg_attn_kind_def def = {.name = "multi_query", .init = mqa_init, .forward = mqa_forward};
    tg_attn_kind mqa;
    CHECK(tg_attn_kind_register(&def, &mqa));

    tg_vocab *v;
    CHECK(tg_vocab_new(&v));
    for (char dgt[2] = "0"; dgt[0] <= '9'; dgt[0]++) CHECK(tg_vocab_add(v, dgt, NULL));
    tg_model_config c = tg_model_config_default();
    c.attention = mqa; /* every attention of the model */
    c.d_model = 64, c.heads = 4, c.enc_layers = 1, c.dec_layers = 1, c.d_ff = 128, c.max_len = MAXLEN + 2;
    c.pre_norm = true, c.learned_pos = true, c.gelu = true, c.share_embeddings = true;
    c.dropout = c.attn_dropout = 0.0f, c.label_smoothing = 0.0f;
    tg_backend *cpu;
    tg_model *m;
    CHECK(tg_backend_cpu_new(0, &cpu));
    CHECK(tg_model_new(&c, v, v, cpu, 1, &m));
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAMW);
    oc.beta2 = 0.99f;
    tg_optim *opt;
    CHECK(tg_optim_new(tg_model_store(m), &oc, &opt));
    CHECK(tg_optim_no_decay_on_vectors(opt, NULL));
    printf("custom_attention: attention kind '%s', %lld parameters\n", tg_attn_kind_name(mqa),
           (long long)tg_store_total_numel(tg_model_store(m)));

    tg_rng rng;
    tg_rng_init(&rng, 2);
    static int32_t src[BATCH][MAXLEN], rev[BATCH][MAXLEN];
    const int32_t *sp[BATCH], *tp[BATCH];
    int64_t sn[BATCH];
    for (int step = 1; step <= steps; step++) {
        for (int b = 0; b < BATCH; b++) {
            sn[b] = sample(&rng, src[b], rev[b]);
            sp[b] = src[b], tp[b] = rev[b];
        }
        tg_batch batch;
        CHECK(tg_batch_build(&batch, BATCH, sp, sn, tp, sn)); /* <s> + reverse -> reverse + </s> */
        const tg_batch *bs[1] = {&batch};
        tg_grad_info gi;
        CHECK(tg_train_grad(m, bs, 1, NULL, true, &gi));
        tg_batch_free(&batch);
        CHECK(tg_store_clip_grad(tg_model_store(m), 1.0, NULL));
        CHECK(tg_optim_step_zero_grad(opt, (float)(2e-3 * (step < 50 ? step / 50.0 : 1.0))));
        if (step % 100 == 0 || step == 1) printf("step %4d  loss %.4f\n", step, gi.loss);
    }

    /* greedy decoding of 100 held-out sequences (another seed) with the cached decoder */
    tg_rng_init(&rng, 99);
    static int32_t want_rev[100][MAXLEN];
    static int32_t test[100][MAXLEN];
    const int32_t *tsp[100];
    int64_t tsn[100];
    for (int k = 0; k < 100; k++) {
        tsn[k] = sample(&rng, test[k], want_rev[k]);
        tsp[k] = test[k];
    }
    tg_decode_options o = tg_decode_options_default();
    o.beam = 1;
    tg_nbest *res;
    CHECK(tg_decode(m, tsp, tsn, 100, &o, &res));
    int right = 0;
    for (int k = 0; k < 100; k++)
        right += res[k].hyp[0].len == tsn[k] && !memcmp(res[k].hyp[0].ids, want_rev[k], (size_t)tsn[k] * sizeof(int32_t));
    printf("greedy exact match on 100 held-out sequences: %d %%\n", right);
    tg_decode_free(res, 100);
    tg_optim_free(opt);
    tg_model_free(m);
    tg_backend_free(cpu);
    return right >= want * 100 ? 0 : 1;
}
