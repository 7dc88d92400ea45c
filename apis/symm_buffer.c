/* Symmetric buffers: one allocation holding every emulated rank's region, or
 * (symm_buffer_nccl.c) one process per rank with the peers mapped. */
#include <stdlib.h>

#include "apis/symm_buffer_impl.h"
#include "runtime/configs.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/runtime.h"
#include "runtime/struct_size.h"
#include "templates/layout/moe_layout.h"

size_t mj_symm_rank_bytes(const mj_symm_config *c) {
    int fmt = (int)c->dispatch_format;
    if (c->intermediate > 0)
        return mj_layout_moe_rank_bytes(c->hidden, c->intermediate, c->num_experts, c->num_topk,
                                        c->num_ranks, c->max_tokens_per_rank, fmt,
                                        (int)c->shared_intermediate);
    return mj_layout_rank_bytes(c->hidden, c->num_topk, c->max_tokens_per_rank, fmt);
}

mj_symm_buffer *mj_symm_buffer_new(mj_runtime *rt, const mj_symm_config *cfg, int rank) {
    mj_symm_buffer *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->rt = rt;
    b->cfg = *cfg;
    b->rank = rank;
    b->shares_device = rank < 0 && cfg->num_ranks > 1;
    b->num_sms = mj_runtime_family_sms(rt, MJ_FAMILY_MEGA_MOE);
    b->layout = mj_layout_input(cfg->hidden, cfg->num_topk, cfg->max_tokens_per_rank,
                                (int)cfg->dispatch_format);
    return b;
}

mj_status mj_symm_buffer_create(mj_runtime *rt, const mj_symm_config *config,
                                mj_symm_buffer **out) {
    mj_clear_error();
    if (!rt || !out) return mj_fail(MJ_ERR_INVALID_ARG, "mj_symm_buffer_create: NULL argument");
    *out = NULL;
    mj_symm_config accepted;
    const mj_symm_config *cfg = &accepted;
    mj_status st = mj_symm_config_accept(config, &accepted);
    if (st != MJ_OK) return st;
    if ((st = mj_runtime_bind(rt)) != MJ_OK) return st;
    mj_symm_buffer *b = mj_symm_buffer_new(rt, cfg, -1);
    if (!b) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    b->rank_bytes = mj_symm_rank_bytes(cfg);
    size_t total = b->rank_bytes * (size_t)cfg->num_ranks;
    st = mj_device_alloc(rt, total, "allocating the symmetric buffer", &b->base);
    if (st == MJ_OK)
        st = mj_device_zero_private(rt, b->base, total, "zeroing the symmetric buffer");
    if (st != MJ_OK) {
        mj_device_free(rt, b->base);
        free(b);
        return st;
    }
    *out = b;
    return MJ_OK;
}

void mj_symm_buffer_destroy(mj_symm_buffer *b) {
    if (!b) return;
    mj_error_snapshot caller_error;
    mj_error_save(&caller_error);
    if (b->dist)
        mj_symm_dist_destroy(b);
    else if (mj_runtime_bind(b->rt) == MJ_OK)
        mj_device_free(b->rt, b->base);
    free(b);
    mj_error_restore(&caller_error);
}

mj_status mj_symm_buffer_info(const mj_symm_buffer *b, mj_symm_config *cfg, int *num_sms,
                              size_t *bytes_per_rank) {
    mj_clear_error();
    if (!b) return mj_fail(MJ_ERR_INVALID_ARG, "mj_symm_buffer_info: buffer is NULL");
    if (cfg) {
        mj_status st = mj_symm_config_give(&b->cfg, cfg);
        if (st != MJ_OK) return st;
    }
    if (num_sms) *num_sms = b->num_sms;
    if (bytes_per_rank) *bytes_per_rank = b->rank_bytes;
    return MJ_OK;
}

mj_status mj_symm_buffer_view(const mj_symm_buffer *b, int rank, mj_view_id id, mj_view *out) {
    mj_clear_error();
    if (!b || !out) return mj_fail(MJ_ERR_INVALID_ARG, "mj_symm_buffer_view: NULL argument");
    if (rank < 0 || rank >= b->cfg.num_ranks)
        return mj_fail(MJ_ERR_INVALID_ARG, "rank %d outside 0..%d", rank, b->cfg.num_ranks - 1);
    const mj_input_layout *l = &b->layout;
    const mj_symm_config *c = &b->cfg;
    int64_t p = c->max_tokens_per_rank, k = c->num_topk;
    mj_view v = {0};
    mj_u64 offset = 0;
    switch (id) {
    case MJ_VIEW_X:
        offset = l->x_offset;
        v = (mj_view){
            .dtype = c->dispatch_format == MJ_FORMAT_BF16    ? MJ_DTYPE_BF16
                     : c->dispatch_format == MJ_FORMAT_MXFP8 ? MJ_DTYPE_E4M3
                                                             : MJ_DTYPE_U8,
            .ndim = 2,
            .shape = {p, (int64_t)l->x_row_bytes / (c->dispatch_format == MJ_FORMAT_BF16 ? 2 : 1)},
            .row_stride_bytes = (int64_t)l->x_row_bytes};
        break;
    case MJ_VIEW_X_SF:
        if (!l->sf_row_bytes)
            return mj_fail(MJ_ERR_NOT_FOUND, "the bf16 dispatch format has no scales");
        offset = l->sf_offset;
        v = (mj_view){.dtype = MJ_DTYPE_U8,
                      .ndim = 2,
                      .shape = {p, (int64_t)l->sf_row_bytes},
                      .row_stride_bytes = (int64_t)l->sf_row_bytes};
        break;
    case MJ_VIEW_TOPK_IDX:
    case MJ_VIEW_TOPK_WEIGHTS:
        offset = id == MJ_VIEW_TOPK_IDX ? l->topk_idx_offset : l->topk_w_offset;
        v = (mj_view){.dtype = id == MJ_VIEW_TOPK_IDX ? MJ_DTYPE_I32 : MJ_DTYPE_F32,
                      .ndim = 2,
                      .shape = {p, k},
                      .row_stride_bytes = k * 4};
        break;
    case MJ_VIEW_X_SCALES:
        if (c->dispatch_format != MJ_FORMAT_NVFP4)
            return mj_fail(MJ_ERR_NOT_FOUND, "only the nvfp4 dispatch format has per-token scales");
        offset = l->x_scales_offset;
        v = (mj_view){.dtype = MJ_DTYPE_F32, .ndim = 1, .shape = {p, 0}, .row_stride_bytes = 4};
        break;
    default:
        return mj_fail(MJ_ERR_INVALID_ARG, "unknown view %d", (int)id);
    }
    v.nbytes = (size_t)(v.row_stride_bytes * p);
    v.ptr = (void *)(uintptr_t)(mj_symm_rank_base(b, rank) + offset);
    *out = v;
    return MJ_OK;
}
