"""Helpers of the bulk tests (test_bulk.py, test_cli_bulk.py): local trees
built from a dict, read back the same way, and the bucket's side read by
boto3, the independent client."""

from __future__ import annotations

import hashlib
import os
import pathlib
from typing import Dict, Iterable, Optional, Tuple

# Names that have broken tools before: spaces, URL-special characters (the
# key goes into a URL path and a query string), non-ASCII in both NFC and
# several scripts, a leading dash and dot, and a newline.
SPECIAL_NAMES = [
    "sp ace.txt",
    "hash#1.txt",
    "pct%41%2F.txt",
    "plus+sign.txt",
    "q?mark=1&x.txt",
    "semi;colon,comma.txt",
    "brackets[1](2){3}.txt",
    "quote'\"back`.txt",
    "-dash.txt",
    ".hidden",
    "tilde~.txt",
    "ünïcødé/çà.txt",
    "日本語/ファイル.txt",
    "emoji/🙂.bin",
    "new\nline.txt",
]


def body_for(rel: str, size: Optional[int] = None) -> bytes:
    """Distinct, reproducible content for each name (empty when size is 0)."""
    seed = hashlib.sha256(rel.encode("utf-8", "surrogateescape")).digest()
    n = size if size is not None else 1 + seed[0] * 3
    return (seed * (n // len(seed) + 1))[:n]


def make_tree(root: pathlib.Path, files: Dict[str, bytes], dirs: Iterable[str] = ()) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)


def read_tree(root: pathlib.Path) -> Dict[str, bytes]:
    """Every regular file under root (symbolic links not followed), by its
    relative path with '/' separators."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            p = pathlib.Path(dirpath, name)
            if p.is_symlink() or not p.is_file():
                continue
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def entries(root: pathlib.Path) -> set:
    """Every entry (files, directories, links) under root, relative."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.add(pathlib.Path(dirpath, name).relative_to(root).as_posix())
    return out


def listing(boto, bucket: str, prefix: str = "") -> Dict[str, Tuple[int, str]]:
    """{key: (size, etag without quotes)} by boto3."""
    out = {}
    for page in boto.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            out[o["Key"]] = (o["Size"], o["ETag"].strip('"'))
    return out


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def assert_bucket_holds(boto, bucket: str, prefix: str, files: Dict[str, bytes]) -> None:
    """The prefix holds exactly files (names and, by the single-part ETag, bytes)."""
    got = listing(boto, bucket, prefix)
    want = {prefix + rel: (len(data), md5(data)) for rel, data in files.items()}
    assert sorted(got) == sorted(want)
    for k, (size, etag) in want.items():
        assert got[k][0] == size, k
        if "-" not in got[k][1]:  # a multipart ETag is not an MD5
            assert got[k][1] == etag, k


def uploads_in_progress(boto, bucket: str) -> list:
    return boto.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


# ---- a bucket served by a fake S3 ---------------------------------------------
# The real server refuses most hostile keys at PUT ("../x", "a/../../b",
# "./c" are InvalidRequest, a 300-byte segment KeyTooLongError, "/abs" and
# "a//b" are normalised to "abs" and "a/b"), yet another server, or a
# proxy, may list them. This stand-in lists whatever keys it is given and
# serves their bytes, so the download side can be tested against them.

import http.server  # noqa: E402
import threading  # noqa: E402
import urllib.parse  # noqa: E402
from xml.sax.saxutils import escape as _xml_escape  # noqa: E402


class FakeBucket:
    """A one-bucket S3 stand-in on 127.0.0.1 (ephemeral port): ListObjectsV2
    (one page, byte order), HEAD and GET (with Range) of its objects. It does
    not check signatures. requests: (method, key or None, query)."""

    def __init__(self, bucket: str, objects: Dict[str, bytes]):
        self.bucket = bucket
        self.objects = dict(objects)
        self.requests = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, headers, body=b""):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _serve(self):
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
                raw = url.path[len("/" + fake.bucket):]
                key = urllib.parse.unquote(raw[1:], errors="surrogateescape") if raw.startswith("/") else None
                if key == "":
                    key = None
                fake.requests.append((self.command, key, q))
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                if key is None and self.command == "GET":
                    prefix = q.get("prefix", "")
                    keys = sorted((k for k in fake.objects if k.startswith(prefix)),
                                  key=lambda k: k.encode("utf-8", "surrogateescape"))
                    out = ['<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
                           'xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
                           f"<Name>{fake.bucket}</Name><Prefix>{_xml_escape(prefix)}</Prefix>"
                           f"<KeyCount>{len(keys)}</KeyCount><MaxKeys>1000</MaxKeys>"
                           "<IsTruncated>false</IsTruncated>"]
                    for k in keys:
                        d = fake.objects[k]
                        out.append(f"<Contents><Key>{_xml_escape(k)}</Key>"
                                   "<LastModified>2024-01-01T00:00:00.000Z</LastModified>"
                                   f"<ETag>&quot;{md5(d)}&quot;</ETag><Size>{len(d)}</Size>"
                                   "<StorageClass>STANDARD</StorageClass></Contents>")
                    out.append("</ListBucketResult>")
                    return self._send(200, {"Content-Type": "application/xml"}, "".join(out).encode())
                if key in fake.objects and self.command in ("GET", "HEAD"):
                    d = fake.objects[key]
                    hdr = {"ETag": f'"{md5(d)}"', "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT",
                           "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
                    rng = self.headers.get("Range")
                    if rng and rng.startswith("bytes=") and d:
                        a, _, b = rng[6:].partition("-")
                        a, b = int(a), min(int(b) if b else len(d) - 1, len(d) - 1)
                        hdr["Content-Range"] = f"bytes {a}-{b}/{len(d)}"
                        return self._send(206, hdr, d[a:b + 1])
                    return self._send(200, hdr, d)
                body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code>'
                        b"<Message>no such key</Message></Error>")
                return self._send(404, {"Content-Type": "application/xml"}, body)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _serve

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ENDPOINT_URL=self.url, AWS_ACCESS_KEY_ID="AKIDFAKE", AWS_SECRET_ACCESS_KEY="fake-secret",
                   AWS_REGION="us-east-1", AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_CONFIG_FILE="/dev/null")
        return env

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


# Keys no download may follow out of its directory, and the safe ones beside
# them. "a" and "a/b" are both safe alone; together one of them cannot land.
HOSTILE_KEYS = ["../x", "/abs", "a/../../b", "a//b", "./c", "s/" + "l" * 300, "d/..", "..", "e/./f",
                "link/x"]
SAFE_KEYS = ["ok.txt", "fine/deep.txt"]
CONFLICT_KEYS = ["a", "a/b"]


def hostile_objects(prefix=""):
    return {prefix + k: b"H:" + k.encode() for k in HOSTILE_KEYS + SAFE_KEYS + CONFLICT_KEYS}


def check_contained(tmp_path, root, target, outside):
    """Nothing written beside the target, outside it, or through its link."""
    assert entries(root) - {"target"} - {"target/" + e for e in entries(target)} == set()
    assert entries(outside) == {"keep.txt"} and (outside / "keep.txt").read_bytes() == b"keep"
    assert not (tmp_path / "x").exists() and not (tmp_path / "b").exists() and not os.path.exists("/abs")
    for e in entries(target):
        if e == "link":
            continue
        real = os.path.realpath(target / e)
        assert real.startswith(str(target.resolve()) + os.sep), e


def hostile_setup(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    target = root / "target"
    target.mkdir(parents=True)
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"keep")
    os.symlink(outside, target / "link")  # planted: "link/x" must not go through it
    return root, target, outside
