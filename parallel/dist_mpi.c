/* The MPI transport of a process group (include/tg/dist.h): collectives on a duplicate of
 * MPI_COMM_WORLD whose error handler returns errors (so they become tg statuses instead of
 * ending the process inside the library), the hosts' ranks from MPI_Comm_split_type, and
 * non-blocking sums (MPI_Iallreduce) for the gradient buckets.
 *
 * Threading: MPI_THREAD_FUNNELED — only the thread that called tg_dist_mpi makes MPI calls
 * (the graph executor calls the gradient hook on that thread; OpenMP workers never do). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/dist-impl.h"

typedef struct {
    MPI_Comm comm;
    bool initialised_here;
} mpi_impl;

static tg_status mpi_status(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return TG_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    return tg_error_set(TG_ERR_BACKEND, "MPI: %s: %s", what, msg);
}

static MPI_Comm comm_of(tg_dist *d) { return ((mpi_impl *)d->tp_impl)->comm; }

static MPI_Datatype type_of(tgd_type t) {
    return t == TGD_F64 ? MPI_DOUBLE : t == TGD_F32 ? MPI_FLOAT : MPI_INT64_T;
}

static MPI_Op op_of(tgd_op op) { return op == TGD_SUM ? MPI_SUM : op == TGD_MAX ? MPI_MAX : MPI_MIN; }

static tg_status m_allreduce(tg_dist *d, void *buf, int64_t n, tgd_type t, tgd_op op) {
    if (n <= 0) return TG_OK;
    if (n > 0x7fffffff) return tg_error_set(TG_ERR_INVALID, "MPI: all-reduce of %lld elements", (long long)n);
    return mpi_status(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, type_of(t), op_of(op), comm_of(d)), "all-reduce");
}

static tg_status m_bcast(tg_dist *d, void *buf, size_t bytes, int root) {
    /* in pieces below INT_MAX bytes, MPI's count type */
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < bytes; off += piece) {
        size_t n = bytes - off < piece ? bytes - off : piece;
        tg_status st = mpi_status(MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, comm_of(d)), "broadcast");
        if (st) return st;
    }
    return TG_OK;
}

static tg_status m_isum(tg_dist *d, float *buf, int64_t n, void **req) {
    *req = NULL;
    if (n <= 0) return TG_OK;
    if (n > 0x7fffffff) return tg_error_set(TG_ERR_INVALID, "MPI: all-reduce of %lld floats", (long long)n);
    MPI_Request *r = malloc(sizeof *r);
    if (!r) return tg_error_set(TG_ERR_NOMEM, "MPI: out of memory");
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, comm_of(d), r);
    if (rc != MPI_SUCCESS) {
        free(r);
        return mpi_status(rc, "gradient all-reduce");
    }
    *req = r;
    return TG_OK;
}

static tg_status m_wait(tg_dist *d, void **req) {
    (void)d;
    MPI_Request *r = *req;
    if (!r) return TG_OK;
    int rc = MPI_Wait(r, MPI_STATUS_IGNORE);
    free(r);
    *req = NULL;
    return mpi_status(rc, "gradient all-reduce");
}

/* MPI moves non-blocking collectives forward only inside MPI calls: poke every bucket in
 * flight (MPI_Test on a finished request is harmless; it stays allocated until m_wait). */
static void m_progress(tg_dist *d) {
    for (int64_t b = 0; b < d->next; b++) {
        MPI_Request *r = d->buckets[b].req;
        int done = 0;
        if (r && *r != MPI_REQUEST_NULL) MPI_Test(r, &done, MPI_STATUS_IGNORE);
    }
}

static void m_abort(tg_dist *d, int code) { MPI_Abort(comm_of(d), code); }

static void m_finalize(tg_dist *d) {
    mpi_impl *m = d->tp_impl;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        MPI_Comm_free(&m->comm);
        if (m->initialised_here) MPI_Finalize();
    }
    free(m);
    d->tp_impl = NULL;
}

static const tgd_transport mpi_tp = {
    .name = "mpi",
    .allreduce = m_allreduce,
    .bcast = m_bcast,
    .isum_f32 = m_isum,
    .wait = m_wait,
    .progress = m_progress,
    .abort = m_abort,
    .finalize = m_finalize,
};

bool tg_have_mpi(void) { return true; }

tg_status tgd_mpi_init(int *argc, char ***argv, tg_dist *d) {
    mpi_impl *m = calloc(1, sizeof *m);
    if (!m) return tg_error_set(TG_ERR_NOMEM, "MPI: out of memory");
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) {
            free(m);
            return mpi_status(rc, "MPI_Init_thread");
        }
        m->initialised_here = true;
    }
    tg_status st = mpi_status(MPI_Comm_dup(MPI_COMM_WORLD, &m->comm), "MPI_Comm_dup");
    if (st == TG_OK) MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    if (st == TG_OK) st = mpi_status(MPI_Comm_rank(m->comm, &d->rank), "MPI_Comm_rank");
    if (st == TG_OK) st = mpi_status(MPI_Comm_size(m->comm, &d->size), "MPI_Comm_size");
    MPI_Comm host = MPI_COMM_NULL;
    if (st == TG_OK)
        st = mpi_status(MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &host),
                        "MPI_Comm_split_type");
    if (st == TG_OK) st = mpi_status(MPI_Comm_rank(host, &d->local_rank), "MPI_Comm_rank");
    if (st == TG_OK) st = mpi_status(MPI_Comm_size(host, &d->local_size), "MPI_Comm_size");
    if (host != MPI_COMM_NULL) MPI_Comm_free(&host);
    if (st) {
        if (m->initialised_here) MPI_Finalize();
        free(m);
        return st;
    }
    d->tp = &mpi_tp;
    d->tp_impl = m;
    snprintf(d->name, sizeof d->name, "mpi");
    return TG_OK;
}
