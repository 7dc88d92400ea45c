/* The MegaMoE host API without a GPU: config validation, specs and their name
 * expressions, BLOCK_M choice, manifest enumeration, buffer sizing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/limits.h"
#include "apis/mega_moe_impl.h"
#include "apis/symm_buffer_impl.h"
#include "heuristics/mega_moe_config.h"
#include "include/megajit.h"
#include "runtime/configs.h"
#include "runtime/families/mega_moe.h"
#include "runtime/runtime.h"

/* DeepSeek-V3's shape over 8 ranks: mxfp4 weights, mxfp8 dispatch. */
static mj_moe_config good(void) {
    return (mj_moe_config){.struct_size = sizeof(mj_moe_config),
                           .hidden = 7168,
                           .intermediate = 2048,
                           .num_experts = 256,
                           .num_topk = 8,
                           .num_ranks = 8,
                           .rank = 3,
                           .max_tokens_per_rank = 4096,
                           .weight_format = MJ_FORMAT_MXFP4,
                           .dispatch_format = MJ_FORMAT_MXFP8,
                           .activation = MJ_ACTIVATION_SWIGLU,
                           .clamp = 0.0f,
                           .block_m = 0};
}

static void expect_error(mj_status got, mj_status want, const char *needle) {
    assert_int_equal(got, want);
    if (!strstr(mj_last_error(), needle)) fail_msg("\"%s\" lacks \"%s\"", mj_last_error(), needle);
}

static mj_status spec_of(const mj_moe_config *c, mj_kernel_spec *s) {
    return mj_mega_moe_spec(c, 16, 132, 0, MJ_ARCH_SM90A, s);
}

static const char *name_of(const mj_kernel_spec *s) {
    static char name[256];
    assert_ptr_equal(mj_family_get(MJ_FAMILY_MEGA_MOE), &mj_mega_moe_family);
    assert_string_equal(mj_mega_moe_family.template_path, "mega_moe.cuh");
    int n = mj_family_name_expression(s, name, sizeof name);
    assert_true(n > 0 && n < (int)sizeof name);
    return name;
}

static void test_config_rejects_bad_values(void **state) {
    (void)state;
    mj_moe_config c;
#define REJECT(assign, needle)                                                                     \
    do {                                                                                           \
        c = good();                                                                                \
        assign;                                                                                    \
        expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG, needle);                   \
        expect_error(mj_mega_moe_block_m(&c, 1, &(int){0}), MJ_ERR_INVALID_ARG, needle);           \
    } while (0)
    REJECT(c.hidden = 7200, "hidden 7200");
    REJECT(c.hidden = 2880 + 32, "hidden 2912 must be a multiple of 64 in 64..8192");
    REJECT(c.hidden = 32, "hidden 32");
    REJECT(c.hidden = 8448, "hidden 8448");
    REJECT(c.hidden = 0, "hidden 0");
    REJECT(c.intermediate = 2016, "intermediate 2016");
    REJECT(c.intermediate = 0, "intermediate 0");
    REJECT(c.intermediate = -64, "intermediate -64");
    REJECT(c.num_experts = 260, "num_experts 260");
    REJECT(c.num_experts = 0, "num_experts 0");
    REJECT(c.num_topk = 257, "num_topk 257");
    REJECT(c.num_topk = 0, "num_topk 0");
    REJECT(c.num_ranks = 0, "num_ranks 0");
    REJECT((c.num_ranks = MJ_MAX_RANKS + 1, c.num_experts = 73 * 4), "num_ranks 73");
    REJECT(c.rank = 8, "rank 8");
    REJECT(c.rank = -1, "rank -1");
    REJECT(c.max_tokens_per_rank = 0, "max_tokens_per_rank 0");
    REJECT(c.weight_format = MJ_FORMAT_NVFP4, "(weight_format nvfp4, dispatch_format mxfp8)");
    REJECT(c.dispatch_format = MJ_FORMAT_NVFP4, "(weight_format mxfp4, dispatch_format nvfp4)");
    REJECT((c.weight_format = MJ_FORMAT_BF16, c.dispatch_format = MJ_FORMAT_MXFP8),
           "not a MegaMoE format pair");
    REJECT(c.weight_format = (mj_format)7, "dispatch_format mxfp8)");
    REJECT(c.dispatch_format = (mj_format)9, "dispatch_format 9 must be one of");
    REJECT(c.activation = (mj_activation)3, "unknown activation 3");
    REJECT(c.activation = (mj_activation)-1, "unknown activation -1");
    REJECT((c.activation = MJ_ACTIVATION_SITU, c.clamp = 7.0f), "clamp 7: only swiglu");
    REJECT(c.clamp = -1.0f, "clamp -1 must be finite");
    REJECT(c.clamp = INFINITY, "must be finite");
    REJECT(c.clamp = NAN, "must be finite");
    REJECT(c.block_m = 12, "block_m 12");
    REJECT(c.block_m = 96, "block_m 96");
    REJECT(c.block_m = -8, "block_m -8");
#undef REJECT
    expect_error(mj_moe_config_check(NULL, NULL), MJ_ERR_INVALID_ARG, "config is NULL");
    expect_error(mj_mega_moe_block_m(NULL, 1, &(int){0}), MJ_ERR_INVALID_ARG, "config is NULL");
}

static void test_spec_rejects_bad_launch_shape(void **state) {
    (void)state;
    mj_moe_config c = good();
    mj_kernel_spec s;
    expect_error(mj_mega_moe_spec(&c, 12, 132, 0, MJ_ARCH_SM90A, &s), MJ_ERR_INVALID_ARG,
                 "block_m 12");
    expect_error(mj_mega_moe_spec(&c, 96, 132, 0, MJ_ARCH_SM90A, &s), MJ_ERR_INVALID_ARG,
                 "block_m 96");
    expect_error(mj_mega_moe_spec(&c, 0, 132, 0, MJ_ARCH_SM90A, &s), MJ_ERR_INVALID_ARG,
                 "block_m 0");
    expect_error(mj_mega_moe_spec(&c, 16, 0, 0, MJ_ARCH_SM90A, &s), MJ_ERR_INVALID_ARG,
                 "num_sms 0");
    expect_error(mj_mega_moe_spec(&c, 16, 132, 0, (mj_arch)80, &s), MJ_ERR_INVALID_ARG,
                 "unknown arch 80");
    expect_error(mj_mega_moe_spec(&c, 16, 132, 0, MJ_ARCH_SM100A, &s), MJ_ERR_UNSUPPORTED,
                 "no kernel for sm_100a");
}

static void test_spec_and_name(void **state) {
    (void)state;
    mj_moe_config c = good();
    c.clamp = 7.0f;
    c.rank = 5;
    c.block_m = 64; /* neither enters the spec */
    mj_kernel_spec s;
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    assert_int_equal(s.family, MJ_FAMILY_MEGA_MOE);
    assert_int_equal(s.arch, MJ_ARCH_SM90A);
    assert_int_equal(s.num_params, MJ_MOE_NUM_PARAMS);
    assert_int_equal(MJ_MOE_NUM_PARAMS, 22);
    assert_string_equal(name_of(&s),
                        "mj::mega_moe_kernel<7168, 2048, 256, 8, 8, 4096, 2, 1, 1, 0, 0x40e00000u, "
                        "0x3f800000u, 0x0u, 16, 128, 8, 132, 1, 0, 0, 0, 0>");
    for (int i = MJ_MOE_NUM_PARAMS; i < MJ_SPEC_MAX_PARAMS; i++)
        assert_int_equal(s.params[i], 0);
    mj_kernel_spec other;
    c.rank = 0;
    c.block_m = 0;
    assert_int_equal(spec_of(&c, &other), MJ_OK);
    assert_memory_equal(&s, &other, sizeof s);

    /* -0 and 0 are both "no clamp": one kernel, one cache key */
    c.clamp = -0.0f;
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    c.clamp = 0.0f;
    assert_int_equal(spec_of(&c, &other), MJ_OK);
    assert_memory_equal(&s, &other, sizeof s);
    assert_int_equal(s.params[MJ_MOE_PARAM_CLAMP_BITS], 0);

    /* the L2 format comes from the table; situ without a clamp is fine */
    static const struct {
        mj_format w, d;
        mj_activation act;
        float clamp;
        const char *name;
    } rows[] = {
        {MJ_FORMAT_BF16, MJ_FORMAT_BF16, MJ_ACTIVATION_SITU, 0.0f,
         "mj::mega_moe_kernel<4096, 1536, 128, 4, 2, 64, 0, 0, 0, 2, 0x0u, 0x40800000u, "
         "0x41c80000u, 8, 64, 6, "
         "66, 1, 0, 0, 0, 0>"},
        {MJ_FORMAT_MXFP8, MJ_FORMAT_MXFP8, MJ_ACTIVATION_SWIGLUOAI, 1.5f,
         "mj::mega_moe_kernel<4096, 1536, 128, 4, 2, 64, 1, 1, 1, 1, 0x3fc00000u, 0x3fd9db23u, "
         "0x3f800000u, 8, 128, 6, 66, 1, 0, 0, 0, 0>"},
        {MJ_FORMAT_MXFP4, MJ_FORMAT_BF16, MJ_ACTIVATION_SWIGLU, 0.0f,
         "mj::mega_moe_kernel<4096, 1536, 128, 4, 2, 64, 2, 0, 0, 0, 0x0u, 0x3f800000u, 0x0u, 8, "
         "128, 8, "
         "66, 1, 0, 0, 0, 0>"},
        {MJ_FORMAT_NVFP4, MJ_FORMAT_NVFP4, MJ_ACTIVATION_SWIGLU, 0.0f,
         "mj::mega_moe_kernel<4096, 1536, 128, 4, 2, 64, 3, 3, 3, 0, 0x0u, 0x3f800000u, 0x0u, 8, "
         "128, 8, "
         "66, 1, 0, 0, 0, 0>"},
        {MJ_FORMAT_NVFP4, MJ_FORMAT_BF16, MJ_ACTIVATION_SWIGLU, 0.0f,
         "mj::mega_moe_kernel<4096, 1536, 128, 4, 2, 64, 3, 0, 0, 0, 0x0u, 0x3f800000u, 0x0u, 8, "
         "128, 8, "
         "66, 1, 0, 0, 0, 0>"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        mj_moe_config r = {sizeof r,  4096,      1536,        128,           4, 2, 1, 64,
                           rows[i].w, rows[i].d, rows[i].act, rows[i].clamp, 0};
        assert_int_equal(mj_mega_moe_spec(&r, 8, 66, 0, MJ_ARCH_SM90A, &s), MJ_OK);
        assert_string_equal(name_of(&s), rows[i].name);
    }

    /* unfold_mx_scales changes no kernel; it is still 0 or 1 */
    c = good();
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    c.unfold_mx_scales = 1;
    assert_int_equal(spec_of(&c, &other), MJ_OK);
    assert_memory_equal(&s, &other, sizeof s);
    c.unfold_mx_scales = 2;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG,
                 "unfold_mx_scales 2 must be 0 or 1");

    /* system scope only for real peers, and never for one rank */
    c = good();
    assert_int_equal(mj_mega_moe_spec(&c, 16, 132, 1, MJ_ARCH_SM90A, &s), MJ_OK);
    assert_int_equal(s.params[MJ_MOE_PARAM_SYS_SCOPE], 1);
    c.num_ranks = 1;
    c.rank = 0;
    assert_int_equal(mj_mega_moe_spec(&c, 16, 132, 1, MJ_ARCH_SM90A, &s), MJ_OK);
    assert_int_equal(s.params[MJ_MOE_PARAM_SYS_SCOPE], 0);
}

static void test_image_spec(void **state) {
    (void)state;
    mj_moe_config c = good();
    mj_kernel_spec s, other;
    assert_int_equal(mj_mega_moe_image_spec(&c, 0, MJ_ARCH_SM90A, &s), MJ_OK);
    assert_int_equal(s.family, MJ_FAMILY_MEGA_MOE);
    assert_int_equal(s.kernel, MJ_MOE_KERNEL_IMAGE);
    assert_int_equal(s.num_params, MJ_MOE_IMAGE_NUM_PARAMS);
    assert_string_equal(name_of(&s), "mj::mega_moe_image_kernel<2, 7168, 2048, 128, 4>");
    /* the image's stage K is the main kernel's */
    mj_kernel_spec main_spec;
    assert_int_equal(spec_of(&c, &main_spec), MJ_OK);
    assert_int_equal(s.params[MJ_MOE_IMAGE_PARAM_STAGE_K], main_spec.params[MJ_MOE_PARAM_STAGE_K]);
    /* only the weight format shapes the image: rows of one weight format
     * share the kernel */
    static const mj_format kPairs[][3] = {{MJ_FORMAT_NVFP4, MJ_FORMAT_NVFP4, MJ_FORMAT_BF16},
                                          {MJ_FORMAT_MXFP4, MJ_FORMAT_MXFP8, MJ_FORMAT_BF16}};
    for (size_t i = 0; i < sizeof kPairs / sizeof kPairs[0]; i++) {
        c.weight_format = kPairs[i][0];
        c.dispatch_format = kPairs[i][1];
        assert_int_equal(mj_mega_moe_image_spec(&c, 0, MJ_ARCH_SM90A, &s), MJ_OK);
        c.dispatch_format = kPairs[i][2];
        assert_int_equal(mj_mega_moe_image_spec(&c, 0, MJ_ARCH_SM90A, &other), MJ_OK);
        assert_memory_equal(&s, &other, sizeof s);
    }
    expect_error(mj_mega_moe_image_spec(&c, 0, MJ_ARCH_SM100A, &s), MJ_ERR_UNSUPPORTED,
                 "no kernel for sm_100a");

    /* one CTA per (64-row block, stage) of the projection it writes */
    c = good();
    const mj_symm_config buffer = mj_symm_config_of_moe(&c);
    mj_family_request req = {.buffer = &buffer, .layer = &c, .projection = MJ_PROJ_UP};
    mj_launch_config lc;
    assert_int_equal(mj_mega_moe_image_spec(&c, 0, MJ_ARCH_SM90A, &s), MJ_OK);
    mj_mega_moe_family.launch_shape(&s, &req, &lc);
    assert_int_equal(lc.grid[0], 2048 / 64);
    assert_int_equal(lc.grid[1], 7168 / 128);
    assert_int_equal(lc.block[0], 128);
    req.projection = MJ_PROJ_DOWN;
    mj_mega_moe_family.launch_shape(&s, &req, &lc);
    assert_int_equal(lc.grid[0], 7168 / 64);
    assert_int_equal(lc.grid[1], 2048 / 128);

    /* the main kernel: a CTA of MJ_MOE_THREADS per SM (here), the shared memory the
     * heuristic sized its pipeline for */
    req.pdl = 1;
    mj_mega_moe_family.launch_shape(&main_spec, &req, &lc);
    const mj_moe_problem prob = {
        0, c.num_ranks, c.num_experts, c.num_topk, c.hidden, c.intermediate, 132};
    mj_moe_kernel_config kc;
    assert_int_equal(mj_moe_kernel_config_for(
                         &prob, mj_moe_format_find(c.weight_format, c.dispatch_format), 16, &kc),
                     0);
    assert_int_equal(lc.grid[0], 132);
    assert_int_equal(lc.block[0], MJ_MOE_THREADS);
    assert_int_equal(lc.smem_bytes, kc.smem_bytes);
    assert_int_equal(lc.pdl, 1);
    assert_true(lc.ctas_per_sm <= 1);

    /* gpt-oss-120b's E2M1 experts in 8-token tiles: two CTAs an SM, each in
     * half of its shared memory; one where other ranks share the GPU */
    c = good();
    c.hidden = 2880;
    c.intermediate = 2880;
    c.num_experts = 128;
    c.num_topk = 4;
    c.num_ranks = 1;
    c.rank = 0;
    c.weight_format = MJ_FORMAT_MXFP4;
    c.dispatch_format = MJ_FORMAT_BF16;
    const mj_symm_config gpt_buffer = mj_symm_config_of_moe(&c);
    mj_family_request gpt = {.buffer = &gpt_buffer, .layer = &c, .num_tokens = 64, .num_sms = 132};
    assert_int_equal(
        mj_mega_moe_family.build_spec(&gpt, MJ_MOE_KERNEL_MAIN, MJ_ARCH_SM90A, &main_spec), MJ_OK);
    assert_int_equal(main_spec.params[MJ_MOE_PARAM_BLOCK_M], 8);
    assert_int_equal(main_spec.params[MJ_MOE_PARAM_CTAS_PER_SM], 2);
    mj_mega_moe_family.launch_shape(&main_spec, &gpt, &lc);
    assert_int_equal(lc.grid[0], 264);
    assert_int_equal(lc.ctas_per_sm, 2);
    assert_true(2 * (lc.smem_bytes + 1024) <= 233472);
    /* one token: 140 tasks, fewer than two an SM */
    gpt.num_tokens = 1;
    assert_int_equal(
        mj_mega_moe_family.build_spec(&gpt, MJ_MOE_KERNEL_MAIN, MJ_ARCH_SM90A, &main_spec), MJ_OK);
    assert_int_equal(main_spec.params[MJ_MOE_PARAM_BLOCK_M], 8);
    assert_int_equal(main_spec.params[MJ_MOE_PARAM_CTAS_PER_SM], 1);
    gpt.num_tokens = 64;
    gpt.shares_device = 1;
    assert_int_equal(
        mj_mega_moe_family.build_spec(&gpt, MJ_MOE_KERNEL_MAIN, MJ_ARCH_SM90A, &main_spec), MJ_OK);
    mj_mega_moe_family.launch_shape(&main_spec, &gpt, &lc);
    assert_int_equal(lc.grid[0], 132);
    assert_int_equal(lc.ctas_per_sm, 1);
}

/* Every shape within runtime/limits.h has a kernel: at the extremes of
 * hidden, intermediate and local experts, every format row's kernel fits its
 * pipeline at every tile size the row takes. */
static void test_limits_have_kernels(void **state) {
    (void)state;
    static const struct {
        int hidden, inter, experts;
    } shapes[] = {
        {MJ_LIMIT_HIDDEN_MULTIPLE, MJ_LIMIT_INTERMEDIATE_MULTIPLE, 1},
        {MJ_LIMIT_HIDDEN_MAX, MJ_LIMIT_INTERMEDIATE_MAX, MJ_LIMIT_EXPERTS_MAX},
        {MJ_LIMIT_HIDDEN_MAX, MJ_LIMIT_INTERMEDIATE_MULTIPLE, MJ_LIMIT_EXPERTS_MAX},
        {MJ_LIMIT_HIDDEN_MULTIPLE, MJ_LIMIT_INTERMEDIATE_MAX, MJ_LIMIT_EXPERTS_MAX},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int r = 0; r < mj_moe_format_count(); r++) {
            const mj_moe_format_row *row = mj_moe_format_at(r);
            mj_moe_config c = MJ_MOE_CONFIG_INIT;
            c.hidden = shapes[i].hidden;
            c.intermediate = shapes[i].inter;
            c.num_experts = shapes[i].experts;
            c.num_topk = 1;
            c.num_ranks = 1;
            c.max_tokens_per_rank = 1;
            c.weight_format = (mj_format)row->weight_fmt;
            c.dispatch_format = (mj_format)row->dispatch_fmt;
            if (mj_moe_config_check(&c, NULL) != MJ_OK) fail_msg("%s", mj_last_error());
            mj_kernel_spec s;
            for (int bm = 8; bm <= mj_moe_max_block_m(row); bm *= 2)
                if (mj_mega_moe_spec(&c, bm, MJ_LIMIT_NUM_SMS_MAX, 1, MJ_ARCH_SM90A, &s) != MJ_OK)
                    fail_msg("%s H=%d I=%d E=%d bm=%d: %s", row->name, c.hidden, c.intermediate,
                             c.num_experts, bm, mj_last_error());
            assert_int_equal(mj_mega_moe_image_spec(&c, 0, MJ_ARCH_SM90A, &s), MJ_OK);
        }
}

static void test_block_m(void **state) {
    (void)state;
    mj_moe_config c = good();
    int bm = -1;
    /* mean = t * 8 * 8 / 256 tokens per expert; the tile covers mean + sqrt(mean) */
    static const struct {
        int tokens, block_m;
    } want[] = {{0, 8},    {1, 8},     {20, 8},     {40, 16},   {100, 32},
                {200, 64}, {300, 128}, {1000, 160}, {4096, 160}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(mj_mega_moe_block_m(&c, want[i].tokens, &bm), MJ_OK);
        assert_int_equal(bm, want[i].block_m);
    }
    /* beside a shared expert the tile never exceeds 128, whatever the heuristic says */
    c.shared_intermediate = 2048;
    c.shared_format = MJ_FORMAT_MXFP8;
    for (int t = 0; t <= c.max_tokens_per_rank; t += 97) {
        assert_int_equal(mj_mega_moe_block_m(&c, t, &bm), MJ_OK);
        assert_true(bm <= 128);
    }
    c.block_m = 32;
    assert_int_equal(mj_mega_moe_block_m(&c, 0, &bm), MJ_OK);
    assert_int_equal(bm, 32);
    assert_int_equal(mj_mega_moe_block_m(&c, 4096, &bm), MJ_OK);
    assert_int_equal(bm, 32);
    expect_error(mj_mega_moe_block_m(&c, -1, &bm), MJ_ERR_INVALID_ARG, "num_tokens -1");
    expect_error(mj_mega_moe_block_m(&c, 4097, &bm), MJ_ERR_INVALID_ARG, "num_tokens 4097");
    expect_error(mj_mega_moe_block_m(&c, 1, NULL), MJ_ERR_INVALID_ARG, "block_m is NULL");
}

static void expect_kernels(mj_manifest *m, size_t count, size_t mega, const char *mega_first) {
    assert_int_equal(mj_manifest_kernel_count(m), count);
    size_t n = 0;
    const char *first = NULL;
    for (size_t i = 0; i < count; i++) {
        const char *d = mj_manifest_kernel_describe(m, i);
        if (strncmp(d, "mega_moe.main<", 14) != 0) continue;
        if (!first) first = d;
        assert_non_null(strstr(d, "> sm_90a"));
        n++;
    }
    assert_int_equal(n, mega);
    if (mega_first) assert_string_equal(first, mega_first);
}

static void test_manifest_presets(void **state) {
    (void)state;
    static const struct {
        const char *preset;
        const char *first;
        size_t mega; /* BLOCK_M 8 .. 128 with BF16 or MXFP8 weights or beside a shared
                      * expert, .. 160 for E2M1 weights; gpt-oss's 8-token tiles in one
                      * CTA an SM and in two */
    } want[] = {
        {"deepseek-v3-ep8",
         "mega_moe.main<H=7168,I=2048,E=256,K=8,R=8,T=4096,weight=mxfp8,dispatch=mxfp8,l2=mxfp8,"
         "act=swiglu,clamp=0,act_p0=1,act_p1=0,bm=8,stage_k=128,stages=6,sms=132,ctas=1,sys=1,"
         "bias=0,shared=2048,shared_fmt=mxfp8> sm_90a",
         5},
        {"kimi-k2-ep8",
         "mega_moe.main<H=7168,I=2048,E=384,K=8,R=8,T=4096,weight=mxfp4,dispatch=mxfp8,l2=mxfp8,"
         "act=swiglu,clamp=0,act_p0=1,act_p1=0,bm=8,stage_k=128,stages=8,sms=132,ctas=1,sys=1,"
         "bias=0,shared=2048,shared_fmt=mxfp8> sm_90a",
         5},
        {"qwen3-235b-ep4",
         "mega_moe.main<H=4096,I=1536,E=128,K=8,R=4,T=4096,weight=nvfp4,dispatch=nvfp4,l2=nvfp4,"
         "act=swiglu,clamp=0,act_p0=1,act_p1=0,bm=8,stage_k=128,stages=8,sms=132,ctas=1,sys=1,"
         "bias=0,shared=0,shared_fmt=bf16> sm_90a",
         6},
        {"gpt-oss-120b-ep1",
         "mega_moe.main<H=2880,I=2880,E=128,K=4,R=1,T=8192,weight=mxfp4,dispatch=bf16,l2=bf16,"
         "act=swigluoai,clamp=7,act_p0=1.702,act_p1=1,bm=8,stage_k=64,stages=8,sms=132,ctas=1,sys="
         "0,bias=1,shared=0,shared_fmt=bf16> sm_90a",
         7},
        {"glm-4.5-ep8",
         "mega_moe.main<H=5120,I=1536,E=160,K=8,R=8,T=4096,weight=mxfp8,dispatch=mxfp8,l2=mxfp8,"
         "act=swiglu,clamp=0,act_p0=1,act_p1=0,bm=8,stage_k=128,stages=6,sms=132,ctas=1,sys=1,"
         "bias=0,shared=1536,shared_fmt=mxfp8> sm_90a",
         5},
        {"minimax-m2-ep8",
         "mega_moe.main<H=3072,I=1536,E=256,K=8,R=8,T=4096,weight=mxfp8,dispatch=mxfp8,l2=mxfp8,"
         "act=swiglu,clamp=0,act_p0=1,act_p1=0,bm=8,stage_k=128,stages=6,sms=132,ctas=1,sys=1,"
         "bias=0,shared=0,shared_fmt=bf16> sm_90a",
         5},
        {"gpt-oss-20b-ep1",
         "mega_moe.main<H=2880,I=2880,E=32,K=4,R=1,T=8192,weight=mxfp4,dispatch=bf16,l2=bf16,"
         "act=swigluoai,clamp=7,act_p0=1.702,act_p1=1,bm=8,stage_k=64,stages=8,sms=132,ctas=1,sys="
         "0,bias=1,shared=0,shared_fmt=bf16> sm_90a",
         7},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        mj_manifest *m = NULL;
        assert_int_equal(mj_manifest_preset(want[i].preset, &m), MJ_OK);
        /* pre-dispatch main + check, the weight-image kernels (kimi-k2-ep8's
         * MXFP8 shared expert has one of its own; deepseek-v3-ep8's shares
         * the routed experts') and every BLOCK_M */
        const size_t images = strcmp(want[i].preset, "kimi-k2-ep8") == 0 ? 2 : 1;
        expect_kernels(m, 2 + images + want[i].mega, want[i].mega, want[i].first);
        assert_int_equal(mj_manifest_set_archs(m, "sm_90a,sm_100a"), MJ_OK);
        expect_kernels(m, 4 + images + want[i].mega, want[i].mega, want[i].first);
        assert_int_equal(mj_manifest_set_archs(m, "sm_100a"), MJ_OK);
        expect_kernels(m, 2, 0, NULL);
        mj_manifest_destroy(m);
    }
}

static const char kLayerHead[] =
    "{\"archs\": [\"sm_90a\"], \"layers\": [{\"hidden\": 1024, \"intermediate\": 256, ";

static mj_manifest *parse_layer(const char *rest) {
    char json[1024];
    snprintf(json, sizeof json, "%s%s}]}", kLayerHead, rest);
    mj_manifest *m = NULL;
    if (mj_manifest_parse(json, &m) != MJ_OK) fail_msg("%s: %s", json, mj_last_error());
    return m;
}

static void test_manifest_block_m_set(void **state) {
    (void)state;
    /* 16 experts, top-16, 16 ranks: mean = 16 t; t = 1 covers 20 -> 32 (16 is
     * skipped), t = 2 covers 37.7 -> 64 */
    mj_manifest *m = parse_layer(
        "\"experts\": 16, \"topk\": 16, \"ranks\": 16, \"max_tokens_per_rank\": 2,"
        " \"weight_format\": \"bf16\", \"dispatch_format\": \"bf16\", \"activation\": \"swiglu\","
        " \"num_sms\": 66");
#define BF16_LAYER                                                                                 \
    "mega_moe.main<H=1024,I=256,E=16,K=16,R=16,T=2,weight=bf16,dispatch=bf16,l2=bf16,act=swiglu,"  \
    "clamp=0,act_p0=1,act_p1=0,"
    expect_kernels(
        m, 6, 3,
        BF16_LAYER
        "bm=8,stage_k=64,stages=6,sms=66,ctas=1,sys=1,bias=0,shared=0,shared_fmt=bf16> sm_90a");
    /* the weight loader's image kernel comes first; rows of one kind share it */
    assert_string_equal(mj_manifest_kernel_describe(m, 2),
                        "mega_moe.image<weight=bf16,H=1024,I=256,stage_k=64,tb=4> sm_90a");
    assert_string_equal(
        mj_manifest_kernel_describe(m, 4), BF16_LAYER
        "bm=32,stage_k=64,stages=5,sms=66,ctas=1,sys=1,bias=0,shared=0,shared_fmt=bf16> sm_90a");
    assert_string_equal(
        mj_manifest_kernel_describe(m, 5), BF16_LAYER
        "bm=64,stage_k=64,stages=4,sms=66,ctas=1,sys=1,bias=0,shared=0,shared_fmt=bf16> sm_90a");
#undef BF16_LAYER
    mj_manifest_destroy(m);

    /* one token: only the smallest tile */
    m = parse_layer("\"experts\": 64, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 1,"
                    " \"weight_format\": \"nvfp4\", \"dispatch_format\": \"bf16\","
                    " \"activation\": \"swigluoai\", \"clamp\": 0.5");
    expect_kernels(m, 4, 1,
                   "mega_moe.main<H=1024,I=256,E=64,K=2,R=1,T=1,weight=nvfp4,dispatch=bf16,l2=bf16,"
                   "act=swigluoai,clamp=0.5,act_p0=1.702,act_p1=1,bm=8,stage_k=128,stages=8,sms="
                   "132,ctas=1,sys=0,bias=0,shared=0,shared_fmt=bf16> sm_90a");
    mj_manifest_destroy(m);

    /* a pair without a MegaMoE kernel still gets pre-dispatch */
    m = parse_layer("\"experts\": 64, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 64,"
                    " \"weight_format\": \"nvfp4\", \"dispatch_format\": \"mxfp8\","
                    " \"activation\": \"swiglu\"");
    expect_kernels(m, 2, 0, NULL);
    mj_manifest_destroy(m);
}

static mj_symm_config symm(int intermediate) {
    return (mj_symm_config){.struct_size = sizeof(mj_symm_config),
                            .hidden = 7168,
                            .num_experts = 256,
                            .num_topk = 8,
                            .max_tokens_per_rank = 4096,
                            .dispatch_format = MJ_FORMAT_MXFP8,
                            .num_ranks = 8,
                            .intermediate = intermediate};
}

static void test_symm_sizes(void **state) {
    (void)state;
    mj_symm_config c = symm(0);
    assert_int_equal(mj_symm_config_check(&c), MJ_OK);
    assert_int_equal(mj_symm_rank_bytes(&c), mj_layout_rank_bytes(7168, 8, 4096, MJ_FMT_MXFP8));
    c = symm(2048);
    assert_int_equal(mj_symm_config_check(&c), MJ_OK);
    size_t bytes = mj_symm_rank_bytes(&c);
    assert_int_equal(bytes, mj_layout_moe_rank_bytes(7168, 2048, 256, 8, 8, 4096, MJ_FMT_MXFP8, 0));
    assert_int_equal(bytes % MJ_RANK_ALIGN, 0);

    /* every MegaMoE region follows the input region, aligned and big enough */
    mj_moe_layout l = mj_layout_moe(7168, 2048, 256, 8, 8, 4096, MJ_FMT_MXFP8, 0);
    mj_u64 pairs = 4096ull * 8, p = 8ull * pairs + 32ull * MJ_MOE_MAX_BLOCK_M;
    assert_int_equal(l.pool_rows, p);
    assert_true(l.counters_offset >= mj_layout_input(7168, 8, 4096, MJ_FMT_MXFP8).end);
    /* banks: per-expert fill/ready, per-tile GEMM 1 counts at 8-token tiles, per-token arrivals */
    assert_true(l.bank.words >= 2 + 2 * 32 + p / 8 + 4096);
    assert_true(l.pool_offset >= l.counters_offset + (MJ_MOE_CNT_FIXED + 2 * l.bank.words) * 4);
    assert_true(l.pool_meta_offset >= l.pool_offset + p * 7168 * 2);
    assert_true(l.pool2_offset >= l.pool_meta_offset + p * MJ_MOE_META_WORDS * 4);
    assert_true(l.combine_offset >= l.pool2_offset + p * 2048 * 2);
    assert_int_equal(l.pool2_shared_offset, l.combine_offset); /* no shared expert */
    assert_true(l.end >= l.combine_offset + pairs * 7168 * 2);
    mj_u64 offsets[] = {l.counters_offset, l.pool_offset,    l.pool_meta_offset,
                        l.pool2_offset,    l.combine_offset, l.end};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++)
        assert_int_equal(offsets[i] % MJ_LAYOUT_ALIGN, 0);
    /* a tile of every size holds its token stages within the pool's rows */
    static const int bms[] = {8, 16, 32, 64, 128, 160};
    for (int i = 0; i < 6; i++) {
        mj_u64 tile = 7168 / 128 * (mj_u64)mj_moe_token_stage_bytes(bms[i], 128);
        assert_true(mj_moe_pool_tiles(256, 8, 8, 4096, 0, bms[i]) * tile <= p * 7168 * 2);
    }
    assert_true(bytes >= l.end && bytes - l.end < MJ_RANK_ALIGN);
    assert_true(bytes > mj_layout_rank_bytes(7168, 8, 4096, MJ_FMT_MXFP8));

    /* the smallest buffer still takes one whole rank stride */
    c = (mj_symm_config){sizeof c, 64, 2, 1, 1, MJ_FORMAT_BF16, 1, 64};
    assert_int_equal(mj_symm_config_check(&c), MJ_OK);
    assert_int_equal(mj_symm_rank_bytes(&c), MJ_RANK_ALIGN);

    c = symm(-64);
    expect_error(mj_symm_config_check(&c), MJ_ERR_INVALID_ARG, "intermediate -64");
    c = symm(100);
    expect_error(mj_symm_config_check(&c), MJ_ERR_INVALID_ARG, "intermediate 100");
}

/* Hidden sizes on the 64 grid but off the 256 one (gpt-oss-120b's 2880, the
 * smallest 64, 320) take every dispatch format, with or without the MegaMoE
 * regions; 2880 + 32 is refused, saying the rule. */
static void test_hidden_multiple_of_64(void **state) {
    (void)state;
    static const int hiddens[] = {64, 320, 2880};
    for (size_t i = 0; i < sizeof hiddens / sizeof hiddens[0]; i++)
        for (int fmt = 0; fmt < MJ_FORMAT_COUNT_; fmt++)
            for (int inter = 0; inter <= 2880; inter += 2880) {
                mj_symm_config c = {sizeof c, hiddens[i], 128, 4, 4096, (mj_format)fmt, 1, inter};
                if (mj_symm_config_check(&c) != MJ_OK)
                    fail_msg("hidden %d %s intermediate %d: %s", hiddens[i],
                             mj_format_name((mj_format)fmt), inter, mj_last_error());
            }
    for (int fmt = 0; fmt < MJ_FORMAT_COUNT_; fmt++) {
        mj_symm_config c = {sizeof c, 2880 + 32, 128, 4, 4096, (mj_format)fmt, 1, 0};
        expect_error(mj_symm_config_check(&c), MJ_ERR_INVALID_ARG,
                     "hidden 2912 must be a multiple of 64 in 64..8192");
        c.intermediate = 2880;
        expect_error(mj_symm_config_check(&c), MJ_ERR_INVALID_ARG,
                     "hidden 2912 must be a multiple of 64 in 64..8192");
    }

    /* gpt-oss-120b's layer in every format row: a spec at every tile size,
     * with a stage K dividing 2880 */
    for (int r = 0; r < mj_moe_format_count(); r++) {
        const mj_moe_format_row *row = mj_moe_format_at(r);
        mj_moe_config c = MJ_MOE_CONFIG_INIT;
        c.hidden = c.intermediate = 2880;
        c.num_experts = 128;
        c.num_topk = 4;
        c.num_ranks = 1;
        c.max_tokens_per_rank = 8192;
        c.weight_format = (mj_format)row->weight_fmt;
        c.dispatch_format = (mj_format)row->dispatch_fmt;
        c.activation = MJ_ACTIVATION_SWIGLUOAI;
        c.clamp = 7.0f;
        if (mj_moe_config_check(&c, NULL) != MJ_OK) fail_msg("%s: %s", row->name, mj_last_error());
        for (int bm = 8; bm <= mj_moe_max_block_m(row); bm *= 2) {
            mj_kernel_spec s;
            if (mj_mega_moe_spec(&c, bm, 132, 0, MJ_ARCH_SM90A, &s) != MJ_OK)
                fail_msg("%s bm=%d: %s", row->name, bm, mj_last_error());
            const int stage_k = s.params[MJ_MOE_PARAM_STAGE_K];
            assert_true(stage_k % 64 == 0 && 2880 % stage_k == 0);
        }
    }
}

/* The input region at hidden sizes off the 256 grid: x rows are whole 16-byte
 * chunks (the kernels' vector loads and stores), scale rows are packed, and
 * every region starts aligned past the one before it. */
static void test_input_layout_multiple_of_64(void **state) {
    (void)state;
    static const struct {
        int hidden, fmt;
        mj_u64 x_row, sf_row;
    } want[] = {
        {2880, MJ_FMT_BF16, 5760, 0},   {2880, MJ_FMT_MXFP8, 2880, 90},
        {2880, MJ_FMT_MXFP4, 1440, 90}, {2880, MJ_FMT_NVFP4, 1440, 180},
        {64, MJ_FMT_MXFP8, 64, 2},      {64, MJ_FMT_MXFP4, 32, 2},
        {64, MJ_FMT_NVFP4, 32, 4},      {320, MJ_FMT_MXFP4, 160, 10},
        {320, MJ_FMT_NVFP4, 160, 20},
    };
    const mj_u64 p = 4099; /* odd, so a row size that breaks alignment shows in the next region */
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const mj_input_layout l = mj_layout_input(want[i].hidden, 4, (int)p, want[i].fmt);
        assert_int_equal(l.x_row_bytes, want[i].x_row);
        assert_int_equal(l.sf_row_bytes, want[i].sf_row);
        assert_int_equal(l.x_row_bytes % 16, 0);
        assert_true(l.sf_offset >= l.x_offset + p * l.x_row_bytes);
        assert_true(l.topk_idx_offset >= l.sf_offset + p * l.sf_row_bytes);
        assert_true(l.topk_w_offset >= l.topk_idx_offset + p * 4 * 4);
        assert_true(l.x_scales_offset >= l.topk_w_offset + p * 4 * 4);
        assert_true(l.end >= l.x_scales_offset + (want[i].fmt == MJ_FMT_NVFP4 ? p * 4 : 0));
        const mj_u64 offsets[] = {l.x_offset,      l.sf_offset,       l.topk_idx_offset,
                                  l.topk_w_offset, l.x_scales_offset, l.end};
        for (size_t j = 0; j < sizeof offsets / sizeof offsets[0]; j++)
            assert_int_equal(offsets[j] % MJ_LAYOUT_ALIGN, 0);
    }
    /* The MegaMoE regions of gpt-oss-120b's layer: aligned, after the input
     * region, each token tile stage a whole number of 16-byte bulk-copy units. */
    for (int fmt = 0; fmt < MJ_FORMAT_COUNT_; fmt++) {
        const mj_moe_layout l = mj_layout_moe(2880, 2880, 128, 4, 1, 8192, fmt, 0);
        assert_true(l.counters_offset >= mj_layout_input(2880, 4, 8192, fmt).end);
        assert_true(l.pool_meta_offset >= l.pool_offset + l.pool_rows * 2880 * 2);
        assert_true(l.combine_offset >= l.pool2_offset + l.pool_rows * 2880 * 2);
        assert_true(l.end >= l.combine_offset + 4ull * 8192 * 2880 * 2);
        const mj_u64 offsets[] = {l.counters_offset, l.pool_offset,    l.pool_meta_offset,
                                  l.pool2_offset,    l.combine_offset, l.end};
        for (size_t j = 0; j < sizeof offsets / sizeof offsets[0]; j++)
            assert_int_equal(offsets[j] % MJ_LAYOUT_ALIGN, 0);
    }
    for (int bm = 8; bm <= MJ_MOE_MAX_BLOCK_M; bm *= 2)
        for (int stage_k = 64; stage_k <= 192; stage_k += 128)
            assert_int_equal(mj_moe_token_stage_bytes(bm, stage_k) % 16, 0);
}

static void test_weights_without_device(void **state) {
    (void)state;
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_disable = 1;
    o.arch = "sm_90a";
    mj_runtime *rt = NULL;
    assert_int_equal(mj_runtime_create(&rt, &o), MJ_OK);
    mj_moe_config c = good();
    mj_weights *w = (mj_weights *)&c;
    expect_error(mj_weights_create(NULL, &c, &w), MJ_ERR_INVALID_ARG, "NULL argument");
    expect_error(mj_weights_create(rt, &c, NULL), MJ_ERR_INVALID_ARG, "NULL argument");
    c.clamp = -2.0f;
    expect_error(mj_weights_create(rt, &c, &w), MJ_ERR_INVALID_ARG, "clamp -2");
    assert_null(w);
    c = good();
    c.num_ranks = 3;
    expect_error(mj_weights_create(rt, &c, &w), MJ_ERR_INVALID_ARG, "num_experts 256");
    c = good();
    /* Only the no-device statuses need a machine without a GPU. */
    const int no_device = !mj_runtime_has_device(rt);
    if (!no_device) printf("note: a GPU is present: the no-device statuses are not checked\n");
    if (no_device) {
        assert_int_equal(mj_weights_create(rt, &c, &w), MJ_ERR_NO_DEVICE);
        assert_null(w);
    }
    mj_weights_destroy(NULL);

    expect_error(mj_weights_load(NULL, 0, MJ_PROJ_GATE, &c, &c, 0), MJ_ERR_INVALID_ARG,
                 "weights are NULL");
    expect_error(mj_weights_set_alphas(NULL, 0, 1, 1, 1, 1), MJ_ERR_INVALID_ARG,
                 "weights are NULL");
    expect_error(mj_weights_load_bias(NULL, 0, MJ_PROJ_DOWN, NULL, 0), MJ_ERR_INVALID_ARG,
                 "weights are NULL");
    int32_t y;
    expect_error(mj_mega_moe(rt, NULL, NULL, &y, 1, NULL, NULL), MJ_ERR_INVALID_ARG,
                 "NULL runtime, buffer or weights");
    mj_kernel *k;
    mj_launch_config lc;
    mj_moe_args args;
    expect_error(mj_mega_moe_prepare(rt, NULL, NULL, &y, 1, NULL, NULL, &k, &lc, NULL),
                 MJ_ERR_INVALID_ARG, "NULL output");
    expect_error(mj_mega_moe_prepare(rt, NULL, NULL, &y, 1, NULL, NULL, &k, &lc, &args),
                 MJ_ERR_INVALID_ARG, "NULL runtime, buffer or weights");
    mj_symm_buffer *buf = (mj_symm_buffer *)&c;
    mj_symm_config sc = symm(2048);
    if (no_device) {
        assert_int_equal(mj_symm_buffer_create(rt, &sc, &buf), MJ_ERR_NO_DEVICE);
        assert_null(buf);
    }
    sc.intermediate = -1;
    expect_error(mj_symm_buffer_create(rt, &sc, &buf), MJ_ERR_INVALID_ARG, "intermediate -1");
    mj_runtime_destroy(rt);
}

/* mj_moe_forward's checks on a buffer and weights built by hand (their
 * creation needs a GPU): every bad argument of either step is refused with
 * the status and sentence of the step it belongs to, before anything touches
 * a device. Without a GPU the sentence is compared with the one the two
 * separate calls give; valid arguments then reach the device and fail there. */
typedef struct forward_args {
    mj_runtime *rt;
    struct mj_symm_buffer *buf;
    struct mj_weights *w;
    const void *x;
    const int32_t *ids;
    const float *tw;
    void *y;
    int num_tokens;
} forward_args;

static mj_status forward(const forward_args *a) {
    return mj_moe_forward(a->rt, a->buf, a->w, a->x, a->ids, a->tw, NULL, a->y, a->num_tokens, NULL,
                          NULL);
}

/* mj_moe_forward(a) fails with `want`, its sentence holding `needle`; without a
 * device that sentence is the one of the first of mj_pre_dispatch, mj_mega_moe
 * that refuses a (with one, the step a would pass might launch). */
static void expect_like_two_calls(const forward_args *a, mj_status want, const char *needle) {
    expect_error(forward(a), want, needle);
    char got[1024];
    snprintf(got, sizeof got, "%s", mj_last_error());
    if (mj_runtime_has_device(a->rt)) return;
    mj_status st = mj_pre_dispatch(a->rt, a->buf, a->w->cfg.rank, a->x, a->ids, a->tw, NULL,
                                   a->num_tokens, NULL);
    if (st != MJ_ERR_INVALID_ARG)
        st = mj_mega_moe(a->rt, a->buf, a->w, a->y, a->num_tokens, NULL, NULL);
    assert_int_equal(st, want);
    assert_string_equal(got, mj_last_error());
}

static void test_moe_forward_checks(void **state) {
    (void)state;
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_disable = 1;
    o.arch = "sm_90a";
    mj_runtime *rt = NULL, *other = NULL, *hopper_less = NULL;
    assert_int_equal(mj_runtime_create(&rt, &o), MJ_OK);
    assert_int_equal(mj_runtime_create(&other, &o), MJ_OK);
    o.arch = "sm_100a";
    assert_int_equal(mj_runtime_create(&hopper_less, &o), MJ_OK);
    const int no_device = !mj_runtime_has_device(rt);

    mj_moe_config c = good(); /* rank 3 of 8: 32 local experts */
    unsigned char loaded[32 * MJ_MOE_NUM_PROJECTIONS];
    memset(loaded, 1, sizeof loaded);
    struct mj_weights w = {.rt = rt, .cfg = c, .local_experts = 32, .loaded = loaded};
    struct mj_symm_buffer b = {.rt = rt, .cfg = mj_symm_config_of_moe(&c), .rank = -1};
    b.num_sms = mj_runtime_family_sms(rt, MJ_FAMILY_MEGA_MOE);
    int32_t ids[8] = {0};
    float tw[8] = {0};
    unsigned short x[8] = {0}, y[8] = {0}; /* never read: every call fails before a launch */
    const forward_args good_args = {rt, &b, &w, x, ids, tw, y, 1};
    const struct mj_symm_buffer good_buffer = b;
    const struct mj_weights good_weights = w;
    forward_args a;
    /* Each case changes the good arguments, buffer or weights, then restores them. */
#define CASE(change, want, needle)                                                                 \
    do {                                                                                           \
        a = good_args;                                                                             \
        change;                                                                                    \
        expect_like_two_calls(&a, want, needle);                                                   \
        b = good_buffer;                                                                           \
        w = good_weights;                                                                          \
        memset(loaded, 1, sizeof loaded);                                                          \
    } while (0)
    const char *no_objects = "mj_moe_forward: NULL runtime, buffer or weights";
    a = good_args;
    a.rt = NULL;
    expect_error(forward(&a), MJ_ERR_INVALID_ARG, no_objects);
    a = good_args;
    a.buf = NULL;
    expect_error(forward(&a), MJ_ERR_INVALID_ARG, no_objects);
    a = good_args;
    a.w = NULL;
    expect_error(forward(&a), MJ_ERR_INVALID_ARG, no_objects);

    /* pre-dispatch's checks, into the weights' rank */
    CASE(a.rt = other, MJ_ERR_INVALID_ARG,
         "mj_pre_dispatch: the buffer belongs to another runtime");
    CASE(a.num_tokens = -1, MJ_ERR_INVALID_ARG, "mj_pre_dispatch: -1 tokens outside 0..4096");
    CASE(a.num_tokens = 4097, MJ_ERR_INVALID_ARG, "mj_pre_dispatch: 4097 tokens outside 0..4096");
    CASE(a.x = NULL, MJ_ERR_INVALID_ARG, "x, topk_ids or topk_weights is NULL");
    CASE(a.ids = NULL, MJ_ERR_INVALID_ARG, "x, topk_ids or topk_weights is NULL");
    CASE(a.tw = NULL, MJ_ERR_INVALID_ARG, "x, topk_ids or topk_weights is NULL");
    CASE(b.cfg.num_ranks = 2, MJ_ERR_INVALID_ARG, "mj_pre_dispatch: rank 3 outside 0..1");

    /* MegaMoE's checks */
    CASE(w.rt = other, MJ_ERR_INVALID_ARG, "the buffer or the weights belong to another runtime");
    CASE(a.y = NULL, MJ_ERR_INVALID_ARG, "mj_mega_moe: y is NULL");
    CASE(b.cfg.intermediate = 0, MJ_ERR_INVALID_ARG, "has no MegaMoE regions");
    CASE(b.cfg.hidden = 4096, MJ_ERR_INVALID_ARG, "the symmetric buffer's hidden is 4096");
    CASE(b.rank = 2, MJ_ERR_INVALID_ARG, "this process is rank 2 of the symmetric buffer");
    CASE((loaded[1 * MJ_MOE_NUM_PROJECTIONS + MJ_PROJ_UP] = 0, w.projections_missing = 1),
         MJ_ERR_INVALID_ARG, "missing weights/scales for local expert 1 projection up");
    CASE((a.rt = b.rt = w.rt = hopper_less), MJ_ERR_UNSUPPORTED,
         "mj_mega_moe: no kernel for sm_100a");

    /* every argument valid: only the device is missing */
    if (!no_device) printf("note: a GPU is present: the calls that reach it are not checked\n");
    if (no_device) {
        const char *no_gpu = "no CUDA device";
        CASE((void)0, MJ_ERR_NO_DEVICE, no_gpu);
        CASE((a.num_tokens = 0, a.x = NULL, a.ids = NULL, a.tw = NULL, a.y = NULL),
             MJ_ERR_NO_DEVICE, no_gpu);
        CASE(a.num_tokens = 4096, MJ_ERR_NO_DEVICE, no_gpu);
    }
#undef CASE
    mj_runtime_destroy(hopper_less);
    mj_runtime_destroy(other);
    mj_runtime_destroy(rt);
}

/* The manifest accepts exactly the shapes the API accepts, and a rejection
 * names a field: each field in turn takes values at and past every limit. */
static void test_manifest_accepts_what_the_api_accepts(void **state) {
    (void)state;
    static const char *const fields[] = {"hidden", "intermediate", "experts",
                                         "topk",   "ranks",        "max_tokens_per_rank"};
    static const long long values[] = {
        -64,  0,     1,     2,       8,       32,         33,         64,         65,
        72,   73,    128,   2880,    2944,    3072,       4096,       4097,       8192,
        8448, 32768, 32832, 1048576, 1048577, 2147483520, 2147483647, 4294967296, 1LL << 50};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
            long long shape[6] = {1024, 256, 16, 2, 2, 64};
            shape[f] = values[i];
            mj_moe_config c = good();
            c.rank = 0;
            c.hidden = (int)shape[0];
            c.intermediate = (int)shape[1];
            c.num_experts = (int)shape[2];
            c.num_topk = (int)shape[3];
            c.num_ranks = (int)shape[4];
            c.max_tokens_per_rank = (int)shape[5];
            int fits_int = values[i] == (int)values[i];
            int api_ok = fits_int && mj_moe_config_check(&c, NULL) == MJ_OK;
            char json[1024];
            snprintf(json, sizeof json,
                     "{\"archs\": [\"sm_90a\"], \"layers\": [{\"hidden\": %lld, "
                     "\"intermediate\": %lld, \"experts\": %lld, \"topk\": %lld, \"ranks\": "
                     "%lld, \"max_tokens_per_rank\": %lld, \"weight_format\": \"mxfp4\", "
                     "\"dispatch_format\": \"mxfp8\", \"activation\": \"swiglu\"}]}",
                     shape[0], shape[1], shape[2], shape[3], shape[4], shape[5]);
            mj_manifest *m = NULL;
            int manifest_ok = mj_manifest_parse(json, &m) == MJ_OK;
            /* The field changed, or the one it now contradicts (ranks 32: experts). */
            int named = 0;
            for (size_t g = 0; g < sizeof fields / sizeof fields[0]; g++) {
                char prefix[64];
                snprintf(prefix, sizeof prefix, "manifest: layers[0].%s: ", fields[g]);
                named |= strstr(mj_last_error(), prefix) != NULL;
            }
            if (manifest_ok != api_ok)
                fail_msg("%s = %lld: the API %s it, the manifest %s it (%s)", fields[f], values[i],
                         api_ok ? "accepts" : "rejects", manifest_ok ? "accepts" : "rejects",
                         mj_last_error());
            if (!manifest_ok && !named)
                fail_msg("%s = %lld: \"%s\" does not name the field", fields[f], values[i],
                         mj_last_error());
            mj_manifest_destroy(m);
        }
    }
}

/* A layout too big for any device, and values no int holds, are rejected
 * while parsing, before any kernel is enumerated or compiled. */
static void test_manifest_bounds(void **state) {
    (void)state;
    static const struct {
        const char *fields;
        const char *message;
    } cases[] = {
        {"\"hidden\": 8192, \"intermediate\": 32768, \"experts\": 4096, \"topk\": 64, "
         "\"ranks\": 64, \"max_tokens_per_rank\": 1048576",
         "layers[0].max_tokens_per_rank: must be smaller: one rank's symmetric buffer"},
        {"\"hidden\": 1e300, \"intermediate\": 256, \"experts\": 8, \"topk\": 2, "
         "\"ranks\": 1, \"max_tokens_per_rank\": 16",
         "layers[0].hidden: must be an integer"},
        {"\"hidden\": 1024, \"intermediate\": 256, \"experts\": 8, \"topk\": 2, "
         "\"ranks\": 1, \"max_tokens_per_rank\": 16, \"num_sms\": 2147483647",
         "layers[0].num_sms: must be in 0..1024"},
        {"\"hidden\": 1024, \"intermediate\": 256, \"experts\": 64, \"topk\": 64, "
         "\"ranks\": 1, \"max_tokens_per_rank\": 16",
         "layers[0].topk: must be at most 32 at hidden 1024"},
        {"\"hidden\": 1024, \"intermediate\": 256, \"experts\": 8, \"topk\": 2, "
         "\"ranks\": 1, \"max_tokens_per_rank\": 16, \"clamp\": 1e300",
         "layers[0].clamp: must be a positive number"},
        /* positive, but 0 as a float: the kernels would see no clamp */
        {"\"hidden\": 1024, \"intermediate\": 256, \"experts\": 8, \"topk\": 2, "
         "\"ranks\": 1, \"max_tokens_per_rank\": 16, \"clamp\": 1e-50",
         "layers[0].clamp: must be a positive number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"archs\": [\"sm_90a\"], \"layers\": [{%s, \"weight_format\": \"bf16\", "
                 "\"dispatch_format\": \"bf16\", \"activation\": \"swiglu\"}]}",
                 cases[i].fields);
        mj_manifest *m = NULL;
        expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG, cases[i].message);
        assert_null(m);
    }
}

/* situ is an activation the API has, so a manifest has it too; it takes no clamp. */
static void test_manifest_situ(void **state) {
    (void)state;
    static const char head[] =
        "{\"archs\": [\"sm_90a\"], \"layers\": [{\"hidden\": 1024, \"intermediate\": 256, "
        "\"experts\": 8, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 16, "
        "\"weight_format\": \"bf16\", \"dispatch_format\": \"bf16\", \"activation\": \"situ\"";
    char json[1024];
    snprintf(json, sizeof json, "%s}]}", head);
    mj_manifest *m = NULL;
    assert_int_equal(mj_manifest_parse(json, &m), MJ_OK);
    int situ = 0;
    for (size_t i = 0; i < mj_manifest_kernel_count(m); i++)
        situ += strstr(mj_manifest_kernel_describe(m, i), ",act=situ,") != NULL;
    assert_true(situ >= 1);
    mj_manifest_destroy(m);
    snprintf(json, sizeof json, "%s, \"clamp\": 7.0}]}", head);
    expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG,
                 "layers[0].clamp: only swiglu and swigluoai take a clamp (activation is situ)");
    snprintf(json, sizeof json, "%s, \"name\": \"bad\xff\"}]}", head);
    expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG,
                 "manifest: layers[0].name: is not valid UTF-8");
}

/* A fused shared expert: which formats fuse into which row (and where its
 * stages fit), its size rule, its regions in the buffer, its specs. */
static void test_shared_expert(void **state) {
    (void)state;
    mj_moe_config c = good(); /* mxfp4-a8 */
    c.shared_intermediate = 2048;
    c.shared_format = MJ_FORMAT_NVFP4;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG,
                 "shared_format nvfp4: a shared expert fuses into the mxfp4-a8 row in mxfp8 only");
    c.shared_format = MJ_FORMAT_MXFP8; /* its own K loop, in tasks of two blocks */
    assert_int_equal(mj_moe_config_check(&c, NULL), MJ_OK);
    /* The stage K depends on the experts and ranks: a partial config has none,
     * and the shared check says so instead of passing it. */
    mj_moe_config partial = c;
    partial.num_ranks = 0;
    expect_error(mj_moe_shared_check(&partial, mj_moe_format_by_name("mxfp4-a8"), ""),
                 MJ_ERR_INVALID_ARG, "shared_intermediate 2048: the layer has no stage K");
    mj_moe_shared_geometry g = mj_moe_shared_geometry_for(&c);
    assert_true(g.task_blocks == 2 && g.stage_k == 128);
    c.dispatch_format = MJ_FORMAT_BF16; /* mxfp4-a16: the same geometry */
    assert_int_equal(mj_moe_config_check(&c, NULL), MJ_OK);
    g = mj_moe_shared_geometry_for(&c);
    assert_true(g.task_blocks == 2 && g.stage_k == 128);
    /* 160-token tiles take no shared expert: the heuristic stops at 128 */
    int bm = 0;
    assert_int_equal(mj_mega_moe_block_m(&c, 4096, &bm), MJ_OK);
    assert_int_equal(bm, 128);
    mj_moe_config no_shared = good();
    no_shared.dispatch_format = MJ_FORMAT_BF16;
    assert_int_equal(mj_mega_moe_block_m(&no_shared, 4096, &bm), MJ_OK);
    assert_int_equal(bm, 160);
    c.block_m = 160;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG,
                 "block_m 160 takes no fused shared expert (shared_intermediate 2048)");
    c.block_m = 0;
    c.weight_format = MJ_FORMAT_NVFP4;
    c.dispatch_format = MJ_FORMAT_NVFP4;
    c.shared_format = MJ_FORMAT_MXFP4;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG, "in bf16 or mxfp8 only");
    for (int d = 0; d < 2; d++) { /* nvfp4 and nvfp4-a16 */
        c.dispatch_format = d ? MJ_FORMAT_BF16 : MJ_FORMAT_NVFP4;
        c.shared_format = MJ_FORMAT_MXFP8;
        assert_int_equal(mj_moe_config_check(&c, NULL), MJ_OK);
        c.shared_format =
            MJ_FORMAT_BF16; /* in half stages: 2 x 64 x 64 BF16 <= 4 x 64 x 128 NVFP4 */
        assert_int_equal(mj_moe_config_check(&c, NULL), MJ_OK);
        g = mj_moe_shared_geometry_for(&c);
        assert_true(g.task_blocks == 2 && g.stage_k == 64);
        mj_kernel_spec image;
        assert_int_equal(mj_mega_moe_image_spec(&c, 1, MJ_ARCH_SM90A, &image), MJ_OK);
        assert_int_equal(image.params[MJ_MOE_IMAGE_PARAM_STAGE_K], 64);
        assert_int_equal(image.params[MJ_MOE_IMAGE_PARAM_TASK_BLOCKS], 2);
    }
    /* gpt-oss's shape streams stages of K 64: no half of one holds whole
     * 64-element pieces of tokens, and two BF16 blocks of 64 outweigh four
     * NVFP4 ones */
    mj_moe_config oss = c;
    oss.hidden = oss.intermediate = 2880;
    oss.num_experts = 128;
    oss.num_topk = 4;
    oss.shared_intermediate = 2880;
    expect_error(mj_moe_config_check(&oss, NULL), MJ_ERR_UNSUPPORTED,
                 "shared_format bf16: no stage of the shared expert fits the ring slot of a routed "
                 "nvfp4-a16 task at this layer's stage K of 64 (hidden 2880, intermediate 2880)");
    oss.shared_format = MJ_FORMAT_MXFP8;
    assert_int_equal(mj_moe_config_check(&oss, NULL), MJ_OK);
    c.weight_format = MJ_FORMAT_MXFP8;
    c.dispatch_format = MJ_FORMAT_MXFP8;
    c.shared_format = MJ_FORMAT_MXFP8;
    assert_int_equal(mj_moe_config_check(&c, NULL), MJ_OK);
    c.shared_intermediate = 4096; /* two experts' worth */
    assert_int_equal(mj_moe_config_check(&c, NULL), MJ_OK);
    c.shared_intermediate = 3072;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG,
                 "shared_intermediate 3072 must be 0 (no shared expert) or a multiple of "
                 "intermediate (2048)");
    c.shared_intermediate = -2048;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG, "shared_intermediate -2048");
    c.shared_intermediate = 0; /* no shared expert: its format must stay unset */
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG,
                 "shared_format mxfp8: there is no shared expert");
    c.weight_format = c.dispatch_format = c.shared_format = MJ_FORMAT_BF16;
    c.shared_intermediate = 2048;
    assert_int_equal(mj_moe_config_check(&c, NULL), MJ_OK);

    /* the spec carries it (a kernel of its own), the image kernel of the
     * shared expert has its width and the routed stage K */
    mj_kernel_spec s, plain, image, shared_image;
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    assert_int_equal(s.params[MJ_MOE_PARAM_SHARED_INTER], 2048);
    c.shared_intermediate = 0;
    c.shared_format = MJ_FORMAT_BF16;
    assert_int_equal(spec_of(&c, &plain), MJ_OK);
    assert_int_equal(plain.params[MJ_MOE_PARAM_SHARED_INTER], 0);
    expect_error(mj_mega_moe_image_spec(&c, 1, MJ_ARCH_SM90A, &shared_image), MJ_ERR_INVALID_ARG,
                 "no shared expert");
    c.shared_intermediate = 4096;
    assert_int_equal(mj_mega_moe_image_spec(&c, 0, MJ_ARCH_SM90A, &image), MJ_OK);
    assert_int_equal(mj_mega_moe_image_spec(&c, 1, MJ_ARCH_SM90A, &shared_image), MJ_OK);
    assert_int_equal(shared_image.params[MJ_MOE_IMAGE_PARAM_INTERMEDIATE], 4096);
    assert_int_equal(shared_image.params[MJ_MOE_IMAGE_PARAM_STAGE_K],
                     image.params[MJ_MOE_IMAGE_PARAM_STAGE_K]);

    /* the buffer: its regions after the routed ones, and a buffer for the
     * layer without them is refused by name */
    const mj_symm_config with = mj_symm_config_of_moe(&c);
    assert_int_equal(with.shared_intermediate, 4096);
    assert_int_equal(mj_symm_config_check(&with), MJ_OK);
    const mj_moe_layout l0 = mj_layout_moe(7168, 2048, 256, 8, 8, 4096, MJ_FMT_BF16, 0),
                        l = mj_layout_moe(7168, 2048, 256, 8, 8, 4096, MJ_FMT_BF16, 4096);
    assert_int_equal(l.pool_rows, l0.pool_rows + 4096 + MJ_MOE_MAX_BLOCK_M);
    assert_int_equal(l.bank.ready, l0.bank.ready + 1);
    assert_true(l.pool2_shared_offset >= l.pool2_offset + l0.pool_rows * 2048 * 2);
    assert_true(l.combine_offset >= l.pool2_shared_offset + (4096ull + 128) * 4096 * 2);
    assert_true(l.end >= l.combine_offset + 9ull * 4096 * 7168 * 2);
    assert_true(mj_symm_rank_bytes(&with) >= l.end);
    mj_symm_config without = with;
    without.shared_intermediate = 0;
    long long a, b;
    assert_string_equal(mj_symm_config_mismatch(&without, &with, &a, &b), "shared_intermediate");
    assert_true(a == 0 && b == 4096);

    /* the shared routing entry takes shared memory of its own */
    mj_launch_config lc_plain, lc_shared;
    mj_family_request req = {.buffer = &with, .layer = &c};
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    mj_mega_moe_family.launch_shape(&s, &req, &lc_shared);
    mj_mega_moe_family.launch_shape(&plain, &req, &lc_plain);
    assert_int_equal(lc_shared.smem_bytes, lc_plain.smem_bytes + 8);

    /* a manifest carries it, and names what is wrong */
    static const char head[] =
        "{\"archs\": [\"sm_90a\"], \"layers\": [{\"hidden\": 1024, \"intermediate\": 256, "
        "\"experts\": 8, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 64, "
        "\"weight_format\": \"mxfp8\", \"dispatch_format\": \"mxfp8\", \"activation\": "
        "\"swiglu\"";
    char json[512];
    mj_manifest *m = NULL;
    snprintf(json, sizeof json, "%s, \"shared_intermediate\": 512, \"shared_format\": \"mxfp8\"}]}",
             head);
    assert_int_equal(mj_manifest_parse(json, &m), MJ_OK);
    mj_manifest_destroy(m);
    snprintf(json, sizeof json, "%s, \"shared_intermediate\": 512}]}", head);
    expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG,
                 "manifest: layers[0].shared_format: missing");
    snprintf(json, sizeof json, "%s, \"shared_format\": \"mxfp8\"}]}", head);
    expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG,
                 "manifest: layers[0].shared_format: the layer has no shared expert");
    snprintf(json, sizeof json, "%s, \"shared_intermediate\": 384, \"shared_format\": \"mxfp8\"}]}",
             head);
    expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG,
                 "manifest: layers[0].shared_intermediate: must be 0 (no shared expert) or a "
                 "multiple of intermediate (256)");
    snprintf(json, sizeof json, "%s, \"shared_intermediate\": 256, \"shared_format\": \"nvfp4\"}]}",
             head);
    expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG,
                 "manifest: layers[0].shared_format nvfp4: a shared expert fuses into the mxfp8 "
                 "row in mxfp8 only");
}

/* A caller built against the header before unfold_mx_scales passes the
 * shorter struct: accepted, the field reads as its default; shorter still is
 * refused. */
static void test_config_of_the_first_version(void **state) {
    (void)state;
    mj_moe_config c = good(), ours;
    memset(&c.unfold_mx_scales, 0x7f, sizeof c.unfold_mx_scales); /* past the caller's struct */
    c.struct_size = offsetof(mj_moe_config, unfold_mx_scales);
    assert_int_equal(mj_moe_config_accept(&c, &ours, NULL), MJ_OK);
    assert_int_equal(ours.unfold_mx_scales, 0);
    assert_int_equal(ours.struct_size, sizeof ours);
    c.struct_size = offsetof(mj_moe_config, unfold_mx_scales) - 1;
    expect_error(mj_moe_config_accept(&c, &ours, NULL), MJ_ERR_INVALID_ARG,
                 "smaller than any version");
    /* a size between versions is no header's */
    c.struct_size = offsetof(mj_moe_config, unfold_mx_scales) + sizeof(int);
    expect_error(mj_moe_config_accept(&c, &ours, NULL), MJ_ERR_INVALID_ARG,
                 "mj_moe_config.struct_size is 60, the size of no version of the struct");
}

/* A manifest takes unfold_mx_scales as the API's config does: a boolean that
 * changes no kernel. */
static void test_manifest_unfold_mx_scales(void **state) {
    (void)state;
    static const char head[] =
        "{\"archs\": [\"sm_90a\"], \"layers\": [{\"hidden\": 1024, \"intermediate\": 256, "
        "\"experts\": 8, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 64, "
        "\"weight_format\": \"mxfp4\", \"dispatch_format\": \"mxfp8\", \"activation\": "
        "\"swiglu\"";
    static const char *const tails[] = {"}]}", ", \"unfold_mx_scales\": false}]}",
                                        ", \"unfold_mx_scales\": true}]}"};
    mj_manifest *first = NULL;
    for (int t = 0; t < 3; t++) {
        char json[1024];
        snprintf(json, sizeof json, "%s%s", head, tails[t]);
        mj_manifest *m = NULL;
        assert_int_equal(mj_manifest_parse(json, &m), MJ_OK);
        assert_true(mj_manifest_kernel_count(m) >= 4);
        if (!first) {
            first = m;
            continue;
        }
        assert_int_equal(mj_manifest_kernel_count(m), mj_manifest_kernel_count(first));
        for (size_t i = 0; i < mj_manifest_kernel_count(m); i++)
            assert_string_equal(mj_manifest_kernel_describe(m, i),
                                mj_manifest_kernel_describe(first, i));
        mj_manifest_destroy(m);
    }
    mj_manifest_destroy(first);
    char json[1024];
    snprintf(json, sizeof json, "%s, \"unfold_mx_scales\": 1}]}", head);
    mj_manifest *m = NULL;
    expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG,
                 "layers[0].unfold_mx_scales: must be true or false");
    assert_null(m);
}

/* The activation's parameters (mj_moe_config, 0 = standard) are kernel
 * constants: equal formulas share a spec, a parameter of another activation
 * is refused, and a manifest takes them as the API does. */
static void test_activation_params(void **state) {
    (void)state;
    mj_moe_config c = good();
    mj_kernel_spec s, other;
    c.swiglu_alpha = 1.5f;
    c.swiglu_beta = 0.25f;
    assert_int_equal(mj_moe_config_check(&c, NULL), MJ_OK);
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    assert_int_equal(s.params[MJ_MOE_PARAM_ACTIVATION], MJ_ACT_SWIGLU);
    assert_int_equal((uint32_t)s.params[MJ_MOE_PARAM_ACT_PARAM0_BITS], 0x3fc00000u);
    assert_int_equal((uint32_t)s.params[MJ_MOE_PARAM_ACT_PARAM1_BITS], 0x3e800000u);

    /* swiglu at exactly 1.702 and 1 is swigluoai's kernel */
    c.swiglu_alpha = 1.702f;
    c.swiglu_beta = 1.0f;
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    mj_moe_config oai = good();
    oai.activation = MJ_ACTIVATION_SWIGLUOAI;
    assert_int_equal(spec_of(&oai, &other), MJ_OK);
    assert_memory_equal(&s, &other, sizeof s);
    assert_int_equal(s.params[MJ_MOE_PARAM_ACTIVATION], MJ_ACT_SWIGLUOAI);

    /* 0 is the standard value, and -0 is 0 */
    c = good();
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    c.swiglu_alpha = 1.0f;
    c.swiglu_beta = -0.0f;
    assert_int_equal(spec_of(&c, &other), MJ_OK);
    assert_memory_equal(&s, &other, sizeof s);
    c = good();
    c.activation = MJ_ACTIVATION_SITU;
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    assert_int_equal((uint32_t)s.params[MJ_MOE_PARAM_ACT_PARAM0_BITS], 0x40800000u);
    assert_int_equal((uint32_t)s.params[MJ_MOE_PARAM_ACT_PARAM1_BITS], 0x41c80000u);
    c.situ_gate_beta = 4.0f;
    c.situ_up_beta = 25.0f;
    assert_int_equal(spec_of(&c, &other), MJ_OK);
    assert_memory_equal(&s, &other, sizeof s);
    c.situ_up_beta = 20.0f;
    assert_int_equal(spec_of(&c, &other), MJ_OK);
    assert_int_equal((uint32_t)other.params[MJ_MOE_PARAM_ACT_PARAM1_BITS], 0x41a00000u);

    /* refused: another activation's parameter, a non-finite or non-positive one */
    c = good();
    c.activation = MJ_ACTIVATION_SWIGLUOAI;
    c.swiglu_alpha = 2.0f;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG,
                 "swiglu_alpha: 2 is a parameter of swiglu only (activation is swigluoai; leave it "
                 "0); swigluoai is swiglu at alpha 1.702 and beta 1");
    c = good();
    c.situ_gate_beta = 4.0f;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG,
                 "situ_gate_beta: 4 is a parameter of situ only (activation is swiglu");
    c = good();
    c.swiglu_beta = NAN;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG,
                 "swiglu_beta: nan must be finite");
    c = good();
    c.activation = MJ_ACTIVATION_SITU;
    c.situ_up_beta = -1.0f;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG, "situ_up_beta: -1 must be > 0");

    /* A struct from the header before the parameters reads them as 0. That
     * header's struct ended with 4 bytes of padding, which hold anything and
     * now are swiglu_alpha. */
    mj_moe_config ours;
    const size_t v2_end = offsetof(mj_moe_config, unfold_mx_scales) + sizeof(int);
    const size_t v2_size =
        (v2_end + _Alignof(mj_moe_config) - 1) / _Alignof(mj_moe_config) * _Alignof(mj_moe_config);
    assert_true(v2_size > v2_end); /* the case this guards */
    if (sizeof(size_t) == 8) assert_int_equal(v2_size, 64);
    for (int act = 0; act < MJ_ACTIVATION_COUNT_; act++) {
        c = good();
        c.activation = (mj_activation)act;
        memset((char *)&c + v2_end, 0x7f, sizeof c - v2_end); /* padding and past the struct */
        c.struct_size = v2_size;
        assert_int_equal(mj_moe_config_accept(&c, &ours, NULL), MJ_OK);
        assert_true(ours.swiglu_alpha == 0 && ours.swiglu_beta == 0 && ours.situ_gate_beta == 0 &&
                    ours.situ_up_beta == 0 && !ours.expert_biases);
    }

    /* the manifest: the same values, the same kernel; the same refusals, by path */
    mj_manifest *m = parse_layer(
        "\"experts\": 8, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 1,"
        " \"weight_format\": \"bf16\", \"dispatch_format\": \"bf16\", \"activation\": \"swiglu\","
        " \"swiglu_alpha\": 1.702, \"swiglu_beta\": 1, \"clamp\": 7");
    expect_kernels(m, 4, 1,
                   "mega_moe.main<H=1024,I=256,E=8,K=2,R=1,T=1,weight=bf16,dispatch=bf16,l2=bf16,"
                   "act=swigluoai,clamp=7,act_p0=1.702,act_p1=1,bm=8,stage_k=64,stages=6,sms=132,"
                   "ctas=1,sys=0,bias=0,shared=0,shared_fmt=bf16> sm_90a");
    mj_manifest_destroy(m);
    m = parse_layer("\"experts\": 8, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 1,"
                    " \"weight_format\": \"bf16\", \"dispatch_format\": \"bf16\","
                    " \"activation\": \"situ\", \"situ_gate_beta\": 3, \"situ_up_beta\": 20");
    expect_kernels(m, 4, 1,
                   "mega_moe.main<H=1024,I=256,E=8,K=2,R=1,T=1,weight=bf16,dispatch=bf16,l2=bf16,"
                   "act=situ,clamp=0,act_p0=3,act_p1=20,bm=8,stage_k=64,stages=6,sms=132,"
                   "ctas=1,sys=0,bias=0,shared=0,shared_fmt=bf16> sm_90a");
    mj_manifest_destroy(m);
    static const struct {
        const char *tail, *needle;
    } bad[] = {
        {"\"swigluoai\", \"swiglu_beta\": 1",
         "manifest: layers[0].swiglu_beta: 1 is a parameter of swiglu only"},
        {"\"situ\", \"situ_gate_beta\": -4", "manifest: layers[0].situ_gate_beta: -4 must be > 0"},
        {"\"swiglu\", \"swiglu_alpha\": \"1\"",
         "manifest: layers[0].swiglu_alpha: must be a finite number"},
        {"\"swiglu\", \"swiglu_alpha\": 1e300",
         "manifest: layers[0].swiglu_alpha: must be a finite number"},
        {"\"situ\", \"situ_up_beta\": 1e-50",
         "manifest: layers[0].situ_up_beta: 1e-50 rounds to 0 as a float (0 means the standard "
         "value)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "%s\"experts\": 8, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 1, "
                 "\"weight_format\": \"bf16\", \"dispatch_format\": \"bf16\", \"activation\": "
                 "%s}]}",
                 kLayerHead, bad[i].tail);
        m = NULL;
        expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG, bad[i].needle);
        assert_null(m);
    }
}

/* Expert biases are a kernel parameter of the config (their values are
 * device data): on, off, refused values, the older struct, the manifest. */
static void test_expert_biases_config(void **state) {
    (void)state;
    mj_moe_config c = good();
    mj_kernel_spec s, other;
    assert_int_equal(spec_of(&c, &s), MJ_OK);
    assert_int_equal(s.params[MJ_MOE_PARAM_BIASES], 0);
    c.expert_biases = 1;
    assert_int_equal(spec_of(&c, &other), MJ_OK);
    assert_int_equal(other.params[MJ_MOE_PARAM_BIASES], 1);
    s.params[MJ_MOE_PARAM_BIASES] = 1; /* nothing else differs */
    assert_memory_equal(&s, &other, sizeof s);
    c.expert_biases = 2;
    expect_error(mj_moe_config_check(&c, NULL), MJ_ERR_INVALID_ARG,
                 "expert_biases 2 must be 0 or 1");

    static const char layer[] =
        "\"experts\": 8, \"topk\": 2, \"ranks\": 1, \"max_tokens_per_rank\": 1,"
        " \"weight_format\": \"mxfp4\", \"dispatch_format\": \"bf16\", \"activation\": "
        "\"swigluoai\", \"clamp\": 7, \"expert_biases\": ";
    char rest[512];
    snprintf(rest, sizeof rest, "%strue", layer);
    mj_manifest *m = parse_layer(rest);
    expect_kernels(m, 4, 1,
                   "mega_moe.main<H=1024,I=256,E=8,K=2,R=1,T=1,weight=mxfp4,dispatch=bf16,l2=bf16,"
                   "act=swigluoai,clamp=7,act_p0=1.702,act_p1=1,bm=8,stage_k=128,stages=8,sms=132,"
                   "ctas=1,sys=0,bias=1,shared=0,shared_fmt=bf16> sm_90a");
    mj_manifest_destroy(m);
    char json[1024];
    snprintf(json, sizeof json, "%s%s1}]}", kLayerHead, layer);
    m = NULL;
    expect_error(mj_manifest_parse(json, &m), MJ_ERR_INVALID_ARG,
                 "manifest: layers[0].expert_biases: must be true or false");
    assert_null(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expert_biases_config),
        cmocka_unit_test(test_activation_params),
        cmocka_unit_test(test_config_rejects_bad_values),
        cmocka_unit_test(test_spec_rejects_bad_launch_shape),
        cmocka_unit_test(test_manifest_unfold_mx_scales),
        cmocka_unit_test(test_config_of_the_first_version),
        cmocka_unit_test(test_spec_and_name),
        cmocka_unit_test(test_image_spec),
        cmocka_unit_test(test_limits_have_kernels),
        cmocka_unit_test(test_block_m),
        cmocka_unit_test(test_manifest_presets),
        cmocka_unit_test(test_manifest_block_m_set),
        cmocka_unit_test(test_manifest_accepts_what_the_api_accepts),
        cmocka_unit_test(test_manifest_bounds),
        cmocka_unit_test(test_manifest_situ),
        cmocka_unit_test(test_symm_sizes),
        cmocka_unit_test(test_shared_expert),
        cmocka_unit_test(test_hidden_multiple_of_64),
        cmocka_unit_test(test_input_layout_multiple_of_64),
        cmocka_unit_test(test_weights_without_device),
        cmocka_unit_test(test_moe_forward_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
