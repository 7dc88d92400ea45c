/* Per-key compile locks: one process per host compiles a given kernel. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "cache/internal.h"

/* flock() rather than a row in the database: the kernel drops it when the holder
 * dies, so a crashed compiler never leaves a stale claim to clean up. */
int mjc_lock_key(mjc_db *db, const uint8_t key[MJC_KEY_BYTES], int *fd) {
    if (fd) *fd = -1;
    if (!db || !key || !fd) return MJC_ERR_ARG;
    if (!db->dir || db->read_only) return MJC_OK;
    char hex[33], path[4096];
    mjc_key_hex(key, hex);
    snprintf(path, sizeof path, "%s/locks/%s.lock", db->dir, hex);
    int f = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (f < 0 && errno == ENOENT) {
        /* The locks directory was removed (a manual cleanup) after open. */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/locks", db->dir);
        mjc_mkdirs(dir);
        f = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    }
    int err = errno;
    while (f >= 0 && flock(f, LOCK_EX) != 0) {
        err = errno;
        if (err != EINTR) {
            close(f);
            f = -1;
        }
    }
    if (f < 0) {
        mjc_lock(db);
        mjc_set_err(db, "cannot lock %s: %s", path, strerror(err));
        mjc_unlock(db);
        return MJC_ERR_IO;
    }
    *fd = f;
    return MJC_OK;
}

int mjc_lock_file(const char *path, int timeout_ms) {
    int fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    /* Polling with LOCK_NB bounds the wait, which a blocking flock() cannot.
     * Holders keep these locks only while they open or move aside a database,
     * so naps of at most a millisecond let many processes opening one new
     * cache take their turns quickly. */
    for (long waited_us = 0, nap_us = 100;; waited_us += nap_us) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        if (waited_us >= (long)timeout_ms * 1000) {
            errno = ETIMEDOUT;
            break;
        }
        struct timespec ts = {0, nap_us * 1000};
        nanosleep(&ts, NULL);
        if (nap_us < 1000) nap_us *= 2;
    }
    int err = errno;
    close(fd);
    errno = err;
    return -1;
}

void mjc_unlock_key(int fd) {
    if (fd >= 0) close(fd);
}
