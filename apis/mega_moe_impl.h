/* The MegaMoE weights object and launch preparation, shared by apis/weights.c,
 * apis/mega_moe.c and the GPU tests (which take a prepared launch, change its
 * arguments for negative controls and launch it themselves). */
#ifndef MJ_MEGA_MOE_IMPL_H
#define MJ_MEGA_MOE_IMPL_H

#include <cuda.h>

#include "heuristics/moe_formats.h"
#include "include/megajit.h"
#include "runtime/configs.h"
#include "runtime/jit.h"
#include "templates/layout/moe_layout.h"

enum { MJ_MOE_NUM_PROJECTIONS = 3 };

/* "gate", "up", "down": the mj_projection values in messages. */
extern const char *const mj_moe_projection_names[MJ_MOE_NUM_PROJECTIONS];

struct mj_weights {
    mj_runtime *rt;
    mj_moe_config cfg;
    const mj_moe_format_row *format;
    int local_experts;
    mj_moe_weight_layout layout; /* its stage_k: K per stage of the weight images */
    CUdeviceptr image;           /* [E_local] expert images (mj_moe_weight_layout) */
    CUstream stream; /* the loader's own: image kernels never touch the caller's streams */
    /* One allocation of four fp32 [E_local] arrays, in mj_moe_args order:
     * l1_alpha_gate, l1_alpha_up, l2_alpha, l2_act_scale. */
    CUdeviceptr alphas;
    /* With cfg.expert_biases: fp32 [E_local][2I] GEMM 1 biases (gate rows,
     * then up rows), then [E_local][H] GEMM 2 biases, zero until loaded;
     * else 0. */
    CUdeviceptr biases;
    /* [E_local (+ 1: the shared expert)][MJ_MOE_NUM_PROJECTIONS]: 1 once that
     * projection was loaded, so a launch never reads weights nobody wrote. */
    unsigned char *loaded;
    int projections_missing; /* zeros in loaded: a launch checks this alone */
    /* With cfg.shared_intermediate: the shared expert's image (the layout at
     * its intermediate size and the routed stage K); else 0. */
    mj_moe_weight_layout shared_layout;
    CUdeviceptr shared_image;
};

/* Everything mj_mega_moe does short of launching: validates the buffer, the
 * weights and the arguments, gets (compiling when missing) the kernel and
 * fills its launch shape and its one argument. Launch with
 *   void *params[] = {args};  mj_jit_launch(rt, *k, lc, stream, params);
 * Nothing is written to the device. */
mj_status mj_mega_moe_prepare(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                              void *y, int num_tokens, int32_t *recv_stats, mj_stream stream,
                              mj_kernel **k, mj_launch_config *lc, mj_moe_args *args);

/* Launches a prepared MegaMoE and, with check_device_inputs (one-rank buffers
 * and real ranks), reads back the device error word (mj_mega_moe_check_errors). */
mj_status mj_mega_moe_launch(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                             mj_kernel *k, const mj_launch_config *lc, mj_moe_args *args,
                             mj_stream stream);

/* Synchronizes stream (unless it is capturing) and turns this rank's device
 * error word into a status naming what did not arrive; clears the word. */
mj_status mj_mega_moe_check_errors(mj_runtime *rt, mj_symm_buffer *buf, int rank, mj_stream stream);

#endif
