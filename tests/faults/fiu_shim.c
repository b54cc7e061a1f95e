/* The fault harness's decider, preloaded into the process under test.
 *
 * libfiu's posix wrappers ask a failure point whether to fail; each point
 * the harness enables is bound (fiu_enable_external) to shim_decide, which
 * draws from its own seeded generator, so a seed replays the same schedule
 * of draws, and counts what it injected.  libfiu has no accept4 and no
 * epoll_ctl (the calls loops make), so they are wrapped here, with the
 * errnos their man pages allow.
 *
 * Every counter and the generator are atomics: executor threads call too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

static uint64_t seed, draws, calls, injected;
static uint64_t threshold;           /* fail when a draw < threshold */
static int transient;                /* inject only EINTR / EAGAIN */
static int own_accept4, own_epoll_ctl, own_reduce;
static int epoll_ctl_fail_next;      /* a test's: the next n fail, ENOMEM */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t draw(void)
{
    return splitmix64(seed + __atomic_fetch_add(&draws, 1, __ATOMIC_RELAXED));
}

void shim_configure(uint64_t s, double probability, int only_transient, int accept4_on, int epoll_ctl_on,
                    int reduce_on)
{
    seed = splitmix64(s);
    __atomic_store_n(&draws, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&injected, 0, __ATOMIC_RELAXED);
    threshold = (uint64_t)(probability * 18446744073709551615.0);
    transient = only_transient;
    own_accept4 = accept4_on;
    own_epoll_ctl = epoll_ctl_on;
    own_reduce = reduce_on;
}

/* For a test without libfiu (tests/test_fault_paths.py): the next n
 * epoll_ctl() calls fail with ENOMEM. */
void shim_fail_epoll_ctl(int n) { __atomic_store_n(&epoll_ctl_fail_next, n, __ATOMIC_SEQ_CST); }

/* Off: every decision says no (the harness's own I/O between rounds). */
void shim_off(void) { __atomic_store_n(&threshold, 0, __ATOMIC_RELAXED); }

uint64_t shim_calls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }
uint64_t shim_injected(void) { return __atomic_load_n(&injected, __ATOMIC_RELAXED); }

static int decide(void)
{
    uint64_t t = __atomic_load_n(&threshold, __ATOMIC_RELAXED);
    if (t == 0)
        return 0;
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    if (draw() >= t)
        return 0;
    __atomic_fetch_add(&injected, 1, __ATOMIC_RELAXED);
    return 1;
}

static int transient_errno(int may_eagain)
{
    return (may_eagain && (draw() & 1)) ? EAGAIN : EINTR;
}

/* libfiu's external callback.  *failinfo, when set, is the errno the posix
 * wrapper sets; left NULL, it picks one of the function's valid errnos. */
int shim_decide(const char *name, int *failnum, void **failinfo, unsigned int *flags)
{
    (void)failnum; (void)flags;
    if (!decide())
        return 0;
    if (transient && strstr(name, "/reduce") == NULL)
        /* a blocking read or write (a pipe to a child being spawned) can
         * see EINTR but never EAGAIN */
        *failinfo = (void *)(intptr_t)transient_errno(strncmp(name, "posix/io/net/", 13) == 0);
    return 1;
}

static int pick(const int *errnos, int n)
{
    return errnos[draw() % (uint64_t)n];
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    static const int errnos[] = {EAGAIN, EINTR, ECONNABORTED, EMFILE, ENFILE, ENOBUFS, ENOMEM, EPERM, EPROTO};
    if (real == NULL)
        real = dlsym(RTLD_NEXT, "accept4");
    if (own_accept4 && decide()) {
        errno = transient ? transient_errno(1) : pick(errnos, sizeof errnos / sizeof *errnos);
        return -1;
    }
    return real(fd, addr, len, flags);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    static int (*real)(int, int, int, struct epoll_event *);
    static const int errnos[] = {ENOMEM, ENOSPC};
    if (real == NULL)
        real = dlsym(RTLD_NEXT, "epoll_ctl");
    if (__atomic_load_n(&epoll_ctl_fail_next, __ATOMIC_SEQ_CST) > 0
            && __atomic_sub_fetch(&epoll_ctl_fail_next, 1, __ATOMIC_SEQ_CST) >= 0) {
        errno = ENOMEM;
        return -1;
    }
    /* Only ADD allocates (ep_insert: the epitem, and max_user_watches for
     * ENOSPC); Linux's MOD and DEL never fail with ENOMEM or ENOSPC, so a
     * fault there would test a path no kernel takes. */
    if (op == EPOLL_CTL_ADD && own_epoll_ctl && decide()) {
        errno = pick(errnos, sizeof errnos / sizeof *errnos);
        return -1;
    }
    return real(epfd, op, fd, ev);
}

/* A short send or recv: the kernel may always do less than asked. */
static size_t reduce(size_t len)
{
    if (len > 1 && own_reduce && decide())
        return 1 + (size_t)(draw() % (uint64_t)(len - 1));
    return len;
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    static ssize_t (*real)(int, const void *, size_t, int);
    if (real == NULL)
        real = dlsym(RTLD_NEXT, "send");
    return real(fd, buf, reduce(len), flags);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    static ssize_t (*real)(int, void *, size_t, int);
    if (real == NULL)
        real = dlsym(RTLD_NEXT, "recv");
    return real(fd, buf, reduce(len), flags);
}
