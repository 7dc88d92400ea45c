/*
 * An all-gather among forked processes through shared memory, for tests that
 * need a process group without NCCL. Create it before fork(); every rank then
 * calls shm_allgather with the same sizes in the same order. A rank that stops
 * calling makes the others fail after SHM_GROUP_TIMEOUT_S instead of hanging.
 */
#ifndef MJ_TEST_SHM_GROUP_H
#define MJ_TEST_SHM_GROUP_H

#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "include/megajit.h"

#define SHM_GROUP_SLOT 16384
#define SHM_GROUP_MAX_RANKS 8
#define SHM_GROUP_TIMEOUT_S 30

typedef struct shm_group {
    atomic_int arrived;
    atomic_int generation;
    int nranks;
    unsigned char slots[SHM_GROUP_MAX_RANKS][SHM_GROUP_SLOT];
} shm_group;

static inline shm_group *shm_group_create(int nranks) {
    shm_group *g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED) return NULL;
    atomic_init(&g->arrived, 0);
    atomic_init(&g->generation, 0);
    g->nranks = nranks;
    return g;
}

static inline void shm_group_free(shm_group *g) {
    munmap(g, sizeof *g);
}

/* Sense-free barrier: the last arrival bumps the generation. 0 on success. */
static inline int shm_barrier(shm_group *g) {
    int gen = atomic_load(&g->generation);
    if (atomic_fetch_add(&g->arrived, 1) == g->nranks - 1) {
        atomic_store(&g->arrived, 0);
        atomic_fetch_add(&g->generation, 1);
        return 0;
    }
    time_t start = time(NULL);
    while (atomic_load(&g->generation) == gen) {
        if (time(NULL) - start > SHM_GROUP_TIMEOUT_S) return -1;
        sched_yield();
    }
    return 0;
}

typedef struct shm_rank {
    shm_group *group;
    int rank;
} shm_rank;

/* mj_allgather_fn over ctx = shm_rank*. */
static inline mj_status shm_allgather(void *ctx, const void *send, void *recv, size_t bytes) {
    shm_rank *me = ctx;
    shm_group *g = me->group;
    if (bytes > SHM_GROUP_SLOT) return MJ_ERR_INVALID_ARG;
    memcpy(g->slots[me->rank], send, bytes);
    if (shm_barrier(g)) return MJ_ERR_IO;
    for (int r = 0; r < g->nranks; r++)
        memcpy((unsigned char *)recv + (size_t)r * bytes, g->slots[r], bytes);
    /* The slots are reused by the next call only after everyone has read them. */
    return shm_barrier(g) ? MJ_ERR_IO : MJ_OK;
}

#endif
