"""The download manager end to end: files, memory and in-order streams for
sizes around the range size, objects written by s3xfer and by boto3 (single
PUT and multipart), If-Match pinning, checksum validation and every failure
path leaving nothing behind."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import threading
import time

import pytest

import s3xfer
from s3xfer import TransferConfig

MiB = 1 << 20
P = 5 * MiB
SIZES = [0, 1, P - 1, P, P + 1, 3 * P + 17]


@pytest.fixture(scope="module")
def blob():
    return os.urandom(3 * P + 17)


def put_both_ways(client, boto, bucket, data, key):
    """The same bytes as four objects: s3xfer single/multipart, boto3 single/multipart."""
    from boto3.s3.transfer import TransferConfig as BotoCfg
    client.upload_bytes(data, bucket, key + ".s3x1", config=TransferConfig(multipart_threshold=5 << 30))
    client.upload_bytes(data, bucket, key + ".s3xm", config=TransferConfig(part_size=P, multipart_threshold=P))
    boto.put_object(Bucket=bucket, Key=key + ".boto1", Body=data)
    boto.upload_fileobj(io.BytesIO(data), bucket, key + ".botom",
                        Config=BotoCfg(multipart_threshold=P, multipart_chunksize=P))
    return [key + s for s in (".s3x1", ".s3xm", ".boto1", ".botom")]


@pytest.mark.parametrize("size", SIZES)
def test_every_destination(client, boto, bucket, tmp_path, blob, size):
    data = blob[:size]
    cfg = TransferConfig(part_size=P, concurrency=3)
    for key in put_both_ways(client, boto, bucket, data, f"o{size}"):
        out = tmp_path / key
        r = client.download_file(bucket, key, out, config=cfg)
        assert out.read_bytes() == data, key
        assert r.bytes == size and r.parts == max(1, -(-size // P))
        buf = bytearray(size + 3)
        r = client.download_into(bucket, key, buf, config=cfg)
        assert bytes(buf[:r.bytes]) == data
        bio = io.BytesIO()
        client.download_fileobj(bucket, key, bio, config=cfg)
        assert bio.getvalue() == data
    assert [p.name for p in tmp_path.iterdir() if ".s3xfer-" in p.name] == []


def test_large_download_each_destination(client, boto, bucket, tmp_path, scale):
    # Under the sanitizers (S3X_TEST_SCALE) smaller, still more 8 MiB parts
    # than the concurrency of 8 and an odd tail.
    n = scale(300 * MiB, at_least=80 * MiB) + 5
    data = os.urandom(n)
    client.upload_bytes(data, bucket, "big", config=TransferConfig(part_size=16 * MiB))
    want = hashlib.sha256(data).hexdigest()
    cfg = TransferConfig(part_size=8 * MiB, concurrency=8)
    r = client.download_file(bucket, "big", tmp_path / "big", config=cfg)
    assert hashlib.sha256((tmp_path / "big").read_bytes()).hexdigest() == want and r.parts == -(-n // (8 * MiB))
    buf = bytearray(n)
    client.download_into(bucket, "big", buf, config=cfg)
    assert hashlib.sha256(buf).hexdigest() == want
    h = hashlib.sha256()

    class Sink:
        def write(self, b):
            h.update(b)
            return len(b)

    r = client.download_fileobj(bucket, "big", Sink(), config=cfg)
    assert h.hexdigest() == want
    assert r.pool_allocations <= 9


def test_stream_to_pipe_in_order_with_bounded_memory(client, bucket):
    n = 40 * P
    data = os.urandom(n)
    client.upload_bytes(data, bucket, "s", config=TransferConfig(part_size=P))
    rd, wr = os.pipe()
    got = []

    def reader():
        with os.fdopen(rd, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    return
                got.append(chunk)
                time.sleep(0.002)  # a slow consumer

    t = threading.Thread(target=reader)
    t.start()
    with os.fdopen(wr, "wb") as w:
        r = client.download_fileobj(bucket, "s", w, config=TransferConfig(part_size=P, concurrency=8,
                                                                            memory_limit=4 * P))
    t.join()
    assert b"".join(got) == data
    assert r.peak_buffer_bytes <= 4 * P


def test_memory_buffer_too_small(client, bucket):
    client.put_object(bucket, "k", b"x" * 1000)
    with pytest.raises(s3xfer.LimitExceededError, match="larger than the 10-byte buffer"):
        client.download_into(bucket, "k", bytearray(10))


def test_missing_key_creates_nothing(client, bucket, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(s3xfer.NoSuchKey) as ei:
        client.download_file(bucket, "missing", out)
    assert ei.value.status == 404
    assert list(tmp_path.iterdir()) == []


def test_existing_target_untouched_on_failure(client, bucket, tmp_path):
    out = tmp_path / "out"
    out.write_bytes(b"precious")
    with pytest.raises(s3xfer.NoSuchKey):
        client.download_file(bucket, "missing", out)
    assert out.read_bytes() == b"precious"
    assert list(tmp_path.iterdir()) == [out]


def test_destination_directory_missing_or_not_writable(client, bucket, tmp_path):
    client.put_object(bucket, "k", b"data")
    with pytest.raises(s3xfer.LocalIOError, match="does not exist"):
        client.download_file(bucket, "k", tmp_path / "nodir" / "out")
    with pytest.raises(s3xfer.LocalIOError, match="is a directory"):
        client.download_file(bucket, "k", tmp_path)


def test_object_replaced_mid_download(client, boto, bucket, tmp_path):
    data = os.urandom(12 * P)
    client.upload_bytes(data, bucket, "moving", config=TransferConfig(part_size=P))
    replaced = []

    def cb(n):
        if not replaced:
            replaced.append(1)
            boto.put_object(Bucket=bucket, Key="moving", Body=b"new contents" * 1000)

    out = tmp_path / "out"
    with pytest.raises(s3xfer.SourceChangedError, match="changed during the download"):
        client.download_file(bucket, "moving", out, config=TransferConfig(part_size=P, concurrency=1), progress=cb)
    assert list(tmp_path.iterdir()) == []


def test_progress_exception_removes_temp_file(client, bucket, tmp_path):
    client.upload_bytes(os.urandom(6 * P), bucket, "k", config=TransferConfig(part_size=P))

    def cb(n):
        raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough"):
        client.download_file(bucket, "k", tmp_path / "out", config=TransferConfig(part_size=P, concurrency=1),
                             progress=cb)
    assert list(tmp_path.iterdir()) == []


def test_checksum_validated_when_present(client, boto, bucket, tmp_path):
    data = os.urandom(2 * MiB)
    boto.put_object(Bucket=bucket, Key="ck", Body=data, ChecksumAlgorithm="SHA256")
    r = client.download_file(bucket, "ck", tmp_path / "ck", config=TransferConfig(part_size=P))
    assert (tmp_path / "ck").read_bytes() == data and r.bytes == len(data)


def test_disk_full_removes_temp_file(client, bucket, tmp_path):
    if os.geteuid() != 0:
        pytest.fail("needs root to mount a small tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=True)
    try:
        client.upload_bytes(os.urandom(4 * P), bucket, "big", config=TransferConfig(part_size=P))
        with pytest.raises(s3xfer.LocalIOError) as ei:
            client.download_file(bucket, "big", mnt / "big", config=TransferConfig(part_size=P))
        assert "space" in str(ei.value).lower()
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_cli_download_to_file_and_stdout(cli, s3env, bucket, client, tmp_path):
    data = os.urandom(3 * P + 1)
    client.upload_bytes(data, bucket, "c", config=TransferConfig(part_size=P))
    env = dict(os.environ, AWS_ENDPOINT_URL=s3env["endpoint_url"])
    p = subprocess.run([cli, "cp", "--part-size", "5MiB", "--concurrency", "4", f"s3://{bucket}/c",
                        str(tmp_path / "c")], capture_output=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "c").read_bytes() == data and b"4 parts" in p.stdout
    p = subprocess.run([cli, "cp", "--part-size", "5MiB", f"s3://{bucket}/c", "-"], capture_output=True, env=env,
                       timeout=120)
    assert p.returncode == 0 and p.stdout == data
