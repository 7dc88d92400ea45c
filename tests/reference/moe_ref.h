/*
 * fp64 reference of one MegaMoE layer across R ranks (NUMERICS.md steps 1-8),
 * computed on the host from the same quantized inputs the kernels read. Used by
 * the CPU tests, the GPU tests and the benchmark's checks.
 *
 * Where the kernel accumulates or multiplies in fp32, the reference does it in
 * fp64 and rounds the double straight to BF16 (no detour through fp32, which
 * would round twice). Three things stay in fp32 on purpose:
 *  - the per-pair multipliers (xs * alpha, weight * l2_act_scale): they are
 *    single numbers the kernel forms once, so the reference uses the same one;
 *  - the quantization decisions of step 6 (block scales and codes) are made on
 *    (float)act with the quant.h converters, because they are discontinuous and
 *    must agree with the kernel on the same value;
 *  - the combine (step 8), which the contract defines as an fp32 sum.
 * Expert weights may have any storage format, independent of the format table.
 */
#ifndef MJ_REF_MOE_REF_H
#define MJ_REF_MOE_REF_H

#include <stddef.h>
#include <stdint.h>

typedef struct mjr_moe_shape {
    int hidden;     /* H: multiple of 32 */
    int inter;      /* I: multiple of 32 */
    int experts;    /* E (global): a multiple of ranks */
    int topk;       /* K */
    int ranks;      /* R; expert e lives on rank e / (E/R) */
    int max_tokens; /* per rank; num_tokens of every rank must not exceed it */
    int weight_fmt, dispatch_fmt, l2_fmt; /* MJ_FMT_* */
    int activation;                       /* MJ_ACT_SWIGLU, _SWIGLUOAI or _SITU (0, 1, 2) */
    int has_clamp;                        /* swiglu family only; rejected with situ */
    float clamp;                          /* C, finite and >= 0, rounded to BF16 before use */
    /* The activation's parameters as mj_moe_config gives them, 0 = standard:
     * swiglu alpha (1) and beta (0), situ gate and up betas (4, 25; > 0);
     * swigluoai takes none (both 0). */
    float act_params[2];
    /* Negative controls only: the down bias enters without the routing weight. */
    int down_bias_unweighted;
    /* A shared expert fused into the layer (0: none): its intermediate size,
     * a positive multiple of inter, and its weight format (any; the API will
     * restrict the pairs). Every rank runs it on each of its own tokens, from
     * the token's dispatch-format row (GEMM 1 scaled by the NVFP4 per-token
     * scale, alphas 1), with routing weight 1 and l2_act_scale 1, the layer's
     * activation, clamp and GEMM 2 input format; its output joins the combine
     * as slot K, after the routed slots, in the same fp32 sum, so a token
     * whose routed slots are all masked gets y = BF16(its shared output). */
    int shared_inter;
    int shared_fmt;
} mjr_moe_shape;

/* One global expert in checkpoint layout. W1 [2I, H]: rows gate 0..I-1 then up
 * 0..I-1; W2 [H, I]. Data row-major [out][in] in the weight format (BF16 as
 * little-endian bit patterns, E4M3 bytes, E2M1 packed with the even element in
 * the low nibble); scales [out][in / group] (UE8M0 for MX, UE4M3 for NVFP4;
 * NULL for BF16). Alphas and l2_act_scale: 1 when unused. Biases (NULL: none):
 * b1 [2I] gate rows then up rows, added to the scaled GEMM 1 accumulator before
 * step 2's BF16 rounding; b2 [H], times the pair's routing weight, added to the
 * scaled GEMM 2 accumulator before step 7's (include/megajit.h,
 * mj_weights_load_bias). */
typedef struct mjr_expert_weights {
    const uint8_t *w1, *w1_sf, *w2, *w2_sf;
    float l1_alpha_gate, l1_alpha_up, l2_alpha, l2_act_scale;
    const float *b1, *b2;
} mjr_expert_weights;

/* One rank's pre-dispatched inputs (as mjr_pre_dispatch writes them), rows
 * packed: x [T][H * bits / 8], x_sf [T][H / group] (NULL for BF16), x_scales [T]
 * (NVFP4 only, else NULL), topk_ids [T][K] (-1 = masked), topk_weights [T][K]
 * with expert_scales already folded in. */
typedef struct mjr_rank_input {
    int num_tokens;
    const uint8_t *x;
    const uint8_t *x_sf;
    const float *x_scales;
    const int32_t *topk_ids;
    const float *topk_weights;
} mjr_rank_input;

/* experts[E], plus experts[E] = the shared expert when s->shared_inter > 0
 * (w1 [2 shared_inter][H], w2 [H][shared_inter] in s->shared_fmt; alphas and
 * l2_act_scale 1, no biases: anything else is refused), in[R], y[R] (each
 * num_tokens[r] x H BF16 bits). recv_stats, when
 * not NULL, is overwritten with [R][E/R] counts of valid (token, slot) pairs
 * each local expert receives from all ranks.
 * Returns 0; -1 for invalid arguments (bad shape, a missing pointer, a top-k id
 * outside [-1, E)) with nothing written; -2 when out of memory. */
int mjr_moe_forward(const mjr_moe_shape *s, const mjr_expert_weights *experts,
                    const mjr_rank_input *in, uint16_t *const *y, int32_t *recv_stats);

/* Quantize an fp32 [rows][cols] weight matrix into checkpoint layout (cols is
 * the reduction dimension). BF16: RNE. MXFP8 / MXFP4: the activation rule, a
 * UE8M0 scale per 32 from the amax. NVFP4: sf = E4M3_SAT(amax / 6) per 16 and
 * codes E2M1(w / sf), with no per-tensor global scale: scale w so its amax is
 * near 2688 (448 * 6) and put the inverse into the expert's alphas, or small
 * groups fall into E4M3 subnormals. Returns 0, or -1 for a bad format or a cols
 * that is not a multiple of the group (data / sf untouched). */
int mjr_quantize_weights(int fmt, const float *w, int rows, int cols, uint8_t *data, uint8_t *sf);

/* double to BF16 bits, round to nearest even in one step (overflow -> inf). */
uint16_t mjr_bf16_from_f64(double x);

/* 1 - 2*sum(x*y) / sum(x*x + y*y) in fp64 over n BF16 values; 0 when both are
 * all zero. */
double mjr_calc_diff(const uint16_t *x_bf16, const uint16_t *y_bf16, size_t n);

#endif
