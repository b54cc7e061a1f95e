/* alloc_faults: the test build's state (see alloc_faults.h). */
#include "alloc_faults.h"

#ifdef MINLOOP_ALLOC_FAULTS
static long skip_left[AF_SITES], fails_left[AF_SITES], failed[AF_SITES];

void af_arm(int site, long skip, long fails)
{
    __atomic_store_n(&fails_left[site], 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&skip_left[site], skip, __ATOMIC_SEQ_CST);
    __atomic_store_n(&failed[site], 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fails_left[site], fails, __ATOMIC_SEQ_CST);
}

int af_fails(int site)
{
    if (__atomic_load_n(&fails_left[site], __ATOMIC_RELAXED) <= 0)
        return 0;
    if (__atomic_sub_fetch(&skip_left[site], 1, __ATOMIC_SEQ_CST) >= 0)
        return 0;
    if (__atomic_sub_fetch(&fails_left[site], 1, __ATOMIC_SEQ_CST) < 0)
        return 0;
    __atomic_add_fetch(&failed[site], 1, __ATOMIC_SEQ_CST);
    return 1;
}

long af_failed(int site)
{
    return __atomic_load_n(&failed[site], __ATOMIC_SEQ_CST);
}
#else
typedef int af_empty_unit;   /* ISO C wants something in a unit */
#endif
