/*
 * Dispatch: routing and the pull of token rows into the GEMM 1 tiles.
 *
 * Every CTA counts the pairs of all ranks routed to each local expert (the
 * same tables everywhere, no exchange). The pairs of all ranks, concatenated,
 * are then pulled round-robin over the CTAs: a warp claims the pair's row in
 * its expert's tiles (the order of rows inside an expert does not change any
 * result: every token column of the GEMMs is computed on its own), converts
 * the row from the dispatch format into the tile image, writes its meta and
 * releases one row of the expert's ready count. A fused shared expert's rows
 * (routing entry kLocal) are this rank's own tokens, pulled after all pairs:
 * token t is its row t (no claim), slot K, routing weight 1.
 */
#ifndef MJ_MEGA_MOE_DISPATCH_CUH
#define MJ_MEGA_MOE_DISPATCH_CUH

#include "mega_moe/activation.cuh"
#include "mega_moe/launch.cuh"

namespace mj {

template <class C> __device__ __forceinline__ const int *rank_ids(const Launch<C> &L, int s) {
    return peer_ptr(L.peers(), s, reinterpret_cast<const int *>(L.own + L.in.topk_idx_offset));
}

/* Adds every pair routed to a local expert into L.routing.rows (zeroed), and
 * this rank's tokens as the shared expert's rows. */
template <class C> __device__ __forceinline__ void route_count(const Launch<C> &L, int tid) {
    const int first = (int)L.peers().rank * C::kLocal;
    if constexpr (C::kShared)
        if (tid == 0) L.routing.rows[C::kLocal] = (mj_u32)L.ntok[L.peers().rank];
    for (int s = 0; s < C::kRanks; s++) {
        const int *ids = rank_ids(L, s);
        const int n = L.ntok[s] * C::kTopk;
        const int n4 = n / 4;
        for (int i = tid; i < n4; i += MJ_MOE_THREADS) {
            const int4 v = reinterpret_cast<const int4 *>(ids)[i];
            const int e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (e[j] >= first && e[j] < first + C::kLocal)
                    atomicAdd(L.routing.rows + (e[j] - first), 1u);
        }
        for (int i = 4 * n4 + tid; i < n; i += MJ_MOE_THREADS) {
            const int e = ids[i];
            if (e >= first && e < first + C::kLocal) atomicAdd(L.routing.rows + (e - first), 1u);
        }
    }
}

/* Eight NVFP4 elements (one word of E2M1 codes, element 2i in the low nibble
 * of byte i) as BF16 pairs; scale63 = their scale x 2^63. */
__device__ __forceinline__ uint4 bf16x8_of_nvfp4(mj_u32 packed, float scale63) {
    return make_uint4(bf16x2_from_e2m1x2(packed & 0xffu, scale63),
                      bf16x2_from_e2m1x2(packed >> 8 & 0xffu, scale63),
                      bf16x2_from_e2m1x2(packed >> 16 & 0xffu, scale63),
                      bf16x2_from_e2m1x2(packed >> 24, scale63));
}

/* One pair's token row into row r of its tile (all stages), by one warp:
 * batches of 16-byte loads before their stores, so a row costs a few memory
 * latencies (the pull runs while the weight streams start): 8 loads a lane
 * of MXFP8 rows (16 elements each), 8 of BF16 rows, 8 of NVFP4 rows (32 elements each,
 * converted to BF16 on the way: a 7168-element row in one round; with 4 loads of 8 elements the
 * NVFP4 pull took longer than the BF16 one, bench/RESULTS.md, tenth session); more spill beside the
 * kernel's other roles (tests/test_mega_moe_build.c). */
template <class C>
__device__ __forceinline__ void pull_row(const Launch<C> &L, int s, int token, unsigned char *tile,
                                         int r, int lane) {
    // Two CTAs an SM pull at 80 registers a thread (before setmaxnreg): four.
    constexpr int kBatch = C::kTwoCtas ? 4 : 8;
    const unsigned char *src = peer_ptr(L.peers(), s, L.own);
    const unsigned char *x_row = src + L.in.x_offset + (mj_u64)token * L.in.x_row_bytes;
    const unsigned char *sf_row = src + L.in.sf_offset + (mj_u64)token * L.in.sf_row_bytes;
    if (C::kDispatchFmt == MJ_FMT_MXFP8) {
        // A lane step is 16 elements and their group's UE8M0 scale, stored
        // as the elements times the scale in BF16, exact for scale bytes
        // from 3 (NUMERICS.md). Wide-tile kernels and E2M1 ones beside a
        // shared expert pull four loads a round (at eight DeepSeek-V3's and
        // gpt-oss's mxfp4-a8 160-token kernels and Kimi K2's with its shared
        // expert spilled).
        constexpr int kStep = 16 * 32;
        constexpr int kMxBatch = C::kWideTile || (C::kShared && C::kW4) ? 4 : kBatch;
        for (int k0 = 16 * lane; k0 < C::kHidden; k0 += kMxBatch * kStep) {
            uint4 v[kMxBatch];
            unsigned char e[kMxBatch];
#pragma unroll
            for (int j = 0; j < kMxBatch; j++) {
                const int k = k0 + j * kStep;
                if (k < C::kHidden) {
                    v[j] = *reinterpret_cast<const uint4 *>(x_row + k);
                    e[j] = sf_row[k / 32];
                }
            }
#pragma unroll
            for (int j = 0; j < kMxBatch; j++) {
                const int k = k0 + j * kStep;
                if (k >= C::kHidden) continue;
                unsigned char *stage = tile + (mj_u64)(k / C::kStageK) * C::kBStage;
                const int kk = k % C::kStageK;
                const float scale = f32_from_bits((mj_u32)e[j] << 23);
                *reinterpret_cast<uint4 *>(stage +
                                           mj_moe_token_offset(C::kBlockM, C::kStageK, r, kk)) =
                    bf16x8_of_mxfp8(v[j].x, v[j].y, scale);
                *reinterpret_cast<uint4 *>(stage +
                                           mj_moe_token_offset(C::kBlockM, C::kStageK, r, kk + 8)) =
                    bf16x8_of_mxfp8(v[j].z, v[j].w, scale);
            }
        }
    } else if (C::kDispatchFmt == MJ_FMT_NVFP4) {
        // A lane step: 32 elements, one 16-byte load of codes and one 2-byte
        // load of their two scales (rows hold a multiple of 64 elements).
        constexpr int kStep = 32 * 32;
        // Wide-tile kernels pull four loads a round: at 5, 7 and 8 their pull
        // spilled (DeepSeek-V3's nvfp4 row; not at 4 or 6).
        constexpr int kNvBatch = C::kWideTile ? 4 : kBatch;
        for (int k0 = 32 * lane; k0 < C::kHidden; k0 += kNvBatch * kStep) {
            uint4 q[kNvBatch];
            mj_u32 sf[kNvBatch];
#pragma unroll
            for (int j = 0; j < kNvBatch; j++) {
                const int k = k0 + j * kStep;
                if (k < C::kHidden) {
                    q[j] = *reinterpret_cast<const uint4 *>(x_row + k / 2);
                    sf[j] = *reinterpret_cast<const unsigned short *>(sf_row + k / 16);
                }
            }
#pragma unroll
            for (int j = 0; j < kNvBatch; j++) {
                const int k = k0 + j * kStep;
                if (k >= C::kHidden) continue;
                unsigned char *stage = tile + (mj_u64)(k / C::kStageK) * C::kBStage;
                const int kk = k % C::kStageK;
                const float s0 = e4m3_scale63((unsigned char)sf[j]),
                            s1 = e4m3_scale63((unsigned char)(sf[j] >> 8));
                const mj_u32 words[4] = {q[j].x, q[j].y, q[j].z, q[j].w};
#pragma unroll
                for (int h = 0; h < 4; h++)
                    *reinterpret_cast<uint4 *>(
                        stage + mj_moe_token_offset(C::kBlockM, C::kStageK, r, kk + 8 * h)) =
                        bf16x8_of_nvfp4(words[h], h < 2 ? s0 : s1);
            }
        }
    } else {
        constexpr int kStep = 8 * 32;
        for (int k0 = 8 * lane; k0 < C::kHidden; k0 += kBatch * kStep) {
            uint4 v[kBatch];
#pragma unroll
            for (int j = 0; j < kBatch; j++) {
                const int k = k0 + j * kStep;
                if (k < C::kHidden) v[j] = *reinterpret_cast<const uint4 *>(x_row + 2 * k);
            }
#pragma unroll
            for (int j = 0; j < kBatch; j++) {
                const int k = k0 + j * kStep;
                if (k >= C::kHidden) continue;
                unsigned char *stage = tile + (mj_u64)(k / C::kStageK) * C::kBStage;
                *reinterpret_cast<uint4 *>(
                    stage + mj_moe_token_offset(C::kBlockM, C::kStageK, r, k % C::kStageK)) = v[j];
            }
        }
    }
}

/* The row of pair i among routing entry le's rows: claimed for a local
 * expert (le < 0: none of this rank's); token i / K's own row for the shared
 * expert. */
template <class C>
__device__ __forceinline__ mj_u32 row_in_expert(const Launch<C> &L, int le, int i) {
    if constexpr (C::kShared)
        if (le == C::kLocal) return (mj_u32)(i / C::kTopk);
    return le >= 0 ? claim(L.fill() + le) : 0u;
}

/* The pairs of this CTA (ordinals cta + j * kCtas over all ranks'
 * pairs), j = slot, slot + slots, ...: one warp of `slots` pulling warps.
 * Rounds of 32 pairs: lane j reads pair j's expert and claims its row, so a
 * round pays those two latencies once; then the warp pulls the round's local
 * rows one after the other. */
template <class C>
__device__ __forceinline__ void pull(const Launch<C> &L, int slot, int slots, int lane) {
    const int pairs = L.pair_base[C::kRanks];
    // Ordinals from `pairs` on: the shared expert's rows, one per own token.
    int total = pairs;
    if constexpr (C::kShared) total += L.ntok[L.peers().rank];
    const int first = (int)L.peers().rank * C::kLocal;
    const int stride = slots * C::kCtas;
    for (int o0 = L.cta() + slot * C::kCtas; o0 < total; o0 += 32 * stride) {
        const int o = o0 + lane * stride;
        int s = 0, i = 0, le = -1;
        if (o < pairs) {
            while (L.pair_base[s + 1] <= o)
                s++;
            i = o - L.pair_base[s];
            const int e = rank_ids(L, s)[i];
            if (e >= first && e < first + C::kLocal) le = e - first;
        }
        if constexpr (C::kShared) {
            if (o >= pairs && o < total) {
                s = (int)L.peers().rank;
                i = (o - pairs) * C::kTopk; // the token's first pair: token = i / K
                le = C::kLocal;
            }
        }
        const mj_u32 claimed = row_in_expert(L, le, i);
        for (mj_u32 left = __ballot_sync(0xffffffffu, le >= 0); left != 0u; left &= left - 1u) {
            const int j = __ffs((int)left) - 1;
            const int ps = __shfl_sync(0xffffffffu, s, j), pi = __shfl_sync(0xffffffffu, i, j),
                      ple = __shfl_sync(0xffffffffu, le, j);
            const mj_u32 pos = __shfl_sync(0xffffffffu, claimed, j);
            const int tile = (int)L.routing.tiles[ple] + (int)pos / C::kBlockM,
                      r = (int)pos % C::kBlockM;
            if (tile >= (int)L.routing.tiles[ple + 1]) { // more pairs than counted: a kernel bug
                if (lane == 0) L.fail(MJ_MOE_ERR_OVERFLOW, (mj_u32)ple);
                continue;
            }
            const int token = pi / C::kTopk;
            pull_row(L, ps, token, L.tile1(tile), r, lane);
            if (lane == 0) {
                const unsigned char *src = peer_ptr(L.peers(), ps, L.own);
                const float xs =
                    C::kDispatchFmt == MJ_FMT_NVFP4
                        ? reinterpret_cast<const float *>(src + L.in.x_scales_offset)[token]
                        : 1.0f;
                float w = reinterpret_cast<const float *>(src + L.in.topk_w_offset)[pi];
                int slot_k = pi % C::kTopk;
                if constexpr (C::kShared) {
                    if (ple == C::kLocal) { // slot K, routing weight 1
                        slot_k = C::kTopk;
                        w = 1.0f;
                    }
                }
                mj_u32 *m = L.meta_row(tile, r);
                m[0] = (mj_u32)ps;
                m[1] = (mj_u32)token;
                m[2] = (mj_u32)slot_k;
                m[3] = f32_bits(xs);
                m[4] = f32_bits(w);
            }
            // Each lane fences its row bytes towards the bulk copies that read
            // them; lane 0's release after the warp barrier publishes every
            // lane's (release is cumulative over what the barrier ordered).
            fence_proxy_async_global();
            __syncwarp();
            if (lane == 0) red_release_add<false>(L.ready() + ple, 1u);
        }
    }
}

} // namespace mj

#endif // MJ_MEGA_MOE_DISPATCH_CUH
