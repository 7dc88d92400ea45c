/* Cache-key invariance: a key changes iff something that shapes its cubin changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/cache_key.h"
#include "runtime/families/pre_dispatch.h"
#include "runtime/include_closure.h"
#include "runtime/jit.h"
#include "runtime/templates.h"

static void write_file(const char *dir, const char *rel, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    assert_int_equal(system(cmd), 0);
    *slash = '/';
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void make_tree(const char *dir) {
    write_file(dir, "a.cuh", "#include \"common/x.h\"\n#include <cuda_bf16.h>\nint a;\n");
    write_file(dir, "b.cuh", "  #  include \"common/z.h\"\nint b;\n");
    /* x and y include each other: the scan must terminate. */
    write_file(dir, "common/x.h", "#include \"layout/y.h\"\nint x;\n");
    write_file(dir, "layout/y.h", "#include \"common/x.h\"\nint y;\n");
    write_file(dir, "common/z.h", "int z;\n");
}

static void closure_hash(const char *dir, const char *root, uint8_t out[16], int *count) {
    mj_template_set *set;
    assert_int_equal(mj_template_set_from_dir(dir, &set), MJ_OK);
    mj_closure c;
    assert_int_equal(mj_closure_compute(set, root, &c), MJ_OK);
    memcpy(out, c.hash, 16);
    if (count) *count = c.count;
    mj_closure_free(&c);
    mj_template_set_free(set);
}

static char *temp_dir(void) {
    char tmpl[] = "/tmp/mj-key-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void remove_dir(char *d) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    assert_int_equal(system(cmd), 0);
    free(d);
}

static void test_closure_follows_quote_includes_and_cycles(void **state) {
    (void)state;
    char *d = temp_dir();
    make_tree(d);
    uint8_t h[16];
    int count = 0;
    closure_hash(d, "a.cuh", h, &count);
    assert_int_equal(count, 3); /* a, x, y; <cuda_bf16.h> is a system header */
    closure_hash(d, "b.cuh", h, &count);
    assert_int_equal(count, 2);
    remove_dir(d);
}

static void test_closure_missing_include_is_an_error(void **state) {
    (void)state;
    char *d = temp_dir();
    write_file(d, "a.cuh", "#include \"nope.h\"\n");
    mj_template_set *set;
    assert_int_equal(mj_template_set_from_dir(d, &set), MJ_OK);
    mj_closure c;
    assert_int_equal(mj_closure_compute(set, "a.cuh", &c), MJ_ERR_NOT_FOUND);
    assert_non_null(strstr(mj_last_error(), "nope.h"));
    mj_template_set_free(set);
    remove_dir(d);
}

static void test_edits_change_exactly_the_dependents(void **state) {
    (void)state;
    char *d = temp_dir();
    make_tree(d);
    uint8_t a0[16], b0[16], a1[16], b1[16];
    closure_hash(d, "a.cuh", a0, NULL);
    closure_hash(d, "b.cuh", b0, NULL);

    write_file(d, "c.cuh", "#include \"common/z.h\"\nint c;\n"); /* a new template */
    write_file(d, "common/unused.h", "int unused;\n");           /* a new header */
    closure_hash(d, "a.cuh", a1, NULL);
    closure_hash(d, "b.cuh", b1, NULL);
    assert_memory_equal(a0, a1, 16);
    assert_memory_equal(b0, b1, 16);

    write_file(d, "common/z.h", "int z; /* edited */\n"); /* only b includes it */
    closure_hash(d, "a.cuh", a1, NULL);
    closure_hash(d, "b.cuh", b1, NULL);
    assert_memory_equal(a0, a1, 16);
    assert_memory_not_equal(b0, b1, 16);

    write_file(d, "layout/y.h", "#include \"common/x.h\"\nint y2;\n"); /* a, through x */
    closure_hash(d, "a.cuh", a1, NULL);
    assert_memory_not_equal(a0, a1, 16);
    remove_dir(d);
}

static void test_install_path_does_not_matter(void **state) {
    (void)state;
    char *d1 = temp_dir(), *d2 = temp_dir();
    make_tree(d1);
    char nested[4096];
    snprintf(nested, sizeof nested, "%s/some/deeper/install/prefix", d2);
    make_tree(nested);
    uint8_t h1[16], h2[16];
    closure_hash(d1, "a.cuh", h1, NULL);
    closure_hash(nested, "a.cuh", h2, NULL);
    assert_memory_equal(h1, h2, 16);
    remove_dir(d1);
    remove_dir(d2);
}

static void test_flags_normalized(void **state) {
    (void)state;
    const char *f1[] = {"-std=c++20", "-I/usr/local/cuda/include", "--pch", "--fmad=false"};
    const char *f2[] = {"--fmad=false", "-I/opt/cuda-13.0/include", "-std=c++20"};
    char n1[256], n2[256];
    mj_key_normalized_flags(f1, 4, n1, sizeof n1);
    mj_key_normalized_flags(f2, 3, n2, sizeof n2);
    assert_string_equal(n1, n2);
    assert_string_equal(n1, "--fmad=false -std=c++20");
    const char *f3[] = {"-std=c++20", "--fmad=true"};
    mj_key_normalized_flags(f3, 2, n2, sizeof n2);
    assert_string_not_equal(n1, n2);
}

/* Real templates: the embedded copy and a copy on disk at another path give
 * the same keys; an edit of an included header changes every dependent key;
 * an unrelated new file changes none. */
static void keys_of_all_variants(const mj_template_set *set, uint8_t keys[][16], int *n) {
    *n = 0;
    for (int fmt = 0; fmt < MJ_FORMAT_COUNT_; fmt++)
        for (int arch = 0; arch < 2; arch++) {
            mj_kernel_spec spec;
            const mj_symm_config buffer = {.struct_size = sizeof(mj_symm_config),
                                           .hidden = 7168,
                                           .num_experts = 256,
                                           .num_topk = 8,
                                           .max_tokens_per_rank = 128,
                                           .dispatch_format = (mj_format)fmt,
                                           .num_ranks = 1};
            assert_int_equal(mj_pre_dispatch_spec(&buffer, MJ_PD_KERNEL_MAIN,
                                                  arch ? MJ_ARCH_SM100A : MJ_ARCH_SM90A, &spec),
                             MJ_OK);
            assert_int_equal(mj_jit_cache_key(set, &spec, keys[(*n)++]), MJ_OK);
        }
}

static void copy_templates(const char *to) {
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "cp -r templates/. '%s/'", to);
    assert_int_equal(system(cmd), 0);
}

static void test_real_template_keys(void **state) {
    (void)state;
    uint8_t embedded[8][16], on_disk[8][16];
    int n = 0;
    keys_of_all_variants(mj_template_set_embedded(), embedded, &n);
    assert_int_equal(n, 8);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            assert_memory_not_equal(embedded[i], embedded[j], 16);

    char *d = temp_dir();
    copy_templates(d);
    mj_template_set *set;
    assert_int_equal(mj_template_set_from_dir(d, &set), MJ_OK);
    keys_of_all_variants(set, on_disk, &n);
    mj_template_set_free(set);
    assert_memory_equal(embedded, on_disk, sizeof embedded);

    write_file(d, "unrelated_family.cuh", "#include \"layout/symm_layout.h\"\n");
    assert_int_equal(mj_template_set_from_dir(d, &set), MJ_OK);
    keys_of_all_variants(set, on_disk, &n);
    mj_template_set_free(set);
    assert_memory_equal(embedded, on_disk, sizeof embedded);

    char path[4200];
    snprintf(path, sizeof path, "%s/layout/symm_layout.h", d);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs("/* edited */\n", f);
    fclose(f);
    assert_int_equal(mj_template_set_from_dir(d, &set), MJ_OK);
    keys_of_all_variants(set, on_disk, &n);
    mj_template_set_free(set);
    for (int i = 0; i < n; i++)
        assert_memory_not_equal(embedded[i], on_disk[i], 16);
    remove_dir(d);
}

static void test_keys_identical_across_processes(void **state) {
    (void)state;
    uint8_t mine[8][16], theirs[8][16];
    int n;
    keys_of_all_variants(mj_template_set_embedded(), mine, &n);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint8_t k[8][16];
        int m;
        keys_of_all_variants(mj_template_set_embedded(), k, &m);
        ssize_t w = write(fds[1], k, sizeof k);
        _exit(w == (ssize_t)sizeof k ? 0 : 1);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], theirs, sizeof theirs), (ssize_t)sizeof theirs);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    assert_int_equal(status, 0);
    assert_memory_equal(mine, theirs, sizeof mine);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closure_follows_quote_includes_and_cycles),
        cmocka_unit_test(test_closure_missing_include_is_an_error),
        cmocka_unit_test(test_edits_change_exactly_the_dependents),
        cmocka_unit_test(test_install_path_does_not_matter),
        cmocka_unit_test(test_flags_normalized),
        cmocka_unit_test(test_real_template_keys),
        cmocka_unit_test(test_keys_identical_across_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
