/* CPU kernels of the row ops over the last axis: softmax, log-softmax, layer norm, and their
 * backward kernels. One row per iteration; rows are independent, so threads split rows — but
 * for layer norm's dgamma, a sum over the rows (cut by blocks of rows: k_reduce.c). */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/vmath.h"

/* Row reductions in a fixed order: element j goes to accumulator j % 8 and the 8 are
 * combined pairwise at the end. The order depends only on the row length (results do not
 * depend on threads), and unlike a single running sum, which float rules keep serial, the 8
 * accumulators live in vector registers. Rows shorter than SHORT_ROW are summed serially:
 * setting up and combining 8 accumulators costs more there (softmax's backward, whose rows are
 * the short attention rows, is vmath's, in the same order). */
enum { SHORT_ROW = 16 };
#define ACC8_COMBINE(acc)                                                                          \
    ((((acc)[0] + (acc)[4]) + ((acc)[1] + (acc)[5])) +                                             \
     (((acc)[2] + (acc)[6]) + ((acc)[3] + (acc)[7])))

static inline float row_sum(const float *v, int64_t n) {
    if (n < SHORT_ROW) {
        float s = 0.0f;
        for (int64_t j = 0; j < n; j++) s += v[j];
        return s;
    }
    float acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += v[j + k];
    for (int k = 0; j < n; j++, k++) acc[k] += v[j];
    return ACC8_COMBINE(acc);
}

/* x viewed as rows of its last axis: *d per row, the number of rows returned */
static int64_t row_count(const tg_tensor *t, int64_t *d) {
    *d = t->ndim ? t->shape[t->ndim - 1] : 1;
    return *d ? tg_tensor_numel(t) / *d : 0;
}

/* A softmax or softmax_back that ends a fused chain (core/fuse.c; rows of d <= TG_CHAIN_TILE):
 * this member's rows in blocks of a tile, the chain's members computed over each block first,
 * then the row kernel on their values (a row's result does not depend on the block it is in). */
static tg_status chain_rows(tg_cpu_par *p, tg_tensor *t, int64_t rows, int64_t d) {
    tg_chain_tiles c;
    tg_status st = tg__cpu_chain_start(&c, t, false); /* the members before t */
    if (st) return st;
    /* whole blocks of 16 rows per tile where they fit: the row kernels take short rows 16 (or
     * 8) at a time and the rest one by one, at 2-7x the time per row */
    int64_t lo, hi, per = TG_CHAIN_TILE / d;
    if (per >= 16) per -= per % 16;
    tg_cpu_share(p, rows, rows * d > TG_PAR_MIN, &lo, &hi);
    for (int64_t r0 = lo; r0 < hi; r0 += per) {
        int64_t nr = hi - r0 < per ? hi - r0 : per, e0 = r0 * d;
        tg__cpu_chain_run(&c, e0, nr * d);
        const float *x = tg__cpu_chain_input(&c, t, 0, e0, nr * d);
        float *o = F32(t) + e0;
        if (t->op == TG_OP_SOFTMAX_BACK)
            tg_cpu_vsoftmax_back_rows(x, tg__cpu_chain_input(&c, t, 1, e0, nr * d), o, nr, d);
        else
            tg_cpu_vsoftmax_rows(x, o, nr, d, t->op == TG_OP_LOG_SOFTMAX);
    }
    return TG_OK;
}

/* softmax and log_softmax */
static tg_status softmax(tg_cpu_par *p, tg_tensor *t) {
    int64_t n = tg_tensor_numel(t), d, rows = row_count(t, &d);
    if (t->chain_prev) return chain_rows(p, t, rows, d);
    const float *x = t->src[0]->data;
    float *o = t->data;
    int64_t lo, hi; /* vmath.h: rows of up to 32 (attention) in blocks of 8 or 16 */
    tg_cpu_share(p, rows, n > TG_PAR_MIN, &lo, &hi);
    if (hi > lo) tg_cpu_vsoftmax_rows(x + lo * d, o + lo * d, hi - lo, d, t->op == TG_OP_LOG_SOFTMAX);
    return TG_OK;
}

/* softmax_back and log_softmax_back, srcs y (the forward output) and dy; the maths are by
 * the gradient rules (core/ops/rows.c: g_softmax, g_log_softmax) */
static tg_status softmax_back(tg_cpu_par *p, tg_tensor *t) {
    int64_t n = tg_tensor_numel(t), d, rows = row_count(t, &d);
    const float *y = t->src[0]->data, *dy = t->src[1]->data;
    float *o = t->data;
    bool lg = t->op == TG_OP_LOG_SOFTMAX_BACK;
    if (t->chain_prev && !lg) return chain_rows(p, t, rows, d);
    if (!lg) { /* vmath.h: short rows (attention) in blocks of 8 or 16 */
        int64_t lo, hi;
        tg_cpu_share(p, rows, n > TG_PAR_MIN, &lo, &hi);
        if (hi > lo) tg_cpu_vsoftmax_back_rows(y + lo * d, dy + lo * d, o + lo * d, hi - lo, d);
        return TG_OK;
    }
    TG_CPU_FOR(p, r, rows, n > TG_PAR_MIN) {
        const float *yr = y + r * d, *gr = dy + r * d;
        float *xr = o + r * d, s = row_sum(gr, d);
        for (int64_t j = 0; j < d; j++)
            xr[j] = gr[j] - tg_zero_if_neg_inf(yr[j], tg_fast_expf(yr[j])) * s;
    }
    return TG_OK;
}

/* layer_norm (srcs x, gamma?, beta?) and layer_norm_back (srcs x, gamma?, dy; the maths:
 * core/ops/rows.c, g_layer_norm) */
static tg_status layer_norm(tg_cpu_par *p, tg_tensor *t) {
    int64_t n = tg_tensor_numel(t), d, rows = row_count(t, &d);
    const float *x = t->src[0]->data;
    const float *gm = t->src[1] ? (const float *)t->src[1]->data : NULL;
    float *o = t->data;
    float eps = t->p.layer_norm.eps;
    int64_t lo, hi; /* vmath.h */
    tg_cpu_share(p, rows, n > TG_PAR_MIN, &lo, &hi);
    if (hi <= lo) return TG_OK;
    if (t->op == TG_OP_LAYER_NORM)
        tg_cpu_vlayer_norm_rows(x + lo * d, gm, t->src[2] ? (const float *)t->src[2]->data : NULL,
                                o + lo * d, hi - lo, d, eps);
    else
        tg_cpu_vlayer_norm_back_rows(x + lo * d, gm, (const float *)t->src[2]->data + lo * d,
                                     o + lo * d, hi - lo, d, eps);
    return TG_OK;
}

/* layer_norm_gamma_back (srcs x, dy; t [d]): dgamma[c] = sum over rows of dy[r][c] xhat[r][c]
 * (core/ops/rows.c: g_layer_norm). Each block of rows is made as the unfused graph makes it —
 * xhat = (x - mean) rstd with the layer norm's own statistics (tg_cpu_vlayer_norm_stats), each
 * product rounded before it is added (no multiply-add), rows added in order — and the blocks
 * are summed as sum_to sums them, so dgamma has the bits of sum_to(mul(dy, layer_norm(x)))
 * without writing xhat or the products to memory. A few rows at a time (their x and dy in L1):
 * their statistics, then one pass over both. */
enum { GAMMA_ROWS = 64, GAMMA_CB = 64 }; /* most rows at a time; columns in registers */

typedef struct {
    const float *x, *dy;
    int64_t d, rows_per;
    float eps;
} gamma_rows;

/* No contraction into multiply-adds, even where the build targets a CPU with FMA (meson option
 * native): GCC contracts across statements unless told, clang within an expression. */
#if defined(__clang__)
#define NO_CONTRACT_FN
#define NO_CONTRACT_BODY _Pragma("clang fp contract(off)")
#else
#define NO_CONTRACT_FN __attribute__((optimize("fp-contract=off")))
#define NO_CONTRACT_BODY
#endif

TG_CPU_BODY void gamma_block_sums_body(void *ctx, int64_t k0, int64_t k1, float *b) {
    NO_CONTRACT_BODY
    const gamma_rows *g = ctx;
    const int64_t d = g->d;
    float mean[GAMMA_ROWS], rstd[GAMMA_ROWS];
    for (int64_t c = 0; c < d; c++)
        b[c] = 0.0f;
    for (int64_t r0 = k0; r0 < k1; r0 += g->rows_per) {
        const int64_t nr = k1 - r0 < g->rows_per ? k1 - r0 : g->rows_per;
        const float *x = g->x + r0 * d, *dy = g->dy + r0 * d;
        tg_cpu_vlayer_norm_stats(x, nr, d, g->eps, mean, rstd);
        int64_t c0 = 0;
        for (; c0 + GAMMA_CB <= d; c0 += GAMMA_CB) {
            v8f acc[GAMMA_CB / 8];
            memcpy(acc, b + c0, sizeof acc);
            for (int64_t r = 0; r < nr; r++) {
                const v8f mv = {mean[r], mean[r], mean[r], mean[r],
                                mean[r], mean[r], mean[r], mean[r]};
                const v8f rv = {rstd[r], rstd[r], rstd[r], rstd[r],
                                rstd[r], rstd[r], rstd[r], rstd[r]};
                for (int v = 0; v < GAMMA_CB / 8; v++) {
                    v8f a, h;
                    memcpy(&a, dy + r * d + c0 + 8 * v, sizeof a);
                    memcpy(&h, x + r * d + c0 + 8 * v, sizeof h);
                    h = (h - mv) * rv;
                    acc[v] += a * h;
                }
            }
            memcpy(b + c0, acc, sizeof acc);
        }
        for (int64_t r = 0; r < nr; r++)
            for (int64_t c = c0; c < d; c++)
                b[c] += dy[r * d + c] * ((x[r * d + c] - mean[r]) * rstd[r]);
    }
}
TG_CPU_BY_LEVEL(NO_CONTRACT_FN, gamma_block_sums, (void *ctx, int64_t k0, int64_t k1, float *b), (ctx, k0, k1, b))

static tg_status layer_norm_gamma_back(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    int64_t d, rows = row_count(x, &d);
    const int64_t per = d ? 4096 / d : 1; /* 32 KiB of x and dy */
    gamma_rows g = {.x = F32(x),
                    .dy = F32(t->src[1]),
                    .d = d,
                    .rows_per = per < 1            ? 1
                                : per > GAMMA_ROWS ? GAMMA_ROWS
                                                   : per,
                    .eps = t->p.layer_norm.eps};
    return tg__cpu_column_sums(p, gamma_block_sums, &g, F32(t), rows, d,
                               (t->flags & TG_TF_ACCUM) != 0);
}

/* The family's kernels, registered by op. */
TG__CPU_KERNELS(rows) = {
    [TG_OP_SOFTMAX] = softmax,
    [TG_OP_LOG_SOFTMAX] = softmax,
    [TG_OP_SOFTMAX_BACK] = softmax_back,
    [TG_OP_LOG_SOFTMAX_BACK] = softmax_back,
    [TG_OP_LAYER_NORM] = layer_norm,
    [TG_OP_LAYER_NORM_BACK] = layer_norm,
    [TG_OP_LAYER_NORM_GAMMA_BACK] = layer_norm_gamma_back,
};
TG__CPU_KERNELS_CHECK(rows);
