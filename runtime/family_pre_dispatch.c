#include <stdio.h>

#include "runtime/family_codegen.h"

static int pre_dispatch_name(const mj_kernel_spec *s, char *out, size_t cap) {
    const int32_t *p = s->params;
    if (p[MJ_PD_PARAM_ROLE] == MJ_PD_ROLE_CHECK)
        return snprintf(out, cap, "mj::pre_dispatch_check_kernel<%d>", p[MJ_PD_PARAM_TOPK]);
    return snprintf(out, cap, "mj::pre_dispatch_kernel<%d, %d, %d>", p[MJ_PD_PARAM_HIDDEN],
                    p[MJ_PD_PARAM_FORMAT], p[MJ_PD_PARAM_TOPK]);
}

const mj_family_codegen mj_pre_dispatch_codegen = {"pre_dispatch.cuh", pre_dispatch_name};
