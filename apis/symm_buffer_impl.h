/* The symmetric buffer object, shared by the entry points that write into it. */
#ifndef MJ_SYMM_BUFFER_IMPL_H
#define MJ_SYMM_BUFFER_IMPL_H

#include <cuda.h>

#include "include/megajit.h"
#include "runtime/configs.h"
#include "runtime/fd_exchange.h"
#include "templates/layout/symm_layout.h"

/* The multi-process backend (VMM mapping + the group its collectives use). */
typedef struct mj_symm_dist mj_symm_dist;

struct mj_symm_buffer {
    mj_runtime *rt;
    mj_symm_config cfg;
    int num_sms; /* the MegaMoE family's SM count at creation */
    CUdeviceptr base;
    size_t rank_bytes; /* stride between rank regions */
    mj_input_layout layout;
    int rank;           /* this process's rank; -1 = every rank emulated in this process */
    mj_symm_dist *dist; /* NULL for emulated buffers */
    /* 1: other ranks' kernels run on this GPU at the same time (emulated
     * ranks, or processes sharing it), so each launch's grid must leave them
     * room: one CTA an SM (heuristics). */
    int shares_device;
};

/* Bytes one rank's region needs (with the MegaMoE regions when c->intermediate
 * > 0); c must pass mj_symm_config_check (runtime/configs.h). */
size_t mj_symm_rank_bytes(const mj_symm_config *c);
/* A zeroed buffer object with the fields every kind of buffer shares (rank -1
 * for the emulated, single-process one); NULL when out of memory. */
struct mj_symm_buffer *mj_symm_buffer_new(mj_runtime *rt, const mj_symm_config *cfg, int rank);

/* Collective over the ranks of g: every process passes the same cfg (num_ranks
 * = g's size) and its own rank. The all-gather and its ctx must stay usable until
 * mj_symm_buffer_destroy, which is collective too. The entry point behind
 * mj_symm_buffer_create_nccl, open to tests that connect processes without NCCL. */
mj_status mj_symm_buffer_create_distributed(mj_runtime *rt, const mj_symm_config *cfg, int rank,
                                            mj_allgather_fn allgather, void *ctx,
                                            mj_symm_buffer **out);
/* Collective teardown of a distributed buffer's memory (not of b itself). */
void mj_symm_dist_destroy(mj_symm_buffer *b);

/* Device address of rank r's region (mapped peers and emulated ranks alike). */
static inline CUdeviceptr mj_symm_rank_base(const struct mj_symm_buffer *b, int rank) {
    return b->base + (CUdeviceptr)rank * b->rank_bytes;
}

/* Peers as seen from `rank` (a process's own rank, or any emulated one). */
static inline mj_peers mj_symm_peers(const struct mj_symm_buffer *b, int rank) {
    mj_peers p = {.base = mj_symm_rank_base(b, rank),
                  .rank = (mj_u32)rank,
                  .num_ranks = (mj_u32)b->cfg.num_ranks};
    for (int r = 0; r < b->cfg.num_ranks; r++)
        p.offsets[r] = (mj_i64)(r - rank) * (mj_i64)b->rank_bytes;
    return p;
}

#endif
