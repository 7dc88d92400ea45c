/*
 * Pass/fail bookkeeping shared by the GPU test programs (one translation unit
 * each). The last line a program prints is "N passed, N failed".
 */
#ifndef MJ_GPU_CHECK_H
#define MJ_GPU_CHECK_H

#include <cuda.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int g_passed, g_failed, g_skipped;
static char g_case[384] = "setup";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void finish(void) {
    if (g_skipped) printf("%d skipped (past the time budget)\n", g_skipped);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    fflush(stdout);
    exit(g_failed ? 1 : 0);
}

/* A failed driver call leaves nothing sensible to test (a kernel fault poisons
 * the context), so it ends the run. */
#define CU(call) cu_check((call), #call, __FILE__, __LINE__)
static void cu_check(CUresult r, const char *what, const char *file, int line) {
    if (r == CUDA_SUCCESS) return;
    const char *name = "?", *msg = "?";
    cuGetErrorName(r, &name);
    cuGetErrorString(r, &msg);
    printf("FATAL %s:%d during [%s]: %s -> %d %s (%s)\n", file, line, g_case, what, (int)r, name,
           msg);
    g_failed++;
    finish();
}

static void set_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_case(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_case, sizeof g_case, fmt, ap);
    va_end(ap);
}

/* Counts one check under the current case name. */
static void record(int ok) {
    if (ok)
        g_passed++;
    else
        g_failed++;
    printf("%s %s\n", ok ? "PASS" : "FAIL", g_case);
    fflush(stdout);
}

#endif /* MJ_GPU_CHECK_H */
