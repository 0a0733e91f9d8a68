/* Internal interface of the CPU backend: one kernel entry point per group of ops. Kernels
 * read contiguous inputs (the graph builders guarantee it; matmul also reads row- or
 * column-contiguous views) and write contiguous outputs. Parallel loops use OpenMP with static
 * schedules, so results are bit-identical for a given thread count. */
#ifndef TG_CPU_IMPL_H
#define TG_CPU_IMPL_H

#include "core/tg-impl.h"

/* Work below this many elements runs on one thread (thread start-up costs more). */
#define TG_PAR_MIN 16384

#define F32(t) ((float *)(t)->data)
#define I32(t) ((int32_t *)(t)->data)

tg_status tg_cpu_elementwise(tg_backend *b, tg_tensor *t); /* fill, binary, unary, masks, dropout */
tg_status tg_cpu_layout(tg_backend *b, tg_tensor *t);      /* cont, concat, pad, expand */
tg_status tg_cpu_reduce(tg_backend *b, tg_tensor *t);      /* sum, max, max_back, sum_to */
tg_status tg_cpu_rows(tg_backend *b, tg_tensor *t);        /* softmax, log-softmax, layer norm */
tg_status tg_cpu_matmul(tg_backend *b, tg_tensor *t);
tg_status tg_cpu_nn(tg_backend *b, tg_tensor *t);          /* embedding, cross-entropy, grad_acc */

/* A vectorisable exp for float (Cephes-style range reduction and polynomial, ~2 ulp). */
static inline float tg_fast_expf(float x) {
    x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
    float n = __builtin_roundf(x * 1.44269504088896341f);
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } u = {.i = ((int32_t)n + 127) << 23};
    return p * u.f;
}

#endif
