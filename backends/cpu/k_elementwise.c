/* CPU kernels of the elementwise ops: fill, broadcasting binary ops, unary maths, masks and
 * dropout. Loops are flat over contiguous memory so the compiler vectorises them. */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu-impl.h"

/* Right-aligned broadcast strides of input x against output shape t (0 where x is 1). */
void tg_cpu_bcast_strides(const tg_tensor *x, const tg_tensor *t, int64_t *st) {
    int off = t->ndim - x->ndim;
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        int xi = i - off;
        int64_t d = xi >= 0 ? x->shape[xi] : 1;
        st[i] = (d == 1) ? 0 : s;
        s *= d;
    }
}

/* Offset in x of the first element of output row r (rows = all dims but the last). */
static inline int64_t row_offset(int64_t r, int nd, const int64_t *shape, const int64_t *st) {
    int64_t off = 0;
    for (int i = nd - 2; i >= 0; i--) {
        off += (r % shape[i]) * st[i];
        r /= shape[i];
    }
    return off;
}

#define BINARY_LOOP(EXPR)                                                                    \
    do {                                                                                     \
        if (na == n && nb == n) {                                                            \
            _Pragma("omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)") \
            for (int64_t i = 0; i < n; i++) {                                                \
                float x = a[i], y = b[i];                                                    \
                o[i] = (EXPR);                                                               \
            }                                                                                \
        } else {                                                                             \
            int64_t sa[TG_MAX_DIMS], sb[TG_MAX_DIMS];                                        \
            tg_cpu_bcast_strides(t->src[0], t, sa);                                          \
            tg_cpu_bcast_strides(t->src[1], t, sb);                                          \
            int nd = t->ndim;                                                                \
            int64_t inner = nd ? t->shape[nd - 1] : 1, rows = n / (inner ? inner : 1);       \
            int64_t ia = nd ? sa[nd - 1] : 0, ib = nd ? sb[nd - 1] : 0;                      \
            _Pragma("omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)") \
            for (int64_t r = 0; r < rows; r++) {                                             \
                const float *ar = a + row_offset(r, nd, t->shape, sa);                       \
                const float *br = b + row_offset(r, nd, t->shape, sb);                       \
                float *orow = o + r * inner;                                                 \
                if (ia && ib) {                                                              \
                    for (int64_t j = 0; j < inner; j++) {                                    \
                        float x = ar[j], y = br[j];                                          \
                        orow[j] = (EXPR);                                                    \
                    }                                                                        \
                } else if (ia) {                                                             \
                    float y = br[0];                                                         \
                    for (int64_t j = 0; j < inner; j++) {                                    \
                        float x = ar[j];                                                     \
                        orow[j] = (EXPR);                                                    \
                    }                                                                        \
                } else if (ib) {                                                             \
                    float x = ar[0];                                                         \
                    for (int64_t j = 0; j < inner; j++) {                                    \
                        float y = br[j];                                                     \
                        orow[j] = (EXPR);                                                    \
                    }                                                                        \
                } else {                                                                     \
                    float x = ar[0], y = br[0];                                              \
                    for (int64_t j = 0; j < inner; j++) orow[j] = (EXPR);                    \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    } while (0)

#define UNARY_LOOP(EXPR)                                                                  \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)")      \
    for (int64_t i = 0; i < n; i++) {                                                     \
        float x = a[i];                                                                   \
        o[i] = (EXPR);                                                                    \
    }

/* same-shape op of two inputs (x = src0, y = src1) */
#define PAIR_LOOP(EXPR)                                                                   \
    _Pragma("omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)")      \
    for (int64_t i = 0; i < n; i++) {                                                     \
        float x = a[i], y = b[i];                                                         \
        o[i] = (EXPR);                                                                    \
    }

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

static inline float gelu_grad(float x) {
    float u = GELU_K * (x + GELU_C * x * x * x), th = tanhf(u);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
}

/* Dropout mask word for element e: Philox(counter = (e/4, stream), key = seed), word e%4. */
static void dropout(const tg_tensor *t, const float *a, float *o, int64_t n, int nt) {
    float p = t->pf[0], keep_scale = 1.0f / (1.0f - p);
    uint32_t key[2] = {(uint32_t)t->pi[1], (uint32_t)t->pi[2]};
    uint32_t stream = (uint32_t)t->pi[0];
    int64_t groups = (n + 3) / 4;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)
    for (int64_t gi = 0; gi < groups; gi++) {
        uint32_t ctr[4] = {(uint32_t)gi, (uint32_t)((uint64_t)gi >> 32), stream, 0}, r[4];
        tg_philox4x32(ctr, key, r);
        for (int k = 0; k < 4; k++) {
            int64_t e = gi * 4 + k;
            if (e < n) o[e] = tg_u32_to_unit(r[k]) >= p ? a[e] * keep_scale : 0.0f;
        }
    }
}

tg_status tg_cpu_elementwise(tg_backend *bk, tg_tensor *t) {
    int nt = bk->nthreads;
    int64_t n = tg_tensor_numel(t);
    float *o = F32(t);
    const float *a = t->nsrc > 0 ? F32(t->src[0]) : NULL;
    const float *b = t->nsrc > 1 ? F32(t->src[1]) : NULL;
    int64_t na = t->nsrc > 0 ? tg_tensor_numel(t->src[0]) : 0;
    int64_t nb = t->nsrc > 1 ? tg_tensor_numel(t->src[1]) : 0;
    switch (t->op) {
    case TG_OP_FILL: {
        float v = t->pf[0];
#pragma omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)
        for (int64_t i = 0; i < n; i++) o[i] = v;
        return TG_OK;
    }
    case TG_OP_ADD: BINARY_LOOP(x + y); return TG_OK;
    case TG_OP_SUB: BINARY_LOOP(x - y); return TG_OK;
    case TG_OP_MUL: BINARY_LOOP(x * y); return TG_OK;
    case TG_OP_DIV: BINARY_LOOP(x / y); return TG_OK;
    case TG_OP_SCALE: {
        float s = t->pf[0], c = t->pf[1];
        UNARY_LOOP(x * s + c);
        return TG_OK;
    }
    case TG_OP_EXP: UNARY_LOOP(expf(x)); return TG_OK;
    case TG_OP_LOG: UNARY_LOOP(logf(x)); return TG_OK;
    case TG_OP_SQRT: UNARY_LOOP(sqrtf(x)); return TG_OK;
    case TG_OP_RSQRT: UNARY_LOOP(1.0f / sqrtf(x)); return TG_OK;
    case TG_OP_TANH: UNARY_LOOP(tanhf(x)); return TG_OK;
    case TG_OP_RELU: UNARY_LOOP(x > 0.0f ? x : 0.0f); return TG_OK;
    case TG_OP_GELU:
        UNARY_LOOP(0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_C * x * x * x))));
        return TG_OK;
    case TG_OP_RELU_BACK: PAIR_LOOP(x > 0.0f ? y : 0.0f); return TG_OK;
    case TG_OP_GELU_BACK: PAIR_LOOP(y * gelu_grad(x)); return TG_OK;
    case TG_OP_MASKED_FILL: {
        const tg_tensor *m = t->src[1];
        float v = t->pf[0];
        int64_t sm[TG_MAX_DIMS];
        tg_cpu_bcast_strides(m, t, sm);
        int nd = t->ndim;
        int64_t inner = nd ? t->shape[nd - 1] : 1, rows = inner ? n / inner : 0;
        int64_t im = nd ? sm[nd - 1] : 0;
        bool is_i32 = m->dtype == TG_DTYPE_I32;
        const void *mp = m->data;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > TG_PAR_MIN)
        for (int64_t r = 0; r < rows; r++) {
            int64_t mo = row_offset(r, nd, t->shape, sm);
            const float *ar = a + r * inner;
            float *orow = o + r * inner;
            for (int64_t j = 0; j < inner; j++) {
                int64_t k = mo + j * im;
                bool on = is_i32 ? ((const int32_t *)mp)[k] != 0 : ((const float *)mp)[k] != 0.0f;
                orow[j] = on ? v : ar[j];
            }
        }
        return TG_OK;
    }
    case TG_OP_DROPOUT: dropout(t, a, o, n, nt); return TG_OK;
    default:
        return tg_error_set(TG_ERR_UNSUPPORTED, "cpu backend: no elementwise kernel for %s",
                            tg_op_name(t->op));
    }
}
