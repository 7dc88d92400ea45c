/*
 * NCCL, loaded at run time like the driver: dlopen("libnccl.so.2"), then
 * $MEGAJIT_NCCL_LIB, $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Only nccl.h's
 * types are used at build time, so megajit never links -lnccl and loads on
 * machines without NCCL until a communicator is actually needed.
 */
#ifndef MJ_NCCL_LIB_H
#define MJ_NCCL_LIB_H

#include <nccl.h>

#include "include/megajit.h"

#define MJ_NCCL_FUNCTIONS(X)                                                                       \
    X(ncclGetVersion)                                                                              \
    X(ncclGetErrorString)                                                                          \
    X(ncclGetUniqueId)                                                                             \
    X(ncclCommInitRank)                                                                            \
    X(ncclCommDestroy)                                                                             \
    X(ncclCommCount)                                                                               \
    X(ncclCommUserRank)                                                                            \
    X(ncclCommCuDevice)                                                                            \
    X(ncclAllGather)

typedef struct mj_nccl {
#define MJ_NCCL_FIELD(name) __typeof__(&name) name;
    MJ_NCCL_FUNCTIONS(MJ_NCCL_FIELD)
#undef MJ_NCCL_FIELD
    int version; /* NCCL_VERSION_CODE of the loaded library, e.g. 22809 */
    char path[256];
} mj_nccl;

/* The process-wide NCCL table, loaded once. NULL (error MJ_ERR_UNSUPPORTED
 * naming what was tried) when no usable libnccl.so.2 is found. */
const mj_nccl *mj_nccl_get(void);

/* "what: <ncclGetErrorString>" as MJ_ERR_CUDA. */
mj_status mj_nccl_fail(const mj_nccl *nccl, ncclResult_t r, const char *what);

#endif
