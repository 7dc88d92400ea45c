/*
 * Process groups and the exchange of file descriptors among the processes of
 * one host. Everything collective goes through an all-gather callback, so one
 * code path serves NCCL communicators and tests that wire processes together
 * with pipes or shared memory.
 */
#ifndef MJ_FD_EXCHANGE_H
#define MJ_FD_EXCHANGE_H

#include <stddef.h>

#include "include/megajit.h"

/* Collective: every rank passes bytes_per_rank bytes in send; recv receives
 * nranks * bytes_per_rank bytes, rank r's at offset r * bytes_per_rank. */
typedef mj_status (*mj_allgather_fn)(void *ctx, const void *send, void *recv,
                                     size_t bytes_per_rank);

typedef struct mj_group {
    int rank;
    int nranks;
    mj_allgather_fn allgather;
    void *ctx;
} mj_group;

/* Collective agreement on success: every rank passes its local status and gets
 * MJ_OK only when every rank passed MJ_OK. A failed rank keeps its own error;
 * the others get an error naming the first failed rank and `what`. Letting
 * every rank take the same branch keeps later collectives from hanging. */
mj_status mj_group_agree(const mj_group *g, mj_status local, const char *what);

/* A set of bound AF_UNIX datagram sockets, one per rank, named in the abstract
 * namespace from a random value that rank 0 draws (so concurrent jobs and
 * repeated exchanges on one host never collide). */
typedef struct mj_fd_channel mj_fd_channel;

/* Collective: draw and agree on the name, bind this rank's socket, then agree
 * that every rank bound its own (the barrier before any send). */
mj_status mj_fd_channel_open(const mj_group *g, mj_fd_channel **out);

/* Not collective on the group's all-gather, but every rank must call it: sends
 * fd to every other rank and receives one from each. fds[rank] = fd; the others
 * are new descriptors (close-on-exec) the caller closes. Order-independent: a
 * rank drains its queue while its own sends wait. MJ_ERR_IO naming the ranks
 * not heard from when timeout_ms passes; all received descriptors are then
 * closed and fds is left at -1. */
mj_status mj_fd_channel_exchange(mj_fd_channel *c, int fd, int *fds, int timeout_ms);
void mj_fd_channel_close(mj_fd_channel *c);

/* open + exchange + close. */
mj_status mj_fd_exchange(const mj_group *g, int fd, int *fds, int timeout_ms);

#endif
