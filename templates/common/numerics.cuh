/*
 * Element and block-scale conversions of NUMERICS.md, shared by the kernels
 * and by host tests (tests/test_kernel_math.cpp compiles this file with g++
 * and compares it with tests/reference/quant.c). Only integer/bit operations
 * and IEEE single + - * / are used, so the host build and a device build with
 * --fmad=false produce the same bytes. The one exception is the hardware E4M3
 * conversion in pack_e4m3x8 on the device, which rounds identically (RNE,
 * saturating) and is checked bit for bit against the reference on the GPU.
 */
#ifndef MJ_NUMERICS_CUH
#define MJ_NUMERICS_CUH

#include "layout/symm_layout.h"

#ifdef __CUDACC__
#define MJ_HD __device__ __forceinline__
#else
#define MJ_HD inline
#endif

// Largest finite magnitudes of the element formats (the Q of the UE8M0 rule).
#define MJ_E4M3_MAX 448.0f
#define MJ_E2M1_MAX 6.0f
#define MJ_SCALE_FLOOR 1e-4f
#define MJ_NVFP4_TOKEN_DIV 2688.0f /* 448 * 6 */

namespace mj {

typedef unsigned short bf16_bits;

// A union rather than memcpy or __float_as_uint: NVRTC gets no headers and the
// host build has no CUDA intrinsics; both compilers define this punning.
MJ_HD mj_u32 f32_bits(float x) {
    union {
        float f;
        mj_u32 u;
    } v;
    v.f = x;
    return v.u;
}

MJ_HD float f32_from_bits(mj_u32 u) {
    union {
        float f;
        mj_u32 u;
    } v;
    v.u = u;
    return v.f;
}

MJ_HD float abs_f32(float x) {
    return f32_from_bits(f32_bits(x) & 0x7fffffffu);
}

// IEEE maxNum: a NaN operand is ignored, so a reduction gives the same result
// in any order (warp shuffles vs. the reference's sequential fmaxf).
MJ_HD float max_num(float a, float b) {
    return (a > b || b != b) ? a : b;
}

MJ_HD float f32_from_bf16(bf16_bits b) {
    return f32_from_bits((mj_u32)b << 16);
}

MJ_HD bf16_bits bf16_from_f32(float x) {
    mj_u32 u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (bf16_bits)((u >> 16) | 0x0040u); // a NaN must not truncate to Inf
    return (bf16_bits)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// OCP e4m3fn, round to nearest even, saturating to +-448; NaN -> 0x7f | sign.
MJ_HD unsigned char e4m3_from_f32(float x) {
    mj_u32 u = f32_bits(x);
    mj_u32 sign = (u >> 24) & 0x80u;
    mj_u32 a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (unsigned char)(sign | 0x7fu);
    mj_u32 mag;
    if (a >= 0x3c800000u) { // >= 2^-6: E4M3 normal range
        // RNE of the fp32 mantissa to 3 bits; a carry moves into the exponent.
        mj_u32 r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
        mag = r - (120u << 3); // rebias 127 -> 7
        if (mag > 0x7eu) mag = 0x7eu;
    } else {
        // Subnormal E4M3: mag = a / 2^-9 rounded to even. With a = M * 2^(ef-150),
        // that is M >> (141 - ef); anything below 2^-10 rounds to 0.
        mj_u32 ef = a >> 23;
        if (ef < 117u) {
            mag = 0;
        } else {
            mj_u32 m = (a & 0x7fffffu) | 0x800000u;
            mj_u32 s = 141u - ef;
            mj_u32 q = m >> s;
            mj_u32 rem = m & ((1u << s) - 1u);
            mj_u32 half = 1u << (s - 1u);
            mag = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
        }
    }
    return (unsigned char)(sign | mag);
}

MJ_HD float f32_from_e4m3(unsigned char b) {
    mj_u32 e = (b >> 3) & 0xfu;
    mj_u32 m = b & 7u;
    mj_u32 sign = (mj_u32)(b & 0x80u) << 24;
    if (e == 0xfu && m == 7u) return f32_from_bits(sign | 0x7fc00000u);
    if (e == 0u) return f32_from_bits(sign | f32_bits((float)m * 0.001953125f)); // m * 2^-9, exact
    return f32_from_bits(sign | ((e + 120u) << 23) | (m << 20));
}

// 4-bit E2M1 code: RNE with saturation to 6, and the sign dropped with a zero
// index so -0 is never produced. Adding M rounds |x| to the ulp of M (RNE) and
// leaves the rounded multiple in M's low mantissa bits: M = 2^22 steps 0.5
// below 2 (codes 0-4), 2^23 steps 1 below 4 (codes 4-6), 2^24 steps 2 above
// (codes 6-7, then saturation). NaN gives 0, as no threshold is crossed.
MJ_HD unsigned char e2m1_from_f32(float x) {
    const float a = abs_f32(x);
    const float magic = a < 2.0f ? 4194304.0f : a < 4.0f ? 8388608.0f : 16777216.0f;
    const mj_u32 first = a < 2.0f ? 0u : a < 4.0f ? 2u : 4u;
    mj_u32 idx = f32_bits(a + magic) - f32_bits(magic) + first;
    idx = idx > 7u ? 7u : idx;
    if (idx == 0u || a != a) return 0;
    return (unsigned char)(((f32_bits(x) >> 28) & 8u) | idx);
}

// UE8M0 byte of the smallest power of two >= v (v > 0): the biased exponent,
// plus one unless the mantissa is zero. Read from the bits: log2f is inexact.
MJ_HD unsigned char ue8m0_ceil(float v) {
    mj_u32 u = f32_bits(v);
    mj_u32 e = (u >> 23) + ((u & 0x7fffffu) != 0u ? 1u : 0u);
    return (unsigned char)(e < 1u ? 1u : e > 254u ? 254u : e);
}

// MXFP8 / MXFP4 activation scale: 2^e >= max(amax, 1e-4) / qmax, e in [1, 254].
MJ_HD unsigned char ue8m0_for_amax(float amax, float qmax) {
    return ue8m0_ceil(max_num(amax, MJ_SCALE_FLOOR) / qmax);
}

// 2^(127 - e) built from bits so x * it is a pure exponent shift; e = 254
// gives the fp32 subnormal 2^-127.
MJ_HD float ue8m0_inv_scale(unsigned char e) {
    return e <= 253 ? f32_from_bits((254u - e) << 23) : f32_from_bits(0x00400000u >> (e - 254u));
}

// NVFP4 per-token scale (x_scales) from the row's max |x|.
MJ_HD float nvfp4_token_scale(float rowmax) {
    return max_num(rowmax, MJ_SCALE_FLOOR) / MJ_NVFP4_TOKEN_DIV;
}

// NVFP4 UE4M3 group scale; 6 * pts is rounded to fp32 before the division.
MJ_HD unsigned char nvfp4_group_sf(float amax, float pts) {
    float six_pts = 6.0f * pts;
    return e4m3_from_f32(amax / six_pts);
}

// Multiplier that takes a group's x into the E2M1 range (0 for an all-zero group).
MJ_HD float nvfp4_group_inv(unsigned char sf, float pts) {
    float s = f32_from_e4m3(sf);
    float denom = s * pts;
    return s > 0.0f ? 1.0f / denom : 0.0f;
}

// Eight BF16 values as one 16-byte load delivers them (little-endian words).
MJ_HD void unpack_bf16x8(const mj_u32 w[4], float v[8]) {
    for (int i = 0; i < 4; i++) {
        v[2 * i] = f32_from_bits(w[i] << 16);
        v[2 * i + 1] = f32_from_bits(w[i] & 0xffff0000u);
    }
}

MJ_HD float amax_x8(const float v[8]) {
    float a = 0.0f;
    for (int i = 0; i < 8; i++)
        a = max_num(a, abs_f32(v[i]));
    return a;
}

#if defined(__CUDA_ARCH__)
// Two elements in one instruction; the first goes to the low byte.
__device__ __forceinline__ mj_u32 cvt_e4m3x2(float lo, float hi) {
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}
#endif

// E4M3(v[i] * scale) for 8 elements, bytes in element order.
MJ_HD void pack_e4m3x8(const float v[8], float scale, mj_u32 out[2]) {
#if defined(__CUDA_ARCH__)
    float p[8];
    bool nan = false;
    for (int i = 0; i < 8; i++) {
        p[i] = v[i] * scale;
        nan |= p[i] != p[i];
    }
    // The hardware writes every NaN as 0x7f; the contract keeps the sign.
    if (!nan) {
        out[0] = cvt_e4m3x2(p[0], p[1]) | (cvt_e4m3x2(p[2], p[3]) << 16);
        out[1] = cvt_e4m3x2(p[4], p[5]) | (cvt_e4m3x2(p[6], p[7]) << 16);
        return;
    }
#endif
    for (int w = 0; w < 2; w++) {
        mj_u32 r = 0;
        for (int i = 0; i < 4; i++)
            r |= (mj_u32)e4m3_from_f32(v[4 * w + i] * scale) << (8 * i);
        out[w] = r;
    }
}

// E2M1(v[i] * scale) for 8 elements: element 2b in the low nibble of byte b.
MJ_HD mj_u32 pack_e2m1x8(const float v[8], float scale) {
    mj_u32 r = 0;
    for (int i = 0; i < 8; i++)
        r |= (mj_u32)e2m1_from_f32(v[i] * scale) << (4 * i);
    return r;
}

} // namespace mj

#endif // MJ_NUMERICS_CUH
