/* File-system calls of the writers (checkpoints, training state, metrics), with a fault-injection
 * point in front of each, as SQLite's test VFS does: a test can kill the process, or make the
 * device fail, at exactly the Nth write, fsync, close, rename, link or unlink, and then check
 * that nothing saved before is lost.
 *
 * TG_FAULT_INJECT (read once, at the first operation) is a test facility, not a user option:
 *   trace         print every operation to stderr as "tg-io N OP PATH" (N counts from 1)
 *   crash:N       the Nth operation does not happen: the process is killed (SIGKILL) instead,
 *                 as a power cut or `kill -9` would stop it at that instant
 *   enospc:N      the Nth and every later write and fsync fail with ENOSPC (a device that fills
 *                 up and stays full); other operations go through
 *   eio:N         only the Nth operation fails, with EIO
 * Operations are counted across the whole process, from 1. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/tg-impl.h"

enum { FI_UNSET, FI_OFF, FI_TRACE, FI_CRASH, FI_ENOSPC, FI_EIO };

static int fi_mode = FI_UNSET;
static long long fi_at;
static atomic_llong fi_count;

static void fi_init(void) {
    const char *e = getenv("TG_FAULT_INJECT");
    fi_mode = FI_OFF;
    if (!e || !*e) return;
    static const struct {
        const char *name;
        int mode;
    } modes[] = {{"crash:", FI_CRASH}, {"enospc:", FI_ENOSPC}, {"eio:", FI_EIO}};
    if (!strcmp(e, "trace")) {
        fi_mode = FI_TRACE;
        return;
    }
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        size_t n = strlen(modes[i].name);
        if (strncmp(e, modes[i].name, n)) continue;
        char *end;
        long long at = strtoll(e + n, &end, 10);
        if (*end || at < 1) break;
        fi_mode = modes[i].mode;
        fi_at = at;
        return;
    }
    fprintf(stderr, "tgraph: ignoring TG_FAULT_INJECT='%s' (trace, crash:N, enospc:N or eio:N)\n", e);
}

int tg__io_fault(const char *op, const char *path) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fi_init); /* writers may run on several threads */
    if (fi_mode == FI_OFF) return 0;
    long long n = atomic_fetch_add(&fi_count, 1) + 1;
    switch (fi_mode) {
    case FI_TRACE: fprintf(stderr, "tg-io %lld %s %s\n", n, op, path ? path : "-"); return 0;
    case FI_CRASH:
        if (n == fi_at) raise(SIGKILL);
        return 0;
    case FI_ENOSPC: return n >= fi_at && (!strcmp(op, "write") || !strcmp(op, "fsync")) ? ENOSPC : 0;
    case FI_EIO: return n == fi_at ? EIO : 0;
    default: return 0;
    }
}

#define FAULT(op, path)                     \
    do {                                    \
        int e_ = tg__io_fault(op, path);    \
        if (e_) {                           \
            errno = e_;                     \
            return -1;                      \
        }                                   \
    } while (0)

int tg__io_open(const char *path, int flags, int mode) {
    FAULT("open", path);
    return open(path, flags, mode);
}

int tg__io_write(int fd, const void *buf, size_t n, const char *path) {
    FAULT("write", path);
    const unsigned char *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int tg__io_writev(int fd, struct iovec *iov, int n, const char *path) {
    FAULT("write", path);
    while (n > 0) {
        ssize_t r = writev(fd, iov, n > IOV_MAX ? IOV_MAX : n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return -1;
        }
        /* skip what went out (all of it, or up to a short write's end), go on from there */
        size_t left = (size_t)r;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

int tg__io_fsync(int fd, const char *path) {
    FAULT("fsync", path);
    return fsync(fd);
}

int tg__io_close(int fd, const char *path) {
    int e = tg__io_fault("close", path);
    int r = close(fd); /* the descriptor is released even when the fault says it failed */
    if (e) {
        errno = e;
        return -1;
    }
    return r;
}

int tg__io_rename(const char *from, const char *to) {
    FAULT("rename", to);
    return rename(from, to);
}

int tg__io_link(const char *from, const char *to) {
    FAULT("link", to);
    return link(from, to);
}

int tg__io_unlink(const char *path) {
    FAULT("unlink", path);
    return unlink(path);
}

int tg__io_fsync_dir(const char *path) {
    char *dir = strdup(path);
    if (!dir) return -1;
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
    int e = tg__io_fault("fsync", d), r = -1;
    int fd = e ? -1 : open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        r = fsync(fd);
        close(fd);
    }
    free(dir);
    if (e) errno = e;
    return r;
}

int tg__io_fflush(FILE *f, const char *path) {
    FAULT("write", path);
    if (fflush(f) != 0 || ferror(f)) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}
