#include "heuristics/moe_formats.h"

#include <string.h>

/* Every row allows every activation: the activation runs on BF16 values in the
 * L1 epilogue, after dequantization, so it is independent of the formats.
 * Every row decodes weights and tokens into BF16 (moe_layout.h says why). */
static const mj_moe_format_row rows[] = {
    {MJ_FMT_BF16, MJ_FMT_BF16, MJ_FMT_BF16, MJ_ACT_ALL, 0, "bf16", MJ_FMT_BIT(MJ_FMT_BF16)},
    {MJ_FMT_MXFP8, MJ_FMT_MXFP8, MJ_FMT_MXFP8, MJ_ACT_ALL, 0, "mxfp8", MJ_FMT_BIT(MJ_FMT_MXFP8)},
    {MJ_FMT_MXFP4, MJ_FMT_MXFP8, MJ_FMT_MXFP8, MJ_ACT_ALL, 0, "mxfp4-a8", MJ_FMT_BIT(MJ_FMT_MXFP8)},
    {MJ_FMT_MXFP4, MJ_FMT_BF16, MJ_FMT_BF16, MJ_ACT_ALL, 0, "mxfp4-a16", MJ_FMT_BIT(MJ_FMT_MXFP8)},
    {MJ_FMT_NVFP4, MJ_FMT_NVFP4, MJ_FMT_NVFP4, MJ_ACT_ALL, 1, "nvfp4",
     MJ_FMT_BIT(MJ_FMT_MXFP8) | MJ_FMT_BIT(MJ_FMT_BF16)},
    {MJ_FMT_NVFP4, MJ_FMT_BF16, MJ_FMT_BF16, MJ_ACT_ALL, 0, "nvfp4-a16",
     MJ_FMT_BIT(MJ_FMT_MXFP8) | MJ_FMT_BIT(MJ_FMT_BF16)},
};

#define NUM_ROWS ((int)(sizeof rows / sizeof rows[0]))

int mj_moe_format_count(void) {
    return NUM_ROWS;
}

const mj_moe_format_row *mj_moe_format_at(int i) {
    return i >= 0 && i < NUM_ROWS ? &rows[i] : NULL;
}

const mj_moe_format_row *mj_moe_format_find(int weight_fmt, int dispatch_fmt) {
    for (int i = 0; i < NUM_ROWS; i++)
        if (rows[i].weight_fmt == weight_fmt && rows[i].dispatch_fmt == dispatch_fmt)
            return &rows[i];
    return NULL;
}

const mj_moe_format_row *mj_moe_format_by_name(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < NUM_ROWS; i++)
        if (strcmp(rows[i].name, name) == 0) return &rows[i];
    return NULL;
}

int mj_moe_activation_allowed(const mj_moe_format_row *row, int act) {
    if (!row || act < 0 || act >= MJ_ACT_COUNT) return 0;
    return (row->activation_mask & MJ_ACT_BIT(act)) != 0;
}

int mj_moe_activation_has_clamp(int act) {
    return act == MJ_ACT_SWIGLU || act == MJ_ACT_SWIGLUOAI;
}

const char *mj_moe_activation_name(int act) {
    static const char *const names[MJ_ACT_COUNT] = {"swiglu", "swigluoai", "situ"};
    return act >= 0 && act < MJ_ACT_COUNT ? names[act] : NULL;
}

int mj_moe_activation_by_name(const char *name) {
    for (int act = 0; name && act < MJ_ACT_COUNT; act++)
        if (strcmp(name, mj_moe_activation_name(act)) == 0) return act;
    return -1;
}

int mj_moe_shared_fusable(const mj_moe_format_row *row, int shared_fmt) {
    return row && shared_fmt >= 0 && shared_fmt < MJ_FMT_COUNT &&
           (row->shared_formats & MJ_FMT_BIT(shared_fmt)) != 0;
}

int mj_moe_shared_format_of(const mj_moe_format_row *row) {
    if (row && mj_moe_shared_fusable(row, row->weight_fmt)) return row->weight_fmt;
    return row && mj_moe_shared_fusable(row, MJ_FMT_MXFP8) ? MJ_FMT_MXFP8 : -1;
}
