/* A character-level GPT written against the public API only: token and learned position
 * embeddings, pre-LN blocks of causal multi-head self-attention and a GELU MLP, a final layer
 * norm and an output layer tied to the token embedding (Radford et al. 2019). Trained with AdamW
 * (no decay on biases and norms) on a built-in poem, then sampled with temperature and top-k
 * one character per step over a key/value cache (tg/kv_cache.h), checked against recomputing
 * the whole window.
 * Usage: gpt [threshold [steps]] -- exits 0 when the mean training loss of the last 20 steps
 * is below threshold (nats per character; default 0.6). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/tg.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != TG_OK) {                                                                     \
            fprintf(stderr, "gpt: %s failed: %s\n", #call, tg_error_message());                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* "The Star", Jane Taylor (1806), public domain. */
static const char TEXT[] =
    "Twinkle, twinkle, little star,\nHow I wonder what you are!\nUp above the world so high,\n"
    "Like a diamond in the sky.\n\nWhen the blazing sun is gone,\nWhen he nothing shines upon,\n"
    "Then you show your little light,\nTwinkle, twinkle, all the night.\n\n"
    "Then the traveller in the dark,\nThanks you for your tiny spark,\nHe could not see which way to go,\n"
    "If you did not twinkle so.\n\nIn the dark blue sky you keep,\nAnd often through my curtains peep,\n"
    "For you never shut your eye,\nTill the sun is in the sky.\n\n"
    "As your bright and tiny spark,\nLights the traveller in the dark,\nThough I know not what you are,\n"
    "Twinkle, twinkle, little star.\n";

enum { D = 64, HEADS = 4, LAYERS = 2, T = 48, BATCH = 16 };

typedef struct {
    tg_store *st;
    int64_t vocab;
} gpt;

/* y = x W^T + b over the last axis; x [..., in] */
static tg_tensor *linear(tg_graph *g, tg_store *s, tg_tensor *x, const char *name, int l) {
    int64_t shape[TG_MAX_DIMS];
    int nd = tg_tensor_shape(x, shape);
    tg_tensor *w = tg_paramf(g, s, "layers.%d.%s.weight", l, name);
    int64_t flat[2] = {-1, shape[nd - 1]};
    tg_tensor *y = tg_add(tg_matmul(tg_reshape(x, 2, flat), w, false, true),
                          tg_paramf(g, s, "layers.%d.%s.bias", l, name));
    shape[nd - 1] = w ? tg_tensor_dim(w, 0) : 0;
    return tg_reshape(y, nd, shape);
}

static tg_tensor *norm(tg_graph *g, tg_store *s, tg_tensor *x, const char *name, int l) {
    return tg_layer_norm(x, tg_paramf(g, s, "layers.%d.%s.weight", l, name),
                         tg_paramf(g, s, "layers.%d.%s.bias", l, name), 1e-5f);
}

/* [B, n, d] -> [B, h, n, d/h] */
static tg_tensor *heads(tg_tensor *x, int64_t B, int64_t n) {
    int64_t s[4] = {B, n, HEADS, D / HEADS};
    static const int perm[4] = {0, 2, 1, 3};
    return tg_contiguous(tg_permute(tg_reshape(x, 4, s), perm));
}

/* causal self-attention: softmax(Q K^T / sqrt(d_k) + causal mask) V, heads merged, projected.
 * With a cache the n new positions attend over the cached ones too (keys and values [B, mk, d]
 * with mk = cached + n; the causal mask places the queries last). */
static tg_tensor *attention(tg_graph *g, tg_store *s, tg_tensor *x, int l, tg_kv_cache *cache) {
    int64_t B = tg_tensor_dim(x, 0), n = tg_tensor_dim(x, 1);
    tg_tensor *qkv = linear(g, s, x, "attn.qkv", l); /* [B, n, 3d] */
    tg_tensor *kn = tg_contiguous(tg_slice(qkv, 2, D, 2 * D)), *vn = tg_contiguous(tg_slice(qkv, 2, 2 * D, 3 * D));
    if (cache) {
        kn = tg_kv_cache_extend(g, cache, l, 0, kn);
        vn = tg_kv_cache_extend(g, cache, l, 1, vn);
    }
    int64_t mk = kn ? tg_tensor_dim(kn, 1) : n;
    tg_tensor *q = heads(tg_slice(qkv, 2, 0, D), B, n);
    tg_tensor *k = heads(kn, B, mk);
    tg_tensor *v = heads(vn, B, mk);
    tg_tensor *sc = tg_scale(tg_matmul(q, k, false, true), 1.0f / sqrtf((float)(D / HEADS)));
    sc = tg_masked_fill(sc, tg_causal_mask(g, n, mk), -INFINITY);
    tg_tensor *o = tg_matmul(tg_softmax(sc), v, false, false); /* [B, h, n, dk] */
    static const int perm[4] = {0, 2, 1, 3};
    int64_t merged[3] = {B, n, D};
    return linear(g, s, tg_reshape(tg_permute(o, perm), 3, merged), "attn.proj", l);
}

/* logits [B*n, V] of ids [B, n], at positions after the cached ones (cache may be NULL) */
static tg_tensor *forward(tg_graph *g, gpt *m, const int32_t *ids, int64_t B, int64_t n, tg_kv_cache *cache) {
    tg_store *s = m->st;
    int64_t shape[2] = {B, n};
    tg_tensor *tok = tg_param(g, s, "tok.weight");
    tg_tensor *x = tg_add(tg_embedding(tok, tg_input(g, TG_DTYPE_I32, 2, shape, ids)),
                          tg_embedding(tg_param(g, s, "pos.weight"), tg_arange(g, tg_kv_cache_len(cache), n)));
    for (int l = 0; l < LAYERS; l++) {
        x = tg_add(x, attention(g, s, norm(g, s, x, "ln1", l), l, cache));
        tg_tensor *h = tg_gelu(linear(g, s, norm(g, s, x, "ln2", l), "mlp.fc", l));
        x = tg_add(x, linear(g, s, h, "mlp.proj", l));
    }
    x = tg_layer_norm(x, tg_param(g, s, "ln_f.weight"), tg_param(g, s, "ln_f.bias"), 1e-5f);
    int64_t flat[2] = {-1, D};
    return tg_matmul(tg_reshape(x, 2, flat), tok, false, true); /* tied output */
}

/* parameters with GPT-2's initialisation: N(0, 0.02^2), residual projections scaled by
 * 1/sqrt(2 L), biases 0, norm gains 1 */
static tg_status add(tg_store *s, tg_rng *r, const char *name, int64_t rows, int64_t cols, int kind) {
    int64_t shape[2] = {rows, cols};
    tg_status st = tg_store_add(s, name, cols ? 2 : 1, shape, NULL, true);
    if (st == TG_OK && kind == 1) st = tg_init_normal(s, name, 0.0, 0.02, r);
    if (st == TG_OK && kind == 2) st = tg_init_constant(s, name, 1.0f);
    if (st == TG_OK && kind == 3) {
        st = tg_init_normal(s, name, 0.0, 0.02, r);
        if (st == TG_OK) st = tg_init_scale(s, name, 1.0 / sqrt(2.0 * LAYERS));
    }
    return st;
}

static tg_status build(gpt *m, uint64_t seed) {
    tg_rng r;
    tg_rng_init(&r, seed);
    tg_store *s = m->st;
    char n[96];
    tg_status st = add(s, &r, "tok.weight", m->vocab, D, 1);
    if (st == TG_OK) st = add(s, &r, "pos.weight", T, D, 1);
    static const struct {
        const char *name;
        int rows, cols, kind; /* rows/cols in units of D; kind of the weight */
    } lin[4] = {{"attn.qkv", 3, 1, 1}, {"attn.proj", 1, 1, 3}, {"mlp.fc", 4, 1, 1}, {"mlp.proj", 1, 4, 3}};
    for (int l = 0; st == TG_OK && l < LAYERS; l++) {
        for (int i = 0; st == TG_OK && i < 4; i++) {
            snprintf(n, sizeof n, "layers.%d.%s.weight", l, lin[i].name);
            st = add(s, &r, n, lin[i].rows * D, lin[i].cols * D, lin[i].kind);
            snprintf(n, sizeof n, "layers.%d.%s.bias", l, lin[i].name);
            if (st == TG_OK) st = add(s, &r, n, lin[i].rows * D, 0, 0);
        }
        for (int k = 1; st == TG_OK && k <= 2; k++) {
            snprintf(n, sizeof n, "layers.%d.ln%d.weight", l, k);
            st = add(s, &r, n, D, 0, 2);
            snprintf(n, sizeof n, "layers.%d.ln%d.bias", l, k);
            if (st == TG_OK) st = add(s, &r, n, D, 0, 0);
        }
    }
    if (st == TG_OK) st = add(s, &r, "ln_f.weight", D, 0, 2);
    if (st == TG_OK) st = add(s, &r, "ln_f.bias", D, 0, 0);
    return st;
}

int main(int argc, char **argv) {
    double threshold = argc > 1 ? atof(argv[1]) : 0.6;
    int steps = argc > 2 ? atoi(argv[2]) : 300;
    /* the vocabulary: every distinct byte of the text (the poem is ASCII) */
    int32_t id_of[256];
    char chars[256];
    int64_t V = 0, len = (int64_t)strlen(TEXT);
    for (int i = 0; i < 256; i++) id_of[i] = -1;
    for (int64_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)TEXT[i];
        if (id_of[c] < 0) {
            id_of[c] = (int32_t)V;
            chars[V++] = (char)c;
        }
    }
    int32_t *data = malloc((size_t)len * sizeof *data);
    if (!data) return 1;
    for (int64_t i = 0; i < len; i++) data[i] = id_of[(unsigned char)TEXT[i]];

    tg_backend *cpu;
    gpt m = {NULL, V};
    tg_optim *opt;
    CHECK(tg_backend_cpu_new(0, &cpu)); /* threads: TG_NUM_THREADS, else all cores */
    CHECK(tg_store_new(cpu, &m.st));
    CHECK(build(&m, 1));
    tg_optim_config oc = tg_optim_defaults(TG_OPTIM_ADAMW);
    oc.beta2 = 0.99f;
    oc.eps = 1e-8f;
    oc.weight_decay = 0.1f;
    CHECK(tg_optim_new(m.st, &oc, &opt));
    CHECK(tg_optim_no_decay_on_vectors(opt, NULL));
    printf("gpt: %lld characters, vocabulary %lld, %lld parameters\n", (long long)len, (long long)V,
           (long long)tg_store_total_numel(m.st));

    tg_rng rng;
    tg_rng_init(&rng, 2);
    static int32_t in[BATCH * T], out[BATCH * T];
    double recent = 0.0;
    for (int step = 1; step <= steps; step++) {
        for (int b = 0; b < BATCH; b++) { /* random windows: out is in shifted by one */
            int64_t at = (int64_t)tg_rng_below(&rng, (uint64_t)(len - T - 1));
            memcpy(in + b * T, data + at, T * sizeof *in);
            memcpy(out + b * T, data + at + 1, T * sizeof *out);
        }
        tg_graph *g = tg_graph_new();
        int64_t nt = BATCH * T;
        tg_tensor *loss = tg_keep(tg_cross_entropy(forward(g, &m, in, BATCH, T, NULL),
                                                   tg_input(g, TG_DTYPE_I32, 1, &nt, out), 0.0f, -1,
                                                   TG_REDUCE_MEAN));
        CHECK(tg_backward(g, loss));
        CHECK(tg_graph_run(g, cpu));
        float l = tg_tensor_item(loss);
        tg_graph_free(g);
        /* linear warmup over 50 steps, then cosine decay to a tenth */
        double lr = 3e-3 * (step < 50 ? step / 50.0 : 0.1 + 0.45 * (1 + cos(M_PI * (step - 50) / (steps - 49))));
        CHECK(tg_store_clip_grad(m.st, 1.0, NULL));
        CHECK(tg_optim_step_zero_grad(opt, (float)lr)); /* update, and zero the gradients */
        if (step > steps - 20) recent += l / 20.0;
        if (step % 50 == 0 || step == 1) printf("step %4d  loss %.4f\n", step, l);
    }

    /* sample one character per step over the key/value cache: a step feeds only the new
     * character; when the window of T positions is full, the cache restarts from the last T/2
     * characters (one step of T/2 positions) */
    tg_sample_options so = tg_sample_options_default();
    so.temperature = 0.8f;
    so.top_k = 10;
    tg_rng sr;
    tg_rng_init(&sr, 7);
    tg_kv_cache *cache;
    CHECK(tg_kv_cache_new(cpu, LAYERS, 1, T, D, &cache));
    int32_t ctx[T];
    int64_t n = 1, feed = 0; /* characters in the window; the first of them not yet fed */
    ctx[0] = id_of['T'];
    float *logits = malloc((size_t)(T * V) * sizeof *logits), *ref = malloc((size_t)(T * V) * sizeof *ref);
    double worst = 0.0;
    printf("sample: T");
    for (int i = 0; i < 120 && logits && ref; i++) {
        tg_graph *g = tg_graph_new();
        tg_graph_set_grad_enabled(g, false);
        tg_tensor *lg = tg_keep(forward(g, &m, ctx + feed, 1, n - feed, cache));
        CHECK(tg_graph_run(g, cpu));
        CHECK(tg_tensor_read(lg, logits, (size_t)((n - feed) * V) * sizeof *logits));
        CHECK(tg_kv_cache_commit(cache));
        tg_graph_free(g);
        const float *last = logits + (n - feed - 1) * V;
        if (i < 8) { /* the cache's logits = recomputing the whole window */
            g = tg_graph_new();
            tg_graph_set_grad_enabled(g, false);
            lg = tg_keep(forward(g, &m, ctx, 1, n, NULL));
            CHECK(tg_graph_run(g, cpu));
            CHECK(tg_tensor_read(lg, ref, (size_t)(n * V) * sizeof *ref));
            tg_graph_free(g);
            for (int64_t k = 0; k < V; k++) worst = fmax(worst, fabs((double)last[k] - ref[(n - 1) * V + k]));
        }
        int64_t next;
        CHECK(tg_sample(last, V, &so, &sr, &next));
        putchar(chars[next]);
        if (n == T) { /* full: keep the last T/2 characters and refill the cache with them */
            memmove(ctx, ctx + T / 2, (T / 2) * sizeof *ctx);
            n = T / 2;
            tg_kv_cache_reset(cache);
            feed = 0;
        } else {
            feed = n;
        }
        ctx[n++] = (int32_t)next;
    }
    printf("\ncached vs full logits, first 8 steps: max |difference| %.2g\n", worst);
    tg_kv_cache_free(cache);
    free(ref);
    printf("\nfinal loss (mean of the last 20 steps) %.4f, threshold %.4f\n", recent, threshold);
    free(logits);
    free(data);
    tg_optim_free(opt);
    tg_store_free(m.st);
    tg_backend_free(cpu);
    return recent < threshold && worst < 1e-3 ? 0 : 1;
}
