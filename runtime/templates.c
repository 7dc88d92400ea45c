#include "runtime/templates.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/error.h"

struct mj_template_set {
    const mj_template_file *files;
    size_t count;
    mj_template_file *owned; /* NULL for the embedded set */
    size_t cap;
};

static mj_template_set embedded_set;
static pthread_once_t embedded_once = PTHREAD_ONCE_INIT;

/* The count lives in the generated translation unit, so it is not a constant
 * expression here. */
static void init_embedded(void) {
    embedded_set.files = mj_embedded_templates;
    embedded_set.count = mj_embedded_template_count;
}

const mj_template_set *mj_template_set_embedded(void) {
    pthread_once(&embedded_once, init_embedded);
    return &embedded_set;
}

static mj_status add_file(mj_template_set *set, const char *full, const char *rel) {
    FILE *f = fopen(full, "rb");
    if (!f) return mj_fail(MJ_ERR_IO, "cannot read template %s", full);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        free(text);
        return mj_fail(MJ_ERR_IO, "cannot read template %s", full);
    }
    fclose(f);
    text[size] = '\0';
    if (set->count == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 16;
        mj_template_file *grown = realloc(set->owned, cap * sizeof *grown);
        if (!grown) {
            free(text);
            return mj_fail(MJ_ERR_NOMEM, "out of memory reading templates");
        }
        set->owned = grown;
        set->cap = cap;
    }
    set->owned[set->count++] = (mj_template_file){strdup(rel), text, (size_t)size};
    set->files = set->owned;
    return MJ_OK;
}

static mj_status walk(mj_template_set *set, const char *root, const char *rel) {
    char dir_path[4096];
    snprintf(dir_path, sizeof dir_path, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(dir_path);
    if (!d) return mj_fail(MJ_ERR_IO, "cannot open template directory %s", dir_path);
    mj_status st = MJ_OK;
    struct dirent *e;
    while (st == MJ_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char child_rel[4096], full[8192];
        if (snprintf(child_rel, sizeof child_rel, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >=
                (int)sizeof child_rel ||
            snprintf(full, sizeof full, "%s/%s", root, child_rel) >= (int)sizeof full)
            continue;
        struct stat sb;
        if (stat(full, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode))
            st = walk(set, root, child_rel);
        else if (S_ISREG(sb.st_mode))
            st = add_file(set, full, child_rel);
    }
    closedir(d);
    return st;
}

mj_status mj_template_set_from_dir(const char *dir, mj_template_set **out) {
    mj_template_set *set = calloc(1, sizeof *set);
    if (!set) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    mj_status st = walk(set, dir, "");
    if (st != MJ_OK) {
        mj_template_set_free(set);
        return st;
    }
    *out = set;
    return MJ_OK;
}

void mj_template_set_free(mj_template_set *set) {
    if (!set || !set->owned) return;
    for (size_t i = 0; i < set->count; i++) {
        free((char *)set->owned[i].path);
        free((char *)set->owned[i].text);
    }
    free(set->owned);
    free(set);
}

const mj_template_file *mj_template_find(const mj_template_set *set, const char *path) {
    for (size_t i = 0; i < set->count; i++)
        if (strcmp(set->files[i].path, path) == 0) return &set->files[i];
    return NULL;
}
