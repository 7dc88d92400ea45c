/*
 * The in-CTA pipeline of the MegaMoE kernel: shared-memory mbarriers, 1-D bulk
 * copies global -> shared that complete on them, named barriers for one
 * warpgroup, and the proxy fences between ordinary stores and the copy engine.
 */
#ifndef MJ_MEGA_MOE_PIPELINE_CUH
#define MJ_MEGA_MOE_PIPELINE_CUH

#include "layout/symm_layout.h"

namespace mj {

__device__ __forceinline__ mj_u32 smem_u32(const void *p) {
    mj_u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

__device__ __forceinline__ void mbar_init(mj_u64 *bar, mj_u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count)
                 : "memory");
}

/* Makes barrier initialization visible to the copy engine. */
__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(mj_u64 *bar) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" ::"r"(smem_u32(bar))
                 : "memory");
}

/* One arrival that also announces `bytes` of bulk-copy data to come. */
__device__ __forceinline__ void mbar_arrive_tx(mj_u64 *bar, mj_u32 bytes) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(
                     smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(mj_u64 *bar, mj_u32 parity) {
    mj_u32 done;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                 "selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(parity)
                 : "memory");
    return done != 0u;
}

__device__ __forceinline__ mj_u64 global_timer_ns() {
    mj_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Waits for the phase of `parity` to complete. A CTA-internal wait can only
 * outlast `timeout_ns` through a bug or a peer that stopped feeding the
 * pipeline; then it returns false and the caller carries on with stale data
 * (the error word says why). */
__device__ __forceinline__ bool mbar_wait(mj_u64 *bar, mj_u32 parity, mj_u64 timeout_ns) {
    if (mbar_try_wait(bar, parity)) return true;
    const mj_u64 t0 = global_timer_ns();
    while (!mbar_try_wait(bar, parity))
        if (global_timer_ns() - t0 > timeout_ns) return false;
    return true;
}

/* L2 policy for bytes read once (an expert's weights by its last token
 * tile): evict them first. */
__device__ __forceinline__ mj_u64 policy_evict_first() {
    mj_u64 p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}

/* L2 policy for bytes read again soon (an expert's weights by a token tile
 * before its last): the normal priority. */
__device__ __forceinline__ mj_u64 policy_evict_normal() {
    mj_u64 p;
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
    return p;
}

/* bytes (a multiple of 16, both addresses 16-byte aligned) from global to
 * shared, completing on bar. */
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, mj_u32 bytes, mj_u64 *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];" ::"r"(smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}

__device__ __forceinline__ void bulk_copy_hint(void *dst, const void *src, mj_u32 bytes,
                                               mj_u64 *bar, mj_u64 policy) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
                 "[%0], [%1], %2, [%3], %4;" ::"r"(smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
                 : "memory");
}

/* Ordinary global stores of this thread become visible to bulk copies (the
 * async proxy) that other CTAs issue after acquiring our release. */
__device__ __forceinline__ void fence_proxy_async_global() {
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

/* Ordinary shared-memory stores become visible to the tensor cores. */
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* The 128 threads of one warpgroup (id 1 + warpgroup index; 0 is __syncthreads). */
__device__ __forceinline__ void warpgroup_sync(int id) {
    asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory");
}

} // namespace mj

#endif // MJ_MEGA_MOE_PIPELINE_CUH
