"""HTTPS against the local server's TLS port: verification with the project's
CA succeeds, without it fails clearly, and can be switched off."""

from __future__ import annotations

import os

import pytest

import s3xfer


@pytest.fixture(scope="module")
def https(s3env):
    ep = os.environ.get("S3X_HTTPS_ENDPOINT_URL")
    ca = os.environ.get("S3X_HTTPS_CA_BUNDLE")
    if not ep or not ca:
        pytest.fail("S3X_HTTPS_ENDPOINT_URL / S3X_HTTPS_CA_BUNDLE unset: run the tests through "
                    "scripts/with-local-s3 (make test), which starts the local server's HTTPS port")
    return ep, ca


def _client(s3env, ep, **kw):
    return s3xfer.Client(endpoint_url=ep, region=s3env["region"], access_key=s3env["access_key"],
                         secret_key=s3env["secret_key"], **kw)


def test_https_with_ca_bundle(s3env, https, bucket):
    ep, ca = https
    with _client(s3env, ep, verify=ca) as c:
        c.put_object(bucket, "tls", b"secure bytes")
        assert c.get_object(bucket, "tls")[0] == b"secure bytes"


def test_https_ca_from_environment(s3env, https, bucket, monkeypatch):
    ep, ca = https
    monkeypatch.setenv("AWS_CA_BUNDLE", ca)
    with _client(s3env, ep) as c:
        c.put_object(bucket, "tls-env", b"x")


def test_https_without_ca_fails_clearly(s3env, https, bucket, monkeypatch):
    ep, _ = https
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    with _client(s3env, ep) as c:
        with pytest.raises(s3xfer.TLSError) as ei:
            c.put_object(bucket, "tls", b"x")
    msg = str(ei.value)
    assert ep in msg and "TLS" in msg


def test_https_verification_off(s3env, https, bucket, monkeypatch):
    ep, _ = https
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    with _client(s3env, ep, verify=False) as c:
        c.put_object(bucket, "tls-noverify", b"x")
