/* The CPU backend's switch for its 512-bit paths (isa.h). */
#include "backends/cpu/isa.h"

#include <stdatomic.h>

static atomic_bool avx512_off;

bool tg_cpu_isa_avx512(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    /* libgcc's answer also requires the OS to save the zmm and mask registers (XCR0) */
    return __builtin_cpu_supports("avx512f") &&
           !atomic_load_explicit(&avx512_off, memory_order_relaxed);
#else
    return false;
#endif
}

bool tg__cpu_isa_avx512(bool on) {
    atomic_store_explicit(&avx512_off, !on, memory_order_relaxed);
    return tg_cpu_isa_avx512();
}
