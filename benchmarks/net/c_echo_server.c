/*
 * c_echo_server.c -- the baseline of benchmarks/net_compare.py: what the
 * load generator reaches against a server with no interpreter in it.
 *
 *   c_echo_server --kind tcp|unix|udp|http [--port P | --path PATH]
 *
 * One thread, level-triggered epoll, no per-connection allocation beyond a
 * pending-output buffer.  Each read is written straight back; if the socket
 * takes only part of it, the rest waits for EPOLLOUT and reading pauses (the
 * flow control every Python server here gets from its transport).  The http
 * kind answers every "\r\n\r\n" it sees with the same fixed response as
 * servers.py's httptools server (it parses nothing else: wrk's GETs have no
 * body).
 *
 * Protocol with the driver, the same as servers.py: one JSON "ready" line on
 * stdout once listening; serve until stdin reaches EOF or SIGTERM arrives;
 * then one JSON line with the process's CPU time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define BUF (256 * 1024)

static const char http_response[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";

struct conn {
    int fd;
    char *pending;       /* output the socket has not taken yet */
    size_t plen, pcap;
    int match;           /* http: how much of "\r\n\r\n" the stream ends with */
};

static int epfd;
static volatile sig_atomic_t stop = 0;
static char buf[BUF];
static char out[BUF / 4 * (sizeof http_response)];

static void on_term(int sig) { (void)sig; stop = 1; }

static void die(const char *what)
{
    fprintf(stderr, "c_echo_server: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void report_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"cpu\": {\"user\": %.4f, \"system\": %.4f}}\n",
           ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
           ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6);
    fflush(stdout);
}

static void watch(int fd, void *ptr, int events, int op)
{
    struct epoll_event ev = {.events = events, .data.ptr = ptr};
    if (epoll_ctl(epfd, op, fd, &ev) < 0)
        die("epoll_ctl");
}

static void drop(struct conn *c)
{
    close(c->fd);  /* closing removes it from the epoll set */
    free(c->pending);
    free(c);
}

/* Write data (after anything already pending); keep what the socket refuses.
 * Returns -1 if the connection failed. */
static int conn_write(struct conn *c, const char *data, size_t len)
{
    if (c->plen == 0) {
        while (len) {
            ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    break;
                return -1;
            }
            data += n;
            len -= n;
        }
        if (!len)
            return 0;
        watch(c->fd, c, EPOLLOUT, EPOLL_CTL_MOD);  /* pause reading */
    }
    if (c->plen + len > c->pcap) {
        c->pcap = (c->plen + len) * 2;
        c->pending = realloc(c->pending, c->pcap);
    }
    memcpy(c->pending + c->plen, data, len);
    c->plen += len;
    return 0;
}

static int conn_flush(struct conn *c)
{
    size_t off = 0;
    while (off < c->plen) {
        ssize_t n = send(c->fd, c->pending + off, c->plen - off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            return -1;
        }
        off += n;
    }
    memmove(c->pending, c->pending + off, c->plen - off);
    c->plen -= off;
    if (!c->plen)
        watch(c->fd, c, EPOLLIN, EPOLL_CTL_MOD);
    return 0;
}

static int conn_read(struct conn *c, int http)
{
    ssize_t n = recv(c->fd, buf, BUF, 0);
    if (n < 0)
        return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    if (n == 0)
        return -1;
    if (!http)
        return conn_write(c, buf, n);
    size_t nout = 0;
    for (ssize_t i = 0; i < n; i++) {
        char want = "\r\n\r\n"[c->match];
        if (buf[i] == want) {
            if (++c->match == 4) {
                memcpy(out + nout, http_response, sizeof http_response - 1);
                nout += sizeof http_response - 1;
                c->match = 0;
            }
        } else {
            c->match = buf[i] == '\r' ? 1 : 0;
        }
    }
    return nout ? conn_write(c, out, nout) : 0;
}

int main(int argc, char **argv)
{
    const char *kind = "tcp", *path = NULL;
    int port = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--kind")) kind = argv[i + 1];
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--path")) path = argv[i + 1];
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    int is_unix = !strcmp(kind, "unix"), is_udp = !strcmp(kind, "udp");
    int http = !strcmp(kind, "http");
    if (!is_unix && !is_udp && !http && strcmp(kind, "tcp")) {
        fprintf(stderr, "unknown kind %s\n", kind);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);

    int lfd, one = 1;
    if (is_unix) {
        if (!path) { fprintf(stderr, "--path is required\n"); return 2; }
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        strncpy(un.sun_path, path, sizeof un.sun_path - 1);
        unlink(path);
        lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&un, sizeof un) < 0)
            die("bind");
    } else {
        struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
        lfd = socket(AF_INET, is_udp ? SOCK_DGRAM : SOCK_STREAM, 0);
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&in, sizeof in) < 0)
            die("bind");
        socklen_t len = sizeof in;
        getsockname(lfd, (struct sockaddr *)&in, &len);
        port = ntohs(in.sin_port);
    }
    if (!is_udp && listen(lfd, 1024) < 0)
        die("listen");
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);

    epfd = epoll_create1(0);
    static int lfd_tag, stdin_tag;
    watch(lfd, &lfd_tag, EPOLLIN, EPOLL_CTL_ADD);
    watch(0, &stdin_tag, EPOLLIN, EPOLL_CTL_ADD);  /* EOF on stdin: stop */

    if (is_unix)
        printf("{\"ready\": true, \"path\": \"%s\", \"pid\": %d}\n", path, getpid());
    else
        printf("{\"ready\": true, \"host\": \"127.0.0.1\", \"port\": %d, \"pid\": %d}\n",
               port, getpid());
    fflush(stdout);

    struct epoll_event events[256];
    while (!stop) {
        int n = epoll_wait(epfd, events, 256, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            void *tag = events[i].data.ptr;
            if (tag == &stdin_tag) {
                char b[64];
                if (read(0, b, sizeof b) <= 0)
                    stop = 1;
            } else if (tag == &lfd_tag && is_udp) {
                struct sockaddr_in peer;
                socklen_t plen = sizeof peer;
                ssize_t m = recvfrom(lfd, buf, BUF, 0, (struct sockaddr *)&peer, &plen);
                if (m >= 0)
                    sendto(lfd, buf, m, 0, (struct sockaddr *)&peer, plen);
            } else if (tag == &lfd_tag) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                if (fd < 0)
                    continue;
                if (!is_unix)
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                struct conn *c = calloc(1, sizeof *c);
                c->fd = fd;
                watch(fd, c, EPOLLIN, EPOLL_CTL_ADD);
            } else {
                struct conn *c = tag;
                int rc = 0;
                if (events[i].events & EPOLLOUT)
                    rc = conn_flush(c);
                else
                    rc = conn_read(c, http);
                if (rc < 0)
                    drop(c);
            }
        }
    }
    if (is_unix)
        unlink(path);
    report_cpu();
    return 0;
}
