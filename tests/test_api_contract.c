/*
 * Every public function of include/megajit.h, each in its own process (so a
 * crash is caught and named): given NULL for its outputs (and, where a valid
 * object needs a GPU, for its objects) it returns a status instead of
 * crashing; a call that returns a status clears the thread's earlier error
 * sentence and leaves "" when it succeeds; a call that returns none (destroy,
 * names, counts) leaves the sentence as it found it. The header is read at
 * run time, so a function added without a case here fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/megajit.h"
#include "tests/scratch_dir.h"

static const char kStale[] = "stale-sentence-from-an-earlier-call";

/* What a case's child process has to work with. */
typedef struct fixture {
    mj_runtime *rt; /* no device on this machine: compile and cache only */
    mj_cache *cache;
    mj_manifest *manifest;
    char snapshot[128];
} fixture;

/* A case returns a status, or NO_STATUS for a function that has none. */
enum { NO_STATUS = -1 };

typedef struct api_case {
    const char *function;
    int (*call)(fixture *f);
    int expected; /* an mj_status, or NO_STATUS */
} api_case;

static mj_symm_config buffer_config(void) {
    mj_symm_config c = MJ_SYMM_CONFIG_INIT;
    c.hidden = 1024;
    c.num_experts = 8;
    c.num_topk = 2;
    c.max_tokens_per_rank = 16;
    c.dispatch_format = MJ_FORMAT_MXFP8;
    c.num_ranks = 1;
    return c;
}

static mj_moe_config layer_config(void) {
    mj_moe_config c = MJ_MOE_CONFIG_INIT;
    c.hidden = 1024;
    c.intermediate = 256;
    c.num_experts = 8;
    c.num_topk = 2;
    c.num_ranks = 1;
    c.max_tokens_per_rank = 16;
    c.weight_format = MJ_FORMAT_MXFP8;
    c.dispatch_format = MJ_FORMAT_MXFP8;
    return c;
}

/* ------------------------------------------------------------------ cases */

static int last_error(fixture *f) {
    (void)f;
    return mj_last_error() ? NO_STATUS : 99;
}
static int status_name(fixture *f) {
    (void)f;
    return strcmp(mj_status_name((mj_status)99), "MJ_ERR_UNKNOWN") == 0 ? NO_STATUS : 99;
}
static int version_string(fixture *f) {
    (void)f;
    return strcmp(mj_version_string(), MJ_VERSION_STRING) == 0 ? NO_STATUS : 99;
}
static int runtime_create_null(fixture *f) {
    (void)f;
    return mj_runtime_create(NULL, NULL);
}
static int runtime_create_without_device(fixture *f) {
    (void)f;
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_disable = 1;
    mj_runtime *rt = NULL;
    mj_status st = mj_runtime_create(&rt, &o);
    mj_runtime_destroy(rt);
    return st;
}
static int runtime_destroy(fixture *f) {
    (void)f;
    mj_runtime_destroy(NULL);
    return NO_STATUS;
}
static int runtime_has_device(fixture *f) {
    (void)f;
    return mj_runtime_has_device(NULL) == 0 ? NO_STATUS : 99;
}
static int runtime_arch(fixture *f) {
    (void)f;
    return mj_runtime_arch(NULL) == NULL ? NO_STATUS : 99;
}
static int family_name(fixture *f) {
    (void)f;
    return mj_family_name((mj_family)-1) == NULL ? NO_STATUS : 99;
}
static int family_set_num_sms(fixture *f) {
    (void)f;
    return mj_family_set_num_sms(NULL, MJ_FAMILY_MEGA_MOE, 0);
}
static int family_set_num_sms_ok(fixture *f) {
    return mj_family_set_num_sms(f->rt, MJ_FAMILY_MEGA_MOE, 0);
}
static int family_get_num_sms(fixture *f) {
    return mj_family_get_num_sms(f->rt, MJ_FAMILY_MEGA_MOE, NULL);
}
static int family_set_pdl(fixture *f) {
    (void)f;
    return mj_family_set_pdl(NULL, MJ_FAMILY_MEGA_MOE, 1);
}
static int family_get_pdl(fixture *f) {
    return mj_family_get_pdl(f->rt, MJ_FAMILY_MEGA_MOE, NULL);
}
static int runtime_get_stats(fixture *f) {
    return mj_runtime_get_stats(f->rt, NULL);
}
static int format_name(fixture *f) {
    (void)f;
    return mj_format_name((mj_format)99) == NULL ? NO_STATUS : 99;
}
static int format_parse(fixture *f) {
    (void)f;
    return mj_format_parse("bf16", NULL);
}
static int format_parse_ok(fixture *f) {
    (void)f;
    mj_format fmt;
    return mj_format_parse("nvfp4", &fmt);
}
static int symm_buffer_create(fixture *f) {
    mj_symm_config c = buffer_config();
    return mj_symm_buffer_create(f->rt, &c, NULL);
}
static int symm_buffer_create_nccl(fixture *f) {
    mj_symm_config c = buffer_config();
    return mj_symm_buffer_create_nccl(f->rt, &c, NULL, NULL);
}
static int symm_buffer_destroy(fixture *f) {
    (void)f;
    mj_symm_buffer_destroy(NULL);
    return NO_STATUS;
}
static int symm_buffer_view(fixture *f) {
    (void)f;
    return mj_symm_buffer_view(NULL, 0, MJ_VIEW_X, NULL);
}
static int symm_buffer_info(fixture *f) {
    (void)f;
    return mj_symm_buffer_info(NULL, NULL, NULL, NULL);
}
static int pre_dispatch(fixture *f) {
    return mj_pre_dispatch(f->rt, NULL, 0, NULL, NULL, NULL, NULL, 1, NULL);
}
static int weights_create(fixture *f) {
    mj_moe_config c = layer_config();
    return mj_weights_create(f->rt, &c, NULL);
}
static int weights_destroy(fixture *f) {
    (void)f;
    mj_weights_destroy(NULL);
    return NO_STATUS;
}
static int weights_load(fixture *f) {
    (void)f;
    return mj_weights_load(NULL, 0, MJ_PROJ_GATE, NULL, NULL, 0);
}
static int weights_load_bias(fixture *f) {
    (void)f;
    return mj_weights_load_bias(NULL, 0, MJ_PROJ_GATE, NULL, 0);
}
static int weights_load_shared(fixture *f) {
    (void)f;
    return mj_weights_load_shared(NULL, MJ_PROJ_GATE, NULL, NULL, 0);
}
static int weights_set_alphas(fixture *f) {
    (void)f;
    return mj_weights_set_alphas(NULL, 0, 1, 1, 1, 1);
}
static int mega_moe_block_m(fixture *f) {
    (void)f;
    mj_moe_config c = layer_config();
    return mj_mega_moe_block_m(&c, 1, NULL);
}
static int mega_moe_block_m_ok(fixture *f) {
    (void)f;
    mj_moe_config c = layer_config();
    int block_m;
    return mj_mega_moe_block_m(&c, 1, &block_m);
}
static int mega_moe_warmup(fixture *f) {
    return mj_mega_moe_warmup(f->rt, NULL, NULL, 1);
}
static int mega_moe(fixture *f) {
    return mj_mega_moe(f->rt, NULL, NULL, NULL, 1, NULL, NULL);
}
static int moe_forward(fixture *f) {
    return mj_moe_forward(f->rt, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, NULL, NULL);
}
static int manifest_parse(fixture *f) {
    (void)f;
    return mj_manifest_parse("{}", NULL);
}
static int manifest_preset(fixture *f) {
    (void)f;
    return mj_manifest_preset("deepseek-v3-ep8", NULL);
}
static int manifest_preset_names(fixture *f) {
    (void)f;
    return mj_manifest_preset_names()[0] ? NO_STATUS : 99;
}
static int manifest_set_archs(fixture *f) {
    (void)f;
    return mj_manifest_set_archs(NULL, "sm_90a");
}
static int manifest_set_archs_ok(fixture *f) {
    return mj_manifest_set_archs(f->manifest, "sm_90a");
}
static int manifest_destroy(fixture *f) {
    (void)f;
    mj_manifest_destroy(NULL);
    return NO_STATUS;
}
static int manifest_kernel_count(fixture *f) {
    (void)f;
    return mj_manifest_kernel_count(NULL) == 0 ? NO_STATUS : 99;
}
static int manifest_kernel_describe(fixture *f) {
    (void)f;
    return mj_manifest_kernel_describe(NULL, 0) == NULL ? NO_STATUS : 99;
}
/* Both outputs are optional. Kernel 0 is pre-dispatch's small check kernel. */
static int manifest_build_kernel(fixture *f) {
    return mj_manifest_build_kernel(f->rt, f->manifest, 0, NULL, NULL);
}
static int manifest_build_kernel_null(fixture *f) {
    (void)f;
    return mj_manifest_build_kernel(NULL, NULL, 0, NULL, NULL);
}
static int cache_open(fixture *f) {
    (void)f;
    return mj_cache_open(scratch_dir, 1, NULL);
}
static int cache_create(fixture *f) {
    (void)f;
    return mj_cache_create(scratch_dir, NULL);
}
static int cache_close(fixture *f) {
    (void)f;
    mj_cache_close(NULL);
    return NO_STATUS;
}
static int cache_path(fixture *f) {
    (void)f;
    return strcmp(mj_cache_path(NULL), "") == 0 ? NO_STATUS : 99;
}
static int cache_list(fixture *f) {
    return mj_cache_list(f->cache, NULL, NULL, NULL, NULL);
}
static int cache_show(fixture *f) {
    return mj_cache_show(f->cache, "abcd", NULL);
}
static int cache_stat(fixture *f) {
    return mj_cache_stat(f->cache, NULL);
}
static int cache_verify(fixture *f) {
    return mj_cache_verify(f->cache, NULL, NULL, NULL, NULL);
}
static int cache_remove(fixture *f) {
    return mj_cache_remove(f->cache, MJ_CACHE_SELECT_ALL, NULL, NULL);
}
static int cache_gc(fixture *f) {
    return mj_cache_gc(f->cache, 0, NULL, NULL);
}
static int cache_export(fixture *f) {
    return mj_cache_export(f->cache, NULL);
}
static int cache_import(fixture *f) {
    mj_status st = mj_cache_export(f->cache, f->snapshot);
    return st != MJ_OK ? st : mj_cache_import(f->cache, f->snapshot, NULL);
}
static int runtime_info(fixture *f) {
    return mj_runtime_info(f->rt, NULL);
}

static const api_case kCases[] = {
    {"mj_last_error", last_error, NO_STATUS},
    {"mj_status_name", status_name, NO_STATUS},
    {"mj_version_string", version_string, NO_STATUS},
    {"mj_runtime_create", runtime_create_null, MJ_ERR_INVALID_ARG},
    {"mj_runtime_create", runtime_create_without_device, MJ_OK},
    {"mj_runtime_destroy", runtime_destroy, NO_STATUS},
    {"mj_runtime_has_device", runtime_has_device, NO_STATUS},
    {"mj_runtime_arch", runtime_arch, NO_STATUS},
    {"mj_family_name", family_name, NO_STATUS},
    {"mj_family_set_num_sms", family_set_num_sms, MJ_ERR_INVALID_ARG},
    {"mj_family_set_num_sms", family_set_num_sms_ok, MJ_OK},
    {"mj_family_get_num_sms", family_get_num_sms, MJ_ERR_INVALID_ARG},
    {"mj_family_set_pdl", family_set_pdl, MJ_ERR_INVALID_ARG},
    {"mj_family_get_pdl", family_get_pdl, MJ_ERR_INVALID_ARG},
    {"mj_runtime_get_stats", runtime_get_stats, MJ_ERR_INVALID_ARG},
    {"mj_format_name", format_name, NO_STATUS},
    {"mj_format_parse", format_parse, MJ_ERR_INVALID_ARG},
    {"mj_format_parse", format_parse_ok, MJ_OK},
    {"mj_symm_buffer_create", symm_buffer_create, MJ_ERR_INVALID_ARG},
    {"mj_symm_buffer_create_nccl", symm_buffer_create_nccl, MJ_ERR_INVALID_ARG},
    {"mj_symm_buffer_destroy", symm_buffer_destroy, NO_STATUS},
    {"mj_symm_buffer_view", symm_buffer_view, MJ_ERR_INVALID_ARG},
    {"mj_symm_buffer_info", symm_buffer_info, MJ_ERR_INVALID_ARG},
    {"mj_pre_dispatch", pre_dispatch, MJ_ERR_INVALID_ARG},
    {"mj_weights_create", weights_create, MJ_ERR_INVALID_ARG},
    {"mj_weights_destroy", weights_destroy, NO_STATUS},
    {"mj_weights_load", weights_load, MJ_ERR_INVALID_ARG},
    {"mj_weights_load_bias", weights_load_bias, MJ_ERR_INVALID_ARG},
    {"mj_weights_load_shared", weights_load_shared, MJ_ERR_INVALID_ARG},
    {"mj_weights_set_alphas", weights_set_alphas, MJ_ERR_INVALID_ARG},
    {"mj_mega_moe_block_m", mega_moe_block_m, MJ_ERR_INVALID_ARG},
    {"mj_mega_moe_block_m", mega_moe_block_m_ok, MJ_OK},
    {"mj_mega_moe_warmup", mega_moe_warmup, MJ_ERR_INVALID_ARG},
    {"mj_mega_moe", mega_moe, MJ_ERR_INVALID_ARG},
    {"mj_moe_forward", moe_forward, MJ_ERR_INVALID_ARG},
    {"mj_manifest_parse", manifest_parse, MJ_ERR_INVALID_ARG},
    {"mj_manifest_preset", manifest_preset, MJ_ERR_INVALID_ARG},
    {"mj_manifest_preset_names", manifest_preset_names, NO_STATUS},
    {"mj_manifest_set_archs", manifest_set_archs, MJ_ERR_INVALID_ARG},
    {"mj_manifest_set_archs", manifest_set_archs_ok, MJ_OK},
    {"mj_manifest_destroy", manifest_destroy, NO_STATUS},
    {"mj_manifest_kernel_count", manifest_kernel_count, NO_STATUS},
    {"mj_manifest_kernel_describe", manifest_kernel_describe, NO_STATUS},
    {"mj_manifest_build_kernel", manifest_build_kernel, MJ_OK},
    {"mj_manifest_build_kernel", manifest_build_kernel_null, MJ_ERR_INVALID_ARG},
    {"mj_cache_open", cache_open, MJ_ERR_INVALID_ARG},
    {"mj_cache_create", cache_create, MJ_ERR_INVALID_ARG},
    {"mj_cache_close", cache_close, NO_STATUS},
    {"mj_cache_path", cache_path, NO_STATUS},
    {"mj_cache_list", cache_list, MJ_ERR_INVALID_ARG},
    {"mj_cache_show", cache_show, MJ_ERR_INVALID_ARG},
    {"mj_cache_stat", cache_stat, MJ_ERR_INVALID_ARG},
    {"mj_cache_verify", cache_verify, MJ_OK},
    {"mj_cache_remove", cache_remove, MJ_OK},
    {"mj_cache_gc", cache_gc, MJ_OK},
    {"mj_cache_export", cache_export, MJ_ERR_INVALID_ARG},
    {"mj_cache_import", cache_import, MJ_OK},
    {"mj_runtime_info", runtime_info, MJ_ERR_INVALID_ARG},
};
enum { NUM_CASES = sizeof kCases / sizeof kCases[0] };

/* ----------------------------------------------------------------- driver */

/* Exit statuses of a case's process. */
enum { CASE_PASSED = 0, CASE_SETUP_FAILED = 10, CASE_WRONG_STATUS, CASE_WRONG_SENTENCE };

static _Noreturn void run_case(const api_case *c) {
    fixture f;
    memset(&f, 0, sizeof f);
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_dir = scratch_dir;
    o.arch = "sm_90a";
    snprintf(f.snapshot, sizeof f.snapshot, "%s/snapshot.db", scratch_dir);
    if (mj_runtime_create(&f.rt, &o) != MJ_OK || mj_cache_open(scratch_dir, 0, &f.cache) != MJ_OK ||
        mj_manifest_preset("deepseek-v3-ep8", &f.manifest) != MJ_OK) {
        fprintf(stderr, "%s: setup: %s\n", c->function, mj_last_error());
        _exit(CASE_SETUP_FAILED);
    }
    mj_format unused;
    mj_format_parse(kStale, &unused); /* leaves a sentence naming kStale */
    int got = c->call(&f);
    const char *sentence = mj_last_error();
    int code = CASE_PASSED;
    if (got != c->expected) {
        fprintf(stderr, "%s returned %d, wanted %d (%s)\n", c->function, got, c->expected,
                sentence);
        code = CASE_WRONG_STATUS;
    } else if (c->expected == NO_STATUS
                   ? !strstr(sentence, kStale)
                   : strstr(sentence, kStale) || (c->expected == MJ_OK) != (sentence[0] == '\0')) {
        fprintf(stderr, "%s left mj_last_error() = \"%s\"\n", c->function, sentence);
        code = CASE_WRONG_SENTENCE;
    }
    _exit(code);
}

static void test_every_case_in_its_own_process(void **state) {
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < NUM_CASES; i++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) run_case(&kCases[i]);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status)) {
            fprintf(stderr, "case %zu (%s) crashed with signal %d\n", i, kCases[i].function,
                    WTERMSIG(status));
            failed++;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != CASE_PASSED) {
            fprintf(stderr, "case %zu (%s) failed (exit %d)\n", i, kCases[i].function,
                    WEXITSTATUS(status));
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* The names after MJ_API in the public header (preprocessor lines skipped). */
static int declared_functions(char names[][64], int max) {
    FILE *f = fopen("include/megajit.h", "r");
    if (!f) fail_msg("include/megajit.h not found (run from the repository root)");
    static char text[1 << 17];
    size_t len = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        size_t n = strlen(line);
        if (*p == '#') continue;
        if (len + n + 1 >= sizeof text) {
            fclose(f);
            fail_msg("include/megajit.h outgrew the test's buffer");
        }
        memcpy(text + len, line, n);
        len += n;
    }
    fclose(f);
    text[len] = '\0';
    int count = 0;
    for (const char *p = strstr(text, "MJ_API "); p; p = strstr(p + 1, "MJ_API ")) {
        if (count == max) fail_msg("include/megajit.h declares more than %d functions", max);
        const char *paren = strchr(p, '(');
        const char *end = paren;
        while (end > p && isspace((unsigned char)end[-1]))
            end--;
        const char *start = end;
        while (start > p && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
            start--;
        snprintf(names[count++], 64, "%.*s", (int)(end - start), start);
    }
    return count;
}

static void test_every_public_function_has_a_case(void **state) {
    (void)state;
    static char names[256][64];
    int n = declared_functions(names, 256);
    assert_true(n > 40);
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (size_t c = 0; c < NUM_CASES && !found; c++)
            found = strcmp(kCases[c].function, names[i]) == 0;
        if (!found) fail_msg("%s has no case in tests/test_api_contract.c", names[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_public_function_has_a_case),
        cmocka_unit_test(test_every_case_in_its_own_process),
    };
    return cmocka_run_group_tests(tests, scratch_dir_create, scratch_dir_remove);
}
