/* Pass/fail bookkeeping shared by the GPU test programs (tests/gpu/check.h). */
#include "tests/gpu/check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tools/bench/bench.h"

int g_passed, g_failed, g_skipped;
char g_case[384] = "setup";

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void print_runtime_stats(const char *label, const mj_runtime *rt) {
    mj_runtime_stats st;
    if (mj_runtime_get_stats(rt, &st) == MJ_OK)
        printf("%s: %" PRIu64 " compiles (%.1f s), %" PRIu64 " disk hits, %" PRIu64
               " memory hits\n",
               label, st.compiles, st.compile_seconds, st.disk_hits, st.memory_hits);
}

_Noreturn void finish(void) {
    if (g_skipped) printf("%d skipped (past the time budget)\n", g_skipped);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    fflush(stdout);
    exit(g_failed ? 1 : 0);
}

void cu_check(CUresult r, const char *what, const char *file, int line) {
    if (r == CUDA_SUCCESS) return;
    const char *name = "?", *msg = "?";
    cuGetErrorName(r, &name);
    cuGetErrorString(r, &msg);
    printf("FATAL %s:%d during [%s]: %s -> %d %s (%s)\n", file, line, g_case, what, (int)r, name,
           msg);
    g_failed++;
    finish();
}

void set_case(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_case, sizeof g_case, fmt, ap);
    va_end(ap);
}

void record(int ok) {
    if (ok)
        g_passed++;
    else
        g_failed++;
    printf("%s %s\n", ok ? "PASS" : "FAIL", g_case);
    fflush(stdout);
}

int expect_ok(mj_status st, const char *what) {
    if (st == MJ_OK) return 1;
    printf("  %s -> %s: %s\n", what, mj_status_name(st), mj_last_error());
    return 0;
}

mj_runtime *open_runtime(const mj_runtime_options *opts, const char *what) {
    mj_runtime *rt = NULL;
    if (!expect_ok(mj_runtime_create(&rt, opts), what)) {
        record(0);
        finish();
    }
    if (!mj_runtime_has_device(rt)) {
        printf("  the runtime sees no device: %s\n", mj_last_error());
        record(0);
        finish();
    }
    return rt;
}

CUdevice attach_device(int index, int *sms) {
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(r, &name);
        printf("FATAL no usable CUDA driver/device: cuInit -> %d %s\n", (int)r, name);
        g_failed++;
        finish();
    }
    CUdevice dev;
    CUcontext ctx;
    char name[128];
    CU(cuDeviceGet(&dev, index));
    CU(cuDeviceGetName(name, sizeof name, dev));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    CU(cuDeviceGetAttribute(sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    printf("device %d: %s, %d SMs\n", index, name, *sms);
    return dev;
}

void *xmalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        printf("FATAL out of host memory (%zu bytes) during [%s]\n", n, g_case);
        g_failed++;
        finish();
    }
    return p;
}

uint64_t g_rng = 1;

uint64_t rnd(void) {
    return mj_bench_rng(&g_rng);
}

uint32_t rnd_below(uint32_t n) {
    return (uint32_t)(((rnd() >> 32) * (uint64_t)n) >> 32);
}

float rnd_unit(void) {
    return (float)(rnd() >> 40) * (1.0f / 16777216.0f);
}
