"""Instructions (callgrind) or syscalls (strace) per round trip of one of the bench's servers.

    python benchmarks/server_instructions.py --kind http --depth 8 --measure callgrind
    python benchmarks/server_instructions.py --kind uvicorn --loop zuvloop --measure strace
    python benchmarks/server_instructions.py --kind websockets --connections 20 --measure sched

--measure runs the server twice under the tool, with --round-trips and
three times as many, and prints the difference per request: instructions by
object (the interpreter, the loop's .so files, libc ...) or syscalls by name.
Only the server is measured: its clients are a plain Python process started
with exec, which neither valgrind nor strace (no -f) follows.  By hand:

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \
        python benchmarks/server_instructions.py --kind streams --round-trips 20000
    (and again with 60000; the per-round-trip cost is the difference / 40000)

The server is the bench's server of that kind (minloop/bench/servers.py:
`streams` is start_server with read -> write -> drain, `sock` the sock_recv
-> sock_sendall loop, `protocol` an asyncio.Protocol, `http` the httptools
server), or `uvicorn`: uvicorn on httptools serving a plain-text ASGI app
(head and body sent apart, as ASGI does), `uvicorn-json` the same with
apps.py's JSON body, `aiohttp`: aiohttp.web's plain-text app of
benchmarks/apps.py, `websockets`: apps.py's websockets echo (32-byte text
frames, masked as a client's must be), or `streams-lines`: apps.py's line
echo (readline -> write -> drain, 64-byte lines); on minloop or another loop with
--loop: a name python -m minloop bench --loops knows, or module:factory.
--depth K sends K requests at once on each connection (pipelined HTTP, or K
echo messages in one send()): one round trip is K requests.  Wall-clock
time on a shared machine says little about a change of a few hundred
instructions; these counts do.
"""

import argparse
import asyncio
import collections
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import loops, servers  # noqa: E402
from minloop.bench.client import HTTP_REQUEST  # noqa: E402

SIZE = 1024
WS_SIZE = 32   # benchmarks/apps.py's websocket message
LINE_SIZE = 64   # and its line
# --measure rusage: the server's own getrusage() over the client's run, by
# field, written to the file this variable names.
_RUSAGE_ENV = "MINLOOP_SERVER_RUSAGE"
_RUSAGE_FIELDS = ("ru_minflt", "ru_nvcsw", "ru_nivcsw", "ru_utime", "ru_stime")
KINDS = ("streams", "sock", "protocol", "buffered", "http", "uvicorn", "uvicorn-json",
         "aiohttp", "websockets", "streams-msg", "protocol-msg", "streams-lines")
# The kinds that are benchmarks/apps.py's apps, by app name.
APPS = {"uvicorn": "uvicorn-text", "uvicorn-json": "uvicorn-json",
        "aiohttp": "aiohttp-text", "websockets": "websockets-echo",
        "streams-lines": "streams-lines"}
HTTP_KINDS = ("http", "uvicorn", "uvicorn-json", "aiohttp")

# argv: port conns round_trips size depth mode.  mode "echo": each round trip
# sends `depth` messages of `size` bytes at once and waits for all of their
# bytes back.  mode "http": `depth` pipelined GET requests; the response's
# length is learned from one request first (uvicorn's have a date header of
# fixed width, so all are alike).  mode "ws": a websocket handshake per
# connection, then `depth` masked text frames of `size` bytes (< 126) at once,
# each echoed unmasked.
CLIENT = r"""
import selectors, socket, sys
port, conns, total, size, depth = map(int, sys.argv[1:6])
mode = sys.argv[6]
request = REQUEST
sel = selectors.DefaultSelector()
socks = []
for _ in range(conns):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    socks.append(s)
if mode == "http":
    s = socks[0]
    s.sendall(request)
    got = b""
    while b"\r\n\r\n" not in got:
        got += s.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += s.recv(65536)
    reply = (len(head) + 4 + length) * depth
    msg = request * depth
elif mode == "ws":
    for s in socks:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                  b"Sec-WebSocket-Version: 13\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(4096)
        if not got.startswith(b"HTTP/1.1 101"):
            sys.exit("websocket handshake refused")
    mask = b"\x01\x02\x03\x04"
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(b"x" * size))
    msg = (bytes([0x81, 0x80 | size]) + mask + payload) * depth
    reply = (2 + size) * depth
elif mode == "lines":   # apps.py's streams-lines: newline-ended lines
    msg = (b"y" * (size - 1) + b"\n") * depth
    reply = len(msg)
else:
    msg = b"x" * size * depth
    reply = len(msg)
left = total
pending = {}
for s in socks:
    if left:
        left -= 1
        s.sendall(msg)
        pending[s] = reply
        sel.register(s, selectors.EVENT_READ)
while pending:
    for key, _ in sel.select():
        s = key.fileobj
        got = s.recv(65536)
        if not got:
            sys.exit("server closed early")
        pending[s] -= len(got)
        if pending[s] == 0:
            if left:
                left -= 1
                s.sendall(msg)
                pending[s] = reply
            else:
                del pending[s]
                sel.unregister(s)
for s in socks:
    if mode == "ws":   # a close frame, and the server's back before leaving
        s.sendall(b"\x88\x80\x01\x02\x03\x04")
        while s.recv(4096):
            pass
    s.close()
""".replace("REQUEST", repr(HTTP_REQUEST)).replace("import selectors", "import re, selectors")


async def _main(kind, conns, round_trips, depth):
    keep = []
    if kind in APPS:
        import apps   # benchmarks/apps.py

        apps.WS_PING_INTERVAL = None
        port = await apps.start_app(APPS[kind], keep)
    else:
        port = (await servers.start(kind, 0, None, keep, size=SIZE))["port"]
    mode = ("http" if kind in HTTP_KINDS else "ws" if kind == "websockets"
            else "lines" if kind == "streams-lines" else "echo")
    size = WS_SIZE if kind == "websockets" else LINE_SIZE if kind == "streams-lines" else SIZE
    before = resource.getrusage(resource.RUSAGE_SELF)
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT, str(port), str(conns), str(round_trips), str(size),
        str(depth), mode)
    if await client.wait():
        sys.exit("client failed")
    after = resource.getrusage(resource.RUSAGE_SELF)
    if os.environ.get(_RUSAGE_ENV):
        with open(os.environ[_RUSAGE_ENV], "w") as f:
            json.dump({field: getattr(after, field) - getattr(before, field)
                       for field in _RUSAGE_FIELDS}, f)
    for thing in keep:  # the server, or the sock row's listener and accept task
        if isinstance(thing, asyncio.AbstractServer):
            thing.close()
        elif isinstance(thing, asyncio.Task):
            thing.cancel()
        elif isinstance(thing, tuple):   # uvicorn's server and its task
            thing[0].should_exit = True
            await thing[1]
        elif hasattr(thing, "cleanup"):   # aiohttp's AppRunner
            await thing.cleanup()
        elif hasattr(thing, "wait_closed"):   # websockets' Server
            thing.close()
            await thing.wait_closed()
    await asyncio.sleep(0)


# ---------------------------------------------------------------------------
# --measure: the server under callgrind or strace, twice


def _run_under(tool_argv, args, round_trips):
    argv = tool_argv + [sys.executable, os.path.abspath(__file__), "--kind", args.kind,
                        "--loop", args.loop, "--connections", str(args.connections),
                        "--depth", str(args.depth), "--round-trips", str(round_trips)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    return proc


_ANNOTATED = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)\s*$")


def _callgrind_by_object(path):
    """{object: instructions}, {function [object]: instructions} of one run."""
    out = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100",
                          "--show-percs=no", path],
                         capture_output=True, text=True, check=True).stdout
    objects, functions = collections.Counter(), collections.Counter()
    for line in out.splitlines():
        m = _ANNOTATED.match(line)
        if not m or "PROGRAM TOTALS" in line or ":" not in m.group(2):
            continue
        count = int(m.group(1).replace(",", ""))
        name = m.group(2)
        obj = re.search(r"\[(.*)\]$", name)
        if obj:
            obj = os.path.basename(obj.group(1))
        else:
            # Code inlined from a header is printed without its object:
            # a Cython module's functions name it (__pyx_f_7minloop_6stream_...).
            # The module's name is prefixed with its length (13stream_reader).
            module = re.search(r"__pyx_[a-z]+_\d+(?:minloop|httptools|uvloop)_(\d+)(\w+)", name)
            obj = f"{module.group(2)[:int(module.group(1))]}.so" if module else "?"
        objects[re.sub(r"\.cpython-.*\.so$", ".so", obj)] += count
        functions[name] += count
    return objects, functions


def _strace_counts(path):
    calls = collections.Counter()
    with open(path) as f:
        for line in f:
            fields = line.split()
            # % time, seconds, usecs/call, calls, [errors], syscall
            if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
                calls[fields[-1]] += int(fields[3])
    return calls


# --measure sched: tracepoints counted by perf stat in the server alone
# (--no-inherit: not its client).  The server's own context switches (sleeps
# in the poller, and preemptions), the wake-ups it makes (on loopback a send
# wakes the sleeping reader: its client), its polls and all its syscalls.
# Unlike instructions these follow the timing of server and client: compare
# loops in interleaved runs.
_SCHED_EVENTS = ("raw_syscalls:sys_enter", "sched:sched_switch", "sched:sched_wakeup",
                 "syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait",
                 "syscalls:sys_enter_epoll_pwait2")


def _perf_counts(path):
    counts = collections.Counter()
    with open(path) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) > 2 and fields[0].isdigit():
                name = fields[2].split(":")[-1].replace("sys_enter_", "")
                counts[{"sys_enter": "syscalls"}.get(name, name)] += int(fields[0])
    return counts


def _measure(args):
    small, large = args.round_trips, 3 * args.round_trips
    requests = (large - small) * args.depth
    tmp = tempfile.mkdtemp(prefix="server-costs-")
    try:
        results = []
        for n in (small, large):
            out = os.path.join(tmp, f"{args.measure}.{n}")
            if args.measure == "rusage":
                os.environ[_RUSAGE_ENV] = out
                _run_under([], args, n)
                with open(out) as f:
                    results.append((collections.Counter(json.load(f)),
                                    collections.Counter()))
            elif args.measure == "callgrind":
                _run_under(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"],
                           args, n)
                results.append(_callgrind_by_object(out))
            elif args.measure == "sched":
                _run_under(["perf", "stat", "--no-inherit", "-x,", "-o", out,
                            "-e", ",".join(_SCHED_EVENTS)], args, n)
                results.append((_perf_counts(out), collections.Counter()))
            else:
                _run_under(["strace", "-c", "-o", out], args, n)
                results.append((_strace_counts(out), collections.Counter()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    (small_by, small_fn), (large_by, large_fn) = results
    what = {"callgrind": "instructions", "strace": "syscalls",
            "rusage": "getrusage() fields (times in microseconds: timing, not counts)",
            "sched": "tracepoint counts (they follow the timing)"}[args.measure]
    print(f"{args.kind} on {args.loop}, {args.connections} connections, depth {args.depth}: "
          f"{what} per request ({large} - {small} round trips)")
    scale = {"ru_utime": 1e6, "ru_stime": 1e6}   # seconds -> microseconds
    diff = {k: (large_by[k] - small_by[k]) * scale.get(k, 1) / requests
            for k in set(small_by) | set(large_by)}
    total = sum(diff.values())
    for name, per in sorted(diff.items(), key=lambda kv: -abs(kv[1])):
        if abs(per) >= (0.5 if args.measure == "callgrind" else 0.001):
            print(f"  {per:10.3f}  {name}")
    if args.measure in ("callgrind", "strace"):
        print(f"  {total:10.2f}  total")
    if args.functions:
        fdiff = {k: (large_fn[k] - small_fn[k]) / requests for k in set(small_fn) | set(large_fn)}
        print(f"functions ({args.functions} largest):")
        for name, per in sorted(fdiff.items(), key=lambda kv: -abs(kv[1]))[:args.functions]:
            print(f"  {per:10.2f}  {name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=KINDS, default="streams")
    parser.add_argument("--round-trips", type=int, default=20000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--depth", type=int, default=1,
                        help="requests (messages) sent at once per round trip")
    parser.add_argument("--loop", default="minloop",
                        help="the server's loop: a known name (" + ", ".join(loops.NAMES)
                             + ") or module:factory (default: %(default)s)")
    parser.add_argument("--measure", choices=("callgrind", "strace", "rusage", "sched"),
                        help="run the server under the tool twice (rusage: without one, "
                             "its page faults, context switches and CPU times; sched: perf "
                             "stat's count of its polls, switches and wake-ups); print the "
                             "cost per request")
    parser.add_argument("--functions", type=int, default=0, metavar="N",
                        help="with --measure callgrind: also the N costliest functions")
    args = parser.parse_args()
    if args.measure:
        _measure(args)
        return
    try:
        loop = loops.factory(loops.parse(args.loop))()
    except ValueError as exc:
        parser.error(f"--loop: {exc}")
    except loops.Unavailable as exc:
        sys.exit(f"{args.loop}: {exc}")
    try:
        loop.run_until_complete(_main(args.kind, args.connections, args.round_trips,
                                      args.depth))
    finally:
        loop.close()


if __name__ == "__main__":
    main()
