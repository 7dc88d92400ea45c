#include "runtime/fd_exchange.h"
#include "runtime/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "runtime/error.h"

mj_status mj_group_agree(const mj_group *g, mj_status local, const char *what) {
    if (g->nranks == 1) return local;
    int32_t mine = (int32_t)local;
    int32_t *all = malloc(sizeof *all * (size_t)g->nranks);
    if (!all) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    mj_status st = g->allgather(g->ctx, &mine, all, sizeof mine);
    int failed = -1;
    for (int r = 0; st == MJ_OK && r < g->nranks && failed < 0; r++)
        if (all[r] != MJ_OK) failed = r;
    if (st == MJ_OK && failed >= 0) {
        st = local != MJ_OK ? local
                            : mj_fail((mj_status)all[failed],
                                      "rank %d failed while %s (see its log)", failed, what);
    }
    free(all);
    return st;
}

struct mj_fd_channel {
    mj_group g;
    uint64_t nonce;
    int sock;
};

/* The message carrying one descriptor; the nonce rejects stale datagrams. */
typedef struct fd_msg {
    uint64_t nonce;
    int32_t from;
} fd_msg;

static socklen_t socket_name(uint64_t nonce, int rank, struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    /* sun_path[0] = 0: the abstract namespace, so nothing is left on disk. */
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "megajit-fd-%016llx-%d",
                     (unsigned long long)nonce, rank);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

mj_status mj_fd_channel_open(const mj_group *g, mj_fd_channel **out) {
    *out = NULL;
    mj_fd_channel *c = calloc(1, sizeof *c);
    if (!c) return mj_fail(MJ_ERR_NOMEM, "out of memory");
    c->g = *g;
    c->sock = -1;
    uint64_t mine = 0;
    if (getrandom(&mine, sizeof mine, 0) != (ssize_t)sizeof mine)
        mine = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
    mine ^= (uint64_t)getpid() << 32;
    uint64_t *all = malloc(sizeof *all * (size_t)g->nranks);
    mj_status st = all ? g->allgather(g->ctx, &mine, all, sizeof mine)
                       : mj_fail(MJ_ERR_NOMEM, "out of memory");
    if (st == MJ_OK) c->nonce = all[0];
    free(all);
    if (st != MJ_OK) {
        free(c);
        return st;
    }
    mj_status local = MJ_OK;
    struct sockaddr_un a;
    socklen_t len = socket_name(c->nonce, g->rank, &a);
    c->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (c->sock < 0 || bind(c->sock, (struct sockaddr *)&a, len) != 0)
        local = mj_fail(MJ_ERR_IO, "rank %d: binding the abstract socket @%s: %s", g->rank,
                        a.sun_path + 1, strerror(errno));
    st = mj_group_agree(g, local, "binding its file-descriptor socket");
    if (st != MJ_OK) {
        mj_fd_channel_close(c);
        return st;
    }
    *out = c;
    return MJ_OK;
}

void mj_fd_channel_close(mj_fd_channel *c) {
    if (!c) return;
    if (c->sock >= 0) close(c->sock);
    free(c);
}

/* 1 when a datagram was consumed, 0 when the queue is empty, -1 on error. */
static int receive_one(mj_fd_channel *c, int *fds, int *received) {
    fd_msg m;
    struct iovec iov = {&m, sizeof m};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr h = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
    ssize_t n = recvmsg(c->sock, &h, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
        mj_fail(MJ_ERR_IO, "rank %d: receiving a file descriptor: %s", c->g.rank, strerror(errno));
        return -1;
    }
    int fd = -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&h);
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    if (n != (ssize_t)sizeof m || m.nonce != c->nonce) {
        /* Not ours (a leftover of an aborted exchange): drop it. */
        if (fd >= 0) close(fd);
        return 1;
    }
    if (fd < 0 || (h.msg_flags & MSG_CTRUNC) || m.from < 0 || m.from >= c->g.nranks ||
        m.from == c->g.rank || fds[m.from] >= 0) {
        if (fd >= 0) close(fd);
        mj_fail(MJ_ERR_IO, "rank %d: malformed or duplicate descriptor message from rank %d",
                c->g.rank, (int)m.from);
        return -1;
    }
    fds[m.from] = fd;
    (*received)++;
    return 1;
}

/* 1 when sent, 0 when the peer's queue is full, -1 on error. */
static int send_one(mj_fd_channel *c, int to, int fd) {
    fd_msg m = {c->nonce, c->g.rank};
    struct iovec iov = {&m, sizeof m};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct sockaddr_un a;
    socklen_t len = socket_name(c->nonce, to, &a);
    struct msghdr h = {.msg_name = &a,
                       .msg_namelen = len,
                       .msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&h);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    if (sendmsg(c->sock, &h, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof m) return 1;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    mj_fail(MJ_ERR_IO, "rank %d: sending its file descriptor to rank %d (socket @%s): %s",
            c->g.rank, to, a.sun_path + 1, strerror(errno));
    return -1;
}

static void list_ranks(char *buf, size_t cap, const int *fds, int nranks, int self) {
    size_t used = 0;
    buf[0] = 0;
    for (int r = 0; r < nranks && used + 16 < cap; r++)
        if (r != self && fds[r] < 0)
            used += (size_t)snprintf(buf + used, cap - used, "%s%d", used ? ", " : "", r);
}

mj_status mj_fd_channel_exchange(mj_fd_channel *c, int fd, int *fds, int timeout_ms) {
    const int self = c->g.rank, n = c->g.nranks;
    for (int r = 0; r < n; r++)
        fds[r] = -1;
    int received = 0, next = 1, rc = 0;
    const double deadline = mj_monotonic_ms() + timeout_ms;
    for (;;) {
        while ((rc = receive_one(c, fds, &received)) == 1) {
        }
        if (rc < 0) break;
        /* Peers in ring order spread the load: at any moment each queue holds few messages. */
        while (next < n && (rc = send_one(c, (self + next) % n, fd)) == 1)
            next++;
        if (rc < 0) break;
        if (next == n && received == n - 1) {
            fds[self] = fd;
            return MJ_OK;
        }
        const double left = deadline - mj_monotonic_ms();
        if (left <= 0) {
            char missing[256];
            list_ranks(missing, sizeof missing, fds, n, self);
            if (next < n)
                mj_fail(MJ_ERR_IO,
                        "rank %d: file-descriptor exchange timed out after %d ms: rank %d's "
                        "queue stayed full and nothing arrived from rank(s) %s",
                        self, timeout_ms, (self + next) % n, missing[0] ? missing : "(none)");
            else
                mj_fail(MJ_ERR_IO,
                        "rank %d: file-descriptor exchange timed out after %d ms: nothing from "
                        "rank(s) %s (did every rank reach the exchange?)",
                        self, timeout_ms, missing);
            break;
        }
        struct pollfd p = {.fd = c->sock, .events = POLLIN};
        /* A blocked send is retried every millisecond; a full queue shows no event here. */
        poll(&p, 1, next < n ? 1 : (int)(left < 100 ? left : 100));
    }
    for (int r = 0; r < n; r++) {
        if (fds[r] >= 0) close(fds[r]);
        fds[r] = -1;
    }
    return MJ_ERR_IO; /* every failure above set an MJ_ERR_IO sentence */
}

mj_status mj_fd_exchange(const mj_group *g, int fd, int *fds, int timeout_ms) {
    mj_fd_channel *c;
    mj_status st = mj_fd_channel_open(g, &c);
    if (st != MJ_OK) return st;
    st = mj_fd_channel_exchange(c, fd, fds, timeout_ms);
    mj_fd_channel_close(c);
    return st;
}
