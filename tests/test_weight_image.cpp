/*
 * The MegaMoE weight image against the wgmma fragment layout: an expert's
 * image is built on the host with the kernel's own code
 * (templates/mega_moe/weight_image.cuh), then read back the way the math
 * warpgroups read it (16-byte chunks per thread, the decoders of
 * templates/mega_moe/decode.cuh, the stage's scale entries) and every
 * decoded value is compared with the checkpoint element that the PTX
 * fragment layout puts in that register (read from the raw bytes and decoded
 * by the host reference, tests/reference/quant.h):
 *   BF16 m64 x k16 A: register j = (row 16w + g + 8 (j & 1), k 2q + 8 (j >> 1) + half)
 * for every weight format, and a shared expert's MXFP8 weights in tasks of
 * two blocks, at several stage sizes and shapes with partial last tasks; a
 * reading whose rebased scales are one exponent off must fail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "mega_moe/decode.cuh"
#include "mega_moe/weight_image.cuh"
extern "C" {
#include "tests/reference/quant.h"
}

namespace {

uint64_t rng = 0x243F6A8885A308D3ull;
uint32_t next_u32() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

struct Projection {
    int rows, k;
    std::vector<unsigned char> data, sf;
};

/* MX scale bytes lie in mx_low .. mx_low + mx_span. */
Projection make_projection(int fmt, int rows, int k, int mx_low, int mx_span) {
    Projection p;
    p.rows = rows;
    p.k = k;
    p.data.resize((size_t)rows * k * mj_format_bits(fmt) / 8);
    for (auto &b : p.data) {
        b = (unsigned char)next_u32();
        if (fmt == MJ_FMT_MXFP8 && (b & 0x7f) == 0x7f) b ^= 1; // never NaN
    }
    if (fmt == MJ_FMT_BF16)
        for (size_t i = 1; i < p.data.size(); i += 2)
            p.data[i] &= 0xbf; // exponent < 0x80: finite
    int group = mj_format_group(fmt);
    if (group) {
        p.sf.resize((size_t)rows * (k / group));
        for (auto &b : p.sf)
            b = fmt == MJ_FMT_NVFP4 ? (unsigned char)(next_u32() % 0x7f) /* 0 = an all-zero group */
                                    : (unsigned char)(mx_low + next_u32() % (mx_span + 1));
    }
    return p;
}

float scale_value(int fmt, unsigned char b) {
    return fmt == MJ_FMT_NVFP4 ? mjr_f32_from_e4m3(b) : mjr_f32_from_ue8m0(b);
}

/* Checkpoint element (row, k) as an exact float, without its block scale,
 * read from the raw bytes as NUMERICS.md lays them out (row-major; BF16
 * little-endian; FP4 element 2b in the low nibble of byte b) and decoded by
 * the host reference, so the oracle shares no code with the kernel. */
float element(int fmt, const Projection &p, int row, int k) {
    const size_t i = (size_t)row * (size_t)p.k + (size_t)k;
    if (fmt == MJ_FMT_BF16)
        return mjr_f32_from_bf16((uint16_t)(p.data[2 * i] | p.data[2 * i + 1] << 8));
    if (fmt == MJ_FMT_MXFP8) return mjr_f32_from_e4m3(p.data[i]);
    return mjr_f32_from_e2m1((uint8_t)(p.data[i / 2] >> (4 * (i & 1)) & 0xf));
}

template <int kFmt>
void write_projection(const Projection &p, const mj_moe_weight_layout &l, int proj,
                      unsigned char *expert) {
    const bool down = proj == 2;
    const mj::CheckpointMatrix m = {p.data.data(), p.sf.data(), p.k};
    const int inter = l.w1.rows / 2;
    for (int pb = 0; pb < p.rows / MJ_MOE_BLOCK_ROWS; pb++) {
        int ref[MJ_MOE_BLOCK_ROWS] = {0};
        const bool rebased = mj::rebased_scales<kFmt>();
        for (int r = 0; r < MJ_MOE_BLOCK_ROWS && rebased; r++)
            ref[r] = mj::rebase_reference<kFmt>(m, MJ_MOE_BLOCK_ROWS * pb + r);
        for (int s = 0; s < p.k / l.w1.stage_k; s++) {
            int j, nblk;
            const int b = down ? pb : 2 * pb + proj;
            unsigned char *stage =
                mj::image_stage(expert, l, down, l.w1.task_blocks, b, s, j, nblk);
            for (int t = 0; t < 128; t++)
                mj::image_block_stage<kFmt>(m, down ? l.w2 : l.w1, nblk, stage, j,
                                            MJ_MOE_BLOCK_ROWS * pb, l.w1.stage_k * s, t, ref);
        }
        if (!mj_moe_has_row_scales(kFmt)) continue;
        for (int r = 0; r < MJ_MOE_BLOCK_ROWS; r++) {
            const float rs = rebased ? mj::rebased_row_scale<kFmt>(ref[r]) : 1.0f;
            memcpy(expert + l.row_scale_offset +
                       4 * mj::row_scale_index(proj, inter, MJ_MOE_BLOCK_ROWS * pb + r),
                   &rs, 4);
        }
    }
}

uint32_t word_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Row scale of a weight row of one GEMM (1 for images without them). */
float row_scale_of(const unsigned char *expert, const mj_moe_weight_layout &l, bool down, int b,
                   int row) {
    float rs;
    memcpy(&rs,
           expert + l.row_scale_offset +
               4 * mj::row_scale_index(down ? 2 : b % 2, l.w1.rows / 2, row),
           4);
    return rs;
}

/* Reads one GEMM of the image back as the math warpgroups do; returns the
 * number of mismatching values (printing the first few, unless quiet).
 * scale_off: added to every image scale byte (a negative control). */
template <int kFmt>
int check_gemm(const unsigned char *expert, const mj_moe_weight_layout &l, bool down,
               const Projection *gate, const Projection *up, const Projection *dn, int scale_off,
               bool quiet) {
    const mj_moe_wimage &wi = down ? l.w2 : l.w1;
    const int group = mj_format_group(kFmt), ngroups = group ? wi.stage_k / group : 0;
    int bad = 0;
    for (int b = 0; b < wi.blocks; b++)
        for (int s = 0; s < wi.stages; s++) {
            int j, nblk;
            const unsigned char *stage = mj::image_stage(const_cast<unsigned char *>(expert), l,
                                                         down, l.w1.task_blocks, b, s, j, nblk);
            const unsigned char *data = stage + (size_t)j * wi.blk_data;
            const unsigned char *sf = stage + (size_t)nblk * wi.blk_data + (size_t)j * wi.blk_sf;
            const Projection &p = down ? *dn : (b % 2 ? *up : *gate);
            const int prow0 = MJ_MOE_BLOCK_ROWS * (down ? b : b / 2);
            for (int t = 0; t < 128; t++) {
                const int w = t >> 5, g = (t & 31) >> 2, q = t & 3;
                for (int c = 0; c < wi.stage_k / 16; c++) {
                    float got[4][2];
                    const unsigned char *sfe = sf + (w * 8 + g) * ngroups * 2;
                    uint32_t a[4];
                    if (kFmt == MJ_FMT_BF16) {
                        for (int r = 0; r < 4; r++)
                            a[r] = word_at(data + c * 2048 + t * 16 + 4 * r);
                    } else if (kFmt == MJ_FMT_MXFP8) {
                        uint32_t tiny[4];
                        for (int h = 0; h < 2; h++)
                            mj::e4m3x4_to_bf16x2_tiny(
                                word_at(data + (c / 2) * 2048 + t * 16 + 4 * (2 * (c % 2) + h)),
                                tiny[h], tiny[h + 2]);
                        for (int r = 0; r < 4; r++)
                            a[r] = mj::bf16x2_mul(
                                tiny[r], mj::rebased_multiplier<kFmt>(
                                             (uint32_t)(sfe[2 * (c / 2) + (r & 1)] + scale_off)));
                    } else {
                        const uint32_t word = word_at(data + (c / 4) * 2048 + t * 16 + 4 * (c % 4));
                        const int gi = group == 16 ? c : c / 2;
                        for (int r = 0; r < 4; r++)
                            a[r] =
                                mj::bf16x2_mul(mj::e2m1x2_to_bf16x2_tiny(word, r),
                                               mj::rebased_multiplier<kFmt>(
                                                   (uint32_t)(sfe[2 * gi + (r & 1)] + scale_off)));
                    }
                    for (int r = 0; r < 4; r++) {
                        const float rs =
                            kFmt != MJ_FMT_BF16
                                ? row_scale_of(expert, l, down, b, prow0 + 16 * w + g + 8 * (r & 1))
                                : 1.0f;
                        for (int e = 0; e < 2; e++)
                            got[r][e] = mj::f32_from_bf16((mj::bf16_bits)(a[r] >> (16 * e))) * rs;
                    }
                    for (int r = 0; r < 4; r++)
                        for (int e = 0; e < 2; e++) {
                            const int row = 16 * w + g + 8 * (r & 1);
                            const int k = 16 * c + 2 * q + 8 * (r >> 1) + e;
                            const int kg = wi.stage_k * s + k;
                            float want = element(kFmt, p, prow0 + row, kg);
                            if (group)
                                want *= scale_value(
                                    kFmt, p.sf[(size_t)(prow0 + row) * (p.k / group) + kg / group]);
                            if (got[r][e] != want) {
                                if (bad < 5 && !quiet)
                                    print_message(
                                        "block %d stage %d thread %d step %d reg %d elem %d: "
                                        "got %g want %g\n",
                                        b, s, t, c, r, e, (double)got[r][e], (double)want);
                                bad++;
                            }
                        }
                }
            }
        }
    return bad;
}

template <int kFmt>
void check_shape(int hidden, int inter, int stage_k, int mx_low = 100,
                 int task_blocks = MJ_MOE_TASK_BLOCKS, int span = 40) {
    const mj_moe_weight_layout l = mj_layout_moe_weights(hidden, inter, stage_k, kFmt, task_blocks);
    std::vector<unsigned char> expert(l.expert_bytes, 0xA5);
    Projection gate = make_projection(kFmt, inter, hidden, mx_low, span),
               up = make_projection(kFmt, inter, hidden, mx_low, span);
    Projection dn = make_projection(kFmt, hidden, inter, mx_low, span);
    write_projection<kFmt>(gate, l, 0, expert.data());
    write_projection<kFmt>(up, l, 1, expert.data());
    write_projection<kFmt>(dn, l, 2, expert.data());
    for (int down = 0; down < 2; down++) {
        assert_int_equal((check_gemm<kFmt>(expert.data(), l, down, &gate, &up, &dn, 0, false)), 0);
        if (mj_format_group(kFmt))
            assert_true((check_gemm<kFmt>(expert.data(), l, down, &gate, &up, &dn, 1, true)) > 0);
    }
}

template <int kFmt> void check_all_shapes() {
    check_shape<kFmt>(256, 128, 64);
    check_shape<kFmt>(256, 128, 128);
    check_shape<kFmt>(320, 192, 64); /* partial tasks in both GEMMs */
    check_shape<kFmt>(512, 256, 256);
    // The smallest scale bytes the loader takes (3), and the widest span of a
    // row's bytes it takes (126 for E2M1: every product a normal BF16 number).
    if (kFmt == MJ_FMT_MXFP4) {
        check_shape<kFmt>(256, 128, 128, 3);
        check_shape<kFmt>(256, 128, 128, 100, MJ_MOE_TASK_BLOCKS, 126);
    }
}

void test_bf16(void **) {
    check_all_shapes<MJ_FMT_BF16>();
}
void test_mxfp8(void **) {
    check_all_shapes<MJ_FMT_MXFP8>();
}
void test_mxfp4(void **) {
    check_all_shapes<MJ_FMT_MXFP4>();
}
void test_nvfp4(void **) {
    check_all_shapes<MJ_FMT_NVFP4>();
}

/* A shared expert's MXFP8 image beside MXFP4 experts: tasks of two blocks
 * (templates/mega_moe/config.cuh), with partial tasks (320 = 5 blocks of
 * GEMM 2 rows) and gpt-oss's stage K of 192; and its stage within a routed
 * MXFP4 task's of four blocks. */
void test_mxfp8_two_block_tasks(void **) {
    check_shape<MJ_FMT_MXFP8>(256, 256, 128, 100, 2);
    check_shape<MJ_FMT_MXFP8>(320, 192, 64, 100, 2);
    check_shape<MJ_FMT_MXFP8>(576, 384, 192, 100, 2);
    for (int sk = 64; sk <= 256; sk += 64) {
        const mj_moe_wimage s = mj_moe_wimage_of(128, 256 * 3, sk, MJ_FMT_MXFP8, 2),
                            r = mj_moe_wimage_of(128, 256 * 3, sk, MJ_FMT_MXFP4, 4);
        assert_true(2 * (s.blk_data + s.blk_sf) <= 4 * (r.blk_data + r.blk_sf));
        assert_int_equal(s.tasks, 1);
        assert_int_equal(mj_moe_task_blocks(&s, 0), 2);
    }
}

/* MXFP8 images at the widest span of a row's scale bytes the loader takes
 * (118: every product a normal BF16 number) and the smallest bytes (3). */
void test_mxfp8_spans(void **) {
    check_shape<MJ_FMT_MXFP8>(256, 128, 128, 3, 2, 118);
    check_shape<MJ_FMT_MXFP8>(256, 128, 64, 128, 2, 118);
    check_shape<MJ_FMT_MXFP8>(256, 128, 128, 100, MJ_MOE_TASK_BLOCKS, 118);
}

/* Where a shared expert's stage fits the routed ring slot: MXFP8 beside
 * every FP4 row at the routed stage K, BF16 beside NVFP4 in half stages at
 * stage K 128 and nowhere at 64, and the routed format's own geometry. */
void test_shared_geometry(void **) {
    for (int sk = 64; sk <= 256; sk += 64) {
        for (int routed : {MJ_FMT_MXFP4, MJ_FMT_NVFP4}) {
            const mj_moe_shared_geometry g = mj_moe_shared_geometry_of(routed, MJ_FMT_MXFP8, sk);
            assert_int_equal(g.task_blocks, 2);
            assert_int_equal(g.stage_k, sk);
        }
        const mj_moe_shared_geometry same = mj_moe_shared_geometry_of(MJ_FMT_BF16, MJ_FMT_BF16, sk);
        assert_int_equal(same.task_blocks, MJ_MOE_TASK_BLOCKS);
        assert_int_equal(same.stage_k, sk);
    }
    const mj_moe_shared_geometry half = mj_moe_shared_geometry_of(MJ_FMT_NVFP4, MJ_FMT_BF16, 128);
    assert_int_equal(half.task_blocks, 2);
    assert_int_equal(half.stage_k, 64);
    assert_int_equal(mj_moe_shared_geometry_of(MJ_FMT_NVFP4, MJ_FMT_BF16, 64).task_blocks, 0);
    // A half stage of a BF16 token tile is whole 64-element pieces: the
    // first half's bytes are exactly the pieces of its K.
    for (int bm : {8, 64, 128})
        for (int n = 0; n < bm; n++)
            for (int k = 0; k < 64; k++)
                assert_true(mj_moe_token_offset(bm, 128, n, k) <
                            mj_moe_token_stage_bytes(bm, 128) / 2);
}

/* The image holds exactly the checkpoint's bytes: no padding streamed. */
void test_no_padding(void **) {
    const int fmts[] = {MJ_FMT_BF16, MJ_FMT_MXFP8, MJ_FMT_MXFP4, MJ_FMT_NVFP4};
    for (int f : fmts) {
        const int h = 2880, i = 2880, sk = mj_moe_stage_k_of(h, i, f, 128, 32768, 53248);
        assert_true(sk > 0);
        const mj_moe_weight_layout l = mj_layout_moe_weights(h, i, sk, f, MJ_MOE_TASK_BLOCKS);
        const int group = mj_format_group(f);
        const uint64_t per =
            3ull * h * i * mj_format_bits(f) / 8 + (group ? 3ull * h * i / group : 0);
        assert_int_equal(l.w1.bytes + l.w2.bytes, per);
    }
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16),        cmocka_unit_test(test_mxfp8),
        cmocka_unit_test(test_mxfp4),       cmocka_unit_test(test_nvfp4),
        cmocka_unit_test(test_no_padding),  cmocka_unit_test(test_mxfp8_two_block_tasks),
        cmocka_unit_test(test_mxfp8_spans), cmocka_unit_test(test_shared_geometry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
