"""Real applications served on each loop: uvicorn, aiohttp, websockets, asyncio streams.

    python benchmarks/apps.py [--only APP,...] [--rounds N] [--duration S] [--warmup S]
                              [--loops minloop,zuvloop,...] [--json FILE] [--markdown FILE]
                              [--quick] [--list] [--no-pin]

Rows (apps), each a server process on the loop under test pinned to one CPU
and its load generator pinned to the other:

    uvicorn-text      uvicorn + httptools, an ASGI app answering 13 bytes of text
    uvicorn-json      the same answering json.dumps of a small dict per request
    aiohttp-text      aiohttp.web, a handler answering web.Response(text=...)
    websockets-echo   websockets' server echoing each message (20 clients)
    streams-lines     asyncio.start_server: readline -> write -> drain (16 clients)

The HTTP apps are driven by wrk (-t1 -c64, whole seconds: --duration is
rounded up to at least 1), after a warm-up of --warmup seconds by a Python
keep-alive client; websockets and streams by this script's own client
(--client: raw sockets and selectors, one message in flight per connection,
a handful of microseconds per round trip: well below any of the servers).

The loops take turns within each round, the order rotated by one each round
(round r starts with the r-th loop), every run in a fresh server process;
each cell is the median over rounds with its min-max; the server's CPU per
request is its CPU (all threads) over the timed window divided by the
requests.  minloop's ratios are paired: per round, minloop's figure over the
peer's in the same round, then the median (min-max) of those.  The report is
the bench's (minloop/bench/report.py), then a markdown table of the paired
ratios with the CPU per request beside them (--markdown FILE also writes it
to a file); --json writes the bench's file with "paired" added per row.

An app whose library is not installed is n/a for every loop (pip install
uvicorn httptools aiohttp websockets); without wrk the HTTP apps are n/a.
Do not take timing claims on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(HERE))

from minloop.bench import loops, options, procs, report, rows, servers  # noqa: E402
from minloop.bench.client import proc_cpu, proc_user_cpu  # noqa: E402

TEXT = b"Hello, world!"
JSON_BODY = {"message": "Hello, world!", "items": [1, 2, 3], "ok": True}
HTTP_CONNS = 64
WS_CLIENTS = 20
WS_MESSAGE = b"x" * 32
# websockets' default keepalive; server_instructions.py turns it off, as its
# runs under valgrind outlast a ping's timeout.
WS_PING_INTERVAL: float | None = 20.0
LINE_CLIENTS = 16
LINE = b"y" * 63 + b"\n"


def _row(rid, doc, quick, *, conns, mode, needs, size=0):
    return rows.Row(rid, "net", doc, quick, kind=rid, mode=mode, conns=conns, size=size,
                    needs=needs, per="requests" if mode == "http" else "messages")


ROWS = {r.id: r for r in (
    _row("uvicorn-text", f"uvicorn + httptools, plain text, wrk -c{HTTP_CONNS}", True,
         conns=HTTP_CONNS, mode="http", needs="uvicorn"),
    _row("uvicorn-json", f"uvicorn + httptools, a JSON body per request, wrk -c{HTTP_CONNS}",
         False, conns=HTTP_CONNS, mode="http", needs="uvicorn"),
    _row("aiohttp-text", f"aiohttp.web, plain text, wrk -c{HTTP_CONNS}", True,
         conns=HTTP_CONNS, mode="http", needs="aiohttp"),
    _row("websockets-echo", f"websockets echo, {WS_CLIENTS} clients, {len(WS_MESSAGE)} B "
         f"text messages, one in flight each", False, conns=WS_CLIENTS, mode="ws",
         needs="websockets", size=len(WS_MESSAGE)),
    _row("streams-lines", f"asyncio streams line echo (readline, write, drain), "
         f"{LINE_CLIENTS} clients, {len(LINE)} B lines", False, conns=LINE_CLIENTS,
         mode="lines", needs="", size=len(LINE)),
)}
GROUPS = {"http": [r for r in ROWS if ROWS[r].mode == "http"],
          "uvicorn": ["uvicorn-text", "uvicorn-json"]}


# ---------------------------------------------------------------------------
# The servers (--serve APP --loop NAME): procs.ServerProcess's protocol


def _listener() -> tuple[socket.socket, int]:
    # proto given: asyncio turns Nagle's algorithm off only for sockets that
    # say IPPROTO_TCP (and those accepted from them), as uvicorn's own do.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # Listening before the loop sees it: some loops (rloop, talyn) take the
    # socket as it is given and do not call listen() themselves.
    sock.listen(1024)
    # The port now: some loops (rloop) take the socket over and close ours.
    return sock, sock.getsockname()[1]


async def _text_app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(TEXT)).encode())]})
    await send({"type": "http.response.body", "body": TEXT})


async def _json_app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = json.dumps(JSON_BODY).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _serve_uvicorn(app, keep):
    import uvicorn

    sock, port = _listener()
    config = uvicorn.Config(app, http="httptools", lifespan="off", access_log=False,
                            log_level="warning")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None   # older uvicorns
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
        if task.done():
            task.result()
    keep.append((server, task))
    return port


async def _serve_aiohttp(keep):
    from aiohttp import web

    async def hello(request):
        return web.Response(text=TEXT.decode())

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    sock, port = _listener()
    site = web.SockSite(runner, sock)
    await site.start()
    keep.append(runner)
    return port


async def _serve_websockets(keep):
    try:
        from websockets.asyncio.server import serve
    except ImportError:  # websockets < 13
        from websockets import serve

    async def echo(ws):
        async for message in ws:
            await ws.send(message)

    sock, port = _listener()
    server = await serve(echo, sock=sock, compression=None, ping_interval=WS_PING_INTERVAL)
    keep.append(server)
    return port


async def _serve_lines(keep):
    async def handle(reader, writer):
        try:
            while line := await reader.readline():
                writer.write(line)
                await writer.drain()
        except ConnectionError:   # the load generator leaves without a goodbye
            pass
        finally:
            writer.close()

    sock, port = _listener()
    server = await asyncio.start_server(handle, sock=sock)
    keep.append(server)
    return port


async def start_app(app: str, keep: list) -> int:
    """Start app's server on the running loop; return its port."""
    if app == "uvicorn-text":
        return await _serve_uvicorn(_text_app, keep)
    if app == "uvicorn-json":
        return await _serve_uvicorn(_json_app, keep)
    if app == "aiohttp-text":
        return await _serve_aiohttp(keep)
    if app == "websockets-echo":
        return await _serve_websockets(keep)
    if app == "streams-lines":
        return await _serve_lines(keep)
    raise ValueError(f"unknown app {app!r}")


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(app: str, loop_name: str, cpu: int | None) -> int:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    try:
        loop = loops.factory(loop_name)()
    except loops.Unavailable as exc:
        _say({"unsupported": f"loop unavailable: {exc}"})
        return 3
    asyncio.set_event_loop(loop)
    errors = servers.collect_errors(loop)
    keep: list = []
    try:
        port = loop.run_until_complete(start_app(app, keep))
    except Exception as exc:  # "this loop cannot run this app"
        _say({"unsupported": f"{type(exc).__name__}: {exc}"[:300]})
        return 3

    def wait_for_eof():
        # Stdin closes: report and leave at once (no teardown is measured,
        # and a loop that hangs closing must not hang the driver).
        sys.stdin.read()
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        _say({"cpu": {"user": usage.ru_utime, "system": usage.ru_stime}, "errors": errors})
        os._exit(0)

    threading.Thread(target=wait_for_eof, daemon=True).start()
    _say({"ready": True, "host": "127.0.0.1", "port": port, "pid": os.getpid()})
    loop.run_forever()
    return 0


# ---------------------------------------------------------------------------
# The load generator of the websockets and streams apps (--client)


def _ws_connect(host: str, port: int) -> socket.socket:
    import base64

    s = socket.create_connection((host, port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\n\r\n").encode())
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        if not chunk:
            raise SystemExit("websocket handshake: connection closed")
        got += chunk
    if not got.startswith(b"HTTP/1.1 101"):
        raise SystemExit(f"websocket handshake refused: {got[:80]!r}")
    return s


def _ws_frame(payload: bytes) -> tuple[bytes, int]:
    """A masked text frame of payload (< 126 bytes), and the length of the
    server's unmasked echo of it."""
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x81, 0x80 | len(payload)]) + mask + masked, 2 + len(payload)


def client(mode: str, host: str, port: int, conns: int, warmup: float, duration: float,
           server_pid: int) -> dict:
    """One message in flight per connection for warmup then duration
    seconds; the round trips, the seconds and the server's CPU of the timed
    window."""
    import selectors

    if mode == "ws":
        socks = [_ws_connect(host, port) for _ in range(conns)]
        message, reply = _ws_frame(WS_MESSAGE)
    else:
        socks = [socket.create_connection((host, port)) for _ in range(conns)]
        message, reply = LINE, len(LINE)
    sel = selectors.DefaultSelector()
    pending = {}
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        s.send(message)
        pending[s] = reply
    start = time.monotonic()
    timed_from = start + warmup
    end = timed_from + duration
    timing = False
    count = 0
    cpu0 = user0 = None
    select = sel.select
    while True:
        now = time.monotonic()
        if not timing and now >= timed_from:
            timing, count, t0 = True, 0, now
            cpu0, user0 = proc_cpu(server_pid), proc_user_cpu(server_pid)
        if timing and now >= end:
            break
        for key, _ in select(0.5):
            s = key.fileobj
            got = s.recv(65536)
            if not got:
                raise SystemExit("server closed a connection")
            left = pending[s] - len(got)
            if left == 0:
                count += 1
                s.send(message)
                left = reply
            elif left < 0:
                raise SystemExit(f"{-left} bytes more than sent came back")
            pending[s] = left
    seconds = time.monotonic() - t0
    cpu1, user1 = proc_cpu(server_pid), proc_user_cpu(server_pid)
    for s in socks:
        s.close()
    return {"round_trips": count, "seconds": seconds,
            "server_cpu": -1.0 if None in (cpu0, cpu1) else cpu1 - cpu0,
            "server_user_cpu": -1.0 if None in (user0, user1) else user1 - user0}


def _http_warmup(host: str, port: int, seconds: float) -> None:
    """Keep-alive GETs on one connection for `seconds` (wrk has no warm-up)."""
    request = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    deadline = time.monotonic() + seconds
    with socket.create_connection((host, port)) as s:
        s.settimeout(10)
        buf = b""
        while time.monotonic() < deadline:
            s.sendall(request)
            while b"\r\n\r\n" not in buf:
                buf += s.recv(65536)
            head, _, buf = buf.partition(b"\r\n\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(buf) < length:
                buf += s.recv(65536)
            buf = buf[length:]


# ---------------------------------------------------------------------------
# One measurement


NotAvailable = procs.ServerProcess.Unsupported
Failed = procs.ServerProcess.Failed


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _taskset(cpu: int | None) -> list[str]:
    return [] if cpu is None else ["taskset", "-c", str(cpu)]


def _wrk(row, server, pin, settings) -> dict:
    from net_compare import run_wrk

    host, port = server.address["host"], server.address["port"]
    if settings.warmup > 0:
        try:
            _http_warmup(host, port, settings.warmup)
        except (OSError, ValueError, StopIteration) as exc:
            raise Failed(f"warm-up: {type(exc).__name__}: {exc}") from None
    return run_wrk(_taskset(pin.client), host, port, row.conns, settings.duration, server.pid)


def _own_client(row, server, pin, settings) -> dict:
    cmd = _taskset(pin.client) + [
        sys.executable, os.path.abspath(__file__), "--client", row.mode,
        "--host", server.address["host"], "--port", str(server.address["port"]),
        "--conns", str(row.conns), "--warmup", f"{settings.warmup:g}",
        "--duration", f"{settings.duration:g}", "--server-pid", str(server.pid)]
    children = _children_cpu()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=settings.warmup + settings.duration + 60)
    except subprocess.TimeoutExpired:
        raise Failed("load generator timed out") from None
    client_cpu = _children_cpu() - children
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise Failed(f"load generator: exit status {proc.returncode}: "
                     f"{(proc.stderr.strip() or proc.stdout.strip())[-200:]}") from None
    # The client's CPU includes its set-up and warm-up: its share of the
    # whole run, a bound on how busy it was.
    answer.update(client_cpu=client_cpu * answer["seconds"]
                  / (answer["seconds"] + settings.warmup), problems=[])
    return answer


def measure(row, loop_name: str, settings, pin: procs.Pinning, have_wrk: bool) -> dict:
    """One cell, one round, in net_compare.measure's terms."""
    if row.mode == "http" and not have_wrk:
        return {"na": "wrk not found"}
    argv = [sys.executable, os.path.abspath(__file__), "--serve", row.id, "--loop", loop_name]
    if pin.server is not None:
        argv += ["--cpu", str(pin.server)]
    try:
        server = procs.ServerProcess(argv)
    except NotAvailable as exc:
        return {"na": str(exc)}
    except Failed as exc:
        return {"error": str(exc)}
    from net_compare import timed_window, with_rates

    cpus = [c for c in (pin.server, pin.client) if c is not None] or sorted(
        os.sched_getaffinity(0))
    run = _wrk if row.mode == "http" else _own_client
    sample = timed_window(server, cpus, _children_cpu, lambda: run(row, server, pin, settings))
    if "error" not in sample:
        sample["bytes"] = 0
    return with_rates(sample, "requests")


# ---------------------------------------------------------------------------
# Paired ratios and the markdown table


def _spread(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "rounds": len(values)}


def paired(entry: dict, ref: str = "minloop") -> dict:
    """Per peer: minloop's throughput over the peer's, round by round
    (median, min, max), and the peer's CPU per request over minloop's (above
    1: minloop spends less)."""
    cells = entry["cells"]
    if ref not in cells:
        return {}
    mine = {s["round"]: s for s in cells[ref]["samples"]}
    out = {}
    for peer, cell in cells.items():
        if peer == ref:
            continue
        rate, cpu = [], []
        for s in cell["samples"]:
            m = mine.get(s["round"])
            if m is None:
                continue
            rate.append(m["rate"] / s["rate"])
            if m.get("server_us") and s.get("server_us"):
                cpu.append(m["server_us"] / s["server_us"])
        if rate:
            out[peer] = {"throughput": _spread(rate), "cpu_per_request": _spread(cpu)}
    return out


def _fmt(spread: dict | None, digits: int = 2) -> str:
    if not spread:
        return "-"
    return (f"{spread['median']:.{digits}f} ({spread['min']:.{digits}f}-"
            f"{spread['max']:.{digits}f})")


def markdown(results: dict, names: list[str], ref: str = "minloop") -> str:
    """Two markdown tables: each loop's median rate (min-max) and CPU per
    request; minloop's paired ratios over each peer."""
    lines = ["| app | " + " | ".join(f"{n} /s (min-max), CPU us/req" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for rid, entry in results.items():
        cells = []
        for n in names:
            cell = entry["cells"][n]
            rates = [s["rate"] for s in cell["samples"]]
            if not rates:
                cells.append(cell.get("na") and "n/a" or "failed")
                continue
            us = cell["median"].get("server_us")
            cells.append(f"{report.si(statistics.median(rates))} ({report.si(min(rates))}-"
                         f"{report.si(max(rates))}), "
                         + ("-" if us is None else f"{us:.1f}"))
        lines.append(f"| {rid} | " + " | ".join(cells) + " |")
    peers = [n for n in names if n != ref]
    if ref in names and peers:
        lines += ["", f"{ref} over each peer, paired by round: throughput ratio median "
                      f"(min-max); CPU per request ratio ({ref}'s over the peer's, below 1: "
                      f"{ref} spends less)", "",
                  "| app | " + " | ".join(f"vs {p}: throughput; CPU/req" for p in peers) + " |",
                  "|---|" + "---|" * len(peers)]
        for rid, entry in results.items():
            pairs = entry.get("paired", {})
            cells = []
            for p in peers:
                pr = pairs.get(p)
                cells.append("-" if not pr else
                             f"**{_fmt(pr['throughput'])}**; {_fmt(pr['cpu_per_request'])}")
            lines.append(f"| {rid} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Main


# 5 rounds (the must-show) of 3 s after 0.5 s of warm-up.
FULL = options.Profile(rounds=5, duration=3.0, warmup=0.5)


def _child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", choices=list(ROWS))
    parser.add_argument("--loop")
    parser.add_argument("--cpu", type=int)
    parser.add_argument("--client", choices=("ws", "lines"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--conns", type=int)
    parser.add_argument("--warmup", type=float)
    parser.add_argument("--duration", type=float)
    parser.add_argument("--server-pid", type=int)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.loop, args.cpu)
    print(json.dumps(client(args.client, args.host, args.port, args.conns, args.warmup,
                            args.duration, args.server_pid)))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("--serve", "--client"):
        return _child_main(argv)
    parser = options.Parser(description="Real applications on each loop, pinned, "
                                        "interleaved rounds, paired ratios.")
    command = options.Command(parser, FULL, only_help="groups (http, uvicorn)")
    parser.add_argument("--markdown", metavar="FILE",
                        help="also write the markdown tables to FILE")
    args = parser.parse_args(argv)
    chosen = command.select(args, ROWS, GROUPS)
    if args.list:
        return options.list_rows(chosen)
    command.loops(args)
    command.check_outputs(args)
    if args.no_pin:
        pin = procs.Pinning(False)
    elif not shutil.which("taskset"):
        pin = procs.Pinning(False, "taskset not found")
    else:
        pin = procs.Pinning()
    have_wrk = shutil.which("wrk") is not None
    header = ["load generators: wrk -t1 for the HTTP apps, this script's --client for "
              "websockets and streams; loops in rotated order each round"]
    if not have_wrk:
        header.append("wrk not found: the HTTP apps are n/a")

    def after(results: dict, columns: list[str]) -> None:
        for entry in results.values():
            entry["paired"] = paired(entry)
        table = markdown(results, columns)
        print("\n" + table)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(table + "\n")

    return command.run(
        args, chosen, pin=pin, rotate=True, after=after,
        measure=lambda row, name, settings: measure(row, name, settings, pin, have_wrk),
        header=header)


if __name__ == "__main__":
    sys.exit(options.quiet_on_broken_pipe(main))
