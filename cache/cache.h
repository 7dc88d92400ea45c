/*
 * The on-disk kernel cache: one SQLite database per cache directory plus
 * read-only snapshot layers. Knows nothing about CUDA or the runtime; keys are
 * opaque 16-byte digests computed by the caller.
 *
 * Thread safety: a handle may be used from several threads (internal mutex).
 * After fork() the child reopens its connection on first use.
 */
#ifndef MJ_CACHE_H
#define MJ_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct mjc_db mjc_db;

enum mjc_rc {
    MJC_OK = 0,
    MJC_ERR_ARG = -1,
    MJC_ERR_IO = -2,
    MJC_ERR_FOREIGN = -3, /* not a megajit cache database */
    MJC_ERR_NETWORK = -4, /* writable cache on a network filesystem */
    MJC_ERR_NOT_FOUND = -5,
    MJC_ERR_AMBIGUOUS = -6,
    MJC_ERR_NOMEM = -7,
    MJC_ERR_SQLITE = -8,
    MJC_ERR_READ_ONLY = -9,
    MJC_ERR_UNSAFE = -10, /* others could write it: refused (see mjc_open) */
};

#define MJC_KEY_BYTES 16
#define MJC_DB_FILE "megajit-cache.db"

/* Receives one sentence for each problem the cache got past on its own (a
 * corrupt database moved aside, an entry that failed its checksum, a snapshot
 * skipped): the cache never prints, its owner decides where warnings go. */
typedef void (*mjc_warn_fn)(void *ctx, const char *message);

typedef struct mjc_open_opts {
    const char *dir;       /* writable cache directory; NULL = none (read-only layers only) */
    const char *ro_layers; /* colon-separated snapshot files, opened immutable; may be NULL */
    int read_only;         /* open dir's database read-only (inspection) */
    int create;            /* create dir and its database now (ignored when read_only) */
    int ro_allow_writable; /* use snapshots others can write too (the operator opted in) */
    mjc_warn_fn warn;      /* NULL: such problems go unreported */
    void *warn_ctx;
} mjc_open_opts;

/* Opening creates nothing unless opts->create is set: a writable handle
 * creates the directory and the database at its first store (mjc_insert,
 * mjc_import), so a process that only looks things up, or a command that
 * only inspects, leaves no cache behind. A database that does not exist yet
 * reads as an empty cache.
 *
 * A cache holds code this process will run, so anyone who can write it can
 * plant a kernel. A writable cache whose directory or database is writable by
 * group or others, or owned by another user, is refused (MJC_ERR_UNSAFE, with
 * the fix in the message, as ssh refuses a key file others can read); so is a
 * snapshot that group or others can write (or replace: its directory), which
 * is then skipped, unless opts->ro_allow_writable. Inspection (read_only) checks
 * nothing: it runs no kernel.
 *
 * On failure returns an mjc_rc and writes a sentence into err. */
int mjc_open(const mjc_open_opts *opts, mjc_db **out, char *err, size_t errlen);
void mjc_close(mjc_db *db);
/* The last error sentence of this handle. */
const char *mjc_errmsg(const mjc_db *db);
/* Path of the writable database ("" when none). */
const char *mjc_path(const mjc_db *db);
/* 1 when the writable database only reads: opened read_only, or written by a
 * newer megajit. */
int mjc_is_read_only(const mjc_db *db);

/* One header of a kernel's include closure. */
typedef struct mjc_header {
    const char *path; /* relative to the template root */
    uint8_t content_hash[MJC_KEY_BYTES];
} mjc_header;

typedef struct mjc_entry {
    uint8_t key[MJC_KEY_BYTES];
    const char *family;
    const char *kernel_name;  /* name expression, e.g. "mj::pre_dispatch_kernel<7168, 3, 8>" */
    const char *lowered_name; /* mangled symbol */
    const char *arch;         /* "sm_90a" */
    const char *compiler;     /* "nvrtc 13.0.88" */
    const char *flags;        /* normalized flags as keyed */
    const char *source;       /* rendered instantiation source */
    const char *log;          /* NVRTC log, may be "" */
    const void *cubin;
    size_t cubin_size;
    double compile_ms;
    const mjc_header *headers;
    size_t num_headers;
} mjc_entry;

/* A found cubin, malloc'ed; free with mjc_found_free. */
typedef struct mjc_found {
    void *cubin;
    size_t cubin_size;
    char *lowered_name;
    int from_snapshot; /* 1 when served by a read-only layer */
} mjc_found;
void mjc_found_free(mjc_found *f);

/* Looks the key up in the writable database, then the snapshots. A row whose
 * stored cubin hash does not match is deleted (reported by *healed = 1) and
 * MJC_ERR_NOT_FOUND is returned so the caller recompiles. A database SQLite
 * reports corrupt is moved aside and recreated (empty); that is a miss too.
 * Hit counters and last-used times are updated at most once per minute per entry. */
int mjc_lookup(mjc_db *db, const uint8_t key[MJC_KEY_BYTES], mjc_found *out, int *healed);

/* Publishes an entry: BEGIN IMMEDIATE; INSERT OR IGNORE (first writer wins). */
int mjc_insert(mjc_db *db, const mjc_entry *e);

/* Per-key compile lock: flock() on <dir>/locks/<hex>.lock (creating the
 * directories: a compile, and so a store, follows). Blocks until held.
 * Released by mjc_unlock_key or by the process dying. Without a writable
 * directory both are no-ops returning MJC_OK and *fd = -1. */
int mjc_lock_key(mjc_db *db, const uint8_t key[MJC_KEY_BYTES], int *fd);
void mjc_unlock_key(int fd);

/* Hex of a key (32 chars + NUL). */
void mjc_key_hex(const uint8_t key[MJC_KEY_BYTES], char out[33]);

/* Filesystem type name of a directory ("ext4", "nfs", "overlay", ...); of its
 * nearest existing ancestor when it does not exist yet. */
const char *mjc_filesystem_name(const char *dir);
/* PRAGMA journal_mode of the writable database ("wal"; "" when none yet) into
 * out, copied under the database's lock (a reopen may rewrite it); returns out. */
const char *mjc_journal_mode(mjc_db *db, char *out, size_t cap);

#endif /* MJ_CACHE_H */
