/* Private to the cache implementation files: the handle layout and small helpers. */
#ifndef MJ_CACHE_INTERNAL_H
#define MJ_CACHE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache/cache.h"

#define MJC_APPLICATION_ID 0x4D4A4954 /* 'MJIT' */
#define MJC_SCHEMA_VERSION 1

/* A read-only snapshot layer. */
typedef struct mjc_layer {
    sqlite3 *conn; /* immutable: no locks, no WAL */
    char *path;
} mjc_layer;

struct mjc_db {
    pthread_mutex_t mu;  /* guards everything below except dir/path */
    struct mjc_db *next; /* registry walked around fork() */
    char *dir;           /* writable directory, NULL when none */
    char *path;          /* dir/megajit-cache.db, "" when none */
    int read_only;       /* requested, or the schema is newer than ours */
    int reopen;          /* conn was closed for a fork(); reopen before use */
    sqlite3 *conn;       /* NULL when there is no usable writable database */
    dev_t dev;           /* identity of the file conn opened; recovery compares it */
    ino_t ino;
    char journal[16];
    mjc_layer *layers; /* the snapshots that could be opened, in MEGAJIT_CACHE_RO order */
    size_t num_layers;
    char err[512];
    mjc_warn_fn warn; /* may be NULL */
    void *warn_ctx;
};

/* Result of opening one database file. */
typedef struct mjc_conn_info {
    sqlite3 *conn;
    int newer;     /* user_version above ours: opened read-only */
    int sqlite_rc; /* primary SQLite code of the failure, 0 when none */
    dev_t dev;
    ino_t ino;
    char journal[16];
} mjc_conn_info;

/* schema.c */
int mjc_schema_open(const char *path, int read_only, mjc_conn_info *ci, char *err, size_t errlen);
/* Opens an immutable snapshot and checks it is ours and, unless
 * allow_writable, that only its owner can write it (MJC_OK, MJC_ERR_FOREIGN,
 * MJC_ERR_UNSAFE, ...). */
int mjc_snapshot_open(const char *path, int allow_writable, sqlite3 **out, char *err,
                      size_t errlen);
/* "file:" URI of path with query appended; malloc'ed. */
char *mjc_uri(const char *path, const char *query);
void mjc_hash(const void *data, size_t size, uint8_t out[MJC_KEY_BYTES]);

/* lock.c */
/* Opens (creating) path and takes an exclusive flock on it, waiting at most
 * timeout_ms for another process to release it; the fd, or -1 with errno set
 * (ETIMEDOUT when the wait ran out). Closing the fd releases the lock. */
int mjc_lock_file(const char *path, int timeout_ms);
/* How long opening waits for another process creating or recovering the
 * database: as long as SQLite's busy timeout. */
#define MJC_WAIT_MS 60000

/* fs.c */
int mjc_mkdirs(const char *dir);
/* 1 when dir lives on a filesystem SQLite must not write to (network, FUSE). */
int mjc_fs_is_network(const char *dir);
int64_t mjc_file_size(const char *path);
/* The directory part of path ("." for a bare name, "/" for "/x"). */
void mjc_dirname(const char *path, char *out, size_t cap);
/* MJC_OK when path (absent counts as fine) is writable by its owner only and,
 * when must_own, owned by this user; a directory with the sticky bit may be
 * world-writable when sticky_ok (others can add files there, not replace
 * ours). Else MJC_ERR_UNSAFE with a sentence in why naming what, the path, the
 * reason, and ending with fix. */
int mjc_check_private(const char *what, const char *path, int must_own, int sticky_ok,
                      const char *fix, char *why, size_t whylen);

/* store.c: the helpers below expect db->mu held. */
void mjc_set_err(mjc_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands a sentence to the owner's warning callback, if it gave one. */
void mjc_warn(const mjc_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* What a caller of mjc_writable is about to do with the database. */
enum { MJC_NEED_READ = 0, MJC_NEED_MODIFY = 1, MJC_NEED_STORE = 2 };
/* mjc_writable's answer when the database does not exist and need is not
 * MJC_NEED_STORE: nothing to read or modify, which is not an error. */
#define MJC_ABSENT 1
/* Makes db->conn usable (attaching a database created since, reopening after
 * fork, creating directory and database for MJC_NEED_STORE); MJC_OK,
 * MJC_ABSENT, or an error already in db->err. */
int mjc_writable(mjc_db *db, int need);
/* Records a failed SQLite call; a corrupt database is moved aside and recreated. */
int mjc_sql_fail(mjc_db *db, int rc, const char *what);
/* BEGIN IMMEDIATE, retried with jitter when the busy timeout was not enough. */
int mjc_begin(mjc_db *db);
void mjc_rollback(mjc_db *db);
int mjc_is_corrupt(int rc);
void mjc_lock(mjc_db *db);
void mjc_unlock(mjc_db *db);

#endif
