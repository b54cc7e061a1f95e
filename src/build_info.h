/* How this binary was compiled, for `python -m minloop info` (bug reports).
 *
 * Read from the compiler's own predefined macros, not from a record of what
 * was asked for: so it describes the module that is loaded whatever produced
 * it -- setup.py's MINLOOP_DEBUG (-O0, NDEBUG undefined) or MINLOOP_SANITIZE,
 * a CFLAGS of the user's, a distribution's build.  (GCC has no macro for
 * UndefinedBehaviorSanitizer; MINLOOP_SANITIZE always pairs it with ASan.) */
#ifndef MINLOOP_BUILD_INFO_H
#define MINLOOP_BUILD_INFO_H

#ifdef __OPTIMIZE__
#define MINLOOP_BUILD_OPTIMIZED 1
#else
#define MINLOOP_BUILD_OPTIMIZED 0
#endif

/* assert() in src/ is live unless NDEBUG (release Pythons' CFLAGS set it). */
#ifdef NDEBUG
#define MINLOOP_BUILD_ASSERTS 0
#else
#define MINLOOP_BUILD_ASSERTS 1
#endif

#if defined(__SANITIZE_ADDRESS__)          /* GCC */
#define MINLOOP_BUILD_ASAN 1
#elif defined(__has_feature)               /* clang */
#if __has_feature(address_sanitizer)
#define MINLOOP_BUILD_ASAN 1
#endif
#endif
#ifndef MINLOOP_BUILD_ASAN
#define MINLOOP_BUILD_ASAN 0
#endif

/* setup.py's MINLOOP_POLLER=kqueue on Linux: the kqueue poller over
 * libkqueue's emulation, a build for tests only. */
#if defined(__linux__) && defined(MINLOOP_POLLER_KQUEUE)
#define MINLOOP_BUILD_LIBKQUEUE 1
#else
#define MINLOOP_BUILD_LIBKQUEUE 0
#endif

#endif
