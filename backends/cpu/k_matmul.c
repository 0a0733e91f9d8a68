/* CPU matmul: maps a (possibly strided, broadcast) batched product onto the GEMM engine.
 * An operand whose rows are contiguous is read with its row stride as leading dimension; one
 * whose columns are contiguous (a transposed view) flips its transpose flag instead of being
 * copied. Batch dimensions that collapse into one stride go in a single batched call. */
#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "core/backend-helpers.h"

static tg_status matmul(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *a = t->src[0], *b = t->src[1];
    tg_mm_plan mp; /* operands' layout and the batch dims that collapse: core/backend_helpers.c */
    tg__geom_mm_plan(t, &mp);
    const float *A = a->data, *B = b->data;
    float *C = t->data;
    /* the plan's two batch levels in each call (all B·h attention products at once, shared
     * out over the team); the dims [0, first2) left as a loop */
    const int64_t loops = mp.outer / mp.mid;
    for (int64_t o = 0; o < loops; o++) {
        int64_t offa, offb, offc;
        /* loop index o has zeros in the dims [first2, first): outer index o·mid */
        tg__geom_mm_offsets(&mp, t, o * mp.mid, &offa, &offb, &offc);
        const tg_cpu_gemm_args g = {.outer = mp.mid,
                                    .ostride_a = mp.osa,
                                    .ostride_b = mp.osb,
                                    .ostride_c = mp.osc,
                                    .batch = mp.inner,
                                    .M = mp.M,
                                    .N = mp.N,
                                    .K = mp.K,
                                    .trans_a = mp.a.trans,
                                    .trans_b = mp.b.trans,
                                    .alpha = 1.0f,
                                    .beta = (t->flags & TG_TF_ACCUM) ? 1.0f : 0.0f,
                                    .a = A + offa,
                                    .lda = mp.a.ld,
                                    .stride_a = mp.sa,
                                    .b = B + offb,
                                    .ldb = mp.b.ld,
                                    .stride_b = mp.sb,
                                    .c = C + offc,
                                    .ldc = mp.ldc,
                                    .stride_c = mp.sc};
        /* a barrier between calls: each may hand out its tasks from the team's counter */
        if (o > 0) tg_cpu_barrier(p);
        tg_cpu_gemm_run_par(&g, TG_CPU_GEMM_AUTO, p);
    }
    return TG_OK;
}

int tg__cpu_matmul_shares(const tg_tensor *t, int nthreads, int most, bool fine) {
    tg_mm_plan mp;
    tg__geom_mm_plan(t, &mp);
    /* one call's products (the kernel's loop makes each call alike) */
    const tg_cpu_gemm_args g = {.outer = mp.mid,
                                .batch = mp.inner,
                                .M = mp.M,
                                .N = mp.N,
                                .K = mp.K,
                                .trans_a = mp.a.trans,
                                .trans_b = mp.b.trans};
    return tg_cpu_gemm_shares(&g, nthreads, most, fine);
}

/* The family's kernel, registered by op. */
TG__CPU_KERNELS(matmul) = {
    [TG_OP_MATMUL] = matmul,
};
TG__CPU_KERNELS_CHECK(matmul);
