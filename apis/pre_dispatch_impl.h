/* mj_pre_dispatch in steps, shared by apis/pre_dispatch.c and
 * apis/moe_forward.c (which checks every argument of a whole layer, then
 * loads every kernel, before it launches any). */
#ifndef MJ_PRE_DISPATCH_IMPL_H
#define MJ_PRE_DISPATCH_IMPL_H

#include <stdint.h>

#include "include/megajit.h"
#include "runtime/jit.h"

/* Pre-dispatch's two kernels (the id check, then the quantizer), loaded, and
 * their launch shapes. */
typedef struct mj_pd_launch {
    mj_kernel *check_kernel, *main_kernel;
    mj_launch_config check_lc, main_lc;
} mj_pd_launch;

/* mj_pre_dispatch's argument checks (MJ_ERR_INVALID_ARG with its message);
 * touches nothing. */
mj_status mj_pre_dispatch_check(const mj_runtime *rt, const mj_symm_buffer *buf, int rank,
                                const void *x, const int32_t *topk_ids, const float *topk_weights,
                                int num_tokens);

/* After mj_pre_dispatch_check passed: binds the runtime's context and gets
 * (compiling when missing) both kernels. Nothing is written to the device. */
mj_status mj_pre_dispatch_prepare(mj_runtime *rt, mj_symm_buffer *buf, int num_tokens,
                                  mj_stream stream, mj_pd_launch *out);

/* Launches a prepared pre-dispatch and, with check_device_inputs, turns
 * device-detected bad ids into MJ_ERR_INVALID_ARG (synchronizing the stream
 * unless it captures). */
mj_status mj_pre_dispatch_launch(mj_runtime *rt, mj_symm_buffer *buf, int rank, const void *x,
                                 const int32_t *topk_ids, const float *topk_weights,
                                 const float *expert_scales, int num_tokens, mj_stream stream,
                                 const mj_pd_launch *pl);

#endif
