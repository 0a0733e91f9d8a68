/* The CUDA backend's kernels, registered by op in one table (tgcu_kernels): each turns a node
 * into launcher arguments (index spaces, row counts, the op's named parameters of
 * core/ops/params.h) for the .cu files, or a cuBLAS call for matmul. Inputs are contiguous
 * except matmul operands (row- or column-contiguous views) and the source of a contiguous
 * copy; outputs are contiguous. */
#include <limits.h>
#include <string.h>

#include "backends/cuda/cuda-host.h"
#include "core/backend-helpers.h"

#define F32(t) ((float *)(t)->data)
#define STREAM(b) (((tgcu_impl *)(b)->impl)->stream)

/* An index space over `shape` read through strides sa and sb: size-1 dimensions dropped and
 * neighbours merged where both operands step uniformly across them, so that a same-shape op
 * becomes one flat dimension and a bias add becomes [rows, cols]. */
static void make_index(int nd, const int64_t *shape, const int64_t *sa, const int64_t *sb,
                       tgcu_index *ix) {
    int m = 0;
    for (int i = 0; i < nd; i++) {
        if (shape[i] == 1) continue;
        if (m > 0 && ix->sa[m - 1] == sa[i] * shape[i] && ix->sb[m - 1] == sb[i] * shape[i]) {
            ix->shape[m - 1] *= shape[i]; /* dimension i continues dimension m-1 */
            ix->sa[m - 1] = sa[i];
            ix->sb[m - 1] = sb[i];
        } else {
            ix->shape[m] = shape[i];
            ix->sa[m] = sa[i];
            ix->sb[m] = sb[i];
            m++;
        }
    }
    if (m == 0) { /* a single element */
        ix->shape[0] = 1;
        ix->sa[0] = ix->sb[0] = 0;
        m = 1;
    }
    ix->nd = m;
}

/* x viewed as [outer, n, inner] around `axis`. */
static void split3(const tg_tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= x->shape[i];
    for (int i = axis + 1; i < x->ndim; i++) *inner *= x->shape[i];
    *n = x->shape[axis];
}

/* ---- elementwise ---- */

/* The binary elementwise ops and the backward ops of (x, dy): the kernel takes the op. */
static tg_status binary(tg_backend *b, tg_tensor *t) {
    int64_t sa[TG_MAX_DIMS], sb[TG_MAX_DIMS];
    tgcu_index ix;
    tg__geom_bcast_strides(t->src[0], t, sa);
    tg__geom_bcast_strides(t->src[1], t, sb);
    make_index(t->ndim, t->shape, sa, sb, &ix);
    return tgcu_status(tgcu_binary(STREAM(b), t->op, F32(t), F32(t->src[0]), F32(t->src[1]), &ix,
                                   tg_tensor_numel(t)),
                       tg_op_name(t->op));
}

/* The unary elementwise ops: the kernel takes the op (and scale's multiplier and addend). */
static tg_status unary(tg_backend *b, tg_tensor *t) {
    bool sc = t->op == TG_OP_SCALE;
    return tgcu_status(tgcu_unary(STREAM(b), t->op, F32(t), F32(t->src[0]), tg_tensor_numel(t),
                                  sc ? t->p.scale.mul : 0.0f, sc ? t->p.scale.add : 0.0f),
                       tg_op_name(t->op));
}

static tg_status masked_fill(tg_backend *b, tg_tensor *t) {
    const tg_tensor *m = t->src[1];
    int64_t sx[TG_MAX_DIMS], sm[TG_MAX_DIMS];
    tgcu_index ix;
    tg__tensor_contiguous_strides(t->ndim, t->shape, sx);
    tg__geom_bcast_strides(m, t, sm);
    make_index(t->ndim, t->shape, sx, sm, &ix);
    return tgcu_status(tgcu_masked_fill(STREAM(b), F32(t), F32(t->src[0]), m->data,
                                        m->dtype == TG_DTYPE_I32, &ix, tg_tensor_numel(t),
                                        t->p.masked_fill.value),
                       "masked_fill");
}

static tg_status dropout(tg_backend *b, tg_tensor *t) {
    float p = t->p.dropout.p, keep_scale = 1.0f / (1.0f - p);
    return tgcu_status(tgcu_dropout(STREAM(b), F32(t), F32(t->src[0]), tg_tensor_numel(t), p,
                                    keep_scale, t->p.dropout.stream, t->p.dropout.seed_lo,
                                    t->p.dropout.seed_hi),
                       "dropout");
}

/* ---- layout ---- */

static tg_status strided_copy(tg_backend *b, tg_tensor *t, const int64_t *src_strides) {
    int64_t zero[TG_MAX_DIMS] = {0};
    tgcu_index ix;
    make_index(t->ndim, t->shape, src_strides, zero, &ix);
    return tgcu_status(tgcu_strided_copy(STREAM(b), t->data, t->src[0]->data, &ix,
                                         tg_tensor_numel(t)),
                       tg_op_name(t->op));
}

/* Concat and pad: the output as [outer, len_axis * inner]; input k fills a column range of
 * every row, a 2-D copy (pad zero-fills first). */
static tg_status concat_pad(tg_backend *b, tg_tensor *t) {
    cudaStream_t s = STREAM(b);
    int a = t->op == TG_OP_PAD ? t->p.pad.axis : t->p.concat.axis;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < a; i++) outer *= t->shape[i];
    for (int i = a + 1; i < t->ndim; i++) inner *= t->shape[i];
    int64_t orow = t->shape[a] * inner;
    char *o = t->data;
    tg_status st = TG_OK;
    if (t->op == TG_OP_PAD && tg_tensor_numel(t) > 0)
        st = tgcu_status(cudaMemsetAsync(o, 0, (size_t)(outer * orow) * 4, s), "pad");
    int64_t col = t->op == TG_OP_PAD ? t->p.pad.before * inner : 0;
    for (int k = 0; k < t->nsrc && st == TG_OK; k++) {
        const tg_tensor *src = t->src[k];
        int64_t srow = src->shape[a] * inner;
        const char *sp = src->data;
        if (outer > 0 && srow > 0) {
            cudaError_t e;
            if (outer == 1) {
                e = cudaMemcpyAsync(o + col * 4, sp, (size_t)srow * 4, cudaMemcpyDeviceToDevice, s);
            } else if (orow * 4 <= INT_MAX) {
                e = cudaMemcpy2DAsync(o + col * 4, (size_t)orow * 4, sp, (size_t)srow * 4,
                                      (size_t)srow * 4, (size_t)outer, cudaMemcpyDeviceToDevice, s);
            } else { /* rows too long for a 2-D copy's pitch: one copy per row */
                e = cudaSuccess;
                for (int64_t r = 0; r < outer && e == cudaSuccess; r++)
                    e = cudaMemcpyAsync(o + (r * orow + col) * 4, sp + r * srow * 4, (size_t)srow * 4,
                                        cudaMemcpyDeviceToDevice, s);
            }
            st = tgcu_status(e, tg_op_name(t->op));
        }
        col += srow;
    }
    return st;
}

/* ---- reductions ---- */

static tg_status sum_axis(tg_backend *b, const float *x, float *o, int64_t outer, int64_t n,
                          int64_t inner, const char *what) {
    int64_t np = tgcu_sum_axis_scratch(outer, n, inner);
    size_t bytes = (size_t)np * sizeof(float);
    float *part = NULL;
    if (np > 0 && !(part = tgcu_alloc(b, bytes))) return tg_error_prefix(TG_ERR_NOMEM, "%s", what);
    tg_status st = tgcu_status(tgcu_sum_axis(STREAM(b), x, o, outer, n, inner, part), what);
    if (part) tgcu_free(b, part, bytes); /* reused only by later work on the same stream */
    return st;
}

/* sum_to: the two cases of core/backend-helpers.h (tg__geom_sumto_plan), as on the CPU: a leading
 * block of summed dims with the rest kept is one column sum; anything else sums each output's
 * reduced index space. */
static tg_status sum_to(tg_backend *b, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    tg_sumto_plan p;
    tg__geom_sumto_plan(t, x, &p);
    if (p.lead_block) return sum_axis(b, x->data, t->data, 1, p.R, p.C, "sum_to");
    tgcu_sumto d;
    memset(&d, 0, sizeof d);
    d.nd = p.nd;
    for (int i = 0; i < p.nd; i++) {
        d.shape[i] = x->shape[i];
        d.stride[i] = p.xstride[i];
        d.red[i] = p.red[i];
    }
    return tgcu_status(tgcu_sum_to(STREAM(b), x->data, t->data, &d, p.nout, p.nred), "sum_to");
}

static tg_status sum(tg_backend *b, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    int64_t outer, n, inner;
    split3(x, t->p.reduce.axis, &outer, &n, &inner);
    return sum_axis(b, x->data, t->data, outer, n, inner, "sum");
}

static tg_status max(tg_backend *b, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    int64_t outer, n, inner;
    split3(x, t->p.reduce.axis, &outer, &n, &inner);
    return tgcu_status(tgcu_max_axis(STREAM(b), x->data, t->data, outer, n, inner), "max");
}

/* srcs x, y = max (keepdim), dy (keepdim) */
static tg_status max_back(tg_backend *b, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    int64_t outer, n, inner;
    split3(x, t->p.reduce.axis, &outer, &n, &inner);
    return tgcu_status(tgcu_max_back(STREAM(b), x->data, t->src[1]->data, t->src[2]->data, t->data,
                                     outer, n, inner),
                       "max_back");
}

/* ---- banded attention (core/ops/band.c) ---- */

/* Q [.., n, dk], K [.., m, dk] -> S [.., n, 2r+1] */
static tg_status band_scores(tg_backend *b, tg_tensor *t) {
    const tg_tensor *a = t->src[0], *x = t->src[1];
    int nd = t->ndim;
    int64_t r = t->p.band.r, w = 2 * r + 1;
    return tgcu_status(tgcu_band_scores(STREAM(b), F32(a), F32(x), F32(t), tg_tensor_numel(t) / w,
                                        a->shape[nd - 2], x->shape[nd - 2], a->shape[nd - 1], r,
                                        t->p.band.fill),
                       "band_scores");
}

/* P [.., n, 2r+1], V [.., m, dv] -> O [.., n, dv] */
static tg_status band_mix(tg_backend *b, tg_tensor *t) {
    const tg_tensor *a = t->src[0], *x = t->src[1];
    int nd = t->ndim;
    int64_t r = t->p.band.r, w = 2 * r + 1;
    return tgcu_status(tgcu_band_mix(STREAM(b), F32(a), F32(x), F32(t), tg_tensor_numel(a) / w,
                                     a->shape[nd - 2], x->shape[nd - 2], x->shape[nd - 1], r),
                       "band_mix");
}

/* A [.., n, 2r+1], X [.., n, d] -> Y [.., m, d] */
static tg_status band_mix_t(tg_backend *b, tg_tensor *t) {
    const tg_tensor *a = t->src[0], *x = t->src[1];
    int nd = t->ndim;
    int64_t r = t->p.band.r, d = x->shape[nd - 1];
    return tgcu_status(tgcu_band_mix_t(STREAM(b), F32(a), F32(x), F32(t), d ? tg_tensor_numel(t) / d : 0,
                                       a->shape[nd - 2], t->shape[nd - 2], d, r),
                       "band_mix_t");
}

/* ---- rows ---- */

/* x viewed as rows of its last axis: *d per row */
static int64_t row_count(const tg_tensor *t, int64_t *d) {
    *d = t->ndim ? t->shape[t->ndim - 1] : 1;
    return *d ? tg_tensor_numel(t) / *d : 0;
}

static tg_status softmax(tg_backend *b, tg_tensor *t) {
    int64_t d, nr = row_count(t, &d);
    return tgcu_status(tgcu_softmax(STREAM(b), F32(t->src[0]), F32(t), nr, d,
                                    t->op == TG_OP_LOG_SOFTMAX),
                       tg_op_name(t->op));
}

/* softmax_back, log_softmax_back: srcs y (the forward output), dy */
static tg_status softmax_back(tg_backend *b, tg_tensor *t) {
    int64_t d, nr = row_count(t, &d);
    return tgcu_status(tgcu_softmax_back(STREAM(b), F32(t->src[0]), F32(t->src[1]), F32(t), nr, d,
                                         t->op == TG_OP_LOG_SOFTMAX_BACK),
                       tg_op_name(t->op));
}

/* srcs: x, gamma (or NULL), beta (or NULL) */
static tg_status layer_norm(tg_backend *b, tg_tensor *t) {
    int64_t d, nr = row_count(t, &d);
    return tgcu_status(tgcu_layer_norm(STREAM(b), F32(t->src[0]), t->src[1] ? F32(t->src[1]) : NULL,
                                       t->src[2] ? F32(t->src[2]) : NULL, F32(t), nr, d,
                                       t->p.layer_norm.eps),
                       "layer_norm");
}

/* srcs: x, gamma (or NULL), dy */
static tg_status layer_norm_back(tg_backend *b, tg_tensor *t) {
    int64_t d, nr = row_count(t, &d);
    return tgcu_status(tgcu_layer_norm_back(STREAM(b), F32(t->src[0]),
                                            t->src[1] ? F32(t->src[1]) : NULL, F32(t->src[2]),
                                            F32(t), nr, d, t->p.layer_norm.eps),
                       "layer_norm_back");
}

/* srcs: x, dy; t [d] = the column sums of dy * xhat — made as the unfused graph makes them
 * (core/ops/rows.c: g_layer_norm): xhat by the layer norm kernel into a scratch, the products
 * in place there, then the column sums; the CPU backend does it in one pass (k_rows.c). */
static tg_status layer_norm_gamma_back(tg_backend *b, tg_tensor *t) {
    const tg_tensor *x = t->src[0];
    int64_t d = t->shape[0], n = tg_tensor_numel(x), nr = d ? n / d : 0;
    size_t bytes = (size_t)n * sizeof(float);
    float *xh = NULL;
    if (n > 0 && !(xh = tgcu_alloc(b, bytes)))
        return tg_error_prefix(TG_ERR_NOMEM, "layer_norm_gamma_back");
    tgcu_index ix;
    int64_t st1[1] = {1}, shape[1] = {n};
    make_index(1, shape, st1, st1, &ix);
    tg_status st =
        tgcu_status(tgcu_layer_norm(STREAM(b), F32(x), NULL, NULL, xh, nr, d, t->p.layer_norm.eps),
                    "layer_norm_gamma_back");
    if (!st && n > 0)
        st = tgcu_status(tgcu_binary(STREAM(b), TG_OP_MUL, xh, F32(t->src[1]), xh, &ix, n),
                         "layer_norm_gamma_back");
    if (!st) st = sum_axis(b, xh, F32(t), 1, nr, d, "layer_norm_gamma_back");
    if (xh) tgcu_free(b, xh, bytes); /* reused only by later work on the same stream */
    return st;
}

/* ---- matmul (cuBLAS) ---- */

/* Row-major C = op(A) op(B) through column-major cuBLAS: a row-major matrix is the column-major
 * matrix of its transpose, so C^T = op(B)^T op(A)^T is one column-major GEMM with the operands
 * swapped (m = N, n = M) and the same transpose flags. The operands' description and the batch
 * dims that collapse into one strided batched call are core's (tg__geom_mm_plan), as on the CPU. */
static tg_status matmul(tg_backend *bk, tg_tensor *t) {
    tgcu_impl *c = bk->impl;
    const tg_tensor *a = t->src[0], *b = t->src[1];
    tg_mm_plan p;
    tg__geom_mm_plan(t, &p);
    int64_t M = p.M, N = p.N, K = p.K;
    int64_t nout = tg_tensor_numel(t);
    if (nout == 0) return TG_OK;
    if (K == 0) /* an empty sum: zeros */
        return tgcu_status(cudaMemsetAsync(t->data, 0, (size_t)nout * 4, c->stream), "matmul");
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || p.a.ld > INT_MAX || p.b.ld > INT_MAX ||
        p.inner > INT_MAX)
        return tg_error_set(TG_ERR_UNSUPPORTED,
                            "cuda backend: matmul sizes M=%lld N=%lld K=%lld (batch %lld) exceed "
                            "cuBLAS's 32-bit limits",
                            (long long)M, (long long)N, (long long)K, (long long)p.inner);
    const float *A = a->data, *B = b->data;
    float *C = t->data;
    const float one = 1.0f, zero = 0.0f;
    cublasOperation_t opa = p.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = p.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    for (int64_t o = 0; o < p.outer; o++) {
        int64_t offa, offb, offc;
        tg__geom_mm_offsets(&p, t, o, &offa, &offb, &offc);
        cublasStatus_t s = tgcu_blas.sgemm_strided_batched(
            c->blas, opb, opa, (int)N, (int)M, (int)K, &one, B + offb, (int)p.b.ld, (long long)p.sb,
            A + offa, (int)p.a.ld, (long long)p.sa, &zero, C + offc, (int)N, (long long)p.sc,
            (int)p.inner);
        if (s != CUBLAS_STATUS_SUCCESS) return tgcu_blas_status(s, "matmul");
    }
    return tgcu_status(cudaGetLastError(), "matmul");
}

/* ---- embedding, cross-entropy, gradient accumulation ---- */

/* Validate ids (or targets) in [0, V), those equal to `ignore` excepted when use_ignore; count
 * the others into *count. When the ids are an input leaf (or a contiguous view of one), the
 * graph's host copy is checked and the device is not waited for; otherwise a kernel checks
 * them and the host reads two numbers back. */
static tg_status check_ids(tg_backend *b, const tg_tensor *ids, int64_t V, bool use_ignore,
                           int32_t ignore, int64_t *count, const char *fn, const char *noun) {
    tgcu_impl *c = b->impl;
    int64_t n = tg_tensor_numel(ids), bad = -1, cnt = 0;
    int32_t bad_id = 0;
    const tg_tensor *root = ids->base ? ids->base : ids;
    if ((root->flags & TG_TF_INPUT) && root->host) {
        const int32_t *h = (const int32_t *)root->host + (ids->base ? ids->offset : 0);
        for (int64_t i = 0; i < n && bad < 0; i++) {
            if (use_ignore && h[i] == ignore) continue;
            if (h[i] < 0 || h[i] >= V) {
                bad = i;
                bad_id = h[i];
            } else {
                cnt++;
            }
        }
    } else {
        tg_status st = tgcu_status(tgcu_check_ids(c->stream, ids->data, n, V, use_ignore, ignore,
                                                  c->dev_check),
                                   fn);
        if (!st) st = tgcu_read_back(b, c->host_pinned, c->dev_check, 2 * sizeof(int64_t));
        if (st) return st;
        cnt = c->host_pinned[1];
        if (c->host_pinned[0] < n) {
            bad = c->host_pinned[0];
            st = tgcu_read_back(b, &bad_id, (const int32_t *)ids->data + bad, sizeof bad_id);
            if (st) return st;
        }
    }
    if (bad >= 0)
        return tg_error_set(TG_ERR_INVALID, "%s: %s %d at %s %lld outside [0, %lld)", fn, noun,
                            (int)bad_id, use_ignore ? "row" : "position", (long long)bad,
                            (long long)V);
    if (count) *count = cnt;
    return TG_OK;
}

static tg_status embedding(tg_backend *b, tg_tensor *t) {
    const tg_tensor *tab = t->src[0], *ids = t->src[1];
    int64_t V = tab->shape[0], d = tab->shape[1], n = tg_tensor_numel(ids);
    tg_status st = check_ids(b, ids, V, false, 0, NULL, "tg_embedding", "id");
    if (st) return st;
    return tgcu_status(tgcu_embedding(STREAM(b), tab->data, ids->data, t->data, n, V, d),
                       "embedding");
}

static tg_status embedding_back(tg_backend *b, tg_tensor *t) {
    const tg_tensor *ids = t->src[0], *dy = t->src[1];
    int64_t V = t->shape[0], d = t->shape[1], n = tg_tensor_numel(ids);
    tg_status st = check_ids(b, ids, V, false, 0, NULL, "tg_embedding backward", "id");
    if (st) return st;
    if (n > INT_MAX || V > INT_MAX)
        return tg_error_set(TG_ERR_UNSUPPORTED,
                            "cuda backend: embedding backward of %lld ids (vocabulary %lld) exceeds "
                            "the sort's 32-bit limit",
                            (long long)n, (long long)V);
    size_t bytes = tgcu_embedding_back_scratch(n, V);
    void *scratch = NULL;
    if (bytes && !(scratch = tgcu_alloc(b, bytes)))
        return tg_error_prefix(TG_ERR_NOMEM, "embedding backward");
    st = tgcu_status(tgcu_embedding_back(STREAM(b), ids->data, dy->data, t->data, n, V, d, scratch,
                                         bytes),
                     "embedding backward");
    if (scratch) tgcu_free(b, scratch, bytes);
    return st;
}

/* cross_entropy and cross_entropy_back (srcs logits, targets, and dy for the backward) */
static tg_status cross_entropy(tg_backend *b, tg_tensor *t) {
    cudaStream_t s = STREAM(b);
    const tg_tensor *lg = t->src[0], *tg = t->src[1];
    int64_t N = lg->shape[0], V = lg->shape[1], count = 0;
    float eps = t->p.cross_entropy.smoothing;
    int32_t ignore = t->p.cross_entropy.ignore_index;
    tg_reduction red = t->p.cross_entropy.reduction;
    const int cols = t->p.cross_entropy.with_nll ? 2 : 1; /* the NLL beside the loss */
    tg_status st = check_ids(b, tg, V, true, ignore, &count, "tg_cross_entropy", "target");
    if (st) return st;
    if (t->op == TG_OP_CROSS_ENTROPY_BACK)
        return tgcu_status(tgcu_cross_entropy_back(s, lg->data, tg->data, F32(t->src[2]), F32(t), N,
                                                   V, eps, ignore, (int)red, count, cols),
                           "cross_entropy_back");
    if (red == TG_REDUCE_NONE)
        return tgcu_status(
            tgcu_cross_entropy(s, lg->data, tg->data, F32(t), N, V, eps, ignore, cols),
            "cross_entropy");
    /* row losses first, then one sum in double: the total does not depend on the launch */
    size_t bytes = (size_t)(N ? N * cols : 1) * sizeof(float);
    float *rowloss = tgcu_alloc(b, bytes);
    if (!rowloss) return tg_error_prefix(TG_ERR_NOMEM, "cross_entropy");
    st = tgcu_status(tgcu_cross_entropy(s, lg->data, tg->data, rowloss, N, V, eps, ignore, cols),
                     "cross_entropy");
    if (!st)
        st = tgcu_status(
            tgcu_sum_rows_to_scalar(s, rowloss, N, cols, F32(t), red == TG_REDUCE_MEAN, count),
            "cross_entropy");
    tgcu_free(b, rowloss, bytes);
    return st;
}

/* ---- small kernels ---- */

static tg_status view(tg_backend *b, tg_tensor *t) { /* views: nothing to run */
    (void)b;
    (void)t;
    return TG_OK;
}
static tg_status fill(tg_backend *b, tg_tensor *t) {
    return tgcu_status(tgcu_fill(STREAM(b), F32(t), tg_tensor_numel(t), t->p.fill.value), "fill");
}
static tg_status cont(tg_backend *b, tg_tensor *t) { return strided_copy(b, t, t->src[0]->stride); }
static tg_status expand(tg_backend *b, tg_tensor *t) {
    int64_t st[TG_MAX_DIMS];
    tg__geom_bcast_strides(t->src[0], t, st);
    return strided_copy(b, t, st);
}
/* the store's gradient buffer += g */
static tg_status grad_acc(tg_backend *b, tg_tensor *t) {
    return tgcu_status(tgcu_accumulate(STREAM(b), F32(t), F32(t->src[0]), tg_tensor_numel(t)),
                       "grad_acc");
}

/* ---- the registration table ---- */

/* Every op's CUDA kernel by op; NULL where there is none. supports_op answers from this table,
 * so an op without an entry is refused before a graph runs (tg_graph_run names it). */
typedef tg_status (*tgcu_kernel)(tg_backend *b, tg_tensor *t);
static const tgcu_kernel kernels[TG_OP_COUNT] = {
    [TG_OP_FILL] = fill,
    [TG_OP_RESHAPE] = view,
    [TG_OP_PERMUTE] = view,
    [TG_OP_SLICE] = view,
    [TG_OP_CONT] = cont,
    [TG_OP_CONCAT] = concat_pad,
    [TG_OP_PAD] = concat_pad,
    [TG_OP_EXPAND] = expand,
    [TG_OP_ADD] = binary,
    [TG_OP_SUB] = binary,
    [TG_OP_MUL] = binary,
    [TG_OP_DIV] = binary,
    [TG_OP_SCALE] = unary,
    [TG_OP_EXP] = unary,
    [TG_OP_LOG] = unary,
    [TG_OP_SQRT] = unary,
    [TG_OP_RSQRT] = unary,
    [TG_OP_TANH] = unary,
    [TG_OP_RELU] = unary,
    [TG_OP_GELU] = unary,
    [TG_OP_RELU_BACK] = binary,
    [TG_OP_GELU_BACK] = binary,
    [TG_OP_MASKED_FILL] = masked_fill,
    [TG_OP_DROPOUT] = dropout,
    [TG_OP_SUM] = sum,
    [TG_OP_MAX] = max,
    [TG_OP_MAX_BACK] = max_back,
    [TG_OP_SUM_TO] = sum_to,
    [TG_OP_SOFTMAX] = softmax,
    [TG_OP_LOG_SOFTMAX] = softmax,
    [TG_OP_SOFTMAX_BACK] = softmax_back,
    [TG_OP_LOG_SOFTMAX_BACK] = softmax_back,
    [TG_OP_LAYER_NORM] = layer_norm,
    [TG_OP_LAYER_NORM_BACK] = layer_norm_back,
    [TG_OP_LAYER_NORM_GAMMA_BACK] = layer_norm_gamma_back,
    [TG_OP_MATMUL] = matmul,
    [TG_OP_EMBEDDING] = embedding,
    [TG_OP_EMBEDDING_BACK] = embedding_back,
    [TG_OP_CROSS_ENTROPY] = cross_entropy,
    [TG_OP_CROSS_ENTROPY_BACK] = cross_entropy,
    [TG_OP_BAND_SCORES] = band_scores,
    [TG_OP_BAND_MIX] = band_mix,
    [TG_OP_BAND_MIX_T] = band_mix_t,
    [TG_OP_GRAD_ACC] = grad_acc,
    [TG_OP_SILU] = unary,
    [TG_OP_SILU_BACK] = binary, /* srcs x, dy */
    [TG_OP_GELU_ERF] = unary,
    [TG_OP_GELU_ERF_BACK] = binary, /* srcs x, dy */
};
_Static_assert(sizeof kernels / sizeof kernels[0] == TG_OP_COUNT, "one CUDA kernel slot per op");

bool tgcu_supports_op(tg_op op) { return op > TG_OP_NONE && op < TG_OP_COUNT && kernels[op]; }

tg_status tgcu_run_node(tg_backend *b, tg_tensor *t) {
    if (!tgcu_supports_op(t->op)) /* the executor asks supports_op first: not reached from it */
        return tg_error_set(TG_ERR_UNSUPPORTED, "tg_graph_run: backend cuda has no kernel for op %s",
                            tg_op_name(t->op));
    return kernels[t->op](b, t);
}
