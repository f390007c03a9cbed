"""Single operations (put_object, get_object, head_object, listing, deletes)
retry like transfers do: through the fault proxy, each survives 503 SlowDown,
500 InternalError and a reset connection, and the proxy's request count shows
exactly one retry per injected fault; 403 and 404 are answered at once (one
request), and a streamed body that was partly consumed is not replayed."""

from __future__ import annotations

import hashlib
import os

import pytest

import s3xfer
from faultproxy import FaultProxy


@pytest.fixture
def proxy(s3env):
    p = FaultProxy.from_url(s3env["endpoint_url"], seed=11, decisions="keyed")
    p.start()
    yield p
    p.stop()


def make_client(s3env, proxy, **kw):
    return s3xfer.Client(endpoint_url=proxy.url, region=s3env["region"], access_key=s3env["access_key"],
                         secret_key=s3env["secret_key"], **kw)


@pytest.fixture
def pclient(s3env, proxy):
    c = make_client(s3env, proxy)
    yield c
    c.close()


def sha(b) -> str:
    return hashlib.sha256(b).hexdigest()


def requests_of(proxy, kind):
    return proxy.stats()["by_kind"].get(kind, 0)


def fired(proxy):
    return sum(proxy.stats()["faults"].values())


BODY = os.urandom(256 * 1024 + 17)

# Faults that each single operation must survive: (name, rule template).
# {kind} is the proxy's request kind of the operation; each fires twice.
ERRORS = {
    "503": "slowdown_503:kind={kind},times=2",
    "500": "internal_error_500:kind={kind},times=2",
}


def run_op(c, op, bucket):
    """Runs one single operation and returns something to check."""
    if op == "put_object":
        c.put_object(bucket, "obj", BODY)
        return None
    if op == "get_object":
        data, info = c.get_object(bucket, "obj")
        assert sha(data) == sha(BODY) and info["size"] == len(BODY)
        return data
    if op == "head_object":
        info = c.head_object(bucket, "obj")
        assert info["size"] == len(BODY)
        return info
    if op == "list":
        keys = [o["key"] for o in c.list_objects_page(bucket)["objects"]]
        assert keys == ["obj"]
        return keys
    if op == "delete":
        c.delete_object(bucket, "obj")
        return None
    raise AssertionError(op)


KIND = {"put_object": "put", "get_object": "get", "head_object": "head", "list": "list", "delete": "delete"}

# A reset that loses each operation's first attempt: a request body cut after
# 1 KiB for the PUT, a response body cut after 1 KiB for the GET and the
# listing, and for the requests without bodies the connection reset before
# the request is forwarded.
RESETS = {
    "put_object": "reset_request:kind=put,after=1K,times=1",
    "get_object": "reset_response:kind=get,after=1K,times=1",
    "head_object": "reset_request:kind=head,times=1",
    "list": "reset_response:kind=list,after=100,times=1",
    "delete": "reset_request:kind=delete,times=1",
}


@pytest.mark.parametrize("op", sorted(KIND))
@pytest.mark.parametrize("fault", sorted(ERRORS) + ["reset"])
def test_single_op_survives(pclient, boto, bucket, proxy, op, fault):
    if op != "put_object":
        boto.put_object(Bucket=bucket, Key="obj", Body=BODY)
    kind = KIND[op]
    rule = RESETS[op] if fault == "reset" else ERRORS[fault].format(kind=kind)
    proxy.set_rules([rule])
    proxy.reset_stats()
    run_op(pclient, op, bucket)
    n = fired(proxy)
    assert n == (1 if fault == "reset" else 2), proxy.stats()
    # Every fault cost exactly one more request of that kind: retried, and
    # not more than needed.
    assert requests_of(proxy, kind) == n + 1, proxy.stats()
    proxy.set_rules([])
    if op == "put_object":
        assert sha(boto.get_object(Bucket=bucket, Key="obj")["Body"].read()) == sha(BODY)
    if op == "delete":
        with pytest.raises(Exception):
            boto.head_object(Bucket=bucket, Key="obj")


@pytest.mark.parametrize("op", sorted(KIND))
def test_403_is_not_retried(pclient, boto, bucket, proxy, op):
    if op != "put_object":
        boto.put_object(Bucket=bucket, Key="obj", Body=BODY)
    kind = KIND[op]
    proxy.set_rules([f"error:kind={kind},status=403,code=AccessDenied,message=denied"])
    proxy.reset_stats()
    with pytest.raises(s3xfer.AccessDenied) as ei:
        run_op(pclient, op, bucket)
    assert ei.value.status == 403
    assert requests_of(proxy, kind) == 1, proxy.stats()


def test_404_is_not_retried(pclient, bucket, proxy):
    proxy.reset_stats()
    with pytest.raises(s3xfer.NoSuchKey):
        pclient.get_object(bucket, "missing")
    with pytest.raises(s3xfer.NoSuchKey):
        pclient.head_object(bucket, "missing")
    with pytest.raises(s3xfer.NoSuchBucket):
        pclient.list_objects_page(bucket + "-missing")
    st = proxy.stats()["by_kind"]
    assert st.get("get", 0) == 1 and st.get("head", 0) == 1 and st.get("list", 0) == 1, st


def test_max_attempts_of_the_client(s3env, boto, bucket, proxy):
    """The client's max_attempts bounds the attempts of a single operation;
    with retry_timeout 0 it bounds throttling too."""
    boto.put_object(Bucket=bucket, Key="obj", Body=BODY)
    with make_client(s3env, proxy, max_attempts=2, retry_timeout=0) as c:
        proxy.set_rules(["slowdown_503:kind=head"])
        proxy.reset_stats()
        with pytest.raises(s3xfer.ClientError) as ei:
            c.head_object(bucket, "obj")
        # (a HEAD answer has no body: the code comes from the status)
        assert ei.value.status == 503 and "gave up after 2 attempts" in str(ei.value)
        assert requests_of(proxy, "head") == 2
    # A reset on a client's first (fresh) connection is not retried by
    # libcurl itself (it retries only a reused connection that died at once):
    # with one attempt it fails, with the default it is our retry that mends it.
    with make_client(s3env, proxy, max_attempts=1) as c:
        proxy.set_rules(["reset_request:kind=head,times=1"])
        proxy.reset_stats()
        with pytest.raises(s3xfer.S3xferError):
            c.head_object(bucket, "obj")
        assert requests_of(proxy, "head") == 1
    with make_client(s3env, proxy) as c:
        proxy.set_rules(["reset_request:kind=head,times=1"])
        proxy.reset_stats()
        assert c.head_object(bucket, "obj")["size"] == len(BODY)
        assert requests_of(proxy, "head") == 2
    with pytest.raises(s3xfer.InvalidConfigError, match="max_attempts"):
        make_client(s3env, proxy, max_attempts=0)


def test_throttling_retried_within_the_window(pclient, boto, bucket, proxy):
    """Throttling is retried past max_attempts while the retry window lasts,
    honouring Retry-After."""
    boto.put_object(Bucket=bucket, Key="obj", Body=BODY)
    proxy.set_rules(["slowdown_503:kind=get,times=6,retry_after=0"])
    proxy.reset_stats()
    data, _ = pclient.get_object(bucket, "obj")
    assert sha(data) == sha(BODY)
    assert requests_of(proxy, "get") == 7


def test_multipart_single_calls_retry(pclient, boto, bucket, proxy):
    """create, upload_part, complete and abort as single calls survive a 503
    each; an abort whose first attempt was applied before the connection
    broke still succeeds."""
    part = os.urandom(5 * 1024 * 1024)
    proxy.set_rules(["slowdown_503:kind=create_multipart,times=1", "slowdown_503:kind=upload_part,times=1",
                     "slowdown_503:kind=complete,times=1"])
    proxy.reset_stats()
    uid = pclient.create_multipart_upload(bucket, "mp")
    etag = pclient.upload_part(bucket, "mp", uid, 1, part)
    pclient.complete_multipart_upload(bucket, "mp", uid, [(1, etag)])
    assert fired(proxy) == 3
    st = proxy.stats()["by_kind"]
    assert st["create_multipart"] == 2 and st["upload_part"] == 2 and st["complete"] == 2, st
    proxy.set_rules([])
    assert sha(boto.get_object(Bucket=bucket, Key="mp")["Body"].read()) == sha(part)

    uid = pclient.create_multipart_upload(bucket, "mp2")
    # The abort reaches the server, then the connection breaks before the
    # answer: the retry finds the upload gone, which is what was asked.
    proxy.set_rules(["reset_response:kind=abort,after=0,times=1"])
    proxy.reset_stats()
    pclient.abort_multipart_upload(bucket, "mp2", uid)
    assert requests_of(proxy, "abort") == 2
    assert [u for u in pclient.list_multipart_uploads(bucket) if u["upload_id"] == uid] == []

