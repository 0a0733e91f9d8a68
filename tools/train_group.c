/* `tg train` in a group of MPI ranks: see tools/train_group.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli.h"
#include "tools/train_group.h"

int tg_train_group_join(const char *cmd, tg_dist **out) {
    *out = NULL;
    int size = 1;
    if (!tg_dist_launched(&size) || size < 2) return 0;
    if (!tg_have_mpi())
        return tg_cli_fail(cmd, TG_EXIT_USAGE,
                           "launched as one of %d MPI ranks, but this tg was built without MPI "
                           "(install libopenmpi-dev and rebuild; see docs/distributed.md)", size);
    if (tg_dist_mpi(NULL, NULL, out) != TG_OK)
        return tg_cli_fail(cmd, TG_EXIT_RUNTIME, "cannot join the MPI job: %s", tg_error_message());
    return 0;
}

static tg_status read_whole(const char *path, char **buf, uint64_t *len) {
    size_t n;
    *buf = tg_cli_read_file(path, &n);
    if (!*buf) return tg_error_set(TG_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    *len = n;
    return TG_OK;
}

static tg_status write_whole(const char *path, const char *buf, uint64_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return tg_error_set(TG_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    size_t w = fwrite(buf, 1, (size_t)len, f);
    int c = fclose(f);
    if (w != len || c != 0) return tg_error_set(TG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return TG_OK;
}

/* Rank 0's file `path` to every rank; ranks > 0 write it to dir/name and point path there. */
static tg_status share_one(tg_dist *d, char *path, size_t n, const char *dir, const char *name) {
    char *buf = NULL;
    uint64_t len = 0;
    tg_status st = tg_dist_rank(d) == 0 ? read_whole(path, &buf, &len) : TG_OK;
    st = tg_dist_agree(d, st);
    if (st == TG_OK) st = tg_dist_bcast(d, &len, sizeof len, 0);
    if (st == TG_OK && tg_dist_rank(d) != 0 && !(buf = malloc(len ? (size_t)len : 1)))
        st = tg_error_set(TG_ERR_NOMEM, "out of memory for '%s' (%llu bytes)", path, (unsigned long long)len);
    st = tg_dist_agree(d, st);
    if (st == TG_OK) st = tg_dist_bcast(d, buf, (size_t)len, 0);
    if (st == TG_OK && tg_dist_rank(d) != 0) {
        snprintf(path, n, "%s/%s", dir, name);
        st = write_whole(path, buf, len);
    }
    free(buf);
    return tg_dist_agree(d, st);
}

tg_status tg_train_group_share_files(tg_dist *d, char *model_path, char *state_path, size_t n, char *tmpdir,
                                     size_t tmpdir_n) {
    tmpdir[0] = '\0';
    tg_status st = TG_OK;
    if (tg_dist_rank(d) != 0) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, tmpdir_n, "%s/tg-rank%d-XXXXXX", base && *base ? base : "/tmp", tg_dist_rank(d));
        if (!mkdtemp(tmpdir)) {
            st = tg_error_set(TG_ERR_IO, "cannot create a directory '%s': %s", tmpdir, strerror(errno));
            tmpdir[0] = '\0';
        }
    }
    st = tg_dist_agree(d, st);
    if (st == TG_OK) st = share_one(d, model_path, n, tmpdir, "model.safetensors");
    if (st == TG_OK) st = share_one(d, state_path, n, tmpdir, "state.safetensors");
    return st;
}

void tg_train_group_cleanup(const char *tmpdir) {
    if (!tmpdir || !tmpdir[0]) return;
    char p[4200];
    snprintf(p, sizeof p, "%s/model.safetensors", tmpdir);
    unlink(p);
    snprintf(p, sizeof p, "%s/state.safetensors", tmpdir);
    unlink(p);
    rmdir(tmpdir);
}

int tg_train_group_threads(const tg_dist *d) {
    const char *env = getenv("TG_NUM_THREADS");
    if (env && atoi(env) > 0) return 0; /* the backend reads it */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int per = (int)(cores / (long)tg_dist_local_size(d));
    return per >= 1 ? per : 1;
}

tg_status tg_train_group_same(tg_dist *d, uint64_t value, const char *what) {
    /* max of (hi, lo, -hi, -lo) = the largest and the negated smallest halves: equal everywhere
     * when max == -(max of the negation); halves of 32 bits are exact in a double */
    double hi = (double)(value >> 32), lo = (double)(value & 0xffffffffu), x[4] = {hi, lo, -hi, -lo};
    tg_status st = tg_dist_max(d, x, 4);
    if (st) return st;
    if (x[0] != -x[2] || x[1] != -x[3])
        return tg_error_set(TG_ERR_INVALID, "the ranks were given different %s (every rank must get the same "
                                            "files and options)", what);
    return TG_OK;
}
