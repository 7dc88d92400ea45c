/*
 * Barriers of the persistent MegaMoE kernel: across the CTAs of one rank (all
 * co-resident, one per SM) and across ranks through the symmetric buffer.
 * Counters only grow: a barrier waits for the next multiple of its party size,
 * so launches and CUDA-graph replays start with no reset.
 */
#ifndef MJ_MEGA_MOE_SYNC_CUH
#define MJ_MEGA_MOE_SYNC_CUH

#include "layout/moe_layout.h"

namespace mj {

__device__ __forceinline__ mj_u64 ld_acquire_gpu(const mj_u64 *p) {
    mj_u64 v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ mj_u64 ld_acquire_sys(const mj_u64 *p) {
    mj_u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ mj_u64 atom_add_acq_rel_gpu(mj_u64 *p, mj_u64 v) {
    mj_u64 old;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;"
                 : "=l"(old)
                 : "l"(p), "l"(v)
                 : "memory");
    return old;
}

__device__ __forceinline__ void red_release_sys(mj_u64 *p, mj_u64 v) {
    asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

template <class T> __device__ __forceinline__ T *peer_ptr(const mj_peers &peers, int rank, T *own) {
    return reinterpret_cast<T *>(reinterpret_cast<char *>(own) + peers.offsets[rank]);
}

/* All CTAs of this rank. `system`: the writes before it (also to peers) are
 * made visible at system scope first, for a cross-rank barrier to publish. */
template <int kNumCtas> __device__ __forceinline__ void grid_barrier(mj_u64 *ws, bool system) {
    __syncthreads();
    if (threadIdx.x == 0) {
        if (system) __threadfence_system();
        const mj_u64 arrived = atom_add_acq_rel_gpu(ws + MJ_MOE_WS_GRID_ARRIVE, 1ull) + 1ull;
        const mj_u64 target = (arrived + kNumCtas - 1) / kNumCtas * kNumCtas;
        while (ld_acquire_gpu(ws + MJ_MOE_WS_GRID_ARRIVE) < target) {
        }
    }
    __syncthreads();
}

/* All CTAs of all ranks: this rank's CTAs meet, CTA 0 signals every rank and
 * waits for every rank's signal, then releases its CTAs. */
template <int kNumCtas, int kRanks>
__device__ __forceinline__ void cross_rank_barrier(mj_u64 *ws, const mj_peers &peers) {
    grid_barrier<kNumCtas>(ws, true);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (int r = 0; r < kRanks; r++)
            red_release_sys(peer_ptr(peers, r, ws + MJ_MOE_WS_XRANK), 1ull);
        volatile mj_u64 *seen = ws + MJ_MOE_WS_XRANK_SEEN;
        const mj_u64 passed = *seen + 1ull;
        *seen = passed;
        while (ld_acquire_sys(ws + MJ_MOE_WS_XRANK) < passed * kRanks) {
        }
    }
    grid_barrier<kNumCtas>(ws, false);
}

} // namespace mj

#endif // MJ_MEGA_MOE_SYNC_CUH
