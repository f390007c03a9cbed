"""A fault-injecting HTTP/1.1 reverse proxy for S3 tests (stdlib asyncio only).

Requests and responses are forwarded byte for byte: the proxy parses heads only to
know where each message ends (Content-Length, chunked, bodiless responses), so the
SigV4 signature of every request stays valid. Bodies are streamed in chunks of at
most READ_SIZE bytes with writer backpressure, never buffered whole.

Faults are decided per request from a seeded random.Random (see rules.py and
README.md). The proxy runs either on the caller's asyncio loop (start_async /
stop_async) or on a loop in a background thread (start / stop) for synchronous
test code; set_rules, stats and set_down are safe to call from any thread.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import logging
import random
import socket
import struct
import threading
import time
import urllib.parse
from typing import Any, Iterable
from xml.sax.saxutils import escape as _xml_escape

from .rules import TERMINAL_PRECEDENCE, Rule, classify, to_rules

try:  # Linux: bytes not yet acknowledged by the peer, to make "after N bytes" exact
    import fcntl
    import termios

    _TIOCOUTQ = termios.TIOCOUTQ
except (ImportError, AttributeError):  # pragma: no cover
    fcntl = None
    _TIOCOUTQ = None

log = logging.getLogger("faultproxy")

READ_SIZE = 256 * 1024
RECV_SIZE = 1 << 20  # per recv() on the fast path (asyncio default 256 KiB)
STREAM_LIMIT = 1 << 20  # StreamReader buffer (and the largest message head accepted)
WRITE_HIGH_WATER = 1 << 20
MAX_DECISION_LOG = 100_000

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class _Abort(Exception):
    """The connection was ended on purpose (fault, down switch, stop)."""


class _Cut(Exception):
    """A sink reached its byte budget (reset/truncate point)."""


class ProtocolError(Exception):
    pass


# --------------------------------------------------------------------------
# message heads


class _Head:
    __slots__ = (
        "raw", "start", "headers", "version", "content_length", "chunked", "close",
    )

    def __init__(self, raw: bytes):
        self.raw = raw
        lines = raw[:-4].split(b"\r\n")
        self.start = lines[0].decode("latin-1")
        self.headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise ProtocolError(f"bad header line {line[:80]!r}")
            self.headers.append((name.decode("latin-1").lower(), value.strip().decode("latin-1")))
        self.version = ""
        self.content_length: int | None = None
        self.chunked = False
        self.close = False

    def get(self, name: str) -> str | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def _framing(self):
        te = [v.lower() for k, v in self.headers if k == "transfer-encoding"]
        if te:
            codings = [c.strip() for v in te for c in v.split(",")]
            self.chunked = codings[-1] == "chunked"
            if not self.chunked:
                raise ProtocolError("Transfer-Encoding without chunked is not supported")
        cls = {v.strip() for k, v in self.headers if k == "content-length"}
        if cls and not self.chunked:
            if len(cls) != 1:
                raise ProtocolError("conflicting Content-Length headers")
            v = cls.pop()
            if not v.isdigit():
                raise ProtocolError(f"bad Content-Length {v!r}")
            self.content_length = int(v)
        conn = {t.strip().lower() for k, v in self.headers if k == "connection" for t in v.split(",")}
        if self.version == "HTTP/1.0":
            self.close = "keep-alive" not in conn
        else:
            self.close = "close" in conn


class _Request(_Head):
    __slots__ = ("method", "target", "kind", "kinds", "expect_continue", "key")

    def __init__(self, raw: bytes, virtual_hosted: bool):
        super().__init__(raw)
        parts = self.start.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise ProtocolError(f"bad request line {self.start[:80]!r}")
        self.method, self.target, self.version = parts
        self._framing()
        self.kind, self.kinds = classify(
            self.method, self.target, self.get("range") is not None, virtual_hosted
        )
        self.expect_continue = (self.get("expect") or "").lower() == "100-continue"
        # Identity of the request across retries: no signature/date query params.
        self.key = self.key_without(())

    def key_without(self, ignore) -> str:
        """The request's identity, leaving out the query parameters named in
        ignore (lower case) as well as the X-Amz-* ones."""
        path, _, query = self.target.partition("?")
        q = sorted(p for p in query.split("&")
                   if p and not p.lower().startswith("x-amz-") and p.split("=", 1)[0].lower() not in ignore)
        return f"{self.method} {path}?{'&'.join(q)} {self.get('range') or ''}"

    @property
    def has_body(self) -> bool:
        return self.chunked or bool(self.content_length)


class _Response(_Head):
    __slots__ = ("status",)

    def __init__(self, raw: bytes, request_method: str):
        super().__init__(raw)
        parts = self.start.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"bad status line {self.start[:80]!r}")
        self.version = parts[0]
        self.status = int(parts[1])
        self._framing()
        if request_method == "HEAD" or self.status in (204, 304) or 100 <= self.status < 200:
            self.content_length, self.chunked = 0, False

    @property
    def until_close(self) -> bool:
        return not self.chunked and self.content_length is None


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    """One message head up to and including the blank line; None on clean EOF."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if not e.partial.strip():
                return None
            raise
        # RFC 9112 2.2: ignore empty lines before a request line.
        head = head.lstrip(b"\r\n")
        if head:
            return head


# --------------------------------------------------------------------------
# transports


def _set_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass


def _rst(writer: asyncio.StreamWriter | None) -> None:
    """Close with an RST (SO_LINGER 0), dropping anything not yet sent."""
    if writer is None:
        return
    _set_rst(writer)
    writer.transport.abort()


def _abort(writer: asyncio.StreamWriter | None) -> None:
    if writer is not None:
        writer.transport.abort()


async def _wait_unsent(writer: asyncio.StreamWriter, timeout: float = 1.0) -> None:
    """Wait until the kernel has no unacknowledged bytes queued (Linux TIOCOUTQ)."""
    if _TIOCOUTQ is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    deadline = time.monotonic() + timeout
    buf = bytearray(4)
    while time.monotonic() < deadline:
        try:
            fcntl.ioctl(sock.fileno(), _TIOCOUTQ, buf, True)
        except OSError:
            return
        if struct.unpack("i", buf)[0] == 0:
            return
        await asyncio.sleep(0.001)


class TokenBucket:
    """Bytes/second limiter; tokens may go negative so the long-run rate is exact."""

    def __init__(self, rate: int, burst: int):
        self.rate = float(rate)
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    async def take(self, n: int) -> None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        self.tokens -= n
        if self.tokens < 0:
            await asyncio.sleep(-self.tokens / self.rate)


class _Sink:
    """Writes a body to one side, counting, throttling and cutting at a budget."""

    def __init__(self, proxy, writer, stat, bucket=None, piece=READ_SIZE, cut=None, cut_before_end=False):
        self.proxy = proxy
        self.writer = writer
        self.stat = stat
        self.bucket = bucket
        self.piece = max(1, piece)
        self.cut = cut
        self.cut_before_end = cut_before_end
        self.sent = 0
        self.discard = False  # set when the peer no longer wants the rest
        self.discarded = 0
        self.tolerant = False  # on a write error switch to discard instead of raising
        self.flip = None  # corrupt_request: body offset of the byte to flip (None once done)

    async def send(self, data: bytes) -> None:
        if self.discard:
            self.discarded += len(data)
            return
        if self.flip is not None and self.flip < self.sent + len(data):
            i = self.flip - self.sent
            data = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1 :]
            self.flip = None
            self.proxy._count("bytes_corrupted")
        if self.cut is not None and len(data) >= self.cut - self.sent:
            await self._write(data[: self.cut - self.sent])
            raise _Cut()
        await self._write(data)

    async def end(self, data: bytes) -> None:
        """The final piece of framing (last chunk): a cut pending fires before it."""
        if self.cut is not None and self.cut_before_end and not self.discard:
            raise _Cut()
        await self.send(data)

    async def _write(self, data) -> None:
        if not data:
            return
        try:
            if self.bucket is None:
                # Count before writing: a client that has the bytes may read stats().
                self.sent += len(data)
                self.proxy._count(self.stat, len(data))
                self.writer.write(data)
                await self.writer.drain()
                return
            mv = memoryview(data)
            for i in range(0, len(mv), self.piece):
                p = mv[i : i + self.piece]
                await self.bucket.take(len(p))
                self.sent += len(p)
                self.proxy._count(self.stat, len(p))
                self.writer.write(p)
                await self.writer.drain()
        except (ConnectionError, OSError):
            if not self.tolerant:
                raise
            self.discard = True


async def _copy_exact(reader, n: int, sink: _Sink, stat: str, proxy) -> None:
    while n > 0:
        if sink.bucket is None and sink.flip is None and not sink.discard and sink.writer is not None:
            moved = await _splice(reader, n, sink, stat, proxy)
            n -= moved
            if n <= 0:
                return
        data = await reader.read(min(n, READ_SIZE))
        if not data:
            raise asyncio.IncompleteReadError(b"", n)
        proxy._count(stat, len(data))
        n -= len(data)
        await sink.send(data)


class _SpliceProtocol(asyncio.Protocol):
    """Stands in for a StreamReaderProtocol while n body bytes go straight from
    the source transport to the destination transport (no StreamReader copies,
    no coroutine switch per chunk). Flow control: the source is paused while
    the destination's write buffer is above its high-water mark."""

    def __init__(self, orig, src, reader, sink: _Sink, n: int, stat: str, proxy):
        self.orig, self.src, self.reader, self.sink = orig, src, reader, sink
        self.dst = sink.writer.transport
        self.remaining = n
        self.moved = 0
        self.stat, self.proxy = stat, proxy
        self.fut = asyncio.get_running_loop().create_future()
        self.paused = False

    def data_received(self, data: bytes) -> None:
        if self.fut.done():  # pragma: no cover - protocol already swapped back
            self.orig.data_received(data)
            return
        sink = self.sink
        if sink.discard:  # the slow path takes over and drops the rest
            self._finish(None, data)
            return
        take = min(len(data), self.remaining)
        exc = None
        if sink.cut is not None and take >= sink.cut - sink.sent:
            take = sink.cut - sink.sent
            exc = _Cut()
        if self.dst.is_closing():
            self._finish(ConnectionResetError("destination closed"), data)
            return
        piece = data if take == len(data) else data[:take]
        sink.sent += take
        self.moved += take
        self.remaining -= take
        proxy = self.proxy
        with proxy._lock:
            proxy._stats[self.stat] += take
            proxy._stats[sink.stat] += take
        if take:
            self.dst.write(piece)
        if exc is not None:
            self._finish(exc, b"")
        elif self.remaining == 0:
            self._finish(None, data[take:])
        elif self.dst.get_write_buffer_size() > WRITE_HIGH_WATER and not self.paused:
            self.paused = True
            self.src.pause_reading()
            asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        try:
            await self.sink.writer.drain()
        except (ConnectionError, OSError) as e:
            self._finish(e, b"")
            return
        self.paused = False
        if not self.fut.done():
            self.src.resume_reading()

    def _finish(self, exc, leftover: bytes) -> None:
        if self.fut.done():
            return
        self.src.set_protocol(self.orig)
        if leftover:
            self.orig.data_received(leftover)
        if self.paused:
            self.paused = False
            self.src.resume_reading()
        if exc is None:
            self.fut.set_result(self.moved)
        elif isinstance(exc, asyncio.CancelledError):
            self.fut.cancel()
        else:
            self.fut.set_exception(exc)

    def eof_received(self):
        self._finish(asyncio.IncompleteReadError(b"", self.remaining), b"")
        return self.orig.eof_received()

    def connection_lost(self, exc) -> None:
        self._finish(exc or asyncio.IncompleteReadError(b"", self.remaining), b"")
        self.orig.connection_lost(exc)

    def pause_writing(self) -> None:
        self.orig.pause_writing()

    def resume_writing(self) -> None:
        self.orig.resume_writing()


async def _splice(reader: asyncio.StreamReader, n: int, sink: _Sink, stat: str, proxy) -> int:
    """Move up to n bytes reader -> sink.writer on the fast path; returns bytes moved
    (0 when the fast path does not apply). Raises _Cut at the sink's budget."""
    src = getattr(reader, "_transport", None)
    buf = getattr(reader, "_buffer", None)
    if src is None or buf is None or reader.exception() is not None or reader.at_eof():
        return 0
    if src.get_extra_info("sslcontext") is not None or not hasattr(src, "set_protocol"):
        return 0
    moved = 0
    # What the StreamReader already holds goes first, through the normal path.
    while len(buf) and moved < n:
        data = await reader.read(min(n - moved, READ_SIZE))
        proxy._count(stat, len(data))
        moved += len(data)
        await sink.send(data)
    if moved >= n or sink.discard:
        return moved
    if getattr(src, "max_size", RECV_SIZE) < RECV_SIZE:
        src.max_size = RECV_SIZE
    orig = src.get_protocol()
    relay = _SpliceProtocol(orig, src, reader, sink, n - moved, stat, proxy)
    src.set_protocol(relay)
    try:
        moved += await asyncio.shield(relay.fut)
    except asyncio.CancelledError:
        relay._finish(asyncio.CancelledError(), b"")
        raise
    except (ConnectionError, OSError):
        moved += relay.moved
        if not sink.tolerant:
            raise
        sink.discard = True
        if relay.remaining and not src.is_closing():
            return moved
        raise
    return moved


async def _copy_body(reader, head: _Head, sink: _Sink, stat: str, proxy) -> None:
    """Relay one body as framed by head (length, chunked, or until EOF), raw."""
    if head.chunked:
        while True:
            line = await reader.readuntil(b"\r\n")
            proxy._count(stat, len(line))
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size line {line[:40]!r}") from None
            if size == 0:
                await sink.end(line)
                while True:  # trailer section, ends with an empty line
                    t = await reader.readuntil(b"\r\n")
                    proxy._count(stat, len(t))
                    await sink.send(t)
                    if t == b"\r\n":
                        return
            await sink.send(line)
            await _copy_exact(reader, size + 2, sink, stat, proxy)
    elif head.content_length is not None:
        await _copy_exact(reader, head.content_length, sink, stat, proxy)
    else:
        while True:
            data = await reader.read(READ_SIZE)
            if not data:
                return
            proxy._count(stat, len(data))
            await sink.send(data)


async def _reap(*tasks) -> None:
    """Cancel tasks and wait for them, retrieving any exception they ended with."""
    live = [t for t in tasks if t is not None]
    for t in live:
        t.cancel()
    if live:
        await asyncio.wait(live)
        for t in live:
            if not t.cancelled():
                t.exception()


# --------------------------------------------------------------------------
# decisions


class Decision:
    """The faults chosen for one request: family -> drawn parameters."""

    __slots__ = ("seq", "kind", "faults", "names")

    def __init__(self, seq: int, kind: str):
        self.seq = seq
        self.kind = kind
        self.faults: dict[str, dict] = {}
        self.names: dict[str, str] = {}  # family -> fault name

    def get(self, family: str) -> dict | None:
        return self.faults.get(family)


def _new_stats() -> dict:
    return {
        "connections": 0,
        "requests": 0,
        "by_kind": collections.Counter(),
        "faults": collections.Counter(),
        "faults_by_kind": collections.defaultdict(collections.Counter),
        "bytes_from_client": 0,
        "bytes_to_upstream": 0,
        "bytes_from_upstream": 0,
        "bytes_to_client": 0,
        "expect_continue": 0,
        "interim_relayed": 0,
        "upstream_connects": 0,
        "upstream_errors": 0,
        "rejected_down": 0,
        "early_responses": 0,
        "bytes_corrupted": 0,
        "errors": 0,
    }


# --------------------------------------------------------------------------
# the proxy


class FaultProxy:
    """Reverse proxy from listen_host:listen_port to upstream_host:upstream_port.

    rules: Rule objects, rule strings (``"slowdown_503:p=0.1,kind=upload_part"``) or
    dicts. seed: seeds the random.Random that decides every fault. decisions:
    ``"sequence"`` (default: one RNG consumed in request arrival order) or
    ``"keyed"`` (each request's RNG is seeded from seed, method, path, query without
    X-Amz-* params, Range and its attempt number, so concurrent clients get the same
    faults on the same parts whatever the interleaving). key_ignore: query parameter
    names also left out of that identity: with ``("uploadId",)`` the part N of every
    multipart upload of a key meets the same faults, whatever upload it belongs to
    (side-by-side benchmarks: each configuration's upload has a new upload id).
    virtual_hosted: classify
    paths as ``/key`` instead of ``/bucket/key``. upstream_ssl: an SSLContext (or
    True) to speak TLS to the upstream; the listening side is always plain HTTP.
    linger: seconds to keep reading (and discarding) from a client after answering
    it early, before closing.
    """

    def __init__(
        self,
        upstream_host: str = "127.0.0.1",
        upstream_port: int = 8333,
        rules: Iterable[Any] | None = None,
        seed: int | str | None = 0,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        decisions: str = "sequence",
        key_ignore: Iterable[str] = (),
        virtual_hosted: bool = False,
        upstream_ssl=None,
        linger: float = 2.0,
    ):
        if decisions not in ("sequence", "keyed"):
            raise ValueError("decisions must be 'sequence' or 'keyed'")
        self.upstream_host = upstream_host
        self.upstream_port = int(upstream_port)
        self.listen_host = listen_host
        self.port = int(listen_port)
        self.seed = seed
        self.decisions_mode = decisions
        self.key_ignore = frozenset(k.lower() for k in key_ignore)
        self.virtual_hosted = virtual_hosted
        self.upstream_ssl = upstream_ssl
        self.linger = float(linger)
        self._lock = threading.Lock()
        self._rules: list[Rule] = to_rules(rules)
        self._fired = [0] * len(self._rules)
        self._rng = random.Random(seed)
        self._attempts: dict[str, int] = {}
        self._seq = 0
        self._stats = _new_stats()
        self._log: collections.deque = collections.deque(maxlen=MAX_DECISION_LOG)
        self._down = False
        self._down_mode = "reset"
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[_Connection] = set()
        self._conn_ids = 0

    @classmethod
    def from_url(cls, url: str, **kwargs) -> "FaultProxy":
        """FaultProxy for an endpoint URL such as ``http://127.0.0.1:8333``."""
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        if u.scheme == "https" and kwargs.get("upstream_ssl") is None:
            kwargs["upstream_ssl"] = True
        return cls(u.hostname, u.port or (443 if u.scheme == "https" else 80), **kwargs)

    # ---- public state ---------------------------------------------------

    @property
    def url(self) -> str:
        """The endpoint URL clients should use."""
        return f"http://{self.listen_host}:{self.port}"

    endpoint_url = url

    def set_rules(self, rules: Iterable[Any] | None, seed: int | str | None = None) -> None:
        """Replace the rules (thread-safe); with seed, also reseed the RNG."""
        new = to_rules(rules)
        with self._lock:
            self._rules = new
            self._fired = [0] * len(new)
            if seed is not None:
                self.seed = seed
                self._rng = random.Random(seed)
                self._attempts.clear()

    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def stats(self) -> dict:
        """Counters: requests, connections, by_kind, faults, faults_by_kind, bytes_*."""
        with self._lock:
            s = copy.deepcopy(self._stats)
            rules = [{"rule": str(r), "fired": n} for r, n in zip(self._rules, self._fired)]
            active = len(self._conns)
        s["by_kind"] = dict(s["by_kind"])
        s["faults"] = dict(s["faults"])
        s["faults_by_kind"] = {k: dict(v) for k, v in s["faults_by_kind"].items()}
        s["rules"] = rules
        s["active_connections"] = active
        s["down"] = self._down
        return s

    def reset_stats(self) -> None:
        with self._lock:
            self._stats = _new_stats()
            self._log.clear()

    def decisions(self) -> list[dict]:
        """The decision log (most recent MAX_DECISION_LOG requests), oldest first."""
        with self._lock:
            return [dict(d) for d in self._log]

    # ---- lifecycle: async ----------------------------------------------

    async def start_async(self) -> int:
        """Start listening on the running loop; returns the bound port."""
        self._loop = asyncio.get_running_loop()
        await self._listen()
        return self.port

    async def stop_async(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._drop_all()
        tasks = [c.task for c in list(self._conns) if c.task is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self):
        await self.start_async()
        return self

    async def __aexit__(self, *exc):
        await self.stop_async()

    async def set_down_async(self, down: bool, mode: str = "reset") -> None:
        """Async form of set_down, for use on the proxy's own loop."""
        if mode not in ("reset", "refuse"):
            raise ValueError("mode must be 'reset' or 'refuse'")
        self._down = bool(down)
        if down:
            self._down_mode = mode
            if mode == "refuse" and self._server is not None:
                self._server.close()
                self._server = None
            self._drop_all()
        elif self._server is None and self._loop is not None:
            await self._listen()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._on_client,
            self.listen_host,
            self.port,
            limit=STREAM_LIMIT,
            reuse_address=True,
            backlog=512,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    # ---- lifecycle: sync (background thread) ---------------------------

    def start(self) -> int:
        """Run the proxy on a loop in a daemon thread; returns the bound port."""
        if self._thread is not None:
            raise RuntimeError("already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run():
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as e:  # noqa: BLE001 - reported to start()
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name=f"faultproxy-{id(self):x}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self.port

    def stop(self) -> None:
        if self._thread is None:
            return
        loop = self._loop
        fut = asyncio.run_coroutine_threadsafe(self.stop_async(), loop)
        try:
            fut.result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def set_down(self, down: bool, mode: str = "reset") -> None:
        """Kill switch. down=True drops every open connection (RST) and then either
        resets each new connection right after accepting it (mode="reset", the port
        stays bound) or closes the listening socket so connects are refused
        (mode="refuse"). down=False serves again on the same port.

        From synchronous code this returns once done; on the proxy's own loop use
        ``await set_down_async(...)``."""
        if self._loop is None:
            raise RuntimeError("not started")
        if self._thread is not None and threading.current_thread() is not self._thread:
            asyncio.run_coroutine_threadsafe(self.set_down_async(down, mode), self._loop).result(10)
        else:
            self._loop.create_task(self.set_down_async(down, mode))

    # ---- internals -------------------------------------------------------

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._stats[key] += n

    def _drop_all(self) -> None:
        for c in list(self._conns):
            c.drop()

    def _decide(self, req: _Request, conn_id: int) -> Decision:
        with self._lock:
            self._seq += 1
            d = Decision(self._seq, req.kind)
            if self.decisions_mode == "keyed":
                key = req.key_without(self.key_ignore) if self.key_ignore else req.key
                n = self._attempts[key] = self._attempts.get(key, 0) + 1
                rng = random.Random(f"{self.seed}\0{key}\0{n}")
            else:
                rng = self._rng
            fired_rules: dict[str, int] = {}
            now = time.monotonic()
            for i, rule in enumerate(self._rules):
                if not rule.matches(req.kinds):
                    continue
                if not rule.in_window(now):
                    continue
                if rule.times is not None and self._fired[i] >= rule.times:
                    continue
                if not rng.random() < rule.p:
                    continue
                fam = rule.family
                if fam in d.faults:
                    continue
                d.faults[fam] = rule.draw(rng)
                d.names[fam] = rule.fault
                fired_rules[fam] = i
            terminal = [f for f in TERMINAL_PRECEDENCE if f in d.faults]
            for f in terminal[1:]:
                del d.faults[f], d.names[f], fired_rules[f]
            s = self._stats
            s["requests"] += 1
            s["by_kind"][req.kind] += 1
            if req.expect_continue:
                s["expect_continue"] += 1
            for fam, i in fired_rules.items():
                self._fired[i] += 1
                name = d.names[fam]
                s["faults"][name] += 1
                s["faults_by_kind"][name][req.kind] += 1
            path = req.target.partition("?")[0]
            part = None
            if req.kind == "upload_part":
                for p in req.target.partition("?")[2].split("&"):
                    if p.startswith("partNumber="):
                        part = p[11:]
            self._log.append(
                {
                    "seq": d.seq,
                    "conn": conn_id,
                    "method": req.method,
                    "path": path,
                    "kind": req.kind,
                    "part": part,
                    "faults": {d.names[f]: dict(v) for f, v in d.faults.items()},
                }
            )
        return d

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        if self._down:
            self._count("rejected_down")
            _rst(writer)
            return
        with self._lock:
            self._conn_ids += 1
            cid = self._conn_ids
            self._stats["connections"] += 1
        conn = _Connection(self, cid, reader, writer)
        conn.task = asyncio.current_task()
        self._conns.add(conn)
        try:
            await conn.run()
        except (_Abort, _Cut, asyncio.CancelledError):
            pass
        except (ConnectionError, OSError, asyncio.IncompleteReadError) as e:
            log.debug("connection %d ended: %r", cid, e)
        except Exception:
            self._count("errors")
            log.exception("connection %d failed", cid)
        finally:
            conn.close()
            self._conns.discard(conn)


class _Connection:
    """One client connection and its (lazily opened) upstream connection."""

    def __init__(self, proxy: FaultProxy, cid: int, reader, writer):
        self.proxy = proxy
        self.id = cid
        self.cr: asyncio.StreamReader = reader
        self.cw: asyncio.StreamWriter = writer
        self.ur: asyncio.StreamReader | None = None
        self.uw: asyncio.StreamWriter | None = None
        self.task: asyncio.Task | None = None
        self.buckets: dict[tuple, TokenBucket] = {}
        self.dropped = False
        writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    # ---- teardown

    def drop(self) -> None:
        """RST the client and abort the upstream (down switch / stop)."""
        self.dropped = True
        _rst(self.cw)
        self.close_upstream()

    def close_upstream(self) -> None:
        if self.uw is not None:
            _abort(self.uw)
        self.ur = self.uw = None

    def close(self) -> None:
        self.close_upstream()
        if not self.cw.transport.is_closing():
            self.cw.transport.abort() if self.dropped else self.cw.close()

    async def _lingering_close(self) -> None:
        """Half-close, discard what the client still sends, then close.

        Closing a socket with unread input sends an RST, which can destroy the
        response we just sent before the client reads it.
        """
        try:
            await self.cw.drain()
            if self.cw.can_write_eof():
                self.cw.write_eof()
            deadline = time.monotonic() + self.proxy.linger
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                data = await asyncio.wait_for(self.cr.read(READ_SIZE), left)
                if not data:
                    break
                self.proxy._count("bytes_from_client", len(data))
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
        self.cw.close()

    # ---- helpers

    def _bucket(self, direction: str, params: dict | None) -> TokenBucket | None:
        if params is None or params["direction"] not in (direction, "both"):
            return None
        key = (direction, params["rate"], params["burst"])
        b = self.buckets.get(key)
        if b is None:
            b = self.buckets[key] = TokenBucket(params["rate"], params["burst"])
        return b

    async def _ensure_upstream(self) -> None:
        if self.uw is not None and not self.uw.transport.is_closing() and not self.ur.at_eof():
            return
        self.close_upstream()
        p = self.proxy
        self.ur, self.uw = await asyncio.open_connection(
            p.upstream_host,
            p.upstream_port,
            limit=STREAM_LIMIT,
            ssl=p.upstream_ssl,
            server_hostname=p.upstream_host if p.upstream_ssl else None,
        )
        self.uw.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        sock = self.uw.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        p._count("upstream_connects")

    # ---- the request loop

    async def run(self) -> None:
        sock = self.cw.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while not self.dropped:
            try:
                raw = await _read_head(self.cr)
            except asyncio.LimitOverrunError:
                await self._send_simple(431, "Request Header Fields Too Large")
                return
            if raw is None:
                return
            self.proxy._count("bytes_from_client", len(raw))
            try:
                req = _Request(raw, self.proxy.virtual_hosted)
            except ProtocolError as e:
                log.debug("connection %d: %s", self.id, e)
                await self._send_simple(400, "Bad Request")
                return
            d = self.proxy._decide(req, self.id)
            t0 = time.monotonic()
            outcome = "aborted"
            try:
                if "error" in d.faults:
                    keep = await self._serve_error(req, d)
                else:
                    keep = await self._forward(req, d)
                outcome = "keep-alive" if keep else "closed"
            finally:
                if log.isEnabledFor(logging.DEBUG):
                    log.debug(
                        "conn %d request %d %s %s: %s in %.3fs, faults %s",
                        self.id, d.seq, req.method, req.kind, outcome,
                        time.monotonic() - t0, sorted(d.names.values()),
                    )
            if not keep or self.dropped:
                return

    async def _send_simple(self, status: int, reason: str) -> None:
        body = f"{status} {reason}\n".encode()
        self.cw.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        )
        await self._lingering_close()

    # ---- synthesized S3 errors

    async def _serve_error(self, req: _Request, d: Decision) -> bool:
        e = d.faults["error"]
        mode = e["body"]
        if mode == "auto":
            mode = "close" if (req.expect_continue and req.has_body) else "drain"
        close = mode == "close" or req.close
        if mode == "drain" and req.has_body:
            if req.expect_continue:
                self.proxy._count("bytes_to_client", len(_CONTINUE))
                self.cw.write(_CONTINUE)
                await self.cw.drain()
            sink = _Sink(self.proxy, None, "bytes_from_client")
            sink.discard = True
            await _copy_body(self.cr, req, sink, "bytes_from_client", self.proxy)
        if "delay" in d.faults:
            await asyncio.sleep(d.faults["delay"]["delay"])
        rid = f"FAULTPROXY{d.seq:010d}"
        path = req.target.partition("?")[0]
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{_xml_escape(e['code'])}</Code>"
            f"<Message>{_xml_escape(e['message'])}</Message>"
            f"<Resource>{_xml_escape(urllib.parse.unquote(path))}</Resource>"
            f"<RequestId>{rid}</RequestId></Error>"
        ).encode()
        head = (
            f"HTTP/1.1 {e['status']} {e['reason']}\r\n"
            "Content-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"x-amz-request-id: {rid}\r\n"
            + (f"Retry-After: {e['retry_after']}\r\n" if e.get("retry_after") is not None else "")
            + f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime())}\r\n"
            "Server: faultproxy\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
        ).encode()
        out = head if req.method == "HEAD" else head + body
        self.proxy._count("bytes_to_client", len(out))
        self.cw.write(out)
        await self.cw.drain()
        if close:
            await self._lingering_close()
            return False
        return True

    # ---- forwarding

    async def _forward(self, req: _Request, d: Decision) -> bool:
        p = self.proxy
        rr = d.get("reset_request")
        if rr is not None and not req.has_body:
            _rst(self.cw)  # nothing to wait for: reset before forwarding anything
            raise _Abort()
        try:
            await self._ensure_upstream()
        except OSError as e:
            p._count("upstream_errors")
            log.warning("upstream %s:%s unreachable: %r", p.upstream_host, p.upstream_port, e)
            await self._send_simple(502, "Bad Gateway")
            return False
        p._count("bytes_to_upstream", len(req.raw))
        self.uw.write(req.raw)

        pump_sink = None
        pump = None
        if req.has_body:
            cut = None
            if rr is not None:
                cut = rr["after"]
                if req.content_length is not None:
                    cut = min(cut, req.content_length - 1)
            pump_sink = _Sink(
                p, self.uw, "bytes_to_upstream",
                bucket=self._bucket("request", d.get("bandwidth")),
                piece=(d.get("bandwidth") or {}).get("burst", READ_SIZE),
                cut=cut, cut_before_end=True,
            )
            pump_sink.tolerant = True
            corrupt = d.get("corrupt")
            if corrupt is not None:
                at = corrupt["after"] or 0
                pump_sink.flip = min(at, req.content_length - 1) if req.content_length else at
            pump = asyncio.create_task(self._pump(req, pump_sink))
        else:
            await self.uw.drain()

        head_task = asyncio.create_task(self._final_response_head(req))
        try:
            if pump is not None:
                await asyncio.wait({pump, head_task}, return_when=asyncio.FIRST_COMPLETED)
                if pump.done() and pump.exception() is not None:
                    raise pump.exception()
            resp = await head_task
        except BaseException:
            await _reap(head_task, pump)
            raise
        if pump is not None and not pump.done():
            # The upstream answered before taking the whole body: stop forwarding
            # it; the rest is read and dropped so the client side may stay in sync.
            pump_sink.discard = True
            p._count("early_responses")

        try:
            await self._relay_response(req, resp, d)
        except BaseException:
            await _reap(pump)
            raise

        upstream_ok = not (resp.close or resp.until_close)
        client_ok = not (req.close or resp.close or resp.until_close)
        if pump is not None and pump_sink.discard:
            self.close_upstream()  # also frees a pump blocked on upstream backpressure
        if pump is not None:
            if not pump.done() and client_ok:
                await asyncio.wait({pump}, timeout=p.linger)
            if not pump.done() or pump.exception() is not None:
                client_ok = False
                await _reap(pump)
            if pump_sink.discard:
                upstream_ok = False
        if not upstream_ok:
            self.close_upstream()
        if not client_ok:
            await self._lingering_close()
        return client_ok

    async def _pump(self, req: _Request, sink: _Sink) -> None:
        """Client request body -> upstream (concurrently with reading the response)."""
        try:
            await _copy_body(self.cr, req, sink, "bytes_from_client", self.proxy)
        except _Cut:
            _rst(self.cw)  # reset_request fired
            self.close_upstream()
            raise _Abort() from None

    async def _final_response_head(self, req: _Request) -> _Response:
        """Read response heads, relaying interim 1xx (100 Continue) to the client."""
        p = self.proxy
        ur = self.ur
        while True:
            raw = await _read_head(ur)
            if raw is None:
                if self.ur is not ur:  # we closed it ourselves (a fault fired)
                    raise _Abort()
                p._count("upstream_errors")
                log.debug("conn %d: upstream closed before a response", self.id)
                raise ConnectionResetError("upstream closed before a response")
            p._count("bytes_from_upstream", len(raw))
            resp = _Response(raw, req.method)
            if 100 <= resp.status < 200 and resp.status != 101:
                p._count("bytes_to_client", len(raw))
                p._count("interim_relayed")
                self.cw.write(raw)
                await self.cw.drain()
                continue
            return resp

    async def _relay_response(self, req: _Request, resp: _Response, d: Decision) -> None:
        p = self.proxy
        delay = d.get("delay")
        if delay is not None and delay["delay"] > 0:
            await asyncio.sleep(delay["delay"])
        reset = d.get("reset_response")
        trunc = d.get("truncate")
        bodyless = resp.content_length == 0
        cut = None
        if reset is not None:
            cut = reset["after"]
        elif trunc is not None:
            cut = trunc["after"]
            if cut is None:
                cut = (resp.content_length // 2) if resp.content_length else READ_SIZE
        if cut is not None and resp.content_length is not None:
            cut = min(cut, max(0, resp.content_length - 1))
        if cut is not None and bodyless:
            # Nothing to cut short: drop the connection before the status line.
            self.close_upstream()
            if reset is not None:
                _rst(self.cw)
            else:
                self.cw.close()
            raise _Abort()

        p._count("bytes_to_client", len(resp.raw))
        self.cw.write(resp.raw)
        bw = d.get("bandwidth")
        sink = _Sink(
            p, self.cw, "bytes_to_client",
            bucket=self._bucket("response", bw),
            piece=(bw or {}).get("burst", READ_SIZE),
            cut=cut, cut_before_end=True,
        )
        try:
            if cut == 0:
                raise _Cut()
            await _copy_body(self.ur, resp, sink, "bytes_from_upstream", p)
        except _Cut:
            self.close_upstream()
            await self.cw.drain()
            if reset is not None:
                await _wait_unsent(self.cw)
                _rst(self.cw)
            else:
                self.cw.close()  # FIN after the bytes already written
            raise _Abort() from None
        await self.cw.drain()
