/*
 * Hopper warpgroup MMA (wgmma, sm_90a) as the MegaMoE GEMMs use it, swap-AB:
 * decoded weights are the register operand A (64 rows per instruction) and the
 * tokens the shared-memory operand B (N = 8..160 tokens), fp32 accumulators in
 * registers.
 *
 * Fragments (thread = warp w of the warpgroup, lane = 4 g + q):
 *   A, BF16 m64 x k16: a[0] = (row 16w+g, k 2q..2q+1), a[1] = (row +8, same k),
 *                      a[2] = (row 16w+g, k 2q+8..2q+9), a[3] = (row +8, same k),
 *                      the lower k in the lower half;
 *   D, m64 x nN:       d[4i+0..1] = (row 16w+g, col 8i+2q..+1),
 *                      d[4i+2..3] = (row 16w+g+8, col 8i+2q..+1).
 * B lives in shared memory, read through descriptors (smem_desc.cuh).
 */
#ifndef MJ_WGMMA_CUH
#define MJ_WGMMA_CUH

#include "common/smem_desc.cuh"
#include "common/wgmma_ops.cuh"

namespace mj {

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/* Waits until at most N committed groups of this warpgroup are pending. */
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving accumulator accesses across a wgmma
 * boundary it cannot see (the asm reads and writes them asynchronously). */
template <int R> __device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* Pins a fragment's or descriptor's computation before the next wgmma.fence:
 * an input defined between the fence and its wgmma serializes the wgmma. */
__device__ __forceinline__ void fence_frag(mj_u32 (&a)[4]) {
    asm volatile("" : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3])::"memory");
}
__device__ __forceinline__ void fence_desc(mj_u64 &d) {
    asm volatile("" : "+l"(d)::"memory");
}

} // namespace mj

#endif // MJ_WGMMA_CUH
