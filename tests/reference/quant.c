/*
 * Host reference quantizers (NUMERICS.md). Deliberately written differently
 * from templates/common/numerics.cuh (libm rounding and frexp instead of bit
 * tricks) so that tests/test_kernel_math.cpp compares two independent
 * derivations of the same contract. All arithmetic is IEEE single precision:
 * float temporaries only, built without FMA contraction.
 */
#include "tests/reference/quant.h"

#include <math.h>
#include <string.h>

#include "templates/layout/symm_layout.h"

#define E4M3_MAX 448.0f
#define E2M1_MAX 6.0f

/* maxNum that also ignores signalling NaNs (glibc fmaxf returns NaN for
 * those): reductions then give the same value in any order, as on the GPU. */
static float max_ignore_nan(float a, float b) {
    if (isnan(b)) return a;
    if (isnan(a)) return b;
    return a > b ? a : b;
}

uint32_t mjr_f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

float mjr_f32_from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

uint16_t mjr_bf16_from_f32(float x) {
    uint32_t u = mjr_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u); /* keep it a (quiet) NaN after truncation */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float mjr_f32_from_bf16(uint16_t b) {
    return mjr_f32_from_bits((uint32_t)b << 16);
}

uint8_t mjr_e4m3_from_f32(float x) {
    uint8_t sign = signbit(x) ? 0x80 : 0x00;
    float a = fabsf(x);
    if (isnan(a)) return (uint8_t)(sign | 0x7f);
    /* Round to the E4M3 grid at a's binade (subnormal quantum 2^-9 below 2^-6);
     * scaling by a power of two is exact, nearbyintf rounds half to even. */
    int exp2;
    frexpf(a, &exp2); /* a = f * 2^exp2, f in [0.5, 1) */
    int e = exp2 - 1; /* floor(log2 a) for a > 0 */
    if (a < 0x1p-6f || a == 0.0f) e = -6;
    float quantum = ldexpf(1.0f, e - 3);
    float r = isinf(a) ? E4M3_MAX : nearbyintf(a / quantum) * quantum;
    if (r > E4M3_MAX) r = E4M3_MAX;
    if (r < 0x1p-6f) return (uint8_t)(sign | (uint8_t)(r * 512.0f));
    frexpf(r, &exp2);
    e = exp2 - 1; /* may have moved up one binade through rounding */
    float mant = r / ldexpf(1.0f, e) - 1.0f;
    return (uint8_t)(sign | (uint8_t)((e + 7) << 3) | (uint8_t)(mant * 8.0f));
}

float mjr_f32_from_e4m3(uint8_t b) {
    int e = (b >> 3) & 0xf;
    int m = b & 7;
    float v;
    if (e == 0xf && m == 7)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, -9);
    else
        v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return (b & 0x80) ? -v : v;
}

uint8_t mjr_e2m1_from_f32(float x) {
    float a = fabsf(x);
    int idx = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) +
              (a > 5.0f);
    if (idx == 0) return 0;
    return (uint8_t)((signbit(x) ? 8 : 0) | idx);
}

float mjr_f32_from_e2m1(uint8_t code) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = mag[code & 7];
    return (code & 8) ? -v : v;
}

float mjr_f32_from_ue8m0(uint8_t e) {
    return e == 255 ? NAN : ldexpf(1.0f, (int)e - 127);
}

uint8_t mjr_ue8m0_for_amax(float amax, float qmax) {
    float v = max_ignore_nan(amax, 1e-4f) / qmax;
    uint32_t u = mjr_f32_bits(v);
    /* ceil(log2 v) + 127 for positive v: the biased exponent, plus one unless v
     * is already a power of two. */
    int e = (int)(u >> 23) + ((u & 0x7fffffu) != 0);
    return (uint8_t)(e < 1 ? 1 : e > 254 ? 254 : e);
}

static void put_code(uint8_t *out, int i, int bits, uint8_t code) {
    if (bits == 8)
        out[i] = code;
    else if (i % 2 == 0)
        out[i / 2] = (uint8_t)((out[i / 2] & 0xf0) | code);
    else
        out[i / 2] = (uint8_t)((out[i / 2] & 0x0f) | (code << 4));
}

static void quantize_mx(int bits, const uint16_t *x, int hidden, uint8_t *out, uint8_t *sf) {
    const int group = 32;
    for (int g = 0; g < hidden / group; g++) {
        float amax = 0.0f;
        for (int i = g * group; i < (g + 1) * group; i++)
            amax = max_ignore_nan(amax, fabsf(mjr_f32_from_bf16(x[i])));
        uint8_t e = mjr_ue8m0_for_amax(amax, bits == 8 ? E4M3_MAX : E2M1_MAX);
        sf[g] = e;
        float inv = ldexpf(1.0f, 127 - (int)e);
        for (int i = g * group; i < (g + 1) * group; i++) {
            /* A NaN element is quantized as itself, so E4M3 keeps its sign. */
            float xv = mjr_f32_from_bf16(x[i]);
            float q = isnan(xv) ? xv : xv * inv;
            put_code(out, i, bits, bits == 8 ? mjr_e4m3_from_f32(q) : mjr_e2m1_from_f32(q));
        }
    }
}

static void quantize_nvfp4(const uint16_t *x, int hidden, uint8_t *out, uint8_t *sf,
                           float *x_scale) {
    const int group = 16;
    float rowmax = 0.0f;
    for (int i = 0; i < hidden; i++)
        rowmax = max_ignore_nan(rowmax, fabsf(mjr_f32_from_bf16(x[i])));
    float row = max_ignore_nan(rowmax, 1e-4f);
    float pts = row / 2688.0f;
    float six_pts = 6.0f * pts;
    for (int g = 0; g < hidden / group; g++) {
        float amax = 0.0f;
        for (int i = g * group; i < (g + 1) * group; i++)
            amax = max_ignore_nan(amax, fabsf(mjr_f32_from_bf16(x[i])));
        /* NaN only as Inf / Inf: the byte is 0x7f, not the platform's NaN sign. */
        float quotient = amax / six_pts;
        uint8_t s = isnan(quotient) ? 0x7f : mjr_e4m3_from_f32(quotient);
        sf[g] = s;
        float sv = mjr_f32_from_e4m3(s);
        float denom = sv * pts;
        float inv = sv > 0.0f ? 1.0f / denom : 0.0f;
        for (int i = g * group; i < (g + 1) * group; i++) {
            float q = mjr_f32_from_bf16(x[i]) * inv;
            put_code(out, i, 4, mjr_e2m1_from_f32(q));
        }
    }
    *x_scale = pts;
}

void mjr_quantize_row(int fmt, const uint16_t *x, int hidden, uint8_t *out, uint8_t *sf,
                      float *x_scale) {
    switch (fmt) {
    case MJ_FMT_BF16:
        for (int i = 0; i < hidden; i++) {
            out[2 * i] = (uint8_t)(x[i] & 0xff);
            out[2 * i + 1] = (uint8_t)(x[i] >> 8);
        }
        break;
    case MJ_FMT_MXFP8:
        quantize_mx(8, x, hidden, out, sf);
        break;
    case MJ_FMT_MXFP4:
        quantize_mx(4, x, hidden, out, sf);
        break;
    case MJ_FMT_NVFP4:
        quantize_nvfp4(x, hidden, out, sf, x_scale);
        break;
    default:
        break;
    }
}

/* Ids must already be valid (-1 or a global expert id below the length of
 * expert_scales): the kernel's check pass rejects the batch otherwise. */
void mjr_pre_dispatch(int fmt, int hidden, int topk, int max_tokens, const uint16_t *x,
                      const int32_t *topk_ids, const float *topk_weights,
                      const float *expert_scales, int num_tokens, uint8_t *region) {
    mj_input_layout l = mj_layout_input(hidden, topk, max_tokens, fmt);
    for (int t = 0; t < num_tokens; t++) {
        float xs = 0.0f;
        mjr_quantize_row(fmt, x + (size_t)t * (size_t)hidden, hidden,
                         region + l.x_offset + (mj_u64)t * l.x_row_bytes,
                         region + l.sf_offset + (mj_u64)t * l.sf_row_bytes, &xs);
        if (fmt == MJ_FMT_NVFP4)
            memcpy(region + l.x_scales_offset + (mj_u64)t * 4u, &xs, sizeof xs);
    }
    for (int t = 0; t < max_tokens; t++) {
        for (int k = 0; k < topk; k++) {
            size_t i = (size_t)t * (size_t)topk + (size_t)k;
            int32_t id = -1;
            float w = 0.0f;
            if (t < num_tokens) {
                id = topk_ids[i];
                w = topk_weights[i];
                if (expert_scales && id >= 0) w = w * expert_scales[id];
            }
            memcpy(region + l.topk_idx_offset + i * 4u, &id, sizeof id);
            memcpy(region + l.topk_w_offset + i * 4u, &w, sizeof w);
        }
    }
}
