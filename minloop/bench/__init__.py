"""``python -m minloop bench``: minloop side by side with asyncio's loop and others.

cli        the bench command: the standard rows on the loops asked for
options    the options every entry point shares (--only, --quick, --loops, ...)
           and the Settings they make; quiet exit when stdout's reader goes
rows       the standard rows, their names and sizes, and --only's selection
measure    one measurement of a row on a loop, in fresh processes
runner     run_script(), the one runner every script in benchmarks/ and the
           bench command use: rounds, medians, ratios, report, JSON, plot
report     what a run prints: progress, the table, details, notes, summary
loops      the loop implementations by name or module:factory, and whether
           each can run here
workloads  the loop-core micro workloads (call_soon, timers, tasks, threads)
child      runs one micro workload on one loop in a fresh interpreter
servers    the network servers (echo over Protocol/streams/..., HTTP on httptools)
client     the load generator the network rows drive those servers with
tls        the TLS echo server and its load generator (the tls-* rows)
spawn      subprocess spawn + wait (the spawn-* rows)
sendfile   loop.sendfile to a receiver process (the sendfile-* row)
pipes      bytes through an os.pipe() between pipe transports (the ospipe-* row)
procs      child interpreters, CPU pinning and CPU time, the machine's description
interpreters  the interpreters group: each workload in 1 and in N own-GIL
           sub-interpreters of one process at once (3.14+), and its table
"""
