/* The cache handle: opening, corruption recovery, lookup and insert. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/internal.h"

/* SQLite forbids carrying a connection across fork(): its per-process lock
 * bookkeeping (one record per inode, shared by every connection to the file)
 * is copied into the child, which would then believe it holds the parent's
 * fcntl locks. Even leaking the inherited handle and opening a fresh one in the
 * child reuses that record. So every writable connection is closed just before
 * fork() and both sides reopen on next use; the handle mutexes are held across
 * fork() so the child never inherits one locked by a vanished thread. Snapshot
 * layers are opened immutable (no locks, no WAL) and stay open. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static mjc_db *registry;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void before_fork(void) {
    pthread_mutex_lock(&registry_mu);
    for (mjc_db *db = registry; db; db = db->next) {
        pthread_mutex_lock(&db->mu);
        if (db->conn) {
            sqlite3_close_v2(db->conn);
            db->conn = NULL;
            db->reopen = 1;
        }
    }
}

static void init_mutex(pthread_mutex_t *mu) {
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    /* Admin callbacks may call back into the handle they are iterating. */
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(mu, &ma);
    pthread_mutexattr_destroy(&ma);
}

static void after_fork_parent(void) {
    for (mjc_db *db = registry; db; db = db->next)
        pthread_mutex_unlock(&db->mu);
    pthread_mutex_unlock(&registry_mu);
}

/* The child's only thread has a new thread id, so it does not own the recursive
 * mutexes the forking thread locked; they are reset instead of unlocked. */
static void after_fork_child(void) {
    for (mjc_db *db = registry; db; db = db->next)
        init_mutex(&db->mu);
    pthread_mutex_init(&registry_mu, NULL);
}

static void register_atfork(void) {
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

void mjc_lock(mjc_db *db) {
    pthread_mutex_lock(&db->mu);
}

void mjc_unlock(mjc_db *db) {
    pthread_mutex_unlock(&db->mu);
}

void mjc_set_err(mjc_db *db, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->err, sizeof db->err, fmt, ap);
    va_end(ap);
}

void mjc_warn(const mjc_db *db, const char *fmt, ...) {
    if (!db->warn) return;
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    db->warn(db->warn_ctx, message);
}

int mjc_is_corrupt(int rc) {
    return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB;
}

static int is_busy(int rc) {
    return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

/* Spreads retrying writers apart so they do not collide again in lockstep. */
static void jitter_sleep(int attempt) {
    static _Thread_local unsigned seed;
    if (!seed) seed = (unsigned)getpid() ^ (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&seed;
    long ms = 20L * (attempt + 1) + rand_r(&seed) % 80;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Another process may have already moved the same corrupt file aside and created
 * a fresh one; the inode recorded at open tells the two apart, and the recovery
 * lock keeps two processes from renaming at once. */
static void move_aside(mjc_db *db) {
    char lockpath[4096], dst[4096], from[4200], to[4200];
    snprintf(lockpath, sizeof lockpath, "%s/locks", db->dir);
    mjc_mkdirs(lockpath);
    snprintf(lockpath, sizeof lockpath, "%s/locks/recover.lock", db->dir);
    int fd = mjc_lock_file(lockpath, MJC_WAIT_MS);
    struct stat st;
    if (stat(db->path, &st) == 0 && st.st_dev == db->dev && st.st_ino == db->ino) {
        snprintf(dst, sizeof dst, "%s.corrupt-%lld", db->path, (long long)time(NULL));
        if (access(dst, F_OK) == 0)
            snprintf(dst, sizeof dst, "%s.corrupt-%lld-%d", db->path, (long long)time(NULL),
                     (int)getpid());
        if (rename(db->path, dst) == 0) {
            static const char *const sfx[] = {"-wal", "-shm"};
            for (int i = 0; i < 2; i++) {
                snprintf(from, sizeof from, "%s%s", db->path, sfx[i]);
                snprintf(to, sizeof to, "%s%s", dst, sfx[i]);
                rename(from, to);
            }
            mjc_warn(db, "cache database %s is corrupt; moved it to %s and started an empty one",
                     db->path, dst);
        } else {
            mjc_warn(db, "cache database %s is corrupt and could not be moved: %s", db->path,
                     strerror(errno));
        }
    }
    if (fd >= 0) close(fd);
}

/* Opens db->path into db->conn, moving a corrupt file aside once. Writers
 * hold the directory's open lock meanwhile: creating the schema and switching
 * to WAL take locks SQLite's busy timeout does not always wait for, so any
 * number of processes opening one new cache at once take turns instead. */
static int attach(mjc_db *db) {
    int lock = -1;
    if (!db->read_only) {
        char path[4200];
        snprintf(path, sizeof path, "%s/locks", db->dir);
        mjc_mkdirs(path); /* a manual cleanup may have removed it */
        snprintf(path, sizeof path, "%s/locks/open.lock", db->dir);
        lock = mjc_lock_file(path, MJC_WAIT_MS);
        if (lock < 0) {
            mjc_set_err(db, "cannot lock %s: %s", path, strerror(errno));
            return MJC_ERR_IO;
        }
    }
    mjc_conn_info ci;
    int rc = mjc_schema_open(db->path, db->read_only, &ci, db->err, sizeof db->err);
    if (rc == MJC_ERR_SQLITE && mjc_is_corrupt(ci.sqlite_rc) && !db->read_only) {
        db->dev = ci.dev;
        db->ino = ci.ino;
        move_aside(db);
        db->err[0] = '\0';
        rc = mjc_schema_open(db->path, db->read_only, &ci, db->err, sizeof db->err);
    }
    if (lock >= 0) close(lock);
    if (rc != MJC_OK) return rc;
    db->conn = ci.conn;
    db->dev = ci.dev;
    db->ino = ci.ino;
    memcpy(db->journal, ci.journal, sizeof db->journal);
    if (ci.newer) {
        if (!db->read_only)
            mjc_set_err(db,
                        "cache database %s was written by a newer megajit (schema above %d); "
                        "opened read-only, new kernels are not stored",
                        db->path, MJC_SCHEMA_VERSION);
        db->read_only = 1;
    } else if (!db->read_only && strcmp(db->journal, "wal") != 0) {
        mjc_warn(db, "cache database %s stays in journal mode '%s' instead of wal", db->path,
                 db->journal);
    }
    return MJC_OK;
}

/* Refuses a directory that others could plant kernels in, or that SQLite
 * cannot safely write (of its nearest ancestor when it does not exist yet). */
static int check_dir(mjc_db *db) {
    static const char fix[] = "refusing it: make it yours and private (chmod go-w), or set "
                              "MEGAJIT_CACHE_DIR to a directory of your own";
    int rc = mjc_check_private("the cache directory", db->dir, 1, 0, fix, db->err, sizeof db->err);
    if (rc == MJC_OK)
        rc = mjc_check_private("the cache database", db->path, 1, 0, fix, db->err, sizeof db->err);
    if (rc != MJC_OK || !mjc_fs_is_network(db->dir)) return rc;
    mjc_set_err(db,
                "the cache directory %s is on a %s filesystem, where SQLite's locking is "
                "unreliable; set MEGAJIT_CACHE_DIR to a local disk directory (a read-only "
                "snapshot on shared storage can be used through MEGAJIT_CACHE_RO)",
                db->dir, mjc_filesystem_name(db->dir));
    return MJC_ERR_NETWORK;
}

/* Checked first, so a refused directory is left exactly as it was found. */
static int create_dir(mjc_db *db) {
    int rc = check_dir(db);
    if (rc != MJC_OK) return rc;
    char locks[4200];
    snprintf(locks, sizeof locks, "%s/locks", db->dir);
    if (mjc_mkdirs(locks) != 0) {
        mjc_set_err(db, "cannot create the cache directory %s: %s", db->dir, strerror(errno));
        return MJC_ERR_IO;
    }
    return MJC_OK;
}

static int refuse_write(mjc_db *db) {
    mjc_set_err(db, "cache database %s is open read-only", db->path);
    return MJC_ERR_READ_ONLY;
}

int mjc_writable(mjc_db *db, int need) {
    if (!db->dir) {
        mjc_set_err(db, "this cache has no writable directory");
        return need != MJC_NEED_READ ? MJC_ERR_READ_ONLY : MJC_ERR_NOT_FOUND;
    }
    if (need != MJC_NEED_READ && db->read_only) return refuse_write(db);
    if (db->reopen || !db->conn) {
        db->reopen = 0;
        int store = need == MJC_NEED_STORE;
        if (!store && access(db->path, F_OK) != 0) return MJC_ABSENT;
        int rc = store ? create_dir(db) : MJC_OK;
        if (rc == MJC_OK) rc = attach(db);
        if (rc != MJC_OK) return rc;
    }
    /* Attaching may find a newer schema, which this megajit only reads. */
    return need != MJC_NEED_READ && db->read_only ? refuse_write(db) : MJC_OK;
}

int mjc_sql_fail(mjc_db *db, int rc, const char *what) {
    const char *msg = db->conn && sqlite3_errcode(db->conn) != SQLITE_OK ? sqlite3_errmsg(db->conn)
                                                                         : sqlite3_errstr(rc);
    mjc_set_err(db, "%s: %s", what, msg);
    if (mjc_is_corrupt(rc) && db->conn && !db->read_only) {
        char saved[sizeof db->err];
        memcpy(saved, db->err, sizeof saved);
        sqlite3_close_v2(db->conn);
        db->conn = NULL;
        move_aside(db);
        attach(db);
        memcpy(db->err, saved, sizeof saved);
    }
    return MJC_ERR_SQLITE;
}

int mjc_begin(mjc_db *db) {
    for (int attempt = 0;; attempt++) {
        int rc = sqlite3_exec(db->conn, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return MJC_OK;
        if (!is_busy(rc) || attempt == 3) return mjc_sql_fail(db, rc, "BEGIN IMMEDIATE");
        jitter_sleep(attempt);
    }
}

void mjc_rollback(mjc_db *db) {
    if (db->conn && !sqlite3_get_autocommit(db->conn))
        sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
}

int mjc_open(const mjc_open_opts *opts, mjc_db **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!opts || !out) {
        if (err && errlen) snprintf(err, errlen, "mjc_open: opts and out must not be NULL");
        return MJC_ERR_ARG;
    }
    mjc_db *db = calloc(1, sizeof *db);
    if (!db) {
        if (err && errlen) snprintf(err, errlen, "out of memory opening the cache");
        return MJC_ERR_NOMEM;
    }
    init_mutex(&db->mu);
    db->read_only = opts->read_only;
    db->warn = opts->warn;
    db->warn_ctx = opts->warn_ctx;
    int rc = MJC_OK;
    if (opts->dir && opts->dir[0]) {
        db->dir = strdup(opts->dir);
        db->path = malloc(strlen(opts->dir) + sizeof MJC_DB_FILE + 1);
        if (!db->dir || !db->path) {
            rc = MJC_ERR_NOMEM;
            mjc_set_err(db, "out of memory opening the cache");
            goto fail;
        }
        sprintf(db->path, "%s/%s", opts->dir, MJC_DB_FILE);
        if (!db->read_only) rc = opts->create ? create_dir(db) : check_dir(db);
        /* An existing database is attached now, so a foreign or damaged file is
         * reported by the open rather than by a later lookup. */
        if (rc == MJC_OK && ((opts->create && !db->read_only) || access(db->path, F_OK) == 0))
            rc = attach(db);
        if (rc != MJC_OK) goto fail;
        if (db->err[0]) mjc_warn(db, "%s", db->err);
    } else {
        db->path = strdup("");
        if (!db->path) {
            rc = MJC_ERR_NOMEM;
            mjc_set_err(db, "out of memory opening the cache");
            goto fail;
        }
    }
    for (const char *s = opts->ro_layers; s && *s;) {
        const char *end = strchr(s, ':');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        if (n) {
            char *path = strndup(s, n);
            sqlite3 *c = NULL;
            char why[512];
            mjc_layer *grown = realloc(db->layers, (db->num_layers + 1) * sizeof *grown);
            if (!path || !grown) {
                free(path);
                if (grown) db->layers = grown;
                rc = MJC_ERR_NOMEM;
                mjc_set_err(db, "out of memory opening the cache snapshots");
                goto fail;
            }
            db->layers = grown;
            if (mjc_snapshot_open(path, opts->ro_allow_writable, &c, why, sizeof why) == MJC_OK) {
                db->layers[db->num_layers++] = (mjc_layer){c, path};
            } else {
                mjc_warn(db, "skipping cache snapshot: %s", why);
                free(path);
            }
        }
        s = end ? end + 1 : s + n;
    }
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&registry_mu);
    db->next = registry;
    registry = db;
    pthread_mutex_unlock(&registry_mu);
    *out = db;
    return MJC_OK;
fail:
    if (err && errlen) snprintf(err, errlen, "%s", db->err);
    mjc_close(db);
    return rc;
}

void mjc_close(mjc_db *db) {
    if (!db) return;
    pthread_mutex_lock(&registry_mu);
    for (mjc_db **p = &registry; *p; p = &(*p)->next) {
        if (*p == db) {
            *p = db->next;
            break;
        }
    }
    pthread_mutex_unlock(&registry_mu);
    sqlite3_close_v2(db->conn);
    for (size_t i = 0; i < db->num_layers; i++) {
        sqlite3_close_v2(db->layers[i].conn);
        free(db->layers[i].path);
    }
    free(db->layers);
    free(db->dir);
    free(db->path);
    pthread_mutex_destroy(&db->mu);
    free(db);
}

const char *mjc_errmsg(const mjc_db *db) {
    return db ? db->err : "no cache handle";
}

const char *mjc_path(const mjc_db *db) {
    return db && db->path ? db->path : "";
}

int mjc_is_read_only(const mjc_db *db) {
    return db && db->read_only;
}

const char *mjc_journal_mode(mjc_db *db, char *out, size_t cap) {
    if (cap) out[0] = '\0';
    if (!db || !db->dir || !cap) return out;
    mjc_lock(db);
    if (db->reopen) mjc_writable(db, MJC_NEED_READ);
    snprintf(out, cap, "%s", db->journal);
    mjc_unlock(db);
    return out;
}

void mjc_key_hex(const uint8_t key[MJC_KEY_BYTES], char out[33]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < MJC_KEY_BYTES; i++) {
        out[2 * i] = digits[key[i] >> 4];
        out[2 * i + 1] = digits[key[i] & 15];
    }
    out[32] = '\0';
}

void mjc_found_free(mjc_found *f) {
    if (!f) return;
    free(f->cubin);
    free(f->lowered_name);
    memset(f, 0, sizeof *f);
}

enum { LOOKUP_HEALED = 1 };

/* Deletes a row whose cubin no longer matches its hash so the caller rebuilds it. */
static int heal(mjc_db *db, int64_t id, const uint8_t key[MJC_KEY_BYTES]) {
    if (mjc_begin(db) != MJC_OK) return MJC_ERR_SQLITE;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->conn, "DELETE FROM entry WHERE id=?1", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        st = NULL;
    }
    if (rc == SQLITE_DONE)
        rc = sqlite3_prepare_v2(db->conn, "DELETE FROM entry_header WHERE key=?1", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_blob(st, 1, key, MJC_KEY_BYTES, SQLITE_STATIC);
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
    }
    if (rc == SQLITE_DONE) rc = sqlite3_exec(db->conn, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        mjc_rollback(db);
        return mjc_sql_fail(db, rc, "deleting a damaged cache entry");
    }
    return MJC_OK;
}

/* Hit bookkeeping must never stall a lookup: no busy wait, and errors are ignored
 * because the next hit a minute later tries again. */
static void touch(mjc_db *db, int64_t id, int64_t now) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->conn,
                           "UPDATE entry SET hits=hits+1, last_used_at=?2 "
                           "WHERE id=?1 AND last_used_at<?3",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, now);
    sqlite3_bind_int64(st, 3, now - 60);
    sqlite3_busy_timeout(db->conn, 0);
    sqlite3_step(st);
    sqlite3_busy_timeout(db->conn, 60000);
    sqlite3_finalize(st);
}

/* MJC_OK, MJC_ERR_NOT_FOUND, LOOKUP_HEALED or MJC_ERR_NOMEM. */
static int lookup_in(mjc_db *db, sqlite3 *conn, int snapshot, const uint8_t key[MJC_KEY_BYTES],
                     mjc_found *out) {
    char hex[33];
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(conn,
                                "SELECT id, last_used_at, lowered_name, cubin_hash, cubin "
                                "FROM entry WHERE key=?1",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_blob(st, 1, key, MJC_KEY_BYTES, SQLITE_STATIC);
        rc = sqlite3_step(st);
    }
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        if (rc == SQLITE_DONE) return MJC_ERR_NOT_FOUND;
        if (snapshot)
            mjc_warn(db, "cache snapshot lookup failed: %s", sqlite3_errstr(rc));
        else
            mjc_sql_fail(db, rc, "cache lookup");
        return MJC_ERR_NOT_FOUND;
    }
    int64_t id = sqlite3_column_int64(st, 0), last = sqlite3_column_int64(st, 1);
    const void *cubin = sqlite3_column_blob(st, 4);
    size_t size = (size_t)sqlite3_column_bytes(st, 4);
    uint8_t h[MJC_KEY_BYTES];
    mjc_hash(cubin ? cubin : "", size, h);
    const void *stored = sqlite3_column_blob(st, 3);
    int good = sqlite3_column_bytes(st, 3) == MJC_KEY_BYTES && memcmp(stored, h, sizeof h) == 0;
    if (good) {
        const unsigned char *name = sqlite3_column_text(st, 2);
        out->cubin = malloc(size ? size : 1);
        out->lowered_name = strdup(name ? (const char *)name : "");
        if (!out->cubin || !out->lowered_name) {
            sqlite3_finalize(st);
            mjc_found_free(out);
            mjc_set_err(db, "out of memory reading a cached cubin");
            return MJC_ERR_NOMEM;
        }
        memcpy(out->cubin, cubin ? cubin : "", size);
        out->cubin_size = size;
        out->from_snapshot = snapshot;
    }
    sqlite3_finalize(st);
    mjc_key_hex(key, hex);
    if (good) {
        int64_t now = (int64_t)time(NULL);
        if (!snapshot && !db->read_only && last < now - 60) touch(db, id, now);
        return MJC_OK;
    }
    if (snapshot || db->read_only) {
        mjc_warn(db, "cache entry %s in a read-only cache failed its checksum; ignored", hex);
        return MJC_ERR_NOT_FOUND;
    }
    if (heal(db, id, key) != MJC_OK) return MJC_ERR_NOT_FOUND;
    mjc_warn(db, "cache entry %s failed its checksum; deleted, recompiling", hex);
    return LOOKUP_HEALED;
}

int mjc_lookup(mjc_db *db, const uint8_t key[MJC_KEY_BYTES], mjc_found *out, int *healed) {
    if (healed) *healed = 0;
    if (!db || !key || !out) return MJC_ERR_ARG;
    memset(out, 0, sizeof *out);
    mjc_lock(db);
    int rc = MJC_ERR_NOT_FOUND;
    if (db->dir && mjc_writable(db, MJC_NEED_READ) == MJC_OK) {
        rc = lookup_in(db, db->conn, 0, key, out);
        if (rc == LOOKUP_HEALED) {
            if (healed) *healed = 1;
            mjc_unlock(db);
            return MJC_ERR_NOT_FOUND;
        }
    }
    for (size_t i = 0; i < db->num_layers && rc == MJC_ERR_NOT_FOUND; i++)
        rc = lookup_in(db, db->layers[i].conn, 1, key, out);
    mjc_unlock(db);
    return rc;
}

static int bind_text(sqlite3_stmt *st, int i, const char *s) {
    return sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_STATIC);
}

static int step_done(sqlite3_stmt *st) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* One insert transaction; returns a SQLite code with the transaction ended. */
static int insert_tx(mjc_db *db, const mjc_entry *e) {
    sqlite3 *c = db->conn;
    sqlite3_stmt *ins = NULL, *hdr = NULL, *eh = NULL;
    uint8_t h[MJC_KEY_BYTES];
    mjc_hash(e->cubin, e->cubin_size, h);
    int64_t now = (int64_t)time(NULL);
    int rc = sqlite3_exec(c, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_prepare_v2(
        c,
        "INSERT OR IGNORE INTO entry(key, family, kernel_name, lowered_name, arch, compiler, "
        "flags, cubin_size, source_size, cubin_hash, compile_ms, created_at, last_used_at, hits, "
        "log, source, cubin) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?12,0,?13,?14,?15)",
        -1, &ins, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_blob(ins, 1, e->key, MJC_KEY_BYTES, SQLITE_STATIC);
        bind_text(ins, 2, e->family);
        bind_text(ins, 3, e->kernel_name);
        bind_text(ins, 4, e->lowered_name);
        bind_text(ins, 5, e->arch);
        bind_text(ins, 6, e->compiler);
        bind_text(ins, 7, e->flags);
        sqlite3_bind_int64(ins, 8, (sqlite3_int64)e->cubin_size);
        sqlite3_bind_int64(ins, 9, e->source ? (sqlite3_int64)strlen(e->source) : 0);
        sqlite3_bind_blob(ins, 10, h, MJC_KEY_BYTES, SQLITE_STATIC);
        sqlite3_bind_double(ins, 11, e->compile_ms);
        sqlite3_bind_int64(ins, 12, now);
        bind_text(ins, 13, e->log);
        bind_text(ins, 14, e->source);
        sqlite3_bind_blob64(ins, 15, e->cubin, e->cubin_size, SQLITE_STATIC);
        rc = step_done(ins);
    }
    /* An ignored insert means another writer published the key, headers included. */
    if (rc == SQLITE_OK && sqlite3_changes(c) == 1 && e->num_headers) {
        rc = sqlite3_prepare_v2(c, "INSERT OR IGNORE INTO header(path, hash) VALUES(?1,?2)", -1,
                                &hdr, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_prepare_v2(
                c, "INSERT OR IGNORE INTO entry_header(key, path) VALUES(?1,?2)", -1, &eh, NULL);
        for (size_t i = 0; rc == SQLITE_OK && i < e->num_headers; i++) {
            const mjc_header *hd = &e->headers[i];
            bind_text(hdr, 1, hd->path);
            sqlite3_bind_blob(hdr, 2, hd->content_hash, MJC_KEY_BYTES, SQLITE_STATIC);
            rc = step_done(hdr);
            if (rc != SQLITE_OK) break;
            sqlite3_bind_blob(eh, 1, e->key, MJC_KEY_BYTES, SQLITE_STATIC);
            bind_text(eh, 2, hd->path);
            rc = step_done(eh);
        }
    }
    sqlite3_finalize(ins);
    sqlite3_finalize(hdr);
    sqlite3_finalize(eh);
    if (rc == SQLITE_OK) rc = sqlite3_exec(c, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) mjc_rollback(db);
    return rc;
}

int mjc_insert(mjc_db *db, const mjc_entry *e) {
    if (!db || !e || !e->cubin || !e->cubin_size || (e->num_headers && !e->headers))
        return MJC_ERR_ARG;
    for (size_t i = 0; i < e->num_headers; i++)
        if (!e->headers[i].path) return MJC_ERR_ARG;
    mjc_lock(db);
    int rc = mjc_writable(db, MJC_NEED_STORE);
    for (int attempt = 0, recovered = 0; rc == MJC_OK; attempt++) {
        int src = insert_tx(db, e);
        if (src == SQLITE_OK) break;
        if (is_busy(src) && attempt < 3) {
            jitter_sleep(attempt);
            continue;
        }
        rc = mjc_sql_fail(db, src, "storing a kernel in the cache");
        /* A corrupt database was just replaced by an empty one: store into that. */
        if (mjc_is_corrupt(src) && !recovered && db->conn) {
            recovered = 1;
            rc = MJC_OK;
        }
    }
    mjc_unlock(db);
    return rc;
}
