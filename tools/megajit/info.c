/* megajit info: what this build and machine would use. */
#include <stdlib.h>
#include <string.h>

#include "tools/megajit/cli.h"

static const char kUsage[] =
    "usage: megajit info [--json] [--cache DIR]\n"
    "\n"
    "Prints the megajit and NVRTC versions, the CUDA driver and device, the cache\n"
    "database path, its filesystem and journal mode (WAL), and read-only snapshot layers.\n";

/* Calls fn for each path of a colon-separated snapshot list (MEGAJIT_CACHE_RO). */
static void for_each_layer(const char *list, void (*fn)(const char *path, int first, void *user),
                           void *user) {
    int first = 1;
    for (const char *s = list; *s;) {
        size_t n = strcspn(s, ":");
        if (n) {
            char *path = strndup(s, n);
            if (path) fn(path, first, user);
            free(path);
            first = 0;
        }
        s += n + (s[n] == ':');
    }
}

static void add_layer(const char *path, int first, void *user) {
    (void)first;
    cJSON_AddItemToArray(user, cJSON_CreateString(path));
}

static void add_row(const char *path, int first, void *user) {
    cli_table_cell(user, "%s", first ? "snapshots" : "");
    cli_table_cell(user, "%s", path);
}

int cmd_info(int argc, char **argv) {
    static const struct option longopts[] = {{"cache", required_argument, NULL, 'c'},
                                             {"json", no_argument, NULL, 'J'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    int json = 0, c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
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
            return cli_bad_option("info", kUsage, argv, c);
        }
    }
    if (optind < argc)
        return cli_usage_error("info", kUsage, "unexpected argument '%s'", argv[optind]);

    mj_runtime *rt;
    if (mj_runtime_create(&rt, &opts) != MJ_OK) return cli_fail("info", "cannot open the runtime");
    mj_info info;
    if (mj_runtime_info(rt, &info) != MJ_OK) {
        int rc = cli_fail("info", "cannot read the runtime information");
        mj_runtime_destroy(rt);
        return rc;
    }
#define STR(s) ((s) ? (s) : "")
    int rc = 0;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "megajit_version", STR(info.megajit_version));
        cJSON_AddStringToObject(j, "nvrtc_version", STR(info.nvrtc_version));
        cJSON_AddNumberToObject(j, "driver_version", info.driver_version);
        cJSON_AddStringToObject(j, "device_name", STR(info.device_name));
        cJSON_AddNumberToObject(j, "device_sms", info.device_sms);
        cJSON_AddStringToObject(j, "arch", STR(info.arch));
        cJSON_AddStringToObject(j, "cache_path", STR(info.cache_path));
        cJSON_AddStringToObject(j, "cache_filesystem", STR(info.cache_filesystem));
        cJSON_AddStringToObject(j, "cache_journal_mode", STR(info.cache_journal_mode));
        cJSON *layers = cJSON_AddArrayToObject(j, "cache_ro_layers");
        for_each_layer(STR(info.cache_ro_layers), add_layer, layers);
        cJSON_AddBoolToObject(j, "cache_disabled", info.cache_disabled);
        rc = cli_print_json(j);
    } else {
        cli_table *t =
            cli_table_new("ll", (const char *const[]){"megajit", STR(info.megajit_version)});
        cli_table_cell(t, "nvrtc");
        cli_table_cell(t, "%s", *STR(info.nvrtc_version) ? info.nvrtc_version : "(not found)");
        cli_table_cell(t, "driver");
        if (info.driver_version)
            cli_table_cell(t, "%d.%d", info.driver_version / 1000, info.driver_version % 1000 / 10);
        else
            cli_table_cell(t, "(none)");
        cli_table_cell(t, "device");
        if (*STR(info.device_name))
            cli_table_cell(t, "%s (%d SMs)", info.device_name, info.device_sms);
        else
            cli_table_cell(t, "(none)");
        cli_table_cell(t, "arch");
        cli_table_cell(t, "%s", STR(info.arch));
        cli_table_cell(t, "cache");
        cli_table_cell(t, "%s", info.cache_disabled ? "(disabled)" : STR(info.cache_path));
        cli_table_cell(t, "filesystem");
        cli_table_cell(t, "%s", STR(info.cache_filesystem));
        cli_table_cell(t, "journal mode");
        cli_table_cell(t, "%s",
                       info.cache_disabled || *STR(info.cache_journal_mode)
                           ? STR(info.cache_journal_mode)
                           : "(no database yet)");
        if (*STR(info.cache_ro_layers)) {
            for_each_layer(info.cache_ro_layers, add_row, t);
        } else {
            cli_table_cell(t, "snapshots");
            cli_table_cell(t, "(none)");
        }
        cli_table_print(t, stdout);
        cli_table_free(t);
    }
#undef STR
    mj_runtime_destroy(rt);
    return rc;
}
