/* megajit bench: pre-dispatch bandwidth next to a device copy; `mega-moe`
 * goes to tools/megajit/bench_mega_moe.c. */
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"
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
