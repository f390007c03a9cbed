"""The durable knob of downloads to a file: on by default (the file is
fsynced before its rename, its writeback started while it downloads), off
with durable=False / --no-fsync; byte-exact downloads in both modes for
small, zero-byte and multi-range objects, and no temporary file left behind
by a failed download in either mode. The evidence that the knob reaches the
engine is the result's fsyncs / writeback_calls counters (and the CLI's
summary line, which prints them)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import s3xfer
from s3xfer import TransferConfig

MiB = 1 << 20
P = 5 * MiB
WINDOW = 8 * MiB  # S3X_WRITEBACK_WINDOW in core/src/xfer/filewriter.h
SIZES = [0, 1, P - 1, P + 1, 4 * P + 17]


@pytest.fixture(scope="module")
def blob():
    return os.urandom(4 * P + 17)


def temp_files(d):
    return [p.name for p in d.iterdir() if ".s3xfer-" in p.name]


def test_knob_bounds_and_default():
    assert TransferConfig.bounds("durable") == (0, 1, 1)
    assert TransferConfig().durable is True
    assert TransferConfig(durable=False).durable is False
    with pytest.raises(s3xfer.InvalidConfigError, match=r"durable = 2 is out of range \[0, 1\]"):
        TransferConfig(durable=2)


@pytest.mark.parametrize("durable", [True, False])
@pytest.mark.parametrize("size", SIZES)
def test_byte_exact_in_both_modes(client, bucket, tmp_path, blob, size, durable):
    data = blob[:size]
    client.upload_bytes(data, bucket, "o", config=TransferConfig(part_size=P, multipart_threshold=P))
    out = tmp_path / "out.bin"
    r = client.download_file(bucket, "o", out, config=TransferConfig(part_size=P, concurrency=3, durable=durable))
    assert out.read_bytes() == data
    assert r.bytes == size and r.parts == max(1, -(-size // P))
    assert r.fsyncs == (1 if durable else 0)
    if not durable:
        assert r.writeback_calls == 0
    elif sys.platform.startswith("linux"):
        # One early writeback request per full window written (the tail is the fsync's).
        assert r.writeback_calls == size // WINDOW
    assert r.sync_seconds >= 0 and r.seconds >= r.sync_seconds
    assert temp_files(tmp_path) == []


def test_default_is_durable(client, bucket, tmp_path):
    data = os.urandom(3 * WINDOW + 1)
    client.put_object(bucket, "k", data)
    r = client.download_file(bucket, "k", tmp_path / "k")
    assert (tmp_path / "k").read_bytes() == data and r.fsyncs == 1
    if sys.platform.startswith("linux"):
        assert r.writeback_calls == 3


def test_replacing_a_file_in_both_modes(client, bucket, tmp_path, blob):
    out = tmp_path / "out"
    out.write_bytes(b"old contents")
    os.chmod(out, 0o600)
    for durable in (False, True):
        data = blob[: P + 3 + durable]
        client.put_object(bucket, "k", data)
        r = client.download_file(bucket, "k", out, config=TransferConfig(part_size=P, durable=durable))
        assert out.read_bytes() == data and r.fsyncs == int(durable)
        assert (out.stat().st_mode & 0o777) == 0o600
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("durable", [True, False])
def test_failed_download_leaves_no_temp_file(client, bucket, tmp_path, durable):
    cfg = TransferConfig(part_size=P, concurrency=1, durable=durable)
    # A missing object: nothing is created, an existing target is kept.
    keep = tmp_path / "keep"
    keep.write_bytes(b"precious")
    with pytest.raises(s3xfer.NoSuchKey):
        client.download_file(bucket, "missing", keep, config=cfg)
    assert keep.read_bytes() == b"precious"
    # Cancelled part way (some ranges already written, writeback started).
    client.upload_bytes(os.urandom(6 * P), bucket, "big", config=TransferConfig(part_size=P))
    seen = [0]

    def cb(n):  # boto3-style: bytes since the last call
        seen[0] += n
        if seen[0] >= 2 * P:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        client.download_file(bucket, "big", tmp_path / "big", config=cfg, progress=cb)
    assert seen[0] >= 2 * P
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]


def test_streams_and_uploads_ignore_the_knob(client, bucket, tmp_path):
    import io
    data = os.urandom(P + 5)
    src = tmp_path / "src"
    src.write_bytes(data)
    # A download knob in the config of an upload is not sent to the upload manager.
    client.upload_file(src, bucket, "u", config=TransferConfig(part_size=P, multipart_threshold=P, durable=False))
    bio = io.BytesIO()
    r = client.download_fileobj(bucket, "u", bio, config=TransferConfig(part_size=P, durable=True))
    assert bio.getvalue() == data and r.fsyncs == 0 and r.writeback_calls == 0 and r.sync_seconds == 0


def test_cli_no_fsync(cli, s3env, client, bucket, tmp_path):
    data = os.urandom(2 * WINDOW + 100)
    client.put_object(bucket, "c", data)
    env = dict(os.environ, AWS_ENDPOINT_URL=s3env["endpoint_url"])
    base = [cli, "cp", "--no-progress", "--part-size", "5MiB", "--concurrency", "3"]
    p = subprocess.run(base + [f"s3://{bucket}/c", str(tmp_path / "a")], capture_output=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "a").read_bytes() == data
    assert b"synced to disk before the rename" in p.stdout
    if sys.platform.startswith("linux"):
        assert b"2 early writeback requests" in p.stdout
    p = subprocess.run(base + ["--no-fsync", f"s3://{bucket}/c", str(tmp_path / "b")], capture_output=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "b").read_bytes() == data
    assert b"renamed without fsync" in p.stdout and b"0 early writeback requests" in p.stdout
    # Accepted (and ignored) on an upload; a failed download leaves nothing either way.
    p = subprocess.run(base + ["--no-fsync", str(tmp_path / "b"), f"s3://{bucket}/up"], capture_output=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    for extra in ([], ["--no-fsync"]):
        p = subprocess.run(base + extra + [f"s3://{bucket}/missing", str(tmp_path / "m")], capture_output=True,
                           env=env, timeout=120)
        assert p.returncode == 1 and b"NoSuchKey" in p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a", "b"]
    h = subprocess.run([cli, "--help"], capture_output=True, timeout=30)
    assert b"--no-fsync" in h.stdout


@pytest.mark.parametrize("durable", [True, False])
def test_transfer_manager_passes_the_knob(client, bucket, tmp_path, durable):
    """Downloads in a batch (one loop, many files) take the knob from the
    manager's config like the blocking calls."""
    objs = {f"k{i}": os.urandom(WINDOW + i * 1000) for i in range(3)}
    for k, v in objs.items():
        client.put_object(bucket, k, v)
    cfg = TransferConfig(part_size=P, concurrency=4, durable=durable)
    with client.transfer_manager(cfg) as tm:
        futs = {k: tm.download(bucket, k, str(tmp_path / k)) for k in objs}
    for k, f in futs.items():
        r = f.result()
        assert (tmp_path / k).read_bytes() == objs[k]
        assert r.fsyncs == int(durable)
        if sys.platform.startswith("linux"):
            assert r.writeback_calls == (1 if durable else 0)
    assert temp_files(tmp_path) == []
