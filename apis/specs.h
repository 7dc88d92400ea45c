/* Kernel specs of each family, built from public-API shapes (shared by the
 * launch paths and the manifest enumeration). */
#ifndef MJ_SPECS_H
#define MJ_SPECS_H

#include "apis/megajit.h"
#include "runtime/family_codegen.h"
#include "runtime/kernel_spec.h"

/* Validates the shape (message on failure) and fills the spec of one role. */
mj_status mj_pre_dispatch_spec(int hidden, mj_format fmt, int topk, int role, mj_arch arch,
                               mj_kernel_spec *out);

#endif
