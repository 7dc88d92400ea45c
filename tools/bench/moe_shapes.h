/* The MoE layer shapes `megajit bench mega-moe` knows by name, and whether
 * the library can run one (pure: no device). */
#ifndef MJ_TOOLS_BENCH_MOE_SHAPES_H
#define MJ_TOOLS_BENCH_MOE_SHAPES_H

#include <stddef.h>

#include "heuristics/moe_formats.h"

typedef struct mj_bench_moe_shape {
    const char *name; /* "deepseek-v3"; "custom" once --hidden & co. changed it */
    int hidden;
    int intermediate;
    int experts;
    int topk;
} mj_bench_moe_shape;

/* The named shapes in table order (deepseek-v3 first: the default). */
int mj_bench_moe_shape_count(void);
const mj_bench_moe_shape *mj_bench_moe_shape_at(int i);
/* Exact name match; NULL when unknown. */
const mj_bench_moe_shape *mj_bench_moe_shape_by_name(const char *name);
/* The table's names, comma-separated ("deepseek-v3, kimi-k2, ..."): for messages. */
const char *mj_bench_moe_shape_names(void);

/* 0 when a MegaMoE layer of shape s, its tokens pre-dispatched in
 * dispatch_fmt (MJ_FMT_*), with a fused shared expert of intermediate size
 * shared_intermediate (0: none), runs as `ranks` ranks on a buffer of
 * max_tokens per rank: the library's own limits (runtime/limits.h).
 * Otherwise 1, and why in why, naming the field ("experts must be a multiple
 * of ranks (3) ..."). */
int mj_bench_moe_unrunnable(const mj_bench_moe_shape *s, int dispatch_fmt, int ranks,
                            int max_tokens, int shared_intermediate, char *why, size_t cap);

/* 0 when shared is 0 or the library fuses a shared expert in format fmt
 * (MJ_FMT_*; -1: mj_moe_shared_format_of(row), what --shared runs without
 * --shared-format) into row's layers of shape s; otherwise 1, and in why the
 * library's reason (a format the row does not fuse, or a stage that does not
 * fit at s's stage K). */
int mj_bench_moe_shared_unrunnable(const mj_bench_moe_shape *s, const mj_moe_format_row *row,
                                   int shared, int fmt, char *why, size_t cap);

#endif
