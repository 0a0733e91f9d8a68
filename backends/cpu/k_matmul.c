/* CPU matmul: maps a (possibly strided, broadcast) batched product onto the GEMM engine.
 * An operand whose rows are contiguous is read with its row stride as leading dimension; one
 * whose columns are contiguous (a transposed view) flips its transpose flag instead of being
 * copied. Batch dimensions that collapse into one stride go in a single batched call. */
#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "core/backend-helpers.h"

/* The loop dims [0, mp->first) of the plan that merge into one more level of batch: dims
 * [*first2, first) advance every operand by a uniform stride (os*), so their `mid` products
 * join the same call as tg_cpu_gemm_args.outer. The heads of a [B, n, h, dk] tensor viewed
 * as [B, h, n, dk] are dk apart and the sequences n·h·dk: core's plan collapses h, this adds
 * B, so all B·h attention products are one call shared out over the team at once instead of
 * B calls of h products (each too small to split, with a barrier between them). */
typedef struct {
    int first2;
    int64_t mid, osa, osb, osc;
} mm_mid;

static mm_mid mid_level(const tg_mm_plan *mp, const tg_tensor *t) {
    mm_mid m = {mp->first, 1, 0, 0, 0};
    if (mp->first == 0) return m;
    int d = mp->first - 1;
    m.first2 = d;
    m.mid = t->shape[d];
    m.osa = mp->a.bstride[d];
    m.osb = mp->b.bstride[d];
    m.osc = mp->cstride[d];
    while (m.first2 > 0) {
        d = m.first2 - 1;
        if (mp->a.bstride[d] != m.osa * m.mid || mp->b.bstride[d] != m.osb * m.mid ||
            mp->cstride[d] != m.osc * m.mid)
            break;
        m.mid *= t->shape[d];
        m.first2 = d;
    }
    return m;
}

static tg_status matmul(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *a = t->src[0], *b = t->src[1];
    tg_mm_plan mp; /* operands' layout and the batch dims that collapse: core/backend_helpers.c */
    tg__geom_mm_plan(t, &mp);
    const mm_mid mm = mid_level(&mp, t);
    const float *A = a->data, *B = b->data;
    float *C = t->data;
    const int64_t loops = mp.outer / mm.mid; /* the dims [0, first2) left as a loop */
    for (int64_t o = 0; o < loops; o++) {
        int64_t offa, offb, offc;
        /* loop index o has zeros in the dims [first2, first): outer index o·mid */
        tg__geom_mm_offsets(&mp, t, o * mm.mid, &offa, &offb, &offc);
        const tg_cpu_gemm_args g = {.outer = mm.mid,
                                    .ostride_a = mm.osa,
                                    .ostride_b = mm.osb,
                                    .ostride_c = mm.osc,
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
                                    .ldc = mp.N,
                                    .stride_c = mp.sc};
        /* a barrier between calls: each may hand out its tasks from the team's counter */
        if (o > 0) tg_cpu_barrier(p);
        tg_cpu_gemm_run_par(&g, TG_CPU_GEMM_AUTO, p);
    }
    return TG_OK;
}

bool tg__cpu_matmul_is_small(const tg_tensor *t) {
    tg_mm_plan mp;
    tg__geom_mm_plan(t, &mp);
    const tg_cpu_gemm_args g = {.batch = mp.inner, .M = mp.M, .N = mp.N, .K = mp.K};
    return tg_cpu_gemm_choose(&g, 1) == TG_CPU_GEMM_SMALL;
}

/* The family's kernel, registered by op. */
TG__CPU_KERNELS(matmul) = {
    [TG_OP_MATMUL] = matmul,
};
TG__CPU_KERNELS_CHECK(matmul);
