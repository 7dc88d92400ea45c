/*
 * Hopper warpgroup MMA (wgmma, sm_90a) as the MegaMoE GEMMs use it, swap-AB:
 * decoded weights are the register operand A (64 rows per instruction) and the
 * tokens the shared-memory operand B (N = 8..128 tokens), fp32 accumulators in
 * registers.
 *
 * Fragments (thread = warp w of the warpgroup, lane = 4 g + q):
 *   A, BF16 m64 x k16: a[0] = (row 16w+g, k 2q..2q+1), a[1] = (row +8, same k),
 *                      a[2] = (row 16w+g, k 2q+8..2q+9), a[3] = (row +8, same k);
 *   A, E4M3 m64 x k32: a[0] = (row 16w+g, k 4q..4q+3), a[1] = (row +8, same k),
 *                      a[2] = (row 16w+g, k 4q+16..4q+19), a[3] = (row +8, same k);
 *                      the lower k in the lower half / byte;
 *   D, m64 x nN:       d[4i+0..1] = (row 16w+g, col 8i+2q..+1),
 *                      d[4i+2..3] = (row 16w+g+8, col 8i+2q..+1).
 * B (the token tiles) lives in shared memory K-major with the 128B or 64B
 * swizzle (mj_moe_token_offset); one k16 (BF16) or k32 (E4M3) step is 32
 * bytes of K. The ceiling bench's tiles are K-major without swizzle, as
 * 8-row x 16-byte core matrices: byte (n, kb) of a tile with N rows at
 * ((kb / 16) * (N / 8) + n / 8) * 128 + (n % 8) * 16 + kb % 16.
 */
#ifndef MJ_WGMMA_CUH
#define MJ_WGMMA_CUH

#include "common/wgmma_ops.cuh"
#include "layout/symm_layout.h"

namespace mj {

/* Descriptor of the 32-byte K step `step` of a no-swizzle K-major tile of
 * n_rows rows at shared address tile_addr: leading byte offset = distance
 * between core matrices along K, stride byte offset = along N. */
__device__ __forceinline__ mj_u64 kmajor_desc(mj_u32 tile_addr, int step, int n_rows) {
    const mj_u32 start = tile_addr + (mj_u32)(step * 2 * (n_rows >> 3) * 128);
    const mj_u64 lbo = (mj_u64)((n_rows >> 3) * 128);
    const mj_u64 sbo = 128;
    return (mj_u64)((start & 0x3ffffu) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32);
}

/* Descriptor of the 32-byte K step `step` of a swizzled K-major tile of
 * n_rows rows at shared address tile_addr (aligned to 1024), whose rows come
 * in K blocks of row_bytes (128: 128B swizzle; 64: 64B swizzle): the step
 * starts inside its K block's first row and the hardware applies the swizzle
 * to the addresses; stride byte offset = one 8-row atom, the leading byte
 * offset is unused (a step never leaves its K block). */
__device__ __forceinline__ mj_u64 swizzled_kmajor_desc(mj_u32 tile_addr, int step, int n_rows,
                                                       int row_bytes) {
    const int kb = 32 * step;
    const mj_u32 start =
        tile_addr + (mj_u32)((kb / row_bytes) * n_rows * row_bytes + kb % row_bytes);
    const mj_u64 sbo = (mj_u64)(8 * row_bytes), mode = row_bytes == 128 ? 1u : 2u;
    return (mj_u64)((start & 0x3ffffu) >> 4) | (1ull << 16) | ((sbo >> 4) << 32) | (mode << 62);
}

/* The descriptor of K step `step` from that of step 0 (swizzled_kmajor_desc):
 * only the start address field moves, and a shared address (< 2^18) never
 * carries out of it, so one 32-bit add replaces rebuilding the descriptor. */
__device__ __forceinline__ mj_u64 swizzled_desc_step(mj_u64 desc0, int step, int n_rows,
                                                     int row_bytes) {
    const int kb = 32 * step;
    const mj_u32 lo =
        (mj_u32)desc0 + (mj_u32)(((kb / row_bytes) * n_rows * row_bytes + kb % row_bytes) >> 4);
    return ((desc0 >> 32) << 32) | lo;
}

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
