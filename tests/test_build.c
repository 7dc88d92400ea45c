/*
 * The Makefile passes CFLAGS and LDFLAGS to every compile and link line, so
 * that `make CFLAGS=-fsanitize=address` builds and links. Checked on a dry run
 * (`make -n -B`) of every target into a scratch build directory: nothing is
 * compiled. Runs from the repository root, as `make test` runs it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROBE_CFLAGS "-DMJ_PROBE_CFLAGS"
#define PROBE_LDFLAGS "-DMJ_PROBE_LDFLAGS"

/* 1 when the first word of line runs the C or C++ compiler driver. */
static int runs_compiler(const char *line) {
    static const char *const drivers[] = {"cc", "gcc", "g++", "c++", "clang", "clang++"};
    const char *cc = getenv("CC");
    size_t n = strcspn(line, " \t");
    const char *base = line;
    for (const char *p = line; p < line + n; p++)
        if (*p == '/') base = p + 1;
    size_t len = (size_t)(line + n - base);
    if (cc && *cc && strlen(cc) == n && strncmp(line, cc, n) == 0) return 1;
    for (size_t i = 0; i < sizeof drivers / sizeof drivers[0]; i++)
        if (strlen(drivers[i]) == len && strncmp(base, drivers[i], len) == 0) return 1;
    return 0;
}

static void test_flags_reach_every_compile_and_link(void **state) {
    (void)state;
    if (access("Makefile", R_OK) != 0) fail_msg("run from the repository root (no Makefile here)");
    const char *tmp = getenv("TMPDIR");
    char scratch[PATH_MAX];
    snprintf(scratch, sizeof scratch, "%s/megajit-build-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(scratch));
    char cmd[PATH_MAX + 256];
    snprintf(cmd, sizeof cmd,
             "make --no-print-directory -n -B BUILD=%s/build CFLAGS=" PROBE_CFLAGS
             " LDFLAGS=" PROBE_LDFLAGS " all test-cpu test-gpu 2>&1",
             scratch);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[16384];
    int compiles = 0, links = 0;
    while (fgets(line, sizeof line, p)) {
        if (!runs_compiler(line)) continue;
        int link = strstr(line, " -c ") == NULL;
        if (!strstr(line, PROBE_CFLAGS)) fail_msg("CFLAGS missing from:\n%s", line);
        if (link && !strstr(line, PROBE_LDFLAGS)) fail_msg("LDFLAGS missing from:\n%s", line);
        compiles += !link;
        links += link;
    }
    int status = pclose(p);
    rmdir(scratch);
    assert_int_equal(status, 0);
    /* Not vacuous: the library objects, and the tool, the shared library, the
     * CLI and every test program are linked. */
    assert_true(compiles > 20);
    assert_true(links > 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags_reach_every_compile_and_link),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
