#include "heuristics/mega_moe_config.h"

#include <math.h>

#include "templates/layout/moe_layout.h"

static const int block_m_candidates[] = {8, 16, 32, 64, 128, 160};
#define NUM_CANDIDATES ((int)(sizeof block_m_candidates / sizeof block_m_candidates[0]))

/* Hopper's largest dynamic shared memory per block (227 KiB). */
#define SMEM_BYTES 232448u
/* A stage of four 64-row weight blocks: 32 KB keeps >= 64 KB in flight per SM
 * with two stages, where one thread's bulk copies reach the read ceiling
 * (measured on the H200: the team reference ../shared/reference/megamoe-sm90-fast-design.md §0.1,
 * beside the repository). */
#define MAX_STAGE_BYTES 32768
/* The most a whole stage of a full tile takes (weights, their scales, the
 * tokens) where MIN_STAGES of the widest one do not fit beside the layer's
 * routing tables: the 128-token stages of BF16, MXFP4 and NVFP4 weights take
 * 48-50 KB and stay as they are. MXFP8 weights take 65 KB at K 128,
 * which fits beside a few hundred local experts but not beside the routing
 * tables of MJ_LIMIT_EXPERTS_MAX (tests/test_mega_moe_api.c): those layers
 * stream stages of K 64. K 128 was faster at every T (DeepSeek-V3 on one
 * H200: 7477 against 8013 us at T = 4096, 3219 against 3392 at 1024;
 * bench/RESULTS.md, eighteenth session). */
#define MAX_TILE_STAGE_BYTES 53248
#define MIN_STAGES 2
#define MAX_STAGES 8
/* Two CTAs share an SM's 228 KiB, each less the 1 KiB the system reserves
 * a CTA; their rings then hold at least four stages each. */
#define SMEM_BYTES_TWO_CTAS (233472u / 2u - 1024u)
#define MIN_STAGES_TWO_CTAS 4

static int valid_routing(int num_tokens, int num_ranks, int num_experts, int topk) {
    return num_tokens >= 0 && num_ranks >= 1 && num_ranks <= MJ_MAX_RANKS &&
           num_experts >= num_ranks && num_experts % num_ranks == 0 && topk >= 1 &&
           topk <= num_experts;
}

int mj_moe_max_block_m(const mj_moe_format_row *fmt) {
    /* 160-token tiles fit beside a 128-column loop with their epilogue inputs
     * loaded after the K loop (mega_moe.cuh), so an expert of up to 160 pairs
     * decodes its weights once: the E2M1 rows take them (DeepSeek-V3 at T =
     * 4096 on an H100: mxfp4-a16 8%, nvfp4-a16 11%, nvfp4 15%, mxfp4-a8 33%
     * faster; bench/RESULTS.md, twenty-fourth and twenty-fifth sessions). Not BF16
     * weights, which need no decode and lost 2% to the two-stage ring of
     * 160-token tiles, nor MXFP8 weights (two stages and the epilogue scratch
     * exceed shared memory): 128 there (bench/RESULTS.md, twenty-fourth
     * session). tests/test_mega_moe_build.c checks every preset variant
     * builds without spills. */
    if (!fmt) return MJ_MOE_MAX_BLOCK_M;
    const int e2m1 = fmt->weight_fmt == MJ_FMT_MXFP4 || fmt->weight_fmt == MJ_FMT_NVFP4;
    return e2m1 ? MJ_MOE_MAX_BLOCK_M : 128;
}

int mj_moe_block_m(int num_tokens, int num_ranks, int num_experts, int topk) {
    if (!valid_routing(num_tokens, num_ranks, num_experts, topk)) return -1;
    /* Tokens per expert under uniform routing, over all ranks (each expert
     * receives from every rank). mean + sqrt(mean) is the mean plus one
     * Poisson standard deviation: most experts then fit in a single tile,
     * so their weights stream once. */
    double mean = (double)num_tokens * num_ranks * topk / num_experts;
    double cover = mean + sqrt(mean);
    for (int i = 0; i < NUM_CANDIDATES; i++)
        if (block_m_candidates[i] >= cover) return block_m_candidates[i];
    return block_m_candidates[NUM_CANDIDATES - 1];
}

/* Entries of the routing tables in shared memory: the local experts and a
 * fused shared expert. */
static int routes_of(const mj_moe_problem *p) {
    return p->num_experts / p->num_ranks + (p->shared_expert ? 1 : 0);
}

int mj_moe_stage_k(const mj_moe_problem *p, const mj_moe_format_row *fmt) {
    if (!p || !fmt || p->num_ranks < 1 || p->num_experts < p->num_ranks ||
        p->num_experts % p->num_ranks)
        return 0;
    /* Stages are sized for 128-token tiles whatever the row's cap (160-token
     * tiles take the same stage K, in fewer stages): 16 K16 steps of E2M1
     * decode unrolled in one stage do not fit the registers
     * (tests/test_mega_moe_build.c). */
    const int tile = 128;
    /* Each part within MAX_STAGE_BYTES, the whole stage unbounded (at most
     * three such parts). */
    const int widest = mj_moe_stage_k_of(p->hidden, p->intermediate, fmt->weight_fmt, tile,
                                         MAX_STAGE_BYTES, 3 * MAX_STAGE_BYTES);
    if (widest == 0 || mj_moe_smem_bytes(p->hidden, p->intermediate, fmt->weight_fmt, widest, tile,
                                         MIN_STAGES, routes_of(p), p->num_ranks) <= SMEM_BYTES)
        return widest;
    return mj_moe_stage_k_of(p->hidden, p->intermediate, fmt->weight_fmt, tile, MAX_STAGE_BYTES,
                             MAX_TILE_STAGE_BYTES);
}

int mj_moe_block_m_supported(int block_m, const mj_moe_format_row *fmt) {
    for (int i = 0; i < NUM_CANDIDATES; i++)
        if (block_m_candidates[i] == block_m) return block_m <= mj_moe_max_block_m(fmt);
    return 0;
}

int mj_moe_problem_max_block_m(const mj_moe_problem *p, const mj_moe_format_row *fmt) {
    /* A fused shared expert's own loop spilled beside 160-token tiles, and
     * so did gpt-oss's mxfp4-a8 kernel with its expert biases, whose GEMM 1
     * epilogue quantizes MXFP8 groups of 32 (tests/test_mega_moe_build.c). */
    const int cap = mj_moe_max_block_m(fmt);
    const int biased_mxfp8 = p && fmt && p->expert_biases && fmt->l2_input_fmt == MJ_FMT_MXFP8;
    return p && (p->shared_expert || biased_mxfp8) && cap > 128 ? 128 : cap;
}

int mj_moe_pick_block_m(const mj_moe_problem *p, const mj_moe_format_row *fmt) {
    const int bm = mj_moe_block_m(p->num_tokens, p->num_ranks, p->num_experts, p->topk);
    const int cap = mj_moe_problem_max_block_m(p, fmt);
    return bm > cap ? cap : bm;
}

/* The deepest ring of at least min_stages stages of bm-token tiles within
 * budget bytes of shared memory: 0 and *out filled, or -1. */
static int ring_within(const mj_moe_problem *p, const mj_moe_format_row *fmt, int bm, int stage_k,
                       unsigned budget, int min_stages, int ctas_per_sm,
                       mj_moe_kernel_config *out) {
    for (int stages = MAX_STAGES; stages >= min_stages; stages--) {
        unsigned smem = mj_moe_smem_bytes(p->hidden, p->intermediate, fmt->weight_fmt, stage_k, bm,
                                          stages, routes_of(p), p->num_ranks);
        if (smem <= budget) {
            *out = (mj_moe_kernel_config){bm, stage_k, stages, smem, ctas_per_sm};
            return 0;
        }
    }
    return -1;
}

/* Tasks a launch of p's tokens makes under uniform routing, at least: one
 * token tile for each local expert hit, four 64-row blocks a task over 2 I
 * rows (GEMM 1) and H rows (GEMM 2). */
static double expected_tasks(const mj_moe_problem *p) {
    const double local = (double)p->num_experts / p->num_ranks;
    /* every rank's T K pairs over all experts: T K land on a rank's own */
    const double pairs = (double)p->num_tokens * p->topk;
    /* distinct experts among `pairs` uniform draws over `local` */
    const double hit = local * (1.0 - pow(1.0 - 1.0 / local, pairs));
    const int rows = MJ_MOE_TASK_BLOCKS * MJ_MOE_BLOCK_ROWS;
    return hit * (double)((2 * p->intermediate + rows - 1) / rows + (p->hidden + rows - 1) / rows);
}

/* bm-token tiles in two CTAs an SM where a ring of MIN_STAGES_TWO_CTAS fits
 * half of it, else in one: 0 and *out filled, or -1. Tiles of at most 16
 * tokens decode a weight for one or two wgmma columns, and 8 math warps an
 * SM leave the decode's dependency chains exposed; two CTAs give each
 * scheduler four. Only E2M1 weights in stages of K 64, whose loops keep
 * their fragment groups in the two-CTA budget of 96 registers (gpt-oss-120b
 * on an H100 at T = 64 / 256: mxfp4-a16 533 -> 503 / 647 -> 608 us, nvfp4
 * 601 -> 531 / 728 -> 638, nvfp4-a16 568 -> 534 / 673 -> 642); loops over
 * stages of K 128 drop their groups of four there and came out even at T >=
 * 8 (DeepSeek-V3 and Qwen3-235B within 1%; thirty-second session). Not where GEMM 1's epilogue
 * quantizes MXFP8 groups, nor beside a shared expert's block pairs, nor in 16-token tiles with
 * expert biases: those spilled (tests/test_mega_moe_build.c). Nor in launches of fewer than two
 * tasks an SM: two tasks on one SM run at about half speed each while other SMs idle (gpt-oss-120b
 * at T = 1, 140 tasks: 49 -> 74 us; with the CTAs from the SM count on taking no task, 64-67 us,
 * GEMM 1's tasks ending at 35 us against 24: the first 132 CTAs are not one
 * an SM). Nor where other ranks' grids share the GPU: a grid of half-SM CTAs
 * spread over every SM leaves no SM the room a one-CTA grid of theirs needs,
 * and ranks wait on each other. */
static int deepest_ring(const mj_moe_problem *p, const mj_moe_format_row *fmt, int bm, int stage_k,
                        mj_moe_kernel_config *out) {
    const int e2m1 = fmt->weight_fmt == MJ_FMT_MXFP4 || fmt->weight_fmt == MJ_FMT_NVFP4;
    if (bm <= (p->expert_biases ? 8 : 16) && stage_k == 64 && e2m1 &&
        fmt->l2_input_fmt != MJ_FMT_MXFP8 && !p->shared_expert && !p->shares_device &&
        expected_tasks(p) >= 2.0 * p->num_sms &&
        ring_within(p, fmt, bm, stage_k, SMEM_BYTES_TWO_CTAS, MIN_STAGES_TWO_CTAS, 2, out) == 0)
        return 0;
    return ring_within(p, fmt, bm, stage_k, SMEM_BYTES, MIN_STAGES, 1, out);
}

int mj_moe_kernel_config_for(const mj_moe_problem *p, const mj_moe_format_row *fmt, int block_m,
                             mj_moe_kernel_config *out) {
    if (!p || !fmt || !out) return -1;
    if (!valid_routing(p->num_tokens, p->num_ranks, p->num_experts, p->topk)) return -1;
    if ((block_m && (!mj_moe_block_m_supported(block_m, fmt) ||
                     block_m > mj_moe_problem_max_block_m(p, fmt))) ||
        p->hidden < 64 || p->hidden % 64 || p->intermediate < 64 || p->intermediate % 64 ||
        p->num_sms < 1)
        return -1;
    int stage_k = mj_moe_stage_k(p, fmt);
    if (stage_k == 0) return -1;
    if (block_m) return deepest_ring(p, fmt, block_m, stage_k, out);
    /* The heuristic's tile, or the largest smaller one whose ring fits
     * beside the layer's routing tables (160-token tiles of many experts). */
    const int want = mj_moe_pick_block_m(p, fmt);
    for (int i = NUM_CANDIDATES - 1; i >= 0; i--) {
        const int bm = block_m_candidates[i];
        if (bm <= want && deepest_ring(p, fmt, bm, stage_k, out) == 0) return 0;
    }
    return -1;
}
