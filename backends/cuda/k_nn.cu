/* CUDA kernels of embedding lookup, its deterministic scatter-add backward, and id
 * validation (backends/cpu/k_nn.c).
 *
 * The scatter-add must not use float atomics: their order, hence the rounding, would change
 * from run to run. Instead every position r gets the 64-bit key (id[r] << 32) | r; CUB's radix
 * sort orders the keys, so each id's positions form one run in increasing r (the keys are
 * unique, so the order does not depend on the sort's stability); one thread per (run, column)
 * then adds the rows of its run in that order — the CPU's order, hence the CPU's value. */
#include <cub/device/device_radix_sort.cuh>

#include "backends/cuda/tgcu.cuh"

__global__ void k_check_init(unsigned long long *out) {
    out[0] = 0x7fffffffffffffffull; /* INT64_MAX: no bad id */
    out[1] = 0;
}

__global__ void k_check_ids(const int32_t *ids, int64_t n, int64_t V, bool use_ignore,
                            int32_t ignore, unsigned long long *out) {
    unsigned long long count = 0;
    TGCU_LOOP(i, n) {
        int32_t v = ids[i];
        if (use_ignore && v == ignore) continue;
        if (v < 0 || (int64_t)v >= V) atomicMin(&out[0], (unsigned long long)i);
        else count++;
    }
    if (count) atomicAdd(&out[1], count); /* integer sums: order-independent */
}

__global__ void k_embedding(const float *table, const int32_t *ids, float *o, int64_t n, int64_t V,
                            int64_t d) {
    TGCU_LOOP(e, n * d) {
        int64_t r = e / d, c = e % d, id = ids[r];
        o[e] = id >= 0 && id < V ? table[id * d + c] : NAN;
    }
}

__global__ void k_make_keys(const int32_t *ids, uint64_t *keys, int64_t n) {
    TGCU_LOOP(r, n) keys[r] = ((uint64_t)(uint32_t)ids[r] << 32) | (uint64_t)r;
}

/* Block per sorted position i; the block that starts a run of equal ids sums the run. */
__global__ void k_segment_sums(const uint64_t *keys, const float *dy, float *o, int64_t n,
                               int64_t d) {
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        uint64_t id = keys[i] >> 32;
        if (i > 0 && (keys[i - 1] >> 32) == id) continue; /* block-uniform */
        for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
            float acc = 0.0f;
            for (int64_t j = i; j < n && (keys[j] >> 32) == id; j++)
                acc += dy[(int64_t)(keys[j] & 0xffffffffu) * d + c];
            o[(int64_t)id * d + c] = acc;
        }
    }
}

/* Bits of the sort key that can be non-zero: 32 position bits plus those of ids < V. */
static int key_bits(int64_t V) {
    int b = 0;
    while (b < 31 && ((int64_t)1 << b) < V) b++;
    return 32 + b;
}

static size_t align256(size_t x) { return (x + 255) / 256 * 256; }

static size_t sort_temp_bytes(int64_t n, int64_t V) {
    size_t bytes = 0;
    cub::DeviceRadixSort::SortKeys(nullptr, bytes, (const uint64_t *)nullptr, (uint64_t *)nullptr,
                                   (int)n, 0, key_bits(V));
    return bytes;
}

extern "C" {

cudaError_t tgcu_check_ids(cudaStream_t s, const int32_t *ids, int64_t n, int64_t V,
                           bool use_ignore, int32_t ignore, int64_t *out) {
    unsigned long long *o = (unsigned long long *)out;
    k_check_init<<<1, 1, 0, s>>>(o);
    if (n > 0)
        k_check_ids<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(ids, n, V, use_ignore,
                                                                       ignore, o);
    return cudaGetLastError();
}

cudaError_t tgcu_embedding(cudaStream_t s, const float *table, const int32_t *ids, float *o,
                           int64_t n, int64_t V, int64_t d) {
    if (n > 0 && d > 0)
        k_embedding<<<tgcu_grid(n * d, TGCU_THREADS), TGCU_THREADS, 0, s>>>(table, ids, o, n, V, d);
    return cudaGetLastError();
}

size_t tgcu_embedding_back_scratch(int64_t n, int64_t V) {
    if (n <= 0) return 0;
    return 2 * align256((size_t)n * sizeof(uint64_t)) + align256(sort_temp_bytes(n, V));
}

cudaError_t tgcu_embedding_back(cudaStream_t s, const int32_t *ids, const float *dy, float *o,
                                int64_t n, int64_t V, int64_t d, void *scratch,
                                size_t scratch_bytes) {
    cudaError_t e = cudaMemsetAsync(o, 0, (size_t)(V * d) * sizeof(float), s);
    if (e != cudaSuccess || n <= 0 || d <= 0) return e;
    size_t kb = align256((size_t)n * sizeof(uint64_t));
    uint64_t *keys_in = (uint64_t *)scratch;
    uint64_t *keys_out = (uint64_t *)((char *)scratch + kb);
    void *temp = (char *)scratch + 2 * kb;
    size_t temp_bytes = scratch_bytes - 2 * kb;
    k_make_keys<<<tgcu_grid(n, TGCU_THREADS), TGCU_THREADS, 0, s>>>(ids, keys_in, n);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    e = cub::DeviceRadixSort::SortKeys(temp, temp_bytes, (const uint64_t *)keys_in, keys_out, (int)n,
                                       0, key_bits(V), s);
    if (e != cudaSuccess) return e;
    unsigned blocks = (unsigned)(n < 65536 ? n : 65536);
    k_segment_sums<<<blocks, tgcu_row_threads(d), 0, s>>>(keys_out, dy, o, n, d);
    return cudaGetLastError();
}

} /* extern "C" */
