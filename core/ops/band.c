/* The banded (restricted, local-window) attention op family: band_scores, band_mix and the
 * backward-only band_mix_t, with their shape rules and gradient rules. Row i of a banded tensor
 * [..., n, 2r+1] holds the keys at positions i-r .. i+r: column j is key position i + j - r.
 * Each op costs O(r·n·d), where the dense Q K^T and P V of full attention cost O(n·m·d). The
 * kernels read contiguous inputs. Parameters: t->p.band (r; band_scores' fill, the value of an
 * entry whose key position is outside [0, m)); band_mix_t's m is its output's second-to-last
 * dimension. Kernels: backends/cpu/k_band.c, backends/cuda/k_band.cu. */
#include <math.h>

#include "core/ops/ops-impl.h"

/* r is bounded so that 2r+1 and i+j-r stay far inside int64 and the width inside int32. */
#define BAND_MAX_R ((int64_t)1 << 28)

/* Checks what all three ops share: same graph, f32, 2+ dims, equal ndim and equal leading
 * (batch, head) dimensions, r in range. */
static bool band_check(tg_tensor *a, tg_tensor *b, int64_t r, const char *fn) {
    char sa[96], sb[96];
    if (a->graph != b->graph) {
        tg__graph_fail(a->graph, TG_ERR_INVALID, "%s: inputs belong to different graphs", fn);
        return false;
    }
    if (a->dtype != TG_DTYPE_F32 || b->dtype != TG_DTYPE_F32) {
        tg__graph_fail(a->graph, TG_ERR_DTYPE, "%s: expected f32 inputs, got %s and %s", fn,
                       tg_dtype_name(a->dtype), tg_dtype_name(b->dtype));
        return false;
    }
    if (r < 0 || r > BAND_MAX_R) {
        tg__graph_fail(a->graph, TG_ERR_INVALID, "%s: r = %lld outside [0, %lld]", fn, (long long)r,
                       (long long)BAND_MAX_R);
        return false;
    }
    bool ok = a->ndim >= 2 && a->ndim == b->ndim;
    for (int i = 0; ok && i < a->ndim - 2; i++) ok = a->shape[i] == b->shape[i];
    if (!ok)
        tg__graph_fail(
            a->graph, TG_ERR_SHAPE,
            "%s: %s and %s need 2+ dimensions and equal leading dimensions (no broadcasting)", fn,
            tg_shape_str(sa, sizeof sa, a->ndim, a->shape),
            tg_shape_str(sb, sizeof sb, b->ndim, b->shape));
    return ok;
}

/* A node of op `op` over contiguous copies of a and b, shaped like a with its last two
 * dimensions replaced by (rows, cols). */
static tg_tensor *band_node(tg_op op, tg_tensor *a, tg_tensor *b, int64_t rows, int64_t cols, int64_t r) {
    tg_tensor *src[2] = {tg__op_cont(a), tg__op_cont(b)};
    if (!src[0] || !src[1]) return NULL;
    int64_t s[TG_MAX_DIMS];
    for (int i = 0; i < a->ndim - 2; i++) s[i] = a->shape[i];
    s[a->ndim - 2] = rows;
    s[a->ndim - 1] = cols;
    tg_tensor *t = tg__graph_new(a->graph, op, TG_DTYPE_F32, a->ndim, s);
    if (!t) return NULL;
    tg__graph_set_src(t, 2, src);
    t->p.band.r = r;
    return t;
}

tg_tensor *tg_band_scores(tg_tensor *q, tg_tensor *k, int64_t r, float fill) {
    if (!q || !k) return NULL;
    if (!band_check(q, k, r, "tg_band_scores")) return NULL;
    int nd = q->ndim;
    if (q->shape[nd - 1] != k->shape[nd - 1]) {
        char sa[96], sb[96];
        return tg__graph_fail(q->graph, TG_ERR_SHAPE, "tg_band_scores: Q %s and K %s differ in d_k",
                              tg_shape_str(sa, sizeof sa, nd, q->shape),
                              tg_shape_str(sb, sizeof sb, nd, k->shape));
    }
    tg_tensor *t = band_node(TG_OP_BAND_SCORES, q, k, q->shape[nd - 2], 2 * r + 1, r);
    if (t) t->p.band.fill = fill;
    return t;
}

tg_tensor *tg_band_mix(tg_tensor *p, tg_tensor *v, int64_t r) {
    if (!p || !v) return NULL;
    if (!band_check(p, v, r, "tg_band_mix")) return NULL;
    int nd = p->ndim;
    if (p->shape[nd - 1] != 2 * r + 1) {
        char sa[96];
        return tg__graph_fail(p->graph, TG_ERR_SHAPE,
                              "tg_band_mix: P %s must have 2r+1 = %lld columns",
                              tg_shape_str(sa, sizeof sa, nd, p->shape), (long long)(2 * r + 1));
    }
    return band_node(TG_OP_BAND_MIX, p, v, p->shape[nd - 2], v->shape[nd - 1], r);
}

/* The transposed band product, Y [..., m, d] with Y_t = sum_j A[t+r-j, j] X_{t+r-j} over the
 * rows t+r-j in [0, n), for A [..., n, 2r+1] and X [..., n, d]: the gradient of band_scores
 * with respect to K (A = dS, X = Q) and of band_mix with respect to V (A = P, X = dO). */
static tg_tensor *band_mix_t(tg_tensor *a, tg_tensor *x, int64_t r, int64_t m) {
    if (!a || !x) return NULL;
    if (!band_check(a, x, r, "band_mix_t")) return NULL;
    int nd = a->ndim;
    if (a->shape[nd - 1] != 2 * r + 1 || a->shape[nd - 2] != x->shape[nd - 2] || m < 0)
        return tg__graph_fail(a->graph, TG_ERR_SHAPE,
                              "band_mix_t: A must be [..., n, 2r+1] over X [..., n, d]");
    return band_node(TG_OP_BAND_MIX_T, a, x, m, x->shape[nd - 1], r);
}

/* ---- gradient rules ---- */

#define X(i) (node->src[i])

/* S = band_scores(Q, K), S[i, j] = Q_i · K_{i+j-r}: dQ_i = sum_j dS[i, j] K_{i+j-r} =
 * band_mix(dS, K); dK_t = sum over (i, j) with i+j-r = t of dS[i, j] Q_i = band_mix_t(dS, Q).
 * Entries of dS outside the keys are never read (band_mix and band_mix_t skip them), so the
 * fill value, a constant, gets no gradient. */
static void g_band_scores(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *q = X(0), *k = X(1);
    int64_t r = node->p.band.r;
    if (q->flags & TG_TF_REQ_GRAD) tg__grad_accum(q, tg_band_mix(dy, k, r));
    if (k->flags & TG_TF_REQ_GRAD) tg__grad_accum(k, band_mix_t(dy, q, r, k->shape[k->ndim - 2]));
}

/* O = band_mix(P, V), O_i = sum_j P[i, j] V_{i+j-r}: dP[i, j] = dO_i · V_{i+j-r} =
 * band_scores(dO, V) with 0 where there is no key (P's entries there are never read, so their
 * gradient is 0, and a 0 keeps a softmax_back behind it finite); dV = band_mix_t(P, dO). */
static void g_band_mix(tg_tensor *node, tg_tensor *dy) {
    tg_tensor *p = X(0), *v = X(1);
    int64_t r = node->p.band.r;
    if (p->flags & TG_TF_REQ_GRAD) tg__grad_accum(p, tg_band_scores(dy, v, r, 0.0f));
    if (v->flags & TG_TF_REQ_GRAD) tg__grad_accum(v, band_mix_t(p, dy, r, v->shape[v->ndim - 2]));
}

/* ---- the family's rows ---- */

TG__OP_FAMILY(band) = {
    [TG_OP_BAND_SCORES] = {"band_scores", 0, g_band_scores}, /* srcs Q, K */
    [TG_OP_BAND_MIX] = {"band_mix", 0, g_band_mix},          /* srcs P, V */
    [TG_OP_BAND_MIX_T] = {"band_mix_t", TG_OPF_BACKWARD_ONLY, NULL}, /* srcs A, X */
};
TG__OP_FAMILY_CHECK(band);
