/*
 * The kernels' conversion helpers (templates/common/numerics.cuh), compiled on
 * the host, against the independent C reference (tests/reference/quant.c). The
 * kernels build with --fmad=false and the helpers use only IEEE single
 * + - * / and bit operations, so byte equality here is byte equality on the
 * GPU; this is how CI checks the kernel math without one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#include <algorithm>

extern "C" {
#include <cmocka.h>

#include "tests/reference/quant.h"
}

#include "common/numerics.cuh"

namespace {

// Static buffers: cmocka fails by longjmp, which would leak std::vector storage.
constexpr int kMaxHidden = 8192;

struct Rng {
    uint64_t s;
    uint32_t next() {
        // xorshift64*: deterministic, so a failure reproduces.
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return (uint32_t)((s * 0x2545f4914f6cdd1dull) >> 32);
    }
    float uniform() { // [0, 1)
        return (float)(next() >> 8) * 0x1p-24f;
    }
};

uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// Inputs that stress rounding: any bit pattern, BF16 values of every
// magnitude, and points on and next to E4M3 / E2M1 rounding boundaries.
float interesting_float(Rng &r) {
    switch (r.next() % 6) {
    case 0:
        return float_of(r.next());
    case 1:
        return float_of((r.next() & 0xffffu) << 16);
    case 2: { // E4M3 grid points and midpoints (mantissa 4 bits), any binade near its range
        int e = (int)(r.next() % 40) - 24;
        uint32_t m4 = r.next() & 0xfu;
        uint32_t u = ((uint32_t)(e + 127) << 23) | (m4 << 19);
        u += (r.next() % 3) - 1; // -1, 0, +1 ulp
        return float_of(u | (r.next() & 0x80000000u));
    }
    case 3: { // E2M1 thresholds +- 1 ulp
        static const float t[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.0f};
        uint32_t u = bits_of(t[r.next() % 9]) + (r.next() % 3) - 1;
        return float_of(u | (r.next() & 0x80000000u));
    }
    case 4: // E4M3 subnormal range, including exact ties k/2 * 2^-9
        return (float)(int)(r.next() % 40 - 20) * 0x1p-10f;
    default: { // small magnitudes with a random exponent (f32 subnormals included)
        int e = (int)(r.next() % 300) - 170;
        return ldexpf(1.0f + r.uniform(), e) * ((r.next() & 1u) ? -1.0f : 1.0f);
    }
    }
}

void test_element_conversions(void **state) {
    (void)state;
    Rng r{0x9e3779b97f4a7c15ull};
    for (int i = 0; i < 200000; i++) {
        float x = interesting_float(r);
        if (mj::bf16_from_f32(x) != mjr_bf16_from_f32(x) ||
            mj::e4m3_from_f32(x) != mjr_e4m3_from_f32(x) ||
            mj::e2m1_from_f32(x) != mjr_e2m1_from_f32(x))
            fail_msg("x = %a (0x%08x): bf16 %04x/%04x e4m3 %02x/%02x e2m1 %x/%x", (double)x,
                     bits_of(x), mj::bf16_from_f32(x), mjr_bf16_from_f32(x), mj::e4m3_from_f32(x),
                     mjr_e4m3_from_f32(x), mj::e2m1_from_f32(x), mjr_e2m1_from_f32(x));
        float a = fabsf(x);
        static const float kQ[2] = {448.0f, 6.0f};
        for (float q : kQ)
            if (mj::ue8m0_for_amax(a, q) != mjr_ue8m0_for_amax(a, q))
                fail_msg("ue8m0 amax %a q %g: %u vs %u", (double)a, (double)q,
                         mj::ue8m0_for_amax(a, q), mjr_ue8m0_for_amax(a, q));
    }
    // Exhaustive where the domain is small.
    for (uint32_t b = 0; b < 0x10000u; b++) {
        assert_int_equal(bits_of(mj::f32_from_bf16((mj::bf16_bits)b)),
                         bits_of(mjr_f32_from_bf16((uint16_t)b)));
        float x = mjr_f32_from_bf16((uint16_t)b);
        assert_int_equal(mj::e4m3_from_f32(x), mjr_e4m3_from_f32(x));
        assert_int_equal(mj::e2m1_from_f32(x), mjr_e2m1_from_f32(x));
    }
    for (uint32_t b = 0; b < 256u; b++) {
        assert_int_equal(bits_of(mj::f32_from_e4m3((unsigned char)b)),
                         bits_of(mjr_f32_from_e4m3((uint8_t)b)));
        if (b <= 254u) // 2^(127-e) == the UE8M0 value of 254-e
            assert_int_equal(bits_of(mj::ue8m0_inv_scale((unsigned char)b)),
                             bits_of(mjr_f32_from_ue8m0((uint8_t)(254u - b))));
    }
}

// The fast paths of pre_dispatch_kernel, element by element, against the
// scalar helpers (which test_element_conversions ties to the reference).

// Every finite BF16 amax: the bit-read UE8M0 scale equals the divided one.
void test_fast_ue8m0(void **state) {
    (void)state;
    for (uint32_t b = 0; b < MJ_BF16_SPECIAL; b++) {
        const float amax = mjr_f32_from_bf16((uint16_t)b);
        assert_int_equal(mj::ue8m0_for_bf16_amax(b, MJ_FMT_MXFP8),
                         mj::ue8m0_for_amax(amax, MJ_E4M3_MAX));
        assert_int_equal(mj::ue8m0_for_bf16_amax(b, MJ_FMT_MXFP4),
                         mj::ue8m0_for_amax(amax, MJ_E2M1_MAX));
    }
}

// Every BF16 value (both signs) under every UE8M0 scale a block can get
// (e >= 111: the 1e-4 floor), wherever the precondition |x| * 2^(127-e) <= 6
// holds, eight at a time.
void test_fast_e2m1_pow2(void **state) {
    (void)state;
    long checked = 0;
    for (uint32_t e = 111; e <= 254; e++) {
        const float inv = mj::ue8m0_inv_scale((unsigned char)e);
        // Magnitudes up to the largest allowed one, 6 * 2^(e-127), or the
        // largest finite BF16 where that overflows.
        const uint32_t last =
            std::min(bits_of(6.0f * mjr_f32_from_ue8m0((uint8_t)e)) >> 16, 0x7f7fu);
        for (uint32_t b0 = 0; b0 <= last; b0 += 8) {
            mj_u32 words[4];
            for (int i = 0; i < 4; i++) {
                const uint32_t lo = b0 + 2 * i > last ? 0 : b0 + 2 * i;
                const uint32_t hi = b0 + 2 * i + 1 > last ? 0 : b0 + 2 * i + 1;
                words[i] = lo | (hi | ((b0 >> 3) & 1u) << 15) << 16; // some negative lanes
            }
            const mj_u32 got = mj::e2m1_codes_x8_pow2(words, e);
            for (int j = 0; j < 8; j++) {
                const uint32_t b = (words[j / 2] >> (16 * (j % 2))) & 0x7fffu;
                const unsigned want = mj::e2m1_from_f32(mjr_f32_from_bf16((uint16_t)b) * inv);
                if (((got >> (4 * j)) & 0xfu) != want)
                    fail_msg("e %u bf16 %04x: code %x, want %x", e, b, (got >> (4 * j)) & 0xfu,
                             want);
            }
            checked += 8;
        }
    }
    assert_true(checked > 1000000);
}

// The fp32 E2M1 code: every E2M1 threshold and its neighbours, every
// magnitude pattern at a coarse stride, and the special values.
void test_fast_e2m1_f32(void **state) {
    (void)state;
    static const float t[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.5f, 1.0f};
    for (float th : t)
        for (int d = -300; d <= 300; d++) {
            const float y = float_of(bits_of(th) + (uint32_t)d);
            assert_int_equal(mj::e2m1_code_word(y) & 0xffu, mj::e2m1_from_f32(y));
        }
    for (uint64_t u = 0; u <= 0x7fffffffull; u += 4093) {
        const float y = float_of((uint32_t)u);
        assert_int_equal(mj::e2m1_code_word(y) & 0xffu, mj::e2m1_from_f32(y));
    }
    assert_int_equal(mj::e2m1_code_word(INFINITY) & 0xffu, 7);
    assert_int_equal(mj::e2m1_code_word(NAN) & 0xffu, 0);
    assert_int_equal(mj::e2m1_code_word(0.0f) & 0xffu, 0);
}

// NVFP4 token pairs into BF16 tiles: every pair of codes under every scale
// byte gives the reference's BF16 of code x scale (NaN scales: a NaN).
void test_e2m1_pairs_to_bf16(void **state) {
    (void)state;
    for (int sb = 0; sb < 256; sb++) {
        const float s = mjr_f32_from_e4m3((uint8_t)sb);
        const float scale63 = mj::e4m3_scale63((unsigned char)sb);
        for (mj_u32 codes = 0; codes < 256; codes++) {
            const mj_u32 got = mj::bf16x2_from_e2m1x2(codes, scale63);
            for (int h = 0; h < 2; h++) {
                const uint16_t g = (uint16_t)(got >> (16 * h));
                const float want = mjr_f32_from_e2m1((uint8_t)(codes >> (4 * h) & 15u)) * s;
                if (s != s)
                    assert_true(mjr_f32_from_bf16(g) != mjr_f32_from_bf16(g));
                else
                    assert_int_equal(g, mjr_bf16_from_f32(want));
            }
        }
    }
}

// The L1 epilogue's NVFP4 re-quantization into BF16 tiles: for every group
// scale byte the epilogue can produce (0 .. 448), x around every E2M1
// threshold, a sweep of all magnitudes of both signs, zeros, infinities and
// NaN, nvfp4_requant gives the BF16 of the code path (e2m1_from_f32 of x inv,
// decoded, times s) with nothing below BF16's bits.
void test_nvfp4_requant(void **state) {
    (void)state;
    static const float t[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f,
                              0.5f,  1.0f,  1.5f,  2.0f,  3.0f, 4.0f, 8.0f};
    for (int sb = 0; sb <= 0x7e; sb++) {
        const float s = mjr_f32_from_e4m3((uint8_t)sb);
        const float inv = mj::nvfp4_group_inv((unsigned char)sb, 1.0f);
        auto check = [&](float x) {
            const float got = mj::nvfp4_requant(x, inv * 0.125f, s * 8.0f);
            const uint8_t code = mj::e2m1_from_f32(x * inv);
            const uint16_t want = mjr_bf16_from_f32(mjr_f32_from_e2m1(code) * s);
            if ((bits_of(got) & 0xffffu) != 0u || (uint16_t)(bits_of(got) >> 16) != want)
                fail_msg("scale byte %#x, x %a: %#x, want %#x", sb, (double)x, bits_of(got),
                         (unsigned)want << 16);
        };
        for (float th : t)
            for (int sign = 0; sign < 2; sign++)
                for (int d = -40; d <= 40; d++) {
                    const float x = inv > 0.0f ? th / inv : th;
                    check(float_of((bits_of(x) + (uint32_t)d) | (uint32_t)sign << 31));
                }
        for (uint64_t u = 0; u <= 0x7fffffffull; u += 40009)
            for (int sign = 0; sign < 2; sign++)
                check(float_of((uint32_t)u | (uint32_t)sign << 31));
        for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN})
            check(x);
    }
}

// Packing, signs and -0 suppression of whole 8-element words, and the NaN-
// ignoring packed maximum, on random pairs with every kind of value.
void test_fast_packing(void **state) {
    (void)state;
    Rng r{0x6a09e667f3bcc908ull};
    for (int it = 0; it < 200000; it++) {
        mj_u32 words[4];
        float v[8];
        for (int i = 0; i < 4; i++)
            words[i] = (mj_u32)(mj::bf16_from_f32(interesting_float(r)) |
                                (mj_u32)mj::bf16_from_f32(interesting_float(r)) << 16);
        if (r.next() % 16 == 0) words[r.next() % 4] |= 0x7fc0u; // a NaN lane
        mj::unpack_bf16x8(words, v);
        const float scale = ldexpf(1.0f + r.uniform(), (int)(r.next() % 40) - 20);
        assert_int_equal(mj::e2m1_with_signs(mj::e2m1_codes_x8(v, scale), mj::e2m1_signs_x8(words)),
                         mj::pack_e2m1x8(v, scale));
        assert_int_equal(bits_of(mj::bf16_abs_max_num(words, 4)), bits_of(mj::amax_x8(v)));
    }
}

// One token row quantized the way pre_dispatch_kernel does it: thread c owns
// elements [32c, 32c+32) (one MX block or two NVFP4 blocks), fast paths where
// their preconditions hold and the scalar helpers elsewhere. Host stand-ins for
// the device-only conversions: e4m3_from_f32 for cvt.rn.satfinite.e4m3x2 (same
// RNE and saturation; the MXFP8 fast path never gives it a NaN), and
// nvfp4_group_sf / nvfp4_group_inv for the kernel's two-block hardware
// versions of them.
void kernel_row(int fmt, const uint16_t *x, int hidden, uint8_t *out, uint8_t *sf, float *xs) {
    if (fmt == MJ_FMT_BF16) {
        memcpy(out, x, (size_t)hidden * 2);
        return;
    }
    const int chunks = hidden / 32;
    static float block_max[kMaxHidden / 16];
    mj_u32 row_bits = 0;
    for (int c = 0; c < chunks && fmt == MJ_FMT_NVFP4; c++) {
        mj_u32 w[16];
        memcpy(w, x + 32 * c, sizeof w);
        for (int b = 0; b < 2; b++) {
            block_max[2 * c + b] = mj::bf16_abs_max_num(w + 8 * b, 8);
            row_bits = std::max(row_bits, bits_of(block_max[2 * c + b]));
        }
    }
    const float pts = mj::nvfp4_token_scale(float_of(row_bits));
    for (int c = 0; c < chunks; c++) {
        mj_u32 w[16], a[16], q[8];
        memcpy(w, x + 32 * c, sizeof w);
        for (int i = 0; i < 16; i++)
            a[i] = w[i] & 0x7fff7fffu;
        float v[4][8];
        for (int k = 0; k < 4; k++)
            mj::unpack_bf16x8(w + 4 * k, v[k]);
        if (fmt == MJ_FMT_NVFP4) {
            float inv[2];
            for (int b = 0; b < 2; b++) {
                sf[2 * c + b] = mj::nvfp4_group_sf(block_max[2 * c + b], pts);
                inv[b] = mj::nvfp4_group_inv(sf[2 * c + b], pts);
            }
            for (int k = 0; k < 4; k++)
                q[k] = mj::e2m1_with_signs(mj::e2m1_codes_x8(v[k], inv[k / 2]),
                                           mj::e2m1_signs_x8(w + 4 * k));
            memcpy(out + 16 * c, q, 16);
            continue;
        }
        const mj_u32 amax = mj::bf16_abs_max(a, 16);
        const unsigned e = amax < MJ_BF16_SPECIAL ? mj::ue8m0_for_bf16_amax(amax, fmt) : 255u;
        if (fmt == MJ_FMT_MXFP8 && e <= 254u) {
            const float inv = mj::ue8m0_inv_scale((unsigned char)e);
            for (int i = 0; i < 32; i++)
                out[32 * c + i] = mj::e4m3_from_f32(v[i / 8][i % 8] * inv);
        } else if (fmt == MJ_FMT_MXFP4 && e <= 254u) {
            for (int k = 0; k < 4; k++)
                q[k] = mj::e2m1_with_signs(mj::e2m1_codes_x8_pow2(w + 4 * k, e),
                                           mj::e2m1_signs_x8(w + 4 * k));
            memcpy(out + 16 * c, q, 16);
        } else { // the kernel's quantize_mx_scalar
            float m = 0.0f;
            for (int k = 0; k < 4; k++)
                m = mj::max_num(m, mj::amax_x8(v[k]));
            const unsigned char s =
                mj::ue8m0_for_amax(m, fmt == MJ_FMT_MXFP8 ? MJ_E4M3_MAX : MJ_E2M1_MAX);
            const float inv = mj::ue8m0_inv_scale(s);
            for (int k = 0; k < 4; k++)
                if (fmt == MJ_FMT_MXFP8)
                    mj::pack_e4m3x8(v[k], inv, q + 2 * k);
                else
                    q[k] = mj::pack_e2m1x8(v[k], inv);
            memcpy(out + (fmt == MJ_FMT_MXFP8 ? 32 : 16) * c, q, fmt == MJ_FMT_MXFP8 ? 32 : 16);
            sf[c] = s;
            continue;
        }
        sf[c] = (uint8_t)e;
    }
    if (fmt == MJ_FMT_NVFP4) *xs = pts;
}

void random_row(Rng &r, uint16_t *x, int hidden) {
    const int kind = (int)(r.next() % 8);
    const int base_exp = (int)(r.next() % 80) - 50;
    for (int i = 0; i < hidden; i++) {
        float f;
        switch (kind) {
        case 0:
            f = 0.0f;
            break;
        case 1: // arbitrary bf16 patterns, NaN and Inf included
            x[i] = (uint16_t)r.next();
            continue;
        case 2: // sparse: mostly zeros, some groups entirely zero
            f = (r.next() % 7 == 0) ? ldexpf(r.uniform() - 0.5f, base_exp) : 0.0f;
            break;
        case 3: // wide dynamic range within the row
            f = ldexpf(r.uniform() - 0.5f, base_exp + (int)(r.next() % 40) - 20);
            break;
        case 4: // exact grid values times a power of two: E2M1/E4M3 ties after scaling
            f = ldexpf((float)(int)(r.next() % 25 - 12) * 0.25f, base_exp % 20);
            break;
        default:
            f = ldexpf(r.uniform() * 2.0f - 1.0f, base_exp);
            break;
        }
        x[i] = mjr_bf16_from_f32(f);
    }
    if (kind == 5) // one outlier
        x[r.next() % (uint32_t)hidden] = mjr_bf16_from_f32(ldexpf(3.0f, base_exp + 12));
}

void test_rows(void **state) {
    (void)state;
    Rng r{0x243f6a8885a308d3ull};
    const int hiddens[] = {64, 256, 320, 512, 2048, 2880, 4096, 7168, 8192};
    for (int hidden : hiddens) {
        static uint16_t x[kMaxHidden];
        static uint8_t a[2 * kMaxHidden], b[2 * kMaxHidden], sa[kMaxHidden / 16],
            sb[kMaxHidden / 16];
        for (int fmt = MJ_FMT_BF16; fmt <= MJ_FMT_NVFP4; fmt++) {
            const size_t bytes = (size_t)hidden * (size_t)mj_format_bits(fmt) / 8;
            const size_t groups = fmt == MJ_FMT_BF16 ? 0 : (size_t)(hidden / mj_format_group(fmt));
            for (int rep = 0; rep < 40; rep++) {
                random_row(r, x, hidden);
                float xa = -1.0f, xb = -2.0f;
                memset(a, 0x11, sizeof a);
                memset(b, 0x22, sizeof b);
                memset(sa, 0x11, sizeof sa);
                memset(sb, 0x22, sizeof sb);
                mjr_quantize_row(fmt, x, hidden, a, sa, &xa);
                kernel_row(fmt, x, hidden, b, sb, &xb);
                if (memcmp(a, b, bytes) != 0 || memcmp(sa, sb, groups) != 0)
                    fail_msg("row mismatch: fmt %d hidden %d rep %d", fmt, hidden, rep);
                if (fmt == MJ_FMT_NVFP4) assert_int_equal(bits_of(xa), bits_of(xb));
            }
        }
    }
}

/* MXFP8 into BF16 (the pull and the GEMM 1 epilogue): every
 * E4M3 byte times every UE8M0 scale from 3 is exact, or infinite where the
 * value passes BF16's largest finite one. */
void test_e4m3_pairs_to_bf16(void **state) {
    (void)state;
    const double bf16_max = ldexp(255.0, 120); // (2 - 2^-7) 2^127
    for (int e = 3; e <= 254; e++) {
        const float scale = ldexpf(1.0f, e - 127);
        for (int b = 0; b < 256; b++) {
            if ((b & 0x7f) == 0x7f) continue; // NaN
            const unsigned char lo = (unsigned char)b, hi = (unsigned char)(b ^ 0x80);
            const mj_u32 pair = mj::bf16x2_of_e4m3x2(lo | (mj_u32)hi << 8, scale);
            const unsigned char bytes[2] = {lo, hi};
            for (int h = 0; h < 2; h++) {
                const double want = (double)mj::f32_from_e4m3(bytes[h]) * ldexp(1.0, e - 127);
                const float got = mj::f32_from_bf16((mj::bf16_bits)(pair >> (16 * h)));
                if (fabs(want) > bf16_max) {
                    if (!std::isinf(got) || (got < 0) != (want < 0))
                        fail_msg("byte %#x scale %d: %g, want infinity", bytes[h], e, (double)got);
                } else if ((double)got != want) {
                    fail_msg("byte %#x scale %d: %a, want %a", bytes[h], e, (double)got, want);
                }
            }
        }
    }
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_element_conversions), cmocka_unit_test(test_fast_ue8m0),
        cmocka_unit_test(test_fast_e2m1_pow2),      cmocka_unit_test(test_fast_e2m1_f32),
        cmocka_unit_test(test_fast_packing),        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_e2m1_pairs_to_bf16),  cmocka_unit_test(test_e4m3_pairs_to_bf16),
        cmocka_unit_test(test_nvfp4_requant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
