/* The layers of tg/layers.h from primitive ops: parameters (…_init, through tg_params) and
 * forwards over a store. The model zoo builds its layers with these (models/layers.c,
 * models/attention.c), so the maths lives here once (docs/model.md §1).
 *
 * Error contract: a builder that fails marks its graph (first error wins) and returns NULL; a
 * NULL input alone records nothing, because whatever made it NULL recorded it already. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/model-impl.h"

static tg_tensor *param(tg_graph *g, tg_store *s, const char *prefix, const char *suffix) {
    char name[192];
    snprintf(name, sizeof name, "%s%s%s", prefix, suffix[0] ? "." : "", suffix);
    return tg_param(g, s, name);
}

static tg_status add2(tg_params *p, const char *prefix, const char *suffix, int64_t rows, int64_t cols,
                      tg_init_kind k) {
    char name[192];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    int64_t shape[2] = {rows, cols};
    return tg_params_add(p, name, cols > 0 ? 2 : 1, shape, k);
}

#define TRY(x)               \
    do {                     \
        tg_status st_ = (x); \
        if (st_) return st_; \
    } while (0)

tg_status tg_layers_linear_init(tg_params *p, const char *prefix, int64_t in, int64_t out, bool bias) {
    if (!p || !prefix) return tg_error_set(TG_ERR_INVALID, "tg_layers_linear_init: NULL argument");
    TRY(add2(p, prefix, "weight", out, in, TG_INIT_XAVIER));
    return bias ? add2(p, prefix, "bias", out, 0, TG_INIT_ZEROS) : TG_OK;
}

/* x [..., in] is flattened to 2-D so that the weight gradient is one GEMM, not a batch of them
 * summed afterwards. */
tg_tensor *tg_layers_linear(tg_graph *g, tg_store *s, const char *prefix, tg_tensor *x, bool bias) {
    tg_tensor *w = param(g, s, prefix, "weight");
    if (!x || !w) return NULL;
    int64_t shape[TG_MAX_DIMS];
    int nd = tg_tensor_shape(x, shape);
    int64_t flat[2] = {-1, shape[nd - 1]};
    tg_tensor *y = tg_matmul(tg_reshape(x, 2, flat), w, false, true);
    if (bias) y = tg_add(y, param(g, s, prefix, "bias"));
    shape[nd - 1] = tg_tensor_dim(w, 0);
    return tg_reshape(y, nd, shape);
}

tg_status tg_layers_norm_init(tg_params *p, const char *prefix, int64_t d, bool rms) {
    if (!p || !prefix) return tg_error_set(TG_ERR_INVALID, "tg_layers_norm_init: NULL argument");
    TRY(add2(p, prefix, "weight", d, 0, TG_INIT_ONES));
    return rms ? TG_OK : add2(p, prefix, "bias", d, 0, TG_INIT_ZEROS); /* RMSNorm has a gain only */
}

/* RMSNorm composed of primitive ops (their gradients compose) */
tg_tensor *tg_layers_norm(tg_graph *g, tg_store *s, const char *prefix, tg_tensor *x, bool rms, float eps) {
    if (eps <= 0.0f) eps = 1e-5f;
    if (!rms) return tg_layer_norm(x, param(g, s, prefix, "weight"), param(g, s, prefix, "bias"), eps);
    tg_tensor *ms = tg_mean(tg_mul(x, x), -1, true);
    return tg_mul(tg_mul(x, tg_rsqrt(tg_add_scalar(ms, eps))), param(g, s, prefix, "weight"));
}

tg_status tg_layers_ffn_init(tg_params *p, const char *prefix, int64_t d, int64_t d_ff, tg_ffn_kind kind) {
    if (!p || !prefix) return tg_error_set(TG_ERR_INVALID, "tg_layers_ffn_init: NULL argument");
    char name[160];
    snprintf(name, sizeof name, "%s.fc1", prefix);
    TRY(tg_layers_linear_init(p, name, d, d_ff, true));
    snprintf(name, sizeof name, "%s.fc2", prefix);
    TRY(tg_layers_linear_init(p, name, d_ff, d, true));
    snprintf(name, sizeof name, "%s.fc3", prefix);
    return kind == TG_FFN_SWIGLU ? tg_layers_linear_init(p, name, d, d_ff, true) : TG_OK;
}

/* silu(z) = z sigmoid(z) with sigmoid(z) = (1 + tanh(z / 2)) / 2 (primitive ops only) */
tg_tensor *tg_layers_ffn(tg_graph *g, tg_store *s, const char *prefix, tg_tensor *x, tg_ffn_kind kind, float dropout) {
    char p[192];
    snprintf(p, sizeof p, "%s.fc1", prefix);
    tg_tensor *h = tg_layers_linear(g, s, p, x, true);
    if (kind == TG_FFN_SWIGLU) {
        snprintf(p, sizeof p, "%s.fc3", prefix);
        tg_tensor *sig = tg_affine(tg_tanh(tg_scale(h, 0.5f)), 0.5f, 0.5f);
        h = tg_mul(tg_mul(h, sig), tg_layers_linear(g, s, p, x, true));
    } else {
        h = kind == TG_FFN_GELU ? tg_gelu(h) : kind == TG_FFN_GELU_ERF ? tg_gelu_erf(h) : tg_relu(h);
    }
    h = tg_dropout(h, dropout);
    snprintf(p, sizeof p, "%s.fc2", prefix);
    return tg_layers_linear(g, s, p, h, true);
}

tg_status tg_layers_attention_init(tg_params *p, const char *prefix, int64_t d, int64_t heads, int64_t kv_heads) {
    if (!p || !prefix) return tg_error_set(TG_ERR_INVALID, "tg_layers_attention_init: NULL argument");
    if (heads < 1 || d % heads || kv_heads < 1 || heads % kv_heads)
        return tg_error_set(TG_ERR_INVALID, "tg_layers_attention_init: '%s': d %lld, %lld heads and %lld key/value heads "
                            "(heads must divide d, key/value heads the heads)", prefix, (long long)d, (long long)heads,
                            (long long)kv_heads);
    int64_t dk = d / heads;
    char name[160];
    static const char *proj[3] = {"q_proj", "k_proj", "v_proj"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, proj[i]);
        TRY(tg_layers_linear_init(p, name, d, (i ? kv_heads : heads) * dk, true));
    }
    snprintf(name, sizeof name, "%s.out_proj", prefix);
    return tg_layers_linear_init(p, name, heads * dk, d, true);
}

/* Query heads in groups of r = heads / kv_heads share a key/value head: Q [B, kvh, r, n, dk]
 * against K, V [B, kvh, 1, m, dk], the batched products broadcasting over the group axis. */
tg_tensor *tg_layers_attention(tg_graph *g, tg_store *s, const char *prefix, tg_tensor *xq, tg_tensor *xkv,
                               tg_tensor *mask, tg_tensor *bias, int64_t heads, int64_t kv_heads, float dropout) {
    if (!xq || !xkv) return NULL;
    int64_t B = tg_tensor_dim(xq, 0), n = tg_tensor_dim(xq, 1), m = tg_tensor_dim(xkv, 1), d = tg_tensor_dim(xq, 2);
    if (heads < 1 || d % heads || kv_heads < 1 || heads % kv_heads)
        return tg__graph_fail(g, TG_ERR_SHAPE, "tg_layers_attention: '%s': d %lld, %lld heads, %lld key/value heads "
                              "(heads must divide d, key/value heads the heads)", prefix, (long long)d, (long long)heads,
                              (long long)kv_heads);
    int64_t dk = d / heads, r = heads / kv_heads;
    char p[192];
    static const int perm[5] = {0, 2, 3, 1, 4};
    snprintf(p, sizeof p, "%s.q_proj", prefix);
    int64_t q5[5] = {B, n, kv_heads, r, dk}, kv5[5] = {B, m, kv_heads, 1, dk};
    tg_tensor *q = tg_permute(tg_reshape(tg_layers_linear(g, s, p, xq, true), 5, q5), perm); /* [B,kvh,r,n,dk] */
    snprintf(p, sizeof p, "%s.k_proj", prefix);
    tg_tensor *k = tg_permute(tg_reshape(tg_layers_linear(g, s, p, xkv, true), 5, kv5), perm); /* [B,kvh,1,m,dk] */
    snprintf(p, sizeof p, "%s.v_proj", prefix);
    tg_tensor *v = tg_permute(tg_reshape(tg_layers_linear(g, s, p, xkv, true), 5, kv5), perm);
    tg_tensor *sc = tg_scale(tg_matmul(q, k, false, true), 1.0f / sqrtf((float)dk)); /* [B,kvh,r,n,m] */
    int64_t s4[4] = {B, heads, n, m}, s5[5] = {B, kv_heads, r, n, m};
    if (bias) sc = tg_reshape(tg_add(tg_reshape(sc, 4, s4), bias), 5, s5);
    if (mask) {
        int64_t ms[TG_MAX_DIMS];
        int nm = tg_tensor_shape(mask, ms);
        if (nm != 4)
            return tg__graph_fail(g, TG_ERR_SHAPE, "tg_layers_attention: '%s': the mask has %d dimensions, not 4 "
                                  "([B,1,n,m])", prefix, nm);
        int64_t m5[5] = {ms[0], 1, 1, ms[2], ms[3]};
        sc = tg_masked_fill(sc, tg_reshape(mask, 5, m5), -INFINITY);
    }
    tg_tensor *o = tg_matmul(tg_dropout(tg_softmax(sc), dropout), v, false, false); /* [B,kvh,r,n,dk] */
    static const int back[5] = {0, 3, 1, 2, 4};
    int64_t flat[3] = {B, n, heads * dk};
    snprintf(p, sizeof p, "%s.out_proj", prefix);
    return tg_layers_linear(g, s, p, tg_reshape(tg_permute(o, back), 3, flat), true);
}

tg_status tg_layers_embed_init(tg_params *p, const char *prefix, int64_t vocab, int64_t d, int64_t max_len,
                               tg_pos_kind pos) {
    if (!p || !prefix) return tg_error_set(TG_ERR_INVALID, "tg_layers_embed_init: NULL argument");
    TRY(add2(p, prefix, "weight", vocab, d, TG_INIT_NORMAL));
    return pos == TG_POS_LEARNED ? add2(p, prefix, "pos", max_len, d, TG_INIT_NORMAL) : TG_OK;
}

tg_tensor *tg_layers_sinusoid(tg_graph *g, int64_t offset, int64_t T, int64_t d) {
    if (T < 1 || d < 1) return tg__graph_fail(g, TG_ERR_INVALID, "positional encoding: %lld positions of width %lld",
                                              (long long)T, (long long)d);
    float *pe = malloc((size_t)(T * d) * sizeof *pe);
    if (!pe) return tg__graph_fail(g, TG_ERR_NOMEM, "positional encoding: out of memory");
    for (int64_t p = 0; p < T; p++)
        for (int64_t i = 0; i < d; i += 2) {
            double ang = (double)(p + offset) / pow(10000.0, (double)i / (double)d);
            pe[p * d + i] = (float)sin(ang);
            if (i + 1 < d) pe[p * d + i + 1] = (float)cos(ang);
        }
    int64_t sh[2] = {T, d};
    tg_tensor *t = tg_input(g, TG_DTYPE_F32, 2, sh, pe);
    free(pe);
    return t;
}

tg_tensor *tg_layers_embed(tg_graph *g, tg_store *s, const char *prefix, const int32_t *ids, int64_t B, int64_t T,
                           int64_t offset, tg_pos_kind pos, float dropout) {
    tg_tensor *table = param(g, s, prefix, "weight");
    if (!table) return NULL;
    int64_t V = tg_tensor_dim(table, 0), d = tg_tensor_dim(table, 1);
    if (!ids || B < 1 || T < 1) return tg__graph_fail(g, TG_ERR_INVALID, "tg_layers_embed: '%s': no ids", prefix);
    for (int64_t i = 0; i < B * T; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return tg__graph_fail(g, TG_ERR_INVALID, "tg_layers_embed: '%s': id %d at [%lld,%lld] outside [0, %lld)", prefix,
                                  ids[i], (long long)(i / T), (long long)(i % T), (long long)V);
    int64_t sh[2] = {B, T};
    tg_tensor *x = tg_scale(tg_embedding(table, tg_input(g, TG_DTYPE_I32, 2, sh, ids)), sqrtf((float)d));
    if (pos == TG_POS_LEARNED) x = tg_add(x, tg_embedding(param(g, s, prefix, "pos"), tg_arange(g, offset, T)));
    else if (pos == TG_POS_SINUSOIDAL) x = tg_add(x, tg_layers_sinusoid(g, offset, T, d));
    return tg_dropout(x, dropout);
}
