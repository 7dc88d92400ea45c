/*
 * Everything the MegaMoE kernel derives at compile time from its template
 * parameters (the heuristics' mj_moe_kernel_config on the host): the
 * tile and stage geometry, the shared-memory map.
 */
#ifndef MJ_MEGA_MOE_CONFIG_CUH
#define MJ_MEGA_MOE_CONFIG_CUH

#include "common/numerics.cuh"
#include "layout/moe_layout.h"
#include "mega_moe/weight_image.cuh"

namespace mj {

template <int kHidden_, int kInter_, int kExperts_, int kTopk_, int kRanks_, int kMaxTokens_,
          int kWeightFmt_, int kDispatchFmt_, int kL2Fmt_, int kActivation_, unsigned kClampBits_,
          unsigned kActParam0Bits_, unsigned kActParam1Bits_, int kBlockM_, int kStageK_,
          int kStages_, int kNumSMs_, int kCtasPerSm_, int kSysScope_, int kBiases_,
          int kSharedInter_, int kSharedFmt_>
struct MoeConfig {
    static constexpr int kHidden = kHidden_, kInter = kInter_, kExperts = kExperts_, kTopk = kTopk_,
                         kRanks = kRanks_, kMaxTokens = kMaxTokens_;
    static constexpr int kWeightFmt = kWeightFmt_, kDispatchFmt = kDispatchFmt_, kL2Fmt = kL2Fmt_;
    static constexpr int kActivation = kActivation_;
    static constexpr unsigned kClampBits = kClampBits_;
    /* The activation's constants as float bits: alpha and beta (swiglu,
     * swigluoai), the gate and up betas (situ). */
    static constexpr unsigned kActParam0Bits = kActParam0Bits_, kActParam1Bits = kActParam1Bits_;
    static constexpr int kBlockM = kBlockM_, kStageK = kStageK_, kStages = kStages_,
                         kNumSMs = kNumSMs_;
    /* Resident CTAs an SM, and so the grid: two in half of its shared memory
     * each where heuristics/mega_moe_config.c says (narrow tiles, whose K
     * loops wait on the decode's latencies with 8 math warps an SM). */
    static constexpr int kCtasPerSm = kCtasPerSm_, kCtas = kNumSMs * kCtasPerSm;
    static_assert(kCtasPerSm == 1 || kCtasPerSm == 2, "one or two CTAs an SM");
    /* More token columns than a warpgroup has threads (160): the epilogue's
     * per-column inputs load after the K loop, those past 128 by the
     * epilogue itself (epilogue.cuh), and tiles of at most 128 tokens run a
     * 128-column loop (mainloop). */
    static constexpr bool kWideTile = kBlockM > 128;
    static constexpr bool kSys = kSysScope_ != 0;
    /* Expert biases (mj_moe_args l1_bias, l2_bias) in both epilogues. */
    static constexpr bool kBiases = kBiases_ != 0;
    static constexpr int kLocal = kExperts / kRanks;

    /* A fused shared expert of this intermediate size (0: none) and weight
     * format (mj_moe_shared_fusable), over its own image (mj_moe_args
     * w_shared). In the routed experts' format its tasks run their K loop;
     * in another one the loop of that format (SharedLoopConfig) in tasks of
     * two blocks, whose stage takes at most the ring slot of a routed task
     * of four: at the routed stage K, or at half of it, the routed token
     * stages then read in halves (kSharedSplit; mj_moe_shared_geometry_of). */
    static constexpr int kSharedInter = kSharedInter_, kSharedFmt = kSharedFmt_;
    static constexpr bool kShared = kSharedInter > 0;
    static constexpr bool kSharedOwnLoop = kShared && kSharedFmt != kWeightFmt_;
    static constexpr mj_moe_shared_geometry kSharedGeometry =
        kShared ? mj_moe_shared_geometry_of(kWeightFmt, kSharedFmt, kStageK)
                : mj_moe_shared_geometry{MJ_MOE_TASK_BLOCKS, kStageK};
    static constexpr int kSharedTaskBlocks = kSharedGeometry.task_blocks;
    static constexpr int kSharedStageK = kSharedGeometry.stage_k;
    static_assert(kSharedTaskBlocks > 0, "the shared expert's stages fit the routed ring slot");
    static constexpr int kSharedSplit = kStageK / kSharedStageK;
    static_assert(kSharedSplit == 1 || kSharedSplit == 2,
                  "only BF16 token stages (no scales) are read in halves");

    /* Routing entries: the local experts, then the shared expert (entry kLocal). */
    static constexpr int kRoutes = kLocal + (kShared ? 1 : 0);
    static constexpr int kWBits = mj_format_bits(kWeightFmt), kWGroup = mj_format_group(kWeightFmt);
    static constexpr bool kW4 = kWBits == 4;

    /* Weight image geometry: the layout the loader writes (moe_layout.h). */
    static constexpr mj_moe_weight_layout kImage =
        mj_layout_moe_weights(kHidden, kInter, kStageK, kWeightFmt, MJ_MOE_TASK_BLOCKS);
    static constexpr int kBlocks1 = kImage.w1.blocks, kBlocks2 = kImage.w2.blocks;
    static constexpr int kTasks1 = kImage.w1.tasks, kTasks2 = kImage.w2.tasks;
    static constexpr int kUnits1 = kBlocks1 / 2; // warpgroup units of GEMM 1 (64 intermediates)
    static constexpr int kUnits2 = (kBlocks2 + 1) / 2; // warpgroup units of GEMM 2 (<= 128 rows)
    static constexpr int kStages1 = kImage.w1.stages, kStages2 = kImage.w2.stages;
    // Both GEMMs stream blocks of the same K stage and format.
    static constexpr mj_u32 kBlkData = kImage.w1.blk_data, kBlkSf = kImage.w1.blk_sf;
    static constexpr mj_u32 kWStage = MJ_MOE_TASK_BLOCKS * (kBlkData + kBlkSf);
    static constexpr mj_u64 kRowScaleOffset = kImage.row_scale_offset;
    static constexpr mj_u64 kExpertBytes = kImage.expert_bytes;
    /* Images with rebased scales come with row scales (weight_image.cuh). */
    static constexpr bool kRebased = rebased_scales<kWeightFmt>();
    /* Registers a thread of the first warpgroup (producers, releases) and of
     * a math warpgroup hold after setmaxnreg. setmaxnreg.inc only takes what
     * the CTA's own setmaxnreg.dec released, so the split must fit in the
     * CTA's launch allocation: 384 threads x 168 registers (65536 / 384,
     * rounded down to ptxas's granule of 8). 48 / 232 asked for 1024 more
     * and hung every such kernel on the H200 (tenth session). ptxas
     * allocates each region within its own budget. NVFP4 weights in
     * 64-token tiles run two K loops (mainloop), which spill at
     * 224; they take 40 / 232, while the other kernels keep 56 / 224 (with
     * 40 / 232 some gpt-oss kernels spill: tests/test_mega_moe_build.c).
     * With a shared expert's block pairs (kSharedPairs) the
     * kernels of 64 and fewer tokens spilled in their producers at 56 and at
     * 40 (tests/test_mega_moe_build.c): they take 64 / 216, but the nvfp4
     * row's 64-token ones 56 / 224; in 64-token tiles they have no 40-column
     * loop (mainloop). Tiles wider than a warpgroup take 40 / 232 too. Two
     * CTAs an SM hold 384 x 80 each: 48 / 96 (24 / 104, 32 / 104 and 64 / 88
     * spilled in gpt-oss's or DeepSeek-V3's two-CTA kernels). */
    static constexpr bool kMathWide = (kW4 && kWGroup == 16 && kBlockM == 64) || kWideTile;
    static constexpr bool kSharedPairs = kSharedOwnLoop;
    static constexpr bool kPairRegs = kSharedPairs && kBlockM <= 64;
    static constexpr bool kPairMath = kPairRegs && kMathWide && kDispatchFmt == MJ_FMT_NVFP4;
    static constexpr bool kTwoCtas = kCtasPerSm == 2;
    static constexpr int kProducerRegs = kTwoCtas    ? 48
                                         : kPairRegs ? (kPairMath ? 56 : 64)
                                         : kMathWide ? 40
                                                     : 56;
    static constexpr int kMathRegs = kTwoCtas    ? 96
                                     : kPairRegs ? (kPairMath ? 224 : 216)
                                     : kMathWide ? 232
                                                 : 224;
    static constexpr int kLaunchRegs = 65536 / kCtasPerSm / MJ_MOE_THREADS / 8 * 8;
    static_assert(128 * kProducerRegs + (MJ_MOE_THREADS - 128) * kMathRegs <=
                      MJ_MOE_THREADS * kLaunchRegs,
                  "setmaxnreg.inc would wait forever for registers the CTA does not hold");

    /* Token tiles. */
    static constexpr mj_u32 kBStage = mj_moe_token_stage_bytes(kBlockM, kStageK);
    static constexpr mj_u64 kTile1 = (mj_u64)kStages1 * kBStage,
                            kTile2 = (mj_u64)kStages2 * kBStage;

    /* The shared expert's image and tasks: GEMM 1 has 2 kSharedInter rows,
     * GEMM 2 the same H rows as a routed expert's over K = kSharedInter. Its
     * stages are kSharedStageK; its GEMM 2 token tiles are cut by kStageK. */
    static constexpr mj_moe_weight_layout kSharedImage =
        mj_layout_moe_weights(kHidden, kShared ? kSharedInter : kInter, kSharedStageK,
                              kShared ? kSharedFmt : kWeightFmt, kSharedTaskBlocks);
    static constexpr int kSharedTasks1 = kSharedImage.w1.tasks,
                         kSharedTasks2 = kSharedImage.w2.tasks;
    static constexpr int kSharedUnits1 = kSharedImage.w1.blocks / 2;
    static constexpr mj_u64 kSharedTile2 =
        (mj_u64)((kShared ? kSharedInter : kInter) / kStageK) * kBStage;
    static constexpr mj_u32 kSharedBlkBytes = kSharedImage.w1.blk_data + kSharedImage.w1.blk_sf;
    static_assert(!kShared || kSharedTaskBlocks * kSharedBlkBytes <=
                                  MJ_MOE_TASK_BLOCKS * (kImage.w1.blk_data + kImage.w1.blk_sf),
                  "a stage of a shared task fits the ring slot of a routed one");
    static_assert(!kSharedOwnLoop || kSharedFmt == MJ_FMT_MXFP8 || kSharedFmt == MJ_FMT_BF16,
                  "a shared expert's own loop: MXFP8 or BF16 weights");
    /* Its image's row scales: MX weights (MXFP8 beside MXFP8, MXFP4 or NVFP4
     * experts). */
    static constexpr bool kSharedRebased = kShared && rebased_scales<kSharedFmt>();

    /* Shared memory: the stage ring, the epilogue scratch of both math
     * warpgroups, the routing tables, the barriers. */
    // The ring's arrays (mj_moe_ring_bytes): token tiles, weights.
    static constexpr mj_u32 kRingWeights = kStages * kBStage;
    static constexpr int kTokenRowBytes = mj_moe_token_row_bytes(kStageK);
    static_assert(kBStage % 1024 == 0 || (kTokenRowBytes == 64 && kBStage % 512 == 0),
                  "a stage's token data is whole swizzle atoms");
    static constexpr int kEpiStride = 68; // words per token column of a 64-row unit (bank spread)
    // Staged results (64 gate/up words or 128 bf16 per token column), then 4
    // words per column.
    static constexpr mj_u32 kEpiStage = (mj_u32)kBlockM * kEpiStride * 4u;
    static constexpr mj_u32 kEpiBytes = kEpiStage + (mj_u32)kBlockM * 16u;
    static constexpr mj_u32 kSmemRing = 0,
                            kSmemEpi = mj_moe_ring_bytes(kWStage, kBStage, (mj_u32)kStages);
    static constexpr mj_u32 kSmemRouting = kSmemEpi + 2 * kEpiBytes;
    static constexpr mj_u32 kSmemBars =
        kSmemRouting + MJ_MOE_ROUTING_BYTES((mj_u32)kRoutes, (mj_u32)kRanks);
    static constexpr mj_u32 kSmemBytes =
        mj_moe_smem_bytes(kHidden, kInter, kWeightFmt, kStageK, kBlockM, kStages, kRoutes, kRanks);
    static_assert(kSmemBytes == kSmemBars + (2 * kStages + 4) * 8 + MJ_MOE_SMEM_TAIL_BYTES,
                  "shared-memory map");

    /* The weight layout as a value for device code (the layout functions
     * take pointers, which the constexpr kImage cannot give device code). */
    static MJ_HD mj_moe_weight_layout image() {
        return mj_layout_moe_weights(kHidden, kInter, kStageK, kWeightFmt, MJ_MOE_TASK_BLOCKS);
    }
    static MJ_HD mj_moe_weight_layout shared_image() {
        return mj_layout_moe_weights(kHidden, kShared ? kSharedInter : kInter, kSharedStageK,
                                     kShared ? kSharedFmt : kWeightFmt, kSharedTaskBlocks);
    }
    /* Byte offset of stage s of task n of W1 (down = 0) or W2 in the shared
     * expert's image. */
    static MJ_HD mj_u64 shared_stage_offset(bool down, int n, int s) {
        const mj_moe_weight_layout l = shared_image();
        return mj_moe_expert_stage(&l, down, n, s);
    }
    static MJ_HD int stages_of(int gemm) {
        return gemm == 2 ? kStages2 : kStages1;
    }
    /* Stages of a task of GEMM gemm for routing entry `local` (the shared
     * expert's GEMM 2 streams its wider K, and its stages may be halves). As
     * members of Launch, this and units1 changed the SASS of kernels without
     * a shared expert. */
    static MJ_HD int task_stages(int gemm, int local) {
        if constexpr (kShared)
            if (local == kLocal) return gemm == 2 ? kSharedImage.w2.stages : kSharedImage.w1.stages;
        return stages_of(gemm);
    }
    /* Bytes of one block's stage of entry `local`'s weights. */
    static MJ_HD mj_u32 block_bytes(int local) {
        if constexpr (kSharedOwnLoop)
            if (local == kLocal) return kSharedBlkBytes;
        return kBlkData + kBlkSf;
    }
    /* GEMM 1 warpgroup units that finish one of entry `local`'s token tiles. */
    static MJ_HD mj_u32 units1(int local) {
        if constexpr (kShared)
            if (local == kLocal) return (mj_u32)kSharedUnits1;
        return (mj_u32)kUnits1;
    }

    static_assert(kExperts % kRanks == 0, "experts must divide among ranks");
    static_assert(kStageK % 64 == 0 && kHidden % kStageK == 0 && kInter % kStageK == 0, "stage K");
    static_assert(kInter % 64 == 0 && kHidden % 64 == 0, "shapes are multiples of 64");
    static_assert(kBlockM == 8 || kBlockM == 16 || kBlockM == 32 || kBlockM == 64 ||
                      kBlockM == 128 || kBlockM == 160,
                  "BLOCK_M");
    static_assert(kBlkData % 2048 == 0, "a block's stage is whole 16-byte chunks of 128 threads");
    static_assert(!kShared || kSharedInter % kInter == 0,
                  "the shared expert's intermediate size is a multiple of the routed one");
};

/* The K loop of a shared expert with a format of its own (C::kSharedOwnLoop):
 * the kernel's token tiles, the shared expert's weights and stages. */
template <class C>
using SharedLoopConfig =
    MoeConfig<C::kHidden, C::kSharedInter, C::kExperts, C::kTopk, C::kRanks, C::kMaxTokens,
              C::kSharedFmt, C::kDispatchFmt, C::kL2Fmt, C::kActivation, C::kClampBits,
              C::kActParam0Bits, C::kActParam1Bits, C::kBlockM, C::kSharedStageK, C::kStages,
              C::kNumSMs, C::kCtasPerSm, C::kSys ? 1 : 0, 0, 0, 0>;

} // namespace mj

#endif // MJ_MEGA_MOE_CONFIG_CUH
