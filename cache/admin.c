/* Cache maintenance commands (the `megajit cache` CLI and mj_cache_* API). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/admin.h"
#include "cache/internal.h"

#define INFO_COLUMNS                                                                               \
    "key, family, kernel_name, lowered_name, arch, compiler, flags, cubin_size, source_size, "     \
    "created_at, last_used_at, hits, compile_ms"

static const char *col_text(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

static void read_info(sqlite3_stmt *st, mjc_info *in) {
    memset(in, 0, sizeof *in);
    if (sqlite3_column_bytes(st, 0) == MJC_KEY_BYTES)
        memcpy(in->key, sqlite3_column_blob(st, 0), MJC_KEY_BYTES);
    in->family = col_text(st, 1);
    in->kernel_name = col_text(st, 2);
    in->lowered_name = col_text(st, 3);
    in->arch = col_text(st, 4);
    in->compiler = col_text(st, 5);
    in->flags = col_text(st, 6);
    in->cubin_size = sqlite3_column_int64(st, 7);
    in->source_size = sqlite3_column_int64(st, 8);
    in->created_at = sqlite3_column_int64(st, 9);
    in->last_used_at = sqlite3_column_int64(st, 10);
    in->hits = sqlite3_column_int64(st, 11);
    in->compile_ms = sqlite3_column_double(st, 12);
}

/* Locks db and makes its writable database usable; unlocks again when it
 * returns anything but MJC_OK (MJC_ABSENT: no database yet, nothing to do). */
static int enter(mjc_db *db, int need) {
    if (!db) return MJC_ERR_ARG;
    mjc_lock(db);
    int rc = mjc_writable(db, need);
    if (rc != MJC_OK) mjc_unlock(db);
    return rc;
}

static int leave(mjc_db *db, int rc) {
    mjc_unlock(db);
    return rc;
}

static int prepare(mjc_db *db, const char *sql, sqlite3_stmt **st) {
    int rc = sqlite3_prepare_v2(db->conn, sql, -1, st, NULL);
    return rc == SQLITE_OK ? MJC_OK : mjc_sql_fail(db, rc, "preparing a cache query");
}

/* Finalizes st; a step result other than DONE becomes the handle's error. */
static int finish(mjc_db *db, sqlite3_stmt *st, int step_rc, const char *what) {
    sqlite3_finalize(st);
    if (step_rc == SQLITE_DONE || step_rc == SQLITE_ROW || step_rc == SQLITE_OK) return MJC_OK;
    return mjc_sql_fail(db, step_rc, what);
}

/* Lists one database's matching entries, marked with layer; a SQLite code.
 * *stopped when fn asked to stop. */
static int list_in(sqlite3 *conn, const char *layer, const char *family, const char *arch,
                   mjc_info_fn fn, void *user, int *stopped) {
    sqlite3_stmt *st;
    int src = sqlite3_prepare_v2(conn,
                                 "SELECT " INFO_COLUMNS " FROM entry WHERE (?1 IS NULL OR "
                                 "family=?1) AND (?2 IS NULL OR arch=?2) "
                                 "ORDER BY family, kernel_name, arch, key",
                                 -1, &st, NULL);
    if (src != SQLITE_OK) return src;
    if (family) sqlite3_bind_text(st, 1, family, -1, SQLITE_STATIC);
    if (arch) sqlite3_bind_text(st, 2, arch, -1, SQLITE_STATIC);
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        mjc_info in;
        read_info(st, &in);
        in.layer = layer;
        if (fn(&in, user)) {
            *stopped = 1;
            src = SQLITE_DONE;
            break;
        }
    }
    sqlite3_finalize(st);
    return src == SQLITE_DONE ? SQLITE_OK : src;
}

int mjc_list(mjc_db *db, const char *family, const char *arch, mjc_info_fn fn, void *user) {
    if (!fn) return MJC_ERR_ARG;
    int rc = enter(db, MJC_NEED_READ);
    if (rc != MJC_OK && rc != MJC_ABSENT) return rc;
    if (rc == MJC_ABSENT) mjc_lock(db); /* the snapshots may still hold entries */
    int stopped = 0;
    if (rc == MJC_OK) {
        int src = list_in(db->conn, NULL, family, arch, fn, user, &stopped);
        if (src != SQLITE_OK) rc = mjc_sql_fail(db, src, "listing the cache");
    }
    rc = rc == MJC_ABSENT ? MJC_OK : rc;
    for (size_t i = 0; rc == MJC_OK && !stopped && i < db->num_layers; i++) {
        const mjc_layer *l = &db->layers[i];
        int src = list_in(l->conn, l->path, family, arch, fn, user, &stopped);
        if (src != SQLITE_OK) {
            /* Damage in a snapshot is the snapshot's: nothing is moved aside. */
            mjc_set_err(db, "listing cache snapshot %s: %s", l->path, sqlite3_errstr(src));
            rc = MJC_ERR_SQLITE;
        }
    }
    return leave(db, rc);
}

/* Upper-cases a 4..32 digit hex prefix into out (as SQLite's hex() writes). */
static int parse_prefix(mjc_db *db, const char *prefix, char out[33]) {
    size_t n = prefix ? strlen(prefix) : 0;
    if (n < 4 || n > 32) {
        mjc_set_err(db, "a cache key prefix needs 4 to 32 hex digits, not '%s'",
                    prefix ? prefix : "");
        return MJC_ERR_ARG;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)prefix[i])) {
            mjc_set_err(db, "'%s' is not a hex cache key prefix", prefix);
            return MJC_ERR_ARG;
        }
        out[i] = (char)toupper((unsigned char)prefix[i]);
    }
    out[n] = '\0';
    return MJC_OK;
}

static int no_key(mjc_db *db, const char *prefix) {
    mjc_set_err(db, "no cache entry has a key starting with %s", prefix);
    return MJC_ERR_NOT_FOUND;
}

/* A key looked up in a cache that does not exist yet: not found, unless the
 * prefix itself is malformed. Takes and releases the handle's lock. */
static int absent_key(mjc_db *db, const char *prefix) {
    char p[33];
    mjc_lock(db);
    int rc = parse_prefix(db, prefix, p);
    return leave(db, rc == MJC_OK ? no_key(db, prefix) : rc);
}

static int resolve_prefix(mjc_db *db, const char *prefix, uint8_t key[MJC_KEY_BYTES]) {
    char p[33];
    int rc = parse_prefix(db, prefix, p);
    if (rc != MJC_OK) return rc;
    sqlite3_stmt *st;
    rc = prepare(db, "SELECT key FROM entry WHERE substr(hex(key), 1, length(?1)) = ?1 LIMIT 2",
                 &st);
    if (rc != MJC_OK) return rc;
    sqlite3_bind_text(st, 1, p, -1, SQLITE_STATIC);
    int found = 0, src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if (found++ == 0 && sqlite3_column_bytes(st, 0) == MJC_KEY_BYTES)
            memcpy(key, sqlite3_column_blob(st, 0), MJC_KEY_BYTES);
    }
    rc = finish(db, st, src, "looking up a cache key");
    if (rc != MJC_OK) return rc;
    if (found == 0) return no_key(db, prefix);
    if (found > 1) {
        mjc_set_err(db, "several cache entries have keys starting with %s; give more digits",
                    prefix);
        return MJC_ERR_AMBIGUOUS;
    }
    return MJC_OK;
}

static char *dup_col(sqlite3_stmt *st, int i) {
    return strdup(col_text(st, i));
}

static int load_detail(mjc_db *db, const uint8_t key[MJC_KEY_BYTES], mjc_detail *out) {
    sqlite3_stmt *st;
    int rc =
        prepare(db, "SELECT " INFO_COLUMNS ", log, source, cubin FROM entry WHERE key=?1", &st);
    if (rc != MJC_OK) return rc;
    sqlite3_bind_blob(st, 1, key, MJC_KEY_BYTES, SQLITE_STATIC);
    int src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
        rc = finish(db, st, src, "reading a cache entry");
        if (rc == MJC_OK) {
            mjc_set_err(db, "the cache entry disappeared while reading it");
            rc = MJC_ERR_NOT_FOUND;
        }
        return rc;
    }
    read_info(st, &out->info);
    /* One allocation holding the six info strings back to back. */
    const char *strs[6] = {out->info.family, out->info.kernel_name, out->info.lowered_name,
                           out->info.arch,   out->info.compiler,    out->info.flags};
    size_t total = 0;
    for (int i = 0; i < 6; i++)
        total += strlen(strs[i]) + 1;
    out->strings_ = malloc(total);
    out->log = dup_col(st, 13);
    out->source = dup_col(st, 14);
    out->cubin_size = (size_t)sqlite3_column_bytes(st, 15);
    out->cubin = malloc(out->cubin_size ? out->cubin_size : 1);
    if (out->strings_ && out->cubin && out->cubin_size)
        memcpy(out->cubin, sqlite3_column_blob(st, 15), out->cubin_size);
    if (out->strings_) {
        const char **dst[6] = {&out->info.family, &out->info.kernel_name, &out->info.lowered_name,
                               &out->info.arch,   &out->info.compiler,    &out->info.flags};
        char *w = out->strings_;
        for (int i = 0; i < 6; i++) {
            size_t n = strlen(strs[i]) + 1;
            memcpy(w, strs[i], n);
            *dst[i] = w;
            w += n;
        }
    }
    sqlite3_finalize(st);
    if (!out->strings_ || !out->log || !out->source || !out->cubin) {
        mjc_set_err(db, "out of memory reading a cache entry");
        return MJC_ERR_NOMEM;
    }
    rc = prepare(db, "SELECT path FROM entry_header WHERE key=?1 ORDER BY path", &st);
    if (rc != MJC_OK) return rc;
    sqlite3_bind_blob(st, 1, key, MJC_KEY_BYTES, SQLITE_STATIC);
    size_t n = 0;
    out->headers = calloc(1, sizeof *out->headers);
    while (out->headers && (src = sqlite3_step(st)) == SQLITE_ROW) {
        char **grown = realloc(out->headers, (n + 2) * sizeof *grown);
        if (!grown) break;
        out->headers = grown;
        out->headers[n] = dup_col(st, 0);
        out->headers[++n] = NULL;
        if (!out->headers[n - 1]) break;
    }
    if (!out->headers || (n && !out->headers[n - 1]) || src == SQLITE_ROW) {
        sqlite3_finalize(st);
        mjc_set_err(db, "out of memory reading a cache entry");
        return MJC_ERR_NOMEM;
    }
    return finish(db, st, src, "reading a cache entry's headers");
}

int mjc_show(mjc_db *db, const char *key_prefix, mjc_detail *out) {
    if (!out) return MJC_ERR_ARG;
    memset(out, 0, sizeof *out);
    int rc = enter(db, MJC_NEED_READ);
    if (rc == MJC_ABSENT) return absent_key(db, key_prefix);
    if (rc != MJC_OK) return rc;
    uint8_t key[MJC_KEY_BYTES];
    rc = resolve_prefix(db, key_prefix, key);
    if (rc == MJC_OK) rc = load_detail(db, key, out);
    if (rc != MJC_OK) mjc_detail_free(out);
    return leave(db, rc);
}

void mjc_detail_free(mjc_detail *d) {
    if (!d) return;
    for (size_t i = 0; d->headers && d->headers[i]; i++)
        free(d->headers[i]);
    free(d->headers);
    free(d->source);
    free(d->log);
    free(d->cubin);
    free(d->strings_);
    memset(d, 0, sizeof *d);
}

int mjc_stat(mjc_db *db, mjc_stats *out) {
    if (!out) return MJC_ERR_ARG;
    memset(out, 0, sizeof *out);
    int rc = enter(db, MJC_NEED_READ);
    if (rc == MJC_ABSENT) {
        snprintf(out->filesystem, sizeof out->filesystem, "%s", mjc_filesystem_name(db->dir));
        return MJC_OK;
    }
    if (rc != MJC_OK) return rc;
    sqlite3_stmt *st;
    rc = prepare(db,
                 "SELECT count(*), total(cubin_size), total(hits), total(compile_ms), "
                 "coalesce(max(compile_ms), 0) FROM entry",
                 &st);
    if (rc != MJC_OK) return leave(db, rc);
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
        out->entries = sqlite3_column_int64(st, 0);
        out->cubin_bytes = (int64_t)sqlite3_column_double(st, 1);
        out->hits = (int64_t)sqlite3_column_double(st, 2);
        out->compile_ms_total = sqlite3_column_double(st, 3);
        out->compile_ms_max = sqlite3_column_double(st, 4);
    }
    rc = finish(db, st, src, "reading cache statistics");
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", db->path);
    out->file_bytes = mjc_file_size(db->path) + mjc_file_size(wal);
    snprintf(out->journal_mode, sizeof out->journal_mode, "%s", db->journal);
    snprintf(out->filesystem, sizeof out->filesystem, "%s", mjc_filesystem_name(db->dir));
    return leave(db, rc);
}

/* One entry's problem, or NULL when its cubin checks out. */
static const char *check_row(sqlite3_stmt *st, char *why, size_t whylen) {
    uint8_t h[MJC_KEY_BYTES];
    const void *cubin = sqlite3_column_blob(st, 3);
    int64_t size = sqlite3_column_bytes(st, 3), stored = sqlite3_column_int64(st, 1);
    mjc_hash(cubin ? cubin : "", (size_t)size, h);
    if (size != stored) {
        snprintf(why, whylen, "cubin is %lld bytes, recorded as %lld", (long long)size,
                 (long long)stored);
        return why;
    }
    if (sqlite3_column_bytes(st, 2) != MJC_KEY_BYTES ||
        memcmp(sqlite3_column_blob(st, 2), h, MJC_KEY_BYTES) != 0)
        return "cubin does not match its recorded hash";
    return NULL;
}

int mjc_verify(mjc_db *db, int64_t *checked, int64_t *bad, mjc_bad_fn fn, void *user) {
    int64_t nchecked = 0, nbad = 0;
    if (checked) *checked = 0;
    if (bad) *bad = 0;
    int rc = enter(db, MJC_NEED_READ);
    if (rc != MJC_OK) return rc == MJC_ABSENT ? MJC_OK : rc;
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(db->conn, "PRAGMA quick_check", -1, &st, NULL);
    if (src == SQLITE_OK) {
        while ((src = sqlite3_step(st)) == SQLITE_ROW) {
            const char *msg = col_text(st, 0);
            if (strcmp(msg, "ok") == 0) continue;
            nbad++;
            if (fn) fn("database", msg, user);
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    if (src == SQLITE_DONE)
        src = sqlite3_prepare_v2(db->conn, "SELECT key, cubin_size, cubin_hash, cubin FROM entry",
                                 -1, &st, NULL);
    if (src == SQLITE_OK) {
        while ((src = sqlite3_step(st)) == SQLITE_ROW) {
            char hex[33], buf[96];
            uint8_t key[MJC_KEY_BYTES] = {0};
            nchecked++;
            const char *why = check_row(st, buf, sizeof buf);
            if (!why) continue;
            if (sqlite3_column_bytes(st, 0) == MJC_KEY_BYTES)
                memcpy(key, sqlite3_column_blob(st, 0), MJC_KEY_BYTES);
            mjc_key_hex(key, hex);
            nbad++;
            if (fn) fn(hex, why, user);
        }
    }
    if (src != SQLITE_DONE) {
        /* verify reports damage; moving the database aside is left to the serving path. */
        nbad++;
        mjc_set_err(db, "verifying %s: %s", db->path, sqlite3_errstr(src));
        if (fn) fn("database", db->err, user);
    }
    sqlite3_finalize(st);
    if (checked) *checked = nchecked;
    if (bad) *bad = nbad;
    return leave(db, MJC_OK);
}

/* Drops header rows no remaining entry refers to; inside the caller's transaction. */
static int prune_headers(mjc_db *db) {
    return sqlite3_exec(db->conn,
                        "DELETE FROM entry_header WHERE key NOT IN (SELECT key FROM entry);"
                        "DELETE FROM header WHERE path NOT IN (SELECT path FROM entry_header)",
                        NULL, NULL, NULL);
}

/* Returns freed pages to the filesystem; a failure only leaves the file larger. */
static void shrink(mjc_db *db) {
    sqlite3_exec(db->conn, "PRAGMA incremental_vacuum", NULL, NULL, NULL);
}

/* The last-used time before which an entry is older than days. Computed in
 * floating point: a cutoff before the epoch (days = 1e300) selects nothing,
 * where converting days * 86400 to an integer would overflow. */
static void bind_cutoff(sqlite3_stmt *st, double days) {
    double cutoff = (double)time(NULL) - days * 86400.0;
    sqlite3_bind_int64(st, 1, cutoff > 0 ? (int64_t)cutoff : 0);
}

int mjc_remove(mjc_db *db, mjc_select sel, const char *value, int64_t *removed) {
    static const char *const where[] = {
        [MJC_SELECT_KEY] = "key=?1",
        [MJC_SELECT_FAMILY] = "family=?1",
        [MJC_SELECT_HEADER] = "key IN (SELECT key FROM entry_header WHERE path=?1)",
        [MJC_SELECT_COMPILER] = "compiler=?1",
        [MJC_SELECT_ARCH] = "arch=?1",
        [MJC_SELECT_OLDER] = "last_used_at<?1",
        [MJC_SELECT_ALL] = "1",
    };
    if (removed) *removed = 0;
    if (!db) return MJC_ERR_ARG;
    if ((unsigned)sel > MJC_SELECT_ALL || (sel != MJC_SELECT_ALL && !value)) {
        mjc_lock(db);
        mjc_set_err(db, "cache remove: unknown selector or missing value");
        return leave(db, MJC_ERR_ARG);
    }
    double days = 0;
    if (sel == MJC_SELECT_OLDER) {
        char *end;
        errno = 0;
        days = strtod(value, &end);
        if (end == value || *end || errno || !isfinite(days) || !(days >= 0)) {
            mjc_lock(db);
            mjc_set_err(db, "cache remove: '%s' is not a number of days", value);
            return leave(db, MJC_ERR_ARG);
        }
    }
    int rc = enter(db, MJC_NEED_MODIFY);
    if (rc == MJC_ABSENT && sel == MJC_SELECT_KEY) return absent_key(db, value);
    if (rc != MJC_OK) return rc == MJC_ABSENT ? MJC_OK : rc;
    uint8_t key[MJC_KEY_BYTES];
    if (sel == MJC_SELECT_KEY && (rc = resolve_prefix(db, value, key)) != MJC_OK)
        return leave(db, rc);
    char sql[160];
    snprintf(sql, sizeof sql, "DELETE FROM entry WHERE %s", where[sel]);
    if ((rc = mjc_begin(db)) != MJC_OK) return leave(db, rc);
    sqlite3_stmt *st;
    int src = sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL);
    if (src == SQLITE_OK) {
        if (sel == MJC_SELECT_KEY)
            sqlite3_bind_blob(st, 1, key, MJC_KEY_BYTES, SQLITE_STATIC);
        else if (sel == MJC_SELECT_OLDER)
            bind_cutoff(st, days);
        else if (sel != MJC_SELECT_ALL)
            sqlite3_bind_text(st, 1, value, -1, SQLITE_STATIC);
        src = sqlite3_step(st);
        sqlite3_finalize(st);
    }
    int64_t n = src == SQLITE_DONE ? sqlite3_changes(db->conn) : 0;
    if (src == SQLITE_DONE) src = prune_headers(db);
    if (src == SQLITE_OK) src = sqlite3_exec(db->conn, "COMMIT", NULL, NULL, NULL);
    if (src != SQLITE_OK) {
        mjc_rollback(db);
        return leave(db, mjc_sql_fail(db, src, "removing cache entries"));
    }
    shrink(db);
    if (removed) *removed = n;
    return leave(db, MJC_OK);
}

static int total_bytes(mjc_db *db, int64_t *total) {
    sqlite3_stmt *st;
    int src = sqlite3_prepare_v2(db->conn, "SELECT total(cubin_size) FROM entry", -1, &st, NULL);
    if (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
        *total = (int64_t)sqlite3_column_double(st, 0);
        src = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return src;
}

/* One short transaction of at most 64 deletions, so serving processes waiting
 * to insert are held up for milliseconds rather than for the whole gc. */
static int gc_batch(mjc_db *db, int64_t max_bytes, int64_t *removed, int *done) {
    int64_t total = 0;
    int src = total_bytes(db, &total);
    *done = total <= max_bytes;
    if (src != SQLITE_OK || *done) return src;
    sqlite3_stmt *sel = NULL, *del = NULL;
    src = sqlite3_prepare_v2(db->conn,
                             "SELECT id, cubin_size FROM entry ORDER BY last_used_at, id LIMIT 64",
                             -1, &sel, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_prepare_v2(db->conn, "DELETE FROM entry WHERE id=?1", -1, &del, NULL);
    while (src == SQLITE_OK && total > max_bytes && (src = sqlite3_step(sel)) == SQLITE_ROW) {
        sqlite3_bind_int64(del, 1, sqlite3_column_int64(sel, 0));
        total -= sqlite3_column_int64(sel, 1);
        src = sqlite3_step(del);
        sqlite3_reset(del);
        if (src == SQLITE_DONE) {
            src = SQLITE_OK;
            (*removed)++;
        }
    }
    if (src == SQLITE_ROW || src == SQLITE_DONE) src = SQLITE_OK;
    sqlite3_finalize(sel);
    sqlite3_finalize(del);
    return src;
}

int mjc_gc(mjc_db *db, int64_t max_bytes, int64_t *removed, int64_t *bytes_after) {
    int64_t n = 0, after = 0;
    if (removed) *removed = 0;
    if (bytes_after) *bytes_after = 0;
    if (max_bytes < 0) return MJC_ERR_ARG;
    int rc = enter(db, MJC_NEED_MODIFY);
    if (rc != MJC_OK) return rc == MJC_ABSENT ? MJC_OK : rc;
    for (int done = 0; !done && rc == MJC_OK;) {
        if ((rc = mjc_begin(db)) != MJC_OK) break;
        int src = gc_batch(db, max_bytes, &n, &done);
        if (src == SQLITE_OK && done) src = prune_headers(db);
        if (src == SQLITE_OK) src = sqlite3_exec(db->conn, "COMMIT", NULL, NULL, NULL);
        if (src != SQLITE_OK) {
            mjc_rollback(db);
            rc = mjc_sql_fail(db, src, "evicting cache entries");
        }
    }
    if (rc == MJC_OK) {
        shrink(db);
        int src = total_bytes(db, &after);
        if (src != SQLITE_OK) rc = mjc_sql_fail(db, src, "measuring the cache");
    }
    if (removed) *removed = n;
    if (bytes_after) *bytes_after = after;
    return leave(db, rc);
}

static int fsync_path(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* VACUUM INTO leaves the source's WAL flag in the copy; readers of an immutable
 * snapshot must not look for a -wal file, so switch it to a rollback journal. */
static int to_rollback_journal(const char *path) {
    char *uri = mjc_uri(path, "mode=rw");
    if (!uri) return SQLITE_NOMEM;
    sqlite3 *c = NULL;
    int rc = sqlite3_open_v2(uri, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL);
    free(uri);
    if (rc == SQLITE_OK) rc = sqlite3_exec(c, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
    sqlite3_close_v2(c);
    return rc;
}

int mjc_export(mjc_db *db, const char *file) {
    if (!file || !*file) return MJC_ERR_ARG;
    int rc = enter(db, MJC_NEED_READ);
    if (rc == MJC_ABSENT) {
        mjc_lock(db);
        mjc_set_err(db, "no cache database at %s: nothing to export", db->path);
        return leave(db, MJC_ERR_NOT_FOUND);
    }
    if (rc != MJC_OK) return rc;
    char tmp[4200], dir[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", file, (int)getpid());
    mjc_dirname(file, dir, sizeof dir);
    unlink(tmp);
    /* Made here rather than by VACUUM INTO (which takes an empty file), so a
     * missing or unwritable directory is reported as such, not through
     * SQLite's message quoting an internal URI. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno == ENOENT)
            mjc_set_err(db, "cannot export to %s: the directory %s does not exist", file, dir);
        else
            mjc_set_err(db, "cannot export to %s: %s", file, strerror(errno));
        return leave(db, MJC_ERR_IO);
    }
    close(fd);
    char *uri = mjc_uri(tmp, "mode=rw");
    if (!uri) {
        unlink(tmp);
        mjc_set_err(db, "out of memory exporting the cache");
        return leave(db, MJC_ERR_NOMEM);
    }
    sqlite3_stmt *st;
    int src = sqlite3_prepare_v2(db->conn, "VACUUM INTO ?1", -1, &st, NULL);
    if (src == SQLITE_OK) {
        sqlite3_bind_text(st, 1, uri, -1, SQLITE_STATIC);
        src = sqlite3_step(st);
        src = src == SQLITE_DONE ? SQLITE_OK : src;
        sqlite3_finalize(st);
    }
    free(uri);
    if (src != SQLITE_OK) {
        mjc_set_err(db, "exporting to %s: %s", file, sqlite3_errstr(src));
        unlink(tmp);
        return leave(db, MJC_ERR_SQLITE);
    }
    src = to_rollback_journal(tmp);
    if (src != SQLITE_OK || fsync_path(tmp) != 0 || rename(tmp, file) != 0) {
        mjc_set_err(db, "exporting to %s: %s", file,
                    src != SQLITE_OK ? sqlite3_errstr(src) : strerror(errno));
        unlink(tmp);
        return leave(db, MJC_ERR_IO);
    }
    /* The rename itself is durable only once the directory is synced. */
    fsync_path(dir);
    return leave(db, MJC_OK);
}

/* Damage found while reading a snapshot is the snapshot's, so unlike mjc_sql_fail
 * this never moves the cache's own database aside. */
static int snapshot_fail(mjc_db *db, const char *file) {
    mjc_set_err(db, "importing %s: %s", file, sqlite3_errmsg(db->conn));
    return MJC_ERR_SQLITE;
}

int mjc_import(mjc_db *db, const char *file, int64_t *imported) {
    if (imported) *imported = 0;
    if (!file || !*file) return MJC_ERR_ARG;
    int rc = enter(db, MJC_NEED_STORE);
    if (rc != MJC_OK) return rc;
    mjc_conn_info ci;
    rc = mjc_schema_open(file, 1, &ci, db->err, sizeof db->err);
    if (rc == MJC_OK) {
        sqlite3_close_v2(ci.conn);
        if (ci.newer) {
            mjc_set_err(db, "cache snapshot %s has a newer schema than this megajit reads", file);
            rc = MJC_ERR_FOREIGN;
        }
    }
    if (rc != MJC_OK) return leave(db, rc);
    char *uri = mjc_uri(file, "mode=ro");
    if (!uri) {
        mjc_set_err(db, "out of memory importing a cache snapshot");
        return leave(db, MJC_ERR_NOMEM);
    }
    sqlite3_stmt *st;
    int src = sqlite3_prepare_v2(db->conn, "ATTACH ?1 AS snap", -1, &st, NULL);
    if (src == SQLITE_OK) {
        sqlite3_bind_text(st, 1, uri, -1, SQLITE_STATIC);
        src = sqlite3_step(st);
        src = src == SQLITE_DONE ? SQLITE_OK : src;
        sqlite3_finalize(st);
    }
    free(uri);
    if (src != SQLITE_OK) return leave(db, snapshot_fail(db, file));
    int64_t n = 0;
    rc = mjc_begin(db);
    if (rc == MJC_OK) {
        /* Imported entries count as just used so the next gc does not evict them first. */
        src = sqlite3_exec(
            db->conn,
            "INSERT OR IGNORE INTO main.entry(key, family, kernel_name, lowered_name, arch, "
            "compiler, flags, cubin_size, source_size, cubin_hash, compile_ms, created_at, "
            "last_used_at, hits, log, source, cubin) "
            "SELECT key, family, kernel_name, lowered_name, arch, compiler, flags, cubin_size, "
            "source_size, cubin_hash, compile_ms, created_at, strftime('%s','now'), 0, log, "
            "source, cubin FROM snap.entry WHERE mj_xxh128(cubin) = cubin_hash",
            NULL, NULL, NULL);
        n = src == SQLITE_OK ? sqlite3_changes(db->conn) : 0;
        if (src == SQLITE_OK)
            src = sqlite3_exec(db->conn,
                               "INSERT OR IGNORE INTO main.header(path, hash) "
                               "SELECT path, hash FROM snap.header;"
                               "INSERT OR IGNORE INTO main.entry_header(key, path) "
                               "SELECT key, path FROM snap.entry_header "
                               "WHERE key IN (SELECT key FROM main.entry)",
                               NULL, NULL, NULL);
        if (src == SQLITE_OK) src = sqlite3_exec(db->conn, "COMMIT", NULL, NULL, NULL);
        if (src != SQLITE_OK) {
            rc = snapshot_fail(db, file);
            mjc_rollback(db);
        }
    }
    if (db->conn) sqlite3_exec(db->conn, "DETACH snap", NULL, NULL, NULL);
    if (rc == MJC_OK && imported) *imported = n;
    return leave(db, rc);
}
