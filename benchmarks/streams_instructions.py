"""Instructions per round trip of the asyncio streams echo server, by callgrind.

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \
        python benchmarks/streams_instructions.py --round-trips 20000
    (and again with 60000; the per-round-trip cost is the difference / 40000)

The server is the bench's `streams` row (`start_server`; read -> write ->
drain) on minloop (or asyncio with --loop asyncio), its clients are a plain
Python process started with exec, so valgrind does not follow it: only the
server's instructions are counted.  Wall-clock time on a shared machine says
little about a change of a few hundred instructions; these counts do.
"""

import argparse
import asyncio
import os
import subprocess
import sys

SIZE = 1024

CLIENT = r"""
import selectors, socket, sys
port, conns, total, size = map(int, sys.argv[1:])
sel = selectors.DefaultSelector()
msg = b"x" * size
left = total
socks = []
for _ in range(conns):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    socks.append(s)
pending = {}
for s in socks:
    if left:
        left -= 1
        s.sendall(msg)
        pending[s] = size
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
                pending[s] = size
            else:
                del pending[s]
                sel.unregister(s)
for s in socks:
    s.close()
"""


async def _echo(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def _main(conns, round_trips):
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT, str(port), str(conns), str(round_trips), str(SIZE))
    if await client.wait():
        sys.exit("client failed")
    server.close()
    await server.wait_closed()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=20000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--loop", choices=("minloop", "asyncio"), default="minloop")
    args = parser.parse_args()
    if args.loop == "minloop":
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import minloop
        loop = minloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_main(args.connections, args.round_trips))
    finally:
        loop.close()


if __name__ == "__main__":
    main()
