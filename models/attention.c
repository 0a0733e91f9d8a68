/* The attention variants of docs/model.md §2, one interface: attend(X_q [B,n,d], X_kv [B,m,d], mask).
 * Masks broadcast to [B,1,n,m] with 1 = masked; a masked logit is -inf before the softmax and
 * a fully masked row gives zeros (the softmax kernel guarantees it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/model-impl.h"
/* TEMPORARY (issue 55): the headers of core's structs, which this file still reads; branch
 * h55models' rewrite drops them (tests/test_layers.py, TEMPORARY). */
#include "core/graph-impl.h"

static tg_tensor *param(tg_model *m, tg_graph *g, const char *prefix, const char *suffix) {
    char name[192];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    return tg_param(g, m->store, name);
}

static tg_tensor *proj(tg_model *m, tg_graph *g, const char *prefix, const char *which, tg_tensor *x) {
    char p[192];
    snprintf(p, sizeof p, "%s.%s", prefix, which);
    return tg__layer_linear(m, g, p, x, true);
}

/* [B, n, h*w] -> [B, h, n, w]; head i owns columns [i*w, (i+1)*w) (docs/model.md §4). A view,
 * not a copy: the GEMM reads each head's [n, w] block in place (row stride h*w) and walks the
 * two batch axes by their own strides; ops that need contiguous input copy it themselves. */
static tg_tensor *split_heads(tg_tensor *x, int64_t h, int64_t w) {
    if (!x) return NULL;
    int64_t s[4] = {tg_tensor_dim(x, 0), tg_tensor_dim(x, 1), h, w};
    static const int perm[4] = {0, 2, 1, 3};
    return tg_permute(tg_reshape(x, 4, s), perm);
}

tg_tensor *tg__attn_split_heads(tg_tensor *x, int64_t h, int64_t w) {
    return split_heads(x, h, w);
}

/* [B, h, n, w] -> [B, n, h*w] */
static tg_tensor *merge_heads(tg_tensor *x) {
    if (!x) return NULL;
    static const int perm[4] = {0, 2, 1, 3};
    int64_t s[3] = {tg_tensor_dim(x, 0), tg_tensor_dim(x, 2), tg_tensor_dim(x, 1) * tg_tensor_dim(x, 3)};
    return tg_reshape(tg_permute(x, perm), 3, s);
}

void tg__attn_kv(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *xkv, tg_tensor **k,
                 tg_tensor **v) {
    int64_t h = m->cfg.heads, dk = tg_model_head_dim(&m->cfg);
    *k = split_heads(proj(m, g, prefix, "k_proj", xkv), h, dk);
    *v = split_heads(proj(m, g, prefix, "v_proj", xkv), h, dk);
}

/* softmax(S + mask) with attention dropout */
static tg_tensor *probs(tg_model *m, tg_tensor *s, tg_tensor *mask) {
    if (mask) s = tg_masked_fill(s, mask, -INFINITY);
    return tg_dropout(tg_softmax(s), m->cfg.attn_dropout);
}

/* Talking-heads (Shazeer et al. 2020): logits mixed across heads by P_l before the softmax
 * (mask added after mixing), probabilities mixed by P_w after it (not renormalised).
 * Mixing L_j = sum_i J_i P[i, j] is one GEMM P^T [h,h] x J [B, h, n*m]. */
static tg_tensor *mix_heads(tg_tensor *p, tg_tensor *x) {
    if (!x) return NULL;
    int64_t s4[TG_MAX_DIMS], s3[3];
    tg_tensor_shape(x, s4);
    s3[0] = s4[0];
    s3[1] = s4[1];
    s3[2] = s4[2] * s4[3];
    return tg_reshape(tg_matmul(p, tg_reshape(x, 3, s3), true, false), 4, s4);
}

/* Rotary position embedding (Su et al. 2021) in the rotate-half pairing of GPT-NeoX and LLaMA:
 * channel c < w/2 of a head pairs with c + w/2 and, at position p, turns by p θ_c with
 * θ_c = 10000^(-2c/w):
 *   y_c = x_c cos(p θ_c) - x_{c+w/2} sin(p θ_c),  y_{c+w/2} = x_{c+w/2} cos(p θ_c) + x_c sin(p θ_c),
 * i.e. y = x ⊙ cos + [-x2, x1] ⊙ sin. Then q_i·k_j depends on positions only through i - j.
 * x [..., n, (heads,) w] with positions p0..p0+n-1 on the axis `tables` broadcast against:
 * tables [n, w] (keys [B,h,n,w]) or [n, 1, w] (queries [B,n,h,w]). */
static tg_tensor *rope(tg_graph *g, tg_tensor *x, int64_t p0, int64_t n, int64_t w, bool per_head_axis) {
    if (!x) return NULL;
    float *cs = malloc((size_t)(2 * n * w) * sizeof *cs);
    if (!cs) return NULL;
    for (int64_t p = 0; p < n; p++)
        for (int64_t c = 0; c < w; c++) {
            double th = (double)(p0 + p) * pow(10000.0, -2.0 * (double)(c % (w / 2)) / (double)w);
            cs[p * w + c] = (float)cos(th);
            cs[n * w + p * w + c] = (float)sin(th);
        }
    int64_t s[3] = {n, 1, w}, s2[2] = {n, w};
    tg_tensor *cosv = tg_input(g, TG_DTYPE_F32, per_head_axis ? 3 : 2, per_head_axis ? s : s2, cs);
    tg_tensor *sinv = tg_input(g, TG_DTYPE_F32, per_head_axis ? 3 : 2, per_head_axis ? s : s2, cs + n * w);
    free(cs);
    tg_tensor *half[2] = {tg_neg(tg_slice(x, -1, w / 2, w)), tg_slice(x, -1, 0, w / 2)};
    return tg_add(tg_mul(x, cosv), tg_mul(tg_concat(half, 2, -1), sinv));
}

/* Restricted self-attention (Vaswani et al. 2017, Table 1, neighbourhood r): [1, 1, n, mk],
 * 1 = masked where |i' - j| > r, the n queries at positions i' = mk - n + i (the last n of the
 * keys, as a cached step). Combined with the caller's mask by addition (any value != 0 masks).
 * It restricts what a query sees; the scores are still computed for every pair, so the cost
 * stays that of full attention, O(n·m·d): the path of cached decoding and of the kinds or
 * masks banded_core does not take (use_band); the others cost O(r·n·d). */
static tg_tensor *window_mask(tg_graph *g, int64_t n, int64_t mk, int64_t r) {
    float *w = malloc((size_t)(n * mk) * sizeof *w);
    if (!w) return NULL;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < mk; j++) {
            int64_t d = mk - n + i - j;
            w[i * mk + j] = (d > r || d < -r) ? 1.0f : 0.0f;
        }
    int64_t s[4] = {1, 1, n, mk};
    tg_tensor *t = tg_input(g, TG_DTYPE_F32, 4, s, w);
    free(w);
    return t;
}

/* The banded form of a self-attention mask, [mb, 1, n, 2r+1] with 1 = masked: column j of row i
 * is key i + j - r, masked where that key does not exist (beyond either end of the sequence)
 * or where the caller's mask (broadcastable to [B, 1, n, n], 1 = masked) masks it. Built on the
 * host from the mask's input data (O(n·r)); false when the mask is not such an input (computed
 * in the graph, or of another shape): the caller then takes the dense path. */
static bool band_mask(tg_graph *g, tg_tensor *mask, int64_t n, int64_t r, tg_tensor **out) {
    int64_t mb = 1, mn = 1, mm = 1, w = 2 * r + 1;
    if (mask) {
        if (mask->op != TG_OP_NONE || !(mask->flags & TG_TF_INPUT) || !mask->host ||
            mask->ndim != 4 || !tg__tensor_is_contiguous(mask) ||
            (mask->dtype != TG_DTYPE_F32 && mask->dtype != TG_DTYPE_I32))
            return false;
        mb = mask->shape[0];
        mn = mask->shape[2];
        mm = mask->shape[3];
        if ((mn != 1 && mn != n) || (mm != 1 && mm != n)) return false;
    }
    float *bm = malloc((size_t)(mb * n * w) * sizeof *bm);
    if (!bm) {
        tg__graph_fail(g, TG_ERR_NOMEM, "attention: out of memory for a banded mask");
        return true; /* *out is NULL: the graph is marked */
    }
    for (int64_t b = 0; b < mb; b++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < w; j++) {
                int64_t t = i + j - r;
                bool off = t < 0 || t >= n;
                if (!off && mask) {
                    int64_t e = (b * mn + (mn == 1 ? 0 : i)) * mm + (mm == 1 ? 0 : t);
                    off = mask->dtype == TG_DTYPE_F32 ? ((const float *)mask->host)[e] != 0.0f
                                                      : ((const int32_t *)mask->host)[e] != 0;
                }
                bm[(b * n + i) * w + j] = off ? 1.0f : 0.0f;
            }
    int64_t s[4] = {mb, 1, n, w};
    *out = tg_input(g, TG_DTYPE_F32, 4, s, bm);
    free(bm);
    return true;
}

/* Restricted self-attention in O(r·n·d) (Vaswani et al. 2017, Table 1): scores only for the 2r+1
 * keys around each query (tg_band_scores, [B, h, n, 2r+1]), the banded mask, the softmax over
 * that last axis, and tg_band_mix. Equal to the dense path with window_mask up to rounding:
 * the same scores, and the keys outside the band get probability 0 in both. The scores are
 * built with fill 0 and every key that does not exist is masked by bm, so talking-heads can
 * mix the raw scores across heads first (a -inf fill would turn into NaN there). NULL after
 * marking the graph. */
static tg_tensor *banded_core(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *q, tg_tensor *k,
                              tg_tensor *v, tg_tensor *bm, float scale) {
    const tg_model_config *c = &m->cfg;
    int64_t h = c->heads, dk = tg_model_head_dim(c), r = c->window;
    int64_t B = tg_tensor_dim(q, 0), n = tg_tensor_dim(q, 1), mk = tg_tensor_dim(k, 2);
    tg_tensor *o = NULL;
    switch (c->attention) {
    case TG_ATTN_MHA:
    case TG_ATTN_FIXED_HEAD: {
        tg_tensor *s = tg_scale(tg_band_scores(split_heads(q, h, dk), k, r, 0.0f), scale);
        o = tg_band_mix(probs(m, s, bm), v, r);
        break;
    }
    case TG_ATTN_TALKING_HEADS: {
        tg_tensor *j = tg_scale(tg_band_scores(split_heads(q, h, dk), k, r, 0.0f), scale);
        tg_tensor *l = tg_masked_fill(mix_heads(param(m, g, prefix, "pre_softmax_proj"), j), bm, -INFINITY);
        tg_tensor *u = mix_heads(param(m, g, prefix, "post_softmax_proj"), tg_softmax(l));
        o = tg_band_mix(tg_dropout(u, c->attn_dropout), v, r);
        break;
    }
    case TG_ATTN_INTERACTING: {
        tg_tensor *s;
        if (c->interacting_literal) {
            /* all h^2 banded products Q_i K_j^T, summed over query heads i */
            int64_t q5[5] = {B, h, 1, n, dk}, k5[5] = {B, 1, h, mk, dk};
            int64_t qe[5] = {B, h, h, n, dk}, ke[5] = {B, h, h, mk, dk};
            tg_tensor *qq = tg_expand(tg_reshape(split_heads(q, h, dk), 5, q5), 5, qe);
            tg_tensor *kk = tg_expand(tg_reshape(k, 5, k5), 5, ke);
            s = tg_sum(tg_band_scores(qq, kk, r, 0.0f), 1, false);
        } else {
            int64_t q4[4] = {B, n, h, dk}, qs[4] = {B, 1, n, dk}, qe[4] = {B, h, n, dk};
            tg_tensor *qsum = tg_sum(tg_reshape(q, 4, q4), 2, false);
            s = tg_band_scores(tg_expand(tg_reshape(qsum, 4, qs), 4, qe), k, r, 0.0f);
        }
        o = tg_band_mix(probs(m, tg_scale(s, scale), bm), v, r);
        break;
    }
    default: /* the caller only comes here for the kinds above */
        return tg__graph_fail(g, TG_ERR_INVALID, "attention: no banded form for kind %d",
                              (int)c->attention);
    }
    if (c->no_out_proj) return merge_heads(o);
    return proj(m, g, prefix, "out_proj", merge_heads(o));
}

/* The banded path applies to self-attention over the whole sequence (n queries = n keys; a
 * cached decoding step attends one query over m keys, already O(m)), for the kinds whose scores
 * stay per head (not interacting_pairwise's h^2 pairs), without a weight capture (the maps are
 * [n, m]), and where the band is narrower than the sequence (2r+1 < n; otherwise the dense
 * scores are no larger). */
static bool use_band(const tg_model *m, bool self, int64_t n, int64_t mk) {
    const tg_model_config *c = &m->cfg;
    return c->window > 0 && self && n == mk && !m->dense_window && !m->capture &&
           c->attention != TG_ATTN_INTERACTING_PAIRWISE && 2 * c->window + 1 < n;
}

/* The keys and values an attention core reads: one part [.., m, w], or two — a decoding step's
 * cached positions, then its new one — met in that order without concatenating the keys: each
 * part's scores, [.., n, m1] and [.., n, m2], are concatenated, and the weights' two column
 * ranges multiply each part's values, which are added. */
typedef struct {
    tg_tensor *k, *v, *k2, *v2;
} kv_parts;

static int64_t kv_len(const kv_parts *a) {
    return tg_tensor_dim(a->k, -2) + (a->k2 ? tg_tensor_dim(a->k2, -2) : 0);
}

/* q · [k; k2]ᵀ: [.., n, m1 + m2] */
static tg_tensor *kv_scores(tg_tensor *q, const kv_parts *a) {
    tg_tensor *s = tg_matmul(q, a->k, false, true);
    if (!a->k2) return s;
    tg_tensor *parts[2] = {s, tg_matmul(q, a->k2, false, true)};
    return tg_concat(parts, 2, -1);
}

/* p · [v; v2], p [.., n, m1 + m2] */
static tg_tensor *kv_mix(tg_tensor *p, const kv_parts *a) {
    if (!a->v2) return tg_matmul(p, a->v, false, false);
    int64_t m1 = tg_tensor_dim(a->v, -2), m = kv_len(a);
    return tg_add(tg_matmul(tg_slice(p, -1, 0, m1), a->v, false, false),
                  tg_matmul(tg_slice(p, -1, m1, m), a->v2, false, false));
}

/* [B, h, m, w] as [B, 1, h, m, w]: against queries [B, h, 1, n, w], the h^2 head pairs */
static tg_tensor *pairs_view(tg_tensor *x) {
    if (!x) return NULL;
    int64_t s5[5] = {tg_tensor_dim(x, 0), 1, tg_tensor_dim(x, 1), tg_tensor_dim(x, 2),
                     tg_tensor_dim(x, 3)};
    return tg_reshape(x, 5, s5);
}

static kv_parts kv_pairs(const kv_parts *a) {
    return (kv_parts){pairs_view(a->k), pairs_view(a->v), pairs_view(a->k2), pairs_view(a->v2)};
}

tg_tensor *tg__attn_core(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *xq, tg_tensor *k,
                         tg_tensor *v, tg_tensor *mask, bool self) {
    return tg__attn_core2(m, g, prefix, xq, k, v, NULL, NULL, mask, self);
}

tg_tensor *tg__attn_core2(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *xq, tg_tensor *k,
                          tg_tensor *v, tg_tensor *k2, tg_tensor *v2, tg_tensor *mask, bool self) {
    const tg_model_config *c = &m->cfg;
    int64_t h = c->heads, dk = tg_model_head_dim(c);
    /* interacting_sqrt_h: the summed query sum_i Q_i of h independent heads is ~sqrt(h) times a
     * head's query at initialisation; dividing by it too starts the logits at mha's scale */
    float scale = c->interacting_sqrt_h ? 1.0f / sqrtf((float)dk * (float)h) : 1.0f / sqrtf((float)dk);
    tg_tensor *q = proj(m, g, prefix, "q_proj", xq);
    if (!q || !k || !v || !k2 != !v2) return NULL;
    kv_parts kv = {k, v, k2, v2};
    int64_t B = tg_tensor_dim(q, 0), n = tg_tensor_dim(q, 1), mk = kv_len(&kv);
    if (c->rope && self) {
        /* keys at positions 0..mk-1; the n queries are the last n of them (n = 1 over a cache) */
        int64_t q4[4] = {B, n, h, dk}, q3[3] = {B, n, h * dk}, m1 = tg_tensor_dim(k, 2);
        q = tg_reshape(rope(g, tg_reshape(q, 4, q4), mk - n, n, dk, true), 3, q3);
        kv.k = rope(g, k, 0, m1, dk, false);
        if (k2) kv.k2 = rope(g, k2, m1, mk - m1, dk, false);
    }
    tg_tensor *bm = NULL;
    if (!k2 && use_band(m, self, n, mk) && band_mask(g, mask, n, c->window, &bm))
        return bm ? banded_core(m, g, prefix, q, kv.k, v, bm, scale) : NULL;
    if (c->window > 0 && self) {
        tg_tensor *w = window_mask(g, n, mk, c->window);
        mask = mask ? tg_add(mask, w) : w;
    }
    tg_tensor *o = NULL;
    switch (c->attention) {
    case TG_ATTN_MHA:
    case TG_ATTN_FIXED_HEAD: {
        tg_tensor *s = tg_scale(kv_scores(split_heads(q, h, dk), &kv), scale);
        o = kv_mix(tg__attn_seen(m, prefix, probs(m, s, mask), s, NULL), &kv);
        break;
    }
    case TG_ATTN_TALKING_HEADS: {
        tg_tensor *j = tg_scale(kv_scores(split_heads(q, h, dk), &kv), scale);
        tg_tensor *l = mix_heads(param(m, g, prefix, "pre_softmax_proj"), j);
        tg_tensor *w = tg_softmax(mask ? tg_masked_fill(l, mask, -INFINITY) : l);
        tg_tensor *u = mix_heads(param(m, g, prefix, "post_softmax_proj"), w);
        o = kv_mix(tg__attn_seen(m, prefix, tg_dropout(u, c->attn_dropout), l, w), &kv);
        break;
    }
    case TG_ATTN_INTERACTING: {
        tg_tensor *s;
        if (c->interacting_literal) {
            /* the paper's Algorithm 1: all h^2 products Q_i K_j^T, summed over query heads i */
            int64_t q5[5] = {B, h, 1, n, dk};
            kv_parts pairs = kv_pairs(&kv);
            s = tg_sum(kv_scores(tg_reshape(split_heads(q, h, dk), 5, q5), &pairs), 1, false);
        } else {
            /* sum_i Q_i K_j^T = (sum_i Q_i) K_j^T: one product per key head */
            int64_t q4[4] = {B, n, h, dk}, qs[4] = {B, 1, n, dk};
            tg_tensor *qsum = tg_sum(tg_reshape(q, 4, q4), 2, false);
            s = kv_scores(tg_reshape(qsum, 4, qs), &kv);
        }
        s = tg_scale(s, scale);
        o = kv_mix(tg__attn_seen(m, prefix, probs(m, s, mask), s, NULL), &kv);
        break;
    }
    case TG_ATTN_INTERACTING_PAIRWISE: {
        /* A_ij = softmax(Q_i K_j^T / sqrt(d_k) + mask), O_ij = A_ij V_j, head_i = Concat_j O_ij,
         * concatenated i-major: column (i*h + j)*d_v + c of W_O meets channel c of O_ij */
        int64_t q5[5] = {B, h, 1, n, dk};
        kv_parts pairs = kv_pairs(&kv);
        tg_tensor *s = tg_scale(kv_scores(tg_reshape(split_heads(q, h, dk), 5, q5), &pairs), scale);
        tg_tensor *m5 = NULL;
        if (mask) {
            int64_t ms[TG_MAX_DIMS];
            tg_tensor_shape(mask, ms);
            int64_t s5[5] = {ms[0], 1, 1, ms[2], ms[3]};
            m5 = tg_reshape(mask, 5, s5);
        }
        tg_tensor *a = tg__attn_seen(m, prefix, probs(m, s, m5), s, NULL);
        tg_tensor *o5 = kv_mix(a, &pairs); /* [B,h,h,n,dv] */
        static const int perm[5] = {0, 3, 1, 2, 4};
        int64_t flat[3] = {B, n, h * h * dk};
        return proj(m, g, prefix, "out_proj", tg_reshape(tg_permute(o5, perm), 3, flat));
    }
    case TG_ATTN_COUNT: /* not a kind: tg_model_config_check refuses it */
        return tg__graph_fail(g, TG_ERR_INVALID, "attention: unknown kind %d", (int)c->attention);
    }
    /* the authors' public code (no_out_proj): the heads' concatenation is the output */
    if (c->no_out_proj) return merge_heads(o);
    return proj(m, g, prefix, "out_proj", merge_heads(o));
}

/* The public entry point checks what the variants assume: xq [B,n,d] and xkv [B,m,d] with
 * d = d_model, and a 4-D mask broadcastable to [B,1,n,m] (the pairwise variant drops the mask's
 * head axis when it reshapes it, so a per-head mask must be refused here, not misread). A NULL
 * input records an error only when nothing was recorded before (the first cause wins). */
tg_tensor *tg_model_attention(tg_model *m, tg_graph *g, const char *prefix, tg_tensor *xq,
                              tg_tensor *xkv, tg_tensor *mask) {
    if (!m || !g || !prefix)
        return tg__graph_fail(g, TG_ERR_INVALID, "tg_model_attention: NULL model, graph or prefix");
    if (!xq || !xkv)
        return tg_graph_status(g, NULL)
                   ? NULL
                   : tg__graph_fail(g, TG_ERR_INVALID, "tg_model_attention: NULL input");
    int64_t d = m->cfg.d_model, q[TG_MAX_DIMS], kv[TG_MAX_DIMS], mk[TG_MAX_DIMS];
    int nq = tg_tensor_shape(xq, q), nkv = tg_tensor_shape(xkv, kv);
    char a[96], b[96];
    if (nq != 3 || nkv != 3 || q[2] != d || kv[2] != d || q[0] != kv[0])
        return tg__graph_fail(
            g, TG_ERR_SHAPE,
            "tg_model_attention: inputs %s and %s are not [B,n,%lld] and [B,m,%lld]",
            tg_shape_str(a, sizeof a, nq, q), tg_shape_str(b, sizeof b, nkv, kv), (long long)d,
            (long long)d);
    int nm = mask ? tg_tensor_shape(mask, mk) : 0;
    if (mask && (nm != 4 || (mk[0] != 1 && mk[0] != q[0]) || mk[1] != 1 ||
                 (mk[2] != 1 && mk[2] != q[1]) || (mk[3] != 1 && mk[3] != kv[1])))
        return tg__graph_fail(g, TG_ERR_SHAPE,
                              "tg_model_attention: mask %s does not broadcast to [B,1,n,m] = "
                              "[%lld,1,%lld,%lld]",
                              tg_shape_str(a, sizeof a, nm, mk), (long long)q[0], (long long)q[1],
                              (long long)kv[1]);
    const tg_attn_kind_def *def = tg_attn_kind_def_get(m->cfg.attention);
    if (def) return tg__attn_registered(m, g, def, prefix, xq, xkv, mask, xq == xkv);
    tg_tensor *k, *v;
    tg__attn_kv(m, g, prefix, xkv, &k, &v);
    return tg__attn_core(m, g, prefix, xq, k, v, mask, xq == xkv);
}

tg_tensor *tg__attn_registered(tg_model *m, tg_graph *g, const tg_attn_kind_def *def, const char *prefix,
                               tg_tensor *xq, tg_tensor *xkv, tg_tensor *mask, bool self) {
    if (!xq || !xkv) return NULL;
    tg_attn_dims dims = tg__attn_dims(&m->cfg);
    tg_tensor *o = def->forward(g, m->store, prefix, &dims, xq, xkv, mask, self, def->user);
    if (!o) /* the kind's forward failed: its message, or one that names it */
        return tg_graph_status(g, NULL) ? NULL
                                        : tg__graph_fail(g, TG_ERR_INVALID, "attention kind '%s' (%s): the forward "
                                                         "returned NULL", def->name, prefix);
    int64_t q[TG_MAX_DIMS], os[TG_MAX_DIMS];
    int nq = tg_tensor_shape(xq, q), no = tg_tensor_shape(o, os);
    char a[96], b[96];
    if (no != nq || os[0] != q[0] || os[1] != q[1] || os[2] != q[2])
        return tg__graph_fail(g, TG_ERR_SHAPE, "attention kind '%s' (%s): the forward returned %s for queries %s; "
                              "it must return the queries' shape [B,n,d_model]", def->name, prefix,
                              tg_shape_str(a, sizeof a, no, os), tg_shape_str(b, sizeof b, nq, q));
    return o;
}
