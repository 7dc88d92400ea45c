/*
 * The MegaMoE format matrix: one row per supported precision combination.
 * Kernels, heuristics, the API and the tests all read this table, so adding a
 * precision is adding a row here (and its decode in the kernel).
 * Format and activation codes are MJ_FMT_* and MJ_ACT_* (templates/layout/codes.h).
 */
#ifndef MJ_HEURISTICS_MOE_FORMATS_H
#define MJ_HEURISTICS_MOE_FORMATS_H

#include "templates/layout/moe_layout.h"

#define MJ_FMT_BIT(fmt) (1u << (unsigned)(fmt))
#define MJ_ACT_BIT(act) (1u << (unsigned)(act))
#define MJ_ACT_ALL                                                                                 \
    (MJ_ACT_BIT(MJ_ACT_SWIGLU) | MJ_ACT_BIT(MJ_ACT_SWIGLUOAI) | MJ_ACT_BIT(MJ_ACT_SITU))

typedef struct mj_moe_format_row {
    int weight_fmt;           /* W1 and W2 storage */
    int dispatch_fmt;         /* tokens as pre-dispatch writes them: GEMM 1 input */
    int l2_input_fmt;         /* the L1 epilogue quantizes GEMM 2's input into this */
    unsigned activation_mask; /* MJ_ACT_BIT of each allowed activation */
    int uses_x_scales;        /* GEMM 1 accumulator is multiplied by the per-token scale */
    const char *name;         /* "mxfp4-a8" */
    unsigned shared_formats;  /* MJ_FMT_BIT of each format a fused shared expert may have */
} mj_moe_format_row;

int mj_moe_format_count(void);
/* Row i in table order, NULL when out of range. */
const mj_moe_format_row *mj_moe_format_at(int i);
/* The row for a (weight, dispatch) pair; NULL when the pair is unsupported. */
const mj_moe_format_row *mj_moe_format_find(int weight_fmt, int dispatch_fmt);
/* Exact, case-sensitive name match; NULL when unknown or name is NULL. */
const mj_moe_format_row *mj_moe_format_by_name(const char *name);

/* 1 when row accepts act, 0 otherwise (also for a NULL row or unknown act). */
int mj_moe_activation_allowed(const mj_moe_format_row *row, int act);
/* 1 for the swiglu family (swiglu, swigluoai), the only activations with an
 * optional clamp (NUMERICS.md step 3). */
int mj_moe_activation_has_clamp(int act);
/* "swiglu", "swigluoai", "situ"; NULL for an unknown activation. */
const char *mj_moe_activation_name(int act);
/* The activation of that name; -1 for none. */
int mj_moe_activation_by_name(const char *name);

/* 1 when a shared expert in shared_fmt may be fused into row's layer (the
 * reference layer's matrix: bf16 -> BF16; mxfp8 and both mxfp4 rows ->
 * MXFP8; both nvfp4 rows -> MXFP8 or BF16). The kernel runs every such pair:
 * in the row's own weight format the shared expert's tasks run the routed
 * experts' K loop; in another its format's loop in tasks of two blocks
 * (templates/mega_moe/config.cuh), where such a stage fits the routed ring
 * slot at the layer's stage K (mj_moe_shared_geometry_of, which the config
 * check applies). */
int mj_moe_shared_fusable(const mj_moe_format_row *row, int shared_fmt);

/* The row's own weight format where a shared expert in it fuses, else
 * mxfp8 (-1 for none): what the benchmark fuses. */
int mj_moe_shared_format_of(const mj_moe_format_row *row);

#endif /* MJ_HEURISTICS_MOE_FORMATS_H */
