#include "runtime/limits.h"

#include <stdarg.h>
#include <stdio.h>

#include "include/megajit.h"
#include "templates/layout/moe_layout.h"
#include "templates/layout/pre_dispatch_launch.h"

/* Every format's scale group divides every hidden size the limits allow. */
_Static_assert(MJ_LIMIT_HIDDEN_MULTIPLE % 32 == 0 && MJ_LIMIT_INTERMEDIATE_MULTIPLE % 32 == 0,
               "a size must hold whole MX (32) and NVFP4 (16) scale groups");
/* A pre-dispatch thread quantizes whole 32-element chunks of a token row; a
 * row's last warp may hold fewer chunks than lanes (2880: 90 chunks, 3 warps). */
_Static_assert(MJ_LIMIT_HIDDEN_MULTIPLE % MJ_PD_ELEMS_PER_THREAD == 0,
               "a token row must be whole pre-dispatch thread chunks");
/* The MegaMoE kernel cuts both GEMMs' rows into 64-row blocks and streams K in
 * stages of a multiple of 64 dividing hidden and intermediate: 64 always does,
 * so mj_moe_stage_k never finds none for a shape within the limits. */
_Static_assert(MJ_LIMIT_HIDDEN_MULTIPLE % MJ_MOE_BLOCK_ROWS == 0 &&
                   MJ_LIMIT_INTERMEDIATE_MULTIPLE % MJ_MOE_BLOCK_ROWS == 0 &&
                   MJ_LIMIT_HIDDEN_MULTIPLE % 64 == 0 && MJ_LIMIT_INTERMEDIATE_MULTIPLE % 64 == 0,
               "hidden and intermediate must hold whole 64-row blocks and 64-element K stages");
/* The layout's 64-bit byte counts cannot wrap for fields within the limits:
 * the pool rows at their widest (every (token, slot) pair of every rank plus a
 * partial tile per local expert: mj_moe_pool_rows) in both pools, their
 * metadata and their share of the counter banks, and the combine region, the
 * same for a shared expert's rows (every own token plus a partial tile) and
 * its combine slot, with
 * room to spare for the input region and the alignment. */
_Static_assert(((unsigned long long)MJ_LIMIT_RANKS_MAX * MJ_LIMIT_TOKENS_MAX * MJ_LIMIT_TOPK_MAX +
                (unsigned long long)MJ_LIMIT_EXPERTS_MAX * MJ_MOE_MAX_BLOCK_M) *
                           (2ull * MJ_LIMIT_HIDDEN_MAX + 2ull * MJ_LIMIT_INTERMEDIATE_MAX +
                            4ull * MJ_MOE_META_WORDS + 1ull) +
                       8ull * (2ull * MJ_LIMIT_EXPERTS_MAX + MJ_LIMIT_TOKENS_MAX) +
                       2ull * (MJ_LIMIT_TOPK_MAX + 1ull) * MJ_LIMIT_TOKENS_MAX *
                           MJ_LIMIT_HIDDEN_MAX +
                       ((unsigned long long)MJ_LIMIT_TOKENS_MAX + MJ_MOE_MAX_BLOCK_M) *
                           (2ull * MJ_LIMIT_HIDDEN_MAX + 2ull * MJ_LIMIT_INTERMEDIATE_MAX +
                            4ull * MJ_MOE_META_WORDS + 1ull) <
                   1ull << 62,
               "the limits allow a layout whose size overflows 64 bits");

static const struct {
    const char *api, *manifest;
} kNames[MJ_SHAPE_FIELDS_] = {
    [MJ_SHAPE_HIDDEN] = {"hidden", "hidden"},
    [MJ_SHAPE_INTERMEDIATE] = {"intermediate", "intermediate"},
    [MJ_SHAPE_EXPERTS] = {"num_experts", "experts"},
    [MJ_SHAPE_TOPK] = {"num_topk", "topk"},
    [MJ_SHAPE_RANKS] = {"num_ranks", "ranks"},
    [MJ_SHAPE_MAX_TOKENS] = {"max_tokens_per_rank", "max_tokens_per_rank"},
    [MJ_SHAPE_DISPATCH_FORMAT] = {"dispatch_format", "dispatch_format"},
    [MJ_SHAPE_SHARED_INTERMEDIATE] = {"shared_intermediate", "shared_intermediate"},
};

const char *mj_shape_field_name(mj_shape_field field, mj_shape_naming naming) {
    return naming == MJ_SHAPE_API_NAMES ? kNames[field].api : kNames[field].manifest;
}

static int broken(mj_shape_violation *out, mj_shape_field field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int broken(mj_shape_violation *out, mj_shape_field field, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->rule, sizeof out->rule, fmt, ap);
    va_end(ap);
    out->field = field;
    return 1;
}

int mj_shape_check(const mj_shape *s, mj_shape_naming naming, mj_shape_violation *out) {
    const long long fmt = s->v[MJ_SHAPE_DISPATCH_FORMAT], hidden = s->v[MJ_SHAPE_HIDDEN],
                    inter = s->v[MJ_SHAPE_INTERMEDIATE], experts = s->v[MJ_SHAPE_EXPERTS],
                    topk = s->v[MJ_SHAPE_TOPK], ranks = s->v[MJ_SHAPE_RANKS],
                    tokens = s->v[MJ_SHAPE_MAX_TOKENS], shared = s->v[MJ_SHAPE_SHARED_INTERMEDIATE];
    if (fmt < 0 || fmt >= MJ_FORMAT_COUNT_)
        return broken(out, MJ_SHAPE_DISPATCH_FORMAT, "must be one of bf16, mxfp8, mxfp4, nvfp4");
    if (hidden < MJ_LIMIT_HIDDEN_MULTIPLE || hidden > MJ_LIMIT_HIDDEN_MAX ||
        hidden % MJ_LIMIT_HIDDEN_MULTIPLE)
        return broken(out, MJ_SHAPE_HIDDEN, "must be a multiple of %d in %d..%d",
                      MJ_LIMIT_HIDDEN_MULTIPLE, MJ_LIMIT_HIDDEN_MULTIPLE, MJ_LIMIT_HIDDEN_MAX);
    if (!(inter == 0 && !s->moe) &&
        (inter < MJ_LIMIT_INTERMEDIATE_MULTIPLE || inter > MJ_LIMIT_INTERMEDIATE_MAX ||
         inter % MJ_LIMIT_INTERMEDIATE_MULTIPLE))
        return broken(out, MJ_SHAPE_INTERMEDIATE, "must be %sa multiple of %d in %d..%d",
                      s->moe ? "" : "0 (pre-dispatch only) or ", MJ_LIMIT_INTERMEDIATE_MULTIPLE,
                      MJ_LIMIT_INTERMEDIATE_MULTIPLE, MJ_LIMIT_INTERMEDIATE_MAX);
    if (ranks < 1 || ranks > MJ_LIMIT_RANKS_MAX)
        return broken(out, MJ_SHAPE_RANKS, "must be in 1..%d", MJ_LIMIT_RANKS_MAX);
    if (experts < ranks || experts > MJ_LIMIT_EXPERTS_MAX || experts % ranks)
        return broken(out, MJ_SHAPE_EXPERTS, "must be a multiple of %s (%lld) in %lld..%d",
                      mj_shape_field_name(MJ_SHAPE_RANKS, naming), ranks, ranks,
                      MJ_LIMIT_EXPERTS_MAX);
    if (topk < 1 || topk > MJ_LIMIT_TOPK_MAX || topk > experts)
        return broken(out, MJ_SHAPE_TOPK, "must be in 1..%d and at most %s (%lld)",
                      MJ_LIMIT_TOPK_MAX, mj_shape_field_name(MJ_SHAPE_EXPERTS, naming), experts);
    if (topk > MJ_PD_ROW_THREADS(hidden))
        return broken(out, MJ_SHAPE_TOPK,
                      "must be at most %lld at %s %lld: pre-dispatch gives each top-k slot one "
                      "thread of a token row",
                      (long long)MJ_PD_ROW_THREADS(hidden),
                      mj_shape_field_name(MJ_SHAPE_HIDDEN, naming), hidden);
    if (tokens < 1 || tokens > MJ_LIMIT_TOKENS_MAX)
        return broken(out, MJ_SHAPE_MAX_TOKENS, "must be in 1..%d", MJ_LIMIT_TOKENS_MAX);
    if (shared != 0 &&
        (inter == 0 || shared < inter || shared > MJ_LIMIT_INTERMEDIATE_MAX || shared % inter))
        return broken(out, MJ_SHAPE_SHARED_INTERMEDIATE,
                      "must be 0 (no shared expert) or a multiple of %s (%lld) up to %d",
                      mj_shape_field_name(MJ_SHAPE_INTERMEDIATE, naming), inter,
                      MJ_LIMIT_INTERMEDIATE_MAX);
    /* Every field is now within its limit, so the sizes below cannot wrap. */
    mj_u64 bytes = inter
                       ? mj_layout_moe_rank_bytes((int)hidden, (int)inter, (int)experts, (int)topk,
                                                  (int)ranks, (int)tokens, (int)fmt, (int)shared)
                       : mj_layout_rank_bytes((int)hidden, (int)topk, (int)tokens, (int)fmt);
    if (bytes > MJ_LIMIT_RANK_BYTES_MAX)
        return broken(out, MJ_SHAPE_MAX_TOKENS,
                      "must be smaller: one rank's symmetric buffer would take %.0f GiB, more "
                      "than the %llu GiB a rank may hold",
                      (double)bytes / (1 << 30), MJ_LIMIT_RANK_BYTES_MAX >> 30);
    return 0;
}
