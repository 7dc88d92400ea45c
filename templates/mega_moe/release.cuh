/*
 * Publishing a finished task without stalling the math warps. A release
 * (red.release) waits until every store before it is performed, and the
 * warpgroup's next wgmma would wait for the thread that issues it (moving the
 * releases here cut the GEMM 2 epilogue from 1.86 to 0.51 us: bench/RESULTS.md). So each math
 * warpgroup posts the task into a small ring in shared memory and a helper warp issues the
 * releases: GEMM 1 tasks add one to the tile's GEMM 1 count, GEMM 2 tasks one to each of the tile's
 * tokens on its home rank.
 *
 * Ordering: the warpgroup's stores, its barrier, the post (mbarrier arrive,
 * release at CTA scope), the helper's wait (acquire), then its release at
 * .gpu / .sys scope, which is cumulative over all of them.
 */
#ifndef MJ_MEGA_MOE_RELEASE_CUH
#define MJ_MEGA_MOE_RELEASE_CUH

#include "mega_moe/launch.cuh"

namespace mj {

#define MJ_MOE_RELEASE_SLOTS 4

/* One ring per math warpgroup: full/empty mbarriers and the posted tasks (a
 * task of gemm 0, as the mailbox hands out, ends the warpgroup's posts). */
struct ReleaseRing {
    mj_u64 *full;  // [2][MJ_MOE_RELEASE_SLOTS], one arrival (the posting thread)
    mj_u64 *empty; // [2][MJ_MOE_RELEASE_SLOTS], one arrival (the helper)
    Task *task;    // [2][MJ_MOE_RELEASE_SLOTS]

    __device__ __forceinline__ void init() const {
        for (int i = 0; i < 2 * MJ_MOE_RELEASE_SLOTS; i++) {
            mbar_init(full + i, 1);
            mbar_init(empty + i, 1);
        }
    }

    /* By one thread of warpgroup wg after the barrier that ends its epilogue;
     * n counts its posts. */
    template <class C>
    __device__ __forceinline__ void post(int wg, mj_u32 &n, const Task &t,
                                         const Launch<C> &L) const {
        const int i = wg * MJ_MOE_RELEASE_SLOTS + (int)(n % MJ_MOE_RELEASE_SLOTS);
        if (!mbar_wait(empty + i, ((n / MJ_MOE_RELEASE_SLOTS) & 1u) ^ 1u, L.args->timeout_ns))
            L.fail(MJ_MOE_ERR_PIPE, 8u);
        task[i] = t;
        mbar_arrive(full + i);
        n++;
    }
};

/* The releases of one posted task, by the helper warp. */
template <class C>
__device__ __forceinline__ void release_task(const Launch<C> &L, const Task &k, int lane) {
    if (k.gemm == 1) {
        if (lane == 0) red_release_add<false>(L.l1_done() + k.tile, 1u);
        return;
    }
    for (int col = lane; col < k.valid; col += 32) {
        const mj_u32 *meta = L.meta_row(k.tile, col);
        const int home = (int)ld_cg(meta), token = (int)ld_cg(meta + 1);
        red_release_add<C::kSys>(peer_ptr(L.peers(), home, L.arrive()) + token, 1u);
    }
}

/* The helper warp: serves both rings in order until both warpgroups have
 * posted their end. Gives up (with the error word) when neither posts for
 * twice the launch's timeout: a wait upstream of the posts (tokens, a peer)
 * gives up first and reports what stalled. Lane 0 decides, for the warp. */
template <class C>
__device__ __forceinline__ void serve_releases(const Launch<C> &L, const ReleaseRing &r, int lane) {
    mj_u32 n[2] = {0u, 0u};
    bool ended[2] = {false, false};
    mj_u64 idle_since = global_timer_ns();
    while (!ended[0] || !ended[1]) {
        bool progress = false;
        for (int wg = 0; wg < 2; wg++) {
            if (ended[wg]) continue;
            const int i = wg * MJ_MOE_RELEASE_SLOTS + (int)(n[wg] % MJ_MOE_RELEASE_SLOTS);
            const bool posted = __shfl_sync(
                0xffffffffu, mbar_try_wait(r.full + i, (n[wg] / MJ_MOE_RELEASE_SLOTS) & 1u), 0);
            if (!posted) continue;
            __syncwarp();
            const Task t = r.task[i];
            if (t.gemm == 0)
                ended[wg] = true;
            else
                release_task(L, t, lane);
            __syncwarp();
            if (lane == 0) mbar_arrive(r.empty + i);
            n[wg]++;
            progress = true;
        }
        if (progress) {
            idle_since = global_timer_ns();
        } else if (__shfl_sync(0xffffffffu, global_timer_ns() - idle_since > 2 * L.args->timeout_ns,
                               0)) {
            if (lane == 0) L.fail(MJ_MOE_ERR_PIPE, 9u);
            return;
        } else {
            __nanosleep(64);
        }
    }
}

} // namespace mj

#endif // MJ_MEGA_MOE_RELEASE_CUH
