/* Which vector instruction sets the CPU backend's hand-written kernels use. Each kernel with an
 * AVX2 path checks the CPU itself (__builtin_cpu_supports); the 512-bit paths — the packed
 * GEMM's 6×32 micro-kernel, the small (attention) GEMM's 6×64 tiles, dropout's Philox, GELU and
 * its derivative — also ask here, so that one switch turns them all off and tests can run the
 * AVX2 paths on a CPU that has AVX-512. Every 512-bit path gives the same bits as the AVX2 one
 * it stands in for. */
#ifndef TG_CPU_ISA_H
#define TG_CPU_ISA_H

#include <stdbool.h>

/* Whether the 512-bit paths run: an x86-64 CPU with AVX-512F (its zmm state enabled by the
 * OS), and not switched off by tg__cpu_isa_avx512. */
bool tg_cpu_isa_avx512(void);

/* For tests: on, the 512-bit paths run where the CPU has AVX-512F (the default); off, the AVX2
 * ones. Returns whether they now run. Not for use while a graph runs. */
bool tg__cpu_isa_avx512(bool on);

#endif
