/* CUDA kernels of the elementwise ops (fill, broadcasting binary ops, unary maths, masks,
 * dropout, gradient accumulation) and of the store maths (optimizer updates, sum of squares,
 * scaling). Each mirrors backends/cpu/k_elementwise.c or cpu.c expression for expression;
 * outputs may alias an input (the planner runs these ops in place), so nothing is __restrict__
 * and every element is read and written by the same thread. */
#include "backends/cuda/tgcu.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

/* d/dx of the tanh-form GELU, as the CPU's gelu_grad. */
__device__ inline float gelu_grad(float x) {
    float u = GELU_K * (x + GELU_C * x * x * x), th = tanhf(u);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
}

__device__ inline float binop(int op, float x, float y) {
    switch (op) {
    case TG_OP_ADD: return x + y;
    case TG_OP_SUB: return x - y;
    case TG_OP_MUL: return x * y;
    case TG_OP_DIV: return x / y;
    case TG_OP_RELU_BACK: return x > 0.0f ? y : 0.0f;
    case TG_OP_SILU_BACK: /* as backends/cpu/k_elementwise.c: dy s (1 + x (1 - s)) */
        return y * (1.0f / (1.0f + tgcu_fast_expf(-x))) *
               (1.0f + x * (1.0f - 1.0f / (1.0f + tgcu_fast_expf(-x))));
    case TG_OP_GELU_ERF_BACK: /* as backends/cpu/k_elementwise.c: dy (Phi(x) + x phi(x)) */
        return y * (0.5f * (1.0f + erff(x * 0.70710678118654752f)) +
                    x * 0.39894228040143268f * expf(-0.5f * x * x));
    default: return y * gelu_grad(x); /* TG_OP_GELU_BACK */
    }
}

__device__ inline float unop(int op, float x, float s, float c) {
    switch (op) {
    case TG_OP_SCALE: return x * s + c;
    case TG_OP_EXP: return expf(x);
    case TG_OP_LOG: return logf(x);
    case TG_OP_SQRT: return sqrtf(x);
    case TG_OP_RSQRT: return 1.0f / sqrtf(x);
    case TG_OP_TANH: return tanhf(x);
    case TG_OP_RELU: return x > 0.0f ? x : 0.0f;
    case TG_OP_SILU: return x / (1.0f + tgcu_fast_expf(-x)); /* the CPU's fast exp */
    case TG_OP_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    default: return 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_C * x * x * x))); /* TG_OP_GELU */
    }
}

__global__ void k_fill(float *o, int64_t n, float v) {
    TGCU_LOOP(i, n) o[i] = v;
}

__global__ void k_binary_flat(int op, float *o, const float *a, const float *b, int64_t n) {
    TGCU_LOOP(i, n) o[i] = binop(op, a[i], b[i]);
}

__global__ void k_binary(int op, float *o, const float *a, const float *b, tgcu_index ix, int64_t n) {
    TGCU_LOOP(e, n) {
        int64_t oa, ob;
        tgcu_offsets(ix, e, &oa, &ob);
        o[e] = binop(op, a[oa], b[ob]);
    }
}

__global__ void k_unary(int op, float *o, const float *a, int64_t n, float s, float c) {
    TGCU_LOOP(i, n) o[i] = unop(op, a[i], s, c);
}

__global__ void k_masked_fill(float *o, const float *x, const void *mask, bool mask_i32,
                              tgcu_index ix, int64_t n, float v) {
    TGCU_LOOP(e, n) {
        int64_t ox, om;
        tgcu_offsets(ix, e, &ox, &om);
        bool on = mask_i32 ? ((const int32_t *)mask)[om] != 0 : ((const float *)mask)[om] != 0.0f;
        o[e] = on ? v : x[ox];
    }
}

/* Group gi of four elements uses Philox(counter = (gi low, gi high, stream, 0), key); element
 * 4 gi + k keeps its value when the unit float of word k is >= p (backends/cpu: dropout()). */
__global__ void k_dropout(float *o, const float *a, int64_t n, float p, float keep_scale,
                          uint32_t stream_id, uint32_t k0, uint32_t k1) {
    int64_t groups = (n + 3) / 4;
    TGCU_LOOP(gi, groups) {
        uint32_t r[4];
        tgcu_philox((uint32_t)gi, (uint32_t)((uint64_t)gi >> 32), stream_id, 0u, k0, k1, r);
        for (int k = 0; k < 4; k++) {
            int64_t e = gi * 4 + k;
            float u = (float)(r[k] >> 8) * (1.0f / 16777216.0f); /* tg_u32_to_unit */
            if (e < n) o[e] = u >= p ? a[e] * keep_scale : 0.0f;
        }
    }
}

__global__ void k_accumulate(float *o, const float *g, int64_t n) {
    TGCU_LOOP(i, n) o[i] += g[i];
}

__global__ void k_scale_inplace(float *x, int64_t n, float s) {
    TGCU_LOOP(i, n) x[i] *= s;
}

__global__ void k_sgd(float *w, const float *g, float *m, int64_t n, float lr, float wd, float mu) {
    TGCU_LOOP(i, n) {
        float gi = g[i] + wd * w[i];
        if (m) {
            m[i] = mu * m[i] + gi;
            gi = m[i];
        }
        w[i] -= lr * gi;
    }
}

/* Adam / AdamW with the bias corrections folded into alpha = lr / (1 - b1^t) and
 * rc2 = 1 / sqrt(1 - b2^t), both computed on the host in double as the CPU does. */
__global__ void k_adam(float *w, const float *g, float *m, float *v, int64_t n, float lr, float wd,
                       float b1, float b2, float eps, float alpha, float rc2, bool decoupled) {
    TGCU_LOOP(i, n) {
        float gi = decoupled ? g[i] : g[i] + wd * w[i];
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float upd = alpha * m[i] / (sqrtf(v[i]) * rc2 + eps);
        w[i] -= decoupled ? upd + lr * wd * w[i] : upd;
    }
}

#define SUMSQ_CHUNK 8192

/* One block per chunk of SUMSQ_CHUNK elements (block-uniform loop), accumulated in double. */
__global__ void k_sumsq_parts(const float *x, int64_t n, int64_t np, double *part) {
    __shared__ double sh[32];
    for (int64_t c = blockIdx.x; c < np; c += gridDim.x) {
        int64_t c0 = c * SUMSQ_CHUNK, c1 = c0 + SUMSQ_CHUNK < n ? c0 + SUMSQ_CHUNK : n;
        double s = 0.0;
        for (int64_t i = c0 + threadIdx.x; i < c1; i += blockDim.x) s += (double)x[i] * (double)x[i];
        s = tgcu_block_sum(s, sh);
        if (threadIdx.x == 0) part[c] = s;
    }
}

__global__ void k_sum_parts(const double *part, int64_t np, double *out) {
    __shared__ double sh[32];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < np; i += blockDim.x) s += part[i];
    s = tgcu_block_sum(s, sh);
    if (threadIdx.x == 0) *out = s;
}

extern "C" {

cudaError_t tgcu_fill(cudaStream_t s, float *o, int64_t n, float v) {
    if (n > 0) k_fill<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(o, n, v);
    return cudaGetLastError();
}

cudaError_t tgcu_binary(cudaStream_t s, tg_op op, float *o, const float *a, const float *b,
                        const tgcu_index *ix, int64_t n) {
    if (n <= 0) return cudaGetLastError();
    if (ix->nd == 1 && ix->sa[0] == 1 && ix->sb[0] == 1)
        k_binary_flat<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(op, o, a, b, n);
    else
        k_binary<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(op, o, a, b, *ix, n);
    return cudaGetLastError();
}

cudaError_t tgcu_unary(cudaStream_t s, tg_op op, float *o, const float *a, int64_t n, float sc,
                       float c) {
    if (n > 0) k_unary<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(op, o, a, n, sc, c);
    return cudaGetLastError();
}

cudaError_t tgcu_masked_fill(cudaStream_t s, float *o, const float *x, const void *mask,
                             bool mask_i32, const tgcu_index *ix, int64_t n, float v) {
    if (n > 0)
        k_masked_fill<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(o, x, mask, mask_i32, *ix,
                                                                         n, v);
    return cudaGetLastError();
}

cudaError_t tgcu_dropout(cudaStream_t s, float *o, const float *a, int64_t n, float p,
                         float keep_scale, uint32_t stream_id, uint32_t key0, uint32_t key1) {
    if (n > 0)
        k_dropout<<<tgcu_grid((n + 3) / 4, TGCU_THREADS), TGCU_THREADS, 0, s>>>(
            o, a, n, p, keep_scale, stream_id, key0, key1);
    return cudaGetLastError();
}

cudaError_t tgcu_accumulate(cudaStream_t s, float *o, const float *g, int64_t n) {
    if (n > 0) k_accumulate<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(o, g, n);
    return cudaGetLastError();
}

cudaError_t tgcu_scale_inplace(cudaStream_t s, float *x, int64_t n, float sc) {
    if (n > 0) k_scale_inplace<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(x, n, sc);
    return cudaGetLastError();
}

cudaError_t tgcu_sgd(cudaStream_t s, float *w, const float *g, float *m, int64_t n, float lr,
                     float wd, float mu) {
    if (n > 0) k_sgd<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(w, g, m, n, lr, wd, mu);
    return cudaGetLastError();
}

cudaError_t tgcu_adam(cudaStream_t s, float *w, const float *g, float *m, float *v, int64_t n,
                      float lr, float wd, float b1, float b2, float eps, float alpha, float rc2,
                      bool decoupled) {
    if (n > 0)
        k_adam<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(w, g, m, v, n, lr, wd, b1, b2,
                                                                  eps, alpha, rc2, decoupled);
    return cudaGetLastError();
}

int64_t tgcu_sumsq_parts(int64_t n) { return (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK; }

cudaError_t tgcu_sumsq(cudaStream_t s, const float *x, int64_t n, double *part, double *out) {
    int64_t np = tgcu_sumsq_parts(n);
    if (np > 0) k_sumsq_parts<<<(unsigned)(np < 65536 ? np : 65536), TGCU_THREADS, 0, s>>>(x, n, np, part);
    k_sum_parts<<<1, 1024, 0, s>>>(part, np, out);
    return cudaGetLastError();
}

} /* extern "C" */
