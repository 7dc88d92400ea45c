#include "runtime/struct_size.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"

/* The caller's struct_size, checked against what this library knows. */
static mj_status caller_size(const void *theirs, size_t ours_size, size_t min_size,
                             const char *type, size_t *size) {
    memcpy(size, theirs, sizeof *size);
    if (*size >= min_size && *size <= ours_size) return MJ_OK;
    char init[64];
    size_t n = 0;
    for (; type[n] && n + 6 < sizeof init; n++)
        init[n] = (char)toupper((unsigned char)type[n]);
    snprintf(init + n, sizeof init - n, "_INIT");
    if (*size == 0)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "%s.struct_size is 0: initialize the struct with %s before setting its "
                       "fields",
                       type, init);
    if (*size > ours_size)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "%s.struct_size is %zu but this libmegajit knows %zu bytes: the caller was "
                       "built against a newer megajit.h",
                       type, *size, ours_size);
    return mj_fail(MJ_ERR_INVALID_ARG,
                   "%s.struct_size is %zu, smaller than any version of the struct (%zu); "
                   "initialize it with %s",
                   type, *size, min_size, init);
}

mj_status mj_struct_read(const void *theirs, void *ours, size_t ours_size, size_t min_size,
                         const char *type) {
    size_t size;
    mj_status st = caller_size(theirs, ours_size, min_size, type, &size);
    if (st != MJ_OK) return st;
    memcpy(ours, theirs, size);
    memcpy(ours, &ours_size, sizeof ours_size);
    return MJ_OK;
}

mj_status mj_struct_write(void *theirs, const void *ours, size_t ours_size, size_t min_size,
                          const char *type) {
    size_t size;
    mj_status st = caller_size(theirs, ours_size, min_size, type, &size);
    if (st != MJ_OK) return st;
    memcpy((char *)theirs + sizeof size, (const char *)ours + sizeof size, size - sizeof size);
    return MJ_OK;
}
