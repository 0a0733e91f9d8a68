/* CPU kernels of the reductions. Each output element is summed in a fixed order, so results
 * do not depend on the thread count. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"
#include "core/backend-helpers.h"

/* x viewed as [outer, n, inner], reduced over n. */
static void split3(const tg_tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= x->shape[i];
    for (int i = axis + 1; i < x->ndim; i++) *inner *= x->shape[i];
    *n = x->shape[axis];
}

/* Column sums ([outer, n, inner] over n, inner > 1) take the rows in blocks of SUM_ROWS: each
 * block's rows are added in order starting from 0, and the block sums in block order starting
 * from 0. Every column's sum is then the same bits whoever sums which block — by blocks of
 * columns, each task over all rows (column_sums_by_columns), or in a graph run by blocks of
 * rows, each share over all columns (column_sums_by_rows) — and on any thread count. */
enum { SUM_ROWS = 128 };

/* acc: add the sums into o (a fused gradient accumulation) instead of overwriting it */

enum { CB = 64 }; /* columns per task of column_sums_by_columns, per step of a block's sums */

/* b[c - c0] = the sum of rows [k0, k1) of columns [c0, c1) (c1 - c0 <= CB), rows in order from
 * 0: a whole block of CB columns in eight vector registers */
static inline __attribute__((always_inline)) void block_sums(const float *x, int64_t inner,
                                                             int64_t k0, int64_t k1, int64_t c0,
                                                             int64_t c1, float *b) {
    if (c1 - c0 == CB) {
        v8f s[CB / 8] = {0};
        for (int64_t k = k0; k < k1; k++) {
            const float *xk = x + k * inner + c0;
            for (int v = 0; v < CB / 8; v++) {
                v8f t;
                memcpy(&t, xk + 8 * v, sizeof t);
                s[v] += t;
            }
        }
        memcpy(b, s, sizeof s);
        return;
    }
    for (int64_t c = c0; c < c1; c++)
        b[c - c0] = 0.0f;
    for (int64_t k = k0; k < k1; k++)
        for (int64_t c = c0; c < c1; c++)
            b[c - c0] += x[k * inner + c];
}

/* Parallel over (outer, column blocks). Blocks of 64 columns: a bias gradient ([tokens, 256]
 * summed to [256]) is then 4 tasks, not one that a single member ran while the other waited
 * (~7 ms of a g2p-small step). Each column's sum is the same whatever the block width. */
TG_CPU_BODY void column_sums_by_columns_body(tg_cpu_par *p, const float *x, float *o,
                                             int64_t outer, int64_t n, int64_t inner, bool acc) {
    int64_t nblk = (inner + CB - 1) / CB;
    TG_CPU_FOR(p, w, outer * nblk, outer * n * inner > TG_PAR_MIN) {
        int64_t r = w / nblk, c0 = (w % nblk) * CB, c1 = c0 + CB < inner ? c0 + CB : inner;
        float *orow = o + r * inner, sum[CB] = {0}, b[CB];
        for (int64_t k0 = 0; k0 < n; k0 += SUM_ROWS) {
            block_sums(x + r * n * inner, inner, k0, k0 + SUM_ROWS < n ? k0 + SUM_ROWS : n, c0, c1,
                       b);
            for (int64_t c = 0; c < c1 - c0; c++)
                sum[c] += b[c];
        }
        for (int64_t c = c0; c < c1; c++)
            orow[c] = acc ? orow[c] + sum[c - c0] : sum[c - c0];
    }
}
TG_CPU_BY_LEVEL(, column_sums_by_columns,
                (tg_cpu_par *p, const float *x, float *o, int64_t outer, int64_t n, int64_t inner, bool acc),
                (p, x, o, outer, n, inner, acc))

/* A graph run's shares of a column sum over many rows, cut by rows: share i sums the blocks of
 * rows [i·B/k, (i+1)·B/k) (B blocks, k shares) — the rows the kernels and products before it
 * gave member i, so each member reads only what its own core wrote — into one row of partial
 * sums per block, and whichever share finishes last adds them up in block order. Cut by
 * columns instead, every member would read every row, half of them from the other cores'
 * caches: where the cores sit on different chiplets that costs the sum about twice its time.
 * The partial rows live in the node's shared object (team.h). */
enum { ROW_SUMS_MAX = 1 << 20 }; /* most partial values: 4 MiB */

typedef struct {
    tg_cpu_shared base;
    atomic_int finished; /* shares done */
    float part[];        /* block b's sums at part[b·inner] */
} row_sums;

static void row_sums_free(tg_cpu_shared *s) {
    free(s);
}
static void no_row_sums_release(tg_cpu_shared *s) {
    (void)s;
}
static tg_cpu_shared no_row_sums = {no_row_sums_release}; /* no memory: cut by columns */

/* The node's partial rows: made by the first share to get here, found by the others. */
static row_sums *row_sums_of(tg_cpu_par *p, int64_t floats) {
    tg_cpu_shared *s = atomic_load_explicit(p->shared, memory_order_acquire);
    if (!s) {
        row_sums *mine = malloc(sizeof *mine + (size_t)floats * sizeof(float));
        if (mine) {
            mine->base.release = row_sums_free;
            atomic_init(&mine->finished, 0);
        }
        s = tg_cpu_shared_publish(p, mine ? &mine->base : &no_row_sums);
    }
    return s == &no_row_sums ? NULL : (row_sums *)s;
}

/* o = (or +=: acc) the sum of the nblk partial rows at part, in block order, CB columns at a
 * time */
static void add_blocks(const float *part, int64_t nblk, int64_t inner, float *o, bool acc) {
    for (int64_t c0 = 0; c0 < inner; c0 += CB) {
        const int64_t w = inner - c0 < CB ? inner - c0 : CB;
        float sum[CB] = {0};
        for (int64_t b = 0; b < nblk; b++)
            for (int64_t c = 0; c < w; c++)
                sum[c] += part[b * inner + c0 + c];
        for (int64_t c = 0; c < w; c++)
            o[c0 + c] = acc ? o[c0 + c] + sum[c] : sum[c];
    }
}

/* Returns false (and does nothing) where the cut by rows does not apply. */
static bool column_sums_by_rows(tg_cpu_par *p, tg_cpu_block_sums_fn rows, void *ctx, float *o,
                                int64_t n, int64_t inner, bool acc) {
    const int64_t nblk = (n + SUM_ROWS - 1) / SUM_ROWS;
    if (!p->shared || p->nth < 2 || nblk < p->nth || n * inner <= TG_PAR_MIN ||
        nblk * inner > ROW_SUMS_MAX)
        return false;
    row_sums *s = row_sums_of(p, nblk * inner);
    if (!s) return false;
    for (int64_t b = nblk * p->ith / p->nth; b < nblk * (p->ith + 1) / p->nth; b++)
        rows(ctx, b * SUM_ROWS, (b + 1) * SUM_ROWS < n ? (b + 1) * SUM_ROWS : n,
             s->part + b * inner);
    if (atomic_fetch_add_explicit(&s->finished, 1, memory_order_acq_rel) != p->nth - 1) return true;
    add_blocks(s->part, nblk, inner, o, acc); /* the last share */
    return true;
}

tg_status tg__cpu_column_sums(tg_cpu_par *p, tg_cpu_block_sums_fn rows, void *ctx, float *o,
                              int64_t n, int64_t inner, bool acc) {
    if (column_sums_by_rows(p, rows, ctx, o, n, inner, acc)) return TG_OK;
    if (p->ith != 0) return TG_OK; /* one member: the blocks in order */
    float *sum = calloc(2 * (size_t)inner + 1, sizeof *sum), *b = sum + inner;
    if (!sum) return tg_error_set(TG_ERR_NOMEM, "column sums: %lld floats", (long long)inner);
    for (int64_t k0 = 0; k0 < n; k0 += SUM_ROWS) {
        rows(ctx, k0, k0 + SUM_ROWS < n ? k0 + SUM_ROWS : n, b);
        for (int64_t c = 0; c < inner; c++)
            sum[c] += b[c];
    }
    for (int64_t c = 0; c < inner; c++)
        o[c] = acc ? o[c] + sum[c] : sum[c];
    free(sum);
    return TG_OK;
}

/* The plain column sums' blocks (tg_cpu_block_sums_fn) of the matrix x, inner columns */
typedef struct {
    const float *x;
    int64_t inner;
} plain_rows;

TG_CPU_BODY void plain_block_sums_body(void *ctx, int64_t k0, int64_t k1, float *b) {
    const plain_rows *m = ctx;
    for (int64_t c0 = 0; c0 < m->inner; c0 += CB)
        block_sums(m->x, m->inner, k0, k1, c0, c0 + CB < m->inner ? c0 + CB : m->inner, b + c0);
}
TG_CPU_BY_LEVEL(, plain_block_sums, (void *ctx, int64_t k0, int64_t k1, float *b), (ctx, k0, k1, b))

TG_CPU_BODY void sum_axis_body(tg_cpu_par *p, const float *x, float *o, int64_t outer, int64_t n,
                              int64_t inner, bool acc) {
    if (inner == 1) {
        TG_CPU_FOR(p, r, outer, outer * n > TG_PAR_MIN) {
            const float *xr = x + r * n;
            double s = 0.0; /* long rows (sum of all elements): accumulate in double */
            for (int64_t k = 0; k < n; k++) s += xr[k];
            o[r] = acc ? o[r] + (float)s : (float)s;
        }
        return;
    }
    plain_rows m = {x, inner};
    if (outer == 1 && column_sums_by_rows(p, plain_block_sums, &m, o, n, inner, acc)) return;
    column_sums_by_columns(p, x, o, outer, n, inner, acc);
}
TG_CPU_BY_LEVEL(, sum_axis,
                (tg_cpu_par *p, const float *x, float *o, int64_t outer, int64_t n, int64_t inner, bool acc),
                (p, x, o, outer, n, inner, acc))

/* sum_to: reduce x to t's shape. Common cases (leading or trailing dims summed) become one
 * sum_axis; the general case loops over the reduced index space of each output element. */
static void sum_to(tg_cpu_par *p, const tg_tensor *t, const tg_tensor *x) {
    bool acc = (t->flags & TG_TF_ACCUM) != 0;
    tg_sumto_plan sp; /* which dims are summed: core/backend_helpers.c */
    tg__geom_sumto_plan(t, x, &sp);
    int nd = sp.nd;
    const bool *red = sp.red;
    /* leading block reduced, rest kept (bias gradients): [R, C] -> [C] */
    if (sp.lead_block) {
        sum_axis(p, x->data, t->data, 1, sp.R, sp.C, acc);
        return;
    }
    const int64_t *xs = sp.xstride;
    int64_t nout = sp.nout, nred = sp.nred;
    const float *xp = x->data;
    float *o = t->data;
    TG_CPU_FOR(p, e, nout, nout * nred > TG_PAR_MIN) {
        /* base offset from the kept coordinates of e */
        int64_t base = 0, q = e;
        for (int i = nd - 1; i >= 0; i--) {
            if (red[i]) continue;
            base += (q % x->shape[i]) * xs[i];
            q /= x->shape[i];
        }
        float sum = 0.0f;
        int64_t idx[TG_MAX_DIMS] = {0};
        for (int64_t k = 0; k < nred; k++) {
            int64_t ofs = base;
            for (int i = 0; i < nd; i++)
                if (red[i]) ofs += idx[i] * xs[i];
            sum += xp[ofs];
            for (int i = nd - 1; i >= 0; i--) {
                if (!red[i]) continue;
                if (++idx[i] < x->shape[i]) break;
                idx[i] = 0;
            }
        }
        o[e] = acc ? o[e] + sum : sum;
    }
}

static tg_status sum(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    int64_t outer, n, inner;
    split3(x, t->p.reduce.axis, &outer, &n, &inner);
    sum_axis(p, x->data, t->data, outer, n, inner, false);
    return TG_OK;
}

static tg_status sum_to_kernel(tg_cpu_par *p, tg_tensor *t) {
    sum_to(p, t, t->src[0]);
    return TG_OK;
}

/* The maximum of n values inner apart: the first of equal ones (+0 or -0), a NaN if any (the
 * last one). */
static float max_strided(const float *col, int64_t n, int64_t inner) {
    float m = col[0];
    for (int64_t k = 1; k < n; k++)
        if (col[k * inner] > m || isnan(col[k * inner])) m = col[k * inner];
    return m;
}

/* The same over a contiguous row (a decoder's logits, V of them), 16 lanes at a time. A
 * nonzero maximum has one bit pattern, whatever the order it is found in; a row with a NaN or
 * a zero maximum (+0 and -0 compare equal) is left to max_strided. */
TG_CPU_BODY float max_row_body(const float *x, int64_t n) {
    typedef float vf __attribute__((vector_size(32), aligned(4)));
    typedef int32_t vi __attribute__((vector_size(32), aligned(4)));
    enum { W = 8, L = 2 * W };
    if (n < 2 * L) return max_strided(x, n, 1);
    vf m[2];
    vi bad[2];
    for (int h = 0; h < 2; h++) {
        memcpy(&m[h], x + h * W, sizeof m[h]);
        bad[h] = m[h] != m[h];
    }
    int64_t k = L;
    for (; k + L <= n; k += L)
        for (int h = 0; h < 2; h++) {
            vf v;
            memcpy(&v, x + k + h * W, sizeof v);
            const vi gt = v > m[h];
            bad[h] |= v != v;
            m[h] = (vf)(((vi)v & gt) | ((vi)m[h] & ~gt));
        }
    int any = 0;
    float r = m[0][0];
    for (int l = 0; l < L; l++) {
        any |= bad[l / W][l % W];
        r = m[l / W][l % W] > r ? m[l / W][l % W] : r;
    }
    for (; k < n; k++) {
        any |= x[k] != x[k];
        r = x[k] > r ? x[k] : r;
    }
    return any || r == 0.0f ? max_strided(x, n, 1) : r;
}
TG_CPU_BY_LEVEL_RET(, float, max_row, (const float *x, int64_t n), (x, n))

static tg_status max(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    int64_t outer, n, inner;
    split3(x, t->p.reduce.axis, &outer, &n, &inner);
    const float *xp = x->data;
    float *o = t->data;
    TG_CPU_FOR(p, r, outer, outer * n * inner > TG_PAR_MIN)
    for (int64_t c = 0; c < inner; c++)
        o[r * inner + c] =
            inner == 1 ? max_row(xp + r * n, n) : max_strided(xp + r * n * inner + c, n, inner);
    return TG_OK;
}

/* srcs: x, y = max (keepdim), dy (keepdim); dy goes to the first maximum */
static tg_status max_back(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    int64_t outer, n, inner;
    split3(x, t->p.reduce.axis, &outer, &n, &inner);
    const float *xp = x->data, *y = t->src[1]->data, *dy = t->src[2]->data;
    float *o = t->data;
    TG_CPU_FOR(p, r, outer, outer * n * inner > TG_PAR_MIN)
        for (int64_t c = 0; c < inner; c++) {
            int64_t j = r * inner + c;
            bool done = false;
            for (int64_t k = 0; k < n; k++) {
                int64_t e = r * n * inner + k * inner + c;
                bool hit = !done && (xp[e] == y[j] || (isnan(y[j]) && isnan(xp[e])));
                o[e] = hit ? dy[j] : 0.0f;
                done = done || hit;
            }
        }
    return TG_OK;
}

/* The family's kernels, registered by op. */
TG__CPU_KERNELS(reduce) = {
    [TG_OP_SUM] = sum,
    [TG_OP_MAX] = max,
    [TG_OP_MAX_BACK] = max_back,
    [TG_OP_SUM_TO] = sum_to_kernel,
};
TG__CPU_KERNELS_CHECK(reduce);
