#include "runtime/struct_size.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"

/* The caller's version, found by its struct_size. */
static mj_status caller_version(const void *theirs, const mj_struct_version *versions, int count,
                                const char *type, const mj_struct_version **out) {
    size_t size;
    memcpy(&size, theirs, sizeof size);
    for (int i = 0; i < count; i++)
        if (versions[i].size == size) {
            *out = &versions[i];
            return MJ_OK;
        }
    char init[64];
    size_t n = 0;
    for (; type[n] && n + 6 < sizeof init; n++)
        init[n] = (char)toupper((unsigned char)type[n]);
    snprintf(init + n, sizeof init - n, "_INIT");
    const size_t ours_size = versions[count - 1].size;
    if (size == 0)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "%s.struct_size is 0: initialize the struct with %s before setting its "
                       "fields",
                       type, init);
    if (size > ours_size)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "%s.struct_size is %zu but this libmegajit knows %zu bytes: the caller was "
                       "built against a newer megajit.h",
                       type, size, ours_size);
    if (size < versions[0].size)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "%s.struct_size is %zu, smaller than any version of the struct (%zu); "
                       "initialize it with %s",
                       type, size, versions[0].size, init);
    return mj_fail(MJ_ERR_INVALID_ARG,
                   "%s.struct_size is %zu, the size of no version of the struct; initialize it "
                   "with %s",
                   type, size, init);
}

mj_status mj_struct_read(const void *theirs, void *ours, const mj_struct_version *versions,
                         int count, const char *type) {
    const mj_struct_version *v;
    mj_status st = caller_version(theirs, versions, count, type, &v);
    if (st != MJ_OK) return st;
    memcpy((char *)ours + sizeof v->size, (const char *)theirs + sizeof v->size,
           v->fields_end - sizeof v->size);
    memcpy(ours, &versions[count - 1].size, sizeof v->size);
    return MJ_OK;
}

mj_status mj_struct_write(void *theirs, const void *ours, const mj_struct_version *versions,
                          int count, const char *type) {
    const mj_struct_version *v;
    mj_status st = caller_version(theirs, versions, count, type, &v);
    if (st != MJ_OK) return st;
    memcpy((char *)theirs + sizeof v->size, (const char *)ours + sizeof v->size,
           v->fields_end - sizeof v->size);
    return MJ_OK;
}
