/*
 * What every role of one MegaMoE launch reads: this rank's regions, the
 * counter bank of the launch, the routing tables in shared memory.
 *
 * The launch's epoch waits in shared memory from the start, where bank() and
 * the end read it: in a register it crowded the budgets of the producers and
 * K loops (kernels with a shared expert's block pairs spilled).
 */
#ifndef MJ_MEGA_MOE_LAUNCH_CUH
#define MJ_MEGA_MOE_LAUNCH_CUH

#include "common/numerics.cuh"
#include "mega_moe/scheduler.cuh"
#include "mega_moe/sync.cuh"

namespace mj {

template <class C> struct Launch {
    const mj_moe_args *args;
    unsigned char *own; // this rank's region
    mj_input_layout in;
    mj_moe_layout l;
    Routing<C> routing;
    int *ntok;      // [R] tokens of each rank in this launch
    int *pair_base; // [R + 1] prefix of ntok * K: the pairs of all ranks, concatenated,
                    // then the launch's epoch (set_epoch)
    unsigned char *smem;

    __device__ __forceinline__ const mj_peers &peers() const {
        return args->peers;
    }
    // The regions of this rank, the counter bank and this CTA's trace are
    // made where used (an add to own, a read of the epoch in shared memory
    // or of the kernel parameter): held in registers from the start, they
    // spilled in DeepSeek-V3's and Kimi K2's 64-token mxfp4-a16 and nvfp4
    // kernels. own itself stays held: made from the parameter at every use,
    // it spilled in Kimi K2's 64-token mxfp4-a8 kernel with its shared
    // expert (tests/test_mega_moe_build.c).
    __device__ __forceinline__ mj_u32 *counters() const { // monotonic words
        return reinterpret_cast<mj_u32 *>(own + l.counters_offset);
    }
    __device__ __forceinline__ unsigned short *combine_slots() const {
        return reinterpret_cast<unsigned short *>(own + l.combine_offset);
    }
    /* Thread 0's, from the start to the end (its counter updates). */
    __device__ __forceinline__ void set_epoch(mj_u32 e) const {
        pair_base[C::kRanks + 1] = (int)e;
    }
    __device__ __forceinline__ mj_u32 epoch() const {
        return (mj_u32)pair_base[C::kRanks + 1];
    }
    /* This launch's counter bank, by the epoch's parity. */
    __device__ __forceinline__ mj_u32 *bank() const {
        return counters() + MJ_MOE_CNT_FIXED + (epoch() & 1u) * l.bank.words;
    }
    /* This CTA's index, read afresh at each use: ptxas held blockIdx.x from
     * the prologue on, and spilled it (also in the 80-register prologue of
     * two CTAs an SM). */
    static __device__ __forceinline__ int cta() {
        int c;
        asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(c));
        return c;
    }
    /* This CTA's phase stamps (MJ_MOE_TRACE_WORDS), or null. */
    __device__ __forceinline__ mj_u64 *trace() const {
        return args->trace ? args->trace + (mj_u64)cta() * MJ_MOE_TRACE_WORDS : nullptr;
    }
    __device__ __forceinline__ mj_u32 *fill() const {
        return bank() + l.bank.fill;
    }
    __device__ __forceinline__ mj_u32 *ready() const {
        return bank() + l.bank.ready;
    }
    __device__ __forceinline__ mj_u32 *l1_done() const {
        return bank() + l.bank.l1_done;
    }
    __device__ __forceinline__ mj_u32 *arrive() const {
        return bank() + l.bank.arrive;
    }
    __device__ __forceinline__ unsigned char *tile1(int tile) const {
        return own + l.pool_offset + (mj_u64)tile * C::kTile1;
    }
    // What depends on a task's routing entry `local` (a local expert, or the
    // shared expert at kLocal) takes the task's fields by value: given the
    // task by reference, the kernels without a shared expert came out of
    // ptxas with other code in their token producer.
    /* The GEMM 2 tile of token tile `tile`: the shared expert's are wider. */
    __device__ __forceinline__ unsigned char *tile2(int tile, int local) const {
        if constexpr (C::kShared)
            if (local == C::kLocal)
                return own + l.pool2_shared_offset +
                       (mj_u64)(tile - (int)routing.tiles[C::kLocal]) * C::kSharedTile2;
        return own + l.pool2_offset + (mj_u64)tile * C::kTile2;
    }
    /* The entry's weight image. */
    __device__ __forceinline__ const unsigned char *weights(int local) const {
        if constexpr (C::kShared)
            if (local == C::kLocal) return args->w_shared;
        return args->w + (mj_u64)local * C::kExpertBytes;
    }
    __device__ __forceinline__ mj_u32 *meta_row(int tile, int r) const {
        return reinterpret_cast<mj_u32 *>(own + l.pool_meta_offset) +
               ((mj_u64)tile * C::kBlockM + (mj_u64)r) * MJ_MOE_META_WORDS;
    }
    __device__ __forceinline__ void fail(mj_u32 code, mj_u32 detail) const {
        report_error(counters(), code, detail);
    }
    __device__ __forceinline__ void stamp(int word) const {
        if (mj_u64 *t = trace()) t[word] = global_timer_ns();
    }
    /* The phase record of this CTA's task ti, or null (not traced, or past
     * the trace's capacity). */
    __device__ __forceinline__ mj_u64 *task_record(mj_u32 ti) const {
        mj_u64 *t = trace();
        return t && ti < MJ_MOE_TRACE_TASKS ? t + MJ_MOE_TRACE_HEAD + ti * MJ_MOE_TRACE_TASK_WORDS
                                            : nullptr;
    }
};

/* Loads that must see what other CTAs wrote in this launch: around L1. */
__device__ __forceinline__ mj_u32 ld_cg(const mj_u32 *p) {
    mj_u32 v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

/* 16 bytes around L1 where `use`, else zeros (predicated: no branch between
 * loads). */
__device__ __forceinline__ uint4 ld_cg_v4_if(const void *p, bool use) {
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n"
                 "@p ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
                 : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
                 : "l"(p), "r"((mj_u32)use));
    return v;
}

} // namespace mj

#endif // MJ_MEGA_MOE_LAUNCH_CUH
