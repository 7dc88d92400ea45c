/* mj_mega_moe: one MoE layer (dispatch, both expert GEMMs, combine) in one
 * persistent kernel, plus the config validation and specs it shares with the
 * weights loader and the manifest. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "apis/mega_moe_impl.h"
#include "apis/specs.h"
#include "apis/symm_buffer_impl.h"
#include "heuristics/mega_moe_config.h"
#include "runtime/error.h"
#include "runtime/runtime_impl.h"

static const char *const kProjectionNames[MJ_MOE_NUM_PROJECTIONS] = {"gate", "up", "down"};

static int block_m_valid(int block_m) {
    return block_m == 8 || block_m == 16 || block_m == 32 || block_m == 64;
}

static mj_status unsupported_pair(const mj_moe_config *c) {
    char pairs[256] = "";
    for (int i = 0; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *r = mj_moe_format_at(i);
        size_t len = strlen(pairs);
        snprintf(pairs + len, sizeof pairs - len, "%s%s/%s", i ? ", " : "",
                 mj_format_name((mj_format)r->weight_fmt),
                 mj_format_name((mj_format)r->dispatch_fmt));
    }
    const char *w = mj_format_name(c->weight_format), *d = mj_format_name(c->dispatch_format);
    return mj_fail(MJ_ERR_INVALID_ARG,
                   "(weight_format %s, dispatch_format %s) is not a MegaMoE format pair "
                   "(supported weight/dispatch: %s)",
                   w ? w : "?", d ? d : "?", pairs);
}

mj_status mj_moe_config_check(const mj_moe_config *c, const mj_moe_format_row **row) {
    if (!c) return mj_fail(MJ_ERR_INVALID_ARG, "MegaMoE config is NULL");
    /* The shape rules of the symmetric buffer the layer runs in. */
    mj_symm_config probe = {
        c->hidden,          c->num_experts, c->num_topk,    c->max_tokens_per_rank,
        c->dispatch_format, c->num_ranks,   c->intermediate};
    mj_status st = mj_symm_shape_check(&probe, 1);
    if (st != MJ_OK) return st;
    if (c->rank < 0 || c->rank >= c->num_ranks)
        return mj_fail(MJ_ERR_INVALID_ARG, "rank %d outside 0..%d (num_ranks %d)", c->rank,
                       c->num_ranks - 1, c->num_ranks);
    const mj_moe_format_row *r = mj_moe_format_find((int)c->weight_format, (int)c->dispatch_format);
    if (!r) return unsupported_pair(c);
    const char *act = mj_moe_activation_name((int)c->activation);
    if (!act) return mj_fail(MJ_ERR_INVALID_ARG, "unknown activation %d", (int)c->activation);
    if (!mj_moe_activation_allowed(r, (int)c->activation))
        return mj_fail(MJ_ERR_INVALID_ARG, "activation %s is not available with the %s formats",
                       act, r->name);
    if (!isfinite(c->clamp) || c->clamp < 0)
        return mj_fail(MJ_ERR_INVALID_ARG, "clamp %g must be finite and >= 0 (0 = none)",
                       (double)c->clamp);
    if (c->clamp > 0 && !mj_moe_activation_has_clamp((int)c->activation))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "clamp %g: only swiglu and swigluoai take a clamp (activation is %s)",
                       (double)c->clamp, act);
    if (c->block_m != 0 && !block_m_valid(c->block_m))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "block_m %d must be 0 (chosen per token count) or 8, 16, 32 or 64",
                       c->block_m);
    if (row) *row = r;
    return MJ_OK;
}

mj_status mj_mega_moe_spec(const mj_moe_config *cfg, int block_m, int num_sms, mj_arch arch,
                           mj_kernel_spec *out) {
    const mj_moe_format_row *row;
    mj_status st = mj_moe_config_check(cfg, &row);
    if (st != MJ_OK) return st;
    if (!block_m_valid(block_m))
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
    mj_kernel_spec_init(out, MJ_FAMILY_MEGA_MOE, arch);
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

mj_status mj_mega_moe_block_m(const mj_moe_config *cfg, int num_tokens, int *block_m) {
    if (!block_m) return mj_fail(MJ_ERR_INVALID_ARG, "mj_mega_moe_block_m: block_m is NULL");
    mj_status st = mj_moe_config_check(cfg, NULL);
    if (st != MJ_OK) return st;
    if (num_tokens < 0 || num_tokens > cfg->max_tokens_per_rank)
        return mj_fail(MJ_ERR_INVALID_ARG, "num_tokens %d outside 0..%d (max_tokens_per_rank)",
                       num_tokens, cfg->max_tokens_per_rank);
    if (cfg->block_m) {
        *block_m = cfg->block_m;
        return MJ_OK;
    }
    int bm = mj_moe_block_m(num_tokens, cfg->num_ranks, cfg->num_experts, cfg->num_topk);
    /* The heuristic goes up to 256, but this kernel keeps the gate and up
     * accumulators of a whole token tile in registers, which caps the tile. */
    *block_m = bm > MJ_MOE_MAX_BLOCK_M ? MJ_MOE_MAX_BLOCK_M : bm;
    return MJ_OK;
}

static mj_status check_pair(const char *field, long long buffer, long long weights) {
    if (buffer == weights) return MJ_OK;
    return mj_fail(
        MJ_ERR_INVALID_ARG,
        "mj_mega_moe: the symmetric buffer's %s is %lld but the weights' config has %lld", field,
        buffer, weights);
}

static mj_status check_launch(mj_runtime *rt, const mj_symm_buffer *buf, const mj_weights *w,
                              const void *y, int num_tokens) {
    if (!rt || !buf || !w)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_mega_moe: NULL runtime, buffer or weights");
    if (buf->rt != rt || w->rt != rt)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_mega_moe: the buffer or the weights belong to another runtime");
    const mj_symm_config *b = &buf->cfg;
    const mj_moe_config *c = &w->cfg;
    if (b->intermediate == 0)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_mega_moe: the symmetric buffer has no MegaMoE regions (create it with "
                       "cfg.intermediate = %d)",
                       c->intermediate);
    mj_status st;
    if ((st = check_pair("intermediate", b->intermediate, c->intermediate)) != MJ_OK ||
        (st = check_pair("hidden", b->hidden, c->hidden)) != MJ_OK ||
        (st = check_pair("num_experts", b->num_experts, c->num_experts)) != MJ_OK ||
        (st = check_pair("num_topk", b->num_topk, c->num_topk)) != MJ_OK ||
        (st = check_pair("max_tokens_per_rank", b->max_tokens_per_rank, c->max_tokens_per_rank)) !=
            MJ_OK ||
        (st = check_pair("num_ranks", b->num_ranks, c->num_ranks)) != MJ_OK ||
        (st = check_pair("dispatch_format", b->dispatch_format, c->dispatch_format)) != MJ_OK)
        return st;
    if (buf->rank >= 0 && buf->rank != c->rank)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_mega_moe: this process is rank %d of the symmetric buffer but the "
                       "weights belong to rank %d",
                       buf->rank, c->rank);
    for (int e = 0; e < w->local_experts; e++)
        for (int p = 0; p < MJ_MOE_NUM_PROJECTIONS; p++)
            if (!w->loaded[e * MJ_MOE_NUM_PROJECTIONS + p])
                return mj_fail(MJ_ERR_INVALID_ARG,
                               "mj_mega_moe: missing weights/scales for local expert %d "
                               "projection %s (load every projection with mj_weights_load)",
                               e, kProjectionNames[p]);
    if (num_tokens < 0 || num_tokens > c->max_tokens_per_rank)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_mega_moe: num_tokens %d outside 0..%d (max_tokens_per_rank)", num_tokens,
                       c->max_tokens_per_rank);
    if (num_tokens > 0 && !y) return mj_fail(MJ_ERR_INVALID_ARG, "mj_mega_moe: y is NULL");
    if (rt->arch != MJ_ARCH_SM90A)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "mj_mega_moe: no MegaMoE kernel for %s (the kernel is built on Hopper's "
                       "wgmma and exists for sm_90a only)",
                       rt->arch_name);
    return MJ_OK;
}

/* The kernel a launch with num_tokens uses (compiled and loaded), its BLOCK_M
 * and SM count. */
static mj_status select_kernel(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                               int num_tokens, mj_stream stream, mj_kernel **k, int *block_m,
                               int *num_sms) {
    mj_status st = mj_runtime_bind(rt);
    if (st != MJ_OK) return st;
    /* The workspace and the cross-CTA barriers were sized for the CTA count the
     * buffer recorded; another grid would wait on CTAs that never run. */
    int sms = mj_runtime_family_sms(rt, MJ_FAMILY_MEGA_MOE);
    if (sms != buf->num_sms)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_mega_moe: the symmetric buffer was sized for %d SMs, family set to %d "
                       "(set the MegaMoE family's SM count before creating the buffer)",
                       buf->num_sms, sms);
    mj_kernel_spec spec;
    *num_sms = sms;
    if ((st = mj_mega_moe_block_m(&weights->cfg, num_tokens, block_m)) != MJ_OK ||
        (st = mj_mega_moe_spec(&weights->cfg, *block_m, sms, rt->arch, &spec)) != MJ_OK)
        return st;
    return mj_jit_get(rt, &spec, stream, k);
}

mj_status mj_mega_moe_warmup(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                             int num_tokens) {
    /* Only the shapes matter here: a stand-in output passes the y check. */
    static unsigned short no_output;
    mj_status st = check_launch(rt, buf, weights, &no_output, num_tokens);
    mj_kernel *k;
    int block_m, sms;
    return st != MJ_OK ? st : select_kernel(rt, buf, weights, num_tokens, NULL, &k, &block_m, &sms);
}

mj_status mj_mega_moe_prepare(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                              void *y, int num_tokens, int32_t *recv_stats, mj_stream stream,
                              mj_kernel **k, mj_launch_config *lc, mj_moe_args *args) {
    if (!k || !lc || !args) return mj_fail(MJ_ERR_INVALID_ARG, "mj_mega_moe_prepare: NULL output");
    int block_m, sms;
    mj_status st = check_launch(rt, buf, weights, y, num_tokens);
    if (st != MJ_OK ||
        (st = select_kernel(rt, buf, weights, num_tokens, stream, k, &block_m, &sms)) != MJ_OK)
        return st;
    *lc = (mj_launch_config){{(unsigned)sms, 1, 1},
                             {MJ_MOE_THREADS, 1, 1},
                             mj_moe_smem_bytes(block_m),
                             0,
                             mj_runtime_family_pdl(rt, MJ_FAMILY_MEGA_MOE)};
    int local = weights->local_experts;
    const float *alphas = (const float *)(uintptr_t)weights->alphas;
    *args = (mj_moe_args){
        .peers = mj_symm_peers(buf, weights->cfg.rank),
        .w1 = (const unsigned char *)(uintptr_t)weights->w1,
        .w1_sf = (const unsigned char *)(uintptr_t)weights->w1_sf,
        .w2 = (const unsigned char *)(uintptr_t)weights->w2,
        .w2_sf = (const unsigned char *)(uintptr_t)weights->w2_sf,
        .l1_alpha_gate = alphas,
        .l1_alpha_up = alphas + local,
        .l2_alpha = alphas + 2 * local,
        .l2_act_scale = alphas + 3 * local,
        .y = y,
        .recv_stats = recv_stats,
        .num_tokens = num_tokens,
    };
    return MJ_OK;
}

mj_status mj_mega_moe(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights, void *y,
                      int num_tokens, int32_t *recv_stats, mj_stream stream) {
    mj_kernel *k;
    mj_launch_config lc;
    mj_moe_args args;
    mj_status st =
        mj_mega_moe_prepare(rt, buf, weights, y, num_tokens, recv_stats, stream, &k, &lc, &args);
    if (st != MJ_OK) return st;
    void *params[] = {&args};
    return mj_jit_launch(rt, k, &lc, stream, params);
}
