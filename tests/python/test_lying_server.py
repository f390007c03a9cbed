"""Downloads from a server that lies about lengths (issue 11, findings 3 and 5).

The real server cannot misbehave, so this test runs its own: a small HTTP
server on 127.0.0.1 (an ephemeral port, in a thread, stopped afterwards)
that serves one object and answers GETs with scripted lies: a short first
range, the wrong range with the right length, a total that changes between
ranges, a Content-Length larger than the range, a total of 2^63-1, a 200
that ignores Range, a body that ends early without a Content-Length. It
does not check signatures. For every lie, every destination (file, file
object, memory buffer and the CLI's standard output) must fail with an
error that names the problem; a file download leaves neither the file nor a
temporary file behind; a memory download does not report success. An
honest mode of the same server succeeds byte for byte, so the failures come
from the lies and not from the server.

The re-download permission tests at the end run against the real server.
"""

from __future__ import annotations

import base64
import http.server
import io
import os
import re
import stat
import subprocess
import threading
import zlib

import pytest

import s3xfer
from s3xfer import TransferConfig

MiB = 1 << 20
P = 5 * MiB
N = 12 * MiB + 7            # three ranges of 5 MiB: 0-5242879, 5242880-10485759, 10485760-12582918
DATA = bytes((i * 131 + (i >> 13)) & 0xFF for i in range(N))
BUCKET, KEY = "lies", "obj"
ETAG = '"0123456789abcdef0123456789abcdef"'
CRC32 = base64.b64encode(zlib.crc32(DATA).to_bytes(4, "big")).decode()
CFG = TransferConfig(part_size=P, concurrency=3, max_attempts=2)


class LyingHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Liar/1.0"

    def log_message(self, fmt, *args):  # keep pytest output clean
        pass

    def _range(self):
        h = self.headers.get("Range")
        if not h:
            return None
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", h)
        assert m, h
        return int(m.group(1)), int(m.group(2)) if m.group(2) else N - 1

    def _send(self, status, body, content_range=None, content_length=None, close=False, etag=ETAG,
              extra=()):
        self.send_response(status)
        self.send_header("ETag", etag)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        if content_range is not None:
            self.send_header("Content-Range", content_range)
        if content_length is not None:
            self.send_header("Content-Length", str(content_length))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
            self.wfile.flush()

    def do_HEAD(self):
        # What a download of several ranges asks for the full-object
        # checksum (ranged answers carry none).
        mode = self.server.mode
        with self.server.lock:
            self.server.heads.append(self.headers.get("x-amz-checksum-mode"))
        extra = [self.server.head_checksum] if mode in ("checksum", "corrupt", "head_size", "head_etag",
                                                        "break_once") else []
        self._send(200, b"", content_length=N + 1 if mode == "head_size" else N,
                   etag='"other"' if mode == "head_etag" else ETAG, extra=extra)

    def do_GET(self):
        srv = self.server
        if self.path.split("?")[0] != f"/{BUCKET}/{KEY}":
            body = b"<Error><Code>NoSuchKey</Code><Message>no</Message></Error>"
            return self._send(404, body, content_length=len(body))
        rng = self._range()
        with srv.lock:
            srv.gets.append(rng)
        mode = srv.mode
        if rng is None:
            return self._send(200, DATA, content_length=N)
        a, b = rng
        b = min(b, N - 1)
        if mode == "ignore_range":
            return self._send(200, DATA, content_length=N)
        if mode == "short_first" and a == 0:
            b = 3 * MiB - 1
        if mode == "wrong_offset" and a > 0:
            a, b = a - P, b - P
        total = N
        if mode == "total_changes" and a > 0:
            total = N + P
        if mode == "huge_total":
            total = (1 << 63) - 1
        body = DATA[a:b + 1]
        if mode == "corrupt" and a > 0:
            # Right headers, one wrong byte: only a checksum can tell.
            body = bytes([body[0] ^ 1]) + body[1:]
        cl = len(body)
        if mode == "long_content_length" and a == 0:
            body = DATA[a:b + 1 + 100]
            cl = len(body)
        if mode == "short_no_length" and a > 0:
            # No Content-Length: the body ends when the connection closes,
            # here 1000 bytes early.
            return self._send(206, body[:-1000], content_range=f"bytes {a}-{b}/{total}", close=True)
        if mode == "break_once" and a > 0 and a not in srv.broken:
            # Honest headers, then the connection drops 1 MiB + 7 bytes in:
            # the range is asked again (and answered honestly).
            with srv.lock:
                srv.broken.add(a)
            self.send_response(206)
            self.send_header("ETag", ETAG)
            self.send_header("Content-Range", f"bytes {a}-{b}/{total}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:MiB + 7])
            self.wfile.flush()
            self.close_connection = True
            return
        return self._send(206, body, content_range=f"bytes {a}-{b}/{total}", content_length=cl)


class LyingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # The client hangs up on a lie as soon as it sees it: expected.
        pass


@pytest.fixture
def liar():
    srv = LyingServer(("127.0.0.1", 0), LyingHandler)
    srv.mode = "honest"
    srv.gets = []
    srv.heads = []
    srv.head_checksum = ("x-amz-checksum-crc32", CRC32)
    srv.broken = set()
    srv.lock = threading.Lock()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(10)


@pytest.fixture
def liar_client(liar):
    c = s3xfer.Client(endpoint_url=f"http://127.0.0.1:{liar.server_address[1]}", region="us-east-1",
                      access_key="AKIDLIAR", secret_key="liar-secret", addressing_style="path")
    yield c
    c.close()


def test_honest_server_every_destination(liar, liar_client, tmp_path, cli):
    """The same server telling the truth: every destination gets every byte."""
    out = tmp_path / "out"
    r = liar_client.download_file(BUCKET, KEY, out, config=CFG)
    assert r.bytes == N and out.read_bytes() == DATA
    bio = io.BytesIO()
    liar_client.download_fileobj(BUCKET, KEY, bio, config=CFG)
    assert bio.getvalue() == DATA
    buf = bytearray(N + 10)
    r = liar_client.download_into(BUCKET, KEY, buf, config=CFG)
    assert r.bytes == N and bytes(buf[:N]) == DATA
    p = run_cli(cli, liar)
    assert p.returncode == 0, p.stderr
    assert p.stdout == DATA
    # four downloads, each the probe and two later ranges
    assert sorted(liar.gets) == sorted([(0, P - 1), (P, 2 * P - 1), (2 * P, N - 1)] * 4)


# mode -> (exception class, what the message must say)
LIES = {
    "short_first": (s3xfer.NetworkError, r"asked for bytes 0-5242879 of the 12582919-byte object, "
                                         r"the server sent bytes 0-3145727"),
    "wrong_offset": (s3xfer.NetworkError, r"asked for bytes (5242880-10485759|10485760-12582918) .*"
                                          r"the server sent bytes (0-5242879|5242880-7340038)"),
    "total_changes": (s3xfer.SourceChangedError, r"size changed during the download: first 12582919 bytes, "
                                                 r"now 17825799"),
    "long_content_length": (s3xfer.NetworkError, r"Content-Length 5242980 disagrees with Content-Range "
                                                 r"\"bytes 0-5242879/12582919\""),
    "huge_total": (s3xfer.LimitExceededError, r"object is 9223372036854775807 bytes, more than the "
                                              r"5497558138880 bytes \(5 TiB\) S3 allows"),
    "ignore_range": (s3xfer.NetworkError, r"ignored the Range header \(HTTP 200 with the whole 12582919-byte "
                                          r"object to a request for bytes 0-5242879\)"),
    "short_no_length": (s3xfer.NetworkError, r"body ended after \d+ of the \d+ bytes of bytes \d+-\d+"),
}


def run_cli(cli, liar, dst="-"):
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{liar.server_address[1]}",
               AWS_ACCESS_KEY_ID="AKIDLIAR", AWS_SECRET_ACCESS_KEY="liar-secret", AWS_REGION="us-east-1")
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        env.pop(k, None)
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    return subprocess.run([cli, "cp", "--part-size", "5MiB", "--concurrency", "3", "--max-attempts", "2",
                           f"s3://{BUCKET}/{KEY}", dst], capture_output=True, env=env, timeout=120)


@pytest.mark.parametrize("mode", sorted(LIES))
def test_lie_fails_every_destination(mode, liar, liar_client, tmp_path, cli):
    liar.mode = mode
    cls, pattern = LIES[mode]

    # A file: an error naming the problem, nothing left in the directory.
    out = tmp_path / "out"
    with pytest.raises(cls, match=pattern) as ei:
        liar_client.download_file(BUCKET, KEY, out, config=CFG)
    assert f"s3://{BUCKET}/{KEY}" in str(ei.value)
    assert list(tmp_path.iterdir()) == []

    # A file that exists already is left as it was.
    out.write_bytes(b"precious")
    with pytest.raises(cls, match=pattern):
        liar_client.download_file(BUCKET, KEY, out, config=CFG)
    assert out.read_bytes() == b"precious"
    assert list(tmp_path.iterdir()) == [out]

    # A file object (in-order stream) and a memory buffer: errors, not success.
    with pytest.raises(cls, match=pattern):
        liar_client.download_fileobj(BUCKET, KEY, io.BytesIO(), config=CFG)
    with pytest.raises(cls, match=pattern):
        liar_client.download_into(BUCKET, KEY, bytearray(N + 10), config=CFG)

    # The CLI to standard output: what was written cannot be taken back, but
    # the exit status says failure and standard error says why.
    p = run_cli(cli, liar)
    assert p.returncode != 0
    assert re.search(pattern, p.stderr.decode()), p.stderr
    assert len(p.stdout) < N


def test_protocol_lies_are_not_retried(liar, liar_client):
    """A wrong answer is not a broken connection: asking again would get the
    same answer, so the download stops at the first one."""
    liar.mode = "short_first"
    with pytest.raises(s3xfer.NetworkError) as ei:
        liar_client.download_fileobj(BUCKET, KEY, io.BytesIO(), config=TransferConfig(part_size=P, max_attempts=5))
    assert liar.gets == [(0, P - 1)]
    # the object's name is put in front of what was wrong, once
    assert ei.value.message.startswith(f"GetObject s3://{BUCKET}/{KEY}: "), ei.value.message
    assert ei.value.message.count("GetObject") == 1 and ei.value.sys_errno == 0, ei.value.message


def test_short_body_is_retried_as_a_broken_connection(liar, liar_client):
    liar.mode = "short_no_length"
    with pytest.raises(s3xfer.NetworkError, match=r"gave up after 3 attempts"):
        liar_client.download_fileobj(BUCKET, KEY, io.BytesIO(),
                                     config=TransferConfig(part_size=P, concurrency=1, max_attempts=3))
    # the probe once, then one later range three times
    assert liar.gets[0] == (0, P - 1) and liar.gets[1:] == [(P, 2 * P - 1)] * 3


def test_full_object_checksum_of_several_ranges(liar, liar_client, tmp_path, cli):
    """A ranged GET carries no checksum, so a download of several ranges asks
    a HEAD for the full-object checksum: into memory or a stream the bytes
    are hashed in order; into a file each range is hashed on its own as it
    reaches the writer and the ranges' CRCs are combined before the rename.
    A range with the right headers and one flipped byte is caught in every
    destination, and a file download then leaves nothing behind."""
    liar.mode = "checksum"
    bio = io.BytesIO()
    liar_client.download_fileobj(BUCKET, KEY, bio, config=CFG)
    assert bio.getvalue() == DATA
    buf = bytearray(N)
    liar_client.download_into(BUCKET, KEY, buf, config=CFG)
    assert bytes(buf) == DATA
    out = tmp_path / "out"
    liar_client.download_file(BUCKET, KEY, out, config=CFG)
    assert out.read_bytes() == DATA
    assert liar.heads == ["ENABLED"] * 3
    p = run_cli(cli, liar, dst=str(tmp_path / "cli"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "cli").read_bytes() == DATA
    os.remove(tmp_path / "cli")

    liar.mode = "corrupt"
    mismatch = f"x-amz-checksum-crc32 is {re.escape(CRC32)} but the bytes received give "
    with pytest.raises(s3xfer.ChecksumMismatch, match=mismatch):
        liar_client.download_fileobj(BUCKET, KEY, io.BytesIO(), config=CFG)
    with pytest.raises(s3xfer.ChecksumMismatch):
        liar_client.download_into(BUCKET, KEY, bytearray(N), config=CFG)
    with pytest.raises(s3xfer.ChecksumMismatch, match=mismatch):
        liar_client.download_file(BUCKET, KEY, out, config=CFG)
    assert out.read_bytes() == DATA  # the file from before is left as it was
    assert [q.name for q in tmp_path.iterdir()] == ["out"]
    p = run_cli(cli, liar, dst=str(tmp_path / "cli"))
    assert p.returncode != 0 and re.search(mismatch, p.stderr.decode()), p.stderr
    assert [q.name for q in tmp_path.iterdir()] == ["out"]
    # without validation nothing is asked and nothing is checked
    liar.heads.clear()
    off = TransferConfig(part_size=P, concurrency=3, validate_checksum=False)
    liar_client.download_fileobj(BUCKET, KEY, io.BytesIO(), config=off)
    liar_client.download_file(BUCKET, KEY, tmp_path / "unchecked", config=off)
    assert liar.heads == []


@pytest.mark.parametrize("concurrency", [1, 3, 8])
def test_file_checksum_whatever_the_order(liar, liar_client, tmp_path, concurrency):
    """The ranges' CRCs combine into the object's whatever order the ranges
    land in and however many run at once, at two part sizes (three ranges
    of 5 MiB, two of 7 MiB; the last one shorter)."""
    liar.mode = "checksum"
    for part in (P, 7 * MiB):
        out = tmp_path / f"out-{part}"
        r = liar_client.download_file(BUCKET, KEY, out, config=TransferConfig(part_size=part,
                                                                               concurrency=concurrency))
        assert out.read_bytes() == DATA and r.parts == -(-N // part)
    liar.mode = "corrupt"
    with pytest.raises(s3xfer.ChecksumMismatch):
        liar_client.download_file(BUCKET, KEY, tmp_path / "bad", config=TransferConfig(part_size=7 * MiB,
                                                                                        concurrency=concurrency))
    assert not (tmp_path / "bad").exists() and len(list(tmp_path.iterdir())) == 2


def test_file_checksum_by_algorithm(liar, liar_client, tmp_path):
    """The HEAD names the algorithm: a CRC32C is checked the same way (here a
    wrong one, so the check must fail), a SHA-256 cannot be made from the
    ranges' hashes and is not checked into a file (no false alarm), and a
    composite checksum of a multipart upload ("-N") is not checked."""
    liar.mode = "checksum"
    liar.head_checksum = ("x-amz-checksum-crc32c", CRC32)
    with pytest.raises(s3xfer.ChecksumMismatch, match=f"x-amz-checksum-crc32c is {re.escape(CRC32)} but"):
        liar_client.download_file(BUCKET, KEY, tmp_path / "c", config=CFG)
    assert list(tmp_path.iterdir()) == []
    liar.head_checksum = ("x-amz-checksum-sha256", base64.b64encode(bytes(32)).decode())
    liar_client.download_file(BUCKET, KEY, tmp_path / "s", config=CFG)
    assert (tmp_path / "s").read_bytes() == DATA
    liar.head_checksum = ("x-amz-checksum-crc32", "AAAAAA==-3")
    liar_client.download_file(BUCKET, KEY, tmp_path / "n", config=CFG)
    assert (tmp_path / "n").read_bytes() == DATA


def test_file_checksum_after_a_broken_range(liar, liar_client, tmp_path):
    """Every later range breaks 1 MiB in (past the writer's first 256 KiB
    buffers, which reach the disk and the hook) and is asked again: the
    range's hash starts again with its second attempt, so the object's CRC
    checks out (a hook that kept the broken attempt's CRC fails here)."""
    liar.mode = "break_once"
    out = tmp_path / "out"
    r = liar_client.download_file(BUCKET, KEY, out, config=CFG)
    assert out.read_bytes() == DATA and r.retries == 2
    assert sorted(liar.gets) == sorted([(0, P - 1)] + [(P, 2 * P - 1), (2 * P, N - 1)] * 2)
    assert liar.heads == ["ENABLED"]


def test_file_checksum_in_a_batch(liar, liar_client, tmp_path):
    """A batch's file downloads share its writer threads: each file's ranges
    are hashed into that file's own CRCs. Six downloads at once of the same
    object check out; with one range corrupted every one of them fails with
    the mismatch and leaves no file, and the manager goes on."""
    liar.mode = "checksum"
    cfg = TransferConfig(part_size=P, concurrency=8)
    with liar_client.transfer_manager(cfg) as tm:
        futs = [tm.download(BUCKET, KEY, str(tmp_path / f"good{i}")) for i in range(6)]
    assert [f.result().bytes for f in futs] == [N] * 6
    assert all((tmp_path / f"good{i}").read_bytes() == DATA for i in range(6))
    liar.mode = "corrupt"
    with liar_client.transfer_manager(cfg) as tm:
        futs = [tm.download(BUCKET, KEY, str(tmp_path / f"bad{i}")) for i in range(6)]
    for f in futs:
        assert isinstance(f.exception(), s3xfer.ChecksumMismatch), f.exception()
    assert sorted(q.name for q in tmp_path.iterdir()) == [f"good{i}" for i in range(6)]


@pytest.mark.parametrize("mode,pattern", [
    ("head_size", r"size changed during the download: first 12582919 bytes, now 12582920 \(HEAD\)"),
    ("head_etag", r"ETag was \"0123456789abcdef0123456789abcdef\", now \"other\" \(HEAD\)"),
])
def test_head_that_disagrees_with_the_ranges(mode, pattern, liar, liar_client):
    liar.mode = mode
    with pytest.raises(s3xfer.SourceChangedError, match=pattern):
        liar_client.download_fileobj(BUCKET, KEY, io.BytesIO(), config=CFG)


def test_full_object_checksum_real_server(client, boto, bucket, tmp_path):
    """Against the real server: a single PUT with a CRC32 checksum (and one
    with CRC32C, s3xfer's default) read back in several ranges into a
    stream, into memory and into a file is checked without a false alarm,
    and a multipart object (composite checksum) downloads as before."""
    data = os.urandom(12 * MiB + 3)
    boto.put_object(Bucket=bucket, Key="crc", Body=data, ChecksumAlgorithm="CRC32")
    head = boto.head_object(Bucket=bucket, Key="crc", ChecksumMode="ENABLED")
    assert head.get("ChecksumCRC32"), head  # the server does keep it
    cfg = TransferConfig(part_size=P, concurrency=3)
    bio = io.BytesIO()
    r = client.download_fileobj(bucket, "crc", bio, config=cfg)
    assert bio.getvalue() == data and r.parts == 3
    buf = bytearray(len(data))
    client.download_into(bucket, "crc", buf, config=cfg)
    assert bytes(buf) == data
    r = client.download_file(bucket, "crc", tmp_path / "crc", config=cfg)
    assert (tmp_path / "crc").read_bytes() == data and r.parts == 3
    client.upload_bytes(data, bucket, "crc32c", config=TransferConfig(multipart_threshold=64 * MiB))
    head = boto.head_object(Bucket=bucket, Key="crc32c", ChecksumMode="ENABLED")
    assert head.get("ChecksumCRC32C"), head
    r = client.download_file(bucket, "crc32c", tmp_path / "crc32c", config=cfg)
    assert (tmp_path / "crc32c").read_bytes() == data and r.parts == 3
    client.upload_bytes(data, bucket, "multi", config=TransferConfig(part_size=P, multipart_threshold=P))
    bio = io.BytesIO()
    client.download_fileobj(bucket, "multi", bio, config=cfg)
    assert bio.getvalue() == data
    client.download_file(bucket, "multi", tmp_path / "multi", config=cfg)
    assert (tmp_path / "multi").read_bytes() == data


# ---- a re-downloaded file keeps its permission bits (issue 11, finding 12) ----

def test_redownload_keeps_existing_mode(client, boto, bucket, tmp_path):
    data = os.urandom(3 * MiB)
    boto.put_object(Bucket=bucket, Key="secret", Body=data)
    out = tmp_path / "secret"
    out.write_bytes(b"old private contents")
    os.chmod(out, 0o600)
    client.download_file(bucket, "secret", out)
    assert out.read_bytes() == data
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    os.chmod(out, 0o640)
    client.download_file(bucket, "secret", out, config=TransferConfig(part_size=P, concurrency=2))
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["secret"]


def test_new_file_gets_the_umask_default(client, boto, bucket, tmp_path):
    boto.put_object(Bucket=bucket, Key="k", Body=b"hello")
    old = os.umask(0o027)
    try:
        client.download_file(bucket, "k", tmp_path / "a")
        os.umask(0o022)
        client.download_file(bucket, "k", tmp_path / "b")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o644
    assert (tmp_path / "a").read_bytes() == b"hello"


def test_ranged_get_object_checks_the_range(liar, liar_client):
    """The single operation get_object(range=...) holds the server to the
    range it asked for, as the download manager does."""
    body, info = liar_client.get_object(BUCKET, KEY, range=(P, 2 * P - 1))
    assert body == DATA[P:2 * P]
    body, info = liar_client.get_object(BUCKET, KEY, range=(2 * P, None))
    assert body == DATA[2 * P:]
    for mode, words in (("ignore_range", "ignored the Range"), ("wrong_offset", "server sent bytes")):
        liar.mode = mode
        with pytest.raises(s3xfer.S3xferError) as ei:
            liar_client.get_object(BUCKET, KEY, range=(P, 2 * P - 1))
        assert words in str(ei.value), str(ei.value)
