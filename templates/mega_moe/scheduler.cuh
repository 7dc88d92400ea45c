/*
 * Tasks of one launch (the decode compiles on the host too:
 * tests/test_scheduler.cpp). Every CTA builds the same routing tables (rows per
 * local expert, token tiles per expert as a prefix) from the top-k ids, so
 * the task list needs no exchange:
 *
 *   GEMM 1 task (tile, n): token tile x four 64-row blocks of W1 (gate and
 *                          up of 128 intermediates), all of K = hidden
 *   GEMM 2 task (tile, n): token tile x four 64-row blocks of W2, K = inter
 *
 * numbered tile-major, every GEMM 1 task before every GEMM 2 task. A fused
 * shared expert is routing entry kLocal, after the local experts: its rows
 * are this rank's own tokens, its tiles come last, and its tasks cover
 * kSharedTaskBlocks blocks of its own image (kSharedTasks1 and kSharedTasks2
 * a tile), a GEMM 2 task the K of its intermediate size. CTAs claim
 * them in order from one counter, so when a GEMM 2 task waits for the GEMM 1
 * tasks of its tile, those were claimed earlier by CTAs that are running:
 * no wait is on work nobody holds, on any SM count. (The tasks of one expert's
 * tiles that read the same weight blocks are kTasks1 or kTasks2 apart, so the CTAs in
 * flight read them at about the same time: ordering them side by side measured
 * no faster at T = 1024 and 4096, bench/RESULTS.md, seventh session.)
 */
#ifndef MJ_MEGA_MOE_SCHEDULER_CUH
#define MJ_MEGA_MOE_SCHEDULER_CUH

#include "mega_moe/config.cuh"

namespace mj {

struct Task {
    int gemm;  // 1 or 2; 0 = no more tasks
    int local; // local expert; kLocal: the shared expert
    int tile;  // token tile index in the pools
    int row0;  // first row of the tile among the expert's rows
    int valid; // rows of the tile that hold tokens
    int n;     // task index inside the expert's GEMM (four 64-row blocks)
    int nblk;  // its 64-row blocks (four, fewer for the GEMM's last task)
};

/* rows[le]: rows of routing entry le (a local expert, or the shared expert
 * at kLocal); tiles[le]: its first tile (tiles[kRoutes] = all tiles). Shared
 * memory, filled by route_count + route_prefix. */
template <class C> struct Routing {
    mj_u32 *rows;
    mj_u32 *tiles;

    MJ_HD int num_tiles() const {
        return (int)tiles[C::kRoutes];
    }
    MJ_HD int num_tasks() const {
        if constexpr (C::kShared)
            return shared_first2() + (int)tiles[C::kLocal] * C::kTasks2 +
                   (num_tiles() - (int)tiles[C::kLocal]) * C::kSharedTasks2;
        return num_tiles() * (C::kTasks1 + C::kTasks2);
    }

    /* The routing entry owning tile (tiles is non-decreasing). */
    MJ_HD int expert_of(int tile) const {
        int lo = 0, hi = C::kRoutes - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if ((int)tiles[mid] <= tile)
                lo = mid;
            else
                hi = mid - 1;
        }
        return lo;
    }

    MJ_HD Task decode(int t) const {
        if constexpr (C::kShared) return decode_with_shared(t);
        // Every field defined, also past the last task: with them undefined
        // there, ptxas spilled one at the join in the 40-register producer.
        Task k = {};
        const int first2 = num_tiles() * C::kTasks1;
        if (t >= num_tasks()) {
            k.gemm = 0;
            return k;
        }
        const int per = t < first2 ? C::kTasks1 : C::kTasks2;
        const int u = t < first2 ? t : t - first2;
        k.gemm = t < first2 ? 1 : 2;
        k.tile = u / per;
        k.n = u % per;
        k.local = expert_of(k.tile);
        k.row0 = (k.tile - (int)tiles[k.local]) * C::kBlockM;
        const int left = (int)rows[k.local] - k.row0;
        k.valid = left < C::kBlockM ? left : C::kBlockM;
        const mj_moe_weight_layout l = C::image();
        k.nblk = k.gemm == 2 ? mj_moe_task_blocks(&l.w2, k.n) : mj_moe_task_blocks(&l.w1, k.n);
        return k;
    }

  private:
    /* With a shared expert, the first GEMM 2 task: the routed tiles' GEMM 1
     * tasks, then the shared expert's. */
    MJ_HD int shared_first2() const {
        return (int)tiles[C::kLocal] * C::kTasks1 +
               (num_tiles() - (int)tiles[C::kLocal]) * C::kSharedTasks1;
    }
    /* decode with the shared expert's tasks after the routed tiles' in each
     * GEMM (kSharedTasks1 / kSharedTasks2 a tile, blocks of its own image). */
    MJ_HD Task decode_with_shared(int t) const {
        Task k = {};
        if (t >= num_tasks()) {
            k.gemm = 0;
            return k;
        }
        const int routed = (int)tiles[C::kLocal];
        const int first2 = shared_first2(), routed1 = routed * C::kTasks1,
                  routed2 = first2 + routed * C::kTasks2;
        k.gemm = t < first2 ? 1 : 2;
        if (t < routed1 || (t >= first2 && t < routed2)) {
            const int per = k.gemm == 1 ? C::kTasks1 : C::kTasks2;
            const int u = k.gemm == 1 ? t : t - first2;
            k.tile = u / per;
            k.n = u % per;
            k.local = expert_of(k.tile);
        } else {
            const int per = k.gemm == 1 ? C::kSharedTasks1 : C::kSharedTasks2;
            const int u = k.gemm == 1 ? t - routed1 : t - routed2;
            k.tile = routed + u / per;
            k.n = u % per;
            k.local = C::kLocal;
        }
        k.row0 = (k.tile - (int)tiles[k.local]) * C::kBlockM;
        const int left = (int)rows[k.local] - k.row0;
        k.valid = left < C::kBlockM ? left : C::kBlockM;
        // One layout each (a layout chosen at run time would sit in local memory).
        if (k.local == C::kLocal) {
            const mj_moe_weight_layout l = C::shared_image();
            k.nblk = k.gemm == 2 ? mj_moe_task_blocks(&l.w2, k.n) : mj_moe_task_blocks(&l.w1, k.n);
        } else {
            const mj_moe_weight_layout l = C::image();
            k.nblk = k.gemm == 2 ? mj_moe_task_blocks(&l.w2, k.n) : mj_moe_task_blocks(&l.w1, k.n);
        }
        return k;
    }
};

#if defined(__CUDACC__)
/* Exclusive prefix of tiles over the routing entries, by one warp. */
template <class C> __device__ __forceinline__ void route_prefix(const Routing<C> &r, int lane) {
    constexpr int kPer = (C::kRoutes + 31) / 32;
    mj_u32 sum = 0;
    for (int i = 0; i < kPer; i++) {
        const int le = lane * kPer + i;
        if (le < C::kRoutes) sum += (r.rows[le] + C::kBlockM - 1) / C::kBlockM;
    }
    mj_u32 incl = sum;
    for (int d = 1; d < 32; d <<= 1) {
        const mj_u32 v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += v;
    }
    mj_u32 run = incl - sum;
    for (int i = 0; i < kPer; i++) {
        const int le = lane * kPer + i;
        if (le < C::kRoutes) {
            r.tiles[le] = run;
            run += (r.rows[le] + C::kBlockM - 1) / C::kBlockM;
        }
    }
    if (lane == 31) r.tiles[C::kRoutes] = incl;
}
#endif

} // namespace mj

#endif // MJ_MEGA_MOE_SCHEDULER_CUH
