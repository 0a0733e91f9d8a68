/* Internal structure of a process group (include/tg/dist.h): the transport (MPI or none) as a
 * table of functions, and the state of a step's bucketed gradient exchange, shared by
 * parallel/dist.c (group logic, buckets), parallel/dist_mpi.c and parallel/dist_nccl.c. */
#ifndef TG_DIST_IMPL_H
#define TG_DIST_IMPL_H

#include "core/tg-impl.h"
#include "tg/dist.h"

typedef enum { TGD_F64, TGD_F32, TGD_I64 } tgd_type;
typedef enum { TGD_SUM, TGD_MAX, TGD_MIN } tgd_op;

typedef struct tgd_bucket {
    int64_t first, count; /* parameters order[first .. first + count) of the exchange */
    int64_t numel;        /* floats in the bucket */
    int64_t pending;      /* gradients not final yet this step */
    bool started;
    float *host;          /* packed gradients (host transports) */
    void *req;            /* the transport's request while in flight */
} tgd_bucket;

typedef struct tgd_transport {
    const char *name;
    /* blocking collectives over host memory */
    tg_status (*allreduce)(tg_dist *d, void *buf, int64_t n, tgd_type t, tgd_op op);
    tg_status (*bcast)(tg_dist *d, void *buf, size_t bytes, int root);
    /* non-blocking in-place sum of floats: start, wait (frees *req), and a progress poke */
    tg_status (*isum_f32)(tg_dist *d, float *buf, int64_t n, void **req);
    tg_status (*wait)(tg_dist *d, void **req);
    void (*progress)(tg_dist *d);
    void (*abort)(tg_dist *d, int code);
    void (*finalize)(tg_dist *d);
} tgd_transport;

/* A device-side gradient exchange (NCCL): buckets are reduced in place on the device. */
typedef struct tgd_device_xchg {
    tg_status (*start)(tg_dist *d, tgd_bucket *bk);
    tg_status (*finish)(tg_dist *d); /* wait for every started bucket */
    void (*destroy)(tg_dist *d);
} tgd_device_xchg;

struct tg_dist {
    int rank, size, local_rank, local_size;
    const tgd_transport *tp;
    void *tp_impl;
    const tgd_device_xchg *dev; /* NULL: gradients go through host buffers and the transport */
    void *dev_impl;
    char name[32];
    /* the gradient exchange */
    size_t bucket_bytes;
    tg_store *store;        /* the store the buckets were laid out for */
    int64_t nparams;        /* its parameter count then */
    int64_t *order;         /* trainable parameters, reverse store order */
    int64_t norder;
    int64_t *bucket_of;     /* parameter -> bucket (-1: not trainable) */
    tgd_bucket *buckets;
    int64_t nbuckets, next; /* next bucket to start, in order */
    bool active;            /* between grad_begin and grad_end */
    tg_status err;          /* first error of a hook call */
    char err_msg[512];
};

/* Set up the MPI transport (dist_mpi.c; TG_ERR_UNSUPPORTED without MPI). */
tg_status tgd_mpi_init(int *argc, char ***argv, tg_dist *d);
/* Make d[0..size) the ranks of a group of threads (dist_threads.c). */
tg_status tgd_threads_init(int size, tg_dist **d);
/* Set up NCCL on d for backend be (dist_nccl.c; TG_ERR_UNSUPPORTED without NCCL). */
tg_status tgd_nccl_init(tg_dist *d, tg_backend *be);

#endif
