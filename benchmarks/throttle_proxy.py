"""A small HTTP/1.1 reverse proxy that makes a loopback object store behave like a remote one.

``python -m benchmarks.throttle_proxy --upstream http://127.0.0.1:PORT --port P --mbps 100
--latency-ms 20`` forwards every request to ``upstream`` after ``latency`` (a round trip to a
remote region), and sends response bodies at most ``mbps`` megabytes per second *in total*,
over all connections (one node's network link). It counts requests per (method, path):
``GET /__proxy__/stats`` returns them as JSON with the bytes sent, ``POST /__proxy__/reset``
clears them. Keep-alive connections, ``Content-Length`` and chunked bodies are handled; writes
can bypass the proxy (go to ``upstream`` directly) so that only reads are throttled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from urllib.parse import urlsplit

_PIECE = 1 << 20  # bytes sent per token-bucket grant
_BUFFER = 8 << 20  # stream buffer limit: big reads, few event-loop turns per megabyte


class Link:
    """One shared link: bandwidth (bytes/s) and per-request latency (s)."""

    def __init__(self, rate: float, latency: float):
        self.rate, self.latency = rate, latency
        self._free_at = 0.0  # when the link is done with everything booked so far
        self.requests: Counter = Counter()
        self.bytes_sent = 0

    async def send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        view = memoryview(data)
        for start in range(0, len(view), _PIECE):
            piece = view[start : start + _PIECE]
            # Book the piece's slot on the link; wait only until the slot starts, so a single
            # connection streams back to back at the full rate.
            now = time.monotonic()
            start = max(self._free_at, now)
            self._free_at = start + len(piece) / self.rate
            if start - now > 0.001:
                await asyncio.sleep(start - now)
            writer.write(piece)
            await writer.drain()
            self.bytes_sent += len(piece)


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return lines[0], headers


async def _copy_body(reader: asyncio.StreamReader, headers: dict[str, str], send, *, until_eof: bool) -> None:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            chunk = await reader.readexactly(size + 2)  # data + CRLF
            await send(size_line + chunk)
            if size == 0:
                return
    elif "content-length" in headers:
        remaining = int(headers["content-length"])
        while remaining:
            data = await reader.readexactly(min(remaining, _PIECE))  # whole pieces: fewer turns
            remaining -= len(data)
            await send(data)
    elif until_eof:
        while data := await reader.read(_PIECE):
            await send(data)


def _writer_to(writer: asyncio.StreamWriter):
    async def send(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    return send


async def _local(link: Link, method: str, path: str, writer: asyncio.StreamWriter) -> None:
    if path.startswith("/__proxy__/reset"):
        link.requests.clear()
        link.bytes_sent = 0
        body = b"{}"
    else:
        stats = {"requests": [[m, p, n] for (m, p), n in sorted(link.requests.items())],
                 "bytes_sent": link.bytes_sent}
        body = json.dumps(stats).encode()
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    await writer.drain()


async def _serve(link: Link, host: str, port: int, client_r: asyncio.StreamReader,
                 client_w: asyncio.StreamWriter) -> None:
    up_r = up_w = None
    try:
        while True:
            try:
                head = await client_r.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            line, headers = _parse_head(head)
            method, target = line.split(" ")[:2]
            path = urlsplit(target).path
            if path.startswith("/__proxy__/"):
                await _local(link, method, path, client_w)
                continue
            link.requests[(method, path)] += 1
            await asyncio.sleep(link.latency)
            if up_w is None:
                up_r, up_w = await asyncio.open_connection(host, port, limit=_BUFFER)
            up_w.write(head)

            await _copy_body(client_r, headers, _writer_to(up_w), until_eof=False)
            await up_w.drain()
            resp_head = await up_r.readuntil(b"\r\n\r\n")
            status_line, rheaders = _parse_head(resp_head)
            status = int(status_line.split(" ")[1])
            client_w.write(resp_head)
            await client_w.drain()
            if method != "HEAD" and status not in (204, 304) and status >= 200:
                close = rheaders.get("connection", "").lower() == "close"
                await _copy_body(up_r, rheaders, lambda d: link.send(client_w, d),
                                 until_eof=close or not ("content-length" in rheaders
                                                         or "transfer-encoding" in rheaders))
                if close:
                    return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        for w in (client_w, up_w):
            if w is not None:
                w.close()


async def main_async(upstream: str, port: int, mbps: float, latency_ms: float) -> None:
    up = urlsplit(upstream)
    link = Link(mbps * 1e6, latency_ms / 1000)
    server = await asyncio.start_server(
        lambda r, w: _serve(link, up.hostname or "127.0.0.1", up.port or 80, r, w), "127.0.0.1", port,
        limit=_BUFFER)
    print(f"throttle proxy on http://127.0.0.1:{port} -> {upstream}: {mbps} MB/s, {latency_ms} ms/request",
          flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--upstream", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mbps", type=float, default=100.0, help="megabytes (1e6) per second, all connections")
    p.add_argument("--latency-ms", type=float, default=20.0, help="added before each request")
    args = p.parse_args()
    asyncio.run(main_async(args.upstream, args.port, args.mbps, args.latency_ms))


if __name__ == "__main__":
    main()
