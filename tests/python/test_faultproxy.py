"""Tests of tests/faultproxy against a real S3 server (SeaweedFS via scripts/local-s3).

    eval "$(scripts/local-s3 start)"
    python -m pytest tests/python/test_faultproxy.py

The endpoint and credentials come from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY and AWS_REGION. Without AWS_ENDPOINT_URL every test fails.

Note on botocore retries: in ``Config(retries=...)`` the key ``max_attempts`` counts
*retries* (``max_attempts=1`` makes two attempts); ``total_max_attempts`` counts
attempts. Tests that check a fault reaches the client use total_max_attempts=1.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

import boto3  # noqa: E402
import botocore.exceptions as bex  # noqa: E402
from boto3.s3.transfer import TransferConfig  # noqa: E402
from botocore.auth import S3SigV4Auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

from faultproxy import FaultProxy, Rule, classify, parse_size  # noqa: E402

MiB = 1 << 20
NO_RETRY = {"total_max_attempts": 1, "mode": "standard"}
RETRY = {"total_max_attempts": 6, "mode": "standard"}
CONN_ERRORS = (bex.HTTPClientError, bex.ConnectionError)  # reset/closed/refused
STREAM_ERRORS = (bex.ResponseStreamingError, bex.IncompleteReadError)


# --------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def env():
    ep = os.environ.get("AWS_ENDPOINT_URL")
    if not ep:
        pytest.fail(
            "AWS_ENDPOINT_URL is not set: these tests need a real S3 server. "
            'Start one with: eval "$(scripts/local-s3 start)"',
            pytrace=False,
        )
    ak = os.environ.get("AWS_ACCESS_KEY_ID")
    sk = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not ak or not sk:
        pytest.fail("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set", pytrace=False)
    return {
        "endpoint": ep,
        "key": ak,
        "secret": sk,
        "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        "ca": os.environ.get("AWS_CA_BUNDLE"),
    }


def make_client(env, url, retries=NO_RETRY, secret=None, **cfg):
    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=env["key"],
        aws_secret_access_key=secret or env["secret"],
        region_name=env["region"],
        verify=env["ca"] if url.startswith("https") else None,
        config=Config(
            retries=retries,
            connect_timeout=5,
            read_timeout=15,
            s3={"addressing_style": "path"},
            **cfg,
        ),
    )


@pytest.fixture(scope="module")
def direct(env):
    return make_client(env, env["endpoint"], retries=RETRY)


@pytest.fixture(scope="module")
def bucket(direct):
    name = f"faultproxy-{uuid.uuid4().hex[:10]}"
    direct.create_bucket(Bucket=name)
    yield name
    try:
        for up in direct.list_multipart_uploads(Bucket=name).get("Uploads", []):
            direct.abort_multipart_upload(Bucket=name, Key=up["Key"], UploadId=up["UploadId"])
        for page in direct.get_paginator("list_objects_v2").paginate(Bucket=name):
            for obj in page.get("Contents", []):
                direct.delete_object(Bucket=name, Key=obj["Key"])
        direct.delete_bucket(Bucket=name)
    except Exception as e:  # cleanup must not hide a test result
        print(f"cleanup of bucket {name} failed: {e!r}")


def _new_proxy(env, **kw):
    ssl_ctx = None
    if env["endpoint"].startswith("https"):
        import ssl

        ssl_ctx = ssl.create_default_context(cafile=env["ca"])
    kw.setdefault("seed", 1)
    p = FaultProxy.from_url(env["endpoint"], upstream_ssl=ssl_ctx, **kw)
    p.start()
    return p


@pytest.fixture
def proxy(env):
    p = _new_proxy(env)
    yield p
    p.stop()


@pytest.fixture
def via(env, proxy):
    """boto3 through the proxy, retries off."""
    return make_client(env, proxy.url)


@pytest.fixture(scope="module")
def small_obj(direct, bucket):
    """A 1 MiB object put directly (not through a proxy)."""
    data = random.Random(7).randbytes(MiB)
    direct.put_object(Bucket=bucket, Key="fixtures/1mib", Body=data)
    return "fixtures/1mib", data


def exists(direct, bucket, key) -> bool:
    try:
        direct.head_object(Bucket=bucket, Key=key)
        return True
    except bex.ClientError as e:
        if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
            return False
        raise


def read_in_pieces(body, piece=8192):
    got = bytearray()
    while chunk := body.read(piece):
        got += chunk
    return bytes(got)


# --------------------------------------------------------------------------
# rules (no network)


def test_rule_parsing_and_kinds():
    r = Rule.parse("delay_first_byte:p=0.01,kind=upload_part,delay=2-5")
    assert (r.fault, r.p, r.kind, r.delay) == ("delay_first_byte", 0.01, frozenset({"upload_part"}), (2.0, 5.0))
    assert Rule.parse("bandwidth:rate=1MiB").rate == MiB
    assert Rule.parse("reset_request:after=64K-128K").after == (65536, 131072)
    assert Rule.parse("slowdown_503:kind=put|complete,times=2").kind == frozenset({"put", "complete"})
    e = Rule.parse("internal_error_500")
    assert (e.status, e.code) == (500, "InternalError")
    assert Rule.parse(str(r)) == r  # str() round-trips
    for bad in ("nosuchfault", "delay_first_byte:kind=nope", "bandwidth", "slowdown_503:p=2", "reset_request:x=1"):
        with pytest.raises(ValueError):
            Rule.parse(bad)
    assert parse_size("1.5M") == 3 * MiB // 2
    assert classify("PUT", "/b/k?partNumber=3&uploadId=u", False) == ("upload_part", frozenset({"upload_part", "put", "any"}))
    assert classify("PUT", "/b/k", False)[0] == "put"
    assert classify("GET", "/b/k", True) == ("ranged_get", frozenset({"ranged_get", "get", "any"}))
    assert classify("GET", "/b/k?uploadId=u", False)[0] == "list"  # ListParts
    assert classify("GET", "/b?list-type=2", False)[0] == "list"
    assert classify("POST", "/b/k?uploadId=u", False)[0] == "complete"
    assert classify("POST", "/b/k?uploads", False)[0] == "create_multipart"
    assert classify("DELETE", "/b/k?uploadId=u", False)[0] == "abort"
    assert classify("GET", "/k", False, virtual_hosted=True)[0] == "get"


# --------------------------------------------------------------------------
# no faults


def test_put_get_roundtrip_byte_exact(env, proxy, via, direct, bucket):
    data = os.urandom(3 * MiB + 17)
    via.put_object(Bucket=bucket, Key="rt/plain", Body=data)
    assert direct.get_object(Bucket=bucket, Key="rt/plain")["Body"].read() == data
    assert via.get_object(Bucket=bucket, Key="rt/plain")["Body"].read() == data
    r = via.get_object(Bucket=bucket, Key="rt/plain", Range="bytes=1000-2999")
    assert r["Body"].read() == data[1000:3000]
    assert via.head_object(Bucket=bucket, Key="rt/plain")["ContentLength"] == len(data)
    keys = [o["Key"] for o in via.list_objects_v2(Bucket=bucket, Prefix="rt/")["Contents"]]
    assert "rt/plain" in keys
    s = proxy.stats()
    assert s["by_kind"] == {"put": 1, "get": 1, "ranged_get": 1, "head": 1, "list": 1}
    assert s["faults"] == {}
    assert s["bytes_to_upstream"] == s["bytes_from_client"] > len(data)
    assert s["bytes_to_client"] == s["bytes_from_upstream"] > len(data) + 2000
    assert s["connections"] == 1  # keep-alive held across all five requests
    # The server really checks signatures: a wrong secret is refused through the
    # proxy too, so the successes above mean the forwarded requests verified.
    bad = make_client(env, proxy.url, secret="not-the-secret")
    with pytest.raises(bex.ClientError) as ei:
        bad.get_object(Bucket=bucket, Key="rt/plain")
    assert ei.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


def test_multipart_roundtrip_and_transfer_manager(env, proxy, via, direct, bucket, tmp_path):
    parts = [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(MiB + 3)]
    up = via.create_multipart_upload(Bucket=bucket, Key="rt/mpu")
    etags = []
    for i, part in enumerate(parts, 1):
        r = via.upload_part(Bucket=bucket, Key="rt/mpu", UploadId=up["UploadId"], PartNumber=i, Body=part)
        etags.append({"PartNumber": i, "ETag": r["ETag"]})
    via.complete_multipart_upload(
        Bucket=bucket, Key="rt/mpu", UploadId=up["UploadId"], MultipartUpload={"Parts": etags}
    )
    assert direct.get_object(Bucket=bucket, Key="rt/mpu")["Body"].read() == b"".join(parts)
    s = proxy.stats()
    assert (s["by_kind"]["create_multipart"], s["by_kind"]["upload_part"], s["by_kind"]["complete"]) == (1, 3, 1)

    # The transfer manager: concurrent parts on several connections through the proxy.
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(24 * MiB + 5))
    tc = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=4)
    via.upload_file(str(src), bucket, "rt/tm", Config=tc)
    dst = tmp_path / "dst.bin"
    via.download_file(bucket, "rt/tm", str(dst), Config=tc)
    assert hashlib.sha256(dst.read_bytes()).digest() == hashlib.sha256(src.read_bytes()).digest()
    assert proxy.stats()["connections"] > 1


def _signed_raw(env, method, url, body=b"", headers=None):
    """A SigV4-signed request as (head bytes, body); Host is taken from url."""
    req = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    req.headers["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
    S3SigV4Auth(Credentials(env["key"], env["secret"]), "s3", env["region"]).add_auth(req)
    p = req.prepare()
    path = url.split("/", 3)[3]
    lines = [f"{method} /{path} HTTP/1.1", f"Host: {url.split('/')[2]}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in p.headers.items() if k.lower() not in ("host", "content-length")]
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), body


def _read_response(f):
    status = f.readline()
    headers = {}
    while (line := f.readline()) not in (b"\r\n", b""):
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


def test_expect_100_continue_large_put(env, proxy, via, direct, bucket):
    body = os.urandom(8 * MiB)
    head, body = _signed_raw(env, "PUT", f"{proxy.url}/{bucket}/rt/expect", body, {"Expect": "100-continue"})
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(head)
        f = s.makefile("rb")
        status, _ = _read_response(f)  # must arrive before we send a single body byte
        assert status.startswith(b"HTTP/1.1 100"), status
        s.sendall(body)
        status, headers = _read_response(f)
        assert status.startswith(b"HTTP/1.1 200"), (status, f.read(int(headers.get("content-length", 0))))
    assert direct.get_object(Bucket=bucket, Key="rt/expect")["Body"].read() == body
    # boto3 sends Expect: 100-continue for file-like bodies.
    via.upload_fileobj(io.BytesIO(body), bucket, "rt/expect2", Config=TransferConfig(multipart_threshold=64 * MiB))
    assert direct.get_object(Bucket=bucket, Key="rt/expect2")["Body"].read() == body
    s = proxy.stats()
    assert s["expect_continue"] == 2 and s["interim_relayed"] == 2


def test_curl_expect_continue_put(env, proxy, direct, bucket, tmp_path):
    """libcurl's own Expect path (what the C library uses), signed by curl --aws-sigv4."""
    if not _curl_has_sigv4():
        pytest.skip("curl with --aws-sigv4 not available")
    src = tmp_path / "up.bin"
    src.write_bytes(os.urandom(3 * MiB))
    base = ["curl", "-sS", "--fail-with-body", "--aws-sigv4", f"aws:amz:{env['region']}:s3",
            "--user", f"{env['key']}:{env['secret']}"]
    r = subprocess.run(base + ["-T", str(src), f"{proxy.url}/{bucket}/rt/curl"], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert direct.get_object(Bucket=bucket, Key="rt/curl")["Body"].read() == src.read_bytes()
    assert proxy.stats()["interim_relayed"] == 1
    proxy.set_rules(["slowdown_503:kind=put"])
    before = proxy.stats()["bytes_from_client"]
    r = subprocess.run(base + ["-T", str(src), f"{proxy.url}/{bucket}/rt/curl2"], capture_output=True, timeout=30)
    assert r.returncode != 0 and b"<Code>SlowDown</Code>" in r.stdout, r.stdout + r.stderr
    # auto mode: answered before 100 Continue, so curl never sent the body
    assert proxy.stats()["bytes_from_client"] - before < 64 * 1024
    assert not exists(direct, bucket, "rt/curl2")


def _curl_has_sigv4() -> bool:
    try:
        out = subprocess.run(["curl", "--help", "all"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "--aws-sigv4" in out


# --------------------------------------------------------------------------
# each fault reaches the client


def test_delay_first_byte(proxy, via, bucket, small_obj):
    key, data = small_obj
    proxy.set_rules(["delay_first_byte:kind=get,delay=0.6"])
    t = time.monotonic()
    via.head_object(Bucket=bucket, Key=key)  # not a get: not delayed
    t_head = time.monotonic() - t
    t = time.monotonic()
    r = via.get_object(Bucket=bucket, Key=key)
    t_first = time.monotonic() - t
    assert r["Body"].read() == data
    assert t_first >= 0.6, t_first
    assert t_head < 0.6, t_head
    proxy.set_rules(["delay_first_byte:kind=get,delay=0.2-0.4"])
    t = time.monotonic()
    via.get_object(Bucket=bucket, Key=key)["Body"].read()
    elapsed = time.monotonic() - t
    drawn = proxy.decisions()[-1]["faults"]["delay_first_byte"]["delay"]
    assert 0.2 <= drawn <= 0.4 and elapsed >= drawn
    assert proxy.stats()["faults_by_kind"] == {"delay_first_byte": {"get": 2}}


def test_slowdown_503_and_internal_error(proxy, via, direct, bucket, small_obj):
    key, _ = small_obj
    proxy.set_rules(["slowdown_503:kind=put"])
    with pytest.raises(bex.ClientError) as ei:
        via.put_object(Bucket=bucket, Key="err/put", Body=os.urandom(2 * MiB))
    err = ei.value.response
    assert err["Error"]["Code"] == "SlowDown"
    assert err["Error"]["Message"] == "Please reduce your request rate."
    assert err["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert err["ResponseMetadata"]["RequestId"].startswith("FAULTPROXY")
    assert not exists(direct, bucket, "err/put")  # never forwarded

    proxy.set_rules(["internal_error_500:kind=get"])
    with pytest.raises(bex.ClientError) as ei:
        via.get_object(Bucket=bucket, Key=key)
    assert ei.value.response["Error"]["Code"] == "InternalError"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    s = proxy.stats()
    assert s["faults"] == {"slowdown_503": 1, "internal_error_500": 1}
    assert s["bytes_to_upstream"] == 0  # neither request went upstream


def test_slowdown_pending_body_keeps_connection_in_sync(env, proxy, via, bucket):
    """body=drain: the proxy reads and drops the body, then the next request on the
    same connection works. Raw socket without Expect, then boto3 with Expect."""
    proxy.set_rules(["slowdown_503:kind=put,body=drain"])
    body = os.urandom(2 * MiB)
    head, body = _signed_raw(env, "PUT", f"{proxy.url}/{bucket}/err/raw", body)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        f = s.makefile("rb")
        for _ in range(2):  # two requests on one connection
            s.sendall(head + body)
            status, headers = _read_response(f)
            assert status.startswith(b"HTTP/1.1 503"), status
            assert headers["connection"] == "keep-alive"
            assert b"<Code>SlowDown</Code>" in f.read(int(headers["content-length"]))
        proxy.set_rules([])
        s.sendall(head + body)
        status, headers = _read_response(f)
        assert status.startswith(b"HTTP/1.1 200"), status
    proxy.set_rules(["slowdown_503:kind=put,body=drain"])
    with pytest.raises(bex.ClientError):
        via.put_object(Bucket=bucket, Key="err/b", Body=io.BytesIO(body))
    proxy.set_rules([])
    via.put_object(Bucket=bucket, Key="err/b", Body=io.BytesIO(body))
    s = proxy.stats()
    assert s["connections"] == 2  # one raw, one boto3: both stayed usable


def test_reset_request(proxy, via, direct, bucket):
    proxy.set_rules(["reset_request:kind=put,after=64K"])
    with pytest.raises(CONN_ERRORS) as ei:
        via.put_object(Bucket=bucket, Key="err/reset", Body=os.urandom(MiB))
    assert "reset" in str(ei.value).lower() or "closed" in str(ei.value).lower()
    assert not exists(direct, bucket, "err/reset")
    s = proxy.stats()
    assert s["faults"] == {"reset_request": 1}
    assert 64 * 1024 <= s["bytes_to_upstream"] < 64 * 1024 + 4096  # head + 64 KiB of body


def test_reset_response(proxy, via, bucket, small_obj):
    key, data = small_obj
    proxy.set_rules(["reset_response:kind=get,after=100000"])
    body = via.get_object(Bucket=bucket, Key=key)["Body"]  # the head arrives intact
    got = bytearray()
    with pytest.raises(STREAM_ERRORS) as ei:
        while chunk := body.read(1000):
            got += chunk
    assert "reset" in str(ei.value).lower()
    assert 90_000 <= len(got) <= 100_000 and bytes(got) == data[: len(got)]
    proxy.set_rules(["reset_response:kind=head"])  # bodiless: reset before the head
    with pytest.raises(CONN_ERRORS):
        via.head_object(Bucket=bucket, Key=key)


def test_truncate_response(proxy, via, bucket, small_obj):
    key, data = small_obj
    proxy.set_rules(["truncate_response:kind=get,after=300000"])
    body = via.get_object(Bucket=bucket, Key=key)["Body"]
    got = bytearray()
    with pytest.raises(STREAM_ERRORS) as ei:
        while chunk := body.read(1000):
            got += chunk
    assert "incompleteread" in str(ei.value).lower().replace(" ", "")
    assert len(got) == 300000 and bytes(got) == data[:300000]
    # After a truncation the client retries on a new connection and succeeds.
    proxy.set_rules(["truncate_response:kind=get,times=1"])
    assert via.get_object(Bucket=bucket, Key=key)["Body"].read  # head fine
    proxy.set_rules([])
    assert via.get_object(Bucket=bucket, Key=key)["Body"].read() == data


def test_bandwidth_cap(proxy, via, direct, bucket):
    data = os.urandom(2 * MiB)
    direct.put_object(Bucket=bucket, Key="bw/2mib", Body=data)
    proxy.set_rules(["bandwidth:kind=get,rate=1MiB"])
    t = time.monotonic()
    assert via.get_object(Bucket=bucket, Key="bw/2mib")["Body"].read() == data
    dt = time.monotonic() - t
    assert 1.8 <= dt <= 3.5, dt
    proxy.set_rules(["bandwidth:kind=put,rate=2MiB,direction=request"])
    t = time.monotonic()
    via.put_object(Bucket=bucket, Key="bw/up", Body=data)
    dt = time.monotonic() - t
    assert 0.85 <= dt <= 2.5, dt
    assert direct.get_object(Bucket=bucket, Key="bw/up")["Body"].read() == data


# --------------------------------------------------------------------------
# filters, reproducibility, counters, kill switch


def test_kind_filter_only_upload_part(proxy, via, direct, bucket, small_obj):
    proxy.set_rules(["slowdown_503:kind=upload_part"])
    via.put_object(Bucket=bucket, Key="kind/plain", Body=b"x" * 1000)  # a put, not a part
    via.get_object(Bucket=bucket, Key=small_obj[0])["Body"].read()
    up = via.create_multipart_upload(Bucket=bucket, Key="kind/mpu")
    for n in (1, 2):
        with pytest.raises(bex.ClientError) as ei:
            via.upload_part(Bucket=bucket, Key="kind/mpu", UploadId=up["UploadId"], PartNumber=n, Body=b"y" * 1000)
        assert ei.value.response["Error"]["Code"] == "SlowDown"
    via.abort_multipart_upload(Bucket=bucket, Key="kind/mpu", UploadId=up["UploadId"])
    s = proxy.stats()
    assert s["faults_by_kind"] == {"slowdown_503": {"upload_part": 2}}
    assert s["by_kind"] == {"put": 1, "get": 1, "create_multipart": 1, "upload_part": 2, "abort": 1}
    assert exists(direct, bucket, "kind/plain")
    # ranged_get is narrower than get
    proxy.set_rules(["internal_error_500:kind=ranged_get"])
    via.get_object(Bucket=bucket, Key=small_obj[0])["Body"].read()
    with pytest.raises(bex.ClientError):
        via.get_object(Bucket=bucket, Key=small_obj[0], Range="bytes=0-9")


def _pattern(env, bucket, key, seed, keys=None, decisions="sequence"):
    p = _new_proxy(env, seed=seed, decisions=decisions, rules=["slowdown_503:p=0.5,kind=get"])
    try:
        c = make_client(env, p.url)
        out = []
        for k in keys or [key] * 24:
            try:
                c.get_object(Bucket=bucket, Key=k)["Body"].read()
                out.append(0)
            except bex.ClientError as e:
                assert e.response["Error"]["Code"] == "SlowDown"
                out.append(1)
        return out, [bool(d["faults"]) for d in p.decisions()]
    finally:
        p.stop()


def test_seed_reproducibility(env, bucket, small_obj, direct):
    key = small_obj[0]
    a, log_a = _pattern(env, bucket, key, seed=42)
    b, _ = _pattern(env, bucket, key, seed=42)
    c, _ = _pattern(env, bucket, key, seed=43)
    assert a == b
    assert a != c
    assert a == [int(x) for x in log_a]
    # Documented semantics: one draw of random.Random(seed) per matching rule per request.
    rng = random.Random(42)
    assert a == [int(rng.random() < 0.5) for _ in a]
    # keyed mode: a request's fate depends on what it is, not on arrival order.
    keys = [f"seed/{i}" for i in range(12)]
    for k in keys:
        direct.put_object(Bucket=bucket, Key=k, Body=b"z")
    fwd, _ = _pattern(env, bucket, key, seed=5, keys=keys, decisions="keyed")
    rev, _ = _pattern(env, bucket, key, seed=5, keys=keys[::-1], decisions="keyed")
    assert fwd == rev[::-1] and 0 < sum(fwd) < len(fwd)


def _part_faults(env, bucket, key, key_ignore):
    """Which of parts 1-20 of two multipart uploads of one key meet a fault,
    with the proxy reseeded before each upload (as a side-by-side benchmark
    does before each configuration)."""
    p = _new_proxy(env, seed=9, decisions="keyed", key_ignore=key_ignore,
                   rules=["slowdown_503:p=0.5,kind=upload_part"])
    try:
        c = make_client(env, p.url)
        runs = []
        for _ in range(2):
            p.set_rules(p.rules(), seed=9)
            up = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
            hit = []
            for n in range(1, 21):
                try:
                    c.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=n, Body=b"p" * 100)
                    hit.append(0)
                except bex.ClientError as e:
                    assert e.response["Error"]["Code"] == "SlowDown"
                    hit.append(1)
            c.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=up)
            runs.append(hit)
        return runs
    finally:
        p.stop()


def test_keyed_decisions_can_ignore_the_upload_id(env, bucket):
    # Each upload has its own id: by default its parts draw their own faults;
    # with key_ignore=("uploadId",) part N meets the same fate in every upload.
    same = _part_faults(env, bucket, "keyed/mpu", ("uploadId",))
    assert same[0] == same[1] and 0 < sum(same[0]) < 20
    own = _part_faults(env, bucket, "keyed/mpu", ())
    assert own[0] != own[1]


def test_stats_counters_and_times(proxy, via, bucket):
    proxy.set_rules(["slowdown_503:kind=put,times=2", "delay_first_byte:kind=any,p=1,delay=0"])
    for i in range(4):
        try:
            via.put_object(Bucket=bucket, Key=f"stats/{i}", Body=b"a" * 1000)
        except bex.ClientError:
            pass
    via.get_object(Bucket=bucket, Key="stats/3")["Body"].read()
    s = proxy.stats()
    assert s["requests"] == 5
    assert s["by_kind"] == {"put": 4, "get": 1}
    assert s["faults"] == {"slowdown_503": 2, "delay_first_byte": 5}
    assert [r["fired"] for r in s["rules"]] == [2, 5]
    assert s["bytes_from_client"] >= 4000 and s["bytes_to_client"] >= 1000
    assert s["bytes_to_upstream"] < s["bytes_from_client"]  # two puts were answered by the proxy
    proxy.reset_stats()
    assert proxy.stats()["requests"] == 0


def test_set_down_reset_and_refuse(proxy, via, bucket, small_obj):
    key, data = small_obj
    assert via.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    # An open keep-alive connection is dropped too.
    raw = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    raw.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert raw.recv(65536).startswith(b"HTTP/1.1")
    proxy.set_down(True)
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        for _ in range(3):
            raw.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
            if not raw.recv(65536):
                raise ConnectionResetError("EOF")
    raw.close()
    with pytest.raises(CONN_ERRORS):
        via.get_object(Bucket=bucket, Key=key)
    assert proxy.stats()["rejected_down"] >= 1
    proxy.set_down(False)
    assert via.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    port = proxy.port
    proxy.set_down(True, mode="refuse")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)
    with pytest.raises(bex.EndpointConnectionError):
        via.get_object(Bucket=bucket, Key=key)
    proxy.set_down(False)
    assert proxy.port == port
    assert via.get_object(Bucket=bucket, Key=key)["Body"].read() == data


def test_transfer_survives_faults_with_retries(env, proxy, direct, bucket, tmp_path):
    """With retries on, a multipart upload and a download get through a burst of faults."""
    proxy.set_rules([
        "slowdown_503:kind=upload_part,times=2",
        "reset_request:kind=upload_part,after=100K,times=1",
        "truncate_response:kind=get,times=1",
        "reset_response:kind=get,after=1M,times=1",
    ])
    c = make_client(env, proxy.url, retries=RETRY)
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(16 * MiB))
    tc = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=2)
    c.upload_file(str(src), bucket, "survive/obj", Config=tc)
    dst = tmp_path / "dst.bin"
    c.download_file(bucket, "survive/obj", str(dst), Config=tc)
    assert dst.read_bytes() == src.read_bytes()
    assert direct.get_object(Bucket=bucket, Key="survive/obj")["Body"].read() == src.read_bytes()
    f = proxy.stats()["faults"]
    assert f == {"slowdown_503": 2, "reset_request": 1, "truncate_response": 1, "reset_response": 1}


def test_cli_prints_port_and_injects(env, bucket, small_obj):
    key, data = small_obj
    cmd = [sys.executable, "-m", "faultproxy", "--upstream", env["endpoint"], "--listen", "127.0.0.1:0",
           "--rule", "slowdown_503:kind=get,p=1", "--seed", "1"]
    if env["endpoint"].startswith("https") and env["ca"]:
        cmd += ["--cafile", env["ca"]]
    proc = subprocess.Popen(cmd, cwd=TESTS_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT="), (line, proc.stderr.read() if proc.poll() is not None else "")
        port = int(line.strip().split("=", 1)[1])
        c = make_client(env, f"http://127.0.0.1:{port}")
        with pytest.raises(bex.ClientError) as ei:
            c.get_object(Bucket=bucket, Key=key)
        assert ei.value.response["Error"]["Code"] == "SlowDown"
        assert c.head_object(Bucket=bucket, Key=key)["ContentLength"] == len(data)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert '"slowdown_503": 1' in err


# --------------------------------------------------------------------------
# framing the S3 server rarely produces: a stub upstream (HTTP framing only)


class _StubUpstream:
    """Answers each request by path: /chunked (chunked body with a trailer),
    /head-len (a HEAD with Content-Length but no body), /204, /echo-chunked
    (reads a chunked request body, answers its length), /early and /early-close
    (403 before reading the request body, then the connection ends)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.t = threading.Thread(target=self._serve, daemon=True)
        self.t.start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(c,), daemon=True).start()

    def _conn(self, c):
        f = c.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                method, path, _ = line.decode().split(" ")
                hdrs = {}
                while (h := f.readline()) != b"\r\n":
                    k, _, v = h.decode().partition(":")
                    hdrs[k.lower()] = v.strip()
                if path == "/chunked":
                    c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n"
                              b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n")
                elif path == "/head-len":
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n\r\n")
                elif path == "/204":
                    c.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
                elif path.startswith("/early"):
                    # Answer without reading the body (as servers do for errors), then
                    # half-close and drain so the answer is not lost to an RST.
                    close = b"Connection: close\r\n" if path == "/early-close" else b""
                    c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n" + close + b"\r\nno")
                    c.shutdown(socket.SHUT_WR)
                    c.settimeout(5)
                    while c.recv(1 << 20):
                        pass
                    return
                elif path == "/echo-chunked":
                    n = 0
                    while (size := int(f.readline().split(b";")[0], 16)) != 0:
                        n += len(f.read(size))
                        f.read(2)
                    while f.readline() != b"\r\n":
                        pass
                    body = str(n).encode()
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        except (OSError, ValueError):
            return
        finally:
            c.close()

    def close(self):
        self.sock.close()


def test_framing_chunked_head_204_pipelined():
    stub = _StubUpstream()
    p = FaultProxy("127.0.0.1", stub.port)
    p.start()
    try:
        with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
            f = s.makefile("rb")
            # Pipelined on one connection: every boundary must be found exactly.
            s.sendall(
                b"GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n"
                b"HEAD /head-len HTTP/1.1\r\nHost: a\r\n\r\n"
                b"DELETE /204 HTTP/1.1\r\nHost: a\r\n\r\n"
                b"PUT /echo-chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
                b"GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n"
            )
            st, h = _read_response(f)
            assert st.startswith(b"HTTP/1.1 200") and h["transfer-encoding"] == "chunked"
            raw = b""
            while not raw.endswith(b"0\r\nX-T: 1\r\n\r\n"):
                raw += f.read(1)
            assert raw == b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n"  # relayed as is
            st, h = _read_response(f)
            assert st.startswith(b"HTTP/1.1 200") and h["content-length"] == "12345"
            st, h = _read_response(f)
            assert st.startswith(b"HTTP/1.1 204")
            st, h = _read_response(f)
            assert st.startswith(b"HTTP/1.1 200") and f.read(int(h["content-length"])) == b"7"
            st, h = _read_response(f)
            assert st.startswith(b"HTTP/1.1 200")
        # A cut inside a chunked body: the terminating chunk never arrives.
        p.set_rules(["truncate_response:after=1000"])
        with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
            s.sendall(b"GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            assert data.endswith(b"6;ext=1\r\n world\r\n") and b"X-T" not in data.split(b"\r\n\r\n", 1)[1]
        assert p.stats()["connections"] == 2
    finally:
        p.stop()
        stub.close()


def test_early_upstream_response_before_body():
    """The upstream answers before taking the request body."""
    stub = _StubUpstream()
    p = FaultProxy("127.0.0.1", stub.port, linger=1.0)
    p.start()
    try:
        # With Expect and Connection: close: the client gets the 403, never sends
        # the body, and the proxy closes the connection.
        with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
            s.sendall(b"PUT /early-close HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n"
                      b"Expect: 100-continue\r\n\r\n")
            f = s.makefile("rb")
            st, h = _read_response(f)
            assert st.startswith(b"HTTP/1.1 403") and f.read(2) == b"no"
            t = time.monotonic()
            assert f.read() == b""  # EOF
            assert time.monotonic() - t < 3
        # Without Expect or close: the client sends all 32 MiB; the proxy drops what
        # the upstream did not take and the client connection stays usable.
        body = b"b" * (32 * MiB)
        with socket.create_connection(("127.0.0.1", p.port), timeout=10) as s:
            sender = threading.Thread(target=s.sendall, args=(
                b"PUT /early HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % len(body) + body,))
            sender.start()
            f = s.makefile("rb")
            st, h = _read_response(f)
            assert st.startswith(b"HTTP/1.1 403") and f.read(2) == b"no"
            sender.join(10)
            s.sendall(b"DELETE /204 HTTP/1.1\r\nHost: a\r\n\r\n")
            st, h = _read_response(f)
            assert st.startswith(b"HTTP/1.1 204"), st
        st = p.stats()
        assert st["early_responses"] == 2 and st["connections"] == 2 and st["errors"] == 0
    finally:
        p.stop()
        stub.close()
