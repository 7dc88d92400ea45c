/*
 * Pre-dispatch: BF16 tokens -> this rank's input region (quantized x, block
 * scales, NVFP4 per-token scales, top-k ids and weights), bit-identical to
 * mjr_pre_dispatch in tests/reference/quant.c; every value goes through the
 * helpers of common/numerics.cuh, which tests/test_kernel_math.cpp checks
 * against that reference on the host.
 *
 * Launch order: pre_dispatch_check_kernel, then pre_dispatch_kernel (PDL). Each
 * check CTA stores its count of invalid expert ids in its own workspace slot
 * (no atomics, nothing to reset). The main kernel starts loading tokens at
 * once, waits for the check grid to complete before its first store, and
 * writes nothing when any slot of this launch is non-zero.
 */
#ifndef MJ_PRE_DISPATCH_CUH
#define MJ_PRE_DISPATCH_CUH

#include "layout/pre_dispatch_launch.h"
#include "layout/symm_layout.h"
#include "common/numerics.cuh"

namespace mj {

namespace pd {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWords = MJ_PD_ELEMS_PER_THREAD / 2; // BF16 pairs per thread

// A thread's 32 elements as loaded: 16 BF16 pairs, element 2i in the low half
// of word i.
struct Chunk {
    mj_u32 w[kWords];
};

// MXFP4 blocks holding Inf or NaN take the scalar helpers the fast path is
// checked against. Rare, so kept out of line to leave the fast path's
// registers alone.
__device__ __noinline__ void quantize_mxfp4_scalar(Chunk c, unsigned char *x_out,
                                                   unsigned char *sf) {
    float v[4][8];
    float amax = 0.0f;
    for (int k = 0; k < 4; k++) {
        unpack_bf16x8(c.w + 4 * k, v[k]);
        amax = max_num(amax, amax_x8(v[k]));
    }
    const unsigned char e = ue8m0_for_amax(amax, MJ_E2M1_MAX);
    const float inv = ue8m0_inv_scale(e);
    mj_u32 q[4];
    for (int k = 0; k < 4; k++)
        q[k] = pack_e2m1x8(v[k], inv);
    reinterpret_cast<uint4 *>(x_out)[0] = make_uint4(q[0], q[1], q[2], q[3]);
    *sf = e;
}

// One MXFP4 block (32 elements) per thread: x_out gets 16 bytes, sf the
// UE8M0 byte.
__device__ __forceinline__ void quantize_mxfp4(const Chunk &c, unsigned char *x_out,
                                               unsigned char *sf) {
    const mj_u32 amax = bf16_abs_max(c.w, kWords);
    if (amax >= MJ_BF16_SPECIAL) {
        quantize_mxfp4_scalar(c, x_out, sf);
        return;
    }
    const unsigned e = ue8m0_for_bf16_amax(amax, MJ_FMT_MXFP4);
    mj_u32 q[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        q[k] = e2m1_with_signs(e2m1_codes_x8_pow2(c.w + 4 * k, e), e2m1_signs_x8(c.w + 4 * k));
    reinterpret_cast<uint4 *>(x_out)[0] = make_uint4(q[0], q[1], q[2], q[3]);
    *sf = (unsigned char)e;
}

// Each warp stages its own 1024-element slice of a row (128 chunks of 16
// bytes) in shared memory by cp.async (L2 only, coalesced), MJ_PD_STAGES - 1
// rows ahead of the one it quantizes; warps never wait for each other except
// for the NVFP4 row maximum. Chunk c of a slice lives at slot
// c ^ ((c >> 3) & 3): the copies, which walk c one per lane, and the reads,
// where lane l takes chunks 4l..4l+3, both touch 8 distinct 16-byte bank
// groups per quarter warp.
constexpr int kSliceChunks = 128;

__device__ __forceinline__ int stage_slot(int c) {
    return c ^ ((c >> 3) & 3);
}

// stage: the shared-memory address of the stage (converted once by the caller:
// the conversion is several instructions).
template <int kHidden>
__device__ __forceinline__ void stage_slice(unsigned stage, const unsigned short *__restrict__ x,
                                            int row, int slice, bool row_valid, int lane) {
    const uint4 *src =
        reinterpret_cast<const uint4 *>(x + (mj_u64)row * kHidden) + slice * kSliceChunks;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int c = lane + 32 * j;
        // Every slice is whole when a row is whole 1024-element slices.
        if (row_valid && (kHidden % 1024 == 0 || slice * kSliceChunks + c < kHidden / 8)) {
            const unsigned dst = stage + 16u * (unsigned)stage_slot(c);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + c)
                         : "memory");
        }
    }
}

// The 32 elements of a lane: chunks 4l..4l+3 of its warp's slice (one MX
// block, two NVFP4 blocks).
__device__ __forceinline__ Chunk read_block(const uint4 *stage, int lane) {
    Chunk c;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint4 v = stage[stage_slot(4 * lane + j)];
        c.w[4 * j] = v.x;
        c.w[4 * j + 1] = v.y;
        c.w[4 * j + 2] = v.z;
        c.w[4 * j + 3] = v.w;
    }
    return c;
}

// MXFP8, stored coalesced: lane l holds half h of block 16 * (pass) + l / 2
// of its warp's slice (chunks 64 * pass + 2l, 2l + 1), so each pass writes 16
// contiguous bytes per lane; the lane pair agrees on the block maximum by one
// shuffle. `blocks` = valid blocks of this slice (the last slice of a row may
// hold any number); a pair past them reads stale stage slots and stores nothing.
__device__ __forceinline__ void quantize_mxfp8_slice(const uint4 *stage, int lane, int blocks,
                                                     unsigned char *x_out, unsigned char *sf_out) {
#pragma unroll
    for (int pass = 0; pass < 2; pass++) {
        const int block = 16 * pass + (lane >> 1);
        mj_u32 w[8];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const uint4 v = stage[stage_slot(64 * pass + 2 * lane + j)];
            w[4 * j] = v.x;
            w[4 * j + 1] = v.y;
            w[4 * j + 2] = v.z;
            w[4 * j + 3] = v.w;
        }
        // NaN compares highest, so the pair's maximum still flags it.
        const mj_u32 mine = bf16_abs_max(w, 8);
        const mj_u32 theirs = __shfl_xor_sync(kFullMask, mine, 1);
        const mj_u32 amax = mine > theirs ? mine : theirs;
        if (block >= blocks) continue;
        mj_u32 q[4];
        unsigned char e;
        if (amax < MJ_BF16_SPECIAL) {
            e = ue8m0_for_bf16_amax(amax, MJ_FMT_MXFP8);
            const float inv = ue8m0_inv_scale(e);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const mj_u32 lo = w[2 * i], hi = w[2 * i + 1];
                q[i] =
                    cvt_e4m3x2(f32_from_bits(lo << 16) * inv,
                               f32_from_bits(lo & 0xffff0000u) * inv) |
                    cvt_e4m3x2(f32_from_bits(hi << 16) * inv, f32_from_bits(hi & 0xffff0000u) * inv)
                        << 16;
            }
        } else {
            // The scalar helpers; both lanes of the pair come here together.
            float v[2][8];
            unpack_bf16x8(w, v[0]);
            unpack_bf16x8(w + 4, v[1]);
            float m = max_num(amax_x8(v[0]), amax_x8(v[1]));
            m = max_num(m, __shfl_xor_sync(3u << (lane & ~1), m, 1));
            e = ue8m0_for_amax(m, MJ_E4M3_MAX);
            pack_e4m3x8(v[0], ue8m0_inv_scale(e), q);
            pack_e4m3x8(v[1], ue8m0_inv_scale(e), q + 2);
        }
        reinterpret_cast<uint4 *>(x_out)[16 * 2 * pass + lane] = make_uint4(q[0], q[1], q[2], q[3]);
        if ((lane & 1) == 0) sf_out[block] = e;
    }
}

} // namespace pd

// Persistent: CTA b handles row blocks b, b + gridDim.x, ... (MJ_PD_ROWS_PER_CTA
// rows each, a row per MJ_PD_ROW_THREADS threads), staging the next block while
// it quantizes the current one, then strides over the top-k entries of the
// padding rows [num_tokens, max_tokens), setting them to (-1, 0).
// Launch: grid = mj_pd_grid(...), block = MJ_PD_BLOCK_THREADS(kHidden), right
// after pre_dispatch_check_kernel, with PDL.
template <int kHidden, int kFormat, int kTopk>
__global__ void __launch_bounds__(MJ_PD_BLOCK_THREADS(kHidden), MJ_PD_CTAS_PER_SM)
    pre_dispatch_kernel(const unsigned short *__restrict__ x, const int *__restrict__ topk_ids,
                        const float *__restrict__ topk_weights,
                        const float *__restrict__ expert_scales, unsigned char *__restrict__ region,
                        int num_tokens, int max_tokens, int num_experts) {
    constexpr int kRowThreads = MJ_PD_ROW_THREADS(kHidden);
    constexpr int kRows = MJ_PD_ROWS_PER_CTA(kHidden);
    constexpr int kThreads = MJ_PD_BLOCK_THREADS(kHidden);
    constexpr int kChunks = kHidden / MJ_PD_ELEMS_PER_THREAD; // active threads of a row
    constexpr int kRowWarps = kRowThreads / 32;
    // Whole chunks per thread; any count of them per row: the copies stop at the
    // row's end and the threads past its last chunk idle (stage_slice, `active`).
    static_assert(kHidden % MJ_PD_ELEMS_PER_THREAD == 0 && kHidden <= 8192,
                  "hidden: whole 32-element chunks, at most 8192");
    static_assert(kTopk >= 1, "top-k");
    static_assert(kFormat >= MJ_FMT_BF16 && kFormat <= MJ_FMT_NVFP4, "unknown format");

    // This grid starts only once every check CTA has passed its own
    // griddepcontrol.wait, so the caller's inputs are complete and the region
    // is free: loads may start before this grid's wait (below), which is for
    // the check grid's verdict.
    extern __shared__ uint4 stages[]; // [warp][MJ_PD_STAGES][kSliceChunks]
    __shared__ mj_u32 warp_max[2][kRows * kRowWarps];

    const int t = (int)threadIdx.x, lane = t & 31;
    const int r = t / kRowThreads, g = t % kRowThreads, slice = g / 32;
    uint4 *my_stages = stages + (t >> 5) * MJ_PD_STAGES * pd::kSliceChunks;
    const unsigned my_stages_shared = (unsigned)__cvta_generic_to_shared(my_stages);
    const int blocks = (int)mj_pd_token_blocks(kHidden, num_tokens);
    int blk = (int)blockIdx.x;
    // BF16 is a copy of T * H * 2 contiguous bytes into x: 16-byte chunks with
    // a grid stride, MJ_PD_BF16_BATCH loads in flight per thread, through
    // registers (MJ_PD_BF16_EARLY of the first batch before the wait). The
    // other formats stage rows in shared memory.
    const long long copy_chunks = (long long)num_tokens * (kHidden / 8);
    const long long copy_stride = (long long)gridDim.x * kThreads;
    long long chunk = (long long)blockIdx.x * kThreads + t;
    uint4 batch[MJ_PD_BF16_BATCH];
    if constexpr (kFormat == MJ_FMT_BF16) {
        const uint4 *src = reinterpret_cast<const uint4 *>(x);
#pragma unroll
        for (int j = 0; j < MJ_PD_BF16_EARLY; j++)
            if (chunk + j * copy_stride < copy_chunks) batch[j] = src[chunk + j * copy_stride];
    } else {
        // One commit group per row, empty past the end, so wait_group counts rows.
#pragma unroll
        for (int s = 0; s < MJ_PD_STAGES - 1; s++) {
            const int b = blk + s * (int)gridDim.x, row = b * kRows + r;
            pd::stage_slice<kHidden>(my_stages_shared + s * 16u * pd::kSliceChunks, x, row, slice,
                                     b < blocks && row < num_tokens, lane);
            asm volatile("cp.async.commit_group;" ::: "memory");
        }
    }

    // The top-k slots, one per thread across the grid, loaded before the wait
    // too; the expert-scale lookup is clamped into range until the check has
    // vouched for the ids.
    const long long num_slots = (long long)num_tokens * kTopk;
    const long long slot_stride = (long long)gridDim.x * kThreads;
    long long slot = (long long)blockIdx.x * kThreads + t;
    int id = -1;
    float w = 0.0f, scale = 1.0f;
    if (slot < num_slots) {
        id = topk_ids[slot];
        w = topk_weights[slot];
        if (expert_scales != nullptr)
            scale = expert_scales[id < 0 ? 0 : id >= num_experts ? num_experts - 1 : id];
    }

    // The check grid has completed and its writes are visible after this.
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if constexpr (kFormat == MJ_FMT_BF16) {
        // ld.global.cg, not the read-only path: ptxas hoists .nc loads above
        // the wait.
        const uint4 *src = reinterpret_cast<const uint4 *>(x);
#pragma unroll
        for (int j = MJ_PD_BF16_EARLY; j < MJ_PD_BF16_BATCH; j++)
            if (chunk + j * copy_stride < copy_chunks)
                batch[j] = __ldcg(src + chunk + j * copy_stride);
    }
    // Every warp reads the verdict itself (one 128-byte line for up to 32
    // check CTAs), so no CTA barrier is needed to share it; gpu scope, so the
    // load is served where the check grid's stores landed, not from L1.
    mj_u32 bad = 0;
    {
        const mj_u32 *slots = reinterpret_cast<const mj_u32 *>(region) + MJ_WS_PD_CHECK_SLOTS;
        const int check_ctas = (int)mj_pd_check_ctas(kTopk, num_tokens);
        for (int s = lane; s < check_ctas; s += 32) {
            mj_u32 v;
            asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];"
                         : "=r"(v)
                         : "l"(slots + s)
                         : "memory");
            bad |= v;
        }
    }
    if (!__any_sync(pd::kFullMask, bad != 0u)) {
        const mj_input_layout lay = mj_layout_input(kHidden, kTopk, max_tokens, kFormat);
        int *ids_out = reinterpret_cast<int *>(region + lay.topk_idx_offset);
        float *w_out = reinterpret_cast<float *>(region + lay.topk_w_offset);
        for (; slot < num_slots; slot += slot_stride) {
            ids_out[slot] = id;
            w_out[slot] = expert_scales != nullptr && id >= 0 ? w * scale : w;
            const long long more = slot + slot_stride;
            if (more < num_slots) { // only when tokens * top-k exceeds the grid's threads
                id = topk_ids[more];
                w = topk_weights[more];
                if (expert_scales != nullptr && id >= 0) scale = expert_scales[id];
            }
        }

        if constexpr (kFormat == MJ_FMT_BF16) {
            const uint4 *src = reinterpret_cast<const uint4 *>(x);
            uint4 *dst = reinterpret_cast<uint4 *>(region + lay.x_offset);
            for (; chunk < copy_chunks; chunk += MJ_PD_BF16_BATCH * copy_stride) {
#pragma unroll
                for (int j = 0; j < MJ_PD_BF16_BATCH; j++)
                    if (chunk + j * copy_stride < copy_chunks)
                        dst[chunk + j * copy_stride] = batch[j];
                const long long next = chunk + MJ_PD_BF16_BATCH * copy_stride;
#pragma unroll
                for (int j = 0; j < MJ_PD_BF16_BATCH; j++)
                    if (next + j * copy_stride < copy_chunks)
                        batch[j] = src[next + j * copy_stride];
            }
        } else {
            for (int it = 0, parity = 0; blk < blocks;
                 blk += (int)gridDim.x, it = it + 1 == MJ_PD_STAGES ? 0 : it + 1, parity ^= 1) {
                // The warp's copies of this row have landed and are visible to all
                // its lanes, which have also finished reading the stage refilled next.
                asm volatile("cp.async.wait_group %0;" ::"n"(MJ_PD_STAGES - 2) : "memory");
                __syncwarp();
                {
                    const int ahead = blk + (MJ_PD_STAGES - 1) * (int)gridDim.x;
                    const int ahead_row = ahead * kRows + r;
                    const int refill = it == 0 ? MJ_PD_STAGES - 1 : it - 1;
                    pd::stage_slice<kHidden>(my_stages_shared + refill * 16u * pd::kSliceChunks, x,
                                             ahead_row, slice,
                                             ahead < blocks && ahead_row < num_tokens, lane);
                    asm volatile("cp.async.commit_group;" ::: "memory");
                }
                const uint4 *stage = my_stages + it * pd::kSliceChunks;
                const int row = blk * kRows + r;
                const bool active = row < num_tokens && g < kChunks;
                unsigned char *x_row = region + lay.x_offset + (mj_u64)row * lay.x_row_bytes;
                unsigned char *sf_row = region + lay.sf_offset + (mj_u64)row * lay.sf_row_bytes;
                if (kFormat == MJ_FMT_MXFP8) {
                    if (row < num_tokens)
                        pd::quantize_mxfp8_slice(stage, lane, kChunks - 32 * slice,
                                                 x_row + (mj_u64)slice * 1024, sf_row + 32 * slice);
                } else if (kFormat == MJ_FMT_MXFP4) {
                    if (active)
                        pd::quantize_mxfp4(pd::read_block(stage, lane), x_row + (mj_u64)g * 16,
                                           sf_row + g);
                } else {
                    // Two 16-element blocks per thread; the row's scale needs the
                    // maximum over all its warps (rows are whole warps).
                    pd::Chunk c;
                    float amax0 = 0.0f, amax1 = 0.0f;
                    if (active) {
                        c = pd::read_block(stage, lane);
                        amax0 = bf16_abs_max_num(c.w, 8);
                        amax1 = bf16_abs_max_num(c.w + 8, 8);
                    }
                    // Non-negative floats order as their bits.
                    const mj_u32 mine =
                        f32_bits(amax0) > f32_bits(amax1) ? f32_bits(amax0) : f32_bits(amax1);
                    const mj_u32 wmax = __reduce_max_sync(pd::kFullMask, mine);
                    // Two slot sets: a warp may write the next row's maximum while a
                    // slower one still reads this row's.
                    if (lane == 0) warp_max[parity][t >> 5] = wmax;
                    __syncthreads();
                    if (active) {
                        mj_u32 rowmax = 0;
#pragma unroll
                        for (int k = 0; k < kRowWarps; k++)
                            rowmax = rowmax > warp_max[parity][r * kRowWarps + k]
                                         ? rowmax
                                         : warp_max[parity][r * kRowWarps + k];
                        const float pts = nvfp4_token_scale(f32_from_bits(rowmax));
                        const float six_pts = 6.0f * pts;
                        // nvfp4_group_sf of both blocks: the hardware rounding is
                        // the same, and gives 0x7f for the Inf / Inf NaN.
                        const mj_u32 sf2 = cvt_e4m3x2(amax0 / six_pts, amax1 / six_pts);
                        // nvfp4_group_inv of both scale bytes.
                        float s0, s1;
                        f32x2_from_e4m3x2(sf2, s0, s1);
                        const float inv[2] = {nvfp4_inv_of_scale(s0, pts),
                                              nvfp4_inv_of_scale(s1, pts)};
                        mj_u32 q[4];
#pragma unroll
                        for (int k = 0; k < 4; k++) {
                            float v[8];
                            unpack_bf16x8(c.w + 4 * k, v);
                            q[k] = e2m1_with_signs(e2m1_codes_x8(v, inv[k >> 1]),
                                                   e2m1_signs_x8(c.w + 4 * k));
                        }
                        reinterpret_cast<uint4 *>(x_row)[g] = make_uint4(q[0], q[1], q[2], q[3]);
                        reinterpret_cast<unsigned short *>(sf_row)[g] = (unsigned short)sf2;
                        if (g == 0)
                            reinterpret_cast<float *>(region + lay.x_scales_offset)[row] = pts;
                    }
                }
            }
        }

        const long long pad = (long long)(max_tokens - num_tokens) * kTopk;
        for (long long e = (long long)blockIdx.x * kThreads + t; e < pad;
             e += (long long)gridDim.x * kThreads) {
            const mj_u64 i = (mj_u64)num_tokens * kTopk + (mj_u64)e;
            ids_out[i] = -1;
            w_out[i] = 0.0f;
        }
    }
    // A rejected launch still leaves no copy in flight.
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Counts the top-k ids outside [-1, num_experts) that CTA b covers (blocks of
// MJ_PD_CHECK_IDS_PER_CTA ids, b, b + gridDim.x, ...) into workspace slot b,
// which the main kernel reads after its griddepcontrol.wait.
// grid = mj_pd_check_ctas(...), block = MJ_PD_CHECK_THREADS.
template <int kTopk>
__global__ void __launch_bounds__(MJ_PD_CHECK_THREADS)
    pre_dispatch_check_kernel(const int *__restrict__ topk_ids, unsigned char *__restrict__ region,
                              int num_tokens, int num_experts) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    // The main kernel may start now: it only loads inputs (complete, as the
    // wait above returned) until this grid has completed.
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

    const long long total = (long long)num_tokens * kTopk;
    mj_u32 bad = 0;
    for (long long base = (long long)blockIdx.x * MJ_PD_CHECK_IDS_PER_CTA + threadIdx.x;
         base < total; base += (long long)gridDim.x * MJ_PD_CHECK_IDS_PER_CTA) {
#pragma unroll
        for (int k = 0; k < MJ_PD_CHECK_IDS_PER_THREAD; k++) {
            // Strided so each warp load is coalesced.
            const long long i = base + (long long)k * MJ_PD_CHECK_THREADS;
            if (i < total) {
                const int id = topk_ids[i];
                bad += (id < -1 || id >= num_experts) ? 1u : 0u;
            }
        }
    }
    __shared__ mj_u32 warp_bad[MJ_PD_CHECK_THREADS / 32];
    bad = __reduce_add_sync(pd::kFullMask, bad);
    if ((threadIdx.x & 31u) == 0u) warp_bad[threadIdx.x >> 5] = bad;
    __syncthreads();
    if (threadIdx.x == 0) {
        mj_u32 sum = 0;
#pragma unroll
        for (int w = 0; w < MJ_PD_CHECK_THREADS / 32; w++)
            sum += warp_bad[w];
        reinterpret_cast<mj_u32 *>(region)[MJ_WS_PD_CHECK_SLOTS + blockIdx.x] = sum;
    }
}

} // namespace mj

#endif // MJ_PRE_DISPATCH_CUH
