#include "runtime/nccl_gather.h"

#include <stdlib.h>

#include "runtime/error.h"
#include "runtime/nccl_lib.h"

struct mj_nccl_gather {
    const mj_nccl *nccl;
    const mj_cuda *cu;
    ncclComm_t comm;
    int rank, nranks;
    CUstream stream;
    CUdeviceptr buf;
    size_t cap;
};

mj_status mj_nccl_comm_info(void *comm, int *count, int *rank, int *device) {
    const mj_nccl *nccl = mj_nccl_get();
    if (!nccl) return MJ_ERR_UNSUPPORTED;
    ncclResult_t nr = nccl->ncclCommCount((ncclComm_t)comm, count);
    if (nr == ncclSuccess) nr = nccl->ncclCommUserRank((ncclComm_t)comm, rank);
    if (nr == ncclSuccess) nr = nccl->ncclCommCuDevice((ncclComm_t)comm, device);
    return nr == ncclSuccess ? MJ_OK : mj_nccl_fail(nccl, nr, "querying the NCCL communicator");
}

static mj_status nccl_allgather(void *ctx, const void *send, void *recv, size_t bytes) {
    mj_nccl_gather *g = ctx;
    const mj_cuda *cu = g->cu;
    size_t total = bytes * (size_t)g->nranks;
    if (total > g->cap) {
        if (g->buf) cu->cuMemFree(g->buf);
        g->buf = 0;
        g->cap = 0;
        CUresult r = cu->cuMemAlloc(&g->buf, total);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "allocating the NCCL all-gather buffer");
        g->cap = total;
    }
    CUdeviceptr mine = g->buf + (CUdeviceptr)g->rank * bytes;
    CUresult r = cu->cuMemcpyHtoDAsync(mine, send, bytes, g->stream);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(r, "staging the NCCL all-gather");
    /* In place: rank r's input already sits at its slot of the output. */
    ncclResult_t nr =
        g->nccl->ncclAllGather((const void *)(uintptr_t)mine, (void *)(uintptr_t)g->buf, bytes,
                               ncclUint8, g->comm, (cudaStream_t)g->stream);
    if (nr != ncclSuccess) return mj_nccl_fail(g->nccl, nr, "ncclAllGather");
    r = cu->cuMemcpyDtoHAsync(recv, g->buf, total, g->stream);
    if (r == CUDA_SUCCESS) r = cu->cuStreamSynchronize(g->stream);
    return r == CUDA_SUCCESS ? MJ_OK : mj_cuda_fail(r, "waiting for the NCCL all-gather");
}

mj_status mj_nccl_gather_open(mj_runtime *rt, void *comm, mj_nccl_gather **out, mj_group *group) {
    *out = NULL;
    int count = 0, rank = 0, device = 0;
    mj_status st = mj_nccl_comm_info(comm, &count, &rank, &device);
    if (st != MJ_OK) return st;
    mj_nccl_gather *g = calloc(1, sizeof *g);
    if (!g) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    *g = (mj_nccl_gather){
        .nccl = mj_nccl_get(), .cu = rt->cu, .comm = comm, .rank = rank, .nranks = count};
    CUresult r = rt->cu->cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        free(g);
        return mj_cuda_fail(r, "creating the symmetric buffer's setup stream");
    }
    *group = (mj_group){rank, count, nccl_allgather, g};
    *out = g;
    return MJ_OK;
}

void mj_nccl_gather_close(mj_nccl_gather *g) {
    if (!g) return;
    if (g->buf) g->cu->cuMemFree(g->buf);
    if (g->stream) g->cu->cuStreamDestroy(g->stream);
    free(g);
}
