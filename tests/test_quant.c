/*
 * Host reference quantizers against hand-computed bytes (NUMERICS.md). Every
 * expected value below was derived by hand, not by calling the code under
 * test, so a wrong rounding or layout fails here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "tests/reference/quant.h"
#include "templates/layout/symm_layout.h"

static void test_bf16(void **state) {
    (void)state;
    assert_int_equal(mjr_bf16_from_f32(1.0f), 0x3f80);
    assert_int_equal(mjr_bf16_from_f32(-1.5f), 0xbfc0);
    /* 1 + 2^-8 is halfway between 0x3f80 (even) and 0x3f81 */
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0x3f808000u)), 0x3f80);
    /* 1 + 3*2^-8 is halfway between 0x3f81 (odd) and 0x3f82 = 1 + 2^-6 */
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0x3f818000u)), 0x3f82);
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0x3f808001u)), 0x3f81);
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0x3f807fffu)), 0x3f80);
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0xbf818000u)), 0xbf82);
    assert_int_equal(mjr_bf16_from_f32(-0.0f), 0x8000);
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0x00008000u)), 0x0000); /* subnormal tie */
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0x00018000u)), 0x0002);
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0x7f7fffffu)),
                     0x7f80); /* FLT_MAX -> inf */
    assert_int_equal(mjr_bf16_from_f32(INFINITY), 0x7f80);
    assert_int_equal(mjr_bf16_from_f32(-INFINITY), 0xff80);
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0x7fc00000u)), 0x7fc0);
    /* a NaN whose payload lives in the low half must not become inf */
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0x7f800001u)), 0x7fc0);
    assert_int_equal(mjr_bf16_from_f32(mjr_f32_from_bits(0xff800001u)), 0xffc0);
    assert_int_equal(mjr_f32_bits(mjr_f32_from_bf16(0x3f82)), 0x3f820000u);
    assert_int_equal(mjr_f32_bits(mjr_f32_from_bf16(0x8001)), 0x80010000u);
}

static void test_e4m3(void **state) {
    (void)state;
    assert_int_equal(mjr_e4m3_from_f32(0.0f), 0x00);
    assert_int_equal(mjr_e4m3_from_f32(-0.0f), 0x80);
    assert_int_equal(mjr_e4m3_from_f32(1.0f), 0x38);
    assert_int_equal(mjr_e4m3_from_f32(-2.0f), 0xc0);
    assert_int_equal(mjr_e4m3_from_f32(0.1f), 0x1d);   /* 13 * 2^-7 = 0.1015625 */
    assert_int_equal(mjr_e4m3_from_f32(0.3f), 0x2a);   /* 10 * 2^-5 = 0.3125 */
    assert_int_equal(mjr_e4m3_from_f32(240.0f), 0x77); /* 1.875 * 2^7 */
    assert_int_equal(mjr_e4m3_from_f32(256.0f), 0x78);
    /* normal ties: 1.0625 between 0x38 (even) and 0x39; 1.1875 between 0x39 and 0x3a */
    assert_int_equal(mjr_e4m3_from_f32(1.0625f), 0x38);
    assert_int_equal(mjr_e4m3_from_f32(1.1875f), 0x3a);
    assert_int_equal(mjr_e4m3_from_f32(mjr_f32_from_bits(0x3f880001u)), 0x39);
    assert_int_equal(mjr_e4m3_from_f32(1.9375f), 0x40); /* ties up into the next binade */
    /* saturation: 448 is 0x7e; 464 ties down to 448; anything above saturates */
    assert_int_equal(mjr_e4m3_from_f32(448.0f), 0x7e);
    assert_int_equal(mjr_e4m3_from_f32(464.0f), 0x7e);
    assert_int_equal(mjr_e4m3_from_f32(500.0f), 0x7e);
    assert_int_equal(mjr_e4m3_from_f32(-1e9f), 0xfe);
    assert_int_equal(mjr_e4m3_from_f32(INFINITY), 0x7e);
    assert_int_equal(mjr_e4m3_from_f32(-INFINITY), 0xfe);
    assert_int_equal(mjr_e4m3_from_f32(NAN), 0x7f);
    /* subnormals: multiples of 2^-9 */
    assert_int_equal(mjr_e4m3_from_f32(0x1p-9f), 0x01);
    assert_int_equal(mjr_e4m3_from_f32(0x1.8p-9f), 0x02);  /* 1.5 ties to 2 */
    assert_int_equal(mjr_e4m3_from_f32(0x1.4p-8f), 0x02);  /* 2.5 ties to 2 */
    assert_int_equal(mjr_e4m3_from_f32(-0x1.8p-8f), 0x83); /* -3 */
    assert_int_equal(mjr_e4m3_from_f32(0x1p-10f), 0x00);   /* 0.5 ties to 0 */
    assert_int_equal(mjr_e4m3_from_f32(0x1.0001p-10f), 0x01);
    assert_int_equal(mjr_e4m3_from_f32(0x1.ep-7f), 0x08); /* 7.5 ties to 8 = 2^-6 */
    assert_int_equal(mjr_e4m3_from_f32(0x1.cp-7f), 0x07);
    assert_int_equal(mjr_e4m3_from_f32(0x1p-6f), 0x08);
    assert_int_equal(mjr_e4m3_from_f32(1e-30f), 0x00);
    assert_int_equal(mjr_e4m3_from_f32(mjr_f32_from_bits(0x00000001u)), 0x00);

    assert_true(mjr_f32_from_e4m3(0x7e) == 448.0f);
    assert_true(mjr_f32_from_e4m3(0xfe) == -448.0f);
    assert_true(mjr_f32_from_e4m3(0x01) == 0x1p-9f);
    assert_true(mjr_f32_from_e4m3(0x07) == 0x1.cp-7f);
    assert_true(mjr_f32_from_e4m3(0x08) == 0x1p-6f);
    assert_true(mjr_f32_from_e4m3(0x2a) == 0.3125f);
    assert_true(isnan(mjr_f32_from_e4m3(0x7f)));
    assert_true(isnan(mjr_f32_from_e4m3(0xff)));
}

static void test_e2m1(void **state) {
    (void)state;
    /* each midpoint goes to the neighbour with the even index */
    const float mid[8] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f};
    const uint8_t mid_code[8] = {0, 2, 2, 4, 4, 6, 6, 7};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(mjr_e2m1_from_f32(mid[i]), mid_code[i]);
        assert_int_equal(mjr_e2m1_from_f32(-mid[i]), mid_code[i] ? (mid_code[i] | 8) : 0);
    }
    assert_int_equal(mjr_e2m1_from_f32(nextafterf(0.25f, 1.0f)), 1);
    assert_int_equal(mjr_e2m1_from_f32(nextafterf(0.75f, 0.0f)), 1);
    assert_int_equal(mjr_e2m1_from_f32(nextafterf(1.25f, 2.0f)), 3);
    assert_int_equal(mjr_e2m1_from_f32(nextafterf(1.75f, 0.0f)), 3);
    assert_int_equal(mjr_e2m1_from_f32(nextafterf(2.5f, 3.0f)), 5);
    assert_int_equal(mjr_e2m1_from_f32(nextafterf(3.5f, 0.0f)), 5);
    assert_int_equal(mjr_e2m1_from_f32(nextafterf(5.0f, 6.0f)), 7);
    assert_int_equal(mjr_e2m1_from_f32(6.0f), 7);
    assert_int_equal(mjr_e2m1_from_f32(-6.0f), 0xf);
    assert_int_equal(mjr_e2m1_from_f32(1e30f), 7);
    assert_int_equal(mjr_e2m1_from_f32(-INFINITY), 0xf);
    assert_int_equal(mjr_e2m1_from_f32(-0.1f), 0); /* no negative zero */
    assert_int_equal(mjr_e2m1_from_f32(-0.0f), 0);
    assert_int_equal(mjr_e2m1_from_f32(0.0f), 0);
    assert_true(mjr_f32_from_e2m1(0x7) == 6.0f);
    assert_true(mjr_f32_from_e2m1(0xb) == -1.5f);
    assert_true(mjr_f32_from_e2m1(0x5) == 3.0f);
}

static void test_ue8m0(void **state) {
    (void)state;
    assert_int_equal(mjr_ue8m0_for_amax(0.0f, 448.0f), 105);   /* 1e-4/448 <= 2^-22 */
    assert_int_equal(mjr_ue8m0_for_amax(0.0f, 6.0f), 112);     /* 1e-4/6 <= 2^-15 */
    assert_int_equal(mjr_ue8m0_for_amax(5e-5f, 1.0f), 114);    /* floored to 1e-4 <= 2^-13 */
    assert_int_equal(mjr_ue8m0_for_amax(448.0f, 448.0f), 127); /* exactly 2^0 */
    assert_int_equal(mjr_ue8m0_for_amax(449.0f, 448.0f), 128);
    assert_int_equal(mjr_ue8m0_for_amax(6.0f, 6.0f), 127);
    assert_int_equal(mjr_ue8m0_for_amax(3.0f, 6.0f), 126);
    assert_int_equal(mjr_ue8m0_for_amax(3.01f, 6.0f), 127);
    assert_int_equal(mjr_ue8m0_for_amax(1e38f, 448.0f), 245);
    assert_int_equal(mjr_ue8m0_for_amax(mjr_f32_from_bits(0x7f7fffffu), 1.0f),
                     254); /* 255 clamped */
    assert_int_equal(mjr_ue8m0_for_amax(INFINITY, 448.0f), 254);
    assert_int_equal(mjr_ue8m0_for_amax(0.0f, 1e36f), 1); /* subnormal quotient */
    assert_true(mjr_f32_from_ue8m0(127) == 1.0f);
    assert_true(mjr_f32_from_ue8m0(0) == 0x1p-127f);
    assert_true(mjr_f32_from_ue8m0(254) == 0x1p127f);
    assert_true(isnan(mjr_f32_from_ue8m0(255)));
}

/* The DeepGEMM midpoint row (bytes 00 22 44 66 07 aa cc ee) plus the other
 * grid points, in one MXFP4 group with amax 6 so the scale is 2^0. */
static const uint16_t kMxfp4Group[32] = {
    0x3e80, 0x3e80, 0x3f40, 0x3fa0, 0x3fe0,
    0x4020, 0x4060, 0x40a0, /* .25 .25 .75 1.25 1.75 2.5 3.5 5 */
    0x40c0, 0x0000, 0xbf40, 0xbfa0, 0xbfe0,
    0xc020, 0xc060, 0xc0a0, /* 6 0 -.75 -1.25 ... -5 */
    0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040,
    0x4080, 0xc0c0, 0xbe80, /* .5 1 1.5 2 3 4 -6 -.25 */
    0x3e00, 0xbf00, 0x3e9a, 0x3f33, 0x3fa6,
    0xc02d, 0x4090, 0x40b0, /* .125 -.5 .30078 .69922
                                1.2969 -2.7031 4.5 5.5 */
};
static const uint8_t kMxfp4Bytes[16] = {0x00, 0x22, 0x44, 0x66, 0x07, 0xaa, 0xcc, 0xee,
                                        0x21, 0x43, 0x65, 0x0f, 0x90, 0x11, 0xd3, 0x76};

static void test_mxfp4_rows(void **state) {
    (void)state;
    uint16_t x[96];
    uint8_t out[48], sf[3];
    memcpy(x, kMxfp4Group, sizeof kMxfp4Group);
    /* group 1: the same values times 2^-10 (exponent field - 10): scale byte 117 */
    for (int i = 0; i < 32; i++)
        x[32 + i] = kMxfp4Group[i] ? (uint16_t)(kMxfp4Group[i] - (10 << 7)) : 0;
    /* group 2: zero row, scale from the 1e-4 floor */
    memset(x + 64, 0, 64);
    memset(out, 0x5a, sizeof out);
    mjr_quantize_row(2, x, 96, out, sf, NULL);
    assert_memory_equal(out, kMxfp4Bytes, 16);
    assert_memory_equal(out + 16, kMxfp4Bytes, 16);
    for (int i = 32; i < 48; i++)
        assert_int_equal(out[i], 0);
    assert_int_equal(sf[0], 127);
    assert_int_equal(sf[1], 117);
    assert_int_equal(sf[2], 112);

    /* amax 7: scale 2, so 7 -> 3.5 -> 6 (4.0) and 2.5 -> 1.25 -> 2 (1.0) */
    uint16_t y[32] = {0x40e0, 0x4020, 0xc0e0};
    mjr_quantize_row(2, y, 32, out, sf, NULL);
    assert_int_equal(sf[0], 128);
    assert_int_equal(out[0], 0x26);
    assert_int_equal(out[1], 0x0e);
}

static void test_mxfp8_rows(void **state) {
    (void)state;
    /* 448, 1, -0.10009766, 2^-9, 1.5*2^-9, -0, 0.3 (0.30078125), 240 */
    uint16_t x[64] = {0x43e0, 0x3f80, 0xbdcd, 0x3b00, 0x3b40, 0x8000, 0x3e9a, 0x4370};
    uint8_t out[64], sf[2];
    const uint8_t expect[8] = {0x7e, 0x38, 0x9d, 0x01, 0x02, 0x80, 0x2a, 0x77};
    mjr_quantize_row(1, x, 64, out, sf, NULL);
    assert_int_equal(sf[0], 127);
    assert_memory_equal(out, expect, 8);
    for (int i = 8; i < 64; i++)
        assert_int_equal(out[i], 0);
    assert_int_equal(sf[1], 105);

    /* amax 896 -> scale 2^1: 896 -> 448, 1 -> 0.5 (0x30), 2^-8 -> 2^-9 */
    uint16_t y[32] = {0x4460, 0x3f80, 0x3b80};
    mjr_quantize_row(1, y, 32, out, sf, NULL);
    assert_int_equal(sf[0], 128);
    assert_int_equal(out[0], 0x7e);
    assert_int_equal(out[1], 0x30);
    assert_int_equal(out[2], 0x01);
}

static void test_bf16_row(void **state) {
    (void)state;
    const uint16_t x[4] = {0x3f80, 0xbfc0, 0x0001, 0x7fc0};
    const uint8_t expect[8] = {0x80, 0x3f, 0xc0, 0xbf, 0x01, 0x00, 0xc0, 0x7f};
    uint8_t out[8];
    mjr_quantize_row(0, x, 4, out, NULL, NULL);
    assert_memory_equal(out, expect, 8);
}

static void test_nvfp4_rows(void **state) {
    (void)state;
    /* rowmax 2688 gives pts = 1 exactly, so sf = E4M3(amax / 6):
     * g0 amax 2688 -> 448 (0x7e), inv = fp32(1/448), 2688 * inv ~ 6 -> 7
     * g1 amax 6 -> 1 (0x38), inv 1: plain E2M1 of the midpoints
     * g2 amax 12 -> 2 (0x40), inv 0.5
     * g3 zeros -> sf 0, inv 0
     * g4 amax 0.75 -> 0.125 (0x20), inv 8 */
    uint16_t x[80] = {0};
    x[0] = 0x4528; /* 2688 -> 7 */
    x[1] = 0xc4a8; /* -1344 -> -3 -> 0xd */
    x[2] = 0x43e0; /* 448 -> 1 -> 2 */
    x[3] = 0x4360; /* 224 -> 0.5 -> 1 */
    memcpy(x + 16, kMxfp4Group, 16 * sizeof x[0]);
    x[32] = 0x4140; /* 12 -> 6 -> 7 */
    x[33] = 0xc0a0; /* -5 -> -2.5 -> 0xc */
    x[34] = 0x3fe0; /* 1.75 -> 0.875 -> 2 */
    x[35] = 0x3f00; /* 0.5 -> 0.25 -> 0 */
    x[64] = 0x3f40; /* 0.75 -> 6 -> 7 */
    x[65] = 0xbe00; /* -0.125 -> -1 -> 0xa */
    x[66] = 0x3d00; /* 0.03125 -> 0.25 -> 0 */
    x[67] = 0x3d40; /* 0.046875 -> 0.375 -> 1 */
    uint8_t out[40], sf[5];
    float xs = 0.0f;
    mjr_quantize_row(3, x, 80, out, sf, &xs);
    const uint8_t expect_sf[5] = {0x7e, 0x38, 0x40, 0x00, 0x20};
    uint8_t expect[40] = {0};
    expect[0] = 0xd7;
    expect[1] = 0x12;
    memcpy(expect + 8, kMxfp4Bytes, 8);
    expect[16] = 0xc7;
    expect[17] = 0x02;
    expect[32] = 0xa7;
    expect[33] = 0x10;
    assert_memory_equal(sf, expect_sf, 5);
    assert_memory_equal(out, expect, 40);
    assert_true(xs == 1.0f);

    /* zero row: row = 1e-4, pts = 1e-4 / 2688 in fp32, every sf and code 0 */
    uint16_t z[32] = {0};
    memset(out, 0x5a, sizeof out);
    memset(sf, 0x5a, sizeof sf);
    mjr_quantize_row(3, z, 32, out, sf, &xs);
    volatile float floor_ = 1e-4f;
    float pts = floor_ / 2688.0f;
    assert_int_equal(mjr_f32_bits(xs), mjr_f32_bits(pts));
    for (int i = 0; i < 16; i++)
        assert_int_equal(out[i], 0);
    assert_int_equal(sf[0], 0);
    assert_int_equal(sf[1], 0);
}

static void test_zero_rows(void **state) {
    (void)state;
    uint16_t z[64] = {0};
    uint8_t out[128], sf[2];
    mjr_quantize_row(0, z, 64, out, sf, NULL);
    for (int i = 0; i < 128; i++)
        assert_int_equal(out[i], 0);
    mjr_quantize_row(1, z, 64, out, sf, NULL);
    for (int i = 0; i < 64; i++)
        assert_int_equal(out[i], 0);
    assert_int_equal(sf[0], 105);
    assert_int_equal(sf[1], 105);
    mjr_quantize_row(2, z, 64, out, sf, NULL);
    for (int i = 0; i < 32; i++)
        assert_int_equal(out[i], 0);
    assert_int_equal(sf[0], 112);
    assert_int_equal(sf[1], 112);
}

static int32_t read_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static float read_f32(const uint8_t *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

enum { PD_HIDDEN = 32, PD_TOPK = 2, PD_MAX = 4, PD_TOKENS = 2 };

static void check_untouched(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        assert_int_equal(p[i], 0xab);
}

static void run_pre_dispatch(const float *expert_scales, const float *expect_w) {
    uint16_t x[PD_TOKENS * PD_HIDDEN];
    for (int i = 0; i < PD_HIDDEN; i++) {
        x[i] = 0x3f80;             /* token 0: all 1.0 */
        x[PD_HIDDEN + i] = 0x0000; /* token 1: zeros */
    }
    const int32_t ids[PD_TOKENS * PD_TOPK] = {3, 0, -1, 1};
    const float w[PD_TOKENS * PD_TOPK] = {0.5f, 0.25f, 0.75f, 2.0f};
    mj_input_layout l = mj_layout_input(PD_HIDDEN, PD_TOPK, PD_MAX, MJ_FMT_NVFP4);
    static uint8_t region[1 << 14];
    assert_true(l.end <= sizeof region);
    memset(region, 0xab, sizeof region);
    mjr_pre_dispatch(MJ_FMT_NVFP4, PD_HIDDEN, PD_TOPK, PD_MAX, x, ids, w, expert_scales, PD_TOKENS,
                     region);

    check_untouched(region, (size_t)l.x_offset); /* the workspace is the kernels' */
    /* token 0: pts = 1/2688, sf = E4M3(~448) = 0x7e, 1.0 * inv ~ 6 -> code 7 */
    for (int i = 0; i < 16; i++)
        assert_int_equal(region[l.x_offset + i], 0x77);
    for (int i = 0; i < 16; i++)
        assert_int_equal(region[l.x_offset + 16 + i], 0x00);
    check_untouched(region + l.x_offset + 2 * l.x_row_bytes, 2 * l.x_row_bytes);
    assert_int_equal(region[l.sf_offset + 0], 0x7e);
    assert_int_equal(region[l.sf_offset + 1], 0x7e);
    assert_int_equal(region[l.sf_offset + 2], 0x00);
    assert_int_equal(region[l.sf_offset + 3], 0x00);
    check_untouched(region + l.sf_offset + 2 * l.sf_row_bytes, 2 * l.sf_row_bytes);
    volatile float one = 1.0f, floor_ = 1e-4f;
    float pts0 = one / 2688.0f, pts1 = floor_ / 2688.0f;
    assert_int_equal(mjr_f32_bits(read_f32(region + l.x_scales_offset)), mjr_f32_bits(pts0));
    assert_int_equal(mjr_f32_bits(read_f32(region + l.x_scales_offset + 4)), mjr_f32_bits(pts1));
    check_untouched(region + l.x_scales_offset + 8, 8);

    const int32_t expect_ids[PD_MAX * PD_TOPK] = {3, 0, -1, 1, -1, -1, -1, -1};
    for (int i = 0; i < PD_MAX * PD_TOPK; i++) {
        assert_int_equal(read_i32(region + l.topk_idx_offset + 4u * (unsigned)i), expect_ids[i]);
        assert_int_equal(mjr_f32_bits(read_f32(region + l.topk_w_offset + 4u * (unsigned)i)),
                         mjr_f32_bits(expect_w[i]));
    }
}

static void test_pre_dispatch(void **state) {
    (void)state;
    const float scales[4] = {4.0f, 0.1f, 9.0f, 3.0f};
    /* w * scales[id]; the id -1 slot keeps its raw weight; padding is 0.0f */
    const float folded[PD_MAX * PD_TOPK] = {1.5f, 1.0f, 0.75f, 0.2f, 0.0f, 0.0f, 0.0f, 0.0f};
    const float raw[PD_MAX * PD_TOPK] = {0.5f, 0.25f, 0.75f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    run_pre_dispatch(scales, folded);
    run_pre_dispatch(NULL, raw);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16),       cmocka_unit_test(test_e4m3),
        cmocka_unit_test(test_e2m1),       cmocka_unit_test(test_ue8m0),
        cmocka_unit_test(test_mxfp4_rows), cmocka_unit_test(test_mxfp8_rows),
        cmocka_unit_test(test_bf16_row),   cmocka_unit_test(test_nvfp4_rows),
        cmocka_unit_test(test_zero_rows),  cmocka_unit_test(test_pre_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
