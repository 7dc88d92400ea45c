/*
 * Element and block-scale conversions of NUMERICS.md, shared by the kernels
 * and by host tests (tests/test_kernel_math.cpp compiles this file with g++
 * and compares it with tests/reference/quant.c). Only integer/bit operations
 * and IEEE single + - * / are used, so the host build and a device build with
 * --fmad=false produce the same bytes. The one exception is the hardware E4M3
 * conversion in pack_e4m3x8 on the device, which rounds identically (RNE,
 * saturating) and is checked bit for bit against the reference on the GPU,
 * and the hardware BF16 rounding of bf16x2_rn, which differs from
 * bf16_from_f32 only in the payload of a NaN (no rule of NUMERICS.md reads it).
 */
#ifndef MJ_NUMERICS_CUH
#define MJ_NUMERICS_CUH

#include "layout/symm_layout.h"

#ifndef __CUDACC_RTC__
#include <math.h>
#endif

#if defined(__CUDACC_RTC__)
#define MJ_HD __device__ __forceinline__
#elif defined(__CUDACC__)
#define MJ_HD __host__ __device__ __forceinline__
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
// The quotient is NaN only as Inf / Inf (an Inf in the group, so pts is Inf);
// its byte is 0x7f whatever sign the platform gives that NaN.
MJ_HD unsigned char nvfp4_group_sf(float amax, float pts) {
    float six_pts = 6.0f * pts;
    float q = amax / six_pts;
    return q != q ? (unsigned char)0x7f : e4m3_from_f32(q);
}

// Multiplier that takes a group's x into the E2M1 range (0 for an all-zero
// group), from the value s of its scale byte.
MJ_HD float nvfp4_inv_of_scale(float s, float pts) {
    return s > 0.0f ? 1.0f / (s * pts) : 0.0f;
}

MJ_HD float nvfp4_group_inv(unsigned char sf, float pts) {
    return nvfp4_inv_of_scale(f32_from_e4m3(sf), pts);
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

#if defined(__CUDA_ARCH__)
// The two E4M3 bytes of a 16-bit pair as fp32 (exact, as f32_from_e4m3).
__device__ __forceinline__ void f32x2_from_e4m3x2(mj_u32 pair, float &lo, float &hi) {
    mj_u32 h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)pair));
    asm("{ .reg .f16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }"
        : "=f"(lo), "=f"(hi)
        : "r"(h2));
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
    // The hardware writes every NaN as 0x7f; the contract keeps the element's sign.
    if (!nan) {
        out[0] = cvt_e4m3x2(p[0], p[1]) | (cvt_e4m3x2(p[2], p[3]) << 16);
        out[1] = cvt_e4m3x2(p[4], p[5]) | (cvt_e4m3x2(p[6], p[7]) << 16);
        return;
    }
#endif
    // A NaN element keeps its own sign: it is converted before the multiply,
    // which would give the platform's default NaN.
    for (int w = 0; w < 2; w++) {
        mj_u32 r = 0;
        for (int i = 0; i < 4; i++) {
            const float x = v[4 * w + i];
            r |= (mj_u32)e4m3_from_f32(x != x ? x : x * scale) << (8 * i);
        }
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

// Two E2M1 codes (the low nibble first) times their UE4M3 scale s, as a BF16
// pair, given scale63 = s x 2^63 (NVFP4 token rows into BF16 tiles). A code's
// magnitude bits placed as an f32's low exponent bits and top mantissa bit
// give code x 2^-126 (subnormal under 1); multiplied by s x 2^63 and by 2^63,
// both exact, that is code x s, which has at most six significant bits within
// BF16's normal range: the f32's top half is bf16_from_f32 of it, with a
// few instructions instead of a decode, a multiply and a rounding each
// (tests/test_kernel_math.cpp checks every code and scale).
MJ_HD mj_u32 bf16x2_from_e2m1x2(mj_u32 codes, float scale63) {
    const float two63 = f32_from_bits(0x5f000000u);
    const mj_u32 hi = codes >> 4;
    const float a = f32_from_bits((codes & 7u) << 22 | (codes & 8u) << 28) * scale63 * two63;
    const float b = f32_from_bits((hi & 7u) << 22 | (hi & 8u) << 28) * scale63 * two63;
    return f32_bits(a) >> 16 | (f32_bits(b) & 0xffff0000u);
}

// s x 2^63 for bf16x2_from_e2m1x2, from a UE4M3 scale byte.
MJ_HD float e4m3_scale63(unsigned char b) {
    return f32_from_e4m3(b) * f32_from_bits(0x5f000000u);
}

// ---------------------------------------------------------------------------
// Whole-group fast paths of the pre-dispatch kernel. They give the bytes of the
// scalar helpers above (tests/test_kernel_math.cpp checks that exhaustively on
// the host) at a fraction of the instructions: the group scale is read from
// bits, E2M1 rounding is done by three clamped roundings in packed or fp32
// arithmetic, and codes and signs are packed with byte permutes.

// Two-lane and saturating primitives: one PTX instruction each on the device,
// an exact model of it on the host.
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ mj_u32 u16x2_max(mj_u32 a, mj_u32 b) {
    mj_u32 d;
    asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
// a * b + c (mod 2^32) as one instruction: ptxas splits a shifted difference
// into a subtract and a shift.
__device__ __forceinline__ mj_u32 mad_u32(mj_u32 a, mj_u32 b, mj_u32 c) {
    mj_u32 d;
    asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ mj_u32 f16x2_fma(mj_u32 a, mj_u32 b, mj_u32 c) {
    mj_u32 d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
// Clamped to [0, 1] per lane; a NaN lane becomes +0.
__device__ __forceinline__ mj_u32 f16x2_fma_sat(mj_u32 a, mj_u32 b, mj_u32 c) {
    mj_u32 d;
    asm("fma.rn.sat.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
// max(|a|, |b|) per lane with the sign bit = sign(a) ^ sign(b); a NaN lane
// yields the other operand's lane.
__device__ __forceinline__ mj_u32 bf16x2_max_abs(mj_u32 a, mj_u32 b) {
    mj_u32 d;
    asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
// As bf16x2_max_abs, but a NaN lane in either operand gives a NaN lane.
__device__ __forceinline__ mj_u32 bf16x2_max_abs_nan(mj_u32 a, mj_u32 b) {
    mj_u32 d;
    asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
// |x| folded into the consuming instruction as an operand modifier.
__device__ __forceinline__ float magnitude(float x) {
    return fabsf(x);
}
// Byte i of the result = byte ((sel >> 4i) & 7) of the pair (hi:lo).
__device__ __forceinline__ mj_u32 byte_perm(mj_u32 lo, mj_u32 hi, mj_u32 sel) {
    mj_u32 d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(lo), "r"(hi), "r"(sel));
    return d;
}
__device__ __forceinline__ float fma_rn(float a, float b, float c) {
    float d;
    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
    return d;
}
// Clamped to [0, 1]; a NaN result becomes +0.
__device__ __forceinline__ float fma_sat(float a, float b, float c) {
    float d;
    asm("fma.rn.sat.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
    return d;
}
// bf16_from_f32 of both (lo in the low half) in one instruction: the same
// bits for every non-NaN input; a NaN becomes the canonical NaN.
__device__ __forceinline__ mj_u32 bf16x2_rn(float lo, float hi) {
    mj_u32 d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}
#else
inline mj_u32 mad_u32(mj_u32 a, mj_u32 b, mj_u32 c) {
    return a * b + c;
}
inline mj_u32 u16x2_max(mj_u32 a, mj_u32 b) {
    mj_u32 lo = (a & 0xffffu) > (b & 0xffffu) ? a & 0xffffu : b & 0xffffu;
    mj_u32 hi = (a >> 16) > (b >> 16) ? a >> 16 : b >> 16;
    return lo | hi << 16;
}
inline float bf16_lane(mj_u32 w, int lane) {
    return f32_from_bits(lane ? w & 0xffff0000u : w << 16);
}
// IEEE binary16 lanes: value of bits, and RNE of an exactly known value
// (normal and subnormal range; the callers' values are far from overflow).
inline double f16_value(mj_u32 h) {
    const int e = (int)((h >> 10) & 31u), m = (int)(h & 1023u);
    const double mag = e ? ldexp(1024.0 + m, e - 25) : ldexp((double)m, -24);
    return (h & 0x8000u) ? -mag : mag;
}
inline mj_u32 f16_round(double d) {
    if (d == 0.0) return signbit(d) ? 0x8000u : 0u;
    int ex;
    frexp(d, &ex);
    const int lsb = ex - 11 < -24 ? -24 : ex - 11;    // binary16 keeps 11 significant bits
    const double q = nearbyint(ldexp(fabs(d), -lsb)); // round-half-even in the default mode
    // q * 2^lsb: a normal value has q in [1024, 2048] (2048 carries into the exponent).
    mj_u32 bits;
    if (lsb == -24 && q < 1024.0)
        bits = (mj_u32)q;
    else {
        const int e = lsb + 25 + (q >= 2048.0 ? 1 : 0);
        const double m = q >= 2048.0 ? q / 2.0 : q;
        bits = (mj_u32)e << 10 | ((mj_u32)m - 1024u);
    }
    return (d < 0.0 ? 0x8000u : 0u) | bits;
}
// a * b + c is exact in double for every use here (products of values with at
// most 11 significant bits by small powers of two, plus small integers), so
// one rounding follows, as in fma.
inline mj_u32 f16x2_fma_lanes(mj_u32 a, mj_u32 b, mj_u32 c, bool sat) {
    mj_u32 r = 0;
    for (int l = 0; l < 2; l++) {
        const int sh = 16 * l;
        const double v = f16_value((a >> sh) & 0xffffu) * f16_value((b >> sh) & 0xffffu) +
                         f16_value((c >> sh) & 0xffffu);
        mj_u32 h = f16_round(v);
        if (sat) h = (h & 0x8000u) || v != v ? 0u : h > 0x3c00u ? 0x3c00u : h;
        r |= h << sh;
    }
    return r;
}
inline mj_u32 f16x2_fma(mj_u32 a, mj_u32 b, mj_u32 c) {
    return f16x2_fma_lanes(a, b, c, false);
}
inline mj_u32 f16x2_fma_sat(mj_u32 a, mj_u32 b, mj_u32 c) {
    return f16x2_fma_lanes(a, b, c, true);
}
inline mj_u32 bf16x2_max_abs(mj_u32 a, mj_u32 b) {
    mj_u32 r = 0;
    for (int l = 0; l < 2; l++) {
        const mj_u32 x = (a >> (16 * l)) & 0xffffu, y = (b >> (16 * l)) & 0xffffu;
        const float fx = bf16_lane(x & 0x7fffu, 0), fy = bf16_lane(y & 0x7fffu, 0);
        const mj_u32 mag = fy != fy || fx > fy ? x & 0x7fffu : y & 0x7fffu;
        r |= (mag | ((x ^ y) & 0x8000u)) << (16 * l);
    }
    return r;
}
inline mj_u32 bf16x2_max_abs_nan(mj_u32 a, mj_u32 b) {
    mj_u32 r = 0;
    for (int l = 0; l < 2; l++) {
        const mj_u32 x = (a >> (16 * l)) & 0x7fffu, y = (b >> (16 * l)) & 0x7fffu;
        const mj_u32 sign = ((a ^ b) >> (16 * l)) & 0x8000u;
        const mj_u32 mag = x > 0x7f80u || y > 0x7f80u ? 0x7fffu : x > y ? x : y;
        r |= (mag | sign) << (16 * l);
    }
    return r;
}
inline float magnitude(float x) {
    return abs_f32(x);
}
inline mj_u32 byte_perm(mj_u32 lo, mj_u32 hi, mj_u32 sel) {
    const unsigned long long pair = (unsigned long long)hi << 32 | lo;
    mj_u32 r = 0;
    for (int i = 0; i < 4; i++)
        r |= (mj_u32)((pair >> (8 * ((sel >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
    return r;
}
inline float fma_rn(float a, float b, float c) {
    return fmaf(a, b, c);
}
inline float fma_sat(float a, float b, float c) {
    float d = fmaf(a, b, c);
    return d != d || d < 0.0f ? 0.0f : d > 1.0f ? 1.0f : d;
}
inline mj_u32 bf16x2_rn(float lo, float hi) {
    return (mj_u32)bf16_from_f32(lo) | (mj_u32)bf16_from_f32(hi) << 16;
}
#endif

// E2M1_RNE(x * inv) x s (NUMERICS.md, the L1 epilogue's NVFP4 into BF16
// tiles) without the code: inv8 = inv / 8 and s8 = 8 s, both exact. |x| inv /
// 8, saturated to [0, 1] (a NaN to 0), takes E2M1's grid / 8 by adding M
// (RNE at the ulp of M: 2^-4 below 1/4, 2^-3 below 1/2, 2^-2 above, as
// e2m1_from_f32's three steps) and is clamped to 6 / 8; the fma with +0 keeps a
// zero code's sign off. At most six significant bits: the top half is the
// exact BF16 (tests/test_kernel_math.cpp checks every scale byte against the
// code path).
MJ_HD float nvfp4_requant(float x, float inv8, float s8) {
    const float t = fma_sat(abs_f32(x), inv8, 0.0f);
    const float m = t < 0.25f ? 524288.0f : t < 0.5f ? 1048576.0f : 2097152.0f;
    float r = (t + m) - m;
    r = r < 0.75f ? r : 0.75f;
    return fma_rn(r, f32_from_bits(f32_bits(s8) | (f32_bits(x) & 0x80000000u)), 0.0f);
}

// Max of the BF16 magnitudes in n words (pairs), as BF16 bits, with any NaN
// winning: a result >= MJ_BF16_SPECIAL flags a block holding Inf or NaN, which
// the fast paths leave to the scalar helpers.
MJ_HD mj_u32 bf16_abs_max(const mj_u32 *words, int n) {
    mj_u32 m = words[0];
    for (int i = 1; i < n; i++)
        m = bf16x2_max_abs_nan(m, words[i]);
    return bf16x2_max_abs_nan(m, m >> 16) & 0x7fffu;
}

#define MJ_BF16_SPECIAL 0x7f80u /* group max bits at or above: Inf or NaN */

// max_num over |x| of n words (BF16 pairs, any signs), as an fp32 value: NaN
// elements are ignored and an all-NaN group gives 0, as amax_x8 does.
MJ_HD float bf16_abs_max_num(const mj_u32 *words, int n) {
    mj_u32 m = words[0];
    for (int i = 1; i < n; i++)
        m = bf16x2_max_abs(m, words[i]);
    m = bf16x2_max_abs(m, m >> 16) & 0x7fffu;
    return m > MJ_BF16_SPECIAL ? 0.0f : f32_from_bits(m << 16);
}

// ue8m0_for_amax for a finite BF16 amax (bits), without its division. With
// Q = q * 2^k (6 = 1.5 * 2^2, 448 = 1.75 * 2^8) and a = max(amax, 1e-4):
// fl(a / Q) <= 2^j exactly when a <= Q * 2^j, because RNE is monotone and any
// float a above Q * 2^j is at least Q * 2^j (1 + 2^-23 / q), past the midpoint
// 2^j (1 + 2^-24) after the division (q < 2). So the smallest such j is
// E - k, plus one when a's significand exceeds q, and it lies in [113, 253]:
// no clamping is needed.
MJ_HD unsigned char ue8m0_for_bf16_amax(mj_u32 amax_bits, int fmt) {
    const float amax = f32_from_bits(amax_bits << 16);
    const mj_u32 u = f32_bits(amax > MJ_SCALE_FLOOR ? amax : MJ_SCALE_FLOOR);
    const mj_u32 k = fmt == MJ_FMT_MXFP8 ? 8u : 2u;
    const mj_u32 q = fmt == MJ_FMT_MXFP8 ? 0x600000u : 0x400000u;
    return (unsigned char)((u >> 23) - k + ((u & 0x7fffffu) > q ? 1u : 0u));
}

// Codes sit in bytes 0 and 2 of each word: gather them as bytes, fold
// neighbours into nibbles, keep every other byte.
MJ_HD mj_u32 pack_code_halves_x8(const mj_u32 words[4]) {
    mj_u32 q01 = byte_perm(words[0], words[1], 0x6420u),
           q23 = byte_perm(words[2], words[3], 0x6420u);
    q01 += q01 >> 4;
    q23 += q23 >> 4;
    return byte_perm(q01, q23, 0x6420u);
}

// E2M1 codes (without signs) of 8 elements y = |x| * 2^(127-e), x given as
// BF16 pairs (any signs), packed as output nibbles; needs y <= 6 (a finite
// block under its own UE8M0 scale e, which is >= 111). y is made binary16 by
// integer arithmetic on both lanes at once: its BF16 bits are x's plus
// (127-e) << 7, and rebiasing the exponent by 112 and shifting 3 left gives
// binary16 bits, exact down to 2^-14; anything smaller clamps to 0, and is
// code 0 either way. With d = (e - 15) << 7: h = (max(|x| bits, d) - d) << 3,
// and no lane borrows or overflows into the other. The code then follows as
// in e2m1_code_word, in binary16 (11 bits hold y's 8), onto 1024 (ulp 1):
// each lane holds 0x6400 + code.
MJ_HD mj_u32 e2m1_codes_x8_pow2(const mj_u32 words[4], unsigned e) {
    const mj_u32 d = ((e - 15u) << 7) * 0x10001u, d8 = d << 3;
    const mj_u32 half = 0x38003800u, one = 0x3c003c00u, two = 0x40004000u, four = 0x44004400u;
    const mj_u32 m = 0x64006400u, zero = 0u, minus_one = 0xbc00bc00u, minus_two = 0xc000c000u;
    mj_u32 sums[4];
    for (int i = 0; i < 4; i++) {
        const mj_u32 h = mad_u32(u16x2_max(words[i] & 0x7fff7fffu, d), 8u, 0u - d8);
        const mj_u32 s0 = f16x2_fma_sat(h, half, zero), s1 = f16x2_fma_sat(h, half, minus_one),
                     s2 = f16x2_fma_sat(h, half, minus_two);
        sums[i] = f16x2_fma(s2, one, f16x2_fma(s1, two, f16x2_fma(s0, four, m)));
    }
    return pack_code_halves_x8(sums);
}

// E2M1 code of |y| (y >= 0 after fabs, or NaN) in the low byte of the
// result, by the three terms of e2m1_codes_x8_pow2 in fp32: saturating fmas
// give min(y, 2) / 2, clamp(y - 2, 0, 2) / 2 and clamp(y - 4, 0, 2) / 2 (exact
// where they matter: y / 2 - 1 and y / 2 - 2 by Sterbenz), and three fmas add
// 4x, 2x and 1x of them onto 2^23 (ulp 1). Only one term is fractional for any
// y and the others are then exact integers (4 and 2 for the lower terms once
// a higher one is non-zero), so the chain rounds once, where it matters. Above
// 6 every term saturates (code 7); .sat turns a NaN into 0 (code 0), as
// e2m1_from_f32 does. The result is bits(2^23) + code.
MJ_HD mj_u32 e2m1_code_word(float y) {
    const float m = 8388608.0f;
    const float s0 = fma_sat(y, 0.5f, 0.0f), s1 = fma_sat(y, 0.5f, -1.0f),
                s2 = fma_sat(y, 0.5f, -2.0f);
    return f32_bits(fma_rn(s2, 1.0f, fma_rn(s1, 2.0f, fma_rn(s0, 4.0f, m))));
}

// E2M1 codes (without signs) of 8 elements |v[i]| * scale, packed as nibbles.
MJ_HD mj_u32 e2m1_codes_x8(const float v[8], float scale) {
    mj_u32 pairs[4];
    for (int b = 0; b < 4; b++)
        pairs[b] = e2m1_code_word(magnitude(v[2 * b]) * scale) +
                   (e2m1_code_word(magnitude(v[2 * b + 1]) * scale) << 4);
    return byte_perm(byte_perm(pairs[0], pairs[1], 0x0040u), byte_perm(pairs[2], pairs[3], 0x0040u),
                     0x5410u);
}

// Sign bits of 8 BF16 elements (4 pairs) where the E2M1 nibbles keep theirs:
// bit 3 of byte b = element 2b, bit 7 = element 2b+1.
MJ_HD mj_u32 e2m1_signs_x8(const mj_u32 words[4]) {
    const mj_u32 m01 =
        byte_perm(words[0], words[1], 0x7351u); // elements 0 2 1 3, bit 7 of each byte
    const mj_u32 m23 = byte_perm(words[2], words[3], 0x7351u); // elements 4 6 5 7
    const mj_u32 even = byte_perm(m01, m23, 0x5410u), odd = byte_perm(m01, m23, 0x7632u);
    return ((even >> 4) & 0x08080808u) | (odd & 0x80808080u);
}

// Adding 7 carries into bit 3 of a nibble exactly when its code is non-zero,
// so a zero code keeps no sign (E2M1 never produces -0).
MJ_HD mj_u32 e2m1_with_signs(mj_u32 codes, mj_u32 signs) {
    return codes | (signs & (codes + 0x77777777u));
}

// Two E4M3 bytes (the low one first) times a UE8M0 scale 2^(e - 127) as a
// BF16 pair: exact for scale bytes e from 3, where E4M3's steps of 2^-9 stay
// at or above BF16's 2^-133 (tests/test_kernel_math.cpp checks every byte and
// scale); beyond BF16's largest finite value it gives infinity, as fp32 does.
MJ_HD mj_u32 bf16x2_of_e4m3x2(mj_u32 pair, float scale) {
#if defined(__CUDA_ARCH__)
    float lo, hi;
    f32x2_from_e4m3x2(pair, lo, hi);
    return bf16x2_rn(lo * scale, hi * scale);
#else
    return (mj_u32)bf16_from_f32(f32_from_e4m3((unsigned char)(pair & 0xffu)) * scale) |
           (mj_u32)bf16_from_f32(f32_from_e4m3((unsigned char)(pair >> 8 & 0xffu)) * scale) << 16;
#endif
}

#if defined(__CUDA_ARCH__)
// Eight of them (two words, element order) as four pairs.
__device__ __forceinline__ uint4 bf16x8_of_mxfp8(mj_u32 w0, mj_u32 w1, float scale) {
    return make_uint4(bf16x2_of_e4m3x2(w0, scale), bf16x2_of_e4m3x2(w0 >> 16, scale),
                      bf16x2_of_e4m3x2(w1, scale), bf16x2_of_e4m3x2(w1 >> 16, scale));
}
#endif

} // namespace mj

#endif // MJ_NUMERICS_CUH
