/* The SQLite kernel cache: storage, self-healing, admin commands, multi-process use. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/admin.h"
#include "cache/cache.h"
#include "include/megajit.h"

#define CUBIN_BYTES 1000

typedef struct fixture {
    char dir[64];
    char db_path[128];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/mjc-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db_path, sizeof f->db_path, "%s/%s", f->dir, MJC_DB_FILE);
    *state = f;
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state) {
    fixture *f = *state;
    nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void make_key(int i, uint8_t key[MJC_KEY_BYTES]) {
    for (int b = 0; b < MJC_KEY_BYTES; b++)
        key[b] = (uint8_t)(i * 37 + b * 11 + 1);
}

static void fill_cubin(int seed, uint8_t *buf, size_t n) {
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(seed * 131 + i * 7);
}

/* An entry whose strings are derived from i; cubin must hold CUBIN_BYTES. */
static mjc_entry make_entry(int i, const char *family, const char *arch, uint8_t *cubin,
                            const mjc_header *headers, size_t num_headers) {
    static const char *const names[] = {"sym0", "sym1", "sym2"};
    mjc_entry e;
    memset(&e, 0, sizeof e);
    make_key(i, e.key);
    fill_cubin(i, cubin, CUBIN_BYTES);
    e.family = family;
    e.kernel_name = "mj::test_kernel<1>";
    e.lowered_name = names[i % 3];
    e.arch = arch;
    e.compiler = i % 2 ? "nvrtc 13.0.88" : "nvrtc 12.8.93";
    e.flags = "-std=c++17";
    e.source = "// source";
    e.log = "";
    e.cubin = cubin;
    e.cubin_size = CUBIN_BYTES;
    e.compile_ms = 10.0 * (i + 1);
    e.headers = headers;
    e.num_headers = num_headers;
    return e;
}

/* The last warning the cache handed to its owner (every handle of open_dir). */
static char last_warning[1024];

static void keep_warning(void *ctx, const char *message) {
    (void)ctx;
    snprintf(last_warning, sizeof last_warning, "%s", message);
}

static mjc_db *open_dir(const char *dir, const char *layers) {
    mjc_db *db = NULL;
    char err[512] = "";
    mjc_open_opts o = {.dir = dir, .ro_layers = layers, .read_only = 0, .warn = keep_warning};
    int rc = mjc_open(&o, &db, err, sizeof err);
    if (rc != MJC_OK) fprintf(stderr, "mjc_open: %s\n", err);
    assert_int_equal(rc, MJC_OK);
    return db;
}

static void insert_n(mjc_db *db, int first, int count, const char *family, const char *arch) {
    uint8_t cubin[CUBIN_BYTES];
    for (int i = first; i < first + count; i++) {
        mjc_entry e = make_entry(i, family, arch, cubin, NULL, 0);
        assert_int_equal(mjc_insert(db, &e), MJC_OK);
    }
}

static int lookup_ok(mjc_db *db, int i, int *from_snapshot) {
    uint8_t key[MJC_KEY_BYTES], want[CUBIN_BYTES];
    mjc_found found;
    int healed = 0;
    make_key(i, key);
    int rc = mjc_lookup(db, key, &found, &healed);
    if (rc != MJC_OK) return 0;
    fill_cubin(i, want, sizeof want);
    assert_int_equal(found.cubin_size, CUBIN_BYTES);
    assert_memory_equal(found.cubin, want, CUBIN_BYTES);
    if (from_snapshot) *from_snapshot = found.from_snapshot;
    mjc_found_free(&found);
    return 1;
}

static void raw_exec(const char *path, const char *sql) {
    sqlite3 *c = NULL;
    assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
    sqlite3_busy_timeout(c, 10000);
    char *msg = NULL;
    int rc = sqlite3_exec(c, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) fprintf(stderr, "raw_exec %s: %s\n", sql, msg);
    sqlite3_free(msg);
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_close(c);
}

static int64_t raw_int(const char *path, const char *sql) {
    sqlite3 *c = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
    sqlite3_busy_timeout(c, 10000);
    assert_int_equal(sqlite3_prepare_v2(c, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(c);
    return v;
}

/* Damages entry i's stored cubin behind the cache's back. */
static void flip_first_cubin_byte(const char *path, int i) {
    uint8_t key[MJC_KEY_BYTES], cubin[CUBIN_BYTES];
    make_key(i, key);
    fill_cubin(i, cubin, sizeof cubin);
    cubin[0] ^= 0xff;
    sqlite3 *c = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(c, "UPDATE entry SET cubin=?1 WHERE key=?2", -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_blob(st, 1, cubin, sizeof cubin, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, key, sizeof key, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    assert_int_equal(sqlite3_changes(c), 1);
    sqlite3_finalize(st);
    sqlite3_close(c);
}

static void test_roundtrip(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    uint8_t cubin[CUBIN_BYTES], h[MJC_KEY_BYTES] = {7};
    mjc_header hdrs[2] = {{"common/fp4.cuh", {0}}, {"pre_dispatch.cuh", {0}}};
    memcpy(hdrs[0].content_hash, h, sizeof h);
    mjc_entry e = make_entry(4, "pre_dispatch", "sm_90a", cubin, hdrs, 2);
    assert_int_equal(mjc_insert(db, &e), MJC_OK);

    mjc_found found;
    int healed = 1;
    assert_int_equal(mjc_lookup(db, e.key, &found, &healed), MJC_OK);
    assert_int_equal(healed, 0);
    assert_int_equal(found.from_snapshot, 0);
    assert_int_equal(found.cubin_size, CUBIN_BYTES);
    assert_memory_equal(found.cubin, cubin, CUBIN_BYTES);
    assert_string_equal(found.lowered_name, "sym1");
    mjc_found_free(&found);

    char journal[16];
    assert_string_equal(mjc_journal_mode(db, journal, sizeof journal), "wal");
    assert_int_equal(raw_int(f->db_path, "PRAGMA page_size"), 16384);
    assert_int_equal(raw_int(f->db_path, "PRAGMA auto_vacuum"), 2);
    assert_int_equal(raw_int(f->db_path, "PRAGMA application_id"), 0x4D4A4954);
    assert_int_equal(raw_int(f->db_path, "PRAGMA user_version"), 1);
    assert_string_equal(mjc_path(db), f->db_path);
    mjc_close(db);

    mj_cache *c = NULL;
    assert_int_equal(mj_cache_open(f->dir, 1, &c), MJ_OK);
    char hex[33];
    mjc_key_hex(e.key, hex);
    hex[6] = '\0';
    mj_cache_detail d;
    assert_int_equal(mj_cache_show(c, hex, &d), MJ_OK);
    assert_string_equal(d.entry.family, "pre_dispatch");
    assert_string_equal(d.entry.arch, "sm_90a");
    assert_string_equal(d.source, "// source");
    assert_int_equal(d.cubin_size, CUBIN_BYTES);
    assert_string_equal(d.headers[0], "common/fp4.cuh");
    assert_string_equal(d.headers[1], "pre_dispatch.cuh");
    assert_null(d.headers[2]);
    assert_int_equal(mj_cache_show(c, "zz", &d), MJ_ERR_INVALID_ARG);
    assert_int_equal(mj_cache_show(c, "0000", &d), MJ_ERR_NOT_FOUND);
    mj_cache_stats s;
    assert_int_equal(mj_cache_stat(c, &s), MJ_OK);
    assert_int_equal(s.entries, 1);
    assert_int_equal(s.cubin_bytes, CUBIN_BYTES);
    assert_true(s.file_bytes > 0);
    assert_string_equal(s.journal_mode, "wal");
    assert_true(s.compile_ms_max == 50.0);
    mj_cache_close(c);
}

static void test_miss(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    insert_n(db, 0, 2, "pre_dispatch", "sm_90a");
    uint8_t key[MJC_KEY_BYTES];
    mjc_found found;
    int healed = 1;
    make_key(77, key);
    assert_int_equal(mjc_lookup(db, key, &found, &healed), MJC_ERR_NOT_FOUND);
    assert_int_equal(healed, 0);
    assert_null(found.cubin);
    mjc_close(db);
}

static void test_insert_or_ignore_keeps_first(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    insert_n(db, 3, 1, "pre_dispatch", "sm_90a");
    uint8_t other[CUBIN_BYTES];
    mjc_entry e = make_entry(3, "pre_dispatch", "sm_90a", other, NULL, 0);
    memset(other, 0x5a, sizeof other);
    assert_int_equal(mjc_insert(db, &e), MJC_OK);
    assert_true(lookup_ok(db, 3, NULL));
    assert_int_equal(raw_int(f->db_path, "SELECT count(*) FROM entry"), 1);
    mjc_close(db);
}

static void count_bad(const char *key_hex, const char *reason, void *user) {
    (void)key_hex;
    (void)reason;
    ++*(int *)user;
}

static void test_flipped_byte_verify_and_heal(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    insert_n(db, 0, 2, "pre_dispatch", "sm_90a");
    flip_first_cubin_byte(f->db_path, 0);

    mj_cache *c = NULL;
    int64_t checked = 0, bad = 0;
    int calls = 0;
    assert_int_equal(mj_cache_open(f->dir, 1, &c), MJ_OK);
    assert_int_equal(mj_cache_verify(c, &checked, &bad, count_bad, &calls), MJ_OK);
    assert_int_equal(checked, 2);
    assert_int_equal(bad, 1);
    assert_int_equal(calls, 1);
    mj_cache_close(c);

    uint8_t key[MJC_KEY_BYTES];
    mjc_found found;
    int healed = 0;
    make_key(0, key);
    last_warning[0] = '\0';
    assert_int_equal(mjc_lookup(db, key, &found, &healed), MJC_ERR_NOT_FOUND);
    assert_int_equal(healed, 1);
    assert_non_null(strstr(last_warning, "failed its checksum; deleted"));
    assert_int_equal(raw_int(f->db_path, "SELECT count(*) FROM entry"), 1);
    assert_true(lookup_ok(db, 1, NULL));
    insert_n(db, 0, 1, "pre_dispatch", "sm_90a");
    assert_true(lookup_ok(db, 0, NULL));
    mjc_close(db);
}

static int has_corrupt_copy(const char *dir) {
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        found |= strstr(de->d_name, MJC_DB_FILE ".corrupt-") != NULL;
    if (d) closedir(d);
    return found;
}

static void test_garbage_file_moved_aside(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    insert_n(db, 0, 3, "pre_dispatch", "sm_90a");
    mjc_close(db);
    int fd = open(f->db_path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    char junk[8192];
    memset(junk, 0xAB, sizeof junk);
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);

    last_warning[0] = '\0';
    db = open_dir(f->dir, NULL);
    assert_true(has_corrupt_copy(f->dir));
    assert_non_null(strstr(last_warning, "is corrupt; moved it to"));
    assert_false(lookup_ok(db, 0, NULL));
    insert_n(db, 0, 1, "pre_dispatch", "sm_90a");
    assert_true(lookup_ok(db, 0, NULL));
    mjc_close(db);
}

/* Page 1 (the schema) stays intact, so the open succeeds and the damage only
 * shows when a lookup reads the table pages. */
static void test_corrupt_pages_found_by_lookup(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    insert_n(db, 0, 3, "pre_dispatch", "sm_90a");
    mjc_close(db);
    struct stat st;
    assert_int_equal(stat(f->db_path, &st), 0);
    assert_true(st.st_size > 16384);
    int fd = open(f->db_path, O_WRONLY);
    assert_true(fd >= 0);
    char junk[16384];
    memset(junk, 0x5C, sizeof junk);
    for (off_t off = 16384; off < st.st_size; off += (off_t)sizeof junk)
        assert_int_equal(pwrite(fd, junk, sizeof junk, off), (ssize_t)sizeof junk);
    close(fd);

    db = open_dir(f->dir, NULL);
    assert_false(lookup_ok(db, 1, NULL));
    assert_true(has_corrupt_copy(f->dir));
    insert_n(db, 1, 1, "pre_dispatch", "sm_90a");
    assert_true(lookup_ok(db, 1, NULL));
    mjc_close(db);
}

static void test_foreign_database_refused(void **state) {
    fixture *f = *state;
    raw_exec(f->db_path, "PRAGMA application_id=1234; CREATE TABLE t(x)");
    mjc_db *db = NULL;
    char err[512] = "";
    mjc_open_opts o = {.dir = f->dir};
    assert_int_equal(mjc_open(&o, &db, err, sizeof err), MJC_ERR_FOREIGN);
    assert_null(db);
    assert_non_null(strstr(err, "not a megajit cache"));
    mj_cache *c = NULL;
    assert_int_equal(mj_cache_open(f->dir, 0, &c), MJ_ERR_CACHE);
    assert_non_null(strstr(mj_last_error(), "not a megajit cache"));
}

static void test_newer_schema_read_only(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    insert_n(db, 0, 1, "pre_dispatch", "sm_90a");
    mjc_close(db);
    raw_exec(f->db_path, "PRAGMA user_version=2");
    db = open_dir(f->dir, NULL);
    assert_non_null(strstr(mjc_errmsg(db), "read-only"));
    assert_true(lookup_ok(db, 0, NULL));
    uint8_t cubin[CUBIN_BYTES];
    mjc_entry e = make_entry(1, "pre_dispatch", "sm_90a", cubin, NULL, 0);
    assert_int_equal(mjc_insert(db, &e), MJC_ERR_READ_ONLY);
    int fd = 0;
    assert_int_equal(mjc_lock_key(db, e.key, &fd), MJC_OK);
    assert_int_equal(fd, -1);
    mjc_close(db);
}

/* A cache in dir holding entries 0..n-1, exported to snap. */
static void make_snapshot(const char *dir, int n, const char *snap) {
    mjc_db *db = open_dir(dir, NULL);
    insert_n(db, 0, n, "pre_dispatch", "sm_90a");
    mjc_close(db);
    mj_cache *c = NULL;
    assert_int_equal(mj_cache_open(dir, 1, &c), MJ_OK);
    assert_int_equal(mj_cache_export(c, snap), MJ_OK);
    mj_cache_close(c);
}

static void test_export_layer_import(void **state) {
    fixture *f = *state;
    char a[128], b[128], c2[128], snap[160], layers[400];
    snprintf(a, sizeof a, "%s/a", f->dir);
    snprintf(b, sizeof b, "%s/b", f->dir);
    snprintf(c2, sizeof c2, "%s/c", f->dir);
    snprintf(snap, sizeof snap, "%s/snap.mjdb", f->dir);
    make_snapshot(a, 3, snap);
    assert_int_equal(raw_int(snap, "PRAGMA application_id"), 0x4D4A4954);
    mjc_db *db;
    mj_cache *c = NULL;

    snprintf(layers, sizeof layers, "%s/missing.mjdb:%s", f->dir, snap);
    db = open_dir(b, layers);
    int from_snapshot = 0;
    assert_true(lookup_ok(db, 2, &from_snapshot));
    assert_int_equal(from_snapshot, 1);
    assert_false(lookup_ok(db, 3, NULL));
    mjc_close(db);

    mjc_open_opts o = {.dir = NULL, .ro_layers = snap};
    char err[256];
    assert_int_equal(mjc_open(&o, &db, err, sizeof err), MJC_OK);
    assert_true(lookup_ok(db, 1, &from_snapshot));
    assert_int_equal(from_snapshot, 1);
    mjc_close(db);

    int64_t imported = 0;
    assert_int_equal(mj_cache_open(c2, 0, &c), MJ_OK);
    assert_int_equal(mj_cache_import(c, snap, &imported), MJ_OK);
    assert_int_equal(imported, 3);
    assert_int_equal(mj_cache_import(c, snap, &imported), MJ_OK);
    assert_int_equal(imported, 0);
    mj_cache_close(c);
    db = open_dir(c2, NULL);
    assert_true(lookup_ok(db, 0, &from_snapshot));
    assert_int_equal(from_snapshot, 0);
    mjc_close(db);

    char foreign[160];
    snprintf(foreign, sizeof foreign, "%s/foreign.db", f->dir);
    raw_exec(foreign, "PRAGMA application_id=99; CREATE TABLE entry(x)");
    assert_int_equal(mj_cache_open(c2, 0, &c), MJ_OK);
    assert_int_equal(mj_cache_import(c, foreign, &imported), MJ_ERR_CACHE);
    mj_cache_close(c);
    /* A foreign layer is skipped, not fatal. */
    snprintf(layers, sizeof layers, "%s:%s", foreign, snap);
    db = open_dir(b, layers);
    assert_true(lookup_ok(db, 0, &from_snapshot));
    mjc_close(db);
}

static void test_gc_evicts_lru(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    insert_n(db, 0, 10, "pre_dispatch", "sm_90a");
    /* Entry i was last used at 2000 - i: entry 9 is the least recent. */
    raw_exec(f->db_path, "UPDATE entry SET last_used_at = 2000 - (id - 1)");
    mj_cache *c = NULL;
    int64_t removed = 0, after = 0;
    assert_int_equal(mj_cache_open(f->dir, 0, &c), MJ_OK);
    assert_int_equal(mj_cache_gc(c, 5500, &removed, &after), MJ_OK);
    assert_int_equal(removed, 5);
    assert_int_equal(after, 5000);
    assert_int_equal(mj_cache_gc(c, 5500, &removed, &after), MJ_OK);
    assert_int_equal(removed, 0);
    mj_cache_close(c);
    for (int i = 0; i < 10; i++)
        assert_int_equal(lookup_ok(db, i, NULL), i < 5);
    mjc_close(db);
}

static void test_remove_selectors(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    uint8_t cubin[CUBIN_BYTES];
    mjc_header hdr = {"common/fp4.cuh", {1}};
    for (int i = 0; i < 4; i++) {
        mjc_entry e = make_entry(i, "pre_dispatch", "sm_90a", cubin, &hdr, i < 2);
        assert_int_equal(mjc_insert(db, &e), MJC_OK);
    }
    insert_n(db, 4, 3, "mega_moe", "sm_90a");
    insert_n(db, 7, 2, "mega_moe", "sm_100a");
    raw_exec(f->db_path, "UPDATE entry SET last_used_at = strftime('%s','now') - 10*86400 "
                         "WHERE id = 9");
    mj_cache *c = NULL;
    int64_t n = -1;
    assert_int_equal(mj_cache_open(f->dir, 0, &c), MJ_OK);
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_OLDER, "7.5", &n), MJ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_OLDER, "x", &n), MJ_ERR_INVALID_ARG);
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_HEADER, "common/fp4.cuh", &n), MJ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(raw_int(f->db_path, "SELECT count(*) FROM entry_header"), 0);
    assert_int_equal(raw_int(f->db_path, "SELECT count(*) FROM header"), 0);
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_ARCH, "sm_100a", &n), MJ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_FAMILY, "pre_dispatch", &n), MJ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_COMPILER, "nvrtc 12.8.93", &n), MJ_OK);
    assert_int_equal(n, 2); /* entries 4 and 6 */
    char hex[33];
    uint8_t key[MJC_KEY_BYTES];
    make_key(5, key);
    mjc_key_hex(key, hex);
    hex[5] = '\0';
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_KEY, "12", &n), MJ_ERR_INVALID_ARG);
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_KEY, hex, &n), MJ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_KEY, hex, &n), MJ_ERR_NOT_FOUND);
    insert_n(db, 10, 3, "mega_moe", "sm_90a");
    assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_ALL, NULL, &n), MJ_OK);
    assert_int_equal(n, 3);
    assert_int_equal(raw_int(f->db_path, "SELECT count(*) FROM entry"), 0);
    mj_cache_close(c);
    mjc_close(db);
}

static void test_ambiguous_prefix(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    uint8_t cubin[CUBIN_BYTES];
    for (int i = 0; i < 2; i++) {
        mjc_entry e = make_entry(i, "pre_dispatch", "sm_90a", cubin, NULL, 0);
        memset(e.key, 0xab, 4);
        assert_int_equal(mjc_insert(db, &e), MJC_OK);
    }
    mj_cache *c = NULL;
    mj_cache_detail d;
    assert_int_equal(mj_cache_open(f->dir, 1, &c), MJ_OK);
    assert_int_equal(mj_cache_show(c, "ABab", &d), MJ_ERR_INVALID_ARG);
    assert_non_null(strstr(mj_last_error(), "several"));
    mj_cache_close(c);
    mjc_close(db);
}

static int count_lines(const char *path) {
    FILE *fp = fopen(path, "r");
    int n = 0;
    for (int ch; fp && (ch = fgetc(fp)) != EOF;)
        n += ch == '\n';
    if (fp) fclose(fp);
    return n;
}

/* What a compiling process does on a miss: lock, recheck, compile, publish. */
static int child_compile_all(mjc_db *db, int child, const char *counter) {
    uint8_t cubin[CUBIN_BYTES];
    for (int j = 0; j < 20; j++) {
        int k = (j + child * 3) % 20, fd = -1, healed = 0;
        mjc_entry e = make_entry(k, "pre_dispatch", "sm_90a", cubin, NULL, 0);
        mjc_found found;
        if (mjc_lock_key(db, e.key, &fd) != MJC_OK || fd < 0) return 1;
        int rc = mjc_lookup(db, e.key, &found, &healed);
        if (rc == MJC_OK) {
            mjc_found_free(&found);
        } else {
            int out = open(counter, O_WRONLY | O_APPEND | O_CREAT, 0600);
            char line[16];
            int len = snprintf(line, sizeof line, "%d\n", k);
            if (out < 0 || write(out, line, (size_t)len) != len) return 2;
            close(out);
            usleep(2000);
            if (mjc_insert(db, &e) != MJC_OK) return 3;
        }
        mjc_unlock_key(fd);
    }
    return 0;
}

static void test_forked_compilers_compile_once(void **state) {
    fixture *f = *state;
    char counter[128];
    snprintf(counter, sizeof counter, "%s/counter.txt", f->dir);
    mjc_db *db = open_dir(f->dir, NULL);
    /* The children inherit a handle that has a live connection. */
    assert_false(lookup_ok(db, 99, NULL));
    alarm(120); /* a deadlocked child would otherwise hang the suite */
    pid_t pids[8];
    for (int c = 0; c < 8; c++) {
        pids[c] = fork();
        assert_true(pids[c] >= 0);
        if (pids[c] == 0) _exit(child_compile_all(db, c, counter));
    }
    for (int c = 0; c < 8; c++) {
        int status = 0;
        assert_int_equal(waitpid(pids[c], &status, 0), pids[c]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    alarm(0);
    assert_int_equal(count_lines(counter), 20);
    for (int k = 0; k < 20; k++)
        assert_true(lookup_ok(db, k, NULL));
    mjc_close(db);
}

static void test_killed_lock_holder(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    insert_n(db, 0, 2, "pre_dispatch", "sm_90a");
    int p[2];
    assert_int_equal(pipe(p), 0);
    uint8_t key[MJC_KEY_BYTES];
    make_key(5, key);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = -1;
        sqlite3 *c = NULL;
        if (mjc_lock_key(db, key, &fd) != MJC_OK || fd < 0) _exit(1);
        if (sqlite3_open(f->db_path, &c) != SQLITE_OK) _exit(2);
        sqlite3_busy_timeout(c, 10000);
        if (sqlite3_exec(c,
                         "BEGIN IMMEDIATE; INSERT INTO header(path, hash) VALUES('half', x'00');"
                         "DELETE FROM entry",
                         NULL, NULL, NULL) != SQLITE_OK)
            _exit(3);
        if (write(p[1], "x", 1) != 1) _exit(4);
        for (;;)
            pause();
    }
    close(p[1]);
    char ch = 0;
    assert_int_equal(read(p[0], &ch, 1), 1);
    close(p[0]);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));

    alarm(60); /* a lock left behind would hang here */
    int fd = -1;
    assert_int_equal(mjc_lock_key(db, key, &fd), MJC_OK);
    assert_true(fd >= 0);
    insert_n(db, 5, 1, "pre_dispatch", "sm_90a");
    mjc_unlock_key(fd);
    alarm(0);
    for (int i = 0; i < 6; i++)
        assert_int_equal(lookup_ok(db, i, NULL), i < 2 || i == 5);
    assert_int_equal(raw_int(f->db_path, "SELECT count(*) FROM header WHERE path='half'"), 0);
    mjc_close(db);
}

static int list_count(const mj_cache_entry *e, void *user);

/* Opening creates nothing: a cache that does not exist yet is empty to every
 * inspection and maintenance command, and appears at its first store. */
static void test_open_modes(void **state) {
    fixture *f = *state;
    char missing[128], locks[160];
    snprintf(missing, sizeof missing, "%s/nothing", f->dir);
    snprintf(locks, sizeof locks, "%s/locks", missing);
    for (int read_only = 1; read_only >= 0; read_only--) {
        mj_cache *c = NULL;
        assert_int_equal(mj_cache_open(missing, read_only, &c), MJ_OK);
        int n = 0;
        assert_int_equal(mj_cache_list(c, NULL, NULL, list_count, &n), MJ_OK);
        assert_int_equal(n, 0);
        mj_cache_stats st;
        assert_int_equal(mj_cache_stat(c, &st), MJ_OK);
        assert_int_equal(st.entries, 0);
        assert_string_equal(st.journal_mode, "");
        int64_t checked = -1, bad = -1, removed = -1, after = -1;
        assert_int_equal(mj_cache_verify(c, &checked, &bad, NULL, NULL), MJ_OK);
        assert_int_equal(checked + bad, 0);
        if (!read_only) {
            assert_int_equal(mj_cache_remove(c, MJ_CACHE_SELECT_ALL, NULL, &removed), MJ_OK);
            assert_int_equal(mj_cache_gc(c, 0, &removed, &after), MJ_OK);
            assert_int_equal(removed, 0);
        }
        mj_cache_detail d;
        assert_int_equal(mj_cache_show(c, "abcd", &d), MJ_ERR_NOT_FOUND);
        assert_non_null(strstr(mj_cache_path(c), "nothing/megajit-cache.db"));
        mj_cache_close(c);
        assert_int_equal(access(missing, F_OK), -1);
    }
    /* A writable handle creates the directory at its first store. */
    mjc_db *db = open_dir(missing, NULL);
    assert_int_equal(access(missing, F_OK), -1);
    assert_false(lookup_ok(db, 0, NULL));
    insert_n(db, 0, 1, "pre_dispatch", "sm_90a");
    assert_true(lookup_ok(db, 0, NULL));
    struct stat st;
    assert_int_equal(stat(locks, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    mjc_close(db);
    /* Local sandboxes (ext4, overlay, tmpfs, 9p) must be accepted. */
    assert_true(strlen(mjc_filesystem_name(f->dir)) > 0);
    mjc_open_opts none = {0};
    assert_int_equal(mjc_open(&none, &db, NULL, 0), MJC_OK);
    assert_string_equal(mjc_path(db), "");
    assert_false(lookup_ok(db, 0, NULL));
    uint8_t cubin[CUBIN_BYTES];
    mjc_entry e = make_entry(0, "pre_dispatch", "sm_90a", cubin, NULL, 0);
    assert_int_equal(mjc_insert(db, &e), MJC_ERR_READ_ONLY);
    mjc_close(db);
}

static int list_count(const mj_cache_entry *e, void *user) {
    (void)e;
    ++*(int *)user;
    return 0;
}

static void test_list_filters(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    insert_n(db, 0, 2, "pre_dispatch", "sm_90a");
    insert_n(db, 2, 3, "mega_moe", "sm_100a");
    mjc_close(db);
    mj_cache *c = NULL;
    int n = 0;
    assert_int_equal(mj_cache_open(f->dir, 1, &c), MJ_OK);
    assert_int_equal(mj_cache_list(c, NULL, NULL, list_count, &n), MJ_OK);
    assert_int_equal(n, 5);
    n = 0;
    assert_int_equal(mj_cache_list(c, "mega_moe", NULL, list_count, &n), MJ_OK);
    assert_int_equal(n, 3);
    n = 0;
    assert_int_equal(mj_cache_list(c, "pre_dispatch", "sm_100a", list_count, &n), MJ_OK);
    assert_int_equal(n, 0);
    mj_cache_close(c);
}

typedef struct thread_arg {
    mjc_db *db;
    int first;
    int ok;
} thread_arg;

static void *thread_body(void *p) {
    thread_arg *a = p;
    uint8_t cubin[CUBIN_BYTES];
    a->ok = 1;
    for (int i = a->first; i < a->first + 30; i++) {
        mjc_entry e = make_entry(i % 40, "pre_dispatch", "sm_90a", cubin, NULL, 0);
        mjc_found found;
        int healed = 0;
        if (mjc_insert(a->db, &e) != MJC_OK) a->ok = 0;
        if (mjc_lookup(a->db, e.key, &found, &healed) != MJC_OK) a->ok = 0;
        mjc_found_free(&found);
    }
    return NULL;
}

static void test_threads_share_handle(void **state) {
    fixture *f = *state;
    mjc_db *db = open_dir(f->dir, NULL);
    pthread_t t[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){db, i * 10, 0};
        assert_int_equal(pthread_create(&t[i], NULL, thread_body, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_true(args[i].ok);
    }
    assert_int_equal(raw_int(f->db_path, "SELECT count(*) FROM entry"), 40);
    mjc_close(db);
}

/* Opens dir writable (create as given); the rc, the message in err. */
static int open_rc(const char *dir, int create, char *err, size_t errlen) {
    mjc_db *db = NULL;
    mjc_open_opts o = {.dir = dir, .create = create};
    err[0] = '\0';
    int rc = mjc_open(&o, &db, err, errlen);
    mjc_close(db);
    return rc;
}

/* A writable cache others can write (or that is someone else's) is refused and
 * left as it was; inspecting one is allowed. */
static void test_unsafe_cache_refused(void **state) {
    fixture *f = *state;
    char dir[128], locks[160], err[512];
    snprintf(dir, sizeof dir, "%s/shared", f->dir);
    snprintf(locks, sizeof locks, "%s/locks", dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    static const struct {
        mode_t mode;
        const char *why;
    } modes[] = {{0777, "writable by every user (mode 0777)"},
                 {01777, "writable by every user (mode 1777)"},
                 {0775, "writable by its group (mode 0775)"}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        assert_int_equal(chmod(dir, modes[i].mode), 0);
        for (int create = 0; create <= 1; create++) {
            assert_int_equal(open_rc(dir, create, err, sizeof err), MJC_ERR_UNSAFE);
            assert_non_null(strstr(err, modes[i].why));
            assert_non_null(strstr(err, dir));
            assert_non_null(strstr(err, "chmod go-w"));
            assert_non_null(strstr(err, "MEGAJIT_CACHE_DIR"));
        }
        assert_int_equal(access(locks, F_OK), -1);
        mj_cache *c = NULL;
        assert_int_equal(mj_cache_open(dir, 1, &c), MJ_OK);
        mj_cache_close(c);
        assert_int_equal(mj_cache_create(dir, &c), MJ_ERR_CACHE);
        assert_non_null(strstr(mj_last_error(), modes[i].why));
    }
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(open_rc(dir, 1, err, sizeof err), MJC_OK);
    /* The database file is checked too. */
    char db[160];
    snprintf(db, sizeof db, "%s/%s", dir, MJC_DB_FILE);
    assert_int_equal(chmod(db, 0666), 0);
    assert_int_equal(open_rc(dir, 0, err, sizeof err), MJC_ERR_UNSAFE);
    assert_non_null(strstr(err, "the cache database"));
    assert_int_equal(chmod(db, 0644), 0);
    if (geteuid() == 0) { /* only root can give a directory away */
        assert_int_equal(chown(dir, 65534, 65534), 0);
        assert_int_equal(open_rc(dir, 0, err, sizeof err), MJC_ERR_UNSAFE);
        assert_non_null(strstr(err, "belongs to another user (uid 65534"));
    }
}

/* A snapshot others could write or replace is skipped unless the operator
 * opts in; a sticky world-writable directory (/tmp) cannot replace it. */
static void test_unsafe_snapshot_skipped(void **state) {
    fixture *f = *state;
    char a[128], shared[128], snap[160];
    snprintf(a, sizeof a, "%s/a", f->dir);
    snprintf(shared, sizeof shared, "%s/shared", f->dir);
    snprintf(snap, sizeof snap, "%s/snap.mjdb", shared);
    assert_int_equal(mkdir(shared, 0755), 0);
    make_snapshot(a, 1, snap);
    mjc_db *db;
    static const struct {
        mode_t file, dir;
        int used;
    } cases[] = {{0644, 0755, 1}, {0666, 0755, 0},  {0664, 0755, 0},
                 {0644, 0777, 0}, {0644, 01777, 1}, {0444, 0775, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(chmod(snap, cases[i].file), 0);
        assert_int_equal(chmod(shared, cases[i].dir), 0);
        for (int allow = 0; allow <= 1; allow++) {
            mjc_open_opts o = {.ro_layers = snap, .ro_allow_writable = allow};
            char err[256];
            assert_int_equal(mjc_open(&o, &db, err, sizeof err), MJC_OK);
            const int used = lookup_ok(db, 0, NULL), want = cases[i].used || allow;
            if (used != want)
                fail_msg("snapshot mode %o in a directory of mode %o, allow %d: used %d, wanted %d",
                         (unsigned)cases[i].file, (unsigned)cases[i].dir, allow, used, want);
            mjc_close(db);
        }
    }
    assert_int_equal(chmod(shared, 0755), 0);
}

/* Ranks of one server starting at once on an empty cache: 16 processes open a
 * cache directory that does not exist yet, all at the same moment, 200 times.
 * Every open must succeed (creating the schema is serialized, not a race that
 * "database is locked" can lose). Tiny databases, no compiles: seconds. */
enum { OPENERS = 16, OPEN_ROUNDS = 200 };

/* Shared by the openers. A blocking barrier rather than a spinning one: 16
 * processes spinning on 2 cores starve the one doing the work. */
typedef struct open_report {
    pthread_barrier_t barrier;
    int failures;
    char first_error[512];
} open_report;

static int opener(open_report *rep, const char *base, int rank) {
    alarm(120); /* an opener that never arrives must not hang the others */
    for (int round = 0; round < OPEN_ROUNDS; round++) {
        char dir[128];
        snprintf(dir, sizeof dir, "%s/r%d", base, round);
        pthread_barrier_wait(&rep->barrier);
        mjc_db *db = NULL;
        char err[512] = "";
        mjc_open_opts o = {.dir = dir, .create = 1};
        if (mjc_open(&o, &db, err, sizeof err) != MJC_OK &&
            __atomic_fetch_add(&rep->failures, 1, __ATOMIC_RELAXED) == 0)
            snprintf(rep->first_error, sizeof rep->first_error, "round %d: %s", round, err);
        mjc_close(db);
        pthread_barrier_wait(&rep->barrier);
        if (rank == 0) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    return 0;
}

static void test_many_first_openers(void **state) {
    fixture *f = *state;
    open_report *rep =
        mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(rep != MAP_FAILED);
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    assert_int_equal(pthread_barrier_init(&rep->barrier, &attr, OPENERS), 0);
    pthread_barrierattr_destroy(&attr);
    pid_t pids[OPENERS];
    for (int r = 0; r < OPENERS; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) _exit(opener(rep, f->dir, r));
    }
    int stuck = 0;
    for (int r = 0; r < OPENERS; r++) {
        int status = 0;
        assert_int_equal(waitpid(pids[r], &status, 0), pids[r]);
        stuck += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    if (rep->failures || stuck)
        fail_msg("%d of %d opens failed, %d openers stuck; first: %s", rep->failures,
                 OPENERS * OPEN_ROUNDS, stuck, rep->first_error);
    pthread_barrier_destroy(&rep->barrier);
    munmap(rep, sizeof *rep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_miss, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert_or_ignore_keeps_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_byte_verify_and_heal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_file_moved_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_pages_found_by_lookup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_database_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_export_layer_import, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_evicts_lru, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_selectors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ambiguous_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forked_compilers_compile_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_lock_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_share_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_first_openers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsafe_cache_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsafe_snapshot_skipped, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
