/* The thread contract (include/tg/backend.h): several threads train examples/mlp.c's MLP at
 * once, each with its own graphs, store and optimizer, on one shared CPU backend (of 1 and of 2
 * threads) and on backends of their own; every thread's parameters must equal, bit for bit,
 * those of the same training run alone on a backend of the same thread count. Several threads
 * score and beam-search with Transformers of their own on one backend: the same bits too. Each thread's
 * error message stays its own while the others fail with theirs. Built into the ThreadSanitizer
 * run as well (./test.sh --tsan), which then also checks the locking itself. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/decode.h"
#include "tg_check.h"

enum { N = 96, CLASSES = 3, STEPS = 20, WORKERS = 4, VARIANTS = 2 };

/* One training run: the spirals of examples/mlp.c and an MLP whose hidden width depends on
 * `variant` (so that threads sharing a backend ask its allocator for blocks of different
 * sizes); the final parameters, all of them in store order, go to params (malloc'ed). */
typedef struct {
    tg_backend *b;
    int variant;
    float *params;
    int64_t count;
    tg_status st;
    char msg[512];
} run;

static tg_status add_layer(tg_store *s, tg_rng *r, const char *w, const char *bias, int out, int in) {
    float *init = malloc(sizeof(float) * (size_t)(out * in));
    if (!init) return tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int i = 0; i < out * in; i++)
        init[i] = (float)((2.0 * tg_rng_uniform(r) - 1.0) * 0.3);
    int64_t ws[2] = {out, in}, bs[1] = {out};
    tg_status st = tg_store_add(s, w, 2, ws, init, true);
    free(init);
    return st != TG_OK ? st : tg_store_add(s, bias, 1, bs, NULL, true);
}

static tg_tensor *linear(tg_graph *g, tg_store *s, tg_tensor *x, const char *w, const char *b) {
    return tg_add(tg_matmul(x, tg_param(g, s, w), false, true), tg_param(g, s, b));
}

static tg_status train(run *r) {
    const int hidden = 48 + 40 * r->variant;
    float xy[N][2];
    int32_t label[N];
    tg_rng rng;
    tg_rng_init(&rng, 1 + (uint64_t)r->variant);
    for (int i = 0; i < N; i++) {
        const double t = (double)(i / CLASSES) / (N / CLASSES), a = 9.42 * t + 2.09 * (i % CLASSES);
        xy[i][0] = (float)(t * cos(a) + 0.05 * tg_rng_normal(&rng));
        xy[i][1] = (float)(t * sin(a) + 0.05 * tg_rng_normal(&rng));
        label[i] = i % CLASSES;
    }
    tg_store *s = NULL;
    tg_optim *opt = NULL;
    tg_status st = tg_store_new(r->b, &s);
    if (!st) st = add_layer(s, &rng, "fc1.weight", "fc1.bias", hidden, 2);
    if (!st) st = add_layer(s, &rng, "fc2.weight", "fc2.bias", hidden, hidden);
    if (!st) st = add_layer(s, &rng, "out.weight", "out.bias", CLASSES, hidden);
    tg_optim_config cfg = tg_optim_defaults(TG_OPTIM_ADAM);
    if (!st) st = tg_optim_new(s, &cfg, &opt);
    for (int step = 0; !st && step < STEPS; step++) {
        tg_graph *g = tg_graph_new();
        int64_t xs[2] = {N, 2}, ys[1] = {N};
        tg_tensor *x = tg_input(g, TG_DTYPE_F32, 2, xs, xy);
        tg_tensor *y = tg_input(g, TG_DTYPE_I32, 1, ys, label);
        tg_tensor *h = tg_relu(linear(g, s, x, "fc1.weight", "fc1.bias"));
        h = tg_relu(linear(g, s, h, "fc2.weight", "fc2.bias"));
        tg_tensor *l = tg_keep(tg_cross_entropy(linear(g, s, h, "out.weight", "out.bias"), y, 0.0f, -1,
                                                TG_REDUCE_MEAN));
        st = tg_backward(g, l);
        if (!st) st = tg_graph_run(g, r->b);
        tg_graph_free(g);
        double norm;
        if (!st) st = tg_store_clip_grad(s, 1.0, &norm);
        if (!st) st = tg_optim_step_zero_grad(opt, 0.01f);
    }
    r->count = 0;
    for (int64_t i = 0; !st && i < tg_store_count(s); i++) r->count += tg_store_numel(s, i);
    if (!st && !(r->params = malloc((size_t)r->count * sizeof *r->params))) st = tg_error_set(TG_ERR_NOMEM, "out of memory");
    for (int64_t i = 0, at = 0; !st && i < tg_store_count(s); at += tg_store_numel(s, i), i++)
        st = tg_store_read(s, i, r->params + at, tg_store_numel(s, i));
    tg_optim_free(opt);
    tg_store_free(s);
    return st;
}

static void *train_main(void *arg) {
    run *r = arg;
    r->st = train(r);
    if (r->st) snprintf(r->msg, sizeof r->msg, "%s", tg_error_message());
    return NULL;
}

/* The reference: variant v trained alone on a new backend of `threads` threads. */
static void reference(int threads, run *ref) {
    for (int v = 0; v < VARIANTS; v++) {
        ref[v] = (run){.variant = v};
        ck_assert_int_eq(tg_backend_cpu_new(threads, &ref[v].b), TG_OK);
        ck_assert_msg(train(&ref[v]) == TG_OK, "reference: %s", tg_error_message());
        tg_backend_free(ref[v].b);
    }
}

/* WORKERS threads at once, worker w training variant w % VARIANTS on shared (or, NULL, on a
 * backend of its own of `threads` threads); each result bit-equal to the reference. */
static void race(tg_backend *shared, int threads, int rounds) {
    run ref[VARIANTS];
    reference(threads, ref);
    for (int round = 0; round < rounds; round++) {
        run w[WORKERS];
        pthread_t tid[WORKERS];
        for (int i = 0; i < WORKERS; i++) {
            w[i] = (run){.b = shared, .variant = i % VARIANTS};
            if (!shared) ck_assert_int_eq(tg_backend_cpu_new(threads, &w[i].b), TG_OK);
        }
        for (int i = 0; i < WORKERS; i++) ck_assert_int_eq(pthread_create(&tid[i], NULL, train_main, &w[i]), 0);
        for (int i = 0; i < WORKERS; i++) pthread_join(tid[i], NULL);
        for (int i = 0; i < WORKERS; i++) {
            const run *want = &ref[w[i].variant];
            ck_assert_msg(w[i].st == TG_OK, "round %d worker %d: %s", round, i, w[i].msg);
            ck_assert_int_eq(w[i].count, want->count);
            ck_assert_msg(!memcmp(w[i].params, want->params, (size_t)want->count * sizeof *want->params),
                          "round %d worker %d (%s backend of %d threads): parameters differ from a run alone",
                          round, i, shared ? "a shared" : "its own", threads);
            free(w[i].params);
            if (!shared) tg_backend_free(w[i].b);
        }
    }
    for (int v = 0; v < VARIANTS; v++) free(ref[v].params);
}

START_TEST(test_shared_backend_two_threads) {
    tg_backend *b;
    ck_assert_int_eq(tg_backend_cpu_new(2, &b), TG_OK);
    race(b, 2, 5);
    tg_backend_free(b);
}
END_TEST

START_TEST(test_shared_backend_one_thread) {
    tg_backend *b;
    ck_assert_int_eq(tg_backend_cpu_new(1, &b), TG_OK);
    race(b, 1, 5);
    tg_backend_free(b);
}
END_TEST

START_TEST(test_own_backends) {
    race(NULL, 2, 1);
}
END_TEST

/* ---- a Transformer: scores and beam search (attention, layer norm, softmax, embeddings, the
 * decoder's kept weights) ---- */

enum { PAIRS = 8, MAX_OUT = 8 * 64 };

typedef struct {
    tg_backend *b;
    double scores[PAIRS];
    int32_t out[MAX_OUT]; /* every best hypothesis's ids, each after its length */
    tg_status st;
    char msg[512];
} translation;

static tg_status translate(translation *r) {
    memset(r->scores, 0, sizeof r->scores);
    memset(r->out, 0, sizeof r->out);
    tg_model *m = NULL;
    tg_lines src = {0}, tgt = {0};
    tg_corpus *c = NULL;
    tg_batch b = {0};
    tg_nbest *res = NULL;
    tg_status st = tg_model_load(TG_TEST_DATA "/fixtures/models/mha_pre.safetensors", r->b, &m);
    if (!st) st = tg_lines_read(TG_TEST_DATA "/fixtures/models/pairs.src", false, &src);
    if (!st) st = tg_lines_read(TG_TEST_DATA "/fixtures/models/pairs.tgt", false, &tgt);
    tg_corpus_options co = {.max_len = 64};
    if (!st) st = tg_corpus_new(&src, &tgt, tg_model_src_vocab(m), tg_model_tgt_vocab(m), &co, &c);
    int64_t idx[PAIRS] = {0, 1, 2, 3, 4, 5, 6, 7};
    if (!st && tg_corpus_size(c) != PAIRS) st = tg_error_set(TG_ERR_INVALID, "the fixture has %lld pairs", (long long)tg_corpus_size(c));
    if (!st) st = tg_corpus_batch(c, idx, PAIRS, &b);
    if (!st) st = tg_model_score(m, &b, r->scores);
    const int32_t *rows[PAIRS];
    int64_t len[PAIRS];
    for (int i = 0; !st && i < PAIRS; i++) {
        rows[i] = b.src + i * b.src_len;
        len[i] = 0;
        while (len[i] < b.src_len && rows[i][len[i]] != 0) len[i]++;
        len[i]--; /* without </s> */
    }
    tg_decode_options o = tg_decode_options_default();
    if (!st) st = tg_decode(m, rows, len, PAIRS, &o, &res);
    for (int i = 0, at = 0; !st && i < PAIRS; i++) {
        const tg_hypothesis *h = &res[i].hyp[0];
        if (at + 1 + h->len > MAX_OUT) break;
        r->out[at++] = (int32_t)h->len;
        memcpy(r->out + at, h->ids, (size_t)h->len * sizeof *h->ids);
        at += (int)h->len;
    }
    tg_decode_free(res, PAIRS);
    tg_batch_free(&b);
    tg_corpus_free(c);
    tg_lines_free(&src);
    tg_lines_free(&tgt);
    tg_model_free(m);
    return st;
}

static void *translate_main(void *arg) {
    translation *r = arg;
    r->st = translate(r);
    if (r->st) snprintf(r->msg, sizeof r->msg, "%s", tg_error_message());
    return NULL;
}

/* WORKERS threads score and translate at once with models of their own on one backend of 2
 * threads: the same bits as alone. */
START_TEST(test_shared_backend_transformer) {
    translation ref = {0};
    ck_assert_int_eq(tg_backend_cpu_new(2, &ref.b), TG_OK);
    ck_assert_msg(translate(&ref) == TG_OK, "reference: %s", tg_error_message());
    tg_backend_free(ref.b);
    ck_assert(ref.scores[0] < 0.0 && ref.out[0] > 0); /* something was scored and translated */
    tg_backend *b;
    ck_assert_int_eq(tg_backend_cpu_new(2, &b), TG_OK);
    for (int round = 0; round < 3; round++) {
        translation w[WORKERS];
        pthread_t tid[WORKERS];
        for (int i = 0; i < WORKERS; i++) {
            w[i] = (translation){.b = b};
            ck_assert_int_eq(pthread_create(&tid[i], NULL, translate_main, &w[i]), 0);
        }
        for (int i = 0; i < WORKERS; i++) pthread_join(tid[i], NULL);
        for (int i = 0; i < WORKERS; i++) {
            ck_assert_msg(w[i].st == TG_OK, "round %d worker %d: %s", round, i, w[i].msg);
            ck_assert_msg(!memcmp(w[i].scores, ref.scores, sizeof ref.scores), "round %d worker %d: scores differ", round, i);
            ck_assert_msg(!memcmp(w[i].out, ref.out, sizeof ref.out), "round %d worker %d: translations differ", round, i);
        }
    }
    tg_backend_free(b);
}
END_TEST

/* Each thread fails a call with a message of its own, many times, while the others do too:
 * the message read back is always the thread's own. */
typedef struct {
    int id;
    int wrong;
} msg_run;

static void *msg_main(void *arg) {
    msg_run *r = arg;
    char want[64];
    snprintf(want, sizeof want, "%d threads out of range", -100 - r->id);
    for (int k = 0; k < 200; k++) {
        tg_backend *b = NULL;
        if (tg_backend_cpu_new(-100 - r->id, &b) != TG_ERR_INVALID || !strstr(tg_error_message(), want)) r->wrong++;
    }
    return NULL;
}

START_TEST(test_error_message_per_thread) {
    msg_run r[WORKERS];
    pthread_t tid[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        r[i] = (msg_run){.id = i};
        ck_assert_int_eq(pthread_create(&tid[i], NULL, msg_main, &r[i]), 0);
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(tid[i], NULL);
        ck_assert_msg(r[i].wrong == 0, "thread %d read another thread's message %d times", i, r[i].wrong);
    }
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");
    tcase_add_test(tc, test_shared_backend_two_threads);
    tcase_add_test(tc, test_shared_backend_one_thread);
    tcase_add_test(tc, test_own_backends);
    tcase_add_test(tc, test_shared_backend_transformer);
    tcase_add_test(tc, test_error_message_per_thread);
    suite_add_tcase(s, tc);
    return s;
}
