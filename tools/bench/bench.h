/* The benchmarks behind `megajit bench` (tools/bench/, linked into the CLI,
 * never part of the library) and the pieces they share; the MegaMoE one is
 * tools/bench/mega_moe.h. */
#ifndef MJ_TOOLS_BENCH_H
#define MJ_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "include/megajit.h"

/* xorshift64*: fast enough to fill gigabytes of random weights. The state
 * must not be 0 (mj_bench_seed never returns 0). */
uint64_t mj_bench_rng(uint64_t *state);
/* A generator state derived from h and v (splitmix64 of their mix): chained
 * over the parts of a configuration, the same parts give the same stream on
 * every rank and in every run. Never 0. */
uint64_t mj_bench_seed(uint64_t h, uint64_t v);
/* Sorts v and returns its median. */
float mj_bench_median_ms(float *v, int n);
/* The device's copy bandwidth (bytes read + written per second / 1e9): median
 * of iters cuMemcpyDtoD of at least min_bytes (and at least 256 MiB, so the L2
 * cannot serve it) on the runtime's device. */
mj_status mj_bench_copy_gbps(mj_runtime *rt, size_t min_bytes, int iters, double *gbps);

/* Times pre-dispatch on fresh random data (median over iters launches, CUDA events)
 * next to a device-to-device copy of the same byte count, on the current device. */
typedef struct mj_bench_pre_dispatch_result {
    double bytes;            /* bytes the kernel must move: BF16 in + quantized out + ids/weights */
    double kernel_us;        /* median pre-dispatch time (check + main kernel) */
    double kernel_gbps;      /* bytes / kernel_us */
    double copy_us;          /* median cuMemcpyDtoD time moving the same bytes (read + write) */
    double copy_gbps;        /* device copy bandwidth, bytes read + written */
    double fraction_of_copy; /* kernel_gbps / copy_gbps */
    double launch_us;        /* median zero-token pre-dispatch: the fixed cost of a launch */
    double floor_us;         /* launch_us + copy_us: a launch that moved its bytes at copy speed */
    double fraction_of_floor; /* floor_us / kernel_us */
} mj_bench_pre_dispatch_result;
mj_status mj_bench_pre_dispatch(mj_runtime *rt, mj_format fmt, int hidden, int num_tokens,
                                int num_topk, int iters, mj_bench_pre_dispatch_result *out);

#endif
