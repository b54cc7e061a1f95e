"""The lag picture in README: a server with a blocking call left in it, and the same server
healthy, as minloop's own histograms see them.

One uvicorn server (httptools) runs on minloop in this process, once per mode; `wrk` loads
it for `--duration` seconds; then the loop's `lag` (how late timers fired) and
`busy_time` (busy stretch between polls) histograms are read and drawn, one curve per
mode.  The server also runs a periodic job (`await asyncio.sleep(0.01)` in a loop, as a
server's metrics flush or heartbeat does), so the lag histogram has timers to measure
besides uvicorn's own.

  healthy   every request answers at once;
  blocking  one request in `--every` calls time.sleep(--block) inside the async handler
            (a synchronous client call left in an async endpoint, the usual culprit).

    python benchmarks/lag_plot.py --out docs/lag.png           # needs wrk, uvicorn, matplotlib
    python benchmarks/lag_plot.py --json lag.json --no-plot    # the numbers only

The picture's caption and README's figures come from the printed summary of the same run.
"""

import argparse
import asyncio
import json
import platform
import shutil
import socket
import subprocess
import sys
import time

import minloop


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_app(mode, every, block):
    count = 0

    async def app(scope, receive, send):
        nonlocal count
        if scope["type"] != "http":
            return
        count += 1
        if mode == "blocking" and count % every == 0:
            time.sleep(block)   # the synchronous call an async endpoint should not make
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"hello"})

    return app


async def periodic_job(stop):
    while not stop.is_set():
        await asyncio.sleep(0.01)


async def serve_and_load(mode, args):
    import uvicorn

    port = free_port()
    config = uvicorn.Config(make_app(mode, args.every, args.block), host="127.0.0.1",
                            port=port, loop="none", http="httptools", lifespan="off",
                            log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    stop = asyncio.Event()
    job = asyncio.ensure_future(periodic_job(stop))
    loop = asyncio.get_running_loop()
    loop.lag.reset()
    loop.busy_time.reset()
    before = loop.utilization()
    wrk = await asyncio.create_subprocess_exec(
        args.wrk, "-t1", f"-c{args.connections}", f"-d{args.duration}s",
        f"http://127.0.0.1:{port}/", stdout=subprocess.PIPE)
    out, _ = await wrk.communicate()
    used = loop.utilization(before)
    result = {
        "mode": mode,
        "lag": loop.lag.snapshot(),
        "busy": loop.busy_time.snapshot(),
        "utilization": used.utilization,
        "requests_per_s": parse_wrk(out.decode()),
    }
    stop.set()
    await job
    server.should_exit = True
    await serving
    return result


def parse_wrk(text):
    for line in text.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise RuntimeError(f"wrk printed no rate:\n{text}")


def summarize(snapshot):
    return {
        "count": snapshot.count,
        "p50": snapshot.percentile(50), "p99": snapshot.percentile(99),
        "max": snapshot.max,
        "buckets": [(bound, n) for bound, n in snapshot.buckets() if n],
    }


def draw(results, path, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    titles = {"lag": "timer lag (loop.lag)", "busy": "busy stretch between polls (loop.busy_time)"}
    colors = {"healthy": "#2a7ab0", "blocking": "#c8442f"}
    for ax, key in zip(axes, ("lag", "busy")):
        for mode, result in results.items():
            summary = result[key]
            total = summary["count"] or 1
            xs, ys, seen = [], [], 0
            for bound, n in summary["buckets"]:
                seen += n
                xs.append(bound * 1e3)
                ys.append(1 - seen / total)   # share of samples above this bound
            label = (f"{mode}: p99 {summary['p99'] * 1e3:.2f} ms, "
                     f"max {summary['max'] * 1e3:.1f} ms")
            floor = 0.5 / total   # the last step drops to zero: draw it to half a sample
            ax.step(xs, [max(y, floor) for y in ys], where="post", color=colors[mode], label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.5 / max(r[key]["count"] or 1 for r in results.values()))
        ax.set_xlabel("milliseconds")
        ax.set_ylabel("share of samples longer")
        ax.set_title(titles[key], fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
    fig.suptitle(f"uvicorn on minloop, wrk -c{args.connections} {args.duration}s; blocking: "
                 f"time.sleep({args.block}) in 1 request of {args.every} "
                 f"(Python {platform.python_version()})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds of load per mode")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--every", type=int, default=200, help="one request in N blocks")
    parser.add_argument("--block", type=float, default=0.02, help="seconds it blocks")
    parser.add_argument("--out", default="docs/lag.png", help="the picture")
    parser.add_argument("--json", help="write the numbers here too")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "wrk")
    args = parser.parse_args(argv)
    if not shutil.which(args.wrk):
        parser.exit(2, "lag_plot.py: needs wrk (apt-get install wrk)\n")

    results = {}
    for mode in ("healthy", "blocking"):
        raw = minloop.run(serve_and_load(mode, args))
        results[mode] = {
            "lag": summarize(raw["lag"]), "busy": summarize(raw["busy"]),
            "utilization": raw["utilization"], "requests_per_s": raw["requests_per_s"],
        }
        r = results[mode]
        print(f"{mode:9} {r['requests_per_s']:9.0f} req/s  utilization {r['utilization']:.2f}  "
              f"lag p50 {r['lag']['p50'] * 1e3:.3f} p99 {r['lag']['p99'] * 1e3:.3f} "
              f"max {r['lag']['max'] * 1e3:.1f} ms ({r['lag']['count']} timers)  "
              f"busy p99 {r['busy']['p99'] * 1e3:.3f} max {r['busy']['max'] * 1e3:.1f} ms "
              f"({r['busy']['count']} stretches)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": platform.python_version(), "args": vars(args),
                       "results": results}, f, indent=1)
    if not args.no_plot:
        draw(results, args.out, args)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
