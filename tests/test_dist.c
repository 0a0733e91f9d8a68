/* Data-parallel training (include/tg/dist.h, tg_train_config.dist), run under
 * `mpirun -np 2`, or with --threads as a group of two threads of one process
 * (tg_dist_threads): two ranks with half of every batch each end with the same parameters as
 * one process with the whole batch (within a stated tolerance), the ranks' parameters are
 * identical bit for bit, gradient accumulation and dev evaluation agree with one process, the
 * bucket size does not change a bit, and a rank that fails in the middle of a step stops both
 * ranks with its message (under MPI also when it runs out of memory: an address-space cap is
 * the whole process's, so not with threads).
 *
 * Not a Check suite: Check's assertions leave a test at the first failure, and a rank that
 * leaves early would leave the other waiting in a collective. Here every check only counts, the
 * ranks always make the same collective calls, the failures of both ranks are summed, and rank
 * 0 prints the result in Check's summary format (test.sh counts it). Without --threads, exit 77
 * (skipped) outside a 2-rank MPI job or without MPI support. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tg/train.h"

/* each rank's own: with --threads the ranks are threads of this process */
static _Thread_local tg_dist *D;
static _Thread_local tg_backend *B;
static _Thread_local int checks, failures;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        checks++;                                                                     \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            fprintf(stderr, "rank %d: %s:%d: check failed: ", tg_dist_rank(D), __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

/* ---- a small model and the reverse task ---- */

static tg_vocab *digit_vocab(void) {
    tg_vocab *v = NULL;
    if (tg_vocab_new(&v) != TG_OK) return NULL;
    for (int i = 0; i < 10; i++) {
        char t[8];
        snprintf(t, sizeof t, "%d", i);
        tg_vocab_add(v, t, NULL);
    }
    return v;
}

static tg_model *small_model(uint64_t seed) {
    tg_model_config c = tg_model_config_default();
    c.d_model = 32;
    c.heads = 4;
    c.enc_layers = c.dec_layers = 1;
    c.d_ff = 64;
    c.max_len = 16;
    c.share_embeddings = true;
    c.dropout = c.attn_dropout = 0.0f; /* dropout masks depend on the slice: off for equality */
    /* GELU, not ReLU: ReLU's derivative jumps at 0, and a pre-activation within rounding of 0
     * flips between the two runs and moves parameters by ~lr x its gradient (3.7e-5 once the
     * cross-entropy's row sums changed their order, while a 1-ulp change of those sums gave
     * 6e-8): that is rounding amplified by a discontinuity, not a data-parallel difference */
    c.gelu = true;
    c.label_smoothing = 0.1f;
    tg_vocab *v = digit_vocab();
    tg_model *m = NULL;
    if (!v || tg_model_new(&c, v, v, B, seed, &m) != TG_OK) {
        fprintf(stderr, "rank %d: model: %s\n", tg_dist_rank(D), tg_error_message());
        return NULL;
    }
    return m;
}

/* n random strings over ids 4..13 of lengths [lo, hi]; target = the source reversed. `poison`:
 * the first target token becomes an id outside the vocabulary (a step on it fails). */
static tg_corpus *reverse_corpus(int64_t n, int lo, int hi, uint64_t seed, bool poison) {
    tg_rng r;
    tg_rng_init(&r, seed);
    int32_t **s = malloc((size_t)n * sizeof *s), **t = malloc((size_t)n * sizeof *t);
    int64_t *sn = malloc((size_t)n * sizeof *sn);
    for (int64_t i = 0; i < n; i++) {
        sn[i] = lo + (int64_t)tg_rng_below(&r, (uint64_t)(hi - lo + 1));
        s[i] = malloc((size_t)sn[i] * sizeof **s);
        t[i] = malloc((size_t)sn[i] * sizeof **t);
        for (int64_t k = 0; k < sn[i]; k++) s[i][k] = 4 + (int32_t)tg_rng_below(&r, 10);
        for (int64_t k = 0; k < sn[i]; k++) t[i][k] = s[i][sn[i] - 1 - k];
    }
    if (poison)
        for (int64_t i = 0; i < n; i++) s[i][0] = 1000;
    tg_corpus *c = NULL;
    tg_corpus_from_ids(n, (const int32_t *const *)s, sn, (const int32_t *const *)t, sn, &c);
    for (int64_t i = 0; i < n; i++) {
        free(s[i]);
        free(t[i]);
    }
    free(s);
    free(t);
    free(sn);
    return c;
}

static tg_train_config sgd_config(int64_t steps, int64_t accum) {
    tg_train_config c = tg_train_config_default();
    c.optim = tg_optim_defaults(TG_OPTIM_SGD);
    c.optim.momentum = 0.9f;
    c.lr = (tg_lr_schedule){.kind = TG_LR_CONSTANT, .lr = 0.05};
    c.max_tokens = 600; /* ~25 sentences a batch: slices of ~12 */
    c.accum = accum;
    c.max_steps = steps;
    c.seed = 3;
    c.log_interval = 1000;
    c.progress = TG_PROGRESS_NONE;
    return c;
}

/* Train `steps` steps; dist NULL: one process with whole batches. */
static tg_status train(tg_model *m, const tg_corpus *data, const tg_corpus *dev, tg_train_config c, tg_dist *dist,
                       tg_eval_info *ev) {
    c.dist = dist;
    tg_trainer *t = NULL;
    tg_status st = tg_trainer_new(m, data, dev, &c, &t);
    if (st == TG_OK) st = tg_trainer_run(t, NULL);
    if (st == TG_OK && ev) st = tg_trainer_eval(t, ev);
    tg_trainer_free(t);
    return st;
}

static float *params(tg_model *m, int64_t *n) {
    tg_store *s = tg_model_store(m);
    *n = tg_store_total_numel(s);
    float *p = malloc((size_t)*n * sizeof *p), *q = p;
    for (int64_t i = 0; i < tg_store_count(s); i++) {
        tg_store_read(s, i, q, tg_store_numel(s, i));
        q += tg_store_numel(s, i);
    }
    return p;
}

/* max over elements of |a - b| / (1e-6 + |b|), and the largest absolute difference */
static double max_rel(const float *a, const float *b, int64_t n, double *abs_out) {
    double worst = 0.0, wa = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double r = d / (1e-6 + fabs((double)b[i]));
        if (r > worst) worst = r;
        if (d > wa) wa = d;
    }
    if (abs_out) *abs_out = wa;
    return worst;
}

/* Rank 1's parameters equal rank 0's bit for bit (sent to rank 0 and compared there; the
 * answer is shared so both ranks count the same). */
static bool same_on_both(const float *p, int64_t n) {
    float *other = malloc((size_t)n * sizeof *other);
    memcpy(other, p, (size_t)n * sizeof *other);
    tg_dist_bcast(D, other, (size_t)n * sizeof *other, 1);
    double same = memcmp(other, p, (size_t)n * sizeof *p) == 0 ? 1.0 : 0.0, neg = -same;
    free(other);
    tg_dist_max(D, &neg, 1); /* -min */
    return -neg == 1.0;
}

/* The tolerance of "the same parameters": float sums in a different order (the two halves'
 * gradients added after each was summed alone, different padding), amplified a little by a
 * few SGD steps. */
#define TOL_REL 1e-4
#define TOL_ABS 2e-6

static void test_same_as_one_process(int64_t accum) {
    tg_corpus *data = reverse_corpus(300, 2, 9, 11, false), *dev = reverse_corpus(60, 2, 9, 12, false);
    tg_model *one = small_model(5), *two = small_model(5);
    tg_eval_info e1 = {0}, e2 = {0};
    tg_train_config c = sgd_config(6, accum);
    tg_status s1 = train(one, data, dev, c, NULL, &e1);
    tg_status s2 = train(two, data, dev, c, D, &e2);
    CHECK(s1 == TG_OK && s2 == TG_OK, "training (accum %lld): %s", (long long)accum, tg_error_message());
    int64_t n, n2;
    float *p1 = params(one, &n), *p2 = params(two, &n2);
    double abs_diff, rel = max_rel(p2, p1, n, &abs_diff);
    bool close = true;
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)p2[i] - (double)p1[i]) > TOL_ABS + TOL_REL * fabs((double)p1[i])) close = false;
    CHECK(n == n2 && close, "accum %lld: 2 ranks vs 1 process: max |diff| %.3g (max rel %.3g) over %lld parameters",
          (long long)accum, abs_diff, rel, (long long)n);
    if (tg_dist_rank(D) == 0)
        printf("accum %lld, 6 SGD steps: 2 ranks vs 1 process: max |diff| %.3g, tolerance %g + %g|x|\n",
               (long long)accum, abs_diff, TOL_ABS, TOL_REL);
    /* the parameters moved: the comparison is not of two untouched models */
    tg_model *init = small_model(5);
    int64_t n0;
    float *p0 = params(init, &n0);
    double moved;
    max_rel(p1, p0, n, &moved);
    CHECK(moved > 1e-3, "the parameters barely moved (%.3g)", moved);
    CHECK(same_on_both(p2, n), "accum %lld: the ranks' parameters differ", (long long)accum);
    /* the dev loss, shared out over the ranks, equals one process's */
    CHECK(fabs(e1.nll - e2.nll) <= 1e-5 * e1.nll && e1.sentences == e2.sentences && e1.tgt_tokens == e2.tgt_tokens,
          "dev nll %.9g (1 process) vs %.9g (2 ranks); sentences %lld vs %lld", e1.nll, e2.nll,
          (long long)e1.sentences, (long long)e2.sentences);
    CHECK(tg_dist_check_params(D, tg_model_store(two)) == TG_OK, "tg_dist_check_params: %s", tg_error_message());
    free(p0);
    free(p1);
    free(p2);
    tg_model_free(init);
    tg_model_free(one);
    tg_model_free(two);
    tg_corpus_free(data);
    tg_corpus_free(dev);
}

/* Buckets of 1 KiB (dozens of all-reduces, started during backward) and one bucket for the
 * whole model give the same bits: each element is the same sum of the same two numbers. */
static void test_bucket_size_changes_nothing(void) {
    tg_corpus *data = reverse_corpus(200, 2, 9, 21, false);
    tg_model *a = small_model(9), *b = small_model(9);
    tg_dist_set_bucket_bytes(D, 1024);
    tg_status sa = train(a, data, NULL, sgd_config(4, 1), D, NULL);
    tg_dist_set_bucket_bytes(D, (size_t)1 << 30);
    tg_status sb = train(b, data, NULL, sgd_config(4, 1), D, NULL);
    tg_dist_set_bucket_bytes(D, (size_t)4 << 20);
    CHECK(sa == TG_OK && sb == TG_OK, "training: %s", tg_error_message());
    int64_t n;
    float *pa = params(a, &n), *pb = params(b, &n);
    CHECK(memcmp(pa, pb, (size_t)n * sizeof *pa) == 0, "1 KiB buckets and one bucket give different parameters");
    free(pa);
    free(pb);
    tg_model_free(a);
    tg_model_free(b);
    tg_corpus_free(data);
}

/* Ranks that start from different initialisations are caught by the comparison, and
 * broadcasting rank 0's parameters makes them equal. */
static void test_broadcast_and_check(void) {
    tg_model *m = small_model(100 + (uint64_t)tg_dist_rank(D));
    tg_status st = tg_dist_check_params(D, tg_model_store(m));
    CHECK(st == TG_ERR_STATE && strstr(tg_error_message(), "differs between the ranks"),
          "different parameters not caught: %d %s", (int)st, tg_error_message());
    CHECK(tg_dist_broadcast_params(D, tg_model_store(m)) == TG_OK, "broadcast: %s", tg_error_message());
    CHECK(tg_dist_check_params(D, tg_model_store(m)) == TG_OK, "after broadcast: %s", tg_error_message());
    tg_model *ref = small_model(100);
    int64_t n;
    float *p = params(m, &n), *q = params(ref, &n);
    CHECK(memcmp(p, q, (size_t)n * sizeof *p) == 0, "rank %d does not hold rank 0's initialisation", tg_dist_rank(D));
    free(p);
    free(q);
    tg_model_free(m);
    tg_model_free(ref);
}

/* tg_dist_agree hands every rank the failing rank's status and message. */
static void test_agree(void) {
    tg_status st = tg_dist_agree(D, TG_OK);
    CHECK(st == TG_OK, "all OK: %d", (int)st);
    tg_status mine = tg_dist_rank(D) == 1 ? tg_error_set(TG_ERR_IO, "cannot open 'x.src'") : TG_OK;
    st = tg_dist_agree(D, mine);
    CHECK(st == TG_ERR_IO && !strcmp(tg_error_message(), "rank 1: cannot open 'x.src'"), "got %d '%s'", (int)st,
          tg_error_message());
    /* two failures: the lowest rank's wins */
    mine = tg_error_set(tg_dist_rank(D) == 0 ? TG_ERR_NOMEM : TG_ERR_FORMAT, "boom %d", tg_dist_rank(D));
    st = tg_dist_agree(D, mine);
    CHECK(st == TG_ERR_NOMEM && !strcmp(tg_error_message(), "rank 0: boom 0"), "got %d '%s'", (int)st,
          tg_error_message());
    double x[2] = {1.0 + tg_dist_rank(D), 10.0 * tg_dist_rank(D)};
    CHECK(tg_dist_sum(D, x, 2) == TG_OK && x[0] == 3.0 && x[1] == 10.0, "sum %g %g", x[0], x[1]);
}

/* A step that fails on rank 1 only (an id outside the vocabulary in its slice) stops both
 * ranks at that step with rank 1's message, instead of leaving rank 0 waiting. */
static void test_failure_on_one_rank(void) {
    bool bad = tg_dist_rank(D) == 1;
    tg_corpus *data = reverse_corpus(200, 2, 9, 31, bad);
    tg_model *m = small_model(3);
    tg_status st = train(m, data, NULL, sgd_config(3, 1), D, NULL);
    CHECK(st != TG_OK && strstr(tg_error_message(), "rank 1: "), "got %d '%s'", (int)st, tg_error_message());
    if (tg_dist_rank(D) == 0) printf("a failing rank 1 stops rank 0 too: %s\n", tg_error_message());
    /* the group is still usable afterwards */
    CHECK(tg_dist_agree(D, TG_OK) == TG_OK, "the group is broken after a failed step");
    tg_model_free(m);
    tg_corpus_free(data);
}

/* Out of memory on rank 1 only: its address space is capped a little above what it uses, so
 * the first step's workspace cannot be allocated there; both ranks stop with rank 1's
 * out-of-memory error, and rank 1 gets its memory back afterwards. */
__attribute__((unused)) static void test_out_of_memory_on_one_rank(void) {
    tg_corpus *data = reverse_corpus(400, 8, 12, 41, false);
    tg_model *m = small_model(4);
    tg_train_config c = sgd_config(2, 1);
    c.max_tokens = 100000; /* one batch of everything: a workspace of tens of MiB */
    struct rlimit old;
    getrlimit(RLIMIT_AS, &old);
    bool capped = false;
    if (tg_dist_rank(D) == 1) {
        long pages = 0, page = 4096;
        FILE *f = fopen("/proc/self/statm", "r");
        if (f && fscanf(f, "%ld", &pages) == 1) {
            struct rlimit cap = {(rlim_t)(pages * page) + ((rlim_t)8 << 20), old.rlim_max};
            capped = setrlimit(RLIMIT_AS, &cap) == 0;
        }
        if (f) fclose(f);
    }
    tg_status st = train(m, data, NULL, c, D, NULL);
    if (capped) setrlimit(RLIMIT_AS, &old);
    double ok = tg_dist_rank(D) != 1 || capped ? 1.0 : 0.0, neg = -ok;
    tg_dist_max(D, &neg, 1);
    CHECK(neg == -1.0, "could not cap rank 1's address space");
    CHECK(st == TG_ERR_NOMEM && strstr(tg_error_message(), "rank 1: "), "got %d '%s'", (int)st, tg_error_message());
    if (tg_dist_rank(D) == 0) printf("out of memory on rank 1 stops rank 0 too: %s\n", tg_error_message());
    CHECK(tg_dist_agree(D, TG_OK) == TG_OK, "the group is broken after the failed step");
    tg_model_free(m);
    tg_corpus_free(data);
}

/* Every check on rank D; 0 when every rank passed. */
static int run_checks(bool mpi) {
    if (tg_backend_cpu_new(1, &B) != TG_OK) {
        fprintf(stderr, "test_dist: %s\n", tg_error_message());
        tg_dist_abort(D, 1);
        return 1;
    }
    test_agree();
    test_broadcast_and_check();
    test_same_as_one_process(1);
    test_same_as_one_process(3);
    test_bucket_size_changes_nothing();
    test_failure_on_one_rank();
#ifndef __SANITIZE_ADDRESS__ /* ASan reserves its shadow memory and aborts when malloc fails */
    if (mpi) test_out_of_memory_on_one_rank();
#else
    (void)mpi;
    if (tg_dist_rank(D) == 0) printf("out of memory on one rank: not run under AddressSanitizer\n");
#endif
    double f[2] = {(double)failures, (double)checks};
    tg_dist_sum(D, f, 2);
    if (tg_dist_rank(D) == 0)
        printf("%d%%: Checks: %d, Failures: %d, Errors: 0\n", f[0] == 0 ? 100 : (int)(100.0 * (f[1] - f[0]) / f[1]),
               (int)f[1], (int)f[0]);
    tg_backend_free(B);
    return f[0] == 0 ? 0 : 1;
}

typedef struct {
    tg_dist *d;
    int rc;
} rank_thread;

static void *thread_rank(void *p) {
    rank_thread *r = p;
    D = r->d;
    r->rc = run_checks(false);
    tg_dist_free(D);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--threads")) {
        tg_dist *h[2];
        if (tg_dist_threads(2, h) != TG_OK) {
            fprintf(stderr, "test_dist: %s\n", tg_error_message());
            return 1;
        }
        CHECK(!strcmp(tg_dist_transport(h[0]), "threads") && tg_dist_rank(h[1]) == 1 &&
                  tg_dist_size(h[1]) == 2 && tg_dist_local_size(h[0]) == 2,
              "the group's transport, ranks and sizes");
        rank_thread r[2] = {{h[0], 1}, {h[1], 1}};
        pthread_t other;
        if (pthread_create(&other, NULL, thread_rank, &r[1]) != 0) {
            fprintf(stderr, "test_dist: cannot start a thread\n");
            return 1;
        }
        thread_rank(&r[0]);
        pthread_join(other, NULL);
        return r[0].rc || r[1].rc || failures ? 1 : 0;
    }
    if (!tg_have_mpi() || !tg_dist_launched(NULL)) {
        fprintf(stderr,
                "test_dist: needs an MPI build run under mpirun -np 2 (or --threads): skipped\n");
        return 77;
    }
    if (tg_dist_mpi(&argc, &argv, &D) != TG_OK) {
        fprintf(stderr, "test_dist: %s\n", tg_error_message());
        return 1;
    }
    if (tg_dist_size(D) != 2) {
        fprintf(stderr, "test_dist: run with mpirun -np 2 (got %d ranks)\n", tg_dist_size(D));
        tg_dist_free(D);
        return 1;
    }
    int rc = run_checks(true);
    tg_dist_free(D);
    return rc;
}
