/* fd_table: the calls off the hot path (see fd_table.h). */
#include "fd_table.h"
#include "alloc_faults.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The first allocation; then the size doubles until fd fits. */
#define FDT_MIN_SIZE 64

void fdt_init(fd_table *t)
{
    t->slots = NULL;
    t->size = 0;
    t->armed = 0;
    TM_STORE(t->watched, 0);
    TM_STORE(t->watched_max, 0);
}

void fdt_free(fd_table *t)
{
    uint64_t most = t->watched_max;   /* a figure of the loop's life */
    free(t->slots);
    fdt_init(t);
    TM_STORE(t->watched_max, most);
}

int fdt_grow(fd_table *t, int fd)
{
    size_t size;
    fdt_slot *slots;
    if (fd < 0)
        return -EBADF;
    if (fd < t->size)
        return 0;
    if (fd >= INT_MAX / 2)
        return -ENOMEM;   /* no fd is that large; do not overflow `size` */
    size = t->size ? (size_t)t->size : FDT_MIN_SIZE;
    while (size <= (size_t)fd)
        size *= 2;
    slots = af_fails(AF_FD_TABLE) ? NULL : realloc(t->slots, size * sizeof(fdt_slot));
    if (slots == NULL)
        return -ENOMEM;
    memset(&slots[t->size], 0, (size - (size_t)t->size) * sizeof(fdt_slot));
    t->slots = slots;
    t->size = (int)size;
    return 0;
}

int fdt_after_fork(fd_table *t, poller *p)
{
    int fd, failed = 0;
    for (fd = 0; fd < t->size; fd++) {
        fdt_slot *s = &t->slots[fd];
        if (!FDT_ARMED(s->mask)) {
            /* Disarmed registrations stayed in the parent's poller; the new
             * one knows nothing of this fd. */
            s->mask = 0;
        } else if (poller_modify(p, fd, 0, s->mask) < 0) {
            s->mask = 0;
            t->armed--;
            failed++;
        }
    }
    return failed;
}

void *fdt_drain(fd_table *t, int *cursor)
{
    for (; *cursor < t->size; (*cursor)++) {
        fdt_slot *s = &t->slots[*cursor];
        void *item;
        if (FDT_ARMED(s->mask))
            t->armed--;
        s->mask = 0;
        s->oneshot = 0;
        /* The cursor stays: the next call takes this slot's writer. */
        if (s->reader != NULL) {
            item = s->reader;
            s->reader = NULL;
            if (s->writer == NULL)
                fdt_count_watched(t, -1);
            return item;
        }
        if (s->writer != NULL) {
            item = s->writer;
            s->writer = NULL;
            fdt_count_watched(t, -1);
            return item;
        }
    }
    return NULL;
}
