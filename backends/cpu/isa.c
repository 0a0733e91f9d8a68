/* The CPU backend's instruction-set level (isa.h): detection, the TG_CPU_ISA cap, and the one
 * variable every kernel table is indexed by. */
#include "backends/cpu/isa.h"

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg/backend.h"

static const char *const names[TG_CPU_ISA_LEVELS] = {"portable", "avx2", "avx512"};

/* The level in use; -1 until decided. */
static atomic_int level = -1;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

const char *tg_cpu_isa_level_name(tg_cpu_isa_level l) {
    return l >= 0 && l < TG_CPU_ISA_LEVELS ? names[l] : "?";
}

tg_cpu_isa_level tg_cpu_isa_supported(void) {
#if TG_CPU_X86
    /* libgcc's answers, filled in once at start-up; avx512f also requires the OS to save the
     * zmm and mask registers (XCR0) */
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return TG_CPU_ISA_PORTABLE;
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("bmi2")) return TG_CPU_ISA_AVX2;
    return TG_CPU_ISA_AVX512;
#else
    return TG_CPU_ISA_PORTABLE;
#endif
}

static int parse(const char *s) {
    for (int l = 0; l < TG_CPU_ISA_LEVELS; l++)
        if (strcmp(s, names[l]) == 0) return l;
    return -1;
}

static void read_env(void) {
    const tg_cpu_isa_level best = tg_cpu_isa_supported();
    int want = best;
    const char *s = getenv("TG_CPU_ISA");
    if (s != NULL && *s != '\0') {
        want = parse(s);
        if (want < 0) {
            fprintf(stderr, "tgraph: TG_CPU_ISA=%s is not one of portable, avx2, avx512; using %s\n", s,
                    names[best]);
            want = best;
        } else if (want > (int)best) {
            fprintf(stderr, "tgraph: TG_CPU_ISA=%s: this CPU lacks %s; using %s\n", s, s, names[best]);
        }
    }
    /* a cap set through the API before this point wins */
    int unset = -1;
    atomic_compare_exchange_strong(&level, &unset, want < (int)best ? want : (int)best);
}

void tg__cpu_isa_init(void) {
    pthread_once(&env_once, read_env);
}

tg_cpu_isa_level tg_cpu_isa(void) {
    int l = atomic_load_explicit(&level, memory_order_relaxed);
    if (l < 0) {
        tg__cpu_isa_init();
        l = atomic_load_explicit(&level, memory_order_relaxed);
    }
    return (tg_cpu_isa_level)l;
}

tg_cpu_isa_level tg__cpu_isa_cap(tg_cpu_isa_level cap) {
    tg__cpu_isa_init();
    const tg_cpu_isa_level best = tg_cpu_isa_supported();
    const tg_cpu_isa_level l = cap < best ? cap : best;
    atomic_store_explicit(&level, (int)l, memory_order_relaxed);
    return l;
}

const char *tg_cpu_isa_name(void) {
    return names[tg_cpu_isa()];
}

tg_status tg_cpu_set_isa(const char *name) {
    const int want = name ? parse(name) : -1;
    if (want < 0)
        return tg_error_set(TG_ERR_INVALID, "tg_cpu_set_isa: '%s' is not one of portable, avx2, avx512",
                            name ? name : "(null)");
    const tg_cpu_isa_level got = tg__cpu_isa_cap((tg_cpu_isa_level)want);
    if ((int)got < want)
        return tg_error_set(TG_ERR_UNSUPPORTED, "tg_cpu_set_isa: this CPU lacks %s; using %s", name,
                            names[got]);
    return TG_OK;
}
