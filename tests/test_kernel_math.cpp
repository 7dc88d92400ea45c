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

// One token row quantized the way pre_dispatch_kernel does it: thread t owns
// elements [8t, 8t+8), groups reduce over 4 (MXFP) or 2 (NVFP4) threads.
void kernel_row(int fmt, const uint16_t *x, int hidden, uint8_t *out, uint8_t *sf, float *xs) {
    static float v[kMaxHidden], amax[kMaxHidden / 8];
    const int threads = hidden / 8;
    for (int t = 0; t < threads; t++) {
        mj_u32 w[4];
        memcpy(w, x + 8 * t, sizeof w);
        mj::unpack_bf16x8(w, &v[8 * t]);
        amax[t] = mj::amax_x8(&v[8 * t]);
    }
    if (fmt == MJ_FMT_BF16) {
        memcpy(out, x, (size_t)hidden * 2);
        return;
    }
    const int per_group = fmt == MJ_FMT_NVFP4 ? 2 : 4;
    float rowmax = 0.0f;
    for (int t = 0; t < threads; t++)
        rowmax = mj::max_num(rowmax, amax[t]);
    const float pts = mj::nvfp4_token_scale(rowmax);
    for (int t = 0; t < threads; t++) {
        const int g0 = t - t % per_group;
        float ga = 0.0f;
        for (int j = 0; j < per_group; j++)
            ga = mj::max_num(ga, amax[g0 + j]);
        const float *vt = &v[8 * t];
        unsigned char s;
        float inv;
        if (fmt == MJ_FMT_NVFP4) {
            s = mj::nvfp4_group_sf(ga, pts);
            inv = mj::nvfp4_group_inv(s, pts);
        } else {
            s = mj::ue8m0_for_amax(ga, fmt == MJ_FMT_MXFP8 ? MJ_E4M3_MAX : MJ_E2M1_MAX);
            inv = mj::ue8m0_inv_scale(s);
        }
        if (t == g0) sf[t / per_group] = s;
        if (fmt == MJ_FMT_MXFP8) {
            mj_u32 q[2];
            mj::pack_e4m3x8(vt, inv, q);
            memcpy(out + 8 * t, q, 8);
        } else {
            mj_u32 q = mj::pack_e2m1x8(vt, inv);
            memcpy(out + 4 * t, &q, 4);
        }
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
    const int hiddens[] = {256, 512, 2048, 4096, 7168, 8192};
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

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_element_conversions),
        cmocka_unit_test(test_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
