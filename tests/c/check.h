/* check.h: the one assertion the C checks in tests/c/ use.  CHECK(cond)
 * counts itself and, when cond is false, says where and exits 1; a check
 * program ends by printing "ok <checks>" (tests/c_checks.py reads it). */
#ifndef MINLOOP_TESTS_CHECK_H
#define MINLOOP_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static long checks;

#define CHECK(cond) do {                                                    \
        checks++;                                                           \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

#endif
