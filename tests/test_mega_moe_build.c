/*
 * Every MegaMoE kernel a deployment can request builds the way it was tuned:
 * for each embedded preset, plus a DeepSeek-V3 layer of each format row the
 * presets do not cover and a gpt-oss-120b layer (hidden and intermediate
 * 2880) of every row (the DeepSeek-V3 and Kimi K2 presets, the bf16 layer and
 * a gpt-oss mxfp4-a8 layer with a fused shared expert, of one and two
 * experts' width, the mxfp4-a8 ones in MXFP8: its own K loop), and layers
 * with a shared expert in another format beside each row (MXFP8,
 * and BF16 beside NVFP4), and the one-rank DeepSeek-V3 layers of
 * `megajit bench mega-moe` whose 64-token kernels once spilled (mxfp4-a16,
 * nvfp4), every kernel of the manifest is compiled with NVRTC
 * for sm_90a with ptxas's resource report, and the report must show no
 * local-memory spills, no stack frame in the main kernel and no "wgmma
 * serialized" warning (C7510-C7520). The PTX of the main kernels of three
 * decodes (MXFP4 weights with MXFP8 tokens, MXFP8, NVFP4) must hold the
 * instructions the design rests on: register-A BF16 wgmma (and no FP8 one)
 * and 1-D bulk copies completing on mbarriers. (The SASS itself,
 * QGMMA/HGMMA, LDS.128 and UBLKCP, is inspected with cuobjdump where one is at
 * hand: bench/RESULTS.md.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apis/manifest_impl.h"
#include "include/megajit.h"
#include "runtime/jit.h"
#include "runtime/families/family.h"
#include "runtime/nvrtc_lib.h"
#include "runtime/templates.h"

static const char kExtraLayers[] =
    "{\"archs\": [\"sm_90a\"], \"layers\": ["
    "{\"name\": \"dsv3-bf16\", \"hidden\": 7168, \"intermediate\": 2048, \"experts\": 256, "
    "\"topk\": 8, \"ranks\": 8, \"max_tokens_per_rank\": 4096, \"weight_format\": \"bf16\", "
    "\"dispatch_format\": \"bf16\", \"activation\": \"swiglu\", \"shared_intermediate\": 4096, "
    "\"shared_format\": \"bf16\"},"
    "{\"name\": \"dsv3-nvfp4-a16\", \"hidden\": 7168, \"intermediate\": 2048, \"experts\": 256, "
    "\"topk\": 8, \"ranks\": 8, \"max_tokens_per_rank\": 4096, \"weight_format\": \"nvfp4\", "
    "\"dispatch_format\": \"bf16\", \"activation\": \"swiglu\"},"
    "{\"name\": \"dsv3-mxfp4-a8\", \"hidden\": 7168, \"intermediate\": 2048, "
    "\"experts\": 256, \"topk\": 8, \"ranks\": 8, \"max_tokens_per_rank\": 4096, "
    "\"weight_format\": \"mxfp4\", \"dispatch_format\": \"mxfp8\", \"activation\": \"swiglu\"},"
    "{\"name\": \"dsv3-bench-mxfp4-a16\", \"hidden\": 7168, \"intermediate\": 2048, "
    "\"experts\": 256, \"topk\": 8, \"ranks\": 1, \"max_tokens_per_rank\": 4096, "
    "\"weight_format\": \"mxfp4\", \"dispatch_format\": \"bf16\", \"activation\": \"swiglu\"},"
    "{\"name\": \"dsv3-bench-nvfp4\", \"hidden\": 7168, \"intermediate\": 2048, "
    "\"experts\": 256, \"topk\": 8, \"ranks\": 1, \"max_tokens_per_rank\": 4096, "
    "\"weight_format\": \"nvfp4\", \"dispatch_format\": \"nvfp4\", \"activation\": \"swiglu\"}]}";

/* gpt-oss-120b's shape (2880 = 45 x 64) in the format rows its preset does not
 * cover: stages of 64 and an odd count of GEMM 2 row blocks, which no other shape has; with
 * the model's expert biases, so every row's kernels are checked with them
 * here and without them above. */
#define GPT_OSS                                                                                    \
    "\"hidden\": 2880, \"intermediate\": 2880, \"experts\": 128, \"topk\": 4, \"ranks\": 1, "      \
    "\"max_tokens_per_rank\": 8192, \"activation\": \"swigluoai\", \"clamp\": 7.0, "               \
    "\"expert_biases\": true"
static const char kGptOssLayers[] =
    "{\"archs\": [\"sm_90a\"], \"layers\": ["
    "{\"name\": \"gpt-oss-bf16\", \"weight_format\": \"bf16\", \"dispatch_format\": "
    "\"bf16\", " GPT_OSS "},"
    "{\"name\": \"gpt-oss-mxfp8\", \"weight_format\": \"mxfp8\", \"dispatch_format\": "
    "\"mxfp8\", " GPT_OSS "},"
    "{\"name\": \"gpt-oss-mxfp4-a8\", \"weight_format\": \"mxfp4\", \"dispatch_format\": "
    "\"mxfp8\", " GPT_OSS "},"
    "{\"name\": \"gpt-oss-mxfp4-a8-shared\", \"weight_format\": \"mxfp4\", \"dispatch_format\": "
    "\"mxfp8\", \"shared_intermediate\": 5760, \"shared_format\": \"mxfp8\", " GPT_OSS "},"
    "{\"name\": \"gpt-oss-nvfp4\", \"weight_format\": \"nvfp4\", \"dispatch_format\": "
    "\"nvfp4\", " GPT_OSS "},"
    "{\"name\": \"gpt-oss-nvfp4-a16\", \"weight_format\": \"nvfp4\", \"dispatch_format\": "
    "\"bf16\", " GPT_OSS "}]}";

/* A shared expert in another format than the routed experts' beside every
 * row (block pairs; templates/mega_moe/config.cuh): DeepSeek-V3's
 * shape (stage K 128; BF16 beside NVFP4 in half stages) and gpt-oss's (stage
 * K 64, where BF16 beside NVFP4 does not fit, with biases and an odd count of
 * GEMM 2 row blocks). */
#define DSV3_SHARED                                                                                \
    "\"hidden\": 7168, \"intermediate\": 2048, \"experts\": 256, \"topk\": 8, \"ranks\": 8, "      \
    "\"max_tokens_per_rank\": 4096, \"activation\": \"swiglu\", \"shared_intermediate\": 2048, "
static const char kSharedPairLayers[] =
    "{\"archs\": [\"sm_90a\"], \"layers\": ["
    "{\"name\": \"dsv3-mxfp4-a16-mxfp8\", " DSV3_SHARED
    "\"weight_format\": \"mxfp4\", \"dispatch_format\": \"bf16\", \"shared_format\": \"mxfp8\"},"
    "{\"name\": \"dsv3-nvfp4-mxfp8\", " DSV3_SHARED
    "\"weight_format\": \"nvfp4\", \"dispatch_format\": \"nvfp4\", \"shared_format\": \"mxfp8\"},"
    "{\"name\": \"dsv3-nvfp4-bf16\", " DSV3_SHARED
    "\"weight_format\": \"nvfp4\", \"dispatch_format\": \"nvfp4\", \"shared_format\": \"bf16\"},"
    "{\"name\": \"dsv3-nvfp4-a16-mxfp8\", " DSV3_SHARED
    "\"weight_format\": \"nvfp4\", \"dispatch_format\": \"bf16\", \"shared_format\": \"mxfp8\"},"
    "{\"name\": \"dsv3-nvfp4-a16-bf16\", " DSV3_SHARED
    "\"weight_format\": \"nvfp4\", \"dispatch_format\": \"bf16\", \"shared_format\": \"bf16\"},"
    "{\"name\": \"gpt-oss-mxfp4-a16-mxfp8\", \"weight_format\": \"mxfp4\", \"dispatch_format\": "
    "\"bf16\", \"shared_intermediate\": 2880, \"shared_format\": \"mxfp8\", " GPT_OSS "},"
    "{\"name\": \"gpt-oss-nvfp4-mxfp8\", \"weight_format\": \"nvfp4\", \"dispatch_format\": "
    "\"nvfp4\", \"shared_intermediate\": 2880, \"shared_format\": \"mxfp8\", " GPT_OSS "},"
    "{\"name\": \"gpt-oss-nvfp4-a16-mxfp8\", \"weight_format\": \"nvfp4\", \"dispatch_format\": "
    "\"bf16\", \"shared_intermediate\": 5760, \"shared_format\": \"mxfp8\", " GPT_OSS "}]}";

static const char *const kOptions[] = {"--gpu-architecture=sm_90a", MJ_JIT_COMPILE_OPTIONS,
                                       "--ptxas-options=-v"};
#define NUM_OPTIONS (int)(sizeof kOptions / sizeof kOptions[0])

typedef struct sources {
    const char *names[256], *texts[256];
    int count;
} sources;

static void embedded(sources *s) {
    assert_true(mj_embedded_template_count <= 256);
    s->count = (int)mj_embedded_template_count;
    for (int i = 0; i < s->count; i++) {
        s->names[i] = mj_embedded_templates[i].path;
        s->texts[i] = mj_embedded_templates[i].text;
    }
}

/* The compile input of one spec (source and name expression in the buffers). */
static mj_compile_input input_of(const mj_kernel_spec *spec, const sources *s, char *source,
                                 size_t source_cap, char *name, size_t name_cap) {
    const mj_family_desc *d = mj_family_get((mj_family)spec->family);
    assert_non_null(d);
    assert_true(mj_family_name_expression(spec, name, name_cap) > 0);
    snprintf(source, source_cap, "#include \"%s\"\n", d->template_path);
    mj_compile_input in = {"build_check.cu", source,   name,     s->names,
                           s->texts,         s->count, kOptions, NUM_OPTIONS};
    return in;
}

/* 1 when a count "N<what>" of log is not 0; *n: how many counts there are. */
static int nonzero_count(const char *log, const char *what, int *n) {
    *n = 0;
    for (const char *s = strstr(log, what); s; s = strstr(s + 1, what)) {
        const char *d = s;
        while (d > log && d[-1] == ' ')
            d--;
        (*n)++;
        if (d == log || d[-1] != '0' || (d - 1 > log && d[-2] >= '0' && d[-2] <= '9')) return 1;
    }
    return 0;
}

/* What is wrong with a ptxas -v report, or NULL for a clean build: every
 * "bytes spill" count 0 (and the counts present: the report is the verbose
 * one), no serialized wgmma, and for the main kernel every "bytes stack
 * frame" count 0 (its own and any function it calls). */
static const char *report_problem(const char *log, int main_kernel) {
    if (strstr(log, "C751") || strstr(log, "C752")) return "ptxas serializes wgmma";
    int spills, frames;
    if (nonzero_count(log, " bytes spill ", &spills)) return "ptxas reports spills";
    if (!spills) return "the log holds no spill counts (not a ptxas -v report)";
    if (main_kernel && (nonzero_count(log, " bytes stack frame", &frames) || !frames))
        return "the main kernel has a stack frame";
    return NULL;
}

/* Compiles every MegaMoE kernel of m and checks its report, all of them
 * (one run lists every kernel that fails, each with its log); returns how
 * many were main kernels and adds the failures to *failed. */
static int check_manifest(mj_manifest *m, const sources *s, int *failed) {
    int main_kernels = 0;
    for (size_t i = 0; i < mj_manifest_kernel_count(m); i++) {
        const mj_kernel_spec *spec = mj_manifest_kernel_spec(m, i);
        if (spec->family != MJ_FAMILY_MEGA_MOE) continue;
        char source[256], name[512];
        mj_compile_input in = input_of(spec, s, source, sizeof source, name, sizeof name);
        mj_compile_output out;
        if (mj_nvrtc_compile(&in, &out) != MJ_OK) {
            printf("FAIL: %s does not compile: %.2000s\n", name, mj_last_error());
            ++*failed;
            continue;
        }
        const int is_main = strstr(name, "mega_moe_kernel<") != NULL;
        const char *problem = report_problem(out.log, is_main);
        if (problem) {
            printf("FAIL: %s: %s:\n%s\n", name, problem, out.log);
            ++*failed;
        } else {
            printf("clean: %s (%.1f s)\n", name, out.milliseconds / 1e3);
        }
        mj_compile_output_free(&out);
        main_kernels += is_main;
    }
    return main_kernels;
}

/* The report check itself, on reports it must refuse and one it must pass. */
static void test_report_check(void **state) {
    (void)state;
    const char *clean = "ptxas info    : Used 168 registers, 0 bytes stack frame, 0 bytes spill "
                        "stores, 0 bytes spill loads";
    assert_null(report_problem(clean, 1));
    assert_non_null(report_problem("ptxas info    : Used 255 registers, 0 bytes stack frame, "
                                   "40 bytes spill stores, 0 bytes spill loads",
                                   1));
    assert_non_null(report_problem("ptxas info    : Used 255 registers, 0 bytes stack frame, "
                                   "0 bytes spill stores, 10 bytes spill loads",
                                   1));
    assert_non_null(report_problem("ptxas info    : Used 255 registers, 16 bytes stack frame, "
                                   "0 bytes spill stores, 0 bytes spill loads",
                                   1));
    /* a function the kernel calls has a frame: the kernel's own 0 does not hide it */
    const char *callee = "ptxas info    : Function properties for kernel\n"
                         "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 "
                         "bytes spill loads\n"
                         "ptxas info    : Function properties for helper\n"
                         "ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 "
                         "bytes spill loads\n";
    assert_non_null(report_problem(callee, 1));
    assert_null(report_problem(callee, 0)); /* only the main kernel must have none */
    assert_non_null(report_problem("ptxas info    : 0 bytes spill stores, 0 bytes spill loads", 1));
    assert_non_null(
        report_problem("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async "
                       "instructions are serialized. 0 bytes spill stores",
                       0));
    assert_non_null(report_problem("", 0));
}

static void test_presets_build_clean(void **state) {
    (void)state;
    sources s;
    embedded(&s);
    int failed = 0;
    for (const char *const *p = mj_manifest_preset_names(); *p; p++) {
        mj_manifest *m = NULL;
        assert_int_equal(mj_manifest_preset(*p, &m), MJ_OK);
        assert_int_equal(mj_manifest_set_archs(m, "sm_90a"), MJ_OK);
        const int main_kernels = check_manifest(m, &s, &failed);
        mj_manifest_destroy(m);
        if (main_kernels == 0) fail_msg("preset %s lists no MegaMoE main kernel", *p);
    }
    mj_manifest *m = NULL;
    if (mj_manifest_parse(kExtraLayers, &m) != MJ_OK) fail_msg("%s", mj_last_error());
    const int main_kernels = check_manifest(m, &s, &failed);
    mj_manifest_destroy(m);
    if (main_kernels == 0) fail_msg("the extra layers list no MegaMoE main kernel");
    if (failed) fail_msg("%d kernels failed (FAIL lines above)", failed);
}

/* Every kernel of a manifest's layers builds clean. */
static void check_layers(const char *json, const char *what) {
    sources s;
    embedded(&s);
    mj_manifest *m = NULL;
    if (mj_manifest_parse(json, &m) != MJ_OK) fail_msg("%s", mj_last_error());
    int failed = 0;
    const int main_kernels = check_manifest(m, &s, &failed);
    mj_manifest_destroy(m);
    if (main_kernels == 0) fail_msg("the %s layers list no MegaMoE main kernel", what);
    if (failed) fail_msg("%d kernels failed (FAIL lines above)", failed);
}

static void test_gpt_oss_builds_clean(void **state) {
    (void)state;
    check_layers(kGptOssLayers, "gpt-oss");
}

static void test_shared_pairs_build_clean(void **state) {
    (void)state;
    check_layers(kSharedPairLayers, "shared-pair");
}

/* PTX of the first main kernel of a manifest with one layer of (w, d). */
static char *main_kernel_ptx(const char *weight, const char *dispatch, const sources *s) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"archs\": [\"sm_90a\"], \"layers\": [{\"hidden\": 7168, \"intermediate\": 2048, "
             "\"experts\": 256, \"topk\": 8, \"ranks\": 1, \"max_tokens_per_rank\": 64, "
             "\"weight_format\": \"%s\", \"dispatch_format\": \"%s\", \"activation\": "
             "\"swiglu\"}]}",
             weight, dispatch);
    mj_manifest *m = NULL;
    if (mj_manifest_parse(json, &m) != MJ_OK) fail_msg("%s", mj_last_error());
    char *ptx = NULL;
    for (size_t i = 0; i < mj_manifest_kernel_count(m) && !ptx; i++) {
        const mj_kernel_spec *spec = mj_manifest_kernel_spec(m, i);
        char source[256], name[512];
        if (spec->family != MJ_FAMILY_MEGA_MOE) continue;
        mj_compile_input in = input_of(spec, s, source, sizeof source, name, sizeof name);
        if (!strstr(name, "mega_moe_kernel<")) continue;
        if (mj_nvrtc_ptx(&in, "compute_90a", &ptx) != MJ_OK)
            fail_msg("%s: no PTX: %.2000s", name, mj_last_error());
    }
    mj_manifest_destroy(m);
    assert_non_null(ptx);
    return ptx;
}

static void test_ptx_holds_the_design(void **state) {
    (void)state;
    sources s;
    embedded(&s);
    static const struct {
        const char *weight, *dispatch, *mma;
    } kPaths[] = {
        {"mxfp4", "mxfp8", "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"},
        {"mxfp8", "mxfp8", "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"},
        {"nvfp4", "bf16", "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"},
    };
    for (size_t i = 0; i < sizeof kPaths / sizeof kPaths[0]; i++) {
        char *ptx = main_kernel_ptx(kPaths[i].weight, kPaths[i].dispatch, &s);
        if (!strstr(ptx, kPaths[i].mma))
            fail_msg("%s/%s: no %s", kPaths[i].weight, kPaths[i].dispatch, kPaths[i].mma);
        if (strstr(ptx, "k32.f32.e"))
            fail_msg("%s/%s: an FP8 wgmma; every row runs BF16 ones", kPaths[i].weight,
                     kPaths[i].dispatch);
        if (!strstr(ptx, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"))
            fail_msg("%s/%s: no bulk copy", kPaths[i].weight, kPaths[i].dispatch);
        if (!strstr(ptx, "setmaxnreg.inc")) fail_msg("no register hand-over to the math warps");
        free(ptx);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_check),
        cmocka_unit_test(test_presets_build_clean),
        cmocka_unit_test(test_gpt_oss_builds_clean),
        cmocka_unit_test(test_shared_pairs_build_clean),
        cmocka_unit_test(test_ptx_holds_the_design),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
