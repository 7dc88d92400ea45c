/* mj_mega_moe: one MoE layer (dispatch, both expert GEMMs, combine) in one
 * persistent kernel, plus the config validation and specs it shares with the
 * weights loader and the manifest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apis/mega_moe_impl.h"
#include "apis/specs.h"
#include "apis/symm_buffer_impl.h"
#include "heuristics/mega_moe_config.h"
#include "runtime/error.h"
#include "runtime/runtime_impl.h"

static const char *const kProjectionNames[MJ_MOE_NUM_PROJECTIONS] = {"gate", "up", "down"};

static int block_m_valid(int block_m, const mj_moe_format_row *row) {
    return (block_m == 8 || block_m == 16 || block_m == 32 || block_m == 64 || block_m == 128) &&
           block_m <= mj_moe_max_block_m(row);
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
    if (c->intermediate <= 0 || c->intermediate % 64)
        return mj_fail(MJ_ERR_INVALID_ARG, "intermediate %d must be a positive multiple of 64",
                       c->intermediate);
    /* The shape rules of the symmetric buffer the layer runs in. */
    mj_symm_config probe = {
        c->hidden,          c->num_experts, c->num_topk,    c->max_tokens_per_rank,
        c->dispatch_format, c->num_ranks,   c->intermediate};
    mj_status st = mj_symm_config_check(&probe);
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
    if (c->block_m != 0 && !block_m_valid(c->block_m, r))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "block_m %d must be 0 (chosen per token count) or 8, 16, 32, 64 (or 128 "
                       "for rows that decode into BF16; the %s row takes at most %d)",
                       c->block_m, r->name, mj_moe_max_block_m(r));
    if (mj_moe_stage_k(c->hidden, c->intermediate, r) == 0)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "hidden %d and intermediate %d share no multiple of 64 that divides both "
                       "(the kernel streams K in stages of such a size)",
                       c->hidden, c->intermediate);
    if (row) *row = r;
    return MJ_OK;
}

/* Every in-kernel wait on another CTA or rank gives up after this; a launch
 * that legitimately waits longer (a peer busy elsewhere for seconds) is not a
 * MoE layer anyone serves. */
#define MJ_MOE_WAIT_TIMEOUT_NS 10000000000ull

/* The dynamic shared memory of a main-role spec (MJ_MOE_SMEM_BYTES). */
static unsigned spec_smem_bytes(const mj_kernel_spec *s) {
    const int32_t *p = s->params;
    int kind = mj_moe_kind(p[MJ_MOE_PARAM_WEIGHT_FMT], p[MJ_MOE_PARAM_DISPATCH_FMT]);
    mj_moe_wimage w = mj_moe_wimage_of(2 * p[MJ_MOE_PARAM_INTERMEDIATE], p[MJ_MOE_PARAM_HIDDEN],
                                       p[MJ_MOE_PARAM_STAGE_K], p[MJ_MOE_PARAM_WEIGHT_FMT]);
    unsigned wstage = MJ_MOE_TASK_BLOCKS * (w.blk_data + w.blk_sf);
    unsigned bstage =
        mj_moe_token_stage_bytes(kind, p[MJ_MOE_PARAM_BLOCK_M], p[MJ_MOE_PARAM_STAGE_K]);
    return MJ_MOE_SMEM_BYTES(wstage, bstage, (unsigned)p[MJ_MOE_PARAM_STAGES],
                             (unsigned)p[MJ_MOE_PARAM_BLOCK_M],
                             (unsigned)(p[MJ_MOE_PARAM_EXPERTS] / p[MJ_MOE_PARAM_RANKS]),
                             (unsigned)p[MJ_MOE_PARAM_RANKS]);
}

/* MEGAJIT_MOE_TIMEOUT_MS shortens the waits (tests of ranks that never arrive). */
static uint64_t wait_timeout_ns(void) {
    const char *v = getenv("MEGAJIT_MOE_TIMEOUT_MS");
    char *end;
    unsigned long long ms = v ? strtoull(v, &end, 10) : 0;
    return v && *v && !*end && ms > 0 ? ms * 1000000ull : MJ_MOE_WAIT_TIMEOUT_NS;
}

static mj_moe_problem problem_of(const mj_moe_config *cfg, int num_tokens, int num_sms) {
    mj_moe_problem p = {num_tokens,  cfg->num_ranks, cfg->num_experts, cfg->num_topk,
                        cfg->hidden, cfg->intermediate, num_sms};
    return p;
}

static mj_status check_arch(mj_arch arch) {
    const char *arch_name = mj_arch_name(arch);
    if (!arch_name) return mj_fail(MJ_ERR_INVALID_ARG, "unknown arch %d", (int)arch);
    if (arch != MJ_ARCH_SM90A)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "mega_moe: no kernel for %s (the MegaMoE kernel is built on Hopper's "
                       "wgmma and exists for sm_90a only)",
                       arch_name);
    return MJ_OK;
}

mj_status mj_mega_moe_spec(const mj_moe_config *cfg, int block_m, int num_sms, int sys_scope,
                           mj_arch arch, mj_kernel_spec *out) {
    const mj_moe_format_row *row;
    mj_status st = mj_moe_config_check(cfg, &row);
    if (st != MJ_OK) return st;
    if (!block_m_valid(block_m, row))
        return mj_fail(MJ_ERR_INVALID_ARG, "block_m %d must be 8, 16, 32, 64 or 128 (at most %d "
                       "for the %s row)", block_m, mj_moe_max_block_m(row), row->name);
    if (num_sms < 1) return mj_fail(MJ_ERR_INVALID_ARG, "num_sms %d must be positive", num_sms);
    if ((st = check_arch(arch)) != MJ_OK) return st;
    mj_moe_problem prob = problem_of(cfg, 0, num_sms);
    mj_moe_kernel_config kc;
    if (mj_moe_kernel_config_for(&prob, row, block_m, &kc) != 0)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "mega_moe: no kernel configuration fits hidden %d, intermediate %d, %d "
                       "experts over %d ranks at block_m %d in shared memory",
                       cfg->hidden, cfg->intermediate, cfg->num_experts, cfg->num_ranks, block_m);
    /* -0 must give the same spec (and cache key) as 0: both mean no clamp. */
    uint32_t clamp_bits = 0;
    if (cfg->clamp > 0) memcpy(&clamp_bits, &cfg->clamp, sizeof clamp_bits);
    mj_kernel_spec_init(out, MJ_FAMILY_MEGA_MOE, arch);
    int32_t *p = out->params;
    out->num_params = MJ_MOE_NUM_PARAMS;
    p[MJ_MOE_PARAM_ROLE] = MJ_MOE_ROLE_MAIN;
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
    p[MJ_MOE_PARAM_BLOCK_M] = kc.block_m;
    p[MJ_MOE_PARAM_STAGE_K] = kc.stage_k;
    p[MJ_MOE_PARAM_STAGES] = kc.stages;
    p[MJ_MOE_PARAM_NUM_SMS] = num_sms;
    p[MJ_MOE_PARAM_SYS_SCOPE] = cfg->num_ranks > 1 && sys_scope ? 1 : 0;
    return MJ_OK;
}

mj_status mj_mega_moe_image_spec(const mj_moe_config *cfg, mj_arch arch, mj_kernel_spec *out) {
    const mj_moe_format_row *row;
    mj_status st = mj_moe_config_check(cfg, &row);
    if (st != MJ_OK || (st = check_arch(arch)) != MJ_OK) return st;
    mj_kernel_spec_init(out, MJ_FAMILY_MEGA_MOE, arch);
    int32_t *p = out->params;
    out->num_params = MJ_MOE_NUM_PARAMS;
    p[MJ_MOE_PARAM_ROLE] = MJ_MOE_ROLE_IMAGE;
    p[MJ_MOE_PARAM_HIDDEN] = cfg->hidden;
    p[MJ_MOE_PARAM_INTERMEDIATE] = cfg->intermediate;
    p[MJ_MOE_PARAM_WEIGHT_FMT] = row->weight_fmt;
    /* Only the kind shapes the image: rows of one kind share the kernel. */
    p[MJ_MOE_PARAM_DISPATCH_FMT] = row->kind == MJ_MOE_KIND_FP8 ? MJ_FMT_MXFP8 : MJ_FMT_BF16;
    p[MJ_MOE_PARAM_STAGE_K] = mj_moe_stage_k(cfg->hidden, cfg->intermediate, row);
    return MJ_OK;
}

mj_status mj_mega_moe_block_m(const mj_moe_config *cfg, int num_tokens, int *block_m) {
    if (!block_m) return mj_fail(MJ_ERR_INVALID_ARG, "mj_mega_moe_block_m: block_m is NULL");
    const mj_moe_format_row *row;
    mj_status st = mj_moe_config_check(cfg, &row);
    if (st != MJ_OK) return st;
    if (num_tokens < 0 || num_tokens > cfg->max_tokens_per_rank)
        return mj_fail(MJ_ERR_INVALID_ARG, "num_tokens %d outside 0..%d (max_tokens_per_rank)",
                       num_tokens, cfg->max_tokens_per_rank);
    if (cfg->block_m) {
        *block_m = cfg->block_m;
        return MJ_OK;
    }
    int bm = mj_moe_block_m(num_tokens, cfg->num_ranks, cfg->num_experts, cfg->num_topk);
    int cap = mj_moe_max_block_m(row);
    *block_m = bm > cap ? cap : bm;
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
                               int *num_sms, unsigned *smem_bytes) {
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
        (st = mj_mega_moe_spec(&weights->cfg, *block_m, sms, buf->dist != NULL, rt->arch,
                               &spec)) != MJ_OK)
        return st;
    *smem_bytes = spec_smem_bytes(&spec);
    return mj_jit_get(rt, &spec, stream, k);
}

mj_status mj_mega_moe_warmup(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                             int num_tokens) {
    /* Only the shapes matter here: a stand-in output passes the y check. */
    static unsigned short no_output;
    mj_status st = check_launch(rt, buf, weights, &no_output, num_tokens);
    mj_kernel *k;
    int block_m, sms;
    unsigned smem;
    return st != MJ_OK ? st
                       : select_kernel(rt, buf, weights, num_tokens, NULL, &k, &block_m, &sms, &smem);
}

mj_status mj_mega_moe_prepare(mj_runtime *rt, mj_symm_buffer *buf, const mj_weights *weights,
                              void *y, int num_tokens, int32_t *recv_stats, mj_stream stream,
                              mj_kernel **k, mj_launch_config *lc, mj_moe_args *args) {
    if (!k || !lc || !args) return mj_fail(MJ_ERR_INVALID_ARG, "mj_mega_moe_prepare: NULL output");
    int block_m, sms;
    unsigned smem;
    mj_status st = check_launch(rt, buf, weights, y, num_tokens);
    if (st != MJ_OK ||
        (st = select_kernel(rt, buf, weights, num_tokens, stream, k, &block_m, &sms, &smem)) !=
            MJ_OK)
        return st;
    *lc = (mj_launch_config){{(unsigned)sms, 1, 1},
                             {MJ_MOE_THREADS, 1, 1},
                             smem,
                             0,
                             mj_runtime_family_pdl(rt, MJ_FAMILY_MEGA_MOE)};
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
    if ((st = mj_jit_launch(rt, k, &lc, stream, params)) != MJ_OK) return st;
    /* Emulated ranks wait for each other inside: one cannot be synchronized alone. */
    int alone = buf->rank >= 0 || buf->cfg.num_ranks == 1;
    return rt->check_device_inputs && alone
               ? mj_mega_moe_check_errors(rt, buf, weights->cfg.rank, stream)
               : MJ_OK;
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
    }
    return "unknown device error (detail %u)";
}

mj_status mj_mega_moe_check_errors(mj_runtime *rt, mj_symm_buffer *buf, int rank,
                                   mj_stream stream) {
    const mj_cuda *cu = rt->cu;
    CUresult r;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if ((r = cu->cuStreamIsCapturing((CUstream)stream, &cs)) != CUDA_SUCCESS ||
        cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return MJ_OK;
    if ((r = cu->cuStreamSynchronize((CUstream)stream)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "mj_mega_moe: the kernel failed");
    const mj_symm_config *c = &buf->cfg;
    mj_moe_layout l = mj_layout_moe(c->hidden, c->intermediate, c->num_experts, c->num_topk,
                                    c->num_ranks, c->max_tokens_per_rank, (int)c->dispatch_format);
    CUdeviceptr word =
        mj_symm_rank_base(buf, buf->rank >= 0 ? buf->rank : rank) + l.counters_offset +
        4ull * MJ_MOE_CNT_ERROR;
    uint32_t v = 0;
    if ((r = cu->cuMemcpyDtoH(&v, word, 4)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "mj_mega_moe: reading the device error word");
    if (v == 0) return MJ_OK;
    if ((r = cu->cuMemsetD8(word, 0, 4)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "mj_mega_moe: clearing the device error word");
    char what[160];
    snprintf(what, sizeof what, error_meaning(v >> 24), v & 0xffffffu);
    return mj_fail(MJ_ERR_CUDA, "mj_mega_moe (rank %d): %s; its outputs are not valid", rank,
                   what);
}
