/*
 * The C fp64 reference (tests/reference) on the GPU test's inputs, so that
 * python/tests/test_gpu_reference.py can check the GPU test's PyTorch
 * quantizers and MegaMoE reference (numerics.py) against it on the CPU.
 *
 *   reference_harness WFMT DFMT L2FMT ACT CLAMP P0 P1 BIASES IS SFMT H I E K T TMAX DIR
 *
 * P0 P1: the activation's two parameters (mjr_moe_shape.act_params; 0 =
 * standard). BIASES 1: DIR also holds b1.f32 [E][2I] and b2.f32 [E][H], the
 * experts' biases (mjr_expert_weights.b1, b2). IS > 0: a fused shared expert
 * of that intermediate size in SFMT, bf16 or mxfp8 (the formats a shared
 * expert fuses in; it has no alpha to take back NVFP4's pre-scaling): DIR also
 * holds its master weights sw1.f32 [2 IS][H] and sw2.f32 [H][IS], quantized
 * into sq1/ss1/sq2/ss2 (mjr_moe_shape.shared_inter, shared_fmt).
 *
 * DIR holds w1.f32 [E][2I][H] and w2.f32 [E][H][I] (master weights), alphas.f32
 * [4][E] (gate, up, down, act scale), x.bf16 [T][H], ids.i32 and tw.f32 [T][K].
 * Writes q1/s1/q2/s2 (weights quantized as the GPU test does: NVFP4 scaled to
 * amax 2688 first), region (mjr_pre_dispatch), y (mjr_moe_forward) and stats,
 * and prints the region's offsets.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "templates/layout/symm_layout.h"
#include "tests/reference/moe_ref.h"
#include "tests/reference/quant.h"

static void *slurp(const char *dir, const char *name, size_t bytes) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    void *buf = calloc(1, bytes + 16);
    if (!f || !buf || fread(buf, 1, bytes, f) != bytes) {
        fprintf(stderr, "cannot read %zu bytes of %s\n", bytes, path);
        exit(1);
    }
    fclose(f);
    return buf;
}

static void spill(const char *dir, const char *name, const void *buf, size_t bytes) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, bytes, f) != bytes) exit(1);
    fclose(f);
}

/* tests/gpu/mega_moe/run.c's quantize_scaled, minus the alpha (the caller's). */
static void quantize(int fmt, const float *w, int rows, int cols, float *tmp, uint8_t *data,
                     uint8_t *sf) {
    size_t n = (size_t)rows * (size_t)cols;
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++)
        amax = fabsf(w[i]) > amax ? fabsf(w[i]) : amax;
    float s = fmt == MJ_FMT_NVFP4 ? 2688.0f / (amax > 0.0f ? amax : 1.0f) : 1.0f;
    for (size_t i = 0; i < n; i++)
        tmp[i] = w[i] * s;
    if (mjr_quantize_weights(fmt, tmp, rows, cols, data, sf) != 0) exit(1);
}

int main(int argc, char **argv) {
    if (argc != 18) return 2;
    int wf = atoi(argv[1]), df = atoi(argv[2]), lf = atoi(argv[3]), act = atoi(argv[4]);
    float clamp = (float)atof(argv[5]);
    float act_params[2] = {(float)atof(argv[6]), (float)atof(argv[7])};
    int biases = atoi(argv[8]), IS = atoi(argv[9]), sfmt = atoi(argv[10]);
    int H = atoi(argv[11]), I = atoi(argv[12]), E = atoi(argv[13]), K = atoi(argv[14]);
    int T = atoi(argv[15]), TM = atoi(argv[16]);
    const char *dir = argv[17];
    if (IS && sfmt != MJ_FMT_BF16 && sfmt != MJ_FMT_MXFP8) return 2;
    float *w1 = slurp(dir, "w1.f32", (size_t)E * 2 * I * H * 4);
    float *w2 = slurp(dir, "w2.f32", (size_t)E * H * I * 4);
    float *alphas = slurp(dir, "alphas.f32", (size_t)4 * E * 4);
    uint16_t *x = slurp(dir, "x.bf16", (size_t)T * H * 2);
    int32_t *ids = slurp(dir, "ids.i32", (size_t)T * K * 4);
    float *tw = slurp(dir, "tw.f32", (size_t)T * K * 4);
    float *b1 = biases ? slurp(dir, "b1.f32", (size_t)E * 2 * I * 4) : NULL;
    float *b2 = biases ? slurp(dir, "b2.f32", (size_t)E * H * 4) : NULL;
    int bits = mj_format_bits(wf), group = mj_format_group(wf);
    size_t w1b = (size_t)2 * I * H * bits / 8, w2b = (size_t)H * I * bits / 8;
    size_t w1s = group ? (size_t)2 * I * (H / group) : 0, w2s = group ? (size_t)H * (I / group) : 0;
    uint8_t *q1 = calloc(E, w1b), *s1 = calloc(E, w1s + 1), *q2 = calloc(E, w2b);
    uint8_t *s2 = calloc(E, w2s + 1);
    float *tmp = malloc((size_t)2 * (IS > I ? IS : I) * H * 4);
    mjr_expert_weights *ew = calloc(E + 1, sizeof *ew); /* ew[E]: the shared expert */
    for (int e = 0; e < E; e++) {
        const float *g = w1 + (size_t)e * 2 * I * H;
        quantize(wf, g, I, H, tmp, q1 + e * w1b, s1 + e * w1s);
        quantize(wf, g + (size_t)I * H, I, H, tmp, q1 + e * w1b + w1b / 2, s1 + e * w1s + w1s / 2);
        quantize(wf, w2 + (size_t)e * H * I, H, I, tmp, q2 + e * w2b, s2 + e * w2s);
        ew[e] = (mjr_expert_weights){q1 + e * w1b,
                                     group ? s1 + e * w1s : NULL,
                                     q2 + e * w2b,
                                     group ? s2 + e * w2s : NULL,
                                     alphas[e],
                                     alphas[E + e],
                                     alphas[2 * E + e],
                                     alphas[3 * E + e],
                                     b1 ? b1 + (size_t)e * 2 * I : NULL,
                                     b2 ? b2 + (size_t)e * H : NULL};
    }
    spill(dir, "q1", q1, E * w1b);
    spill(dir, "s1", s1, E * w1s);
    spill(dir, "q2", q2, E * w2b);
    spill(dir, "s2", s2, E * w2s);
    if (IS) {
        float *sw1 = slurp(dir, "sw1.f32", (size_t)2 * IS * H * 4);
        float *sw2 = slurp(dir, "sw2.f32", (size_t)H * IS * 4);
        int sgroup = mj_format_group(sfmt);
        /* gate and up in one call: bf16 and mxfp8 quantize row by row */
        size_t n1 = (size_t)2 * IS * H * mj_format_bits(sfmt) / 8, n2 = n1 / 2;
        size_t g1 = sgroup ? (size_t)2 * IS * (H / sgroup) : 0, g2 = g1 / 2;
        uint8_t *sq1 = malloc(n1), *ss1 = malloc(g1 + 1), *sq2 = malloc(n2), *ss2 = malloc(g2 + 1);
        quantize(sfmt, sw1, 2 * IS, H, tmp, sq1, ss1);
        quantize(sfmt, sw2, H, IS, tmp, sq2, ss2);
        spill(dir, "sq1", sq1, n1);
        spill(dir, "ss1", ss1, g1);
        spill(dir, "sq2", sq2, n2);
        spill(dir, "ss2", ss2, g2);
        ew[E] = (mjr_expert_weights){
            sq1, sgroup ? ss1 : NULL, sq2, sgroup ? ss2 : NULL, 1.0f, 1.0f, 1.0f, 1.0f, NULL, NULL};
    }
    mj_input_layout l = mj_layout_input(H, K, TM, df);
    uint8_t *region = calloc(1, l.end);
    mjr_pre_dispatch(df, H, K, TM, x, ids, tw, NULL, T, region);
    spill(dir, "region", region, l.end);
    mjr_rank_input in = {T,
                         region + l.x_offset,
                         mj_format_group(df) ? region + l.sf_offset : NULL,
                         df == MJ_FMT_NVFP4 ? (const float *)(region + l.x_scales_offset) : NULL,
                         (const int32_t *)(region + l.topk_idx_offset),
                         (const float *)(region + l.topk_w_offset)};
    mjr_moe_shape s = {.hidden = H,
                       .inter = I,
                       .experts = E,
                       .topk = K,
                       .ranks = 1,
                       .max_tokens = TM,
                       .weight_fmt = wf,
                       .dispatch_fmt = df,
                       .l2_fmt = lf,
                       .activation = act,
                       .has_clamp = clamp > 0,
                       .clamp = clamp,
                       .act_params = {act_params[0], act_params[1]},
                       .shared_inter = IS,
                       .shared_fmt = sfmt};
    uint16_t *y = calloc((size_t)T * H + 1, 2);
    int32_t *stats = calloc(E, 4);
    uint16_t *ys[1] = {y};
    int rc = mjr_moe_forward(&s, ew, &in, ys, stats);
    spill(dir, "y", y, (size_t)T * H * 2);
    spill(dir, "stats", stats, (size_t)E * 4);
    printf("%llu %llu %llu %llu %llu\n", (unsigned long long)l.x_offset,
           (unsigned long long)l.sf_offset, (unsigned long long)l.topk_idx_offset,
           (unsigned long long)l.topk_w_offset, (unsigned long long)l.x_scales_offset);
    return rc;
}
