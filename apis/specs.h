/* Kernel specs of each family, built from public-API shapes (shared by the
 * launch paths and the manifest enumeration). */
#ifndef MJ_SPECS_H
#define MJ_SPECS_H

#include "include/megajit.h"
#include "runtime/family_codegen.h"
#include "runtime/kernel_spec.h"

/* Validates the shape (message on failure) and fills the spec of one role. */
mj_status mj_pre_dispatch_spec(int hidden, mj_format fmt, int topk, int role, mj_arch arch,
                               mj_kernel_spec *out);

/* Validates cfg (cfg->rank and cfg->block_m do not enter the spec), block_m
 * (8, 16, 32 or 64) and num_sms (>= 1) and fills the MegaMoE spec.
 * MJ_ERR_UNSUPPORTED for an arch without a MegaMoE kernel (all but sm_90a). */
mj_status mj_mega_moe_spec(const mj_moe_config *cfg, int block_m, int num_sms, mj_arch arch,
                           mj_kernel_spec *out);

#endif
