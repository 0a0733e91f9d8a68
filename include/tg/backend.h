/* tgraph — backends: where tensors live and ops run.
 *
 * A backend is created once and shared by stores and graph runs. The CPU backend is always
 * present; the CUDA backend exists when the library was built with it (tg_backend_cuda_new
 * then needs a GPU at run time).
 *
 * Threads. Any number of threads may use one backend at once: run graphs on it, allocate
 * and free on it (stores, graph workspaces), step optimizers whose stores live on it. The
 * results are those of the same calls made one after another: on the CPU backend bit for bit,
 * since a graph run that finds the backend's thread team busy with another thread's run goes on
 * its own thread alone, cut into the same shares as the team would cut it (the CUDA backend
 * serves one call at a time, on its one stream). Every other object — a graph, a store, an
 * optimizer, a model, a decoder — is used by one thread at a time; give each thread its own.
 * tg_backend_set_threads and tg_backend_free are not made while another thread uses the
 * backend. An error's message is kept per thread (tg_error_message). */
#ifndef TG_BACKEND_H
#define TG_BACKEND_H

#include "tg/export.h"

#include <stdbool.h>
#include <stddef.h>

#include "tg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_backend tg_backend;

/* ---- the registry: backends by name ---- */

/* What a backend is created with; zeros are the defaults. */
typedef struct tg_backend_options {
    int threads; /* CPU threads (0: TG_NUM_THREADS, else all cores); ignored by GPU backends */
    int device;  /* GPU index (0: the first); ignored by the CPU backend */
    const char *cpu_isa; /* cap of the CPU kernels' instruction set, as tg_cpu_set_isa (NULL: none) */
} tg_backend_options;

/* The backend registered as `name` ("cpu", "cuda"), created with opts (NULL: the defaults).
 * TG_ERR_INVALID naming the registered backends for an unknown name; a registered backend that
 * this build or machine lacks answers as its own constructor does (TG_ERR_UNSUPPORTED without
 * CUDA, TG_ERR_BACKEND without a GPU). */
TG_API tg_status tg_backend_new(const char *name, const tg_backend_options *opts, tg_backend **out);
/* The registered backend names joined by '|' ("cpu|cuda"): e.g. a command line's choices. */
TG_API const char *tg_backend_names(void);

/* A CPU backend with a team of `nthreads` threads, started here and kept until
 * tg_backend_free (0: the TG_NUM_THREADS environment variable, else OMP_NUM_THREADS, else the
 * cores the process may run on). The team runs each graph in one parallel region; idle
 * threads sleep. OpenBLAS is kept at one thread: tgraph splits GEMMs across its own threads so
 * the two thread pools never oversubscribe the cores. A team with one thread per CPU the
 * process may run on pins thread i to the i-th of them, the calling thread only while it runs
 * a job (its affinity is restored after) and only when its own mask holds the first of them;
 * the environment variable TG_CPU_BIND=0 leaves all placement to the kernel. Writes the new backend
 * to *out; the caller frees it with tg_backend_free. */
TG_API tg_status tg_backend_cpu_new(int nthreads, tg_backend **out);

/* The instruction set the CPU kernels use: "portable" (plain C), "avx2" (AVX2 + FMA) or
 * "avx512" (AVX-512F as well): the best this CPU has, unless capped. The level is the process's,
 * shared by every CPU backend, and decided when the first one is created. */
TG_API const char *tg_cpu_isa_name(void);
/* Caps the CPU kernels' instruction set at `level` ("portable", "avx2", "avx512") for the whole
 * process, as the environment variable TG_CPU_ISA does: for diagnosis, tests and benchmarks
 * (the AVX-512 kernels give the AVX2 ones' bits; the portable ones agree within float rounding).
 * Call it before graphs run. An unknown name is TG_ERR_INVALID and changes nothing; a level this
 * CPU lacks is TG_ERR_UNSUPPORTED naming what it has, and the best it has is used. */
TG_API tg_status tg_cpu_set_isa(const char *level);

/* A CUDA backend on device `device` (TG_ERR_UNSUPPORTED if built without CUDA, TG_ERR_BACKEND
 * with CUDA's message if no usable GPU). */
TG_API tg_status tg_backend_cuda_new(int device, tg_backend **out);

/* True if this build includes the CUDA backend. */
TG_API bool tg_have_cuda(void);

/* Free a backend (NULL is allowed). Stores and graphs using it must be freed first. */
TG_API void tg_backend_free(tg_backend *b);

/* "cpu" or "cuda". */
TG_API const char *tg_backend_name(const tg_backend *b);

/* Thread count of a CPU backend (1 for others); set it (n >= 1). */
TG_API int tg_backend_threads(const tg_backend *b);
TG_API tg_status tg_backend_set_threads(tg_backend *b, int n);

/* Peak bytes ever held by the backend's allocator (graph workspaces plus stores). */
TG_API size_t tg_backend_peak_bytes(const tg_backend *b);

#ifdef __cplusplus
}
#endif
#endif
