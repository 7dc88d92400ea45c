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

static const mj_kernel_param kImageParams[MJ_MOE_IMAGE_NUM_PARAMS] = {
#define MJ_MEGA_MOE_IMAGE_PARAM_ROW(id, template_name, label, kind) {template_name, label, kind},
    MJ_MEGA_MOE_IMAGE_PARAMS(MJ_MEGA_MOE_IMAGE_PARAM_ROW)
#undef MJ_MEGA_MOE_IMAGE_PARAM_ROW
};

static const mj_family_kernel kKernels[MJ_MOE_NUM_KERNELS] = {
    [MJ_MOE_KERNEL_MAIN] = {"main", "mj::mega_moe_kernel", kParams, MJ_MOE_NUM_PARAMS},
    [MJ_MOE_KERNEL_IMAGE] = {"image", "mj::mega_moe_image_kernel", kImageParams,
                             MJ_MOE_IMAGE_NUM_PARAMS},
};

static const mj_moe_format_row *row_of(const mj_moe_config *cfg) {
    return mj_moe_format_find((int)cfg->weight_format, (int)cfg->dispatch_format);
}

int mj_mega_moe_pick_block_m(const mj_moe_config *cfg, int num_tokens) {
    if (cfg->block_m) return cfg->block_m;
    const mj_moe_format_row *row = row_of(cfg);
    mj_moe_problem prob = mj_moe_problem_of(cfg, 1);
    prob.num_tokens = num_tokens;
    mj_moe_kernel_config kc;
    if (mj_moe_kernel_config_for(&prob, row, 0, &kc) == 0) return kc.block_m;
    /* A layer no kernel fits: the spec built from this reports why. */
    return mj_moe_pick_block_m(&prob, row);
}

mj_moe_shared_geometry mj_moe_shared_geometry_for(const mj_moe_config *cfg) {
    const mj_moe_format_row *row = row_of(cfg);
    const mj_moe_shared_geometry none = {0, 0};
    if (!row) return none;
    return mj_moe_shared_geometry_of(row->weight_fmt, (int)cfg->shared_format,
                                     mj_moe_config_stage_k(cfg, row));
}

/* A float constant's bits for a spec, -0 as 0 (no clamp; u + -0 is u): one
 * spec for both. */
static uint32_t bits_of(float x) {
    uint32_t b;
    x = x == 0.0f ? 0.0f : x;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* The activation code and two constants cfg's kernels compile in (NUMERICS.md
 * step 4), a field's 0 replaced by its standard value: the swiglu family as
 * alpha and beta, under swigluoai's code whenever they are its 1.702 and 1
 * (equal formulas share one spec); situ as its gate and up betas. */
static void activation_constants(const mj_moe_config *cfg, int32_t *code, uint32_t bits[2]) {
    static const float kOaiAlpha = 1.702f, kOaiBeta = 1.0f;
    if (cfg->activation == MJ_ACTIVATION_SITU) {
        *code = MJ_ACT_SITU;
        bits[0] = bits_of(cfg->situ_gate_beta != 0 ? cfg->situ_gate_beta : 4.0f);
        bits[1] = bits_of(cfg->situ_up_beta != 0 ? cfg->situ_up_beta : 25.0f);
        return;
    }
    const float alpha = cfg->swiglu_alpha != 0 ? cfg->swiglu_alpha : 1.0f;
    const int oai = cfg->activation == MJ_ACTIVATION_SWIGLUOAI ||
                    (alpha == kOaiAlpha && cfg->swiglu_beta == kOaiBeta);
    *code = oai ? MJ_ACT_SWIGLUOAI : MJ_ACT_SWIGLU;
    bits[0] = bits_of(oai ? kOaiAlpha : alpha);
    bits[1] = bits_of(oai ? kOaiBeta : cfg->swiglu_beta);
}

static mj_status check_arch(mj_arch arch) {
    return mj_family_require_sm90a("mega_moe", arch, "Hopper's wgmma");
}

/* The heuristics' config of a launch of num_tokens per rank at block_m (0:
 * the heuristic's tile): 0, or -1 where none fits. */
static int launch_config(const mj_moe_config *cfg, int block_m, int num_tokens, int num_sms,
                         int shares_device, mj_moe_kernel_config *kc) {
    mj_moe_problem prob = mj_moe_problem_of(cfg, num_sms);
    prob.num_tokens = num_tokens;
    prob.shares_device = shares_device;
    return mj_moe_kernel_config_for(&prob, row_of(cfg), block_m, kc);
}

/* The main kernel's spec at block_m, or (block_m 0) at the heuristic's tile
 * for num_tokens per rank: one configuration lookup either way, as a launch
 * builds its spec this way every call. */
static mj_status main_spec(const mj_moe_config *cfg, int block_m, int num_tokens, int num_sms,
                           int sys_scope, int shares_device, mj_arch arch, mj_kernel_spec *out) {
    const mj_moe_format_row *row = row_of(cfg);
    if (!row) return mj_fail(MJ_ERR_INVALID_ARG, "mega_moe: not a MegaMoE format pair");
    if (block_m && !mj_moe_block_m_supported(block_m, row))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "block_m %d must be 8, 16, 32, 64, 128 or 160 (at most %d for the %s row)",
                       block_m, mj_moe_max_block_m(row), row->name);
    if (num_sms < 1) return mj_fail(MJ_ERR_INVALID_ARG, "num_sms %d must be positive", num_sms);
    mj_status st = check_arch(arch);
    if (st != MJ_OK) return st;
    mj_moe_kernel_config kc;
    if (launch_config(cfg, block_m, num_tokens, num_sms, shares_device, &kc) != 0)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "mega_moe: no kernel configuration fits hidden %d, intermediate %d, %d "
                       "experts over %d ranks%s at block_m %d in shared memory",
                       cfg->hidden, cfg->intermediate, cfg->num_experts, cfg->num_ranks,
                       cfg->shared_intermediate ? " with a fused shared expert" : "",
                       block_m ? block_m : mj_mega_moe_pick_block_m(cfg, num_tokens));
    /* -0 must give the same spec (and cache key) as 0: both mean no clamp. */
    const uint32_t clamp_bits = bits_of(cfg->clamp);
    int32_t act_code;
    uint32_t act_bits[2];
    activation_constants(cfg, &act_code, act_bits);
    mj_kernel_spec_init(out, MJ_FAMILY_MEGA_MOE, MJ_MOE_KERNEL_MAIN, arch);
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
    p[MJ_MOE_PARAM_ACTIVATION] = act_code;
    p[MJ_MOE_PARAM_CLAMP_BITS] = (int32_t)clamp_bits;
    p[MJ_MOE_PARAM_ACT_PARAM0_BITS] = (int32_t)act_bits[0];
    p[MJ_MOE_PARAM_ACT_PARAM1_BITS] = (int32_t)act_bits[1];
    p[MJ_MOE_PARAM_BLOCK_M] = kc.block_m;
    p[MJ_MOE_PARAM_STAGE_K] = kc.stage_k;
    p[MJ_MOE_PARAM_STAGES] = kc.stages;
    p[MJ_MOE_PARAM_NUM_SMS] = num_sms;
    p[MJ_MOE_PARAM_CTAS_PER_SM] = kc.ctas_per_sm;
    p[MJ_MOE_PARAM_SYS_SCOPE] = cfg->num_ranks > 1 && sys_scope ? 1 : 0;
    p[MJ_MOE_PARAM_BIASES] = cfg->expert_biases ? 1 : 0;
    p[MJ_MOE_PARAM_SHARED_INTER] = cfg->shared_intermediate;
    p[MJ_MOE_PARAM_SHARED_FMT] = cfg->shared_intermediate ? (int32_t)cfg->shared_format : 0;
    return MJ_OK;
}

mj_status mj_mega_moe_spec(const mj_moe_config *cfg, int block_m, int num_sms, int sys_scope,
                           mj_arch arch, mj_kernel_spec *out) {
    if (!block_m) return mj_fail(MJ_ERR_INVALID_ARG, "block_m 0: a spec needs a tile size");
    return main_spec(cfg, block_m, 0, num_sms, sys_scope, 0, arch, out);
}

mj_status mj_mega_moe_image_spec(const mj_moe_config *cfg, int shared_expert, mj_arch arch,
                                 mj_kernel_spec *out) {
    const mj_moe_format_row *row = row_of(cfg);
    if (!row) return mj_fail(MJ_ERR_INVALID_ARG, "mega_moe: not a MegaMoE format pair");
    if (shared_expert && !cfg->shared_intermediate)
        return mj_fail(MJ_ERR_INVALID_ARG, "mega_moe: the layer has no shared expert");
    mj_status st = check_arch(arch);
    if (st != MJ_OK) return st;
    mj_kernel_spec_init(out, MJ_FAMILY_MEGA_MOE, MJ_MOE_KERNEL_IMAGE, arch);
    int32_t *p = out->params;
    out->num_params = MJ_MOE_IMAGE_NUM_PARAMS;
    /* The shared expert's image: its format and width, in stages and tasks
     * whose stage fits a routed one's ring slot (the kernel streams both
     * through one ring). */
    const mj_moe_shared_geometry shared = mj_moe_shared_geometry_for(cfg);
    if (shared_expert && shared.task_blocks == 0)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "mega_moe: the shared expert's stages do not fit the routed ones");
    p[MJ_MOE_IMAGE_PARAM_WEIGHT_FMT] = shared_expert ? (int)cfg->shared_format : row->weight_fmt;
    p[MJ_MOE_IMAGE_PARAM_HIDDEN] = cfg->hidden;
    p[MJ_MOE_IMAGE_PARAM_INTERMEDIATE] =
        shared_expert ? cfg->shared_intermediate : cfg->intermediate;
    p[MJ_MOE_IMAGE_PARAM_STAGE_K] =
        shared_expert ? shared.stage_k : mj_moe_config_stage_k(cfg, row);
    p[MJ_MOE_IMAGE_PARAM_TASK_BLOCKS] = shared_expert ? shared.task_blocks : MJ_MOE_TASK_BLOCKS;
    return MJ_OK;
}

static mj_status build_spec(const mj_family_request *req, int kernel, mj_arch arch,
                            mj_kernel_spec *out) {
    if (!req->layer)
        return mj_fail(MJ_ERR_INVALID_ARG, "mega_moe: the request carries no MoE layer");
    if (kernel == MJ_MOE_KERNEL_IMAGE)
        return mj_mega_moe_image_spec(req->layer, req->shared_expert, arch, out);
    if (kernel != MJ_MOE_KERNEL_MAIN)
        return mj_fail(MJ_ERR_INVALID_ARG, "unknown MegaMoE kernel %d", kernel);
    return main_spec(req->layer, req->layer->block_m, req->num_tokens, req->num_sms, req->sys_scope,
                     req->shares_device, arch, out);
}

/* The main kernel: one producer and two math warpgroups per CTA, one
 * persistent CTA per SM of the rank (two where the heuristics' config says
 * so: kCtasPerSm), the dynamic shared memory its stage ring,
 * epilogue scratch and routing tables take (mj_moe_smem_bytes, which the
 * kernel's config checks its map against). The image kernel: a CTA of 128 threads per (64-row block
 * of the projection, K stage). */
static void launch_shape(const mj_kernel_spec *spec, const mj_family_request *req,
                         mj_launch_config *out) {
    const int32_t *p = spec->params;
    if (spec->kernel == MJ_MOE_KERNEL_IMAGE) {
        const int down = req->projection == MJ_PROJ_DOWN;
        const int rows = down ? p[MJ_MOE_IMAGE_PARAM_HIDDEN] : p[MJ_MOE_IMAGE_PARAM_INTERMEDIATE];
        const int k = down ? p[MJ_MOE_IMAGE_PARAM_INTERMEDIATE] : p[MJ_MOE_IMAGE_PARAM_HIDDEN];
        *out = (mj_launch_config){{(unsigned)(rows / MJ_MOE_BLOCK_ROWS),
                                   (unsigned)(k / p[MJ_MOE_IMAGE_PARAM_STAGE_K]), 1},
                                  {128, 1, 1},
                                  0,
                                  0,
                                  0};
        return;
    }
    const unsigned smem = mj_moe_smem_bytes(
        p[MJ_MOE_PARAM_HIDDEN], p[MJ_MOE_PARAM_INTERMEDIATE], p[MJ_MOE_PARAM_WEIGHT_FMT],
        p[MJ_MOE_PARAM_STAGE_K], p[MJ_MOE_PARAM_BLOCK_M], p[MJ_MOE_PARAM_STAGES],
        p[MJ_MOE_PARAM_EXPERTS] / p[MJ_MOE_PARAM_RANKS] + (p[MJ_MOE_PARAM_SHARED_INTER] > 0),
        p[MJ_MOE_PARAM_RANKS]);
    *out = (mj_launch_config){
        {(unsigned)(p[MJ_MOE_PARAM_NUM_SMS] * p[MJ_MOE_PARAM_CTAS_PER_SM]), 1, 1},
        {MJ_MOE_THREADS, 1, 1},
        smem,
        0,
        req->pdl,
        p[MJ_MOE_PARAM_CTAS_PER_SM]};
}

/* A launch of `tokens` on layer's rank: its tile and CTAs an SM as bm * 2 +
 * ctas - 1, which never decreases with the token count (a tile takes its
 * second CTA an SM as its tasks grow; a larger tile starts over). */
static int launch_key(const mj_family_request *layer, int tokens) {
    const mj_moe_config *cfg = layer->layer;
    mj_moe_kernel_config kc;
    if (launch_config(cfg, cfg->block_m, tokens, layer->num_sms, layer->shares_device, &kc) != 0)
        return 2 * mj_mega_moe_pick_block_m(cfg, tokens);
    return 2 * kc.block_m + kc.ctas_per_sm - 1;
}

/* The weight-image kernel (and the shared expert's), then every kernel a
 * launch of 0..max_tokens_per_rank tokens can pick (launch_key's values),
 * each the spec such a launch builds (build_spec): each next one is found by
 * a binary search for the first token count past the current one. */
static mj_status enumerate(const mj_family_request *layer, mj_arch arch, mj_spec_fn add,
                           void *ctx) {
    const mj_moe_config *cfg = layer->layer;
    /* Only sm_90a has a MegaMoE kernel, and layers whose formats are no
     * MegaMoE pair can still use pre-dispatch on their own. */
    if (!cfg || arch != MJ_ARCH_SM90A || !row_of(cfg)) return MJ_OK;
    mj_status st = mj_moe_config_check(cfg, NULL);
    mj_kernel_spec image;
    if (st == MJ_OK) st = mj_mega_moe_image_spec(cfg, 0, arch, &image);
    if (st == MJ_OK) st = add(&image, ctx);
    if (st == MJ_OK && cfg->shared_intermediate) {
        mj_kernel_spec shared_image;
        st = mj_mega_moe_image_spec(cfg, 1, arch, &shared_image);
        if (st == MJ_OK) st = add(&shared_image, ctx);
    }
    const int max_tokens = cfg->max_tokens_per_rank;
    for (int tokens = 0; st == MJ_OK;) {
        const int key = launch_key(layer, tokens);
        mj_family_request launch = *layer;
        launch.num_tokens = tokens;
        mj_kernel_spec spec;
        st = build_spec(&launch, MJ_MOE_KERNEL_MAIN, arch, &spec);
        if (st == MJ_OK) st = add(&spec, ctx);
        int lo = tokens + 1, hi = max_tokens + 1; /* first larger key in [lo, hi) */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (launch_key(layer, mid) > key)
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
    .name = "mega_moe",
    .template_path = "mega_moe.cuh",
    .kernels = kKernels,
    .num_kernels = MJ_MOE_NUM_KERNELS,
    .build_spec = build_spec,
    .launch_shape = launch_shape,
    .enumerate = enumerate,
};
