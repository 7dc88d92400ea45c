/*
 * Pre-dispatch: BF16 tokens -> this rank's input region (quantized x, block
 * scales, NVFP4 per-token scales, top-k ids and weights), bit-identical to
 * mjr_pre_dispatch in tests/reference/quant.c; every value goes through the
 * helpers of common/numerics.cuh, which tests/test_kernel_math.cpp checks
 * against that reference on the host.
 *
 * Launch order: pre_dispatch_check_kernel, then pre_dispatch_kernel (PDL). The
 * check counts invalid expert ids into the workspace; the main kernel writes
 * nothing when that count is non-zero and its last CTA resets the counters.
 */
#ifndef MJ_PRE_DISPATCH_CUH
#define MJ_PRE_DISPATCH_CUH

#include "layout/pre_dispatch_launch.h"
#include "layout/symm_layout.h"
#include "common/numerics.cuh"

namespace mj {

namespace pd {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ void unpack(const uint4 &in, float (&v)[8]) {
    const mj_u32 words[4] = {in.x, in.y, in.z, in.w};
    unpack_bf16x8(words, v);
}

// Quantizes kTokens rows (one 16-byte chunk of each per thread). A row with
// valid[i] == false is skipped, but every thread takes every barrier.
template <int kFormat> struct Quantizer;

template <> struct Quantizer<MJ_FMT_BF16> {
    template <int kTokens>
    static __device__ __forceinline__ void
    run(const uint4 (&in)[kTokens], const bool (&valid)[kTokens],
        unsigned char *const (&x_row)[kTokens], unsigned char *const (&)[kTokens],
        float *const (&)[kTokens], int t) {
// Already BF16: the 16 loaded bytes are the output bytes.
#pragma unroll
        for (int i = 0; i < kTokens; i++)
            if (valid[i]) reinterpret_cast<uint4 *>(x_row[i])[t] = in[i];
    }
};

template <int kFormat> struct MxQuantizer {
    template <int kTokens>
    static __device__ __forceinline__ void
    run(const uint4 (&in)[kTokens], const bool (&valid)[kTokens],
        unsigned char *const (&x_row)[kTokens], unsigned char *const (&sf_row)[kTokens],
        float *const (&)[kTokens], int t) {
#pragma unroll
        for (int i = 0; i < kTokens; i++) {
            float v[8];
            unpack(in[i], v);
            // A 32-element group is 4 consecutive lanes of one warp.
            float amax = amax_x8(v);
            amax = max_num(amax, __shfl_xor_sync(kFullMask, amax, 1));
            amax = max_num(amax, __shfl_xor_sync(kFullMask, amax, 2));
            if (!valid[i]) continue;
            const unsigned char e =
                ue8m0_for_amax(amax, kFormat == MJ_FMT_MXFP8 ? MJ_E4M3_MAX : MJ_E2M1_MAX);
            const float inv = ue8m0_inv_scale(e);
            if (kFormat == MJ_FMT_MXFP8) {
                mj_u32 q[2];
                pack_e4m3x8(v, inv, q);
                reinterpret_cast<uint2 *>(x_row[i])[t] = make_uint2(q[0], q[1]);
            } else {
                reinterpret_cast<mj_u32 *>(x_row[i])[t] = pack_e2m1x8(v, inv);
            }
            if ((t & 3) == 0) sf_row[i][t >> 2] = e;
        }
    }
};

template <> struct Quantizer<MJ_FMT_MXFP8> : MxQuantizer<MJ_FMT_MXFP8> {};
template <> struct Quantizer<MJ_FMT_MXFP4> : MxQuantizer<MJ_FMT_MXFP4> {};

template <> struct Quantizer<MJ_FMT_NVFP4> {
    // Row maxima need the whole CTA: warp maxima of all rows meet in shared
    // memory, one warp per row reduces them to the row's scale, and every
    // thread reads that scale after a second barrier.
    template <int kTokens>
    static __device__ __forceinline__ void
    run(const uint4 (&in)[kTokens], const bool (&valid)[kTokens],
        unsigned char *const (&x_row)[kTokens], unsigned char *const (&sf_row)[kTokens],
        float *const (&x_scale)[kTokens], int t) {
        __shared__ float warp_max[kTokens][32];
        __shared__ float token_scale[kTokens];
        float v[kTokens][8], amax[kTokens];
#pragma unroll
        for (int i = 0; i < kTokens; i++) {
            unpack(in[i], v[i]);
            amax[i] = amax_x8(v[i]);
            amax[i] = max_num(amax[i], __shfl_xor_sync(kFullMask, amax[i], 1)); // 16 = 2 lanes
            float m = amax[i];
            for (int s = 2; s < 32; s <<= 1)
                m = max_num(m, __shfl_xor_sync(kFullMask, m, s));
            if ((t & 31) == 0) warp_max[i][t >> 5] = m;
        }
        __syncthreads();
        const int warps = (int)(blockDim.x >> 5), lane = t & 31;
        for (int i = t >> 5; i < kTokens; i += warps) {
            float m = lane < warps ? warp_max[i][lane] : 0.0f;
            for (int s = 1; s < 32; s <<= 1)
                m = max_num(m, __shfl_xor_sync(kFullMask, m, s));
            if (lane == 0) token_scale[i] = nvfp4_token_scale(m);
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < kTokens; i++) {
            if (!valid[i]) continue;
            const float pts = token_scale[i];
            const unsigned char sf = nvfp4_group_sf(amax[i], pts);
            reinterpret_cast<mj_u32 *>(x_row[i])[t] = pack_e2m1x8(v[i], nvfp4_group_inv(sf, pts));
            if ((t & 1) == 0) sf_row[i][t >> 1] = sf;
            if (t == 0) *x_scale[i] = pts;
        }
    }
};

} // namespace pd

// Token CTAs (mj_pd_tokens_per_cta consecutive tokens each), then padding CTAs
// that set the top-k entries of rows [num_tokens, max_tokens) to (-1, 0).
// Launch: grid = mj_pd_grid(...), block = kHidden / 8 (8 BF16 per thread).
template <int kHidden, int kFormat, int kTopk>
__global__ void __launch_bounds__(kHidden / 8, 2)
    pre_dispatch_kernel(const unsigned short *__restrict__ x, const int *__restrict__ topk_ids,
                        const float *__restrict__ topk_weights,
                        const float *__restrict__ expert_scales, unsigned char *__restrict__ region,
                        int num_tokens, int max_tokens, int num_experts) {
    constexpr int kThreads = kHidden / 8;
    constexpr int kTokens =
        kFormat == MJ_FMT_BF16 ? MJ_PD_TOKENS_PER_CTA_BF16 : MJ_PD_TOKENS_PER_CTA_QUANT;
    static_assert(kHidden % 256 == 0, "whole warps, and whole scale groups per warp");
    static_assert(kThreads <= 1024, "hidden must be <= 8192");
    static_assert(kTopk >= 1 && kTopk * kTokens <= kThreads, "one thread per top-k slot");
    static_assert(kFormat >= MJ_FMT_BF16 && kFormat <= MJ_FMT_NVFP4, "unknown format");
    (void)num_experts; // ids were range-checked by pre_dispatch_check_kernel

    // Inputs may come from the previous kernel on the stream (PDL).
    asm volatile("griddepcontrol.wait;" ::: "memory");

    const int t = (int)threadIdx.x;
    const int token_ctas = (int)mj_pd_token_ctas(kFormat, num_tokens);
    const bool token_cta = (int)blockIdx.x < token_ctas;
    const int first = (int)blockIdx.x * kTokens;

    // Every load is issued before the workspace flag is read, so the flag's
    // latency overlaps theirs; only the stores wait for it.
    uint4 in[kTokens];
    bool valid[kTokens];
#pragma unroll
    for (int i = 0; i < kTokens; i++) {
        valid[i] = token_cta && first + i < num_tokens;
        in[i] = valid[i] ? reinterpret_cast<const uint4 *>(x + (mj_u64)(first + i) * kHidden)[t]
                         : make_uint4(0u, 0u, 0u, 0u);
    }
    const bool slot_thread = token_cta && t < kTokens * kTopk && first + t / kTopk < num_tokens;
    const mj_u64 slot = (mj_u64)first * kTopk + (mj_u64)t;
    int id = -1;
    float w = 0.0f;
    if (slot_thread) {
        id = topk_ids[slot];
        w = topk_weights[slot];
    }

    volatile mj_u32 *ws = reinterpret_cast<volatile mj_u32 *>(region);
    __shared__ int reject;
    // One read per CTA keeps the NVFP4 barrier uniform whatever happens.
    if (t == 0) reject = ws[MJ_WS_PD_BAD_COUNT] != 0u;
    __syncthreads();

    if (!reject) {
        const mj_input_layout lay = mj_layout_input(kHidden, kTopk, max_tokens, kFormat);
        int *ids_out = reinterpret_cast<int *>(region + lay.topk_idx_offset);
        float *w_out = reinterpret_cast<float *>(region + lay.topk_w_offset);
        if (token_cta) {
            unsigned char *x_rows[kTokens], *sf_rows[kTokens];
            float *scales[kTokens];
#pragma unroll
            for (int i = 0; i < kTokens; i++) {
                const mj_u64 row = (mj_u64)(first + i);
                x_rows[i] = region + lay.x_offset + row * lay.x_row_bytes;
                sf_rows[i] = region + lay.sf_offset + row * lay.sf_row_bytes;
                scales[i] = reinterpret_cast<float *>(region + lay.x_scales_offset) + row;
            }
            pd::Quantizer<kFormat>::template run<kTokens>(in, valid, x_rows, sf_rows, scales, t);
            if (slot_thread) {
                // Only now are the ids known to be in range for the scale lookup.
                if (expert_scales != nullptr && id >= 0) w = w * expert_scales[id];
                ids_out[slot] = id;
                w_out[slot] = w;
            }
        } else {
            const long long e = (long long)((int)blockIdx.x - token_ctas) * kThreads + t;
            if (e < (long long)(max_tokens - num_tokens) * kTopk) {
                const mj_u64 i = (mj_u64)num_tokens * kTopk + (mj_u64)e;
                ids_out[i] = -1;
                w_out[i] = 0.0f;
            }
        }
    }

    // The last CTA to finish publishes and clears the counters, so the next
    // launch or graph replay starts from zero without a memset.
    __syncthreads();
    if (t == 0) {
        __threadfence();
        mj_u32 *ws_rw = reinterpret_cast<mj_u32 *>(region);
        if (atomicAdd(ws_rw + MJ_WS_PD_DONE_CTAS, 1u) == gridDim.x - 1u) {
            __threadfence();
            ws[MJ_WS_PD_LAST_BAD] = ws[MJ_WS_PD_BAD_COUNT];
            ws[MJ_WS_PD_BAD_COUNT] = 0u;
            ws[MJ_WS_PD_DONE_CTAS] = 0u;
        }
    }
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Counts top-k ids outside [-1, num_experts) into the workspace word
// MJ_WS_PD_BAD_COUNT. grid = ceil(num_tokens * kTopk / MJ_PD_CHECK_IDS_PER_CTA),
// block = MJ_PD_CHECK_THREADS.
template <int kTopk>
__global__ void __launch_bounds__(MJ_PD_CHECK_THREADS)
    pre_dispatch_check_kernel(const int *__restrict__ topk_ids, unsigned char *__restrict__ region,
                              int num_tokens, int num_experts) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    // The main kernel's own griddepcontrol.wait orders it after this grid.
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

    const long long total = (long long)num_tokens * kTopk;
    const long long base = (long long)blockIdx.x * MJ_PD_CHECK_IDS_PER_CTA + threadIdx.x;
    mj_u32 bad = 0;
    for (int k = 0; k < MJ_PD_CHECK_IDS_PER_THREAD; k++) {
        // Strided so each warp load is coalesced.
        const long long i = base + (long long)k * MJ_PD_CHECK_THREADS;
        if (i < total) {
            const int id = topk_ids[i];
            bad += (id < -1 || id >= num_experts) ? 1u : 0u;
        }
    }
    for (int s = 16; s > 0; s >>= 1)
        bad += __shfl_xor_sync(pd::kFullMask, bad, s);
    if ((threadIdx.x & 31u) == 0u && bad != 0u)
        atomicAdd(reinterpret_cast<mj_u32 *>(region) + MJ_WS_PD_BAD_COUNT, bad);
}

} // namespace mj

#endif // MJ_PRE_DISPATCH_CUH
