/*
 * An NCCL communicator as an mj_group: the all-gather runs through a small
 * device buffer on a private stream, so the caller's streams never wait on
 * setup traffic.
 */
#ifndef MJ_NCCL_GATHER_H
#define MJ_NCCL_GATHER_H

#include "runtime/fd_exchange.h"
#include "runtime/runtime.h"

typedef struct mj_nccl_gather mj_nccl_gather;

/* The communicator's size, this process's rank in it and its CUDA device
 * (comm is an ncclComm_t). MJ_ERR_UNSUPPORTED without a usable NCCL. */
mj_status mj_nccl_comm_info(void *comm, int *count, int *rank, int *device);

/* An all-gather over comm on rt's device (rt bound). *group gets this rank,
 * the size and the all-gather; it stays usable until mj_nccl_gather_close. */
mj_status mj_nccl_gather_open(mj_runtime *rt, void *comm, mj_nccl_gather **out, mj_group *group);
void mj_nccl_gather_close(mj_nccl_gather *g);

#endif
