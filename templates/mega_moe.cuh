/*
 * MegaMoE for Hopper (sm_90a): one persistent kernel per rank runs a whole MoE
 * layer (NUMERICS.md steps 1-8) over the symmetric buffer, one CTA per SM
 * (two in half of its shared memory each where the heuristics say so:
 * kCtasPerSm):
 *
 *   warp 0        weight producer: claims tasks, publishes them to the CTA,
 *                 streams each task's weight stages (one bulk copy a stage)
 *                 into the shared-memory ring
 *   warp 1        token producer: waits until the task's token tile is ready
 *                 and copies its stages next to the weights
 *   warp 2        issues the releases of the tasks the math warpgroups post
 *                 (release.cuh)
 *   warps 4-11    two math warpgroups: decode the weights in registers and run
 *                 swap-AB wgmma (weights on M, tokens on N), then the epilogues
 *   every warp    first pulls this CTA's share of the routed token rows into
 *                 the GEMM 1 tiles; the math warps, after their tasks,
 *                 combine tokens
 *
 * Every format row decodes weights and tokens exactly into BF16 and runs
 * BF16 wgmma over the whole K into one fp32 accumulator (NUMERICS.md step
 * 1's plain path; moe_layout.h says why no row runs E4M3 wgmma).
 *
 * A fused shared expert (kSharedInter) is one more routing entry whose rows
 * are this rank's tokens (scheduler.cuh); in another format than the routed
 * experts' its tasks of two blocks run that format's loop (SharedLoopConfig),
 * a block in each math warpgroup (block pairs: epilogue.cuh).
 *
 * No grid-wide barrier: GEMM 1 waits per expert for its rows, GEMM 2 per
 * token tile for its GEMM 1 tasks, the combine per token for its slots
 * (scheduler.cuh says why no wait is on unclaimed work). Across ranks: each
 * rank publishes its inputs once, and the last CTA of each rank meets the
 * others' last CTAs before the launch ends (a peer may overwrite its inputs
 * only after everyone has read them). Counters live in two banks by launch
 * parity; each launch zeroes the bank of the next one, so graph replays need
 * no reset. Every wait gives up after args.timeout_ns with an error word.
 */
#ifndef MJ_MEGA_MOE_CUH
#define MJ_MEGA_MOE_CUH

#include "mega_moe/combine.cuh"
#include "mega_moe/config.cuh"
#include "mega_moe/dispatch.cuh"
#include "mega_moe/epilogue.cuh"
#include "mega_moe/mainloop.cuh"
#include "mega_moe/release.cuh"
#include "mega_moe/weight_image.cuh"

namespace mj {

/* How long the weight producer holds its second copy back for its first. */
constexpr mj_u64 kFirstStageWaitNs = 2000;

template <class C>
__device__ __forceinline__ void produce_weights(const Launch<C> &L, const Ring<C> &ring,
                                                mj_u64 *task_full, mj_u64 *task_empty,
                                                Task *mailbox) {
    mj_u32 it = 0, ti = 0;
    for (;; ti++) {
        // Decoded once here: the other roles read the task as it is.
        const Task k = L.routing.decode((int)claim(L.bank() + L.l.bank.task_claim));
        if (!mbar_wait(task_empty + (ti & 1), ((ti >> 1) & 1) ^ 1, L.args->timeout_ns))
            L.fail(MJ_MOE_ERR_PIPE, 2u);
        mailbox[ti & 1] = k;
        mbar_arrive(task_full + (ti & 1));
        if (k.gemm == 0) return;
        const mj_moe_weight_layout l = C::image();
        const mj_u32 bytes = (mj_u32)k.nblk * C::block_bytes(k.local);
        const unsigned char *expert = L.weights(k.local);
        const int stages = C::task_stages(k.gemm, k.local);
        // The expert's later tiles stream the same weights, at about the
        // same time (their tasks are kTasks1 or kTasks2 claims apart): kept
        // at normal priority they come from L2 there (bf16 at T = 4096 on an
        // H100: 11388 -> 9409 us; every weight at normal priority gave 10001
        // and cost the E2M1 rows 2-4% at T = 8; bench/RESULTS.md, nineteenth
        // session). Made per task: both policies held across the loop
        // spilled in the 40-register producer of kimi-k2's shared-expert
        // kernels.
        mj_u64 policy;
        if (k.tile + 1 < (int)L.routing.tiles[k.local + 1])
            policy = policy_evict_normal();
        else
            policy = policy_evict_first();
        mj_u64 *rec = L.task_record(ti);
        for (int s = 0; s < stages; s++, it++) {
            const int slot = (int)(it % C::kStages);
            if (!mbar_wait(ring.empty + slot, ((it / C::kStages) & 1) ^ 1, L.args->timeout_ns))
                L.fail(MJ_MOE_ERR_PIPE, 3u);
            mbar_arrive_tx(ring.full + slot, bytes);
            mj_u64 offset;
            if constexpr (C::kShared)
                offset = k.local == C::kLocal ? C::shared_stage_offset(k.gemm == 2, k.n, s)
                                              : mj_moe_expert_stage(&l, k.gemm == 2, k.n, s);
            else
                offset = mj_moe_expert_stage(&l, k.gemm == 2, k.n, s);
            bulk_copy_hint(ring.weights(slot), expert + offset, bytes, ring.full + slot, policy);
            if (s == 0 && rec) rec[MJ_MOE_TT_ISSUED] = global_timer_ns();
            // Each CTA holds its second copy back until its first stage (weights
            // and tokens) has landed: with every CTA's whole ring requested at
            // once, each first stage landed only after most of them (7.5 us at
            // T = 1, bench/RESULTS.md, seventh session). Bounded: a GEMM 2
            // task's tokens may be far away.
            if (it == 0) mbar_wait(ring.full, 0u, kFirstStageWaitNs);
        }
    }
}

template <class C>
__device__ __forceinline__ void produce_tokens(const Launch<C> &L, const Ring<C> &ring,
                                               mj_u64 *task_full, mj_u64 *task_empty,
                                               const Task *mailbox) {
    mj_u32 it = 0, ti = 0;
    for (;; ti++) {
        if (!mbar_wait(task_full + (ti & 1), (ti >> 1) & 1, L.args->timeout_ns))
            L.fail(MJ_MOE_ERR_PIPE, 4u);
        const Task k = mailbox[ti & 1];
        mbar_arrive(task_empty + (ti & 1));
        if (k.gemm == 0) return;
        const bool g2 = k.gemm == 2;
        if (g2 ? !wait_geq<false>(L.l1_done() + k.tile, C::units1(k.local), L.args->timeout_ns)
               : !wait_geq<false>(L.ready() + k.local, L.routing.rows[k.local], L.args->timeout_ns))
            L.fail(g2 ? MJ_MOE_ERR_L1 : MJ_MOE_ERR_POOL, (mj_u32)(g2 ? k.tile : k.local));
        if (mj_u64 *rec = L.task_record(ti)) rec[MJ_MOE_TT_READY] = global_timer_ns();
        fence_proxy_async_global();
        const unsigned char *src = g2 ? L.tile2(k.tile, k.local) : L.tile1(k.tile);
        const int stages = C::task_stages(k.gemm, k.local);
        constexpr mj_u32 kKBlockBytes = (mj_u32)C::kBlockM * C::kTokenRowBytes;
        constexpr int kKBlocks = (int)(C::kBStage / kKBlockBytes);
        static_assert(kKBlocks * kKBlockBytes == C::kBStage, "a token stage is whole K blocks");
        const mj_u32 rows_bytes = (mj_u32)k.valid * C::kTokenRowBytes;
        for (int s = 0; s < stages; s++, it++) {
            const int slot = (int)(it % C::kStages);
            if (!mbar_wait(ring.empty + slot, ((it / C::kStages) & 1) ^ 1, L.args->timeout_ns))
                L.fail(MJ_MOE_ERR_PIPE, 5u);
            // A shared expert's half stages (C::kSharedSplit) each take half of
            // a token stage: whole 64-element pieces.
            if constexpr (C::kSharedSplit > 1) {
                if (k.local == C::kLocal) {
                    const mj_u32 part = C::kBStage / C::kSharedSplit;
                    mbar_arrive_tx(ring.full + slot, part);
                    bulk_copy(ring.tokens(slot),
                              src + (mj_u64)(s / C::kSharedSplit) * C::kBStage +
                                  (mj_u64)(s % C::kSharedSplit) * part,
                              part, ring.full + slot);
                    continue;
                }
            }
            // Only the tile's token rows: a row past them feeds only
            // accumulator columns nobody reads. Each K block of the stage
            // holds all rows one after the other (mj_moe_token_offset).
            mbar_arrive_tx(ring.full + slot, kKBlocks * rows_bytes);
            const unsigned char *stage = src + (mj_u64)s * C::kBStage;
#pragma unroll
            for (int b = 0; b < kKBlocks; b++)
                bulk_copy(ring.tokens(slot) + b * kKBlockBytes, stage + b * kKBlockBytes,
                          rows_bytes, ring.full + slot);
        }
    }
}

template <class C>
__device__ __forceinline__ void compute(const Launch<C> &L, const Ring<C> &ring, mj_u64 *task_full,
                                        mj_u64 *task_empty, const Task *mailbox,
                                        const ReleaseRing &rel, const MathThread &m) {
    float acc0[C::kBlockM / 2], acc1[C::kBlockM / 2];
    unsigned char *scratch = L.smem + C::kSmemEpi + (mj_u32)m.wg * C::kEpiBytes;
    // Whether this thread records the tasks' phases: decided each task in
    // kernels with a shared expert's block pairs (held across the loop, the
    // predicate spilled in gpt-oss's mxfp4-a8 kernel beside a shared expert),
    // once in the others (decided each task, DeepSeek-V3's 8-rank mxfp4-a8
    // 160-token kernel spilled).
    const bool tracer_once = L.trace() && m.wg == 0 && m.t == 0;
    mj_u32 it = 0, ti = 0, posts = 0;
    for (;; ti++) {
        if (!mbar_wait(task_full + (ti & 1), (ti >> 1) & 1, L.args->timeout_ns))
            L.fail(MJ_MOE_ERR_PIPE, 6u);
        const Task k = mailbox[ti & 1];
        // Each reader's own arrival orders its read before the producer's
        // next write of the slot (racecheck paired lanes 1-31's reads with
        // that write when one lane arrived for its warp after __syncwarp).
        mbar_arrive(task_empty + (ti & 1));
        const bool tracer = C::kSharedOwnLoop ? L.trace() && m.wg == 0 && m.t == 0 : tracer_once;
        if (k.gemm == 0) {
            if (tracer) L.trace()[MJ_MOE_TR_TASKS] = ti;
            if (m.t == 0) rel.post(m.wg, posts, k, L);
            return;
        }
        mj_u64 *rec = tracer ? L.task_record(ti) : nullptr;
        if (rec) {
            rec[MJ_MOE_TT_START] = global_timer_ns();
            rec[MJ_MOE_TT_ID] =
                (mj_u64)k.gemm | (mj_u64)k.n << 2 | (mj_u64)k.tile << 16 | (mj_u64)k.valid << 40;
            rec[MJ_MOE_TT_BYTES] =
                (mj_u64)k.nblk * C::block_bytes(k.local) * (mj_u64)C::task_stages(k.gemm, k.local);
        }
        // The first stage has landed (the K loop's own wait then passes at
        // once): the tile's rows and their meta are visible from here.
        if (!mbar_wait(ring.full + it % C::kStages, (it / C::kStages) & 1u, L.args->timeout_ns))
            L.fail(MJ_MOE_ERR_PIPE, 7u);
        if (rec) rec[MJ_MOE_TT_FIRST] = global_timer_ns();
        // Loaded here, the epilogue's inputs complete under the K loop; wide
        // tiles load them after it, as their 2 x 80 accumulators and a
        // 128-column loop beside them leave no registers for them.
        EpiInputs e;
        if constexpr (!C::kWideTile) e = epi_inputs(L, k, m);
        const int stages = C::task_stages(k.gemm, k.local);
        if constexpr (C::kSharedOwnLoop) {
            if (block_pair<C>(k)) {
                // Tasks of two blocks, one a warpgroup; its tiles are full but
                // the last: the full-width loop only.
                static_assert(C::kSharedTaskBlocks == 2, "a block per math warpgroup");
                mainloop_bf16<SharedLoopConfig<C>, C::kBlockM, C, 1>(ring, it, stages, k.nblk, m, L,
                                                                     acc0, acc1);
            } else {
                mainloop<C>(ring, it, stages, k.nblk, k.valid, m, L, acc0, acc1);
            }
        } else {
            mainloop<C>(ring, it, stages, k.nblk, k.valid, m, L, acc0, acc1);
        }
        if (rec) rec[MJ_MOE_TT_LOOP] = global_timer_ns();
        if constexpr (C::kWideTile) e = epi_inputs(L, k, m);
        // One call site per epilogue: inlined twice, they made the kernels
        // with block pairs spill.
        if constexpr (C::kSharedOwnLoop)
            if (block_pair<C>(k) && k.gemm == 1) hand_up_rows<C>(L, acc0, acc1, m);
        mj_u64 *stored = rec ? rec + MJ_MOE_TT_STORED : nullptr;
        if (stored) *stored = rec[MJ_MOE_TT_LOOP]; // no epilogue: nothing stored
        if (runs_epilogue<C>(k, m)) {
            if (k.gemm == 1)
                epilogue_l1(L, k, e, acc0, acc1, m, scratch, stored);
            else
                epilogue_l2(L, k, e, acc0, acc1, m, scratch, stored);
            if (m.t == 0 && !block_pair<C>(k)) rel.post(m.wg, posts, k, L);
        }
        if constexpr (C::kSharedOwnLoop)
            if (block_pair<C>(k)) post_block_pair(L, k, m, rel, posts);
        if (rec) rec[MJ_MOE_TT_EPI] = global_timer_ns();
    }
}

template <int kHidden, int kInter, int kExperts, int kTopk, int kRanks, int kMaxTokens,
          int kWeightFmt, int kDispatchFmt, int kL2Fmt, int kActivation, unsigned kClampBits,
          unsigned kActParam0Bits, unsigned kActParam1Bits, int kBlockM, int kStageK, int kStages,
          int kNumSMs, int kCtasPerSm, int kSysScope, int kBiases, int kSharedInter, int kSharedFmt>
__global__ void __launch_bounds__(MJ_MOE_THREADS, kCtasPerSm)
    mega_moe_kernel(const __grid_constant__ mj_moe_args args) {
    typedef MoeConfig<kHidden, kInter, kExperts, kTopk, kRanks, kMaxTokens, kWeightFmt,
                      kDispatchFmt, kL2Fmt, kActivation, kClampBits, kActParam0Bits, kActParam1Bits,
                      kBlockM, kStageK, kStages, kNumSMs, kCtasPerSm, kSysScope, kBiases,
                      kSharedInter, kSharedFmt>
        C;
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid & 31;

    Ring<C> ring;
    ring.base = smem + C::kSmemRing;
    ring.full = reinterpret_cast<mj_u64 *>(smem + C::kSmemBars);
    ring.empty = ring.full + kStages;
    mj_u64 *task_full = ring.empty + kStages, *task_empty = task_full + 2;
    ring.sink = task_empty + 2;
    ReleaseRing rel;
    rel.full = ring.sink + 1;
    rel.empty = rel.full + 2 * MJ_MOE_RELEASE_SLOTS;
    rel.task = reinterpret_cast<Task *>(rel.empty + 2 * MJ_MOE_RELEASE_SLOTS);
    Task *mailbox = rel.task + 2 * MJ_MOE_RELEASE_SLOTS;
    static_assert(sizeof(Task) == 28 && MJ_MOE_RELEASE_SLOTS == 4,
                  "MJ_MOE_SMEM_TAIL_BYTES counts 28-byte tasks and 4 release slots");
    if (tid == 0) {
        for (int i = 0; i < kStages; i++) {
            mbar_init(ring.full + i, 2);    // both producers
            mbar_init(ring.empty + i, 256); // every math thread
        }
        for (int i = 0; i < 2; i++) {
            mbar_init(task_full + i, 1);
            mbar_init(task_empty + i, 257); // token producer + math threads
        }
        mbar_init(ring.sink, 256);
        rel.init();
        fence_mbar_init();
    }

    Launch<C> L;
    L.args = &args;
    L.smem = smem;
    L.own = reinterpret_cast<unsigned char *>(args.peers.base);
    L.in = mj_layout_input(kHidden, kTopk, kMaxTokens, kDispatchFmt);
    L.l = mj_layout_moe(kHidden, kInter, kExperts, kTopk, kRanks, kMaxTokens, kDispatchFmt,
                        kSharedInter);
    mj_u32 *routing = reinterpret_cast<mj_u32 *>(smem + C::kSmemRouting);
    L.routing.rows = routing;
    L.routing.tiles = routing + C::kRoutes;
    L.ntok = reinterpret_cast<int *>(routing + 2 * C::kRoutes + 1);
    L.pair_base = L.ntok + kRanks;
    if (tid == 0) L.stamp(MJ_MOE_TR_ENTRY);
    // The swizzle atoms of the token stages (mj_moe_token_offset) need it.
    if (tid == 0 && (smem_u32(smem) & 1023u) != 0u)
        L.fail(MJ_MOE_ERR_SMEM_ALIGN, smem_u32(smem) & 0xffffffu);

    // Inputs (and this rank's counters) belong to the previous kernel until here.
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (tid == 0) L.stamp(MJ_MOE_TR_INPUTS);
    const mj_u32 epoch = *reinterpret_cast<volatile mj_u32 *>(L.counters() + MJ_MOE_CNT_EPOCH);
    mj_u32 *next = L.counters() + MJ_MOE_CNT_FIXED + ((epoch + 1u) & 1u) * L.l.bank.words;
    for (mj_u32 i = (mj_u32)(L.cta() * MJ_MOE_THREADS + tid); i < L.l.bank.words;
         i += C::kCtas * MJ_MOE_THREADS)
        next[i] = 0u;
    for (int i = tid; i < C::kRoutes; i += MJ_MOE_THREADS)
        L.routing.rows[i] = 0u;

    const mj_peers &peers = args.peers;
    const int rank = (int)peers.rank;
    if (tid == 0) {
        L.set_epoch(epoch);
        if (kRanks == 1) {
            L.ntok[0] = args.num_tokens;
        } else {
            if (L.cta() == 0) {
                L.counters()[MJ_MOE_CNT_NTOK] = (mj_u32)args.num_tokens;
                for (int s = 0; s < kRanks; s++)
                    st_release<C::kSys>(peer_ptr(peers, s, L.counters() + MJ_MOE_CNT_START + rank),
                                        epoch + 1u);
            }
            for (int s = 0; s < kRanks; s++) {
                if (!wait_geq<C::kSys>(L.counters() + MJ_MOE_CNT_START + s, epoch + 1u,
                                       args.timeout_ns))
                    L.fail(MJ_MOE_ERR_PEER_START, (mj_u32)s);
                L.ntok[s] = (int)ld_cg(peer_ptr(peers, s, L.counters() + MJ_MOE_CNT_NTOK));
            }
        }
        int base = 0;
        for (int s = 0; s < kRanks; s++) {
            L.pair_base[s] = base;
            base += L.ntok[s] * kTopk;
        }
        L.pair_base[kRanks] = base;
    }
    __syncthreads();
    route_count(L, tid);
    __syncthreads();
    if (warp == 0) route_prefix(L.routing, lane);
    __syncthreads();
    if (tid == 0) L.stamp(MJ_MOE_TR_ROUTED);
    if (L.cta() == 0 && args.recv_stats != nullptr)
        for (int le = tid; le < C::kLocal; le += MJ_MOE_THREADS)
            if (L.routing.rows[le]) atomicAdd(args.recv_stats + le, (int)L.routing.rows[le]);

    // Warp 0 starts streaming weights at once; the others pull rows first.
    // setmaxnreg: one instruction per warpgroup, executed by each of its warps.
    if (warp < 4) {
        if (warp != 0) pull(L, warp - 1, MJ_MOE_THREADS / 32 - 1, lane);
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(C::kProducerRegs));
        if (warp == 0 && lane == 0) produce_weights(L, ring, task_full, task_empty, mailbox);
        if (warp == 1 && lane == 0) produce_tokens(L, ring, task_full, task_empty, mailbox);
        if (warp == 2) serve_releases(L, rel, lane);
        __syncwarp();
    } else {
        pull(L, warp - 1, MJ_MOE_THREADS / 32 - 1, lane);
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(C::kMathRegs));
        if (tid == 128) L.stamp(MJ_MOE_TR_PULLED);
        MathThread m;
        m.wg = (warp - 4) / 4;
        m.t = tid - 128 * (1 + m.wg);
        m.w = m.t / 32;
        m.lane = lane;
        m.g = lane / 4;
        m.q = lane % 4;
        compute(L, ring, task_full, task_empty, mailbox, rel, m);
        if (tid == 128) L.stamp(MJ_MOE_TR_COMPUTED);
        combine(L, lane);
    }

    __syncthreads();
    if (tid == 0) {
        const mj_u32 finished = atomicAdd(L.counters() + MJ_MOE_CNT_DONE, 1u) + 1u;
        if (finished == (mj_u32)C::kCtas) {
            // Launches of other kernels on this buffer may run other grids; the
            // next launch reads the count after its griddepcontrol.wait.
            L.counters()[MJ_MOE_CNT_DONE] = 0u;
            // The last CTA of this rank: no CTA of it reads a peer any more.
            if (kRanks > 1) {
                for (int s = 0; s < kRanks; s++)
                    red_release_add<C::kSys>(peer_ptr(peers, s, L.counters() + MJ_MOE_CNT_END), 1u);
                if (!wait_geq<C::kSys>(L.counters() + MJ_MOE_CNT_END,
                                       (mj_u32)kRanks * (L.epoch() + 1u), args.timeout_ns))
                    L.fail(MJ_MOE_ERR_PEER_END, 0u);
            }
            L.counters()[MJ_MOE_CNT_EPOCH] = L.epoch() + 1u;
        }
        L.stamp(MJ_MOE_TR_END);
    }
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

} // namespace mj

#endif // MJ_MEGA_MOE_CUH
