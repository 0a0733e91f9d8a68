/* The one place that decides which instruction set the CPU backend's kernels use.
 *
 * Levels, each including the ones below it:
 *   TG_CPU_ISA_PORTABLE  plain C (any CPU, any architecture)
 *   TG_CPU_ISA_AVX2      x86-64 with AVX2 and FMA
 *   TG_CPU_ISA_AVX512    x86-64 with AVX-512F and BMI2 as well (and the OS saving zmm state)
 *
 * The level is what the CPU has, capped by the environment variable TG_CPU_ISA
 * (portable|avx2|avx512), by tg_backend_options.cpu_isa or by tg_cpu_set_isa() — as oneDNN's
 * ONEDNN_MAX_CPU_ISA, a cap for diagnosis, tests and benchmarks: a level the CPU lacks is never
 * used. It is decided once, the first time a CPU backend is created (or a kernel asks), and is
 * the process's: kernel code reads it through tg_cpu_isa() and picks its entry point from a
 * table indexed by level (vmath.c, gemm_small.c, gemm_packed.c, k_elementwise.c, and
 * TG_CPU_BY_LEVEL below). No other file asks the CPU what it supports.
 *
 * Bits across levels: the AVX-512 kernels give the AVX2 kernels' bits (tests hold them to it);
 * the portable kernels sum in other orders and round elsewhere, so their results agree with
 * the vector ones within float tolerance, not bit for bit (docs/design.md, "Instruction sets"). */
#ifndef TG_CPU_ISA_H
#define TG_CPU_ISA_H

#include <stdbool.h>

#include "tg/error.h"

typedef enum tg_cpu_isa_level {
    TG_CPU_ISA_PORTABLE = 0,
    TG_CPU_ISA_AVX2 = 1,
    TG_CPU_ISA_AVX512 = 2,
    TG_CPU_ISA_LEVELS
} tg_cpu_isa_level;

#if defined(__x86_64__) && defined(__GNUC__)
#define TG_CPU_X86 1
/* The function attributes of the x86 levels: every vector kernel is compiled with one of these
 * (the library itself is built for the baseline x86-64 unless -Dnative=true). */
#define TG_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TG_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f,bmi2")))
#else
#define TG_CPU_X86 0
#endif

/* The level the kernels use now. Cheap (one relaxed atomic load): kernels call it per call. */
tg_cpu_isa_level tg_cpu_isa(void);
/* The best level this CPU supports (what a cap cannot exceed). */
tg_cpu_isa_level tg_cpu_isa_supported(void);
/* "portable", "avx2" or "avx512". */
const char *tg_cpu_isa_level_name(tg_cpu_isa_level level);

/* Caps the level at `level`: the level becomes the lower of it and what the CPU supports,
 * which is returned (tg_cpu_set_isa; tests and benchmarks compare the levels' kernels in one
 * process, saving tg_cpu_isa() first and capping at it again after). Not while a graph runs. */
tg_cpu_isa_level tg__cpu_isa_cap(tg_cpu_isa_level level);

/* Reads TG_CPU_ISA once (cpu.c calls it when a backend is created). An unknown value, or a
 * level the CPU lacks, is said on stderr once and the best the CPU has is used. */
void tg__cpu_isa_init(void);

/* Plain loops that the compiler vectorises on its own (sums, compares, elementwise maps) are
 * built twice, for AVX2 and for the baseline the library is compiled for, and the level picks
 * one at each call. AVX2 without FMA: no multiply-add is contracted and no reduction is
 * reordered, so both give the same bits; only the speed differs (256-bit against 128-bit
 * vectors). Write the function as `TG_CPU_BODY ret name_body(params) {...}` and then
 * `TG_CPU_BY_LEVEL(attrs, name, (params), (args))`, which defines `static void name(params)`
 * (attrs: more attributes for the three functions, or nothing); TG_CPU_BY_LEVEL_RET for one
 * that returns a value. */
#define TG_CPU_BODY static inline __attribute__((always_inline))
#if TG_CPU_X86
#define TG_CPU_BY_LEVEL_(attrs, ret, RETURN, name, params, args)                                    \
    attrs __attribute__((target("avx2"))) static ret name##_avx2 params { RETURN name##_body args; } \
    attrs static ret name##_base params { RETURN name##_body args; }                                \
    attrs static ret name params {                                                                  \
        if (tg_cpu_isa() >= TG_CPU_ISA_AVX2) RETURN name##_avx2 args;                               \
        else RETURN name##_base args;                                                               \
    }
#else
#define TG_CPU_BY_LEVEL_(attrs, ret, RETURN, name, params, args)                                    \
    attrs static ret name params { RETURN name##_body args; }
#endif
#define TG_CPU_BY_LEVEL(attrs, name, params, args) TG_CPU_BY_LEVEL_(attrs, void, , name, params, args)
#define TG_CPU_BY_LEVEL_RET(attrs, ret, name, params, args)                                         \
    TG_CPU_BY_LEVEL_(attrs, ret, return, name, params, args)

#endif
