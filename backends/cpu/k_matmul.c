/* CPU matmul: maps a (possibly strided, broadcast) batched product onto the GEMM engine.
 * An operand whose rows are contiguous is read with its row stride as leading dimension; one
 * whose columns are contiguous (a transposed view) flips its transpose flag instead of being
 * copied. Batch dimensions that collapse into one stride go in a single batched call. */
#include "backends/cpu/cpu-impl.h"
#include "backends/cpu/gemm.h"
#include "core/backend-helpers.h"

/* The embedding lookup B is a view of when the planner left it unmade (core/plan.c:
 * TG_TF_LOOKUP), else NULL. */
static const tg_tensor *lookup_of(const tg_tensor *b) {
    const tg_tensor *r = tg__tensor_root(b);
    return (r->flags & TG_TF_LOOKUP) ? r : NULL;
}

static tg_status matmul(tg_cpu_par *p, tg_tensor *t) {
    const tg_tensor *a = t->src[0], *b = t->src[1], *e = lookup_of(b);
    tg_mm_plan mp; /* operands' layout and the batch dims that collapse: core/backend_helpers.c */
    tg__geom_mm_plan(t, &mp);
    const float *A = a->data, *B = b->data;
    float *C = t->data;
    /* B through the lookup: the table's rows by the ids, checked as the lookup's kernel would —
     * by the node's first share (the others read row 0 for an id outside the table: gemm.h) */
    tg_cpu_lookup lk = {0};
    if (e) {
        const tg_tensor *tab = e->src[0], *ids = e->src[1];
        if (p->ith == 0) {
            tg_status st = tg__cpu_check_ids(ids->data, tg_tensor_numel(ids), tab->shape[0],
                                             "tg_embedding (read by a product)");
            if (st) return st;
        }
        lk = (tg_cpu_lookup){tab->data, ids->data, tab->shape[0], tab->shape[1], 0};
    }
    /* the plan's two batch levels in each call (all B·h attention products at once, shared
     * out over the team); the dims [0, first2) left as a loop */
    const int64_t loops = mp.outer / mp.mid;
    for (int64_t o = 0; o < loops; o++) {
        int64_t offa, offb, offc;
        /* loop index o has zeros in the dims [first2, first): outer index o·mid */
        tg__geom_mm_offsets(&mp, t, o * mp.mid, &offa, &offb, &offc);
        lk.off = b->offset + offb;
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
                                    .b = e ? NULL : B + offb,
                                    .ldb = mp.b.ld,
                                    .stride_b = mp.sb,
                                    .c = C + offc,
                                    .ldc = mp.ldc,
                                    .stride_c = mp.sc,
                                    .lookup_b = e ? &lk : NULL};
        /* a barrier between calls: each may hand out its tasks from the team's counter */
        if (o > 0) tg_cpu_barrier(p);
        tg_cpu_gemm_run_par(&g, TG_CPU_GEMM_AUTO, p);
    }
    return TG_OK;
}

/* The shape of one of the kernel's calls (its loop makes each call alike), without operands:
 * what the GEMM's path and cut depend on. */
static tg_cpu_gemm_args call_shape(const tg_mm_plan *mp) {
    return (tg_cpu_gemm_args){.outer = mp->mid,
                              .batch = mp->inner,
                              .M = mp->M,
                              .N = mp->N,
                              .K = mp->K,
                              .trans_a = mp->a.trans,
                              .trans_b = mp->b.trans};
}

bool tg__cpu_matmul_reads_lookup(const tg_tensor *t) {
    const tg_tensor *b = t->src[1], *e = tg__tensor_root(b), *tab = e->src[0];
    if (e->dtype != TG_DTYPE_F32 || tab->ndim != 2 || tab->stride[0] != tab->shape[1] ||
        tab->stride[1] != 1)
        return false;
    const int64_t w = tab->shape[1];
    tg_mm_plan mp;
    tg__geom_mm_plan(t, &mp);
    const tg_cpu_gemm_args g = call_shape(&mp);
    /* the small path, rows of B w apart (a lookup's rows), few enough for its buffer */
    const int64_t nrow = mp.b.trans ? mp.N : mp.K, len = mp.b.trans ? mp.K : mp.N;
    if (tg_cpu_gemm_choose(&g, 1) != TG_CPU_GEMM_SMALL || mp.b.ld != w ||
        nrow * len > TG_CPU_GEMM_LOOKUP_MAX)
        return false;
    /* every product's stored rows within rows of the lookup: from column x % w, len values */
    for (int64_t o = 0; o < mp.outer / mp.mid; o++) {
        int64_t offa, offb, offc;
        tg__geom_mm_offsets(&mp, t, o * mp.mid, &offa, &offb, &offc);
        const int64_t x0 = b->offset + offb;
        for (int64_t q = 0; q < tg_cpu_gemm_count(&g); q++) {
            const int64_t x = x0 + q / mp.inner * mp.osb + q % mp.inner * mp.sb;
            if (x < 0 || x % w + len > w) return false;
        }
    }
    return true;
}

int tg__cpu_matmul_shares(const tg_tensor *t, int nthreads, int most, bool fine) {
    tg_mm_plan mp;
    tg__geom_mm_plan(t, &mp);
    const tg_cpu_gemm_args g = call_shape(&mp);
    return tg_cpu_gemm_shares(&g, nthreads, most, fine);
}

/* The family's kernel, registered by op. */
TG__CPU_KERNELS(matmul) = {
    [TG_OP_MATMUL] = matmul,
};
TG__CPU_KERNELS_CHECK(matmul);
