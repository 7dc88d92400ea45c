/*
 * Pass/fail bookkeeping shared by the GPU test programs and their parts
 * (tests/gpu/check.c). The last line a program prints is "N passed, N failed".
 */
#ifndef MJ_GPU_CHECK_H
#define MJ_GPU_CHECK_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "include/megajit.h"

extern int g_passed, g_failed, g_skipped;
/* The case being checked, as set_case named it. */
extern char g_case[384];
/* The state of rnd() (mj_bench_rng, xorshift64*; never 0): fresh data every run,
 * reproducible from the printed seed. */
extern uint64_t g_rng;

double now_s(void);
/* One line of the runtime's compile and cache counters, after `label`. */
void print_runtime_stats(const char *label, const mj_runtime *rt);
/* Prints the counts and exits (non-zero on any failure). */
_Noreturn void finish(void);

/* A failed driver call leaves nothing sensible to test (a kernel fault poisons
 * the context), so it ends the run. */
#define CU(call) cu_check((call), #call, __FILE__, __LINE__)
void cu_check(CUresult r, const char *what, const char *file, int line);

void set_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Counts one check under the current case name. */
void record(int ok);
int expect_ok(mj_status st, const char *what);

/* A runtime on the current device, or the end of the run (recorded). */
mj_runtime *open_runtime(const mj_runtime_options *opts, const char *what);
/* Makes device `index`'s primary context current and prints its name and SM
 * count; a machine without a usable driver fails the run. */
CUdevice attach_device(int index, int *sms);
/* Ends the run: nothing sensible follows an exhausted host. Zeroed memory. */
void *xmalloc(size_t n);

uint64_t rnd(void);
uint32_t rnd_below(uint32_t n);
/* [0, 1) */
float rnd_unit(void);

#endif /* MJ_GPU_CHECK_H */
