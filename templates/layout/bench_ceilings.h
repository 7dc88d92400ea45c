/*
 * Launch shape and work counts of the bench-ceiling family (plain C for gcc
 * and NVRTC; macros so kernels get constants): the kernels `megajit bench`
 * measures the card's own limits with, in the same run as the MegaMoE numbers
 * it divides by them.
 *
 * Bulk read: one CTA per SM, one thread issuing 1-D bulk copies of
 * MJ_BC_BULK_STAGE_BYTES into a ring of MJ_BC_BULK_STAGES shared-memory
 * stages, each completing on its own mbarrier; 192 KiB in flight per SM is
 * past the 64 KiB at which one thread's bulk copies reach the read ceiling
 * (measured on the H200: the team reference ../shared/reference/megamoe-sm90-fast-design.md §0,
 * beside the repository).
 *
 * Tensor rate: one CTA per SM of MJ_BC_TENSOR_WARPGROUPS warpgroups, each
 * issuing BF16 `wgmma m64n256k16` with both operands in shared memory (A: its
 * own 64 x 64 tile, B: one 256 x 64 tile they share) over K = 64 per loop
 * iteration, fp32 accumulators in registers; nothing else in the loop.
 *
 * Clock probe: the SM clock the card runs at the moment it runs (below).
 */
#ifndef MJ_BENCH_CEILINGS_H
#define MJ_BENCH_CEILINGS_H

#define MJ_BC_BULK_STAGE_BYTES 32768
#define MJ_BC_BULK_STAGES 6
#define MJ_BC_BULK_THREADS 32
#define MJ_BC_BULK_SMEM_BYTES(stage_bytes, stages) ((unsigned)(stage_bytes) * (unsigned)(stages))

#define MJ_BC_TENSOR_WARPGROUPS 2
#define MJ_BC_TENSOR_M 64
#define MJ_BC_TENSOR_N 256
#define MJ_BC_TENSOR_K 16      /* one instruction */
#define MJ_BC_TENSOR_TILE_K 64 /* one loop iteration: 4 instructions */
#define MJ_BC_TENSOR_A_BYTES (MJ_BC_TENSOR_M * MJ_BC_TENSOR_TILE_K * 2)
#define MJ_BC_TENSOR_B_BYTES (MJ_BC_TENSOR_N * MJ_BC_TENSOR_TILE_K * 2)
#define MJ_BC_TENSOR_SMEM_BYTES(warpgroups)                                                        \
    ((unsigned)(warpgroups)*MJ_BC_TENSOR_A_BYTES + MJ_BC_TENSOR_B_BYTES)
/* FLOPs one warpgroup does per loop iteration: 2 M N K over the tile's K. */
#define MJ_BC_TENSOR_FLOPS_PER_ITER (2.0 * MJ_BC_TENSOR_M * MJ_BC_TENSOR_N * MJ_BC_TENSOR_TILE_K)

/* Clock probe: one CTA of one warp, whose first thread counts SM cycles over
 * MJ_BC_CLOCK_WINDOW_US of the global timer. On an H100 it read up to 2%
 * above the card's 1980 MHz maximum (2010-2025 MHz, bench/RESULTS.md,
 * thirty-second session): a reading tells full clock from a power cap's
 * 1400-1700 MHz, not a few percent. */
#define MJ_BC_CLOCK_THREADS 32
#define MJ_BC_CLOCK_WINDOW_US 100

/* The error word's codes (a kernel that fails writes one and stops). */
#define MJ_BC_ERR_BULK_TIMEOUT 1u /* a bulk copy did not complete in time */

#endif /* MJ_BENCH_CEILINGS_H */
