/* The parameter store's slabs (core/store.c), an optimizer's step over runs of parameters
 * (train/optim.c) and the CPU backend's blocks on huge pages (backends/cpu/cpu.c):
 *   - the layout: every parameter on a 64-byte line, trainable ones one after another with
 *     their gradients at the same offsets, frozen ones apart, a big one in a slab of its own;
 *   - the padding between parameters is zero and stays zero through zeroing, scaling and
 *     optimizer steps;
 *   - a step over runs gives the same bits as one pass per parameter, for SGD with momentum,
 *     Adam with L2 decay and AdamW, across group boundaries, frozen parameters and slabs;
 *   - an optimizer leaves the parameters added after it alone;
 *   - tg_optim_step_zero_grad gives tg_optim_step's bits and leaves every gradient zero;
 *   - the gradient norm has the bits its summation order defines, on any thread count;
 *   - big lasting blocks (a store's slabs) start past a 2-MiB boundary, carry the kernel's
 *     huge-page advice ("hg" in /proc/self/smaps), other blocks do not; all go back to the
 *     system whether freed, cached or left to the backend's destruction. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backends/cpu/cpu-impl.h"
#include "core/store-impl.h"
#include "train/train-impl.h"
#include "tg/tg.h"
#include "tg_check.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        tg_status st_ = (call);                                                                    \
        ck_assert_msg(st_ == TG_OK, "%s failed: %s", #call, tg_error_message());                   \
    } while (0)

/* BIG floats: more than the second slab (core/store.c: 16 MiB) */
enum { LINE = 64, BIG = 4300000 };

static tg_backend *B;
static void setup(void) {
    ck_assert_int_eq(tg_backend_cpu_new(2, &B), TG_OK);
}
static void teardown(void) {
    tg_backend_free(B);
}

static float val(int p, int64_t i, int t) {
    return (float)(((i * 7 + p * 13 + t * 5) % 23) - 11) * 0.037f + 0.01f * (float)p;
}

/* a, f (frozen), b, big, c, d: sizes that leave padding after every one */
static const struct {
    const char *name;
    int64_t n;
    bool trainable;
} PARAMS[] = {{"a", 5, true},     {"f", 3, false}, {"b", 17, true},
              {"big", BIG, true}, {"c", 16, true}, {"d", 40, true}};
enum { NP = sizeof PARAMS / sizeof PARAMS[0] };

/* The backend's cache first holds blocks of a slab's size full of 0xff (NaN), which the
 * store's slabs then take (make_store keeps them off huge pages, which would be fresh
 * mappings): the padding is zero because the store zeroed it. */
static void dirty_cache(void) {
    const size_t slab = ((size_t)8 << 20) - TG_ALIGN;
    void *blk[4];
    for (int i = 0; i < 4; i++) {
        blk[i] = B->vt->alloc(B, slab);
        ck_assert_ptr_nonnull(blk[i]);
        memset(blk[i], 0xff, slab);
    }
    for (int i = 0; i < 4; i++)
        B->vt->free(B, blk[i], slab);
}

static tg_store *make_store(void) {
    tg_store *s;
    const bool huge = tg__cpu_huge_pages(false);
    dirty_cache();
    CK(tg_store_new(B, &s));
    for (int p = 0; p < NP; p++) {
        float *init = malloc(sizeof(float) * (size_t)PARAMS[p].n);
        for (int64_t i = 0; i < PARAMS[p].n; i++)
            init[i] = val(p, i, 0);
        int64_t shape[1] = {PARAMS[p].n};
        CK(tg_store_add(s, PARAMS[p].name, 1, shape, init, PARAMS[p].trainable));
        free(init);
    }
    tg__cpu_huge_pages(huge);
    return s;
}

/* The floats of slab k between its parameters and up to its used end, each checked zero */
static void assert_padding_zero(const tg_store *s,
                                const float *base_of_slab(const tg_store *, int64_t),
                                const char *what) {
    for (int64_t k = 0; k < s->nslabs; k++) {
        const float *base = base_of_slab(s, k);
        if (!base) continue;
        int64_t at = 0;
        for (int64_t i = 0; i <= s->n; i++) {
            /* the next parameter of this slab, in offset order (added in order) */
            const tg_param_entry *e = NULL;
            for (; i < s->n; i++)
                if (s->p[i].slab == k) {
                    e = &s->p[i];
                    break;
                }
            const int64_t end = e ? e->off : s->slabs[k].used;
            for (; at < end; at++)
                ck_assert_msg(base[at] == 0.0f, "%s: slab %lld float %lld is %g", what,
                              (long long)k, (long long)at, (double)base[at]);
            if (!e) break;
            at = e->off + e->numel;
        }
    }
}
static const float *data_of(const tg_store *s, int64_t k) {
    return s->slabs[k].data;
}
static const float *grad_of(const tg_store *s, int64_t k) {
    return s->slabs[k].grad;
}

/* Every trainable parameter's gradient set to val(i, j, t) */
static void write_grads(tg_store *s, int t) {
    float *g = malloc(sizeof(float) * BIG);
    for (int64_t i = 0; i < s->n; i++) {
        if (!s->p[i].trainable) continue;
        for (int64_t j = 0; j < s->p[i].numel; j++)
            g[j] = val((int)i, j, t);
        CK(tg_store_write_grad(s, i, g, s->p[i].numel));
    }
    free(g);
}

/* Two stores stepped by two optimizers: the same weights and moments, bit for bit (a moment
 * read or refused alike) */
static void assert_same_state(tg_store *s[2], tg_optim *o[2], const char *how) {
    for (int64_t i = 0; i < s[0]->n; i++) {
        const tg_param_entry *e = &s[0]->p[i];
        const size_t bytes = sizeof(float) * (size_t)e->numel;
        ck_assert_msg(!memcmp(e->data, s[1]->p[i].data, bytes), "%s: weights differ %s", e->name,
                      how);
        for (int which = 0; which < 2; which++) {
            float *m0 = malloc(bytes), *m1 = malloc(bytes);
            tg_status st0 = tg_optim_read_state(o[0], i, which, m0, e->numel);
            tg_status st1 = tg_optim_read_state(o[1], i, which, m1, e->numel);
            ck_assert_int_eq(st0, st1);
            if (st0 == TG_OK)
                ck_assert_msg(!memcmp(m0, m1, bytes), "%s: moment %d differs %s", e->name, which,
                              how);
            free(m0);
            free(m1);
        }
    }
}

START_TEST(test_store_layout) {
    tg_store *s = make_store();
    const tg_param_entry *p = s->p;
    for (int i = 0; i < NP; i++) {
        ck_assert_msg((uintptr_t)p[i].data % LINE == 0, "%s's data off a line", p[i].name);
        ck_assert_ptr_eq(p[i].data, s->slabs[p[i].slab].data + p[i].off);
        if (p[i].trainable) {
            ck_assert_msg((uintptr_t)p[i].grad % LINE == 0, "%s's gradient off a line", p[i].name);
            ck_assert_ptr_eq(p[i].grad, s->slabs[p[i].slab].grad + p[i].off);
        } else {
            ck_assert_ptr_null(p[i].grad);
            ck_assert_ptr_null(s->slabs[p[i].slab].grad);
        }
    }
    /* a, b, c, d one after another in the first slab; f apart; big alone */
    ck_assert_int_eq(p[0].slab, p[2].slab);
    ck_assert_int_eq(p[0].off, 0);
    ck_assert_int_eq(p[2].off, 16);
    ck_assert_int_eq(p[4].slab, p[0].slab);
    ck_assert_int_eq(p[4].off, 16 + 32);
    ck_assert_int_eq(p[5].off, 16 + 32 + 16);
    ck_assert_int_ne(p[1].slab, p[0].slab);
    ck_assert_int_ne(p[3].slab, p[0].slab);
    ck_assert_int_ne(p[3].slab, p[1].slab);
    ck_assert_int_eq(s->slabs[p[3].slab].cap, (BIG + 15) / 16 * 16);
    ck_assert_int_eq(s->nslabs, 3);
    for (int i = 0; i < NP; i++) {
        const int64_t stride = p[i].numel > 100 ? 9973 : 1;
        for (int64_t j = 0; j < p[i].numel; j += stride)
            ck_assert_float_eq(p[i].data[j], val(i, j, 0));
    }
    assert_padding_zero(s, data_of, "data");
    assert_padding_zero(s, grad_of, "gradients");
    tg_store_free(s);
}
END_TEST

/* Gradients written, scaled (a slab at a time, and a parameter at a time for a factor that is
 * not finite) and zeroed: the values change, the padding does not. */
START_TEST(test_store_grad_maths) {
    tg_store *s = make_store();
    write_grads(s, 1);
    CK(tg_store_scale_grad(s, 0.5f));
    ck_assert_float_eq(s->p[2].grad[3], val(2, 3, 1) * 0.5f);
    ck_assert_float_eq(s->p[3].grad[BIG - 1], val(3, BIG - 1, 1) * 0.5f);
    assert_padding_zero(s, grad_of, "gradients after scaling");
    CK(tg_store_scale_grad(s, INFINITY));
    assert_padding_zero(s, grad_of, "gradients after scaling by inf");
    ck_assert(isinf(s->p[0].grad[0]) || s->p[0].grad[0] == 0.0f);
    CK(tg_store_zero_grad(s));
    for (int i = 0; i < NP; i++)
        for (int64_t j = 0; PARAMS[i].trainable && j < PARAMS[i].n; j++)
            ck_assert_msg(s->p[i].grad[j] == 0.0f, "%s[%lld] not zeroed", PARAMS[i].name,
                          (long long)j);
    tg_store_free(s);
}
END_TEST

/* Two stores stepped alike, one with runs (the default) and one a pass per parameter: the same
 * bits in weights and moments, and zero padding, after steps with changing gradients. Groups:
 * d's learning-rate scale differs (a run ends before it), and so does b's weight decay. */
static void optim_pair(tg_optim_kind kind, float wd, float momentum) {
    tg_store *s[2];
    tg_optim *o[2];
    tg_optim_config cfg = tg_optim_defaults(kind);
    cfg.weight_decay = wd;
    cfg.momentum = momentum;
    for (int r = 0; r < 2; r++) {
        s[r] = make_store();
        CK(tg_optim_new(s[r], &cfg, &o[r]));
        CK(tg_optim_set_group(o[r], "d", wd, 0.5f, NULL));
        CK(tg_optim_set_group(o[r], "b", wd * 2.0f + 0.01f, 1.0f, NULL));
    }
    for (int t = 1; t <= 4; t++) {
        for (int r = 0; r < 2; r++) {
            write_grads(s[r], t);
            const bool was = tg__optim_runs(r == 0);
            CK(tg_optim_step(o[r], 1e-2f));
            tg__optim_runs(was);
        }
        /* runs: a | b | big | c | d (b's and d's groups differ from their neighbours', big
         * has a slab of its own); a pass per parameter: the same five. With b's group equal
         * to a's there would be four (below). */
        ck_assert_int_eq(tg__optim_passes(o[0]), 5);
        ck_assert_int_eq(tg__optim_passes(o[1]), 5);
    }
    CK(tg_optim_set_group(o[0], "b", wd, 1.0f, NULL));
    CK(tg_optim_step(o[0], 1e-2f));
    ck_assert_int_eq(tg__optim_passes(o[0]), 4);
    CK(tg_optim_set_group(o[1], "b", wd, 1.0f, NULL));
    const bool was = tg__optim_runs(false);
    CK(tg_optim_step(o[1], 1e-2f));
    tg__optim_runs(was);
    ck_assert_int_eq(tg__optim_passes(o[1]), 5);
    assert_same_state(s, o, "between runs and passes per parameter");
    for (int i = 0; i < NP; i++) /* the weights moved */
        if (PARAMS[i].trainable) ck_assert_float_ne(s[0]->p[i].data[0], val(i, 0, 0));
    assert_padding_zero(s[0], data_of, "weights after steps");
    for (int r = 0; r < 2; r++) {
        tg_optim_free(o[r]);
        tg_store_free(s[r]);
    }
}

START_TEST(test_optim_runs_sgd) {
    optim_pair(TG_OPTIM_SGD, 0.01f, 0.9f);
}
END_TEST
START_TEST(test_optim_runs_adam) {
    optim_pair(TG_OPTIM_ADAM, 0.01f, 0.0f);
}
END_TEST
START_TEST(test_optim_runs_adamw) {
    optim_pair(TG_OPTIM_ADAMW, 0.05f, 0.0f);
}
END_TEST

/* A parameter added after the optimizer was made: not stepped, no group, no state (before the
 * slabs the step read its moments past the end of the optimizer's arrays). */
START_TEST(test_optim_param_added_later) {
    tg_store *s = make_store();
    tg_optim *o;
    tg_optim_config cfg = tg_optim_defaults(TG_OPTIM_ADAM);
    CK(tg_optim_new(s, &cfg, &o));
    const float init[3] = {1.0f, 2.0f, 3.0f}, g[3] = {0.5f, 0.5f, 0.5f};
    int64_t shape[1] = {3};
    CK(tg_store_add(s, "late", 1, shape, init, true));
    CK(tg_store_write_grad(s, NP, g, 3));
    CK(tg_optim_step(o, 0.1f));
    float got[3];
    CK(tg_store_read(s, NP, got, 3));
    ck_assert_mem_eq(got, init, sizeof init);
    ck_assert_int_ne(tg_optim_group_of(o, NP, NULL, NULL), TG_OK);
    ck_assert_int_ne(tg_optim_read_state(o, NP, 0, got, 3), TG_OK);
    tg_optim_free(o);
    tg_store_free(s);
}
END_TEST

/* tg_optim_step_zero_grad against tg_optim_step then tg_store_zero_grad: the same weights and
 * moments, every gradient zero after it — a parameter added after the optimizer's too — and
 * after an error as well. */
static void step_zero_pair(tg_optim_kind kind) {
    tg_store *s[2];
    tg_optim *o[2];
    tg_optim_config cfg = tg_optim_defaults(kind);
    cfg.weight_decay = 0.02f;
    const float late[3] = {1.0f, 2.0f, 3.0f};
    int64_t shape[1] = {3};
    for (int r = 0; r < 2; r++) {
        s[r] = make_store();
        CK(tg_optim_new(s[r], &cfg, &o[r]));
        CK(tg_optim_set_group(o[r], "c", 0.0f, 2.0f, NULL));
        CK(tg_store_add(s[r], "late", 1, shape, late, true));
    }
    for (int t = 1; t <= 3; t++)
        for (int r = 0; r < 2; r++) {
            write_grads(s[r], t);
            if (r == 0) {
                CK(tg_optim_step_zero_grad(o[0], 1e-2f));
            } else {
                CK(tg_optim_step(o[1], 1e-2f));
                CK(tg_store_zero_grad(s[1]));
            }
        }
    assert_same_state(s, o, "between step_zero_grad and step then zero_grad");
    for (int64_t i = 0; i < s[0]->n; i++) {
        const tg_param_entry *e = &s[0]->p[i];
        for (int64_t j = 0; e->grad && j < e->numel; j++)
            ck_assert_msg(e->grad[j] == 0.0f, "%s's gradient %lld not zeroed", e->name,
                          (long long)j);
    }
    ck_assert_float_eq(s[0]->p[NP].data[2], 3.0f); /* not the optimizer's: not stepped */
    /* an error (a negative learning rate) still leaves the gradients zero */
    write_grads(s[0], 4);
    ck_assert_int_eq(tg_optim_step_zero_grad(o[0], -1.0f), TG_ERR_INVALID);
    ck_assert_float_eq(s[0]->p[0].grad[PARAMS[0].n - 1], 0.0f);
    for (int r = 0; r < 2; r++) {
        tg_optim_free(o[r]);
        tg_store_free(s[r]);
    }
}

START_TEST(test_step_zero_grad_sgd) {
    step_zero_pair(TG_OPTIM_SGD);
}
END_TEST
START_TEST(test_step_zero_grad_adam) {
    step_zero_pair(TG_OPTIM_ADAM);
}
END_TEST
START_TEST(test_step_zero_grad_adamw) {
    step_zero_pair(TG_OPTIM_ADAMW);
}
END_TEST

/* The gradient norm's bits, as backends/cpu/cpu.c defines them, in scalar code: per slab, per
 * chunk of 8192 values, 16 float running sums (lane l: values l, l + 16, ...) added in a tree
 * (8, 4, 2, 1 apart), the chunks' sums added in double, in order. */
static double norm_by_the_book(const tg_store *s) {
    double total = 0.0;
    for (int64_t k = 0; k < s->nslabs; k++) {
        const float *g = s->slabs[k].grad;
        const int64_t n = s->slabs[k].used;
        double slab = 0.0;
        for (int64_t c = 0; g && c < n; c += 8192) {
            float acc[16] = {0.0f};
            for (int64_t i = c; i < c + 8192 && i < n; i++)
                acc[(i - c) % 16] += g[i] * g[i];
            for (int w = 8; w > 0; w /= 2)
                for (int l = 0; l < w; l++)
                    acc[l] += acc[l + w];
            slab += acc[0];
        }
        total += slab;
    }
    return sqrt(total);
}

/* The norm on 1, 2 and 3 threads: the same bits, the book's. */
START_TEST(test_grad_norm_bits) {
    double first = 0.0;
    for (int th = 1; th <= 3; th++) {
        tg_backend *b;
        CK(tg_backend_cpu_new(th, &b));
        tg_store *s;
        CK(tg_store_new(b, &s));
        const int64_t sizes[] = {20000, 5, 8193, 100003, 1};
        for (int p = 0; p < 5; p++) {
            char name[8];
            snprintf(name, sizeof name, "p%d", p);
            float *g = malloc(sizeof(float) * (size_t)sizes[p]);
            for (int64_t i = 0; i < sizes[p]; i++)
                g[i] = val(p, i, 3) * (1.0f + 1e-3f * (float)(i % 101));
            CK(tg_store_add(s, name, 1, &sizes[p], NULL, true));
            CK(tg_store_write_grad(s, p, g, sizes[p]));
            free(g);
        }
        double norm;
        CK(tg_store_grad_norm(s, &norm));
        ck_assert_msg(norm == norm_by_the_book(s), "%d threads: norm %.17g, by the book %.17g", th,
                      norm, norm_by_the_book(s));
        if (th == 1) first = norm;
        ck_assert_msg(norm == first, "%d threads: norm %.17g, on 1 thread %.17g", th, norm, first);
        tg_store_free(s);
        tg_backend_free(b);
    }
}
END_TEST

/* Whether the mapping that holds p has the kernel's huge-page advice: VmFlags "hg" in
 * /proc/self/smaps. -1 where that file cannot be read. */
static int advised_huge(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    bool inside = false;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (inside && !strncmp(line, "VmFlags:", 8)) {
            found = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Whether this system shows the advice at all: a fresh mapping, advised, carries "hg". Under
 * qemu-user (./test.sh --cross) madvise is accepted and ignored and /proc/self/smaps is the
 * emulator's, without "hg"; a kernel without transparent huge pages refuses the advice. */
static bool huge_advice_visible(void) {
    const size_t n = (size_t)4 << 20;
    char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    const bool seen = madvise(m, n, MADV_HUGEPAGE) == 0 && advised_huge(m) == 1;
    munmap(m, n);
    return seen;
}

START_TEST(test_huge_blocks) {
    const size_t big = (size_t)24 << 20, small = (size_t)1 << 20;
    const bool visible = huge_advice_visible();
    if (!visible)
        printf("huge_blocks: huge-page advice not visible in /proc/self/smaps on this system "
               "(qemu-user, or no THP): the hg checks are skipped\n");
    for (int on = 1; on >= 0; on--) {
        const bool was = tg__cpu_huge_pages(on);
        tg_backend *b;
        CK(tg_backend_cpu_new(2, &b));
        char *p = tg__backend_alloc_lasting(b, big), *q = tg__backend_alloc_lasting(b, small);
        char *w = b->vt->alloc(b, big), *v = b->vt->alloc(b, small); /* a workspace's */
        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_nonnull(q);
        ck_assert_ptr_nonnull(w);
        ck_assert_ptr_nonnull(v);
        ck_assert_int_eq((uintptr_t)p % LINE, 0);
        memset(p, 0x5a, big);
        memset(q, 0x5a, small);
        memset(w, 0x5a, big);
        ck_assert_int_eq(p[big - 1], 0x5a);
        if (on) {
            ck_assert_int_eq(((uintptr_t)p - TG_ALIGN) % ((uintptr_t)2 << 20), 0);
            ck_assert_int_eq(((uintptr_t)w - TG_ALIGN) % ((uintptr_t)2 << 20), 0);
        }
        const int hg = visible ? advised_huge(p) : -1;
        if (hg >= 0) {
            ck_assert_int_eq(hg, on);
            ck_assert_int_eq(advised_huge(w), on);
            ck_assert_int_eq(advised_huge(q), 0); /* small blocks stay on the heap */
            ck_assert_int_eq(advised_huge(v), 0);
        }
        /* freed: cached; taken again by an alloc; freed; the backend's end gives the cache back */
        b->vt->free(b, w, big);
        b->vt->free(b, p, big);
        char *r = b->vt->alloc(b, big), *r2 = b->vt->alloc(b, big);
        ck_assert(r == p || r2 == p);
        ck_assert_int_eq(p[7], 0x5a);
        b->vt->free(b, r, big);
        b->vt->free(b, r2, big);
        b->vt->free(b, q, small);
        b->vt->free(b, v, small);
        tg_backend_free(b);
        tg__cpu_huge_pages(was);
    }
}
END_TEST

/* A scratch store (tg__store_new_scratch: a decoder's tables, made anew for each batch of
 * sentences) takes its slabs from blocks the previous one freed, down to half their size; a
 * lasting store's slabs are always new blocks. */
START_TEST(test_scratch_store_reuse) {
    const bool was = tg__cpu_huge_pages(true);
    tg_backend *b;
    CK(tg_backend_cpu_new(1, &b));
    const int64_t big[2] = {5 << 20, 1}, smaller[2] = {3 << 20, 1}; /* 20 and 12 MiB */
    float *seen[3];
    for (int k = 0; k < 3; k++) {
        tg_store *s;
        CK(k < 2 ? tg__store_new_scratch(b, &s) : tg_store_new(b, &s));
        CK(tg_store_add(s, "table", 2, k ? smaller : big, NULL, false));
        seen[k] = s->p[0].data;
        ck_assert_float_eq(seen[k][(3 << 20) - 1], 0.0f); /* zeroed, reused or not */
        seen[k][(3 << 20) - 1] = 1.0f;
        tg_store_free(s);
    }
    ck_assert(seen[1] == seen[0]);
    ck_assert(seen[2] != seen[0]);
    tg_backend_free(b);
    tg__cpu_huge_pages(was);
}
END_TEST

/* A big block that is not lasting (a workspace) is made in its size class: whole 2-MiB pages,
 * at most 1/8 (or one page) more than asked, so that a freed one serves the next batch's
 * slightly bigger workspace; on the heap it is made as asked. Only a few bytes past what is
 * asked are touched here: the class's tail is address space, not resident memory. */
START_TEST(test_workspace_classes) {
    const size_t page = (size_t)2 << 20;
    const size_t asks[] = {(size_t)8 << 20, ((size_t)9 << 20) + 4, (size_t)100 << 20,
                           ((size_t)300 << 20) + 12345};
    for (int on = 1; on >= 0; on--) {
        const bool was = tg__cpu_huge_pages(on);
        for (size_t k = 0; k < sizeof asks / sizeof *asks; k++) {
            tg_backend *b;
            CK(tg_backend_cpu_new(1, &b));
            const size_t before = b->in_use, ask = asks[k];
            char *w = b->vt->alloc(b, ask);
            ck_assert_ptr_nonnull(w);
            const size_t held = b->in_use - before; /* the block's size, its header not counted */
            ck_assert_uint_ge(held, ask);
            if (on) {
                ck_assert_uint_eq((held + TG_ALIGN) % page, 0);
                ck_assert_msg(held + TG_ALIGN <= ask + ask / 8 + page, "%zu bytes held for %zu",
                              held, ask);
            } else {
                ck_assert_uint_lt(held, ask + TG_ALIGN);
            }
            w[0] = w[ask - 1] = 1;
            b->vt->free(b, w, ask);
            /* the rest of the class: the same block again */
            char *w2 = b->vt->alloc(b, held);
            ck_assert(w2 == w);
            ck_assert_int_eq(w2[ask - 1], 1);
            b->vt->free(b, w2, held);
            tg_backend_free(b);
        }
        /* batches' workspaces of 120, 122, ..., 130 MiB, in growing order as a run meets them:
         * on huge pages two blocks serve them all (classes of 8 MiB in this octave), and the
         * first goes back when the second is made; made as asked, each needs a new one */
        tg_backend *b;
        CK(tg_backend_cpu_new(1, &b));
        const size_t before = b->in_use;
        char *seen[6];
        int blocks = 0;
        for (size_t mib = 120; mib <= 130; mib += 2) {
            const size_t ask = mib << 20;
            char *w = b->vt->alloc(b, ask);
            ck_assert_ptr_nonnull(w);
            bool known = false;
            for (int i = 0; i < blocks; i++)
                known |= seen[i] == w;
            if (!known) seen[blocks++] = w;
            w[ask - 1] = 1;
            b->vt->free(b, w, ask);
        }
        if (on) {
            ck_assert_int_eq(blocks, 2);
            const size_t last = (size_t)130 << 20; /* one block held, the last one's class */
            ck_assert_uint_le(b->in_use - before, last + last / 8 + page);
        } else {
            ck_assert_int_eq(blocks, 6);
        }
        tg_backend_free(b);
        tg__cpu_huge_pages(was);
    }
}
END_TEST

Suite *tg_test_suite(void) {
    Suite *su = suite_create("slabs");
    TCase *tc = tcase_create("slabs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_store_layout);
    tcase_add_test(tc, test_store_grad_maths);
    tcase_add_test(tc, test_optim_runs_sgd);
    tcase_add_test(tc, test_optim_runs_adam);
    tcase_add_test(tc, test_optim_runs_adamw);
    tcase_add_test(tc, test_optim_param_added_later);
    tcase_add_test(tc, test_step_zero_grad_sgd);
    tcase_add_test(tc, test_step_zero_grad_adam);
    tcase_add_test(tc, test_step_zero_grad_adamw);
    tcase_add_test(tc, test_grad_norm_bits);
    tcase_add_test(tc, test_huge_blocks);
    tcase_add_test(tc, test_workspace_classes);
    tcase_add_test(tc, test_scratch_store_reuse);
    suite_add_tcase(su, tc);
    return su;
}
