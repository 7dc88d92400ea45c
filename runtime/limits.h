/*
 * The shapes the kernels accept, defined once. The API (mj_symm_config_check,
 * and through it mj_moe_config_check and the kernel spec builders,
 * runtime/configs.c) and the manifest parser both check a layer's shape with
 * mj_shape_check, so a manifest accepts exactly what the API accepts and says
 * which field broke which rule. Changing a limit is one edit here; limits.c
 * asserts at compile time that the limits suit the kernels' own constants.
 */
#ifndef MJ_LIMITS_H
#define MJ_LIMITS_H

#include <stddef.h>

#include "templates/layout/symm_layout.h"

/* hidden: a multiple of 64 up to 8192 (gpt-oss's 2880 among them). The
 * MegaMoE kernel cuts GEMM 2's rows into 64-row blocks and streams K (hidden
 * for GEMM 1, intermediate for GEMM 2) in stages of a multiple of 64 dividing
 * both (mj_moe_stage_k), which a stage of 64 always does under these limits;
 * pre-dispatch needs only whole 32-element thread chunks (MJ_PD_ELEMS_PER_THREAD). */
#define MJ_LIMIT_HIDDEN_MULTIPLE 64
#define MJ_LIMIT_HIDDEN_MAX 8192
/* intermediate: the MegaMoE kernel's 64-row weight blocks (MJ_MOE_BLOCK_ROWS);
 * at most the widest MoE expert published (Grok-1's 32768). */
#define MJ_LIMIT_INTERMEDIATE_MULTIPLE 64
#define MJ_LIMIT_INTERMEDIATE_MAX 32768
/* experts: the MegaMoE kernel keeps two words of routing table per local
 * expert in shared memory beside its pipeline (MJ_MOE_ROUTING_BYTES); 4096
 * on one rank take 32 KiB and leave every format row a pipeline at every tile
 * size (tests/test_mega_moe_api.c builds the widest shapes' specs). */
#define MJ_LIMIT_EXPERTS_MAX 4096
#define MJ_LIMIT_TOPK_MAX 64
#define MJ_LIMIT_RANKS_MAX MJ_MAX_RANKS /* the peers a kernel receives by value */
#define MJ_LIMIT_TOKENS_MAX (1 << 20)   /* max_tokens_per_rank */
/* num_sms: more SMs than any GPU has (H200 132, B200 148). */
#define MJ_LIMIT_NUM_SMS_MAX 1024
/* One rank's symmetric buffer: more than any GPU's memory (288 GB today), and
 * small enough that every row count the kernels index with 32 bits fits (a
 * MegaMoE pool row takes at least 512 bytes: rows stay below 2^30). */
#define MJ_LIMIT_RANK_BYTES_MAX (512ull << 30)

typedef enum mj_shape_field {
    MJ_SHAPE_HIDDEN,
    MJ_SHAPE_INTERMEDIATE,
    MJ_SHAPE_EXPERTS,
    MJ_SHAPE_TOPK,
    MJ_SHAPE_RANKS,
    MJ_SHAPE_MAX_TOKENS,
    MJ_SHAPE_DISPATCH_FORMAT,
    /* A fused shared expert's intermediate size: 0 (none) or a multiple of
     * intermediate up to MJ_LIMIT_INTERMEDIATE_MAX; optional in a manifest. */
    MJ_SHAPE_SHARED_INTERMEDIATE,
    MJ_SHAPE_FIELDS_
} mj_shape_field;

/* A layer's shape, wide enough for any integer a JSON manifest can hold. */
typedef struct mj_shape {
    long long v[MJ_SHAPE_FIELDS_]; /* indexed by mj_shape_field; the format as its mj_format */
    int moe; /* a MegaMoE layer: intermediate is required (0 = a pre-dispatch-only buffer) */
} mj_shape;

/* How a caller spells the fields: mj_symm_config's "num_ranks" or a
 * manifest's "ranks". */
typedef enum mj_shape_naming { MJ_SHAPE_API_NAMES, MJ_SHAPE_MANIFEST_NAMES } mj_shape_naming;
const char *mj_shape_field_name(mj_shape_field field, mj_shape_naming naming);

/* A rule a shape breaks: the field, and what it must be ("must be a multiple
 * of 64 in 64..8192"), other fields named as the caller spells them. */
typedef struct mj_shape_violation {
    mj_shape_field field;
    char rule[256];
} mj_shape_violation;

/* 0 when s is within every limit; else 1 with the first violation in *out. */
int mj_shape_check(const mj_shape *s, mj_shape_naming naming, mj_shape_violation *out);

#endif
