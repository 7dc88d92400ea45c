/* CUDA graphs, capture of a kernel not yet compiled, and the per-family settings. */
#include "tests/gpu/pre_dispatch/harness.h"

static int graph_replays(ctx *c, CUgraphExec exec, const region *g, int replays, int num_tokens) {
    poison_device(g);
    for (int i = 0; i < replays; i++)
        CU(cuGraphLaunch(exec, c->stream));
    CU(cuStreamSynchronize(c->stream));
    fetch(g, c->got);
    int ok = compare(g, &c->in, c->img, c->got, num_tokens);
    return check_slots(g, num_tokens, 0) && ok;
}

/* Capture after a warm-up; replays must equal the reference, and read the
 * input buffers' current contents. */
static void test_graph(ctx *c, mj_runtime *rt, const char *rt_name) {
    const int fmt = MJ_FMT_NVFP4, H = 7168;
    int P = g_quick ? 136 : MAX_ROWS, T = g_quick ? 129 : 4096;
    set_case("graph (%s): warm-up launch", rt_name);
    region g;
    mj_symm_buffer *buf = open_region(c, rt, fmt, H, P, &g);
    if (!buf) return;
    record(run_case(c, rt, &g, T, 1, 1));

    set_case("graph (%s): a warm launch compiles nothing", rt_name);
    mj_runtime_stats before, after;
    int ok = expect_ok(mj_runtime_get_stats(rt, &before), "mj_runtime_get_stats") &&
             expect_ok(launch(c, rt, &g, T, 1), "mj_pre_dispatch") &&
             expect_ok(mj_runtime_get_stats(rt, &after), "mj_runtime_get_stats");
    CU(cuStreamSynchronize(c->stream));
    if (ok) {
        ok &= expect_int((long long)after.compiles, (long long)before.compiles, "compiles");
        ok &= expect_int((long long)after.disk_hits, (long long)before.disk_hits, "disk_hits");
        if (after.memory_hits <= before.memory_hits) {
            printf("  memory_hits did not grow (%" PRIu64 ")\n", after.memory_hits);
            ok = 0;
        }
    }
    record(ok);

    set_case("graph (%s): capture", rt_name);
    poison_device(&g);
    CU(cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    mj_status st = launch(c, rt, &g, T, 1);
    CUgraph graph = NULL;
    CUresult er = cuStreamEndCapture(c->stream, &graph);
    ok = expect_ok(st, "mj_pre_dispatch while capturing");
    if (er != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(er, &name);
        printf("  cuStreamEndCapture -> %s (the launch did something illegal in capture)\n", name);
        ok = 0;
    }
    if (ok) {
        size_t nodes = 0;
        CU(cuGraphGetNodes(graph, NULL, &nodes));
        if (!nodes) {
            printf("  the captured graph is empty\n");
            ok = 0;
        }
    }
    CU(cuStreamSynchronize(c->stream));
    fetch(&g, c->got);
    ok &= all_poison(&g, c->got); /* capturing runs nothing */
    record(ok);
    if (!ok) {
        if (graph) cuGraphDestroy(graph);
        mj_symm_buffer_destroy(buf);
        return;
    }
    CUgraphExec exec;
    CU(cuGraphInstantiate(&exec, graph, 0));

    set_case("graph (%s): one replay", rt_name);
    record(graph_replays(c, exec, &g, 1, T));
    set_case("graph (%s): 100 replays, same result", rt_name);
    record(graph_replays(c, exec, &g, 100, T));
    set_case("graph (%s): replay reads new inputs in place", rt_name);
    gen_inputs(&c->in, H, T, 4);
    upload(c, &c->in, H, T);
    reference(c, &g, &c->in, c->img, T, 1);
    record(graph_replays(c, exec, &g, 1, T));

    CU(cuGraphExecDestroy(exec));
    CU(cuGraphDestroy(graph));
    mj_symm_buffer_destroy(buf);
}

void test_graphs(ctx *c) {
    test_graph(c, c->rt, "serving runtime");
    test_graph(c, c->rt_check, "check_device_inputs runtime");
}

void test_capture_uncompiled(ctx *c) {
    const int fmt = MJ_FMT_MXFP8, H = 2560, P = 64, T = 7;
    set_case("capture of an uncompiled spec -> MJ_ERR_CAPTURE naming the kernel");
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    opts.cache_disable = 1;
    mj_runtime *rt = NULL;
    if (!expect_ok(mj_runtime_create(&rt, &opts), "mj_runtime_create(cache_disable)")) {
        record(0);
        return;
    }
    region g;
    mj_symm_buffer *buf = open_region(c, rt, fmt, H, P, &g);
    if (!buf) {
        mj_runtime_destroy(rt);
        return;
    }
    gen_inputs(&c->in, H, T, 2);
    upload(c, &c->in, H, T);
    poison_device(&g);
    CU(cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    mj_status st = launch(c, rt, &g, T, 0);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mj_last_error());
    CUgraph graph = NULL;
    CUresult er = cuStreamEndCapture(c->stream, &graph);
    if (graph) CU(cuGraphDestroy(graph));
    int ok = expect_status(st, MJ_ERR_CAPTURE, "mj_pre_dispatch while capturing");
    if (!strstr(msg, "pre_dispatch")) {
        printf("  the message does not name the kernel (no \"pre_dispatch\"): %s\n", msg);
        ok = 0;
    }
    if (er != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(er, &name);
        printf("  cuStreamEndCapture -> %s (the refused call broke the capture)\n", name);
        ok = 0;
    }
    ok &= region_untouched(c, &g);
    record(ok);

    set_case("after the refused capture the same spec compiles and runs");
    record(run_case(c, rt, &g, T, 0, 2));
    mj_symm_buffer_destroy(buf);
    mj_runtime_destroy(rt);
}

static int check_family(mj_runtime *rt, int want_pd_sms, int want_moe_sms, int want_pd_pdl,
                        int want_moe_pdl) {
    int pd_sms = -1, moe_sms = -1, pd_pdl = -1, moe_pdl = -1;
    int ok = expect_ok(mj_family_get_num_sms(rt, MJ_FAMILY_PRE_DISPATCH, &pd_sms), "get sms") &
             expect_ok(mj_family_get_num_sms(rt, MJ_FAMILY_MEGA_MOE, &moe_sms), "get sms") &
             expect_ok(mj_family_get_pdl(rt, MJ_FAMILY_PRE_DISPATCH, &pd_pdl), "get pdl") &
             expect_ok(mj_family_get_pdl(rt, MJ_FAMILY_MEGA_MOE, &moe_pdl), "get pdl");
    if (want_pd_sms >= 0) ok &= expect_int(pd_sms, want_pd_sms, "pre_dispatch num_sms");
    if (want_moe_sms >= 0) ok &= expect_int(moe_sms, want_moe_sms, "mega_moe num_sms");
    if (want_pd_pdl >= 0) ok &= expect_int(pd_pdl, want_pd_pdl, "pre_dispatch pdl");
    if (want_moe_pdl >= 0) ok &= expect_int(moe_pdl, want_moe_pdl, "mega_moe pdl");
    return ok;
}

void test_family(ctx *c) {
    mj_runtime *rt = NULL;
    set_case("family settings");
    if (!expect_ok(mj_runtime_create(&rt, NULL), "mj_runtime_create")) {
        record(0);
        return;
    }
    const int PD = MJ_FAMILY_PRE_DISPATCH, MOE = MJ_FAMILY_MEGA_MOE;
    int moe_sms = c->device_sms < 100 ? c->device_sms : 100;
    int ok = expect_ok(mj_family_set_num_sms(rt, PD, 66), "set pre_dispatch sms 66") &
             expect_ok(mj_family_set_num_sms(rt, MOE, moe_sms), "set mega_moe sms");
    ok &= check_family(rt, 66, moe_sms, -1, -1);
    ok &= expect_ok(mj_family_set_num_sms(rt, PD, 0), "set pre_dispatch sms 0");
    ok &= check_family(rt, 0, moe_sms, -1, -1);
    ok &= expect_ok(mj_family_set_num_sms(rt, MOE, 0), "set mega_moe sms 0") &
          expect_ok(mj_family_set_num_sms(rt, PD, 66), "set pre_dispatch sms 66");
    ok &= check_family(rt, 66, 0, -1, -1);
    ok &= expect_status(mj_family_set_num_sms(rt, PD, -1), MJ_ERR_INVALID_ARG, "sms -1") &
          expect_status(mj_family_set_num_sms(rt, PD, c->device_sms + 1), MJ_ERR_INVALID_ARG,
                        "sms above the device's") &
          expect_status(mj_family_set_num_sms(rt, MJ_FAMILY_COUNT_, 1), MJ_ERR_INVALID_ARG,
                        "unknown family");
    ok &= check_family(rt, 66, 0, -1, -1);
    ok &= expect_ok(mj_family_set_pdl(rt, PD, 1), "set pre_dispatch pdl 1") &
          expect_ok(mj_family_set_pdl(rt, MOE, 0), "set mega_moe pdl 0");
    ok &= check_family(rt, 66, 0, 1, 0);
    ok &= expect_ok(mj_family_set_pdl(rt, MOE, 1), "set mega_moe pdl 1");
    ok &= check_family(rt, 66, 0, 1, 1);
    ok &= expect_ok(mj_family_set_pdl(rt, PD, 0), "set pre_dispatch pdl 0");
    ok &= check_family(rt, 66, 0, 0, 1);
    ok &= expect_status(mj_family_get_num_sms(rt, PD, NULL), MJ_ERR_INVALID_ARG, "NULL out");
    record(ok);

    struct {
        int sms, pdl, fmt, hidden, tokens;
    } runs[] = {
        {66, 1, MJ_FMT_NVFP4, 7168, g_quick ? 129 : 4096},
        {1, 0, MJ_FMT_MXFP4, 2880, g_quick ? 129 : 1000},
        {c->device_sms, 1, MJ_FMT_MXFP8, 4096, g_quick ? 129 : 4096},
    };
    int P = g_quick ? 136 : MAX_ROWS;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        set_case("pre_dispatch with num_sms %d pdl %d: %s hidden %d tokens %d", runs[i].sms,
                 runs[i].pdl, mj_format_name((mj_format)runs[i].fmt), runs[i].hidden,
                 runs[i].tokens);
        if (!expect_ok(mj_family_set_num_sms(rt, PD, runs[i].sms), "set sms") ||
            !expect_ok(mj_family_set_pdl(rt, PD, runs[i].pdl), "set pdl")) {
            record(0);
            continue;
        }
        region g;
        mj_symm_buffer *buf = open_region(c, rt, runs[i].fmt, runs[i].hidden, P, &g);
        if (!buf) continue;
        record(run_case(c, rt, &g, runs[i].tokens, 1, (int)i));
        mj_symm_buffer_destroy(buf);
    }
    mj_runtime_destroy(rt);
}
