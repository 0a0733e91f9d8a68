/* The vector maths' entry points (vmath.h): each runs the kernels of the instruction-set level
 * in use (isa.h), from the levels' tables (vmath-impl.h). */
#include "backends/cpu/vmath.h"

#include <stddef.h>

#include "backends/cpu/isa.h"
#include "backends/cpu/vmath-impl.h"

static const tg_cpu_vmath *const levels[TG_CPU_ISA_LEVELS] = {
    [TG_CPU_ISA_PORTABLE] = &tg__cpu_vmath_portable,
#if TG_CPU_X86
    [TG_CPU_ISA_AVX2] = &tg__cpu_vmath_avx2,
    [TG_CPU_ISA_AVX512] = &tg__cpu_vmath_avx512,
#endif
};

const tg_cpu_vmath *tg_cpu_vmath_at(tg_cpu_isa_level level) {
    return level >= 0 && level <= tg_cpu_isa_supported() ? levels[level] : NULL;
}

/* the level in use: never above what the CPU supports (isa.c) */
static const tg_cpu_vmath *now(void) {
    return levels[tg_cpu_isa()];
}

void tg_cpu_vexp(const float *x, float *y, int64_t n) {
    now()->vexp(x, y, n);
}
void tg_cpu_vtanh(const float *x, float *y, int64_t n) {
    now()->vtanh(x, y, n);
}
void tg_cpu_vgelu(const float *x, float *y, int64_t n) {
    now()->vgelu(x, y, n);
}
void tg_cpu_vgelu_back(const float *x, const float *dy, float *dx, int64_t n) {
    now()->vgelu_back(x, dy, dx, n);
}
void tg_cpu_vsoftmax_rows(const float *x, float *y, int64_t rows, int64_t d, bool log_out) {
    now()->softmax_rows(x, y, rows, d, log_out);
}
void tg_cpu_vsoftmax_back_rows(const float *y, const float *dy, float *dx, int64_t rows, int64_t d) {
    now()->softmax_back_rows(y, dy, dx, rows, d);
}
void tg_cpu_vlayer_norm_rows(const float *x, const float *gamma, const float *beta, float *y,
                             int64_t rows, int64_t d, float eps) {
    now()->layer_norm(x, gamma, beta, y, rows, d, eps);
}
void tg_cpu_vlayer_norm_back_rows(const float *x, const float *gamma, const float *dy, float *dx,
                                  int64_t rows, int64_t d, float eps) {
    now()->layer_norm_back(x, gamma, dy, dx, rows, d, eps);
}
void tg_cpu_vlayer_norm_stats(const float *x, int64_t rows, int64_t d, float eps, float *mean,
                              float *rstd) {
    now()->layer_norm_stats(x, rows, d, eps, mean, rstd);
}
float tg_cpu_vce_sumexp(const float *x, int64_t n, float *max, float *sum_x) {
    return now()->ce_sumexp(x, n, max, sum_x);
}
void tg_cpu_vce_grad(const float *x, int64_t n, float max, float inv, float scale, float base,
                     float *y) {
    now()->ce_grad(x, n, max, inv, scale, base, y);
}
