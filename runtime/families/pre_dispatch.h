/* The pre-dispatch family: BF16 tokens quantized into a rank's input region
 * of the symmetric buffer, by a check kernel for the top-k ids and the main
 * kernel it gates (templates/pre_dispatch.cuh). */
#ifndef MJ_FAMILY_PRE_DISPATCH_H
#define MJ_FAMILY_PRE_DISPATCH_H

#include "runtime/families/family.h"

/* Kernels of the family, in launch order. */
enum { MJ_PD_KERNEL_CHECK = 0, MJ_PD_KERNEL_MAIN = 1, MJ_PD_NUM_KERNELS };

extern const mj_family_desc mj_pre_dispatch_family;

/* The spec of one kernel for a buffer (a valid config: runtime/limits.h already
 * holds top-k to the threads a row of hidden has). */
mj_status mj_pre_dispatch_spec(const mj_symm_config *buffer, int kernel, mj_arch arch,
                               mj_kernel_spec *out);

#endif
