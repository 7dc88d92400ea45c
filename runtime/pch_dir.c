#include "runtime/pch_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/log.h"

/* Older builds named their directories megajit-pch-XXXXXX and took no lock, so
 * a directory of theirs looks abandoned while in use: the reaper matches only
 * this build's name and never touches theirs. */
#define SUFFIX_CHARS 6

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static char root[4096];
static int root_fd = -1; /* holds the flock that marks root as in use */
static pid_t root_pid;   /* the process root belongs to */
static int tried;        /* made, or failed and warned: not again in this process */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(const char *path) {
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* atexit: a forked child that inherited the handler leaves its parent's alone. */
static void remove_own(void) {
    pthread_mutex_lock(&mu);
    if (root[0] && root_pid == getpid()) {
        remove_tree(root);
        close(root_fd);
        root[0] = '\0';
        root_fd = -1;
    }
    pthread_mutex_unlock(&mu);
}

/* fork() holds mu so the child gets a consistent copy; the child then drops
 * its copy of the lock fd (the parent's lock stays, it is the parent's open
 * file) so the directory is not kept "in use" by a process that never uses it. */
static void before_fork(void) {
    pthread_mutex_lock(&mu);
}

static void after_fork_parent(void) {
    pthread_mutex_unlock(&mu);
}

static void after_fork_child(void) {
    if (root_fd >= 0) close(root_fd);
    root_fd = -1;
    root[0] = '\0';
    tried = 0;
    pthread_mutex_init(&mu, NULL);
}

static void install_hooks(void) {
    atexit(remove_own);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static const char *tmp_dir(void) {
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

/* Removes this user's PCH directories under tmp that no live process holds. */
static void reap(const char *tmp) {
    DIR *d = opendir(tmp);
    if (!d) return;
    const size_t prefix = strlen(MJ_PCH_DIR_PREFIX);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, MJ_PCH_DIR_PREFIX, prefix) != 0 ||
            strlen(e->d_name) != prefix + SUFFIX_CHARS)
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && flock(fd, LOCK_EX | LOCK_NB) == 0) {
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
            remove_tree(path);
            mj_log(MJ_LOG_DEBUG, "removed %s, left by a process that is gone", path);
        }
        close(fd);
    }
    closedir(d);
}

/* mkdtemp, then the lock. A reaper that looked in between took the new
 * directory for an abandoned one (it holds the lock, or already removed it);
 * then make another. */
static int make_root(const char *tmp) {
    for (int attempt = 0; attempt < 4; attempt++) {
        snprintf(root, sizeof root, "%s/" MJ_PCH_DIR_PREFIX "XXXXXX", tmp);
        if (!mkdtemp(root)) break;
        int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat held, named;
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &held) == 0 &&
            stat(root, &named) == 0 && held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
            root_fd = fd;
            return 0;
        }
        if (fd >= 0) close(fd);
        errno = EBUSY;
    }
    root[0] = '\0';
    return -1;
}

const char *mj_pch_dir(void) {
    pthread_once(&hooks_once, install_hooks);
    pthread_mutex_lock(&mu);
    if (!tried) {
        tried = 1;
        const char *tmp = tmp_dir();
        if (make_root(tmp) == 0) {
            root_pid = getpid();
            reap(tmp); /* after the lock, so this process's own is skipped */
        } else {
            mj_log(MJ_LOG_WARN,
                   "cannot create a PCH directory under %s (%s); compiling without PCH", tmp,
                   strerror(errno));
        }
    }
    const char *dir = root[0] ? root : NULL;
    pthread_mutex_unlock(&mu);
    return dir;
}
