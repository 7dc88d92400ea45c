/*
 * The read ceiling for streaming weights: how fast one thread per SM can pull
 * a buffer far larger than L2 into shared memory with 1-D bulk copies, the
 * way the MegaMoE weight producer does (mega_moe/pipeline.cuh's copies, L2
 * evict-first), with nothing consuming the data.
 *
 * CTA b copies chunks b, b + grid, b + 2 grid, ... of kStageBytes each into a
 * ring of kStages stages; before reusing a stage it waits for the copy that
 * last filled it, so kStages copies are in flight at all times. Each CTA adds
 * the bytes it saw complete to *bytes_done, so the host can tell that every
 * copy it counts did land. A copy that never completes (a bug) makes the CTA
 * record MJ_BC_ERR_BULK_TIMEOUT in *error and stop after timeout_ns.
 */
#ifndef MJ_BENCH_BULK_READ_CUH
#define MJ_BENCH_BULK_READ_CUH

#include "layout/bench_ceilings.h"
#include "mega_moe/pipeline.cuh"

namespace mj {

template <int kStageBytes, int kStages>
__global__ void __launch_bounds__(MJ_BC_BULK_THREADS, 1)
    bench_bulk_read_kernel(const unsigned char *src, mj_u64 num_chunks, mj_u64 timeout_ns,
                           mj_u64 *bytes_done, mj_u32 *error) {
    static_assert(kStageBytes % 16 == 0 && kStageBytes < (1 << 20),
                  "a bulk copy moves a multiple of 16 bytes, and an mbarrier phase < 1 MiB");
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ __align__(8) mj_u64 full[kStages];
    if (threadIdx.x != 0) return;
    for (int s = 0; s < kStages; s++)
        mbar_init(&full[s], 1);
    fence_mbar_init();
    const mj_u64 policy = policy_evict_first();
    const mj_u64 first = blockIdx.x, step = gridDim.x;
    const mj_u64 mine = num_chunks > first ? (num_chunks - first + step - 1) / step : 0;
    for (mj_u64 i = 0; i < mine; i++) {
        const int s = (int)(i % kStages);
        const mj_u64 use = i / kStages;
        if (use > 0 && !mbar_wait(&full[s], (mj_u32)((use - 1) & 1), timeout_ns)) {
            atomicExch(error, MJ_BC_ERR_BULK_TIMEOUT);
            return;
        }
        mbar_arrive_tx(&full[s], kStageBytes);
        bulk_copy_hint(ring + s * kStageBytes, src + (first + i * step) * kStageBytes, kStageBytes,
                       &full[s], policy);
    }
    /* The last copy of each stage is still in flight. */
    for (mj_u64 i = mine > kStages ? mine - kStages : 0; i < mine; i++)
        if (!mbar_wait(&full[i % kStages], (mj_u32)((i / kStages) & 1), timeout_ns)) {
            atomicExch(error, MJ_BC_ERR_BULK_TIMEOUT);
            return;
        }
    atomicAdd(bytes_done, mine * (mj_u64)kStageBytes);
}

} // namespace mj

#endif // MJ_BENCH_BULK_READ_CUH
