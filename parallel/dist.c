/* Process groups (include/tg/dist.h): the one-process group, agreement on errors, parameter
 * broadcast and comparison, and the bucketed gradient all-reduce that starts buckets while
 * backward is still running.
 *
 * Why buckets: one all-reduce per parameter pays the transport's latency ~100 times a step;
 * one for the whole model can only start after backward. Buckets of a few MiB, laid out in the
 * order backward finishes the gradients (reverse store order: the output side first), start as
 * soon as their last gradient is final, so most of the exchange hides behind the rest of
 * backward. Every rank starts the buckets in the same order (bucket k only after k-1), which
 * collectives require, whatever order its own gradients finish in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/dist-impl.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool tg_dist_launched(int *size_out) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS", NULL};
    int size = 1;
    bool found = false;
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            found = true;
            int n = atoi(v);
            if (n > size && vars[i] != vars[3]) size = n;
        }
    }
    if (!found && getenv("PMIX_RANK")) found = true;
    if (size_out) *size_out = size;
    return found;
}

/* ---- the one-process group ---------------------------------------------------------------- */

static tg_status local_allreduce(tg_dist *d, void *buf, int64_t n, tgd_type t, tgd_op op) {
    (void)d, (void)buf, (void)n, (void)t, (void)op;
    return TG_OK;
}
static tg_status local_bcast(tg_dist *d, void *buf, size_t bytes, int root) {
    (void)d, (void)buf, (void)bytes, (void)root;
    return TG_OK;
}
static tg_status local_isum(tg_dist *d, float *buf, int64_t n, void **req) {
    (void)d, (void)buf, (void)n;
    *req = NULL;
    return TG_OK;
}
static tg_status local_wait(tg_dist *d, void **req) {
    (void)d;
    *req = NULL;
    return TG_OK;
}
static void local_noop(tg_dist *d) { (void)d; }
static void local_abort(tg_dist *d, int code) { (void)d, (void)code; }

static const tgd_transport local_tp = {
    .name = "local",
    .allreduce = local_allreduce,
    .bcast = local_bcast,
    .isum_f32 = local_isum,
    .wait = local_wait,
    .progress = local_noop,
    .abort = local_abort,
    .finalize = local_noop,
};

static tg_dist *dist_alloc(void) {
    tg_dist *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->size = d->local_size = 1;
    d->tp = &local_tp;
    snprintf(d->name, sizeof d->name, "local");
    d->bucket_bytes = (size_t)4 << 20;
    const char *mb = getenv("TG_DIST_BUCKET_MB");
    if (mb && atof(mb) > 0.0) d->bucket_bytes = (size_t)(atof(mb) * 1048576.0);
    return d;
}

tg_status tg_dist_local(tg_dist **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_dist_local: out is NULL");
    *out = dist_alloc();
    return *out ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_dist_local: out of memory");
}

tg_status tg_dist_mpi(int *argc, char ***argv, tg_dist **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_dist_mpi: out is NULL");
    *out = NULL;
    tg_dist *d = dist_alloc();
    if (!d) return tg_error_set(TG_ERR_NOMEM, "tg_dist_mpi: out of memory");
    tg_status st = tgd_mpi_init(argc, argv, d);
    if (st) {
        free(d);
        return st;
    }
    *out = d;
    return TG_OK;
}

tg_status tg_dist_threads(int size, tg_dist **out) {
    if (!out) return tg_error_set(TG_ERR_INVALID, "tg_dist_threads: out is NULL");
    if (size < 1 || size > 4096)
        return tg_error_set(TG_ERR_INVALID, "tg_dist_threads: size %d outside [1, 4096]", size);
    for (int r = 0; r < size; r++)
        out[r] = NULL;
    tg_status st = TG_OK;
    for (int r = 0; r < size && st == TG_OK; r++)
        if (!(out[r] = dist_alloc()))
            st = tg_error_set(TG_ERR_NOMEM, "tg_dist_threads: out of memory");
    if (st == TG_OK) st = tgd_threads_init(size, out);
    if (st)
        for (int r = 0; r < size; r++) {
            free(out[r]);
            out[r] = NULL;
        }
    return st;
}

static void free_buckets(tg_dist *d) {
    for (int64_t b = 0; b < d->nbuckets; b++) free(d->buckets[b].host);
    free(d->buckets);
    free(d->order);
    free(d->bucket_of);
    d->buckets = NULL;
    d->order = d->bucket_of = NULL;
    d->nbuckets = d->norder = 0;
    d->store = NULL;
}

void tg_dist_free(tg_dist *d) {
    if (!d) return;
    free_buckets(d);
    if (d->dev) d->dev->destroy(d);
    d->tp->finalize(d);
    free(d);
}

void tg_dist_abort(tg_dist *d, int exit_code) {
    if (d) d->tp->abort(d, exit_code);
}

int tg_dist_rank(const tg_dist *d) { return d ? d->rank : 0; }
int tg_dist_size(const tg_dist *d) { return d ? d->size : 1; }
int tg_dist_local_rank(const tg_dist *d) { return d ? d->local_rank : 0; }
int tg_dist_local_size(const tg_dist *d) { return d ? d->local_size : 1; }
const char *tg_dist_transport(const tg_dist *d) { return d ? d->name : "local"; }

/* ---- small collectives ---------------------------------------------------------------------- */

tg_status tg_dist_sum(tg_dist *d, double *x, int n) {
    if (!d || (!x && n > 0)) return tg_error_set(TG_ERR_INVALID, "tg_dist_sum: NULL argument");
    return d->tp->allreduce(d, x, n, TGD_F64, TGD_SUM);
}

tg_status tg_dist_max(tg_dist *d, double *x, int n) {
    if (!d || (!x && n > 0)) return tg_error_set(TG_ERR_INVALID, "tg_dist_max: NULL argument");
    return d->tp->allreduce(d, x, n, TGD_F64, TGD_MAX);
}

tg_status tg_dist_bcast(tg_dist *d, void *bytes, size_t n, int root) {
    if (!d || (!bytes && n > 0)) return tg_error_set(TG_ERR_INVALID, "tg_dist_bcast: NULL argument");
    if (root < 0 || root >= d->size)
        return tg_error_set(TG_ERR_INVALID, "tg_dist_bcast: root %d outside [0, %d)", root, d->size);
    return d->tp->bcast(d, bytes, n, root);
}

tg_status tg_dist_agree(tg_dist *d, tg_status st) {
    if (!d || d->size == 1) return st;
    /* the lowest failing rank, or size when none failed */
    int64_t first = st ? d->rank : d->size;
    tg_status cs = d->tp->allreduce(d, &first, 1, TGD_I64, TGD_MIN);
    if (cs) return cs;
    if (first >= d->size) return TG_OK;
    struct {
        int32_t status;
        char msg[1020];
    } e;
    memset(&e, 0, sizeof e);
    if (d->rank == first) {
        e.status = (int32_t)st;
        snprintf(e.msg, sizeof e.msg, "%s", tg_error_message());
    }
    cs = d->tp->bcast(d, &e, sizeof e, (int)first);
    if (cs) return cs;
    e.msg[sizeof e.msg - 1] = '\0';
    return tg_error_set(e.status ? (tg_status)e.status : TG_ERR_BACKEND, "rank %lld: %s", (long long)first, e.msg);
}

/* ---- parameters ------------------------------------------------------------------------------ */

tg_status tg_dist_broadcast_params(tg_dist *d, tg_store *s) {
    if (!d || !s) return tg_error_set(TG_ERR_INVALID, "tg_dist_broadcast_params: NULL argument");
    if (d->size == 1) return TG_OK;
    const int64_t n = tg_store_count(s);
    int64_t most = 0;
    for (int64_t i = 0; i < n; i++) most = tg_store_numel(s, i) > most ? tg_store_numel(s, i) : most;
    float *buf = malloc((size_t)(most ? most : 1) * sizeof *buf);
    tg_status st = buf ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_dist_broadcast_params: out of memory");
    /* every rank runs every broadcast, even after a local error, so the ranks stay in step */
    tg_status local = st;
    for (int64_t i = 0; i < n && buf; i++) {
        const int64_t numel = tg_store_numel(s, i);
        if (d->rank == 0 && local == TG_OK) local = tg_store_read(s, i, buf, numel);
        tg_status cs = d->tp->bcast(d, buf, (size_t)numel * sizeof(float), 0);
        if (cs) {
            free(buf);
            return cs;
        }
        if (d->rank != 0 && local == TG_OK) local = tg_store_write(s, i, buf, numel);
    }
    free(buf);
    return tg_dist_agree(d, local);
}

tg_status tg_dist_check_params(tg_dist *d, tg_store *s) {
    if (!d || !s) return tg_error_set(TG_ERR_INVALID, "tg_dist_check_params: NULL argument");
    if (d->size == 1) return TG_OK;
    int64_t n = tg_store_count(s), most = 1;
    for (int64_t i = 0; i < n; i++) most = tg_store_numel(s, i) > most ? tg_store_numel(s, i) : most;
    int64_t *lo = malloc((size_t)(2 * n + 1) * sizeof *lo);
    float *buf = malloc((size_t)most * sizeof *buf);
    tg_status st = lo && buf ? TG_OK : tg_error_set(TG_ERR_NOMEM, "tg_dist_check_params: out of memory");
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        const int64_t numel = tg_store_numel(s, i);
        const size_t bytes = (size_t)numel * sizeof(float);
        st = tg_store_read(s, i, buf, numel);
        uint64_t h = tg__fnv1a(TG_FNV1A_INIT, buf, bytes);
        memcpy(&lo[i], &h, sizeof h);
    }
    st = tg_dist_agree(d, st);
    if (st == TG_OK) {
        int64_t *hi = lo + n;
        memcpy(hi, lo, (size_t)n * sizeof *lo);
        st = d->tp->allreduce(d, lo, n, TGD_I64, TGD_MIN);
        if (st == TG_OK) st = d->tp->allreduce(d, hi, n, TGD_I64, TGD_MAX);
        for (int64_t i = 0; st == TG_OK && i < n; i++)
            if (lo[i] != hi[i])
                st = tg_error_set(TG_ERR_STATE, "parameter '%s' differs between the ranks", tg_store_name(s, i));
    }
    free(lo);
    free(buf);
    return st;
}

tg_status tg_dist_use_nccl(tg_dist *d, tg_backend *be) {
    if (!d || !be) return tg_error_set(TG_ERR_INVALID, "tg_dist_use_nccl: NULL argument");
    if (d->dev) return TG_OK;
    return tgd_nccl_init(d, be);
}

/* ---- the bucketed gradient exchange ---------------------------------------------------------- */

void tg_dist_set_bucket_bytes(tg_dist *d, size_t bytes) {
    if (!d || bytes == 0 || d->active) return;
    d->bucket_bytes = bytes;
    free_buckets(d); /* laid out again at the next step */
}

static tg_status layout(tg_dist *d, tg_store *s) {
    free_buckets(d);
    const int64_t n = tg_store_count(s);
    d->order = malloc((size_t)(n ? n : 1) * sizeof *d->order);
    d->bucket_of = malloc((size_t)(n ? n : 1) * sizeof *d->bucket_of);
    d->buckets = calloc((size_t)(n ? n : 1), sizeof *d->buckets);
    if (!d->order || !d->bucket_of || !d->buckets) {
        free_buckets(d);
        return tg_error_set(TG_ERR_NOMEM, "tg_dist: out of memory for the gradient buckets");
    }
    size_t cap = d->bucket_bytes / sizeof(float);
    for (int64_t i = n - 1; i >= 0; i--) {
        d->bucket_of[i] = -1;
        if (!tg_store_trainable(s, i)) continue;
        const int64_t numel = tg_store_numel(s, i);
        tgd_bucket *bk = d->nbuckets ? &d->buckets[d->nbuckets - 1] : NULL;
        if (!bk || (bk->numel > 0 && (size_t)(bk->numel + numel) > cap)) {
            bk = &d->buckets[d->nbuckets++];
            bk->first = d->norder;
        }
        bk->count++;
        bk->numel += numel;
        d->bucket_of[i] = d->nbuckets - 1;
        d->order[d->norder++] = i;
    }
    for (int64_t b = 0; !d->dev && b < d->nbuckets; b++)
        if (!(d->buckets[b].host = malloc((size_t)d->buckets[b].numel * sizeof(float)))) {
            free_buckets(d);
            return tg_error_set(TG_ERR_NOMEM, "tg_dist: out of memory for the gradient buckets");
        }
    d->store = s;
    d->nparams = n;
    return TG_OK;
}

static void keep_error(tg_dist *d, tg_status st) {
    if (st && !d->err) {
        d->err = st;
        snprintf(d->err_msg, sizeof d->err_msg, "%s", tg_error_message());
    }
}

/* Pack a bucket's gradients and start its sum (host transports), or hand it to the device
 * exchange. */
static tg_status start_bucket(tg_dist *d, tgd_bucket *bk) {
    bk->started = true;
    if (d->dev) return d->dev->start(d, bk);
    tg_store *s = d->store;
    float *p = bk->host;
    tg_status st = TG_OK;
    for (int64_t k = 0; k < bk->count; k++) {
        int64_t i = d->order[bk->first + k];
        const int64_t numel = tg_store_numel(s, i);
        /* a failed rank still sends (garbage): the others are waiting for this bucket */
        if (st == TG_OK) st = tg_store_read_grad(s, i, p, numel);
        p += numel;
    }
    tg_status cs = d->tp->isum_f32(d, bk->host, bk->numel, &bk->req);
    return st ? st : cs;
}

static void start_ready(tg_dist *d) {
    while (d->next < d->nbuckets && d->buckets[d->next].pending == 0) {
        keep_error(d, start_bucket(d, &d->buckets[d->next]));
        d->next++;
    }
}

tg_status tg_dist_grad_begin(tg_dist *d, tg_store *s) {
    if (!d || !s) return tg_error_set(TG_ERR_INVALID, "tg_dist_grad_begin: NULL argument");
    if (d->store != s || d->nparams != tg_store_count(s)) {
        tg_status st = layout(d, s);
        if (st) return st;
    }
    for (int64_t b = 0; b < d->nbuckets; b++) {
        d->buckets[b].pending = d->buckets[b].count;
        d->buckets[b].started = false;
    }
    d->next = 0;
    d->err = TG_OK;
    d->active = true;
    return TG_OK;
}

void tg_dist_grad_ready(void *dist, const tg_store *s, int64_t param) {
    tg_dist *d = dist;
    if (!d || !d->active || s != d->store || param < 0 || param >= d->nparams || d->size == 1) return;
    int64_t b = d->bucket_of[param];
    if (b < 0 || d->buckets[b].started) return;
    d->buckets[b].pending--;
    start_ready(d);
    d->tp->progress(d);
}

tg_status tg_dist_grad_end(tg_dist *d, bool failed, double *comm_s) {
    if (!d) return tg_error_set(TG_ERR_INVALID, "tg_dist_grad_end: NULL group");
    if (!d->active) return tg_error_set(TG_ERR_STATE, "tg_dist_grad_end: no exchange begun");
    double t0 = now_s();
    d->active = false;
    if (d->size == 1) {
        if (comm_s) *comm_s = 0.0;
        return TG_OK;
    }
    /* gradients that never became ready (parameters outside this step's graph) are final now */
    for (int64_t b = d->next; b < d->nbuckets; b++) d->buckets[b].pending = 0;
    start_ready(d);
    tg_status st = TG_OK;
    if (d->dev) {
        st = d->dev->finish(d);
    } else {
        tg_store *s = d->store;
        for (int64_t b = 0; b < d->nbuckets; b++) {
            tgd_bucket *bk = &d->buckets[b];
            tg_status ws = d->tp->wait(d, &bk->req);
            if (ws && !st) st = ws;
            const float *p = bk->host;
            for (int64_t k = 0; k < bk->count && st == TG_OK && !failed; k++) {
                int64_t i = d->order[bk->first + k];
                const int64_t numel = tg_store_numel(s, i);
                st = tg_store_write_grad(s, i, p, numel);
                p += numel;
            }
        }
    }
    if (comm_s) *comm_s = now_s() - t0;
    if (d->err) return tg_error_set(d->err, "%s", d->err_msg);
    return st;
}
