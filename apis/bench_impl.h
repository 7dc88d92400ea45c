/* Pieces the benchmarks share (apis/bench.c, apis/bench_mega_moe.c, the CLI). */
#ifndef MJ_BENCH_IMPL_H
#define MJ_BENCH_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "apis/megajit.h"

/* xorshift64*: fast enough to fill gigabytes of random weights. */
uint64_t mj_bench_rng(uint64_t *state);
/* Sorts v and returns its median. */
float mj_bench_median_ms(float *v, int n);
/* The device's copy bandwidth (bytes read + written per second / 1e9): median
 * of iters cuMemcpyDtoD of at least min_bytes (and at least 256 MiB, so the L2
 * cannot serve it) on the runtime's device. */
mj_status mj_bench_copy_gbps(mj_runtime *rt, size_t min_bytes, int iters, double *gbps);

/* tests/gpu/launch_ranks starts each rank with MEGAJIT_RANK, MEGAJIT_WORLD and
 * MEGAJIT_NCCL_ID. Returns 1 and the rank and world when they are set (a
 * world of one included), 0 otherwise. */
int mj_launcher_env(int *rank, int *world);
/* Under the launcher: makes device `rank`'s primary context current (so a
 * runtime created afterwards attaches to it) and joins the launcher's NCCL
 * communicator (*comm: an ncclComm_t). Call before mj_runtime_create. */
mj_status mj_launcher_join(int rank, int world, void **comm);
/* ncclCommDestroy; after every buffer on the communicator is destroyed. */
void mj_launcher_leave(void *comm);
/* An NCCL all-gather of one int on the runtime's device: every rank waits
 * until all have arrived. */
mj_status mj_launcher_barrier(void *comm, int world);

#endif
