/*
 * The ABI rule of the public option and config structs (include/megajit.h):
 * each begins with struct_size, the size of the struct as the caller's header
 * declares it, set by the struct's MJ_*_INIT initializer. Fields are only ever
 * added at the end, so a caller built against an older header passes a
 * smaller struct: the library reads the fields it has and keeps its defaults
 * for the rest. A larger struct comes from a newer header than this library.
 * A version whose size ends in padding hands over its caller's padding bytes
 * too, where a later field would begin: keep each struct free of tail padding
 * (runtime/configs.c asserts it, and mends mj_moe_config's second version).
 */
#ifndef MJ_STRUCT_SIZE_H
#define MJ_STRUCT_SIZE_H

#include <stddef.h>

#include "include/megajit.h"

/* Copies a caller's struct over *ours, which holds the defaults on entry (the
 * caller's MJ_*_INIT values): the first struct_size bytes of theirs replace
 * ours; ours->struct_size becomes ours_size. min_size is the size of the
 * struct's first version, type its name ("mj_symm_config") for the message. */
mj_status mj_struct_read(const void *theirs, void *ours, size_t ours_size, size_t min_size,
                         const char *type);

/* Copies *ours into a caller's struct: as many bytes as its struct_size says
 * it holds (which it keeps). */
mj_status mj_struct_write(void *theirs, const void *ours, size_t ours_size, size_t min_size,
                          const char *type);

#endif
