/*
 * Codes the host passes to kernels as template arguments, and the only
 * definition kernels, heuristics and the host reference read (plain C for gcc
 * and NVRTC). The public enums mj_format and mj_activation hold the same
 * values; runtime/codes.c asserts that they do.
 */
#ifndef MJ_LAYOUT_CODES_H
#define MJ_LAYOUT_CODES_H

/* Element formats. */
#define MJ_FMT_BF16 0
#define MJ_FMT_MXFP8 1
#define MJ_FMT_MXFP4 2
#define MJ_FMT_NVFP4 3
#define MJ_FMT_COUNT 4

/* MegaMoE activations (NUMERICS.md steps 3-4). */
#define MJ_ACT_SWIGLU 0
#define MJ_ACT_SWIGLUOAI 1
#define MJ_ACT_SITU 2
#define MJ_ACT_COUNT 3

#endif /* MJ_LAYOUT_CODES_H */
