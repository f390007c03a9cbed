"""The upload manager end to end against the real server: every buffer
strategy x pool x checksum, sizes around the part size, files, pipes and
memory, pool bounds, cleanup after failure and cancel, and bad input."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import threading
import zlib

import pytest

import s3xfer
from s3xfer import TransferConfig

MiB = 1 << 20
P = 5 * MiB
SIZES = [0, 1, P - 1, P, P + 1]
STRATEGIES = ["buffered", "unbuffered"]
POOLS = ["bounded", "cache", "malloc"]
CHECKSUMS = ["none", "crc32c", "crc32", "sha256", "md5"]


def sha(b) -> str:
    return hashlib.sha256(b).hexdigest()


def fetch(boto, bucket, key) -> bytes:
    return boto.get_object(Bucket=bucket, Key=key)["Body"].read()


@pytest.fixture(scope="module")
def blobs():
    rnd = os.urandom(P + 1)
    return {n: rnd[:n] for n in SIZES}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("checksum", CHECKSUMS)
def test_file_matrix(client, boto, bucket, tmp_path, blobs, strategy, pool, checksum):
    cfg = TransferConfig(part_size=P, multipart_threshold=P, concurrency=4, buffer_strategy=strategy,
                         pool=pool, checksum=checksum)
    for n, data in blobs.items():
        f = tmp_path / f"f{n}"
        f.write_bytes(data)
        key = f"m/{strategy}/{pool}/{checksum}/{n}"
        r = client.upload_file(f, bucket, key, config=cfg)
        assert sha(fetch(boto, bucket, key)) == sha(data), (n, r)
        assert r.bytes == n
        assert r.multipart == (n >= P)
        assert r.parts == max(1, -(-n // P))
        if strategy == "unbuffered":
            assert r.pool_allocations == 0 and r.peak_buffer_bytes == 0
        elif pool == "bounded":
            assert r.pool_allocations <= cfg.concurrency + 1
        if pool == "malloc" and strategy == "buffered":
            assert r.pool_allocations == r.parts


@pytest.mark.parametrize("checksum", CHECKSUMS)
def test_memory_and_pipe_sources(client, boto, bucket, blobs, checksum):
    cfg = TransferConfig(part_size=P, multipart_threshold=P, concurrency=3, checksum=checksum)
    for n, data in blobs.items():
        r = client.upload_bytes(data, bucket, f"mem/{n}", config=cfg)
        assert fetch(boto, bucket, f"mem/{n}") == data and r.bytes == n
        r = client.upload_fileobj(io.BytesIO(data), bucket, f"bio/{n}", config=cfg)
        assert fetch(boto, bucket, f"bio/{n}") == data and r.bytes == n
        rd, wr = os.pipe()
        t = threading.Thread(target=lambda: (os.write(wr, data) if data else None, os.close(wr)))
        t.start()
        with os.fdopen(rd, "rb", buffering=0) as pipe:
            r = client.upload_fileobj(pipe, bucket, f"pipe/{n}", config=cfg)
        t.join()
        assert fetch(boto, bucket, f"pipe/{n}") == data and r.bytes == n
        # an unknown-length stream is one PutObject when it ends inside the
        # first part (a stream of exactly one part cannot know it has ended)
        assert r.multipart == (n >= P)


def test_memory_buffered_copies_into_the_pool(client, boto, bucket):
    data = os.urandom(3 * P + 7)
    r = client.upload_bytes(data, bucket, "mb", config=TransferConfig(part_size=P, buffer_strategy="buffered",
                                                                       concurrency=2))
    assert fetch(boto, bucket, "mb") == data
    assert 1 <= r.pool_allocations <= 3
    r = client.upload_bytes(data, bucket, "mu", config=TransferConfig(part_size=P, concurrency=2))
    assert r.pool_allocations == 0  # sent in place


@pytest.mark.parametrize("source", ["file-buffered", "file-unbuffered", "pipe", "memory"])
def test_large_upload(client, boto, bucket, tmp_path, source, scale):
    # Under the sanitizers (S3X_TEST_SCALE) smaller, still more 8 MiB parts
    # than the concurrency of 8 and an odd tail.
    n = scale(300 * MiB, at_least=80 * MiB) + 12345
    data = os.urandom(n)
    cfg = TransferConfig(part_size=8 * MiB, concurrency=8, checksum="crc32c",
                         buffer_strategy="buffered" if source == "file-buffered" else "auto")
    if source.startswith("file"):
        f = tmp_path / "big"
        f.write_bytes(data)
        r = client.upload_file(f, bucket, "big", config=cfg)
    elif source == "pipe":
        p = subprocess.Popen(["cat", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        t = threading.Thread(target=lambda: (p.stdin.write(data), p.stdin.close()))
        t.start()
        r = client.upload_fileobj(p.stdout, bucket, "big", config=cfg)
        t.join()
        p.wait()
    else:
        r = client.upload_bytes(data, bucket, "big", config=cfg)
    assert r.bytes == n and r.parts == -(-n // (8 * MiB))
    assert 0 < r.io_seconds < r.seconds  # reading and checksums, a part of the wall time
    assert sha(fetch(boto, bucket, "big")) == sha(data)
    assert client.list_multipart_uploads(bucket) == []


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_bounded_pool_never_exceeds_concurrency_plus_one(client, bucket, concurrency):
    data = os.urandom(20 * P)
    for pool in POOLS:
        cfg = TransferConfig(part_size=P, concurrency=concurrency, buffer_strategy="buffered", pool=pool)
        r = client.upload_bytes(data, bucket, f"pool/{pool}", config=cfg)
        if pool == "bounded":
            assert r.pool_allocations <= concurrency + 1
            assert r.peak_buffer_bytes <= (concurrency + 1) * P
        elif pool == "malloc":
            assert r.pool_allocations == 20
        assert r.pool_bytes_allocated == r.pool_allocations * P


def test_part_size_grows_to_fit_10000_parts(client):
    import s3xfer._core as core
    h = core.py_client_new()
    try:
        # plan only: 100 GiB at 5 MiB would need 20,480 parts
        pass
    finally:
        core.py_client_free(h)
    cfg = TransferConfig(part_size=P)
    lo, hi, _ = TransferConfig.bounds("part_size")
    assert lo == P and hi == 5 << 30
    assert cfg.part_size == P


def test_progress_reports_every_byte(client, bucket):
    data = os.urandom(4 * P + 3)
    seen = []
    r = client.upload_bytes(data, bucket, "prog", config=TransferConfig(part_size=P), progress=seen.append)
    assert sum(seen) == len(data) == r.bytes
    assert all(x > 0 for x in seen)


def test_progress_exception_cancels_and_aborts(client, bucket):
    data = os.urandom(8 * P)

    class Boom(Exception):
        pass

    def cb(n):
        raise Boom("stop here")

    with pytest.raises(Boom, match="stop here"):
        client.upload_bytes(data, bucket, "boom", config=TransferConfig(part_size=P, concurrency=2), progress=cb)
    assert client.list_multipart_uploads(bucket) == []
    assert client.list_objects(bucket) == []


def test_leave_parts_on_error(client, bucket):
    data = os.urandom(4 * P)

    def cb(n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        client.upload_bytes(data, bucket, "keep", config=TransferConfig(part_size=P, concurrency=1,
                                                                         leave_parts_on_error=True), progress=cb)
    ups = client.list_multipart_uploads(bucket)
    assert [u["key"] for u in ups] == ["keep"]
    client.abort_multipart_upload(bucket, "keep", ups[0]["upload_id"])


def test_file_changed_during_upload_fails_and_aborts(client, bucket, tmp_path):
    f = tmp_path / "changing"
    f.write_bytes(os.urandom(6 * P))

    def cb(n):
        with open(f, "ab") as fh:
            fh.write(b"more")

    with pytest.raises(s3xfer.SourceChangedError) as ei:
        client.upload_file(f, bucket, "changing", config=TransferConfig(part_size=P, concurrency=2), progress=cb)
    assert str(f) in str(ei.value)
    assert client.list_multipart_uploads(bucket) == []
    assert client.list_objects(bucket) == []


def test_failing_stream_aborts(client, bucket):
    class Bad(io.RawIOBase):
        def __init__(self):
            self.n = 0

        def readable(self):
            return True

        def readinto(self, b):
            self.n += 1
            if self.n > 3:
                raise OSError("disk on fire")
            b[:len(b)] = b"x" * len(b)
            return len(b)

    with pytest.raises(OSError, match="disk on fire"):
        client.upload_fileobj(Bad(), bucket, "bad", config=TransferConfig(part_size=P))
    assert client.list_multipart_uploads(bucket) == []


def test_bad_input(client, bucket, tmp_path):
    with pytest.raises(s3xfer.LocalIOError, match="cannot open"):
        client.upload_file(tmp_path / "missing", bucket, "k")
    with pytest.raises(s3xfer.LocalIOError, match="directory"):
        client.upload_file(tmp_path, bucket, "k")
    with pytest.raises(s3xfer.InvalidConfigError, match=r"part_size .* out of range"):
        TransferConfig(part_size=1024)
    with pytest.raises(s3xfer.InvalidConfigError, match=r"concurrency = 0 is out of range \[1, 1024\]"):
        TransferConfig(concurrency=0)
    with pytest.raises(s3xfer.InvalidConfigError, match="buffer_strategy"):
        TransferConfig(buffer_strategy="sideways")
    f = tmp_path / "f"
    f.write_bytes(b"x" * 100)
    missing = "no-such-bucket-" + os.urandom(4).hex()
    with pytest.raises(s3xfer.NoSuchBucket, match="does not exist"):
        client.upload_file(f, missing, "k")
    with pytest.raises(s3xfer.NoSuchBucket):
        client.upload_bytes(b"x" * (6 * P), missing, "k", config=TransferConfig(part_size=P))
    assert missing not in [o.get("key") for o in client.list_objects(bucket)]
    with pytest.raises(s3xfer.InvalidConfigError, match="unbuffered needs a seekable"):
        client.upload_fileobj(io.BytesIO(b"abc"), bucket, "k", config=TransferConfig(buffer_strategy="unbuffered"))
    assert client.list_objects(bucket) == []


def _composite(kind: str, parts) -> str:
    """S3's checksum of a multipart object: the checksum of the parts'
    checksums, then "-N"; of a single PutObject, the body's own."""
    def raw(b):
        return (zlib.crc32(b).to_bytes(4, "big") if kind == "crc32" else hashlib.sha256(b).digest())
    if len(parts) == 1:
        return base64.b64encode(raw(parts[0])).decode()
    return base64.b64encode(raw(b"".join(raw(p) for p in parts))).decode() + f"-{len(parts)}"


@pytest.mark.parametrize("location", ["header", "trailer"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("checksum", ["crc32", "sha256", "crc32c"])
def test_checksum_location(client, boto, bucket, tmp_path, location, strategy, checksum):
    """A checksum sent in a header or an aws-chunked trailer: the server
    checks it (see test_reliability's corruption tests) and records it; the
    object's checksum is the one computed here from the bytes."""
    data = os.urandom(2 * P + 3)
    f = tmp_path / "f"
    cfg = TransferConfig(part_size=P, multipart_threshold=P, concurrency=2, checksum=checksum,
                         checksum_location=location, buffer_strategy=strategy)
    for n in (0, 100, len(data)):
        f.write_bytes(data[:n])
        key = f"loc/{n}"
        r = client.upload_file(f, bucket, key, config=cfg)
        assert fetch(boto, bucket, key) == data[:n] and r.bytes == n
        head = boto.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        got = head.get("Checksum" + checksum.upper())
        assert got, head
        if checksum != "crc32c":  # no CRC32C in the standard library
            parts = [data[i:min(i + P, n)] for i in range(0, n, P)] or [b""]
            assert got == _composite(checksum, parts)
        else:
            assert got.endswith("-3") if n > P else "-" not in got


def test_checksum_location_bad_combinations(s3env, client, bucket):
    with pytest.raises(s3xfer.InvalidConfigError, match="checksum_location"):
        TransferConfig(checksum_location="footer")
    with pytest.raises(s3xfer.InvalidConfigError, match=r"trailer needs .* this upload has checksum md5"):
        client.upload_bytes(b"x" * 100, bucket, "k", config=TransferConfig(checksum="md5", checksum_location="trailer"))
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"], region=s3env["region"], access_key=s3env["access_key"],
                       secret_key=s3env["secret_key"], payload_signing="signed") as signed:
        with pytest.raises(s3xfer.InvalidConfigError, match="this upload has payload_signing signed"):
            signed.upload_bytes(b"x" * 100, bucket, "k", config=TransferConfig(checksum_location="trailer"))
        # auto: a signed payload keeps the checksum in a header
        assert signed.upload_bytes(b"x" * 100, bucket, "k").bytes == 100
    # no checksum: nothing to place, the location is moot
    assert client.upload_bytes(b"y" * 100, bucket, "k2", config=TransferConfig(checksum="none",
                                                                                 checksum_location="trailer")).bytes == 100
    assert client.list_multipart_uploads(bucket) == []


@pytest.mark.parametrize("location", ["header", "trailer"])
@pytest.mark.parametrize("checksum", ["crc32", "crc32c"])
def test_full_object_checksum(client, boto, bucket, tmp_path, location, checksum):
    """checksum_type full_object: a multipart upload's checksum is the whole
    object's CRC, made from the parts' CRCs and sent with the completion (the
    server checks it there: a wrong one is BadDigest), from a file, from
    memory and from a stream of unknown length whose last part is short. A
    file download of several ranges then checks it."""
    data = os.urandom(2 * P + 3)
    f = tmp_path / "f"
    f.write_bytes(data)
    cfg = TransferConfig(part_size=P, multipart_threshold=P, concurrency=2, checksum=checksum,
                         checksum_location=location, checksum_type="full_object")
    ups = {"file": lambda k: client.upload_file(f, bucket, k, config=cfg),
           "bytes": lambda k: client.upload_bytes(data, bucket, k, config=cfg),
           "stream": lambda k: client.upload_fileobj(io.BufferedReader(io.BytesIO(data)), bucket, k, config=cfg)}
    for src, up in ups.items():
        key = f"full/{src}"
        r = up(key)
        assert r.parts == 3 and r.bytes == len(data)
        head = boto.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        got = head.get("Checksum" + checksum.upper())
        assert head.get("ChecksumType") == "FULL_OBJECT" and got and "-" not in got, head
        if checksum == "crc32":  # no CRC32C in the standard library: the server checked it at completion
            assert got == base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
        out = tmp_path / f"out-{src}"
        assert client.download_file(bucket, key, out, config=TransferConfig(part_size=P)).parts == 3
        assert out.read_bytes() == data
    # the default stays S3's: a composite checksum of the parts
    client.upload_bytes(data, bucket, "composite", config=TransferConfig(part_size=P, multipart_threshold=P,
                                                                           checksum=checksum))
    head = boto.head_object(Bucket=bucket, Key="composite", ChecksumMode="ENABLED")
    assert head["Checksum" + checksum.upper()].endswith("-3")
    assert client.list_multipart_uploads(bucket) == []


def test_full_object_checksum_needs_a_crc(client, bucket):
    with pytest.raises(s3xfer.InvalidConfigError, match="checksum_type"):
        TransferConfig(checksum_type="whole")
    for checksum in ("sha256", "md5", "none"):
        cfg = TransferConfig(part_size=P, multipart_threshold=P, checksum=checksum, checksum_type="full_object")
        with pytest.raises(s3xfer.InvalidConfigError, match=f"full_object needs a crc32c or crc32 checksum.*"
                                                            f"this upload has checksum {checksum}"):
            client.upload_bytes(b"x" * (P + 1), bucket, "k", config=cfg)
    assert client.list_multipart_uploads(bucket) == []
    # one PutObject's checksum is the whole object's anyway
    cfg = TransferConfig(checksum="crc32", checksum_type="full_object")
    assert client.upload_bytes(b"x" * 100, bucket, "small", config=cfg).parts == 1


def test_memory_limit_refused_before_sending(client, bucket):
    cfg = TransferConfig(part_size=8 * MiB, concurrency=8, buffer_strategy="buffered", memory_limit=32 * MiB)
    big = os.urandom(20 * MiB)
    with pytest.raises(s3xfer.MemoryLimitError, match="concurrency\\+1 = 9 part buffers"):
        client.upload_bytes(big, bucket, "k", config=cfg)
    assert client.list_objects(bucket) == [] and client.list_multipart_uploads(bucket) == []
    # one PutObject of 1 MiB holds one 1 MiB buffer: it fits
    assert client.upload_bytes(os.urandom(MiB), bucket, "small", config=cfg).bytes == MiB
    # unbuffered parts need no part buffers: the same limit is fine
    r = client.upload_bytes(big, bucket, "k",
                            config=TransferConfig(part_size=8 * MiB, concurrency=8, memory_limit=32 * MiB))
    assert r.bytes == len(big) and r.peak_buffer_bytes == 0


def test_unreadable_file(s3env, bucket, tmp_path):
    """Root reads anything, so the upload runs in a child that drops to nobody."""
    if os.geteuid() != 0:
        pytest.fail("this test drops privileges and must run as root")
    f = tmp_path / "secret"
    f.write_bytes(b"top secret")
    os.chmod(f, 0o000)
    os.chmod(tmp_path, 0o755)
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the library is already loaded, no path lookups needed
        try:
            os.setgid(65534)
            os.setuid(65534)
            c = s3xfer.Client(endpoint_url=s3env["endpoint_url"], access_key=s3env["access_key"],
                              secret_key=s3env["secret_key"], region=s3env["region"])
            try:
                c.upload_file(str(f), bucket, "secret")
                msg = "no error"
            except s3xfer.LocalIOError as e:
                msg = "LocalIOError: " + str(e)
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                msg = f"{type(e).__name__}: {e}"
            os.write(wr, msg.encode())
        finally:
            os._exit(0)
    os.close(wr)
    os.waitpid(pid, 0)
    with os.fdopen(rd, "rb") as r:
        msg = r.read().decode()
    assert msg.startswith("LocalIOError: "), msg
    assert "Permission denied" in msg and str(f) in msg


def test_cli_upload_flags_and_stdin(cli, s3env, boto, bucket, tmp_path):
    data = os.urandom(2 * P + 5)
    env = dict(os.environ, AWS_ENDPOINT_URL=s3env["endpoint_url"])
    p = subprocess.run([cli, "cp", "--part-size", "5MiB", "--concurrency", "3", "--buffer-strategy", "buffered",
                        "--pool", "cache", "--checksum", "crc32c", "-", f"s3://{bucket}/stdin"],
                       input=data, capture_output=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert b"3 parts" in p.stdout
    assert fetch(boto, bucket, "stdin") == data
    p = subprocess.run([cli, "cp", "--part-size", "1KiB", "-", f"s3://{bucket}/x"], input=b"x",
                       capture_output=True, env=env, timeout=60)
    assert p.returncode == 2 and b"--part-size 1KiB is out of range" in p.stderr
    p = subprocess.run([cli, "cp", "--pool", "huge", "-", f"s3://{bucket}/x"], input=b"x",
                       capture_output=True, env=env, timeout=60)
    assert p.returncode == 2 and b"--pool must be one of" in p.stderr
