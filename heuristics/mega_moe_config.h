/*
 * Launch configuration of the MegaMoE kernel, a pure function of the problem
 * so that the API can tell a caller the BLOCK_M a launch will use
 * (mj_mega_moe_block_m) without launching anything.
 *
 * The GEMMs run swap-AB: weight rows fill the wgmma M dimension (64 per
 * consumer warpgroup) and tokens take N, which can be as small as 8. Decode
 * batches route a handful of tokens to each expert, so a token tile of 8 or 16
 * wastes far less tensor-core work than padding tokens up to M = 64.
 */
#ifndef MJ_HEURISTICS_MEGA_MOE_CONFIG_H
#define MJ_HEURISTICS_MEGA_MOE_CONFIG_H

#include "heuristics/moe_formats.h"

typedef struct mj_moe_problem {
    int num_tokens; /* tokens on each rank in this launch (>= 0) */
    int num_ranks;
    int num_experts; /* global; a multiple of num_ranks */
    int topk;
    int hidden;       /* multiple of 64 */
    int intermediate; /* multiple of 64 */
    int num_sms;
} mj_moe_problem;

typedef struct mj_moe_launch_config {
    int block_m;     /* tokens per tile (wgmma N): 8, 16, 32, 64, 128 or 256 */
    int block_n;     /* weight rows per tile (wgmma M): 64 or 128 */
    int block_k;     /* reduction elements per pipeline stage */
    int stages;      /* shared-memory pipeline depth */
    int num_threads; /* one producer warpgroup plus one consumer per 64 weight rows */
} mj_moe_launch_config;

/* BLOCK_M for num_tokens per rank; -1 for invalid arguments. */
int mj_moe_block_m(int num_tokens, int num_ranks, int num_experts, int topk);

/* 0 and *out filled, or -1 (nothing written) for invalid arguments. */
int mj_moe_config_for(const mj_moe_problem *p, const mj_moe_format_row *fmt,
                      mj_moe_launch_config *out);

/* Every BLOCK_M candidate divides this, so per-expert token runs padded to it
 * fit any tile size the heuristic may pick. */
int mj_moe_token_alignment(void);

/* Upper bound of (token, slot) rows one rank can receive in a launch with
 * max_tokens per rank, each local expert's run padded to the largest BLOCK_M:
 * the ring size that never wraps. Counts all K slots of a token even when fewer
 * local experts exist, since nothing forces a token's top-k ids to be
 * distinct. 0 for invalid arguments. */
mj_u64 mj_moe_max_pool_tokens(int max_tokens, int num_ranks, int num_experts, int topk);

#endif /* MJ_HEURISTICS_MEGA_MOE_CONFIG_H */
