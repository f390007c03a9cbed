"""Issue 11, the Python side: what a misbehaving callback, server or key can
do through the bindings and `python -m s3xfer`.

- Finding 4: stream callbacks that keep the buffer they were given (the view,
  a slice, an export) keep valid, unchanged bytes; run again under an ASan
  build of the module, where the old trampolines read freed pool memory.
- Finding 7: invalid UTF-8 from a server becomes U+FFFD in text (messages,
  request ids, ETags) and surrogate escapes in names (keys, version ids),
  never UnicodeDecodeError; names round-trip; a NUL in a name is refused.
- Finding 8: a repeated continuation token ends a listing with an error, in
  the API and in `python -m s3xfer ls`; signals end `ls` at once.
- Finding 9: `python -m s3xfer` prints keys and server text escaped.
- Finding 10: get_object refuses a body over its in-memory cap.

Misbehaving servers are FakeS3 instances: stdlib HTTP on 127.0.0.1, an
ephemeral port, a thread each, stopped at the end of the test."""

from __future__ import annotations

import ctypes
import http.server
import io
import os
import pathlib
import pickle
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

import pytest

import s3xfer
from s3xfer import TransferConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
MiB = 1 << 20


# ---------------------------------------------------------------- fake server

@dataclass
class Reply:
    status: int = 200
    headers: Sequence[Tuple[str, bytes]] = ()
    body: bytes = b""
    length: Optional[int] = None   # Content-Length to announce instead of len(body)
    delay: float = 0.0
    hang: bool = False             # never answer (until the server stops)


@dataclass
class Seen:
    method: str
    path: str          # as sent, percent-encoding included
    query: dict = field(default_factory=dict)


class FakeS3:
    """A server that answers every request with handler(Seen) -> Reply. Header
    values are bytes and go out as they are (any byte but CR/LF)."""

    def __init__(self, handler: Callable[[Seen], Reply]):
        self.requests: List[Seen] = []
        self._stop = threading.Event()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                path, _, q = self.path.partition("?")
                seen = Seen(self.command, path, dict(urllib.parse.parse_qsl(q, keep_blank_values=True)))
                outer.requests.append(seen)
                r = handler(seen)
                if r.hang:
                    outer._stop.wait(60)
                    self.close_connection = True
                    return
                if r.delay:
                    outer._stop.wait(r.delay)
                head = [f"HTTP/1.1 {r.status} Whatever".encode()]
                head += [k.encode() + b": " + v for k, v in r.headers]
                head.append(b"Content-Length: %d" % (len(r.body) if r.length is None else r.length))
                self.wfile.write(b"\r\n".join(head) + b"\r\n\r\n")
                if self.command != "HEAD":
                    self.wfile.write(r.body)
                if r.length is not None and r.length != len(r.body):
                    self.close_connection = True

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self._srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self._srv.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}"
        self._t = threading.Thread(target=self._srv.serve_forever, daemon=True)
        self._t.start()

    def close(self) -> None:
        self._stop.set()
        self._srv.shutdown()
        self._srv.server_close()
        self._t.join()

    def client(self) -> s3xfer.Client:
        return s3xfer.Client(endpoint_url=self.url, region="us-east-1", access_key="AK", secret_key="SK",
                             addressing_style="path")

    def env(self) -> dict:
        env = dict(os.environ, AWS_ENDPOINT_URL=self.url, AWS_ACCESS_KEY_ID="AK", AWS_SECRET_ACCESS_KEY="SK",
                   AWS_REGION="us-east-1")
        env.pop("AWS_SESSION_TOKEN", None)
        env.pop("AWS_PROFILE", None)
        return env


@pytest.fixture
def fake():
    servers: List[FakeS3] = []

    def start(handler):
        s = FakeS3(handler)
        servers.append(s)
        return s
    yield start
    for s in servers:
        s.close()


def listing(keys: Sequence[bytes] = (), prefixes: Sequence[bytes] = (), token: Optional[str] = None,
            truncated: Optional[bool] = None) -> Reply:
    """A ListObjectsV2 page; keys and prefixes are XML text as given."""
    if truncated is None:
        truncated = token is not None
    x = [b'<?xml version="1.0" encoding="UTF-8"?>',
         b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name>',
         b"<KeyCount>%d</KeyCount><MaxKeys>1000</MaxKeys>" % len(keys),
         b"<IsTruncated>" + (b"true" if truncated else b"false") + b"</IsTruncated>"]
    if token is not None:
        x.append(b"<NextContinuationToken>" + token.encode() + b"</NextContinuationToken>")
    for k in keys:
        x.append(b"<Contents><Key>" + k + b"</Key><LastModified>2024-05-01T10:00:00.000Z</LastModified>"
                 b'<ETag>"0cc175b9c0f1b6a831c399e269772661"</ETag><Size>1</Size>'
                 b"<StorageClass>STANDARD</StorageClass></Contents>")
    for p in prefixes:
        x.append(b"<CommonPrefixes><Prefix>" + p + b"</Prefix></CommonPrefixes>")
    x.append(b"</ListBucketResult>")
    return Reply(200, [("Content-Type", b"application/xml")], b"".join(x))


def error_xml(code: bytes, message: bytes, encoding: bytes = b"UTF-8") -> bytes:
    return (b'<?xml version="1.0" encoding="' + encoding + b'"?><Error><Code>' + code + b"</Code><Message>" +
            message + b"</Message><RequestId>xml-rid</RequestId></Error>")


def bounded(srv_requests: list, reply: Reply, limit: int = 20) -> Reply:
    """reply, until the client has sent `limit` requests; then a last page, so
    that a client that would loop forever fails its test instead of hanging."""
    return reply if len(srv_requests) < limit else listing([b"last"])


def python_m_s3xfer(*args: str, env: dict, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "s3xfer", *args], capture_output=True, env=env, timeout=timeout,
                          **kw)


# ------------------------------------------------- finding 4: kept buffers

def _upload_keeping_everything(c: s3xfer.Client, bucket: str, key: str, data: bytes, pool: str) -> None:
    """readinto keeps the view, a slice of it and a ctypes array exported from
    it (which makes the view's release() fail); after the upload every one of
    them must still hold exactly the bytes it was given."""
    kept = []

    class Reader:
        pos = 0

        def readinto(self, mv):
            n = min(len(mv), len(data) - self.pos)
            mv[:n] = data[self.pos:self.pos + n]
            if n:
                kept.append((self.pos, n, mv, mv[3:19], (ctypes.c_char * len(mv)).from_buffer(mv)))
            self.pos += n
            return n

    cfg = TransferConfig(part_size=5 * MiB, concurrency=2, pool=pool)
    r = c.upload_fileobj(Reader(), bucket, key, config=cfg)
    assert r.bytes == len(data) and r.parts == 3
    assert len(kept) >= 3
    for pos, n, mv, sl, arr in kept:
        assert bytes(sl) == data[pos + 3:pos + 19]
        assert bytes(arr)[:n] == data[pos:pos + n]
        assert bytes(mv[:n]) == data[pos:pos + n]
        arr[0] = b"\0"  # writable, and only ours: writing touches nothing of the engine's
        assert mv[0] == 0


def _download_keeping_everything(c: s3xfer.Client, bucket: str, key: str, data: bytes, pool: str) -> None:
    """write keeps the view, a slice and a PickleBuffer export of it."""
    kept = []
    out = bytearray()

    class Writer:
        def write(self, mv):
            kept.append((len(out), mv, mv[5:21], pickle.PickleBuffer(mv)))
            out.extend(mv)
            return len(mv)

    cfg = TransferConfig(part_size=5 * MiB, concurrency=2, pool=pool)
    r = c.download_fileobj(bucket, key, Writer(), config=cfg)
    assert r.bytes == len(data) and bytes(out) == data
    assert len(kept) >= 3
    for pos, mv, sl, pb in kept:
        assert bytes(sl) == data[pos + 5:pos + 21]
        assert bytes(pb.raw()) == data[pos:pos + len(sl) and pos + len(pb.raw())]
        assert mv.readonly
        assert bytes(mv) == data[pos:pos + len(mv)]


def _resize_under_us(c: s3xfer.Client, bucket: str) -> None:
    """readinto releases its view and shrinks the bytearray behind it
    (mv.obj): the binding holds its own export for the call, so the resize
    fails in the callback and nothing reads past the shrunken storage."""
    class Shrinker:
        def readinto(self, mv):
            owner = mv.obj
            mv[:4] = b"abcd"
            mv.release()
            owner.clear()
            return 4

    with pytest.raises(BufferError):
        c.upload_fileobj(Shrinker(), bucket, "shrunk")
    assert c.list_multipart_uploads(bucket) == []


def _keeping_scenario(bucket: str, direction: str) -> None:
    """One direction, with the bounded pool and with malloc'ed part buffers
    (freed as soon as a part is done, so a stale view lands in freed memory)."""
    data = os.urandom(11 * MiB + 12345)
    with s3xfer.Client() as c:
        for pool in ("bounded", "malloc"):
            key = f"kept-{direction}-{pool}"
            if direction == "resize":
                _resize_under_us(c, bucket)
            elif direction == "upload":
                _upload_keeping_everything(c, bucket, key, data, pool)
            else:
                c.upload_bytes(data, bucket, key)
                _download_keeping_everything(c, bucket, key, data, pool)


@pytest.mark.parametrize("pool", ["bounded", "malloc"])
def test_readinto_that_keeps_its_buffer_keeps_valid_data(client, boto, bucket, pool):
    data = os.urandom(11 * MiB + 12345)
    _upload_keeping_everything(client, bucket, "k", data, pool)
    assert boto.get_object(Bucket=bucket, Key="k")["Body"].read() == data


@pytest.mark.parametrize("pool", ["bounded", "malloc"])
def test_write_that_keeps_its_buffer_keeps_valid_data(client, boto, bucket, pool):
    data = os.urandom(11 * MiB + 12345)
    boto.put_object(Bucket=bucket, Key="k", Body=data)
    _download_keeping_everything(client, bucket, "k", data, pool)


@pytest.fixture(scope="session")
def asan_module() -> dict:
    """The environment that runs Python with the ASan/UBSan build of the
    module: given by S3X_ASAN_PYTHONPATH and S3X_ASAN_PRELOAD (see
    scripts/build-asan-module --env), else built here. Never skipped."""
    pp, pre = os.environ.get("S3X_ASAN_PYTHONPATH"), os.environ.get("S3X_ASAN_PRELOAD")
    if not (pp and pre):
        build = pathlib.Path(os.environ.get("S3X_BUILD_DIR", ROOT / "build")) / "asan-python"
        p = subprocess.run([str(ROOT / "scripts" / "build-asan-module"), "--env", str(build)], capture_output=True,
                           text=True, timeout=1800)
        assert p.returncode == 0, f"building the ASan module failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
        found = dict(line[len("export "):].split("=", 1) for line in p.stdout.splitlines()
                     if line.startswith("export "))
        pp, pre = found["S3X_ASAN_PYTHONPATH"], found["S3X_ASAN_PRELOAD"]
    assert list(pathlib.Path(pp, "s3xfer").glob("__core*.so")), f"no ASan module in {pp}"
    assert os.path.exists(pre), pre
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pp, str(ROOT / "tests" / "python")]), LD_PRELOAD=pre,
               ASAN_OPTIONS="detect_leaks=0:exitcode=86", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=86")
    return env


def test_asan_harness_catches_a_use_after_free(asan_module):
    """The check below is only worth something if a read of freed memory in
    this setup (CPython copying from a stale pointer) is reported."""
    code = ("import ctypes; libc = ctypes.CDLL(None); libc.malloc.restype = ctypes.c_void_p; "
            "p = libc.malloc(64); libc.free(ctypes.c_void_p(p)); ctypes.string_at(p, 16)")
    p = subprocess.run([sys.executable, "-c", code], env=asan_module, capture_output=True, text=True, timeout=120)
    assert p.returncode == 86 and "heap-use-after-free" in p.stderr, p.stderr[-3000:]


@pytest.mark.parametrize("direction", ["upload", "download", "resize"])
def test_keeping_buffers_is_memory_safe_under_asan(asan_module, s3env, bucket, direction):
    code = ("import s3xfer, sys, test_py_hardening as t; "
            "assert s3xfer._core.__file__.startswith(sys.argv[3]), s3xfer._core.__file__; "
            "t._keeping_scenario(sys.argv[1], sys.argv[2]); print('scenario passed')")
    pp = asan_module["PYTHONPATH"].split(os.pathsep)[0]
    p = subprocess.run([sys.executable, "-c", code, bucket, direction, pp], env=asan_module, capture_output=True,
                       text=True, timeout=600)
    assert "AddressSanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr[-6000:]
    assert p.returncode == 0 and "scenario passed" in p.stdout, p.stderr[-6000:]


def test_readinto_cannot_resize_the_buffer_under_us(client, bucket):
    _resize_under_us(client, bucket)


def test_readinto_and_write_counts_are_checked(client, boto, bucket):
    class Liar:
        def readinto(self, mv):
            return len(mv) + 1

    with pytest.raises(ValueError, match="readinto"):
        client.upload_fileobj(Liar(), bucket, "liar")
    boto.put_object(Bucket=bucket, Key="k", Body=b"x" * 1000)

    class Boaster:
        def write(self, mv):
            return len(mv) + 5

    with pytest.raises(ValueError, match="write"):
        client.download_fileobj(bucket, "k", Boaster())
    assert client.list_multipart_uploads(bucket) == []
    assert [o["key"] for o in client.list_objects(bucket)] == ["k"]


def test_bytes_filename_is_a_path_not_data(client, boto, bucket, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"the file's content")
    client.upload_file(os.fsencode(src), bucket, "f")
    assert boto.get_object(Bucket=bucket, Key="f")["Body"].read() == b"the file's content"
    client.download_file(bucket, "f", os.fsencode(tmp_path / "dst"))
    assert (tmp_path / "dst").read_bytes() == b"the file's content"


# ------------------------------------------- finding 7: bytes that are not UTF-8

def test_invalid_utf8_in_server_text_is_replaced(fake):
    def handler(req: Seen) -> Reply:
        if req.method == "HEAD" and req.path == "/bkt/denied":
            return Reply(403, [("x-amz-request-id", b"rid-\xff\xfe-\xc3")])
        if req.method == "GET" and req.path == "/bkt/denied":
            return Reply(403, [("x-amz-request-id", b"rid-\xff")],
                         error_xml(b"AccessDenied", b"no \xff\xfe way \xc3"))
        if req.method == "GET" and req.path == "/bkt/latin1":
            return Reply(403, [], error_xml(b"AccessDenied", b"caf\xe9 \x85", encoding=b"ISO-8859-1"))
        if req.method == "PUT":
            return Reply(200, [("ETag", b'"\xff\xfeabc"')])
        if req.method == "HEAD":
            return Reply(200, [("ETag", b'"e\xff"'), ("x-amz-version-id", b"v\xffid"), ("Content-Length", b"0"),
                               ("Content-Type", b"text/\xffplain"), ("Last-Modified", b"Wed, 01 May 2024 \xff")])
        return Reply(404, [], error_xml(b"NoSuchKey", b"nope"))

    srv = fake(handler)
    with srv.client() as c:
        with pytest.raises(s3xfer.AccessDenied) as ei:
            c.head_object("bkt", "denied")
        assert ei.value.request_id == "rid-\ufffd\ufffd-\ufffd"
        with pytest.raises(s3xfer.S3xferError) as ei:
            c.get_object("bkt", "denied")
        assert ei.value.status == 403 and ei.value.request_id == "rid-\ufffd"
        with pytest.raises(s3xfer.ClientError) as ei:
            c.get_object("bkt", "latin1")
        assert "caf\xe9 \x85" in str(ei.value)
        assert c.put_object("bkt", "k", b"x") == '"\ufffd\ufffdabc"'
        info = c.head_object("bkt", "k")
        assert info["etag"] == '"e\ufffd"'
        assert info["content_type"] == "text/\ufffdplain"
        # a name: the bytes survive
        assert info["version_id"].encode("utf-8", "surrogateescape") == b"v\xffid"


def test_names_round_trip_and_nul_is_refused(fake):
    srv = fake(lambda req: Reply(404, [("x-amz-request-id", b"r1")], error_xml(b"NoSuchKey", b"no such key")))
    with srv.client() as c:
        key = b"dir/\xff\xfe-k".decode("utf-8", "surrogateescape")
        with pytest.raises(s3xfer.NoSuchKey) as ei:
            c.get_object("bkt", key)
        # The request carried the key's own bytes; the message names it
        # (decoded with replacement, not UnicodeDecodeError).
        assert srv.requests[-1].path == "/bkt/dir/%FF%FE-k"
        assert "dir/\ufffd\ufffd-k" in str(ei.value)
        n = len(srv.requests)
        for call in (lambda: c.get_object("bkt", "a\0b"), lambda: c.delete_object("bkt", "a\0b"),
                     lambda: c.put_object("bkt", "k", b"x", content_type="text/plain\0x"),
                     lambda: c.list_objects("bkt", prefix="p\0")):
            with pytest.raises(ValueError, match="NUL"):
                call()
        assert len(srv.requests) == n
        with pytest.raises(TypeError, match="must be str"):
            c.get_object("bkt", b"bytes-key")


def test_listing_with_invalid_utf8_is_an_s3xfer_error_or_a_name(fake):
    srv = fake(lambda req: listing([b"ok", b"bad\xffkey"]))
    with srv.client() as c:
        try:
            keys = [o["key"] for o in c.list_objects("bkt")]
        except s3xfer.S3xferError as e:  # the XML parser refuses the document
            assert isinstance(e, s3xfer.MalformedResponseError), repr(e)
        else:
            assert [k.encode("utf-8", "surrogateescape") for k in keys] == [b"ok", b"bad\xffkey"]


# ------------------------------------------- finding 8: repeated continuation tokens

def test_repeated_continuation_token_stops_the_listing(fake):
    srv = fake(lambda req: bounded(srv.requests, listing([f"k{len(srv.requests)}".encode()], token="SAME")))
    with srv.client() as c:
        with pytest.raises(s3xfer.MalformedResponseError, match="continuation token 'SAME' a second time"):
            c.list_objects("bkt")
    assert len(srv.requests) == 2
    assert "continuation-token" not in srv.requests[0].query
    assert srv.requests[1].query["continuation-token"] == "SAME"


def test_a_cycle_of_tokens_stops_the_listing(fake):
    order = ["A", "B"]
    srv = fake(lambda req: bounded(srv.requests, listing([b"k"], token=order[(len(srv.requests) - 1) % 2])))
    with srv.client() as c:
        with pytest.raises(s3xfer.MalformedResponseError, match="'A' a second time"):
            list(c.iter_objects("bkt"))
    assert len(srv.requests) == 3


def test_truncated_page_without_token_is_an_error(fake):
    srv = fake(lambda req: listing([b"k"], truncated=True))
    with srv.client() as c:
        with pytest.raises(s3xfer.MalformedResponseError, match="(?i)continuation ?token"):
            c.list_objects("bkt")
    assert len(srv.requests) == 1


def test_distinct_tokens_are_followed(fake):
    pages = {None: ("t1", [b"a"]), "t1": ("t2", [b"b"]), "t2": (None, [b"c"])}

    def handler(req):
        nxt, keys = pages[req.query.get("continuation-token")]
        return listing(keys, token=nxt)
    srv = fake(handler)
    with srv.client() as c:
        assert [o["key"] for o in c.list_objects("bkt")] == ["a", "b", "c"]


def test_python_m_s3xfer_ls_stops_on_a_repeated_token(fake):
    srv = fake(lambda req: bounded(srv.requests, listing([b"k"], token="T")))
    t = time.monotonic()
    p = python_m_s3xfer("ls", "s3://bkt", env=srv.env())
    assert time.monotonic() - t < 30
    assert p.returncode == 1, p.stderr
    assert b"continuation token 'T' a second time" in p.stderr
    assert len(srv.requests) == 2
    assert p.stdout.count(b" k\n") == 2  # both pages were printed as they came


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("server", ["pages-forever", "never-answers"])
def test_python_m_s3xfer_ls_ends_promptly_on_a_signal(fake, sig, server):
    def handler(req: Seen) -> Reply:
        if server == "never-answers":
            return Reply(hang=True)
        page = listing([f"key{len(srv.requests)}".encode()], token=f"tok{len(srv.requests)}")
        page.delay = 0.05
        return page

    srv = fake(handler)
    proc = subprocess.Popen([sys.executable, "-m", "s3xfer", "ls", "s3://bkt"], env=srv.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while len(srv.requests) < (5 if server == "pages-forever" else 1) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.requests, "the command never reached the server"
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert took < 3, took
    assert f"interrupted by {signal.Signals(sig).name}".encode() in err
    assert b"Traceback" not in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_python_m_s3xfer_cp_from_a_stalled_stdin_cleans_up_on_a_signal(s3env, client, bucket, sig):
    """An upload that has sent parts and then waits on stdin: the signal
    cancels it, its multipart upload is aborted, and the exit is prompt."""
    env = dict(os.environ, AWS_ENDPOINT_URL=s3env["endpoint_url"], AWS_ACCESS_KEY_ID=s3env["access_key"],
               AWS_SECRET_ACCESS_KEY=s3env["secret_key"])
    proc = subprocess.Popen([sys.executable, "-m", "s3xfer", "cp", "--part-size", "5MiB", "-", f"s3://{bucket}/k"],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(os.urandom(12 * MiB))  # two parts' worth, and then nothing
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while not client.list_multipart_uploads(bucket) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.list_multipart_uploads(bucket), "the upload never started"
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert took < 5, took
    assert f"interrupted by {signal.Signals(sig).name}".encode() in err and b"Traceback" not in err
    assert client.list_multipart_uploads(bucket) == []
    assert client.list_objects(bucket) == []


# --------------------------------------------- finding 9: escaped output

# Keys as the XML of a listing carries them (a raw ESC is not valid XML 1.0,
# so only the error path below can bring one) and what ls must print.
ESCAPED_KEYS = [
    (b"a&#13;b", "a\\rb"),
    (b"c\nd", "c\\nd"),
    (b"t\tt", "t\\tt"),
    ("e\u0085f".encode(), "e\\xc2\\x85f"),
    ("\u009b2J".encode(), "\\xc2\\x9b2J"),
    ("\u202eevil.exe".encode(), "\\xe2\\x80\\xaeevil.exe"),
    (b"back\\slash", "back\\\\slash"),
    ("caf\u00e9".encode(), "caf\u00e9"),
    (b"plain", "plain"),
]


def test_python_m_s3xfer_ls_prints_keys_escaped(fake):
    srv = fake(lambda req: listing([k for k, _ in ESCAPED_KEYS], prefixes=[b"p&#13;x/"]))
    p = python_m_s3xfer("ls", "s3://bkt", env=dict(srv.env(), PYTHONIOENCODING="utf-8"))
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode("utf-8")
    lines = out.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(ESCAPED_KEYS) + 1, out
    for (_, shown), line in zip(ESCAPED_KEYS, lines):
        assert line.endswith(" " + shown), (line, shown)
    assert lines[len(ESCAPED_KEYS)].endswith("PRE p\\rx/")
    for raw in ("\r", "\t", "\x1b", "\x85", "\x9b", "\u202e"):
        assert raw not in out


def test_python_m_s3xfer_prints_server_errors_escaped(fake):
    def handler(req: Seen) -> Reply:
        if req.query.get("list-type"):
            return listing([b"a\x1b[2Jb"])  # not XML: the parser's error is what gets printed
        return Reply(403, [("x-amz-request-id", b"r")],
                     error_xml(b"AccessDenied", b"line1&#13;FAKE LINE \x85\x9b[31m", encoding=b"ISO-8859-1"))

    srv = fake(handler)
    env = dict(srv.env(), PYTHONIOENCODING="utf-8")
    p = python_m_s3xfer("rm", "s3://bkt/k\x1b[2J\rX", env=env)
    assert p.returncode == 1
    err = p.stderr.decode("utf-8")
    assert err.count("\n") == 1, err
    assert "s3://bkt/k\\x1b[2J\\rX" in err and "line1\\rFAKE LINE \\xc2\\x85\\xc2\\x9b[31m" in err, err
    p = python_m_s3xfer("ls", "s3://bkt", env=env)
    assert p.returncode == 1 and b"Traceback" not in p.stderr
    assert b"\x1b" not in p.stdout + p.stderr


def test_size_flags_are_parsed_strictly(capsys):
    from s3xfer.__main__ import _size, main
    for bad in ("1e300", "inf", "nan", "0.5", "-1", "1.5MiB", "99999999999999999999", "8XiB", "", "8MB", "+8"):
        with pytest.raises(SystemExit) as ei:
            main(["cp", "--memory-limit", bad, "x", "s3://bkt/k"])
        assert ei.value.code == 2
        err = capsys.readouterr().err
        assert "--memory-limit" in err and "invalid size" in err, (bad, err)
    assert _size("8MiB") == _size("8m") == _size("8388608") == 8 * MiB
    assert _size("1GiB") == 1 << 30 and _size("2T") == 2 << 40 and _size("7B") == 7


# --------------------------------------------- finding 10: get_object's cap

def test_get_object_refuses_a_body_over_its_memory_cap(fake):
    big = 2 << 30

    def handler(req: Seen) -> Reply:
        return Reply(200, [("Content-Type", b"application/octet-stream")], b"x" * 1000, length=big)

    srv = fake(handler)
    with srv.client() as c:
        t = time.monotonic()
        with pytest.raises(s3xfer.LimitExceededError) as ei:
            c.get_object("bkt", "huge")
        assert time.monotonic() - t < 10
    msg = str(ei.value)
    assert str(big) in msg and "download_file" in msg and "download_fileobj" in msg, msg
