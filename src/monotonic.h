/* monotonic_now: the clock behind time.monotonic(), read without Python.
 *
 * loop.time() must be the same clock with the same origin as
 * time.monotonic() (asyncio code mixes the two).  CPython reads
 * CLOCK_MONOTONIC on Linux and the BSDs, and mach_absolute_time() on macOS,
 * which CLOCK_UPTIME_RAW exposes in nanoseconds.
 */
#ifndef MINLOOP_MONOTONIC_H
#define MINLOOP_MONOTONIC_H

#include <time.h>

#ifdef __APPLE__
#define MINLOOP_CLOCK CLOCK_UPTIME_RAW
#else
#define MINLOOP_CLOCK CLOCK_MONOTONIC
#endif

static inline double monotonic_now(void)
{
    struct timespec ts;
    clock_gettime(MINLOOP_CLOCK, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
