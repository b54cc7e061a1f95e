"""The known streams: what a client sends on connection `cid`, and how
either side tells whether what it got is that stream.

A stream is an 8-byte header (connection id, payload length) and a payload
drawn from a generator seeded by (seed, cid): both processes rebuild it.
"""
import random
import struct
import zlib

HEADER = struct.Struct("!II")


def stream(seed, cid, size):
    payload = random.Random(seed * 7_919 + cid).randbytes(size)
    return HEADER.pack(cid, size) + payload


def sizes(seed, count, low, high):
    rng = random.Random(seed)
    return [rng.randint(low, high) for _ in range(count)]


class Received:
    """What one side of a connection got: its byte count and checksum, and
    the id in the header once 8 bytes are in."""

    __slots__ = ("cid", "length", "count", "crc", "_head")

    def __init__(self):
        self.cid = self.length = None
        self.count = self.crc = 0
        self._head = b""

    def feed(self, data):
        if self.cid is None:
            self._head += bytes(data[:HEADER.size - len(self._head)])
            if len(self._head) == HEADER.size:
                self.cid, self.length = HEADER.unpack(self._head)
        self.count += len(data)
        self.crc = zlib.crc32(data, self.crc)

    def complete(self):
        return self.length is not None and self.count >= HEADER.size + self.length
