#include "tools/bench/moe_shapes.h"

#include <stdio.h>
#include <string.h>

#include "heuristics/moe_formats.h"
#include "include/megajit.h"
#include "runtime/configs.h"
#include "runtime/limits.h"

/* hidden, intermediate (per expert), experts, top-k of the published models. */
static const mj_bench_moe_shape kShapes[] = {
    {"deepseek-v3", 7168, 2048, 256, 8},
    {"kimi-k2", 7168, 2048, 384, 8},
    {"qwen3-235b", 4096, 1536, 128, 8},
    {"gpt-oss-120b", 2880, 2880, 128, 4},
};
enum { NUM_SHAPES = (int)(sizeof kShapes / sizeof kShapes[0]) };

int mj_bench_moe_shape_count(void) {
    return NUM_SHAPES;
}

const mj_bench_moe_shape *mj_bench_moe_shape_at(int i) {
    return i >= 0 && i < NUM_SHAPES ? &kShapes[i] : NULL;
}

const mj_bench_moe_shape *mj_bench_moe_shape_by_name(const char *name) {
    for (int i = 0; name && i < NUM_SHAPES; i++)
        if (strcmp(kShapes[i].name, name) == 0) return &kShapes[i];
    return NULL;
}

const char *mj_bench_moe_shape_names(void) {
    static char names[256]; /* the table's names, joined once */
    if (!names[0])
        for (int i = 0, n = 0; i < NUM_SHAPES && n < (int)sizeof names; i++)
            n += snprintf(names + n, sizeof names - (size_t)n, "%s%s", i ? ", " : "",
                          kShapes[i].name);
    return names;
}

int mj_bench_moe_unrunnable(const mj_bench_moe_shape *s, int dispatch_fmt, int ranks,
                            int max_tokens, int shared_intermediate, char *why, size_t cap) {
    mj_shape shape = {.moe = 1};
    shape.v[MJ_SHAPE_HIDDEN] = s->hidden;
    shape.v[MJ_SHAPE_INTERMEDIATE] = s->intermediate;
    shape.v[MJ_SHAPE_EXPERTS] = s->experts;
    shape.v[MJ_SHAPE_TOPK] = s->topk;
    shape.v[MJ_SHAPE_RANKS] = ranks;
    shape.v[MJ_SHAPE_MAX_TOKENS] = max_tokens;
    shape.v[MJ_SHAPE_DISPATCH_FORMAT] = dispatch_fmt;
    shape.v[MJ_SHAPE_SHARED_INTERMEDIATE] = shared_intermediate;
    mj_shape_violation v;
    if (!mj_shape_check(&shape, MJ_SHAPE_MANIFEST_NAMES, &v)) {
        if (cap) why[0] = '\0';
        return 0;
    }
    snprintf(why, cap, "%s %s (got %lld)", mj_shape_field_name(v.field, MJ_SHAPE_MANIFEST_NAMES),
             v.rule, shape.v[v.field]);
    return 1;
}

int mj_bench_moe_shared_unrunnable(const mj_bench_moe_shape *s, const mj_moe_format_row *row,
                                   int shared, int fmt, char *why, size_t cap) {
    if (cap) why[0] = '\0';
    if (!shared) return 0;
    /* Only the fields the library's shared-expert check reads (the stage K
     * depends on the experts' routing tables: one rank holds them all). */
    mj_moe_config c = MJ_MOE_CONFIG_INIT;
    c.weight_format = (mj_format)row->weight_fmt;
    c.dispatch_format = (mj_format)row->dispatch_fmt;
    c.hidden = s->hidden;
    c.intermediate = s->intermediate;
    c.num_experts = s->experts;
    c.num_ranks = 1;
    c.num_topk = s->topk;
    c.shared_intermediate = shared * s->intermediate;
    if (fmt < 0) fmt = mj_moe_shared_format_of(row);
    if (fmt < 0) {
        snprintf(why, cap, "no shared expert fuses into the %s row", row->name);
        return 1;
    }
    c.shared_format = (mj_format)fmt;
    if (mj_moe_shared_check(&c, row, "") == MJ_OK) return 0;
    snprintf(why, cap, "--shared: %s", mj_last_error());
    return 1;
}
