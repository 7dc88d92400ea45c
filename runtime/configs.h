/*
 * The buffer and MoE layer configs: validated once where they enter (buffer
 * and weights creation, manifest layers); everything downstream takes them as
 * valid. A layer's buffer config is derived from it, never restated.
 */
#ifndef MJ_CONFIGS_H
#define MJ_CONFIGS_H

#include "heuristics/mega_moe_config.h"
#include "heuristics/moe_formats.h"
#include "include/megajit.h"

/* A caller's config as this library lays it out (runtime/struct_size.h: the
 * fields it has, defaults for the rest), validated: what the public calls
 * keep. The MegaMoE one also returns its format row (row may be NULL). */
mj_status mj_symm_config_accept(const mj_symm_config *theirs, mj_symm_config *ours);
mj_status mj_moe_config_accept(const mj_moe_config *theirs, mj_moe_config *ours,
                               const mj_moe_format_row **row);
/* The way back: copies ours into a caller's config, the fields its version
 * holds (mj_symm_buffer_info). */
mj_status mj_symm_config_give(const mj_symm_config *ours, mj_symm_config *theirs);

/* Validates a symmetric buffer config against runtime/limits.h; the message
 * names the bad field ("num_ranks 73 must be in 1..72"). */
mj_status mj_symm_config_check(const mj_symm_config *c);
/* The same, for the buffer of a MegaMoE layer when moe (intermediate then
 * required, not 0). */
mj_status mj_symm_shape_check(const mj_symm_config *c, int moe);

/* The config of the symmetric buffer a MoE layer runs in. */
mj_symm_config mj_symm_config_of_moe(const mj_moe_config *c);

/* The first field in which a and b differ (and both values), NULL when none. */
const char *mj_symm_config_mismatch(const mj_symm_config *a, const mj_symm_config *b,
                                    long long *a_value, long long *b_value);

/* The MegaMoE heuristics' view of a layer (tokens 0: what the launch
 * chooses is not in it), and its stage K (mj_moe_stage_k). */
mj_moe_problem mj_moe_problem_of(const mj_moe_config *c, int num_sms);
int mj_moe_config_stage_k(const mj_moe_config *c, const mj_moe_format_row *row);

/* Validates a MoE config, its buffer config included (the message names the
 * field), and returns its format row (row may be NULL). */
mj_status mj_moe_config_check(const mj_moe_config *c, const mj_moe_format_row **row);

/* The activation parameters of c (mj_moe_config, from swiglu_alpha on): the
 * chosen activation's in range, every other one 0. where prefixes the field in the message ("" for
 * the API, "manifest: layers[3]." for a manifest). */
mj_status mj_moe_activation_params_check(const mj_moe_config *c, const char *where);

/* The shared expert's format of c in row r (its size is a shape rule,
 * mj_shape_check): unset without a shared expert, else one the reference
 * layer fuses into the row (MJ_ERR_INVALID_ARG naming those) and one the
 * kernel is built for (MJ_ERR_UNSUPPORTED) at the layer's stage K, which
 * hidden, intermediate, experts and ranks decide (mj_moe_config_stage_k).
 * where as above. */
mj_status mj_moe_shared_check(const mj_moe_config *c, const mj_moe_format_row *r,
                              const char *where);

#endif
