/*
 * Weight decoders: the words of a weight image (weight_image.cuh) into wgmma
 * A fragments, and block-scale bytes into the values the math needs. Every
 * decode is exact: E2M1 is exact in E4M3 and in BF16, E2M1 x UE8M0 and
 * E2M1 x UE4M3 are exact in BF16 for the scale bytes the weight loader
 * accepts. Host and device compile this file (tests/test_weight_image.cpp).
 */
#ifndef MJ_MEGA_MOE_DECODE_CUH
#define MJ_MEGA_MOE_DECODE_CUH

#include "common/numerics.cuh"

namespace mj {

/* E4M3 bytes of the E2M1 magnitudes 0, 0.5, 1, 1.5 and 2, 3, 4, 6. */
#define MJ_E2M1_E4M3_LO 0x3C383000u
#define MJ_E2M1_E4M3_HI 0x4C484440u

/* One FP8-kind E2M1 word into a[0] (bytes of K 4q..) and a[2] (K 4q+16..). */
MJ_HD void e2m1x8_to_e4m3x8(mj_u32 w, mj_u32 &lo, mj_u32 &hi) {
    const mj_u32 mag = w & 0x77777777u;
    lo = byte_perm(MJ_E2M1_E4M3_LO, MJ_E2M1_E4M3_HI, mag) | (w & 0x80808080u);
    hi = byte_perm(MJ_E2M1_E4M3_LO, MJ_E2M1_E4M3_HI, mag >> 16) | ((w << 4) & 0x80808080u);
}

/* One BF16-kind E2M1 word into the four registers of a K16 step, each value
 * E2M1 x 2^-126 (its 3 magnitude bits become the two low exponent bits and
 * the top mantissa bit; code 1, 0.5, is the BF16 subnormal 2^-127).
 * Register i takes nibble i (low half) and nibble 4 + i (high half). */
MJ_HD mj_u32 e2m1x2_to_bf16x2_tiny(mj_u32 w, int i) {
    const int mag_shift = 6 - 4 * i, sign_shift = 12 - 4 * i;
    const mj_u32 mag = mag_shift >= 0 ? w << mag_shift : w >> -mag_shift;
    return (mag & 0x01C001C0u) | ((w << sign_shift) & 0x80008000u);
}

#define MJ_BF16X2_2P126 0x7E807E80u /* 2^126 in both halves */

#if defined(__CUDA_ARCH__)
/* a * b in both BF16 lanes, exact here (the + -0 keeps -0 products -0). */
__device__ __forceinline__ mj_u32 bf16x2_mul(mj_u32 a, mj_u32 b) {
    mj_u32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
}
#else
inline mj_u32 bf16x2_mul(mj_u32 a, mj_u32 b) {
    const float lo = f32_from_bits(a << 16) * f32_from_bits(b << 16);
    const float hi = f32_from_bits(a & 0xffff0000u) * f32_from_bits(b & 0xffff0000u);
    return (mj_u32)bf16_from_f32(lo) | ((mj_u32)bf16_from_f32(hi) << 16);
}
#endif

/* BF16 bits of a block scale byte (UE8M0 or UE4M3), in both halves. */
template <int kFmt> MJ_HD mj_u32 scale_bf16x2(mj_u32 byte) {
    mj_u32 h;
    if (kFmt == MJ_FMT_NVFP4)
        h = bf16_from_f32(f32_from_e4m3((unsigned char)byte)); // exact: 4 significant bits
    else
        h = byte << 7; // 2^(e - 127); the loader keeps e >= 3
    return h | (h << 16);
}

/* The scales of rows g and g + 8 (bytes lo and hi of pair) as BF16 pairs,
 * without a branch (ptxas serializes wgmma around divergent code). */
template <int kFmt> MJ_HD void scale_pair_bf16x2(mj_u32 pair, mj_u32 &lo, mj_u32 &hi) {
#if defined(__CUDA_ARCH__)
    if (kFmt == MJ_FMT_NVFP4) {
        // E4M3 -> f16 is exact in hardware; a UE4M3 value has at most 4
        // significant bits, so its fp32 bits truncate to BF16 exactly.
        mj_u32 h2;
        float a, b;
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)pair));
        asm("{ .reg .f16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }"
            : "=f"(a), "=f"(b)
            : "r"(h2));
        lo = (f32_bits(a) >> 16) * 0x10001u;
        hi = (f32_bits(b) >> 16) * 0x10001u;
        return;
    }
#endif
    lo = scale_bf16x2<kFmt>(pair & 0xffu);
    hi = scale_bf16x2<kFmt>(pair >> 8);
}

/* fp32 value of a UE8M0 scale byte (e >= 1). */
MJ_HD float ue8m0_value(mj_u32 byte) {
    return f32_from_bits(byte << 23);
}

} // namespace mj

#endif // MJ_MEGA_MOE_DECODE_CUH
