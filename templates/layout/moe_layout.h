/*
 * MegaMoE regions of one rank, after the pre-dispatch input region (plain C for
 * gcc and NVRTC; see symm_layout.h for the input region and the peer struct).
 *
 *   moe workspace   barrier words, then per global expert the count and list
 *                   of this rank's (token, slot) pairs routed to it
 *   pool            [P][H] BF16: received tokens, dequantized exactly, grouped
 *                   by local expert (P = R * T_max * K: every pair fits, no wrap)
 *   pool_meta       [P] {source rank, token, slot, x_scale bits, weight bits}
 *   pool2           [P][I] BF16: GEMM 2 input, the activation quantized into the
 *                   L2 format and dequantized exactly
 *   combine         [K][T_max][H] BF16: GEMM 2 results sent home by the owners
 *
 * Everything here is zero after mj_symm_buffer_create and is left clean by
 * every launch (counters reset, barriers monotonic), so CUDA-graph replays need
 * no host reset.
 */
#ifndef MJ_MOE_LAYOUT_H
#define MJ_MOE_LAYOUT_H

#include "layout/symm_layout.h"

/* Workspace counters (u64 index). They only ever grow, so no launch or graph
 * replay has to reset them, and 64 bits never wrap in practice. */
#define MJ_MOE_WS_GRID_ARRIVE 0 /* arrivals of this rank's CTAs at grid barriers */
#define MJ_MOE_WS_XRANK 1       /* arrivals of all ranks at this rank's cross-rank barriers */
#define MJ_MOE_WS_XRANK_SEEN 2  /* cross-rank barriers this rank passed (its CTA 0 only) */
#define MJ_MOE_WS_WORDS 64      /* u32 words before list_count[E] and the lists */

#define MJ_MOE_META_WORDS 5 /* source rank, token, slot, x_scale bits, weight bits */

typedef struct mj_moe_layout {
    mj_u64 ws_offset;
    mj_u64 list_count_offset; /* u32 [E] */
    mj_u64 list_offset;       /* u32 [E][T_max * K]: token * K + slot */
    mj_u64 pool_offset;
    mj_u64 pool_meta_offset;
    mj_u64 pool2_offset;
    mj_u64 combine_offset;
    mj_u64 pool_rows; /* P */
    mj_u64 end;
} mj_moe_layout;

static inline mj_moe_layout mj_layout_moe(int hidden, int inter, int experts, int topk, int ranks,
                                          int max_tokens, int fmt) {
    mj_moe_layout l;
    mj_u64 list_cap = (mj_u64)max_tokens * (mj_u64)topk;
    l.pool_rows = (mj_u64)ranks * list_cap;
    l.ws_offset = mj_layout_input(hidden, topk, max_tokens, fmt).end;
    l.list_count_offset = l.ws_offset + MJ_MOE_WS_WORDS * 4ull;
    l.list_offset = mj_align_up(l.list_count_offset + (mj_u64)experts * 4ull, MJ_LAYOUT_ALIGN);
    l.pool_offset = mj_align_up(l.list_offset + (mj_u64)experts * list_cap * 4ull, MJ_LAYOUT_ALIGN);
    l.pool_meta_offset =
        mj_align_up(l.pool_offset + l.pool_rows * (mj_u64)hidden * 2ull, MJ_LAYOUT_ALIGN);
    l.pool2_offset =
        mj_align_up(l.pool_meta_offset + l.pool_rows * MJ_MOE_META_WORDS * 4ull, MJ_LAYOUT_ALIGN);
    l.combine_offset =
        mj_align_up(l.pool2_offset + l.pool_rows * (mj_u64)inter * 2ull, MJ_LAYOUT_ALIGN);
    l.end =
        mj_align_up(l.combine_offset + (mj_u64)topk * (mj_u64)max_tokens * (mj_u64)hidden * 2ull,
                    MJ_LAYOUT_ALIGN);
    return l;
}

/* Expert weights of one rank in the kernel's layout: per local expert the
 * checkpoint layout (row-major [out][in], FP4 packed with the even element in
 * the low nibble, scales [out][in / group]), experts back to back. */
typedef struct mj_moe_weight_layout {
    mj_u64 w1_expert_bytes; /* [2I][H * bits / 8]: gate rows, then up rows */
    mj_u64 w1_sf_expert_bytes;
    mj_u64 w2_expert_bytes; /* [H][I * bits / 8] */
    mj_u64 w2_sf_expert_bytes;
} mj_moe_weight_layout;

static inline mj_moe_weight_layout mj_layout_moe_weights(int hidden, int inter, int fmt) {
    mj_moe_weight_layout l;
    int bits = mj_format_bits(fmt), group = mj_format_group(fmt);
    l.w1_expert_bytes = 2ull * (mj_u64)inter * (mj_u64)hidden * (mj_u64)bits / 8ull;
    l.w1_sf_expert_bytes = group ? 2ull * (mj_u64)inter * (mj_u64)(hidden / group) : 0ull;
    l.w2_expert_bytes = (mj_u64)hidden * (mj_u64)inter * (mj_u64)bits / 8ull;
    l.w2_sf_expert_bytes = group ? (mj_u64)hidden * (mj_u64)(inter / group) : 0ull;
    return l;
}

/* Launch shape: one warpgroup per CTA, one persistent CTA per SM of the rank. */
#define MJ_MOE_THREADS 128
#define MJ_MOE_BLOCK_N 64 /* weight rows per tile: the wgmma M of one warpgroup */
#define MJ_MOE_BLOCK_K 64 /* reduction elements staged in shared memory per step */
#define MJ_MOE_MAX_BLOCK_M 64

/* Dynamic shared memory: the token tile (BF16, [block_m][BLOCK_K]) and the fp32
 * activation tile of the GEMM 1 epilogue ([BLOCK_N][block_m]). */
static inline mj_u32 mj_moe_smem_bytes(int block_m) {
    return (mj_u32)(block_m * MJ_MOE_BLOCK_K * 2 + MJ_MOE_BLOCK_N * block_m * 4);
}

/* Bytes of one rank's region when it also holds the MegaMoE regions. */
static inline mj_u64 mj_layout_moe_rank_bytes(int hidden, int inter, int experts, int topk,
                                              int ranks, int max_tokens, int fmt) {
    return mj_align_up(mj_layout_moe(hidden, inter, experts, topk, ranks, max_tokens, fmt).end,
                       MJ_RANK_ALIGN);
}

/* Runtime arguments of the mega_moe kernel, passed by value (__grid_constant__). */
typedef struct mj_moe_args {
    mj_peers peers;             /* region bases: own + per-rank offsets */
    const unsigned char *w1;    /* this rank's local experts, mj_moe_weight_layout */
    const unsigned char *w1_sf; /* NULL for BF16 weights */
    const unsigned char *w2;
    const unsigned char *w2_sf;
    const float *l1_alpha_gate; /* [E_local] device arrays, default 1 */
    const float *l1_alpha_up;
    const float *l2_alpha;
    const float *l2_act_scale;
    unsigned short *y; /* [num_tokens][H] BF16 */
    int *recv_stats;   /* [E_local], added to; may be NULL */
    int num_tokens;
} mj_moe_args;

#endif /* MJ_MOE_LAYOUT_H */
