/* mj_mega_moe: one MoE layer (dispatch, both expert GEMMs, combine) in one
 * persistent kernel; the checks of its buffer, weights and arguments, and the
 * device error word it reads back. */
#include <stdio.h>

#include "apis/mega_moe_impl.h"
#include "apis/symm_buffer_impl.h"
#include "runtime/device.h"
#include "runtime/env.h"
#include "runtime/error.h"
#include "runtime/families/mega_moe.h"
#include "runtime/runtime.h"

mj_status mj_mega_moe_block_m(const mj_moe_config *config, int num_tokens, int *block_m) {
    mj_clear_error();
    if (!block_m) return mj_fail(MJ_ERR_INVALID_ARG, "mj_mega_moe_block_m: block_m is NULL");
    mj_moe_config accepted;
    const mj_moe_config *cfg = &accepted;
    mj_status st = mj_moe_config_accept(config, &accepted, NULL);
    if (st != MJ_OK) return st;
    if (num_tokens < 0 || num_tokens > cfg->max_tokens_per_rank)
        return mj_fail(MJ_ERR_INVALID_ARG, "num_tokens %d outside 0..%d (max_tokens_per_rank)",
                       num_tokens, cfg->max_tokens_per_rank);
    *block_m = mj_mega_moe_pick_block_m(cfg, num_tokens);
    return MJ_OK;
}

/* Every in-kernel wait on another CTA or rank gives up after this; a launch
 * that legitimately waits longer (a peer busy elsewhere for seconds) is not a
 * MoE layer anyone serves. */
#define MJ_MOE_WAIT_TIMEOUT_NS 10000000000ull

static uint64_t wait_timeout_ns(void) {
    const unsigned long long ms = mj_env_get()->moe_timeout_ms;
    return ms ? ms * 1000000ull : MJ_MOE_WAIT_TIMEOUT_NS;
}

/* Names the first projection of w nobody loaded (entry E_local: the shared
 * expert's). */
static mj_status missing_projection(const mj_weights *w) {
    int i = 0;
    while (w->loaded[i])
        i++;
    const int e = i / MJ_MOE_NUM_PROJECTIONS;
    const char *proj = mj_moe_projection_names[i % MJ_MOE_NUM_PROJECTIONS];
    if (e == w->local_experts)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_mega_moe: missing weights/scales for the shared expert's %s "
                       "projection (load it with mj_weights_load_shared)",
                       proj);
    return mj_fail(MJ_ERR_INVALID_ARG,
                   "mj_mega_moe: missing weights/scales for local expert %d projection %s (load "
                   "every projection with mj_weights_load)",
                   e, proj);
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
    mj_symm_config wanted = mj_symm_config_of_moe(c);
    long long in_buffer, in_weights;
    const char *field = mj_symm_config_mismatch(b, &wanted, &in_buffer, &in_weights);
    if (field)
        return mj_fail(
            MJ_ERR_INVALID_ARG,
            "mj_mega_moe: the symmetric buffer's %s is %lld but the weights' config has %lld",
            field, in_buffer, in_weights);
    if (buf->rank >= 0 && buf->rank != c->rank)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_mega_moe: this process is rank %d of the symmetric buffer but the "
                       "weights belong to rank %d",
                       buf->rank, c->rank);
    if (w->projections_missing) return missing_projection(w);
    if (num_tokens < 0 || num_tokens > c->max_tokens_per_rank)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_mega_moe: num_tokens %d outside 0..%d (max_tokens_per_rank)", num_tokens,
                       c->max_tokens_per_rank);
    if (num_tokens > 0 && !y) return mj_fail(MJ_ERR_INVALID_ARG, "mj_mega_moe: y is NULL");
    /* Before the device is touched: a runtime for another arch never gets there. */
    return mj_family_require_sm90a("mj_mega_moe", rt->arch, "Hopper's wgmma");
}

/* The kernel a launch with num_tokens uses (compiled and loaded) and its
 * launch shape. */
static mj_status select_kernel(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                               int num_tokens, mj_stream stream, mj_kernel **k,
                               mj_launch_config *lc) {
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
    /* Emulated ranks wait on each other's CTAs, so all of their grids must be
     * resident at once (one CTA fills an SM). */
    int ranks = buf->cfg.num_ranks;
    if (buf->rank < 0 && ranks > 1 && (long long)ranks * sms > rt->device_sms)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_mega_moe: %d emulated ranks x %d SMs each exceed the device's %d SMs "
                       "(their grids must run concurrently; set the MegaMoE family's SM count to "
                       "at most %d before creating the buffer)",
                       ranks, sms, rt->device_sms, rt->device_sms / ranks);
    const mj_family_request req = {
        .buffer = &buf->cfg,
        .layer = &weights->cfg,
        .num_tokens = num_tokens,
        .num_sms = sms,
        .pdl = mj_runtime_family_settings(rt, MJ_FAMILY_MEGA_MOE).pdl,
        .sys_scope = buf->dist != NULL,
        .shares_device = buf->shares_device,
    };
    return mj_family_prepare(rt, &mj_mega_moe_family, MJ_MOE_KERNEL_MAIN, &req, stream, k, lc);
}

mj_status mj_mega_moe_warmup(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                             int num_tokens) {
    mj_clear_error();
    /* Only the shapes matter here: a stand-in output passes the y check. */
    static unsigned short no_output;
    mj_status st = check_launch(rt, buf, weights, &no_output, num_tokens);
    mj_kernel *k;
    mj_launch_config lc;
    return st != MJ_OK ? st : select_kernel(rt, buf, weights, num_tokens, NULL, &k, &lc);
}

mj_status mj_mega_moe_prepare(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                              void *y, int num_tokens, int32_t *recv_stats, mj_stream stream,
                              mj_kernel **k, mj_launch_config *lc, mj_moe_args *args) {
    if (!k || !lc || !args) return mj_fail(MJ_ERR_INVALID_ARG, "mj_mega_moe_prepare: NULL output");
    mj_status st = check_launch(rt, buf, weights, y, num_tokens);
    if (st != MJ_OK || (st = select_kernel(rt, buf, weights, num_tokens, stream, k, lc)) != MJ_OK)
        return st;
    int local = weights->local_experts;
    const float *alphas = (const float *)(uintptr_t)weights->alphas;
    *args = (mj_moe_args){
        .peers = mj_symm_peers(buf, weights->cfg.rank),
        .w = (const unsigned char *)(uintptr_t)weights->image,
        .l1_alpha_gate = alphas,
        .l1_alpha_up = alphas + local,
        .l2_alpha = alphas + 2 * local,
        .l2_act_scale = alphas + 3 * local,
        .y = y,
        .recv_stats = recv_stats,
        .num_tokens = num_tokens,
        .timeout_ns = wait_timeout_ns(),
    };
    if (weights->cfg.expert_biases) {
        args->l1_bias = (const float *)(uintptr_t)weights->biases;
        args->l2_bias = args->l1_bias + (size_t)local * 2 * (size_t)weights->cfg.intermediate;
    }
    if (weights->cfg.shared_intermediate)
        args->w_shared = (const unsigned char *)(uintptr_t)weights->shared_image;
    return MJ_OK;
}

mj_status mj_mega_moe_launch(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                             mj_kernel *k, const mj_launch_config *lc, mj_moe_args *args,
                             mj_stream stream) {
    void *params[] = {args};
    mj_status st = mj_jit_launch(rt, k, lc, stream, params);
    if (st != MJ_OK) return st;
    /* Emulated ranks wait for each other inside: one cannot be synchronized alone. */
    int alone = buf->rank >= 0 || buf->cfg.num_ranks == 1;
    return rt->check_device_inputs && alone
               ? mj_mega_moe_check_errors(rt, buf, weights->cfg.rank, stream)
               : MJ_OK;
}

mj_status mj_mega_moe(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights, void *y,
                      int num_tokens, int32_t *recv_stats, mj_stream stream) {
    mj_clear_error();
    mj_kernel *k;
    mj_launch_config lc;
    mj_moe_args args;
    mj_status st =
        mj_mega_moe_prepare(rt, buf, weights, y, num_tokens, recv_stats, stream, &k, &lc, &args);
    return st != MJ_OK ? st : mj_mega_moe_launch(rt, buf, weights, k, &lc, &args, stream);
}

static const char *error_meaning(uint32_t code) {
    switch (code) {
    case MJ_MOE_ERR_PEER_START:
        return "rank %u never published its inputs for this launch";
    case MJ_MOE_ERR_POOL:
        return "the dispatched rows of local expert %u never all arrived";
    case MJ_MOE_ERR_L1:
        return "the GEMM 1 tasks of token tile %u never all finished";
    case MJ_MOE_ERR_COMBINE:
        return "the GEMM 2 results of token %u never all arrived (a peer rank stopped?)";
    case MJ_MOE_ERR_PEER_END:
        return "a peer rank never reached the end of the launch (detail %u)";
    case MJ_MOE_ERR_PIPE:
        return "an in-CTA pipeline wait expired (site %u: a kernel bug)";
    case MJ_MOE_ERR_OVERFLOW:
        return "local expert %u received more rows than were counted (a kernel bug)";
    case MJ_MOE_ERR_SMEM_ALIGN:
        return "the kernel's shared memory starts at %u, not 1024-aligned as its swizzled tiles "
               "need";
    }
    return "unknown device error (detail %u)";
}

mj_status mj_mega_moe_check_errors(mj_runtime *rt, mj_symm_buffer *buf, int rank,
                                   mj_stream stream) {
    /* A capturing stream cannot be synchronized: replays are checked by the caller. */
    if (mj_stream_capturing(rt, stream) != 0) return MJ_OK;
    mj_status st = mj_stream_synchronize(rt, stream, "mj_mega_moe: the kernel failed");
    if (st != MJ_OK) return st;
    const mj_symm_config *c = &buf->cfg;
    mj_moe_layout l =
        mj_layout_moe(c->hidden, c->intermediate, c->num_experts, c->num_topk, c->num_ranks,
                      c->max_tokens_per_rank, (int)c->dispatch_format, (int)c->shared_intermediate);
    CUdeviceptr word = mj_symm_rank_base(buf, buf->rank >= 0 ? buf->rank : rank) +
                       l.counters_offset + 4ull * MJ_MOE_CNT_ERROR;
    uint32_t v = 0;
    if ((st = mj_device_download(rt, &v, word, 4, stream,
                                 "mj_mega_moe: reading the device error word")) != MJ_OK)
        return st;
    if (v == 0) return MJ_OK;
    if ((st = mj_device_zero(rt, word, 4, stream, "mj_mega_moe: clearing the device error word")) !=
        MJ_OK)
        return st;
    char what[160];
    const uint32_t code = v >> 24, detail = v & 0xffffffu;
    /* The routing entry after the local experts is the shared expert. */
    if (code == MJ_MOE_ERR_POOL && c->shared_intermediate &&
        detail == (uint32_t)(c->num_experts / c->num_ranks))
        snprintf(what, sizeof what, "this rank's rows of the shared expert never all arrived");
    else
        snprintf(what, sizeof what, error_meaning(code), detail);
    return mj_fail(MJ_ERR_CUDA, "mj_mega_moe (rank %d): %s; its outputs are not valid", rank, what);
}
