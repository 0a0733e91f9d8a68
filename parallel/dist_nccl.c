/* NCCL gradient exchange for the CUDA backend (include/tg/dist.h tg_dist_use_nccl): MPI starts
 * it (rank 0's ncclUniqueId goes to every rank by broadcast), then each bucket's gradients are
 * summed in place on the device by ncclAllReduce on a communication stream of its own. A bucket
 * is enqueued as soon as backward has issued the kernels that finish it: the communication
 * stream waits for an event recorded on the compute stream at that point, so the all-reduce
 * runs while the GPU computes the rest of backward; at the end the compute stream waits for the
 * communication stream (an event again, no host wait), so the optimizer kernels enqueued later
 * see the sums. Every rank enqueues the buckets in the same order (dist.c), as NCCL requires. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-access.h"
#include "parallel/dist-impl.h"

typedef struct {
    ncclComm_t comm;
    tg_backend *be;
    cudaStream_t stream;      /* the backend's compute stream (tgcu_stream_of) */
    cudaStream_t comm_stream;
    cudaEvent_t ready, done; /* compute -> communication, communication -> compute */
} nccl_impl;

static tg_status nccl_status(ncclResult_t r, const char *what) {
    if (r == ncclSuccess) return TG_OK;
    return tg_error_set(TG_ERR_BACKEND, "NCCL: %s: %s", what,
                        ncclGetErrorString(r));
}

static tg_status n_start(tg_dist *d, tgd_bucket *bk) {
    nccl_impl *n = d->dev_impl;
    tg_store *s = d->store;
    /* the bucket's gradients are final once the compute stream reaches this point */
    tg_status st = tgcu_status(cudaEventRecord(n->ready, n->stream), "cudaEventRecord");
    if (st == TG_OK) st = tgcu_status(cudaStreamWaitEvent(n->comm_stream, n->ready, 0), "cudaStreamWaitEvent");
    if (st) return st;
    st = nccl_status(ncclGroupStart(), "ncclGroupStart");
    for (int64_t k = 0; st == TG_OK && k < bk->count; k++) {
        int64_t i = d->order[bk->first + k];
        float *g = tg__store_grad_memory(s, i);
        st = nccl_status(ncclAllReduce(g, g, (size_t)tg_store_numel(s, i), ncclFloat32, ncclSum, n->comm, n->comm_stream),
                         "ncclAllReduce");
    }
    tg_status ge = nccl_status(ncclGroupEnd(), "ncclGroupEnd");
    return st ? st : ge;
}

/* The compute stream waits for every bucket; the host waits too, so that a failed collective
 * is reported at this step (the time of this wait is the exposed communication time). */
static tg_status n_finish(tg_dist *d) {
    nccl_impl *n = d->dev_impl;
    tg_status st = tgcu_status(cudaEventRecord(n->done, n->comm_stream), "cudaEventRecord");
    if (st == TG_OK) st = tgcu_status(cudaStreamWaitEvent(n->stream, n->done, 0), "cudaStreamWaitEvent");
    if (st == TG_OK) st = tgcu_status(cudaStreamSynchronize(n->comm_stream), "gradient all-reduce");
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(n->comm, &async) == ncclSuccess && async != ncclSuccess && st == TG_OK)
        st = nccl_status(async, "gradient all-reduce");
    return st;
}

static void n_destroy(tg_dist *d) {
    nccl_impl *n = d->dev_impl;
    if (n) {
        if (n->comm) ncclCommDestroy(n->comm);
        if (n->ready) cudaEventDestroy(n->ready);
        if (n->done) cudaEventDestroy(n->done);
        if (n->comm_stream) cudaStreamDestroy(n->comm_stream);
    }
    free(n);
    d->dev_impl = NULL;
    d->dev = NULL;
}

static const tgd_device_xchg nccl_xchg = {.start = n_start, .finish = n_finish, .destroy = n_destroy};

bool tg_have_nccl(void) { return true; }
bool tg_dist_can_use_nccl(const tg_backend *be) { return tgcu_is_cuda(be); }

tg_status tgd_nccl_init(tg_dist *d, tg_backend *be) {
    int device;
    cudaStream_t stream;
    if (!tgcu_is_cuda(be) || tgcu_stream_of(be, &device, &stream) != TG_OK)
        return tg_error_set(TG_ERR_UNSUPPORTED, "NCCL exchanges gradients of the cuda backend, not %s",
                            tg_backend_name(be));
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    tg_status st = d->rank == 0 ? nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId") : TG_OK;
    st = tg_dist_agree(d, st);
    if (st == TG_OK) st = tg_dist_bcast(d, &id, sizeof id, 0);
    if (st) return st;
    nccl_impl *n = calloc(1, sizeof *n);
    if (n) n->stream = stream;
    st = n ? tgcu_status(cudaSetDevice(device), "cudaSetDevice") : tg_error_set(TG_ERR_NOMEM, "NCCL: out of memory");
    if (st == TG_OK)
        st = tgcu_status(cudaStreamCreateWithFlags(&n->comm_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (st == TG_OK) st = tgcu_status(cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming), "cudaEventCreate");
    if (st == TG_OK) st = tgcu_status(cudaEventCreateWithFlags(&n->done, cudaEventDisableTiming), "cudaEventCreate");
    if (st == TG_OK) st = nccl_status(ncclCommInitRank(&n->comm, d->size, id, d->rank), "ncclCommInitRank");
    st = tg_dist_agree(d, st);
    d->dev_impl = n;
    if (st) {
        n_destroy(d);
        return st;
    }
    n->be = be;
    d->dev = &nccl_xchg;
    d->store = NULL; /* lay the buckets out again, without host buffers */
    snprintf(d->name, sizeof d->name, "mpi+nccl");
    return TG_OK;
}
