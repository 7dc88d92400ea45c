/* The MegaMoE family: one MoE layer per rank in one persistent kernel
 * (templates/mega_moe.cuh). */
#ifndef MJ_FAMILY_MEGA_MOE_H
#define MJ_FAMILY_MEGA_MOE_H

#include "runtime/families/family.h"

/* The kernel's template parameters, in the template's order: (index, template
 * parameter, description label, kind). The name expression is generated from
 * this list and tests/test_families.c checks it against the template. */
#define MJ_MEGA_MOE_PARAMS(X)                                                                      \
    X(HIDDEN, "kHidden", "H", MJ_PARAM_INT)                                                        \
    X(INTERMEDIATE, "kInter", "I", MJ_PARAM_INT)                                                   \
    X(EXPERTS, "kExperts", "E", MJ_PARAM_INT)                                                      \
    X(TOPK, "kTopk", "K", MJ_PARAM_INT)                                                            \
    X(RANKS, "kRanks", "R", MJ_PARAM_INT)                                                          \
    X(MAX_TOKENS, "kMaxTokens", "T", MJ_PARAM_INT)                                                 \
    X(WEIGHT_FMT, "kWeightFmt", "weight", MJ_PARAM_FORMAT)                                         \
    X(DISPATCH_FMT, "kDispatchFmt", "dispatch", MJ_PARAM_FORMAT)                                   \
    X(L2_FMT, "kL2Fmt", "l2", MJ_PARAM_FORMAT)                                                     \
    X(ACTIVATION, "kActivation", "act", MJ_PARAM_ACTIVATION)                                       \
    X(CLAMP_BITS, "kClampBits", "clamp", MJ_PARAM_FLOAT_BITS)                                      \
    X(BLOCK_M, "kBlockM", "bm", MJ_PARAM_INT)                                                      \
    X(NUM_SMS, "kNumSMs", "sms", MJ_PARAM_INT)

enum {
#define MJ_MEGA_MOE_PARAM_INDEX(id, template_name, label, kind) MJ_MOE_PARAM_##id,
    MJ_MEGA_MOE_PARAMS(MJ_MEGA_MOE_PARAM_INDEX)
#undef MJ_MEGA_MOE_PARAM_INDEX
        MJ_MOE_NUM_PARAMS
};

extern const mj_family_desc mj_mega_moe_family;

/* The BLOCK_M a launch of cfg (a valid config) with num_tokens per rank uses:
 * cfg->block_m when forced, else the heuristic's, capped for this kernel. */
int mj_mega_moe_pick_block_m(const mj_moe_config *cfg, int num_tokens);

/* The spec for cfg (a valid config; its rank and block_m do not enter the
 * spec), a BLOCK_M of 8, 16, 32 or 64 and num_sms >= 1. MJ_ERR_UNSUPPORTED for
 * an arch without a MegaMoE kernel (all but sm_90a). */
mj_status mj_mega_moe_spec(const mj_moe_config *cfg, int block_m, int num_sms, mj_arch arch,
                           mj_kernel_spec *out);

#endif
