/*
 * MegaMoE regions of one rank, after the pre-dispatch input region, and the
 * geometry of the kernel's tile images (plain C for gcc and NVRTC; see
 * symm_layout.h for the input region and the peer struct).
 *
 *   counters    the kernel's words: monotonic ones (epoch, CTA finishes,
 *               cross-rank flags, the error word) and two banks of per-launch
 *               counters; launch g uses bank g & 1 and zeroes the other
 *   pool        GEMM 1 token tiles, each stage of a tile one contiguous image
 *               of the shared-memory B operand (see mj_moe_token_stage_bytes)
 *   pool_meta   per pool row {source rank, token, slot, x_scale bits, weight bits}
 *   pool2       GEMM 2 token tiles (the activation in the GEMM 2 input format),
 *               then those of the shared expert (wider: its intermediate size)
 *   combine     [K][T_max][H] BF16: GEMM 2 results sent home by the owners,
 *               then [T_max][H] of the shared expert (slot K) when fused
 *
 * A fused shared expert is one more routing entry after the local experts
 * (entry E_local) whose rows are this rank's own tokens: its GEMM 1 tiles
 * come after every local expert's in the pool, its rows' counters after
 * theirs (templates/mega_moe/scheduler.cuh).
 *
 * Everything is zero after mj_symm_buffer_create; every launch leaves the
 * bank the next launch uses zeroed, so CUDA-graph replays need no host reset.
 */
#ifndef MJ_MOE_LAYOUT_H
#define MJ_MOE_LAYOUT_H

#include "layout/symm_layout.h"

/* The kernel: one producer warpgroup and two math warpgroups per CTA, one CTA
 * per SM. Each math warpgroup owns two 64-row weight blocks of a task. */
#define MJ_MOE_THREADS 384
#define MJ_MOE_BLOCK_ROWS 64
#define MJ_MOE_TASK_BLOCKS 4
#define MJ_MOE_MAX_BLOCK_M 160
#define MJ_MOE_META_WORDS 5 /* source rank, token, slot, x_scale bits, weight bits */

/* Every format row runs BF16 wgmma (k16): weights are decoded to BF16 in
 * registers and tokens are BF16 in the pools (the pull and the GEMM 1
 * epilogue dequantize MXFP8 and NVFP4 rows exactly). The E4M3 wgmma path that
 * MXFP4 weights with MXFP8 tokens once took promoted every K32 product into
 * fp32 and held two products beside each accumulator, so its tiles stopped at
 * 64 tokens: 1.5x slower at T = 4096 on DeepSeek-V3, 6% faster at 1024
 * (bench/RESULTS.md, twenty-fifth session). Bytes of a token element: */
#define MJ_MOE_TOKEN_BYTES 2

/* ------------------------------------------------------------ counters */

/* Monotonic u32 words (index into the counter region). */
#define MJ_MOE_CNT_EPOCH 0 /* launches finished on this rank */
#define MJ_MOE_CNT_DONE 1  /* CTAs of the running launch finished (the last resets it) */
#define MJ_MOE_CNT_NTOK 2  /* this launch's num_tokens, published to the peers */
#define MJ_MOE_CNT_END 3   /* end-of-launch arrivals of all ranks */
#define MJ_MOE_CNT_ERROR 4 /* first device-side error (mj_moe_error_code), 0 = none */
#define MJ_MOE_CNT_START 8 /* [R]: epoch + 1 once rank r's inputs are ready */
#define MJ_MOE_CNT_FIXED (MJ_MOE_CNT_START + MJ_MAX_RANKS)

/* Device-side error word: code in the high byte, a rank or index below. */
#define MJ_MOE_ERR_PEER_START 1u /* a peer never published its inputs (low bits: rank) */
#define MJ_MOE_ERR_POOL 2u       /* dispatched rows of a local expert never all arrived */
#define MJ_MOE_ERR_L1 3u         /* GEMM 1 tiles of a token tile never all finished */
#define MJ_MOE_ERR_COMBINE 4u    /* a token's GEMM 2 results never all arrived (low: token) */
#define MJ_MOE_ERR_PEER_END 5u   /* a peer never finished the launch (low bits: rank) */
#define MJ_MOE_ERR_PIPE 6u       /* an in-CTA pipeline wait expired (a kernel bug) */
#define MJ_MOE_ERR_OVERFLOW 7u   /* more rows than the pool holds (a kernel bug) */
#define MJ_MOE_ERR_SMEM_ALIGN 8u /* dynamic shared memory not 1024-aligned (low: its address) */

/* One bank of per-launch counters (u32 words). */
typedef struct mj_moe_bank {
    mj_u32 task_claim;    /* next task to claim */
    mj_u32 combine_claim; /* next combine item to claim */
    mj_u32 fill;          /* [E_local] rows placed in each expert's tiles */
    mj_u32 ready;         /* [E_local] rows written (release) */
    mj_u32 l1_done;       /* [tiles] GEMM 1 warpgroup units finished per token tile */
    mj_u32 arrive;        /* [T_max] GEMM 2 warpgroup units that reached each home token */
    mj_u32 words;         /* bank size */
} mj_moe_bank;

/* ---------------------------------------------------------- weight images */

/* How many K elements one pipeline stage covers: the largest multiple of 64
 * dividing both GEMMs' K (hidden and intermediate) whose four-block weight
 * data and whose largest token tile stage (max_block_m rows of BF16)
 * each stay within max_part_bytes, and whose whole stage (weights with their
 * scales and that tile) within max_stage_bytes. 0 when no multiple of 64
 * divides both. */
MJ_LAYOUT_FN int mj_moe_stage_k_of(int hidden, int inter, int weight_fmt, int max_block_m,
                                   int max_part_bytes, int max_stage_bytes) {
    int bits = mj_format_bits(weight_fmt), group = mj_format_group(weight_fmt), best = 0;
    for (int k = 64; k <= hidden && k <= inter; k += 64) {
        const int weights = MJ_MOE_TASK_BLOCKS * MJ_MOE_BLOCK_ROWS * k * bits / 8;
        const int scales = group ? MJ_MOE_TASK_BLOCKS * MJ_MOE_BLOCK_ROWS * k / group : 0;
        const int tile = max_block_m * k * MJ_MOE_TOKEN_BYTES;
        if (hidden % k == 0 && inter % k == 0 && weights <= max_part_bytes &&
            tile <= max_part_bytes && weights + scales + tile <= max_stage_bytes)
            best = k;
    }
    return best;
}

/* One GEMM's weights of one expert as the kernel streams them. Rows are cut
 * into 64-row blocks (GEMM 1: block 2u = gate rows 64u.., block 2u + 1 = up
 * rows 64u..; GEMM 2: block b = down rows 64b..), task_blocks blocks make a
 * task (four, MJ_MOE_TASK_BLOCKS; two for a shared expert in another format,
 * so that its stage fits the routed experts' ring slot:
 * mj_moe_shared_geometry_of) and K is cut into stages. One stage of one task is one contiguous
 * image: [block data] x nblk then [block scales] x nblk, tasks back to back,
 * so a stage is one bulk copy and no byte is padding. */
typedef struct mj_moe_wimage {
    int rows, k, stage_k, task_blocks;
    int blocks, tasks, stages;
    mj_u32 blk_data;   /* bytes of one block's stage data */
    mj_u32 blk_sf;     /* bytes of one block's stage scales (0 for BF16) */
    mj_u64 task_bytes; /* a full task (4 blocks), all stages */
    mj_u64 bytes;      /* the whole expert GEMM */
} mj_moe_wimage;

MJ_LAYOUT_FN mj_moe_wimage mj_moe_wimage_of(int rows, int k, int stage_k, int weight_fmt,
                                            int task_blocks) {
    mj_moe_wimage w;
    int group = mj_format_group(weight_fmt);
    w.rows = rows;
    w.k = k;
    w.stage_k = stage_k;
    w.task_blocks = task_blocks;
    w.blocks = rows / MJ_MOE_BLOCK_ROWS;
    w.tasks = (w.blocks + task_blocks - 1) / task_blocks;
    w.stages = k / stage_k;
    w.blk_data = (mj_u32)(MJ_MOE_BLOCK_ROWS * stage_k * mj_format_bits(weight_fmt) / 8);
    w.blk_sf = group ? (mj_u32)(MJ_MOE_BLOCK_ROWS * stage_k / group) : 0u;
    w.task_bytes = (mj_u64)w.stages * (mj_u64)task_blocks * (w.blk_data + w.blk_sf);
    w.bytes = (mj_u64)w.stages * (mj_u64)w.blocks * (w.blk_data + w.blk_sf);
    return w;
}

/* Blocks of task t (task_blocks, fewer for the last one). */
MJ_LAYOUT_FN int mj_moe_task_blocks(const mj_moe_wimage *w, int t) {
    int left = w->blocks - t * w->task_blocks;
    return left < w->task_blocks ? left : w->task_blocks;
}

/* Byte offset of stage s of task t in the expert's image. */
MJ_LAYOUT_FN mj_u64 mj_moe_wimage_stage(const mj_moe_wimage *w, int t, int s) {
    return (mj_u64)t * w->task_bytes +
           (mj_u64)s * (mj_u64)mj_moe_task_blocks(w, t) * (w->blk_data + w->blk_sf);
}

/* Whether an image in weight_fmt carries row scales: every block-scaled
 * format (E2M1 and E4M3 weights, whose scales are rebased per row). */
MJ_LAYOUT_FN int mj_moe_has_row_scales(int weight_fmt) {
    return mj_format_group(weight_fmt) != 0;
}

/* Both GEMMs of one expert: W1 image, then W2, then where
 * mj_moe_has_row_scales says so one fp32 per weight row (W1's 2I, then W2's
 * H): the power of two the row's block scales were divided by when the image
 * was written (1 where they were not), which the GEMM epilogue multiplies
 * back into the row's accumulator. */
typedef struct mj_moe_weight_layout {
    mj_moe_wimage w1, w2;
    mj_u64 row_scale_offset; /* fp32 [2I + H]; 0 bytes for formats without them */
    mj_u64 expert_bytes;
} mj_moe_weight_layout;

MJ_LAYOUT_FN mj_moe_weight_layout mj_layout_moe_weights(int hidden, int inter, int stage_k,
                                                        int weight_fmt, int task_blocks) {
    mj_moe_weight_layout l;
    l.w1 = mj_moe_wimage_of(2 * inter, hidden, stage_k, weight_fmt, task_blocks);
    l.w2 = mj_moe_wimage_of(hidden, inter, stage_k, weight_fmt, task_blocks);
    l.row_scale_offset = mj_align_up(l.w1.bytes + l.w2.bytes, 16);
    const mj_u64 rows =
        mj_moe_has_row_scales(weight_fmt) ? (mj_u64)(2 * inter + hidden) * 4ull : 0ull;
    l.expert_bytes = mj_align_up(l.row_scale_offset + rows, MJ_LAYOUT_ALIGN);
    return l;
}

/* How a fused shared expert in another format than the routed experts'
 * streams through ring slots sized for a routed task's stage (four blocks of
 * stage_k in weight_fmt): in tasks of two blocks (one GEMM 1 unit of gate and
 * up), at the routed stage K where such a stage fits the slot, else at half
 * of it (BF16 beside NVFP4), each routed token stage then
 * read in two halves of whole 64-element swizzle pieces. task_blocks 0: no
 * such stage fits. In the routed format: the routed tasks' geometry. */
typedef struct mj_moe_shared_geometry {
    int task_blocks, stage_k;
} mj_moe_shared_geometry;

MJ_LAYOUT_FN mj_moe_shared_geometry mj_moe_shared_geometry_of(int weight_fmt, int shared_fmt,
                                                              int stage_k) {
    mj_moe_shared_geometry g = {MJ_MOE_TASK_BLOCKS, stage_k};
    if (shared_fmt == weight_fmt) return g;
    const mj_moe_wimage routed =
        mj_moe_wimage_of(MJ_MOE_BLOCK_ROWS, stage_k, stage_k, weight_fmt, MJ_MOE_TASK_BLOCKS);
    const mj_u32 slot = MJ_MOE_TASK_BLOCKS * (routed.blk_data + routed.blk_sf);
    for (int split = 1; split <= 2; split++) {
        const int k = stage_k / split;
        if (stage_k % split != 0 || k % 64 != 0) continue;
        const mj_moe_wimage s = mj_moe_wimage_of(MJ_MOE_BLOCK_ROWS, k, k, shared_fmt, 2);
        if (2 * (s.blk_data + s.blk_sf) <= slot) {
            g.task_blocks = 2;
            g.stage_k = k;
            return g;
        }
    }
    g.task_blocks = 0;
    g.stage_k = 0;
    return g;
}

/* Byte offset of stage s of task t of W1 (down = 0) or W2 in an expert's image. */
MJ_LAYOUT_FN mj_u64 mj_moe_expert_stage(const mj_moe_weight_layout *l, int down, int t, int s) {
    // No pointer chosen at run time: a kernel would keep *l in local memory.
    return down ? l->w1.bytes + mj_moe_wimage_stage(&l->w2, t, s)
                : mj_moe_wimage_stage(&l->w1, t, s);
}

/* ------------------------------------------------------------ token tiles */

/* One stage of a token tile: block_m rows x stage_k BF16 elements as
 * wgmma's swizzled K-major B operand. The elements of a row come in K blocks
 * of mj_moe_token_row_bytes (128 bytes; 64 where a stage's row is no
 * multiple of 128), each K block all rows of it (one row after the other),
 * so a token's bytes of one K block are one contiguous 128- or 64-byte
 * piece: the pull and the GEMM 1 epilogue write whole lines. Inside a piece,
 * 16-byte chunk c sits at c ^ (row % 8) (128-byte rows) or c ^ (row / 2 % 4)
 * (64-byte rows): the 128B and 64B swizzles of wgmma, whose atoms (8 rows)
 * are 1024 / 512 bytes and must be that aligned in shared memory. */
MJ_LAYOUT_FN mj_u32 mj_moe_token_stage_bytes(int block_m, int stage_k) {
    return (mj_u32)(block_m * stage_k * MJ_MOE_TOKEN_BYTES);
}
MJ_LAYOUT_FN int mj_moe_token_row_bytes(int stage_k) {
    return stage_k * MJ_MOE_TOKEN_BYTES % 128 == 0 ? 128 : 64;
}

/* Byte offset of element (row n, element k) inside one stage image. */
MJ_LAYOUT_FN mj_u32 mj_moe_token_offset(int block_m, int stage_k, int n, int k) {
    const int rb = mj_moe_token_row_bytes(stage_k), kb = k * MJ_MOE_TOKEN_BYTES;
    const int within = kb % rb, swz = rb == 128 ? (n & 7) : ((n >> 1) & 3);
    return (mj_u32)((kb / rb) * block_m * rb + n * rb + (((within >> 4) ^ swz) << 4) +
                    (within & 15));
}

/* Dynamic shared memory of the kernel (templates/mega_moe/config.cuh checks
 * its map against mj_moe_smem_bytes): the stage ring (mj_moe_ring_bytes),
 * the epilogue scratch of both math warpgroups (block_m x 288 bytes each:
 * 272 of staged results, 16 of the task's per-token inputs),
 * the routing tables (rows and tile prefix per local expert, tokens and pair
 * prefix per rank), the mbarriers of the stage ring and the task mailbox, and
 * MJ_MOE_SMEM_TAIL_BYTES of small parts. */
/* The sink mbarrier, the release rings (templates/mega_moe/release.cuh: 2 x 4
 * slots, a full and an empty mbarrier and a task each) and the mailbox (2
 * tasks); a task is 28 bytes (templates/mega_moe/scheduler.cuh). */
#define MJ_MOE_SMEM_TAIL_BYTES (8u + 8u * (16u + 28u) + 2u * 28u)
/* The stage ring holds two arrays of kStages entries, at the start of
 * shared memory (1024-aligned): the token tiles (mj_moe_token_stage_bytes a
 * stage: whole swizzle atoms, so every stage's atoms stay on their 1024 /
 * 512 bytes), then the weights. A stage
 * that padded its token part to 1024 bytes cost E2M1 decode kernels of
 * 8-token tiles a stage (bench/RESULTS.md, ninth session). */
MJ_LAYOUT_FN mj_u32 mj_moe_ring_bytes(mj_u32 wstage, mj_u32 bstage, mj_u32 stages) {
    return stages * (wstage + bstage);
}
/* routes: the routing tables' entries, the local experts and a fused shared
 * expert. Words: rows [routes], tiles [routes + 1], tokens per rank [ranks],
 * pair prefix [ranks + 1], the launch's epoch, one spare. */
#define MJ_MOE_ROUTING_BYTES(routes, ranks) ((2u * (routes) + 2u * (ranks) + 4u) * 4u)
#define MJ_MOE_SMEM_BYTES(wstage, bstage, stages, block_m, routes, ranks)                          \
    (mj_moe_ring_bytes(wstage, bstage, stages) + 2u * (block_m)*288u +                             \
     MJ_MOE_ROUTING_BYTES(routes, ranks) + (2u * (stages) + 4u) * 8u + MJ_MOE_SMEM_TAIL_BYTES)

/* The same for a kernel configuration: the heuristic that picks the stages and
 * the launch that asks for the memory call this one. */
MJ_LAYOUT_FN mj_u32 mj_moe_smem_bytes(int hidden, int inter, int weight_fmt, int stage_k,
                                      int block_m, int stages, int routes, int ranks) {
    const mj_moe_wimage w =
        mj_moe_wimage_of(2 * inter, hidden, stage_k, weight_fmt, MJ_MOE_TASK_BLOCKS);
    return MJ_MOE_SMEM_BYTES(MJ_MOE_TASK_BLOCKS * (w.blk_data + w.blk_sf),
                             mj_moe_token_stage_bytes(block_m, stage_k), (mj_u32)stages,
                             (mj_u32)block_m, (mj_u32)routes, (mj_u32)ranks);
}

/* Rows of the routed experts' tiles: every (token, slot) pair of every rank,
 * plus a partly filled last tile per local expert at the largest tile size. */
MJ_LAYOUT_FN mj_u64 mj_moe_routed_rows(int experts, int topk, int ranks, int max_tokens) {
    return (mj_u64)ranks * (mj_u64)max_tokens * (mj_u64)topk +
           (mj_u64)(experts / ranks) * MJ_MOE_MAX_BLOCK_M;
}

/* Rows of a fused shared expert's tiles (shared: 1, else 0): every own
 * token, plus a partly filled last tile. */
MJ_LAYOUT_FN mj_u64 mj_moe_shared_rows(int shared, int max_tokens) {
    return shared ? (mj_u64)max_tokens + MJ_MOE_MAX_BLOCK_M : 0ull;
}

/* Rows the GEMM 1 pool holds: both. */
MJ_LAYOUT_FN mj_u64 mj_moe_pool_rows(int experts, int topk, int ranks, int max_tokens, int shared) {
    return mj_moe_routed_rows(experts, topk, ranks, max_tokens) +
           mj_moe_shared_rows(shared, max_tokens);
}

/* Token tiles the pools hold at tile size block_m. */
MJ_LAYOUT_FN mj_u64 mj_moe_pool_tiles(int experts, int topk, int ranks, int max_tokens, int shared,
                                      int block_m) {
    return mj_moe_pool_rows(experts, topk, ranks, max_tokens, shared) / (mj_u64)block_m;
}

MJ_LAYOUT_FN mj_moe_bank mj_moe_bank_of(int experts, int topk, int ranks, int max_tokens,
                                        int shared) {
    mj_moe_bank b;
    mj_u32 routes = (mj_u32)(experts / ranks + (shared ? 1 : 0));
    b.task_claim = 0;
    b.combine_claim = 1;
    b.fill = 2;
    b.ready = b.fill + routes;
    b.l1_done = b.ready + routes;
    b.arrive = b.l1_done + (mj_u32)mj_moe_pool_tiles(experts, topk, ranks, max_tokens, shared, 8);
    b.words = (mj_u32)mj_align_up(b.arrive + (mj_u64)max_tokens, 64);
    return b;
}

typedef struct mj_moe_layout {
    mj_u64 counters_offset; /* u32 [MJ_MOE_CNT_FIXED], then bank 0, bank 1 */
    mj_u64 pool_offset;
    mj_u64 pool_meta_offset;
    mj_u64 pool2_offset;
    mj_u64 pool2_shared_offset; /* the shared expert's GEMM 2 tiles (= combine_offset: none) */
    mj_u64 combine_offset;
    mj_u64 pool_rows;
    mj_moe_bank bank;
    mj_u64 end;
} mj_moe_layout;

/* shared_inter: the fused shared expert's intermediate size, 0 for none. */
MJ_LAYOUT_FN mj_moe_layout mj_layout_moe(int hidden, int inter, int experts, int topk, int ranks,
                                         int max_tokens, int fmt, int shared_inter) {
    mj_moe_layout l;
    const int shared = shared_inter > 0;
    l.pool_rows = mj_moe_pool_rows(experts, topk, ranks, max_tokens, shared);
    l.bank = mj_moe_bank_of(experts, topk, ranks, max_tokens, shared);
    l.counters_offset = mj_layout_input(hidden, topk, max_tokens, fmt).end;
    mj_u64 counter_bytes = (MJ_MOE_CNT_FIXED + 2ull * l.bank.words) * 4ull;
    /* FP8 tiles carry 4 bytes of scale per 32 elements: within the BF16 size. */
    l.pool_offset = mj_align_up(l.counters_offset + counter_bytes, MJ_LAYOUT_ALIGN);
    l.pool_meta_offset =
        mj_align_up(l.pool_offset + l.pool_rows * (mj_u64)hidden * 2ull, MJ_LAYOUT_ALIGN);
    l.pool2_offset =
        mj_align_up(l.pool_meta_offset + l.pool_rows * MJ_MOE_META_WORDS * 4ull, MJ_LAYOUT_ALIGN);
    l.pool2_shared_offset =
        mj_align_up(l.pool2_offset +
                        mj_moe_routed_rows(experts, topk, ranks, max_tokens) * (mj_u64)inter * 2ull,
                    MJ_LAYOUT_ALIGN);
    l.combine_offset = mj_align_up(l.pool2_shared_offset + mj_moe_shared_rows(shared, max_tokens) *
                                                               (mj_u64)shared_inter * 2ull,
                                   MJ_LAYOUT_ALIGN);
    l.end = mj_align_up(l.combine_offset +
                            (mj_u64)(topk + shared) * (mj_u64)max_tokens * (mj_u64)hidden * 2ull,
                        MJ_LAYOUT_ALIGN);
    return l;
}

/* Bytes of one rank's region when it also holds the MegaMoE regions. */
MJ_LAYOUT_FN mj_u64 mj_layout_moe_rank_bytes(int hidden, int inter, int experts, int topk,
                                             int ranks, int max_tokens, int fmt, int shared_inter) {
    return mj_align_up(
        mj_layout_moe(hidden, inter, experts, topk, ranks, max_tokens, fmt, shared_inter).end,
        MJ_RANK_ALIGN);
}

/* Runtime arguments of the mega_moe kernel, passed by value (__grid_constant__). */
typedef struct mj_moe_args {
    mj_peers peers;             /* region bases: own + per-rank offsets */
    const unsigned char *w;     /* this rank's local experts, mj_moe_weight_layout */
    const float *l1_alpha_gate; /* [E_local] device arrays, default 1 */
    const float *l1_alpha_up;
    const float *l2_alpha;
    const float *l2_act_scale;
    unsigned short *y; /* [num_tokens][H] BF16 */
    int *recv_stats;   /* [E_local], added to; may be NULL */
    int num_tokens;
    mj_u64 timeout_ns; /* every wait on another CTA or rank gives up after this */
    mj_u64 *trace;     /* NULL, or [num_sms][MJ_MOE_TRACE_WORDS] phase stamps (below) */
    /* Kernels with expert biases (kBiases) only: fp32 [E_local][2I] (gate
     * rows, then up rows) and [E_local][H]. Last, so that kernels without
     * them keep every other argument's offset. */
    const float *l1_bias;
    const float *l2_bias;
    /* Kernels with a fused shared expert (kSharedInter) only: its image
     * (mj_moe_weight_layout at its intermediate size). */
    const unsigned char *w_shared;
} mj_moe_args;

/* Phase stamps of one launch (`megajit bench mega-moe --phases`), %globaltimer
 * nanoseconds per CTA: MJ_MOE_TRACE_HEAD words, then MJ_MOE_TRACE_TASK_WORDS
 * per task for its first MJ_MOE_TRACE_TASKS tasks (the count is exact). */
enum {
    MJ_MOE_TR_ENTRY,    /* the CTA starts */
    MJ_MOE_TR_INPUTS,   /* past griddepcontrol.wait: the previous kernel's writes are visible */
    MJ_MOE_TR_ROUTED,   /* routing tables built */
    MJ_MOE_TR_PULLED,   /* math warpgroup 0 has pulled its rows and starts computing */
    MJ_MOE_TR_COMPUTED, /* math warpgroup 0 has no task left */
    MJ_MOE_TR_END,      /* combine and end-of-launch bookkeeping done */
    MJ_MOE_TR_TASKS,    /* tasks this CTA ran */
    MJ_MOE_TRACE_HEAD = 8
};
enum {
    MJ_MOE_TT_ID,     /* gemm | n << 2 | tile << 16 | valid rows << 40 */
    MJ_MOE_TT_BYTES,  /* weight bytes the task streams */
    MJ_MOE_TT_START,  /* math warpgroup 0 takes the task */
    MJ_MOE_TT_FIRST,  /* its first stage has landed */
    MJ_MOE_TT_LOOP,   /* its K loop is done */
    MJ_MOE_TT_EPI,    /* its epilogue is done (results stored, fenced, release posted) */
    MJ_MOE_TT_ISSUED, /* the weight producer issued its first weight copy */
    MJ_MOE_TT_READY,  /* the token producer found its token tile ready */
    MJ_MOE_TT_STORED, /* math warpgroup 0 stored its results (before their fence) */
    MJ_MOE_TRACE_TASK_WORDS
};
#define MJ_MOE_TRACE_TASKS 160
#define MJ_MOE_TRACE_WORDS (MJ_MOE_TRACE_HEAD + MJ_MOE_TRACE_TASKS * MJ_MOE_TRACE_TASK_WORDS)

/* Runtime arguments of the weight-image kernel: one projection of one expert
 * from the checkpoint layout into the expert's image. */
typedef struct mj_moe_image_args {
    const unsigned char *data; /* [rows][K * bits / 8] */
    const unsigned char *sf;   /* [rows][K / group]; NULL for BF16 */
    unsigned char *expert;     /* the expert's image (W1 then W2) */
    int projection;            /* 0 gate, 1 up, 2 down */
} mj_moe_image_args;

#endif /* MJ_MOE_LAYOUT_H */
