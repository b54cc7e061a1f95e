/*
 * echo_client.c -- the load generator of benchmarks/net_compare.py.
 *
 *   echo_client --mode tcp|unix|udp|http (--host H --port P | --path PATH)
 *               [--conns N] [--size BYTES] [--depth K] [--duration S]
 *               [--warmup S] [--server-pid PID]
 *
 * N connections (or, for udp, N connected datagram sockets), one epoll set,
 * one thread: it has to stay well ahead of any Python server, so it does no
 * work per byte beyond recv/send and a sampled memcmp.
 *
 * Echo modes (tcp, unix): each connection keeps K messages of SIZE bytes in
 * flight (K = 1: send one, wait for all of its bytes back, send the next).
 * A stream has no message boundaries, so a "round trip" is counted each time
 * the bytes received on a connection cross a multiple of SIZE.
 *
 * udp: each socket keeps K datagrams of SIZE bytes in flight; a datagram
 * that has not come back after 200 ms counts as lost and is sent again.
 *
 * http: each connection sends a fixed GET and expects --reply-len bytes back
 * (only used to warm an HTTP server up before wrk measures it).
 *
 * Timeline: connect all, run WARMUP seconds uncounted, then DURATION seconds
 * counted; then stop sending, wait (up to 5 s) for every outstanding byte,
 * and check that each connection got back exactly as many bytes as it sent.
 * Content: byte o of every stream (and of every datagram) is (o + conn) % 251
 * -- a period prime to any power-of-two SIZE, so a server that echoes stale,
 * reordered or another connection's bytes mismatches; one received chunk in
 * eight is compared with memcmp (all of them with --verify-all).
 *
 * The CPU of the server (--server-pid: utime + stime from /proc/PID/stat,
 * and utime alone as server_user_cpu) and of this process are read at the
 * two edges of the counted window, so neither includes start-up, warm-up or
 * drain.
 *
 * Output: one JSON object on stdout.  Exit status 0 if every check passed,
 * 1 otherwise (the JSON then has "error").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PERIOD 251
#define MAX_CONNS 1024
#define RECV_CHUNK (256 * 1024)
#define UDP_TIMEOUT 0.2

enum mode { M_TCP, M_UNIX, M_UDP, M_HTTP };

struct conn {
    int fd;
    int id;
    uint64_t sent;       /* bytes (stream) or datagrams (udp) sent */
    uint64_t recvd;      /* bytes (stream) or datagrams (udp) received */
    uint64_t msgs_sent;  /* messages fully or partly handed to send() */
    int want_out;        /* EPOLLOUT currently requested */
    double last_send;    /* udp: time of the last send, for loss detection */
};

static enum mode mode = M_TCP;
static const char *host = "127.0.0.1";
static int port = 0;
static const char *path = NULL;
static int nconns = 1;
static size_t size = 1024;
static int depth = 1;
static double duration = 2.0, warmup = 0.3;
static int server_pid = 0;
static size_t reply_len = 0;
static int verify_all = 0;

static unsigned char *pattern;   /* pattern[i] = i % PERIOD */
static unsigned char *requests;  /* http: depth + 1 copies of http_request */
static unsigned char *rbuf;
static int epfd;
static int sending = 1;
static uint64_t counted_rt = 0, counted_bytes = 0, udp_lost = 0, udp_late = 0, checked_chunks = 0;
static uint64_t chunk_no = 0;
static int counting = 0;
static char error[512] = "";

static const char http_request[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6
         + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

/* utime + stime of another process in seconds, or -1; its utime alone in
 * *user.  Both are in clock ticks, and the kernel splits the process's time
 * between user and system by sampling at its timer tick: over a window of a
 * second, good to a few percent. */
static double proc_cpu(int pid, double *user)
{
    char name[64], buf[1024];
    snprintf(name, sizeof name, "/proc/%d/stat", pid);
    int fd = open(name, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    /* The command name (field 2) may hold spaces: fields are counted from
     * the last ')'.  utime and stime are fields 14 and 15. */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long utime = 0, stime = 0;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
               &utime, &stime) != 2)
        return -1;
    *user = (double)utime / sysconf(_SC_CLK_TCK);
    return (double)(utime + stime) / sysconf(_SC_CLK_TCK);
}

static void fail(const char *fmt, const char *detail)
{
    if (!error[0])
        snprintf(error, sizeof error, fmt, detail);
}

static void die(const char *what)
{
    printf("{\"error\": \"%s: %s\"}\n", what, strerror(errno));
    exit(1);
}

static void set_events(struct conn *c, int out)
{
    if (c->want_out == out)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die("epoll_ctl");
    c->want_out = out;
}

static int open_conn(void)
{
    int fd;
    if (mode == M_UNIX) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            die("connect");
    } else {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
            errno = EINVAL;
            die("host must be an IPv4 literal");
        }
        fd = socket(AF_INET, mode == M_UDP ? SOCK_DGRAM : SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            die("connect");
        if (mode != M_UDP) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* ------------------------------------------------------------------------
 * Streams (tcp, unix, http)
 * ------------------------------------------------------------------------ */

static size_t msg_len(void) { return mode == M_HTTP ? sizeof http_request - 1 : size; }
static size_t back_len(void) { return mode == M_HTTP ? reply_len : size; }

/* Send while fewer than depth messages are outstanding, all that may go in
 * one send() (pipelining is the point of depth > 1: a real client batches
 * too, and one syscall per message would make this process the bottleneck).
 * Requests EPOLLOUT only when the socket is full.  Returns -1 on a fatal
 * error. */
static int stream_send(struct conn *c)
{
    size_t m = msg_len();
    for (;;) {
        uint64_t done = c->recvd / back_len();
        /* Once the counted window is over, only finish a message begun. */
        uint64_t limit = sending ? done + depth : c->msgs_sent;
        uint64_t target = limit * m;  /* total bytes to have sent */
        if (c->sent >= target) {
            set_events(c, 0);
            return 0;
        }
        /* target - sent <= depth * m, since every message up to done was
         * sent whole: the source buffers are long enough. */
        size_t len = target - c->sent;
        const unsigned char *src = mode == M_HTTP
            ? requests + c->sent % m
            : pattern + (c->sent + c->id) % PERIOD;
        ssize_t n = send(c->fd, src, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                set_events(c, 1);
                return 0;
            }
            if (errno == EINTR)
                continue;
            fail("send: %s", strerror(errno));
            return -1;
        }
        c->sent += n;
        c->msgs_sent = (c->sent + m - 1) / m;
    }
}

static int stream_recv(struct conn *c)
{
    for (;;) {
        ssize_t n = recv(c->fd, rbuf, RECV_CHUNK, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            fail("recv: %s", strerror(errno));
            return -1;
        }
        if (n == 0) {
            fail("%s", "server closed a connection");
            return -1;
        }
        if (mode != M_HTTP && (verify_all || (chunk_no++ & 7) == 0)) {
            if (memcmp(rbuf, pattern + (c->recvd + c->id) % PERIOD, n) != 0) {
                fail("%s", "echoed content differs from what was sent");
                return -1;
            }
            checked_chunks++;
        }
        uint64_t before = c->recvd / back_len();
        c->recvd += n;
        if (c->recvd > c->msgs_sent * back_len()) {
            fail("%s", "received more bytes than were sent");
            return -1;
        }
        if (counting) {
            counted_rt += c->recvd / back_len() - before;
            counted_bytes += n;
        }
        if (n < RECV_CHUNK)
            return 0;
    }
}

/* ------------------------------------------------------------------------
 * Datagrams (udp)
 * ------------------------------------------------------------------------ */

static int udp_send_one(struct conn *c)
{
    ssize_t n = send(c->fd, pattern + (c->sent + c->id) % PERIOD, size, 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS
                || errno == ECONNREFUSED)
            return 0;  /* treated like a loss: the timeout resends */
        fail("send: %s", strerror(errno));
        return -1;
    }
    c->sent++;
    c->last_send = now();
    return 0;
}

static int udp_recv(struct conn *c)
{
    for (;;) {
        ssize_t n = recv(c->fd, rbuf, RECV_CHUNK, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR || errno == ECONNREFUSED)
                continue;
            fail("recv: %s", strerror(errno));
            return -1;
        }
        if ((size_t)n != size) {
            fail("%s", "an echoed datagram has the wrong length");
            return -1;
        }
        /* Datagrams carry their sequence number's offset: check the bytes
         * are the pattern at some offset (resends make the exact one
         * unknowable), i.e. each byte is its predecessor + 1 mod PERIOD. */
        if (verify_all || (chunk_no++ & 7) == 0) {
            int start = rbuf[0];
            if (start >= PERIOD || memcmp(rbuf, pattern + start, n) != 0) {
                fail("%s", "echoed datagram content differs from what was sent");
                return -1;
            }
            checked_chunks++;
        }
        if (c->recvd == c->sent) {
            udp_late++;  /* came back after it was given up for lost */
            continue;
        }
        c->recvd++;
        if (counting) {
            counted_rt++;
            counted_bytes += n;
        }
        if (sending && c->sent - c->recvd < (uint64_t)depth)
            if (udp_send_one(c) < 0)
                return -1;
    }
}

static int udp_check_lost(struct conn *conns, double t)
{
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        if (c->sent - c->recvd > 0 && t - c->last_send > UDP_TIMEOUT) {
            /* Forget the missing ones and start again. */
            udp_lost += c->sent - c->recvd;
            c->recvd = c->sent;
            if (sending)
                for (int k = 0; k < depth; k++)
                    if (udp_send_one(c) < 0)
                        return -1;
        } else if (sending && c->sent == c->recvd) {
            for (int k = 0; k < depth; k++)
                if (udp_send_one(c) < 0)
                    return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr, "usage: echo_client --mode tcp|unix|udp|http (--host H --port P | --path P)"
                    " [--conns N] [--size B] [--depth K] [--duration S] [--warmup S]"
                    " [--server-pid PID] [--reply-len B] [--verify-all]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--verify-all")) { verify_all = 1; continue; }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "tcp")) mode = M_TCP;
            else if (!strcmp(v, "unix")) mode = M_UNIX;
            else if (!strcmp(v, "udp")) mode = M_UDP;
            else if (!strcmp(v, "http")) mode = M_HTTP;
            else usage();
        }
        else if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--path")) path = v;
        else if (!strcmp(a, "--conns")) nconns = atoi(v);
        else if (!strcmp(a, "--size")) size = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--depth")) depth = atoi(v);
        else if (!strcmp(a, "--duration")) duration = atof(v);
        else if (!strcmp(a, "--warmup")) warmup = atof(v);
        else if (!strcmp(a, "--server-pid")) server_pid = atoi(v);
        else if (!strcmp(a, "--reply-len")) reply_len = strtoul(v, NULL, 10);
        else usage();
    }
    if (nconns < 1 || nconns > MAX_CONNS || size < 1 || depth < 1
            || (mode == M_UNIX && !path) || (mode != M_UNIX && !port)
            || (mode == M_HTTP && !reply_len) || (mode == M_UDP && size > 65000))
        usage();
    signal(SIGPIPE, SIG_IGN);

    /* Long enough for a send of depth * SIZE or a received chunk of
     * RECV_CHUNK to start anywhere in the first PERIOD bytes. */
    size_t plen = (size * depth > RECV_CHUNK ? size * depth : RECV_CHUNK) + PERIOD;
    pattern = malloc(plen);
    rbuf = malloc(RECV_CHUNK);
    for (size_t i = 0; i < plen; i++)
        pattern[i] = i % PERIOD;
    if (mode == M_HTTP) {
        requests = malloc((depth + 1) * msg_len());
        for (int i = 0; i <= depth; i++)
            memcpy(requests + i * msg_len(), http_request, msg_len());
    }
    struct conn *conns = calloc(nconns, sizeof *conns);
    epfd = epoll_create1(0);
    for (int i = 0; i < nconns; i++) {
        conns[i].fd = open_conn();
        conns[i].id = mode == M_UDP ? 0 : i;  /* distinct streams per connection */
        conns[i].want_out = -1;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, conns[i].fd, &ev) < 0)
            die("epoll_ctl");
        conns[i].want_out = 0;
    }

    double t0 = now();
    double t_start = t0 + warmup, t_end = t_start + duration, t_drain = 0;
    double cpu_start = 0, cpu_end = 0, srv_start = -1, srv_end = -1, wall = 0;
    double srv_user_start = 0, srv_user_end = 0;
    for (int i = 0; i < nconns; i++) {
        if (mode == M_UDP) {
            for (int k = 0; k < depth; k++)
                udp_send_one(&conns[i]);
        } else if (stream_send(&conns[i]) < 0) {
            goto done;
        }
    }

    struct epoll_event events[MAX_CONNS];
    for (;;) {
        double t = now();
        if (!counting && sending && t >= t_start) {
            counting = 1;
            srv_start = server_pid ? proc_cpu(server_pid, &srv_user_start) : -1;
            cpu_start = self_cpu();
            t_start = now();
            t_end = t_start + duration;
        } else if (counting && t >= t_end) {
            counting = 0;
            sending = 0;
            cpu_end = self_cpu();
            srv_end = server_pid ? proc_cpu(server_pid, &srv_user_end) : -1;
            wall = now() - t_start;
            t_drain = t + 5.0;
        }
        if (!sending) {
            int pending = 0;
            for (int i = 0; i < nconns; i++) {
                struct conn *c = &conns[i];
                if (mode == M_UDP ? c->sent != c->recvd
                                  : c->recvd != c->msgs_sent * back_len())
                    pending = 1;
            }
            if (!pending)
                break;
            if (t >= t_drain) {
                fail("%s", "timed out waiting for the last echoes");
                break;
            }
            if (mode == M_UDP && t - t_end > 2 * UDP_TIMEOUT)
                break;  /* the last lost datagrams will not come back */
        }
        double next = counting ? t_end : (sending ? t_start : t_drain);
        if (mode == M_UDP && !sending)
            next = t_end + 2 * UDP_TIMEOUT + 0.001;
        int timeout_ms = (int)((next - t) * 1000) + 1;
        if (mode == M_UDP && timeout_ms > 50)
            timeout_ms = 50;
        int n = epoll_wait(epfd, events, MAX_CONNS, timeout_ms);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (mode == M_UDP) {
                if (udp_recv(c) < 0)
                    goto done;
                continue;
            }
            if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                if (stream_recv(c) < 0)
                    goto done;
            if (stream_send(c) < 0)
                goto done;
        }
        if (mode == M_UDP && udp_check_lost(conns, now()) < 0)
            goto done;
    }

done:
    if (!wall && !error[0])
        fail("%s", "the run ended before its counted window");
    uint64_t sent_total = 0, recv_total = 0;
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        sent_total += c->sent;
        recv_total += c->recvd;
        if (mode != M_UDP && !error[0] && c->recvd != c->msgs_sent * back_len())
            fail("%s", "a connection got back fewer bytes than it sent");
        close(c->fd);
    }
    printf("{\"mode\": \"%s\", \"conns\": %d, \"size\": %zu, \"depth\": %d, "
           "\"seconds\": %.6f, \"round_trips\": %llu, \"bytes\": %llu, "
           "\"client_cpu\": %.4f, \"server_cpu\": %.4f, \"server_user_cpu\": %.4f, "
           "\"sent_total\": %llu, \"recv_total\": %llu, \"udp_lost\": %llu, \"udp_late\": %llu, "
           "\"checked_chunks\": %llu",
           mode == M_TCP ? "tcp" : mode == M_UNIX ? "unix" : mode == M_UDP ? "udp" : "http",
           nconns, mode == M_HTTP ? msg_len() : size, depth, wall,
           (unsigned long long)counted_rt, (unsigned long long)counted_bytes,
           cpu_end - cpu_start,
           (srv_start >= 0 && srv_end >= 0) ? srv_end - srv_start : -1.0,
           (srv_start >= 0 && srv_end >= 0) ? srv_user_end - srv_user_start : -1.0,
           (unsigned long long)sent_total, (unsigned long long)recv_total,
           (unsigned long long)udp_lost, (unsigned long long)udp_late, (unsigned long long)checked_chunks);
    if (error[0]) {
        printf(", \"error\": \"");
        for (const char *p = error; *p; p++)
            putchar(*p == '"' || *p == '\\' ? '\'' : *p);
        printf("\"");
    }
    printf("}\n");
    return error[0] ? 1 : 0;
}
