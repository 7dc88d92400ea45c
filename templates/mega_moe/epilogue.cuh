/*
 * Task epilogues of one math warpgroup.
 *
 * GEMM 1: the warpgroup holds gate and up of 64 intermediates for the tile's
 * tokens in matching registers, so NUMERICS.md steps 2-5 run in registers;
 * the activations go through shared memory (a token column per 68 floats) so
 * that each thread quantizes whole groups of one token (step 6) into the GEMM
 * 2 tile image; then one release of the tile's GEMM 1 count.
 *
 * GEMM 2: o = BF16(acc * l2_alpha) goes through shared memory so that each
 * token's rows leave as 16-byte stores into its combine slot on its home rank,
 * then one arrival per token on the home rank's counter.
 */
#ifndef MJ_MEGA_MOE_EPILOGUE_CUH
#define MJ_MEGA_MOE_EPILOGUE_CUH

#include "mega_moe/activation.cuh"
#include "mega_moe/mainloop.cuh"

namespace mj {

/* D fragment element j of a thread: its row in the 64-row block and its token column. */
__device__ __forceinline__ int frag_row(const MathThread &m, int j) {
    return 16 * m.w + m.g + 8 * ((j >> 1) & 1);
}
__device__ __forceinline__ int frag_col(const MathThread &m, int j) {
    return 8 * (j >> 2) + 2 * m.q + (j & 1);
}

/* The row scales (weight_image.cuh) of a thread's two rows in a 64-row
 * block whose first row is checkpoint row `first` of the expert's row-scale
 * array; 1 for images without them. */
template <class C>
__device__ __forceinline__ float2 row_scales(const Launch<C> &L, int local, int first,
                                             const MathThread &m) {
    if (!C::kRebased) return make_float2(1.0f, 1.0f);
    const float *rs = reinterpret_cast<const float *>(L.args->w + (mj_u64)local * C::kExpertBytes +
                                                      C::kRowScaleOffset) +
                      first + 16 * m.w + m.g;
    return make_float2(rs[0], rs[8]);
}

/* acc of one 64-row block times its rows' scales (exact: powers of two). */
template <int R> __device__ __forceinline__ void scale_rows(float (&acc)[R], float2 s) {
#pragma unroll
    for (int j = 0; j < R; j++)
        acc[j] *= (j >> 1) & 1 ? s.y : s.x;
}

template <class C>
__device__ __forceinline__ void
epilogue_l1(const Launch<C> &L, const Task &k, int unit, float (&gate)[C::kBlockM / 2],
            float (&up)[C::kBlockM / 2], const MathThread &m, float *scratch) {
    scale_rows(gate, row_scales(L, k.local, MJ_MOE_BLOCK_ROWS * unit, m));
    scale_rows(up, row_scales(L, k.local, C::kInter + MJ_MOE_BLOCK_ROWS * unit, m));
    const float ag = L.args->l1_alpha_gate[k.local], au = L.args->l1_alpha_up[k.local];
    const float as = L.args->l2_act_scale[k.local];
#pragma unroll
    for (int j = 0; j < C::kBlockM / 2; j++) {
        const int row = frag_row(m, j), col = frag_col(m, j);
        float act = 0.0f;
        if (col < k.valid) {
            const mj_u32 *meta = L.meta_row(k.tile, col);
            const float xs = f32_from_bits(ld_cg(meta + 3)), w = f32_from_bits(ld_cg(meta + 4));
            const float g = f32_from_bf16(bf16_from_f32(gate[j] * (xs * ag)));
            const float u = f32_from_bf16(bf16_from_f32(up[j] * (xs * au)));
            act = moe::activate<C::kActivation, C::kClampBits>(g, u) * (w * as);
        }
        scratch[col * C::kEpiStride + row] = act;
    }
    warpgroup_sync(1 + m.wg);

    unsigned char *tile = L.tile2(k.tile);
    constexpr int kGroup = C::kFp8 ? 32 : C::kL2Fmt == MJ_FMT_NVFP4 ? 16 : 8;
    constexpr int kPerCol = MJ_MOE_BLOCK_ROWS / kGroup;
    for (int item = m.t; item < k.valid * kPerCol; item += 128) {
        const int col = item / kPerCol, grp = item % kPerCol;
        float v[kGroup];
        const float4 *src =
            reinterpret_cast<const float4 *>(scratch + col * C::kEpiStride + grp * kGroup);
#pragma unroll
        for (int i = 0; i < kGroup / 4; i++) {
            const float4 f = src[i];
            v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
        }
        const int kq = MJ_MOE_BLOCK_ROWS * unit + grp * kGroup; // K of GEMM 2
        unsigned char *stage = tile + (mj_u64)(kq / C::kStageK) * C::kBStage;
        const int kk = kq % C::kStageK;
        if (C::kFp8) {
            // MXFP8 (NUMERICS.md, quantizing activations): E4M3 bytes + the fp32 scale.
            float amax = 0.0f;
#pragma unroll
            for (int i = 0; i < kGroup; i++)
                amax = max_num(amax, abs_f32(v[i]));
            const unsigned char e = ue8m0_for_amax(amax, MJ_E4M3_MAX);
            const float inv = ue8m0_inv_scale(e);
            mj_u32 q[8];
#pragma unroll
            for (int i = 0; i < 4; i++)
                pack_e4m3x8(v + 8 * i, inv, q + 2 * i);
            *reinterpret_cast<uint4 *>(stage + mj_moe_token_offset(C::kKind, C::kBlockM, col, kk)) =
                make_uint4(q[0], q[1], q[2], q[3]);
            *reinterpret_cast<uint4 *>(stage +
                                       mj_moe_token_offset(C::kKind, C::kBlockM, col, kk + 16)) =
                make_uint4(q[4], q[5], q[6], q[7]);
            reinterpret_cast<float *>(stage + C::kBData)[kk / 32 * C::kBlockM + col] =
                ue8m0_value(e);
        } else {
            moe::quantize_l2_bf16<C::kFp8 ? MJ_FMT_BF16 : C::kL2Fmt>(v, kGroup);
#pragma unroll
            for (int h = 0; h < kGroup / 8; h++) {
                mj_u32 q[4];
#pragma unroll
                for (int i = 0; i < 4; i++)
                    q[i] = (mj_u32)bf16_from_f32(v[8 * h + 2 * i]) |
                           ((mj_u32)bf16_from_f32(v[8 * h + 2 * i + 1]) << 16);
                *reinterpret_cast<uint4 *>(
                    stage + mj_moe_token_offset(C::kKind, C::kBlockM, col, kk + 8 * h)) =
                    make_uint4(q[0], q[1], q[2], q[3]);
            }
        }
    }
    fence_scope<false>();
    fence_proxy_async_global();
    warpgroup_sync(1 + m.wg);
    if (m.t == 0) red_release_add<false>(L.l1_done() + k.tile, 1u);
}

template <class C>
__device__ __forceinline__ void
epilogue_l2(const Launch<C> &L, const Task &k, int nb, float (&acc0)[C::kBlockM / 2],
            float (&acc1)[C::kBlockM / 2], const MathThread &m, unsigned short *scratch) {
    constexpr int kPitch = 136; // BF16 per token column: 128 rows + 16 bytes
    const int first = MJ_MOE_BLOCK_ROWS * (MJ_MOE_TASK_BLOCKS * k.n + 2 * m.wg);
    scale_rows(acc0, row_scales(L, k.local, 2 * C::kInter + first, m));
    if (nb > 1)
        scale_rows(acc1, row_scales(L, k.local, 2 * C::kInter + first + MJ_MOE_BLOCK_ROWS, m));
    const float alpha = L.args->l2_alpha[k.local];
#pragma unroll
    for (int j = 0; j < C::kBlockM / 2; j++) {
        const int row = frag_row(m, j), col = frag_col(m, j);
        scratch[col * kPitch + row] = bf16_from_f32(acc0[j] * alpha);
        scratch[col * kPitch + 64 + row] = bf16_from_f32(acc1[j] * alpha);
    }
    warpgroup_sync(1 + m.wg);
    const int chunks = 8 * nb;
    for (int item = m.t; item < k.valid * chunks; item += 128) {
        const int col = item / chunks, ch = item % chunks;
        const mj_u32 *meta = L.meta_row(k.tile, col);
        const int home = (int)ld_cg(meta), token = (int)ld_cg(meta + 1),
                  slot = (int)ld_cg(meta + 2);
        unsigned short *dst = peer_ptr(L.peers(), home, L.combine) +
                              ((mj_u64)slot * C::kMaxTokens + (mj_u64)token) * C::kHidden + first +
                              8 * ch;
        *reinterpret_cast<uint4 *>(dst) =
            *reinterpret_cast<const uint4 *>(scratch + col * kPitch + 8 * ch);
    }
    fence_scope<C::kSys>();
    warpgroup_sync(1 + m.wg);
    if (m.t < k.valid) {
        const mj_u32 *meta = L.meta_row(k.tile, m.t);
        const int home = (int)ld_cg(meta), token = (int)ld_cg(meta + 1);
        red_release_add<C::kSys>(peer_ptr(L.peers(), home, L.arrive()) + token, 1u);
    }
}

} // namespace mj

#endif // MJ_MEGA_MOE_EPILOGUE_CUH
