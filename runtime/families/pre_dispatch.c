#include "runtime/families/pre_dispatch.h"

#include "runtime/configs.h"
#include "runtime/error.h"
#include "templates/layout/pre_dispatch_launch.h"

/* Parameter lists, in the order of the templates' own. */
enum { CHECK_TOPK = 0, CHECK_NUM_PARAMS };
static const mj_kernel_param kCheckParams[CHECK_NUM_PARAMS] = {
    [CHECK_TOPK] = {"kTopk", "K", MJ_PARAM_INT},
};
enum { MAIN_HIDDEN = 0, MAIN_FORMAT, MAIN_TOPK, MAIN_NUM_PARAMS };
static const mj_kernel_param kMainParams[MAIN_NUM_PARAMS] = {
    [MAIN_HIDDEN] = {"kHidden", "H", MJ_PARAM_INT},
    [MAIN_FORMAT] = {"kFormat", "fmt", MJ_PARAM_FORMAT},
    [MAIN_TOPK] = {"kTopk", "K", MJ_PARAM_INT},
};

static const mj_family_kernel kKernels[MJ_PD_NUM_KERNELS] = {
    [MJ_PD_KERNEL_CHECK] = {"check", "mj::pre_dispatch_check_kernel", kCheckParams,
                            CHECK_NUM_PARAMS},
    [MJ_PD_KERNEL_MAIN] = {"main", "mj::pre_dispatch_kernel", kMainParams, MAIN_NUM_PARAMS},
};

mj_status mj_pre_dispatch_spec(const mj_symm_config *b, int kernel, mj_arch arch,
                               mj_kernel_spec *out) {
    if (kernel < 0 || kernel >= MJ_PD_NUM_KERNELS)
        return mj_fail(MJ_ERR_INVALID_ARG, "unknown pre-dispatch kernel %d", kernel);
    if (!mj_arch_name(arch)) return mj_fail(MJ_ERR_INVALID_ARG, "unknown arch %d", (int)arch);
    mj_kernel_spec_init(out, MJ_FAMILY_PRE_DISPATCH, kernel, arch);
    out->num_params = kKernels[kernel].num_params;
    /* The check kernel depends on top-k alone, so one serves every shape. */
    if (kernel == MJ_PD_KERNEL_CHECK) {
        out->params[CHECK_TOPK] = b->num_topk;
    } else {
        out->params[MAIN_HIDDEN] = b->hidden;
        out->params[MAIN_FORMAT] = (int32_t)b->dispatch_format;
        out->params[MAIN_TOPK] = b->num_topk;
    }
    return MJ_OK;
}

static mj_status build_spec(const mj_family_request *req, int kernel, mj_arch arch,
                            mj_kernel_spec *out) {
    return mj_pre_dispatch_spec(req->buffer, kernel, arch, out);
}

static void launch_shape(const mj_kernel_spec *spec, const mj_family_request *req,
                         mj_launch_config *out) {
    const int32_t *p = spec->params;
    if (spec->kernel == MJ_PD_KERNEL_CHECK) {
        /* PDL-chained to the caller's previous work when the family asks for it. */
        *out = (mj_launch_config){{mj_pd_check_ctas(p[CHECK_TOPK], req->num_tokens), 1, 1},
                                  {MJ_PD_CHECK_THREADS, 1, 1},
                                  0,
                                  0,
                                  req->pdl};
        return;
    }
    /* Always PDL: the main kernel follows its own check kernel, whose CTAs
     * trigger only after waiting for whatever ran before, and it waits for
     * that kernel itself before its first store. */
    const int hidden = p[MAIN_HIDDEN];
    *out = (mj_launch_config){{mj_pd_grid(hidden, p[MAIN_TOPK], req->num_tokens,
                                          req->buffer->max_tokens_per_rank, req->num_sms),
                               1, 1},
                              {MJ_PD_BLOCK_THREADS(hidden), 1, 1},
                              MJ_PD_SMEM_BYTES(hidden, p[MAIN_FORMAT]),
                              0,
                              1};
}

static mj_status enumerate(const mj_family_request *layer, mj_arch arch, mj_spec_fn add,
                           void *ctx) {
    mj_status st = mj_symm_config_check(layer->buffer);
    for (int k = 0; st == MJ_OK && k < MJ_PD_NUM_KERNELS; k++) {
        mj_kernel_spec spec;
        st = mj_pre_dispatch_spec(layer->buffer, k, arch, &spec);
        if (st == MJ_OK) st = add(&spec, ctx);
    }
    return st;
}

const mj_family_desc mj_pre_dispatch_family = {
    .name = "pre_dispatch",
    .template_path = "pre_dispatch.cuh",
    .kernels = kKernels,
    .num_kernels = MJ_PD_NUM_KERNELS,
    .build_spec = build_spec,
    .launch_shape = launch_shape,
    .enumerate = enumerate,
};
