/* The command line of `megajit bench mega-moe`, parsed and checked without a
 * device (tests/test_bench_moe_args.c runs every message). */
#ifndef MEGAJIT_BENCH_MOE_ARGS_H
#define MEGAJIT_BENCH_MOE_ARGS_H

#include <stddef.h>

#include "tools/bench/moe_check.h"
#include "tools/bench/moe_routing.h"
#include "tools/bench/moe_shapes.h"

enum { MJ_MOE_ARGS_MAX_TOKEN_COUNTS = 16, MJ_MOE_ARGS_MAX_SHAPES = 8, MJ_MOE_ARGS_MAX_ROWS = 8 };

typedef struct mj_moe_bench_args {
    mj_bench_moe_shape shapes[MJ_MOE_ARGS_MAX_SHAPES]; /* --shape, with the overrides applied */
    int num_shapes;
    int rows[MJ_MOE_ARGS_MAX_ROWS]; /* indices into the MegaMoE format table (--format) */
    int num_rows;
    int tokens[MJ_MOE_ARGS_MAX_TOKEN_COUNTS]; /* tokens per rank, in the order given */
    int num_tokens;
    mj_bench_routing routing;
    int max_tokens; /* the buffer's max_tokens_per_rank: --max-tokens, else the largest T */
    int iters;      /* timed steps per pass; 0 = as many as fit the time budget */
    int ranks;      /* --ranks; 0 = not given (the launcher's world, else 1) */
    int json;
    int phases; /* --phases: one traced launch per point */
    /* --activation, --clamp, --biases, --shared */
    mj_bench_moe_variant variant;
    const char *dump_dir; /* --dump-routing; NULL = none */
    const char *cache_dir;
} mj_moe_bench_args;

enum { MJ_MOE_ARGS_OK = 0, MJ_MOE_ARGS_HELP = 1, MJ_MOE_ARGS_BAD = 2 };

/* argv[0] is the subcommand's name. MJ_MOE_ARGS_BAD: err says what is wrong
 * (one sentence, no usage). */
int mj_moe_bench_parse(int argc, char **argv, mj_moe_bench_args *a, char *err, size_t cap);

#endif
