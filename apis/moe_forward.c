/* mj_moe_forward: one rank's whole MoE layer (pre-dispatch, then MegaMoE) in
 * one call, every argument checked and every kernel loaded before the first
 * launch. */
#include "apis/mega_moe_impl.h"
#include "apis/pre_dispatch_impl.h"
#include "runtime/error.h"

mj_status mj_moe_forward(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                         const void *x, const int32_t *topk_ids, const float *topk_weights,
                         const float *expert_scales, void *y, int num_tokens, int32_t *recv_stats,
                         mj_stream stream) {
    mj_clear_error();
    if (!rt || !buf || !weights)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_moe_forward: NULL runtime, buffer or weights");
    const int rank = weights->cfg.rank;
    mj_status st = mj_pre_dispatch_check(rt, buf, rank, x, topk_ids, topk_weights, num_tokens);
    if (st != MJ_OK) return st;
    /* MegaMoE's checks, then its kernel and pre-dispatch's: nothing launches
     * before every one of them passed. */
    mj_kernel *k;
    mj_launch_config lc;
    mj_moe_args args;
    mj_pd_launch pl;
    if ((st = mj_mega_moe_prepare(rt, buf, weights, y, num_tokens, recv_stats, stream, &k, &lc,
                                  &args)) != MJ_OK ||
        (st = mj_pre_dispatch_prepare(rt, buf, num_tokens, stream, &pl)) != MJ_OK ||
        (st = mj_pre_dispatch_launch(rt, buf, rank, x, topk_ids, topk_weights, expert_scales,
                                     num_tokens, stream, &pl)) != MJ_OK)
        return st;
    return mj_mega_moe_launch(rt, buf, weights, k, &lc, &args, stream);
}
