/* Validation of the buffer and layer configs, and the buffer config a layer implies. */
#include "runtime/configs.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "heuristics/mega_moe_config.h"
#include "runtime/error.h"
#include "runtime/limits.h"
#include "runtime/struct_size.h"
#include "templates/layout/moe_layout.h"

mj_status mj_symm_shape_check(const mj_symm_config *c, int moe) {
    if (!c) return mj_fail(MJ_ERR_INVALID_ARG, "symmetric buffer config is NULL");
    mj_shape s = {.v = {[MJ_SHAPE_HIDDEN] = c->hidden,
                        [MJ_SHAPE_INTERMEDIATE] = c->intermediate,
                        [MJ_SHAPE_EXPERTS] = c->num_experts,
                        [MJ_SHAPE_TOPK] = c->num_topk,
                        [MJ_SHAPE_RANKS] = c->num_ranks,
                        [MJ_SHAPE_MAX_TOKENS] = c->max_tokens_per_rank,
                        [MJ_SHAPE_DISPATCH_FORMAT] = c->dispatch_format,
                        [MJ_SHAPE_SHARED_INTERMEDIATE] = c->shared_intermediate},
                  .moe = moe};
    mj_shape_violation v;
    if (!mj_shape_check(&s, MJ_SHAPE_API_NAMES, &v)) return MJ_OK;
    return mj_fail(MJ_ERR_INVALID_ARG, "%s %lld %s",
                   mj_shape_field_name(v.field, MJ_SHAPE_API_NAMES), s.v[v.field], v.rule);
}

mj_status mj_symm_config_check(const mj_symm_config *c) {
    return mj_symm_shape_check(c, 0);
}

mj_symm_config mj_symm_config_of_moe(const mj_moe_config *c) {
    return (mj_symm_config){.struct_size = sizeof(mj_symm_config),
                            .hidden = c->hidden,
                            .num_experts = c->num_experts,
                            .num_topk = c->num_topk,
                            .max_tokens_per_rank = c->max_tokens_per_rank,
                            .dispatch_format = c->dispatch_format,
                            .num_ranks = c->num_ranks,
                            .intermediate = c->intermediate,
                            .shared_intermediate = c->shared_intermediate};
}

const char *mj_symm_config_mismatch(const mj_symm_config *a, const mj_symm_config *b,
                                    long long *a_value, long long *b_value) {
    const struct {
        const char *name;
        long long a, b;
    } fields[] = {
        {"intermediate", a->intermediate, b->intermediate},
        {"hidden", a->hidden, b->hidden},
        {"num_experts", a->num_experts, b->num_experts},
        {"num_topk", a->num_topk, b->num_topk},
        {"max_tokens_per_rank", a->max_tokens_per_rank, b->max_tokens_per_rank},
        {"num_ranks", a->num_ranks, b->num_ranks},
        {"dispatch_format", a->dispatch_format, b->dispatch_format},
        {"shared_intermediate", a->shared_intermediate, b->shared_intermediate},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].a != fields[i].b) {
            *a_value = fields[i].a;
            *b_value = fields[i].b;
            return fields[i].name;
        }
    return NULL;
}

static mj_status unsupported_pair(const mj_moe_config *c) {
    char pairs[256] = "";
    for (int i = 0; i < mj_moe_format_count(); i++) {
        const mj_moe_format_row *r = mj_moe_format_at(i);
        size_t len = strlen(pairs);
        snprintf(pairs + len, sizeof pairs - len, "%s%s/%s", i ? ", " : "",
                 mj_format_name((mj_format)r->weight_fmt),
                 mj_format_name((mj_format)r->dispatch_fmt));
    }
    const char *w = mj_format_name(c->weight_format), *d = mj_format_name(c->dispatch_format);
    return mj_fail(MJ_ERR_INVALID_ARG,
                   "(weight_format %s, dispatch_format %s) is not a MegaMoE format pair "
                   "(supported weight/dispatch: %s)",
                   w ? w : "?", d ? d : "?", pairs);
}

/* A parameter the kernel would not read is a caller's mistake, not something
 * to ignore: only the chosen activation's may be nonzero. */
mj_status mj_moe_activation_params_check(const mj_moe_config *c, const char *where) {
    const char *act = mj_moe_activation_name((int)c->activation);
    const struct {
        const char *name;
        float value;
        int owner; /* the MJ_ACT_* code whose parameter it is */
        int positive;
    } p[] = {
        {"swiglu_alpha", c->swiglu_alpha, MJ_ACT_SWIGLU, 0},
        {"swiglu_beta", c->swiglu_beta, MJ_ACT_SWIGLU, 0},
        {"situ_gate_beta", c->situ_gate_beta, MJ_ACT_SITU, 1},
        {"situ_up_beta", c->situ_up_beta, MJ_ACT_SITU, 1},
    };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        if (p[i].value == 0) continue; /* -0 too: u + -0 is u */
        if (!isfinite(p[i].value))
            return mj_fail(MJ_ERR_INVALID_ARG, "%s%s: %g must be finite (0 = standard)", where,
                           p[i].name, (double)p[i].value);
        if ((int)c->activation != p[i].owner)
            return mj_fail(MJ_ERR_INVALID_ARG,
                           "%s%s: %g is a parameter of %s only (activation is %s; leave it 0)%s",
                           where, p[i].name, (double)p[i].value, mj_moe_activation_name(p[i].owner),
                           act ? act : "?",
                           c->activation == MJ_ACTIVATION_SWIGLUOAI && p[i].owner == MJ_ACT_SWIGLU
                               ? "; swigluoai is swiglu at alpha 1.702 and beta 1, other values "
                                 "take activation swiglu"
                               : "");
        if (p[i].positive && p[i].value < 0)
            return mj_fail(MJ_ERR_INVALID_ARG, "%s%s: %g must be > 0 (0 = standard)", where,
                           p[i].name, (double)p[i].value);
    }
    return MJ_OK;
}

mj_status mj_moe_shared_check(const mj_moe_config *c, const mj_moe_format_row *r,
                              const char *where) {
    const int fmt = (int)c->shared_format;
    const char *name = mj_format_name(c->shared_format);
    if (c->shared_intermediate == 0) {
        if (fmt != 0)
            return mj_fail(MJ_ERR_INVALID_ARG,
                           "%sshared_format %s: there is no shared expert (shared_intermediate is "
                           "0; leave shared_format unset)",
                           where, name ? name : "?");
        return MJ_OK;
    }
    if (!mj_moe_shared_fusable(r, fmt)) {
        char fusable[64] = "";
        for (int f = 0; f < MJ_FMT_COUNT; f++)
            if (mj_moe_shared_fusable(r, f)) {
                size_t len = strlen(fusable);
                snprintf(fusable + len, sizeof fusable - len, "%s%s", len ? " or " : "",
                         mj_format_name((mj_format)f));
            }
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "%sshared_format %s: a shared expert fuses into the %s row in %s only",
                       where, name ? name : "(unknown)", r->name, fusable);
    }
    /* Its stages share the routed experts' ring slots, at the layer's stage
     * K (which the shape rules checked before this guarantee; a config
     * without experts or ranks has none, and passing it would hide that). */
    const int stage_k = mj_moe_config_stage_k(c, r);
    if (stage_k == 0)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "%sshared_intermediate %d: the layer has no stage K (hidden %d, "
                       "intermediate %d, %d experts over %d ranks)",
                       where, c->shared_intermediate, c->hidden, c->intermediate, c->num_experts,
                       c->num_ranks);
    if (mj_moe_shared_geometry_of(r->weight_fmt, fmt, stage_k).task_blocks == 0)
        return mj_fail(MJ_ERR_UNSUPPORTED,
                       "%sshared_format %s: no stage of the shared expert fits the ring slot of a "
                       "routed %s task at this layer's stage K of %d (hidden %d, intermediate %d); "
                       "a stage K of 128 (both multiples of 128) fits it",
                       where, name, r->name, stage_k, c->hidden, c->intermediate);
    return MJ_OK;
}

mj_moe_problem mj_moe_problem_of(const mj_moe_config *c, int num_sms) {
    return (mj_moe_problem){0,
                            c->num_ranks,
                            c->num_experts,
                            c->num_topk,
                            c->hidden,
                            c->intermediate,
                            num_sms,
                            c->shared_intermediate > 0,
                            c->expert_biases != 0};
}

int mj_moe_config_stage_k(const mj_moe_config *c, const mj_moe_format_row *row) {
    const mj_moe_problem p = mj_moe_problem_of(c, 1);
    return mj_moe_stage_k(&p, row);
}

mj_status mj_moe_config_check(const mj_moe_config *c, const mj_moe_format_row **row) {
    if (!c) return mj_fail(MJ_ERR_INVALID_ARG, "MegaMoE config is NULL");
    /* The shape rules of the symmetric buffer the layer runs in, intermediate
     * required. */
    mj_symm_config buffer = mj_symm_config_of_moe(c);
    mj_status st = mj_symm_shape_check(&buffer, 1);
    if (st != MJ_OK) return st;
    if (c->rank < 0 || c->rank >= c->num_ranks)
        return mj_fail(MJ_ERR_INVALID_ARG, "rank %d outside 0..%d (num_ranks %d)", c->rank,
                       c->num_ranks - 1, c->num_ranks);
    const mj_moe_format_row *r = mj_moe_format_find((int)c->weight_format, (int)c->dispatch_format);
    if (!r) return unsupported_pair(c);
    const char *act = mj_moe_activation_name((int)c->activation);
    if (!act) return mj_fail(MJ_ERR_INVALID_ARG, "unknown activation %d", (int)c->activation);
    if (!mj_moe_activation_allowed(r, (int)c->activation))
        return mj_fail(MJ_ERR_INVALID_ARG, "activation %s is not available with the %s formats",
                       act, r->name);
    if (!isfinite(c->clamp) || c->clamp < 0)
        return mj_fail(MJ_ERR_INVALID_ARG, "clamp %g must be finite and >= 0 (0 = none)",
                       (double)c->clamp);
    if (c->clamp > 0 && !mj_moe_activation_has_clamp((int)c->activation))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "clamp %g: only swiglu and swigluoai take a clamp (activation is %s)",
                       (double)c->clamp, act);
    if ((st = mj_moe_activation_params_check(c, "")) != MJ_OK) return st;
    if (c->expert_biases != 0 && c->expert_biases != 1)
        return mj_fail(MJ_ERR_INVALID_ARG, "expert_biases %d must be 0 or 1", c->expert_biases);
    if (c->unfold_mx_scales != 0 && c->unfold_mx_scales != 1)
        return mj_fail(MJ_ERR_INVALID_ARG, "unfold_mx_scales %d must be 0 or 1",
                       c->unfold_mx_scales);
    if ((st = mj_moe_shared_check(c, r, "")) != MJ_OK) return st;
    if (c->block_m != 0 && !mj_moe_block_m_supported(c->block_m, r))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "block_m %d must be 0 (chosen per token count) or 8, 16, 32, 64, 128 "
                       "or 160 (the %s row takes at most %d)",
                       c->block_m, r->name, mj_moe_max_block_m(r));
    const mj_moe_problem layer = mj_moe_problem_of(c, 1);
    if (c->block_m > mj_moe_problem_max_block_m(&layer, r))
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "block_m %d takes no fused shared expert (shared_intermediate %d) and, "
                       "in the %s row, no expert biases (expert_biases %d): use %d or less",
                       c->block_m, c->shared_intermediate, r->name, c->expert_biases,
                       mj_moe_problem_max_block_m(&layer, r));
    if (mj_moe_config_stage_k(c, r) == 0)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "hidden %d and intermediate %d share no multiple of 64 that divides both "
                       "(the kernel streams K in stages of such a size)",
                       c->hidden, c->intermediate);
    if (row) *row = r;
    return MJ_OK;
}

/* Every version of the two config structs, oldest first. mj_moe_config's
 * second ended with unfold_mx_scales 4 bytes before its size: those callers'
 * padding lies where swiglu_alpha now is, and is not read. */
static const mj_struct_version kSymmConfigVersions[] = {
    MJ_STRUCT_VERSION(mj_symm_config, intermediate),
    MJ_STRUCT_VERSION(mj_symm_config, shared_intermediate),
};
static const mj_struct_version kMoeConfigVersions[] = {
    MJ_STRUCT_VERSION(mj_moe_config, block_m),
    MJ_STRUCT_VERSION(mj_moe_config, unfold_mx_scales),
    MJ_STRUCT_VERSION(mj_moe_config, expert_biases),
    MJ_STRUCT_VERSION(mj_moe_config, shared_format),
};
_Static_assert(MJ_STRUCT_SIZE_TO(mj_moe_config, shared_format) == sizeof(mj_moe_config),
               "kMoeConfigVersions must end with the current version");
_Static_assert(MJ_STRUCT_SIZE_TO(mj_symm_config, shared_intermediate) == sizeof(mj_symm_config),
               "kSymmConfigVersions must end with the current version");

mj_status mj_symm_config_accept(const mj_symm_config *theirs, mj_symm_config *ours) {
    if (!theirs) return mj_fail(MJ_ERR_INVALID_ARG, "symmetric buffer config is NULL");
    *ours = (mj_symm_config)MJ_SYMM_CONFIG_INIT;
    mj_status st = mj_struct_read(theirs, ours, kSymmConfigVersions,
                                  MJ_STRUCT_VERSION_COUNT(kSymmConfigVersions), "mj_symm_config");
    return st != MJ_OK ? st : mj_symm_config_check(ours);
}

mj_status mj_symm_config_give(const mj_symm_config *ours, mj_symm_config *theirs) {
    return mj_struct_write(theirs, ours, kSymmConfigVersions,
                           MJ_STRUCT_VERSION_COUNT(kSymmConfigVersions), "mj_symm_config");
}

mj_status mj_moe_config_accept(const mj_moe_config *theirs, mj_moe_config *ours,
                               const mj_moe_format_row **row) {
    if (!theirs) return mj_fail(MJ_ERR_INVALID_ARG, "MegaMoE config is NULL");
    *ours = (mj_moe_config)MJ_MOE_CONFIG_INIT;
    mj_status st = mj_struct_read(theirs, ours, kMoeConfigVersions,
                                  MJ_STRUCT_VERSION_COUNT(kMoeConfigVersions), "mj_moe_config");
    return st != MJ_OK ? st : mj_moe_config_check(ours, row);
}
