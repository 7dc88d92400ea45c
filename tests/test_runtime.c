/* The runtime on a machine without a GPU: settings, builds, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/megajit.h"
#include "runtime/env.h"
#include "runtime/families/pre_dispatch.h"
#include "runtime/jit.h"
#include "runtime/pch_dir.h"
#include "runtime/runtime.h"
#include "tests/scratch_dir.h"

/* A pre-dispatch-only buffer of the given hidden size and format. */
static mj_symm_config pd_buffer(int hidden, mj_format fmt) {
    return (mj_symm_config){.struct_size = sizeof(mj_symm_config),
                            .hidden = hidden,
                            .num_experts = 256,
                            .num_topk = 8,
                            .max_tokens_per_rank = 128,
                            .dispatch_format = fmt,
                            .num_ranks = 1};
}

static mj_runtime *open_runtime(const char *arch) {
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_dir = scratch_dir;
    o.arch = arch;
    mj_runtime *rt = NULL;
    assert_int_equal(mj_runtime_create(&rt, &o), MJ_OK);
    return rt;
}

static void test_family_settings_are_independent(void **state) {
    (void)state;
    mj_runtime *rt = open_runtime(NULL);
    int v = -1;
    assert_int_equal(mj_family_set_num_sms(rt, MJ_FAMILY_PRE_DISPATCH, 66), MJ_OK);
    assert_int_equal(mj_family_get_num_sms(rt, MJ_FAMILY_PRE_DISPATCH, &v), MJ_OK);
    assert_int_equal(v, 66);
    assert_int_equal(mj_family_get_num_sms(rt, MJ_FAMILY_MEGA_MOE, &v), MJ_OK);
    assert_int_equal(v, 0);
    assert_int_equal(mj_family_set_num_sms(rt, MJ_FAMILY_MEGA_MOE, 100), MJ_OK);
    assert_int_equal(mj_family_get_num_sms(rt, MJ_FAMILY_PRE_DISPATCH, &v), MJ_OK);
    assert_int_equal(v, 66);

    assert_int_equal(mj_family_set_pdl(rt, MJ_FAMILY_MEGA_MOE, 1), MJ_OK);
    assert_int_equal(mj_family_get_pdl(rt, MJ_FAMILY_PRE_DISPATCH, &v), MJ_OK);
    assert_int_equal(v, 0);
    assert_int_equal(mj_family_get_pdl(rt, MJ_FAMILY_MEGA_MOE, &v), MJ_OK);
    assert_int_equal(v, 1);

    assert_int_equal(mj_family_set_num_sms(rt, MJ_FAMILY_PRE_DISPATCH, -1), MJ_ERR_INVALID_ARG);
    assert_non_null(strstr(mj_last_error(), "pre_dispatch"));
    assert_int_equal(mj_family_set_pdl(rt, (mj_family)7, 1), MJ_ERR_INVALID_ARG);
    assert_int_equal(mj_family_get_num_sms(rt, MJ_FAMILY_PRE_DISPATCH, &v), MJ_OK);
    assert_int_equal(v, 66);
    mj_runtime_destroy(rt);
}

static void test_without_device_launches_refuse(void **state) {
    (void)state;
    mj_runtime *rt = open_runtime(NULL);
    if (mj_runtime_has_device(rt)) {
        mj_runtime_destroy(rt);
        skip(); /* this test is about machines without a driver */
    }
    assert_string_equal(mj_runtime_arch(rt), "sm_90a");
    mj_symm_config cfg = {sizeof cfg, 7168, 256, 8, 128, MJ_FORMAT_MXFP8, 1};
    mj_symm_buffer *buf = NULL;
    assert_int_equal(mj_symm_buffer_create(rt, &cfg, &buf), MJ_ERR_NO_DEVICE);
    assert_null(buf);
    assert_true(strlen(mj_last_error()) > 10);
    mj_info info;
    assert_int_equal(mj_runtime_info(rt, &info), MJ_OK);
    assert_int_equal(info.driver_version, 0);
    assert_non_null(strstr(info.cache_path, scratch_dir));
    mj_runtime_destroy(rt);
}

static void test_bad_arguments(void **state) {
    (void)state;
    mj_runtime *rt = NULL;
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_dir = scratch_dir;
    o.arch = "sm_75";
    assert_int_equal(mj_runtime_create(&rt, &o), MJ_ERR_INVALID_ARG);
    assert_non_null(strstr(mj_last_error(), "sm_75"));
    assert_null(rt);
    assert_int_equal(mj_runtime_create(NULL, NULL), MJ_ERR_INVALID_ARG);
    rt = open_runtime("sm_90a");
    mj_symm_config bad_group = {sizeof bad_group, 7168 + 16, 256, 8, 128, MJ_FORMAT_MXFP4, 1};
    mj_symm_buffer *buf = NULL;
    assert_int_equal(mj_symm_buffer_create(rt, &bad_group, &buf), MJ_ERR_INVALID_ARG);
    assert_non_null(strstr(mj_last_error(), "multiple"));
    mj_symm_config bad_experts = {sizeof bad_experts, 7168, 250, 8, 128, MJ_FORMAT_MXFP8, 8};
    assert_int_equal(mj_symm_buffer_create(rt, &bad_experts, &buf), MJ_ERR_INVALID_ARG);
    assert_int_equal(mj_pre_dispatch(rt, NULL, 0, NULL, NULL, NULL, NULL, 1, NULL),
                     MJ_ERR_INVALID_ARG);
    mj_format f;
    assert_int_equal(mj_format_parse("fp3", &f), MJ_ERR_INVALID_ARG);
    assert_int_equal(mj_format_parse("nvfp4", &f), MJ_OK);
    assert_int_equal(f, MJ_FORMAT_NVFP4);
    mj_runtime_destroy(rt);
}

static void test_build_compiles_once_then_hits(void **state) {
    (void)state;
    mj_runtime *rt = open_runtime("sm_90a");
    mj_kernel_spec spec;
    const mj_symm_config buffer = pd_buffer(4096, MJ_FORMAT_NVFP4);
    assert_int_equal(mj_pre_dispatch_spec(&buffer, MJ_PD_KERNEL_MAIN, MJ_ARCH_SM90A, &spec), MJ_OK);
    mj_build_result r;
    double s;
    assert_int_equal(mj_jit_build(rt, &spec, &r, &s), MJ_OK);
    assert_int_equal(r, MJ_BUILD_COMPILED);
    assert_int_equal(mj_jit_build(rt, &spec, &r, &s), MJ_OK);
    assert_int_equal(r, MJ_BUILD_CACHED);
    mj_runtime_stats st;
    assert_int_equal(mj_runtime_get_stats(rt, &st), MJ_OK);
    assert_int_equal(st.compiles, 1);
    assert_int_equal(st.disk_hits, 1);
    mj_runtime_destroy(rt);

    rt = open_runtime("sm_90a"); /* another runtime: served from disk */
    assert_int_equal(mj_jit_build(rt, &spec, &r, &s), MJ_OK);
    assert_int_equal(r, MJ_BUILD_CACHED);
    mj_runtime_destroy(rt);
}

static void test_compile_error_returns_log(void **state) {
    (void)state;
    char dir[64] = "/tmp/mj-tpl-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/pre_dispatch.cuh", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("namespace mj { this is not C++; }\n", f);
    fclose(f);
    mj_runtime *rt = open_runtime("sm_90a");
    mj_template_set *broken;
    assert_int_equal(mj_template_set_from_dir(dir, &broken), MJ_OK);
    rt->templates = broken; /* what MEGAJIT_TEMPLATE_DIR would do */
    mj_kernel_spec spec;
    const mj_symm_config buffer = pd_buffer(4096, MJ_FORMAT_BF16);
    assert_int_equal(mj_pre_dispatch_spec(&buffer, MJ_PD_KERNEL_MAIN, MJ_ARCH_SM90A, &spec), MJ_OK);
    mj_build_result r;
    double s;
    assert_int_equal(mj_jit_build(rt, &spec, &r, &s), MJ_ERR_COMPILE);
    assert_int_equal(r, MJ_BUILD_FAILED);
    assert_non_null(strstr(mj_last_error(), "error"));
    assert_non_null(strstr(mj_last_error(), "pre_dispatch_kernel"));
    mj_runtime_destroy(rt);
    mj_template_set_free(broken);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

/* With compiling forbidden, a launch's missing kernel is MJ_ERR_NOT_FOUND
 * naming the kernel, the switch and the precompile command; an explicit build
 * still compiles, and the launch path then finds the kernel in the cache. */
static void expect_compile_refused(mj_runtime *rt, int hidden, const char *kernel,
                                   const char *switch_name) {
    mj_kernel_spec spec;
    const mj_symm_config buffer = pd_buffer(hidden, MJ_FORMAT_MXFP8);
    assert_int_equal(mj_pre_dispatch_spec(&buffer, MJ_PD_KERNEL_MAIN, MJ_ARCH_SM90A, &spec), MJ_OK);
    mj_kernel *k = NULL;
    assert_int_equal(mj_jit_get(rt, &spec, NULL, &k), MJ_ERR_NOT_FOUND);
    const char *why = mj_last_error();
    if (!strstr(why, kernel) || !strstr(why, switch_name) || !strstr(why, "megajit precompile"))
        fail_msg("%s", why);
    mj_build_result r;
    double s;
    assert_int_equal(mj_jit_build(rt, &spec, &r, &s), MJ_OK);
    assert_int_equal(r, MJ_BUILD_COMPILED);
    assert_int_equal(mj_jit_get(rt, &spec, NULL, &k), MJ_OK);
}

static void test_compile_disabled_by_option(void **state) {
    (void)state;
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_dir = scratch_dir;
    o.arch = "sm_90a";
    o.allow_compile = 0;
    mj_runtime *rt = NULL;
    assert_int_equal(mj_runtime_create(&rt, &o), MJ_OK);
    expect_compile_refused(rt, 2048, "mj::pre_dispatch_kernel<2048, 1, 8>",
                           "mj_runtime_options.allow_compile = 0");
    mj_runtime_destroy(rt);
}

/* The environment is read once per process: the check runs in a fresh one. */
static int compile_disabled_child(const char *dir) {
    snprintf(scratch_dir, sizeof scratch_dir, "%s", dir);
    mj_runtime *rt = open_runtime("sm_90a");
    expect_compile_refused(rt, 1024, "mj::pre_dispatch_kernel<1024, 1, 8>",
                           "MEGAJIT_JIT_DISABLE=1");
    mj_runtime_destroy(rt);
    return 0;
}

static void test_compile_disabled_by_environment(void **state) {
    (void)state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("MEGAJIT_JIT_DISABLE", "1", 1);
        execl("/proc/self/exe", "test_runtime", "--compile-disabled-child", scratch_dir,
              (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Structs that did not come from their MJ_*_INIT are refused by name. */
static void test_struct_size_is_checked(void **state) {
    (void)state;
    mj_runtime *rt = NULL;
    mj_runtime_options zeroed = {0};
    assert_int_equal(mj_runtime_create(&rt, &zeroed), MJ_ERR_INVALID_ARG);
    assert_non_null(strstr(mj_last_error(), "MJ_RUNTIME_OPTIONS_INIT"));
    mj_runtime_options newer = MJ_RUNTIME_OPTIONS_INIT;
    newer.struct_size += 8;
    assert_int_equal(mj_runtime_create(&rt, &newer), MJ_ERR_UNSUPPORTED);
    assert_non_null(strstr(mj_last_error(), "newer megajit.h"));
    assert_null(rt);

    rt = open_runtime("sm_90a");
    mj_symm_config buffer = {0};
    mj_symm_buffer *buf = NULL;
    assert_int_equal(mj_symm_buffer_create(rt, &buffer, &buf), MJ_ERR_INVALID_ARG);
    assert_non_null(strstr(mj_last_error(), "MJ_SYMM_CONFIG_INIT"));
    mj_moe_config layer = {0};
    mj_weights *w = NULL;
    assert_int_equal(mj_weights_create(rt, &layer, &w), MJ_ERR_INVALID_ARG);
    assert_non_null(strstr(mj_last_error(), "MJ_MOE_CONFIG_INIT"));
    int block_m = 0;
    assert_int_equal(mj_mega_moe_block_m(&layer, 1, &block_m), MJ_ERR_INVALID_ARG);
    assert_non_null(strstr(mj_last_error(), "mj_moe_config.struct_size is 0"));
    mj_runtime_destroy(rt);
}

/* A cache that takes no kernels (here: a database written by a newer megajit,
 * which this one only reads). Serving keeps the compiled kernels in memory and
 * says so once; building for the cache (precompile) fails. */
static void test_store_failure(void **state) {
    (void)state;
    char dir[96], db[128], log[128];
    snprintf(dir, sizeof dir, "%s/newer", scratch_dir);
    snprintf(db, sizeof db, "%s/megajit-cache.db", dir);
    snprintf(log, sizeof log, "%s/stderr.txt", scratch_dir);
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_dir = dir;
    o.arch = "sm_90a";
    mj_runtime *rt = NULL;
    assert_int_equal(mj_runtime_create(&rt, &o), MJ_OK);
    mj_runtime_destroy(rt);
    assert_int_equal(access(dir, F_OK), -1); /* opening created nothing */
    mj_cache *c = NULL;
    assert_int_equal(mj_cache_create(dir, &c), MJ_OK);
    mj_cache_close(c);
    sqlite3 *raw = NULL;
    assert_int_equal(sqlite3_open(db, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, "PRAGMA user_version=99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(mj_cache_create(dir, &c), MJ_ERR_CACHE);
    assert_non_null(strstr(mj_last_error(), "newer megajit"));

    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    assert_int_equal(mj_runtime_create(&rt, &o), MJ_OK);
    mj_kernel_spec spec;
    for (int topk = 1; topk <= 3; topk++) {
        mj_symm_config buffer = pd_buffer(1024, MJ_FORMAT_BF16);
        buffer.num_topk = topk;
        assert_int_equal(mj_pre_dispatch_spec(&buffer, MJ_PD_KERNEL_CHECK, MJ_ARCH_SM90A, &spec),
                         MJ_OK);
        mj_kernel *k = NULL;
        assert_int_equal(mj_jit_get(rt, &spec, NULL, &k), MJ_OK);
        assert_non_null(k);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    FILE *fp = fopen(log, "r");
    assert_non_null(fp);
    char line[1024];
    int warnings = 0;
    while (fgets(line, sizeof line, fp))
        warnings += strstr(line, "could not store") != NULL;
    fclose(fp);
    assert_int_equal(warnings, 1);

    mj_build_result r;
    double s;
    assert_int_equal(mj_jit_build(rt, &spec, &r, &s), MJ_ERR_CACHE);
    assert_int_equal(r, MJ_BUILD_FAILED);
    assert_non_null(strstr(mj_last_error(), "could not store it in the cache"));
    mj_runtime_destroy(rt);
}

/* PCH directories of this build under dir. */
static int pch_dirs(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strncmp(e->d_name, MJ_PCH_DIR_PREFIX, strlen(MJ_PCH_DIR_PREFIX)) == 0;
    closedir(d);
    return n;
}

/* One compile (the cache disabled, so it always compiles); 0 on success. */
static int compile_one(void) {
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_disable = 1;
    o.arch = "sm_90a";
    mj_runtime *rt = NULL;
    mj_kernel_spec spec;
    mj_kernel *k = NULL;
    mj_symm_config buffer = pd_buffer(1024, MJ_FORMAT_BF16);
    buffer.num_topk = 1;
    int ok = mj_runtime_create(&rt, &o) == MJ_OK &&
             mj_pre_dispatch_spec(&buffer, MJ_PD_KERNEL_CHECK, MJ_ARCH_SM90A, &spec) == MJ_OK &&
             mj_jit_get(rt, &spec, NULL, &k) == MJ_OK && mj_pch_dir();
    mj_runtime_destroy(rt);
    return ok ? 0 : 1;
}

enum { EXIT_NORMALLY, DIE, FORK_AND_COMPILE };

/* A forked child compiles in a directory of its own, removed when it exits;
 * the parent's stays the parent's. */
static int fork_and_compile(void) {
    if (compile_one() != 0) return 1;
    char mine[4200];
    snprintf(mine, sizeof mine, "%s", mj_pch_dir());
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) exit(compile_one() == 0 && strcmp(mj_pch_dir(), mine) != 0 ? 0 : 1);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return 1;
    return access(mine, F_OK) == 0 && pch_dirs(getenv("TMPDIR")) == 1 ? 0 : 1;
}

/* Runs one scenario in a child process whose TMPDIR is tmp; its exit status. */
static int in_child(const char *tmp, int how) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("TMPDIR", tmp, 1);
        int rc = how == FORK_AND_COMPILE ? fork_and_compile() : compile_one();
        if (how == DIE) _exit(rc); /* skips what runs at exit, as a kill would */
        exit(rc);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* Nothing is left behind: a process removes its PCH directory when it exits,
 * and one it could not remove is removed by the next process that compiles. */
static void test_pch_dirs_left_nowhere(void **state) {
    (void)state;
    char tmp[96], foreign[128];
    snprintf(tmp, sizeof tmp, "%s/tmp", scratch_dir);
    snprintf(foreign, sizeof foreign, "%s/megajit-pch-abcdef", tmp);
    assert_int_equal(mkdir(tmp, 0700), 0);
    /* An older build's directory (no lock: it may be in use) is never touched. */
    assert_int_equal(mkdir(foreign, 0700), 0);
    assert_int_equal(in_child(tmp, EXIT_NORMALLY), 0);
    assert_int_equal(pch_dirs(tmp), 0);
    assert_int_equal(in_child(tmp, DIE), 0);
    assert_int_equal(pch_dirs(tmp), 1);
    assert_int_equal(in_child(tmp, EXIT_NORMALLY), 0);
    assert_int_equal(pch_dirs(tmp), 0);
    assert_int_equal(in_child(tmp, FORK_AND_COMPILE), 0);
    assert_int_equal(pch_dirs(tmp), 0);
    assert_int_equal(access(foreign, F_OK), 0);
}

static void *set_error_in_thread(void *arg) {
    (void)arg;
    mj_format f;
    mj_format_parse("from-another-thread", &f);
    return NULL;
}

/* MEGAJIT_MOE_TIMEOUT_MS: a plain number of milliseconds up to a day, else unset. */
static void test_moe_timeout_values(void **state) {
    (void)state;
    assert_int_equal(mj_env_timeout_ms(NULL), 0);
    assert_int_equal(mj_env_timeout_ms("3000"), 3000);
    assert_int_equal(mj_env_timeout_ms("86400000"), 86400000);
    assert_int_equal(mj_env_timeout_ms("86400001"), 0);
    assert_int_equal(mj_env_timeout_ms("-1"), 0);
    assert_int_equal(mj_env_timeout_ms(" 5"), 0);
    assert_int_equal(mj_env_timeout_ms("5ms"), 0);
    assert_int_equal(mj_env_timeout_ms("99999999999999999999999"), 0);
}

static void test_last_error_is_per_thread(void **state) {
    (void)state;
    mj_format f;
    assert_int_equal(mj_format_parse("mine", &f), MJ_ERR_INVALID_ARG);
    pthread_t t;
    pthread_create(&t, NULL, set_error_in_thread, NULL);
    pthread_join(t, NULL);
    assert_non_null(strstr(mj_last_error(), "mine"));
    assert_string_equal(mj_status_name(MJ_ERR_CAPTURE), "MJ_ERR_CAPTURE");
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--compile-disabled-child") == 0)
        return compile_disabled_child(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_family_settings_are_independent),
        cmocka_unit_test(test_without_device_launches_refuse),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_build_compiles_once_then_hits),
        cmocka_unit_test(test_compile_error_returns_log),
        cmocka_unit_test(test_store_failure),
        cmocka_unit_test(test_pch_dirs_left_nowhere),
        cmocka_unit_test(test_last_error_is_per_thread),
        cmocka_unit_test(test_moe_timeout_values),
        cmocka_unit_test(test_struct_size_is_checked),
        cmocka_unit_test(test_compile_disabled_by_option),
        cmocka_unit_test(test_compile_disabled_by_environment),
    };
    return cmocka_run_group_tests(tests, scratch_dir_create, scratch_dir_remove);
}
