/* What the op suites (test_ops.c, test_ops_rows.c) share: a 2-thread CPU backend B and a graph G
 * made fresh for each test (setup/teardown: each TCase's checked fixture), shorthands for small
 * inputs, and checks of a kept result's shape and every element. */
#ifndef TG_OPS_CHECK_H
#define TG_OPS_CHECK_H

#include <stdint.h>

#include "tg/tg.h"
#include "tg_check.h"

extern tg_backend *B;
extern tg_graph *G;

void setup(void);
void teardown(void);

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define IN(data, ...) tg_input(G, TG_DTYPE_F32, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), (data))
#define IN_I32(data, ...) tg_input(G, TG_DTYPE_I32, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), (data))
#define NVALS(...) ((int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)))
/* compare every element of kept tensor t with the listed values */
#define EXPECT(t, atol, ...)                                                                       \
    expect_vals((t), (const double[]){__VA_ARGS__}, NVALS(__VA_ARGS__), (atol), 1e-6, #t)
#define EXPECT_SHAPE(t, ...) expect_shape((t), NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__))

/* G built without error and run on B */
void run_ok(void);
void expect_shape(const tg_tensor *t, int ndim, const int64_t *shape);
/* Element e of t must be within atol + rtol*|want| of want[e]; infinities must match exactly
 * and no element may be NaN. */
void expect_vals(const tg_tensor *t, const double *want, int64_t n, double atol, double rtol,
                 const char *what);
/* Offset in a (contiguous) broadcast operand of shape xs[xn] of output element e of shape
 * os[on] (NumPy rules: right-aligned, size-1 dimensions stretch). */
int64_t bcast_index(int64_t e, int on, const int64_t *os, int xn, const int64_t *xs);
/* A deterministic, sign-mixed, non-repeating-looking pattern for test data: value e of salt's
 * pattern, and n of them in a malloc'ed array (the caller frees). */
float pat(int64_t e, int salt);
float *pattern(int64_t n, int salt);

#endif
