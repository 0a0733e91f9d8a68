/* CUDA kernels of the row ops over the last axis (backends/cpu/k_rows.c, k_nn.c): softmax,
 * log-softmax, layer norm, their backward kernels, and label-smoothed cross-entropy.
 *
 * One thread block per row (a block-uniform loop over rows when there are more rows than
 * blocks); each thread owns the columns j = threadIdx.x + k * blockDim.x of the row, so an
 * output may alias its input (softmax runs in place) without any cross-thread hazard. Row
 * statistics (max, sums) are block reductions: the same values as the CPU's serial sums up to
 * rounding. Exponentials use the CPU's own tg_fast_expf (tgcu_fast_expf), so per-element
 * values match the CPU bit for bit given the same statistics. */
#include "backends/cuda/tgcu.cuh"
#include "tg/ops.h"

static inline unsigned row_blocks(int64_t rows) { return (unsigned)(rows < 65536 ? rows : 65536); }

/* Entries at -inf get probability 0 (log-prob -inf); an all -inf row gives zeros (softmax)
 * or -inf (log-softmax), never NaN. */
__global__ void k_softmax(const float *x, float *y, int64_t rows, int64_t d, bool lg) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) m = tgcu_max2(m, xr[j]);
        m = tgcu_block_max(m, sh);
        if (m == -INFINITY) { /* the same m in every thread: a block-uniform branch */
            for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = lg ? -INFINITY : 0.0f;
            continue;
        }
        float s = 0.0f;
        if (lg) {
            for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += tgcu_fast_expf(xr[j] - m);
            s = tgcu_block_sum(s, sh);
            float lse = m + logf(s);
            for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = xr[j] - lse;
        } else {
            for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
                s += xr[j] == -INFINITY ? 0.0f : tgcu_fast_expf(xr[j] - m);
            s = tgcu_block_sum(s, sh);
            float inv = 1.0f / s;
            for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
                float e = xr[j] == -INFINITY ? 0.0f : tgcu_fast_expf(xr[j] - m);
                yr[j] = e * inv;
            }
        }
    }
}

/* softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy). */
__global__ void k_softmax_back(const float *y, const float *dy, float *dx, int64_t rows, int64_t d,
                               bool lg) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *yr = y + r * d, *gr = dy + r * d;
        float *xr = dx + r * d, s = 0.0f;
        if (lg) {
            for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += gr[j];
            s = tgcu_block_sum(s, sh);
            for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
                xr[j] = gr[j] - (yr[j] == -INFINITY ? 0.0f : tgcu_fast_expf(yr[j])) * s;
        } else {
            for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += gr[j] * yr[j];
            s = tgcu_block_sum(s, sh);
            for (int64_t j = threadIdx.x; j < d; j += blockDim.x) xr[j] = yr[j] * (gr[j] - s);
        }
    }
}

/* mean and 1/sqrt(var + eps) of a row, two passes (stable for large means), biased variance */
__device__ inline void row_stats(const float *xr, int64_t d, float eps, float *sh, float *mean,
                                 float *rstd) {
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += xr[j];
    s = tgcu_block_sum(s, sh);
    float mu = s / (float)d, v = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) v += (xr[j] - mu) * (xr[j] - mu);
    v = tgcu_block_sum(v, sh);
    *mean = mu;
    *rstd = 1.0f / sqrtf(v / (float)d + eps);
}

__global__ void k_layer_norm(const float *x, const float *gm, const float *bt, float *y,
                             int64_t rows, int64_t d, float eps) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * d;
        float *yr = y + r * d, mu, rs;
        row_stats(xr, d, eps, sh, &mu, &rs);
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
            float v = (xr[j] - mu) * rs;
            if (gm) v *= gm[j];
            if (bt) v += bt[j];
            yr[j] = v;
        }
    }
}

/* dx = rstd (g - mean(g) - xhat mean(g xhat)), g = gamma * dy, xhat = (x - mean) rstd */
__global__ void k_layer_norm_back(const float *x, const float *gm, const float *dy, float *dx,
                                  int64_t rows, int64_t d, float eps) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * d, *gr = dy + r * d;
        float *o = dx + r * d, mu, rs, sg = 0.0f, sgx = 0.0f;
        row_stats(xr, d, eps, sh, &mu, &rs);
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
            float gj = gm ? gr[j] * gm[j] : gr[j];
            sg += gj;
            sgx += gj * (xr[j] - mu) * rs;
        }
        sg = tgcu_block_sum(sg, sh);
        sgx = tgcu_block_sum(sgx, sh);
        sg /= (float)d;
        sgx /= (float)d;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
            float gj = gm ? gr[j] * gm[j] : gr[j];
            o[j] = rs * (gj - sg - (xr[j] - mu) * rs * sgx);
        }
    }
}

/* Row loss (docs/model.md §1): with q(k) = (1-eps)[k=y] + eps/V,
 * -sum_k q(k) log p(k) = lse - (1-eps) x_y - (eps/V) sum_k x_k, into rowloss[i * cols]; with
 * cols 2 also the loss at eps 0, lse - x_y, into rowloss[i * cols + 1]. Targets were validated by
 * the host before the launch; an out-of-range one here gives NaN rather than a wild read. */
__global__ void k_cross_entropy(const float *x, const int32_t *y, float *rowloss, int64_t N,
                                int64_t V, float eps, int32_t ignore, int cols) {
    __shared__ float sh[32];
    for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
        int32_t yi = y[i];
        if (yi == ignore || yi < 0 || yi >= V) { /* block-uniform */
            if (threadIdx.x == 0)
                for (int c = 0; c < cols; c++)
                    rowloss[i * cols + c] = yi == ignore ? 0.0f : NAN;
            continue;
        }
        const float *xr = x + i * V;
        float m = -INFINITY, s = 0.0f, sx = 0.0f;
        for (int64_t k = threadIdx.x; k < V; k += blockDim.x) m = tgcu_max2(m, xr[k]);
        m = tgcu_block_max(m, sh);
        for (int64_t k = threadIdx.x; k < V; k += blockDim.x) {
            s += tgcu_fast_expf(xr[k] - m);
            sx += xr[k];
        }
        s = tgcu_block_sum(s, sh);
        sx = tgcu_block_sum(sx, sh);
        if (threadIdx.x == 0) {
            float lse = m + logf(s);
            float loss = lse - (1.0f - eps) * xr[yi];
            if (eps > 0.0f) loss -= eps / (float)V * sx;
            rowloss[i * cols] = loss;
            if (cols == 2) rowloss[i * cols + 1] = lse - xr[yi];
        }
    }
}

/* Total in double (the CPU adds the row losses serially in double), then sum or mean: column c
 * of rowloss [N, cols] into out[c], each c in turn. */
__global__ void k_sum_rows_to_scalar(const float *rowloss, int64_t N, int cols, float *out,
                                     bool mean, int64_t count) {
    __shared__ double sh[32];
    for (int c = 0; c < cols; c++) {
        double t = 0.0;
        for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
            t += rowloss[i * cols + c];
        t = tgcu_block_sum(t, sh);
        if (threadIdx.x == 0) out[c] = (float)(mean ? (count ? t / (double)count : 0.0) : t);
    }
}

/* The scale of row i's gradient from column c of dy ([cols] reduced, [N, cols] per row) */
__device__ inline float ce_scale(const float *dy, int64_t i, int cols, int c, int red,
                                 int64_t count) {
    return red == TG_REDUCE_NONE  ? dy[i * cols + c]
           : red == TG_REDUCE_SUM ? dy[c]
                                  : dy[c] / (float)count;
}

/* dx = sc (softmax(x) - q) + sc1 (softmax(x) - [k = y]): sc, sc1 per row from the reduction and
 * dy's columns (sc1 0 without the NLL column: the plain gradient's bits; backends/cpu/k_nn.c). */
__global__ void k_cross_entropy_back(const float *x, const int32_t *y, const float *dy, float *dx,
                                     int64_t N, int64_t V, float eps, int32_t ignore, int red,
                                     int64_t count, int cols) {
    __shared__ float sh[32];
    for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
        float *orow = dx + i * V;
        int32_t yi = y[i];
        if (yi == ignore || yi < 0 || yi >= V) {
            float v = yi == ignore ? 0.0f : NAN;
            for (int64_t k = threadIdx.x; k < V; k += blockDim.x) orow[k] = v;
            continue;
        }
        const float sc = ce_scale(dy, i, cols, 0, red, count);
        const float sc1 = cols == 2 ? ce_scale(dy, i, cols, 1, red, count) : 0.0f;
        const float *xr = x + i * V;
        float m = -INFINITY, s = 0.0f;
        for (int64_t k = threadIdx.x; k < V; k += blockDim.x) m = tgcu_max2(m, xr[k]);
        m = tgcu_block_max(m, sh);
        for (int64_t k = threadIdx.x; k < V; k += blockDim.x) s += tgcu_fast_expf(xr[k] - m);
        s = tgcu_block_sum(s, sh);
        float inv = 1.0f / s, base = eps / (float)V;
        for (int64_t k = threadIdx.x; k < V; k += blockDim.x) {
            float v;
            if (sc1 == 0.0f) { /* block-uniform */
                v = sc * (tgcu_fast_expf(xr[k] - m) * inv - base);
                if (k == yi)
                    v -= sc * (1.0f - eps); /* two roundings, as the CPU's orow[y] -= ... */
            } else {
                v = (sc + sc1) * (tgcu_fast_expf(xr[k] - m) * inv) - sc * base;
                if (k == yi) v -= sc * (1.0f - eps) + sc1;
            }
            orow[k] = v;
        }
    }
}

extern "C" {

cudaError_t tgcu_softmax(cudaStream_t s, const float *x, float *y, int64_t rows, int64_t d,
                         bool log_out) {
    if (rows > 0 && d > 0)
        k_softmax<<<row_blocks(rows), tgcu_row_threads(d), 0, s>>>(x, y, rows, d, log_out);
    return cudaGetLastError();
}

cudaError_t tgcu_softmax_back(cudaStream_t s, const float *y, const float *dy, float *dx,
                              int64_t rows, int64_t d, bool log_out) {
    if (rows > 0 && d > 0)
        k_softmax_back<<<row_blocks(rows), tgcu_row_threads(d), 0, s>>>(y, dy, dx, rows, d, log_out);
    return cudaGetLastError();
}

cudaError_t tgcu_layer_norm(cudaStream_t s, const float *x, const float *gamma, const float *beta,
                            float *y, int64_t rows, int64_t d, float eps) {
    if (rows > 0 && d > 0)
        k_layer_norm<<<row_blocks(rows), tgcu_row_threads(d), 0, s>>>(x, gamma, beta, y, rows, d,
                                                                      eps);
    return cudaGetLastError();
}

cudaError_t tgcu_layer_norm_back(cudaStream_t s, const float *x, const float *gamma,
                                 const float *dy, float *dx, int64_t rows, int64_t d, float eps) {
    if (rows > 0 && d > 0)
        k_layer_norm_back<<<row_blocks(rows), tgcu_row_threads(d), 0, s>>>(x, gamma, dy, dx, rows,
                                                                           d, eps);
    return cudaGetLastError();
}

cudaError_t tgcu_cross_entropy(cudaStream_t s, const float *x, const int32_t *y, float *rowloss,
                               int64_t N, int64_t V, float eps, int32_t ignore, int cols) {
    if (N > 0)
        k_cross_entropy<<<row_blocks(N), tgcu_row_threads(V), 0, s>>>(x, y, rowloss, N, V, eps,
                                                                      ignore, cols);
    return cudaGetLastError();
}

cudaError_t tgcu_sum_rows_to_scalar(cudaStream_t s, const float *rowloss, int64_t N, int cols,
                                    float *out, bool mean, int64_t count) {
    k_sum_rows_to_scalar<<<1, 1024, 0, s>>>(rowloss, N, cols, out, mean, count);
    return cudaGetLastError();
}

cudaError_t tgcu_cross_entropy_back(cudaStream_t s, const float *x, const int32_t *y,
                                    const float *dy, float *dx, int64_t N, int64_t V, float eps,
                                    int32_t ignore, int reduction, int64_t count, int cols) {
    if (N > 0 && V > 0)
        k_cross_entropy_back<<<row_blocks(N), tgcu_row_threads(V), 0, s>>>(
            x, y, dy, dx, N, V, eps, ignore, reduction, count, cols);
    return cudaGetLastError();
}

} /* extern "C" */
