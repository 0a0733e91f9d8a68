/* EMULATION ONLY: cub::DeviceRadixSort::SortKeys with std::sort (keys restricted to the bit range). */
#pragma once
#include <algorithm>
#include <stdint.h>
#include <string.h>
#include "cuda_runtime_api.h"
namespace cub {
struct DeviceRadixSort {
    template <typename K, typename N>
    static cudaError_t SortKeys(void *temp, size_t &bytes, const K *in, K *out, N n, int begin = 0,
                                int end = (int)sizeof(K) * 8, cudaStream_t s = 0) {
        (void)s;
        if (!temp) { bytes = 1000; return cudaSuccess; }
        if (bytes < 1000 || !emu_is_device(temp, bytes) || !emu_is_device(in, sizeof(K) * (size_t)n) ||
            !emu_is_device(out, sizeof(K) * (size_t)n)) return cudaErrorInvalidValue;
        for (N i = 0; i < n; i++) {
            K k = in[i];
            if (begin != 0 || (end < (int)sizeof(K) * 8 && (k >> end) != 0)) return cudaErrorInvalidValue; /* bits outside */
            out[i] = k;
        }
        std::stable_sort(out, out + n);
        return cudaSuccess;
    }
};
}
