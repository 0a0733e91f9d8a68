/* CPU kernels of the reductions. Each output element is summed in a fixed order, so results
 * do not depend on the thread count. */
#include <math.h>
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

/* eight floats as one GCC/Clang vector: a register of AVX2 (two of SSE in the baseline clone) */
typedef float v8f __attribute__((vector_size(32)));

/* acc: add the sums into o (a fused gradient accumulation) instead of overwriting it */

TG_CPU_CLONES static void sum_axis(tg_cpu_par *p, const float *x, float *o, int64_t outer,
                                   int64_t n, int64_t inner, bool acc) {
    if (inner == 1) {
        TG_CPU_FOR(p, r, outer, outer * n > TG_PAR_MIN) {
            const float *xr = x + r * n;
            double s = 0.0; /* long rows (sum of all elements): accumulate in double */
            for (int64_t k = 0; k < n; k++) s += xr[k];
            o[r] = acc ? o[r] + (float)s : (float)s;
        }
        return;
    }
    /* column sums: parallel over (outer, column blocks), rows added in order. Blocks of 64
     * columns: a bias gradient ([tokens, 256] summed to [256]) is then 4 tasks, not one that a
     * single member ran while the other waited (~7 ms of a g2p-small step). Each column's sum
     * is the same whatever the block width. */
    enum { CB = 64 };
    int64_t nblk = (inner + CB - 1) / CB;
    TG_CPU_FOR(p, w, outer * nblk, outer * n * inner > TG_PAR_MIN) {
        int64_t r = w / nblk, c0 = (w % nblk) * CB, c1 = c0 + CB < inner ? c0 + CB : inner;
        float *orow = o + r * inner, part[CB];
        const float *xr = x + r * n * inner;
        for (int64_t c = c0; c < c1; c++) part[c - c0] = 0.0f;
        if (c1 - c0 == CB) { /* a whole block: the sums in eight vector registers */
            v8f s[CB / 8] = {0};
            for (int64_t k = 0; k < n; k++) {
                const float *xk = xr + k * inner + c0;
                for (int v = 0; v < CB / 8; v++) {
                    v8f t;
                    memcpy(&t, xk + 8 * v, sizeof t);
                    s[v] += t;
                }
            }
            memcpy(part, s, sizeof s);
        } else
            for (int64_t k = 0; k < n; k++)
                for (int64_t c = c0; c < c1; c++)
                    part[c - c0] += xr[k * inner + c];
        for (int64_t c = c0; c < c1; c++) orow[c] = acc ? orow[c] + part[c - c0] : part[c - c0];
    }
}

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

static tg_status max(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    int64_t outer, n, inner;
    split3(x, t->p.reduce.axis, &outer, &n, &inner);
    const float *xp = x->data;
    float *o = t->data;
    TG_CPU_FOR(p, r, outer, outer * n * inner > TG_PAR_MIN)
        for (int64_t c = 0; c < inner; c++) {
            const float *col = xp + r * n * inner + c;
            float m = col[0];
            for (int64_t k = 1; k < n; k++)
                if (col[k * inner] > m || isnan(col[k * inner])) m = col[k * inner];
            o[r * inner + c] = m;
        }
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
