/*
 * The set of kernel template files the JIT compiles from: the copies embedded
 * at build time, or a directory tree (MEGAJIT_TEMPLATE_DIR, tests).
 * Paths are relative to the template root ("layout/symm_layout.h").
 */
#ifndef MJ_TEMPLATES_H
#define MJ_TEMPLATES_H

#include <stddef.h>

#include "include/megajit.h"

typedef struct mj_template_file {
    const char *path;
    const char *text;
    size_t size;
} mj_template_file;

extern const mj_template_file mj_embedded_templates[];
extern const size_t mj_embedded_template_count;

typedef struct mj_template_set mj_template_set;

/* The embedded set (static, never freed). */
const mj_template_set *mj_template_set_embedded(void);
/* Reads every regular file under dir. */
mj_status mj_template_set_from_dir(const char *dir, mj_template_set **out);
void mj_template_set_free(mj_template_set *set);
/* NULL when the set has no such file. */
const mj_template_file *mj_template_find(const mj_template_set *set, const char *path);

#endif
