"""A moto S3 server on 127.0.0.1 behind a fault-injecting HTTP proxy, for the remote tests
of every reader and cache.

:func:`s3_stack` starts both (and stops them on exit) and yields an :class:`S3Stack`:
``stack.options()`` are ``storage_options`` that reach the bucket *through the proxy*;
``stack.fs`` is an s3fs filesystem that talks to moto directly (uploads and checks that
the proxy does not see). The proxy records every request (:attr:`FaultProxy.requests`)
and, on request, answers a matching one with a fault instead of the server's reply:

========== ==========================================================================
kind       what the client gets
========== ==========================================================================
``empty``  a well-formed ``206`` (or ``200``) with no body (``Content-Length: 0``)
``short``  a well-formed reply with only the first half of the body
``cut``    the full ``Content-Length`` announced, half the body sent, then the
           connection closed (aiohttp: ``ClientPayloadError``)
``reset``  the connection reset before any reply (TCP RST)
``range``  the right bytes under a wrong ``Content-Range`` (one byte further on)
``503``    ``503 SlowDown`` (S3's throttling reply)
``slow``   the body sent in 16 KiB pieces, ``delay`` seconds apart
========== ==========================================================================

:meth:`FaultProxy.kill` makes the server die: open connections are reset and new ones
refused.

>>> with s3_stack() as stack:                                         # doctest: +SKIP
...     stack.fs.pipe(f"{stack.bucket}/a.bin", b"0123456789")
...     stack.proxy.fail("empty", path="/a.bin", times=1)
...     read_range(f"s3://{stack.bucket}/a.bin", 0, 4, storage_options=stack.options())
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import os
import socket
import struct
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FaultProxy", "S3Stack", "s3_stack", "Request", "FAULTS"]

FAULTS = ("empty", "short", "cut", "reset", "range", "503", "slow")

_SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer",
        "upgrade", "content-length"}


@dataclass
class Request:
    """One request the proxy saw: method, path (no query), query, ``Range`` header,
    bytes of body sent back, and the fault it was answered with (``None``: passed)."""

    method: str
    path: str
    query: str
    range: str | None
    sent: int = 0
    fault: str | None = None
    #: set once the proxy has finished answering (a client may have read the whole body
    #: before the proxy's thread counts it as sent)
    done: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    @property
    def is_data_get(self) -> bool:
        """A GET of an object's bytes (not a bucket listing)."""
        return self.method == "GET" and self.path.count("/") >= 2 and "list-type" not in self.query \
            and not self.path.endswith("/")

    @property
    def key(self) -> str:
        """The object's key (the path less the bucket)."""
        return self.path.split("/", 2)[2] if self.path.count("/") >= 2 else ""


@dataclass
class _Fault:
    kind: str
    path: str | None
    method: str
    times: int
    delay: float = 0.0
    hits: int = field(default=0)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _forward(self) -> None:
        proxy = self.server.proxy
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        req = Request(self.command, path, query, self.headers.get("Range"))
        fault = proxy._match(req)
        with proxy._lock:
            proxy.requests.append(req)
        try:
            self._answer(proxy, req, fault, body)
        finally:
            req.done.set()

    def _answer(self, proxy: Any, req: Request, fault: Any, body: bytes) -> None:
        if fault is not None:
            req.fault = fault.kind
        if fault is not None and fault.kind == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if fault is not None and fault.kind == "503":
            self._reply(503, [("Content-Type", "application/xml")], _SLOWDOWN, req)
            return
        up = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            up.request(self.command, self.path, body=body, headers=headers)
            resp = up.getresponse()
            data = resp.read()
            out = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP]
            announced = resp.getheader("Content-Length")
        finally:
            up.close()
        if self.command == "HEAD":
            self._reply(resp.status, out + [("Content-Length", announced or "0")], b"", req)
            return
        kind = fault.kind if fault is not None else None
        if kind == "empty":
            data = b""
        elif kind == "short":
            data = data[: len(data) // 2]
        elif kind == "range":
            out = [(k, _shift(v) if k.lower() == "content-range" else v) for k, v in out]
        elif kind == "cut":
            self.send_response(resp.status)
            for k, v in out:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            req.sent = len(data) // 2
            self.close_connection = True
            return
        self._reply(resp.status, out, data, req,
                    delay=fault.delay if fault is not None and kind == "slow" else 0.0)

    def _reply(self, status: int, headers: list, data: bytes, req: Request,
               delay: float = 0.0) -> None:
        self.send_response(status)
        for k, v in headers:
            if k.lower() != "content-length" or self.command == "HEAD":
                self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not delay:
            self.wfile.write(data)
            req.sent = len(data)
            return
        for i in range(0, len(data), 16 << 10):
            self.wfile.write(data[i: i + (16 << 10)])
            self.wfile.flush()
            req.sent = min(len(data), i + (16 << 10))
            if self.server.proxy._dead.wait(delay):  # the server dies: drop the connection
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward


def _shift(content_range: str) -> str:
    """``bytes a-b/n`` -> ``bytes a+1-b+1/n`` (a Content-Range that lies)."""
    unit, _, rest = content_range.partition(" ")
    span, _, total = rest.partition("/")
    lo, _, hi = span.partition("-")
    return f"{unit} {int(lo) + 1}-{int(hi) + 1}/{total}"


class _ProxyServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    proxy: FaultProxy

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that went away mid-reply (killed, timed out) is what the tests do


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream_port`` that records every
    request and answers matching ones with faults (see the module docstring)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.requests: list[Request] = []
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        self._dead = threading.Event()
        self._server = _ProxyServer(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-proxy",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail(self, kind: str, *, path: str | None = None, method: str = "GET",
             times: int = 1, delay: float = 0.05) -> None:
        """Answer the next ``times`` ``method`` requests whose path contains ``path``
        with fault ``kind`` (one of :data:`FAULTS`)."""
        if kind not in FAULTS:
            raise ValueError(f"`kind` must be one of {FAULTS}, got {kind!r}")
        with self._lock:
            self._faults.append(_Fault(kind, path, method, times, delay))

    def heal(self) -> None:
        """Forget every fault not yet used."""
        with self._lock:
            self._faults.clear()

    def _match(self, req: Request) -> _Fault | None:
        with self._lock:
            for f in self._faults:
                if f.times > 0 and f.method == req.method and (f.path is None or f.path in req.path):
                    if req.method == "GET" and not req.is_data_get:
                        continue
                    f.times -= 1
                    f.hits += 1
                    return f
        return None

    def clear(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self.requests.clear()

    def data_gets(self, key: str | None = None) -> list[Request]:
        """The recorded GETs of objects' bytes (of ``key``'s object if given)."""
        with self._lock:
            return [r for r in self.requests if r.is_data_get and (key is None or r.key == key)]

    def fetched(self, key: str) -> list[tuple[int, int]]:
        """``[start, end)`` of every byte range of ``key`` the proxy passed on in full
        (faulty replies left out), in the order asked."""
        out = []
        for r in self.data_gets(key):
            r.done.wait(30)  # its answer is complete (the client may have read it first)
            if r.fault is not None and r.fault != "slow":
                continue
            if r.range is None:
                out.append((0, r.sent))
            else:
                lo = int(r.range.removeprefix("bytes=").split("-")[0])
                out.append((lo, lo + r.sent))
        return out

    def kill(self) -> None:
        """The server dies: bodies being sent stop, new connections are refused."""
        self._dead.set()
        self._server.shutdown()
        self._server.server_close()

    def close(self) -> None:
        if not self._dead.is_set():
            self.kill()
        self._thread.join(5)


@dataclass
class S3Stack:
    """A running moto server, the proxy in front of it and a bucket."""

    moto_endpoint: str
    proxy: FaultProxy
    bucket: str
    fs: object  # s3fs.S3FileSystem on moto directly

    def options(self, **extra: object) -> dict:
        """``storage_options`` reaching the bucket through the proxy (plus ``extra``)."""
        return {"client_kwargs": {"endpoint_url": self.proxy.endpoint, "region_name": "us-east-1"},
                "use_listings_cache": False, **extra}

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def put(self, key: str, data: bytes | str) -> str:
        """Upload ``data`` (bytes, or the path of a local file) as ``key``; its URL."""
        if isinstance(data, bytes):
            self.fs.pipe(f"{self.bucket}/{key}", data)  # type: ignore[attr-defined]
        else:
            self.fs.put_file(data, f"{self.bucket}/{key}")  # type: ignore[attr-defined]
        return self.url(key)

    def new_proxy(self) -> FaultProxy:
        """A second proxy in front of the same server (for a test that kills one)."""
        return FaultProxy(self.proxy.upstream_port)


@contextlib.contextmanager
def s3_stack() -> Iterator[S3Stack]:
    """Start moto on 127.0.0.1 and the proxy in front of it, create a bucket; stop both
    on exit. Needs ``moto[server]`` and ``s3fs``."""
    import logging
    from unittest import mock

    import boto3
    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server._server.server_port  # type: ignore[union-attr]
    endpoint = f"http://127.0.0.1:{port}"
    proxy = FaultProxy(port)
    bucket = f"feedline-{uuid.uuid4().hex[:8]}"
    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    try:
        with mock.patch.dict(os.environ, keys):
            boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
            fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"},
                                   use_listings_cache=False, skip_instance_cache=True)
            yield S3Stack(endpoint, proxy, bucket, fs)
    finally:
        proxy.close()
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()
