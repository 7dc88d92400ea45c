/* Internal view of a parsed manifest, for tests that check every kernel a
 * deployment would request (tests/test_mega_moe_build.c). */
#ifndef MJ_MANIFEST_IMPL_H
#define MJ_MANIFEST_IMPL_H

#include <stddef.h>

#include "include/megajit.h"
#include "runtime/kernel_spec.h"

/* The spec of kernel i; NULL when out of range. */
const mj_kernel_spec *mj_manifest_kernel_spec(const mj_manifest *m, size_t i);

#endif
