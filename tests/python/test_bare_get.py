"""benchmarks/bare_get.c, the cheapest-client reference of client_limit.py
(runners bare-get-null, bare-get-copy-null): it asks for every range of the
object exactly once over its keep-alive connections, counts the body bytes,
and fails (status 1, a message) on an answer that is not the range it asked
for or on a body cut short. Against a small HTTP/1.1 server of the test's
own on 127.0.0.1."""

from __future__ import annotations

import http.server
import pathlib
import re
import shutil
import subprocess
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIZE = 5 * 1024 * 1024 + 12345
PART = 1024 * 1024
DATA = bytes(range(256)) * (SIZE // 256) + bytes(SIZE % 256)


@pytest.fixture(scope="module")
def bare_get(tmp_path_factory):
    if not shutil.which("cc"):
        pytest.fail("no C compiler: the benchmark reference cannot be built")
    out = tmp_path_factory.mktemp("bare") / "bare_get"
    subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(ROOT / "benchmarks" / "bare_get.c")], check=True)
    return str(out)


class _Server:
    """HTTP/1.1 keep-alive server of DATA at /b/k; mode 'ok' answers 206 with
    the range, 'full' a 200 with the whole object, 'short' a 206 whose body
    stops halfway before the connection closes."""

    def __init__(self, mode):
        seen = self.seen = []
        conns = self.conns = set()

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                conns.add(self.client_address)
                m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
                if mode == "full" or not m:
                    self.send_response(200)
                    self.send_header("Content-Length", str(SIZE))
                    self.end_headers()
                    self.wfile.write(DATA)
                    return
                first, last = int(m.group(1)), int(m.group(2))
                seen.append((first, last))
                body = DATA[first:last + 1]
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {first}-{last}/{SIZE}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if mode == "short":
                    self.wfile.write(body[:len(body) // 2])
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _run(bare_get, srv, how="discard", conc=3):
    return subprocess.run([bare_get, "127.0.0.1", str(srv.port), "/b/k", str(SIZE), str(PART), str(conc), how],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


@pytest.mark.parametrize("how", ["discard", "copy"])
def test_every_range_once_over_the_connections(bare_get, how):
    srv = _Server("ok")
    try:
        r = _run(bare_get, srv, how)
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == SIZE
    pos = 0
    for first, last in sorted(srv.seen):
        assert first == pos
        pos = last + 1
    assert pos == SIZE and len(srv.seen) == 6
    assert len(srv.conns) == 3  # keep-alive: one connection each, reused


def test_a_whole_object_answer_is_refused(bare_get):
    srv = _Server("full")
    try:
        r = _run(bare_get, srv)
    finally:
        srv.close()
    assert r.returncode == 1 and "bare_get: answer: bad answer" in r.stderr and r.stdout == ""


def test_a_body_cut_short_is_refused(bare_get):
    srv = _Server("short")
    try:
        r = _run(bare_get, srv, conc=1)
    finally:
        srv.close()
    assert r.returncode == 1 and "connection closed before the range was complete" in r.stderr
    assert r.stdout == ""
