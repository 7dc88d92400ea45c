/* The rank side of tests/gpu/launch_ranks: join the NCCL communicator it set up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda_driver.h"
#include "runtime/error.h"
#include "runtime/nccl_lib.h"
#include "tools/bench/launcher.h"

static int hex_decode(const char *s, void *p, size_t n) {
    if (!s || strlen(s) != 2 * n) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
        ((unsigned char *)p)[i] = (unsigned char)v;
    }
    return 0;
}

int mj_launcher_env(int *rank, int *world) {
    const char *rs = getenv("MEGAJIT_RANK"), *ws = getenv("MEGAJIT_WORLD");
    *rank = rs ? atoi(rs) : 0;
    *world = ws ? atoi(ws) : 1;
    if (*world >= 1 && *rank >= 0 && *rank < *world && getenv("MEGAJIT_NCCL_ID")) return 1;
    *rank = 0;
    *world = 1;
    return 0;
}

mj_status mj_launcher_join(int rank, int world, void **comm) {
    *comm = NULL;
    ncclUniqueId id;
    if (hex_decode(getenv("MEGAJIT_NCCL_ID"), &id, sizeof id))
        return mj_fail(MJ_ERR_INVALID_ARG, "MEGAJIT_NCCL_ID is not the hex of an NCCL unique id");
    const mj_cuda *cu = mj_cuda_get();
    if (!cu) return MJ_ERR_NO_DEVICE;
    const mj_nccl *n = mj_nccl_get();
    if (!n) return MJ_ERR_UNSUPPORTED;
    CUdevice dev;
    CUcontext ctx;
    int count = 0;
    CUresult r = cu->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "launcher rank: cuDeviceGetCount");
    if (rank >= count)
        return mj_fail(MJ_ERR_NO_DEVICE, "rank %d needs device %d but only %d are visible", rank,
                       rank, count);
    if ((r = cu->cuDeviceGet(&dev, rank)) != CUDA_SUCCESS ||
        (r = cu->cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS ||
        (r = cu->cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
        return mj_cuda_fail(r, "launcher rank: device context");
    ncclComm_t c;
    ncclResult_t nr = n->ncclCommInitRank(&c, world, id, rank);
    if (nr != ncclSuccess) return mj_nccl_fail(n, nr, "ncclCommInitRank");
    *comm = c;
    return MJ_OK;
}

void mj_launcher_leave(void *comm) {
    const mj_nccl *n = mj_nccl_get();
    if (n && comm) n->ncclCommDestroy((ncclComm_t)comm);
}

mj_status mj_launcher_barrier(void *comm, int world) {
    const mj_cuda *cu = mj_cuda_get();
    const mj_nccl *n = mj_nccl_get();
    if (!cu || !n) return MJ_ERR_UNSUPPORTED;
    CUdeviceptr buf;
    CUstream s;
    /* Each rank sends from the slot past the gathered ones: in-place gathers
     * must send from their own slot, which this avoids computing. */
    CUresult r = cu->cuMemAlloc(&buf, 4 * (size_t)world + 4);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "barrier: cuMemAlloc");
    if ((r = cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
        cu->cuMemFree(buf);
        return mj_cuda_fail(r, "barrier: cuStreamCreate");
    }
    ncclResult_t nr =
        n->ncclAllGather((void *)(uintptr_t)(buf + 4 * (size_t)world), (void *)(uintptr_t)buf, 1,
                         ncclInt32, (ncclComm_t)comm, (cudaStream_t)s);
    r = nr == ncclSuccess ? cu->cuStreamSynchronize(s) : CUDA_SUCCESS;
    cu->cuStreamDestroy(s);
    cu->cuMemFree(buf);
    if (nr != ncclSuccess) return mj_nccl_fail(n, nr, "barrier: ncclAllGather");
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, "barrier: cuStreamSynchronize");
}
