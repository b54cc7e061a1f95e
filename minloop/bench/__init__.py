"""``python -m minloop bench``: minloop side by side with asyncio, uvloop and rloop.

loops      the loop implementations by name, and whether each can run here
workloads  the loop-core micro workloads (call_soon, timers, tasks, threads)
child      runs one micro workload on one loop in a fresh interpreter
servers    the network servers (echo over Protocol/streams/..., HTTP on httptools)
client     the load generator the network rows drive those servers with
tls        the TLS echo server and its load generator (the tls-* rows)
spawn      subprocess spawn + wait (the spawn-* rows)
sendfile   loop.sendfile to a receiver process (the sendfile-* row)
pipes      bytes through an os.pipe() between pipe transports (the ospipe-* row)
procs      child interpreters, CPU pinning and CPU time, the machine's description
suite      the standard set of rows and run_script(), the one runner every script
           in benchmarks/ and main() use: rounds, medians, ratios, report, JSON
"""
