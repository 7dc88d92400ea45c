#include <stdint.h>
#include <stdio.h>

#include "runtime/family_codegen.h"
#include "templates/layout/moe_layout.h"

static int mega_moe_name(const mj_kernel_spec *s, char *out, size_t cap) {
    const int32_t *p = s->params;
    if (p[MJ_MOE_PARAM_ROLE] == MJ_MOE_ROLE_IMAGE)
        return snprintf(out, cap, "mj::mega_moe_image_kernel<%d, %d, %d, %d, %d>",
                        p[MJ_MOE_PARAM_WEIGHT_FMT],
                        mj_moe_kind(p[MJ_MOE_PARAM_WEIGHT_FMT], p[MJ_MOE_PARAM_DISPATCH_FMT]),
                        p[MJ_MOE_PARAM_HIDDEN], p[MJ_MOE_PARAM_INTERMEDIATE],
                        p[MJ_MOE_PARAM_STAGE_K]);
    /* The clamp travels as the bits of its float: a template argument must be
     * integral, and the bits round-trip exactly. */
    return snprintf(out, cap,
                    "mj::mega_moe_kernel<%d, %d, %d, %d, %d, %d, %d, %d, %d, %d, 0x%xu, %d, %d, %d, "
                    "%d, %d>",
                    p[MJ_MOE_PARAM_HIDDEN], p[MJ_MOE_PARAM_INTERMEDIATE], p[MJ_MOE_PARAM_EXPERTS],
                    p[MJ_MOE_PARAM_TOPK], p[MJ_MOE_PARAM_RANKS], p[MJ_MOE_PARAM_MAX_TOKENS],
                    p[MJ_MOE_PARAM_WEIGHT_FMT], p[MJ_MOE_PARAM_DISPATCH_FMT],
                    p[MJ_MOE_PARAM_L2_FMT], p[MJ_MOE_PARAM_ACTIVATION],
                    (unsigned)p[MJ_MOE_PARAM_CLAMP_BITS], p[MJ_MOE_PARAM_BLOCK_M],
                    p[MJ_MOE_PARAM_STAGE_K], p[MJ_MOE_PARAM_STAGES], p[MJ_MOE_PARAM_NUM_SMS],
                    p[MJ_MOE_PARAM_SYS_SCOPE]);
}

const mj_family_codegen mj_mega_moe_codegen = {"mega_moe.cuh", mega_moe_name};
