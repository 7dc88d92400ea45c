/* The MegaMoE family: one MoE layer per rank in one persistent kernel
 * (templates/mega_moe.cuh), and the kernel that writes the expert weight
 * images it streams (templates/mega_moe/weight_image.cuh). */
#ifndef MJ_FAMILY_MEGA_MOE_H
#define MJ_FAMILY_MEGA_MOE_H

#include "heuristics/moe_formats.h"
#include "runtime/families/family.h"
#include "templates/layout/moe_layout.h"

/* Kernels of the family. */
enum { MJ_MOE_KERNEL_MAIN = 0, MJ_MOE_KERNEL_IMAGE = 1, MJ_MOE_NUM_KERNELS };

/* The main kernel's template parameters, in the template's order: (index,
 * template parameter, description label, kind). Formats are MJ_FMT_* codes,
 * the activation an MJ_ACT_* code, the clamp the bits of its float (0 = none);
 * ACT_PARAM0/1 the bits of the activation's two constants: alpha and beta of
 * the swiglu family (swiglu at 1.702 and 1 is swigluoai's spec), situ's gate
 * and up betas;
 * BLOCK_M, STAGE_K, STAGES and CTAS_PER_SM come from
 * heuristics/mega_moe_config.h (the grid is NUM_SMS x CTAS_PER_SM CTAs);
 * SYS_SCOPE is 1 for real peers on other GPUs; BIASES is
 * mj_moe_config.expert_biases; SHARED_INTER and SHARED_FMT are
 * mj_moe_config.shared_intermediate (0: no shared expert) and shared_format
 * (0 without one). The name expression is
 * generated from this list and tests/test_families.c checks it against the
 * template. */
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
    X(ACT_PARAM0_BITS, "kActParam0Bits", "act_p0", MJ_PARAM_FLOAT_BITS)                            \
    X(ACT_PARAM1_BITS, "kActParam1Bits", "act_p1", MJ_PARAM_FLOAT_BITS)                            \
    X(BLOCK_M, "kBlockM", "bm", MJ_PARAM_INT)                                                      \
    X(STAGE_K, "kStageK", "stage_k", MJ_PARAM_INT)                                                 \
    X(STAGES, "kStages", "stages", MJ_PARAM_INT)                                                   \
    X(NUM_SMS, "kNumSMs", "sms", MJ_PARAM_INT)                                                     \
    X(CTAS_PER_SM, "kCtasPerSm", "ctas", MJ_PARAM_INT)                                             \
    X(SYS_SCOPE, "kSysScope", "sys", MJ_PARAM_INT)                                                 \
    X(BIASES, "kBiases", "bias", MJ_PARAM_INT)                                                     \
    X(SHARED_INTER, "kSharedInter", "shared", MJ_PARAM_INT)                                        \
    X(SHARED_FMT, "kSharedFmt", "shared_fmt", MJ_PARAM_FORMAT)

/* The weight-image kernel's: it reads only the weight format (so rows of
 * one weight format share the kernel), the shape, the stage K the image is
 * cut by and the blocks of a task (4; 2 for a shared expert in a format of
 * its own). */
#define MJ_MEGA_MOE_IMAGE_PARAMS(X)                                                                \
    X(WEIGHT_FMT, "kWeightFmt", "weight", MJ_PARAM_FORMAT)                                         \
    X(HIDDEN, "kHidden", "H", MJ_PARAM_INT)                                                        \
    X(INTERMEDIATE, "kInter", "I", MJ_PARAM_INT)                                                   \
    X(STAGE_K, "kStageK", "stage_k", MJ_PARAM_INT)                                                 \
    X(TASK_BLOCKS, "kTaskBlocks", "tb", MJ_PARAM_INT)

enum {
#define MJ_MEGA_MOE_PARAM_INDEX(id, template_name, label, kind) MJ_MOE_PARAM_##id,
    MJ_MEGA_MOE_PARAMS(MJ_MEGA_MOE_PARAM_INDEX)
#undef MJ_MEGA_MOE_PARAM_INDEX
        MJ_MOE_NUM_PARAMS
};

enum {
#define MJ_MEGA_MOE_IMAGE_PARAM_INDEX(id, template_name, label, kind) MJ_MOE_IMAGE_PARAM_##id,
    MJ_MEGA_MOE_IMAGE_PARAMS(MJ_MEGA_MOE_IMAGE_PARAM_INDEX)
#undef MJ_MEGA_MOE_IMAGE_PARAM_INDEX
        MJ_MOE_IMAGE_NUM_PARAMS
};

extern const mj_family_desc mj_mega_moe_family;

/* The BLOCK_M a launch of cfg (a valid config) with num_tokens per rank uses:
 * cfg->block_m when forced, else the heuristic's, capped for cfg's layer
 * (mj_moe_kernel_config_for: its row, a fused shared expert, shared memory). */
int mj_mega_moe_pick_block_m(const mj_moe_config *cfg, int num_tokens);

/* The main kernel's spec for cfg (a valid config; its rank and block_m do not
 * enter the spec), a supported BLOCK_M (not 0) and num_sms >= 1; sys_scope: the peers
 * are other GPUs (ignored for one rank). Without a token count it is the
 * one-CTA-an-SM kernel (a launch's own spec: the family's build_spec with
 * its request). MJ_ERR_UNSUPPORTED for an arch
 * without a MegaMoE kernel (all but sm_90a) and for a shape whose pipeline
 * does not fit in shared memory. */
mj_status mj_mega_moe_spec(const mj_moe_config *cfg, int block_m, int num_sms, int sys_scope,
                           mj_arch arch, mj_kernel_spec *out);

/* The spec of the kernel that writes cfg's weight images (mj_weights_load),
 * or with shared_expert its shared expert's (mj_weights_load_shared). */
mj_status mj_mega_moe_image_spec(const mj_moe_config *cfg, int shared_expert, mj_arch arch,
                                 mj_kernel_spec *out);

/* cfg's shared expert's image geometry (templates/mega_moe/config.cuh,
 * kSharedGeometry): mj_moe_shared_geometry_of at the layer's stage K, whose
 * task_blocks is 0 where no stage of it fits the routed ring slot. */
mj_moe_shared_geometry mj_moe_shared_geometry_for(const mj_moe_config *cfg);

#endif
