/*
 * The expert weight image (mj_moe_wimage) at the level of bytes: which
 * checkpoint elements each 32-bit word of a block's stage holds, so that
 * math thread t of a warpgroup finds its wgmma A fragments of every K step
 * of a stage contiguously: 16-byte chunk c of the block is at c * 2048 +
 * t * 16 (one conflict-free LDS.128 per chunk and warp). Thread t is warp
 * w = t / 32, g = (t % 32) / 4, q = t % 4 (wgmma.cuh names the fragments).
 *
 *   BF16 weights: chunk c = K16 step c, word j = a[j].
 *   E2M1 weights: chunk c = K16 steps 4c .. 4c + 3, word j is step
 *     4c + j. Its 32 bits hold the 8 codes of a[0..3] (low and high element
 *     each) placed so that decoding takes few instructions: a[i] for i < 3 is
 *     the word, the word rotated right by 4, or the word shifted left by 6,
 *     masked with 0x81C081C0: a BF16 pair whose magnitude bits (m, e0, e1)
 *     sit in bits 6..8 / 22..24 and whose signs sit in bits 15 / 31; a[3]
 *     takes its m bits from the word shifted left by 2 and its other bits
 *     from the word rotated right by 6 (e2m1_bf16_bit names every position).
 *   E4M3 weights (MXFP8 experts, a fused shared expert's): chunk c = K16 steps
 *     2c, 2c + 1; word j is step 2c + j / 2 for row g + 8 (j % 2) and holds
 *     a[j % 2] and a[j % 2 + 2]: the first register's magnitude bits (7) sit
 *     at BF16 bits 4..10 / 20..26 with the signs at 15 / 31, so that the word
 *     masked is it; the second's fill the other bits (e4m3_bf16_bit).
 * Block scales of a stage: for (w, g) the bytes of rows 16w + g and + 8 of
 * each scale group of the stage, interleaved: byte ((w * 8 + g) * n + i) * 2
 * + h = scale of row 16w + g + 8h, group i (n groups per stage).
 *
 * E2M1 and E4M3 weights: the scale bytes are rebased per weight
 * row so the math multiplies each decoded register once (decode.cuh): the
 * image byte is the BF16 multiplier 2^126 * scale / 2^r (E4M3: 2^120 * ...)
 * of its group, and 2^r (the row scale, fp32 after the images) goes back into
 * the row's accumulator.
 *   MXFP4: r = e_max - 128; byte = e - e_max + 254, the multiplier's
 *          exponent field (multiplier bits = byte << 7).
 *   MXFP8: r = e_max - 128 too; byte = e - e_max + 248. The smallest
 *          nonzero E4M3 value (2^-9) times its scale stays a normal BF16
 *          number where the loader keeps each row's bytes within 118.
 *   NVFP4: r = E(s_max) - 128 with E() the fp32 exponent field; byte =
 *          (E(s) - E(s_max) + 31) << 3 | the 3 mantissa bits of s
 *          (multiplier bits = (byte << 4) + (223 << 7)). A group whose scale
 *          is 0 gets E2M1 codes 0 (its weights are 0 whatever they were).
 * Every product stays exact: E2M1 x scale has at most 6 significant bits,
 * E4M3 x scale at most 4, and the loader keeps each row's MX exponents within
 * 126 (E2M1) or 118 (E4M3) of each other.
 *
 * Host and device compile this file (tests/test_weight_image.cpp checks the
 * image against the decoders of decode.cuh); the kernel that writes images
 * from the checkpoint layout is at the end.
 */
#ifndef MJ_MEGA_MOE_WEIGHT_IMAGE_CUH
#define MJ_MEGA_MOE_WEIGHT_IMAGE_CUH

#include "common/numerics.cuh"
#include "layout/moe_layout.h"

namespace mj {

/* One projection in the checkpoint layout: row-major [rows][k] elements and
 * [rows][k / group] scale bytes. */
struct CheckpointMatrix {
    const unsigned char *data;
    const unsigned char *sf;
    int k;
};

template <int kFmt> MJ_HD mj_u32 ck_element(const CheckpointMatrix &m, int row, int k) {
    const unsigned char *r = m.data + (mj_u64)row * (mj_u64)m.k * mj_format_bits(kFmt) / 8;
    if (kFmt == MJ_FMT_BF16) return (mj_u32)r[2 * k] | ((mj_u32)r[2 * k + 1] << 8);
    if (kFmt == MJ_FMT_MXFP8) return r[k];
    return (r[k / 2] >> (4 * (k & 1))) & 0xfu;
}

/* Where bit `bit` (0 m, 1 e0, 2 e1, 3 sign) of the E2M1 code of register i's
 * low (h = 0) or high (h = 1) element sits in an image word: the BF16
 * layout's place (magnitude at 6..8, sign at 15, + 16 for the high element)
 * moved by register i's shift or rotation (decode.cuh's
 * e2m1x2_to_bf16x2_tiny), mod 32.
 * The four registers' places cover the 32 bits once. */
MJ_HD int e2m1_bf16_bit(int i, int h, int bit) {
    const int place = (bit == 3 ? 15 : 6 + bit) + 16 * h;
    const int rotation = i == 0 ? 0 : i == 1 ? 4 : i == 2 ? -6 : bit == 0 ? -2 : 6;
    return (place + rotation + 32) % 32;
}

/* Where bit `bit` (0..6 the magnitude, 7 the sign) of the E4M3 byte of the
 * low (h = 0) or high (h = 1) element of the first (reg 0) or second (reg 1)
 * register of an E4M3 image word sits: the first register's BF16 layout
 * (magnitude at 4..10, sign at 15, + 16 for the high element); the second's
 * low four magnitude bits at 0..3, the upper three at 12..14, its sign at 11. */
MJ_HD int e4m3_bf16_bit(int reg, int h, int bit) {
    int p;
    if (reg == 0)
        p = bit == 7 ? 15 : 4 + bit;
    else
        p = bit == 7 ? 11 : bit < 4 ? bit : 8 + bit;
    return p + 16 * h;
}

/* The row's reference for rebased scales (see above): the largest MX
 * scale byte, or the fp32 exponent field of the largest UE4M3 scale (0 when
 * every scale of the row is 0). */
template <int kFmt> MJ_HD int rebase_reference(const CheckpointMatrix &m, int row) {
    constexpr int kGroup = mj_format_group(kFmt);
    const unsigned char *sf = m.sf + (mj_u64)row * (mj_u64)(m.k / kGroup);
    unsigned char mx = 0;
    for (int i = 0; i < m.k / kGroup; i++)
        mx = sf[i] > mx ? sf[i] : mx; // positive UE4M3 bytes order as their values
    if (kFmt != MJ_FMT_NVFP4) return mx;
    return mx ? (int)(f32_bits(f32_from_e4m3(mx)) >> 23) : 0;
}

/* The image byte of scale byte b of a row with reference ref (see above). */
template <int kFmt> MJ_HD unsigned char rebased_scale(unsigned char b, int ref) {
    if (kFmt == MJ_FMT_MXFP8) return (unsigned char)(b - ref + 248);
    if (kFmt != MJ_FMT_NVFP4) return (unsigned char)(b - ref + 254);
    if (b == 0) return 0;
    const mj_u32 bits = f32_bits(f32_from_e4m3(b));
    return (unsigned char)((((int)(bits >> 23) - ref + 31) << 3) | (int)((bits >> 20) & 7u));
}

/* 2^r of a row with reference ref: what its accumulator is multiplied by. */
template <int kFmt> MJ_HD float rebased_row_scale(int ref) {
    if (kFmt == MJ_FMT_NVFP4 && ref == 0) return 1.0f;
    return f32_from_bits((mj_u32)(ref - 1) << 23);
}

/* Whether a format's images carry rebased scales (and row scales that the
 * epilogues apply): every block-scaled one. */
template <int kFmt> constexpr bool rebased_scales() {
    return mj_format_group(kFmt) != 0;
}

/* E2M1 code of (row, k), zero where an NVFP4 group's scale is 0 and the
 * image's multiplier (rebased) would not make it 0. */
template <int kFmt> MJ_HD mj_u32 image_code(const CheckpointMatrix &m, int row, int k) {
    const mj_u32 code = ck_element<kFmt>(m, row, k);
    if (kFmt == MJ_FMT_NVFP4 && m.sf[(mj_u64)row * (mj_u64)(m.k / 16) + (mj_u64)(k / 16)] == 0)
        return 0;
    return code;
}

/* Word j of thread t's chunk c of a block whose stage starts at element k0
 * of K; rows are relative to the block (rows row0.. of the checkpoint). */
template <int kFmt>
MJ_HD mj_u32 image_word(const CheckpointMatrix &m, int row0, int k0, int c, int t, int j) {
    const int w = t >> 5, g = (t & 31) >> 2, q = t & 3;
    const int row = row0 + 16 * w + g;
    mj_u32 v = 0;
    if (kFmt == MJ_FMT_BF16) {
        const int r = row + 8 * (j & 1), k = k0 + 16 * c + 2 * q + 8 * (j >> 1);
        v = ck_element<kFmt>(m, r, k) | ck_element<kFmt>(m, r, k + 1) << 16;
    } else if (kFmt == MJ_FMT_MXFP8) {
        const int r = row + 8 * (j & 1), k = k0 + 16 * (2 * c + (j >> 1)) + 2 * q;
        for (int reg = 0; reg < 2; reg++) // a[j % 2] (K 2q..), a[j % 2 + 2] (K 2q + 8..)
            for (int h = 0; h < 2; h++) {
                const mj_u32 x = ck_element<kFmt>(m, r, k + 8 * reg + h);
                for (int bit = 0; bit < 8; bit++)
                    v |= ((x >> bit) & 1u) << e4m3_bf16_bit(reg, h, bit);
            }
    } else {
        const int step = 4 * c + j;
        for (int i = 0; i < 4; i++) {
            const int r = row + 8 * (i & 1), k = k0 + 16 * step + 2 * q + 8 * (i >> 1);
            for (int h = 0; h < 2; h++) {
                const mj_u32 code = image_code<kFmt>(m, r, k + h);
                for (int bit = 0; bit < 4; bit++)
                    v |= ((code >> bit) & 1u) << e2m1_bf16_bit(i, h, bit);
            }
        }
    }
    return v;
}

/* Scale byte i of a block's stage scales (see the file comment); n scale
 * groups per row per stage; ref: the rebase references of the block's 64
 * rows (used when the row's images are rebased). */
template <int kFmt>
MJ_HD unsigned char image_scale(const CheckpointMatrix &m, int row0, int k0, int n, int i,
                                const int *ref) {
    constexpr int kGroup = mj_format_group(kFmt);
    const int h = i & 1, group = (i >> 1) % n, wg = (i >> 1) / n;
    const int r = 16 * (wg >> 3) + (wg & 7) + 8 * h;
    const unsigned char b =
        m.sf[(mj_u64)(row0 + r) * (mj_u64)(m.k / kGroup) + (mj_u64)(k0 / kGroup + group)];
    return rebased_scales<kFmt>() ? rebased_scale<kFmt>(b, ref[r]) : b;
}

/* Thread t's part of one block's stage: its 16-byte chunks and its share of
 * the scales. dst: the stage image of the block's task; j: the block's place
 * in the task; row0, k0: where the block's stage starts in the checkpoint
 * matrix; ref: the rebase references of the block's rows (rebase_reference). */
template <int kFmt>
MJ_HD void image_block_stage(const CheckpointMatrix &m, const mj_moe_wimage &wi, int nblk,
                             unsigned char *dst, int j, int row0, int k0, int t, const int *ref) {
    unsigned char *data = dst + (mj_u64)j * wi.blk_data;
    for (int c = 0; c < (int)(wi.blk_data / 2048u); c++)
        for (int word = 0; word < 4; word++) {
            const mj_u32 v = image_word<kFmt>(m, row0, k0, c, t, word);
            for (int b = 0; b < 4; b++)
                data[c * 2048 + t * 16 + word * 4 + b] = (unsigned char)(v >> (8 * b));
        }
    if (mj_format_group(kFmt) == 0) return;
    const int groups = wi.stage_k / mj_format_group(kFmt);
    unsigned char *sf = dst + (mj_u64)nblk * wi.blk_data + (mj_u64)j * wi.blk_sf;
    for (int i = t; i < (int)wi.blk_sf; i += 128)
        sf[i] = image_scale<kFmt>(m, row0, k0, groups, i, ref);
}

/* Index of checkpoint row `row` of a projection in the expert's row scales. */
MJ_HD int row_scale_index(int projection, int inter, int row) {
    return projection == 2 ? 2 * inter + row : projection * inter + row;
}

/* Stage s of block b (in the GEMM's numbering) of one expert's image, whose
 * tasks are task_blocks blocks (as l says; a constant here keeps the
 * division a shift). */
MJ_HD unsigned char *image_stage(unsigned char *expert, const mj_moe_weight_layout &l, bool down,
                                 int task_blocks, int b, int s, int &j, int &nblk) {
    const mj_moe_wimage &wi = down ? l.w2 : l.w1;
    const int task = b / task_blocks;
    j = b % task_blocks;
    nblk = mj_moe_task_blocks(&wi, task);
    return expert + mj_moe_expert_stage(&l, down, task, s);
}

#if defined(__CUDACC__)
/* Writes one projection of one expert into its image: a CTA per (64-row
 * block of the projection, stage) of 128 threads; the stage-0 CTAs also
 * write the rows' scales. kTaskBlocks: blocks per task (mj_moe_wimage). */
template <int kWeightFmt, int kHidden, int kInter, int kStageK, int kTaskBlocks>
__global__ void __launch_bounds__(128)
    mega_moe_image_kernel(const __grid_constant__ mj_moe_image_args args) {
    __shared__ int ref[MJ_MOE_BLOCK_ROWS];
    const bool down = args.projection == 2;
    const mj_moe_weight_layout l =
        mj_layout_moe_weights(kHidden, kInter, kStageK, kWeightFmt, kTaskBlocks);
    const int pb = (int)blockIdx.x, s = (int)blockIdx.y, t = (int)threadIdx.x;
    const int b = down ? pb : 2 * pb + args.projection; // gate and up blocks interleave
    const int row0 = MJ_MOE_BLOCK_ROWS * pb;
    const CheckpointMatrix m = {args.data, args.sf, down ? kInter : kHidden};
    constexpr bool kRebased = rebased_scales<kWeightFmt>();
    if (kRebased && t < MJ_MOE_BLOCK_ROWS) ref[t] = rebase_reference<kWeightFmt>(m, row0 + t);
    __syncthreads();
    int j, nblk;
    unsigned char *stage = image_stage(args.expert, l, down, kTaskBlocks, b, s, j, nblk);
    image_block_stage<kWeightFmt>(m, down ? l.w2 : l.w1, nblk, stage, j, row0, kStageK * s, t, ref);
    if (mj_moe_has_row_scales(kWeightFmt) && s == 0 && t < MJ_MOE_BLOCK_ROWS)
        reinterpret_cast<float *>(
            args.expert + l.row_scale_offset)[row_scale_index(args.projection, kInter, row0 + t)] =
            kRebased ? rebased_row_scale<kWeightFmt>(ref[t]) : 1.0f;
}
#endif

} // namespace mj

#endif // MJ_MEGA_MOE_WEIGHT_IMAGE_CUH
