/* tgraph — data-parallel training across processes (MPI) and GPUs (NCCL).
 *
 * A tg_dist is a group of `size` processes (ranks) that train one model together: each rank
 * computes the gradient of its shard of every global batch, the gradients are summed by an
 * all-reduce, and every rank applies the same optimizer step, so the parameters stay identical
 * on every rank. Processes are launched by MPI (`mpirun -np N tg train ...`); gradients held on
 * the CPU are all-reduced with MPI, gradients on GPUs with NCCL (MPI then only starts it up).
 *
 * Collective calls: every function marked (collective) must be called by every rank of the
 * group, in the same order, or the group hangs; the trainer (tg_train_config.dist) does that.
 *
 * Errors: a failing rank must still take part in the collective calls that follow; tg_dist_agree
 * then hands every rank the failing rank's status and message, so all of them stop with it
 * instead of waiting forever for the one that left. A failure of the transport itself (a rank
 * killed, a network error) comes back as TG_ERR_BACKEND where MPI reports it; the tool then ends
 * the whole job (tg_dist_abort). */
#ifndef TG_DIST_H
#define TG_DIST_H

#include "tg/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg/backend.h"
#include "tg/error.h"
#include "tg/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_dist tg_dist;

/* Built with MPI / NCCL support (meson options mpi, nccl). */
TG_API bool tg_have_mpi(void);
TG_API bool tg_have_nccl(void);
/* Whether this process looks launched by an MPI launcher (Open MPI, MPICH, PMIx or Slurm's PMI
 * variables), and the group size the launcher announced (1 when not launched). */
TG_API bool tg_dist_launched(int *size_out);

/* A group of one process: every collective returns at once. */
TG_API tg_status tg_dist_local(tg_dist **out);
/* A group of `size` threads of this process (1..4096): out[r] is rank r's handle, for one thread
 * each to use, in the collectives as an MPI rank would (tg_dist_free by each thread). Every
 * collective is a meeting of the threads in shared memory: each rank's backend and model are
 * its own, and the gradients are summed in host memory (CPU backends). Data parallelism
 * without a launcher: on a small model, replicas that each keep their own activations in their
 * own core's caches are as fast as MPI ranks and can beat one graph whose every op the threads
 * split (docs/distributed.md, `tg train --replicas`). Transport "threads"; local rank = rank. */
TG_API tg_status tg_dist_threads(int size, tg_dist **out);
/* Join the MPI job (MPI_Init_thread unless MPI is initialised already). TG_ERR_UNSUPPORTED
 * without MPI support. (collective) */
TG_API tg_status tg_dist_mpi(int *argc, char ***argv, tg_dist **out);
/* Leave the group (MPI_Finalize if tg_dist_mpi initialised MPI). (collective) */
TG_API void tg_dist_free(tg_dist *d);
/* End every process of the job at once (MPI_Abort), for a tool that cannot continue after a
 * transport error; returns for a local group and a group of threads (whose transport cannot
 * fail). Never called by the library itself. */
TG_API void tg_dist_abort(tg_dist *d, int exit_code);

/* This process's rank (0-based) and the number of ranks of the group. */
TG_API int tg_dist_rank(const tg_dist *d);
TG_API int tg_dist_size(const tg_dist *d);
/* Rank among the processes on the same host, and their number (picks the GPU of a rank). */
TG_API int tg_dist_local_rank(const tg_dist *d);
TG_API int tg_dist_local_size(const tg_dist *d);
/* "mpi", "mpi+nccl", "threads" or "local". */
TG_API const char *tg_dist_transport(const tg_dist *d);

/* (collective) The first failing rank's status on every rank: TG_OK when every rank passed
 * TG_OK; otherwise the status of the lowest failing rank, with its message prefixed by
 * "rank R: " as this thread's error message. */
TG_API tg_status tg_dist_agree(tg_dist *d, tg_status st);
/* (collective) Element-wise sum (or maximum) of x[0..n) over the ranks, in place. */
TG_API tg_status tg_dist_sum(tg_dist *d, double *x, int n);
TG_API tg_status tg_dist_max(tg_dist *d, double *x, int n);
/* (collective) Copy root's bytes[0..n) to every rank. */
TG_API tg_status tg_dist_bcast(tg_dist *d, void *bytes, size_t n, int root);

/* (collective) Copy rank 0's parameter values to every rank (a new run starts from rank 0's
 * initialisation). */
TG_API tg_status tg_dist_broadcast_params(tg_dist *d, tg_store *s);
/* (collective) TG_ERR_STATE naming the first parameter whose bytes differ between ranks. */
TG_API tg_status tg_dist_check_params(tg_dist *d, tg_store *s);

/* Use NCCL for the gradients of store s on the CUDA backend be (each rank its own GPU).
 * (collective) TG_ERR_UNSUPPORTED without NCCL support or for another backend. */
TG_API tg_status tg_dist_use_nccl(tg_dist *d, tg_backend *be);
/* True when this build has NCCL and be is a backend whose gradients NCCL can sum (CUDA): when
 * tg_dist_use_nccl may be called (so callers need not know backends by name). */
TG_API bool tg_dist_can_use_nccl(const tg_backend *be);

/* ---- gradient all-reduce, bucketed and overlapped with backward -------------------------- */

/* Bucket size in bytes (default 4 MiB; TG_DIST_BUCKET_MB overrides). */
TG_API void tg_dist_set_bucket_bytes(tg_dist *d, size_t bytes);

/* Start a step's gradient exchange for store s: parameters are grouped into buckets in reverse
 * store order (the order backward finishes them); a bucket's all-reduce starts as soon as all of
 * its gradients are final (tg_dist_grad_ready) — while backward goes on — and in bucket order on
 * every rank. */
TG_API tg_status tg_dist_grad_begin(tg_dist *d, tg_store *s);
/* Parameter `param` of the store has its final gradient for this step (a graph hook:
 * tg_graph_set_grad_hook). Errors are kept for tg_dist_grad_end. */
TG_API void tg_dist_grad_ready(void *dist, const tg_store *s, int64_t param);
/* (collective) Start the buckets not started yet, wait for all, and leave the sum over the ranks
 * in every gradient. Must be called after tg_dist_grad_begin even when the step failed on this
 * rank (with `failed` true: the sums are then garbage but the ranks stay in step). *comm_s gets
 * the seconds spent waiting here (may be NULL). */
TG_API tg_status tg_dist_grad_end(tg_dist *d, bool failed, double *comm_s);

#ifdef __cplusplus
}
#endif
#endif
