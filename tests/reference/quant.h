/*
 * Host reference quantizers (NUMERICS.md), bit-exact definitions that the
 * kernels must match. Pure C, no CUDA. Reused by the CPU tests, the GPU tests
 * and the fp64 MoE reference.
 */
#ifndef MJ_REF_QUANT_H
#define MJ_REF_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* ---- element conversions (bit patterns in integers) */
uint32_t mjr_f32_bits(float x);
float mjr_f32_from_bits(uint32_t u);
uint16_t mjr_bf16_from_f32(float x); /* RNE; NaN stays NaN */
float mjr_f32_from_bf16(uint16_t b);
uint8_t mjr_e4m3_from_f32(float x); /* OCP e4m3fn, RNE, saturate to +-448 */
float mjr_f32_from_e4m3(uint8_t b);
uint8_t mjr_e2m1_from_f32(float x); /* 4-bit code, RNE, saturate to +-6, no -0 */
float mjr_f32_from_e2m1(uint8_t code);
float mjr_f32_from_ue8m0(uint8_t e); /* 2^(e-127) */

/* UE8M0 exponent byte for a group: smallest power of two >= max(amax,1e-4)/qmax,
 * clamped to [1, 254] (NUMERICS.md, MXFP8/MXFP4 activations). */
uint8_t mjr_ue8m0_for_amax(float amax, float qmax);

/* ---- one token row, as pre-dispatch writes it.
 * fmt: 0 BF16, 1 MXFP8, 2 MXFP4, 3 NVFP4 (MJ_FMT_*).
 * x: hidden BF16 bit patterns. out: hidden*bits/8 bytes (FP4 low nibble = even
 * element). sf: hidden/group scale bytes (unused for BF16). x_scale: the NVFP4
 * per-token scale (unused otherwise). */
void mjr_quantize_row(int fmt, const uint16_t *x, int hidden, uint8_t *out, uint8_t *sf,
                      float *x_scale);

/* ---- a whole pre-dispatch into a host image of one rank's region, laid out
 * by templates/layout/symm_layout.h (region = rank base; the workspace is not
 * touched). Rows >= num_tokens: top-k ids -1 and weights 0; x, sf and x_scales
 * of those rows untouched. expert_scales may be NULL. */
void mjr_pre_dispatch(int fmt, int hidden, int topk, int max_tokens, const uint16_t *x,
                      const int32_t *topk_ids, const float *topk_weights,
                      const float *expert_scales, int num_tokens, uint8_t *region);

#endif
