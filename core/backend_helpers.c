/* Kernel geometry shared by every backend (core/backend-helpers.h): broadcast strides, the
 * mapping of a batched matmul onto GEMM calls, and sum_to's reduced dims. Pure arithmetic on
 * shapes and strides; the backends only launch. */
#include "core/backend-helpers.h"

void tg__geom_bcast_strides(const tg_tensor *x, const tg_tensor *t, int64_t *st) {
    int off = t->ndim - x->ndim;
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        int xi = i - off;
        int64_t d = xi >= 0 ? x->shape[xi] : 1;
        st[i] = (d == 1) ? 0 : s;
        s *= d;
    }
}

static void describe(const tg_tensor *x, bool trans, int nb, tg_mm_operand *op) {
    int n = x->ndim;
    int64_t r = x->shape[n - 2], c = x->shape[n - 1];
    int64_t rs = x->stride[n - 2], cs = x->stride[n - 1];
    if (cs == 1) { /* rows contiguous */
        op->trans = trans;
        op->ld = r == 1 ? c : rs;
    } else if (c == 1) { /* a single column: element (i, 0) at i * rs */
        op->trans = trans;
        op->ld = rs;
    } else { /* columns contiguous (rs == 1): the transpose of a row-major [c, r] */
        op->trans = !trans;
        op->ld = cs;
    }
    int off = nb - (n - 2);
    for (int i = 0; i < nb; i++) {
        int xi = i - off;
        op->bstride[i] = (xi < 0 || x->shape[xi] == 1) ? 0 : x->stride[xi];
    }
}

/* One level of batch: dim `from` and the dims above it while every operand's stride stays
 * uniform (each dim's stride = the next one's times its count). Sets the level's product count
 * and strides; returns its first dim. */
static int collapse(const tg_mm_plan *p, const tg_tensor *t, int from, int64_t *count, int64_t *sa,
                    int64_t *sb, int64_t *sc) {
    *count = t->shape[from];
    *sa = p->a.bstride[from];
    *sb = p->b.bstride[from];
    *sc = p->cstride[from];
    int first = from;
    while (first > 0) {
        int d = first - 1;
        if (p->a.bstride[d] != *sa * *count || p->b.bstride[d] != *sb * *count ||
            p->cstride[d] != *sc * *count)
            break;
        *count *= t->shape[d];
        first = d;
    }
    return first;
}

void tg__geom_mm_plan(const tg_tensor *t, tg_mm_plan *p) {
    const tg_tensor *a = t->src[0], *b = t->src[1];
    int nb = t->ndim - 2;
    p->nb = nb;
    p->M = t->shape[nb];
    p->N = t->shape[nb + 1];
    p->K = a->shape[a->ndim - (t->p.matmul.trans_a ? 2 : 1)];
    describe(a, t->p.matmul.trans_a, nb, &p->a);
    describe(b, t->p.matmul.trans_b, nb, &p->b);
    /* BLAS wants ld >= the stored column count; only degenerate 1-row/1-column views can be
     * below it, and for them any larger ld addresses the same elements. */
    int64_t a_cols = p->a.trans ? p->M : p->K, b_cols = p->b.trans ? p->K : p->N;
    if (p->a.ld < a_cols) p->a.ld = a_cols;
    if (p->b.ld < b_cols) p->b.ld = b_cols;
    for (int i = 0; i < t->ndim; i++) p->cstride[i] = t->stride[i];
    p->ldc = t->stride[nb];
    /* collapse trailing batch dims while every operand's strides stay uniform */
    p->inner = 1;
    p->sa = 0;
    p->sb = 0;
    p->sc = p->M * p->N;
    p->first = nb > 0 ? collapse(p, t, nb - 1, &p->inner, &p->sa, &p->sb, &p->sc) : nb;
    /* then the dims left above them, as a second level */
    p->mid = 1;
    p->osa = 0;
    p->osb = 0;
    p->osc = 0;
    p->first2 =
        p->first > 0 ? collapse(p, t, p->first - 1, &p->mid, &p->osa, &p->osb, &p->osc) : p->first;
    p->outer = 1;
    for (int i = 0; i < p->first; i++) p->outer *= t->shape[i];
}

void tg__geom_mm_offsets(const tg_mm_plan *p, const tg_tensor *t, int64_t o, int64_t *offa,
                         int64_t *offb, int64_t *offc) {
    int64_t q = o;
    *offa = *offb = *offc = 0;
    for (int i = p->first - 1; i >= 0; i--) {
        int64_t k = q % t->shape[i];
        q /= t->shape[i];
        *offa += k * p->a.bstride[i];
        *offb += k * p->b.bstride[i];
        *offc += k * p->cstride[i];
    }
}

void tg__geom_sumto_plan(const tg_tensor *t, const tg_tensor *x, tg_sumto_plan *p) {
    int nd = x->ndim, off = nd - t->ndim;
    p->nd = nd;
    for (int i = 0; i < nd; i++) {
        int ti = i - off;
        p->red[i] = ti < 0 || (t->shape[ti] == 1 && x->shape[i] != 1);
    }
    int lead = 0;
    while (lead < nd && p->red[lead]) lead++;
    p->lead_block = true;
    for (int i = lead; i < nd; i++)
        if (p->red[i]) p->lead_block = false;
    p->R = 1;
    p->C = 1;
    for (int i = 0; i < lead; i++) p->R *= x->shape[i];
    for (int i = lead; i < nd; i++) p->C *= x->shape[i];
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        p->xstride[i] = s;
        s *= x->shape[i];
    }
    p->nout = tg_tensor_numel(t);
    p->nred = tg_tensor_numel(x) / (p->nout ? p->nout : 1);
}
