/*
 * The project headers a template reaches through #include "..." (followed
 * recursively, cycle-safe, paths relative to the template root). Angle-bracket
 * includes are system headers: the compiler version in the key covers them.
 */
#ifndef MJ_INCLUDE_CLOSURE_H
#define MJ_INCLUDE_CLOSURE_H

#include <stdint.h>

#include "include/megajit.h"
#include "runtime/templates.h"

typedef struct mj_closure_file {
    const mj_template_file *file;
    uint8_t content_hash[16]; /* XXH3-128 of the content */
} mj_closure_file;

typedef struct mj_closure {
    mj_closure_file *files; /* sorted by path; includes the root */
    int count;
    /* XXH3-128 over the sorted (path, content hash) pairs. */
    uint8_t hash[16];
} mj_closure;

mj_status mj_closure_compute(const mj_template_set *set, const char *root, mj_closure *out);
void mj_closure_free(mj_closure *c);

#endif
