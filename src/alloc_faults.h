/* alloc_faults: the C units' allocations, failed on demand in a test build.
 *
 * malloc() returning NULL in the timer heap's, the ready ring's or the fd
 * table's growth, or a transport's read buffer or write queue failing to
 * grow, is a path no ordinary test reaches: the machine has the memory.
 * libfiu can fail malloc() only by name of a function on the stack, and
 * these are static.  So each such allocation first asks af_fails(site):
 *
 *   - in a MINLOOP_ALLOC_FAULTS build (setup.py's switch, tests only), a
 *     test arms a site with af_arm(site, skip, fails): the next `skip`
 *     allocations there go through, the `fails` after them fail as a NULL
 *     from malloc() would, then allocation works again;
 *   - in every other build af_fails() is the constant 0, so the normal
 *     build and the wheels are the code they were.
 *
 * The state is plain C data in alloc_faults.c, one copy per extension
 * module that compiles it (a module's symbols are its own): the module
 * whose code allocates is the one a test arms (loop for the three units,
 * stream for a transport's buffers).  Atomics: another thread's
 * call_soon_threadsafe() grows the ready ring. */
#ifndef MINLOOP_ALLOC_FAULTS_H
#define MINLOOP_ALLOC_FAULTS_H

enum {
    AF_TIMER_HEAP,      /* timer_heap.c: the block, renumbering, bulk drain */
    AF_READY_RING,      /* ready_ring.h: ring_grow */
    AF_FD_TABLE,        /* fd_table.c: fdt_reserve */
    AF_READ_BUFFER,     /* a stream transport's bytes for what it read */
    AF_WRITE_QUEUE,     /* a stream transport's queue of unsent data */
    AF_SITES
};

#ifdef MINLOOP_ALLOC_FAULTS
#define MINLOOP_ALLOC_FAULTS_BUILT 1
int af_fails(int site);
void af_arm(int site, long skip, long fails);
long af_failed(int site);   /* how many it failed since armed */
#else
#define MINLOOP_ALLOC_FAULTS_BUILT 0
#define af_fails(site) 0
static inline void af_arm(int site, long skip, long fails) { (void)site; (void)skip; (void)fails; }
static inline long af_failed(int site) { (void)site; return 0; }
#endif

#endif
