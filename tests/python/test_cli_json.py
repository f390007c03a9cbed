"""The CLI's --json output (issue 13, "progress and results say when a
transfer is waiting on throttling"): JSON lines that parse, a final record
that matches the object, progress records that show a storm of 503 SlowDown
(from the fault proxy in front of the real server) while it lasts, error
records with the same exit codes as without --json, hostile names escaped
into valid JSON, and the progress bar's throttling text within the terminal
width."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from faultproxy import FaultProxy

MiB = 1 << 20


def run(cli, *args, input=None, env=None):
    return subprocess.run([cli, *args], input=input, capture_output=True, env=env, timeout=120)


def records(raw: bytes) -> list:
    """Every line is one JSON object; the text is strict UTF-8 with no raw
    control character (a terminal shows it as it is)."""
    text = raw.decode("utf-8")
    lines = text.splitlines()
    assert lines, "no output"
    out = []
    for line in lines:
        assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in line), repr(line)
        rec = json.loads(line)
        assert isinstance(rec, dict) and rec["type"] in ("progress", "result"), rec
        out.append(rec)
    assert out[-1]["type"] == "result" and all(r["type"] == "progress" for r in out[:-1])
    return out


RESULT_FIELDS = {"bytes", "parts", "seconds", "io_seconds", "requests", "retries", "retries_http",
                 "retries_network", "retries_timeout", "retries_first_byte", "retries_throttled",
                 "throttled_seconds", "slow_part_timeout_ms", "part_size", "concurrency", "pool_allocations",
                 "pool_bytes_allocated", "peak_buffer_bytes", "buffer_waits", "multipart", "etag", "upload_id",
                 "fsyncs", "writeback_calls", "sync_seconds", "requests_received_elsewhere",
                 "receive_threads"}


def test_cp_json_upload_and_download(cli, boto, bucket, tmp_path):
    data = os.urandom(12 * MiB + 5)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    p = run(cli, "cp", str(src), f"s3://{bucket}/j/k", "--json", "--progress", "--part-size", "5MiB")
    assert p.returncode == 0, p.stderr
    recs = records(p.stdout)
    final = recs[-1]
    head = boto.head_object(Bucket=bucket, Key="j/k")
    assert final["command"] == "cp" and final["direction"] == "upload" and final["outcome"] == "ok"
    assert final["exit_code"] == 0 and "error" not in final
    assert final["source"] == str(src) and final["destination"] == f"s3://{bucket}/j/k"
    assert final["bucket"] == bucket and final["key"] == "j/k"
    assert set(final["result"]) == RESULT_FIELDS
    r = final["result"]
    assert r["bytes"] == len(data) and r["parts"] == 3 and r["multipart"] is True
    assert r["etag"] == head["ETag"] and head["ContentLength"] == len(data)
    assert r["retries_throttled"] == 0 and r["throttled_seconds"] == 0
    assert final["throttle"]["active"] is False
    # Progress records: bytes never go back and reach the total.
    prog = recs[:-1]
    assert prog, "--progress gives progress records"
    done = [x["bytes"] for x in prog]
    assert done == sorted(done) and done[-1] == len(data)
    assert all(x["total"] == len(data) and x["throttle"]["active"] is False for x in prog)
    assert boto.get_object(Bucket=bucket, Key="j/k")["Body"].read() == data

    # Without --progress: the result record only, and no summary line.
    dst = tmp_path / "dst.bin"
    p = run(cli, "cp", f"s3://{bucket}/j/k", str(dst), "--json")
    assert p.returncode == 0, p.stderr
    recs = records(p.stdout)
    assert len(recs) == 1 and recs[0]["direction"] == "download" and recs[0]["result"]["bytes"] == len(data)
    assert recs[0]["destination"] == str(dst)
    assert dst.read_bytes() == data

    # To stdout: the object owns stdout, the records go to stderr.
    p = run(cli, "cp", f"s3://{bucket}/j/k", "-", "--json", "--progress")
    assert p.returncode == 0, p.stderr
    assert p.stdout == data
    recs = records(p.stderr)
    assert recs[-1]["destination"] == "-" and recs[-1]["result"]["bytes"] == len(data)


def test_json_failure_keeps_the_exit_code(cli, s3env, bucket, tmp_path):
    dst = tmp_path / "out.bin"
    plain = run(cli, "cp", f"s3://{bucket}/missing", str(dst))
    p = run(cli, "cp", f"s3://{bucket}/missing", str(dst), "--json")
    assert plain.returncode == p.returncode == 1
    (final,) = records(p.stdout)
    assert final["outcome"] == "failed" and final["exit_code"] == 1
    err = final["error"]
    assert err["http_status"] == 404 and err["s3_code"] == "NoSuchKey"
    assert err["code"] == -8 and err["name"] and "NoSuchKey" in err["message"]
    assert not dst.exists()

    f = tmp_path / "f"
    f.write_bytes(b"x")
    env = dict(os.environ, AWS_SECRET_ACCESS_KEY="not-the-secret")
    p = run(cli, "--endpoint-url", s3env["endpoint_url"], "cp", str(f), f"s3://{bucket}/x", "--json", env=env)
    assert p.returncode == 1
    (final,) = records(p.stdout)
    assert final["error"]["s3_code"] == "SignatureDoesNotMatch" and final["error"]["http_status"] == 403
    assert b"not-the-secret" not in p.stdout

    # A usage error is still one (exit 2, text on stderr, no record).
    p = run(cli, "cp", "a", "b", "--json")
    assert p.returncode == 2 and p.stdout == b""


def test_json_rm_mb_rb(cli, boto):
    name = "s3xfer-json-" + os.urandom(4).hex()
    p = run(cli, "mb", f"s3://{name}", "--json")
    assert p.returncode == 0, p.stderr
    (rec,) = records(p.stdout)
    assert rec["command"] == "mb" and rec["bucket"] == name and rec["outcome"] == "ok"
    boto.put_object(Bucket=name, Key="k", Body=b"1")
    (rec,) = records(run(cli, "rm", f"s3://{name}/k", "--json").stdout)
    assert rec["command"] == "rm" and rec["key"] == "k" and rec["outcome"] == "ok"
    (rec,) = records(run(cli, "rb", f"s3://{name}", "--json").stdout)
    assert rec["command"] == "rb" and rec["outcome"] == "ok"
    p = run(cli, "rb", f"s3://{name}", "--json")
    assert p.returncode == 1
    (rec,) = records(p.stdout)
    assert rec["outcome"] == "failed" and rec["error"]["http_status"] == 404


def test_json_escapes_hostile_names(cli, boto, bucket, tmp_path):
    # A key with controls, an escape sequence, DEL, a C1 control, a
    # right-to-left override and a quote; a local path that is not UTF-8.
    key = 'evil\x1b[31m\n"quoted"\\\x07\x7f\u0085\u202etxt.exe\u2028end'
    raw_name = b"src-\xff\xfe-\x1b]0;title\x07.bin"
    src = os.path.join(os.fsencode(str(tmp_path)), raw_name)
    with open(src, "wb") as f:
        f.write(b"hostile")
    p = run(cli, "cp", src, f"s3://{bucket}/{key}".encode(), "--json")
    assert p.returncode == 0, p.stderr
    (final,) = records(p.stdout)
    assert final["key"] == key and final["destination"] == f"s3://{bucket}/{key}"
    # The bytes that are not UTF-8 come back exactly through surrogateescape.
    assert final["source"].encode("utf-8", "surrogateescape") == src
    for raw in (b"\x1b", b"\x07", b"\x7f", b"\xc2\x85", "\u202e".encode(), "\u2028".encode(), b"\xff"):
        assert raw not in p.stdout
    assert boto.get_object(Bucket=bucket, Key=key)["Body"].read() == b"hostile"


@pytest.fixture
def proxy_env(s3env):
    p = FaultProxy.from_url(s3env["endpoint_url"], seed=13, decisions="keyed")
    p.start()
    env = dict(os.environ, AWS_ENDPOINT_URL=p.url, AWS_ACCESS_KEY_ID=s3env["access_key"],
               AWS_SECRET_ACCESS_KEY=s3env["secret_key"], AWS_REGION=s3env["region"])
    yield p, env
    p.stop()


def storm_rules(seconds: float, start: float = 0.3):
    # As in test_throttling.py: the bandwidth cap keeps the transfer running
    # when the storm starts.
    return [f"storm:start={start},duration={seconds}", "bandwidth:rate=4M,direction=both"]


def test_json_storm_shows_throttled_progress(cli, proxy_env, boto, bucket, tmp_path):
    proxy, env = proxy_env
    data = os.urandom(32 * MiB + 7)
    src = tmp_path / "src"
    src.write_bytes(data)
    proxy.set_rules(storm_rules(3))
    proxy.reset_stats()
    p = run(cli, "cp", str(src), f"s3://{bucket}/storm", "--json", "--progress", "--part-size", "5MiB",
            "--concurrency", "8", env=env)
    assert p.returncode == 0, p.stderr
    recs = records(p.stdout)
    active = [x for x in recs[:-1] if x["throttle"]["active"]]
    assert active, "no progress record saw the throttling"
    assert all(x["throttle"]["throttles"] >= 1 and x["throttle"]["rate"] > 0 for x in active)
    secs = [x["throttle"]["seconds"] for x in active]
    assert max(secs) > 1.0, secs
    final = recs[-1]
    assert final["outcome"] == "ok"
    assert final["result"]["retries_throttled"] >= 1 and final["result"]["throttled_seconds"] > 1.0, final
    assert final["throttle"]["throttles"] >= final["result"]["retries_throttled"]
    proxy.set_rules([])
    assert boto.get_object(Bucket=bucket, Key="storm")["Body"].read() == data

    # Download through a storm to stdout: records on stderr, bytes on stdout.
    proxy.set_rules(storm_rules(2))
    p = run(cli, "cp", f"s3://{bucket}/storm", "-", "--json", "--progress", "--part-size", "5MiB", env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == data
    recs = records(p.stderr)
    assert any(x["throttle"]["active"] for x in recs[:-1])
    assert recs[-1]["result"]["retries_throttled"] >= 1


def test_bar_shows_throttling_within_the_width(cli, proxy_env, bucket, tmp_path):
    proxy, env = proxy_env
    src = tmp_path / "src"
    src.write_bytes(os.urandom(32 * MiB))
    proxy.set_rules(storm_rules(3))
    for cols in (100, 60, 30):
        env["COLUMNS"] = str(cols)  # stderr is a pipe here: the bar falls back to COLUMNS
        p = run(cli, "cp", str(src), f"s3://{bucket}/bar", "--progress", "--part-size", "5MiB", env=env)
        assert p.returncode == 0, p.stderr
        err = p.stderr.decode()
        frames = [f for line in err.split("\n") for f in line.split("\r") if f]
        bars = [f for f in frames if not f.startswith("s3xfer:")]
        assert bars and all(len(f) <= cols - 1 for f in bars), (cols, [f for f in bars if len(f) >= cols])
        if cols >= 100:
            assert any("throttled: " in f and "req/s" in f for f in bars), bars
            assert any(f.startswith("[") for f in bars)
        if cols == 30:
            assert not any(f.startswith("[") for f in bars), "no room for the bar itself"
        proxy.set_rules(storm_rules(3))  # a new storm for the next run


@pytest.mark.parametrize("tool", ["native", "python"])
def test_json_local_failure_names_the_system_errno(tool, cli, boto, bucket, tmp_path):
    """A download whose local writes fail: the error record carries the
    library's code (-3) and the system's errno (sys_errno), EFBIG past a
    file-size limit, ENOSPC for a stdout that is /dev/full."""
    import errno
    import sys

    from localfail import limit_file_size
    argv = [cli] if tool == "native" else [sys.executable, "-m", "s3xfer"]
    boto.put_object(Bucket=bucket, Key="j/big", Body=os.urandom(6 * MiB + 1))
    dst = tmp_path / "big"
    p = subprocess.run([*argv, "cp", "--part-size", "5MiB", f"s3://{bucket}/j/big", str(dst), "--json"],
                       capture_output=True, timeout=120, preexec_fn=limit_file_size(MiB))
    assert p.returncode == 1, p.stderr
    (final,) = records(p.stdout)
    err = final["error"]
    assert final["outcome"] == "failed" and err["code"] == -3 and err["http_status"] == 0, final
    assert err["sys_errno"] == errno.EFBIG and "File too large" in err["message"], final
    assert list(tmp_path.iterdir()) == []

    with open("/dev/full", "wb") as full:
        p = subprocess.run([*argv, "cp", f"s3://{bucket}/j/big", "-", "--json"], stdout=full,
                           stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 1, p.stderr
    (final,) = [json.loads(x) for x in p.stderr.decode().splitlines() if x.startswith("{")]
    assert "writing standard output: No space left on device" in p.stderr.decode()
    assert final["outcome"] == "failed" and final["error"]["code"] == -3, final
    assert final["error"]["sys_errno"] == errno.ENOSPC, final


def test_json_error_fields(cli, bucket, tmp_path):
    """Every error record has the same fields, sys_errno 0 for a server's error."""
    p = run(cli, "cp", f"s3://{bucket}/missing", str(tmp_path / "x"), "--json")
    (final,) = records(p.stdout)
    assert set(final["error"]) == {"code", "name", "message", "http_status", "s3_code", "request_id", "sys_errno"}
    assert final["error"]["sys_errno"] == 0


# ---- python -m s3xfer --json: the same records --------------------------------

def pyrun(*args, input=None, env=None):
    import sys
    return subprocess.run([sys.executable, "-m", "s3xfer", *args], input=input, capture_output=True,
                          env=env, timeout=120)


def test_python_tool_json(boto, bucket, tmp_path):
    data = os.urandom(6 * MiB + 1)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    key = 'py\x1b[2J\n"k"\u202e\x85'
    p = pyrun("cp", str(src), f"s3://{bucket}/{key}", "--json", "--progress", "--part-size", "5MiB")
    assert p.returncode == 0, p.stderr
    recs = records(p.stdout)
    final = recs[-1]
    assert final["outcome"] == "ok" and final["key"] == key and final["direction"] == "upload"
    assert set(final["result"]) == RESULT_FIELDS
    assert final["result"]["bytes"] == len(data)
    assert final["result"]["etag"] == boto.head_object(Bucket=bucket, Key=key)["ETag"]
    assert recs[-2]["bytes"] == len(data) and recs[-2]["total"] == len(data)
    assert all(set(x["throttle"]) == {"active", "rate", "throttles", "seconds", "seconds_total"} for x in recs)

    p = pyrun("cp", f"s3://{bucket}/{key}", "-", "--json")
    assert p.returncode == 0 and p.stdout == data
    (final,) = records(p.stderr)
    assert final["result"]["bytes"] == len(data) and final["destination"] == "-"

    p = pyrun("cp", f"s3://{bucket}/missing", str(tmp_path / "out"), "--json")
    assert p.returncode == 1
    (final,) = records(p.stdout)
    assert final["outcome"] == "failed" and final["exit_code"] == 1
    assert final["error"]["http_status"] == 404 and final["error"]["s3_code"] == "NoSuchKey"

    (rec,) = records(pyrun("rm", f"s3://{bucket}/{key}", "--json").stdout)
    assert rec["command"] == "rm" and rec["key"] == key and rec["outcome"] == "ok"


def test_python_tool_json_storm(proxy_env, boto, bucket, tmp_path):
    proxy, env = proxy_env
    data = os.urandom(32 * MiB + 3)
    src = tmp_path / "src"
    src.write_bytes(data)
    proxy.set_rules(storm_rules(3))
    p = pyrun("--endpoint-url", proxy.url, "cp", str(src), f"s3://{bucket}/pystorm", "--json", "--progress",
              "--part-size", "5MiB", "--concurrency", "8", env=env)
    assert p.returncode == 0, p.stderr
    recs = records(p.stdout)
    active = [x for x in recs[:-1] if x["throttle"]["active"]]
    assert active and all(x["throttle"]["throttles"] >= 1 for x in active)
    assert recs[-1]["result"]["retries_throttled"] >= 1
    proxy.set_rules([])
    assert boto.get_object(Bucket=bucket, Key="pystorm")["Body"].read() == data
