/*
 * Exact decoding of block-scaled values into BF16 for the BF16 tensor cores.
 * Every element times its block scale is exact in BF16: E2M1 x UE4M3 needs 6
 * significant bits, E4M3 or E2M1 x 2^k needs 4, and the weight loader keeps
 * UE8M0 weight scales where no product under- or overflows BF16.
 */
#ifndef MJ_MEGA_MOE_DECODE_CUH
#define MJ_MEGA_MOE_DECODE_CUH

#include "common/numerics.cuh"
#include "layout/symm_layout.h"

namespace mj {

__device__ __forceinline__ float f32_from_e2m1(mj_u32 code) {
    // {0, 0.5, 1, 1.5, 2, 3, 4, 6}: index i < 2 is i/2, else (2 + (i & 1)) << ((i >> 1) - 1) / 2.
    const mj_u32 i = code & 7u;
    const float mag = i < 2u ? 0.5f * (float)i : (float)((2u + (i & 1u)) << ((i >> 1) - 1u)) * 0.5f;
    return (code & 8u) ? -mag : mag;
}

/* Value of one block-scale byte of format fmt. */
template <int kFmt> __device__ __forceinline__ float block_scale(unsigned char s) {
    return kFmt == MJ_FMT_NVFP4 ? f32_from_e4m3(s) : f32_from_bits((mj_u32)s << 23);
}

__device__ __forceinline__ mj_u32 pack_bf16x2(float lo, float hi) {
    return (mj_u32)bf16_from_f32(lo) | ((mj_u32)bf16_from_f32(hi) << 16);
}

/* Elements k, k+1 (k even) of a row stored in fmt, times their block scale,
 * as a BF16 pair (lower k in the low half). row: the row's data; sf_row: its
 * scale bytes (unused for BF16). */
template <int kFmt>
__device__ __forceinline__ mj_u32 decode_pair(const unsigned char *row, const unsigned char *sf_row,
                                              int k) {
    if (kFmt == MJ_FMT_BF16) return *reinterpret_cast<const mj_u32 *>(row + 2 * k);
    const float s = block_scale<kFmt>(sf_row[k / mj_format_group(kFmt)]);
    if (kFmt == MJ_FMT_MXFP8) {
        const unsigned short two = *reinterpret_cast<const unsigned short *>(row + k);
        return pack_bf16x2(f32_from_e4m3((unsigned char)(two & 0xffu)) * s,
                           f32_from_e4m3((unsigned char)(two >> 8)) * s);
    }
    const unsigned char byte = row[k / 2];
    return pack_bf16x2(f32_from_e2m1(byte & 0xfu) * s, f32_from_e2m1(byte >> 4) * s);
}

} // namespace mj

#endif // MJ_MEGA_MOE_DECODE_CUH
