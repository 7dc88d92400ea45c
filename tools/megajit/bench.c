/* megajit bench: pre-dispatch bandwidth next to a device copy; MegaMoE time
 * next to the per-rank weight-streaming floor. */
#include <stdlib.h>
#include <string.h>

#include "heuristics/moe_formats.h"
#include "tools/bench/bench.h"
#include "tools/bench/launcher.h"
#include "tools/megajit/cli.h"

static const char kUsage[] =
    "usage: megajit bench pre-dispatch [options]\n"
    "       megajit bench mega-moe [options]   (megajit bench mega-moe --help)\n"
    "\n"
    "Times pre-dispatch (median of --iters launches) next to a device-to-device copy of\n"
    "the same bytes; the target is at least 80% of the copy bandwidth. Also prints the\n"
    "launch floor: a zero-token launch (the fixed cost of one) plus the bytes at copy\n"
    "bandwidth, and the kernel's time as a fraction of it. Needs a GPU.\n"
    "\n"
    "options:\n"
    "  --format F     bf16, mxfp8, mxfp4 or nvfp4 (default: all four)\n"
    "  --hidden H     hidden size (default 7168)\n"
    "  --tokens T     tokens (default 4096)\n"
    "  --topk K       top-k (default 8)\n"
    "  --iters N      timed launches (default 100)\n"
    "  --cache DIR    cache directory\n"
    "  --json         one JSON array of results\n";

static const double kTargetFraction = 0.8;

static int cmd_bench_mega_moe(int argc, char **argv);

int cmd_bench(int argc, char **argv) {
    if (argc < 2) return cli_usage_error("bench", kUsage, "missing benchmark name");
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(kUsage, stdout);
        return 0;
    }
    if (strcmp(argv[1], "mega-moe") == 0) return cmd_bench_mega_moe(argc - 1, argv + 1);
    if (strcmp(argv[1], "pre-dispatch") != 0)
        return cli_usage_error("bench", kUsage, "unknown benchmark '%s'", argv[1]);
    argc--;
    argv++;

    static const struct option longopts[] = {{"format", required_argument, NULL, 'f'},
                                             {"hidden", required_argument, NULL, 'H'},
                                             {"tokens", required_argument, NULL, 't'},
                                             {"topk", required_argument, NULL, 'k'},
                                             {"iters", required_argument, NULL, 'i'},
                                             {"cache", required_argument, NULL, 'c'},
                                             {"json", no_argument, NULL, 'J'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    mj_format formats[MJ_FORMAT_COUNT_] = {MJ_FORMAT_BF16, MJ_FORMAT_MXFP8, MJ_FORMAT_MXFP4,
                                           MJ_FORMAT_NVFP4};
    size_t nformats = MJ_FORMAT_COUNT_;
    long hidden = 7168, tokens = 4096, topk = 8, iters = 100;
    int json = 0, c;
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        long *target = NULL;
        switch (c) {
        case 'f':
            if (mj_format_parse(optarg, &formats[0]) != MJ_OK)
                return cli_usage_error("bench pre-dispatch", kUsage,
                                       "--format: unknown format '%s' (bf16, mxfp8, mxfp4, nvfp4)",
                                       optarg);
            nformats = 1;
            break;
        case 'H':
            target = &hidden;
            break;
        case 't':
            target = &tokens;
            break;
        case 'k':
            target = &topk;
            break;
        case 'i':
            target = &iters;
            break;
        case 'c':
            opts.cache_dir = optarg;
            break;
        case 'J':
            json = 1;
            break;
        case 'h':
            fputs(kUsage, stdout);
            return 0;
        default:
            return cli_bad_option("bench pre-dispatch", kUsage, argv, c);
        }
        if (!target || cli_parse_long(optarg, 1, 1L << 30, target) == 0) continue;
        const char *name = "";
        for (const struct option *lo = longopts; lo->name; lo++)
            if (lo->val == c) name = lo->name;
        return cli_usage_error("bench pre-dispatch", kUsage,
                               "--%s: expected a positive integer, got '%s'", name, optarg);
    }
    if (optind < argc)
        return cli_usage_error("bench pre-dispatch", kUsage, "unexpected argument '%s'",
                               argv[optind]);

    mj_runtime *rt;
    if (mj_runtime_create(&rt, &opts) != MJ_OK)
        return cli_fail("bench pre-dispatch", "cannot open the runtime");
    if (!mj_runtime_has_device(rt)) {
        mj_runtime_destroy(rt);
        fputs("megajit bench pre-dispatch: needs a CUDA device, and none was found\n", stderr);
        return CLI_EXIT_FAIL;
    }
    static const char *const headers[] = {
        "FORMAT",    "HIDDEN",    "TOKENS",        "BYTES",     "KERNEL US", "KERNEL GB/S",
        "COPY GB/S", "% OF COPY", "TARGET >= 80%", "LAUNCH US", "FLOOR US",  "% OF FLOOR"};
    cli_table *t = json ? NULL : cli_table_new("lrrrrrrrlrrr", headers);
    cJSON *results = json ? cJSON_CreateArray() : NULL;
    int rc = 0;
    for (size_t i = 0; i < nformats && !rc; i++) {
        mj_bench_pre_dispatch_result r;
        if (mj_bench_pre_dispatch(rt, formats[i], (int)hidden, (int)tokens, (int)topk, (int)iters,
                                  &r) != MJ_OK) {
            rc = cli_fail("bench pre-dispatch", mj_format_name(formats[i]));
            break;
        }
        int meets = r.fraction_of_copy >= kTargetFraction;
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "format", mj_format_name(formats[i]));
            cJSON_AddNumberToObject(o, "hidden", (double)hidden);
            cJSON_AddNumberToObject(o, "tokens", (double)tokens);
            cJSON_AddNumberToObject(o, "topk", (double)topk);
            cJSON_AddNumberToObject(o, "bytes", r.bytes);
            cJSON_AddNumberToObject(o, "kernel_us", r.kernel_us);
            cJSON_AddNumberToObject(o, "kernel_gbps", r.kernel_gbps);
            cJSON_AddNumberToObject(o, "copy_us", r.copy_us);
            cJSON_AddNumberToObject(o, "copy_gbps", r.copy_gbps);
            cJSON_AddNumberToObject(o, "fraction_of_copy", r.fraction_of_copy);
            cJSON_AddBoolToObject(o, "meets_target", meets);
            cJSON_AddNumberToObject(o, "launch_us", r.launch_us);
            cJSON_AddNumberToObject(o, "floor_us", r.floor_us);
            cJSON_AddNumberToObject(o, "fraction_of_floor", r.fraction_of_floor);
            cJSON_AddItemToArray(results, o);
        } else {
            char bytes[32];
            cli_table_cell(t, "%s", mj_format_name(formats[i]));
            cli_table_cell(t, "%ld", hidden);
            cli_table_cell(t, "%ld", tokens);
            cli_table_cell(t, "%s", cli_format_bytes(r.bytes, bytes, sizeof bytes));
            cli_table_cell(t, "%.1f", r.kernel_us);
            cli_table_cell(t, "%.0f", r.kernel_gbps);
            cli_table_cell(t, "%.0f", r.copy_gbps);
            cli_table_cell(t, "%.1f%%", 100 * r.fraction_of_copy);
            cli_table_cell(t, "%s", meets ? "ok" : "MISSED");
            cli_table_cell(t, "%.1f", r.launch_us);
            cli_table_cell(t, "%.1f", r.floor_us);
            cli_table_cell(t, "%.1f%%", 100 * r.fraction_of_floor);
        }
    }
    if (!rc && json) {
        rc = cli_print_json(results);
        results = NULL;
    } else if (!rc) {
        cli_table_print(t, stdout);
    }
    cJSON_Delete(results);
    cli_table_free(t);
    mj_runtime_destroy(rt);
    return rc;
}

static const char kMoeUsage[] =
    "usage: megajit bench mega-moe [options]\n"
    "\n"
    "Times one MegaMoE layer (swiglu, random weights, uniform top-k routing; median of\n"
    "--iters steps) at the DeepSeek-V3 shape H=7168, I=2048, E=256, K=8 against the\n"
    "per-rank floor: the local expert weights the routing touches, streamed at the\n"
    "device copy bandwidth measured in the same run. Needs a GPU.\n"
    "\n"
    "With --ranks N > 1 the ranks are emulated on this GPU (SMs divided among them,\n"
    "every expert's weights on the device: 22.5 GB for bf16). Under\n"
    "build/tests/gpu/launch_ranks --gpus N (MEGAJIT_WORLD, MEGAJIT_NCCL_ID) each\n"
    "process is one rank on its own GPU over NCCL, and rank 0 prints the table.\n"
    "\n"
    "options:\n"
    "  --format ROW   bf16, mxfp8, mxfp4-a8, mxfp4-a16, nvfp4 or nvfp4-a16 (default: all)\n"
    "  --tokens LIST  tokens per rank, comma-separated (default 8,64,256)\n"
    "  --ranks N      expert-parallel ranks (default 1, or the launcher's world)\n"
    "  --iters N      timed steps (default 100)\n"
    "  --cache DIR    cache directory\n"
    "  --json         one JSON array of results\n";

static const char kAnchor[] = "published H200 EP8 FP8 MegaMoE: 65-85% of floor";

enum { MAX_TOKEN_COUNTS = 16 };

static int parse_tokens(const char *s, long *out, int *n) {
    *n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_TOKEN_COUNTS || cli_parse_long(tok, 1, 1L << 20, &out[*n]) != 0) return -1;
        (*n)++;
    }
    return *n ? 0 : -1;
}

static int cmd_bench_mega_moe(int argc, char **argv) {
    static const char cmd[] = "bench mega-moe";
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'}, {"tokens", required_argument, NULL, 't'},
        {"ranks", required_argument, NULL, 'r'},  {"iters", required_argument, NULL, 'i'},
        {"cache", required_argument, NULL, 'c'},  {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const mj_moe_format_row *only = NULL;
    long tokens[MAX_TOKEN_COUNTS] = {8, 64, 256}, ranks = 0, iters = 100;
    int ntokens = 3, json = 0, c;
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!(only = mj_moe_format_by_name(optarg)))
                return cli_usage_error(cmd, kMoeUsage, "--format: unknown format row '%s'", optarg);
            break;
        case 't':
            if (parse_tokens(optarg, tokens, &ntokens) != 0)
                return cli_usage_error(cmd, kMoeUsage,
                                       "--tokens: expected up to %d positive integers separated "
                                       "by commas, got '%s'",
                                       MAX_TOKEN_COUNTS, optarg);
            break;
        case 'r':
        case 'i':
            if (cli_parse_long(optarg, 1, c == 'r' ? 72 : 100000, c == 'r' ? &ranks : &iters))
                return cli_usage_error(cmd, kMoeUsage,
                                       "--%s: expected a positive integer, got '%s'",
                                       c == 'r' ? "ranks" : "iters", optarg);
            break;
        case 'c':
            opts.cache_dir = optarg;
            break;
        case 'J':
            json = 1;
            break;
        case 'h':
            fputs(kMoeUsage, stdout);
            return 0;
        default:
            return cli_bad_option(cmd, kMoeUsage, argv, c);
        }
    }
    if (optind < argc)
        return cli_usage_error(cmd, kMoeUsage, "unexpected argument '%s'", argv[optind]);

    int rank = 0, world = 1;
    void *comm = NULL;
    if (mj_launcher_env(&rank, &world)) {
        if (ranks && ranks != world)
            return cli_usage_error(cmd, kMoeUsage, "--ranks %ld but the launcher started %d", ranks,
                                   world);
        ranks = world;
        /* The device context must be current before the runtime attaches to one. */
        if (mj_launcher_join(rank, world, &comm) != MJ_OK)
            return cli_fail(cmd, "joining the ranks");
    }
    if (!ranks) ranks = 1;
    mj_runtime *rt;
    if (mj_runtime_create(&rt, &opts) != MJ_OK) {
        mj_launcher_leave(comm);
        return cli_fail(cmd, "cannot open the runtime");
    }
    if (!mj_runtime_has_device(rt)) {
        mj_runtime_destroy(rt);
        mj_launcher_leave(comm);
        fputs("megajit bench mega-moe: needs a CUDA device, and none was found\n", stderr);
        return CLI_EXIT_FAIL;
    }
    static const char *const headers[] = {"ROW", "TOKENS/RANK", "RANKS",      "MODE",     "BLOCK_M",
                                          "US",  "FLOOR US",    "% OF FLOOR", "COPY GB/S"};
    const int print = rank == 0;
    cli_table *t = json || !print ? NULL : cli_table_new("lrrlrrrrr", headers);
    cJSON *results = json && print ? cJSON_CreateArray() : NULL;
    int rc = 0;
    for (int ri = 0; ri < mj_moe_format_count() && !rc; ri++) {
        const mj_moe_format_row *row = mj_moe_format_at(ri);
        if (only && row != only) continue;
        for (int ti = 0; ti < ntokens && !rc; ti++) {
            mj_bench_mega_moe_options o = {.weight_format = (mj_format)row->weight_fmt,
                                           .dispatch_format = (mj_format)row->dispatch_fmt,
                                           .hidden = 7168,
                                           .intermediate = 2048,
                                           .num_experts = 256,
                                           .num_topk = 8,
                                           .num_tokens = (int)tokens[ti],
                                           .iters = (int)iters,
                                           .num_ranks = (int)ranks,
                                           .nccl_comm = comm};
            mj_bench_mega_moe_result r;
            if (mj_bench_mega_moe(rt, &o, &r) != MJ_OK) {
                char what[96];
                snprintf(what, sizeof what, "rank %d: %s, %ld tokens per rank", rank, row->name,
                         tokens[ti]);
                rc = cli_fail(cmd, what);
                break;
            }
            const char *mode = comm ? "nccl" : ranks > 1 ? "emulated" : "single";
            if (results) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "row", row->name);
                cJSON_AddNumberToObject(j, "tokens_per_rank", (double)tokens[ti]);
                cJSON_AddNumberToObject(j, "ranks", (double)ranks);
                cJSON_AddStringToObject(j, "mode", mode);
                cJSON_AddNumberToObject(j, "block_m", r.block_m);
                cJSON_AddNumberToObject(j, "num_sms", r.num_sms);
                cJSON_AddNumberToObject(j, "us", r.kernel_us);
                cJSON_AddNumberToObject(j, "experts_hit", r.experts_hit);
                cJSON_AddNumberToObject(j, "weight_bytes", r.weight_bytes);
                cJSON_AddNumberToObject(j, "copy_gbps", r.copy_gbps);
                cJSON_AddNumberToObject(j, "rank_floor_us", r.rank_floor_us);
                cJSON_AddNumberToObject(j, "floor_us", r.floor_us);
                cJSON_AddNumberToObject(j, "fraction_of_floor", r.fraction_of_floor);
                cJSON_AddStringToObject(j, "anchor", kAnchor);
                cJSON_AddItemToArray(results, j);
            } else if (t) {
                cli_table_cell(t, "%s", row->name);
                cli_table_cell(t, "%ld", tokens[ti]);
                cli_table_cell(t, "%ld", ranks);
                cli_table_cell(t, "%s", mode);
                cli_table_cell(t, "%d", r.block_m);
                cli_table_cell(t, "%.1f", r.kernel_us);
                cli_table_cell(t, "%.1f", r.floor_us);
                cli_table_cell(t, "%.1f%%", 100 * r.fraction_of_floor);
                cli_table_cell(t, "%.0f", r.copy_gbps);
            }
        }
    }
    if (!rc && results) {
        rc = cli_print_json(results);
        results = NULL;
    } else if (!rc && t) {
        cli_table_print(t, stdout);
        printf("floor = expected distinct local experts hit x 3 H I bits/8 (+ scales) / copy "
               "bandwidth%s\n(%s)\n",
               ranks > 1 && !comm ? ", times the ranks emulated on this device" : "", kAnchor);
    }
    cJSON_Delete(results);
    cli_table_free(t);
    mj_runtime_destroy(rt);
    mj_launcher_leave(comm);
    return rc;
}
