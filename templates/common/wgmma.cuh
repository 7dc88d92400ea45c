/*
 * Hopper warpgroup MMA (wgmma, sm_90a) for the MegaMoE GEMMs, swap-AB: the
 * decoded BF16 weights are the register operand A (64 rows per warpgroup) and
 * the tokens are the shared-memory operand B (N = 8..64 tokens), FP32
 * accumulators in registers.
 *
 * Fragments (thread = warp w of the warpgroup, lane = 4 g + q):
 *   A, m64 x k16: a[0] = (row 16w+g, k 2q..2q+1), a[1] = (row +8, same k),
 *                 a[2] = (row 16w+g, k 2q+8..2q+9), a[3] = (row +8, same k);
 *                 the lower k is the low half of each BF16 pair.
 *   D, m64 x nN:  d[4i+0..1] = (row 16w+g, col 8i+2q..+1),
 *                 d[4i+2..3] = (row 16w+g+8, col 8i+2q..+1).
 * B lives in shared memory without swizzle, K-major, as 8 x 16-byte core
 * matrices: element (n, k) of a tile with N rows and BLOCK_K columns is at byte
 * ((k / 8) * (N / 8) + n / 8) * 128 + (n % 8) * 16 + (k % 8) * 2.
 */
#ifndef MJ_WGMMA_CUH
#define MJ_WGMMA_CUH

#include "layout/symm_layout.h"

namespace mj {

/* Byte offset of element (n, k) in a no-swizzle K-major tile of n_rows rows. */
__device__ __forceinline__ mj_u32 kmajor_offset(int n, int k, int n_rows) {
    return (mj_u32)(((k >> 3) * (n_rows >> 3) + (n >> 3)) * 128 + (n & 7) * 16 + (k & 7) * 2);
}

__device__ __forceinline__ mj_u32 smem_address(const void *p) {
    mj_u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

/* Matrix descriptor of the k16 slice starting at core-matrix column kc2 * 2:
 * leading byte offset = distance between core matrices along K, stride byte
 * offset = distance between core matrices along N, no swizzle. */
__device__ __forceinline__ mj_u64 kmajor_desc(mj_u32 tile_addr, int k16, int n_rows) {
    const mj_u32 start = tile_addr + (mj_u32)(k16 * 2 * (n_rows >> 3) * 128);
    const mj_u64 lbo = (mj_u64)((n_rows >> 3) * 128);
    const mj_u64 sbo = 128;
    return (mj_u64)((start & 0x3ffffu) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32);
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait_all() {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/* Makes ordinary shared-memory stores visible to the tensor cores' reads. */
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* D += A * B for one k16 step (scale-d predicate true: accumulate). */
template <int N> struct Wgmma;

template <> struct Wgmma<8> {
    static __device__ __forceinline__ void mma(float (&d)[4], const mj_u32 (&a)[4], mj_u64 desc) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};

template <> struct Wgmma<16> {
    static __device__ __forceinline__ void mma(float (&d)[8], const mj_u32 (&a)[4], mj_u64 desc) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                     "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                       "+f"(d[6]), "+f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};

template <> struct Wgmma<32> {
    static __device__ __forceinline__ void mma(float (&d)[16], const mj_u32 (&a)[4], mj_u64 desc) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, "
                     "%20, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                       "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                       "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};

template <> struct Wgmma<64> {
    static __device__ __forceinline__ void mma(float (&d)[32], const mj_u32 (&a)[4], mj_u64 desc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
            "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%"
            "23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
              "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
              "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
              "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
              "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
              "+f"(d[31])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};

} // namespace mj

#endif // MJ_WGMMA_CUH
