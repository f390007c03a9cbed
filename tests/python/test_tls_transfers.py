"""Transfers over TLS, as S3 is used (test_tls.py checks verification with
single requests against the local server's own HTTPS port): a TLS 1.3 front (Python's ssl, a CA and
a server certificate made for the test with openssl) that forwards the bytes
to the local server, which checks the signatures as ever.

Checked: multipart uploads and ranged downloads arrive intact over https with
the certificate verified against the CA given (`verify=CA`, the CLI's
`--ca-bundle`, `AWS_CA_BUNDLE`); a certificate from another CA is refused
and nothing is written; s3xfer offers TLS_AES_128_GCM_SHA256 first (the
front honours the client's order, as nginx does by default)."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import threading
import urllib.parse

import pytest

MiB = 1024 * 1024


def _make_ca(d, name):
    key, ca = d / f"{name}.key", d / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", ca, "-days", "2", "-subj", f"/CN=s3xfer test {name}"],
                   check=True, capture_output=True)
    return key, ca


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    ca_key, ca = _make_ca(d, "ca")
    _, other_ca = _make_ca(d, "other-ca")
    key, csr, crt, ext = d / "server.key", d / "server.csr", d / "server.pem", d / "server.ext"
    ext.write_text("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", csr, "-subj", "/CN=localhost"], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
                    "-days", "2", "-extfile", ext], check=True, capture_output=True)
    return {"ca": str(ca), "other_ca": str(other_ca), "cert": str(crt), "key": str(key)}


class TLSFront:
    """Accepts TLS 1.3 on 127.0.0.1 and pipes each connection to the upstream
    server's plain port; keeps the cipher and version of every handshake."""

    def __init__(self, upstream: str, certs: dict):
        u = urllib.parse.urlsplit(upstream)
        self.up = (u.hostname, u.port or 80)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        self.ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE  # the client's order decides
        self.ctx.load_cert_chain(certs["cert"], certs["key"])
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.handshakes = []
        self.failed_handshakes = 0
        self.lock = threading.Lock()
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, raw):
        try:
            t = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            with self.lock:
                self.failed_handshakes += 1
            raw.close()
            return
        with self.lock:
            self.handshakes.append((t.version(), t.cipher()[0]))
        try:
            u = socket.create_connection(self.up)
        except OSError:
            t.close()
            return

        def pipe(src, dst):
            try:
                while True:
                    b = src.recv(256 * 1024)
                    if not b:
                        break
                    dst.sendall(b)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        th = threading.Thread(target=pipe, args=(u, t), daemon=True)
        th.start()
        pipe(t, u)
        th.join(timeout=30)
        t.close()
        u.close()

    def close(self):
        self.stopping = True
        self.sock.close()


@pytest.fixture(scope="module")
def front(s3env, certs):
    f = TLSFront(s3env["endpoint_url"], certs)
    yield f
    f.close()


def test_round_trip_over_tls(front, certs, s3env, bucket, boto, tmp_path):
    import s3xfer
    src = tmp_path / "src"
    src.write_bytes(os.urandom(24 * MiB + 5))
    cfg = s3xfer.TransferConfig(part_size=8 * MiB, concurrency=4)
    with s3xfer.Client(endpoint_url=front.url, region=s3env["region"], access_key=s3env["access_key"],
                       secret_key=s3env["secret_key"], verify=certs["ca"]) as c:
        c.upload_file(str(src), bucket, "over-tls", config=cfg)
        dst = tmp_path / "dst"
        c.download_file(bucket, "over-tls", str(dst), config=cfg)
    assert dst.read_bytes() == src.read_bytes()
    assert boto.head_object(Bucket=bucket, Key="over-tls")["ContentLength"] == src.stat().st_size
    with front.lock:
        seen = set(front.handshakes)
    assert seen == {("TLSv1.3", "TLS_AES_128_GCM_SHA256")}, seen


def test_cli_ca_bundle_and_env(front, certs, cli, s3env, bucket, boto, tmp_path):
    data = os.urandom(6 * MiB)
    boto.put_object(Bucket=bucket, Key="cli-tls", Body=data)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=s3env["access_key"], AWS_SECRET_ACCESS_KEY=s3env["secret_key"],
               AWS_REGION=s3env["region"])
    env.pop("AWS_CA_BUNDLE", None)
    r = subprocess.run([cli, "--endpoint-url", front.url, "--ca-bundle", certs["ca"], "cp", f"s3://{bucket}/cli-tls",
                        "-"], env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == data
    r = subprocess.run([cli, "--endpoint-url", front.url, "cp", f"s3://{bucket}/cli-tls", "-"],
                       env=dict(env, AWS_CA_BUNDLE=certs["ca"]), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == data


def test_certificate_from_another_ca_is_refused(front, certs, cli, s3env, bucket, boto, tmp_path):
    import s3xfer
    src = tmp_path / "src"
    src.write_bytes(b"x" * 1000)
    before = front.failed_handshakes
    with s3xfer.Client(endpoint_url=front.url, region=s3env["region"], access_key=s3env["access_key"],
                       secret_key=s3env["secret_key"], verify=certs["other_ca"]) as c:
        with pytest.raises(s3xfer.TLSError) as ei:
            c.upload_file(str(src), bucket, "must-not-arrive")
    assert front.url in str(ei.value) and "TLS" in str(ei.value), str(ei.value)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=s3env["access_key"], AWS_SECRET_ACCESS_KEY=s3env["secret_key"],
               AWS_REGION=s3env["region"])
    env.pop("AWS_CA_BUNDLE", None)  # the system's CAs do not know the test CA either
    r = subprocess.run([cli, "--endpoint-url", front.url, "cp", str(src), f"s3://{bucket}/must-not-arrive-cli"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "TLS" in r.stderr, r.stderr
    assert front.failed_handshakes > before
    listed = boto.list_objects_v2(Bucket=bucket, Prefix="must-not-arrive").get("KeyCount", 0)
    assert listed == 0


def test_file_ranges_use_the_receiving_threads_over_tls(front, certs, s3env, bucket, boto, tmp_path):
    """Over https a download to a file has its ranges received on the extra
    threads too (receive_threads > 1): decrypting is the receiving thread's
    cost there. The bytes arrive intact; the result counts the ranged GETs
    received elsewhere; with receive_threads 1 there are none."""
    import s3xfer
    data = os.urandom(35 * MiB + 3)
    boto.put_object(Bucket=bucket, Key="tls-rt", Body=data)
    cfg = s3xfer.TransferConfig(part_size=5 * MiB, concurrency=4)
    for threads in (3, 1):
        with s3xfer.Client(endpoint_url=front.url, region=s3env["region"], access_key=s3env["access_key"],
                           secret_key=s3env["secret_key"], verify=certs["ca"], receive_threads=threads) as c:
            dst = tmp_path / f"dst{threads}"
            r = c.download_file(bucket, "tls-rt", str(dst), config=cfg)
            assert dst.read_bytes() == data
            assert r.parts == 8 and r.retries == 0
            assert r.receive_threads == threads
            if threads == 1:
                assert r.requests_received_elsewhere == 0
            else:
                # every range but the probe may go elsewhere; the least busy
                # loop gets each, the caller's own multi counted among them
                assert 1 <= r.requests_received_elsewhere <= r.parts - 1, r.requests_received_elsewhere


def test_file_ranges_on_receiving_threads_survive_faults(certs, proxy, s3env, bucket, boto, tmp_path):
    """The same over https through the fault proxy: 503s, resets and
    truncations mid-body, then held first bytes cut by the fixed timeout, on
    ranges that go to the receiving threads of a download to a file. Every
    byte lands once, in place, and the file is whole."""
    import hashlib
    import time

    import s3xfer
    data = os.urandom(30 * MiB + 11)
    boto.put_object(Bucket=bucket, Key="tls-rt-faults", Body=data)
    f = TLSFront(proxy.url, certs)
    try:
        cfg = s3xfer.TransferConfig(part_size=5 * MiB, concurrency=6, max_attempts=10, slow_part_timeout=800)
        with s3xfer.Client(endpoint_url=f.url, region=s3env["region"], access_key=s3env["access_key"],
                           secret_key=s3env["secret_key"], verify=certs["ca"], receive_threads=3) as c:
            proxy.set_rules(["slowdown_503:kind=ranged_get,times=2",
                             "reset_response:kind=ranged_get,after=64K,times=2",
                             "truncate_response:kind=ranged_get,after=100K,times=2"])
            proxy.reset_stats()
            dst = tmp_path / "out"
            r = c.download_file(bucket, "tls-rt-faults", str(dst), config=cfg)
            fired = proxy.stats()["faults"]
            assert hashlib.sha256(dst.read_bytes()).digest() == hashlib.sha256(data).digest()
            assert sum(fired.values()) == 6, fired
            assert r.retries_http == 2 and r.retries_network == 4, (r.retries_http, r.retries_network, fired)
            assert r.requests_received_elsewhere >= 1
            assert list(tmp_path.iterdir()) == [dst]  # no temporary file left beside it
            proxy.set_rules(["delay_first_byte:kind=ranged_get,delay=4,times=2"])
            proxy.reset_stats()
            dst.unlink()
            t = time.monotonic()
            r = c.download_file(bucket, "tls-rt-faults", str(dst), config=cfg)
            took = time.monotonic() - t
            assert dst.read_bytes() == data
            assert r.retries_first_byte == 2 and r.retries == 2
            assert took < 4  # cut at 800 ms, not waited out
    finally:
        f.close()


def test_cli_receive_threads_file_over_tls(front, certs, cli, s3env, bucket, boto, tmp_path):
    """The CLI's download to a file over https with --receive-threads 2 (make
    ctest-tsan runs this one through the ThreadSanitizer build too)."""
    import json
    data = os.urandom(26 * MiB + 1)
    boto.put_object(Bucket=bucket, Key="cli-tls-rt", Body=data)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=s3env["access_key"], AWS_SECRET_ACCESS_KEY=s3env["secret_key"],
               AWS_REGION=s3env["region"])
    dst = tmp_path / "f"
    r = subprocess.run([cli, "--endpoint-url", front.url, "--ca-bundle", certs["ca"], "--receive-threads", "2", "cp",
                        "--json", "--part-size", "5MiB", "--concurrency", "4", f"s3://{bucket}/cli-tls-rt", str(dst)],
                       env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    assert dst.read_bytes() == data
    res = json.loads(r.stdout.decode().strip().splitlines()[-1])["result"]
    assert 1 <= res["requests_received_elsewhere"] <= 5, res
