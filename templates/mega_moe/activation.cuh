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

/* 1 / (1 + e^-x) from the hardware's ex2 and rcp approximations: relative
 * error within about 2^-21 + |x| 2^-24 (rounding x log2(e) adds the second
 * term; NUMERICS.md step 4). IEEE expf and division took half the GEMM 1
 * epilogue, 3 us of a 64-token task (bench/RESULTS.md, eleventh session). */
__device__ __forceinline__ float sigmoid(float x) {
    float e, r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * -1.44269504f));
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
    return r;
}

/* Steps 3-4 on BF16-rounded g and u (as floats). */
template <int kActivation, unsigned kClampBits>
__device__ __forceinline__ float activate(float g, float u) {
    if (kClampBits != 0u && kActivation != MJ_ACT_SITU) {
        const float c = f32_from_bf16(bf16_from_f32(f32_from_bits(kClampBits)));
        g = g < c ? g : c;
        u = u < -c ? -c : (u > c ? c : u);
    }
    if (kActivation == MJ_ACT_SWIGLU) return g * sigmoid(g) * u;
    if (kActivation == MJ_ACT_SWIGLUOAI) return g * sigmoid(1.702f * g) * (u + 1.0f);
    const float h = 4.0f * tanhf(g * 0.25f) * sigmoid(g);
    return h * (25.0f * tanhf(u / 25.0f));
}

} // namespace moe

} // namespace mj

#endif // MJ_MEGA_MOE_ACTIVATION_CUH
