"""The clients: a process with no faults, on asyncio's own loop.  Each
connection sends its known stream and reads the echo, comparing every byte
as it arrives; its result is one of
  whole    the echo arrived complete and equal
  short    fewer bytes, then EOF or an error (fine only if the server
           reported an error on that connection)
  corrupt  a byte differs: always a silent loss
  hang     no progress for `timeout` seconds
"""
import asyncio
import os
import ssl

from streams import HEADER, stream

CA_PEM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tls_certs", "ca.pem")


async def _open(address, timeout):
    if "unix" in address:
        return await asyncio.wait_for(asyncio.open_unix_connection(address["unix"]), timeout)
    host, port = address["tcp"]
    tls = None
    if address.get("tls"):
        tls = ssl.create_default_context(cafile=CA_PEM)
    return await asyncio.wait_for(
        asyncio.open_connection(host, port, ssl=tls, server_hostname="localhost" if tls else None), timeout)


async def echo_one(address, seed, cid, size, timeout):
    data = stream(seed, cid, size)
    res = {"cid": cid, "length": len(data), "echoed": 0, "state": "short", "error": None}
    try:
        reader, writer = await _open(address, timeout)
    except asyncio.TimeoutError:
        res["state"] = "hang"
        return res
    except OSError as e:
        res["error"] = f"connect: {e!r}"
        return res
    half_close = not address.get("tls")    # TLS has no half-close: the header's length ends it

    async def send():
        for i in range(0, len(data), 65536):
            writer.write(data[i:i + 65536])
            await asyncio.wait_for(writer.drain(), timeout)
        if half_close:
            writer.write_eof()

    async def receive():
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), timeout)
            if not chunk:
                return
            got = res["echoed"]
            if chunk != data[got:got + len(chunk)]:
                res["state"] = "corrupt"
                return
            res["echoed"] = got + len(chunk)

    sender = asyncio.ensure_future(send())
    try:
        await receive()
    except asyncio.TimeoutError:
        res["state"] = "hang"
    except (OSError, EOFError) as e:
        res["error"] = repr(e)
    try:
        await sender
    except asyncio.TimeoutError:
        if res["echoed"] != len(data) and res["state"] == "short":
            res["state"] = "hang"
    except OSError as e:
        res["error"] = res["error"] or repr(e)
    writer.transport.abort()
    if res["state"] == "short" and res["echoed"] == len(data):
        res["state"] = "whole"
    return res


async def echo_clients(address, cfg, round_no):
    sem = asyncio.Semaphore(cfg["concurrency"])
    count, sizes = cfg["count"], cfg["sizes"]

    async def one(cid):
        async with sem:
            return await echo_one(address, cfg["seed"], cid, sizes[cid % len(sizes)], cfg["timeout"])

    return await asyncio.gather(*(one(cid) for cid in range(round_no * count, (round_no + 1) * count)))


async def udp_clients(address, cfg, round_no):
    """Datagrams in windows of 16; each either comes back equal, comes back
    different (corrupt), or not at all within the timeout (lost)."""
    loop = asyncio.get_running_loop()
    got = {}

    class Proto(asyncio.DatagramProtocol):
        def datagram_received(self, data, addr):
            if len(data) >= HEADER.size:
                got.setdefault(HEADER.unpack(data[:HEADER.size])[0], data)

    transport, _ = await loop.create_datagram_endpoint(Proto, remote_addr=tuple(address["udp"]))
    count, sizes, seed = cfg["count"], cfg["sizes"], cfg["seed"]
    ids = list(range(round_no * count, (round_no + 1) * count))
    sent = {}
    for w in range(0, len(ids), 16):
        window = {cid: stream(seed, cid, sizes[cid % len(sizes)] % 4000) for cid in ids[w:w + 16]}
        sent.update(window)
        for data in window.values():
            transport.sendto(data)
        await _until(lambda: all(cid in got for cid in window), 0.3)
    # A late echo is not a lost one: the missing get the full wait.
    await _until(lambda: all(cid in got for cid in sent), cfg["udp_wait"])
    results = []
    for cid, data in sent.items():
        echo = got.get(cid)
        state = "lost" if echo is None else ("whole" if echo == data else "corrupt")
        results.append({"cid": cid, "length": len(data), "state": state})
    transport.close()
    return results


async def _until(predicate, seconds):
    for _ in range(int(seconds / 0.005)):
        if predicate():
            return
        await asyncio.sleep(0.005)
