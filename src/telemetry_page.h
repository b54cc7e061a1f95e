/* telemetry_page: where a loop keeps its telemetry, so that another
 * process can read it (`python -m minloop top PID`: minloop/top.py, over
 * minloop/page_reader.pyx).
 *
 * Some facts this rests on
 *
 *  - The loop's tm_loop (telemetry.h) is not in the LoopCore object but in
 *    a page of its own: on Linux a memfd ("minloop-loop", close-on-exec),
 *    mapped MAP_SHARED once, when the loop is made.  The loop writes its
 *    counters there as it always did (the same stores, through a pointer
 *    it keeps), so an update costs the target no syscall and no copy: the
 *    page *is* the telemetry.  A reader maps the same memfd read-only, and
 *    so sees a loop that is wedged as it is, without its help.
 *  - Finding it: the fd shows in /proc/PID/fd as "/memfd:minloop-loop
 *    (deleted)", and opening that link reopens the memfd.  The kernel lets
 *    the process's own user do that (a ptrace *read* check, which Yama's
 *    ptrace_scope=1 leaves alone, unlike /proc/PID/mem's attach check).
 *    Shrinking, growing and any new writable mapping are sealed off after
 *    the loop maps it (F_SEAL_FUTURE_WRITE where the kernel has it, 5.1+):
 *    no reader can change it, nor make another reader's mapping fault.
 *  - The memfd is anonymous shared memory, never a disk-backed file; one
 *    fd and one or two pages a loop.  close() closes the fd (the loop
 *    vanishes from /proc) and marks the page closed, but keeps the mapping
 *    until the loop object dies: loop.stats() still reads it, and no
 *    thread can read a page unmapped under it.
 *  - fork(): a MAP_SHARED page stays shared with the child, so the child's
 *    loop would count into the parent's page.  The child's at-fork hook
 *    (loop.pyx) gives each loop a page of its own at the same address
 *    (MAP_FIXED: every pointer into it stays good) holding a copy of what
 *    it held, before any code of the child's runs.  A fork() from C that
 *    runs no at-fork hooks leaves the child sharing it (as it leaves it
 *    sharing the poller).
 *  - Where any of it fails (no memfd: not Linux, a seccomp filter, no fd
 *    left) the page is plain heap memory: the loop works and counts, top
 *    cannot see it.  A MINLOOP_NO_TELEMETRY build publishes nothing.
 *  - Every word a reader reads is written and read as a relaxed atomic
 *    (TM_LOAD/TM_STORE, docs/threading.md item 18): another process is one
 *    more reader.  The header's layout words let a reader built from other
 *    sources refuse a page it would misread.
 */
#ifndef MINLOOP_TELEMETRY_PAGE_H
#define MINLOOP_TELEMETRY_PAGE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "telemetry.h"

#if defined(__linux__) && MINLOOP_TELEMETRY
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
/* Through syscall(): glibc's memfd_create() wrapper (2.27) is newer than
 * the wheels' manylinux_2_17, and so may be its headers. */
#if !defined(SYS_memfd_create) && defined(__x86_64__)
#define SYS_memfd_create 319
#elif !defined(SYS_memfd_create) && defined(__aarch64__)
#define SYS_memfd_create 279
#endif
#ifdef SYS_memfd_create
#define TM_PAGE_SHAREABLE 1
#endif
#endif
#ifndef TM_PAGE_SHAREABLE
#define TM_PAGE_SHAREABLE 0
#endif

#define TM_PAGE_NAME "minloop-loop"
#define TM_PAGE_MAGIC 0x65676170706f6f6cULL   /* "loopage" */
#define TM_PAGE_VERSION 2
#define TM_THREAD_NAME 64
#define TM_NOTE_TEXT 240

/* flags */
#define TM_PAGE_SHARED 1      /* mapped (a memfd's), else heap memory */
#define TM_PAGE_CLOSED 2      /* the loop is closed */

typedef struct {
    /* Written once, when it is made: what a reader checks first. */
    uint64_t magic;
    uint32_t version;
    uint32_t layout_size;     /* sizeof(tm_page) */
    uint32_t tm_offset;       /* offsetof(tm_page, tm) */
    uint32_t tm_size;         /* sizeof(tm_loop) */
    uint32_t buckets;         /* TM_BUCKETS */
    uint32_t map_size;        /* bytes mapped */
    uint64_t loop_id;         /* the process's loops numbered from 1 */
    /* Written by the loop's thread (relaxed). */
    uint32_t flags;
    int32_t pid;              /* the process it is (its own after fork) */
    int32_t tid;              /* the thread running it now or last (0: none yet) */
    int32_t interp;           /* the interpreter that made it (0: the main one); its
                               * loops are numbered apart from other interpreters' */
    uint64_t thread_key;      /* pthread_self() behind tid (its cache) */
    /* The Python thread's name (threading's), as of the same change. */
    char thread_name[TM_THREAD_NAME];
    /* The stall watchdog's note (stall.pyx, holding the GIL: one writer),
     * under note_seq (odd while written): the callback it flagged, by its
     * number in tm.callbacks, when it began at the earliest (monotonic
     * ns), its description and the line it was sampled on. */
    int64_t stall_threshold_ns;   /* an armed watchdog's; 0: none */
    uint32_t note_seq;
    uint32_t pad2;
    uint64_t note_callback_no;
    int64_t note_since;
    char note_callback[TM_NOTE_TEXT];
    char note_where[TM_NOTE_TEXT];
    tm_loop tm;
} tm_page;

static inline tm_page *tm_page_of(tm_loop *t)
{
    return (tm_page *)(void *)((char *)t - offsetof(tm_page, tm));
}

static inline size_t tm_page_bytes(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    return (sizeof(tm_page) + page - 1) / page * page;
}

static inline void tm_page_header(tm_page *p, size_t map_size, uint32_t flags)
{
    static uint64_t loops_made;
    p->magic = TM_PAGE_MAGIC;
    p->version = TM_PAGE_VERSION;
    p->layout_size = (uint32_t)sizeof(tm_page);
    p->tm_offset = (uint32_t)offsetof(tm_page, tm);
    p->tm_size = (uint32_t)sizeof(tm_loop);
    p->buckets = TM_BUCKETS;
    p->map_size = (uint32_t)map_size;
    p->loop_id = __atomic_add_fetch(&loops_made, 1, __ATOMIC_RELAXED);
    p->flags = flags;
    p->pid = (int32_t)getpid();
}

#if TM_PAGE_SHAREABLE
/* A sealed memfd of `size` bytes mapped at `at` (NULL: anywhere; else
 * MAP_FIXED over what is there): the mapping, and the fd in *fd; NULL
 * (errno set) if any step fails. */
static inline void *tm_page_map_memfd(void *at, size_t size, int *fd)
{
    int f = (int)syscall(SYS_memfd_create, TM_PAGE_NAME, 0x0001U | 0x0002U);
    /* MFD_CLOEXEC | MFD_ALLOW_SEALING */
    void *m;
    if (f < 0)
        return NULL;
    if (ftruncate(f, (off_t)size) < 0)
        goto fail;
    m = mmap(at, size, PROT_READ | PROT_WRITE,
             MAP_SHARED | (at ? MAP_FIXED : 0), f, 0);
    if (m == MAP_FAILED)
        goto fail;
    /* F_ADD_SEALS: F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE, or
     * the first two on a kernel without the last.  Through syscall() too:
     * with Python's _FILE_OFFSET_BITS=64, glibc >= 2.28 headers turn
     * fcntl() into fcntl64@GLIBC_2.28, which made the wheel manylinux_2_28. */
    if (syscall(SYS_fcntl, f, 1033, 0x0002 | 0x0004 | 0x0010) < 0)
        (void)syscall(SYS_fcntl, f, 1033, 0x0002 | 0x0004);
    *fd = f;
    return m;
fail:
    {
        int e = errno;
        close(f);
        errno = e;
    }
    return NULL;
}
#endif

/* A new loop's page, its telemetry initialized: *fd is the memfd (-1: the
 * page is heap memory, top cannot see it).  NULL: no memory. */
static inline tm_page *tm_page_open(int *fd)
{
    size_t size = tm_page_bytes();
    tm_page *p = NULL;
    *fd = -1;
#if TM_PAGE_SHAREABLE
    p = (tm_page *)tm_page_map_memfd(NULL, size, fd);
    if (p != NULL) {
        /* A fresh memfd reads as zeros. */
        tm_init(&p->tm);
        tm_page_header(p, size, TM_PAGE_SHARED);
        return p;
    }
#endif
    p = (tm_page *)calloc(1, size);
    if (p == NULL)
        return NULL;
    tm_init(&p->tm);
    tm_page_header(p, size, 0);
    return p;
}

/* close(): the loop is gone from /proc/PID/fd; the page stays mapped. */
static inline void tm_page_closed(tm_page *p, int *fd)
{
    TM_STORE(p->flags, TM_LOAD(p->flags) | TM_PAGE_CLOSED);
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* The loop object dies. */
static inline void tm_page_free(tm_page *p, int *fd)
{
    if (p == NULL)
        return;
    tm_page_closed(p, fd);
#if TM_PAGE_SHAREABLE
    if (p->flags & TM_PAGE_SHARED) {
        munmap(p, p->map_size);
        return;
    }
#endif
    free(p);
}

/* In a forked child, before any of its code runs: a page of the child's
 * own at the same address with the same contents; a memfd again if the
 * loop is open (*fd >= 0), else private memory.  The inherited fd is the
 * parent's memfd: closed. */
static inline void tm_page_after_fork(tm_page *p, int *fd)
{
#if TM_PAGE_SHAREABLE
    if (p->flags & TM_PAGE_SHARED) {
        size_t size = p->map_size;
        int open = *fd >= 0, f = -1;
        void *copy = malloc(size), *m = NULL;
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        if (copy == NULL)
            abort();   /* no way to tell the child's loop from the parent's */
        memcpy(copy, p, size);
        if (open)
            m = tm_page_map_memfd(p, size, &f);
        if (m == NULL) {
            m = mmap(p, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            if (m == MAP_FAILED)
                abort();
            f = -1;
        }
        memcpy(p, copy, size);
        free(copy);
        *fd = f;   /* -1: private now, still a mapping (TM_PAGE_SHARED) */
    }
#else
    (void)fd;
#endif
    p->pid = (int32_t)getpid();
    p->tid = 0;
    p->thread_key = 0;
}

/* run_forever() begins on the thread `key` (pthread_self()): its kernel
 * tid, asked only when the thread differs from the last run's.  1 if it
 * does: the loop then names the thread (tm_page_thread_name). */
static inline int tm_page_run_by(tm_page *p, uint64_t key)
{
#if TM_PAGE_SHAREABLE
    if (p->thread_key != key) {
        p->thread_key = key;
        TM_STORE(p->tid, (int32_t)syscall(SYS_gettid));
        return 1;
    }
#else
    (void)p; (void)key;
#endif
    return 0;
}

/* The loop's thread.  A reader may see a name half written as the thread
 * changes: top shows names, it does not parse them. */
static inline void tm_page_thread_name(tm_page *p, const char *name)
{
    size_t n;
    for (n = 0; n < TM_THREAD_NAME - 1 && name[n]; n++)
        TM_STORE(p->thread_name[n], name[n]);
    TM_STORE(p->thread_name[n], 0);
}

static inline void tm_page_read_thread_name(const tm_page *p, char *name)
{
    size_t n;
    for (n = 0; n < TM_THREAD_NAME; n++)
        name[n] = TM_LOAD(p->thread_name[n]);
    name[TM_THREAD_NAME - 1] = 0;
}

/* The stall watchdog's note (its thread, holding the GIL). */
static inline void tm_page_note(tm_page *p, uint64_t callback_no, int64_t since,
                                const char *callback, const char *where)
{
    size_t n;
    TM_STORE(p->note_seq, TM_LOAD(p->note_seq) + 1);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    TM_STORE(p->note_callback_no, callback_no);
    TM_STORE(p->note_since, since);
    /* Byte by byte: relaxed stores, as a reader reads them. */
    for (n = 0; n < TM_NOTE_TEXT - 1 && callback[n]; n++)
        TM_STORE(p->note_callback[n], callback[n]);
    TM_STORE(p->note_callback[n], 0);
    for (n = 0; n < TM_NOTE_TEXT - 1 && where[n]; n++)
        TM_STORE(p->note_where[n], where[n]);
    TM_STORE(p->note_where[n], 0);
    __atomic_store_n(&p->note_seq, TM_LOAD(p->note_seq) + 1, __ATOMIC_RELEASE);
}

static inline void tm_page_stall_threshold(tm_page *p, int64_t ns)
{
    TM_STORE(p->stall_threshold_ns, ns);
}

/* ------------------------------------------------------------------ */
/* The reader's side (page_reader.pyx): a page mapped read-only. */

/* 0 if `p` (`len` bytes) is a page this build reads, else why not:
 * 1 not a page, 2 another layout version, 3 another layout (another
 * build of minloop), 4 this build has no telemetry to read it with. */
static inline int tm_page_check(const tm_page *p, size_t len)
{
    if (len < sizeof(uint64_t) + sizeof(uint32_t) || p->magic != TM_PAGE_MAGIC)
        return 1;
    if (p->version != TM_PAGE_VERSION)
        return 2;
    if (!MINLOOP_TELEMETRY)
        return 4;
    if (len < sizeof(tm_page) || p->layout_size != sizeof(tm_page)
            || p->tm_offset != offsetof(tm_page, tm)
            || p->tm_size != sizeof(tm_loop) || p->buckets != TM_BUCKETS)
        return 3;
    return 0;
}

/* What the loop is doing, read together (the clock words' sequence lock):
 * run_since (0: not running), sleep_since (0: not asleep in the poller),
 * woke (the last sleep ended), and the lock's count. */
typedef struct {
    int64_t run_since, sleep_since, woke;
    uint32_t seq;
} tm_state;

static inline void tm_read_state(const tm_loop *t, tm_state *out)
{
#if MINLOOP_TELEMETRY
    uint32_t s1, s2;
    do {
        s1 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
        out->run_since = TM_LOAD(t->run_since);
        out->sleep_since = TM_LOAD(t->sleep_since);
        out->woke = TM_LOAD(t->woke);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        s2 = TM_LOAD(t->seq);
    } while ((s1 & 1) || s1 != s2);
    out->seq = s1;
#else
    (void)t;
    memset(out, 0, sizeof *out);
#endif
}

/* The note, if it could be read whole (1; 0 while being written). */
static inline int tm_page_read_note(const tm_page *p, uint64_t *callback_no,
                                    int64_t *since, char *callback, char *where)
{
    uint32_t s1 = __atomic_load_n(&p->note_seq, __ATOMIC_ACQUIRE), s2;
    size_t n;
    if (s1 & 1)
        return 0;
    *callback_no = TM_LOAD(p->note_callback_no);
    *since = TM_LOAD(p->note_since);
    for (n = 0; n < TM_NOTE_TEXT; n++)
        callback[n] = TM_LOAD(p->note_callback[n]);
    for (n = 0; n < TM_NOTE_TEXT; n++)
        where[n] = TM_LOAD(p->note_where[n]);
    callback[TM_NOTE_TEXT - 1] = where[TM_NOTE_TEXT - 1] = 0;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    s2 = TM_LOAD(p->note_seq);
    return s1 == s2;
}

#endif
