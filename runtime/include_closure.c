#include "runtime/include_closure.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/error.h"

static void store_hash(XXH128_hash_t h, uint8_t out[16]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    memcpy(out, c.digest, 16);
}

static int find(const mj_closure *c, const char *path) {
    for (int i = 0; i < c->count; i++)
        if (strcmp(c->files[i].file->path, path) == 0) return i;
    return -1;
}

/* Next `#include "x"` at or after *pos in text; returns 1 and the path. */
static int next_quote_include(const char *text, size_t size, size_t *pos, char *path, size_t cap) {
    while (*pos < size) {
        size_t line = *pos;
        const char *nl = memchr(text + line, '\n', size - line);
        size_t end = nl ? (size_t)(nl - text) : size;
        *pos = end + 1;
        size_t i = line;
        while (i < end && (text[i] == ' ' || text[i] == '\t'))
            i++;
        if (i >= end || text[i] != '#') continue;
        i++;
        while (i < end && (text[i] == ' ' || text[i] == '\t'))
            i++;
        if (end - i < 7 || memcmp(text + i, "include", 7) != 0) continue;
        i += 7;
        while (i < end && (text[i] == ' ' || text[i] == '\t'))
            i++;
        if (i >= end || text[i] != '"') continue;
        const char *close = memchr(text + i + 1, '"', end - i - 1);
        if (!close) continue;
        size_t len = (size_t)(close - (text + i + 1));
        if (len == 0 || len >= cap) continue;
        memcpy(path, text + i + 1, len);
        path[len] = '\0';
        return 1;
    }
    return 0;
}

static mj_status visit(const mj_template_set *set, const char *path, const char *from,
                       mj_closure *c, int *cap) {
    if (find(c, path) >= 0) return MJ_OK; /* also what makes cycles terminate */
    const mj_template_file *f = mj_template_find(set, path);
    if (!f)
        return from ? mj_fail(MJ_ERR_NOT_FOUND,
                              "template %s includes \"%s\", which is not a file "
                              "under the template root",
                              from, path)
                    : mj_fail(MJ_ERR_NOT_FOUND, "no template %s", path);
    if (c->count == *cap) {
        int grown = *cap ? *cap * 2 : 8;
        mj_closure_file *files = realloc(c->files, (size_t)grown * sizeof *files);
        if (!files) return mj_fail(MJ_ERR_NOMEM, "out of memory");
        c->files = files;
        *cap = grown;
    }
    mj_closure_file *cf = &c->files[c->count++];
    cf->file = f;
    store_hash(XXH3_128bits(f->text, f->size), cf->content_hash);
    size_t pos = 0;
    char inc[1024];
    while (next_quote_include(f->text, f->size, &pos, inc, sizeof inc)) {
        mj_status st = visit(set, inc, f->path, c, cap);
        if (st != MJ_OK) return st;
    }
    return MJ_OK;
}

static int by_path(const void *a, const void *b) {
    return strcmp(((const mj_closure_file *)a)->file->path,
                  ((const mj_closure_file *)b)->file->path);
}

mj_status mj_closure_compute(const mj_template_set *set, const char *root, mj_closure *out) {
    memset(out, 0, sizeof *out);
    int cap = 0;
    mj_status st = visit(set, root, NULL, out, &cap);
    if (st != MJ_OK) {
        mj_closure_free(out);
        return st;
    }
    qsort(out->files, (size_t)out->count, sizeof *out->files, by_path);
    XXH3_state_t *h = XXH3_createState();
    if (!h) {
        mj_closure_free(out);
        return mj_fail(MJ_ERR_NOMEM, "out of memory");
    }
    XXH3_128bits_reset(h);
    for (int i = 0; i < out->count; i++) {
        /* Path and content both shape the compile; the NUL separates them. */
        const char *p = out->files[i].file->path;
        XXH3_128bits_update(h, p, strlen(p) + 1);
        XXH3_128bits_update(h, out->files[i].content_hash, 16);
    }
    store_hash(XXH3_128bits_digest(h), out->hash);
    XXH3_freeState(h);
    return MJ_OK;
}

void mj_closure_free(mj_closure *c) {
    free(c->files);
    memset(c, 0, sizeof *c);
}
