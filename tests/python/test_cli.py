"""The s3xfer command-line tool: cp both ways (files and stdin/stdout), ls,
mb, rb, rm, --help, and one-line errors with non-zero exit codes."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import zlib

import pytest

from localfail import limit_file_size


def run(cli, *args, input=None, env=None, check=True, preexec_fn=None):
    p = subprocess.run([cli, *args], input=input, capture_output=True, env=env, timeout=120, preexec_fn=preexec_fn)
    if check and p.returncode != 0:
        raise AssertionError(f"{args} exited {p.returncode}: {p.stderr.decode()}")
    return p


def test_help(cli):
    p = run(cli, "--help")
    out = p.stdout.decode()
    for word in ("cp", "ls", "mb", "rm", "--endpoint-url"):
        assert word in out


def test_cp_file_roundtrip(cli, s3env, boto, bucket, tmp_path):
    src = tmp_path / "src.bin"
    data = os.urandom(3 * 1024 * 1024 + 17)
    src.write_bytes(data)
    p = run(cli, "cp", str(src), f"s3://{bucket}/dir/file name.bin")
    assert b"upload:" in p.stdout
    assert boto.get_object(Bucket=bucket, Key="dir/file name.bin")["Body"].read() == data
    dst = tmp_path / "dst.bin"
    run(cli, "cp", f"s3://{bucket}/dir/file name.bin", str(dst))
    assert dst.read_bytes() == data
    assert not list(tmp_path.glob("*.tmp"))


def test_cp_stdin_and_stdout(cli, boto, bucket):
    data = os.urandom(200_000)
    run(cli, "cp", "-", f"s3://{bucket}/piped", input=data)
    assert boto.get_object(Bucket=bucket, Key="piped")["Body"].read() == data
    p = run(cli, "cp", f"s3://{bucket}/piped", "-")
    assert p.stdout == data


def test_ls_mb_rb_rm(cli, boto):
    name = "s3xfer-cli-" + os.urandom(4).hex()
    run(cli, "mb", f"s3://{name}")
    boto.put_object(Bucket=name, Key="a/1", Body=b"1")
    boto.put_object(Bucket=name, Key="b", Body=b"22")
    out = run(cli, "ls", f"s3://{name}").stdout.decode()
    assert "PRE a/" in out and " b\n" in out
    out = run(cli, "ls", f"s3://{name}/a/").stdout.decode()
    assert "a/1" in out
    run(cli, "rm", f"s3://{name}/a/1")
    run(cli, "rm", f"s3://{name}/b")
    run(cli, "rb", f"s3://{name}")
    assert name not in [b["Name"] for b in boto.list_buckets()["Buckets"]]


def test_endpoint_flag(cli, s3env, bucket, tmp_path):
    env = dict(os.environ)
    env.pop("AWS_ENDPOINT_URL", None)
    src = tmp_path / "f"
    src.write_bytes(b"flag")
    run(cli, "--endpoint-url", s3env["endpoint_url"], "cp", str(src), f"s3://{bucket}/f", env=env)
    p = run(cli, "--endpoint-url", s3env["endpoint_url"], "cp", f"s3://{bucket}/f", "-", env=env)
    assert p.stdout == b"flag"


@pytest.mark.parametrize("args,needle", [
    (("cp", "/nonexistent/file", "s3://bucket/k"), "cannot open /nonexistent/file"),
    (("cp", "a", "b"), "s3://"),
    (("frobnicate",), "unknown command"),
    (("cp", "s3://b"), "SRC and DST"),
])
def test_usage_errors(cli, args, needle):
    p = run(cli, *args, check=False)
    assert p.returncode != 0
    err = p.stderr.decode()
    assert needle in err
    assert len(err.strip().splitlines()) == 1


def test_receive_threads(cli, boto, bucket, tmp_path):
    data = os.urandom(23 * 1024 * 1024 + 5)
    boto.put_object(Bucket=bucket, Key="rt", Body=data)
    dst = tmp_path / "rt.bin"
    opts = ("--receive-threads", "2")
    # Over plain http a file keeps one receiving thread unless the benchmark
    # switch says otherwise; the --json result says where the ranges went.
    for env, elsewhere in ((None, False), (dict(os.environ, S3X_RECEIVE_FILES="1"), True)):
        p = run(cli, *opts, "cp", "--json", "--part-size", "5MiB", "--concurrency", "4", f"s3://{bucket}/rt",
                str(dst), env=env)
        assert dst.read_bytes() == data
        res = json.loads(p.stdout.decode().strip().splitlines()[-1])["result"]
        assert res["receive_threads"] == 2
        assert (res["requests_received_elsewhere"] > 0) == elsewhere, (env is None, res)
        dst.unlink()
    p = run(cli, *opts, "cp", "--part-size", "5MiB", f"s3://{bucket}/rt", "-")
    assert p.stdout == data
    # auto (the default, also "0"): one receiving thread per two CPUs this
    # process may use, which a cgroup CPU limit can only lower. Pinned to one
    # CPU that is one, so a stream's ranges all stay on the transfer's thread.
    cpus = len(os.sched_getaffinity(0))
    one = sorted(os.sched_getaffinity(0))[:1]
    for how, pin in (("auto", one), ("0", one), (None, None)):
        args = ("--receive-threads", how) if how else ()
        p = subprocess.run([cli, *args, "cp", "--json", "--part-size", "5MiB", "--concurrency", "4",
                            f"s3://{bucket}/rt", "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin else None, check=True)
        assert p.stdout == data
        rec = json.loads(p.stderr.decode().strip().splitlines()[-1])["result"]
        most = 1 if pin else max(1, min(8, cpus // 2))
        assert 1 <= rec["receive_threads"] <= most, (how, cpus, rec)
        assert (rec["requests_received_elsewhere"] > 0) == (rec["receive_threads"] > 1), (how, cpus, rec)
    for bad, needle in (("-1", "no sign is allowed"), ("9", "receive_threads"), ("two", "is not a valid number")):
        p = run(cli, "--receive-threads", bad, "cp", f"s3://{bucket}/rt", str(tmp_path / "no"), check=False)
        assert p.returncode != 0 and needle in p.stderr.decode(), p.stderr
    assert not (tmp_path / "no").exists()


def test_missing_key_download_leaves_nothing(cli, bucket, tmp_path):
    dst = tmp_path / "out.bin"
    p = run(cli, "cp", f"s3://{bucket}/missing", str(dst), check=False)
    assert p.returncode == 1
    assert "NoSuchKey" in p.stderr.decode()
    assert not dst.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", ["durable", "no-fsync", "recursive"])
def test_failed_local_write_leaves_nothing(cli, boto, bucket, tmp_path, how):
    """A download whose local writes fail (here at 1 MiB) exits non-zero with
    the system's reason and the key, leaves no temporary file and no partial
    destination, and keeps a file that was at the destination before."""
    big, small = os.urandom(6 * 1024 * 1024 + 5), os.urandom(100_000)
    boto.put_object(Bucket=bucket, Key="d/big", Body=big)
    boto.put_object(Bucket=bucket, Key="d/small", Body=small)
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "big").write_bytes(b"what was here before")
    if how == "recursive":
        args = ["cp", "-r", f"s3://{bucket}/d/", str(dst) + "/"]
    else:
        args = ["cp", *(["--no-fsync"] if how == "no-fsync" else []),
                "--part-size", "5MiB", f"s3://{bucket}/d/big", str(dst / "big")]
    p = run(cli, *args, check=False, preexec_fn=limit_file_size(1 << 20))
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert "File too large" in err and "d/big" in err, err
    assert (dst / "big").read_bytes() == b"what was here before"
    want = ["big", "small"] if how == "recursive" else ["big"]
    assert sorted(e.name for e in dst.iterdir()) == want
    if how == "recursive":
        assert (dst / "small").read_bytes() == small


def keys(boto, bucket):
    return sorted(o["Key"] for o in boto.list_objects_v2(Bucket=bucket).get("Contents", []))


@pytest.mark.parametrize("tool", ["native", "python"])
def test_cp_into_a_place_adds_the_base_name(tool, cli, boto, bucket, tmp_path):
    """A DST that names a place (a key ending in '/', the bucket alone, a local
    directory or a path ending in '/') gets the source's base name added, as
    with cp and the other S3 tools; both tools do the same."""
    argv = [cli] if tool == "native" else [sys.executable, "-m", "s3xfer"]

    def tool_run(*args, input=None, ok=True):
        p = subprocess.run([*argv, *args], input=input, capture_output=True, timeout=120)
        assert (p.returncode == 0) == ok, (args, p.returncode, p.stderr.decode())
        return p

    src = tmp_path / "report.bin"
    data = os.urandom(70_000)
    src.write_bytes(data)
    tool_run("cp", str(src), f"s3://{bucket}/in/")
    tool_run("cp", str(src), f"s3://{bucket}")
    tool_run("cp", f"s3://{bucket}/in/report.bin", f"s3://{bucket}/copies/")
    assert keys(boto, bucket) == ["copies/report.bin", "in/report.bin", "report.bin"]
    assert boto.get_object(Bucket=bucket, Key="copies/report.bin")["Body"].read() == data

    out = tmp_path / "out"
    out.mkdir()
    tool_run("cp", f"s3://{bucket}/in/report.bin", str(out))
    tool_run("cp", f"s3://{bucket}/copies/report.bin", str(out / "sub") + "/", ok=False)  # no such directory
    (out / "sub").mkdir()
    tool_run("cp", f"s3://{bucket}/copies/report.bin", str(out / "sub") + "/")
    assert (out / "report.bin").read_bytes() == data and (out / "sub" / "report.bin").read_bytes() == data
    assert sorted(p.name for p in out.rglob("*")) == ["report.bin", "report.bin", "sub"]

    # Nothing to name the object or file by: an error that says so, and nothing written.
    p = tool_run("cp", "-", f"s3://{bucket}/in/", input=b"piped", ok=False)
    assert b"standard input has no name" in p.stderr
    p = tool_run("cp", f"s3://{bucket}/in/..", str(out), ok=False)  # (refused before any request)
    assert b"cannot name a file" in p.stderr
    p = tool_run("cp", str(tmp_path) + "/.", f"s3://{bucket}/in/", ok=False)
    assert b"no file name" in p.stderr
    assert keys(boto, bucket) == ["copies/report.bin", "in/report.bin", "report.bin"]
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out", "report.bin", "report.bin", "report.bin", "sub"]


def test_directory_source_is_an_error(cli, bucket, tmp_path):
    p = run(cli, "cp", str(tmp_path), f"s3://{bucket}/x", check=False)
    assert p.returncode != 0 and "directory" in p.stderr.decode()


def test_wrong_secret(cli, s3env, bucket, tmp_path):
    env = dict(os.environ, AWS_SECRET_ACCESS_KEY="not-the-secret")
    f = tmp_path / "f"
    f.write_bytes(b"x")
    p = run(cli, "--endpoint-url", s3env["endpoint_url"], "cp", str(f), f"s3://{bucket}/x", env=env, check=False)
    assert p.returncode == 1
    assert "SignatureDoesNotMatch" in p.stderr.decode()
    assert "not-the-secret" not in p.stderr.decode()


def test_unreachable_endpoint(cli, tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x")
    env = dict(os.environ, AWS_ACCESS_KEY_ID="a", AWS_SECRET_ACCESS_KEY="b")
    # (a bucket name of 3+ characters: a shorter one is refused before any connection)
    p = run(cli, "--endpoint-url", "http://127.0.0.1:9", "cp", str(f), "s3://bucket/x", env=env, check=False)
    assert p.returncode == 1
    assert "http://127.0.0.1:9" in p.stderr.decode()


def test_ctrl_c_aborts_the_upload(cli, s3env, client, bucket, tmp_path):
    """SIGINT cancels the transfer through s3x_upload_cancel from the signal
    handler: the multipart upload is aborted before the tool exits."""
    import signal
    import time
    from faultproxy import FaultProxy
    src = tmp_path / "big"
    src.write_bytes(os.urandom(30 << 20))
    with FaultProxy.from_url(s3env["endpoint_url"], rules=["bandwidth:rate=1MiB,direction=request"]) as p:
        env = dict(os.environ, AWS_ENDPOINT_URL=p.url, AWS_ACCESS_KEY_ID=s3env["access_key"],
                   AWS_SECRET_ACCESS_KEY=s3env["secret_key"])
        proc = subprocess.Popen([cli, "cp", "--no-progress", "--part-size", "5MiB", "--concurrency", "2", str(src),
                                 f"s3://{bucket}/big"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        time.sleep(2)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - sent < 5
    assert proc.returncode == 128 + signal.SIGINT, err
    assert b"cancelled" in err
    assert client.list_multipart_uploads(bucket) == []
    assert client.list_objects(bucket) == []


def test_cp_checksum_location(cli, boto, bucket, tmp_path):
    src = tmp_path / "src.bin"
    data = os.urandom(11 * 1024 * 1024 + 5)
    src.write_bytes(data)
    for loc in ("header", "trailer", "auto"):
        run(cli, "cp", str(src), f"s3://{bucket}/{loc}", "--checksum", "crc32", "--checksum-location", loc,
            "--part-size", "5MiB", "--multipart-threshold", "5MiB")
        assert boto.get_object(Bucket=bucket, Key=loc)["Body"].read() == data
        head = boto.head_object(Bucket=bucket, Key=loc, ChecksumMode="ENABLED")
        assert head["ChecksumCRC32"].endswith("-3"), head
    p = run(cli, "cp", str(src), f"s3://{bucket}/md5", "--checksum", "md5", "--checksum-location", "trailer",
            check=False)
    assert p.returncode != 0
    assert b"checksum_location trailer needs" in p.stderr and b"md5" in p.stderr
    p = run(cli, "cp", str(src), f"s3://{bucket}/x", "--checksum-location", "footer", check=False)
    assert p.returncode == 2 and b"--checksum-location" in p.stderr
    assert "md5" not in [o["Key"] for o in boto.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_cp_checksum_type(cli, boto, bucket, tmp_path):
    """--checksum-type full-object: the object's CRC32 is the whole file's,
    and a download back into a file checks it; stdin (unknown length) too."""
    src = tmp_path / "src.bin"
    data = os.urandom(11 * 1024 * 1024 + 5)
    src.write_bytes(data)
    want = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    run(cli, "cp", str(src), f"s3://{bucket}/full", "--checksum", "crc32", "--checksum-type", "full-object",
        "--part-size", "5MiB", "--multipart-threshold", "5MiB")
    head = boto.head_object(Bucket=bucket, Key="full", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == want and head["ChecksumType"] == "FULL_OBJECT", head
    run(cli, "cp", "-", f"s3://{bucket}/stdin", "--checksum", "crc32", "--checksum-type", "full-object",
        "--part-size", "5MiB", input=data)
    assert boto.head_object(Bucket=bucket, Key="stdin", ChecksumMode="ENABLED")["ChecksumCRC32"] == want
    run(cli, "cp", f"s3://{bucket}/full", str(tmp_path / "back"), "--part-size", "5MiB")
    assert (tmp_path / "back").read_bytes() == data
    p = run(cli, "cp", str(src), f"s3://{bucket}/x", "--checksum", "sha256", "--checksum-type", "full-object",
            check=False)
    assert p.returncode != 0 and b"full_object needs a crc32c or crc32 checksum" in p.stderr
    p = run(cli, "cp", str(src), f"s3://{bucket}/x", "--checksum-type", "whole", check=False)
    assert p.returncode == 2 and b"--checksum-type" in p.stderr


def test_single_requests_retry_with_the_retry_options(cli, s3env, boto, bucket):
    """ls, rm, mb and rb retry like cp does (503 SlowDown here), and
    --max-attempts / --retry-timeout govern them too."""
    from faultproxy import FaultProxy
    boto.put_object(Bucket=bucket, Key="k", Body=b"x")
    with FaultProxy.from_url(s3env["endpoint_url"]) as p:
        env = dict(os.environ, AWS_ENDPOINT_URL=p.url, AWS_ACCESS_KEY_ID=s3env["access_key"],
                   AWS_SECRET_ACCESS_KEY=s3env["secret_key"])
        p.set_rules(["slowdown_503:kind=list,times=2"])
        out = run(cli, "ls", f"s3://{bucket}", env=env).stdout.decode()
        assert " k\n" in out
        assert p.stats()["by_kind"]["list"] == 3
        p.set_rules(["slowdown_503:kind=list"])
        p.reset_stats()
        r = run(cli, "--max-attempts", "2", "--retry-timeout", "0", "ls", f"s3://{bucket}", env=env, check=False)
        assert r.returncode == 1 and "gave up after 2 attempts" in r.stderr.decode(), r.stderr
        assert p.stats()["by_kind"]["list"] == 2
        p.set_rules(["slowdown_503:kind=delete,times=1"])
        p.reset_stats()
        run(cli, "rm", f"s3://{bucket}/k", env=env)
        assert p.stats()["by_kind"]["delete"] == 2
    assert boto.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
