/* Symmetric buffers with one process per rank: VMM memory shared among the
 * processes of an NCCL communicator, or of any all-gather (tests). */
#include <stdlib.h>

#include "apis/symm_buffer_impl.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/nccl_gather.h"
#include "runtime/runtime.h"
#include "runtime/vmm.h"

struct mj_symm_dist {
    mj_vmm vmm;
    mj_group group;
    mj_nccl_gather *nccl; /* NULL when the caller supplied the all-gather */
};

mj_status mj_symm_buffer_create_distributed(mj_runtime *rt, const mj_symm_config *config, int rank,
                                            mj_allgather_fn allgather, void *ctx,
                                            mj_symm_buffer **out) {
    if (!rt || !allgather || !out)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_symm_buffer_create_distributed: NULL argument");
    *out = NULL;
    mj_symm_config accepted;
    const mj_symm_config *cfg = &accepted;
    mj_status st = mj_symm_config_accept(config, &accepted);
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
    st = mj_device_map_symmetric(rt, &d->group, mj_symm_rank_bytes(cfg), &d->vmm);
    if (st != MJ_OK) {
        free(d);
        free(b);
        return st;
    }
    b->base = d->vmm.base;
    b->rank_bytes = d->vmm.stride;
    b->shares_device = d->vmm.shares_device;
    b->dist = d;
    *out = b;
    return MJ_OK;
}

mj_status mj_symm_buffer_create_nccl(mj_runtime *rt, const mj_symm_config *config, void *nccl_comm,
                                     mj_symm_buffer **out) {
    mj_clear_error();
    if (!rt || !nccl_comm || !out)
        return mj_fail(MJ_ERR_INVALID_ARG, "mj_symm_buffer_create_nccl: NULL argument");
    *out = NULL;
    mj_symm_config accepted;
    const mj_symm_config *cfg = &accepted;
    mj_status st = mj_symm_config_accept(config, &accepted);
    if (st != MJ_OK) return st;
    int count = 0, rank = 0, device = 0;
    if ((st = mj_nccl_comm_info(nccl_comm, &count, &rank, &device)) != MJ_OK) return st;
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
    mj_nccl_gather *g;
    mj_group group;
    if ((st = mj_nccl_gather_open(rt, nccl_comm, &g, &group)) != MJ_OK) return st;
    mj_symm_buffer *b;
    st = mj_symm_buffer_create_distributed(rt, cfg, rank, group.allgather, group.ctx, &b);
    if (st != MJ_OK) {
        mj_nccl_gather_close(g);
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
    if (st == MJ_OK) st = mj_device_synchronize(b->rt, "synchronizing before unmapping");
    mj_group_agree(&d->group, st, "synchronizing before the symmetric buffer is destroyed");
    if (st == MJ_OK) mj_vmm_destroy(&d->vmm);
    mj_nccl_gather_close(d->nccl);
    free(d);
    b->dist = NULL;
}
