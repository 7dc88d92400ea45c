/*
 * The BF16 dense tensor rate: a loop of nothing but `wgmma m64n256k16` with
 * both operands in shared memory, on every SM, so the FLOPs are exactly
 * grid x warpgroups x iters x MJ_BC_TENSOR_FLOPS_PER_ITER.
 *
 * The operands are random finite BF16 (zeros would switch fewer transistors
 * and run faster than real data), written once before the loop. Each
 * warpgroup keeps one commit group in flight behind the one it issues. At the
 * end every thread stores the sum of its accumulators to sink, which the host
 * checks is finite: the instructions ran on the data, and nothing could
 * discard them as dead.
 */
#ifndef MJ_BENCH_TENSOR_RATE_CUH
#define MJ_BENCH_TENSOR_RATE_CUH

#include "common/wgmma.cuh"
#include "layout/bench_ceilings.h"
#include "mega_moe/pipeline.cuh"

namespace mj {

#define MJ_BC_D8(i)                                                                                \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define MJ_BC_D32(i) MJ_BC_D8(i), MJ_BC_D8(i + 8), MJ_BC_D8(i + 16), MJ_BC_D8(i + 24)

/* d += A B for a 64 x 256 x 16 step, A and B K-major in shared memory. */
__device__ __forceinline__ void wgmma_ss_m64n256k16_bf16(float (&d)[128], mj_u64 desc_a,
                                                         mj_u64 desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, "
                 "%31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
                 "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, "
                 "%61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, "
                 "%76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, "
                 "%91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, "
                 "%105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "
                 "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
                 "%128, %129, p, 1, 1, 0, 0;\n}\n"
                 : MJ_BC_D32(0), MJ_BC_D32(32), MJ_BC_D32(64), MJ_BC_D32(96)
                 : "l"(desc_a), "l"(desc_b), "n"(1));
}

#undef MJ_BC_D32
#undef MJ_BC_D8

/* Two random finite BF16 of magnitude 2^-7..2^-4, from a hash of i. */
__device__ __forceinline__ mj_u32 random_bf16x2(mj_u32 i) {
    mj_u32 x = i * 0x9E3779B1u;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    const mj_u32 lo = (x & 0x807Fu) | ((120u + ((x >> 8) & 3u)) << 7);
    const mj_u32 hi = ((x >> 16) & 0x807Fu) | ((120u + ((x >> 24) & 3u)) << 7);
    return lo | (hi << 16);
}

template <int kWarpgroups>
__global__ void __launch_bounds__(kWarpgroups * 128, 1)
    bench_tensor_rate_kernel(mj_u64 iters, float *sink) {
    constexpr int kSteps = MJ_BC_TENSOR_TILE_K / MJ_BC_TENSOR_K;
    constexpr int kWords = (int)MJ_BC_TENSOR_SMEM_BYTES(kWarpgroups) / 4;
    extern __shared__ __align__(128) unsigned char smem[];
    mj_u32 *words = reinterpret_cast<mj_u32 *>(smem);
    for (int i = threadIdx.x; i < kWords; i += blockDim.x)
        words[i] = random_bf16x2(blockIdx.x * (mj_u32)kWords + (mj_u32)i);
    fence_proxy_async_shared();
    __syncthreads();

    const int wg = threadIdx.x / 128;
    const mj_u32 a = smem_u32(smem + wg * MJ_BC_TENSOR_A_BYTES);
    const mj_u32 b = smem_u32(smem + kWarpgroups * MJ_BC_TENSOR_A_BYTES);
    mj_u64 desc_a[kSteps], desc_b[kSteps];
    for (int k = 0; k < kSteps; k++) {
        desc_a[k] = kmajor_desc(a, k, MJ_BC_TENSOR_M);
        desc_b[k] = kmajor_desc(b, k, MJ_BC_TENSOR_N);
    }
    float d[128];
    for (int i = 0; i < 128; i++)
        d[i] = 0.0f;
    wgmma_fence();
#pragma unroll 1
    for (mj_u64 it = 0; it < iters; it++) {
#pragma unroll
        for (int k = 0; k < kSteps; k++)
            wgmma_ss_m64n256k16_bf16(d, desc_a[k], desc_b[k]);
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    fence_regs(d);
    float sum = 0.0f;
    for (int i = 0; i < 128; i++)
        sum += d[i];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

} // namespace mj

#endif // MJ_BENCH_TENSOR_RATE_CUH
