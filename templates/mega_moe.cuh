/*
 * MegaMoE for Hopper (sm_90a): one persistent kernel per rank runs a whole MoE
 * layer (NUMERICS.md steps 1-8) over the symmetric buffer:
 *
 *   1. lists    each routed (token, slot) of this rank is appended to the list
 *               of its global expert (in this rank's workspace)
 *   2. pull     each rank reads, from every peer, the lists of its local
 *               experts and the listed tokens (pre-dispatched in the peer's
 *               input region), decodes them exactly into BF16 rows of its pool
 *   3. GEMM 1   per (expert, token tile, 64 intermediate rows): gate and up
 *               accumulators, then alphas, BF16 rounding, clamp, activation,
 *               routing weight, and the GEMM 2 input quantized into the L2
 *               format (stored dequantized, exact in BF16)
 *   4. GEMM 2   per (expert, token tile, 64 hidden rows); the BF16 result goes
 *               straight into the combine slot of the token's home rank
 *   5. combine  each rank sums its tokens' slots in increasing k
 *
 * GEMMs are swap-AB wgmma: decoded weights are the register operand (M = 64),
 * tokens the shared-memory operand (N = BLOCK_M, 8..64), so decode-sized token
 * counts waste no tensor-core rows. Stages are separated by barriers across the
 * rank's CTAs and, where data crosses ranks, across ranks (system scope).
 * Every launch leaves its lists empty; barrier counters only grow.
 */
#ifndef MJ_MEGA_MOE_CUH
#define MJ_MEGA_MOE_CUH

#include "common/numerics.cuh"
#include "common/wgmma.cuh"
#include "layout/moe_layout.h"
#include "layout/symm_layout.h"
#include "mega_moe/decode.cuh"
#include "mega_moe/sync.cuh"

namespace mj {

namespace moe {

constexpr int kActSwiglu = 0, kActSwigluOai = 1, kActSitu = 2;

/* NUMERICS.md steps 3-4 on BF16-rounded g and u (as floats). */
template <int kActivation, unsigned kClampBits>
__device__ __forceinline__ float activate(float g, float u) {
    if (kClampBits != 0u && kActivation != kActSitu) {
        const float c = f32_from_bf16(bf16_from_f32(f32_from_bits(kClampBits)));
        g = g < c ? g : c;
        u = u < -c ? -c : (u > c ? c : u);
    }
    if (kActivation == kActSwiglu) return g * (1.0f / (1.0f + expf(-g))) * u;
    if (kActivation == kActSwigluOai) return g * (1.0f / (1.0f + expf(-(1.702f * g)))) * (u + 1.0f);
    const float h = 4.0f * tanhf(g * 0.25f) * (1.0f / (1.0f + expf(-g)));
    return h * (25.0f * tanhf(u / 25.0f));
}

/* NUMERICS.md step 6: act quantized into the GEMM 2 input format and decoded
 * back (exact in BF16). n values of one scale group. */
template <int kL2Fmt> __device__ __forceinline__ void quantize_l2_group(float *v, int n) {
    if (kL2Fmt == MJ_FMT_BF16) {
        for (int i = 0; i < n; i++)
            v[i] = f32_from_bf16(bf16_from_f32(v[i]));
        return;
    }
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        amax = max_num(amax, abs_f32(v[i]));
    if (kL2Fmt == MJ_FMT_NVFP4) {
        const unsigned char sf = e4m3_from_f32(amax * 0.16666667f);
        const float s = f32_from_e4m3(sf);
        const float inv = s > 0.0f ? 1.0f / s : 0.0f;
        for (int i = 0; i < n; i++)
            v[i] = f32_from_e2m1(e2m1_from_f32(v[i] * inv)) * s;
        return;
    }
    const unsigned char e =
        ue8m0_for_amax(amax, kL2Fmt == MJ_FMT_MXFP8 ? MJ_E4M3_MAX : MJ_E2M1_MAX);
    const float inv = ue8m0_inv_scale(e), s = f32_from_bits((mj_u32)e << 23);
    for (int i = 0; i < n; i++)
        v[i] = kL2Fmt == MJ_FMT_MXFP8 ? f32_from_e4m3(e4m3_from_f32(v[i] * inv)) * s
                                      : f32_from_e2m1(e2m1_from_f32(v[i] * inv)) * s;
}

/* Pool row meta words. */
enum { kMetaRank = 0, kMetaToken = 1, kMetaSlot = 2, kMetaXScale = 3, kMetaWeight = 4 };

} // namespace moe

template <int kHidden, int kInter, int kExperts, int kTopk, int kRanks, int kMaxTokens,
          int kWeightFmt, int kDispatchFmt, int kL2Fmt, int kActivation, unsigned kClampBits,
          int kBlockM, int kNumSMs>
__global__ void __launch_bounds__(MJ_MOE_THREADS, 1)
    mega_moe_kernel(const __grid_constant__ mj_moe_args args) {
    constexpr int kLocal = kExperts / kRanks;
    constexpr int kListCap = kMaxTokens * kTopk;
    constexpr int kBN = MJ_MOE_BLOCK_N, kBK = MJ_MOE_BLOCK_K, kAccRegs = kBlockM / 2;
    static_assert(kExperts % kRanks == 0, "experts must divide among ranks");
    static_assert(kHidden % kBK == 0 && kHidden % kBN == 0 && kInter % kBK == 0, "tile shapes");
    static_assert(kBlockM == 8 || kBlockM == 16 || kBlockM == 32 || kBlockM == 64, "BLOCK_M");
    static_assert(MJ_MOE_THREADS == 128, "one warpgroup per CTA");

    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *b_tile = smem; // [kBlockM][kBK] BF16, K-major
    float *act_tile = reinterpret_cast<float *>(smem + kBlockM * kBK * 2); // [kBN][kBlockM]
    __shared__ mj_u32 s_count[kExperts];    // pairs from rank s for local expert le: [le][s]
    __shared__ mj_u32 s_base[kExperts + 1]; // their first pool row, prefix over (le, s)
    __shared__ mj_u32 s_tiles[kLocal + 1];  // prefix of token tiles over local experts

    // Nothing touches a peer before the previous kernel on the stream is done.
    asm volatile("griddepcontrol.wait;" ::: "memory");

    const mj_peers &peers = args.peers;
    const int rank = (int)peers.rank, tid = (int)threadIdx.x;
    unsigned char *own = reinterpret_cast<unsigned char *>(peers.base);
    const mj_input_layout in_l = mj_layout_input(kHidden, kTopk, kMaxTokens, kDispatchFmt);
    const mj_moe_layout l =
        mj_layout_moe(kHidden, kInter, kExperts, kTopk, kRanks, kMaxTokens, kDispatchFmt);
    mj_u64 *ws = reinterpret_cast<mj_u64 *>(own + l.ws_offset);
    mj_u32 *list_count = reinterpret_cast<mj_u32 *>(own + l.list_count_offset);
    mj_u32 *lists = reinterpret_cast<mj_u32 *>(own + l.list_offset);
    unsigned short *pool = reinterpret_cast<unsigned short *>(own + l.pool_offset);
    mj_u32 *meta = reinterpret_cast<mj_u32 *>(own + l.pool_meta_offset);
    unsigned short *pool2 = reinterpret_cast<unsigned short *>(own + l.pool2_offset);
    unsigned short *combine = reinterpret_cast<unsigned short *>(own + l.combine_offset);
    const int *own_ids = reinterpret_cast<const int *>(own + in_l.topk_idx_offset);

    // 1. Lists of this rank's routed pairs, per global expert.
    for (int i = (int)blockIdx.x * MJ_MOE_THREADS + tid; i < args.num_tokens * kTopk;
         i += kNumSMs * MJ_MOE_THREADS) {
        const int e = own_ids[i];
        if (e >= 0) lists[(mj_u64)e * kListCap + atomicAdd(&list_count[e], 1u)] = (mj_u32)i;
    }
    cross_rank_barrier<kNumSMs, kRanks>(ws, peers);

    // Every CTA derives the pool layout from the peers' list counts.
    for (int i = tid; i < kExperts; i += MJ_MOE_THREADS) {
        const int le = i / kRanks, s = i % kRanks;
        s_count[i] = *peer_ptr(peers, s, list_count + rank * kLocal + le);
    }
    __syncthreads();
    if (tid == 0) {
        mj_u32 rows = 0, tiles = 0;
        for (int le = 0; le < kLocal; le++) {
            s_tiles[le] = tiles;
            mj_u32 expert_rows = 0;
            for (int s = 0; s < kRanks; s++) {
                s_base[le * kRanks + s] = rows + expert_rows;
                expert_rows += s_count[le * kRanks + s];
            }
            rows += expert_rows;
            tiles += (expert_rows + kBlockM - 1) / kBlockM;
        }
        s_base[kExperts] = rows;
        s_tiles[kLocal] = tiles;
    }
    __syncthreads();
    if (blockIdx.x == 0 && args.recv_stats != nullptr)
        for (int le = tid; le < kLocal; le += MJ_MOE_THREADS)
            atomicAdd(args.recv_stats + le, (int)(s_base[(le + 1) * kRanks] - s_base[le * kRanks]));

    // 2. Pull: one warp per received pair decodes its token row into the pool.
    {
        const int warp = (int)blockIdx.x * (MJ_MOE_THREADS / 32) + tid / 32, lane = tid & 31;
        const int rows = (int)s_base[kExperts];
        for (int p = warp; p < rows; p += kNumSMs * (MJ_MOE_THREADS / 32)) {
            int src = 0; // the (expert, source) segment holding row p
            while (s_base[src + 1] <= (mj_u32)p)
                src++;
            const int le = src / kRanks, s = src % kRanks;
            const int e = rank * kLocal + le;
            const mj_u32 pair =
                *peer_ptr(peers, s, lists + (mj_u64)e * kListCap + (p - s_base[src]));
            const int token = (int)(pair / kTopk), slot = (int)(pair % kTopk);
            const unsigned char *src_region = peer_ptr(peers, s, own);
            const unsigned char *x_row =
                src_region + in_l.x_offset + (mj_u64)token * in_l.x_row_bytes;
            const unsigned char *sf_row =
                src_region + in_l.sf_offset + (mj_u64)token * in_l.sf_row_bytes;
            mj_u32 *out = reinterpret_cast<mj_u32 *>(pool + (mj_u64)p * kHidden);
            for (int k = 2 * lane; k < kHidden; k += 64)
                out[k / 2] = decode_pair<kDispatchFmt>(x_row, sf_row, k);
            if (lane == 0) {
                const float xs =
                    kDispatchFmt == MJ_FMT_NVFP4
                        ? reinterpret_cast<const float *>(src_region + in_l.x_scales_offset)[token]
                        : 1.0f;
                const float w =
                    reinterpret_cast<const float *>(src_region + in_l.topk_w_offset)[pair];
                mj_u32 *m = meta + (mj_u64)p * MJ_MOE_META_WORDS;
                m[moe::kMetaRank] = (mj_u32)s;
                m[moe::kMetaToken] = (mj_u32)token;
                m[moe::kMetaSlot] = (mj_u32)slot;
                m[moe::kMetaXScale] = f32_bits(xs);
                m[moe::kMetaWeight] = f32_bits(w);
            }
        }
    }
    grid_barrier<kNumSMs>(ws, false);

    const int warp = tid / 32, lane = tid & 31, g = lane / 4, q = lane % 4;
    const mj_u32 b_addr = smem_address(b_tile);
    const mj_moe_weight_layout wl = mj_layout_moe_weights(kHidden, kInter, kWeightFmt);
    constexpr int kWBits = kWeightFmt == MJ_FMT_BF16 ? 16 : kWeightFmt == MJ_FMT_MXFP8 ? 8 : 4;
    constexpr int kWGroup = kWeightFmt == MJ_FMT_BF16 ? 1 : kWeightFmt == MJ_FMT_NVFP4 ? 16 : 32;

    // Stages kBK columns [k0, k0 + kBK) of token rows [row0, row0 + valid) of a
    // BF16 matrix with `cols` columns; rows past `valid` are zero.
    auto stage_tokens = [&](const unsigned short *mat, int cols, int row0, int valid, int k0) {
        for (int c = tid; c < kBlockM * (kBK / 8); c += MJ_MOE_THREADS) {
            const int n = c / (kBK / 8), kc = c % (kBK / 8);
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (n < valid)
                v = *reinterpret_cast<const uint4 *>(mat + (mj_u64)(row0 + n) * cols + k0 + kc * 8);
            *reinterpret_cast<uint4 *>(b_tile + kmajor_offset(n, kc * 8, kBlockM)) = v;
        }
        fence_proxy_async_shared();
        __syncthreads();
    };
    // The A fragment of weight rows [r0 + 16 warp, +16) at columns [k, k + 16).
    auto weight_fragment = [&](const unsigned char *w, const unsigned char *sf, int k_total, int r0,
                               int k, mj_u32(&a)[4]) {
        const mj_u64 row_bytes = (mj_u64)k_total * kWBits / 8,
                     sf_bytes = (mj_u64)(k_total / kWGroup);
        const int ra = r0 + 16 * warp + g, rb = ra + 8, kq = k + 2 * q;
        a[0] = decode_pair<kWeightFmt>(w + ra * row_bytes, sf + ra * sf_bytes, kq);
        a[1] = decode_pair<kWeightFmt>(w + rb * row_bytes, sf + rb * sf_bytes, kq);
        a[2] = decode_pair<kWeightFmt>(w + ra * row_bytes, sf + ra * sf_bytes, kq + 8);
        a[3] = decode_pair<kWeightFmt>(w + rb * row_bytes, sf + rb * sf_bytes, kq + 8);
    };
    // Finds the expert and token tile of a tile index.
    auto locate = [&](int tile, int &le, int &row0, int &valid) {
        le = 0;
        while (s_tiles[le + 1] <= (mj_u32)tile)
            le++;
        const int first = (int)s_base[le * kRanks];
        const int rows = (int)s_base[(le + 1) * kRanks] - first;
        row0 = first + (tile - (int)s_tiles[le]) * kBlockM;
        valid = first + rows - row0 < kBlockM ? first + rows - row0 : kBlockM;
    };

    // 3. GEMM 1 with the activation and the GEMM 2 input quantization.
    constexpr int kN1 = kInter / kBN;
    for (int task = (int)blockIdx.x; task < (int)s_tiles[kLocal] * kN1; task += kNumSMs) {
        int le, row0, valid;
        locate(task / kN1, le, row0, valid);
        const int n0 = (task % kN1) * kBN;
        const unsigned char *w1 = args.w1 + (mj_u64)le * wl.w1_expert_bytes;
        const unsigned char *sf1 = args.w1_sf + (mj_u64)le * wl.w1_sf_expert_bytes;
        float gate[kAccRegs], up[kAccRegs];
#pragma unroll
        for (int i = 0; i < kAccRegs; i++)
            gate[i] = up[i] = 0.0f;
        for (int k0 = 0; k0 < kHidden; k0 += kBK) {
            stage_tokens(pool, kHidden, row0, valid, k0);
            wgmma_fence();
#pragma unroll
            for (int k16 = 0; k16 < kBK / 16; k16++) {
                mj_u32 ag[4], au[4];
                weight_fragment(w1, sf1, kHidden, n0, k0 + 16 * k16, ag);
                weight_fragment(w1, sf1, kHidden, kInter + n0, k0 + 16 * k16, au);
                const mj_u64 desc = kmajor_desc(b_addr, k16, kBlockM);
                Wgmma<kBlockM>::mma(gate, ag, desc);
                Wgmma<kBlockM>::mma(up, au, desc);
            }
            wgmma_commit();
            wgmma_wait_all();
            __syncthreads();
        }
        const float alpha_g = args.l1_alpha_gate[le], alpha_u = args.l1_alpha_up[le];
        const float act_scale = args.l2_act_scale[le];
#pragma unroll
        for (int i = 0; i < kAccRegs; i++) {
            const int row = 16 * warp + g + ((i & 2) ? 8 : 0), col = 8 * (i / 4) + 2 * q + (i & 1);
            float act = 0.0f;
            if (col < valid) {
                const mj_u32 *m = meta + (mj_u64)(row0 + col) * MJ_MOE_META_WORDS;
                const float xs = f32_from_bits(m[moe::kMetaXScale]);
                const float gv = f32_from_bf16(bf16_from_f32(gate[i] * (xs * alpha_g)));
                const float uv = f32_from_bf16(bf16_from_f32(up[i] * (xs * alpha_u)));
                act = moe::activate<kActivation, kClampBits>(gv, uv) *
                      (f32_from_bits(m[moe::kMetaWeight]) * act_scale);
            }
            act_tile[row * kBlockM + col] = act;
        }
        __syncthreads();
        constexpr int kGroup = kL2Fmt == MJ_FMT_BF16 ? 1 : kL2Fmt == MJ_FMT_NVFP4 ? 16 : 32;
        for (int gi = tid; gi < valid * (kBN / kGroup); gi += MJ_MOE_THREADS) {
            const int col = gi % valid, r0 = (gi / valid) * kGroup;
            float v[kGroup];
            for (int j = 0; j < kGroup; j++)
                v[j] = act_tile[(r0 + j) * kBlockM + col];
            moe::quantize_l2_group<kL2Fmt>(v, kGroup);
            unsigned short *dst = pool2 + (mj_u64)(row0 + col) * kInter + n0 + r0;
            for (int j = 0; j < kGroup; j++)
                dst[j] = bf16_from_f32(v[j]);
        }
        __syncthreads();
    }
    grid_barrier<kNumSMs>(ws, false);

    // 4. GEMM 2; each result goes to its token's home rank.
    constexpr int kN2 = kHidden / kBN;
    for (int task = (int)blockIdx.x; task < (int)s_tiles[kLocal] * kN2; task += kNumSMs) {
        int le, row0, valid;
        locate(task / kN2, le, row0, valid);
        const int n0 = (task % kN2) * kBN;
        const unsigned char *w2 = args.w2 + (mj_u64)le * wl.w2_expert_bytes;
        const unsigned char *sf2 = args.w2_sf + (mj_u64)le * wl.w2_sf_expert_bytes;
        float acc[kAccRegs];
#pragma unroll
        for (int i = 0; i < kAccRegs; i++)
            acc[i] = 0.0f;
        for (int k0 = 0; k0 < kInter; k0 += kBK) {
            stage_tokens(pool2, kInter, row0, valid, k0);
            wgmma_fence();
#pragma unroll
            for (int k16 = 0; k16 < kBK / 16; k16++) {
                mj_u32 a[4];
                weight_fragment(w2, sf2, kInter, n0, k0 + 16 * k16, a);
                Wgmma<kBlockM>::mma(acc, a, kmajor_desc(b_addr, k16, kBlockM));
            }
            wgmma_commit();
            wgmma_wait_all();
            __syncthreads();
        }
        const float alpha = args.l2_alpha[le];
#pragma unroll
        for (int i = 0; i < kAccRegs; i++) {
            const int row = 16 * warp + g + ((i & 2) ? 8 : 0), col = 8 * (i / 4) + 2 * q + (i & 1);
            if (col >= valid) continue;
            const mj_u32 *m = meta + (mj_u64)(row0 + col) * MJ_MOE_META_WORDS;
            unsigned short *dst = peer_ptr(peers, (int)m[moe::kMetaRank], combine);
            dst[((mj_u64)m[moe::kMetaSlot] * kMaxTokens + m[moe::kMetaToken]) * kHidden + n0 +
                row] = bf16_from_f32(acc[i] * alpha);
        }
    }
    cross_rank_barrier<kNumSMs, kRanks>(ws, peers);

    // 5. Combine this rank's tokens; empty the lists for the next launch (every
    // peer has read them: it passed the barrier above after its GEMM 2).
    for (int i = (int)blockIdx.x * MJ_MOE_THREADS + tid; i < args.num_tokens * kHidden;
         i += kNumSMs * MJ_MOE_THREADS) {
        const int t = i / kHidden, h = i % kHidden;
        float acc = 0.0f;
        for (int k = 0; k < kTopk; k++)
            if (own_ids[t * kTopk + k] >= 0)
                acc = acc + f32_from_bf16(combine[((mj_u64)k * kMaxTokens + t) * kHidden + h]);
        args.y[i] = bf16_from_f32(acc);
    }
    if (blockIdx.x == 0)
        for (int e = tid; e < kExperts; e += MJ_MOE_THREADS)
            list_count[e] = 0u;
    // No peer may write this launch's successor into our combine slots, or
    // append to lists we are still reading, before everyone is done here.
    cross_rank_barrier<kNumSMs, kRanks>(ws, peers);
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

} // namespace mj

#endif // MJ_MEGA_MOE_CUH
