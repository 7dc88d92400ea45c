/* Filesystem facts the cache depends on: directory creation, the fs type and
 * who may write a path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cache/internal.h"

typedef struct fs_kind {
    unsigned long magic;
    const char *name;
    int network;
} fs_kind;

/* SQLite's locking is unreliable on network and FUSE filesystems (fcntl locks
 * and the mmap'ed WAL index are not coherent across hosts), so those refuse a
 * writable cache. 9p, overlay and tmpfs are local in every sandbox we run in. */
static const fs_kind kinds[] = {
    {0xEF53, "ext4", 0},       {0x58465342, "xfs", 0},     {0x9123683E, "btrfs", 0},
    {0x01021994, "tmpfs", 0},  {0x794C7630, "overlay", 0}, {0x01021997, "9p", 0},
    {0x2FC12FC1, "zfs", 0},    {0xF2F52010, "f2fs", 0},    {0x6969, "nfs", 1},
    {0x517B, "smb", 1},        {0xFF534D42, "cifs", 1},    {0xFE534D42, "smb2", 1},
    {0x0BD00BD0, "lustre", 1}, {0x47504653, "gpfs", 1},    {0x65735546, "fuse", 1},
    {0x00C36400, "ceph", 1},
};

/* A cache directory that does not exist yet will be created on the filesystem
 * of its nearest existing ancestor, so that one is asked. */
static const fs_kind *fs_lookup(const char *dir, unsigned long *magic) {
    if (!dir) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    struct statfs sf;
    while (statfs(path, &sf) != 0) {
        if (errno != ENOENT) return NULL;
        char *slash = strrchr(path, '/');
        if (slash && slash != path)
            *slash = '\0'; /* "/a/b" -> "/a", "a/b" -> "a" */
        else if (slash)
            snprintf(path, sizeof path, "/");
        else if (strcmp(path, ".") != 0)
            snprintf(path, sizeof path, "."); /* a relative path's last ancestor */
        else
            return NULL;
    }
    *magic = (unsigned long)sf.f_type & 0xFFFFFFFFul;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].magic == *magic) return &kinds[i];
    return NULL;
}

const char *mjc_filesystem_name(const char *dir) {
    static _Thread_local char unknown[32];
    unsigned long magic = 0;
    const fs_kind *k = fs_lookup(dir, &magic);
    if (k) return k->name;
    if (!magic) return "unknown";
    snprintf(unknown, sizeof unknown, "0x%lx", magic);
    return unknown;
}

int mjc_fs_is_network(const char *dir) {
    unsigned long magic = 0;
    const fs_kind *k = fs_lookup(dir, &magic);
    return k && k->network;
}

int mjc_mkdirs(const char *dir) {
    char *p = strdup(dir);
    if (!p) return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = '/';
    }
    int rc = mkdir(p, 0700) != 0 && errno != EEXIST ? -1 : 0;
    free(p);
    return rc;
}

int64_t mjc_file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

void mjc_dirname(const char *path, char *out, size_t cap) {
    snprintf(out, cap, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash)
        *(slash == out ? slash + 1 : slash) = '\0';
    else
        snprintf(out, cap, ".");
}

int mjc_check_private(const char *what, const char *path, int must_own, int sticky_ok,
                      const char *fix, char *why, size_t whylen) {
    struct stat st;
    if (stat(path, &st) != 0) return MJC_OK; /* absent: whoever creates it checks it */
    unsigned mode = (unsigned)st.st_mode & 07777;
    int others_write = (mode & 022) && !(sticky_ok && S_ISDIR(st.st_mode) && (mode & S_ISVTX));
    if (must_own && st.st_uid != geteuid()) {
        snprintf(why, whylen,
                 "%s %s belongs to another user (uid %u; this process runs as uid %u), who could "
                 "plant kernels this process would run; %s",
                 what, path, (unsigned)st.st_uid, (unsigned)geteuid(), fix);
        return MJC_ERR_UNSAFE;
    }
    if (others_write) {
        snprintf(why, whylen,
                 "%s %s is writable by %s (mode %04o), who could plant kernels this process "
                 "would run; %s",
                 what, path, (mode & 002) ? "every user" : "its group", mode, fix);
        return MJC_ERR_UNSAFE;
    }
    return MJC_OK;
}
