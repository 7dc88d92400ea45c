/*
 * The math warpgroups' K loop over one task: wait for a stage of the ring,
 * read the warpgroup's two weight blocks from it (one LDS.128 per chunk),
 * decode them into BF16 A fragments, issue wgmma against the token tile of
 * the same stage, release the stage when the tensor cores are done with it.
 * K16 steps accumulate into acc0 / acc1 on the tensor cores, one or four
 * steps behind each wgmma fence (mainloop_bf16).
 *
 * Both blocks' wgmma always issue (a block missing from a task's last stage
 * multiplies stale shared memory into a result nobody reads): a branch around
 * wgmma would make ptxas serialize every one of them. The choice of a
 * narrower loop for a mostly empty tile is made once per task (mainloop).
 */
#ifndef MJ_MEGA_MOE_MAINLOOP_CUH
#define MJ_MEGA_MOE_MAINLOOP_CUH

#include "common/wgmma.cuh"
#include "mega_moe/decode.cuh"
#include "mega_moe/launch.cuh"

namespace mj {

template <class C> struct Ring {
    unsigned char *base;
    mj_u64 *full;  // [kStages]: both producers' copies landed
    mj_u64 *empty; // [kStages]: every math thread is done with the stage
    mj_u64 *sink;  // arrivals nobody waits for: a release with nothing to release

    // A stage's parts (mj_moe_ring_bytes): the token tile, the weight
    // blocks and their scales.
    __device__ __forceinline__ unsigned char *tokens(int slot) const {
        return base + (mj_u32)slot * C::kBStage;
    }
    __device__ __forceinline__ unsigned char *weights(int slot) const {
        return base + C::kRingWeights + (mj_u32)slot * C::kWStage;
    }
    // The descriptor of K step 0 of a slot's token tile, in uniform registers.
    // ptxas cannot tell that the slot is the same in every lane (it comes from
    // a loop whose trip count is read from shared memory), so it computed the
    // descriptors in ordinary registers and copied each into uniform ones
    // before every wgmma: two R2UR a wgmma, 2-16% of the K loops'
    // instructions (bench/kloop_sass.py). A warp-wide min (CREDUX) of the address puts it in a
    // uniform register, and every step's descriptor derived from it stays
    // there. All 32 lanes of a math warp run the K loop.
    __device__ __forceinline__ mj_u64 token_desc(int slot) const {
        const mj_u32 tile = __reduce_min_sync(0xffffffffu, smem_u32(tokens(slot)));
        return swizzled_kmajor_desc(tile, 0, C::kBlockM, C::kTokenRowBytes);
    }
};

/* A thread of a math warpgroup: warp w, lane = 4 g + q. */
struct MathThread {
    int wg, t, w, lane, g, q;
};

/* A compile-time int as a value, for generic lambdas. */
template <int N> struct StaticInt { static constexpr int value = N; };

__device__ __forceinline__ uint4 lds128(const unsigned char *p) {
    return *reinterpret_cast<const uint4 *>(p);
}

/* Every math thread arrives: no branch between wgmmas (ptxas serializes a
 * pipeline with a divergent path in it). */
template <class C> __device__ __forceinline__ void release(const Ring<C> &ring, int slot) {
    mbar_arrive(ring.empty + slot);
}

template <class C>
__device__ __forceinline__ unsigned char *wait_stage(const Ring<C> &ring, mj_u32 &it, int &slot,
                                                     const Launch<C> &L) {
    slot = (int)(it % C::kStages);
    const mj_u32 parity = (it / C::kStages) & 1u;
    it++;
    if (!mbar_wait(ring.full + slot, parity, L.args->timeout_ns)) L.fail(MJ_MOE_ERR_PIPE, 1u);
    return ring.weights(slot);
}

/* kN: the token columns the wgmmas compute (the tile's first kN; the
 * accumulators' other columns stay zero). C: the weights' loop (a shared
 * expert's own, SharedLoopConfig); K: the kernel's, whose ring it reads;
 * kBlocks: the warpgroup's blocks of the task, its two of four (2m.wg,
 * 2m.wg + 1 into acc0, acc1), or in a shared expert's tasks of two its one
 * (m.wg, into acc0; acc1 comes back zero). */
template <class C, int kN, class K, int kBlocks = 2>
__device__ __forceinline__ void
mainloop_bf16(const Ring<K> &ring, mj_u32 &it, int stages, int nblk, const MathThread &m,
              const Launch<K> &L, float (&acc0)[C::kBlockM / 2], float (&acc1)[C::kBlockM / 2]) {
    constexpr int R = C::kBlockM / 2, kSteps = C::kStageK / 16;
    constexpr int kGroups = C::kWGroup ? C::kStageK / C::kWGroup : 1;
    // Block-scaled weights (E2M1, or a shared expert's E4M3) are decoded;
    // a 16-byte chunk holds four K16 steps of E2M1 codes, two of E4M3 bytes.
    constexpr bool kDecoded = C::kWGroup != 0;
    constexpr int kChunkSteps = C::kW4 ? 4 : 2;
    // The wgmmas of kGroup K16 steps issue behind one wgmma fence, which waits
    // for every register write in flight: decodes for narrow tiles, where
    // decode and wgmma serialize, run four steps a group (E2M1: 6% faster than
    // one, and two 3% slower, at 8 tokens), into twice as many fragment sets:
    // one group decodes while the one before runs. So do E2M1 weights' two-block
    // loops of at most 40 columns in tiles of 32 tokens, and of 64 where GEMM 1
    // stores BF16, whose warps waited on one step's short dependency chains
    // (Nsight's source counters: about 0.4 instructions an SMSP a cycle; on an H100
    // at T = 512 nvfp4 2491 -> 2371 us, nvfp4-a16 -4%, the MX rows -1 to -2%; at
    // T = 1024 nvfp4-a16 -3.5%, mxfp4-a16 within 1%; twenty-sixth session).
    // The 64-token kernel that quantizes GEMM 1's output to NVFP4 (the nvfp4
    // row) spilled 4-8 bytes with eight sets: it groups into four, waiting
    // for each group before decoding the next, while the other warpgroup's
    // group runs (T = 1024 on an H100: 2751 -> 2724 us, the means of seven
    // runs each; twenty-seventh session). mxfp4-a8's spilled too and lost 3-6% at
    // T = 1024 in four sets: it runs one step a fence. Four sets for every
    // grouped loop lost up to 5% (mxfp4-a8 at T = 512), and the 64-column
    // loop grouped was 6-11% slower. Otherwise step c decodes into set c % kSets
    // while the wgmmas of the kSets - 1 steps before it run: wide tiles, and
    // decodes from 32 tokens, keep two sets, as more spill beside their
    // accumulators (tests/test_mega_moe_build.c); so do loops of one block (a
    // shared expert's), whose four sets of BF16 weights made ptxas serialize
    // their wgmmas (C7515). Two-block loops of narrow tiles over stages of K
    // 64 (gpt-oss-120b's 2880 = 45 x 64: no stage of eight steps) run groups
    // of two steps in four sets, one group in flight (H100 at T = 64 / 256:
    // mxfp4-a16 565 -> 536 / 697 -> 665 us, nvfp4 638 -> 600 / 767 -> 730).
    // Groups of four in four sets, each waited for, gained less at T = 256,
    // and lost 7% at T = 1024 where they also took the 64-token tiles' narrow
    // loops; the loop taking stages in pairs for eight sets made ptxas
    // serialize the wgmmas around an odd count's lone stage (C7513, C7520;
    // thirty-first session).
    constexpr bool kWide = C::kBlockM >= 128 || (kDecoded && C::kBlockM >= 32);
    constexpr bool kNarrowLoop =
        C::kW4 && kBlocks == 2 && kN <= 40 &&
        (C::kBlockM == 32 || (C::kBlockM == 64 && C::kL2Fmt != MJ_FMT_MXFP8));
    constexpr bool kOneGroup = C::kBlockM == 64 && C::kL2Fmt == MJ_FMT_NVFP4;
    constexpr bool kK64Group = kDecoded && !kWide && kSteps == 4 && kBlocks == 2;
    constexpr bool kGroupOf4 = kDecoded && (!kWide || kNarrowLoop) && kSteps % 8 == 0;
    // NVFP4 weights' K-64 stages in passes of three where every task's stage
    // count allows (gpt-oss-120b: 45), in six sets: two groups run while the
    // next decodes. One CTA an SM only (six sets spilled at two CTAs' 96
    // registers), so gpt-oss's nvfp4 T = 1 (H100: 55.2, 56.6 -> 50.1, 49.5
    // us; its T = 8 to 256, in the two-CTA kernels this leaves alone, within
    // 3%; bench/RESULTS.md, thirty-third session). mxfp4-a16 was 3-4% slower
    // with it at T = 64 and 256, and groups of four in twelve sets serialized
    // the wgmmas (C7513; thirty-second session).
    constexpr bool kThirds = kK64Group && !K::kShared && !C::kTwoCtas &&
                             C::kWeightFmt == MJ_FMT_NVFP4 && C::kStages1 % 3 == 0 &&
                             C::kStages2 % 3 == 0;
    constexpr int kPass = kThirds ? 3 : 1; // stages a pass of the loop takes
    constexpr int kGroup = kK64Group ? 2 : kGroupOf4 ? 4 : 1;
    constexpr int kSets = kThirds                 ? 6
                          : kGroup == 4           ? (kOneGroup ? 4 : 8)
                          : kWide || kBlocks == 1 ? 2
                                                  : 4;
    constexpr int kInFlight = kSets / kGroup - 1; // groups left running by each wait
    static_assert(kPass * kSteps % kSets == 0, "a pass holds whole rounds of fragment sets");
    static_assert(kSets - kGroup <= kSteps, "a stage is done within the next one's steps");
#pragma unroll
    for (int i = 0; i < R; i++) {
        acc0[i] = 0.0f;
        if constexpr (kBlocks == 2) acc1[i] = 0.0f;
    }
    const int block0 = kBlocks * m.wg;
    mj_u32 a[kSets][kBlocks][4], words[kBlocks][4], scale[kBlocks][2];
    int prev_slot = -1;
    // One stage, the p-th of its pass: its steps take sets from p x kSteps on.
    auto run_stage = [&](auto pass_stage) {
        constexpr int p = decltype(pass_stage)::value;
        int slot;
        const unsigned char *st = wait_stage(ring, it, slot, L);
        const mj_u64 desc0 = ring.token_desc(slot);
#pragma unroll
        for (int c = 0; c < kSteps; c++) {
            const int set = (p * kSteps + c) % kSets; // the fragment set of step c
#pragma unroll
            for (int b = 0; b < kBlocks; b++) {
                const unsigned char *wd = st + (mj_u32)(block0 + b) * C::kBlkData;
                if (!kDecoded) {
                    const uint4 v = lds128(wd + c * 2048 + m.t * 16);
                    a[set][b][0] = v.x, a[set][b][1] = v.y, a[set][b][2] = v.z, a[set][b][3] = v.w;
                    continue;
                }
                if (c % kChunkSteps == 0) {
                    const uint4 v = lds128(wd + (c / kChunkSteps) * 2048 + m.t * 16);
                    words[b][0] = v.x, words[b][1] = v.y, words[b][2] = v.z, words[b][3] = v.w;
                }
                // A scale group is one K16 step (NVFP4) or two (MX).
                if (C::kWGroup == 16 || c % 2 == 0) {
                    const int gi = C::kWGroup == 16 ? c : c / 2;
                    const unsigned char *sf = st + (mj_u32)nblk * C::kBlkData +
                                              (mj_u32)(block0 + b) * C::kBlkSf +
                                              (m.w * 8 + m.g) * kGroups * 2 + 2 * gi;
                    scale[b][0] = rebased_multiplier<C::kWeightFmt>(sf[0]);
                    scale[b][1] = rebased_multiplier<C::kWeightFmt>(sf[1]);
                }
                mj_u32 tiny[4];
                if constexpr (C::kW4) {
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        tiny[i] = e2m1x2_to_bf16x2_tiny(words[b][c % 4], i);
                } else {
#pragma unroll
                    for (int h = 0; h < 2; h++) // row g + 8 h: a[h], a[h + 2]
                        e4m3x4_to_bf16x2_tiny(words[b][2 * (c % 2) + h], tiny[h], tiny[h + 2]);
                }
#pragma unroll
                for (int i = 0; i < 4; i++)
                    a[set][b][i] = bf16x2_mul(tiny[i], scale[b][i & 1]);
            }
            if (c % kGroup != kGroup - 1) continue;
            mj_u64 desc[kGroup];
#pragma unroll
            for (int j = 0; j < kGroup; j++) {
                const int cj = c - kGroup + 1 + j;
                desc[j] = swizzled_desc_step(desc0, cj, C::kBlockM, C::kTokenRowBytes);
#pragma unroll
                for (int b = 0; b < kBlocks; b++)
                    fence_frag(a[(p * kSteps + cj) % kSets][b]);
                fence_desc(desc[j]);
            }
            wgmma_fence();
#pragma unroll
            for (int j = 0; j < kGroup; j++) {
                const int cj = c - kGroup + 1 + j;
                WgmmaRs<MmaBF16, kN>::mma(acc0, a[(p * kSteps + cj) % kSets][0], desc[j]);
                if constexpr (kBlocks == 2)
                    WgmmaRs<MmaBF16, kN>::mma(acc1, a[(p * kSteps + cj) % kSets][1], desc[j]);
            }
            wgmma_commit();
            wgmma_wait<kInFlight>();
            // The previous stage's last group is done once kInFlight groups of this one
            // are in flight (with none, once the first has been waited for).
            if (c == (kInFlight ? kSets - kGroup - 1 : kGroup - 1))
                mbar_arrive(prev_slot >= 0 ? ring.empty + prev_slot : ring.sink);
        }
        prev_slot = slot;
    };
#pragma unroll 1
    for (int s = 0; s < stages; s += kPass) {
        run_stage(StaticInt<0>{});
        if constexpr (kPass == 3) {
            run_stage(StaticInt<1>{});
            run_stage(StaticInt<2>{});
        }
    }
    wgmma_wait<0>();
    fence_regs(acc0);
    if constexpr (kBlocks == 2) fence_regs(acc1);
    release(ring, prev_slot);
    if constexpr (kBlocks == 1)
#pragma unroll
        for (int i = 0; i < R; i++)
            acc1[i] = 0.0f;
}

/* The K loop over a task of `stages` stages (a runtime count: one loop
 * serves both GEMMs, which halves the kernel's code and its compile time, and
 * the stage loop is not unrolled anyway); valid: the tile's rows that hold
 * tokens. A mostly empty tile runs the wgmmas of a narrower width: a branch
 * per task, outside the loop. For E2M1 weights at 64 tokens the tensor
 * cores, not the decode, bound a full-width step: the half-width one takes
 * half their time (mxfp4-a16 T=1024 3104 -> 2894 us; NVFP4 weights need the
 * math warps' larger register budget for it, MoeConfig::kMathRegs; at 32 and
 * 128 tokens the second loop made the kernels spill). The 64-token tiles of
 * E2M1 weights also run a 40-column loop for tiles of 33-40 tokens, the
 * common tile at T = 1024 on DeepSeek-V3 (an expert gets 32 pairs on average
 * there). A 48-column one first gained mxfp8 3363 -> 3124, nvfp4 3021 ->
 * 2922, mxfp4-a16 2666 -> 2621 (bench/RESULTS.md, fourteenth session); 40
 * columns then mxfp4-a16 2597 -> 2582 (twenty-first session). The 128-token
 * tiles run a 32-column loop for tiles of at most 32 tokens (T = 4096 on an
 * H100: mxfp4-a16 6770 -> 6042 us, nvfp4 7266 -> 6282, nvfp4-a16 7089 ->
 * 6292, mxfp8 7766 -> 7562; 16 columns gained no more; bench/RESULTS.md,
 * nineteenth session), a 96-column one for tiles of 33-96 and, for E2M1
 * weights, a 64-column one for tiles of 33-64 (below). */
template <class C>
__device__ __forceinline__ void
mainloop(const Ring<C> &ring, mj_u32 &it, int stages, int nblk, int valid, const MathThread &m,
         const Launch<C> &L, float (&acc0)[C::kBlockM / 2], float (&acc1)[C::kBlockM / 2]) {
    constexpr bool kHalves = C::kW4 && C::kBlockM == 64;
    constexpr int kHalf = kHalves ? C::kBlockM / 2 : C::kBlockM;
    const bool half = kHalf < C::kBlockM && valid <= kHalf;
    // Not beside a shared expert's block pairs (MoeConfig::kMathRegs).
    constexpr int kNarrow = kHalves && !C::kSharedPairs ? 40 : C::kBlockM;
    const bool narrow = kNarrow < C::kBlockM && valid <= kNarrow;
    // An expert's second 128-token tile holds a few tokens (127 of the 383
    // tiles at T = 4096 on DeepSeek-V3).
    constexpr int kQuarter = C::kBlockM == 128 ? 32 : C::kBlockM;
    const bool quarter = kQuarter < C::kBlockM && valid <= kQuarter;
    // 128-token tiles are also the tile of layers whose experts get 64-96
    // tokens (Qwen3-235B at T = 1024, Kimi K2 at 4096), where all 128 columns
    // doubled the tensor cores' work (H100: Qwen3-235B mxfp4-a16 at 1024 919
    // -> 811 us, Kimi K2 at 4096 6494 -> 5624; twenty-ninth session). Not
    // beside a shared expert's block pairs: Kimi K2's 8-rank mxfp4-a8 kernel
    // with its MXFP8 shared expert spilled.
    constexpr int kLoop96 = C::kBlockM == 128 && !C::kSharedPairs ? 96 : C::kBlockM;
    const bool loop96 = kLoop96 < C::kBlockM && valid <= kLoop96;
    // And tiles of 33-64 of those, about half of Qwen3-235B's at T = 1024
    // (64 pairs an expert on average), a 64-column one (H100: mxfp4-a16 819 ->
    // 761 us, nvfp4 892 -> 836; Kimi K2 mxfp4-a16 at 4096 within 0.5%;
    // thirtieth session). E2M1 weights whose GEMM 1 stores BF16 or NVFP4
    // only: with MXFP8 weights or GEMM 2 inputs the fourth width made
    // DeepSeek-V3's 1-rank mxfp8 and Kimi K2's mxfp4-a8 128-token kernels
    // spill (tests/test_mega_moe_build.c).
    constexpr int kLoop64 =
        C::kBlockM == 128 && !C::kSharedPairs && C::kW4 && C::kL2Fmt != MJ_FMT_MXFP8 ? 64
                                                                                     : C::kBlockM;
    const bool loop64 = kLoop64 < C::kBlockM && valid <= kLoop64;
    // Wide tiles: those of at most 128 tokens run the 128-column loop, those
    // of 129-144 a 144-column one (T = 4096 on an H100: mxfp4-a16 4950 ->
    // 4853 us, nvfp4-a16 5059 -> 4898; twenty-sixth session). Not where the
    // GEMM 1 epilogue quantizes MXFP8 groups (mxfp4-a8) nor beside expert
    // biases (gpt-oss): those kernels spilled. Nor for NVFP4 tokens (the
    // nvfp4 row, 5070 -> 4975 us with it): the loop took that kernel's first
    // compile on the 2-core machine from 2.5 to 3.1 s (Qwen3-235B on four
    // ranks: 3.6 s, where it also spills 4 bytes), past the 3 s target
    // (twenty-seventh and twenty-eighth sessions).
    constexpr int kLoop128 = C::kWideTile ? 128 : C::kBlockM;
    const bool loop128 = kLoop128 < C::kBlockM && valid <= kLoop128;
    constexpr int kLoop144 =
        C::kWideTile && C::kL2Fmt != MJ_FMT_MXFP8 && !C::kBiases && C::kDispatchFmt != MJ_FMT_NVFP4
            ? 144
            : C::kBlockM;
    const bool loop144 = kLoop144 < C::kBlockM && valid <= kLoop144;
    if (loop128)
        mainloop_bf16<C, kLoop128, C>(ring, it, stages, nblk, m, L, acc0, acc1);
    else if (loop144)
        mainloop_bf16<C, kLoop144, C>(ring, it, stages, nblk, m, L, acc0, acc1);
    else if (quarter)
        mainloop_bf16<C, kQuarter, C>(ring, it, stages, nblk, m, L, acc0, acc1);
    else if (loop64)
        mainloop_bf16<C, kLoop64, C>(ring, it, stages, nblk, m, L, acc0, acc1);
    else if (loop96)
        mainloop_bf16<C, kLoop96, C>(ring, it, stages, nblk, m, L, acc0, acc1);
    else if (half)
        mainloop_bf16<C, kHalf, C>(ring, it, stages, nblk, m, L, acc0, acc1);
    else if (narrow)
        mainloop_bf16<C, kNarrow, C>(ring, it, stages, nblk, m, L, acc0, acc1);
    else
        mainloop_bf16<C, C::kBlockM, C>(ring, it, stages, nblk, m, L, acc0, acc1);
}

} // namespace mj

#endif // MJ_MEGA_MOE_MAINLOOP_CUH
