#include "runtime/families/bench_ceilings.h"

#include "runtime/error.h"
#include "templates/layout/bench_ceilings.h"

/* Parameter lists, in the order of the templates' own. */
enum { BULK_STAGE_BYTES = 0, BULK_STAGES, BULK_NUM_PARAMS };
static const mj_kernel_param kBulkParams[BULK_NUM_PARAMS] = {
    [BULK_STAGE_BYTES] = {"kStageBytes", "stage_bytes", MJ_PARAM_INT},
    [BULK_STAGES] = {"kStages", "stages", MJ_PARAM_INT},
};
enum { TENSOR_WARPGROUPS = 0, TENSOR_NUM_PARAMS };
static const mj_kernel_param kTensorParams[TENSOR_NUM_PARAMS] = {
    [TENSOR_WARPGROUPS] = {"kWarpgroups", "wg", MJ_PARAM_INT},
};

enum { CLOCK_WINDOW_US = 0, CLOCK_NUM_PARAMS };
static const mj_kernel_param kClockParams[CLOCK_NUM_PARAMS] = {
    [CLOCK_WINDOW_US] = {"kWindowUs", "window_us", MJ_PARAM_INT},
};

static const mj_family_kernel kKernels[MJ_BC_NUM_KERNELS] = {
    [MJ_BC_KERNEL_BULK_READ] = {"bulk_read", "mj::bench_bulk_read_kernel", kBulkParams,
                                BULK_NUM_PARAMS},
    [MJ_BC_KERNEL_TENSOR_RATE] = {"tensor_rate", "mj::bench_tensor_rate_kernel", kTensorParams,
                                  TENSOR_NUM_PARAMS},
    [MJ_BC_KERNEL_CLOCK_PROBE] = {"clock_probe", "mj::bench_clock_probe_kernel", kClockParams,
                                  CLOCK_NUM_PARAMS},
};

/* The kernels take nothing from a layer: their one shape is the layout
 * header's. The family's template is built on Hopper's bulk copies and wgmma. */
static mj_status build_spec(const mj_family_request *req, int kernel, mj_arch arch,
                            mj_kernel_spec *out) {
    (void)req;
    if (kernel < 0 || kernel >= MJ_BC_NUM_KERNELS)
        return mj_fail(MJ_ERR_INVALID_ARG, "unknown bench-ceiling kernel %d", kernel);
    mj_status st = mj_family_require_sm90a("bench_ceilings", arch, "bulk copies and wgmma");
    if (st != MJ_OK) return st;
    mj_kernel_spec_init(out, MJ_FAMILY_BENCH_CEILINGS, kernel, arch);
    out->num_params = kKernels[kernel].num_params;
    if (kernel == MJ_BC_KERNEL_BULK_READ) {
        out->params[BULK_STAGE_BYTES] = MJ_BC_BULK_STAGE_BYTES;
        out->params[BULK_STAGES] = MJ_BC_BULK_STAGES;
    } else if (kernel == MJ_BC_KERNEL_TENSOR_RATE) {
        out->params[TENSOR_WARPGROUPS] = MJ_BC_TENSOR_WARPGROUPS;
    } else {
        out->params[CLOCK_WINDOW_US] = MJ_BC_CLOCK_WINDOW_US;
    }
    return MJ_OK;
}

/* One CTA per SM of the family's count, the shared memory the layout header
 * gives; no PDL: each launch is timed on its own. The clock probe: one CTA
 * of one warp. */
static void launch_shape(const mj_kernel_spec *spec, const mj_family_request *req,
                         mj_launch_config *out) {
    const int32_t *p = spec->params;
    const unsigned grid = (unsigned)req->num_sms;
    if (spec->kernel == MJ_BC_KERNEL_BULK_READ)
        *out = (mj_launch_config){{grid, 1, 1},
                                  {MJ_BC_BULK_THREADS, 1, 1},
                                  MJ_BC_BULK_SMEM_BYTES(p[BULK_STAGE_BYTES], p[BULK_STAGES]),
                                  0,
                                  0};
    else if (spec->kernel == MJ_BC_KERNEL_CLOCK_PROBE)
        *out = (mj_launch_config){{1, 1, 1}, {MJ_BC_CLOCK_THREADS, 1, 1}, 0, 0, 0};
    else
        *out = (mj_launch_config){{grid, 1, 1},
                                  {128u * (unsigned)p[TENSOR_WARPGROUPS], 1, 1},
                                  MJ_BC_TENSOR_SMEM_BYTES(p[TENSOR_WARPGROUPS]),
                                  0,
                                  0};
}

/* A deployment never runs them: nothing to precompile for any layer. */
static mj_status enumerate(const mj_family_request *layer, mj_arch arch, mj_spec_fn add,
                           void *ctx) {
    (void)layer;
    (void)arch;
    (void)add;
    (void)ctx;
    return MJ_OK;
}

const mj_family_desc mj_bench_ceilings_family = {
    .name = "bench_ceilings",
    .template_path = "bench_ceilings.cuh",
    .kernels = kKernels,
    .num_kernels = MJ_BC_NUM_KERNELS,
    .build_spec = build_spec,
    .launch_shape = launch_shape,
    .enumerate = enumerate,
};
