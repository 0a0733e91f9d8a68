/* cuBLAS for the CUDA backend, loaded with dlopen when the first CUDA backend is made, not
 * linked. Linking libcublas maps and relocates libcublasLt (~540 MB on disk) at every start of
 * every program that links tgraph: ~0.8 s and ~150 MiB of resident memory before main, on
 * machines without a GPU and in programs that only use the CPU backend (measured with a
 * program that prints its VmRSS: 1.2 MiB unlinked, 155 MiB linked to libcublas.so.13; the CUDA
 * runtime itself costs 0.3 MiB and stays linked — the kernels' registration needs it at load).
 * The library is looked up by soname (the build's cuBLAS major version), then at the path
 * found when the build was configured. The CUDA emulator of the tests (tests/cuda_emu) links
 * its own cuBLAS: TGCU_BLAS_LINKED takes the functions directly. */
#include <pthread.h>
#include <stdio.h>

#include "backends/cuda/cuda-host.h"

tgcu_blas_api tgcu_blas;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[768]; /* empty: loaded */

#if defined(TGCU_BLAS_LINKED)
static void load(void) {
    tgcu_blas = (tgcu_blas_api){cublasGetStatusString, cublasCreate,      cublasDestroy,
                                cublasSetStream,       cublasSetMathMode, cublasSgemmStridedBatched};
}
#else
#include <dlfcn.h>

#define TGCU_STR_(x) #x
#define TGCU_STR(x) TGCU_STR_(x)
#ifndef TGCU_CUBLAS_PATH
#define TGCU_CUBLAS_PATH ""
#endif

/* the exported names (cublas_v2.h maps cublasCreate to cublasCreate_v2, and so on) */
static void load(void) {
    const char *names[] = {"libcublas.so." TGCU_STR(CUBLAS_VER_MAJOR), TGCU_CUBLAS_PATH};
    void *h = NULL;
    const char *why = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) {
        if (!*names[i]) continue;
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) why = dlerror();
    }
    if (!h) {
        snprintf(load_error, sizeof load_error, "cannot load cuBLAS (%s): %s", names[0], why);
        return;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&tgcu_blas.status_string, "cublasGetStatusString"},
        {(void **)&tgcu_blas.create, "cublasCreate_v2"},
        {(void **)&tgcu_blas.destroy, "cublasDestroy_v2"},
        {(void **)&tgcu_blas.set_stream, "cublasSetStream_v2"},
        {(void **)&tgcu_blas.set_math_mode, "cublasSetMathMode"},
        {(void **)&tgcu_blas.sgemm_strided_batched, "cublasSgemmStridedBatched"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].fn = dlsym(h, syms[i].name))) {
            snprintf(load_error, sizeof load_error, "cuBLAS (%s) lacks %s", names[0], syms[i].name);
            return; /* the handle stays open: a process loads it at most once */
        }
}
#endif

tg_status tgcu_blas_load(void) {
    pthread_once(&once, load);
    if (load_error[0]) return tg_error_set(TG_ERR_BACKEND, "%s", load_error);
    return TG_OK;
}
