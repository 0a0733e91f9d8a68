/* CUDA kernels of the reductions (backends/cpu/k_reduce.c). x is viewed as [outer, n, inner]
 * and reduced over n.
 * - inner == 1 (row sums, sum of all elements): one block per row, accumulated in double like
 *   the CPU (tree order instead of serial; the float result agrees to rounding).
 * - inner > 1 (column sums, bias gradients): one thread per output adding the rows in order,
 *   exactly the CPU's sum; when there are few outputs and many rows that would leave the GPU
 *   idle, rows are first summed in chunks (in order) and the chunk sums added in order.
 * - max and max_back: one thread per output, serial over n, bit-identical to the CPU. */
#include "backends/cuda/tgcu.cuh"

/* Two-stage column sums below this many outputs (and above ROWS_DIRECT rows). */
#define FEW_OUTPUTS 16384
#define ROWS_DIRECT 256
#define TARGET_ITEMS 131072

static int64_t col_chunks(int64_t outer, int64_t n, int64_t inner) {
    int64_t nout = outer * inner;
    if (inner <= 1 || nout >= FEW_OUTPUTS || n <= ROWS_DIRECT) return 0;
    int64_t nch = (n + 31) / 32, want = TARGET_ITEMS / (nout ? nout : 1);
    if (want < 1) want = 1;
    return nch < want ? nch : want;
}

__global__ void k_row_sums(const float *x, float *o, int64_t outer, int64_t n) {
    __shared__ double sh[32];
    for (int64_t r = blockIdx.x; r < outer; r += gridDim.x) { /* block-uniform loop */
        const float *xr = x + r * n;
        double s = 0.0;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) s += xr[k];
        s = tgcu_block_sum(s, sh);
        if (threadIdx.x == 0) o[r] = (float)s;
    }
}

__global__ void k_col_sums(const float *x, float *o, int64_t outer, int64_t n, int64_t inner) {
    TGCU_LOOP(e, outer * inner) {
        int64_t r = e / inner, c = e % inner;
        const float *xr = x + r * n * inner + c;
        float acc = 0.0f;
        for (int64_t k = 0; k < n; k++) acc += xr[k * inner];
        o[e] = acc;
    }
}

/* Stage 1: chunk ch of rows [ch*len, min(n, (ch+1)*len)) of output e into part[ch*nout + e]. */
__global__ void k_col_chunk_sums(const float *x, float *part, int64_t outer, int64_t n,
                                 int64_t inner, int64_t nch, int64_t len) {
    int64_t nout = outer * inner;
    TGCU_LOOP(w, nch * nout) {
        int64_t ch = w / nout, e = w % nout, r = e / inner, c = e % inner;
        int64_t k0 = ch * len, k1 = k0 + len < n ? k0 + len : n;
        const float *xr = x + r * n * inner + c;
        float acc = 0.0f;
        for (int64_t k = k0; k < k1; k++) acc += xr[k * inner];
        part[w] = acc;
    }
}

__global__ void k_add_chunks(const float *part, float *o, int64_t nout, int64_t nch) {
    TGCU_LOOP(e, nout) {
        float acc = 0.0f;
        for (int64_t ch = 0; ch < nch; ch++) acc += part[ch * nout + e];
        o[e] = acc;
    }
}

__global__ void k_sum_to(const float *x, float *o, tgcu_sumto d, int64_t nout, int64_t nred) {
    TGCU_LOOP(e, nout) {
        /* base offset from the kept coordinates of e */
        int64_t base = 0, q = e;
        for (int i = d.nd - 1; i >= 0; i--) {
            if (d.red[i]) continue;
            base += (q % d.shape[i]) * d.stride[i];
            q /= d.shape[i];
        }
        float acc = 0.0f;
        int64_t idx[TG_MAX_DIMS] = {0};
        for (int64_t k = 0; k < nred; k++) {
            int64_t ofs = base;
            for (int i = 0; i < d.nd; i++)
                if (d.red[i]) ofs += idx[i] * d.stride[i];
            acc += x[ofs];
            for (int i = d.nd - 1; i >= 0; i--) {
                if (!d.red[i]) continue;
                if (++idx[i] < d.shape[i]) break;
                idx[i] = 0;
            }
        }
        o[e] = acc;
    }
}

__global__ void k_max_axis(const float *x, float *o, int64_t outer, int64_t n, int64_t inner) {
    TGCU_LOOP(e, outer * inner) {
        int64_t r = e / inner, c = e % inner;
        const float *col = x + r * n * inner + c;
        float m = col[0];
        for (int64_t k = 1; k < n; k++)
            if (col[k * inner] > m || isnan(col[k * inner])) m = col[k * inner];
        o[e] = m;
    }
}

/* dy goes to the first position equal to the maximum (NaN matches NaN). */
__global__ void k_max_back(const float *x, const float *y, const float *dy, float *o, int64_t outer,
                           int64_t n, int64_t inner) {
    TGCU_LOOP(j, outer * inner) {
        int64_t r = j / inner, c = j % inner;
        bool done = false;
        for (int64_t k = 0; k < n; k++) {
            int64_t e = r * n * inner + k * inner + c;
            bool hit = !done && (x[e] == y[j] || (isnan(y[j]) && isnan(x[e])));
            o[e] = hit ? dy[j] : 0.0f;
            done = done || hit;
        }
    }
}

extern "C" {

int64_t tgcu_sum_axis_scratch(int64_t outer, int64_t n, int64_t inner) {
    return col_chunks(outer, n, inner) * outer * inner;
}

cudaError_t tgcu_sum_axis(cudaStream_t s, const float *x, float *o, int64_t outer, int64_t n,
                          int64_t inner, float *part) {
    int64_t nout = outer * inner;
    if (nout <= 0) return cudaGetLastError();
    if (inner == 1) {
        int64_t blocks = outer < 65536 ? outer : 65536;
        k_row_sums<<<(unsigned)blocks, tgcu_row_threads(n), 0, s>>>(x, o, outer, n);
        return cudaGetLastError();
    }
    int64_t nch = col_chunks(outer, n, inner);
    if (nch == 0) {
        k_col_sums<<<tgcu_grid(nout, TGCU_THREADS), TGCU_THREADS, 0, s>>>(x, o, outer, n, inner);
    } else {
        int64_t len = (n + nch - 1) / nch;
        k_col_chunk_sums<<<tgcu_grid(nch * nout, TGCU_THREADS), TGCU_THREADS, 0, s>>>(
            x, part, outer, n, inner, nch, len);
        k_add_chunks<<<tgcu_grid(nout, TGCU_THREADS), TGCU_THREADS, 0, s>>>(part, o, nout, nch);
    }
    return cudaGetLastError();
}

cudaError_t tgcu_sum_to(cudaStream_t s, const float *x, float *o, const tgcu_sumto *d,
                        int64_t nout, int64_t nred) {
    if (nout > 0)
        k_sum_to<<<tgcu_grid(nout, TGCU_THREADS), TGCU_THREADS, 0, s>>>(x, o, *d, nout, nred);
    return cudaGetLastError();
}

cudaError_t tgcu_max_axis(cudaStream_t s, const float *x, float *o, int64_t outer, int64_t n,
                          int64_t inner) {
    int64_t nout = outer * inner;
    if (nout > 0 && n > 0)
        k_max_axis<<<tgcu_grid(nout, TGCU_THREADS), TGCU_THREADS, 0, s>>>(x, o, outer, n, inner);
    return cudaGetLastError();
}

cudaError_t tgcu_max_back(cudaStream_t s, const float *x, const float *y, const float *dy, float *o,
                          int64_t outer, int64_t n, int64_t inner) {
    int64_t nout = outer * inner;
    if (nout > 0)
        k_max_back<<<tgcu_grid(nout, TGCU_THREADS), TGCU_THREADS, 0, s>>>(x, y, dy, o, outer, n,
                                                                         inner);
    return cudaGetLastError();
}

} /* extern "C" */
