/* CUDA kernels of the banded attention ops (backends/cpu/k_band.c): band_scores, band_mix and
 * band_mix_t. One thread per output element, in a grid-stride loop; each thread does the CPU's
 * float operations in the CPU's order (the 8-accumulator dot of band_scores, the ascending-j
 * sums of band_mix and band_mix_t), so results agree with the CPU bit for bit. O(r·n·d) work,
 * like the CPU's; a tiled kernel sharing K rows between neighbouring queries would read less
 * memory, but these are simple first versions. */
#include "backends/cuda/tgcu.cuh"

/* S [rows, w], rows = batches * n: S[i, j] = Q_i · K_{i+j-r}, or fill where there is no key */
__global__ void k_band_scores(const float *q, const float *k, float *s, int64_t rows, int64_t n,
                              int64_t m, int64_t dk, int64_t r, float fill) {
    int64_t w = 2 * r + 1;
    TGCU_LOOP(e, rows * w) {
        int64_t row = e / w, j = e % w, b = row / n, i = row % n, tk = i + j - r;
        if (tk < 0 || tk >= m) {
            s[e] = fill;
            continue;
        }
        const float *qa = q + row * dk, *kb = k + (b * m + tk) * dk;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t c = 0;
        for (; c + 8 <= dk; c += 8)
            for (int u = 0; u < 8; u++) acc[u] += qa[c + u] * kb[c + u];
        for (int u = 0; c < dk; c++, u++) acc[u] += qa[c] * kb[c];
        s[e] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
}

/* O [rows, dv]: O_i = sum over the keys that exist of P[i, j] V_{i+j-r}, j ascending */
__global__ void k_band_mix(const float *p, const float *v, float *o, int64_t rows, int64_t n,
                           int64_t m, int64_t dv, int64_t r) {
    int64_t w = 2 * r + 1;
    TGCU_LOOP(e, rows * dv) {
        int64_t row = e / dv, c = e % dv, b = row / n, i = row % n;
        int64_t j0 = r - i > 0 ? r - i : 0, j1 = m - 1 - i + r < w - 1 ? m - 1 - i + r : w - 1;
        const float *pr = p + row * w, *vb = v + b * m * dv;
        float y = 0.0f;
        for (int64_t j = j0; j <= j1; j++) y += pr[j] * vb[(i + j - r) * dv + c];
        o[e] = y;
    }
}

/* Y [rows, d], rows = batches * m: Y_t = sum_j A[t+r-j, j] X_{t+r-j} over rows in [0, n) */
__global__ void k_band_mix_t(const float *a, const float *x, float *y, int64_t rows, int64_t n,
                             int64_t m, int64_t d, int64_t r) {
    int64_t w = 2 * r + 1;
    TGCU_LOOP(e, rows * d) {
        int64_t row = e / d, c = e % d, b = row / m, tk = row % m;
        int64_t j0 = tk + r - (n - 1) > 0 ? tk + r - (n - 1) : 0, j1 = tk + r < w - 1 ? tk + r : w - 1;
        const float *ab = a + b * n * w, *xb = x + b * n * d;
        float acc = 0.0f;
        for (int64_t j = j0; j <= j1; j++) {
            int64_t i = tk + r - j;
            acc += ab[i * w + j] * xb[i * d + c];
        }
        y[e] = acc;
    }
}

extern "C" {

cudaError_t tgcu_band_scores(cudaStream_t s, const float *q, const float *k, float *o, int64_t rows,
                             int64_t n, int64_t m, int64_t dk, int64_t r, float fill) {
    int64_t total = rows * (2 * r + 1);
    if (total > 0)
        k_band_scores<<<tgcu_grid(total, TGCU_THREADS), TGCU_THREADS, 0, s>>>(q, k, o, rows, n, m, dk, r,
                                                                              fill);
    return cudaGetLastError();
}

cudaError_t tgcu_band_mix(cudaStream_t s, const float *p, const float *v, float *o, int64_t rows,
                          int64_t n, int64_t m, int64_t dv, int64_t r) {
    if (rows * dv > 0)
        k_band_mix<<<tgcu_grid(rows * dv, TGCU_THREADS), TGCU_THREADS, 0, s>>>(p, v, o, rows, n, m, dv, r);
    return cudaGetLastError();
}

cudaError_t tgcu_band_mix_t(cudaStream_t s, const float *a, const float *x, float *o, int64_t rows,
                            int64_t n, int64_t m, int64_t d, int64_t r) {
    if (rows * d > 0)
        k_band_mix_t<<<tgcu_grid(rows * d, TGCU_THREADS), TGCU_THREADS, 0, s>>>(a, x, o, rows, n, m, d, r);
    return cudaGetLastError();
}

} /* extern "C" */
