/*
 * Runs one process per GPU for multi-GPU tests and benchmarks:
 *
 *   launch_ranks --gpus N [--timeout S] -- command args...
 *   launch_ranks --gpus N [--timeout S] --selftest
 *
 * The launcher draws the NCCL unique id (before any CUDA context, and its
 * bootstrap root lives in this process) and execs each rank with
 * MEGAJIT_RANK, MEGAJIT_WORLD, MEGAJIT_NCCL_ID (hex) and NCCL_NVLS_ENABLE=0;
 * rank r uses device r. --selftest runs the built-in rank: a symmetric buffer
 * over an NCCL communicator, each rank writing its own region and one peer's,
 * then checking every peer's bytes. Exits non-zero when any rank fails.
 */
#include <cuda.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "include/megajit.h"
#include "runtime/nccl_lib.h"
#include "tests/gpu/device_words.h"
#include "tools/bench/launcher.h"

#define MAX_GPUS 72
/* How long the other ranks may still finish once one has failed. */
#define FAIL_GRACE_S 5

static int usage(void) {
    fprintf(stderr,
            "usage: launch_ranks --gpus N [--timeout S] (--selftest | -- command args...)\n");
    return 2;
}

static void hex_encode(const void *p, size_t n, char *out) {
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "rank %d: ", rank);                                                        \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, " [%s]\n", mj_last_error());                                               \
        return 1;                                                                                  \
    } while (0)

static int selftest_rank(void) {
    int rank = -1, world = 0;
    if (!mj_launcher_env(&rank, &world)) FAIL("MEGAJIT_RANK/MEGAJIT_WORLD/MEGAJIT_NCCL_ID missing");
    void *comm;
    if (mj_launcher_join(rank, world, &comm) != MJ_OK) FAIL("joining the communicator");
    mj_runtime_options o = MJ_RUNTIME_OPTIONS_INIT;
    o.cache_disable = 1;
    mj_runtime *rt;
    if (mj_runtime_create(&rt, &o) != MJ_OK) FAIL("mj_runtime_create");
    mj_symm_config cfg = {.struct_size = sizeof(mj_symm_config),
                          .hidden = 1024,
                          .num_experts = 8 * world,
                          .num_topk = 2,
                          .max_tokens_per_rank = 128,
                          .dispatch_format = MJ_FORMAT_BF16,
                          .num_ranks = world};
    mj_symm_buffer *b;
    if (mj_symm_buffer_create_nccl(rt, &cfg, comm, &b) != MJ_OK) FAIL("mj_symm_buffer_create_nccl");
    int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    mj_view own_x, own_idx, next_idx;
    if (mj_symm_buffer_view(b, rank, MJ_VIEW_X, &own_x) ||
        mj_symm_buffer_view(b, rank, MJ_VIEW_TOPK_IDX, &own_idx) ||
        mj_symm_buffer_view(b, next, MJ_VIEW_TOPK_IDX, &next_idx))
        FAIL("views");
    /* Own region locally, and the next rank's over NVLink. */
    if (cuMemsetD32((CUdeviceptr)(uintptr_t)own_x.ptr, 0xA0000000u | (unsigned)rank,
                    own_x.nbytes / 4) ||
        cuMemsetD32((CUdeviceptr)(uintptr_t)next_idx.ptr, 0xB0000000u | (unsigned)rank,
                    next_idx.nbytes / 4) ||
        cuCtxSynchronize())
        FAIL("writes");
    if (mj_launcher_barrier(comm, world) != MJ_OK) FAIL("barrier");
    for (int r = 0; r < world; r++) {
        mj_view x;
        if (mj_symm_buffer_view(b, r, MJ_VIEW_X, &x) ||
            !device_words_equal((CUdeviceptr)(uintptr_t)x.ptr, x.nbytes / 4,
                                0xA0000000u | (unsigned)r))
            FAIL("rank %d's x region read through the mapping is wrong", r);
    }
    if (!device_words_equal((CUdeviceptr)(uintptr_t)own_idx.ptr, own_idx.nbytes / 4,
                            0xB0000000u | (unsigned)prev))
        FAIL("own topk_idx lacks what rank %d wrote remotely", prev);
    mj_symm_buffer_destroy(b);
    mj_launcher_leave(comm);
    mj_runtime_destroy(rt);
    printf("rank %d: selftest passed (%d ranks)\n", rank, world);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--selftest-rank") == 0) return selftest_rank();
    int gpus = 0, timeout_s = 600, cmd = 0, selftest = 0;
    for (int i = 1; i < argc && !cmd; i++) {
        if (strcmp(argv[i], "--gpus") == 0 && i + 1 < argc)
            gpus = atoi(argv[++i]);
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            timeout_s = atoi(argv[++i]);
        else if (strcmp(argv[i], "--selftest") == 0)
            selftest = 1;
        else if (strcmp(argv[i], "--") == 0 && i + 1 < argc)
            cmd = i + 1;
        else
            return usage();
    }
    if (gpus < 1 || gpus > MAX_GPUS || selftest == !!cmd || timeout_s < 1) return usage();
    const mj_nccl *n = mj_nccl_get();
    if (!n) {
        fprintf(stderr, "launch_ranks: %s\n", mj_last_error());
        return 1;
    }
    ncclUniqueId id;
    ncclResult_t nr = n->ncclGetUniqueId(&id);
    if (nr != ncclSuccess) {
        fprintf(stderr, "launch_ranks: ncclGetUniqueId: %s\n", n->ncclGetErrorString(nr));
        return 1;
    }
    char id_hex[2 * sizeof id + 1];
    hex_encode(&id, sizeof id, id_hex);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    self[len] = 0;
    char *self_argv[] = {self, "--selftest-rank", NULL};
    char **child_argv = selftest ? self_argv : argv + cmd;
    pid_t pids[MAX_GPUS];
    for (int r = 0; r < gpus; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            return 1;
        }
        if (pids[r] == 0) {
            char v[16];
            snprintf(v, sizeof v, "%d", r);
            setenv("MEGAJIT_RANK", v, 1);
            snprintf(v, sizeof v, "%d", gpus);
            setenv("MEGAJIT_WORLD", v, 1);
            setenv("MEGAJIT_NCCL_ID", id_hex, 1);
            /* NVLink multicast (NVLS) stays off on the shared machines. */
            setenv("NCCL_NVLS_ENABLE", "0", 1);
            execvp(child_argv[0], child_argv);
            fprintf(stderr, "rank %d: exec %s: %s\n", r, child_argv[0], strerror(errno));
            _exit(127);
        }
    }
    int status[MAX_GPUS], left = gpus, timed_out = 0;
    for (int r = 0; r < gpus; r++)
        status[r] = -1;
    time_t deadline = time(NULL) + timeout_s;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < gpus; r++)
                if (pids[r] == p) status[r] = st;
            left--;
            /* The peers of a failed rank wait in a collective that cannot finish. */
            if ((!WIFEXITED(st) || WEXITSTATUS(st)) && deadline > time(NULL) + FAIL_GRACE_S)
                deadline = time(NULL) + FAIL_GRACE_S;
            continue;
        }
        if (time(NULL) > deadline && !timed_out) {
            timed_out = 1;
            fprintf(stderr,
                    "launch_ranks: killing the remaining ranks (a rank failed, or %d s "
                    "passed)\n",
                    timeout_s);
            for (int r = 0; r < gpus; r++)
                if (status[r] == -1) kill(pids[r], SIGKILL);
        }
        usleep(20000);
    }
    int bad = 0;
    for (int r = 0; r < gpus; r++) {
        int ok = WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0;
        if (WIFEXITED(status[r]))
            printf("rank %d: %s (exit %d)\n", r, ok ? "ok" : "FAILED", WEXITSTATUS(status[r]));
        else
            printf("rank %d: FAILED (signal %d)\n", r, WTERMSIG(status[r]));
        bad += !ok;
    }
    printf("%d ranks passed, %d failed\n", gpus - bad, bad);
    return bad != 0;
}
