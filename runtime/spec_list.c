#include "runtime/spec_list.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/families/family.h"

mj_status mj_spec_list_add(const mj_kernel_spec *spec, void *list) {
    mj_spec_list *l = list;
    for (size_t i = 0; i < l->count; i++)
        if (memcmp(&l->specs[i], spec, sizeof *spec) == 0) return MJ_OK;
    char desc[320];
    if (mj_family_describe(spec, desc, sizeof desc) < 0)
        return mj_fail(MJ_ERR_INVALID_ARG, "a kernel spec no family describes");
    if (l->count == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 16;
        mj_kernel_spec *specs = realloc(l->specs, cap * sizeof *specs);
        if (specs) l->specs = specs;
        char **descriptions = specs ? realloc(l->descriptions, cap * sizeof *descriptions) : NULL;
        if (!descriptions) return mj_fail(MJ_ERR_NOMEM, "out of memory");
        l->descriptions = descriptions;
        l->cap = cap;
    }
    if (!(l->descriptions[l->count] = strdup(desc))) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    l->specs[l->count++] = *spec;
    return MJ_OK;
}

void mj_spec_list_free(mj_spec_list *l) {
    for (size_t i = 0; i < l->count; i++)
        free(l->descriptions[i]);
    free(l->specs);
    free(l->descriptions);
    memset(l, 0, sizeof *l);
}
