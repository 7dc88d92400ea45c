/*
 * Symmetric buffer layout, shared by host C (gcc) and kernels (NVRTC).
 * Plain C, no system headers under NVRTC. One rank's region:
 *
 *   workspace   MJ_WORKSPACE_BYTES: flags the kernels read and write
 *   x           [P, H * bits / 8]      tokens in the dispatch format
 *   x_sf        [P, H / group] bytes   block scales (none for BF16)
 *   topk_idx    [P, K] int32           -1 = masked
 *   topk_w      [P, K] fp32
 *   x_scales    [P] fp32               NVFP4 per-token scale (none otherwise)
 *
 * Rows are packed. An x row is whole 16-byte chunks for every hidden the
 * limits allow (a multiple of 64), as the kernels' 16-byte loads and stores
 * need. A scale row may not be (hidden 2880: 90 MX bytes, 180 NVFP4 bytes)
 * and need not be: kernels read and write scales by the byte (NVFP4
 * pre-dispatch by the aligned byte pair), and the MegaMoE bulk copies read
 * only the kernel's own tile images (moe_layout.h), never this region.
 * Every region starts on MJ_LAYOUT_ALIGN bytes; the rank stride is a multiple
 * of MJ_RANK_ALIGN so emulated ranks and VMM-mapped peers share one formula:
 * peer r's copy of a field = own address + offsets[r].
 */
#ifndef MJ_SYMM_LAYOUT_H
#define MJ_SYMM_LAYOUT_H

#include "layout/codes.h"

#ifdef __CUDACC_RTC__
typedef unsigned long long mj_u64;
typedef long long mj_i64;
typedef unsigned int mj_u32;
#else
#include <stdint.h>
typedef uint64_t mj_u64;
typedef int64_t mj_i64;
typedef uint32_t mj_u32;
#endif

/* Layout functions: static inline in C, constexpr in the kernels' C++, so a
 * kernel takes its compile-time geometry from these same functions. */
#ifdef __cplusplus
#define MJ_LAYOUT_FN constexpr inline
#else
#define MJ_LAYOUT_FN static inline
#endif

#define MJ_LAYOUT_ALIGN 256ull
#define MJ_RANK_ALIGN (2ull << 20)
#define MJ_MAX_RANKS 72
#define MJ_WORKSPACE_BYTES 4096ull

/* Workspace words (u32 index), MJ_WORKSPACE_BYTES / 4 of them: check CTA b of
 * the pre-dispatch check kernel stores the number of invalid top-k ids it saw
 * in word MJ_WS_PD_CHECK_SLOTS + b. Every launch rewrites the slots its check
 * grid covers and reads only those, so nothing needs resetting between
 * launches or CUDA-graph replays, and no CTA waits on another's atomic. */
#define MJ_WS_PD_CHECK_SLOTS 0
#define MJ_WS_PD_CHECK_SLOT_COUNT ((int)(MJ_WORKSPACE_BYTES / 4ull))

MJ_LAYOUT_FN int mj_format_bits(int fmt) {
    return fmt == MJ_FMT_BF16 ? 16 : fmt == MJ_FMT_MXFP8 ? 8 : 4;
}
/* K elements per block scale; 0 = unscaled. */
MJ_LAYOUT_FN int mj_format_group(int fmt) {
    return fmt == MJ_FMT_BF16 ? 0 : fmt == MJ_FMT_NVFP4 ? 16 : 32;
}

MJ_LAYOUT_FN mj_u64 mj_align_up(mj_u64 v, mj_u64 a) {
    return (v + a - 1) / a * a;
}

typedef struct mj_input_layout {
    mj_u64 x_offset;
    mj_u64 x_row_bytes;
    mj_u64 sf_offset;
    mj_u64 sf_row_bytes; /* 0 for BF16 */
    mj_u64 topk_idx_offset;
    mj_u64 topk_w_offset;
    mj_u64 x_scales_offset; /* valid for NVFP4 only */
    mj_u64 end;             /* bytes used by the input region */
} mj_input_layout;

MJ_LAYOUT_FN mj_input_layout mj_layout_input(int hidden, int topk, int max_tokens, int fmt) {
    mj_input_layout l;
    mj_u64 p = (mj_u64)max_tokens;
    int group = mj_format_group(fmt);
    l.x_offset = MJ_WORKSPACE_BYTES;
    l.x_row_bytes = (mj_u64)hidden * (mj_u64)mj_format_bits(fmt) / 8ull;
    l.sf_offset = mj_align_up(l.x_offset + p * l.x_row_bytes, MJ_LAYOUT_ALIGN);
    l.sf_row_bytes = group ? (mj_u64)(hidden / group) : 0ull;
    l.topk_idx_offset = mj_align_up(l.sf_offset + p * l.sf_row_bytes, MJ_LAYOUT_ALIGN);
    l.topk_w_offset = mj_align_up(l.topk_idx_offset + p * (mj_u64)topk * 4ull, MJ_LAYOUT_ALIGN);
    l.x_scales_offset = mj_align_up(l.topk_w_offset + p * (mj_u64)topk * 4ull, MJ_LAYOUT_ALIGN);
    l.end =
        mj_align_up(l.x_scales_offset + (fmt == MJ_FMT_NVFP4 ? p * 4ull : 0ull), MJ_LAYOUT_ALIGN);
    return l;
}

/* Bytes of one rank's region (the stride between emulated ranks). */
MJ_LAYOUT_FN mj_u64 mj_layout_rank_bytes(int hidden, int topk, int max_tokens, int fmt) {
    return mj_align_up(mj_layout_input(hidden, topk, max_tokens, fmt).end, MJ_RANK_ALIGN);
}

/* Peers as kernels receive them (by value): own region base + per-rank offsets. */
typedef struct mj_peers {
    mj_u64 base;                  /* this rank's region */
    mj_i64 offsets[MJ_MAX_RANKS]; /* peer r's region = base + offsets[r] */
    mj_u32 rank;
    mj_u32 num_ranks;
} mj_peers;

#endif /* MJ_SYMM_LAYOUT_H */
