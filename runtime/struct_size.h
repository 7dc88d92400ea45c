/*
 * The ABI rule of the public option and config structs (include/megajit.h):
 * each begins with struct_size, the size of the struct as the caller's header
 * declares it, set by the struct's MJ_*_INIT initializer. Fields are only ever
 * added at the end, so a caller built against an older header passes a
 * smaller struct: the library reads the fields it has and keeps its defaults
 * for the rest. A larger struct comes from a newer header than this library.
 * A version whose size ends in padding hands over its caller's padding bytes
 * too, where a later field may begin: so the library knows every version by
 * its size and where its last field ends, and reads no further.
 */
#ifndef MJ_STRUCT_SIZE_H
#define MJ_STRUCT_SIZE_H

#include <stddef.h>

#include "include/megajit.h"

/* One version of a public struct: its size as that header declared it (a
 * caller's struct_size) and where its last field ends. */
typedef struct mj_struct_version {
    size_t size, fields_end;
} mj_struct_version;

/* The version of `type` whose last field is `last`: where that field ends,
 * the struct's size then (rounded up to its alignment), and both. */
#define MJ_STRUCT_FIELDS_END(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))
#define MJ_STRUCT_SIZE_TO(type, last)                                                              \
    ((MJ_STRUCT_FIELDS_END(type, last) + _Alignof(type) - 1) / _Alignof(type) * _Alignof(type))
#define MJ_STRUCT_VERSION(type, last)                                                              \
    { MJ_STRUCT_SIZE_TO(type, last), MJ_STRUCT_FIELDS_END(type, last) }
/* The count of a static array of versions, for mj_struct_read / write. */
#define MJ_STRUCT_VERSION_COUNT(versions) ((int)(sizeof(versions) / sizeof((versions)[0])))

/* Copies a caller's struct over *ours, which holds the defaults on entry (the
 * caller's MJ_*_INIT values): the fields of the caller's version replace ours;
 * ours->struct_size becomes the current size. versions: every version of the
 * struct, oldest first, the current one last; a struct_size that is none of
 * their sizes is refused. type names the struct ("mj_symm_config") in
 * messages. */
mj_status mj_struct_read(const void *theirs, void *ours, const mj_struct_version *versions,
                         int count, const char *type);

/* Copies *ours into a caller's struct: the fields its version holds (its
 * struct_size and padding untouched). */
mj_status mj_struct_write(void *theirs, const void *ours, const mj_struct_version *versions,
                          int count, const char *type);

#endif
