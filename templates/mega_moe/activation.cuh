/*
 * NUMERICS.md steps 3-4 on one (intermediate row, token) of the GEMM 1
 * epilogue: clamp and activation of its BF16-rounded gate and up values (the
 * epilogue, epilogue.cuh, rounds them, applies the routing weight and
 * quantizes the GEMM 2 inputs).
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

} // namespace moe

} // namespace mj

#endif // MJ_MEGA_MOE_ACTIVATION_CUH
