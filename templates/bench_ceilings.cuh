/*
 * The bench-ceiling family (sm_90a): kernels that measure what the card can
 * do at all, so `megajit bench mega-moe` can divide by limits measured in
 * the same run rather than by datasheet numbers. No deployment runs them.
 *
 *   bench/bulk_read.cuh     read bandwidth of bulk copies into shared memory
 *   bench/tensor_rate.cuh   BF16 dense tensor-core rate of wgmma
 *   bench/clock_probe.cuh   the SM clock at the moment (after a timed pass)
 */
#ifndef MJ_BENCH_CEILINGS_CUH
#define MJ_BENCH_CEILINGS_CUH

#include "bench/bulk_read.cuh"
#include "bench/clock_probe.cuh"
#include "bench/tensor_rate.cuh"

#endif // MJ_BENCH_CEILINGS_CUH
