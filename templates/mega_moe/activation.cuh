/*
 * NUMERICS.md steps 2-6 on one (intermediate row, token) of the GEMM 1
 * epilogue: BF16 rounding, clamp, activation, routing weight, and the
 * quantization of a group of GEMM 2 inputs.
 */
#ifndef MJ_MEGA_MOE_ACTIVATION_CUH
#define MJ_MEGA_MOE_ACTIVATION_CUH

#include "common/numerics.cuh"
#include "layout/codes.h"

namespace mj {

namespace moe {

/* Steps 3-4 on BF16-rounded g and u (as floats). */
template <int kActivation, unsigned kClampBits>
__device__ __forceinline__ float activate(float g, float u) {
    if (kClampBits != 0u && kActivation != MJ_ACT_SITU) {
        const float c = f32_from_bf16(bf16_from_f32(f32_from_bits(kClampBits)));
        g = g < c ? g : c;
        u = u < -c ? -c : (u > c ? c : u);
    }
    if (kActivation == MJ_ACT_SWIGLU) return g * (1.0f / (1.0f + expf(-g))) * u;
    if (kActivation == MJ_ACT_SWIGLUOAI)
        return g * (1.0f / (1.0f + expf(-(1.702f * g)))) * (u + 1.0f);
    const float h = 4.0f * tanhf(g * 0.25f) * (1.0f / (1.0f + expf(-g)));
    return h * (25.0f * tanhf(u / 25.0f));
}

__device__ __forceinline__ float f32_from_e2m1(mj_u32 code) {
    // {0, 0.5, 1, 1.5, 2, 3, 4, 6}: i < 2 is i / 2, else (2 + (i & 1)) << ((i >> 1) - 1) / 2.
    const mj_u32 i = code & 7u;
    const float mag = i < 2u ? 0.5f * (float)i : (float)((2u + (i & 1u)) << ((i >> 1) - 1u)) * 0.5f;
    return (code & 8u) ? -mag : mag;
}

/* Step 6 for the BF16-stored GEMM 2 inputs: act quantized into the L2 format
 * (BF16 or NVFP4) and decoded back, exact in BF16. n values of one group. */
template <int kL2Fmt> __device__ __forceinline__ void quantize_l2_bf16(float *v, int n) {
    if (kL2Fmt == MJ_FMT_BF16) {
        for (int i = 0; i < n; i++)
            v[i] = f32_from_bf16(bf16_from_f32(v[i]));
        return;
    }
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        amax = max_num(amax, abs_f32(v[i]));
    const unsigned char sf = e4m3_from_f32(amax * 0.16666667f);
    const float s = f32_from_e4m3(sf);
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    for (int i = 0; i < n; i++)
        v[i] = f32_from_e2m1(e2m1_from_f32(v[i] * inv)) * s;
}

} // namespace moe

} // namespace mj

#endif // MJ_MEGA_MOE_ACTIVATION_CUH
