/* Codegen of each kernel family (one file per family: family_<name>.c). */
#ifndef MJ_FAMILY_CODEGEN_H
#define MJ_FAMILY_CODEGEN_H

#include "runtime/kernel_spec.h"

/* Pre-dispatch kernel roles and spec parameters. */
enum { MJ_PD_ROLE_MAIN = 0, MJ_PD_ROLE_CHECK = 1 };
enum { MJ_PD_PARAM_ROLE = 0, MJ_PD_PARAM_HIDDEN, MJ_PD_PARAM_FORMAT, MJ_PD_PARAM_TOPK };

/* MegaMoE spec parameters. Role MAIN: mj::mega_moe_kernel's template
 * arguments in this order (formats are MJ_FMT_* codes, the activation an
 * mj_activation, the clamp the bits of its float, 0 = none; sys_scope 1 for
 * real peers on other GPUs). Role IMAGE: the weight-image kernel, which reads
 * only the weight format, kind, hidden, intermediate and stage K. */
enum { MJ_MOE_ROLE_MAIN = 0, MJ_MOE_ROLE_IMAGE = 1 };
enum {
    MJ_MOE_PARAM_ROLE = 0,
    MJ_MOE_PARAM_HIDDEN,
    MJ_MOE_PARAM_INTERMEDIATE,
    MJ_MOE_PARAM_EXPERTS,
    MJ_MOE_PARAM_TOPK,
    MJ_MOE_PARAM_RANKS,
    MJ_MOE_PARAM_MAX_TOKENS,
    MJ_MOE_PARAM_WEIGHT_FMT,
    MJ_MOE_PARAM_DISPATCH_FMT,
    MJ_MOE_PARAM_L2_FMT,
    MJ_MOE_PARAM_ACTIVATION,
    MJ_MOE_PARAM_CLAMP_BITS,
    MJ_MOE_PARAM_BLOCK_M,
    MJ_MOE_PARAM_STAGE_K,
    MJ_MOE_PARAM_STAGES,
    MJ_MOE_PARAM_NUM_SMS,
    MJ_MOE_PARAM_SYS_SCOPE,
    MJ_MOE_NUM_PARAMS
};

extern const mj_family_codegen mj_pre_dispatch_codegen;
extern const mj_family_codegen mj_mega_moe_codegen;

#endif
