/* Codegen of each kernel family (one file per family: family_<name>.c). */
#ifndef MJ_FAMILY_CODEGEN_H
#define MJ_FAMILY_CODEGEN_H

#include "runtime/kernel_spec.h"

/* Pre-dispatch kernel roles and spec parameters. */
enum { MJ_PD_ROLE_MAIN = 0, MJ_PD_ROLE_CHECK = 1 };
enum { MJ_PD_PARAM_ROLE = 0, MJ_PD_PARAM_HIDDEN, MJ_PD_PARAM_FORMAT, MJ_PD_PARAM_TOPK };

extern const mj_family_codegen mj_pre_dispatch_codegen;

#endif
