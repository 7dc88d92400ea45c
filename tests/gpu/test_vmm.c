/* Multi-process symmetric buffers on one GPU: two processes share their VMM
 * regions (file descriptors over Unix sockets, or FABRIC handles), a 1-rank
 * NCCL communicator, and the clear errors. Forks before any CUDA call. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apis/symm_buffer_impl.h"
#include "include/megajit.h"
#include "runtime/nccl_lib.h"
#include "tests/gpu/device_words.h"
#include "tests/shm_group.h"

static int passed, failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " [%s]\n", mj_last_error());                                           \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static void report(const char *name, int rc) {
    printf("%s %s\n", rc ? "FAIL" : "ok  ", name);
    fflush(stdout);
    if (rc)
        failed++;
    else
        passed++;
}

static mj_symm_config config(int num_ranks, int max_tokens) {
    return (mj_symm_config){.struct_size = sizeof(mj_symm_config),
                            .hidden = 1024,
                            .num_experts = 8,
                            .num_topk = 2,
                            .max_tokens_per_rank = max_tokens,
                            .dispatch_format = MJ_FORMAT_BF16,
                            .num_ranks = num_ranks};
}

/* Device 0's primary context, current, so the runtime attaches to it. */
static mj_runtime *open_runtime(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx))
        return NULL;
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_disable = 1;
    mj_runtime *rt = NULL;
    return mj_runtime_create(&rt, &o) == MJ_OK ? rt : NULL;
}

/* One rank of the two-process test: write own region and the peer's through
 * the mapping, then read both back. */
static int two_rank_child(shm_group *sg, int rank, const char *handle_mode) {
    setenv("MEGAJIT_SYMM_HANDLE", handle_mode, 1);
    mj_runtime *rt = open_runtime();
    CHECK(rt, "rank %d: no runtime", rank);
    shm_rank me = {sg, rank};
    mj_symm_buffer *b;
    mj_symm_config cfg = config(2, 64);
    CHECK(mj_symm_buffer_create_distributed(rt, &cfg, rank, shm_allgather, &me, &b) == MJ_OK,
          "rank %d: create", rank);
    int peer = 1 - rank;
    mj_peers p = mj_symm_peers(b, rank);
    mj_view own_x, peer_x, own_idx, peer_idx;
    CHECK(mj_symm_buffer_view(b, rank, MJ_VIEW_X, &own_x) == MJ_OK &&
              mj_symm_buffer_view(b, peer, MJ_VIEW_X, &peer_x) == MJ_OK &&
              mj_symm_buffer_view(b, rank, MJ_VIEW_TOPK_IDX, &own_idx) == MJ_OK &&
              mj_symm_buffer_view(b, peer, MJ_VIEW_TOPK_IDX, &peer_idx) == MJ_OK,
          "views");
    CHECK((CUdeviceptr)(uintptr_t)peer_x.ptr ==
              p.base + (mj_u64)p.offsets[peer] + b->layout.x_offset,
          "peer view != own base + offsets[peer]");
    size_t region = b->rank_bytes / 4;
    /* Zeroed by its owner before create returned anywhere (the first-launch barrier). */
    CHECK(device_words_equal(p.base, region, 0) &&
              device_words_equal(p.base + (mj_u64)p.offsets[peer], region, 0),
          "rank %d: regions not zero after create", rank);
    /* The peer writes into this rank's region next; the check above must come first. */
    CHECK(shm_barrier(sg) == 0, "barrier");
    size_t x_words = own_x.nbytes / 4, idx_words = own_idx.nbytes / 4;
    CHECK(cuMemsetD32((CUdeviceptr)(uintptr_t)own_x.ptr, 0xA0000000u | (unsigned)rank, x_words) ==
                  CUDA_SUCCESS &&
              cuMemsetD32((CUdeviceptr)(uintptr_t)peer_idx.ptr, 0xB0000000u | (unsigned)rank,
                          idx_words) == CUDA_SUCCESS &&
              cuCtxSynchronize() == CUDA_SUCCESS,
          "rank %d: writes", rank);
    CHECK(shm_barrier(sg) == 0, "barrier");
    CHECK(device_words_equal((CUdeviceptr)(uintptr_t)peer_x.ptr, x_words,
                             0xA0000000u | (unsigned)peer),
          "rank %d: peer %d's x (read through the mapping) lacks its pattern", rank, peer);
    CHECK(device_words_equal((CUdeviceptr)(uintptr_t)own_idx.ptr, idx_words,
                             0xB0000000u | (unsigned)peer),
          "rank %d: own topk_idx lacks the pattern rank %d wrote remotely", rank, peer);
    mj_symm_buffer_destroy(b);
    mj_runtime_destroy(rt);
    return 0;
}

/* Rank 1 asks for a bigger region: both ranks must fail with the same error. */
static int size_mismatch_child(shm_group *sg, int rank) {
    mj_runtime *rt = open_runtime();
    CHECK(rt, "no runtime");
    shm_rank me = {sg, rank};
    mj_symm_buffer *b = NULL;
    mj_symm_config cfg = config(2, rank ? 4096 : 64);
    mj_status st = mj_symm_buffer_create_distributed(rt, &cfg, rank, shm_allgather, &me, &b);
    CHECK(st == MJ_ERR_INVALID_ARG && !b && strstr(mj_last_error(), "disagree"),
          "rank %d: status %d", rank, (int)st);
    mj_runtime_destroy(rt);
    return 0;
}

typedef int (*child_fn)(shm_group *sg, int rank, const char *arg);

static int fork_two(child_fn fn, const char *arg) {
    shm_group *sg = shm_group_create(2);
    if (!sg) return 1;
    pid_t pids[2];
    for (int r = 0; r < 2; r++)
        if ((pids[r] = fork()) == 0) _exit(fn(sg, r, arg));
    int bad = 0;
    for (int r = 0; r < 2; r++) {
        int status = 0;
        if (pids[r] < 0 || waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status))
            bad = 1;
    }
    shm_group_free(sg);
    return bad;
}

static int mismatch_adapter(shm_group *sg, int rank, const char *arg) {
    (void)arg;
    return size_mismatch_child(sg, rank);
}

static int nccl_one_rank(mj_runtime *rt) {
    const mj_nccl *n = mj_nccl_get();
    CHECK(n, "NCCL not loadable");
    ncclUniqueId id;
    ncclComm_t comm;
    CHECK(n->ncclGetUniqueId(&id) == ncclSuccess &&
              n->ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess,
          "1-rank communicator");
    mj_symm_buffer *b = NULL;
    mj_symm_config cfg = config(2, 64);
    mj_status st = mj_symm_buffer_create_nccl(rt, &cfg, comm, &b);
    CHECK(st == MJ_ERR_INVALID_ARG && !b && strstr(mj_last_error(), "communicator has 1 ranks"),
          "num_ranks mismatch: status %d", (int)st);
    cfg = config(1, 64);
    CHECK(mj_symm_buffer_create_nccl(rt, &cfg, comm, &b) == MJ_OK, "create_nccl");
    mj_view x;
    size_t bytes = 0;
    CHECK(mj_symm_buffer_view(b, 0, MJ_VIEW_X, &x) == MJ_OK && x.ptr &&
              mj_symm_buffer_info(b, NULL, NULL, &bytes) == MJ_OK && bytes % (2u << 20) == 0,
          "view/info");
    CHECK(mj_symm_buffer_view(b, 1, MJ_VIEW_X, &x) == MJ_ERR_INVALID_ARG, "rank 1 view refused");
    CHECK(mj_symm_buffer_view(b, 0, MJ_VIEW_X, &x) == MJ_OK, "view");
    CHECK(cuMemsetD32((CUdeviceptr)(uintptr_t)x.ptr, 0x5eed, x.nbytes / 4) == CUDA_SUCCESS &&
              cuCtxSynchronize() == CUDA_SUCCESS &&
              device_words_equal((CUdeviceptr)(uintptr_t)x.ptr, x.nbytes / 4, 0x5eed),
          "write/read own region");
    mj_symm_buffer_destroy(b);
    CHECK(n->ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
    return 0;
}

static int bad_rank(mj_runtime *rt) {
    mj_symm_buffer *b = NULL;
    mj_symm_config cfg = config(2, 64);
    shm_rank me = {NULL, 0};
    CHECK(mj_symm_buffer_create_distributed(rt, &cfg, 2, shm_allgather, &me, &b) ==
                  MJ_ERR_INVALID_ARG &&
              strstr(mj_last_error(), "rank 2 outside 0..1"),
          "rank out of range");
    return 0;
}

int main(void) {
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    /* fork() after CUDA initialization is invalid: the multi-process cases first. */
    report("two processes, one GPU, POSIX fd handles", fork_two(two_rank_child, "fd"));
    report("two processes, one GPU, automatic handle type", fork_two(two_rank_child, "auto"));
    report("ranks with different region sizes fail together", fork_two(mismatch_adapter, NULL));
    mj_runtime *rt = open_runtime();
    if (!rt) {
        fprintf(stderr, "no runtime: %s\n", mj_last_error());
        failed++;
    } else {
        report("rank outside 0..num_ranks-1", bad_rank(rt));
        report("1-rank NCCL communicator (and num_ranks mismatch)", nccl_one_rank(rt));
        mj_runtime_destroy(rt);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
