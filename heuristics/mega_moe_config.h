/*
 * The MegaMoE kernel's configuration: a pure function of the problem, the
 * format row and the device's SM count. The struct is exactly the kernel's
 * tuning template parameters and its launch shape (templates/mega_moe.cuh).
 *
 * The GEMMs run swap-AB: weight rows fill the wgmma M dimension (64 per
 * instruction) and tokens take N, as small as 8, so decode batches that route
 * a handful of tokens to each expert waste little tensor-core work.
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
    int shared_expert; /* 1: a fused shared expert (one more routing entry in shared memory) */
    int expert_biases; /* 1: the experts have biases (both epilogues add them) */
    int shares_device; /* 1: other ranks' grids run on this GPU at the same time */
} mj_moe_problem;

typedef struct mj_moe_kernel_config {
    int block_m;         /* tokens per tile (wgmma N): 8 .. mj_moe_max_block_m(row) */
    int stage_k;         /* K elements of one pipeline stage (also fixes the weight image) */
    int stages;          /* depth of the shared-memory ring */
    unsigned smem_bytes; /* dynamic shared memory of a CTA (MJ_MOE_THREADS threads) */
    int ctas_per_sm;     /* resident CTAs an SM: 1, or 2 (each in half the shared memory) */
} mj_moe_kernel_config;

/* Largest tile a format row's kernel takes. */
int mj_moe_max_block_m(const mj_moe_format_row *fmt);

/* BLOCK_M for num_tokens per rank (not capped by the row); -1 for invalid arguments. */
int mj_moe_block_m(int num_tokens, int num_ranks, int num_experts, int topk);

/* The largest tile of a layer: the row's, and 128 beside a fused shared
 * expert or where expert biases meet an MXFP8 GEMM 2 input (mxfp4-a8). */
int mj_moe_problem_max_block_m(const mj_moe_problem *p, const mj_moe_format_row *fmt);

/* mj_moe_block_m for p's tokens capped at mj_moe_problem_max_block_m: what a
 * launch uses where its ring fits (mj_moe_kernel_config_for). */
int mj_moe_pick_block_m(const mj_moe_problem *p, const mj_moe_format_row *fmt);

/* The token tiles the kernel is built for: 8, 16, 32, 64, 128 and 160, at most
 * mj_moe_max_block_m(fmt). */
int mj_moe_block_m_supported(int block_m, const mj_moe_format_row *fmt);

/* K per stage for a layer (p's shape, experts, ranks and shared expert; not
 * its token count) and format row: the weight image depends on it, so it
 * depends on nothing the launch chooses. 0 when no stage fits. */
int mj_moe_stage_k(const mj_moe_problem *p, const mj_moe_format_row *fmt);

/* 0 and *out filled, or -1 (nothing written) for invalid arguments. block_m 0
 * means the heuristic's (capped by mj_moe_problem_max_block_m, and smaller
 * where its ring does not fit shared memory), else that tile size (a
 * candidate the layer takes). */
int mj_moe_kernel_config_for(const mj_moe_problem *p, const mj_moe_format_row *fmt, int block_m,
                             mj_moe_kernel_config *out);

#endif /* MJ_HEURISTICS_MEGA_MOE_CONFIG_H */
