/* CPU kernels of the layout ops: contiguous copy of a strided view, concat, pad, expand. */
#include <string.h>

#include "backends/cpu/cpu-impl.h"
#include "core/backend-helpers.h"

/* Copy rows of the output (all dims but the last) from arbitrary source strides. Works on
 * 4-byte elements (f32 and i32 alike). */
static void strided_copy(tg_cpu_par *p, const tg_tensor *t, const uint32_t *src, const int64_t *st) {
    uint32_t *o = t->data;
    int nd = t->ndim;
    int64_t n = tg_tensor_numel(t);
    if (n == 0) return;
    int64_t inner = nd ? t->shape[nd - 1] : 1, rows = n / inner, is = nd ? st[nd - 1] : 0;
    TG_CPU_FOR(p, r, rows, n > TG_PAR_MIN) {
        int64_t off = 0, q = r;
        for (int i = nd - 2; i >= 0; i--) {
            off += (q % t->shape[i]) * st[i];
            q /= t->shape[i];
        }
        const uint32_t *s = src + off;
        uint32_t *d = o + r * inner;
        if (is == 1) memcpy(d, s, (size_t)inner * 4);
        else
            for (int64_t j = 0; j < inner; j++) d[j] = s[j * is];
    }
}

static tg_status cont(tg_cpu_par *p, tg_tensor *t) {
    strided_copy(p, t, t->src[0]->data, t->src[0]->stride);
    return TG_OK;
}

static tg_status expand(tg_cpu_par *p, tg_tensor *t) {
    int64_t st[TG_MAX_DIMS];
    tg__geom_bcast_strides(t->src[0], t, st);
    strided_copy(p, t, t->src[0]->data, st);
    return TG_OK;
}

/* concat and pad: the output viewed as [outer, len_axis * inner]; each input fills a column
 * range. Each member zeroes and fills its own rows (one partition for all inputs: no member
 * writes a row another member has written). */
static tg_status concat_pad(tg_cpu_par *p, tg_tensor *t) {
    int a = t->op == TG_OP_PAD ? t->p.pad.axis : t->p.concat.axis;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < a; i++) outer *= t->shape[i];
    for (int i = a + 1; i < t->ndim; i++) inner *= t->shape[i];
    int64_t orow = t->shape[a] * inner;
    uint32_t *o = t->data;
    const bool par = outer * orow > TG_PAR_MIN;
    if (t->op == TG_OP_PAD)
        TG_CPU_FOR(p, r, outer, par) memset(o + r * orow, 0, (size_t)orow * 4);
    int64_t col = t->op == TG_OP_PAD ? t->p.pad.before * inner : 0;
    for (int k = 0; k < t->nsrc; k++) {
        const tg_tensor *s = t->src[k];
        int64_t srow = s->shape[a] * inner;
        const uint32_t *sp = s->data;
        TG_CPU_FOR(p, r, outer, par)
            memcpy(o + r * orow + col, sp + r * srow, (size_t)srow * 4);
        col += srow;
    }
    return TG_OK;
}

/* The family's kernels, registered by op (views run none). */
TG__CPU_KERNELS(layout) = {
    [TG_OP_CONT] = cont,
    [TG_OP_CONCAT] = concat_pad,
    [TG_OP_PAD] = concat_pad,
    [TG_OP_EXPAND] = expand,
};
TG__CPU_KERNELS_CHECK(layout);
