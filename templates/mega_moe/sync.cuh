/*
 * Counters between the CTAs of one rank and across ranks. Nothing here is a
 * barrier: a CTA waits only for a count that work already claimed by running
 * CTAs will reach, and every wait gives up after the launch's timeout with a
 * code in the rank's error word (mj_mega_moe reports it). Scope: .gpu for the
 * CTAs of one GPU (one rank, or emulated ranks), .sys only towards real peers.
 */
#ifndef MJ_MEGA_MOE_SYNC_CUH
#define MJ_MEGA_MOE_SYNC_CUH

#include "layout/moe_layout.h"
#include "mega_moe/pipeline.cuh"

namespace mj {

template <bool kSys> __device__ __forceinline__ mj_u32 ld_acquire(const mj_u32 *p) {
    mj_u32 v;
    if (kSys)
        asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

template <bool kSys> __device__ __forceinline__ void red_release_add(mj_u32 *p, mj_u32 v) {
    if (kSys)
        asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
    else
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

template <bool kSys> __device__ __forceinline__ void st_release(mj_u32 *p, mj_u32 v) {
    if (kSys)
        asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
    else
        asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* Work claims need no ordering: what a claim protects is published by the
 * counters above. */
__device__ __forceinline__ mj_u32 claim(mj_u32 *p) {
    mj_u32 old;
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(p) : "memory");
    return old;
}

template <class T> __device__ __forceinline__ T *peer_ptr(const mj_peers &peers, int rank, T *own) {
    return reinterpret_cast<T *>(reinterpret_cast<mj_u64>(own) + (mj_u64)peers.offsets[rank]);
}

/* Records the first error of this launch; later ones keep it. */
__device__ __forceinline__ void report_error(mj_u32 *counters, mj_u32 code, mj_u32 detail) {
    atomicCAS(counters + MJ_MOE_CNT_ERROR, 0u, (code << 24) | (detail & 0xffffffu));
}

/* Spins (with backoff, so spinning warps leave the issue slots to the math
 * warps of their SM) until *p >= target. False after timeout_ns. The backoff
 * stops at 256 ns: a waiter learns of its count at most that late (a GEMM 2
 * token producer waits for its tile's GEMM 1 on every small-T launch). */
template <bool kSys>
__device__ __forceinline__ bool wait_geq(const mj_u32 *p, mj_u32 target, mj_u64 timeout_ns) {
    if (ld_acquire<kSys>(p) >= target) return true;
    const mj_u64 t0 = global_timer_ns();
    mj_u32 sleep_ns = 32;
    while (ld_acquire<kSys>(p) < target) {
        if (global_timer_ns() - t0 > timeout_ns) return false;
        __nanosleep(sleep_ns);
        sleep_ns = sleep_ns < 256 ? 2 * sleep_ns : sleep_ns;
    }
    return true;
}

} // namespace mj

#endif // MJ_MEGA_MOE_SYNC_CUH
