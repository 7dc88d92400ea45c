/* mj_pre_dispatch: BF16 tokens -> a rank's input region of the symmetric buffer. */
#include <stdint.h>

#include "apis/pre_dispatch_impl.h"
#include "apis/symm_buffer_impl.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/families/pre_dispatch.h"
#include "runtime/jit.h"
#include "runtime/runtime.h"
#include "templates/layout/pre_dispatch_launch.h"

mj_status mj_pre_dispatch_check(const mj_runtime *rt, const mj_symm_buffer *buf, int rank,
                                const void *x, const int32_t *ids, const float *w, int num_tokens) {
    if (!rt || !buf) return mj_fail(MJ_ERR_INVALID_ARG, "mj_pre_dispatch: NULL runtime or buffer");
    if (buf->rt != rt)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_pre_dispatch: the buffer belongs to another runtime");
    if (rank < 0 || rank >= buf->cfg.num_ranks)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_pre_dispatch: rank %d outside 0..%d", rank,
                       buf->cfg.num_ranks - 1);
    if (num_tokens < 0 || num_tokens > buf->cfg.max_tokens_per_rank)
        return mj_fail(
            MJ_ERR_INVALID_ARG,
            "mj_pre_dispatch: %d tokens outside 0..%d (the buffer's max_tokens_per_rank)",
            num_tokens, buf->cfg.max_tokens_per_rank);
    if (num_tokens > 0 && (!x || !ids || !w))
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_pre_dispatch: x, topk_ids or topk_weights is NULL");
    return MJ_OK;
}

/* Turns a device-detected bad id into a status (only when asked and possible:
 * synchronizing is not allowed while capturing): the sum of the workspace
 * slots this launch's check grid wrote. */
static mj_status report_bad_ids(mj_runtime *rt, mj_symm_buffer *buf, int rank, int num_tokens,
                                mj_stream stream) {
    if (mj_stream_capturing(rt, stream) != 0) return MJ_OK;
    uint32_t slots[MJ_WS_PD_CHECK_SLOT_COUNT];
    const unsigned n = mj_pd_check_ctas(buf->cfg.num_topk, num_tokens);
    const char *what = "mj_pre_dispatch: reading the input check";
    mj_status st = mj_stream_synchronize(rt, stream, what);
    if (st == MJ_OK)
        st = mj_device_download(rt, slots, mj_symm_rank_base(buf, rank) + MJ_WS_PD_CHECK_SLOTS * 4,
                                n * sizeof *slots, stream, what);
    if (st != MJ_OK) return st;
    uint64_t bad = 0;
    for (unsigned i = 0; i < n; i++)
        bad += slots[i];
    if (bad)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "mj_pre_dispatch: %llu top-k ids of rank %d lie outside [-1, %d); nothing "
                       "was written",
                       (unsigned long long)bad, rank, buf->cfg.num_experts);
    return MJ_OK;
}

mj_status mj_pre_dispatch_prepare(mj_runtime *rt, mj_symm_buffer *buf, int num_tokens,
                                  mj_stream stream, mj_pd_launch *out) {
    mj_status st = mj_runtime_bind(rt);
    if (st != MJ_OK) return st;
    const mj_family_request req = {
        .buffer = &buf->cfg,
        .num_tokens = num_tokens,
        .num_sms = mj_runtime_family_sms(rt, MJ_FAMILY_PRE_DISPATCH),
        .pdl = mj_runtime_family_settings(rt, MJ_FAMILY_PRE_DISPATCH).pdl,
    };
    if ((st = mj_family_prepare(rt, &mj_pre_dispatch_family, MJ_PD_KERNEL_CHECK, &req, stream,
                                &out->check_kernel, &out->check_lc)) != MJ_OK)
        return st;
    return mj_family_prepare(rt, &mj_pre_dispatch_family, MJ_PD_KERNEL_MAIN, &req, stream,
                             &out->main_kernel, &out->main_lc);
}

mj_status mj_pre_dispatch_launch(mj_runtime *rt, mj_symm_buffer *buf, int rank, const void *x,
                                 const int32_t *topk_ids, const float *topk_weights,
                                 const float *expert_scales, int num_tokens, mj_stream stream,
                                 const mj_pd_launch *pl) {
    mj_status st;
    CUdeviceptr region = mj_symm_rank_base(buf, rank);
    int experts = buf->cfg.num_experts, max_tokens = buf->cfg.max_tokens_per_rank;
    void *check_args[] = {&topk_ids, &region, &num_tokens, &experts};
    if ((st = mj_jit_launch(rt, pl->check_kernel, &pl->check_lc, stream, check_args)) != MJ_OK)
        return st;
    void *main_args[] = {&x,      &topk_ids,   &topk_weights, &expert_scales,
                         &region, &num_tokens, &max_tokens,   &experts};
    if ((st = mj_jit_launch(rt, pl->main_kernel, &pl->main_lc, stream, main_args)) != MJ_OK)
        return st;
    return rt->check_device_inputs ? report_bad_ids(rt, buf, rank, num_tokens, stream) : MJ_OK;
}

mj_status mj_pre_dispatch(mj_runtime *rt, mj_symm_buffer *buf, int rank, const void *x,
                          const int32_t *topk_ids, const float *topk_weights,
                          const float *expert_scales, int num_tokens, mj_stream stream) {
    mj_clear_error();
    mj_pd_launch pl;
    mj_status st = mj_pre_dispatch_check(rt, buf, rank, x, topk_ids, topk_weights, num_tokens);
    if (st != MJ_OK || (st = mj_pre_dispatch_prepare(rt, buf, num_tokens, stream, &pl)) != MJ_OK)
        return st;
    return mj_pre_dispatch_launch(rt, buf, rank, x, topk_ids, topk_weights, expert_scales,
                                  num_tokens, stream, &pl);
}
