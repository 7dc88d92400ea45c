#include "runtime/families/mega_moe.h"

#include <string.h>

#include "heuristics/mega_moe_config.h"
#include "runtime/configs.h"
#include "runtime/error.h"
#include "templates/layout/moe_layout.h"

static const mj_kernel_param kParams[MJ_MOE_NUM_PARAMS] = {
#define MJ_MEGA_MOE_PARAM_ROW(id, template_name, label, kind) {template_name, label, kind},
    MJ_MEGA_MOE_PARAMS(MJ_MEGA_MOE_PARAM_ROW)
#undef MJ_MEGA_MOE_PARAM_ROW
};

static const mj_family_kernel kKernels[] = {
    {"main", "mj::mega_moe_kernel", kParams, MJ_MOE_NUM_PARAMS},
};

int mj_mega_moe_pick_block_m(const mj_moe_config *cfg, int num_tokens) {
    if (cfg->block_m) return cfg->block_m;
    int bm = mj_moe_block_m(num_tokens, cfg->num_ranks, cfg->num_experts, cfg->num_topk);
    /* The heuristic goes up to 256, but this kernel keeps the gate and up
     * accumulators of a whole token tile in registers, which caps the tile. */
    return bm > MJ_MOE_MAX_BLOCK_M ? MJ_MOE_MAX_BLOCK_M : bm;
}

mj_status mj_mega_moe_spec(const mj_moe_config *cfg, int block_m, int num_sms, mj_arch arch,
                           mj_kernel_spec *out) {
    const mj_moe_format_row *row =
        mj_moe_format_find((int)cfg->weight_format, (int)cfg->dispatch_format);
    if (!row) return mj_fail(MJ_ERR_INVALID_ARG, "mega_moe: not a MegaMoE format pair");
    if (!mj_moe_block_m_supported(block_m))
        return mj_fail(MJ_ERR_INVALID_ARG, "block_m %d must be 8, 16, 32 or 64", block_m);
    if (num_sms < 1) return mj_fail(MJ_ERR_INVALID_ARG, "num_sms %d must be positive", num_sms);
    const char *arch_name = mj_arch_name(arch);
    if (!arch_name) return mj_fail(MJ_ERR_INVALID_ARG, "unknown arch %d", (int)arch);
    if (arch != MJ_ARCH_SM90A)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "mega_moe: no kernel for %s (the MegaMoE kernel is built on Hopper's "
                       "wgmma and exists for sm_90a only)",
                       arch_name);
    /* -0 must give the same spec (and cache key) as 0: both mean no clamp. */
    uint32_t clamp_bits = 0;
    if (cfg->clamp > 0) memcpy(&clamp_bits, &cfg->clamp, sizeof clamp_bits);
    mj_kernel_spec_init(out, MJ_FAMILY_MEGA_MOE, 0, arch);
    int32_t *p = out->params;
    out->num_params = MJ_MOE_NUM_PARAMS;
    p[MJ_MOE_PARAM_HIDDEN] = cfg->hidden;
    p[MJ_MOE_PARAM_INTERMEDIATE] = cfg->intermediate;
    p[MJ_MOE_PARAM_EXPERTS] = cfg->num_experts;
    p[MJ_MOE_PARAM_TOPK] = cfg->num_topk;
    p[MJ_MOE_PARAM_RANKS] = cfg->num_ranks;
    p[MJ_MOE_PARAM_MAX_TOKENS] = cfg->max_tokens_per_rank;
    p[MJ_MOE_PARAM_WEIGHT_FMT] = row->weight_fmt;
    p[MJ_MOE_PARAM_DISPATCH_FMT] = row->dispatch_fmt;
    p[MJ_MOE_PARAM_L2_FMT] = row->l2_input_fmt;
    p[MJ_MOE_PARAM_ACTIVATION] = (int32_t)cfg->activation;
    p[MJ_MOE_PARAM_CLAMP_BITS] = (int32_t)clamp_bits;
    p[MJ_MOE_PARAM_BLOCK_M] = block_m;
    p[MJ_MOE_PARAM_NUM_SMS] = num_sms;
    return MJ_OK;
}

static mj_status build_spec(const mj_family_request *req, int kernel, mj_arch arch,
                            mj_kernel_spec *out) {
    (void)kernel;
    if (!req->layer)
        return mj_fail(MJ_ERR_INVALID_ARG, "mega_moe: the request carries no MoE layer");
    return mj_mega_moe_spec(req->layer, mj_mega_moe_pick_block_m(req->layer, req->num_tokens),
                            req->num_sms, arch, out);
}

/* One warpgroup per CTA, one persistent CTA per SM of the rank. */
static void launch_shape(const mj_kernel_spec *spec, const mj_family_request *req,
                         mj_launch_config *out) {
    const int32_t *p = spec->params;
    *out = (mj_launch_config){{(unsigned)p[MJ_MOE_PARAM_NUM_SMS], 1, 1},
                              {MJ_MOE_THREADS, 1, 1},
                              mj_moe_smem_bytes(p[MJ_MOE_PARAM_BLOCK_M]),
                              0,
                              req->pdl};
}

/* Every BLOCK_M a launch can pick for 0..max_tokens_per_rank tokens. The pick
 * never decreases with the token count, so each next value is found by a
 * binary search for the first token count past the current one. */
static mj_status enumerate(const mj_family_request *layer, mj_arch arch, mj_spec_fn add,
                           void *ctx) {
    const mj_moe_config *cfg = layer->layer;
    /* Only sm_90a has a MegaMoE kernel, and layers whose formats are no
     * MegaMoE pair can still use pre-dispatch on their own. */
    if (!cfg || arch != MJ_ARCH_SM90A ||
        !mj_moe_format_find((int)cfg->weight_format, (int)cfg->dispatch_format))
        return MJ_OK;
    mj_status st = mj_moe_config_check(cfg, NULL);
    const int max_tokens = cfg->max_tokens_per_rank;
    for (int tokens = 0; st == MJ_OK;) {
        const int block_m = mj_mega_moe_pick_block_m(cfg, tokens);
        mj_kernel_spec spec;
        st = mj_mega_moe_spec(cfg, block_m, layer->num_sms, arch, &spec);
        if (st == MJ_OK) st = add(&spec, ctx);
        int lo = tokens + 1, hi = max_tokens + 1; /* first larger pick in [lo, hi) */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (mj_mega_moe_pick_block_m(cfg, mid) > block_m)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (lo > max_tokens) break;
        tokens = lo;
    }
    return st;
}

const mj_family_desc mj_mega_moe_family = {
    .id = MJ_FAMILY_MEGA_MOE,
    .name = "mega_moe",
    .template_path = "mega_moe.cuh",
    .kernels = kKernels,
    .num_kernels = 1,
    .build_spec = build_spec,
    .launch_shape = launch_shape,
    .enumerate = enumerate,
};
