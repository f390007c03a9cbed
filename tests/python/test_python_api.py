"""The Python package's behaviour: the GIL is released during transfers,
Ctrl-C cancels cleanly, callbacks' exceptions come back with their
tracebacks, knobs are validated from C's bounds, enums, results, errors,
imports and help."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import pytest

import s3xfer
from faultproxy import FaultProxy
from s3xfer import TransferConfig

MiB = 1 << 20
P = 5 * MiB


@pytest.fixture
def slow_proxy(s3env):
    """1 MiB/s each way: transfers take seconds."""
    p = FaultProxy.from_url(s3env["endpoint_url"], rules=["bandwidth:rate=1MiB,direction=both"])
    p.start()
    yield p
    p.stop()


def test_gil_released_during_transfer(s3env, slow_proxy, bucket):
    c = s3xfer.Client(endpoint_url=slow_proxy.url, region=s3env["region"], access_key=s3env["access_key"],
                      secret_key=s3env["secret_key"])
    done = threading.Event()
    result = {}

    def upload():
        result["r"] = c.upload_bytes(os.urandom(3 * MiB), bucket, "gil", config=TransferConfig(concurrency=1))
        done.set()

    t = threading.Thread(target=upload)
    t.start()
    ticks = 0
    start = time.monotonic()
    while not done.is_set() and time.monotonic() - start < 60:
        ticks += 1  # pure Python work: only runs if the transfer does not hold the GIL
    t.join()
    took = time.monotonic() - start
    assert result["r"].bytes == 3 * MiB
    assert took > 1.0  # the bandwidth cap made it slow
    assert ticks > 100_000 * took  # millions of iterations per second when the GIL is free
    c.close()


def test_ctrl_c_cancels_within_a_second_and_cleans_up(s3env, slow_proxy, bucket, client, tmp_path):
    # The child's SIGINT is Python's own handler whatever the test runner
    # inherited: a shell that starts pytest in the background (no job
    # control) has SIGINT ignored, and Python leaves an ignored SIGINT alone.
    script = textwrap.dedent(f"""
        import os, signal, sys, time, s3xfer
        signal.signal(signal.SIGINT, signal.default_int_handler)
        c = s3xfer.Client(endpoint_url={slow_proxy.url!r}, region={s3env['region']!r},
                          access_key={s3env['access_key']!r}, secret_key={s3env['secret_key']!r})
        data = os.urandom(30 << 20)
        print("ready", flush=True)
        try:
            c.upload_bytes(data, {bucket!r}, "interrupted",
                           config=s3xfer.TransferConfig(part_size={P}, concurrency=2))
        except KeyboardInterrupt:
            print("interrupted", time.monotonic(), flush=True)
            sys.exit(42)
        print("finished", flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ))
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 42, out
    when = float(out.split()[1])
    assert when - sent < 1.0
    assert client.list_multipart_uploads(bucket) == []
    assert client.list_objects(bucket) == []


def test_callback_exception_keeps_its_traceback(client, bucket):
    def deep_failure(n):
        raise ValueError("from the callback")

    with pytest.raises(ValueError) as ei:
        client.upload_bytes(os.urandom(2 * P), bucket, "tb", config=TransferConfig(part_size=P),
                            progress=deep_failure)
    frames = traceback.extract_tb(ei.value.__traceback__)
    assert any(f.name == "deep_failure" for f in frames)
    assert client.list_multipart_uploads(bucket) == []


def test_progress_works_with_a_tqdm_like_update(client, bucket):
    class Bar:
        n = 0

        def update(self, k):
            self.n += k

    bar = Bar()
    client.upload_bytes(os.urandom(3 * P + 1), bucket, "bar", config=TransferConfig(part_size=P),
                        progress=bar.update)
    assert bar.n == 3 * P + 1
    bar2 = Bar()
    client.download_fileobj(bucket, "bar", open(os.devnull, "wb"), progress=bar2.update)
    assert bar2.n == 3 * P + 1


def test_transfer_config_validation_names_knob_and_range():
    lo, hi, default = TransferConfig.bounds("concurrency")
    assert lo == 1 and hi >= 256 and lo <= default <= hi
    with pytest.raises(s3xfer.InvalidConfigError, match=rf"concurrency = {hi + 1} is out of range \[1, {hi}\]"):
        TransferConfig(concurrency=hi + 1)
    with pytest.raises(ValueError):  # InvalidConfigError is a ValueError
        TransferConfig(part_size=5 * MiB - 1)
    with pytest.raises(s3xfer.InvalidConfigError, match="must be an int"):
        TransferConfig(part_size="big")
    with pytest.raises(s3xfer.InvalidConfigError, match="slow_part_timeout"):
        TransferConfig(slow_part_timeout="sometimes")
    with pytest.raises(s3xfer.InvalidConfigError, match="slow_part_timeout"):
        TransferConfig(slow_part_timeout=-5)
    cfg = TransferConfig(pool=s3xfer.Pool.CACHE, buffer_strategy="BUFFERED", checksum=s3xfer.Checksum.CRC32C,
                         slow_part_timeout=1500)
    assert "pool" in repr(cfg)
    assert cfg.concurrency == default  # unset knobs report the C default
    plain = TransferConfig()
    assert (plain.pool, plain.buffer_strategy, plain.checksum, plain.slow_part_timeout) == \
        ("bounded", "auto", "crc32c", "off")
    assert plain.validate_checksum is True and plain.leave_parts_on_error is False


def test_result_is_a_plain_readable_object(client, bucket):
    r = client.upload_bytes(b"x" * 1000, bucket, "r")
    assert isinstance(r, s3xfer.TransferResult)
    text = repr(r)
    assert "bytes=1000" in text and "MiB/s" in text
    assert r.bytes == 1000 and r.parts == 1 and r.requests >= 1 and r.multipart is False
    with pytest.raises(Exception):
        r.bytes = 5  # frozen


def test_exceptions_carry_details_and_pickle(client, bucket):
    with pytest.raises(s3xfer.NoSuchKey) as ei:
        client.get_object(bucket, "nope")
    e = ei.value
    assert (e.status, e.code) == (404, "NoSuchKey") and e.message == str(e)
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is s3xfer.NoSuchKey and e2.status == 404 and e2.code == "NoSuchKey"
    assert issubclass(s3xfer.ConnectionError, OSError)
    assert issubclass(s3xfer.SignatureDoesNotMatch, s3xfer.ClientError)
    assert issubclass(s3xfer.InvalidConfigError, ValueError)


def test_import_is_quiet_and_fast():
    # What keeps the import quick is what it does not load: heavy modules
    # (the transfer manager's concurrent.futures, asyncio) come on first use.
    # The time bound is loose: on a loaded 2-core machine a 40 ms import
    # takes 150 ms now and then.
    code = ("import time; t = time.perf_counter(); import s3xfer; "
            "import sys; sys.stderr.write(str(time.perf_counter() - t)); "
            "print(' '.join(m for m in ('concurrent.futures', 'asyncio', 'boto3') if m in sys.modules))")
    times = []
    for _ in range(3):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and p.stdout.strip() == "", p.stdout
        times.append(float(p.stderr))
    assert min(times) < 0.5, times
    assert hasattr(s3xfer, "TransferManager") and s3xfer.TransferFuture.__name__ == "TransferFuture"


def test_help_is_useful():
    doc = s3xfer.Client.upload_file.__doc__
    assert "progress" in doc and "multipart" in doc
    for name in s3xfer.__all__:
        obj = getattr(s3xfer, name)
        if callable(obj):
            assert obj.__doc__, f"{name} has no docstring"
    for meth in ("upload_file", "upload_fileobj", "download_file", "download_fileobj", "put_object",
                 "get_object", "head_object", "delete_object", "list_objects", "create_bucket"):
        assert getattr(s3xfer.Client, meth).__doc__, meth


def test_python_m_s3xfer_cli(s3env, boto, bucket, tmp_path):
    env = dict(os.environ, AWS_ENDPOINT_URL=s3env["endpoint_url"], AWS_ACCESS_KEY_ID=s3env["access_key"],
               AWS_SECRET_ACCESS_KEY=s3env["secret_key"])
    src = tmp_path / "f"
    data = os.urandom(2 * P + 3)
    src.write_bytes(data)

    def run(*args, **kw):
        return subprocess.run([sys.executable, "-m", "s3xfer", *args], capture_output=True, env=env,
                              timeout=120, **kw)

    p = run("cp", "--part-size", "5MiB", str(src), f"s3://{bucket}/py/f")
    assert p.returncode == 0, p.stderr
    assert b"3 parts" in p.stdout
    assert boto.get_object(Bucket=bucket, Key="py/f")["Body"].read() == data
    p = run("cp", f"s3://{bucket}/py/f", "-")
    assert p.returncode == 0 and p.stdout == data
    p = run("cp", "-", f"s3://{bucket}/py/stdin", input=b"piped")
    assert p.returncode == 0
    assert b"py/" in run("ls", f"s3://{bucket}").stdout
    assert run("rm", f"s3://{bucket}/py/stdin").returncode == 0
    p = run("cp", f"s3://{bucket}/missing", str(tmp_path / "m"))
    assert p.returncode == 1 and b"NoSuchKey" in p.stderr
    assert not (tmp_path / "m").exists()


def test_cancel_token_from_another_thread(s3env, slow_proxy, bucket, client):
    c = s3xfer.Client(endpoint_url=slow_proxy.url, region=s3env["region"], access_key=s3env["access_key"],
                      secret_key=s3env["secret_key"])
    token = s3xfer.CancelToken()
    threading.Timer(1.0, token.cancel).start()
    t = time.monotonic()
    with pytest.raises(s3xfer.TransferCancelled, match="CancelToken"):
        c.upload_bytes(os.urandom(30 * MiB), bucket, "cancelled", config=TransferConfig(part_size=P, concurrency=2),
                       cancel=token)
    assert time.monotonic() - t < 2.5
    assert client.list_multipart_uploads(bucket) == []
    assert client.list_objects(bucket) == []
    c.close()
