/* What other modules of the library may use of a CUDA backend (NCCL in parallel/ does): its
 * device and its one stream, and a tg status for a CUDA error. The backend's state itself stays
 * private to backends/cuda (cuda-host.h). Not installed; needs the CUDA runtime headers. */
#ifndef TG_CUDA_ACCESS_H
#define TG_CUDA_ACCESS_H

#include <cuda_runtime_api.h>

#include "core/tg-impl.h"

/* True if b is a CUDA backend. */
bool tgcu_is_cuda(const tg_backend *b);

/* The device and the stream of CUDA backend b (every kernel, copy and cuBLAS call of b goes on
 * that stream; work of another stream is ordered against it with events). TG_ERR_UNSUPPORTED,
 * message set, if b is not a CUDA backend. device or stream may be NULL. */
tg_status tgcu_stream_of(const tg_backend *b, int *device, cudaStream_t *stream);

/* A tg status for a CUDA error (TG_OK for cudaSuccess): TG_ERR_NOMEM for out-of-memory,
 * else TG_ERR_BACKEND, with cudaGetErrorString's text after "cuda backend: <what>: ".
 * Clears the runtime's last-error slot so a handled error does not resurface later. */
tg_status tgcu_status(cudaError_t e, const char *what);

#endif
