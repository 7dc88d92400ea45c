/* Symmetric buffers with one process per rank: VMM memory shared among the
 * processes of an NCCL communicator, or of any all-gather (tests). */
#include <stdlib.h>

#include "apis/symm_buffer_impl.h"
#include "runtime/error.h"
#include "runtime/nccl_lib.h"
#include "runtime/runtime_impl.h"
#include "runtime/vmm.h"

/* The NCCL side of the group: an all-gather through a small device buffer on a
 * private stream, so the caller's streams never wait on setup traffic. */
typedef struct nccl_gather {
    const mj_nccl *nccl;
    const mj_cuda *cu;
    ncclComm_t comm;
    int rank, nranks;
    CUstream stream;
    CUdeviceptr buf;
    size_t cap;
} nccl_gather;

struct mj_symm_dist {
    mj_vmm vmm;
    mj_group group;
    nccl_gather *nccl; /* NULL when the caller supplied the all-gather */
};

static mj_status nccl_allgather(void *ctx, const void *send, void *recv, size_t bytes) {
    nccl_gather *g = ctx;
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

static void nccl_gather_free(nccl_gather *g) {
    if (!g) return;
    if (g->buf) g->cu->cuMemFree(g->buf);
    if (g->stream) g->cu->cuStreamDestroy(g->stream);
    free(g);
}

mj_status mj_symm_buffer_create_distributed(mj_runtime *rt, const mj_symm_config *cfg, int rank,
                                            mj_allgather_fn allgather, void *ctx,
                                            mj_symm_buffer **out) {
    if (!rt || !allgather || !out)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_symm_buffer_create_distributed: NULL argument");
    *out = NULL;
    mj_status st = mj_symm_config_check(cfg);
    if (st != MJ_OK) return st;
    if (rank < 0 || rank >= cfg->num_ranks)
        return mj_fail(MJ_ERR_INVALID_ARG, "rank %d outside 0..%d", rank, cfg->num_ranks - 1);
    if ((st = mj_runtime_bind(rt)) != MJ_OK) return st;
    mj_symm_buffer *b = mj_symm_buffer_new(rt, cfg, rank);
    mj_symm_dist *d = calloc(1, sizeof *d);
    if (!b || !d) {
        free(b);
        free(d);
        return mj_fail(MJ_ERR_NOMEM, "out of memory");
    }
    d->group = (mj_group){rank, cfg->num_ranks, allgather, ctx};
    st = mj_vmm_create(rt->cu, rt->device, &d->group, mj_symm_rank_bytes(cfg), &d->vmm);
    if (st != MJ_OK) {
        free(d);
        free(b);
        return st;
    }
    b->base = d->vmm.base;
    b->rank_bytes = d->vmm.stride;
    b->dist = d;
    *out = b;
    return MJ_OK;
}

mj_status mj_symm_buffer_create_nccl(mj_runtime *rt, const mj_symm_config *cfg, void *nccl_comm,
                                     mj_symm_buffer **out) {
    if (!rt || !nccl_comm || !out)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_symm_buffer_create_nccl: NULL argument");
    *out = NULL;
    mj_status st = mj_symm_config_check(cfg);
    if (st != MJ_OK) return st;
    const mj_nccl *nccl = mj_nccl_get();
    if (!nccl) return MJ_ERR_UNSUPPORTED;
    ncclComm_t comm = nccl_comm;
    int count = 0, rank = 0, device = 0;
    ncclResult_t nr = nccl->ncclCommCount(comm, &count);
    if (nr == ncclSuccess) nr = nccl->ncclCommUserRank(comm, &rank);
    if (nr == ncclSuccess) nr = nccl->ncclCommCuDevice(comm, &device);
    if (nr != ncclSuccess) return mj_nccl_fail(nccl, nr, "querying the NCCL communicator");
    if (count != cfg->num_ranks)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "cfg->num_ranks is %d but the NCCL communicator has %d ranks (one "
                       "process per rank: num_ranks must equal the communicator's size)",
                       cfg->num_ranks, count);
    if ((st = mj_runtime_bind(rt)) != MJ_OK) return st;
    if (device != (int)rt->device)
        return mj_fail(MJ_ERR_INVALID_ARG,
                       "the NCCL communicator of rank %d uses device %d but the runtime uses "
                       "device %d (create the runtime with device %d's context current)",
                       rank, device, (int)rt->device, device);
    nccl_gather *g = calloc(1, sizeof *g);
    if (!g) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    *g = (nccl_gather){.nccl = nccl, .cu = rt->cu, .comm = comm, .rank = rank, .nranks = count};
    CUresult r = rt->cu->cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        free(g);
        return mj_cuda_fail(r, "creating the symmetric buffer's setup stream");
    }
    mj_symm_buffer *b;
    st = mj_symm_buffer_create_distributed(rt, cfg, rank, nccl_allgather, g, &b);
    if (st != MJ_OK) {
        nccl_gather_free(g);
        return st;
    }
    b->dist->nccl = g;
    *out = b;
    return MJ_OK;
}

void mj_symm_dist_destroy(mj_symm_buffer *b) {
    mj_symm_dist *d = b->dist;
    mj_status st = mj_runtime_bind(b->rt);
    /* This rank's own kernels may still read peers' memory; the barrier then makes
     * sure no peer still touches this rank's before anything is unmapped. */
    if (st == MJ_OK && b->rt->cu->cuCtxSynchronize() != CUDA_SUCCESS)
        st = mj_fail(MJ_ERR_CUDA, "rank %d: synchronizing before unmapping", b->rank);
    mj_group_agree(&d->group, st, "synchronizing before the symmetric buffer is destroyed");
    if (st == MJ_OK) mj_vmm_destroy(&d->vmm);
    nccl_gather_free(d->nccl);
    free(d);
    b->dist = NULL;
}
