"""Every single operation against the real server, with bytes checked by
boto3 as an independent client, plus the error paths of the foundation."""

from __future__ import annotations

import hashlib
import os
import socket

import pytest

import s3xfer

NASTY_KEYS = [
    "plain.txt",
    "with space/and more spaces.bin",
    "unicode/é日本語🎉.dat",
    "plus+equals=amp&q?hash#pct%tilde~",
    "/leading-slash",
    "star*bang!quote'paren()",
    "semi;colon,comma:colon@at$dollar",
]

# Keys a filer-backed server such as SeaweedFS does not store verbatim (it
# folds "//", treats a trailing "/" as a directory, refuses dot segments).
# For these we require the same outcome as boto3 against the same server.
SERVER_SPECIFIC_KEYS = ["double//slash/x", "trailing-slash-dir/", "dots/./and/../here"]


def test_put_get_head_delete_roundtrip(client, boto, bucket):
    data = os.urandom(1 << 20) + b"tail"
    etag = client.put_object(bucket, "a/b.bin", data, content_type="application/x-test")
    assert etag.strip('"') == hashlib.md5(data).hexdigest()
    # boto3 sees exactly what we sent
    got = boto.get_object(Bucket=bucket, Key="a/b.bin")
    assert got["Body"].read() == data
    assert got["ContentType"] == "application/x-test"
    # and we see what is there
    body, info = client.get_object(bucket, "a/b.bin")
    assert body == data
    assert info["size"] == len(data)
    assert info["etag"] == etag
    head = client.head_object(bucket, "a/b.bin")
    assert head["size"] == len(data) and head["etag"] == etag
    client.delete_object(bucket, "a/b.bin")
    with pytest.raises(s3xfer.NoSuchKey) as ei:
        client.head_object(bucket, "a/b.bin")
    assert ei.value.status == 404


def test_empty_object(client, boto, bucket):
    client.put_object(bucket, "empty", b"")
    assert boto.get_object(Bucket=bucket, Key="empty")["Body"].read() == b""
    body, info = client.get_object(bucket, "empty")
    assert body == b"" and info["size"] == 0


def test_ranged_get(client, boto, bucket):
    data = bytes(range(256)) * 4096  # 1 MiB
    boto.put_object(Bucket=bucket, Key="r", Body=data)
    body, info = client.get_object(bucket, "r", range=(10, 19))
    assert body == data[10:20]
    assert info["size"] == len(data)  # from Content-Range: the whole object
    body, _ = client.get_object(bucket, "r", range=(len(data) - 5, None))
    assert body == data[-5:]
    with pytest.raises(s3xfer.InvalidRange) as ei:
        client.get_object(bucket, "r", range=(len(data) + 10, len(data) + 20))
    assert ei.value.status == 416


@pytest.mark.parametrize("key", NASTY_KEYS)
def test_nasty_keys_roundtrip(client, boto, bucket, key):
    data = key.encode("utf-8") * 3
    client.put_object(bucket, key, data)
    assert boto.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    body, _ = client.get_object(bucket, key)
    assert body == data
    assert client.head_object(bucket, key)["size"] == len(data)
    listed = [o["key"] for o in client.list_objects(bucket)]
    assert key in listed or key.lstrip("/") in listed
    client.delete_object(bucket, key)


@pytest.mark.parametrize("key", SERVER_SPECIFIC_KEYS)
def test_server_specific_keys_behave_like_boto3(client, boto, bucket, key):
    import botocore.exceptions
    data = b"payload"
    try:
        boto.put_object(Bucket=bucket, Key=key, Body=data)
        boto_put = None
        boto_get = boto.get_object(Bucket=bucket, Key=key)["Body"].read()
    except botocore.exceptions.ClientError as e:
        boto_put, boto_get = e.response["Error"]["Code"], None
    try:
        client.put_object(bucket, key, data)
        ours_put = None
        ours_get = client.get_object(bucket, key)[0]
    except s3xfer.ClientError as e:
        ours_put, ours_get = e.code, None
    assert ours_put != "SignatureDoesNotMatch"
    assert (ours_put, ours_get) == (boto_put, boto_get)


def test_nasty_keys_written_by_boto_read_by_us(client, boto, bucket):
    for i, key in enumerate(NASTY_KEYS):
        boto.put_object(Bucket=bucket, Key=key, Body=str(i).encode())
    for i, key in enumerate(NASTY_KEYS):
        body, _ = client.get_object(bucket, key)
        assert body == str(i).encode(), key


def test_list_objects_paginates(client, boto, bucket):
    keys = sorted(f"p/{i:04d}" for i in range(23)) + ["q/other"]
    for k in keys:
        boto.put_object(Bucket=bucket, Key=k, Body=b"x")
    page = client.list_objects_page(bucket, prefix="p/", max_keys=10)
    assert len(page["objects"]) == 10 and page["is_truncated"] and page["next_token"]
    allp = client.list_objects(bucket, prefix="p/", max_keys=10)
    assert [o["key"] for o in allp] == keys[:-1]
    assert all(o["size"] == 1 for o in allp)
    tree = client.list_objects(bucket, delimiter="/")
    assert sorted(e["prefix"] for e in tree if "prefix" in e) == ["p/", "q/"]


def test_multipart_primitives(client, boto, bucket):
    part = os.urandom(5 * 1024 * 1024)
    last = os.urandom(1234)
    uid = client.create_multipart_upload(bucket, "mp/key with space", content_type="application/x-mp")
    assert [u["upload_id"] for u in client.list_multipart_uploads(bucket)] == [uid]
    e1 = client.upload_part(bucket, "mp/key with space", uid, 1, part)
    e2 = client.upload_part(bucket, "mp/key with space", uid, 2, last)
    parts = client.list_parts(bucket, "mp/key with space", uid)
    assert [(p["part_number"], p["size"], p["etag"]) for p in parts] == [(1, len(part), e1), (2, len(last), e2)]
    etag = client.complete_multipart_upload(bucket, "mp/key with space", uid, [(1, e1), (2, e2)])
    assert etag.strip('"').endswith("-2")
    assert boto.get_object(Bucket=bucket, Key="mp/key with space")["Body"].read() == part + last
    assert client.list_multipart_uploads(bucket) == []


def test_abort_multipart(client, bucket):
    uid = client.create_multipart_upload(bucket, "ab")
    client.upload_part(bucket, "ab", uid, 1, b"x" * 100)
    client.abort_multipart_upload(bucket, "ab", uid)
    assert client.list_multipart_uploads(bucket) == []
    with pytest.raises(s3xfer.NoSuchUpload):
        client.list_parts(bucket, "ab", uid)


def test_complete_with_bad_etag_is_an_error(client, bucket):
    uid = client.create_multipart_upload(bucket, "bad")
    client.upload_part(bucket, "bad", uid, 1, b"x" * 100)
    with pytest.raises(s3xfer.ClientError) as ei:
        client.complete_multipart_upload(bucket, "bad", uid, [(1, '"00000000000000000000000000000000"')])
    assert ei.value.code  # e.g. InvalidPart
    client.abort_multipart_upload(bucket, "bad", uid)


def test_complete_small_parts_rejected(client, bucket):
    uid = client.create_multipart_upload(bucket, "small")
    e1 = client.upload_part(bucket, "small", uid, 1, b"a" * 100)
    e2 = client.upload_part(bucket, "small", uid, 2, b"b" * 100)
    with pytest.raises(s3xfer.ClientError) as ei:
        client.complete_multipart_upload(bucket, "small", uid, [(1, e1), (2, e2)])
    assert ei.value.code == "EntityTooSmall"
    client.abort_multipart_upload(bucket, "small", uid)


def test_create_and_delete_bucket(client, boto):
    name = "s3xfer-cb-" + os.urandom(4).hex()
    client.create_bucket(name)
    client.head_bucket(name)
    assert name in [b["Name"] for b in boto.list_buckets()["Buckets"]]
    client.delete_bucket(name)
    with pytest.raises(s3xfer.ClientError) as ei:
        client.head_bucket(name)
    assert ei.value.status == 404


def test_missing_bucket(client):
    with pytest.raises(s3xfer.NoSuchBucket) as ei:
        client.get_object("no-such-bucket-" + os.urandom(4).hex(), "k")
    assert ei.value.status == 404 and ei.value.code == "NoSuchBucket"
    # HEAD responses carry no body, so a missing bucket there is a plain 404
    with pytest.raises(s3xfer.ClientError) as ei:
        client.head_object("no-such-bucket-" + os.urandom(4).hex(), "k")
    assert ei.value.status == 404
    with pytest.raises(s3xfer.NoSuchBucket):
        client.list_objects("no-such-bucket-" + os.urandom(4).hex())


def test_missing_key(client, bucket):
    with pytest.raises(s3xfer.NoSuchKey) as ei:
        client.get_object(bucket, "nope")
    e = ei.value
    assert e.status == 404 and e.code == "NoSuchKey"
    assert "nope" in str(e) and bucket in str(e)
    assert isinstance(e, s3xfer.ClientError) and isinstance(e, s3xfer.S3xferError)


def test_wrong_secret_key(s3env, bucket):
    bad = s3xfer.Client(endpoint_url=s3env["endpoint_url"], region=s3env["region"],
                        access_key=s3env["access_key"], secret_key="wrong" + s3env["secret_key"])
    with pytest.raises(s3xfer.SignatureDoesNotMatch) as ei:
        bad.put_object(bucket, "k", b"data")
    assert ei.value.status == 403
    assert "SignatureDoesNotMatch" in str(ei.value)
    assert "wrong" not in str(ei.value)  # the secret never appears in messages
    bad.close()


def test_unknown_access_key(s3env, bucket):
    bad = s3xfer.Client(endpoint_url=s3env["endpoint_url"], region=s3env["region"],
                        access_key="AKIANOSUCHKEY0000000", secret_key=s3env["secret_key"])
    with pytest.raises(s3xfer.AccessDenied) as ei:
        bad.get_object(bucket, "k")
    assert ei.value.status == 403
    bad.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint_names_the_endpoint(s3env):
    ep = f"http://127.0.0.1:{_free_port()}"
    c = s3xfer.Client(endpoint_url=ep, access_key="a", secret_key="b")
    with pytest.raises(s3xfer.ConnectionError) as ei:
        c.get_object("bkt", "k")
    assert ep in str(ei.value)
    assert isinstance(ei.value, OSError)  # builtins.ConnectionError is an OSError
    c.close()


def test_bad_endpoint_rejected():
    with pytest.raises(s3xfer.InvalidConfigError) as ei:
        s3xfer.Client(endpoint_url="ftp://example.com", access_key="a", secret_key="b")
    assert "http://" in str(ei.value)


def test_bad_arguments(client, bucket):
    with pytest.raises(s3xfer.InvalidConfigError):
        client.get_object(bucket, "")
    with pytest.raises(s3xfer.InvalidConfigError):
        client.get_object("", "k")
    with pytest.raises(TypeError):
        client.put_object(bucket, "k", "not bytes")


def test_credentials_from_environment(s3env, bucket, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3env["endpoint_url"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3env["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3env["secret_key"])
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with s3xfer.Client() as c:
        assert c.endpoint_url == s3env["endpoint_url"].rstrip("/")
        c.put_object(bucket, "env", b"1")
        assert c.get_object(bucket, "env")[0] == b"1"


def test_credentials_from_profile(s3env, bucket, monkeypatch, tmp_path):
    creds = tmp_path / "credentials"
    creds.write_text("[default]\naws_access_key_id = nope\naws_secret_access_key = nope\n\n"
                     f"[s3xtest]\naws_access_key_id = {s3env['access_key']}\n"
                     f"aws_secret_access_key = {s3env['secret_key']}\n")
    cfg = tmp_path / "config"
    cfg.write_text("[profile s3xtest]\nregion = us-east-1\n")
    for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
              "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(cfg))
    # explicit profile
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile="s3xtest") as c:
        c.put_object(bucket, "prof", b"p")
        assert c.region == "us-east-1"
    # AWS_PROFILE
    monkeypatch.setenv("AWS_PROFILE", "s3xtest")
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"]) as c:
        assert c.get_object(bucket, "prof")[0] == b"p"
    # the default profile has wrong keys: a clear server error, not a crash
    monkeypatch.delenv("AWS_PROFILE")
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"]) as c:
        with pytest.raises(s3xfer.AccessDenied):
            c.get_object(bucket, "prof")
    # a profile that does not exist
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile="missing")
    assert "missing" in str(ei.value)


def test_no_credentials_at_all(monkeypatch, tmp_path):
    for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with pytest.raises(s3xfer.CredentialsError):
        s3xfer.Client(endpoint_url="http://127.0.0.1:1")


def test_region_and_endpoint_defaults(monkeypatch):
    for v in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    c = s3xfer.Client(access_key="a", secret_key="b")
    assert c.region == "us-east-1"
    # botocore's default for us-east-1 is the legacy global endpoint
    # (test_endpoints_oracle.py checks the rest of the rules against botocore).
    assert c.endpoint_url == "https://s3.amazonaws.com"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    assert s3xfer.Client(access_key="a", secret_key="b").region == "eu-west-3"
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert s3xfer.Client(access_key="a", secret_key="b").region == "ap-south-1"


def test_virtual_host_addressing_is_chosen_for_names(monkeypatch):
    # Not sent anywhere: just check the resolution does not fail for a DNS name.
    c = s3xfer.Client(endpoint_url="https://s3.example.com", access_key="a", secret_key="b",
                      addressing_style="virtual")
    assert c.endpoint_url == "https://s3.example.com"
    with pytest.raises(s3xfer.InvalidConfigError):
        s3xfer.Client(endpoint_url="https://s3.example.com", access_key="a", secret_key="b",
                      addressing_style="sideways")


def test_client_shared_across_threads(client, bucket):
    import threading
    errors = []

    def work(i):
        try:
            data = os.urandom(100_000 + i)
            client.put_object(bucket, f"t/{i}", data)
            assert client.get_object(bucket, f"t/{i}")[0] == data
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(client.list_objects(bucket, prefix="t/")) == 8
