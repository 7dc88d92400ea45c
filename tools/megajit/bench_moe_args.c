#include "tools/megajit/bench_moe_args.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heuristics/moe_formats.h"
#include "runtime/limits.h"
#include "templates/layout/symm_layout.h"
#include "tools/megajit/cli.h"

enum {
    OPT_SHAPE = 's',
    OPT_HIDDEN = 'H',
    OPT_INTER = 'I',
    OPT_EXPERTS = 'E',
    OPT_TOPK = 'K',
    OPT_FORMAT = 'f',
    OPT_TOKENS = 't',
    OPT_ROUTING = 'R',
    OPT_MAX_TOKENS = 'M',
    OPT_ITERS = 'i',
    OPT_RANKS = 'r',
    OPT_JSON = 'J',
    OPT_DUMP = 'D',
    OPT_PHASES = 'P',
    OPT_ACTIVATION = 'a',
    OPT_CLAMP = 'C',
    OPT_BIASES = 'b',
    OPT_SHARED = 'S',
    OPT_SHARED_FORMAT = 'F',
    OPT_CACHE = 'c',
    OPT_HELP = 'h',
};

static const struct option kOptions[] = {
    {"shape", required_argument, NULL, OPT_SHAPE},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"intermediate", required_argument, NULL, OPT_INTER},
    {"experts", required_argument, NULL, OPT_EXPERTS},
    {"topk", required_argument, NULL, OPT_TOPK},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"tokens", required_argument, NULL, OPT_TOKENS},
    {"routing", required_argument, NULL, OPT_ROUTING},
    {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"ranks", required_argument, NULL, OPT_RANKS},
    {"json", no_argument, NULL, OPT_JSON},
    {"dump-routing", required_argument, NULL, OPT_DUMP},
    {"phases", no_argument, NULL, OPT_PHASES},
    {"activation", required_argument, NULL, OPT_ACTIVATION},
    {"clamp", required_argument, NULL, OPT_CLAMP},
    {"biases", no_argument, NULL, OPT_BIASES},
    {"shared", required_argument, NULL, OPT_SHARED},
    {"shared-format", required_argument, NULL, OPT_SHARED_FORMAT},
    {"cache", required_argument, NULL, OPT_CACHE},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

#define ITERS_MAX 100000
/* --shared N: I_s = N x I must stay within the library's intermediate limit
 * for some I (a multiple of 64); the shape's own check says which fit. */
#define SHARED_MAX (MJ_LIMIT_INTERMEDIATE_MAX / 64)
#define INT_ARG_MAX (1L << 30)

static int bad(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return MJ_MOE_ARGS_BAD;
}

/* "1,8,64": every field a count (an empty one is an error, unlike strtok's). */
static int parse_tokens(const char *s, mj_moe_bench_args *a) {
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) return -1;
    a->num_tokens = 0;
    for (char *field = buf;;) {
        char *comma = strchr(field, ',');
        if (comma) *comma = '\0';
        long v;
        if (a->num_tokens == MJ_MOE_ARGS_MAX_TOKEN_COUNTS ||
            cli_parse_long(field, 1, MJ_LIMIT_TOKENS_MAX, &v))
            return -1;
        a->tokens[a->num_tokens++] = (int)v;
        if (!comma) return 0;
        field = comma + 1;
    }
}

static const char *row_names(void) {
    static char names[128];
    size_t len = 0;
    for (int i = 0; i < mj_moe_format_count() && len < sizeof names; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                                mj_moe_format_at(i)->name);
    return names;
}

int mj_moe_bench_parse(int argc, char **argv, mj_moe_bench_args *a, char *err, size_t cap) {
    static const int kDefaultTokens[] = {1, 8, 64, 256, 1024, 4096};
    memset(a, 0, sizeof *a);
    a->shapes[0] = *mj_bench_moe_shape_at(0);
    a->num_shapes = 1;
    a->num_rows = mj_moe_format_count();
    for (int i = 0; i < a->num_rows; i++)
        a->rows[i] = i;
    a->num_tokens = (int)(sizeof kDefaultTokens / sizeof kDefaultTokens[0]);
    memcpy(a->tokens, kDefaultTokens, sizeof kDefaultTokens);
    a->routing = MJ_BENCH_ROUTING_UNIFORM;

    /* Overrides apply after --shape, whatever the order they came in. */
    long dims[4] = {0, 0, 0, 0}; /* hidden, intermediate, experts, topk; 0 = not given */
    const char *dim_flag[4] = {"hidden", "intermediate", "experts", "topk"};
    const char *override = NULL;
    int all_shapes = 0;
    long max_tokens = 0;
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", kOptions, NULL)) != -1) {
        long v;
        switch (c) {
        case OPT_SHAPE:
            all_shapes = strcmp(optarg, "all") == 0;
            if (all_shapes) {
                a->num_shapes = mj_bench_moe_shape_count();
                for (int i = 0; i < a->num_shapes; i++)
                    a->shapes[i] = *mj_bench_moe_shape_at(i);
            } else if (mj_bench_moe_shape_by_name(optarg)) {
                a->shapes[0] = *mj_bench_moe_shape_by_name(optarg);
                a->num_shapes = 1;
            } else {
                return bad(err, cap, "--shape: unknown shape '%s' (%s, or all)", optarg,
                           mj_bench_moe_shape_names());
            }
            break;
        case OPT_HIDDEN:
        case OPT_INTER:
        case OPT_EXPERTS:
        case OPT_TOPK: {
            const int d = c == OPT_HIDDEN ? 0 : c == OPT_INTER ? 1 : c == OPT_EXPERTS ? 2 : 3;
            if (cli_parse_long(optarg, 1, INT_ARG_MAX, &dims[d]))
                return bad(err, cap, "--%s: expected a positive integer, got '%s'", dim_flag[d],
                           optarg);
            override = dim_flag[d];
            break;
        }
        case OPT_FORMAT: {
            const mj_moe_format_row *row = mj_moe_format_by_name(optarg);
            if (!row)
                return bad(err, cap, "--format: unknown format row '%s' (%s)", optarg, row_names());
            for (int i = 0; i < mj_moe_format_count(); i++)
                if (mj_moe_format_at(i) == row) a->rows[0] = i;
            a->num_rows = 1;
            break;
        }
        case OPT_TOKENS:
            if (parse_tokens(optarg, a))
                return bad(err, cap,
                           "--tokens: expected up to %d positive integers separated by commas "
                           "(each at most %d), got '%s'",
                           MJ_MOE_ARGS_MAX_TOKEN_COUNTS, MJ_LIMIT_TOKENS_MAX, optarg);
            break;
        case OPT_ROUTING:
            if (mj_bench_routing_parse(optarg, &a->routing))
                return bad(err, cap, "--routing: expected uniform or skewed, got '%s'", optarg);
            break;
        case OPT_MAX_TOKENS:
            if (cli_parse_long(optarg, 1, MJ_LIMIT_TOKENS_MAX, &max_tokens))
                return bad(err, cap, "--max-tokens: expected 1..%d, got '%s'", MJ_LIMIT_TOKENS_MAX,
                           optarg);
            break;
        case OPT_ITERS:
            if (cli_parse_long(optarg, 1, ITERS_MAX, &v))
                return bad(err, cap, "--iters: expected 1..%d, got '%s'", ITERS_MAX, optarg);
            a->iters = (int)v;
            break;
        case OPT_RANKS:
            if (cli_parse_long(optarg, 1, MJ_MAX_RANKS, &v))
                return bad(err, cap, "--ranks: expected 1..%d, got '%s'", MJ_MAX_RANKS, optarg);
            a->ranks = (int)v;
            break;
        case OPT_JSON:
            a->json = 1;
            break;
        case OPT_DUMP:
            a->dump_dir = optarg;
            break;
        case OPT_PHASES:
            a->phases = 1;
            break;
        case OPT_ACTIVATION: {
            const int act = mj_moe_activation_by_name(optarg);
            if (act < 0)
                return bad(err, cap, "--activation: expected swiglu, swigluoai or situ, got '%s'",
                           optarg);
            a->variant.activation = act;
            break;
        }
        case OPT_CLAMP: {
            char *end;
            const float c = strtof(optarg, &end);
            if (end == optarg || *end || !(c > 0) || !isfinite(c))
                return bad(err, cap, "--clamp: expected a positive finite number, got '%s'",
                           optarg);
            a->variant.clamp = c;
            break;
        }
        case OPT_BIASES:
            a->variant.biases = 1;
            break;
        case OPT_SHARED:
            if (cli_parse_long(optarg, 0, SHARED_MAX, &v))
                return bad(err, cap,
                           "--shared: expected 0..%d (the shared expert's intermediate size as a "
                           "multiple of the routed one), got '%s'",
                           SHARED_MAX, optarg);
            a->variant.shared = (int)v;
            break;
        case OPT_SHARED_FORMAT: {
            mj_format f;
            if (mj_format_parse(optarg, &f) != MJ_OK)
                return bad(err, cap,
                           "--shared-format: expected bf16, mxfp8, mxfp4 or nvfp4, got '%s'",
                           optarg);
            a->variant.shared_format = (int)f + 1;
            break;
        }
        case OPT_CACHE:
            a->cache_dir = optarg;
            break;
        case OPT_HELP:
            return MJ_MOE_ARGS_HELP;
        default:
            cli_bad_option_message(argv, c, err, cap);
            return MJ_MOE_ARGS_BAD;
        }
    }
    if (optind < argc) return bad(err, cap, "unexpected argument '%s'", argv[optind]);

    if (a->variant.clamp > 0 && !mj_moe_activation_has_clamp(a->variant.activation))
        return bad(err, cap, "--clamp: only swiglu and swigluoai take a clamp (--activation %s)",
                   mj_moe_activation_name(a->variant.activation));
    if (override && all_shapes)
        return bad(err, cap, "--%s changes one shape: name it with --shape (not all)", override);
    if (a->variant.shared_format && !a->variant.shared)
        return bad(err, cap, "--shared-format %s: there is no shared expert (give --shared N)",
                   mj_format_name((mj_format)(a->variant.shared_format - 1)));
    mj_bench_moe_shape *s = &a->shapes[0];
    const int named[4] = {s->hidden, s->intermediate, s->experts, s->topk};
    int *field[4] = {&s->hidden, &s->intermediate, &s->experts, &s->topk};
    for (int d = 0; d < 4; d++)
        if (dims[d] && dims[d] != named[d]) {
            *field[d] = (int)dims[d];
            s->name = "custom";
        }
    if (s->topk > s->experts)
        return bad(err, cap, "--topk %d is more than the %d experts of %s", s->topk, s->experts,
                   s->name);

    int largest = 0;
    for (int i = 0; i < a->num_tokens; i++)
        largest = a->tokens[i] > largest ? a->tokens[i] : largest;
    if (max_tokens && max_tokens < largest)
        return bad(err, cap,
                   "--max-tokens %ld is below the largest --tokens value (%d): every token count "
                   "runs on one buffer of --max-tokens rows per rank",
                   max_tokens, largest);
    a->max_tokens = max_tokens ? (int)max_tokens : largest;
    for (int i = 0; a->ranks && i < a->num_shapes; i++)
        if (a->shapes[i].experts % a->ranks)
            return bad(err, cap, "--ranks %d does not divide the %d experts of %s", a->ranks,
                       a->shapes[i].experts, a->shapes[i].name);
    return MJ_MOE_ARGS_OK;
}
