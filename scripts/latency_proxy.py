"""A TCP proxy that delays every request by a fixed latency and counts requests in flight:
a cloud object store's round trip in front of a local S3-compatible server.

    python scripts/latency_proxy.py LISTEN_PORT TARGET_PORT LATENCY_MS STATS_JSON

Every read from a client (an HTTP request, on a new or kept-alive connection) waits
``LATENCY_MS`` before it is forwarded. STATS_JSON is rewritten every 0.1 s with the requests
forwarded, the most in flight at once, the time-average in flight while busy, and how often
each ``METHOD /path`` was asked for.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

METHODS = {b"GET", b"HEAD", b"PUT", b"POST", b"DELETE"}


class Stats:
    def __init__(self) -> None:
        self.requests = 0
        self.paths: dict[str, int] = {}
        self.inflight = 0
        self.max_inflight = 0
        self.busy_time = 0.0
        self.area = 0.0
        self._last = time.perf_counter()

    def _tick(self) -> None:
        now = time.perf_counter()
        if self.inflight:
            self.busy_time += now - self._last
            self.area += self.inflight * (now - self._last)
        self._last = now

    def start(self, data: bytes = b"") -> None:
        self._tick()
        self.requests += 1
        line = data.split(b"\r\n", 1)[0].split(b" ")
        if len(line) == 3 and line[0] in METHODS:
            key = f"{line[0].decode()} {line[1].decode(errors='replace').split('?')[0]}"
            self.paths[key] = self.paths.get(key, 0) + 1
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)

    def done(self) -> None:
        self._tick()
        self.inflight -= 1

    def as_dict(self) -> dict:
        self._tick()
        mean = self.area / self.busy_time if self.busy_time else 0.0
        return {
            "requests": self.requests,
            "max_inflight": self.max_inflight,
            "mean_inflight": mean,
            "paths": dict(self.paths),
        }


async def _pipe(reader, writer, on_chunk=None, delay=0.0) -> None:
    try:
        while data := await reader.read(1 << 16):
            if on_chunk is not None:
                on_chunk(data)
            if delay:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def serve(listen: int, target: int, latency: float, stats: Stats) -> None:
    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_writer.close()
            return
        pending = [0]  # requests sent on this connection whose answer has not started

        def request(data):
            pending[0] += 1
            stats.start(data)

        def answer(data):
            if pending[0]:
                pending[0] -= 1
                stats.done()

        await asyncio.gather(
            _pipe(client_reader, server_writer, request, latency),
            _pipe(server_reader, client_writer, answer),
        )
        while pending[0]:
            answer(b"")

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def main() -> None:
    listen, target, latency_ms, path = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        float(sys.argv[3]),
        sys.argv[4],
    )
    stats = Stats()

    async def report():
        while True:
            with open(path + ".tmp", "w") as f:
                json.dump(stats.as_dict(), f)
            import os

            os.replace(path + ".tmp", path)
            await asyncio.sleep(0.1)

    async def run():
        await asyncio.gather(serve(listen, target, latency_ms / 1000, stats), report())

    asyncio.run(run())


if __name__ == "__main__":
    main()
