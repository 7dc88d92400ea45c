/* Opening a cache database: creation, identity checks and connection settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache/internal.h"

/* Blobs and long texts come last: reading a column stored after a large blob
 * would walk the blob's overflow pages. */
static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS entry("
    " id INTEGER PRIMARY KEY,"
    " key BLOB UNIQUE NOT NULL,"
    " family TEXT NOT NULL,"
    " kernel_name TEXT NOT NULL,"
    " lowered_name TEXT NOT NULL,"
    " arch TEXT NOT NULL,"
    " compiler TEXT NOT NULL,"
    " flags TEXT NOT NULL,"
    " cubin_size INTEGER NOT NULL,"
    " source_size INTEGER NOT NULL,"
    " cubin_hash BLOB NOT NULL,"
    " compile_ms REAL NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " last_used_at INTEGER NOT NULL,"
    " hits INTEGER NOT NULL DEFAULT 0,"
    " log TEXT,"
    " source TEXT,"
    " cubin BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS header("
    " path TEXT NOT NULL, hash BLOB NOT NULL, PRIMARY KEY(path, hash));"
    "CREATE TABLE IF NOT EXISTS entry_header("
    " key BLOB NOT NULL, path TEXT NOT NULL, PRIMARY KEY(key, path)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS entry_header_by_path ON entry_header(path);"
    "CREATE INDEX IF NOT EXISTS entry_by_family ON entry(family);"
    "CREATE INDEX IF NOT EXISTS entry_by_lru ON entry(last_used_at);";

void mjc_hash(const void *data, size_t size, uint8_t out[MJC_KEY_BYTES]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(data, size));
    memcpy(out, c.digest, MJC_KEY_BYTES);
}

/* mj_xxh128(blob): lets import skip damaged rows in a single INSERT ... SELECT. */
static void sql_xxh128(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    uint8_t h[MJC_KEY_BYTES];
    const void *p = sqlite3_value_blob(argv[0]);
    mjc_hash(p ? p : "", (size_t)sqlite3_value_bytes(argv[0]), h);
    sqlite3_result_blob(ctx, h, MJC_KEY_BYTES, SQLITE_TRANSIENT);
}

char *mjc_uri(const char *path, const char *query) {
    size_t n = strlen(path), q = strlen(query);
    char *u = malloc(5 + 3 * n + 2 + q + 1);
    if (!u) return NULL;
    char *w = u + sprintf(u, "file:");
    for (const char *s = path; *s; s++) {
        if (*s == '?' || *s == '#' || *s == '%')
            w += sprintf(w, "%%%02X", (unsigned char)*s);
        else
            *w++ = *s;
    }
    sprintf(w, "?%s", query);
    return u;
}

static int pragma_int(sqlite3 *c, const char *sql, int64_t *out) {
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

static int pragma_text(sqlite3 *c, const char *sql, char *out, size_t outlen) {
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(out, outlen, "%s", t ? (const char *)t : "");
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

typedef struct identity {
    int64_t app_id, version, tables;
} identity;

/* One read transaction, so the three values come from one version of the
 * file: read one by one, a reader could see the tables of a schema another
 * process just committed but the application id of the empty file before. */
static int read_identity(sqlite3 *c, identity *id) {
    int nested = !sqlite3_get_autocommit(c);
    int rc = nested ? SQLITE_OK : sqlite3_exec(c, "BEGIN", NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = pragma_int(c, "PRAGMA application_id", &id->app_id);
    if (rc == SQLITE_OK) rc = pragma_int(c, "PRAGMA user_version", &id->version);
    if (rc == SQLITE_OK) rc = pragma_int(c, "SELECT count(*) FROM sqlite_master", &id->tables);
    if (!nested && !sqlite3_get_autocommit(c))
        sqlite3_exec(c, rc == SQLITE_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* Writers create the schema under the directory's open lock; BEGIN IMMEDIATE
 * and the re-read inside the transaction still make a second creator (an
 * older megajit, which takes no lock) see the first one's schema. */
static int create_schema(sqlite3 *c) {
    /* Both only take effect before the first table exists. */
    int rc =
        sqlite3_exec(c, "PRAGMA page_size=16384; PRAGMA auto_vacuum=INCREMENTAL", NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_exec(c, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return rc;
    identity id;
    rc = read_identity(c, &id);
    if (rc == SQLITE_OK && id.tables == 0 && id.app_id == 0) {
        char sql[128];
        snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d",
                 MJC_APPLICATION_ID, MJC_SCHEMA_VERSION);
        rc = sqlite3_exec(c, schema_sql, NULL, NULL, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_exec(c, sql, NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK) rc = sqlite3_exec(c, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) sqlite3_exec(c, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static int open_uri(const char *path, const char *query, int flags, sqlite3 **out) {
    char *uri = mjc_uri(path, query);
    if (!uri) return SQLITE_NOMEM;
    int rc = sqlite3_open_v2(uri, out, flags | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    free(uri);
    if (*out) sqlite3_extended_result_codes(*out, 1);
    return rc;
}

static int fail(mjc_conn_info *ci, int rc, int mrc, char *err, size_t errlen, const char *path) {
    ci->sqlite_rc = rc & 0xff;
    /* A rollback after the failure may have replaced the connection's message. */
    int described = ci->conn && sqlite3_errcode(ci->conn) != SQLITE_OK;
    snprintf(err, errlen, "cache database %s: %s", path,
             described ? sqlite3_errmsg(ci->conn) : sqlite3_errstr(rc));
    sqlite3_close_v2(ci->conn);
    ci->conn = NULL;
    return mrc;
}

int mjc_schema_open(const char *path, int read_only, mjc_conn_info *ci, char *err, size_t errlen) {
    memset(ci, 0, sizeof *ci);
    if (read_only && access(path, F_OK) != 0) {
        snprintf(err, errlen, "no cache database at %s", path);
        return MJC_ERR_NOT_FOUND;
    }
    int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int rc = open_uri(path, read_only ? "mode=ro" : "mode=rwc", flags, &ci->conn);
    if (rc != SQLITE_OK) return fail(ci, rc, MJC_ERR_SQLITE, err, errlen, path);
    struct stat st;
    if (stat(path, &st) == 0) {
        ci->dev = st.st_dev;
        ci->ino = st.st_ino;
    }
    sqlite3_busy_timeout(ci->conn, 60000);
    identity id;
    rc = read_identity(ci->conn, &id);
    if (rc == SQLITE_OK && !read_only && id.tables == 0 && id.app_id == 0) {
        rc = create_schema(ci->conn);
        if (rc == SQLITE_OK) rc = read_identity(ci->conn, &id);
    }
    if (rc != SQLITE_OK) return fail(ci, rc, MJC_ERR_SQLITE, err, errlen, path);
    if (id.app_id != MJC_APPLICATION_ID) {
        sqlite3_close_v2(ci->conn);
        ci->conn = NULL;
        if (read_only && id.tables == 0 && id.app_id == 0) {
            snprintf(err, errlen, "no cache database at %s (the file is empty)", path);
            return MJC_ERR_NOT_FOUND;
        }
        snprintf(err, errlen,
                 "%s is not a megajit cache database (application_id 0x%llx); move it away "
                 "or point MEGAJIT_CACHE_DIR elsewhere",
                 path, (unsigned long long)id.app_id);
        return MJC_ERR_FOREIGN;
    }
    if (id.version > MJC_SCHEMA_VERSION) {
        ci->newer = 1;
        if (!read_only) {
            sqlite3_close_v2(ci->conn);
            ci->conn = NULL;
            rc = open_uri(path, "mode=ro", SQLITE_OPEN_READONLY, &ci->conn);
            if (rc != SQLITE_OK) return fail(ci, rc, MJC_ERR_SQLITE, err, errlen, path);
            sqlite3_busy_timeout(ci->conn, 60000);
            read_only = 1;
        }
    }
    if (!read_only) {
        rc = pragma_text(ci->conn, "PRAGMA journal_mode=WAL", ci->journal, sizeof ci->journal);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(ci->conn, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    } else {
        rc = pragma_text(ci->conn, "PRAGMA journal_mode", ci->journal, sizeof ci->journal);
    }
    if (rc == SQLITE_OK)
        rc =
            sqlite3_create_function_v2(ci->conn, "mj_xxh128", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                       NULL, sql_xxh128, NULL, NULL, NULL);
    if (rc != SQLITE_OK) return fail(ci, rc, MJC_ERR_SQLITE, err, errlen, path);
    return MJC_OK;
}

int mjc_snapshot_open(const char *path, int allow_writable, sqlite3 **out, char *err,
                      size_t errlen) {
    *out = NULL;
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "cache snapshot %s cannot be read", path);
        return MJC_ERR_NOT_FOUND;
    }
    if (!allow_writable) {
        static const char fix[] = "make it writable by its owner only (chmod go-w), or set "
                                  "MEGAJIT_CACHE_RO_ALLOW_WRITABLE=1 to use it anyway";
        char dir[4096];
        mjc_dirname(path, dir, sizeof dir);
        int rc = mjc_check_private("the cache snapshot", path, 0, 0, fix, err, errlen);
        if (rc == MJC_OK)
            rc = mjc_check_private("the directory of cache snapshots", dir, 0, 1, fix, err, errlen);
        if (rc != MJC_OK) return rc;
    }
    sqlite3 *c = NULL;
    int rc = open_uri(path, "mode=ro&immutable=1", SQLITE_OPEN_READONLY, &c);
    identity id = {0, 0, 0};
    if (rc == SQLITE_OK) rc = read_identity(c, &id);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "cache snapshot %s: %s", path,
                 c ? sqlite3_errmsg(c) : sqlite3_errstr(rc));
        sqlite3_close_v2(c);
        return MJC_ERR_SQLITE;
    }
    if (id.app_id != MJC_APPLICATION_ID || id.version > MJC_SCHEMA_VERSION) {
        snprintf(err, errlen,
                 id.app_id != MJC_APPLICATION_ID
                     ? "%s is not a megajit cache snapshot"
                     : "cache snapshot %s has a newer schema than this megajit reads",
                 path);
        sqlite3_close_v2(c);
        return MJC_ERR_FOREIGN;
    }
    *out = c;
    return MJC_OK;
}
