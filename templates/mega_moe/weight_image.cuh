/*
 * The expert weight image (mj_moe_wimage) at the level of bytes: which
 * checkpoint elements each 32-bit word of a block's stage holds, so that
 * math thread t of a warpgroup finds its wgmma A fragments of every K step
 * of a stage contiguously: 16-byte chunk c of the block is at c * 2048 +
 * t * 16 (one conflict-free LDS.128 per chunk and warp). Thread t is warp
 * w = t / 32, g = (t % 32) / 4, q = t % 4 (wgmma.cuh names the fragments).
 *
 *   FP8 kind, E4M3 weights: chunk c = K32 step c, word j = a[j].
 *   FP8 kind, E2M1 weights: chunk c = K32 steps 2c, 2c + 1; word j is step
 *     2c + j / 2 for row g + 8 (j % 2): nibble i (i < 4) holds the magnitude of
 *     a[0]'s byte i, nibble 4 + i that of a[2]'s byte i; the sign of a[0]'s
 *     byte i sits in bit 8i + 7 and that of a[2]'s byte i in bit 8i + 3, so
 *     both signs land in place with one mask (and one shift): decode.cuh.
 *   BF16 kind, BF16 weights: chunk c = K16 step c, word j = a[j].
 *   BF16 kind, E2M1 weights: chunk c = K16 steps 4c .. 4c + 3, word j is step
 *     4c + j: nibble i is the low element of a[i], nibble 4 + i its high one
 *     (E2M1 codes with their sign bit).
 * Block scales of a stage: for (w, g) the bytes of rows 16w + g and + 8 of
 * each scale group of the stage, interleaved: byte ((w * 8 + g) * n + i) * 2
 * + h = scale of row 16w + g + 8h, group i (n groups per stage).
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

/* Word j of thread t's chunk c of a block whose stage starts at element k0
 * of K; rows are relative to the block (rows row0.. of the checkpoint). */
template <int kKind, int kFmt>
MJ_HD mj_u32 image_word(const CheckpointMatrix &m, int row0, int k0, int c, int t, int j) {
    const int w = t >> 5, g = (t & 31) >> 2, q = t & 3;
    const int row = row0 + 16 * w + g;
    mj_u32 v = 0;
    if (kKind == MJ_MOE_KIND_FP8 && kFmt == MJ_FMT_MXFP8) {
        const int r = row + 8 * (j & 1), k = k0 + 32 * c + 4 * q + 16 * (j >> 1);
        for (int b = 0; b < 4; b++)
            v |= ck_element<kFmt>(m, r, k + b) << (8 * b);
    } else if (kKind == MJ_MOE_KIND_FP8) {
        const int r = row + 8 * (j & 1), ka = k0 + 32 * (2 * c + (j >> 1)) + 4 * q;
        for (int i = 0; i < 4; i++) {
            const mj_u32 lo = ck_element<kFmt>(m, r, ka + i), hi = ck_element<kFmt>(m, r, ka + 16 + i);
            v |= (lo & 7u) << (4 * i) | (hi & 7u) << (16 + 4 * i);
            v |= (lo >> 3) << (8 * i + 7) | (hi >> 3) << (8 * i + 3);
        }
    } else if (kFmt == MJ_FMT_BF16) {
        const int r = row + 8 * (j & 1), k = k0 + 16 * c + 2 * q + 8 * (j >> 1);
        v = ck_element<kFmt>(m, r, k) | ck_element<kFmt>(m, r, k + 1) << 16;
    } else {
        const int step = 4 * c + j;
        for (int i = 0; i < 4; i++) {
            const int r = row + 8 * (i & 1), k = k0 + 16 * step + 2 * q + 8 * (i >> 1);
            v |= ck_element<kFmt>(m, r, k) << (4 * i) | ck_element<kFmt>(m, r, k + 1) << (16 + 4 * i);
        }
    }
    return v;
}

/* Scale byte i of a block's stage scales (see the file comment); n scale
 * groups per row per stage. */
template <int kFmt>
MJ_HD unsigned char image_scale(const CheckpointMatrix &m, int row0, int k0, int n, int i) {
    constexpr int kGroup = kFmt == MJ_FMT_NVFP4 ? 16 : 32;
    const int h = i & 1, group = (i >> 1) % n, wg = (i >> 1) / n;
    const int row = row0 + 16 * (wg >> 3) + (wg & 7) + 8 * h;
    return m.sf[(mj_u64)row * (mj_u64)(m.k / kGroup) + (mj_u64)(k0 / kGroup + group)];
}

/* Thread t's part of one block's stage: its 16-byte chunks and, for t < 32,
 * its (w, g) entry of the scales. dst: the stage image of the block's task;
 * j: the block's place in the task; row0, k0: where the block's stage starts
 * in the checkpoint matrix. */
template <int kKind, int kFmt>
MJ_HD void image_block_stage(const CheckpointMatrix &m, const mj_moe_wimage &wi, int nblk,
                             unsigned char *dst, int j, int row0, int k0, int t) {
    unsigned char *data = dst + (mj_u64)j * wi.blk_data;
    for (int c = 0; c < (int)(wi.blk_data / 2048u); c++)
        for (int word = 0; word < 4; word++) {
            const mj_u32 v = image_word<kKind, kFmt>(m, row0, k0, c, t, word);
            for (int b = 0; b < 4; b++)
                data[c * 2048 + t * 16 + word * 4 + b] = (unsigned char)(v >> (8 * b));
        }
    if (mj_format_group(kFmt) == 0) return;
    const int groups = wi.stage_k / mj_format_group(kFmt);
    unsigned char *sf = dst + (mj_u64)nblk * wi.blk_data + (mj_u64)j * wi.blk_sf;
    for (int i = t; i < (int)wi.blk_sf; i += 128)
        sf[i] = image_scale<kFmt>(m, row0, k0, groups, i);
}

/* Stage s of block b (in the GEMM's numbering) of one expert's image. */
MJ_HD unsigned char *image_stage(unsigned char *expert, const mj_moe_weight_layout &l, bool down,
                                 int b, int s, int &j, int &nblk) {
    const mj_moe_wimage &wi = down ? l.w2 : l.w1;
    const int task = b / MJ_MOE_TASK_BLOCKS;
    j = b % MJ_MOE_TASK_BLOCKS;
    nblk = mj_moe_task_blocks(&wi, task);
    return expert + (down ? l.w1.bytes : 0ull) + mj_moe_wimage_stage(&wi, task, s);
}

#if defined(__CUDACC__)
/* Writes one projection of one expert into its image: a CTA per (64-row
 * block of the projection, stage) of 128 threads. */
template <int kWeightFmt, int kKind, int kHidden, int kInter, int kStageK>
__global__ void __launch_bounds__(128)
    mega_moe_image_kernel(const __grid_constant__ mj_moe_image_args args) {
    const bool down = args.projection == 2;
    const mj_moe_weight_layout l = mj_layout_moe_weights(kHidden, kInter, kStageK, kWeightFmt);
    const int pb = (int)blockIdx.x, s = (int)blockIdx.y;
    const int b = down ? pb : 2 * pb + args.projection; // gate and up blocks interleave
    int j, nblk;
    unsigned char *stage = image_stage(args.expert, l, down, b, s, j, nblk);
    const CheckpointMatrix m = {args.data, args.sf, down ? kInter : kHidden};
    image_block_stage<kKind, kWeightFmt>(m, down ? l.w2 : l.w1, nblk, stage, j,
                                         MJ_MOE_BLOCK_ROWS * pb, kStageK * s, (int)threadIdx.x);
}
#endif

} // namespace mj

#endif // MJ_MEGA_MOE_WEIGHT_IMAGE_CUH
