/* The rank side of tests/gpu/launch_ranks (benchmarks and GPU tests, not the
 * library): each rank process joins the NCCL communicator the launcher set up. */
#ifndef MJ_TOOLS_LAUNCHER_H
#define MJ_TOOLS_LAUNCHER_H

#include "include/megajit.h"

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
