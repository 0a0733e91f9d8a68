/* The training directory: one commit point per save, the lock that keeps a second trainer out,
 * and the tidying of what a crash left behind.
 *
 * A save (tg_trainer_save) writes the model under a name of its own, ".tg-model-<step>
 * .safetensors", then the training state "state.safetensors", which names that model file in
 * its metadata ("model_file"). Each file is written to a temporary name, fsynced and renamed,
 * so the rename of state.safetensors is the one instant at which the directory moves from the
 * previous save to the new one: before it the old state names the old model file, which is
 * still there; after it the new state names the new one. Only then is "model.safetensors" (the
 * checkpoint users read) made a second name of the new model file (a hard link renamed into
 * place; a copy where the file system has no hard links) and the previous model file removed.
 * A crash at any instant therefore leaves a state and the model it names; a resume loads that
 * pair (tg_train_dir_model_path) and tg_train_dir_tidy puts model.safetensors right again and
 * removes temporary files and model files no state names. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tg/safetensors.h"
#include "core/tg-impl.h"
#include "train/train-impl.h"

#define MODEL_PREFIX ".tg-model-"
#define SUFFIX ".safetensors"
#define LOCK_NAME ".tg-train.lock"

static tg_status join(char *buf, size_t n, const char *dir, const char *name) {
    if (snprintf(buf, n, "%s/%s", dir, name) >= (int)n)
        return tg_error_set(TG_ERR_INVALID, "path '%s/%s' too long", dir, name);
    return TG_OK;
}

/* "PREFIX<digits>SUFFIX" */
static bool is_numbered(const char *name, const char *prefix, const char *suffix) {
    size_t p = strlen(prefix), s = strlen(suffix), n = strlen(name);
    if (n <= p + s || strncmp(name, prefix, p) || strcmp(name + n - s, suffix)) return false;
    for (size_t i = p; i < n - s; i++)
        if (name[i] < '0' || name[i] > '9') return false;
    return true;
}

/* A temporary file of the safetensors writer: "<name>.safetensors.tmp.<pid>". */
static bool is_temporary(const char *name) {
    const char *t = strstr(name, SUFFIX ".tmp.");
    if (!t || !t[strlen(SUFFIX ".tmp.")]) return false;
    for (t += strlen(SUFFIX ".tmp."); *t; t++)
        if (*t < '0' || *t > '9') return false;
    return true;
}

tg_status tg__train_model_file(int64_t step, char *buf, size_t n) {
    if (snprintf(buf, n, MODEL_PREFIX "%lld" SUFFIX, (long long)step) >= (int)n)
        return tg_error_set(TG_ERR_INVALID, "model file name too long");
    return TG_OK;
}

/* The model file named by dir's state ("" when there is no readable state naming one). */
static void committed_model(const char *dir, char *name, size_t n) {
    char path[4096];
    tg_st_file *f = NULL;
    name[0] = '\0';
    if (join(path, sizeof path, dir, "state.safetensors") || tg_st_open(path, &f)) {
        tg_error_clear();
        return;
    }
    const char *m = tg_st_metadata(f, "model_file");
    if (m && is_numbered(m, MODEL_PREFIX, SUFFIX) && strlen(m) < n) snprintf(name, n, "%s", m);
    tg_st_close(f);
}

tg_status tg_train_dir_model_path(const char *dir, char *buf, size_t n) {
    if (!dir || !buf) return tg_error_set(TG_ERR_INVALID, "tg_train_dir_model_path: NULL argument");
    char name[256];
    committed_model(dir, name, sizeof name);
    if (name[0]) {
        tg_status st = join(buf, n, dir, name);
        if (st || access(buf, F_OK) == 0) return st;
    }
    /* a state of an older tgraph, or a directory copied without its hidden files: the model
     * fingerprint in the state still guards the pairing */
    return join(buf, n, dir, "model.safetensors");
}

/* Copy src to dst through the fault-injectable calls (file systems without hard links). */
static int copy_file(const char *src, const char *dst) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -1;
    int out = tg__io_open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666), rc = out < 0 ? -1 : 0;
    char buf[1 << 16];
    ssize_t r;
    while (rc == 0 && (r = read(in, buf, sizeof buf)) != 0) {
        if (r < 0 && errno == EINTR) continue;
        rc = r < 0 ? -1 : tg__io_write(out, buf, (size_t)r, dst);
    }
    if (rc == 0) rc = tg__io_fsync(out, dst);
    int err = errno;
    if (out >= 0 && tg__io_close(out, dst) != 0 && rc == 0) err = errno, rc = -1;
    close(in);
    errno = err;
    return rc;
}

/* dir/to becomes another name of dir/from, atomically: a hard link (or a copy) under a
 * temporary name renamed over `to`. */
static tg_status publish(const char *dir, const char *from, const char *to) {
    char src[4096], dst[4096], tmp[4200];
    tg_status st = join(src, sizeof src, dir, from);
    if (st == TG_OK) st = join(dst, sizeof dst, dir, to);
    if (st) return st;
    struct stat a, b;
    if (stat(src, &a) == 0 && stat(dst, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return TG_OK; /* already (rename onto the same file would do nothing) */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dst, (long)getpid());
    unlink(tmp);
    int rc = tg__io_link(src, tmp);
    if (rc != 0 && errno != ENOSPC && errno != EIO && errno != ENOENT && errno != EACCES && errno != EROFS)
        rc = copy_file(src, tmp); /* EPERM, EXDEV, ENOTSUP, EMLINK: no hard links here */
    if (rc == 0) rc = tg__io_rename(tmp, dst);
    if (rc != 0) {
        int err = errno;
        unlink(tmp);
        return tg_error_set(TG_ERR_IO, "cannot write '%s': %s", dst, strerror(err));
    }
    (void)tg__io_fsync_dir(dst);
    return TG_OK;
}

tg_status tg__train_dir_publish(const char *dir, const char *model_file, const char *as) {
    return publish(dir, model_file, as);
}

/* Remove dir/name; a file already gone is not an error. */
static tg_status remove_file(const char *dir, const char *name) {
    char p[4096];
    tg_status st = join(p, sizeof p, dir, name);
    if (st == TG_OK && tg__io_unlink(p) != 0 && errno != ENOENT)
        st = tg_error_set(TG_ERR_IO, "cannot remove '%s': %s", p, strerror(errno));
    return st;
}

tg_status tg__train_dir_drop_models(const char *dir, const char *keep) {
    DIR *d = opendir(dir);
    if (!d) return tg_error_set(TG_ERR_IO, "cannot read directory '%s': %s", dir, strerror(errno));
    tg_status st = TG_OK;
    struct dirent *e;
    while (st == TG_OK && (e = readdir(d)))
        if (is_numbered(e->d_name, MODEL_PREFIX, SUFFIX) && (!keep || strcmp(e->d_name, keep)))
            st = remove_file(dir, e->d_name);
    closedir(d);
    return st;
}

tg_status tg_train_dir_tidy(const char *dir, bool clear) {
    if (!dir) return tg_error_set(TG_ERR_INVALID, "tg_train_dir_tidy: NULL argument");
    tg_status st = TG_OK;
    if (clear) {
        /* the state first: from then on the directory holds no resumable run, whatever follows */
        static const char *files[] = {"state.safetensors", "model.safetensors", "metrics.jsonl"};
        for (size_t i = 0; st == TG_OK && i < sizeof files / sizeof *files; i++) st = remove_file(dir, files[i]);
    }
    char keep[256];
    committed_model(dir, keep, sizeof keep);
    DIR *d = opendir(dir);
    if (!d) return tg_error_set(TG_ERR_IO, "cannot read directory '%s': %s", dir, strerror(errno));
    struct dirent *e;
    while (st == TG_OK && (e = readdir(d))) {
        const char *n = e->d_name;
        if (is_temporary(n) || (is_numbered(n, MODEL_PREFIX, SUFFIX) && strcmp(n, keep)) ||
            (clear && is_numbered(n, "checkpoint-", SUFFIX)))
            st = remove_file(dir, n);
    }
    closedir(d);
    /* a crash between a save's commit and its publication: model.safetensors is the previous
     * model (or absent); make it the committed one. Where the committed one is missing (a
     * directory copied without its hidden files), model.safetensors stays: the resume reads
     * it (tg_train_dir_model_path) */
    char kept[4096];
    if (st == TG_OK && keep[0] && join(kept, sizeof kept, dir, keep) == TG_OK && access(kept, F_OK) == 0)
        st = publish(dir, keep, "model.safetensors");
    return st;
}

/* ---- the lock ---- */

struct tg_train_lock {
    int fd;
};

tg_status tg_train_dir_lock(const char *dir, tg_train_lock **out) {
    if (!dir || !out) return tg_error_set(TG_ERR_INVALID, "tg_train_dir_lock: NULL argument");
    *out = NULL;
    char p[4096];
    tg_status st = join(p, sizeof p, dir, LOCK_NAME);
    if (st) return st;
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return tg_error_set(TG_ERR_IO, "cannot open the lock file '%s': %s", p, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        char pid[32] = "";
        ssize_t r = pread(fd, pid, sizeof pid - 1, 0);
        close(fd);
        pid[r > 0 ? r : 0] = '\0';
        pid[strspn(pid, "0123456789")] = '\0';
        if (err != EWOULDBLOCK)
            return tg_error_set(TG_ERR_IO, "cannot lock '%s': %s", p, strerror(err));
        return tg_error_set(TG_ERR_STATE, "'%s' is in use by another trainer (pid %s): wait for it to end or stop it",
                            dir, pid[0] ? pid : "unknown");
    }
    /* the holder's pid, for the message above (the lock, not the file's content, excludes) */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) { /* informative only */
    }
    tg_train_lock *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        return tg_error_set(TG_ERR_NOMEM, "tg_train_dir_lock: out of memory");
    }
    l->fd = fd;
    *out = l;
    return TG_OK;
}

void tg_train_dir_unlock(tg_train_lock *l) {
    if (!l) return;
    /* the file stays: removing it would let a trainer waiting on the old file and one creating
     * a new file both think they hold the lock */
    close(l->fd);
    free(l);
}

/* ---- metrics.jsonl on resume ---- */

tg_status tg__train_metrics_truncate(const char *path, int64_t step, bool *ended) {
    *ended = false;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? TG_OK : tg_error_set(TG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    tg_status st = TG_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
        close(fd); /* /dev/null, a pipe: nothing to cut */
        return TG_OK;
    }
    char *text = malloc((size_t)sb.st_size + 1);
    ssize_t got = text ? pread(fd, text, (size_t)sb.st_size, 0) : -1;
    if (got < 0) st = tg_error_set(TG_ERR_IO, "cannot read '%s'", path);
    /* keep the complete lines up to the first one past `step` (or without a step) */
    size_t keep = 0;
    while (st == TG_OK && keep < (size_t)got) {
        char *nl = memchr(text + keep, '\n', (size_t)got - keep);
        if (!nl) break;
        *nl = '\0';
        const char *s = strstr(text + keep, "\"step\":");
        char *end;
        long long v = s ? strtoll(s + 7, &end, 10) : -1;
        if (!s || end == s + 7 || v > step) break;
        *ended = v == step && !strncmp(text + keep, "{\"event\":\"end\",", 15);
        keep = (size_t)(nl - text) + 1;
    }
    if (st == TG_OK && keep < (size_t)got && ftruncate(fd, (off_t)keep) != 0)
        st = tg_error_set(TG_ERR_IO, "cannot truncate '%s': %s", path, strerror(errno));
    free(text);
    close(fd);
    return st;
}
