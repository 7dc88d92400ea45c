/* Kernel specs of each family, built from public-API shapes (shared by the
 * launch paths and the manifest enumeration). */
#ifndef MJ_SPECS_H
#define MJ_SPECS_H

#include "apis/megajit.h"
#include "runtime/kernel_spec.h"

/* Pre-dispatch kernel roles. */
enum { MJ_PD_ROLE_MAIN = 0, MJ_PD_ROLE_CHECK = 1 };

/* Validates the shape (message on failure) and fills the spec of one role. */
mj_status mj_pre_dispatch_spec(int hidden, mj_format fmt, int topk, int role, mj_arch arch,
                               mj_kernel_spec *out);

#endif
