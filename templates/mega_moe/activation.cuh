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

/* Steps 3-4 on BF16-rounded g and u (as floats), with C's activation and
 * constants (config.cuh). The swiglu family computes g sigmoid(alpha g) (u +
 * beta): alpha 1 folds away and beta 0 is skipped, so plain swiglu costs what
 * it did before it took parameters; situ divides by its betas in fp32, which
 * for 4 is the exact multiply by 0.25. */
template <class C> __device__ __forceinline__ float activate(float g, float u) {
    const float p0 = f32_from_bits(C::kActParam0Bits), p1 = f32_from_bits(C::kActParam1Bits);
    if (C::kClampBits != 0u && C::kActivation != MJ_ACT_SITU) {
        const float c = f32_from_bf16(bf16_from_f32(f32_from_bits(C::kClampBits)));
        g = g < c ? g : c;
        u = u < -c ? -c : (u > c ? c : u);
    }
    if (C::kActivation != MJ_ACT_SITU) {
        const float v = C::kActParam1Bits == 0u ? u : u + p1;
        return g * sigmoid(p0 * g) * v;
    }
    const float h = p0 * tanhf(g / p0) * sigmoid(g);
    return h * (p1 * tanhf(u / p1));
}

} // namespace moe

} // namespace mj

#endif // MJ_MEGA_MOE_ACTIVATION_CUH
