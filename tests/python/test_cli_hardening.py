"""The command-line tool against hostile input and misbehaving servers
(issue 11, findings 8, 9 and the CLI's share of 12): strict size parsing,
signals that end every command promptly, listings that cannot loop, escaped
server text, and endpoint credentials never echoed.

Misbehaving servers are FakeS3: Python's HTTP server on 127.0.0.1 (an
ephemeral port, its own thread), started and stopped by each test. It does
not check signatures; the CLI reaches it through AWS_ENDPOINT_URL with dummy
keys."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


# ---- helpers ---------------------------------------------------------------------

def run(cli, *args, env=None, input=None, timeout=60):
    return subprocess.run([cli, *args], input=input, capture_output=True, env=env, timeout=timeout)


class FakeS3:
    """A stand-in S3 server. respond(method, path, query, headers) returns
    (status, headers, body), or None to hang until the server stops. Every
    request is recorded in .requests as (method, path, query)."""

    def __init__(self, respond):
        self.respond = respond
        self.requests = []
        self.stopping = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
                fake.requests.append((self.command, url.path, query))
                answer = fake.respond(self.command, url.path, query, self.headers)
                if answer is None:
                    fake.stopping.wait(60)
                    self.close_connection = True
                    return
                status, headers, body = answer
                if self.command in ("PUT", "POST") and not fake.stopping.is_set():
                    n = int(self.headers.get("Content-Length") or 0)
                    if n:
                        self.rfile.read(n)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if self.command != "HEAD":
                        if callable(body):
                            body(self.wfile)
                        else:
                            self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ENDPOINT_URL=self.url, AWS_ACCESS_KEY_ID="AKIDFAKE", AWS_SECRET_ACCESS_KEY="fake-secret",
                   AWS_REGION="us-east-1", AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_CONFIG_FILE="/dev/null")
        env.update(extra)
        return env

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def list_page(keys=(), prefixes=(), truncated=False, token=None, date=b"2024-01-01T00:00:00.000Z",
              decl=b'<?xml version="1.0" encoding="UTF-8"?>'):
    """A ListObjectsV2 page; keys and prefixes are XML text (bytes) as sent."""
    out = [decl, b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name>',
           b"<IsTruncated>", b"true" if truncated else b"false", b"</IsTruncated>"]
    if token is not None:
        out += [b"<NextContinuationToken>", token.encode(), b"</NextContinuationToken>"]
    for k in keys:
        out += [b"<Contents><Key>", k, b"</Key><LastModified>", date,
                b"</LastModified><ETag>&quot;x&quot;</ETag><Size>1</Size></Contents>"]
    for p in prefixes:
        out += [b"<CommonPrefixes><Prefix>", p, b"</Prefix></CommonPrefixes>"]
    out.append(b"</ListBucketResult>")
    return 200, {"Content-Type": "application/xml"}, b"".join(out)


def s3_error(status, code, message):
    body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>' + code + b"</Code><Message>" + message +
            b"</Message><RequestId>req1</RequestId></Error>")
    return status, {"Content-Type": "application/xml"}, body


# ---- finding 8: sizes ------------------------------------------------------------

BAD_SIZES = ["1e300", "inf", "nan", "0.5", "-1", "1.5MiB", "99999999999999999999", "8XiB", "", "8MB", "1E3",
             "+5MiB", " 8MiB", "8 MiB", "0x10", "NaN", "-0", "9223372036854775808", "8388608TiB"]


@pytest.mark.parametrize("flag", ["--part-size", "--memory-limit", "--size-hint", "--multipart-threshold"])
@pytest.mark.parametrize("value", BAD_SIZES)
def test_bad_size_exits_2_naming_flag_and_value(cli, tmp_path, flag, value):
    src = tmp_path / "f"
    src.write_bytes(b"x")
    # An endpoint nobody listens on: a value that got through would fail with 1, not 2.
    env = dict(os.environ, AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_ACCESS_KEY_ID="a", AWS_SECRET_ACCESS_KEY="b")
    p = run(cli, "cp", flag, value, str(src), "s3://bucket/k", env=env)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert flag in err and f"'{value}'" in err, err
    assert "is not a valid size" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flag", ["--concurrency", "--max-attempts", "--slow-part-timeout"])
@pytest.mark.parametrize("value", ["16k", "1e3", "-1", "2.5", "", "inf", "99999999999999999999"])
def test_bad_count_exits_2(cli, flag, value):
    p = run(cli, "cp", flag, value, "/dev/null", "s3://bucket/k")
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert flag in err and f"'{value}'" in err, err


@pytest.mark.parametrize("args,needle", [
    (("--part-size", "1KiB"), "--part-size 1KiB is out of range [5MiB, 5GiB]"),
    (("--part-size", "6GiB"), "--part-size 6GiB is out of range [5MiB, 5GiB]"),
    (("--concurrency", "0"), "--concurrency 0 is out of range [1, 1024]"),
    (("--size-hint", "6TiB"), "--size-hint 6TiB is out of range [0, 5TiB]"),
])
def test_out_of_range_uses_library_bounds(cli, args, needle):
    p = run(cli, "cp", *args, "/dev/null", "s3://bucket/k")
    assert p.returncode == 2 and needle in p.stderr.decode(), p.stderr


def _parts(etag):
    m = re.search(r"-(\d+)\"?$", etag)
    return int(m.group(1)) if m else 1


@pytest.mark.parametrize("args,parts", [
    (("--part-size", "8MiB", "--multipart-threshold", "8MiB"), 2),
    (("--part-size", "8388608", "--multipart-threshold", "8388608"), 2),
    (("--part-size", "5120K", "--multipart-threshold", "5mib"), 2),
    (("--part-size", "5MiB", "--memory-limit", "1GiB", "--multipart-threshold", "5MiB"), 2),
    (("--multipart-threshold", "1GiB"), 1),
])
def test_good_sizes_mean_what_they_say(cli, boto, bucket, tmp_path, args, parts):
    src = tmp_path / "src"
    data = os.urandom(9 * 1024 * 1024 + 3)
    src.write_bytes(data)
    p = run(cli, "cp", *args, str(src), f"s3://{bucket}/k")
    assert p.returncode == 0, p.stderr
    assert f" {parts} part{'s' if parts > 1 else ''}," in p.stdout.decode()
    assert boto.get_object(Bucket=bucket, Key="k")["Body"].read() == data
    etag = boto.head_object(Bucket=bucket, Key="k")["ETag"]
    assert _parts(etag) == parts and (parts == 1) == ("-" not in etag), etag


def test_memory_limit_zero_is_no_limit_and_documented(cli):
    out = run(cli, "--help").stdout.decode()
    assert "0: no limit" in out
    for word in ("KiB, MiB, GiB, TiB", "KB, MB, GB, TB", "130 SIGINT", "143 SIGTERM", "\\xHH", "\\r"):
        assert word in out, word


# ---- finding 8: signals ------------------------------------------------------------

def endless_pages(delay):
    """Every page one key and a new token, after delay seconds."""
    count = [0]

    def respond(method, path, query, headers):
        count[0] += 1
        time.sleep(delay)
        n = count[0]
        return list_page([f"key{n:06d}".encode()], truncated=True, token=f"token-{n}")
    return respond


def test_timeout_sigint_stops_endless_ls(cli):
    with FakeS3(endless_pages(0.2)) as fake:
        t0 = time.monotonic()
        # --preserve-status: without it timeout(1) reports 124 whatever the command did.
        p = subprocess.run(["timeout", "--preserve-status", "-s", "INT", "3", cli, "ls", "s3://bucket"],
                           capture_output=True, env=fake.env(), timeout=30)
        elapsed = time.monotonic() - t0
        n = len(fake.requests)
    assert p.returncode == 130, p.stderr
    assert elapsed < 5, elapsed
    assert b"interrupted by SIGINT" in p.stderr
    # whole pages were printed before the signal, and the requests stopped with it
    lines = p.stdout.decode().splitlines()
    assert 3 <= len(lines) <= n and all(line.endswith(f"key{i + 1:06d}") for i, line in enumerate(lines))
    assert n <= 3 / 0.2 + 2


def test_sigterm_stops_endless_ls(cli):
    with FakeS3(endless_pages(0.1)) as fake:
        proc = subprocess.Popen([cli, "ls", "s3://bucket"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=fake.env())
        time.sleep(1.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - sent
    assert proc.returncode == 143, err
    assert elapsed < 2, elapsed
    assert b"interrupted by SIGTERM" in err
    assert len(out.splitlines()) >= 5


def hang(method, path, query, headers):
    return None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("what", ["ls", "rm", "mb", "rb", "upload-file",
                                  "upload-stdin", "upload-fifo",
                                  "download-file", "download-stdout"])
def test_signal_stops_every_command_promptly(cli, tmp_path, what, sig):
    """Against a server that never answers (or, for a FIFO nobody writes to,
    before any request): the command ends within a second or two of the
    signal with 128+N, and a download leaves no file behind."""
    src = tmp_path / "src"
    src.write_bytes(b"small")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = {
        "ls": ["ls", "s3://bucket"],
        "rm": ["rm", "s3://bucket/k"],
        "mb": ["mb", "s3://bucket"],
        "rb": ["rb", "s3://bucket"],
        "upload-file": ["cp", str(src), "s3://bucket/k"],
        "upload-stdin": ["cp", "-", "s3://bucket/k"],
        "upload-fifo": ["cp", str(fifo), "s3://bucket/k"],
        "download-file": ["cp", "s3://bucket/k", str(out_dir / "dst")],
        "download-stdout": ["cp", "s3://bucket/k", "-"],
    }[what]
    with FakeS3(hang) as fake:
        # stdin: a pipe that stays open and empty
        proc = subprocess.Popen([cli, "--no-progress", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=fake.env())
        deadline = time.monotonic() + 5
        while not fake.requests and time.monotonic() < deadline and what not in ("upload-fifo", "upload-stdin"):
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read()
        sent = time.monotonic()
        proc.send_signal(sig)
        try:
            rc = proc.wait(timeout=10)
        finally:
            proc.kill()
        elapsed = time.monotonic() - sent
        err = proc.stderr.read().decode()
        proc.stdin.close()
    assert rc == 128 + sig, err
    assert elapsed < 2, elapsed
    assert signal.Signals(sig).name in err, err
    assert list(out_dir.iterdir()) == []


def test_signal_while_waiting_for_stdin_aborts_the_upload(cli, s3env, client, bucket):
    """The upload has sent its first part and waits for more input on a pipe
    that stays open: SIGINT ends the wait, the multipart upload is aborted
    and nothing is left in the bucket."""
    env = dict(os.environ, AWS_ENDPOINT_URL=s3env["endpoint_url"])
    proc = subprocess.Popen([cli, "--no-progress", "--part-size", "5MiB", "--multipart-threshold", "5MiB",
                             "--concurrency", "2", "cp", "-", f"s3://{bucket}/stdin"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdin.write(os.urandom(6 << 20))
    proc.stdin.flush()
    deadline = time.monotonic() + 20
    while not client.list_multipart_uploads(bucket) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.list_multipart_uploads(bucket), "the upload did not start"
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        rc = proc.wait(timeout=20)
    finally:
        proc.kill()
    elapsed = time.monotonic() - sent
    err = proc.stderr.read()
    proc.stdin.close()
    assert rc == 130, err
    assert elapsed < 5, elapsed
    assert b"SIGINT: upload cancelled" in err, err
    assert client.list_multipart_uploads(bucket) == []
    assert client.list_objects(bucket) == []


def _hang_after_create(method, path, query, headers):
    """Answers HeadBucket and CreateMultipartUpload; every other request (the
    parts, and the AbortMultipartUpload of the cleanup) hangs."""
    if method == "HEAD":
        return 200, {}, b""
    if method == "POST" and "uploads" in query:
        body = (b'<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult>'
                b"<Bucket>bucket</Bucket><Key>k</Key><UploadId>up1</UploadId></InitiateMultipartUploadResult>")
        return 200, {"Content-Type": "application/xml"}, body
    return None


def test_second_signal_exits_at_once(cli, tmp_path):
    """The first signal asks the transfer to clean up (abort its multipart
    upload); a second one does not wait for that (here the abort waits on a
    server that never answers)."""
    src = tmp_path / "src"
    src.write_bytes(b"x" * (12 << 20))
    with FakeS3(_hang_after_create) as fake:
        proc = subprocess.Popen([cli, "--no-progress", "--part-size", "5MiB", "cp", str(src), "s3://bucket/k"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=fake.env())
        deadline = time.monotonic() + 5
        while not any(m == "PUT" for m, _, _ in fake.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 5
        while not any(m == "DELETE" for m, _, _ in fake.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(m == "DELETE" for m, _, _ in fake.requests), fake.requests
        assert proc.poll() is None
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)
        finally:
            proc.kill()
        elapsed = time.monotonic() - sent
        err = proc.stderr.read()
        proc.stdin.close()
    assert rc == 128 + signal.SIGTERM, err
    assert elapsed < 2
    assert b"SIGTERM: a second signal: exiting without waiting" in err, err


def big_object(size):
    """HEAD and ranged GETs of an object of size zero bytes."""
    def respond(method, path, query, headers):
        common = {"ETag": '"0123456789abcdef0123456789abcdef"', "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT",
                  "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        rng = headers.get("Range")
        if method == "GET" and rng:
            a, b = rng.split("=")[1].split("-")
            a = int(a)
            b = min(int(b) if b else size - 1, size - 1)
            n = b - a + 1
            return 206, dict(common, **{"Content-Range": f"bytes {a}-{b}/{size}", "Content-Length": str(n)}), \
                lambda w: w.write(bytes(n))
        return 200, dict(common, **{"Content-Length": str(size)}), (lambda w: w.write(bytes(size)))
    return respond


def test_signal_stops_download_blocked_on_stdout(cli):
    """stdout is a pipe nobody reads: the tool is stuck writing, not on the
    network, and the signal still ends it."""
    with FakeS3(big_object(64 << 20)) as fake:
        proc = subprocess.Popen([cli, "--no-progress", "--part-size", "8MiB", "cp", "s3://bucket/big", "-"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=fake.env())
        deadline = time.monotonic() + 10
        while not any(m == "GET" for m, _, _ in fake.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        assert proc.poll() is None
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)  # stdout still unread: the pipe stays full
        finally:
            proc.kill()
        elapsed = time.monotonic() - sent
        err = proc.stderr.read()
        proc.stdout.close()
    assert rc == 143, err
    assert elapsed < 2, elapsed
    assert b"SIGTERM: download cancelled" in err


# ---- finding 8: continuation tokens ----------------------------------------------------

def test_repeated_continuation_token_is_an_error(cli):
    def respond(method, path, query, headers):
        return list_page([b"k" + str(len(fake.requests)).encode()], truncated=True, token="again")
    with FakeS3(respond) as fake:
        p = run(cli, "ls", "s3://bucket", env=fake.env(), timeout=30)
        n = len(fake.requests)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert "continuation token 'again' again" in err and "page 2" in err, err
    assert len(err.strip().splitlines()) == 1
    assert n == 2


def test_continuation_token_cycle_is_an_error(cli):
    nxt = {None: "A", "A": "B", "B": "C", "C": "A"}

    def respond(method, path, query, headers):
        return list_page([b"k"], truncated=True, token=nxt[query.get("continuation-token")])
    with FakeS3(respond) as fake:
        p = run(cli, "ls", "s3://bucket", env=fake.env(), timeout=30)
        n = len(fake.requests)
    assert p.returncode == 1 and b"continuation token 'A' again (page 4)" in p.stderr, p.stderr
    assert n == 4
    assert [q.get("continuation-token") for _, _, q in fake.requests] == [None, "A", "B", "C"]


def test_truncated_page_without_token_is_an_error(cli):
    with FakeS3(lambda *a: list_page([b"k"], truncated=True)) as fake:
        p = run(cli, "ls", "s3://bucket", env=fake.env(), timeout=30)
        n = len(fake.requests)
    # the library or the CLI refuses it; either way the listing is not cut short silently
    assert p.returncode == 1 and re.search(rb"(?i)continuation ?token", p.stderr), p.stderr
    assert b"truncated" in p.stderr.lower() and n == 1


def test_hostile_token_is_shown_escaped_and_short(cli):
    token = "\u009b2J" + "x" * 5000

    def respond(method, path, query, headers):
        return list_page([b"k"], truncated=True, token=token)
    with FakeS3(respond) as fake:
        p = run(cli, "ls", "s3://bucket", env=fake.env(), timeout=30)
    assert p.returncode == 1
    assert b"'\\xc2\\x9b2Jxxx" in p.stderr and b"\xc2\x9b" not in p.stderr
    assert len(p.stderr) < 400


# ---- finding 9: escaping ---------------------------------------------------------

def test_hostile_keys_from_real_server_list_escaped(cli, boto, bucket):
    keys = {
        "cr\rforged": b"cr\\rforged",
        "nl\nline": b"nl\\nline",
        "tab\tx": b"tab\\tx",
        "del\x7fx": b"del\\x7fx",
        "c1\u009b2Jx": b"c1\\xc2\\x9b2Jx",
        "bidi\u202etxt": b"bidi\\xe2\\x80\\xaetxt",
        "caf\u00e9 \u65e5\u672c": "caf\u00e9 \u65e5\u672c".encode(),  # printable UTF-8 stays as it is
    }
    esc_key = "esc\x1b[2Jclear"
    for k in [*keys, esc_key]:
        boto.put_object(Bucket=bucket, Key=k, Body=b"1")
    p = run(cli, "ls", f"s3://{bucket}")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split(b"\n")
    assert lines[-1] == b""
    lines = lines[:-1]
    assert len(lines) == len(keys) + 1, lines  # one line per key
    for shown in keys.values():
        assert sum(line.endswith(b" " + shown) for line in lines) == 1, (shown, lines)
    # SeaweedFS lists ESC as U+FFFD; no raw control byte reaches the output either way.
    assert any(b"esc" in line and line.endswith(b"[2Jclear") for line in lines)
    assert not re.search(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80\xae", p.stdout), p.stdout


def test_hostile_keys_through_fake_listing(cli):
    """What a server can put in a well-formed list: CR, LF and TAB as
    character references, C1 and DEL and bidi overrides as UTF-8. (ESC, NUL
    and bytes that are not UTF-8 cannot be in XML 1.0: the parser refuses the
    page, tested below.)"""
    page = list_page(
        keys=[b"a&#13;2024-01-01T00:00:00.000Z            1 forged", b"b&#10;line", b"c\xc2\x9b2J", b"d\x7f",
              b"e\xe2\x80\xaetxt", b"back\\slash"],
        prefixes=[b"p&#13;/"], date=b"2024&#13;")
    with FakeS3(lambda *a: page) as fake:
        p = run(cli, "ls", "s3://bucket", env=fake.env())
    assert p.returncode == 0, p.stderr
    lines = p.stdout.decode("utf-8").split("\n")[:-1]
    assert len(lines) == 7, lines
    assert lines[0].endswith(" PRE p\\r/")
    assert lines[1].startswith("2024\\r ") and lines[1].endswith(" a\\r2024-01-01T00:00:00.000Z            1 forged")
    assert lines[2].endswith(" b\\nline")
    assert lines[3].endswith(" c\\xc2\\x9b2J")
    assert lines[4].endswith(" d\\x7f")
    assert lines[5].endswith(" e\\xe2\\x80\\xaetxt")
    assert lines[6].endswith(" back\\\\slash")


@pytest.mark.parametrize("body", [b"esc\x1b[2J", b"esc&#x1b;[2J", b"bad\xffutf8"])
def test_list_with_bytes_xml_cannot_carry_is_refused(cli, body):
    with FakeS3(lambda *a: list_page([body])) as fake:
        p = run(cli, "ls", "s3://bucket", env=fake.env())
    assert p.returncode == 1
    assert p.stdout == b""
    assert b"\x1b" not in p.stderr and b"\xff" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_server_error_message_escaped(cli):
    msg = b"denied&#13;s3xfer: all good&#10;second line \xc2\x9b2J see http://admin:hunter2@internal.example/x"
    with FakeS3(lambda *a: s3_error(403, b"AccessDenied", msg)) as fake:
        p = run(cli, "ls", "s3://bucket", env=fake.env())
    assert p.returncode == 1
    err = p.stderr.decode()
    assert len(err.strip().splitlines()) == 1 and "\r" not in err, err
    assert "AccessDenied: denied\\rs3xfer: all good\\nsecond line \\xc2\\x9b2J" in err, err
    # a URL's userinfo in any message is hidden
    assert "hunter2" not in err and "http://***@internal.example/x" in err


def test_key_with_escape_and_invalid_utf8_in_messages(cli):
    """ESC and bytes that are not UTF-8 reach messages through keys given on
    the command line (a script passing names it listed elsewhere)."""
    key = b"esc\x1b[2J\xff\r"
    with FakeS3(lambda *a: s3_error(404, b"NoSuchKey", b"The specified key does not exist.")) as fake:
        for args in ([b"rm", b"s3://bucket/" + key], [b"cp", b"s3://bucket/" + key, b"-"]):
            p = subprocess.run([os.fsencode(cli), *args], capture_output=True, env=fake.env(), timeout=60)
            assert p.returncode == 1
            assert b"s3://bucket/esc\\x1b[2J\\xff\\r" in p.stderr, p.stderr
            assert not re.search(rb"[\x00-\x09\x0b-\x1f\x7f-\xff]", p.stderr), p.stderr
            assert p.stderr.count(b"\n") == 1

    with FakeS3(lambda *a: (204, {}, b"")) as fake:
        p = subprocess.run([os.fsencode(cli), b"rm", b"s3://bucket/" + key], capture_output=True, env=fake.env(),
                           timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"delete: s3://bucket/esc\\x1b[2J\\xff\\r\n"


def test_summary_line_escapes_names(cli, bucket, tmp_path):
    src = tmp_path / "f\x1b[1m"
    src.write_bytes(b"data")
    p = run(cli, "cp", str(src), f"s3://{bucket}/k\u009bx")
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert out.startswith("upload: ") and "f\\x1b[1m to s3://" in out and "/k\\xc2\\x9bx (" in out, out


# ---- finding 12: credentials in the endpoint URL ------------------------------------

@pytest.mark.parametrize("how", ["flag", "env", "env_s3"])
@pytest.mark.parametrize("command", ["ls", "cp"])
def test_endpoint_credentials_never_echoed(cli, tmp_path, how, command):
    src = tmp_path / "f"
    src.write_bytes(b"x")
    with FakeS3(lambda *a: list_page()) as fake:
        url = fake.url.replace("http://", "http://admin:hunter2secret@")
        env, pre = fake.env(), []
        if how == "flag":
            pre = ["--endpoint-url", url]
        elif how == "env":
            env["AWS_ENDPOINT_URL"] = url
        else:
            env["AWS_ENDPOINT_URL_S3"] = url
        args = ["ls", "s3://bucket"] if command == "ls" else ["cp", str(src), "s3://bucket/k"]
        p = run(cli, *pre, *args, env=env)
    err = p.stderr.decode()
    assert p.returncode != 0
    assert "hunter2secret" not in err and "admin" not in err, err
    assert "hunter2secret" not in p.stdout.decode()
