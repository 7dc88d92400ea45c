#include "heuristics/mega_moe_config.h"

#include <math.h>

static const int block_m_candidates[] = {8, 16, 32, 64, 128, 256};
#define NUM_CANDIDATES ((int)(sizeof block_m_candidates / sizeof block_m_candidates[0]))
#define MAX_BLOCK_M 256

/* Hopper's largest dynamic shared memory per block (227 KiB). */
#define SMEM_BYTES 232448
/* Barriers, per-expert counters and amax scratch, kept as one flat reserve so
 * the stage count does not depend on the expert count. */
#define SMEM_RESERVED 8192
#define MAX_STAGES 8

static int valid_routing(int num_tokens, int num_ranks, int num_experts, int topk) {
    return num_tokens >= 0 && num_ranks >= 1 && num_ranks <= MJ_MAX_RANKS &&
           num_experts >= num_ranks && num_experts % num_ranks == 0 && topk >= 1 &&
           topk <= num_experts;
}

int mj_moe_block_m(int num_tokens, int num_ranks, int num_experts, int topk) {
    if (!valid_routing(num_tokens, num_ranks, num_experts, topk)) return -1;
    /* Tokens per expert under uniform routing, over all ranks (each expert
     * receives from every rank). mean + sqrt(mean) is the mean plus one
     * Poisson standard deviation: most experts then fit in a single tile. */
    double mean = (double)num_tokens * num_ranks * topk / num_experts;
    double cover = mean + sqrt(mean);
    for (int i = 0; i < NUM_CANDIDATES; i++)
        if (block_m_candidates[i] >= cover) return block_m_candidates[i];
    return MAX_BLOCK_M;
}

int mj_moe_token_alignment(void) {
    /* The candidates are powers of two, so their LCM is the largest. */
    return MAX_BLOCK_M;
}

mj_u64 mj_moe_max_pool_tokens(int max_tokens, int num_ranks, int num_experts, int topk) {
    if (max_tokens < 1 || !valid_routing(max_tokens, num_ranks, num_experts, topk)) return 0;
    mj_u64 local = (mj_u64)(num_experts / num_ranks);
    mj_u64 rows = (mj_u64)num_ranks * (mj_u64)max_tokens * (mj_u64)topk;
    return mj_align_up(rows + local * (MAX_BLOCK_M - 1), (mj_u64)mj_moe_token_alignment());
}

/* Bits per element in shared memory: FP4 stays packed there and is decoded on
 * the way into the tensor cores (weights are the register-sourced A operand
 * under swap-AB). */
static int stage_bytes(int block_m, int block_n, int block_k, int act_fmt, int weight_fmt) {
    int act = block_m * block_k * mj_format_bits(act_fmt) / 8;
    int weight = block_n * block_k * mj_format_bits(weight_fmt) / 8;
    int act_group = mj_format_group(act_fmt);
    int weight_group = mj_format_group(weight_fmt);
    int scales = (act_group ? block_m * block_k / act_group : 0) +
                 (weight_group ? block_n * block_k / weight_group : 0);
    return act + weight + scales + 16; /* + a full/empty barrier pair */
}

int mj_moe_config_for(const mj_moe_problem *p, const mj_moe_format_row *fmt,
                      mj_moe_launch_config *out) {
    if (!p || !fmt || !out) return -1;
    int block_m = mj_moe_block_m(p->num_tokens, p->num_ranks, p->num_experts, p->topk);
    if (block_m < 0 || p->hidden < 64 || p->hidden % 64 || p->intermediate < 64 ||
        p->intermediate % 64 || p->num_sms < 1)
        return -1;
    if (fmt->variant < 0 || fmt->variant >= MJ_MOE_VARIANT_COUNT_) return -1;

    /* GEMM 1 has N = 2*I (gate and up halves of one tile: I % 64 suffices for
     * 128 rows), GEMM 2 has N = H. Fewer GEMM 1 tiles than SMs leaves SMs idle,
     * and halving the tile doubles the tile count. */
    double mean = (double)p->num_tokens * p->num_ranks * p->topk / p->num_experts;
    double active = (double)p->num_tokens * p->topk;
    double local = (double)(p->num_experts / p->num_ranks);
    double experts_hit = active < local ? active : local;
    double m_tiles = mean > block_m ? ceil(mean / block_m) : 1.0;
    double l1_tiles = experts_hit * m_tiles * (2.0 * p->intermediate / 128.0);
    int block_n = (p->hidden % 128 == 0 && l1_tiles >= p->num_sms) ? 128 : 64;

    /* One 128-byte swizzle row of K per stage: 64 elements of the BF16 that
     * every variant decodes into. */
    int block_k = 64;

    /* Both GEMMs share the pipeline, so size a stage for the larger input. */
    int act_fmt = mj_format_bits(fmt->dispatch_fmt) >= mj_format_bits(fmt->l2_input_fmt)
                      ? fmt->dispatch_fmt
                      : fmt->l2_input_fmt;
    int per_stage = stage_bytes(block_m, block_n, block_k, act_fmt, fmt->weight_fmt);
    /* The largest tiles (256 x 128, BF16) still leave 3 stages. */
    int fixed = block_m * block_n * 2 + SMEM_RESERVED; /* BF16 output staging */
    int stages = (SMEM_BYTES - fixed) / per_stage;
    if (stages > MAX_STAGES) stages = MAX_STAGES;

    out->block_m = block_m;
    out->block_n = block_n;
    out->block_k = block_k;
    out->stages = stages;
    out->num_threads = 128 + 128 * (block_n / 64);
    return 0;
}
