"""Issue 11, findings 1, 2, 10 and 12: names that would redirect a signed
request (bucket, region, endpoint) are refused before any request, through
every path (single operations, the managers, the CLI); errors name the host
really contacted and never a password in the endpoint; oversize response
bodies are refused.

The "trap" is a TCP listener on 127.0.0.1 that counts connections: a hostile
name that got into a URL would make the client connect to it."""

from __future__ import annotations

import http.server
import io
import os
import socket
import subprocess
import threading

import pytest

import s3xfer


class Trap:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self._stop = True
        self._t.join()
        self.sock.close()


@pytest.fixture
def trap():
    t = Trap()
    yield t
    t.close()


def dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def hostile_buckets(port):
    return [f"127.0.0.1:{port}#", f"127.0.0.1:{port}/", f"127.0.0.1:{port}?", f"x@127.0.0.1:{port}",
            f"127.0.0.1:{port}"]


def manager_calls(c, bucket, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"x" * 1000)
    return {
        "upload_file": lambda: c.upload_file(str(src), bucket, "k"),
        "upload_bytes": lambda: c.upload_bytes(b"abc", bucket, "k"),
        "upload_fileobj": lambda: c.upload_fileobj(io.BytesIO(b"abc"), bucket, "k"),
        "download_file": lambda: c.download_file(bucket, "k", str(tmp_path / "dst")),
        "download_fileobj": lambda: c.download_fileobj(bucket, "k", io.BytesIO()),
        "download_into": lambda: c.download_into(bucket, "k", bytearray(10)),
        "put_object": lambda: c.put_object(bucket, "k", b"abc"),
        "get_object": lambda: c.get_object(bucket, "k"),
        "head_object": lambda: c.head_object(bucket, "k"),
        "list_objects": lambda: list(c.list_objects(bucket)),
        "create_multipart_upload": lambda: c.create_multipart_upload(bucket, "k"),
    }


@pytest.mark.parametrize("style", ["virtual", "auto", "path"])
def test_hostile_bucket_never_reaches_a_host(trap, tmp_path, style):
    endpoint = f"http://localhost:{dead_port()}"
    with s3xfer.Client(endpoint_url=endpoint, region="us-east-1", access_key="AK", secret_key="SK",
                       addressing_style=style) as c:
        for bucket in hostile_buckets(trap.port):
            for name, call in manager_calls(c, bucket, tmp_path).items():
                with pytest.raises(s3xfer.InvalidConfigError) as ei:
                    call()
                assert "bucket name" in str(ei.value), (name, bucket, str(ei.value))
    assert trap.connections == 0
    assert not (tmp_path / "dst").exists()


def test_cli_refuses_hostile_bucket(cli, trap, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"x" * 1000)
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://localhost:{dead_port()}", AWS_ACCESS_KEY_ID="AK",
               AWS_SECRET_ACCESS_KEY="SK")
    for bucket in hostile_buckets(trap.port):
        for args in (["cp", str(src), f"s3://{bucket}/k"], ["cp", f"s3://{bucket}/k", str(tmp_path / "d")],
                     ["ls", f"s3://{bucket}"]):
            p = subprocess.run([cli, *args], capture_output=True, env=env, timeout=60)
            assert p.returncode != 0, (args, p.stdout, p.stderr)
            # Either the CLI's own URL parsing or the library refuses it.
            assert b"bucket" in p.stderr.lower(), (args, p.stderr)
    assert trap.connections == 0


def test_hostile_region_never_reaches_a_host(trap, tmp_path, monkeypatch):
    region = f"127.0.0.1:{trap.port}#"
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(var, raising=False)
    # explicit
    with pytest.raises(s3xfer.InvalidConfigError) as ei:
        with s3xfer.Client(region=region, access_key="AK", secret_key="SK") as c:
            c.upload_bytes(b"abc", "good-bucket", "k")
    assert "region" in str(ei.value)
    # from the environment, for both variables
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv("AWS_REGION", raising=False)
        monkeypatch.setenv(var, region)
        with pytest.raises(s3xfer.InvalidConfigError) as ei:
            with s3xfer.Client(access_key="AK", secret_key="SK") as c:
                c.get_object("good-bucket", "k")
        assert var in str(ei.value)
    # from the profile's config file
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    cfg = tmp_path / "config"
    cfg.write_text(f"[default]\nregion = {region}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(cfg))
    with pytest.raises(s3xfer.InvalidConfigError) as ei:
        with s3xfer.Client(access_key="AK", secret_key="SK") as c:
            c.upload_bytes(b"abc", "good-bucket", "k")
    assert "config" in str(ei.value)
    assert trap.connections == 0


def test_cli_refuses_hostile_region(cli, trap, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update(AWS_REGION=f"localhost:{trap.port}#", AWS_ACCESS_KEY_ID="AK", AWS_SECRET_ACCESS_KEY="SK")
    p = subprocess.run([cli, "ls", "s3://good-bucket"], capture_output=True, env=env, timeout=60)
    assert p.returncode != 0
    assert b"region" in p.stderr
    assert trap.connections == 0


def test_endpoint_password_not_echoed(cli):
    with pytest.raises(s3xfer.InvalidConfigError) as ei:
        s3xfer.Client(endpoint_url="http://user:hunter2@127.0.0.1:9", access_key="AK", secret_key="SK").head_bucket("abc")
    assert "hunter2" not in str(ei.value)
    env = dict(os.environ, AWS_ENDPOINT_URL="http://user:hunter2@127.0.0.1:9", AWS_ACCESS_KEY_ID="AK",
               AWS_SECRET_ACCESS_KEY="SK")
    p = subprocess.run([cli, "ls", "s3://abc"], capture_output=True, env=env, timeout=60)
    assert p.returncode != 0
    assert b"hunter2" not in p.stderr and b"hunter2" not in p.stdout


def test_error_names_the_host_contacted():
    port = dead_port()
    with s3xfer.Client(endpoint_url=f"http://localhost:{port}", access_key="AK", secret_key="SK",
                       addressing_style="virtual") as c:
        with pytest.raises(s3xfer.ConnectionError) as ei:
            c.get_object("good-bucket", "k")
    assert f"good-bucket.localhost:{port}" in str(ei.value)


class _LyingHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body_len = 0

    def log_message(self, *a):
        pass

    def do_GET(self):
        n = self.server.announce
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.send_header("Content-Type", "application/xml")
        self.end_headers()
        sent = 0
        chunk = b"<" * 65536
        try:
            while sent < min(n, self.server.really_send):
                self.wfile.write(chunk[: min(len(chunk), n - sent)])
                sent += len(chunk)
        except OSError:
            pass
        self.server.sent = sent


@pytest.fixture
def lying_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LyingHandler)
    srv.announce = 0
    srv.really_send = 0
    srv.sent = 0
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_get_object_refuses_oversize_before_reading_it(lying_server):
    lying_server.announce = 2 << 30  # 2 GiB announced
    lying_server.really_send = 64 << 20
    url = f"http://127.0.0.1:{lying_server.server_address[1]}"
    with s3xfer.Client(endpoint_url=url, access_key="AK", secret_key="SK") as c:
        with pytest.raises(s3xfer.LimitExceededError) as ei:
            c.get_object("abc", "k")
    assert "download_file" in str(ei.value)
    # refused at the first body bytes, not after holding up to the limit
    assert lying_server.sent < 64 << 20


def test_list_document_over_cap_refused(lying_server):
    lying_server.announce = 9 << 20  # 9 MiB: larger than any S3 list page
    lying_server.really_send = 9 << 20
    url = f"http://127.0.0.1:{lying_server.server_address[1]}"
    with s3xfer.Client(endpoint_url=url, access_key="AK", secret_key="SK") as c:
        with pytest.raises(s3xfer.S3xferError) as ei:
            list(c.list_objects("abc"))
    assert "larger than" in str(ei.value)
