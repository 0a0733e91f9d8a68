/* Fuzz harness: the safetensors reader (core/safetensors.c): open from memory, then every
 * name, shape, metadata entry and (for small tensors) the values as float32. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tg/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_st_file *f = NULL;
    if (tg_st_open_memory(data, size, "fuzz", &f) != TG_OK) return 0;
    size_t sum = 0;
    for (size_t i = 0; i < tg_st_metadata_count(f); i++)
        sum += strlen(tg_st_metadata_key(f, i)) + strlen(tg_st_metadata_value(f, i));
    for (size_t i = 0; i < tg_st_count(f); i++) {
        size_t k;
        if (tg_st_find(f, tg_st_name(f, i), &k) != TG_OK || k != i) abort();
        const int64_t *shape = tg_st_tensor_shape(f, i);
        for (int d = 0; d < tg_st_tensor_ndim(f, i); d++) sum += (size_t)shape[d];
        size_t n = tg_st_tensor_numel(f, i);
        if (n > (1u << 20)) continue;
        float *x = malloc((n ? n : 1) * sizeof *x);
        if (x && tg_st_read_f32(f, i, x, n) == TG_OK && n) sum += x[0] != x[0];
        free(x);
    }
    tg_st_close(f);
    return (int)(sum & 0);
}
