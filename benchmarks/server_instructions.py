"""Instructions per round trip of one of the bench's echo servers, by callgrind.

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \
        python benchmarks/server_instructions.py --kind streams --round-trips 20000
    (and again with 60000; the per-round-trip cost is the difference / 40000)

The server is the bench's server of that kind (minloop/bench/servers.py:
`streams` is start_server with read -> write -> drain, `sock` the sock_recv
-> sock_sendall loop, `protocol` an asyncio.Protocol) on minloop (or another
loop with --loop: a name python -m minloop bench --loops knows, or
module:factory); its clients are a plain Python process started with exec,
so valgrind does not follow it: only the server's instructions are counted.
`callgrind_annotate --auto=no` on both files, subtracted function by
function, tells whose instructions they are (the interpreter's, asyncio's C
module's, the loop's).  Wall-clock time on a shared machine says
little about a change of a few hundred instructions; these counts do.
"""

import argparse
import asyncio
import os
import sys

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import loops, servers  # noqa: E402

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


async def _main(kind, conns, round_trips):
    keep = []
    port = (await servers.start(kind, 0, None, keep))["port"]
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT, str(port), str(conns), str(round_trips), str(SIZE))
    if await client.wait():
        sys.exit("client failed")
    for thing in keep:  # the server, or the sock row's listener and accept task
        if isinstance(thing, asyncio.AbstractServer):
            thing.close()
        elif isinstance(thing, asyncio.Task):
            thing.cancel()
    await asyncio.sleep(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("streams", "sock", "protocol", "buffered"),
                        default="streams")
    parser.add_argument("--round-trips", type=int, default=20000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--loop", default="minloop",
                        help="the server's loop: a known name (" + ", ".join(loops.NAMES)
                             + ") or module:factory (default: %(default)s)")
    args = parser.parse_args()
    try:
        loop = loops.factory(loops.parse(args.loop))()
    except ValueError as exc:
        parser.error(f"--loop: {exc}")
    except loops.Unavailable as exc:
        sys.exit(f"{args.loop}: {exc}")
    try:
        loop.run_until_complete(_main(args.kind, args.connections, args.round_trips))
    finally:
        loop.close()


if __name__ == "__main__":
    main()
