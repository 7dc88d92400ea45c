/* mj_pre_dispatch: BF16 tokens -> a rank's input region of the symmetric buffer. */
#include <stdint.h>

#include "apis/specs.h"
#include "apis/symm_buffer_impl.h"
#include "runtime/error.h"
#include "runtime/jit.h"
#include "runtime/runtime_impl.h"
#include "templates/layout/pre_dispatch_launch.h"

mj_status mj_pre_dispatch_spec(int hidden, mj_format fmt, int topk, int role, mj_arch arch,
                               mj_kernel_spec *out) {
    mj_symm_config probe = {hidden, topk, topk, 1, fmt, 1};
    mj_status st = mj_symm_config_check(&probe);
    if (st != MJ_OK) return st;
    if (role != MJ_PD_ROLE_MAIN && role != MJ_PD_ROLE_CHECK)
        return mj_fail(MJ_ERR_INVALID_ARG, "unknown pre-dispatch kernel role %d", role);
    if (!mj_arch_name(arch)) return mj_fail(MJ_ERR_INVALID_ARG, "unknown arch %d", (int)arch);
    mj_kernel_spec_init(out, MJ_FAMILY_PRE_DISPATCH, arch);
    out->num_params = 4;
    out->params[MJ_PD_PARAM_ROLE] = role;
    out->params[MJ_PD_PARAM_TOPK] = topk;
    /* The check kernel depends on top-k alone, so one serves every shape. */
    if (role == MJ_PD_ROLE_MAIN) {
        out->params[MJ_PD_PARAM_HIDDEN] = hidden;
        out->params[MJ_PD_PARAM_FORMAT] = (int32_t)fmt;
    }
    return MJ_OK;
}

static mj_status check_args(mj_runtime *rt, mj_symm_buffer *buf, int rank, const void *x,
                            const int32_t *ids, const float *w, int num_tokens) {
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
    const mj_cuda *cu = rt->cu;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = cu->cuStreamIsCapturing((CUstream)stream, &cs);
    if (r != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE) return MJ_OK;
    uint32_t slots[MJ_WS_PD_CHECK_SLOT_COUNT];
    const unsigned n = mj_pd_check_ctas(buf->cfg.num_topk, num_tokens);
    r = cu->cuStreamSynchronize((CUstream)stream);
    if (r == CUDA_SUCCESS)
        r = cu->cuMemcpyDtoH(slots, mj_symm_rank_base(buf, rank) + MJ_WS_PD_CHECK_SLOTS * 4,
                             n * sizeof *slots);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "mj_pre_dispatch: reading the input check");
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

mj_status mj_pre_dispatch(mj_runtime *rt, mj_symm_buffer *buf, int rank, const void *x,
                          const int32_t *topk_ids, const float *topk_weights,
                          const float *expert_scales, int num_tokens, mj_stream stream) {
    mj_status st = check_args(rt, buf, rank, x, topk_ids, topk_weights, num_tokens);
    if (st != MJ_OK || (st = mj_runtime_bind(rt)) != MJ_OK) return st;
    const mj_symm_config *c = &buf->cfg;
    mj_kernel_spec main_spec, check_spec;
    if ((st = mj_pre_dispatch_spec(c->hidden, c->dispatch_format, c->num_topk, MJ_PD_ROLE_MAIN,
                                   rt->arch, &main_spec)) != MJ_OK ||
        (st = mj_pre_dispatch_spec(c->hidden, c->dispatch_format, c->num_topk, MJ_PD_ROLE_CHECK,
                                   rt->arch, &check_spec)) != MJ_OK)
        return st;
    mj_kernel *main_kernel, *check_kernel;
    if ((st = mj_jit_get(rt, &main_spec, stream, &main_kernel)) != MJ_OK ||
        (st = mj_jit_get(rt, &check_spec, stream, &check_kernel)) != MJ_OK)
        return st;
    int pdl = mj_runtime_family_pdl(rt, MJ_FAMILY_PRE_DISPATCH);
    CUdeviceptr region = mj_symm_rank_base(buf, rank);
    int experts = c->num_experts, tokens = num_tokens, max_tokens = c->max_tokens_per_rank;
    unsigned check_ctas = mj_pd_check_ctas(c->num_topk, num_tokens);
    void *check_args[] = {&topk_ids, &region, &tokens, &experts};
    mj_launch_config check_lc = {{check_ctas, 1, 1}, {MJ_PD_CHECK_THREADS, 1, 1}, 0, 0, pdl};
    if ((st = mj_jit_launch(rt, check_kernel, &check_lc, stream, check_args)) != MJ_OK) return st;
    void *args[] = {&x,      &topk_ids, &topk_weights, &expert_scales,
                    &region, &tokens,   &max_tokens,   &experts};
    /* Always PDL: the main kernel follows its own check kernel, whose CTAs
     * trigger only after waiting for whatever ran before, and it waits for
     * that kernel itself before its first store. */
    mj_launch_config lc = {{mj_pd_grid(c->hidden, c->num_topk, num_tokens, max_tokens,
                                       mj_runtime_family_sms(rt, MJ_FAMILY_PRE_DISPATCH)),
                            1, 1},
                           {MJ_PD_BLOCK_THREADS(c->hidden), 1, 1},
                           MJ_PD_SMEM_BYTES(c->hidden, (int)c->dispatch_format),
                           0,
                           1};
    if ((st = mj_jit_launch(rt, main_kernel, &lc, stream, args)) != MJ_OK) return st;
    return rt->check_device_inputs ? report_bad_ids(rt, buf, rank, num_tokens, stream) : MJ_OK;
}
