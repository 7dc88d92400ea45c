/* A list of distinct kernel specs, each with its description: what a
 * manifest enumerates and what the benchmarks compile ahead. */
#ifndef MJ_SPEC_LIST_H
#define MJ_SPEC_LIST_H

#include <stddef.h>

#include "include/megajit.h"
#include "runtime/kernel_spec.h"

typedef struct mj_spec_list {
    mj_kernel_spec *specs;
    char **descriptions; /* mj_family_describe of each spec */
    size_t count, cap;
} mj_spec_list;

/* Adds spec to the mj_spec_list at list unless an equal spec is listed (the
 * mj_spec_fn of family enumerations). MJ_ERR_NOMEM, or MJ_ERR_INVALID_ARG for
 * a spec no family describes. */
mj_status mj_spec_list_add(const mj_kernel_spec *spec, void *list);
void mj_spec_list_free(mj_spec_list *l);

#endif
