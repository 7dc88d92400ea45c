/*
 * Combine on the home rank (NUMERICS.md step 8): y[t] = BF16(fp32 sum of the
 * valid slots in increasing k, then a fused shared expert's slot K, which
 * every token has). Items are 512 hidden elements of one token (two
 * 16-byte loads a lane and slot); math warps that have run out of tasks
 * claim them and wait for the token's arrivals (valid slots x GEMM 2
 * warpgroup units), so a token is summed as soon as its last slot lands,
 * while other CTAs still compute. The producer warps, at 40-64 registers,
 * do not combine: all of an item's loads in flight need the math warps'
 * registers, and with them the combine runs at a copy's pace (H100,
 * DeepSeek-V3 mxfp4-a16 at T = 4096: the combine after the last task 336
 * -> 189 us a CTA, with 256-element items and four slots' loads in flight
 * in every warp before; bench/RESULTS.md, twenty-fourth session).
 */
#ifndef MJ_MEGA_MOE_COMBINE_CUH
#define MJ_MEGA_MOE_COMBINE_CUH

#include "mega_moe/launch.cuh"

namespace mj {

template <class C> __device__ __forceinline__ void combine(const Launch<C> &L, int lane) {
    constexpr int kChunks = (C::kHidden + 511) / 512;
    constexpr int kSlots = C::kTopk + (C::kShared ? 1 : 0);
    const int items = L.args->num_tokens * kChunks;
    const int *ids = reinterpret_cast<const int *>(L.own + L.in.topk_idx_offset);
    mj_u32 *claims = L.bank() + L.l.bank.combine_claim;
    // An item costs a round trip for its token's slot ids (a lane each) with
    // its arrival count, then one for the slots' loads, all in flight at
    // once; the next item is claimed meanwhile.
    mj_u32 next = lane == 0 ? claim(claims) : 0u;
    for (;;) {
        const int item = (int)__shfl_sync(0xffffffffu, next, 0);
        if (item >= items) return;
        if (lane == 0) next = claim(claims);
        const int t = item / kChunks, h = (item % kChunks) * 512 + 8 * lane;
        mj_u64 valid = 0;
        mj_u32 arrived = 0;
#pragma unroll
        for (int k0 = 0; k0 < C::kTopk; k0 += 32) {
            const bool slot = k0 + lane < C::kTopk && ids[t * C::kTopk + k0 + lane] >= 0;
            if (k0 == 0 && lane == 0) arrived = ld_acquire<C::kSys>(L.arrive() + t);
            valid |= (mj_u64)__ballot_sync(0xffffffffu, slot) << k0;
        }
        const mj_u32 target =
            ((mj_u32)__popcll(valid) + (C::kShared ? 1u : 0u)) * (mj_u32)C::kUnits2;
        if (lane == 0 && arrived < target &&
            !wait_geq<C::kSys>(L.arrive() + t, target, L.args->timeout_ns))
            L.fail(MJ_MOE_ERR_COMBINE, (mj_u32)t);
        __syncwarp();
        if (h >= C::kHidden) continue;
        const bool second = h + 256 < C::kHidden;
        // Predicated loads, no branch around them (behind a branch on the
        // slot's validity, each load waited for the sum of the one before).
        uint4 v[kSlots][2];
#pragma unroll
        for (int k = 0; k < kSlots; k++) {
            const bool use = k >= C::kTopk || ((valid >> k) & 1u);
            const unsigned short *src =
                L.combine_slots() + ((mj_u64)k * C::kMaxTokens + (mj_u64)t) * C::kHidden + h;
            v[k][0] = ld_cg_v4_if(src, use);
            v[k][1] = ld_cg_v4_if(src + 256, use && second);
        }
#pragma unroll
        for (int half = 0; half < 2; half++) {
            if (half == 1 && !second) break;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
            for (int k = 0; k < kSlots; k++) {
                if (k < C::kTopk && !((valid >> k) & 1u)) continue;
                const mj_u32 w[4] = {v[k][half].x, v[k][half].y, v[k][half].z, v[k][half].w};
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    acc[2 * i] = acc[2 * i] + f32_from_bits(w[i] << 16);
                    acc[2 * i + 1] = acc[2 * i + 1] + f32_from_bits(w[i] & 0xffff0000u);
                }
            }
            mj_u32 o[4];
#pragma unroll
            for (int i = 0; i < 4; i++)
                o[i] = bf16x2_rn(acc[2 * i], acc[2 * i + 1]);
            *reinterpret_cast<uint4 *>(L.args->y + (mj_u64)t * C::kHidden + h + 256 * half) =
                make_uint4(o[0], o[1], o[2], o[3]);
        }
    }
}

} // namespace mj

#endif // MJ_MEGA_MOE_COMBINE_CUH
