/*
 * Weight decoders: the words of a weight image (weight_image.cuh) into wgmma
 * A fragments, and block-scale bytes into the values the math needs. Every
 * decode is exact: E2M1 and E4M3 are exact in BF16, and either times a
 * rebased UE8M0 or UE4M3 scale is exact in BF16 for the scale bytes the
 * weight loader accepts. Host and device compile this file
 * (tests/test_weight_image.cpp).
 */
#ifndef MJ_MEGA_MOE_DECODE_CUH
#define MJ_MEGA_MOE_DECODE_CUH

#include "common/numerics.cuh"

namespace mj {

/* w rotated right by s (0 < s < 32): one funnel shift. */
MJ_HD mj_u32 rotate_right(mj_u32 w, int s) {
#if defined(__CUDA_ARCH__)
    return __funnelshift_r(w, w, (unsigned)s);
#else
    return (w >> s) | (w << (32 - s));
#endif
}

/* One E2M1 image word (weight_image.cuh) into register i of a K16 step,
 * each value E2M1 x 2^-126: the code's 3 magnitude bits are the two low
 * exponent bits and the top mantissa bit, so code 1 (0.5) is the BF16
 * subnormal 2^-127. Register i is the word masked after a shift or rotation
 * (register 3 two, its m bits from one): 9 instructions a word. No layout
 * makes every register one move and one mask
 * (bench/results/2026-12-06-s22/e2m1_layouts.py); the shifts of the one
 * before took 10 (the 64-token K loop: 381 -> 349 a stage;
 * mxfp4-a16 at T = 1024 on an H200 2499 -> 2418 us, bench/RESULTS.md,
 * twenty-second session). Two of the four moves are left shifts, which ptxas
 * issues as IMAD.SHL on the FMA pipe beside the ALU pipe's LOP3 and funnel
 * shifts. */
MJ_HD mj_u32 e2m1x2_to_bf16x2_tiny(mj_u32 w, int i) {
    constexpr mj_u32 kPair = 0x81C081C0u; // bits 6..8 and 15 of both halves
    if (i == 0) return w & kPair;
    if (i == 1) return rotate_right(w, 4) & kPair;
    if (i == 2) return (w << 6) & kPair;
    return (rotate_right(w, 6) & 0x81808180u) | ((w << 2) & 0x00400040u);
}

/* One E4M3 image word (weight_image.cuh) into its two registers of a
 * K16 step, each value E4M3 x 2^-120: the byte's exponent and mantissa bits
 * become the BF16's low exponent and top mantissa bits (E4M3 subnormals
 * BF16 subnormals). */
MJ_HD void e4m3x4_to_bf16x2_tiny(mj_u32 w, mj_u32 &first, mj_u32 &second) {
    first = w & 0x87F087F0u;
    second = ((w << 4) & 0x80F080F0u) | ((w >> 4) & 0x07000700u);
}

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

/* The BF16 pair (both halves) that one rebased image scale byte stands for:
 * 2^126 x scale / 2^r of its row (weight_image.cuh), one IMAD. */
template <int kFmt> MJ_HD mj_u32 rebased_multiplier(mj_u32 byte) {
    return kFmt == MJ_FMT_NVFP4 ? byte * 0x00100010u + 0x6F806F80u : byte * 0x00800080u;
}

/* fp32 value of a UE8M0 scale byte (e >= 1). */
MJ_HD float ue8m0_value(mj_u32 byte) {
    return f32_from_bits(byte << 23);
}

} // namespace mj

#endif // MJ_MEGA_MOE_DECODE_CUH
