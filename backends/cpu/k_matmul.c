/* CPU matmul: maps a (possibly strided, broadcast) batched product onto tg_cpu_gemm_batched.
 * An operand whose rows are contiguous is read with its row stride as leading dimension; one
 * whose columns are contiguous (a transposed view) flips its transpose flag instead of being
 * copied. Batch dimensions that collapse into one stride go in a single batched call. */
#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "core/backend-helpers.h"

tg_status tg_cpu_matmul(tg_backend *bk, tg_tensor *t) {
    const tg_tensor *a = t->src[0], *b = t->src[1];
    tg_mm_plan p; /* operands' layout and the batch dims that collapse: core/backend_helpers.c */
    tg__mm_plan(t, &p);
    const float *A = a->data, *B = b->data;
    float *C = t->data;
    for (int64_t o = 0; o < p.outer; o++) {
        int64_t offa, offb, offc;
        tg__mm_offsets(&p, t, o, &offa, &offb, &offc);
        tg_cpu_gemm_batched(p.inner, p.a.trans, p.b.trans, p.M, p.N, p.K, 1.0f, A + offa, p.a.ld,
                            p.sa, B + offb, p.b.ld, p.sb, (t->flags & TG_TF_ACCUM) ? 1.0f : 0.0f,
                            C + offc, p.N, p.sc, bk->nthreads);
    }
    return TG_OK;
}
