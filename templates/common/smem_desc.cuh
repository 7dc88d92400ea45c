/*
 * Shared-memory matrix descriptors of wgmma (sm_90a), for K-major B tiles.
 * One k16 (BF16) or k32 (E4M3) step is 32 bytes of K.
 *   The token tiles (mj_moe_token_offset): 128B or 64B swizzle.
 *   The ceiling bench's tiles: no swizzle, 8-row x 16-byte core matrices:
 *   byte (n, kb) of a tile with N rows at
 *   ((kb / 16) * (N / 8) + n / 8) * 128 + (n % 8) * 16 + kb % 16.
 * Descriptor fields: start address >> 4 in bits 0..13, leading byte offset
 * >> 4 in 16..29, stride byte offset >> 4 in 32..45, base offset 0 (tiles on
 * their swizzle atoms), layout type in 62..63 (0 none, 1 128B, 2 64B). Host
 * and device compile this file (tests/test_smem_desc.cpp).
 */
#ifndef MJ_SMEM_DESC_CUH
#define MJ_SMEM_DESC_CUH

#include "common/numerics.cuh"

namespace mj {

/* Descriptor of the 32-byte K step `step` of a no-swizzle K-major tile of
 * n_rows rows at shared address tile_addr: leading byte offset = distance
 * between core matrices along K, stride byte offset = along N. */
MJ_HD mj_u64 kmajor_desc(mj_u32 tile_addr, int step, int n_rows) {
    const mj_u32 start = tile_addr + (mj_u32)(step * 2 * (n_rows >> 3) * 128);
    const mj_u64 lbo = (mj_u64)((n_rows >> 3) * 128);
    const mj_u64 sbo = 128;
    return (mj_u64)((start & 0x3ffffu) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32);
}

/* Where the 32-byte K step `step` of a swizzled K-major tile of n_rows rows
 * starts, from the tile: rows come in K blocks of row_bytes (128: 128B
 * swizzle; 64: 64B swizzle), and a step starts inside its K block's first
 * row (a step never leaves its K block). */
MJ_HD mj_u32 swizzled_step_offset(int step, int n_rows, int row_bytes) {
    const int kb = 32 * step;
    return (mj_u32)((kb / row_bytes) * n_rows * row_bytes + kb % row_bytes);
}

/* Descriptor of that step at shared address tile_addr (aligned to 1024): the
 * hardware applies the swizzle to the addresses; stride byte offset = one
 * 8-row atom, the leading byte offset is unused. */
MJ_HD mj_u64 swizzled_kmajor_desc(mj_u32 tile_addr, int step, int n_rows, int row_bytes) {
    const mj_u32 start = tile_addr + swizzled_step_offset(step, n_rows, row_bytes);
    const mj_u64 sbo = (mj_u64)(8 * row_bytes), mode = row_bytes == 128 ? 1u : 2u;
    return (mj_u64)((start & 0x3ffffu) >> 4) | (1ull << 16) | ((sbo >> 4) << 32) | (mode << 62);
}

/* The descriptor of step `step` from that of step 0 (swizzled_kmajor_desc):
 * only the start address field moves, and a shared address (< 2^18) never
 * carries out of it, so one add replaces rebuilding the descriptor. A 64-bit
 * add: with the high word spliced back in, ptxas built each step's
 * descriptor in a fresh uniform register and copied both halves into the
 * wgmma's operand (two UMOV a wgmma step). */
MJ_HD mj_u64 swizzled_desc_step(mj_u64 desc0, int step, int n_rows, int row_bytes) {
    return desc0 + (mj_u64)(swizzled_step_offset(step, n_rows, row_bytes) >> 4);
}

} // namespace mj

#endif // MJ_SMEM_DESC_CUH
