/* mj_cache_*: the public cache inspection API over cache/admin.h. */
#include <stdlib.h>
#include <string.h>

#include "cache/admin.h"
#include "cache/cache.h"
#include "include/megajit.h"
#include "runtime/env.h"
#include "runtime/error.h"
#include "runtime/log.h"

struct mj_cache {
    mjc_db *db;
    mjc_detail detail; /* backs the strings of the last mj_cache_show */
    mjc_stats stats;   /* backs the strings of the last mj_cache_stat */
};

static mj_status status_of(int rc) {
    switch (rc) {
    case MJC_OK:
        return MJ_OK;
    case MJC_ERR_NOT_FOUND:
        return MJ_ERR_NOT_FOUND;
    case MJC_ERR_ARG:
    case MJC_ERR_AMBIGUOUS:
        return MJ_ERR_INVALID_ARG;
    case MJC_ERR_NOMEM:
        return MJ_ERR_NOMEM;
    default:
        return MJ_ERR_CACHE;
    }
}

/* The cache's own sentence names the database and the reason; an operator
 * reading it through the CLI has no use for the API function's name. */
static mj_status fail(const mj_cache *c, int rc) {
    const char *msg = c ? mjc_errmsg(c->db) : "";
    return mj_fail(status_of(rc), "%s", msg[0] ? msg : "the cache refused the request");
}

static mj_status open_with(const char *what, const char *dir, int read_only, int create,
                           const char *ro_layers, mj_cache **out) {
    if (!out) return mj_fail(MJ_ERR_INVALID_ARG, "%s: out must not be NULL", what);
    *out = NULL;
    if (!dir) dir = mj_env_get()->cache_dir;
    if (!dir || !*dir) return mj_fail(MJ_ERR_CACHE, "no cache directory (set MEGAJIT_CACHE_DIR)");
    mj_cache *c = calloc(1, sizeof *c);
    if (!c) return mj_fail(MJ_ERR_NOMEM, "%s: out of memory", what);
    char err[512] = "";
    mjc_open_opts opts = {.dir = dir,
                          .ro_layers = ro_layers,
                          .read_only = read_only,
                          .create = create,
                          .ro_allow_writable = mj_env_get()->cache_ro_allow_writable,
                          .warn = mj_log_cache_warning};
    int rc = mjc_open(&opts, &c->db, err, sizeof err);
    if (rc != MJC_OK) {
        free(c);
        return mj_fail(status_of(rc), "%s", err);
    }
    *out = c;
    return MJ_OK;
}

mj_status mj_cache_open(const char *dir, int read_only, mj_cache **out) {
    mj_clear_error();
    return open_with("mj_cache_open", dir, read_only, 0, mj_env_get()->cache_ro, out);
}

mj_status mj_cache_create(const char *dir, mj_cache **out) {
    mj_clear_error();
    if (out) *out = NULL;
    if (mj_env_get()->cache_disable)
        return mj_fail(MJ_ERR_CACHE, "the cache is disabled (MEGAJIT_CACHE_DISABLE=1), so no "
                                     "kernel can be stored");
    if (dir && !*dir)
        return mj_fail(MJ_ERR_CACHE, "the cache directory is \"\" (none), so no kernel can be "
                                     "stored");
    mj_status st = open_with("mj_cache_create", dir, 0, 1, NULL, out);
    if (st == MJ_OK && mjc_is_read_only(out[0]->db)) {
        st = mj_fail(MJ_ERR_CACHE, "%s", mjc_errmsg(out[0]->db));
        mj_cache_close(*out);
        *out = NULL;
    }
    return st;
}

void mj_cache_close(mj_cache *c) {
    if (!c) return;
    mjc_detail_free(&c->detail);
    mjc_close(c->db);
    free(c);
}

const char *mj_cache_path(const mj_cache *c) {
    return c ? mjc_path(c->db) : "";
}

static void to_entry(const mjc_info *in, mj_cache_entry *e) {
    mjc_key_hex(in->key, e->key_hex);
    e->family = in->family;
    e->kernel_name = in->kernel_name;
    e->lowered_name = in->lowered_name;
    e->arch = in->arch;
    e->compiler = in->compiler;
    e->flags = in->flags;
    e->cubin_bytes = in->cubin_size;
    e->source_bytes = in->source_size;
    e->created_at = in->created_at;
    e->last_used_at = in->last_used_at;
    e->hits = in->hits;
    e->compile_ms = in->compile_ms;
    e->layer = in->layer ? in->layer : "";
}

typedef struct list_ctx {
    mj_cache_entry_fn fn;
    void *user;
} list_ctx;

static int list_one(const mjc_info *in, void *user) {
    list_ctx *ctx = user;
    mj_cache_entry e;
    to_entry(in, &e);
    return ctx->fn(&e, ctx->user);
}

mj_status mj_cache_list(mj_cache *c, const char *family, const char *arch, mj_cache_entry_fn fn,
                        void *user) {
    mj_clear_error();
    if (!c || !fn) return mj_fail(MJ_ERR_INVALID_ARG, "mj_cache_list: cache and fn are required");
    list_ctx ctx = {fn, user};
    int rc = mjc_list(c->db, family, arch, list_one, &ctx);
    return rc == MJC_OK ? MJ_OK : fail(c, rc);
}

mj_status mj_cache_show(mj_cache *c, const char *key_prefix, mj_cache_detail *out) {
    mj_clear_error();
    if (!c || !key_prefix || !out)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_cache_show: cache, key_prefix and out are required");
    memset(out, 0, sizeof *out);
    mjc_detail_free(&c->detail);
    int rc = mjc_show(c->db, key_prefix, &c->detail);
    if (rc != MJC_OK) return fail(c, rc);
    to_entry(&c->detail.info, &out->entry);
    out->source = c->detail.source;
    out->log = c->detail.log;
    out->headers = (const char *const *)c->detail.headers;
    out->cubin = c->detail.cubin;
    out->cubin_size = c->detail.cubin_size;
    return MJ_OK;
}

mj_status mj_cache_stat(mj_cache *c, mj_cache_stats *out) {
    mj_clear_error();
    if (!c || !out) return mj_fail(MJ_ERR_INVALID_ARG, "mj_cache_stat: cache and out are required");
    memset(out, 0, sizeof *out);
    int rc = mjc_stat(c->db, &c->stats);
    if (rc != MJC_OK) return fail(c, rc);
    out->entries = c->stats.entries;
    out->cubin_bytes = c->stats.cubin_bytes;
    out->file_bytes = c->stats.file_bytes;
    out->hits = c->stats.hits;
    out->compile_ms_total = c->stats.compile_ms_total;
    out->compile_ms_max = c->stats.compile_ms_max;
    out->journal_mode = c->stats.journal_mode;
    out->filesystem = c->stats.filesystem;
    return MJ_OK;
}

mj_status mj_cache_verify(mj_cache *c, int64_t *checked, int64_t *bad, mj_cache_bad_fn fn,
                          void *user) {
    mj_clear_error();
    if (checked) *checked = 0;
    if (bad) *bad = 0;
    if (!c) return mj_fail(MJ_ERR_INVALID_ARG, "mj_cache_verify: cache is required");
    int rc = mjc_verify(c->db, checked, bad, fn, user);
    return rc == MJC_OK ? MJ_OK : fail(c, rc);
}

/* The public selectors pass straight through to the cache layer's. */
_Static_assert(MJ_CACHE_SELECT_KEY == (int)MJC_SELECT_KEY &&
                   MJ_CACHE_SELECT_FAMILY == (int)MJC_SELECT_FAMILY &&
                   MJ_CACHE_SELECT_HEADER == (int)MJC_SELECT_HEADER &&
                   MJ_CACHE_SELECT_COMPILER == (int)MJC_SELECT_COMPILER &&
                   MJ_CACHE_SELECT_ARCH == (int)MJC_SELECT_ARCH &&
                   MJ_CACHE_SELECT_OLDER == (int)MJC_SELECT_OLDER &&
                   MJ_CACHE_SELECT_ALL == (int)MJC_SELECT_ALL,
               "mj_cache_selector and mjc_select must match");

mj_status mj_cache_remove(mj_cache *c, mj_cache_selector sel, const char *value, int64_t *removed) {
    mj_clear_error();
    if (removed) *removed = 0;
    if (!c) return mj_fail(MJ_ERR_INVALID_ARG, "mj_cache_remove: cache is required");
    int rc = mjc_remove(c->db, (mjc_select)sel, value, removed);
    return rc == MJC_OK ? MJ_OK : fail(c, rc);
}

mj_status mj_cache_gc(mj_cache *c, int64_t max_bytes, int64_t *removed, int64_t *bytes_after) {
    mj_clear_error();
    if (removed) *removed = 0;
    if (bytes_after) *bytes_after = 0;
    if (!c || max_bytes < 0)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_cache_gc: needs a cache and max_bytes >= 0");
    int rc = mjc_gc(c->db, max_bytes, removed, bytes_after);
    return rc == MJC_OK ? MJ_OK : fail(c, rc);
}

mj_status mj_cache_export(mj_cache *c, const char *file) {
    mj_clear_error();
    if (!c || !file || !*file)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_cache_export: cache and file are required");
    int rc = mjc_export(c->db, file);
    return rc == MJC_OK ? MJ_OK : fail(c, rc);
}

mj_status mj_cache_import(mj_cache *c, const char *file, int64_t *imported) {
    mj_clear_error();
    if (imported) *imported = 0;
    if (!c || !file || !*file)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_cache_import: cache and file are required");
    int rc = mjc_import(c->db, file, imported);
    return rc == MJC_OK ? MJ_OK : fail(c, rc);
}
