/* megajit: offline precompile, cache maintenance, information and benchmarks. */
#include <string.h>

#include "tools/megajit/cli.h"

static const char kUsage[] =
    "usage: megajit <command> [options]\n"
    "\n"
    "commands:\n"
    "  precompile   compile every kernel a deployment manifest needs into the cache\n"
    "  cache        inspect and maintain the kernel cache\n"
    "               (ls, show, stat, verify, rm, gc, export, import)\n"
    "  info         versions, device, cache path, filesystem and journal mode\n"
    "  bench        benchmarks (pre-dispatch)\n"
    "\n"
    "options:\n"
    "  -h, --help   this text; `megajit <command> --help` describes a command\n"
    "  --version    the megajit version\n"
    "\n"
    "exit status: 0 success, 1 the operation failed, 2 bad command line or manifest\n";

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} kCommands[] = {
    {"precompile", cmd_precompile},
    {"cache", cmd_cache},
    {"info", cmd_info},
    {"bench", cmd_bench},
};

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(kUsage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        if (argc > 2 && strcmp(cmd, "help") == 0) {
            char *help_argv[] = {argv[2], "--help", NULL};
            for (size_t i = 0; i < sizeof kCommands / sizeof kCommands[0]; i++)
                if (strcmp(argv[2], kCommands[i].name) == 0) return kCommands[i].run(2, help_argv);
            fprintf(stderr, "megajit: unknown command '%s'\n\n%s", argv[2], kUsage);
            return CLI_EXIT_USAGE;
        }
        fputs(kUsage, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("megajit %s\n", mj_version_string());
        return 0;
    }
    for (size_t i = 0; i < sizeof kCommands / sizeof kCommands[0]; i++)
        if (strcmp(cmd, kCommands[i].name) == 0) return kCommands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "megajit: unknown command '%s'\n\n%s", cmd, kUsage);
    return CLI_EXIT_USAGE;
}
