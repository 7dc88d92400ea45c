/*
 * Cache maintenance: listing, inspection, verification, removal, eviction and
 * snapshots. Operates on the writable database of a handle (possibly opened
 * read-only); mjc_list also lists the snapshot layers, which are never
 * modified.
 *
 * Callbacks run with the handle's lock held; they may call back into the same
 * handle (the lock is recursive) but must not close it.
 */
#ifndef MJ_CACHE_ADMIN_H
#define MJ_CACHE_ADMIN_H

#include <stdint.h>

#include "cache/cache.h"

/* The small columns of an entry. Strings are valid during the callback only
 * (mjc_list) or until mjc_detail_free (mjc_show). */
typedef struct mjc_info {
    uint8_t key[MJC_KEY_BYTES];
    const char *family;
    const char *kernel_name;
    const char *lowered_name;
    const char *arch;
    const char *compiler;
    const char *flags;
    int64_t cubin_size;
    int64_t source_size;
    int64_t created_at;
    int64_t last_used_at;
    int64_t hits;
    double compile_ms;
    const char *layer; /* NULL: the writable database; else the snapshot holding it */
} mjc_info;

/* The writable database's entries, then each snapshot layer's. fn returns
 * non-zero to stop. family/arch NULL = any. */
typedef int (*mjc_info_fn)(const mjc_info *info, void *user);
int mjc_list(mjc_db *db, const char *family, const char *arch, mjc_info_fn fn, void *user);

typedef struct mjc_detail {
    mjc_info info;
    char *source;
    char *log;
    char **headers; /* NULL-terminated, sorted */
    void *cubin;
    size_t cubin_size;
    char *strings_; /* owns info's strings */
} mjc_detail;

/* key_prefix: 4..32 hex digits. MJC_ERR_ARG for a malformed prefix,
 * MJC_ERR_NOT_FOUND / MJC_ERR_AMBIGUOUS when none / several entries match. */
int mjc_show(mjc_db *db, const char *key_prefix, mjc_detail *out);
void mjc_detail_free(mjc_detail *d);

typedef struct mjc_stats {
    int64_t entries;
    int64_t cubin_bytes;
    int64_t file_bytes; /* database + WAL */
    int64_t hits;
    double compile_ms_total;
    double compile_ms_max;
    char journal_mode[16];
    char filesystem[32];
} mjc_stats;
int mjc_stat(mjc_db *db, mjc_stats *out);

/* PRAGMA quick_check plus every entry's cubin hash; fn (may be NULL) hears of
 * each problem ("database" as key_hex for file-level damage). Never repairs. */
typedef void (*mjc_bad_fn)(const char *key_hex, const char *reason, void *user);
int mjc_verify(mjc_db *db, int64_t *checked, int64_t *bad, mjc_bad_fn fn, void *user);

typedef enum mjc_select {
    MJC_SELECT_KEY = 0,      /* unique key hex prefix */
    MJC_SELECT_FAMILY = 1,   /* family name */
    MJC_SELECT_HEADER = 2,   /* header path in the include closure */
    MJC_SELECT_COMPILER = 3, /* compiler string */
    MJC_SELECT_ARCH = 4,     /* "sm_90a" */
    MJC_SELECT_OLDER = 5,    /* days since last use, decimal */
    MJC_SELECT_ALL = 6,      /* value ignored */
} mjc_select;
int mjc_remove(mjc_db *db, mjc_select sel, const char *value, int64_t *removed);

/* Evicts least-recently-used entries until the cubin bytes fit max_bytes. */
int mjc_gc(mjc_db *db, int64_t max_bytes, int64_t *removed, int64_t *bytes_after);

/* Writes a compact, consistent snapshot to file atomically (temp file + rename). */
int mjc_export(mjc_db *db, const char *file);
/* Copies a snapshot's entries whose cubins check out; existing keys win. */
int mjc_import(mjc_db *db, const char *file, int64_t *imported);

#endif
