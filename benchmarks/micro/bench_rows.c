/* bench_rows: the CPU backend's softmax kernels over short rows (attention over n keys) in
 * blocks of rows (the vector levels' transposed blocks: 8 rows with AVX2, 16 with AVX-512F
 * where it has them; the backward's rows of 16 or more go one by one in vectors of 8 either
 * way) against the same rows one by one (calls of 7 rows, which the vector levels take row by
 * row), and
 * against exp alone over the same floats (the floor: softmax computes one exp per element).
 *
 *   bench_rows [--d 8,10,16,32] [--floats 51200] [--reps 300] [--ln 256,512,1024]
 *
 * Prints, per row length d, the best time of --reps calls of each (the contenders interleaved
 * call by call, so that the machine's load hits them alike; the best is what a call costs when
 * the shared machine leaves it alone) for the forward and the backward (y (dy - sum(dy y))).
 * One thread; --floats elements per call (0.2 MB at the default: in cache, as attention
 * rows are when the kernel runs).
 *
 * Then layer norm (with gamma and beta) and its backward over rows of the --ln widths, 163,840
 * floats per call (a [640, 256] share of g2p-small's [1280, 256] on one of 2 threads), the
 * operands on 64-byte lines as a graph's tensors: as one call for all rows (the vector levels
 * take them two at a time, four where AVX-512F runs), the same at the AVX2 level ("AVX2"), and
 * one call per row (each row alone: the same bits, one more call per row),
 * and memcpy of the forward's bytes (read x, write y) as the in-cache bandwidth they are
 * compared with.
 *
 * Last GELU and its derivative (dx = dy gelu'(x)) over 65,536 floats per call (in L2; x over
 * [-6, 6]): ns per element and GB/s (read x, write y; backward read x and dy, write dx) of the
 * best of --reps calls, interleaved with memcpy of the forward's bytes. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/isa.h"
#include "backends/cpu/vmath.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The operands of one section's contenders (each reads what it needs), and the best time of
 * `reps` calls of each contender c < nc, the contenders called in turn so that the machine's
 * load hits them alike (the best is what a call costs when the shared machine leaves it alone). */
typedef struct {
    const float *x, *y, *g, *gm, *bt;
    float *o;
    int64_t rows, d;
} operands;

static void best_of(long reps, int nc, void (*run)(int c, const operands *a), const operands *a,
                    double *best) {
    for (int c = 0; c < nc; c++)
        best[c] = 1e30;
    for (long rep = 0; rep < reps; rep++)
        for (int c = 0; c < nc; c++) {
            double t0 = now();
            run(c, a);
            double t = now() - t0;
            best[c] = t < best[c] ? t : best[c];
        }
}

enum { FWD_BLOCK, FWD_ROWS, EXP, BACK_BLOCK, BACK_ROWS, NC };

static void run(int c, const operands *a) {
    const float *x = a->x, *y = a->y, *g = a->g;
    float *o = a->o;
    const int64_t rows = a->rows, d = a->d;
    switch (c) {
    case FWD_BLOCK: tg_cpu_vsoftmax_rows(x, o, rows, d, false); break;
    case BACK_BLOCK: tg_cpu_vsoftmax_back_rows(y, g, o, rows, d); break;
    case EXP: tg_cpu_vexp(x, o, rows * d); break;
    default: /* calls of 7 rows: below a block, so row by row */
        for (int64_t r = 0; r < rows; r += 7) {
            int64_t k = rows - r < 7 ? rows - r : 7;
            if (c == FWD_ROWS) tg_cpu_vsoftmax_rows(x + r * d, o + r * d, k, d, false);
            else tg_cpu_vsoftmax_back_rows(y + r * d, g + r * d, o + r * d, k, d);
        }
    }
}

/* The next width of a comma-separated list at *p (the option's value, all of it in list),
 * *p moved past it; false, with a message, if there is none. */
static bool next_width(const char **p, long *d, const char *option, const char *list) {
    char *end;
    *d = strtol(*p, &end, 10);
    if (end == *p || *d < 1) {
        fprintf(stderr, "bench_rows: bad %s '%s'\n", option, list);
        return false;
    }
    *p = *end == ',' ? end + 1 : end;
    return true;
}

/* Layer norm's contenders, timed in turn as the softmax's are; GB/s over the bytes each reads
 * and writes (forward x and y, backward x, dy and dx). */
enum { LN_FWD, LN_FWD_ROWS, LN_BACK, LN_BACK_ROWS, LN_COPY, LN_FWD8, LN_BACK8, LN_NC };

static void run_ln(int c, const operands *a) {
    const float *x = a->x, *gm = a->gm, *bt = a->bt, *dy = a->g;
    float *o = a->o;
    const int64_t rows = a->rows, d = a->d;
    if (c == LN_FWD8 || c == LN_BACK8) { /* the AVX2 code, where the 16-lane one would run */
        const tg_cpu_isa_level was = tg_cpu_isa();
        tg__cpu_isa_cap(was < TG_CPU_ISA_AVX2 ? was : TG_CPU_ISA_AVX2);
        if (c == LN_FWD8)
            tg_cpu_vlayer_norm_rows(x, gm, bt, o, rows, d, 1e-5f);
        else
            tg_cpu_vlayer_norm_back_rows(x, gm, dy, o, rows, d, 1e-5f);
        tg__cpu_isa_cap(was);
        return;
    }
    switch (c) {
    case LN_FWD:
        tg_cpu_vlayer_norm_rows(x, gm, bt, o, rows, d, 1e-5f);
        break;
    case LN_BACK:
        tg_cpu_vlayer_norm_back_rows(x, gm, dy, o, rows, d, 1e-5f);
        break;
    case LN_COPY:
        memcpy(o, x, sizeof(float) * (size_t)(rows * d));
        break;
    default:
        for (int64_t r = 0; r < rows; r++)
            if (c == LN_FWD_ROWS)
                tg_cpu_vlayer_norm_rows(x + r * d, gm, bt, o + r * d, 1, d, 1e-5f);
            else
                tg_cpu_vlayer_norm_back_rows(x + r * d, gm, dy + r * d, o + r * d, 1, d, 1e-5f);
    }
}

/* n floats on a 64-byte line, as a graph's tensors start (malloc's big blocks start 16 bytes
 * past one, where every 512-bit load of a row spans two lines) */
static float *on_line(int64_t n) {
    return aligned_alloc(64, ((size_t)n * sizeof(float) + 63) / 64 * 64);
}

static int bench_ln(const char *ds, long reps) {
    enum { FLOATS = 163840 };
    const bool wide = tg_cpu_isa() >= TG_CPU_ISA_AVX512;
    printf("\nlayer norm, %d floats per call; GB/s of the best of %ld calls%s\n", FLOATS, reps,
           wide ? "; \"AVX2\": the same calls with the 512-bit code off (same bits)" : "");
    printf("%5s %6s | %9s %9s %9s %7s | %9s %9s %9s %7s | %9s\n", "d", "rows", "fwd", "AVX2",
           "1 by 1", "gain", "back", "AVX2", "1 by 1", "gain", "memcpy");
    long d;
    for (const char *p = ds; *p;) {
        if (!next_width(&p, &d, "--ln", ds)) return 2;
        const int64_t rows = FLOATS / d > 0 ? FLOATS / d : 1, n = rows * d;
        float *x = on_line(n), *dy = on_line(n), *o = on_line(n), *gm = on_line(d),
              *bt = on_line(d);
        if (!x || !dy || !o || !gm || !bt) return 1;
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)((i * 29) % 23 - 11) * 0.45f;
            dy[i] = (float)((i * 13) % 19 - 9) * 0.17f;
        }
        for (int64_t j = 0; j < d; j++)
            gm[j] = 1.0f + 0.01f * (float)j, bt[j] = 0.02f * (float)j;
        double best[LN_NC];
        best_of(reps, LN_NC, run_ln,
                &(operands){.x = x, .g = dy, .gm = gm, .bt = bt, .o = o, .rows = rows, .d = d},
                best);
        const double fb = 8e-9 * (double)n, bb = 12e-9 * (double)n; /* GB per call */
        printf("%5ld %6lld | %9.1f %9.1f %9.1f %6.2fx | %9.1f %9.1f %9.1f %6.2fx | %9.1f\n", d,
               (long long)rows, fb / best[LN_FWD], fb / best[LN_FWD8], fb / best[LN_FWD_ROWS],
               best[LN_FWD_ROWS] / best[LN_FWD], bb / best[LN_BACK], bb / best[LN_BACK8],
               bb / best[LN_BACK_ROWS], best[LN_BACK_ROWS] / best[LN_BACK], fb / best[LN_COPY]);
        free(x), free(dy), free(o), free(gm), free(bt);
    }
    return 0;
}

enum { GELU, GELU_BACK, GELU_COPY, GELU_NC };

static void run_gelu(int c, const operands *a) {
    if (c == GELU)
        tg_cpu_vgelu(a->x, a->o, a->rows);
    else if (c == GELU_BACK)
        tg_cpu_vgelu_back(a->x, a->g, a->o, a->rows);
    else
        memcpy(a->o, a->x, sizeof(float) * (size_t)a->rows);
}

static void bench_gelu(long reps) {
    enum { N = 65536 };
    float *x = malloc(sizeof(float) * N), *dy = malloc(sizeof(float) * N),
          *o = malloc(sizeof(float) * N);
    if (!x || !dy || !o) return;
    for (int64_t i = 0; i < N; i++) {
        x[i] = -6.0f + 12.0f * (float)((i * 7919) % N) / (float)N;
        dy[i] = (float)((i * 13) % 19 - 9) * 0.17f;
    }
    double best[GELU_NC];
    best_of(reps, GELU_NC, run_gelu, &(operands){.x = x, .g = dy, .o = o, .rows = N, .d = 1}, best);
    printf("\nGELU, %d floats per call (x in [-6, 6]); the best of %ld calls\n", N, reps);
    printf("  gelu   %.3f ns per element  %6.1f GB/s\n", 1e9 * best[GELU] / N,
           8e-9 * N / best[GELU]);
    printf("  gelu'  %.3f ns per element  %6.1f GB/s\n", 1e9 * best[GELU_BACK] / N,
           12e-9 * N / best[GELU_BACK]);
    printf("  memcpy %.3f ns per element  %6.1f GB/s\n", 1e9 * best[GELU_COPY] / N,
           8e-9 * N / best[GELU_COPY]);
    free(x), free(dy), free(o);
}

int main(int argc, char **argv) {
    const char *ds = "8,10,12,16,20,24,32", *lns = "256,512,1024";
    long floats = 51200, reps = 300;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--d") && i + 1 < argc) ds = argv[++i];
        else if (!strcmp(argv[i], "--floats") && i + 1 < argc) floats = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--ln") && i + 1 < argc)
            lns = argv[++i];
        else {
            fprintf(stderr, "usage: bench_rows [--d 8,10,16,32] [--floats 51200] [--reps 300] "
                            "[--ln 256,512,1024]\n");
            return 2;
        }
    }
    printf("vmath at level %s; best of %ld calls, %ld floats per call; us per call\n",
           tg_cpu_isa_level_name(tg_cpu_isa()), reps, floats);
    printf("%4s %8s | %9s %9s %7s %9s | %9s %9s %7s\n", "d", "rows", "fwd block", "1 by 1", "gain", "exp alone",
           "back block", "1 by 1", "gain");
    long d;
    for (const char *p = ds; *p;) {
        if (!next_width(&p, &d, "--d", ds)) return 2;
        int64_t rows = floats / d > 0 ? floats / d : 1, n = rows * d;
        float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
        float *g = malloc(sizeof(float) * (size_t)n), *o = malloc(sizeof(float) * (size_t)n);
        if (!x || !y || !g || !o) return 1;
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)((i * 29) % 23 - 11) * 0.45f;
            g[i] = (float)((i * 13) % 19 - 9) * 0.17f;
        }
        tg_cpu_vsoftmax_rows(x, y, rows, d, false);
        double best[NC];
        best_of(reps, NC, run, &(operands){.x = x, .y = y, .g = g, .o = o, .rows = rows, .d = d},
                best);
        printf("%4ld %8lld | %9.1f %9.1f %6.2fx %9.1f | %9.1f %9.1f %6.2fx\n", d, (long long)rows, 1e6 * best[FWD_BLOCK],
               1e6 * best[FWD_ROWS], best[FWD_ROWS] / best[FWD_BLOCK], 1e6 * best[EXP], 1e6 * best[BACK_BLOCK],
               1e6 * best[BACK_ROWS], best[BACK_ROWS] / best[BACK_BLOCK]);
        free(x), free(y), free(g), free(o);
    }
    const int ln = bench_ln(lns, reps);
    if (ln) return ln;
    bench_gelu(reps);
    return 0;
}
