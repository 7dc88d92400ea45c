/*
 * Pre-dispatch on a GPU against the bit-exact host reference (tests/reference):
 * every format and shape, emulated ranks, input validation, CUDA graphs and
 * per-family settings. Outputs are poisoned before each launch and the whole
 * input region is compared, so an unwritten or stray byte fails like a wrong one.
 * The parts live in tests/gpu/pre_dispatch/: input generation, one region's
 * launch and comparison, the sections of cases, and graphs with the family
 * settings.
 *
 *   test_pre_dispatch [--quick] [--seed N]
 *
 * --quick runs a small subset (for compute-sanitizer). The last line is
 * "N passed, N failed"; the exit status is non-zero on any failure.
 */
#include "tests/gpu/pre_dispatch/harness.h"

int g_quick;
int main(int argc, char **argv) {
    uint64_t seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            g_quick = 1;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "usage: %s [--quick] [--seed N]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_rng = seed ? seed : 1;
    printf("test_pre_dispatch %s, seed %" PRIu64 " (rerun with --seed %" PRIu64 ")\n",
           g_quick ? "--quick" : "full", seed, seed);
    double t_start = now_s();

    int device_sms;
    CUdevice dev = attach_device(0, &device_sms);

    ctx c;
    memset(&c, 0, sizeof c);
    c.device_sms = device_sms;

    set_case("runtime create");
    mj_runtime_options opts = MJ_RUNTIME_OPTIONS_INIT;
    mj_runtime_options check_opts = MJ_RUNTIME_OPTIONS_INIT;
    check_opts.check_device_inputs = 1;
    c.rt = open_runtime(&opts, "mj_runtime_create");
    c.rt_check = open_runtime(&check_opts, "mj_runtime_create(check)");
    printf("runtime arch %s\n", mj_runtime_arch(c.rt));

    CU(cuStreamCreate(&c.stream, CU_STREAM_DEFAULT));
    CU(cuMemAlloc(&c.d_x, (size_t)MAX_ROWS * MAX_HIDDEN * 2));
    CU(cuMemAlloc(&c.d_ids, (size_t)MAX_ROWS * TOPK * 4));
    CU(cuMemAlloc(&c.d_weights, (size_t)MAX_ROWS * TOPK * 4));
    CU(cuMemAlloc(&c.d_scales, NUM_EXPERTS * 4));
    c.in.x = xmalloc((size_t)MAX_ROWS * MAX_HIDDEN * 2);
    c.in.ids = xmalloc((size_t)MAX_ROWS * TOPK * 4);
    c.in.weights = xmalloc((size_t)MAX_ROWS * TOPK * 4);
    c.in.scales = xmalloc(NUM_EXPERTS * 4);

    static const struct {
        const char *name;
        void (*fn)(ctx *);
    } sections[] = {
        {"create errors", test_create_errors},
        {"format x hidden x tokens", test_matrix},
        {"emulated ranks", test_ranks},
        {"negative", test_negative},
        {"check striding", test_check_striding},
        {"graph", test_graphs},
        {"capture uncompiled", test_capture_uncompiled},
        {"family settings", test_family},
    };
    enum { NUM_SECTIONS = sizeof sections / sizeof sections[0] };
    double section_s[NUM_SECTIONS];
    for (int i = 0; i < NUM_SECTIONS; i++) {
        double t0 = now_s();
        sections[i].fn(&c);
        section_s[i] = now_s() - t0;
    }

    print_runtime_stats("serving runtime", c.rt);
    for (int i = 0; i < NUM_SECTIONS; i++)
        printf("  %-26s %7.2f s\n", sections[i].name, section_s[i]);
    printf("host reference %.2f s, launch-to-sync %.2f s, total %.2f s\n", c.ref_s, c.gpu_s,
           now_s() - t_start);

    CU(cuStreamDestroy(c.stream));
    CU(cuMemFree(c.d_x));
    CU(cuMemFree(c.d_ids));
    CU(cuMemFree(c.d_weights));
    CU(cuMemFree(c.d_scales));
    mj_runtime_destroy(c.rt_check);
    mj_runtime_destroy(c.rt);
    CU(cuDevicePrimaryCtxRelease(dev));
    free(c.in.x);
    free(c.in.ids);
    free(c.in.weights);
    free(c.in.scales);
    free(c.img);
    free(c.got);
    finish();
}
