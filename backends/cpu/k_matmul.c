/* CPU matmul: maps a (possibly strided, broadcast) batched product onto the GEMM engine.
 * An operand whose rows are contiguous is read with its row stride as leading dimension; one
 * whose columns are contiguous (a transposed view) flips its transpose flag instead of being
 * copied. Batch dimensions that collapse into one stride go in a single batched call. */
#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"

typedef struct {
    bool trans;
    int64_t ld;
    int64_t bstride[TG_MAX_DIMS]; /* per output batch dim, 0 where broadcast */
} operand;

/* The stored matrix [r, c] of x (its last two dims) as a row-major operand for GEMM. */
static void describe(const tg_tensor *x, bool trans, int nb, operand *op) {
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

tg_status tg_cpu_matmul(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *a = t->src[0], *b = t->src[1];
    int nb = t->ndim - 2;
    int64_t M = t->shape[nb], N = t->shape[nb + 1];
    int64_t K = a->shape[a->ndim - (t->pi[0] ? 2 : 1)];
    operand oa, ob;
    describe(a, t->pi[0], nb, &oa);
    describe(b, t->pi[1], nb, &ob);
    /* BLAS wants ld >= the stored column count; only degenerate 1-row/1-column views can be
     * below it, and for them any larger ld addresses the same elements. */
    int64_t a_cols = oa.trans ? M : K, b_cols = ob.trans ? K : N;
    if (oa.ld < a_cols) oa.ld = a_cols;
    if (ob.ld < b_cols) ob.ld = b_cols;
    int64_t cst[TG_MAX_DIMS];
    tg__contiguous_strides(t->ndim, t->shape, cst);
    /* collapse trailing batch dims while every operand's strides stay uniform */
    int64_t inner = 1, sa = 0, sb = 0, sc = M * N;
    int first = nb;
    if (nb > 0) {
        first = nb - 1;
        inner = t->shape[nb - 1];
        sa = oa.bstride[nb - 1];
        sb = ob.bstride[nb - 1];
        sc = cst[nb - 1];
        while (first > 0) {
            int d = first - 1;
            if (oa.bstride[d] != sa * inner || ob.bstride[d] != sb * inner || cst[d] != sc * inner)
                break;
            inner *= t->shape[d];
            first = d;
        }
    }
    int64_t outer = 1;
    for (int i = 0; i < first; i++) outer *= t->shape[i];
    const float *A = a->data, *B = b->data;
    float *C = t->data;
    for (int64_t o = 0; o < outer; o++) {
        int64_t offa = 0, offb = 0, offc = 0, q = o;
        for (int i = first - 1; i >= 0; i--) {
            int64_t k = q % t->shape[i];
            q /= t->shape[i];
            offa += k * oa.bstride[i];
            offb += k * ob.bstride[i];
            offc += k * cst[i];
        }
        const tg_cpu_gemm_args g = {.outer = 1,
                                    .batch = inner,
                                    .M = M,
                                    .N = N,
                                    .K = K,
                                    .trans_a = oa.trans,
                                    .trans_b = ob.trans,
                                    .alpha = 1.0f,
                                    .beta = (t->flags & TG_TF_ACCUM) ? 1.0f : 0.0f,
                                    .a = A + offa,
                                    .lda = oa.ld,
                                    .stride_a = sa,
                                    .b = B + offb,
                                    .ldb = ob.ld,
                                    .stride_b = sb,
                                    .c = C + offc,
                                    .ldc = N,
                                    .stride_c = sc};
        /* a barrier between calls: each may hand out its tasks from the team's counter */
        if (o > 0) tg_cpu_barrier(p);
        tg_cpu_gemm_run_par(&g, TG_CPU_GEMM_AUTO, p);
    }
    return TG_OK;
}
