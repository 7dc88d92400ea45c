/*
 * Combine on the home rank (NUMERICS.md step 8): y[t] = BF16(fp32 sum of the
 * valid slots in increasing k). Items are 256 hidden elements of one token;
 * warps that have run out of tasks claim them and wait for the token's
 * arrivals (valid slots x GEMM 2 warpgroup units), so a token is summed as
 * soon as its last slot lands, while other CTAs still compute.
 */
#ifndef MJ_MEGA_MOE_COMBINE_CUH
#define MJ_MEGA_MOE_COMBINE_CUH

#include "mega_moe/launch.cuh"

namespace mj {

template <class C> __device__ __forceinline__ void combine(const Launch<C> &L, int lane) {
    constexpr int kChunks = (C::kHidden + 255) / 256;
    const int tokens = L.args->num_tokens;
    const int *ids = reinterpret_cast<const int *>(L.own + L.in.topk_idx_offset);
    for (;;) {
        mj_u32 item = 0;
        if (lane == 0) item = claim(L.bank + L.l.bank.combine_claim);
        item = __shfl_sync(0xffffffffu, item, 0);
        if ((int)item >= tokens * kChunks) return;
        const int t = (int)item / kChunks, h = ((int)item % kChunks) * 256 + 8 * lane;
        int valid = 0;
        for (int k = 0; k < C::kTopk; k++)
            valid += ids[t * C::kTopk + k] >= 0;
        if (lane == 0 &&
            !wait_geq<C::kSys>(L.arrive() + t, (mj_u32)(valid * C::kUnits2), L.args->timeout_ns))
            L.fail(MJ_MOE_ERR_COMBINE, (mj_u32)t);
        __syncwarp();
        if (h >= C::kHidden) continue;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int k = 0; k < C::kTopk; k++) {
            if (ids[t * C::kTopk + k] < 0) continue;
            const uint4 v =
                ld_cg_v4(L.combine + ((mj_u64)k * C::kMaxTokens + (mj_u64)t) * C::kHidden + h);
            const mj_u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                acc[2 * i] = acc[2 * i] + f32_from_bits(w[i] << 16);
                acc[2 * i + 1] = acc[2 * i + 1] + f32_from_bits(w[i] & 0xffff0000u);
            }
        }
        mj_u32 o[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            o[i] =
                (mj_u32)bf16_from_f32(acc[2 * i]) | ((mj_u32)bf16_from_f32(acc[2 * i + 1]) << 16);
        *reinterpret_cast<uint4 *>(L.args->y + (mj_u64)t * C::kHidden + h) =
            make_uint4(o[0], o[1], o[2], o[3]);
    }
}

} // namespace mj

#endif // MJ_MEGA_MOE_COMBINE_CUH
