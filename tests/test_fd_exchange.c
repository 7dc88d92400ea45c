/* File-descriptor exchange among forked processes, group agreement, and the
 * NCCL loader. Runs without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/fd_exchange.h"
#include "runtime/nccl_lib.h"
#include "tests/shm_group.h"

typedef int (*rank_fn)(const mj_group *g);

/* Forks n ranks sharing one shm group; returns how many exited non-zero. */
static int run_ranks(int n, rank_fn fn) {
    shm_group *sg = shm_group_create(n);
    assert_non_null(sg);
    pid_t pids[SHM_GROUP_MAX_RANKS];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            shm_rank me = {sg, r};
            mj_group g = {r, n, shm_allgather, &me};
            _exit(fn(&g));
        }
    }
    int failed = 0;
    for (int r = 0; r < n; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "rank %d exited with status %d\n", r, status);
            failed++;
        }
    }
    shm_group_free(sg);
    return failed;
}

static int payload_fd(int rank) {
    char name[32], text[64];
    snprintf(name, sizeof name, "mj-test-rank-%d", rank);
    int fd = memfd_create(name, MFD_CLOEXEC);
    int len = snprintf(text, sizeof text, "payload of rank %d", rank);
    if (fd < 0 || write(fd, text, (size_t)len) != len) return -1;
    return fd;
}

static int exchange_rank(const mj_group *g) {
    int fd = payload_fd(g->rank), fds[SHM_GROUP_MAX_RANKS];
    if (fd < 0) return 10;
    if (mj_fd_exchange(g, fd, fds, 5000) != MJ_OK) {
        fprintf(stderr, "rank %d: %s\n", g->rank, mj_last_error());
        return 11;
    }
    if (fds[g->rank] != fd) return 12;
    for (int r = 0; r < g->nranks; r++) {
        char want[64], got[64] = {0};
        snprintf(want, sizeof want, "payload of rank %d", r);
        /* A descriptor for the peer's own file: its bytes, not a copy of ours. */
        if (pread(fds[r], got, sizeof got - 1, 0) != (ssize_t)strlen(want) || strcmp(got, want)) {
            fprintf(stderr, "rank %d read \"%s\" from rank %d\n", g->rank, got, r);
            return 13;
        }
        close(fds[r]);
    }
    return 0;
}

static void test_four_ranks_exchange(void **state) {
    (void)state;
    assert_int_equal(run_ranks(4, exchange_rank), 0);
}

static void test_single_rank(void **state) {
    (void)state;
    assert_int_equal(run_ranks(1, exchange_rank), 0);
}

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

#define SILENT_TIMEOUT_MS 300

/* Rank 3 binds its socket (so the others' sends succeed) but never sends. */
static int silent_peer_rank(const mj_group *g) {
    mj_fd_channel *c;
    if (mj_fd_channel_open(g, &c) != MJ_OK) return 20;
    if (g->rank == 3) {
        usleep(4 * SILENT_TIMEOUT_MS * 1000);
        mj_fd_channel_close(c);
        return 0;
    }
    int fd = payload_fd(g->rank), fds[SHM_GROUP_MAX_RANKS];
    int64_t start = now_ms();
    mj_status st = mj_fd_channel_exchange(c, fd, fds, SILENT_TIMEOUT_MS);
    int64_t elapsed = now_ms() - start;
    mj_fd_channel_close(c);
    if (st != MJ_ERR_IO) return 21;
    if (!strstr(mj_last_error(), "timed out") || !strstr(mj_last_error(), "rank(s) 3")) {
        fprintf(stderr, "rank %d: unexpected error: %s\n", g->rank, mj_last_error());
        return 22;
    }
    if (elapsed < SILENT_TIMEOUT_MS || elapsed > 3 * SILENT_TIMEOUT_MS) return 23;
    for (int r = 0; r < g->nranks; r++)
        if (fds[r] != -1) return 24;
    return 0;
}

static void test_silent_peer_times_out(void **state) {
    (void)state;
    assert_int_equal(run_ranks(4, silent_peer_rank), 0);
}

static int agree_rank(const mj_group *g) {
    mj_status local = g->rank == 2 ? MJ_ERR_CUDA : MJ_OK;
    mj_status st = mj_group_agree(g, local, "testing");
    int bad = g->rank == 2
                  ? st != MJ_ERR_CUDA
                  : st != MJ_ERR_CUDA || !strstr(mj_last_error(), "rank 2 failed while testing");
    /* Everyone took the same branch, so the group is still usable. */
    return bad ? 30 : mj_group_agree(g, MJ_OK, "testing") == MJ_OK ? 0 : 31;
}

static void test_group_agree_names_failed_rank(void **state) {
    (void)state;
    assert_int_equal(run_ranks(3, agree_rank), 0);
}

/* The loader's state is per process; each case runs in a fresh child. */
static int nccl_found(const mj_group *g) {
    (void)g;
    const mj_nccl *n = mj_nccl_get();
    if (!n) {
        /* CI without NCCL: the sentence must say what to install. */
        printf("NCCL not available: %s\n", mj_last_error());
        fflush(stdout);
        return strstr(mj_last_error(), "libnccl.so.2") ? 0 : 40;
    }
    printf("NCCL %d.%d.%d from %s\n", n->version / 10000, n->version / 100 % 100, n->version % 100,
           n->path);
    fflush(stdout);
    return n->version >= 21800 ? 0 : 41;
}

static int nccl_missing(const mj_group *g) {
    (void)g;
    setenv("MEGAJIT_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
    if (mj_nccl_get()) return 50;
    const char *e = mj_last_error();
    return strstr(e, "NCCL not found") && strstr(e, "/nonexistent/libnccl.so.2") ? 0 : 51;
}

static void test_nccl_loader(void **state) {
    (void)state;
    assert_int_equal(run_ranks(1, nccl_found), 0);
    assert_int_equal(run_ranks(1, nccl_missing), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_four_ranks_exchange),
        cmocka_unit_test(test_single_rank),
        cmocka_unit_test(test_silent_peer_times_out),
        cmocka_unit_test(test_group_agree_names_failed_rank),
        cmocka_unit_test(test_nccl_loader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
