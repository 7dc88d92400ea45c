/*
 * fp64 MegaMoE reference (NUMERICS.md). Expert-major: each used expert's
 * weights are dequantized once into doubles, then every (token, slot) pair
 * routed to it from any rank is computed; the outputs are combined per home
 * rank at the end, as the kernel's combine does.
 */
#include "tests/reference/moe_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "heuristics/moe_formats.h" /* MJ_ACT_* only: no link dependency */
#include "templates/layout/symm_layout.h"
#include "tests/reference/quant.h"

uint16_t mjr_bf16_from_f64(double x) {
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    double a = fabs(x);
    if (isnan(a)) return (uint16_t)(sign | 0x7fc0u);
    if (isinf(a)) return (uint16_t)(sign | 0x7f80u);
    /* Round on BF16's grid at a's binade (8 significant bits; quantum 2^-133
     * below 2^-126). Dividing by a power of two is exact and nearbyint rounds
     * half to even; the result is then exact in fp32, so the fp32 converter
     * only repacks it. */
    int exp2;
    frexp(a, &exp2);
    int e = exp2 - 1;
    if (a == 0.0 || e < -126) e = -126;
    double quantum = ldexp(1.0, e - 7);
    double r = nearbyint(a / quantum) * quantum;
    if (r >= 0x1p128) return (uint16_t)(sign | 0x7f80u);
    return (uint16_t)(sign | (mjr_bf16_from_f32((float)r) & 0x7fffu));
}

static double bf16_round(double x) {
    return mjr_f32_from_bf16(mjr_bf16_from_f64(x));
}

double mjr_calc_diff(const uint16_t *x_bf16, const uint16_t *y_bf16, size_t n) {
    double xy = 0.0, sq = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = mjr_f32_from_bf16(x_bf16[i]);
        double y = mjr_f32_from_bf16(y_bf16[i]);
        xy += x * y;
        sq += x * x + y * y;
    }
    return sq == 0.0 ? 0.0 : 1.0 - 2.0 * xy / sq;
}

static size_t row_bytes(int fmt, int n) {
    return (size_t)n * (size_t)mj_format_bits(fmt) / 8u;
}

static float scale_value(int fmt, uint8_t b) {
    return fmt == MJ_FMT_NVFP4 ? mjr_f32_from_e4m3(b) : mjr_f32_from_ue8m0(b);
}

/* Every element times its block scale: exact in fp32 (NUMERICS.md step 1). */
static void dequant_row(int fmt, const uint8_t *data, const uint8_t *sf, int n, double *out) {
    int group = mj_format_group(fmt);
    for (int i = 0; i < n; i++) {
        float v;
        if (fmt == MJ_FMT_BF16)
            v = mjr_f32_from_bf16((uint16_t)(data[2 * i] | (data[2 * i + 1] << 8)));
        else if (fmt == MJ_FMT_MXFP8)
            v = mjr_f32_from_e4m3(data[i]);
        else
            v = mjr_f32_from_e2m1((uint8_t)((data[i / 2] >> (4 * (i & 1))) & 0xf));
        out[i] = group ? (double)v * scale_value(fmt, sf[i / group]) : (double)v;
    }
}

static void put_fp4(uint8_t *data, int i, uint8_t code) {
    if (i % 2 == 0)
        data[i / 2] = code;
    else
        data[i / 2] = (uint8_t)(data[i / 2] | (code << 4));
}

static float group_amax(const float *v, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(v[i]) > amax) amax = fabsf(v[i]); /* NaN never compares greater */
    return amax;
}

int mjr_quantize_weights(int fmt, const float *w, int rows, int cols, uint8_t *data, uint8_t *sf) {
    int group = fmt >= MJ_FMT_BF16 && fmt <= MJ_FMT_NVFP4 ? mj_format_group(fmt) : -1;
    if (group < 0 || !w || !data || (group && !sf) || rows < 0 || cols < 1 ||
        (group && cols % group))
        return -1;
    size_t rb = row_bytes(fmt, cols);
    for (int r = 0; r < rows; r++) {
        const float *src = w + (size_t)r * (size_t)cols;
        uint8_t *dst = data + (size_t)r * rb;
        if (fmt == MJ_FMT_BF16) {
            for (int i = 0; i < cols; i++) {
                uint16_t b = mjr_bf16_from_f32(src[i]);
                dst[2 * i] = (uint8_t)(b & 0xff);
                dst[2 * i + 1] = (uint8_t)(b >> 8);
            }
            continue;
        }
        for (int g = 0; g < cols / group; g++) {
            const float *v = src + g * group;
            float amax = group_amax(v, group);
            uint8_t *s = sf + (size_t)r * (size_t)(cols / group) + g;
            if (fmt == MJ_FMT_NVFP4) {
                *s = mjr_e4m3_from_f32(amax / 6.0f);
                float sv = mjr_f32_from_e4m3(*s);
                for (int i = 0; i < group; i++)
                    put_fp4(dst, g * group + i, sv > 0.0f ? mjr_e2m1_from_f32(v[i] / sv) : 0);
                continue;
            }
            *s = mjr_ue8m0_for_amax(amax, fmt == MJ_FMT_MXFP8 ? 448.0f : 6.0f);
            float inv = ldexpf(1.0f, 127 - (int)*s);
            for (int i = 0; i < group; i++) {
                if (fmt == MJ_FMT_MXFP8)
                    dst[g * group + i] = mjr_e4m3_from_f32(v[i] * inv);
                else
                    put_fp4(dst, g * group + i, mjr_e2m1_from_f32(v[i] * inv));
            }
        }
    }
    return 0;
}

/* Step 6, then back to doubles: GEMM 2 reads exactly these values. The scale
 * and code decisions use fp32 like the kernel (moe_ref.h). */
static void quantize_act(int fmt, const double *act, float *actf, int n, double *out) {
    if (fmt == MJ_FMT_BF16) {
        for (int i = 0; i < n; i++)
            out[i] = bf16_round(act[i]);
        return;
    }
    int group = mj_format_group(fmt);
    for (int i = 0; i < n; i++)
        actf[i] = (float)act[i];
    for (int g = 0; g < n / group; g++) {
        const float *v = actf + g * group;
        double *o = out + g * group;
        float amax = group_amax(v, group);
        if (fmt == MJ_FMT_NVFP4) {
            /* the L1-epilogue rule: multiply by fp32(1/6), no per-token scale */
            float sv = mjr_f32_from_e4m3(mjr_e4m3_from_f32(amax * 0.16666667f));
            float inv = sv > 0.0f ? 1.0f / sv : 0.0f;
            for (int i = 0; i < group; i++)
                o[i] = (double)mjr_f32_from_e2m1(mjr_e2m1_from_f32(v[i] * inv)) * sv;
            continue;
        }
        uint8_t e = mjr_ue8m0_for_amax(amax, fmt == MJ_FMT_MXFP8 ? 448.0f : 6.0f);
        float inv = ldexpf(1.0f, 127 - (int)e);
        double sv = mjr_f32_from_ue8m0(e);
        for (int i = 0; i < group; i++) {
            float q = v[i] * inv;
            float d = fmt == MJ_FMT_MXFP8 ? mjr_f32_from_e4m3(mjr_e4m3_from_f32(q))
                                          : mjr_f32_from_e2m1(mjr_e2m1_from_f32(q));
            o[i] = (double)d * sv;
        }
    }
}

static double sigmoid(double z) {
    return 1.0 / (1.0 + exp(-z));
}

/* The two constants of s's activation, as the kernels take them (floats). */
static void act_constants(const mjr_moe_shape *s, double *a, double *b) {
    static const float standard[MJ_ACT_COUNT][2] = {{1.0f, 0.0f}, {1.702f, 1.0f}, {4.0f, 25.0f}};
    *a = s->act_params[0] != 0.0f ? s->act_params[0] : standard[s->activation][0];
    *b = s->act_params[1] != 0.0f ? s->act_params[1] : standard[s->activation][1];
}

/* Step 4: swiglu family h = g sigmoid(alpha g), v = u + beta; situ h = bg
 * tanh(g / bg) sigmoid(g), v = bu tanh(u / bu). */
static double activate(const mjr_moe_shape *s, double g, double u) {
    double a, b;
    act_constants(s, &a, &b);
    if (s->activation == MJ_ACT_SITU) return a * tanh(g / a) * sigmoid(g) * (b * tanh(u / b));
    return g * sigmoid(a * g) * (u + b);
}

static double dot(const double *a, const double *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static int fmt_ok(int fmt) {
    return fmt >= MJ_FMT_BF16 && fmt <= MJ_FMT_NVFP4;
}

static int shape_ok(const mjr_moe_shape *s) {
    if (s->hidden < 32 || s->hidden % 32 || s->inter < 32 || s->inter % 32 || s->ranks < 1 ||
        s->experts < s->ranks || s->experts % s->ranks || s->topk < 1 || s->max_tokens < 0)
        return 0;
    if (!fmt_ok(s->weight_fmt) || !fmt_ok(s->dispatch_fmt) || !fmt_ok(s->l2_fmt)) return 0;
    if (s->activation < 0 || s->activation >= MJ_ACT_COUNT) return 0;
    if (s->has_clamp && (s->activation == MJ_ACT_SITU || !isfinite(s->clamp) || s->clamp < 0.0f))
        return 0;
    if (s->shared_inter < 0 || s->shared_inter % s->inter ||
        (s->shared_inter && !fmt_ok(s->shared_fmt)))
        return 0;
    for (int i = 0; i < 2; i++) {
        const float p = s->act_params[i];
        if (!isfinite(p) || (p != 0.0f && s->activation == MJ_ACT_SWIGLUOAI) ||
            (s->activation == MJ_ACT_SITU && p < 0.0f))
            return 0;
    }
    return 1;
}

static int inputs_ok(const mjr_moe_shape *s, const mjr_expert_weights *experts,
                     const mjr_rank_input *in, uint16_t *const *y) {
    int wgroup = mj_format_group(s->weight_fmt);
    for (int e = 0; e < s->experts; e++) {
        const mjr_expert_weights *w = &experts[e];
        if (!w->w1 || !w->w2 || (wgroup && (!w->w1_sf || !w->w2_sf))) return 0;
    }
    if (s->shared_inter) {
        const mjr_expert_weights *w = &experts[s->experts];
        int sgroup = mj_format_group(s->shared_fmt);
        if (!w->w1 || !w->w2 || (sgroup && (!w->w1_sf || !w->w2_sf)) || w->b1 || w->b2 ||
            w->l1_alpha_gate != 1.0f || w->l1_alpha_up != 1.0f || w->l2_alpha != 1.0f ||
            w->l2_act_scale != 1.0f)
            return 0;
    }
    for (int r = 0; r < s->ranks; r++) {
        const mjr_rank_input *ri = &in[r];
        if (ri->num_tokens < 0 || ri->num_tokens > s->max_tokens) return 0;
        if (ri->num_tokens == 0) continue;
        if (!ri->x || !ri->topk_ids || !ri->topk_weights || !y[r]) return 0;
        if (mj_format_group(s->dispatch_fmt) && !ri->x_sf) return 0;
        if (s->dispatch_fmt == MJ_FMT_NVFP4 && !ri->x_scales) return 0;
        for (size_t i = 0; i < (size_t)ri->num_tokens * (size_t)s->topk; i++)
            if (ri->topk_ids[i] < -1 || ri->topk_ids[i] >= s->experts) return 0;
    }
    return 1;
}

typedef struct work {
    double *w1, *w2, *a, *act, *actq;
    float *actf;
} work;

/* Steps 1-7 for one pair of an expert with intermediate size I (the routed
 * one's, or the shared expert's); o receives H BF16 values (as floats). */
static void expert_pair(const mjr_moe_shape *s, const mjr_expert_weights *ew, const work *wk,
                        const mjr_rank_input *ri, int t, float weight, int I, float *o) {
    int H = s->hidden;
    size_t xrb = row_bytes(s->dispatch_fmt, H);
    size_t xsfb =
        mj_format_group(s->dispatch_fmt) ? (size_t)(H / mj_format_group(s->dispatch_fmt)) : 0u;
    dequant_row(s->dispatch_fmt, ri->x + (size_t)t * xrb, xsfb ? ri->x_sf + (size_t)t * xsfb : NULL,
                H, wk->a);
    float xs = s->dispatch_fmt == MJ_FMT_NVFP4 ? ri->x_scales[t] : 1.0f;
    float mul_gate = xs * ew->l1_alpha_gate;
    float mul_up = xs * ew->l1_alpha_up;
    float mul_act = weight * ew->l2_act_scale;
    double c = s->has_clamp ? bf16_round(s->clamp) : 0.0;
    for (int j = 0; j < I; j++) {
        double g = dot(wk->w1 + (size_t)j * H, wk->a, H) * mul_gate;
        double u = dot(wk->w1 + (size_t)(I + j) * H, wk->a, H) * mul_up;
        if (ew->b1) {
            g += ew->b1[j];
            u += ew->b1[I + j];
        }
        g = bf16_round(g);
        u = bf16_round(u);
        if (s->has_clamp) {
            g = g > c ? c : g;
            u = u > c ? c : u < -c ? -c : u;
        }
        wk->act[j] = activate(s, g, u) * mul_act;
    }
    quantize_act(s->l2_fmt, wk->act, wk->actf, I, wk->actq);
    double bias_weight = s->down_bias_unweighted ? 1.0 : (double)weight;
    for (int h = 0; h < H; h++) {
        double v = dot(wk->w2 + (size_t)h * I, wk->actq, I) * ew->l2_alpha;
        if (ew->b2) v += bias_weight * ew->b2[h];
        o[h] = (float)bf16_round(v);
    }
}

static void dequant_matrix(int fmt, const uint8_t *data, const uint8_t *sf, int rows, int cols,
                           double *out) {
    size_t rb = row_bytes(fmt, cols);
    size_t sfb = mj_format_group(fmt) ? (size_t)(cols / mj_format_group(fmt)) : 0u;
    for (int r = 0; r < rows; r++)
        dequant_row(fmt, data + (size_t)r * rb, sfb ? sf + (size_t)r * sfb : NULL, cols,
                    out + (size_t)r * (size_t)cols);
}

static int expert_used(const mjr_moe_shape *s, const mjr_rank_input *in, int e) {
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < (size_t)in[r].num_tokens * (size_t)s->topk; i++)
            if (in[r].topk_ids[i] == e) return 1;
    return 0;
}

int mjr_moe_forward(const mjr_moe_shape *s, const mjr_expert_weights *experts,
                    const mjr_rank_input *in, uint16_t *const *y, int32_t *recv_stats) {
    if (!s || !experts || !in || !y || !shape_ok(s) || !inputs_ok(s, experts, in, y)) return -1;
    int H = s->hidden, I = s->inter, K = s->topk, R = s->ranks, IS = s->shared_inter;
    int local = s->experts / R;
    size_t wide = (size_t)(IS > I ? IS : I); /* the work buffers serve both experts */

    int rc = -2;
    float **o = calloc((size_t)R, sizeof *o), **shared = calloc((size_t)R, sizeof *shared);
    work wk = {
        malloc(2 * wide * (size_t)H * sizeof(double)),
        malloc((size_t)H * wide * sizeof(double)),
        malloc((size_t)H * sizeof(double)),
        malloc(wide * sizeof(double)),
        malloc(wide * sizeof(double)),
        malloc(wide * sizeof(float)),
    };
    if (!o || !shared || !wk.w1 || !wk.w2 || !wk.a || !wk.act || !wk.actq || !wk.actf) goto out;
    for (int r = 0; r < R; r++) {
        /* one extra float keeps the allocation non-empty for ranks without tokens */
        o[r] = malloc(((size_t)in[r].num_tokens * (size_t)K * (size_t)H + 1u) * sizeof(float));
        shared[r] = IS ? malloc(((size_t)in[r].num_tokens * (size_t)H + 1u) * sizeof(float)) : NULL;
        if (!o[r] || (IS && !shared[r])) goto out;
    }

    for (int e = 0; e < s->experts; e++) {
        if (!expert_used(s, in, e)) continue;
        const mjr_expert_weights *ew = &experts[e];
        dequant_matrix(s->weight_fmt, ew->w1, ew->w1_sf, 2 * I, H, wk.w1);
        dequant_matrix(s->weight_fmt, ew->w2, ew->w2_sf, H, I, wk.w2);
        for (int r = 0; r < R; r++)
            for (int t = 0; t < in[r].num_tokens; t++)
                for (int k = 0; k < K; k++) {
                    size_t i = (size_t)t * (size_t)K + (size_t)k;
                    if (in[r].topk_ids[i] == e)
                        expert_pair(s, ew, &wk, &in[r], t, in[r].topk_weights[i], I,
                                    o[r] + i * (size_t)H);
                }
    }
    if (IS) {
        const mjr_expert_weights *ew = &experts[s->experts];
        dequant_matrix(s->shared_fmt, ew->w1, ew->w1_sf, 2 * IS, H, wk.w1);
        dequant_matrix(s->shared_fmt, ew->w2, ew->w2_sf, H, IS, wk.w2);
        for (int r = 0; r < R; r++)
            for (int t = 0; t < in[r].num_tokens; t++)
                expert_pair(s, ew, &wk, &in[r], t, 1.0f, IS, shared[r] + (size_t)t * (size_t)H);
    }

    /* Step 8 on each home rank: fp32 sum over valid slots in increasing k. */
    for (int r = 0; r < R; r++)
        for (int t = 0; t < in[r].num_tokens; t++) {
            const int32_t *ids = in[r].topk_ids + (size_t)t * (size_t)K;
            for (int h = 0; h < H; h++) {
                float acc = 0.0f;
                int any = 0;
                for (int k = 0; k < K; k++) {
                    if (ids[k] < 0) continue;
                    acc += o[r][((size_t)t * (size_t)K + (size_t)k) * (size_t)H + (size_t)h];
                    any = 1;
                }
                if (IS) { /* slot K */
                    acc += shared[r][(size_t)t * (size_t)H + (size_t)h];
                    any = 1;
                }
                y[r][(size_t)t * (size_t)H + (size_t)h] = any ? mjr_bf16_from_f32(acc) : 0;
            }
        }

    /* [owner][e % local] with owner = e / local is simply index e. */
    if (recv_stats) {
        memset(recv_stats, 0, (size_t)R * (size_t)local * sizeof *recv_stats);
        for (int r = 0; r < R; r++)
            for (size_t i = 0; i < (size_t)in[r].num_tokens * (size_t)K; i++)
                if (in[r].topk_ids[i] >= 0) recv_stats[in[r].topk_ids[i]]++;
    }
    rc = 0;
out:
    for (int r = 0; r < R; r++) {
        if (o) free(o[r]);
        if (shared) free(shared[r]);
    }
    free(o);
    free(shared);
    free(wk.w1);
    free(wk.w2);
    free(wk.a);
    free(wk.act);
    free(wk.actq);
    free(wk.actf);
    return rc;
}
