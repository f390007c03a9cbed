"""The batch engine through the Python transfer manager, against the real
server: many mixed transfers under one memory budget, byte-exact; one
failure stays its own; cancelling one or all leaves nothing behind; the same
through the fault proxy; futures and callbacks behave as futures do; the
process's peak RSS stays within the budget plus a constant."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import time

import pytest

import s3xfer
from faultproxy import FaultProxy
from s3xfer import TransferConfig

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


class HashSink:
    """A write()-only destination that keeps a digest, not the bytes."""

    def __init__(self):
        self.h = hashlib.sha256()
        self.n = 0

    def write(self, b):
        self.h.update(b)
        self.n += len(b)
        return len(b)


def sha(b) -> str:
    return hashlib.sha256(b).hexdigest()


def file_sha(p) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            h.update(chunk)
    return h.hexdigest()


def make_files(tmp_path, sizes, seed=1):
    rnd = random.Random(seed)
    paths = []
    for i, n in enumerate(sizes):
        p = tmp_path / f"src-{i:03d}"
        with open(p, "wb") as f:
            left = n
            while left:
                k = min(left, 4 * MiB)
                f.write(rnd.randbytes(k))
                left -= k
        paths.append(p)
    return paths


# 200 sizes from 0 bytes to 64 MiB: mostly small, some multipart.
def mixed_sizes(n=200, seed=3):
    rnd = random.Random(seed)
    sizes = [0, 1, 64 * MiB, 20 * MiB + 7]
    while len(sizes) < n:
        r = rnd.random()
        if r < 0.6:
            sizes.append(rnd.randint(0, 256 * 1024))
        elif r < 0.9:
            sizes.append(rnd.randint(256 * 1024, 4 * MiB))
        else:
            sizes.append(rnd.randint(5 * MiB, 12 * MiB))
    return sizes


@pytest.fixture
def buckets(boto):
    from conftest import _empty_bucket
    import uuid
    names = [f"t-{uuid.uuid4().hex[:20]}" for _ in range(3)]
    for n in names:
        boto.create_bucket(Bucket=n)
    yield names
    for n in names:
        _empty_bucket(boto, n)


def no_uploads(client, bucket):
    return client.list_multipart_uploads(bucket) == []


def test_200_mixed_transfers_under_one_budget(client, buckets, tmp_path):
    sizes = mixed_sizes()
    srcs = make_files(tmp_path, sizes)
    budget = 40 * MiB
    # Buffered uploads and stream downloads take every part from the pool:
    # the sum of their parts is far above the budget.
    cfg = TransferConfig(part_size=5 * MiB, multipart_threshold=5 * MiB, concurrency=8,
                         buffer_strategy="buffered", memory_limit=budget, pool="cache")
    assert sum(sizes) > 5 * budget
    keys = [(buckets[i % 3], f"obj/{i:03d}") for i in range(len(sizes))]
    with client.transfer_manager(cfg) as tm:
        ups = [tm.upload(str(p), b, k) for p, (b, k) in zip(srcs, keys)]
    results = [f.result() for f in ups]
    assert [r.bytes for r in results] == sizes
    assert tm.stats["finished"] == len(sizes) and tm.stats["failed"] == 0
    assert 0 < tm.stats["peak_buffer_bytes"] <= budget
    assert all(r.peak_buffer_bytes <= budget for r in results)
    assert any(r.multipart for r in results)
    # Down again: half to files, half in order to write()-only sinks (pool
    # buffers), in one batch with an upload of a memory buffer mixed in.
    sinks = {}
    extra = os.urandom(3 * MiB)
    with client.transfer_manager(cfg) as tm:
        futs = {}
        for i, (b, k) in enumerate(keys):
            if i % 2:
                sinks[i] = HashSink()
                futs[i] = tm.download(b, k, sinks[i])
            else:
                futs[i] = tm.download(b, k, str(tmp_path / f"dst-{i:03d}"))
        up = tm.upload(extra, buckets[0], "extra")
    for i, f in futs.items():
        assert f.result().bytes == sizes[i]
    assert up.result().bytes == len(extra)
    assert 0 < tm.stats["peak_buffer_bytes"] <= budget
    for i, p in enumerate(srcs):
        want = file_sha(p)
        got = sinks[i].h.hexdigest() if i in sinks else file_sha(tmp_path / f"dst-{i:03d}")
        assert got == want, f"object {i} ({sizes[i]} bytes) differs"
    assert not [n for n in os.listdir(tmp_path) if ".s3xfer-" in n]
    for b in buckets:
        assert no_uploads(client, b)


def test_one_failure_stays_its_own(client, bucket, tmp_path):
    data = [os.urandom(300_000 + i) for i in range(20)]
    with client.transfer_manager(TransferConfig(concurrency=4)) as tm:
        good = [tm.upload(d, bucket, f"k{i}") for i, d in enumerate(data)]
        bad = tm.upload(b"abc", "no-such-bucket-" + bucket[-8:], "k")
        missing = tm.download(bucket, "not-there", str(tmp_path / "nt"))
    for i, f in enumerate(good):
        assert f.result().bytes == len(data[i])
    with pytest.raises(s3xfer.NoSuchBucket) as e:
        bad.result()
    assert "does not exist" in str(e.value)
    with pytest.raises(s3xfer.NoSuchKey):
        missing.result()
    assert not (tmp_path / "nt").exists()
    assert not [n for n in os.listdir(tmp_path) if ".s3xfer-" in n]
    assert tm.stats["failed"] == 2 and tm.stats["finished"] == 22
    for i, d in enumerate(data):
        assert client.get_object(bucket, f"k{i}")[0] == d


def test_fail_fast_cancels_the_rest(client, bucket):
    data = os.urandom(2 * MiB)
    with client.transfer_manager(TransferConfig(concurrency=2), fail_fast=True) as tm:
        bad = tm.upload(b"x", "no-such-bucket-" + bucket[-8:], "k")
        rest = [tm.upload(data, bucket, f"r{i}") for i in range(30)]
    with pytest.raises(s3xfer.NoSuchBucket):
        bad.result()
    cancelled = [f for f in rest if f.exception() is not None]
    assert cancelled, "fail_fast cancelled nothing"
    assert all(isinstance(f.exception(), s3xfer.TransferCancelled) for f in cancelled)
    assert no_uploads(client, bucket)


def test_cancel_one_leaves_nothing_of_its_own(client, bucket, tmp_path):
    big = os.urandom(48 * MiB)
    small = [os.urandom(100_000) for _ in range(10)]
    client.upload_bytes(big, bucket, "big-src")
    cfg = TransferConfig(part_size=5 * MiB, concurrency=4)
    started = threading.Event()

    def progress(n):
        started.set()

    with client.transfer_manager(cfg) as tm:
        up = tm.upload(big, bucket, "big", progress=progress)
        down = tm.download(bucket, "big-src", str(tmp_path / "big-out"))
        others = [tm.upload(d, bucket, f"s{i}") for i, d in enumerate(small)]
        assert started.wait(30)
        assert up.cancel()
        down._manager._cancel(down.transfer_id)  # cancelled in the engine, future left to report it
    assert up.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        up.result()
    with pytest.raises(s3xfer.TransferCancelled):
        down.result()
    for i, f in enumerate(others):
        assert f.result().bytes == len(small[i])
    assert no_uploads(client, bucket)
    assert "big" not in [o["key"] for o in client.list_objects(bucket)]
    assert not (tmp_path / "big-out").exists()
    assert not [n for n in os.listdir(tmp_path) if ".s3xfer-" in n]


def test_cancel_all_leaves_nothing(client, bucket, tmp_path):
    blobs = [os.urandom(12 * MiB) for _ in range(4)]
    for i, b in enumerate(blobs):
        client.upload_bytes(b, bucket, f"src{i}")
    cfg = TransferConfig(part_size=5 * MiB, concurrency=4)
    with client.transfer_manager(cfg) as tm:
        futs = [tm.upload(b, bucket, f"up{i}") for i, b in enumerate(blobs)]
        futs += [tm.download(bucket, f"src{i}", str(tmp_path / f"d{i}")) for i in range(4)]
        time.sleep(0.05)
        tm.cancel_all()
    assert all(f.cancelled() or f.done() for f in futs)
    assert no_uploads(client, bucket)
    keys = {o["key"] for o in client.list_objects(bucket)}
    # What finished before the cancel is whole; nothing else exists.
    for i, b in enumerate(blobs):
        if f"up{i}" in keys:
            assert client.get_object(bucket, f"up{i}")[0] == b
    assert not [n for n in os.listdir(tmp_path) if ".s3xfer-" in n]
    for i in range(4):
        p = tmp_path / f"d{i}"
        if p.exists():
            assert p.read_bytes() == blobs[i]


def test_progress_exception_cancels_that_transfer_only(client, bucket):
    data = [os.urandom(6 * MiB) for _ in range(6)]

    class Boom(Exception):
        pass

    def boom(n):
        raise Boom("from the callback")

    cfg = TransferConfig(part_size=5 * MiB, concurrency=4)
    with client.transfer_manager(cfg) as tm:
        # Multipart, so the callback runs before the object is complete.
        bad = tm.upload(os.urandom(16 * MiB), bucket, "bad", progress=boom)
        good = [tm.upload(d, bucket, f"g{i}") for i, d in enumerate(data[1:])]
    with pytest.raises(Boom, match="from the callback"):
        bad.result()
    for f in good:
        assert f.result().bytes == 6 * MiB
    assert no_uploads(client, bucket)
    assert "bad" not in [o["key"] for o in client.list_objects(bucket)]


def test_futures_protocol(client, bucket):
    with client.transfer_manager() as tm:
        f = tm.upload(b"hello", bucket, "h")
        assert isinstance(f, concurrent.futures.Future)
        r = f.result(timeout=30)
        assert r.bytes == 5 and f.done() and f.exception() is None and not f.cancel()
        buf = bytearray(5)
        g = tm.download(bucket, "h", buf)
        done = list(concurrent.futures.as_completed([g], timeout=30))
        assert done == [g] and bytes(buf) == b"hello"
        assert tm.wait(10)
    with pytest.raises(s3xfer.InvalidConfigError):
        tm.upload(b"x", bucket, "late")


def test_bad_arguments_fail_at_once(client, bucket):
    with client.transfer_manager() as tm:
        with pytest.raises(s3xfer.InvalidConfigError):
            tm.upload(b"x", "bad/name", "k")
        with pytest.raises(s3xfer.InvalidConfigError):
            tm.upload(b"x", bucket, "")
        with pytest.raises(TypeError):
            tm.upload(12, bucket, "k")
        missing = tm.upload("/nonexistent/file", bucket, "k")
    with pytest.raises(s3xfer.S3xferError, match="cannot open /nonexistent/file"):
        missing.result()


def test_a_part_that_can_never_fit_is_refused(client, bucket):
    cfg = TransferConfig(part_size=8 * MiB, memory_limit=4 * MiB, buffer_strategy="buffered")
    with client.transfer_manager(cfg) as tm:
        f = tm.upload(os.urandom(9 * MiB), bucket, "k")
        g = tm.download(bucket, "k", HashSink())
    with pytest.raises(s3xfer.S3xferError, match="memory_limit"):
        f.result()
    with pytest.raises(s3xfer.S3xferError, match="memory_limit"):
        g.result()
    assert no_uploads(client, bucket)


@pytest.fixture
def proxy(s3env):
    p = FaultProxy.from_url(s3env["endpoint_url"], seed=11, decisions="keyed")
    p.start()
    yield p
    p.stop()


def test_batch_through_faults_is_byte_exact(s3env, proxy, client, bucket, tmp_path):
    pc = s3xfer.Client(endpoint_url=proxy.url, region=s3env["region"], access_key=s3env["access_key"],
                       secret_key=s3env["secret_key"])
    sizes = [0, 1000, 300_000, 6 * MiB, 11 * MiB + 3, 17 * MiB] * 3
    srcs = make_files(tmp_path, sizes, seed=5)
    # The slow-part timeout (2.5 s) sits well above what a loaded machine
    # gives a healthy part, and below the 5 s the proxy holds a slow one.
    cfg = TransferConfig(part_size=5 * MiB, multipart_threshold=5 * MiB, concurrency=6, max_attempts=10,
                         memory_limit=20 * MiB, buffer_strategy="buffered", slow_part_timeout=2500)
    rules = ["slowdown_503:p=0.1", "reset_request:kind=upload_part,after=64K,p=0.05",
             "reset_response:kind=ranged_get,after=64K,p=0.05", "delay_first_byte:p=0.03,delay=5"]
    proxy.set_rules(rules)
    try:
        with pc.transfer_manager(cfg) as tm:
            ups = [tm.upload(str(p), bucket, f"f{i}") for i, p in enumerate(srcs)]
        assert [f.result().bytes for f in ups] == sizes
        with pc.transfer_manager(cfg) as tm:
            downs = [tm.download(bucket, f"f{i}", str(tmp_path / f"o{i}")) for i in range(len(sizes))]
        assert [f.result().bytes for f in downs] == sizes
    finally:
        pc.close()
    faults = sum(proxy.stats()["faults"].values())
    assert faults > 0
    retries = sum(f.result().retries for f in ups + downs)
    assert retries > 0
    for i, p in enumerate(srcs):
        assert file_sha(tmp_path / f"o{i}") == file_sha(p)
    assert no_uploads(client, bucket)


PEAK_SCRIPT = r"""
import hashlib, json, os, sys
import s3xfer
from s3xfer import TransferConfig

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

class Sink:
    def __init__(self): self.h = hashlib.sha256()
    def write(self, b): self.h.update(b); return len(b)

cfg = json.loads(sys.argv[1])
srcs, bucket = cfg["srcs"], cfg["bucket"]
c = s3xfer.Client()
tc = TransferConfig(part_size=5 << 20, multipart_threshold=5 << 20, concurrency=8,
                    buffer_strategy="buffered", memory_limit=cfg["budget"], pool=cfg["pool"])
# Warm up the module and one connection before the baseline.
c.put_object(bucket, "warm", b"x")
base = status("VmRSS:")
with c.transfer_manager(tc) as tm:
    ups = [tm.upload(p, bucket, f"m{i}") for i, p in enumerate(srcs)]
[f.result() for f in ups]
sinks = [Sink() for _ in srcs]
with c.transfer_manager(tc) as tm:
    downs = [tm.download(bucket, f"m{i}", s) for i, s in enumerate(sinks)]
[f.result() for f in downs]
print(json.dumps({"base": base, "hwm": status("VmHWM:"), "peak_buffers": tm.stats["peak_buffer_bytes"],
                  "digests": [s.h.hexdigest() for s in sinks]}))
"""


@pytest.mark.parametrize("pool", ["bounded", "cache"])
def test_peak_rss_within_budget_plus_constant(s3env, bucket, tmp_path, pool):
    sizes = [40 * MiB, 33 * MiB] + [3 * MiB + i for i in range(30)] + [64 * 1024 * (i + 1) for i in range(40)]
    srcs = make_files(tmp_path, sizes, seed=9)
    budget = 32 * MiB
    env = dict(os.environ, AWS_ENDPOINT_URL=s3env["endpoint_url"], AWS_ACCESS_KEY_ID=s3env["access_key"],
               AWS_SECRET_ACCESS_KEY=s3env["secret_key"], AWS_REGION=s3env["region"])
    arg = json.dumps({"srcs": [str(p) for p in srcs], "bucket": bucket, "budget": budget, "pool": pool})
    out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, arg], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["digests"] == [file_sha(p) for p in srcs]
    assert 0 < r["peak_buffers"] <= budget
    # The constant: per open transfer a few hundred KiB (part records, a
    # file writer's queue, curl's buffers), for concurrency + 4 of them.
    grew = r["hwm"] - r["base"]
    assert grew <= budget + 48 * MiB, f"peak RSS grew {grew / MiB:.1f} MiB over a {budget / MiB:.0f} MiB budget"
