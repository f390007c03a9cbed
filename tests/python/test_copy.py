"""Server-side copy (Client.copy, TransferManager.copy, the CLI's cp between
two S3 URLs) and bulk delete (Client.delete_objects) against the real
server, every copy checked byte for byte with boto3; the fault proxy for
retries; a small fake server for the one answer SeaweedFS cannot give (a
DeleteObjects result with per-key errors)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import subprocess
import threading
import uuid

import pytest

import s3xfer
from conftest import _empty_bucket
from s3xfer import TransferConfig

# The conftest proxy's seed (its decisions are keyed on seed and request).
PROXY_SEED = 11
MiB = 1 << 20
CFG8 = TransferConfig(part_size=8 * MiB, multipart_threshold=8 * MiB)


def body(boto, bucket, key) -> bytes:
    return boto.get_object(Bucket=bucket, Key=key)["Body"].read()


@pytest.fixture(scope="module")
def big():
    return os.urandom(40 * MiB + 123)


@pytest.fixture
def bucket2(boto):
    name = f"t-{uuid.uuid4().hex[:20]}"
    boto.create_bucket(Bucket=name)
    yield name
    _empty_bucket(boto, name)


def test_multipart_copy_40mib_8mib_parts(client, boto, bucket, big):
    boto.put_object(Bucket=bucket, Key="src/big", Body=big)
    r = client.copy(bucket, "src/big", bucket, "dst/big", config=CFG8)
    assert r.multipart and r.parts == 6 and r.bytes == len(big)
    assert r.part_size == 8 * MiB and r.upload_id
    # HeadBucket (the destination) + HEAD (the source) + Create + 6 UploadPartCopy + Complete
    assert r.requests == 10 and r.retries == 0
    assert r.etag.strip('"').endswith("-6")
    # the bytes never passed through the client: no buffer was taken
    assert r.peak_buffer_bytes == 0 and r.pool_allocations == 0
    assert body(boto, bucket, "dst/big") == big
    assert client.list_multipart_uploads(bucket) == []


def test_single_copy_1mib(client, boto, bucket):
    data = os.urandom(MiB)
    boto.put_object(Bucket=bucket, Key="small", Body=data)
    r = client.copy(bucket, "small", bucket, "small-copy", config=CFG8)
    assert not r.multipart and r.parts == 1 and r.bytes == MiB and r.requests == 3 and not r.upload_id
    assert r.etag.strip('"') == hashlib.md5(data).hexdigest()
    assert body(boto, bucket, "small-copy") == data


def test_empty_object_and_special_keys(client, boto, bucket):
    keys = ["a b+c%20d?é", "dir/x y/z=1;", "~tilde&amp;*'(!)"]
    for k in keys:
        boto.put_object(Bucket=bucket, Key=k, Body=k.encode() * 3)
        client.copy(bucket, k, bucket, "copy/" + k)
        assert body(boto, bucket, "copy/" + k) == k.encode() * 3
    boto.put_object(Bucket=bucket, Key="empty", Body=b"")
    r = client.copy(bucket, "empty", bucket, "empty2", config=CFG8)
    assert r.bytes == 0 and not r.multipart
    assert body(boto, bucket, "empty2") == b""


@pytest.mark.parametrize("size", [MiB, 17 * MiB], ids=["CopyObject", "multipart"])
def test_metadata_copy_and_replace(client, boto, bucket, size):
    data = os.urandom(size)
    boto.put_object(Bucket=bucket, Key="m", Body=data, ContentType="text/x-original",
                    Metadata={"alpha": "1", "beta": "two words"})
    client.copy(bucket, "m", bucket, "kept", config=CFG8)
    h = boto.head_object(Bucket=bucket, Key="kept")
    assert h["ContentType"] == "text/x-original"
    assert h["Metadata"] == {"alpha": "1", "beta": "two words"}
    r = client.copy(bucket, "m", bucket, "replaced", config=CFG8, metadata_directive="REPLACE",
                    content_type="image/png")
    assert r.multipart == (size > 8 * MiB)
    h = boto.head_object(Bucket=bucket, Key="replaced")
    assert h["ContentType"] == "image/png" and h["Metadata"] == {}
    assert body(boto, bucket, "kept") == data and body(boto, bucket, "replaced") == data
    with pytest.raises(ValueError):
        client.copy(bucket, "m", bucket, "x", metadata_directive="MOVE")


def test_copy_across_buckets(client, boto, bucket, bucket2, big):
    boto.put_object(Bucket=bucket, Key="k", Body=big)
    client.copy(bucket, "k", bucket2, "k2", config=CFG8)
    client.copy(bucket, "k", bucket2, "k3")
    assert body(boto, bucket2, "k2") == big and body(boto, bucket2, "k3") == big


def test_missing_source_is_nosuchkey(client, boto, bucket):
    with pytest.raises(s3xfer.NoSuchKey) as ei:
        client.copy(bucket, "no/such", bucket, "dst")
    assert ei.value.status == 404 and "does not exist" in str(ei.value) and "no/such" in str(ei.value)
    assert boto.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_missing_destination_bucket_is_refused(client, boto, bucket, big):
    """SeaweedFS creates a missing bucket on a write; a copy, as an upload,
    checks the destination bucket first."""
    boto.put_object(Bucket=bucket, Key="k", Body=big)
    missing = f"t-missing-{uuid.uuid4().hex[:12]}"
    for cfg in (CFG8, None):
        with pytest.raises(s3xfer.NoSuchBucket):
            client.copy(bucket, "k", missing, "k", config=cfg)
    assert missing not in [b["Name"] for b in boto.list_buckets()["Buckets"]]


def test_cancel_aborts_the_multipart_copy(client, boto, bucket, big):
    boto.put_object(Bucket=bucket, Key="k", Body=big)
    seen = []

    def stop_after_first_part(n):
        seen.append(n)
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        client.copy(bucket, "k", bucket, "dst", config=TransferConfig(part_size=8 * MiB, multipart_threshold=8 * MiB,
                                                                      concurrency=1),
                    progress=stop_after_first_part)
    assert seen
    assert client.list_multipart_uploads(bucket) == []
    assert "Contents" not in boto.list_objects_v2(Bucket=bucket, Prefix="dst")


def test_source_replaced_during_the_copy_fails_cleanly(client, boto, bucket, big):
    """Every part is pinned to the source's ETag: a source overwritten
    between parts fails the copy (412 -> SourceChangedError), aborted, instead
    of an object stitched from two versions. SeaweedFS honours
    x-amz-copy-source-if-match on UploadPartCopy."""
    boto.put_object(Bucket=bucket, Key="k", Body=big)
    replaced = []

    def replace_source(n):
        if not replaced:
            boto.put_object(Bucket=bucket, Key="k", Body=b"new contents")
            replaced.append(n)

    cfg = TransferConfig(part_size=8 * MiB, multipart_threshold=8 * MiB, concurrency=1)
    with pytest.raises(s3xfer.SourceChangedError) as ei:
        client.copy(bucket, "k", bucket, "dst", config=cfg, progress=replace_source)
    assert ei.value.status == 412 and "changed during the copy" in str(ei.value)
    assert client.list_multipart_uploads(bucket) == []
    assert "Contents" not in boto.list_objects_v2(Bucket=bucket, Prefix="dst")


def test_copy_through_503s_and_resets(pclient, client, boto, bucket, proxy, big):
    boto.put_object(Bucket=bucket, Key="k", Body=big)
    proxy.set_rules(["slowdown_503:kind=upload_part,times=2", "reset_response:kind=upload_part,after=20,times=2"])
    r = pclient.copy(bucket, "k", bucket, "mp", config=CFG8)
    assert proxy.stats()["faults"] == {"slowdown_503": 2, "reset_response": 2}
    assert r.retries == 4 and r.retries_http == 2 and r.retries_network == 2
    assert r.requests == 10 + 4
    assert body(boto, bucket, "mp") == big
    # the single CopyObject and the source's HEAD are retried too
    proxy.set_rules(["slowdown_503:kind=put,times=1", "internal_error_500:kind=head,times=1",
                     "reset_response:kind=put,after=20,times=1"])
    small = os.urandom(MiB)
    boto.put_object(Bucket=bucket, Key="s", Body=small)
    r = pclient.copy(bucket, "s", bucket, "single")
    assert r.retries == 3 and not r.multipart and r.requests == 5
    assert body(boto, bucket, "single") == small
    proxy.set_rules([])
    assert client.list_multipart_uploads(bucket) == []


def test_copy_failing_for_good_aborts(pclient, client, boto, bucket, proxy, big):
    boto.put_object(Bucket=bucket, Key="k", Body=big)
    proxy.set_rules(["error:kind=upload_part,status=403,code=AccessDenied,message=no"])
    with pytest.raises(s3xfer.AccessDenied):
        pclient.copy(bucket, "k", bucket, "dst", config=CFG8)
    proxy.set_rules([])
    assert client.list_multipart_uploads(bucket) == []
    # a CopyObject failing inside its 200 answer is a failure, not a copy
    proxy.set_rules(["error:kind=put,status=200,code=InvalidRequest,message=copy failed late"])
    with pytest.raises(s3xfer.ClientError) as ei:
        pclient.copy(bucket, "k", bucket, "dst2")
    assert ei.value.code == "InvalidRequest" and "in a 200 response" in str(ei.value)


def test_transfer_manager_copy(client, boto, bucket, big):
    boto.put_object(Bucket=bucket, Key="k", Body=big)
    boto.put_object(Bucket=bucket, Key="s", Body=b"small", ContentType="text/x-s")
    with client.transfer_manager(TransferConfig(part_size=8 * MiB, multipart_threshold=8 * MiB,
                                                memory_limit=16 * MiB)) as tm:
        futs = [tm.copy(bucket, "k", bucket, f"c{i}") for i in range(3)]
        f2 = tm.copy(bucket, "s", bucket, "s2", metadata_directive="REPLACE", content_type="text/y")
        results = [f.result(timeout=120) for f in futs]
        f2.result(timeout=60)
        stats = tm.stats
    assert all(r.multipart and r.bytes == len(big) for r in results)
    assert stats["peak_buffer_bytes"] == 0  # copies take none of the budget
    for i in range(3):
        assert body(boto, bucket, f"c{i}") == big
    assert boto.head_object(Bucket=bucket, Key="s2")["ContentType"] == "text/y"


def test_delete_objects_2500_keys_in_3_requests(pclient, client, boto, bucket, proxy):
    keys = [f"d/{i:05d}" for i in range(2500)]
    with client.transfer_manager() as tm:
        for f in [tm.upload(b"x", bucket, k) for k in keys]:
            f.result(timeout=120)
    proxy.reset_stats()
    out = pclient.delete_objects(bucket, keys + ["never-existed"])
    assert proxy.stats()["by_kind"].get("delete") == 3
    assert [o["key"] for o in out] == keys + ["never-existed"]
    assert all(o["ok"] and o["code"] is None for o in out)
    assert boto.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    with pytest.raises(s3xfer.InvalidConfigError):
        client.delete_objects(bucket, ["ok", ""])


class _FakeDelete(http.server.BaseHTTPRequestHandler):
    """Answers POST /bucket?delete with per-key errors for keys starting
    "locked", after checking the Content-MD5 that S3 requires."""
    seen: list = []

    def do_POST(self):
        n = int(self.headers["Content-Length"])
        data = self.rfile.read(n)
        md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
        ok_md5 = self.headers.get("Content-MD5") == md5
        _FakeDelete.seen.append((self.path, ok_md5, data))
        import xml.etree.ElementTree as ET
        ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
        keys = [k.text for k in ET.fromstring(data).iter(ns + "Key")]
        parts = []
        for k in keys:
            esc = k.replace("&", "&amp;").replace("<", "&lt;")
            if k.startswith("locked"):
                parts.append(f"<Error><Key>{esc}</Key><Code>AccessDenied</Code><Message>object is locked</Message>"
                             "</Error>")
            elif k != "unreported":
                parts.append(f"<Deleted><Key>{esc}</Key></Deleted>")
        out = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><DeleteResult>" + "".join(reversed(parts))
               + "</DeleteResult>").encode()
        self.send_response(200 if ok_md5 else 400)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


def test_delete_objects_reports_per_key_errors():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeDelete)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        c = s3xfer.Client(endpoint_url=f"http://127.0.0.1:{srv.server_port}", region="us-east-1",
                          access_key="AKIDEXAMPLE", secret_key="secret", addressing_style="path")
        keys = ["a", "locked/1", "b&c", "locked/2", "unreported"]
        out = c.delete_objects("bkt", keys)
        c.close()
    finally:
        srv.shutdown()
        srv.server_close()
    path, ok_md5, _ = _FakeDelete.seen[-1]
    assert path.startswith("/bkt?delete") and ok_md5
    assert [o["key"] for o in out] == keys  # the order given, whatever the answer's
    assert [o["ok"] for o in out] == [True, False, True, False, False]
    assert out[1]["code"] == "AccessDenied" and out[1]["message"] == "object is locked"
    assert out[4]["code"] == "NotReported"


def test_cli_cp_between_s3_urls(cli, boto, bucket, bucket2, big):
    boto.put_object(Bucket=bucket, Key="src key", Body=big, ContentType="text/x-cli")
    p = subprocess.run([cli, "--part-size", "8MiB", "--multipart-threshold", "8MiB", "cp", f"s3://{bucket}/src key",
                        f"s3://{bucket2}/dst"], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert b"server-side" in p.stdout and b"6 parts" in p.stdout
    assert body(boto, bucket2, "dst") == big
    assert boto.head_object(Bucket=bucket2, Key="dst")["ContentType"] == "text/x-cli"
    p = subprocess.run([cli, "--json", "cp", f"s3://{bucket}/src key", f"s3://{bucket}/small"],
                       capture_output=True, timeout=120)
    rec = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert p.returncode == 0 and rec["outcome"] == "ok" and rec["direction"] == "copy"
    assert rec["result"]["bytes"] == len(big) and rec["destination"] == f"s3://{bucket}/small"
    p = subprocess.run([cli, "--json", "cp", f"s3://{bucket}/nope", f"s3://{bucket}/x"], capture_output=True,
                       timeout=60)
    rec = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert p.returncode == 1 and rec["outcome"] == "failed" and rec["error"]["s3_code"] == "NoSuchKey"
    p = subprocess.run([cli, "cp", f"s3://{bucket}/", f"s3://{bucket}/x"], capture_output=True, timeout=60)
    assert p.returncode == 2 and b"source needs a key" in p.stderr


@pytest.mark.parametrize("size", [MiB, 20 * MiB], ids=["CopyObject", "multipart"])
def test_full_object_checksum_is_preserved(client, boto, bucket, size):
    """A source with a full-object CRC32 keeps it: CopyObject asks for the
    algorithm, a multipart copy creates its upload with the algorithm and
    checksum type FULL_OBJECT, so the server combines the parts' CRCs
    (SeaweedFS does; without FULL_OBJECT it stores a composite "...-N")."""
    data = os.urandom(size)
    boto.put_object(Bucket=bucket, Key="ck", Body=data, ChecksumAlgorithm="CRC32")
    want = boto.head_object(Bucket=bucket, Key="ck", ChecksumMode="ENABLED")["ChecksumCRC32"]
    r = client.copy(bucket, "ck", bucket, "dst", config=CFG8)
    assert r.multipart == (size > 8 * MiB)
    h = boto.head_object(Bucket=bucket, Key="dst", ChecksumMode="ENABLED")
    assert h["ChecksumCRC32"] == want and "-" not in want
    assert body(boto, bucket, "dst") == data


class _CErr(__import__("ctypes").Structure):
    import ctypes as _c
    _fields_ = [("code", _c.c_int), ("http_status", _c.c_int), ("message", _c.c_char_p), ("s3_code", _c.c_char_p),
                ("request_id", _c.c_char_p)]


class _CCopyOpts(__import__("ctypes").Structure):
    import ctypes as _c
    _fields_ = [("metadata_directive", _c.c_int), ("content_type", _c.c_char_p), ("if_match", _c.c_char_p)]


@pytest.fixture
def clib(build_dir, s3env, proxy):
    """The C library itself (ctypes), for the calls the Python API does not
    wrap: s3x_copy_object and s3x_copy. One client straight to the server,
    one through the fault proxy."""
    import ctypes
    lib = ctypes.CDLL(str(build_dir / "libs3xfer.so"))
    lib.s3x_error_last.restype = ctypes.POINTER(_CErr)
    lib.s3x_copy_object.argtypes = [ctypes.c_void_p] + [ctypes.c_char_p] * 4 + [ctypes.c_void_p, ctypes.c_void_p]
    lib.s3x_copy.argtypes = [ctypes.c_void_p] + [ctypes.c_char_p] * 4 + [ctypes.c_void_p, ctypes.c_void_p]
    lib.s3x_client_set_string.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]
    lib.s3x_client_free.argtypes = [ctypes.c_void_p]
    lib.s3x_free.argtypes = [ctypes.c_void_p]
    clients = []
    for url in (s3env["endpoint_url"], proxy.url):
        c = ctypes.c_void_p()
        assert lib.s3x_client_new(ctypes.byref(c)) == 0
        for opt, v in ((0, url), (1, s3env["region"]), (2, s3env["access_key"]), (3, s3env["secret_key"])):
            assert lib.s3x_client_set_string(c, opt, v.encode()) == 0
        clients.append(c)
    yield lib, clients[0], clients[1]
    for c in clients:
        lib.s3x_client_free(c)


def test_c_copy_object_and_copy(clib, boto, bucket, proxy):
    import ctypes
    lib, c, pc = clib
    data = os.urandom(3 * MiB)
    boto.put_object(Bucket=bucket, Key="src", Body=data, ContentType="text/x-c", Metadata={"m": "v"})
    b = bucket.encode()
    etag = ctypes.c_void_p()
    assert lib.s3x_copy_object(c, b, b"src", b, b"one", None, ctypes.byref(etag)) == 0
    assert ctypes.cast(etag, ctypes.c_char_p).value.decode().strip('"') == hashlib.md5(data).hexdigest()
    lib.s3x_free(etag)
    h = boto.head_object(Bucket=bucket, Key="one")
    assert h["ContentType"] == "text/x-c" and h["Metadata"] == {"m": "v"} and body(boto, bucket, "one") == data
    o = _CCopyOpts(1, b"image/gif", None)
    assert lib.s3x_copy_object(c, b, b"src", b, b"two", ctypes.byref(o), None) == 0
    h = boto.head_object(Bucket=bucket, Key="two")
    assert h["ContentType"] == "image/gif" and h["Metadata"] == {}
    # a precondition on the source's ETag
    o = _CCopyOpts(0, None, b'"0123456789abcdef0123456789abcdef"')
    assert lib.s3x_copy_object(c, b, b"src", b, b"three", ctypes.byref(o), None) == -8
    e = lib.s3x_error_last().contents
    assert e.http_status == 412 and e.s3_code == b"PreconditionFailed"
    assert lib.s3x_copy_object(c, b, b"missing", b, b"three", None, None) == -8
    assert lib.s3x_error_last().contents.s3_code == b"NoSuchKey"
    # a 200 whose body is an <Error>: a failure, never a copy
    proxy.set_rules(["error:kind=put,status=200,code=InternalError,message=late failure,times=1"])
    assert lib.s3x_copy_object(pc, b, b"src", b, b"four", None, None) == 0  # transient: retried
    proxy.set_rules(["error:kind=put,status=200,code=InvalidRequest,message=late failure"])
    assert lib.s3x_copy_object(pc, b, b"src", b, b"five", None, None) == -8
    e = lib.s3x_error_last().contents
    assert e.s3_code == b"InvalidRequest" and b"in a 200 response" in e.message
    proxy.set_rules([])
    # s3x_copy: the managed copy with the default knobs; bytes and parts are the result's first fields
    res = ctypes.create_string_buffer(4096)
    assert lib.s3x_copy(c, b, b"src", b, b"six", None, res) == 0
    nbytes, parts = (int.from_bytes(res.raw[i:i + 8], "little", signed=True) for i in (0, 8))
    assert nbytes == len(data) and parts == 1 and body(boto, bucket, "six") == data
    keys = [o["Key"] for o in boto.list_objects_v2(Bucket=bucket)["Contents"]]
    assert sorted(keys) == ["four", "one", "six", "src", "two"]
