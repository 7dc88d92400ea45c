/*
 * The math warpgroups' K loop over one task: wait for a stage of the ring,
 * read the warpgroup's two weight blocks from it (one LDS.128 per chunk),
 * decode them into A fragments, issue wgmma against the token tile of the
 * same stage, release the stage when the tensor cores are done with it.
 *
 *   BF16 kind: K16 steps accumulate into acc0 / acc1 on the tensor cores,
 *              one or four steps behind each wgmma fence (mainloop_bf16).
 *   FP8 kind:  every K32 step (one block-scale pair) is its own wgmma into a
 *              fresh product, promoted into the fp32 accumulator as
 *              acc += p * (weight scale * token scale) in increasing K; with
 *              folded MXFP4 scales (C::kFold) each row's E2M1 codes decode
 *              through an E5M2 table that carries its block scale, and
 *              acc += p * token scale (the row scale comes in the epilogue;
 *              weight_image.cuh says why the bits are the same). Steps
 *              are issued in batches (fp8_batch) and promoted after one wait:
 *              ptxas serializes a warpgroup that promotes while its own wgmma
 *              runs (C7513 / C7514, even with the two blocks' wgmmas alternating so
 *              that each product is read only after its own wait), so the
 *              batch, and the other warpgroup, hide the latency.
 *
 * Both blocks' wgmma always issue (a block missing from a task's last stage
 * multiplies stale shared memory into a result nobody reads): a branch around
 * wgmma would make ptxas serialize every one of them. The choice of a
 * half-width loop for a mostly empty tile is made once per task (mainloop).
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

    // A stage's parts (mj_moe_ring_bytes): the token tile's data, its token
    // scales (FP8 kind), the weight blocks and their scales.
    __device__ __forceinline__ unsigned char *tokens(int slot) const {
        return base + (mj_u32)slot * C::kBData;
    }
    __device__ __forceinline__ unsigned char *token_scales(int slot) const {
        return base + C::kRingScales + (mj_u32)slot * C::kBScales;
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

/* FP8 kind: the weight scales of one stage for the thread's two rows (16 w + g
 * and 16 w + g + 8) of its kBlocks blocks, read once a stage: word j of a
 * block holds K32 steps 2j and 2j + 1, each as row g's byte then row g + 8's
 * (the image's order). Two LDS.128 a stage replace a 16-bit load per step and
 * block (16 in the 8-token kernel). */
template <class C, int kBlocks = 2> struct StageScales {
    static constexpr int kWords = C::kStageK / 64;
    mj_u32 w[kBlocks][kWords];

    /* block0: the first of the thread's blocks in the stage. */
    __device__ __forceinline__ void load(const unsigned char *st, int nblk, int block0,
                                         const MathThread &m) {
        const unsigned char *sf = st + (mj_u32)nblk * C::kBlkData + (mj_u32)block0 * C::kBlkSf +
                                  (m.w * 8 + m.g) * kWords * 4;
#pragma unroll
        for (int b = 0; b < kBlocks; b++)
            load_words(sf + (mj_u32)b * C::kBlkSf, w[b]);
    }

  private:
    // The widest loads the rows' alignment allows: a row's words start at a
    // multiple of their size (16 bytes with 256-element stages).
    static __device__ __forceinline__ void load_words(const unsigned char *p,
                                                      mj_u32 (&out)[kWords]) {
        if constexpr (kWords % 4 == 0) {
#pragma unroll
            for (int i = 0; i < kWords; i += 4) {
                const uint4 v = lds128(p + 4 * i);
                out[i] = v.x, out[i + 1] = v.y, out[i + 2] = v.z, out[i + 3] = v.w;
            }
        } else if constexpr (kWords % 2 == 0) {
#pragma unroll
            for (int i = 0; i < kWords; i += 2) {
                const uint2 v = *reinterpret_cast<const uint2 *>(p + 4 * i);
                out[i] = v.x, out[i + 1] = v.y;
            }
        } else {
#pragma unroll
            for (int i = 0; i < kWords; i++)
                out[i] = *reinterpret_cast<const mj_u32 *>(p + 4 * i);
        }
    }
};

/* FP8 kind: acc += p * (weight scale * token scale) for K32 step c of the
 * kBlocks blocks (acc1 and p1 unused with one) over the first kN token
 * columns; acc += p * token scale where the
 * decode carries the weight scales (C::kFold). A missing block's product and
 * accumulator are garbage nobody reads: no branch. Token columns from `valid`
 * on are padding nobody reads: with E4M3 weights the promotion, the loop's
 * largest ALU cost, skips their groups of eight (a branch uniform over the
 * warpgroup, after the wait, with no wgmma in flight). With E2M1 weights the
 * same branch made the K loop 6-12% slower at 1-1024 tokens (bench/RESULTS.md,
 * ninth session): they skip only by kN (mainloop). */
template <class C, int kN, int kBlocks>
__device__ __forceinline__ void
promote(float (&acc0)[C::kBlockM / 2], float (&acc1)[C::kBlockM / 2], float (&p0)[kN / 2],
        float (&p1)[kN / 2], const StageScales<C, kBlocks> &ws, const float *token_scales, int c,
        int valid, const MathThread &m) {
    const float *sa = token_scales + c * C::kBlockM;
    if constexpr (C::kFold) {
#pragma unroll
        for (int i = 0; i < kN / 8; i++) {
            const float2 v = *reinterpret_cast<const float2 *>(sa + 8 * i + 2 * m.q);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                acc0[4 * i + 2 * h] = fma_rn(p0[4 * i + 2 * h], v.x, acc0[4 * i + 2 * h]);
                acc0[4 * i + 2 * h + 1] =
                    fma_rn(p0[4 * i + 2 * h + 1], v.y, acc0[4 * i + 2 * h + 1]);
                if constexpr (kBlocks == 1) continue;
                acc1[4 * i + 2 * h] = fma_rn(p1[4 * i + 2 * h], v.x, acc1[4 * i + 2 * h]);
                acc1[4 * i + 2 * h + 1] =
                    fma_rn(p1[4 * i + 2 * h + 1], v.y, acc1[4 * i + 2 * h + 1]);
            }
        }
        return;
    }
    const mj_u32 b0 = ws.w[0][c / 2] >> (16 * (c & 1)),
                 b1 = ws.w[kBlocks - 1][c / 2] >> (16 * (c & 1));
    const float w0g = ue8m0_value(b0 & 0xffu), w0g8 = ue8m0_value(b0 >> 8 & 0xffu);
    const float w1g = ue8m0_value(b1 & 0xffu), w1g8 = ue8m0_value(b1 >> 8 & 0xffu);
#pragma unroll
    for (int i = 0; i < kN / 8; i++) {
        if (!C::kW4 && 8 * i >= valid) break;
        const float2 v = *reinterpret_cast<const float2 *>(sa + 8 * i + 2 * m.q);
        // Scales are powers of two: p * scale is exact and one fma rounds once.
        acc0[4 * i + 0] = fma_rn(p0[4 * i + 0], w0g * v.x, acc0[4 * i + 0]);
        acc0[4 * i + 1] = fma_rn(p0[4 * i + 1], w0g * v.y, acc0[4 * i + 1]);
        acc0[4 * i + 2] = fma_rn(p0[4 * i + 2], w0g8 * v.x, acc0[4 * i + 2]);
        acc0[4 * i + 3] = fma_rn(p0[4 * i + 3], w0g8 * v.y, acc0[4 * i + 3]);
        if constexpr (kBlocks == 1) continue;
        acc1[4 * i + 0] = fma_rn(p1[4 * i + 0], w1g * v.x, acc1[4 * i + 0]);
        acc1[4 * i + 1] = fma_rn(p1[4 * i + 1], w1g * v.y, acc1[4 * i + 1]);
        acc1[4 * i + 2] = fma_rn(p1[4 * i + 2], w1g8 * v.x, acc1[4 * i + 2]);
        acc1[4 * i + 3] = fma_rn(p1[4 * i + 3], w1g8 * v.y, acc1[4 * i + 3]);
    }
}

/* K32 steps the FP8 loop issues before it waits: each in-flight step holds
 * two products (2 x kN/2 registers) and two fragments (8 registers); a batch
 * of them pays one wgmma latency. A power of two dividing the stage's steps.
 * A loop narrower than its tile keeps the tile's accumulators (kBlockM
 * registers) beside its batch: the two together stay within what the narrower
 * tiles' kernels hold without spilling (tests/test_mega_moe_build.c). The
 * 64-token tiles' narrower loops batch two steps (one before: mxfp4-a8 at T =
 * 1024 on an H100 2508 -> 2448 us; bench/RESULTS.md, twenty-first session). */
template <int kBlockM, int kN, int kSteps> constexpr int fp8_batch() {
    int b = kN == kBlockM ? 128 / (kN + 8) : kBlockM == 64 ? 2 : (112 - kBlockM) / (kN + 8);
    int p = 1;
    while (2 * p <= b && 2 * p <= kSteps && kSteps % (2 * p) == 0)
        p *= 2;
    return p;
}

/* kN: the token columns the wgmmas compute (the tile's first kN; the
 * accumulators' other columns stay zero). C: the weights' loop (a shared
 * expert's own, SharedLoopConfig); K: the kernel's, whose ring it reads;
 * kBatchCap: at most so many steps a batch (fp8_batch's otherwise); kBlocks:
 * the warpgroup's blocks of the task, its two of four (2m.wg, 2m.wg + 1 into
 * acc0, acc1), or in a shared expert's tasks of two its one (m.wg, into acc0;
 * acc1 comes back zero). */
template <class C, int kN, class K, int kBatchCap = 64, int kBlocks = 2>
__device__ __forceinline__ void
mainloop_fp8(const Ring<K> &ring, mj_u32 &it, int stages, int nblk, int valid, const MathThread &m,
             const Launch<K> &L, float (&acc0)[C::kBlockM / 2], float (&acc1)[C::kBlockM / 2]) {
    constexpr int R = C::kBlockM / 2, kSteps = C::kStageK / 32;
    constexpr int kBatchMax = fp8_batch<C::kBlockM, kN, kSteps>();
    constexpr int kBatch = kBatchMax < kBatchCap ? kBatchMax : kBatchCap;
    const int block0 = kBlocks * m.wg;
#pragma unroll
    for (int i = 0; i < R; i++) {
        acc0[i] = 0.0f;
        if constexpr (kBlocks == 2) acc1[i] = 0.0f;
    }
    float p[kBatch][kBlocks][kN / 2];
#pragma unroll
    for (int j = 0; j < kBatch; j++)
#pragma unroll
        for (int b = 0; b < kBlocks; b++)
#pragma unroll
            for (int i = 0; i < kN / 2; i++)
                p[j][b][i] = 0.0f;
    mj_u32 a[kBatch][kBlocks][4], words[kBlocks][4];
    // The byte permutes read the table's low word from an ordinary register:
    // given the constant, ptxas kept it in a uniform register and copied it
    // out before every permute (64 moves a stage in the 8-token kernel). m.t
    // >> 7 is 0 in every math thread, which ptxas cannot see.
    const mj_u32 lut_lo = MJ_E2M1_E4M3_LO | (mj_u32)(m.t >> 7);
#pragma unroll 1
    for (int s = 0; s < stages; s++) {
        int slot;
        const unsigned char *st = wait_stage(ring, it, slot, L);
        const float *ts = reinterpret_cast<const float *>(ring.token_scales(slot));
        StageScales<C, kBlocks> ws;
        ws.load(st, nblk, block0, m);
        const mj_u64 desc0 = ring.token_desc(slot);
#pragma unroll
        for (int c0 = 0; c0 < kSteps; c0 += kBatch) {
#pragma unroll
            for (int j = 0; j < kBatch; j++) {
                const int c = c0 + j;
#pragma unroll
                for (int b = 0; b < kBlocks; b++) {
                    const unsigned char *wd = st + (mj_u32)(block0 + b) * C::kBlkData;
                    if (C::kW4) {
                        if (c % 2 == 0) {
                            const uint4 v = lds128(wd + (c / 2) * 2048 + m.t * 16);
                            words[b][0] = v.x, words[b][1] = v.y, words[b][2] = v.z,
                            words[b][3] = v.w;
                        }
#pragma unroll
                        for (int h = 0; h < 2; h++) { // rows 16 w + g + 8 h
                            mj_u32 lo = lut_lo, hi = MJ_E2M1_E4M3_HI;
                            if constexpr (C::kFold)
                                folded_e5m2_table(
                                    byte_perm(ws.w[b][c / 2], 0u, 0x4440u + 2 * (c & 1) + h), lo,
                                    hi);
                            e2m1x8_to_fp8x8(words[b][2 * (c & 1) + h], lo, hi, a[j][b][h],
                                            a[j][b][h + 2]);
                        }
                    } else {
                        const uint4 v = lds128(wd + c * 2048 + m.t * 16);
                        a[j][b][0] = v.x, a[j][b][1] = v.y, a[j][b][2] = v.z, a[j][b][3] = v.w;
                    }
                }
                mj_u64 desc = swizzled_desc_step(desc0, c, C::kBlockM, C::kTokenRowBytes);
#pragma unroll
                for (int b = 0; b < kBlocks; b++)
                    fence_frag(a[j][b]);
                fence_desc(desc);
                wgmma_fence();
#pragma unroll
                for (int b = 0; b < kBlocks; b++) {
                    if constexpr (C::kFold)
                        WgmmaRs<MmaE5M2, kN>::mma_fresh(p[j][b], a[j][b], desc);
                    else
                        WgmmaRs<MmaE4M3, kN>::mma_fresh(p[j][b], a[j][b], desc);
                }
                wgmma_commit();
            }
            wgmma_wait<0>();
#pragma unroll
            for (int j = 0; j < kBatch; j++) {
#pragma unroll
                for (int b = 0; b < kBlocks; b++)
                    fence_regs(p[j][b]);
                promote<C, kN, kBlocks>(acc0, acc1, p[j][0], p[j][kBlocks - 1], ws, ts, c0 + j,
                                        valid, m);
            }
        }
        release(ring, slot);
    }
    if constexpr (kBlocks == 1)
#pragma unroll
        for (int i = 0; i < R; i++)
            acc1[i] = 0.0f;
}

/* kN: the token columns the wgmmas compute (the tile's first kN; the
 * accumulators' other columns stay zero); C, K and kBlocks as for
 * mainloop_fp8. */
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
    // one group decodes while the one before runs. Otherwise step c decodes
    // into set c % kSets while the wgmmas of the kSets - 1 steps before it
    // run: wide tiles, and decodes from 32 tokens, keep two sets, as more
    // spill beside their accumulators (tests/test_mega_moe_build.c); so do
    // loops of one block (a shared expert's), whose four sets of BF16
    // weights made ptxas serialize their wgmmas (C7515).
    constexpr bool kWide = C::kBlockM >= 128 || (kDecoded && C::kBlockM >= 32);
    constexpr int kGroup = kDecoded && !kWide && kSteps % 8 == 0 ? 4 : 1;
    constexpr int kSets = kGroup == 4 ? 8 : kWide || kBlocks == 1 ? 2 : 4;
    constexpr int kInFlight = kSets / kGroup - 1; // groups left running by each wait
    static_assert(kSteps % kSets == 0, "a stage holds whole rounds of fragment sets");
#pragma unroll
    for (int i = 0; i < R; i++) {
        acc0[i] = 0.0f;
        if constexpr (kBlocks == 2) acc1[i] = 0.0f;
    }
    const int block0 = kBlocks * m.wg;
    mj_u32 a[kSets][kBlocks][4], words[kBlocks][4], scale[kBlocks][2];
    int prev_slot = -1;
#pragma unroll 1
    for (int s = 0; s < stages; s++) {
        int slot;
        const unsigned char *st = wait_stage(ring, it, slot, L);
        const mj_u64 desc0 = ring.token_desc(slot);
#pragma unroll
        for (int c = 0; c < kSteps; c++) {
#pragma unroll
            for (int b = 0; b < kBlocks; b++) {
                const unsigned char *wd = st + (mj_u32)(block0 + b) * C::kBlkData;
                if (!kDecoded) {
                    const uint4 v = lds128(wd + c * 2048 + m.t * 16);
                    a[c % kSets][b][0] = v.x, a[c % kSets][b][1] = v.y, a[c % kSets][b][2] = v.z,
                          a[c % kSets][b][3] = v.w;
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
                    a[c % kSets][b][i] = bf16x2_mul(tiny[i], scale[b][i & 1]);
            }
            if (c % kGroup != kGroup - 1) continue;
            mj_u64 desc[kGroup];
#pragma unroll
            for (int j = 0; j < kGroup; j++) {
                const int cj = c - kGroup + 1 + j;
                desc[j] = swizzled_desc_step(desc0, cj, C::kBlockM, C::kTokenRowBytes);
#pragma unroll
                for (int b = 0; b < kBlocks; b++)
                    fence_frag(a[cj % kSets][b]);
                fence_desc(desc[j]);
            }
            wgmma_fence();
#pragma unroll
            for (int j = 0; j < kGroup; j++) {
                const int cj = c - kGroup + 1 + j;
                WgmmaRs<MmaBF16, kN>::mma(acc0, a[cj % kSets][0], desc[j]);
                if constexpr (kBlocks == 2)
                    WgmmaRs<MmaBF16, kN>::mma(acc1, a[cj % kSets][1], desc[j]);
            }
            wgmma_commit();
            wgmma_wait<kInFlight>();
            // The previous stage's last group is done once kInFlight groups of this one
            // are in flight.
            if (c == kSets - kGroup - 1)
                mbar_arrive(prev_slot >= 0 ? ring.empty + prev_slot : ring.sink);
        }
        prev_slot = slot;
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

/* The K loop of the kernel's kind over a task of `stages` stages (a runtime
 * count: one loop serves both GEMMs, which halves the kernel's code and its
 * compile time, and the stage loop is not unrolled anyway); valid:
 * the tile's rows that hold tokens. A tile of 32 or more tokens that is at
 * most half full runs the wgmmas of half its width: a branch per task,
 * outside the loop. The FP8 kind's
 * promotion and products halve with them, and its batch may grow (16-token
 * tiles too where their stages hold a multiple of eight K32 steps: with six,
 * the second loop made gpt-oss's mxfp4-a8 kernel spill). For E2M1 weights on the
 * BF16 kind, at 64 tokens the tensor cores, not the decode, bound a
 * full-width step: the half-width one takes half their time (mxfp4-a16
 * T=1024 3104 -> 2894 us; NVFP4 weights need the math warps' larger register
 * budget for it, MoeConfig::kMathRegs; at 32 and 128 tokens the second loop
 * made the kernels spill). The 64-token tiles of both also run a 40-column
 * loop for tiles of 33-40 tokens, the common tile at T = 1024 on DeepSeek-V3
 * (an expert gets 32 pairs on average there). A 48-column one first gained
 * mxfp4-a8 2684 -> 2500 us, mxfp8 3363 -> 3124, nvfp4 3021 -> 2922,
 * mxfp4-a16 2666 -> 2621 (bench/RESULTS.md, fourteenth session); 40 columns
 * then mxfp4-a16 2597 -> 2582 (twenty-first session). The BF16
 * kind's 128-token tiles run a 32-column loop for tiles of at most 32 tokens
 * (T = 4096 on an H100: mxfp4-a16 6770 -> 6042 us, nvfp4 7266 -> 6282,
 * nvfp4-a16 7089 -> 6292, mxfp8 7766 -> 7562; 16 columns gained no more;
 * bench/RESULTS.md, nineteenth session). */
template <class C>
__device__ __forceinline__ void
mainloop(const Ring<C> &ring, mj_u32 &it, int stages, int nblk, int valid, const MathThread &m,
         const Launch<C> &L, float (&acc0)[C::kBlockM / 2], float (&acc1)[C::kBlockM / 2]) {
    constexpr bool kHalves = C::kFp8
                                 ? C::kBlockM >= 32 || (C::kBlockM == 16 && C::kStageK % 256 == 0)
                                 : C::kW4 && C::kBlockM == 64;
    constexpr int kHalf = kHalves ? C::kBlockM / 2 : C::kBlockM;
    const bool half = kHalf < C::kBlockM && valid <= kHalf;
    // The 64-token tiles that have a half-width loop also have a narrow
    // one (40 columns), but for E2M1 weights on the FP8 kind
    // in stages of six K32 steps, where the third loop made gpt-oss's
    // mxfp4-a8 kernel spill, as a second one did at 16 tokens, and beside a
    // shared expert's block pairs on the BF16 kind (MoeConfig::kMathRegs).
    constexpr bool kSixSteps = C::kFp8 && C::kW4 && C::kStageK % 256 != 0;
    constexpr int kNarrow =
        kHalves && C::kBlockM == 64 && !kSixSteps && !C::kBf16Pairs ? 40 : C::kBlockM;
    const bool narrow = kNarrow < C::kBlockM && valid <= kNarrow;
    // An expert's second 128-token tile holds a few tokens (127 of the 383
    // tiles at T = 4096 on DeepSeek-V3).
    constexpr int kQuarter = !C::kFp8 && C::kBlockM == 128 ? 32 : C::kBlockM;
    // Wide tiles: those of at most 128 tokens run the 128-column loop.
    constexpr int kLoop128 = C::kWideTile ? 128 : C::kBlockM;
    const bool loop128 = kLoop128 < C::kBlockM && valid <= kLoop128;
    const bool quarter = kQuarter < C::kBlockM && valid <= kQuarter;
    if constexpr (C::kFp8) {
        if (half)
            mainloop_fp8<C, kHalf, C>(ring, it, stages, nblk, valid, m, L, acc0, acc1);
        else if (narrow)
            mainloop_fp8<C, kNarrow, C>(ring, it, stages, nblk, valid, m, L, acc0, acc1);
        else
            mainloop_fp8<C, C::kBlockM, C>(ring, it, stages, nblk, valid, m, L, acc0, acc1);
    } else {
        if (loop128)
            mainloop_bf16<C, kLoop128, C>(ring, it, stages, nblk, m, L, acc0, acc1);
        else if (quarter)
            mainloop_bf16<C, kQuarter, C>(ring, it, stages, nblk, m, L, acc0, acc1);
        else if (half)
            mainloop_bf16<C, kHalf, C>(ring, it, stages, nblk, m, L, acc0, acc1);
        else if (narrow)
            mainloop_bf16<C, kNarrow, C>(ring, it, stages, nblk, m, L, acc0, acc1);
        else
            mainloop_bf16<C, C::kBlockM, C>(ring, it, stages, nblk, m, L, acc0, acc1);
    }
}

} // namespace mj

#endif // MJ_MEGA_MOE_MAINLOOP_CUH
