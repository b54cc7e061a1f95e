"""The standard rows of ``python -m minloop bench`` and how a run picks them.

Rows are of six groups:

* core: a micro workload (workloads.py) timed inside a fresh interpreter per
  loop (child.py); its figure is operations per second;
* scale: the same, at the sizes real servers reach (100k tasks, 200k live
  timers, ...), whole in every profile, with the cyclic GC on at its default
  thresholds and the collections it ran counted per generation;
* memory: a Protocol echo server (servers.py --count) on the loop under test
  in a fresh process, N idle connections to it from another; the figure is
  the growth of the server's resident set per connection, after a full
  collection in the server and a settle time (lower is better);
* net: a server (servers.py) on the loop under test, in a fresh process
  pinned to one CPU, driven by the load generator (client.py) in another
  process pinned to the other CPU; its figure is round trips (requests) per
  second in a timed window after a warm-up;
* other: README.md's "TLS, subprocesses, sendfile, pipes" table, each row
  run in fresh processes by its own module: TLS echo (tls.py: a TLS server
  on the loop, its own load generator), subprocess spawn + wait (spawn.py),
  loop.sendfile to a receiver process (sendfile.py), an os.pipe() between
  two pipe transports (pipes.py); not in --quick.
* interpreters: a workload in 1 and in N own-GIL sub-interpreters of one
  process at once (interpreters.py; ``--interpreters N``, 3.14+, n/a
  before): the figure is N's aggregate rate, the group's own table adds
  1 vs N; not in --quick.

Row names (the scale and later rows; the older core rows keep their workload
names, which README.md cites): lowercase words joined by '-', subject first,
then its count or message size with k/m suffixes, then the variant;
connections as c<N> in full digits: tasks-100k-sleep2, timers-200k-fire,
tcp-protocol-1k-c1000.

How each row is measured is measure.py's; the rounds and the report are
runner.py's.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
from dataclasses import dataclass

from . import workloads

KiB = 1024
MB = 1024 * 1024

# The core workloads run at a quarter of their research size
# (benchmarks/compare.py runs them whole), enough for steady medians within a
# few minutes; with --quick at a tenth, and the spawn, sendfile and ospipe
# rows at a fifth of the size their names give.  The scale rows run whole in
# every profile.
FULL_DIVISOR = 4
QUICK_DIVISOR = 10
OTHER_QUICK_DIVISOR = 5


@dataclass(frozen=True)
class Row:
    id: str
    group: str          # "core" | "scale" | "memory" | "net" | "other" | "interpreters"
    doc: str
    quick: bool         # part of the --quick set
    workload: str = ""  # core, scale: workloads.WORKLOADS key; interpreters: interpreters.SETUPS
    n: int = 0          # scale: the workload's size in every profile
    per: str = ""       # what the figure counts per second, if not "ops"
    lower_better: bool = False  # memory: bytes per connection
    min_duration: float = 0.0   # net: timed seconds at least (thousands of connections)
    kind: str = ""      # net: servers.py --kind; other: tls, spawn, sendfile, ospipe
    mode: str = "echo"  # net: client.py --mode
    conns: int = 1
    size: int = KiB
    depth: int = 1
    needs: str = ""     # a module the row needs importable (httptools)
    at_once: int = 0    # spawn: processes at once (0: one after the other);
                        # mode "pipes": stdio as pipes, not /dev/null
    chunk: int = 0      # ospipe: bytes per write

    @property
    def unit(self) -> str:
        if self.group == "memory":
            return "bytes/conn"
        if self.per:
            return f"{self.per}/s"
        if self.group == "core":
            return "ops/s"
        return "requests/s" if self.mode == "http" else "round trips/s"


# The --quick set: three rows of README.md's loop-core table, and three
# network rows the Python load generator cannot be the bottleneck of.  With
# one message in flight (README's tcp-*-c16, http-c16) or pipelined echo
# (pipe-*-32x1k-c16) the generator spends as much CPU per round trip as the
# fastest servers (0.85-1.3x minloop's, in CPU time per round trip), so
# their rate would be its own; on these rows the server answers each message
# (request) with a write of its own while the generator sends a batch at
# once: it spends 0.5-0.8x the server's CPU.  (benchmarks/net_compare.py,
# with its C load generator, runs README's rows.)
QUICK_ROWS = ("call_soon_chain", "call_later_cancel", "sleep0_pingpong",
              "msgs-protocol-16x1k-c16", "msgs-streams-16x1k-c16", "http-pipe8-c16")


def _rows() -> list[Row]:
    rows = []
    for w in map(workloads.WORKLOADS.get, workloads.CORE):
        rows.append(Row(w.name, "core", w.doc, False, workload=w.name))
    scale = [
        ("tasks-100k-sleep2", "tasks_sleep_twice", 100_000, "tasks", False,
         "100k tasks each sleeping twice (random delays up to 50 ms), asyncio.gather"),
        ("timers-200k-cancel-half", "timers_held_cancel_half", 200_000, "timers", False,
         "200k call_later (up to 50 ms), handles held, a random half cancelled, "
         "the rest waited for"),
        ("timers-1k-fire", "timers_fire_due", 1_000, "timers", False,
         "firing 1k due timers whose handles are held (the firing alone is timed)"),
        ("timers-200k-fire", "timers_fire_due", 200_000, "timers", False,
         "firing 200k due timers whose handles are held (the firing alone is timed)"),
        ("callbacks-1m-chains100", "call_soon_chains", 1_000_000, "callbacks", False,
         "call_soon in 100 parallel chains (about 100 ready callbacks per iteration)"),
        ("tasks-100k-gather", "gather_tasks", 100_000, "tasks", False,
         "gather of 100k tasks of a coroutine that returns at once"),
    ]
    # None of them is in the --quick set: each is seconds per run and loop.
    for rid, workload, n, per, quick, doc in scale:
        rows.append(Row(rid, "scale", doc, quick, workload=workload, n=n, per=per))
    for conns in (5_000, 10_000):
        rows.append(Row(f"idle-tcp-c{conns}", "memory",
                        f"server RSS per idle TCP connection, {conns:,} connections to a "
                        f"Protocol echo server", False, kind="protocol", conns=conns,
                        lower_better=True))
    # The rows of README.md's networking table (benchmarks/net_compare.py
    # measures the same ones against its C load generator), under the same
    # names: <transport>-<server kind>-<message size>-c<connections>, one
    # message in flight on each connection unless the name says how many.
    net = []
    for kind, doc in (("protocol", "asyncio.Protocol echo"),
                      ("buffered", "asyncio.BufferedProtocol echo"),
                      ("streams", "start_server streams echo (read, write + drain)"),
                      ("sock", "sock_accept + sock_recv/sock_sendall echo")):
        for size in (KiB, 64 * KiB, 256 * KiB):
            for conns in (1, 16):
                net.append((f"tcp-{kind}-{size // KiB}k-c{conns}", kind, "echo", conns, size,
                            1, False, f"{doc}, {conns} connection(s), one "
                            f"{size // KiB} KiB message in flight on each"))
    for kind in ("protocol", "streams"):
        for conns in (1, 16):
            net.append((f"pipe-{kind}-32x1k-c{conns}", kind, "echo", conns, KiB, 32, False,
                        f"{kind} echo, {conns} connection(s), 32 messages of 1 KiB in "
                        f"flight on each"))
    # Servers answering each message with a write of its own, pipelined so
    # that the load generator pays one send per batch (the --quick rows).
    net += [
        ("msgs-protocol-16x1k-c16", "protocol-msg", "echo", 16, KiB, 16, False,
         "Protocol answering each 1 KiB message with its own write; 16 pipelined per "
         "connection, 16 connections"),
        ("msgs-streams-16x1k-c16", "streams-msg", "echo", 16, KiB, 16, False,
         "streams: readexactly(1 KiB) -> write + drain per message; 16 pipelined per "
         "connection, 16 connections"),
    ]
    for conns in (1, 16):
        net.append((f"unix-protocol-1k-c{conns}", "unix", "echo", conns, KiB, 1, False,
                    f"asyncio.Protocol echo over a Unix socket, {conns} connection(s)"))
    for socks in (1, 10):
        net.append((f"udp-1k-s{socks}", "udp", "udp", socks, KiB, 1, False,
                    f"datagram echo, {socks} client socket(s), one 1 KiB datagram in "
                    f"flight on each"))
    for conns in (16, 64):
        net.append((f"http-c{conns}", "http", "http", conns, 0, 1, False,
                     f"keep-alive HTTP/1.1 on httptools, {conns} connections, one request "
                     f"in flight on each"))
    net.append(("http-pipe8-c16", "http", "http", 16, 0, 8, False,
                "keep-alive HTTP/1.1 on httptools, 16 connections, 8 pipelined requests "
                "on each"))
    # Thousands of connections, one message in flight on each: what the loop
    # pays per ready connection when many are ready at once.  A timed window
    # of a second at least, so that every connection makes many round trips.
    for conns in (1_000, 10_000):
        net += [
            (f"tcp-protocol-1k-c{conns}", "protocol", "echo", conns, KiB, 1, False,
             f"asyncio.Protocol echo, {conns:,} connections, one 1 KiB message in flight "
             f"on each"),
            (f"tcp-streams-1k-c{conns}", "streams", "echo", conns, KiB, 1, False,
             f"start_server streams echo, {conns:,} connections, one 1 KiB message in "
             f"flight on each"),
        ]
    net.append(("http-c1000", "http", "http", 1_000, 0, 1, False,
                "keep-alive HTTP/1.1 on httptools, 1,000 connections, one request in "
                "flight on each"))
    for rid, kind, mode, conns, size, depth, quick, doc in net:
        rows.append(Row(rid, "net", doc, quick, kind=kind, mode=mode, conns=conns,
                        size=size or KiB, depth=depth, needs="httptools" if mode == "http" else "",
                        min_duration=1.0 if conns >= 1_000 else 0.0))
    # README.md's "TLS, subprocesses, sendfile, pipes" table, under the same
    # sizes; the pipe row is "ospipe-", as "pipe-" names the pipelined TCP rows.
    for size in (KiB, 64 * KiB):
        for conns in (1, 16):
            rows.append(Row(f"tls-{size // KiB}k-c{conns}", "other",
                            f"TLS echo: create_server(ssl=) + Protocol echo, {conns} "
                            f"connection(s), one {size // KiB} KiB message in flight on each",
                            False, kind="tls", conns=conns, size=size))
    rows.append(Row("spawn-300-sequential", "other",
                    "create_subprocess_exec of `true` and wait, 300 one after the other",
                    False, kind="spawn", n=300, per="processes"))
    rows.append(Row("spawn-300-at50", "other",
                    "create_subprocess_exec of `true` and wait, 300 in batches of 50 at once "
                    "(gather)", False, kind="spawn", n=300, at_once=50, per="processes"))
    rows.append(Row("sendfile-100m", "other",
                    "loop.sendfile of a 100 MB file over loopback TCP to a receiver process "
                    "(loops without it: read + write, as aiohttp falls back)", False,
                    kind="sendfile", size=100 * MB, per="MB"))
    rows.append(Row("ospipe-100m-64k", "other",
                    "100 MiB through an os.pipe() in 64 KiB writes, connect_write_pipe to "
                    "connect_read_pipe on one loop", False, kind="ospipe", size=100 * MB,
                    chunk=64 * KiB, per="MiB"))
    # Sub-interpreters with their own GIL, 1 and N at once (interpreters.py):
    # n operations in each interpreter, whole in the full profile.
    for rid, workload, n, per, doc in (
            ("interp-soon-chain-1m", "call_soon_chain", 1_000_000, "callbacks",
             "call_soon chain of 1M callbacks in each interpreter, 1 and N "
             "sub-interpreters at once"),
            ("interp-timers-500k-fire", "timer_chains", 500_000, "timers",
             "500k timer firings (100 chains re-arming with call_later(0), 10k timers "
             "held) in each interpreter, 1 and N sub-interpreters at once"),
            ("interp-tcp-protocol-1k", "tcp_echo", 50_000, "round trips",
             "50k round trips of 1 KiB, Protocol echo server and client on each "
             "interpreter's loop, 1 and N sub-interpreters at once")):
        rows.append(Row(rid, "interpreters", doc, False, workload=workload, n=n, per=per))
    return [dataclasses.replace(row, quick=row.id in QUICK_ROWS) for row in rows]


ROWS = {row.id: row for row in _rows()}
GROUPS = ("core", "scale", "memory", "net", "other", "interpreters")


class UnknownRows(ValueError):
    """An item of --only that matches no row; the message names it and the
    close matches."""


def select_rows(spec: str | None, quick: bool, rows: dict | None = None,
                groups: dict | None = None) -> list[Row]:
    """Rows named by comma-separated ids, groups or glob patterns (a bare
    word also matches as a prefix: call_soon -> call_soon_*), in table
    order; without a spec, the standard (or --quick) set.  rows: the
    candidates (id -> Row; default ROWS); groups: group name -> row ids
    (default: GROUPS, by each row's group).  An item matching nothing
    raises UnknownRows."""
    rows = ROWS if rows is None else rows
    if groups is None:
        groups = {g: [r.id for r in rows.values() if r.group == g] for g in GROUPS}
        groups = {g: ids for g, ids in groups.items() if ids}
    if not spec:
        return [row for row in rows.values() if row.quick or not quick]
    chosen = set()
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item in groups:
            hits = set(groups[item])
        else:
            hits = set(fnmatch.filter(rows, item)) or set(fnmatch.filter(rows, item + "*"))
        if not hits:
            raise UnknownRows(unknown_row_message(item, rows, groups))
        chosen |= hits
    return [row for rid, row in rows.items() if rid in chosen]


def unknown_row_message(item: str, rows: dict, groups: dict) -> str:
    """One line: the item no row matches, and the ids or groups it is
    closest to (not the whole list: --list shows that)."""
    names = list(groups) + list(rows)
    close = difflib.get_close_matches(item, names, n=3, cutoff=0.6)
    if not close:
        # A part of an id: "streams" -> tcp-streams-1k-c1, ...
        close = [rid for rid in rows if item.lower() in rid.lower()][:3]
    if close:
        return f"no row matches {item!r}; did you mean {', '.join(close)}? (--list: the rows)"
    return (f"no row matches {item!r} (--list shows the {len(rows)} rows; groups: "
            f"{', '.join(groups)})")


def core_size(row: Row, quick: bool) -> int:
    """The operations of a core or scale row's run."""
    if row.n:
        return row.n
    w = workloads.WORKLOADS[row.workload]
    return max(w.n // (QUICK_DIVISOR if quick else FULL_DIVISOR), w.smoke_n)


def other_size(row: Row, quick: bool) -> int:
    """The processes (spawn) or bytes (sendfile, ospipe) of an other row."""
    amount = row.n or row.size
    return max(1, amount // OTHER_QUICK_DIVISOR) if quick else amount
