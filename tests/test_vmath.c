/* The CPU backend's vector maths (backends/cpu/vmath*.c) at every instruction-set level the
 * process has (isa.h: the CPU's best, or what TG_CPU_ISA caps it at; each level above it is
 * reported skipped): each level's kernels called directly (tg_cpu_vmath_at), against libm in
 * double with the error bounds stated in vmath.h — exp, tanh, GELU and its derivative over
 * dense sweeps; the row softmax for row lengths 1..40 with masked (-inf) entries, all-masked
 * rows, in place, and bit for bit whether a row is taken alone or in a block of short rows;
 * longer rows (up to a vocabulary's) against the cross-entropy's sums; its backward likewise;
 * layer norm and its statistics; the cross-entropy's rows (max, sums, gradient); tails of every
 * length agree with whole vectors — and against the portable level, the reference: every
 * function of every vector level within a few units in the last place of it (bit for bit where
 * vmath.h says so), and the AVX-512 level bit for bit against the AVX2 level. Prints the
 * largest errors seen. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/isa.h"
#include "backends/cpu/vmath.h"
#include "tg_check.h"

enum { NS = 200003 };

static double gelu_ref(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double gelu_grad_ref(double x) {
    double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

/* NS points evenly over [lo, hi] */
static float *sweep(double lo, double hi) {
    float *x = malloc(sizeof(float) * NS);
    for (int i = 0; i < NS; i++) x[i] = (float)(lo + (hi - lo) * i / (NS - 1));
    return x;
}

/* How many levels are under test: portable (0) up to the process's level. The first call
 * says which levels are not tested and why. */
static int nlevels(void) {
    static bool said;
    const tg_cpu_isa_level now = tg_cpu_isa();
    for (int l = now + 1; !said && l < TG_CPU_ISA_LEVELS; l++)
        printf("vmath: level %s not tested: %s\n", tg_cpu_isa_level_name((tg_cpu_isa_level)l),
               l > (int)tg_cpu_isa_supported() ? "this CPU lacks it" : "capped by TG_CPU_ISA");
    said = true;
    return (int)now + 1;
}

/* The kernels of level l (one the process has) */
static const tg_cpu_vmath *at(int l) {
    const tg_cpu_vmath *k = tg_cpu_vmath_at((tg_cpu_isa_level)l);
    ck_assert(k != NULL);
    return k;
}

static const char *lname(int l) {
    return tg_cpu_isa_level_name((tg_cpu_isa_level)l);
}

/* Whether the process has the AVX-512 level (whose kernels give the AVX2 level's bits) */
static bool wide(void) {
    return nlevels() > TG_CPU_ISA_AVX512;
}

START_TEST(test_exp) {
    float *x = sweep(-87.3, 88.3), *y = malloc(sizeof(float) * NS);
    for (int level = 0; level < nlevels(); level++) {
        at(level)->vexp(x, y, NS);
        double worst = 0;
        for (int i = 0; i < NS; i++) {
            double r = exp((double)x[i]), e = fabs(y[i] - r) / r;
            worst = e > worst ? e : worst;
        }
        printf("exp %s: max relative error %.3g (2^%.1f)\n", lname(level), worst, log2(worst));
        ck_assert_msg(worst <= 0x1p-23, "exp: relative error %g", worst);
        float special[3] = {NAN, -INFINITY, -1000.0f}, out[3];
        at(level)->vexp(special, out, 3);
        ck_assert(isnan(out[0]));
        ck_assert(out[1] >= 0.0f && out[1] < 1.3e-38f && out[2] < 1.3e-38f);
    }
    free(x);
    free(y);
}
END_TEST

START_TEST(test_tanh) {
    float *x = sweep(-12.0, 12.0), *y = malloc(sizeof(float) * NS);
    for (int level = 0; level < nlevels(); level++) {
        at(level)->vtanh(x, y, NS);
        double worst_abs = 0, worst_rel = 0;
        for (int i = 0; i < NS; i++) {
            double r = tanh((double)x[i]), e = fabs(y[i] - r);
            worst_abs = e > worst_abs ? e : worst_abs;
            if (fabs(x[i]) < 0.625 && r != 0) worst_rel = fmax(worst_rel, e / fabs(r));
        }
        printf("tanh %s: max absolute error %.3g (2^%.1f), relative below 0.625 %.3g\n",
               lname(level), worst_abs, log2(worst_abs), worst_rel);
        ck_assert_msg(worst_abs <= 0x1p-23, "tanh: absolute error %g", worst_abs);
        ck_assert_msg(worst_rel <= 0x1p-23, "tanh: relative error %g", worst_rel);
    }
    free(x);
    free(y);
}
END_TEST

START_TEST(test_gelu) {
    float *x = sweep(-10.0, 10.0), *y = malloc(sizeof(float) * NS), *g = malloc(sizeof(float) * NS);
    float *dy = malloc(sizeof(float) * NS);
    for (int i = 0; i < NS; i++) dy[i] = 1.0f;
    for (int level = 0; level < nlevels(); level++) {
        at(level)->vgelu(x, y, NS);
        at(level)->vgelu_back(x, dy, g, NS);
        double wf = 0, wb = 0;
        for (int i = 0; i < NS; i++) {
            double ef = fabs(y[i] - gelu_ref(x[i])) / fmax(fabs(x[i]), 1.0);
            double eb = fabs(g[i] - gelu_grad_ref(x[i]));
            wf = ef > wf ? ef : wf;
            wb = eb > wb ? eb : wb;
        }
        printf("gelu %s: max error %.3g (2^%.1f) of max(|x|, 1); gelu' max absolute error %.3g "
               "(2^%.1f)\n",
               lname(level), wf, log2(wf), wb, log2(wb));
        ck_assert_msg(wf <= 0x1p-22, "gelu: error %g", wf);
        ck_assert_msg(wb <= 0x1p-21, "gelu': error %g", wb);
    }
    if (wide()) { /* y, g: the 16-lane code's, which gives the 8-lane code's bits */
        float *y8 = malloc(sizeof(float) * NS), *g8 = malloc(sizeof(float) * NS);
        at(TG_CPU_ISA_AVX2)->vgelu(x, y8, NS);
        at(TG_CPU_ISA_AVX2)->vgelu_back(x, dy, g8, NS);
        ck_assert(memcmp(y, y8, sizeof(float) * NS) == 0 && memcmp(g, g8, sizeof(float) * NS) == 0);
        free(y8);
        free(g8);
    }
    free(x);
    free(y);
    free(g);
    free(dy);
}
END_TEST

/* Every tail length gives the same values as the same elements inside whole vectors, at every
 * level, and nothing past the end is written. */
START_TEST(test_tails) {
    float x[40], whole[40], part[40], dy[40];
    for (int i = 0; i < 40; i++) {
        x[i] = (float)(i - 20) * 0.37f;
        dy[i] = 1.0f + 0.01f * (float)i;
    }
    for (int f = 0; f < 4 * nlevels(); f++) {
        const tg_cpu_vmath *k = at(f / 4);
        for (int n = 0; n <= 17; n++) {
            for (int i = 0; i < 40; i++) part[i] = whole[i] = -7.0f;
            switch (f % 4) {
            case 0: k->vexp(x, whole, 40), k->vexp(x + 3, part + 3, n); break;
            case 1: k->vtanh(x, whole, 40), k->vtanh(x + 3, part + 3, n); break;
            case 2: k->vgelu(x, whole, 40), k->vgelu(x + 3, part + 3, n); break;
            default: k->vgelu_back(x, dy, whole, 40), k->vgelu_back(x + 3, dy + 3, part + 3, n);
            }
            for (int i = 0; i < 40; i++) {
                if (i >= 3 && i < 3 + n)
                    ck_assert_msg(part[i] == whole[i], "%s fn %d n %d i %d", lname(f / 4), f % 4, n, i);
                else ck_assert(part[i] == -7.0f); /* nothing written outside */
            }
        }
    }
}
END_TEST

/* Every level, rows of 1..40 (the AVX2 level takes rows of up to 32 eight at a time, transposed,
 * and the rest one by one: 37 rows are four blocks of 8 and 5 single rows; the AVX-512 level
 * rows of 9-32 sixteen at a time), masked entries and all-masked rows inside and outside the
 * blocks. */
START_TEST(test_softmax_rows) {
    enum { ROWS = 37 };
    float x[ROWS * 40], y[ROWS * 40], z[ROWS * 40];
    double worst = 0;
    for (int d = 1; d <= 40; d++)
        for (int level = 0; level < nlevels(); level++)
            for (int lg = 0; lg < 2; lg++) {
                for (int i = 0; i < ROWS * d;
                     i++) /* values whose sums round differently by order */
                    x[i] =
                        (float)(((i * 29) % 23) - 11) * 0.45f + (float)((i * 7919) % 1000) * 1e-3f;
                x[1 * d + d / 2] = -INFINITY;                          /* one masked entry */
                x[9 * d] = x[9 * d + d - 1] = -INFINITY;               /* first and last */
                x[17 * d + d / 3] = -INFINITY;                         /* in a single row */
                for (int j = 0; j < d; j++) x[3 * d + j] = -INFINITY;  /* all masked: block */
                for (int j = 0; j < d; j++) x[18 * d + j] = -INFINITY; /* all masked: single */
                x[12 * d + d / 2] = 5.5f;                              /* a new row maximum */
                for (int j = 0; j < d;
                     j++) /* exps down to and past exp's clamp at -87.3 (2^-126) */
                    x[20 * d + j] = 1.0f - 9.71f * (float)j;
                at(level)->softmax_rows(x, y, ROWS, d, lg);
                for (int r = 0; r < ROWS; r++) {
                    const float *xr = x + r * d, *yr = y + r * d;
                    double m = -INFINITY, s = 0;
                    for (int j = 0; j < d; j++) m = fmax(m, xr[j]);
                    for (int j = 0; j < d; j++) s += xr[j] == -INFINITY ? 0.0 : exp(xr[j] - m);
                    for (int j = 0; j < d; j++) {
                        if (m == -INFINITY || xr[j] == -INFINITY) { /* all or this one masked */
                            ck_assert_msg(lg ? yr[j] == -INFINITY : yr[j] == 0.0f, "d %d level %d log %d row %d col %d: %g",
                                          d, level, lg, r, j, yr[j]);
                            continue;
                        }
                        double ref = lg ? xr[j] - m - log(s) : exp(xr[j] - m) / s;
                        double e = fabs(yr[j] - ref) / (lg ? fmax(fabs(ref), 1.0) : fmax(ref, 1e-30));
                        worst = e > worst ? e : worst;
                        ck_assert_msg(e <= 1e-6, "d %d level %d log %d row %d col %d: %.9g vs %.9g", d, level,
                                      lg, r, j, yr[j], ref);
                    }
                }
                for (int i = 0; i < ROWS * d; i++) z[i] = x[i]; /* in place gives the same */
                at(level)->softmax_rows(z, z, ROWS, d, lg);
                ck_assert(memcmp(z, y, sizeof(float) * ROWS * d) == 0);
                /* Rows taken one at a time, or from an offset that shifts the blocks (a thread's
                 * share), give the same bits, and nothing outside the rows is written. */
                for (int r = 0; r < ROWS; r++) {
                    at(level)->softmax_rows(x + r * d, z + r * d, 1, d, lg);
                    ck_assert_msg(memcmp(z + r * d, y + r * d, sizeof(float) * d) == 0, "d %d level %d log %d row %d alone",
                                  d, level, lg, r);
                }
                for (int off = 1; off < 4; off++)
                    for (int n = 8 + off; n <= 16 + off; n += 8) { /* 8- and 16-row blocks */
                        for (int i = 0; i < ROWS * d; i++)
                            z[i] = 7.0f;
                        at(level)->softmax_rows(x + off * d, z + off * d, n, d, lg);
                        for (int i = 0; i < ROWS * d; i++) {
                            bool in = i >= off * d && i < (off + n) * d;
                            ck_assert_msg(in ? z[i] == y[i] || (isnan(z[i]) && isnan(y[i]))
                                             : z[i] == 7.0f,
                                          "d %d level %d log %d offset %d rows %d element %d", d,
                                          level, lg, off, n, i);
                        }
                    }
                if (level == TG_CPU_ISA_AVX512) { /* the 16-row blocks: AVX2's bits */
                    at(TG_CPU_ISA_AVX2)->softmax_rows(x, z, ROWS, d, lg);
                    ck_assert_msg(memcmp(z, y, sizeof(float) * ROWS * d) == 0,
                                  "d %d log %d: AVX-512 and AVX2 differ", d, lg);
                }
            }
    printf("softmax rows (%d levels): max relative error %.3g\n", nlevels(), worst);
}
END_TEST

/* One cross-entropy row's sums and gradient at a level */
typedef struct {
    float se, m, sx, g[8001 + 16];
} ce_result;

/* the gradient row written at r->g + off (off 0-15: the AVX-512 level stores long rows from
 * their first 64-byte line on with streaming stores) */
static void ce_on(const float *x, int n, int level, int off, ce_result *r) {
    r->se = at(level)->ce_sumexp(x, n, &r->m, &r->sx);
    at(level)->ce_grad(x, n, r->m, 1.0f / r->se, 0.5f, 0.1f / (float)n, r->g + off);
}

/* The cross-entropy's rows (vocabularies): max, sum of exps, plain sum and gradient row at every
 * level against double, rows of 1..20, 45, 1000, 7816 and 8000 values over [-20, 20] with -inf
 * entries (probability 0; the plain sum then is -inf); every tail length; the gradient row
 * leaves the value past its end alone. Bounds: the logsumexp m + log(sum) and the plain sum
 * within 2e-6 of max(|ref|, 1) (float sums of up to 8000 terms in 16 lanes), the gradient
 * within 5e-7 absolute (scale 1, base eps/V). And the AVX-512 code gives the AVX2 code's bits
 * (element k in lane k % 16 of both, the sums ended alike), wherever the gradient row starts
 * within a 64-byte line, and leaves the value past the row's end alone. */
START_TEST(test_cross_entropy_rows) {
    static const int lens[] = {1,  2,  3,  5,  7,  8,  9,    15,   16,
                               17, 20, 24, 31, 33, 45, 1000, 7816, 8000};
    float *x = malloc(sizeof(float) * 8001), *g = malloc(sizeof(float) * 8001);
    ce_result *ref = malloc(sizeof *ref), *got = malloc(sizeof *got);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int masked = 0; masked < 2; masked++) {
            const int n = lens[li];
            for (int k = 0; k < n; k++)
                x[k] = (float)(((k * 7919) % 4001) - 2000) * 0.01f;
            if (masked && n > 2) x[n / 2] = x[n - 1] = -INFINITY;
            if (!wide()) continue;
            ce_on(x, n, TG_CPU_ISA_AVX2, 0, ref);
            for (int off = 0; off < 16; off += 5) {
                got->g[off + n] = 7.0f;
                ce_on(x, n, TG_CPU_ISA_AVX512, off, got);
                ck_assert_msg(memcmp(&got->se, &ref->se, sizeof got->se) == 0 && got->m == ref->m &&
                                  memcmp(&got->sx, &ref->sx, sizeof got->sx) == 0 &&
                                  memcmp(got->g + off, ref->g, sizeof(float) * (size_t)n) == 0 &&
                                  got->g[off + n] == 7.0f,
                              "n %d masked %d offset %d: the AVX-512 code's bits differ from the "
                              "AVX2 code's",
                              n, masked, off);
            }
        }
    free(ref), free(got);
    double worst_l = 0, worst_g = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int masked = 0; masked < 2; masked++)
            for (int level = 0; level < nlevels(); level++) {
                const int n = lens[li];
                for (int k = 0; k < n; k++)
                    x[k] = (float)(((k * 7919) % 4001) - 2000) * 0.01f;
                if (masked && n > 2) x[n / 2] = x[n - 1] = -INFINITY;
                double m = -INFINITY, se = 0, sx = 0;
                for (int k = 0; k < n; k++)
                    m = fmax(m, x[k]);
                for (int k = 0; k < n; k++)
                    se += x[k] == -INFINITY ? 0.0 : exp(x[k] - m), sx += x[k];
                const double lse = m + log(se);
                float gm, gm2, got_sx = 0.0f,
                               se_f = at(level)->ce_sumexp(x, n, &gm, &got_sx);
                ck_assert(gm == (float)m);
                double got = gm + log(se_f), e = fabs(got - lse) / fmax(fabs(lse), 1.0);
                worst_l = fmax(worst_l, e);
                ck_assert_msg(e <= 2e-6, "n %d masked %d level %d: lse %.9g vs %.9g", n, masked,
                              level, got, lse);
                ck_assert_msg(isinf(sx) ? got_sx == sx
                                        : fabs(got_sx - sx) <= 2e-6 * fmax(fabs(sx), 1.0) + 1e-4,
                              "n %d masked %d level %d: sum %.9g vs %.9g", n, masked, level, got_sx,
                              sx);
                ck_assert(at(level)->ce_sumexp(x, n, &gm2, NULL) == se_f && gm2 == gm);
                const float base = 0.1f / (float)n;
                g[n] = 7.0f;
                at(level)->ce_grad(x, n, gm, 1.0f / se_f, 1.0f, base, g);
                ck_assert(g[n] == 7.0f);
                for (int k = 0; k < n; k++) {
                    double ref = (x[k] == -INFINITY ? 0.0 : exp(x[k] - lse)) - base;
                    worst_g = fmax(worst_g, fabs(g[k] - ref));
                    ck_assert_msg(fabs(g[k] - ref) <= 5e-7,
                                  "n %d masked %d level %d: grad[%d] %.9g vs %.9g", n, masked, level,
                                  k, g[k], ref);
                }
            }
    printf("cross-entropy rows (%d levels): lse relative error %.3g, gradient absolute %.3g\n",
           nlevels(), worst_l, worst_g);
    free(x), free(g);
}
END_TEST

/* Rows longer than 32 values (vocabularies; attention over many keys) take the cross-entropy's
 * sums (vmath-impl.h: SHORT_ROW_MAX): at every level a log-softmax row is x - (m + logf(s)) bit
 * for bit with m and s the cross-entropy's (so -log p(y) is the loss's NLL), a softmax row
 * exp(x - m) / s within 1e-6 of double; the AVX-512 code gives the AVX2 code's bits; in place
 * gives the same bits; nothing past the row is written. Rows of 33..80 (every tail of 16) and
 * 1000, 7816, 8000, with -inf entries and an all-masked row. */
START_TEST(test_softmax_long_rows) {
    static const int lens[] = {33, 34, 40, 47, 48, 49, 63, 64, 65, 79, 80, 1000, 7816, 8000};
    float *x = malloc(sizeof(float) * 8001), *y = malloc(sizeof(float) * 8001),
          *z = malloc(sizeof(float) * 8001);
    double worst = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int masked = 0; masked < 3; masked++)
            for (int lg = 0; lg < 2; lg++)
                for (int level = 0; level < nlevels(); level++) {
                    const int n = lens[li];
                    for (int k = 0; k < n; k++)
                        x[k] =
                            masked == 2 ? -INFINITY : (float)(((k * 7919) % 4001) - 2000) * 0.01f;
                    if (masked == 1) x[0] = x[n / 2] = x[n - 1] = -INFINITY;
                    y[n] = 7.0f;
                    at(level)->softmax_rows(x, y, 1, n, lg);
                    ck_assert(y[n] == 7.0f);
                    float m, s = at(level)->ce_sumexp(x, n, &m, NULL);
                    const float lse = m + logf(s);
                    double sd = 0;
                    for (int k = 0; k < n; k++)
                        sd += x[k] == -INFINITY ? 0.0 : exp((double)(x[k] - m));
                    for (int k = 0; k < n; k++) {
                        if (masked == 2 || x[k] == -INFINITY) {
                            ck_assert_msg(lg ? y[k] == -INFINITY : y[k] == 0.0f,
                                          "n %d masked %d log %d level %d: [%d] %g", n, masked, lg,
                                          level, k, y[k]);
                        } else if (lg) {
                            ck_assert_msg(memcmp(&y[k], &(float){x[k] - lse}, sizeof(float)) == 0,
                                          "n %d masked %d level %d: log p[%d] %.9g is not x - the "
                                          "cross-entropy's lse %.9g",
                                          n, masked, level, k, y[k], x[k] - lse);
                        } else {
                            /* from the float difference x - m (rounded as every level rounds it) */
                            const double ref = exp((double)(x[k] - m)) / sd;
                            const double e = fabs(y[k] - ref) / fmax(ref, 1e-30);
                            worst = fmax(worst, e);
                            ck_assert_msg(e <= 1e-6, "n %d masked %d level %d: p[%d] %.9g vs %.9g",
                                          n, masked, level, k, y[k], ref);
                        }
                    }
                    memcpy(z, x, sizeof(float) * (size_t)n);
                    at(level)->softmax_rows(z, z, 1, n, lg);
                    ck_assert_msg(memcmp(z, y, sizeof(float) * (size_t)n) == 0,
                                  "n %d log %d level %d: in place differs", n, lg, level);
                    if (level == TG_CPU_ISA_AVX512) {
                        at(TG_CPU_ISA_AVX2)->softmax_rows(x, z, 1, n, lg);
                        ck_assert_msg(memcmp(z, y, sizeof(float) * (size_t)n) == 0,
                                      "n %d masked %d log %d: AVX-512 and AVX2 differ", n, masked,
                                      lg);
                    }
                }
    printf("softmax long rows (%d levels): max relative error %.3g\n", nlevels(), worst);
    free(x), free(y), free(z);
}
END_TEST

/* softmax's backward, dx = y (dy - sum(dy y)), rows of 1..40 with zero probabilities (masked
 * entries), against double; every level gives the portable level's bits (the AVX2 level takes
 * rows under 16 eight at a time, the AVX-512 one those of 9-15 sixteen at a time, the portable
 * one row by row: 37 rows are two blocks of 16 and five single rows, or four of 8 and five;
 * longer rows go one by one in vectors of 8), rows alone give the same bits as in a block, and
 * dx may be dy or y. */
START_TEST(test_softmax_back_rows) {
    enum { ROWS = 37 };
    float y[ROWS * 40], dy[ROWS * 40], dx[TG_CPU_ISA_LEVELS][ROWS * 40], z[ROWS * 40];
    double worst = 0;
    for (int d = 1; d <= 40; d++) {
        for (int i = 0; i < ROWS * d; i++) {
            y[i] = (float)(((i * 29) % 23) - 11) * 0.45f;
            dy[i] = (float)(((i * 13) % 19) - 9) * 0.17f;
        }
        y[1 * d + d / 2] = y[9 * d] = -INFINITY;
        tg_cpu_vsoftmax_rows(y, y, ROWS, d, false); /* probabilities, some exactly 0 */
        for (int level = 0; level < nlevels(); level++) {
            at(level)->softmax_back_rows(y, dy, dx[level], ROWS, d);
            for (int r = 0; r < ROWS; r++) {
                const float *yr = y + r * d, *gr = dy + r * d;
                double sum = 0;
                for (int j = 0; j < d; j++) sum += (double)gr[j] * yr[j];
                for (int j = 0; j < d; j++) {
                    double ref = yr[j] * (gr[j] - sum), e = fabs(dx[level][r * d + j] - ref);
                    worst = e > worst ? e : worst;
                    ck_assert_msg(e <= 1e-6, "d %d level %d row %d col %d: %.9g vs %.9g", d, level, r, j,
                                  dx[level][r * d + j], ref);
                }
                at(level)->softmax_back_rows(yr, gr, z, 1, d);
                ck_assert_msg(memcmp(z, dx[level] + r * d, sizeof(float) * d) == 0, "d %d level %d row %d alone", d,
                              level, r);
            }
            for (int i = 0; i < ROWS * d; i++) z[i] = dy[i]; /* in place (dx = dy) */
            at(level)->softmax_back_rows(y, z, z, ROWS, d);
            ck_assert(memcmp(z, dx[level], sizeof(float) * ROWS * d) == 0);
            for (int i = 0; i < ROWS * d; i++)
                z[i] = y[i]; /* in place (dx = y) */
            at(level)->softmax_back_rows(z, dy, z, ROWS, d);
            ck_assert(memcmp(z, dx[level], sizeof(float) * ROWS * d) == 0);
        }
        for (int l = 1; l < nlevels(); l++)
            ck_assert_msg(memcmp(dx[0], dx[l], sizeof(float) * ROWS * d) == 0,
                          "d %d: %s differs from portable", d, lname(l));
    }
    printf("softmax backward rows (%d levels): max absolute error %.3g\n", nlevels(), worst);
}
END_TEST

/* Layer norm and its backward against double references, every level, row lengths 1..40 and
 * model widths, with and without gamma and beta; error relative to the row's scale; each row
 * alone gives the bits it gives among the others. */
START_TEST(test_layer_norm_rows) {
    enum { ROWS = 3, DMAX = 300 };
    static float x[ROWS * DMAX], g[DMAX], b[DMAX], dy[ROWS * DMAX], y[ROWS * DMAX], dx[ROWS * DMAX];
    const float eps = 1e-5f;
    double worst_f = 0, worst_b = 0;
    int ds[44];
    for (int i = 0; i < 40; i++) ds[i] = i + 1;
    ds[40] = 63, ds[41] = 256, ds[42] = 257, ds[43] = 300;
    for (int di = 0; di < 44; di++)
        for (int level = 0; level < nlevels(); level++)
            for (int affine = 0; affine < 2; affine++) {
                int d = ds[di];
                for (int i = 0; i < ROWS * d; i++) {
                    x[i] = 3.0f + (float)(((i * 37) % 29) - 14) * 0.21f; /* a mean far from 0 */
                    dy[i] = (float)(((i * 11) % 17) - 8) * 0.13f;
                }
                for (int j = 0; j < d; j++) {
                    g[j] = 0.5f + 0.01f * (float)j;
                    b[j] = -0.2f + 0.003f * (float)j;
                }
                const float *gp = affine ? g : NULL, *bp = affine ? b : NULL;
                at(level)->layer_norm(x, gp, bp, y, ROWS, d, eps);
                at(level)->layer_norm_back(x, gp, dy, dx, ROWS, d, eps);
                /* a row's bits do not depend on the rows computed with it (rows go in pairs,
                 * and a thread's share may start at any row) */
                for (int r = 0; r < ROWS; r++) {
                    float y1[DMAX], dx1[DMAX];
                    at(level)->layer_norm(x + r * d, gp, bp, y1, 1, d, eps);
                    at(level)->layer_norm_back(x + r * d, gp, dy + r * d, dx1, 1, d, eps);
                    ck_assert_msg(memcmp(y1, y + r * d, sizeof(float) * d) == 0 &&
                                      memcmp(dx1, dx + r * d, sizeof(float) * d) == 0,
                                  "d %d level %d: row %d alone differs from the same row among %d",
                                  d, level, r, ROWS);
                }
                for (int r = 0; r < ROWS; r++) {
                    const float *xr = x + r * d, *gr = dy + r * d;
                    double mu = 0, var = 0, sg = 0, sgx = 0;
                    for (int j = 0; j < d; j++) mu += xr[j];
                    mu /= d;
                    for (int j = 0; j < d; j++) var += (xr[j] - mu) * (xr[j] - mu);
                    double rs = 1.0 / sqrt(var / d + eps);
                    for (int j = 0; j < d; j++) {
                        double gj = gr[j] * (affine ? g[j] : 1.0);
                        sg += gj;
                        sgx += gj * (xr[j] - mu) * rs;
                    }
                    sg /= d, sgx /= d;
                    for (int j = 0; j < d; j++) {
                        double xh = (xr[j] - mu) * rs;
                        double ref = affine ? xh * g[j] + b[j] : xh;
                        double gj = gr[j] * (affine ? g[j] : 1.0);
                        double refb = rs * (gj - sg - xh * sgx);
                        double ef = fabs(y[r * d + j] - ref), eb = fabs(dx[r * d + j] - refb) / fmax(rs, 1.0);
                        worst_f = ef > worst_f ? ef : worst_f;
                        worst_b = eb > worst_b ? eb : worst_b;
                        ck_assert_msg(ef <= 5e-6 && eb <= 5e-6, "d %d level %d affine %d: y %.9g vs %.9g, dx %.9g vs %.9g",
                                      d, level, affine, y[r * d + j], ref, dx[r * d + j], refb);
                    }
                }
            }
    printf("layer norm: max absolute error %.3g forward, %.3g backward (of max(rstd, 1))\n", worst_f, worst_b);
}
END_TEST

/* Where the CPU has AVX-512F, layer norm and its backward go four rows at a time, 16 lanes wide
 * where rows start on 64-byte lines (vmath_avx512.c: layer_norm_avx512): the same bits as the AVX2
 * code, row lengths around every 16- and 32-value boundary and model widths, with and without
 * gamma and beta, row counts that leave 0-3 rows to the AVX2 code, in place (y = x, dx = dy)
 * too, and each row alone as among the others. Pairing each 16-lane half with the wrong AVX2
 * accumulator, or a tail summed into another lane group, fails it. */
START_TEST(test_layer_norm_wide) {
    if (!wide()) return; /* no 16-lane code to compare (nlevels said so) */
    enum { ROWS = 11, DMAX = 528 };
    /* on 64-byte lines as a graph's tensors: rows of a multiple of 16 values take the 16-lane
     * code, the others (and the rows alone at odd offsets) the AVX2 code */
#define LINE __attribute__((aligned(64)))
    static float x[ROWS * DMAX] LINE, g[DMAX] LINE, b[DMAX] LINE, dy[ROWS * DMAX] LINE;
    static float y[2][ROWS * DMAX] LINE, dx[2][ROWS * DMAX] LINE, z[ROWS * DMAX] LINE;
#undef LINE
    const float eps = 1e-5f;
    const int ds[] = {1,  7,  8,  15, 16,  17,  24,  31,  32,  33,  40, 47,
                      48, 63, 64, 65, 100, 255, 256, 257, 300, 512, 528};
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
        for (int affine = 0; affine < 4; affine++) /* neither, gamma, beta, both */
            for (int ri = 0; ri < 5; ri++) {
                const int d = ds[di], rows = (const int[]){4, 5, 6, 7, ROWS}[ri];
                for (int i = 0; i < rows * d; i++) {
                    x[i] = 2.0f + (float)(((i * 53) % 41) - 20) * 0.17f;
                    dy[i] = (float)(((i * 19) % 23) - 11) * 0.09f;
                }
                for (int j = 0; j < d; j++) {
                    g[j] = 0.7f + 0.013f * (float)(j % 37);
                    b[j] = -0.3f + 0.007f * (float)(j % 29);
                }
                const float *gp = affine & 1 ? g : NULL, *bp = affine & 2 ? b : NULL;
                const tg_cpu_vmath *k8 = at(TG_CPU_ISA_AVX2), *k = at(TG_CPU_ISA_AVX512);
                k8->layer_norm(x, gp, bp, y[0], rows, d, eps);
                k8->layer_norm_back(x, gp, dy, dx[0], rows, d, eps);
                k->layer_norm(x, gp, bp, y[1], rows, d, eps);
                k->layer_norm_back(x, gp, dy, dx[1], rows, d, eps);
                ck_assert_msg(memcmp(y[0], y[1], sizeof(float) * rows * d) == 0,
                              "d %d rows %d affine %d: forward AVX-512 and AVX2 differ", d, rows,
                              affine);
                ck_assert_msg(memcmp(dx[0], dx[1], sizeof(float) * rows * d) == 0,
                              "d %d rows %d affine %d: backward AVX-512 and AVX2 differ", d, rows,
                              affine);
                memcpy(z, x, sizeof(float) * rows * d); /* y = x */
                k->layer_norm(z, gp, bp, z, rows, d, eps);
                ck_assert(memcmp(z, y[1], sizeof(float) * rows * d) == 0);
                memcpy(z, dy, sizeof(float) * rows * d); /* dx = dy */
                k->layer_norm_back(x, gp, z, z, rows, d, eps);
                ck_assert(memcmp(z, dx[1], sizeof(float) * rows * d) == 0);
                for (int r = 0; r < rows; r += 3) {
                    k->layer_norm(x + r * d, gp, bp, z, 1, d, eps);
                    ck_assert_msg(memcmp(z, y[1] + r * d, sizeof(float) * d) == 0,
                                  "d %d row %d alone", d, r);
                    k->layer_norm_back(x + r * d, gp, dy + r * d, z, 1, d, eps);
                    ck_assert_msg(memcmp(z, dx[1] + r * d, sizeof(float) * d) == 0,
                                  "d %d row %d alone (back)", d, r);
                }
            }
}
END_TEST

/* The layer norm's statistics alone (tg_cpu_vlayer_norm_stats, layer norm's dgamma in
 * backends/cpu/k_rows.c): (x - mean) * rstd, rounded after each step, is the affine-free layer
 * norm's output bit for bit, at every level (AVX-512 on 64-byte lines and not), for rows of
 * 1-528 values, 1-11 rows at a time and rows at an odd offset. Fails if a level's
 * statistics are taken in another order or its four-row blocks mix up rows. */
START_TEST(test_layer_norm_stats) {
    enum { ROWS = 11, DMAX = 528 };
    static float x[ROWS * DMAX + 4] __attribute__((aligned(64))), y[ROWS * DMAX + 4];
    float mean[ROWS], rstd[ROWS];
    const float eps = 1e-5f;
    const int ds[] = {1, 7, 8, 16, 17, 33, 64, 100, 256, 257, 512, 528};
    for (int level = 0; level < nlevels(); level++) {
        for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
            for (int rows = 1; rows <= ROWS; rows += 2)
                for (int off = 0; off <= 4; off += 4) { /* on a line; 16 bytes off */
                    const int d = ds[di];
                    float *xs = x + off;
                    for (int i = 0; i < rows * d; i++)
                        xs[i] = 3.0f + (float)(((i * 53) % 41) - 20) * 0.17f;
                    at(level)->layer_norm(xs, NULL, NULL, y, rows, d, eps);
                    at(level)->layer_norm_stats(xs, rows, d, eps, mean, rstd);
                    for (int r = 0; r < rows; r++)
                        for (int j = 0; j < d; j++) {
                            const float c = xs[r * d + j] - mean[r], h = c * rstd[r];
                            ck_assert_msg(h == y[r * d + j],
                                          "%s d %d rows %d off %d: [%d][%d] %.9g, layer "
                                          "norm %.9g",
                                          lname(level), d, rows, off, r, j, (double)h,
                                          (double)y[r * d + j]);
                        }
                }
    }
}
END_TEST

/* Every function of every vector level against the portable level, the reference, on the same
 * inputs (values over [-10, 10] with -inf entries for the softmax and cross-entropy rows; rows of
 * 1-1000 values): within 2^-20 of max(|reference|, 1) (a log-probability: of its log-sum-exp
 * too; the plain sum of a row: of the sum of its |x|) — the vector levels fuse multiply-adds and sum in other orders, and vmath.h's bounds
 * against double are of that size — and bit for bit for the softmax backward; and the entry points (tg_cpu_vexp, ...) give the bits of the level in use. */
enum { FN_EXP, FN_TANH, FN_GELU, FN_GELU_BACK, FN_SOFTMAX, FN_LOG_SOFTMAX, FN_SOFTMAX_BACK,
       FN_LAYER_NORM, FN_LAYER_NORM_BACK, FN_LAYER_NORM_STATS, FN_CE_SUMEXP, FN_CE_GRAD, FN_COUNT };
static const char *const fn_names[FN_COUNT] = {
    "exp", "tanh", "gelu", "gelu'", "softmax", "log-softmax", "softmax backward", "layer norm",
    "layer norm backward", "layer norm statistics", "cross-entropy sums", "cross-entropy gradient"};

/* Function f of kernels k (NULL: the entry points) over rows × d from x and a (the second
 * input: dy; the layer norm's gamma, then beta or dy at a + d), into out (2 rows × d values) */
static void run_fn(const tg_cpu_vmath *k, int f, const float *x, const float *a, int rows, int d,
                   float *out) {
    const int64_t n = (int64_t)rows * d;
    const float eps = 1e-5f;
    switch (f) {
    case FN_EXP: k ? k->vexp(x, out, n) : tg_cpu_vexp(x, out, n); break;
    case FN_TANH: k ? k->vtanh(x, out, n) : tg_cpu_vtanh(x, out, n); break;
    case FN_GELU: k ? k->vgelu(x, out, n) : tg_cpu_vgelu(x, out, n); break;
    case FN_GELU_BACK: k ? k->vgelu_back(x, a, out, n) : tg_cpu_vgelu_back(x, a, out, n); break;
    case FN_SOFTMAX:
    case FN_LOG_SOFTMAX:
        k ? k->softmax_rows(x, out, rows, d, f == FN_LOG_SOFTMAX)
          : tg_cpu_vsoftmax_rows(x, out, rows, d, f == FN_LOG_SOFTMAX);
        break;
    case FN_SOFTMAX_BACK: /* y: the portable level's probabilities of x, as the graph gives */
        at(TG_CPU_ISA_PORTABLE)->softmax_rows(x, out + n, rows, d, false);
        k ? k->softmax_back_rows(out + n, a, out, rows, d)
          : tg_cpu_vsoftmax_back_rows(out + n, a, out, rows, d);
        break;
    case FN_LAYER_NORM:
        k ? k->layer_norm(x, a, a + d, out, rows, d, eps)
          : tg_cpu_vlayer_norm_rows(x, a, a + d, out, rows, d, eps);
        break;
    case FN_LAYER_NORM_BACK:
        k ? k->layer_norm_back(x, a, a + d, out, rows, d, eps)
          : tg_cpu_vlayer_norm_back_rows(x, a, a + d, out, rows, d, eps);
        break;
    case FN_LAYER_NORM_STATS:
        k ? k->layer_norm_stats(x, rows, d, eps, out, out + rows)
          : tg_cpu_vlayer_norm_stats(x, rows, d, eps, out, out + rows);
        break;
    case FN_CE_SUMEXP:
        for (int r = 0; r < rows; r++)
            out[3 * r] = k ? k->ce_sumexp(x + r * d, d, &out[3 * r + 1], &out[3 * r + 2])
                           : tg_cpu_vce_sumexp(x + r * d, d, &out[3 * r + 1], &out[3 * r + 2]);
        break;
    default: /* FN_CE_GRAD, from the portable level's sums */
        for (int r = 0; r < rows; r++) {
            float m, s = at(TG_CPU_ISA_PORTABLE)->ce_sumexp(x + r * d, d, &m, NULL);
            k ? k->ce_grad(x + r * d, d, m, 1.0f / s, 0.5f, 0.01f, out + r * d)
              : tg_cpu_vce_grad(x + r * d, d, m, 1.0f / s, 0.5f, 0.01f, out + r * d);
        }
    }
}

/* how many values of out function f writes */
static int64_t fn_outputs(int f, int rows, int d) {
    return f == FN_LAYER_NORM_STATS ? 2 * rows : f == FN_CE_SUMEXP ? 3 * rows : (int64_t)rows * d;
}

START_TEST(test_levels_against_portable) {
    enum { ROWS = 19, DMAX = 1000 };
    static const int ds[] = {1, 5, 10, 16, 17, 33, 64, 256, 1000};
    /* on 64-byte lines as a graph's tensors (the AVX-512 layer norm's blocks need it) */
#define LINE __attribute__((aligned(64)))
    static float x[ROWS * DMAX] LINE, a[(ROWS + 1) * DMAX] LINE;
    static float ref[2 * ROWS * DMAX] LINE, got[2 * ROWS * DMAX] LINE;
#undef LINE
    double worst[FN_COUNT] = {0};
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) {
        const int d = ds[di];
        for (int i = 0; i < ROWS * d; i++)
            x[i] = (float)(((i * 7919) % 2001) - 1000) * 0.01f;
        for (int i = 0; i < (ROWS + 1) * d; i++)
            a[i] = 0.5f + (float)(((i * 13) % 19) - 9) * 0.07f;
        x[3 * d + d / 2] = x[11 * d] = -INFINITY; /* masked entries of two rows */
        for (int f = 0; f < FN_COUNT; f++) {
            const bool masks = (f >= FN_SOFTMAX && f <= FN_SOFTMAX_BACK) || f >= FN_CE_SUMEXP;
            if (!masks) x[3 * d + d / 2] = x[11 * d] = 0.25f;
            const int64_t no = fn_outputs(f, ROWS, d);
            run_fn(at(TG_CPU_ISA_PORTABLE), f, x, a, ROWS, d, ref);
            for (int l = 1; l < nlevels(); l++) {
                run_fn(at(l), f, x, a, ROWS, d, got);
                for (int64_t i = 0; i < no; i++) {
                    if (isnan(ref[i]) || isnan(got[i])) { /* an all-masked row's gradient */
                        ck_assert_msg(isnan(ref[i]) && isnan(got[i]), "%s %s d %d [%lld]: %.9g, "
                                      "portable %.9g", fn_names[f], lname(l), d, (long long)i,
                                      (double)got[i], (double)ref[i]);
                        continue;
                    }
                    if (f == FN_SOFTMAX_BACK || isinf(ref[i]) || isinf(got[i])) {
                        ck_assert_msg(memcmp(&got[i], &ref[i], sizeof(float)) == 0,
                                      "%s %s d %d [%lld]: %.9g, portable %.9g", fn_names[f],
                                      lname(l), d, (long long)i, (double)got[i], (double)ref[i]);
                        continue;
                    }
                    /* a log-probability x - lse: of |lse| too; the plain sum of a row's x: of
                     * the sum of |x| (its terms cancel) */
                    double scale = fmax(fabs(ref[i]), 1.0);
                    if (f == FN_LOG_SOFTMAX) scale = fmax(scale, fabs((double)x[i] - ref[i]));
                    if (f == FN_CE_SUMEXP && i % 3 == 2)
                        for (int j = 0; j < d; j++)
                            scale += fabs(x[i / 3 * d + j]);
                    const double e = fabs((double)got[i] - ref[i]) / scale;
                    worst[f] = fmax(worst[f], e);
                    ck_assert_msg(e <= 0x1p-20, "%s %s d %d [%lld]: %.9g, portable %.9g",
                                  fn_names[f], lname(l), d, (long long)i, (double)got[i],
                                  (double)ref[i]);
                }
            }
            /* the entry points run the level in use */
            run_fn(at(tg_cpu_isa()), f, x, a, ROWS, d, ref);
            run_fn(NULL, f, x, a, ROWS, d, got);
            ck_assert_msg(memcmp(got, ref, sizeof(float) * (size_t)no) == 0,
                          "%s d %d: the entry point differs from level %s", fn_names[f], d,
                          tg_cpu_isa_name());
            x[3 * d + d / 2] = x[11 * d] = -INFINITY;
        }
    }
    for (int f = 0; f < FN_COUNT; f++)
        printf("%s: the vector levels within %.3g (2^%.1f) of the portable level's scale\n", fn_names[f],
               worst[f], worst[f] > 0 ? log2(worst[f]) : -INFINITY);
}
END_TEST

Suite *tg_test_suite(void) {
    nlevels(); /* says which levels go untested, once (before Check forks each test) */
    Suite *s = suite_create("vmath");
    TCase *tc = tcase_create("vmath");
    tcase_add_test(tc, test_exp);
    tcase_add_test(tc, test_tanh);
    tcase_add_test(tc, test_gelu);
    tcase_add_test(tc, test_tails);
    tcase_add_test(tc, test_softmax_rows);
    tcase_add_test(tc, test_softmax_long_rows);
    tcase_add_test(tc, test_softmax_back_rows);
    tcase_add_test(tc, test_layer_norm_rows);
    tcase_add_test(tc, test_layer_norm_wide);
    tcase_add_test(tc, test_layer_norm_stats);
    tcase_add_test(tc, test_cross_entropy_rows);
    tcase_add_test(tc, test_levels_against_portable);
    suite_add_tcase(s, tc);
    return s;
}
