/*
 * The math warpgroups' K loop over one task: wait for a stage of the ring,
 * read the warpgroup's two weight blocks from it (one LDS.128 per chunk),
 * decode them into A fragments, issue wgmma against the token tile of the
 * same stage, release the stage when the tensor cores are done with it.
 *
 *   BF16 kind: K16 steps accumulate into acc0 / acc1 on the tensor cores.
 *   FP8 kind:  every K32 step (one block-scale pair) is its own wgmma into a
 *              fresh product, promoted into the fp32 accumulator as
 *              acc += p * (weight scale * token scale) in increasing K; the
 *              other math warpgroup's wgmma overlaps one's promotion (ptxas
 *              serializes a warpgroup that promotes while its own wgmma runs).
 *
 * Both blocks' wgmma always issue (a block missing from a task's last stage
 * multiplies stale shared memory into a result nobody reads): a branch around
 * wgmma would make ptxas serialize every one of them.
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
    mj_u64 *empty; // [kStages]: the 8 math warps are done with the stage

    __device__ __forceinline__ unsigned char *stage(int slot) const {
        return base + (mj_u32)slot * C::kRingStage;
    }
};

/* A thread of a math warpgroup: warp w, lane = 4 g + q. */
struct MathThread {
    int wg, t, w, lane, g, q;
};

__device__ __forceinline__ uint4 lds128(const unsigned char *p) {
    return *reinterpret_cast<const uint4 *>(p);
}

template <class C>
__device__ __forceinline__ void release(const Ring<C> &ring, int slot, const MathThread &m) {
    if (m.lane == 0) mbar_arrive(ring.empty + slot);
}

template <class C>
__device__ __forceinline__ unsigned char *wait_stage(const Ring<C> &ring, mj_u32 &it, int &slot,
                                                     const Launch<C> &L) {
    slot = (int)(it % C::kStages);
    const mj_u32 parity = (it / C::kStages) & 1u;
    it++;
    if (!mbar_wait(ring.full + slot, parity, L.args->timeout_ns)) L.fail(MJ_MOE_ERR_PIPE, 1u);
    return ring.stage(slot);
}

/* FP8 kind: acc += p * (weight scale * token scale) for K32 step c of block b. */
template <class C>
__device__ __forceinline__ void promote(float (&acc)[C::kBlockM / 2], float (&p)[C::kBlockM / 2],
                                        const unsigned char *st, int nblk, int b, int c,
                                        const MathThread &m) {
    constexpr int kSteps = C::kStageK / 32;
    const unsigned char *sf = st + (mj_u32)nblk * C::kBlkData + (mj_u32)(2 * m.wg + b) * C::kBlkSf;
    const mj_u32 pair = *reinterpret_cast<const unsigned short *>(sf + (m.w * 8 + m.g) * kSteps * 2 + 2 * c);
    const float sg = ue8m0_value(pair & 0xffu), sg8 = ue8m0_value(pair >> 8);
    const float *sa = reinterpret_cast<const float *>(st + C::kWStage + C::kBData) + c * C::kBlockM;
#pragma unroll
    for (int i = 0; i < C::kBlockM / 8; i++) {
        const float2 v = *reinterpret_cast<const float2 *>(sa + 8 * i + 2 * m.q);
        // Scales are powers of two: p * scale is exact and one fma rounds once.
        acc[4 * i + 0] = fma_rn(p[4 * i + 0], sg * v.x, acc[4 * i + 0]);
        acc[4 * i + 1] = fma_rn(p[4 * i + 1], sg * v.y, acc[4 * i + 1]);
        acc[4 * i + 2] = fma_rn(p[4 * i + 2], sg8 * v.x, acc[4 * i + 2]);
        acc[4 * i + 3] = fma_rn(p[4 * i + 3], sg8 * v.y, acc[4 * i + 3]);
    }
}

template <class C, int kNumStages>
__device__ __forceinline__ void mainloop_fp8(const Ring<C> &ring, mj_u32 &it, int nb, int nblk,
                                             const MathThread &m, const Launch<C> &L,
                                             float (&acc0)[C::kBlockM / 2],
                                             float (&acc1)[C::kBlockM / 2]) {
    constexpr int R = C::kBlockM / 2, kSteps = C::kStageK / 32;
#pragma unroll
    for (int i = 0; i < R; i++)
        acc0[i] = acc1[i] = 0.0f;
    float p0[R], p1[R];
#pragma unroll
    for (int i = 0; i < R; i++)
        p0[i] = p1[i] = 0.0f;
    mj_u32 a[2][4], words[2][4];
    for (int s = 0; s < kNumStages; s++) {
        int slot;
        const unsigned char *st = wait_stage(ring, it, slot, L);
        const mj_u32 b_addr = smem_u32(st + C::kWStage);
#pragma unroll
        for (int c = 0; c < kSteps; c++) {
#pragma unroll
            for (int b = 0; b < 2; b++) {
                const unsigned char *wd = st + (mj_u32)(2 * m.wg + b) * C::kBlkData;
                if (C::kW4) {
                    if (c % 2 == 0) {
                        const uint4 v = lds128(wd + (c / 2) * 2048 + m.t * 16);
                        words[b][0] = v.x, words[b][1] = v.y, words[b][2] = v.z, words[b][3] = v.w;
                    }
                    e2m1x8_to_e4m3x8(words[b][2 * (c & 1)], a[b][0], a[b][2]);
                    e2m1x8_to_e4m3x8(words[b][2 * (c & 1) + 1], a[b][1], a[b][3]);
                } else {
                    const uint4 v = lds128(wd + c * 2048 + m.t * 16);
                    a[b][0] = v.x, a[b][1] = v.y, a[b][2] = v.z, a[b][3] = v.w;
                }
            }
            mj_u64 desc = kmajor_desc(b_addr, c, C::kBlockM);
            fence_frag(a[0]);
            fence_frag(a[1]);
            fence_desc(desc);
            wgmma_fence();
            WgmmaRs<MmaE4M3, C::kBlockM>::mma_fresh(p0, a[0], desc);
            WgmmaRs<MmaE4M3, C::kBlockM>::mma_fresh(p1, a[1], desc);
            wgmma_commit();
            wgmma_wait<0>();
            fence_regs(p0);
            fence_regs(p1);
            if (nb > 0) promote<C>(acc0, p0, st, nblk, 0, c, m);
            if (nb > 1) promote<C>(acc1, p1, st, nblk, 1, c, m);
        }
        release(ring, slot, m);
    }
}

template <class C, int kNumStages>
__device__ __forceinline__ void mainloop_bf16(const Ring<C> &ring, mj_u32 &it, int nb, int nblk,
                                              const MathThread &m, const Launch<C> &L,
                                              float (&acc0)[C::kBlockM / 2],
                                              float (&acc1)[C::kBlockM / 2]) {
    constexpr int R = C::kBlockM / 2, kSteps = C::kStageK / 16;
    constexpr int kGroups = C::kWGroup ? C::kStageK / C::kWGroup : 1;
#pragma unroll
    for (int i = 0; i < R; i++)
        acc0[i] = acc1[i] = 0.0f;
    mj_u32 a[2][2][4], words[2][4], scale[2][2];
    int prev_slot = -1;
    for (int s = 0; s < kNumStages; s++) {
        int slot;
        const unsigned char *st = wait_stage(ring, it, slot, L);
        const mj_u32 b_addr = smem_u32(st + C::kWStage);
#pragma unroll
        for (int c = 0; c < kSteps; c++) {
#pragma unroll
            for (int b = 0; b < 2; b++) {
                const unsigned char *wd = st + (mj_u32)(2 * m.wg + b) * C::kBlkData;
                if (!C::kW4) {
                    const uint4 v = lds128(wd + c * 2048 + m.t * 16);
                    a[c & 1][b][0] = v.x, a[c & 1][b][1] = v.y, a[c & 1][b][2] = v.z, a[c & 1][b][3] = v.w;
                    continue;
                }
                if (c % 4 == 0) {
                    const uint4 v = lds128(wd + (c / 4) * 2048 + m.t * 16);
                    words[b][0] = v.x, words[b][1] = v.y, words[b][2] = v.z, words[b][3] = v.w;
                }
                // A scale group is one K16 step (NVFP4) or two (MXFP4).
                if (C::kWGroup == 16 || c % 2 == 0) {
                    const int gi = C::kWGroup == 16 ? c : c / 2;
                    const unsigned char *sf = st + (mj_u32)nblk * C::kBlkData +
                                              (mj_u32)(2 * m.wg + b) * C::kBlkSf +
                                              (m.w * 8 + m.g) * kGroups * 2 + 2 * gi;
                    scale[b][0] = scale_bf16x2<C::kWeightFmt>(sf[0]);
                    scale[b][1] = scale_bf16x2<C::kWeightFmt>(sf[1]);
                }
                const mj_u32 word = words[b][c % 4];
#pragma unroll
                for (int i = 0; i < 4; i++)
                    a[c & 1][b][i] = bf16x2_mul(bf16x2_mul(e2m1x2_to_bf16x2_tiny(word, i), MJ_BF16X2_2P126),
                                                scale[b][i & 1]);
            }
            mj_u64 desc = kmajor_desc(b_addr, c, C::kBlockM);
            fence_frag(a[c & 1][0]);
            fence_frag(a[c & 1][1]);
            fence_desc(desc);
            wgmma_fence();
            WgmmaRs<MmaBF16, C::kBlockM>::mma(acc0, a[c & 1][0], desc);
            WgmmaRs<MmaBF16, C::kBlockM>::mma(acc1, a[c & 1][1], desc);
            wgmma_commit();
            wgmma_wait<1>();
            if (c == 0 && prev_slot >= 0) release(ring, prev_slot, m);
        }
        prev_slot = slot;
    }
    wgmma_wait<0>();
    fence_regs(acc0);
    fence_regs(acc1);
    release(ring, prev_slot, m);
}

} // namespace mj

#endif // MJ_MEGA_MOE_MAINLOOP_CUH
