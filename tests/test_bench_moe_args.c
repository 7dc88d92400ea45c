/*
 * The command line of `megajit bench mega-moe` (tools/megajit/bench_moe_args.c):
 * the defaults, what each flag sets, and every message a bad value gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "heuristics/moe_formats.h"
#include "tools/megajit/bench_moe_args.h"

static char g_err[512];

/* Parses the NULL-terminated words after "mega-moe". */
static int parse_words(mj_moe_bench_args *a, const char *const *words) {
    char *argv[32] = {"mega-moe"};
    int argc = 1;
    while (words[argc - 1]) {
        argv[argc] = (char *)words[argc - 1];
        argc++;
    }
    g_err[0] = '\0';
    return mj_moe_bench_parse(argc, argv, a, g_err, sizeof g_err);
}
#define PARSE(a, ...) parse_words(a, (const char *const[]){__VA_ARGS__, NULL})

static void expect_shape(const mj_bench_moe_shape *s, const char *name, int hidden,
                         int intermediate, int experts, int topk) {
    assert_string_equal(s->name, name);
    assert_int_equal(s->hidden, hidden);
    assert_int_equal(s->intermediate, intermediate);
    assert_int_equal(s->experts, experts);
    assert_int_equal(s->topk, topk);
}

static void test_defaults(void **state) {
    (void)state;
    mj_moe_bench_args a;
    assert_int_equal(parse_words(&a, (const char *const[]){NULL}), MJ_MOE_ARGS_OK);
    assert_int_equal(a.num_shapes, 1);
    expect_shape(&a.shapes[0], "deepseek-v3", 7168, 2048, 256, 8);
    assert_int_equal(a.num_rows, mj_moe_format_count());
    assert_int_equal(a.num_tokens, 6);
    const int want[] = {1, 8, 64, 256, 1024, 4096};
    assert_memory_equal(a.tokens, want, sizeof want);
    assert_int_equal(a.max_tokens, 4096);
    assert_int_equal(a.routing, MJ_BENCH_ROUTING_UNIFORM);
    assert_int_equal(a.iters, 0);
    assert_int_equal(a.ranks, 0);
    assert_int_equal(a.json, 0);
    assert_int_equal(a.variant.activation, MJ_ACT_SWIGLU);
    assert_true(a.variant.clamp == 0.0f);
    assert_int_equal(a.variant.biases, 0);
    assert_int_equal(a.variant.shared, 0);
    assert_null(a.dump_dir);
}

static void test_flags(void **state) {
    (void)state;
    mj_moe_bench_args a;
    assert_int_equal(PARSE(&a, "--shape", "all", "--format", "nvfp4-a16", "--tokens", "64,8",
                           "--routing", "skewed", "--iters", "7", "--ranks", "8", "--json",
                           "--dump-routing", "/tmp/r", "--cache", "/tmp/c"),
                     MJ_MOE_ARGS_OK);
    assert_int_equal(a.num_shapes, 4);
    const char *names[] = {"deepseek-v3", "kimi-k2", "qwen3-235b", "gpt-oss-120b"};
    const int dims[4][4] = {
        {7168, 2048, 256, 8}, {7168, 2048, 384, 8}, {4096, 1536, 128, 8}, {2880, 2880, 128, 4}};
    for (int i = 0; i < 4; i++)
        expect_shape(&a.shapes[i], names[i], dims[i][0], dims[i][1], dims[i][2], dims[i][3]);
    assert_int_equal(a.num_rows, 1);
    assert_string_equal(mj_moe_format_at(a.rows[0])->name, "nvfp4-a16");
    assert_int_equal(a.num_tokens, 2);
    assert_int_equal(a.tokens[0], 64);
    assert_int_equal(a.tokens[1], 8);
    assert_int_equal(a.max_tokens, 64); /* the largest, not the last */
    assert_int_equal(a.routing, MJ_BENCH_ROUTING_SKEWED);
    assert_int_equal(a.iters, 7);
    assert_int_equal(a.ranks, 8);
    assert_int_equal(a.json, 1);
    assert_string_equal(a.dump_dir, "/tmp/r");
    assert_string_equal(a.cache_dir, "/tmp/c");

    assert_int_equal(PARSE(&a, "--activation", "swigluoai", "--clamp", "7", "--biases"),
                     MJ_MOE_ARGS_OK);
    assert_int_equal(a.variant.activation, MJ_ACT_SWIGLUOAI);
    assert_true(a.variant.clamp == 7.0f);
    assert_int_equal(a.variant.biases, 1);
    assert_int_equal(a.variant.shared, 0);

    /* --shared N: I_s = N x I; 0 is no shared expert, as without the flag */
    assert_int_equal(PARSE(&a, "--shared", "2", "--format", "mxfp8"), MJ_MOE_ARGS_OK);
    assert_int_equal(a.variant.shared, 2);
    assert_int_equal(PARSE(&a, "--shared", "512"), MJ_MOE_ARGS_OK);
    assert_int_equal(a.variant.shared, 512);
    assert_int_equal(PARSE(&a, "--shared", "1", "--shared", "0"), MJ_MOE_ARGS_OK);
    assert_int_equal(a.variant.shared, 0);
    /* --shared-format F: its weight format, 1 + MJ_FMT_*; 0 is the row's */
    assert_int_equal(a.variant.shared_format, 0);
    assert_int_equal(PARSE(&a, "--shared", "1", "--shared-format", "bf16", "--format", "nvfp4"),
                     MJ_MOE_ARGS_OK);
    assert_int_equal(a.variant.shared_format, MJ_FMT_BF16 + 1);

    assert_int_equal(PARSE(&a, "--tokens", "64", "--max-tokens", "4096"), MJ_MOE_ARGS_OK);
    assert_int_equal(a.max_tokens, 4096);
    assert_int_equal(PARSE(&a, "--help"), MJ_MOE_ARGS_HELP);
    assert_int_equal(PARSE(&a, "-h"), MJ_MOE_ARGS_HELP);
}

/* Overrides change the one named shape, in any order, and rename it. */
static void test_overrides(void **state) {
    (void)state;
    mj_moe_bench_args a;
    assert_int_equal(PARSE(&a, "--topk", "4", "--shape", "qwen3-235b", "--hidden", "2048",
                           "--intermediate", "768", "--experts", "64"),
                     MJ_MOE_ARGS_OK);
    assert_int_equal(a.num_shapes, 1);
    expect_shape(&a.shapes[0], "custom", 2048, 768, 64, 4);
    /* An override equal to the named value keeps the name. */
    assert_int_equal(PARSE(&a, "--shape", "kimi-k2", "--experts", "384"), MJ_MOE_ARGS_OK);
    assert_string_equal(a.shapes[0].name, "kimi-k2");
}

static void test_errors(void **state) {
    (void)state;
    static const struct {
        const char *words[8];
        const char *message;
    } cases[] = {
        {{"--bogus"}, "unknown option '--bogus'"},
        {{"--shape"}, "option '--shape' needs a value"},
        {{"stray"}, "unexpected argument 'stray'"},
        {{"--shape", "llama"},
         "--shape: unknown shape 'llama' (deepseek-v3, kimi-k2, qwen3-235b, gpt-oss-120b, or all)"},
        {{"--hidden", "0"}, "--hidden: expected a positive integer, got '0'"},
        {{"--intermediate", "x"}, "--intermediate: expected a positive integer, got 'x'"},
        {{"--experts", "-4"}, "--experts: expected a positive integer, got '-4'"},
        {{"--topk", "2.5"}, "--topk: expected a positive integer, got '2.5'"},
        {{"--shape", "all", "--hidden", "4096"},
         "--hidden changes one shape: name it with --shape (not all)"},
        {{"--experts", "4"}, "--topk 8 is more than the 4 experts of custom"},
        {{"--format", "fp8"},
         "--format: unknown format row 'fp8' (bf16, mxfp8, mxfp4-a8, mxfp4-a16, nvfp4, "
         "nvfp4-a16)"},
        {{"--tokens", "1,,8"},
         "--tokens: expected up to 16 positive integers separated by "
         "commas (each at most 1048576), got '1,,8'"},
        {{"--tokens", "0"}, "got '0'"},
        {{"--tokens", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"}, "expected up to 16"},
        {{"--tokens", "2000000"}, "each at most 1048576"},
        {{"--routing", "zipf"}, "--routing: expected uniform or skewed, got 'zipf'"},
        {{"--max-tokens", "0"}, "--max-tokens: expected 1..1048576, got '0'"},
        {{"--tokens", "8,256", "--max-tokens", "64"},
         "--max-tokens 64 is below the largest --tokens value (256): every token count runs on "
         "one buffer of --max-tokens rows per rank"},
        {{"--iters", "0"}, "--iters: expected 1..100000, got '0'"},
        {{"--ranks", "73"}, "--ranks: expected 1..72, got '73'"},
        {{"--ranks", "3"}, "--ranks 3 does not divide the 256 experts of deepseek-v3"},
        {{"--activation", "relu"}, "--activation: expected swiglu, swigluoai or situ, got 'relu'"},
        {{"--clamp", "0"}, "--clamp: expected a positive finite number, got '0'"},
        {{"--clamp", "7x"}, "--clamp: expected a positive finite number, got '7x'"},
        {{"--clamp", "inf"}, "--clamp: expected a positive finite number, got 'inf'"},
        {{"--activation", "situ", "--clamp", "7"},
         "--clamp: only swiglu and swigluoai take a clamp (--activation situ)"},
        {{"--shape", "all", "--ranks", "256"}, "--ranks: expected 1..72, got '256'"},
        {{"--shared"}, "option '--shared' needs a value"},
        {{"--shared", "-1"},
         "--shared: expected 0..512 (the shared expert's intermediate size as a multiple of the "
         "routed one), got '-1'"},
        {{"--shared", "1.5"}, "got '1.5'"},
        {{"--shared", "513"}, "got '513'"},
        {{"--shared", "1", "--shared-format", "fp16"},
         "--shared-format: expected bf16, mxfp8, mxfp4 or nvfp4, got 'fp16'"},
        {{"--shared-format", "bf16"},
         "--shared-format bf16: there is no shared expert (give --shared N)"},
        {{"--shape", "kimi-k2", "--ranks", "5"},
         "--ranks 5 does not divide the 384 experts of "
         "kimi-k2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mj_moe_bench_args a;
        if (parse_words(&a, cases[i].words) != MJ_MOE_ARGS_BAD)
            fail_msg("case %zu (%s ...) was accepted", i, cases[i].words[0]);
        if (!strstr(g_err, cases[i].message))
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, g_err, cases[i].message);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
