"""SSO (IAM Identity Center) profiles and the region from instance metadata.

The SSO portal and the metadata service are in-test fakes on 127.0.0.1
(credfakes.py); requests to the real S3 server go through the checking proxy,
which verifies each signature against the credentials the fake portal
issued. The SSO token cache is a private HOME of the test's own; botocore,
run against the same files and the same fake portal, is the oracle for the
cache file's name."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

import s3xfer
from credfakes import CheckingProxy, Issuer, MetadataServer, SsoPortal, iso
from test_credentials import CRED_VARS, roundtrip

ACCOUNT, ROLE = "123456789012", "S3Admins"
START_URL = "https://my-sso-portal.awsapps.com/start"


@pytest.fixture
def home(monkeypatch, tmp_path, s3env):
    """No credentials anywhere, HOME private (the SSO cache lives there),
    instance metadata disabled. Returns HOME."""
    for v in CRED_VARS + ("AWS_ENDPOINT_URL_SSO",):
        monkeypatch.delenv(v, raising=False)
    h = tmp_path / "home"
    (h / ".aws" / "sso" / "cache").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(h / ".aws" / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(h / ".aws" / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", s3env["region"])
    return h


@pytest.fixture
def proxy(s3env):
    p = CheckingProxy(s3env["endpoint_url"], s3env["access_key"], s3env["secret_key"], s3env["region"]).start()
    yield p
    p.stop()


@pytest.fixture
def portal(s3env, proxy, monkeypatch):
    iss = Issuer(s3env["access_key"], s3env["secret_key"], 3600, "sso")
    proxy.issuers.append(iss)
    p = SsoPortal(iss, access_token="sso-access-token-" + os.urandom(8).hex(), account_id=ACCOUNT,
                  role_name=ROLE).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_SSO", p.url)
    yield p
    p.stop()


def write_token(home, key: str, token: str, expires_in: float = 3600, **extra):
    path = home / ".aws" / "sso" / "cache" / (hashlib.sha1(key.encode()).hexdigest() + ".json")
    doc = {"startUrl": START_URL, "region": "us-east-1", "accessToken": token,
           "expiresAt": iso(time.time() + expires_in), **extra}
    path.write_text(json.dumps(doc))
    return path


SESSION_CONFIG = f"""[profile dev]
sso_session = my-sso
sso_account_id = {ACCOUNT}
sso_role_name = {ROLE}

[sso-session my-sso]
sso_region = us-east-1
sso_start_url = {START_URL}
sso_registration_scopes = sso:account:access
"""

LEGACY_CONFIG = f"""[profile legacy]
sso_start_url = {START_URL}
sso_region = us-east-1
sso_account_id = {ACCOUNT}
sso_role_name = {ROLE}
"""


def test_sso_session_profile(home, portal, proxy, bucket):
    (home / ".aws" / "config").write_text(SESSION_CONFIG)
    write_token(home, "my-sso", portal.access_token)
    with s3xfer.Client(endpoint_url=proxy.url, profile="dev") as c:
        assert c.credentials_source == "sso"
        assert c.credentials_expiry == pytest.approx(time.time() + 3600, abs=5)
        roundtrip(c, bucket, "sso-session")
    call = portal.calls[0]
    assert call["path"] == "/federation/credentials"
    assert call["query"] == {"account_id": ACCOUNT, "role_name": ROLE}
    assert call["token"] == portal.access_token
    assert call["authorization"] is None          # a bearer token, no SigV4
    assert proxy.seen and not proxy.rejected


def test_legacy_sso_profile_and_aws_profile(home, portal, proxy, bucket, monkeypatch):
    (home / ".aws" / "config").write_text(LEGACY_CONFIG)
    write_token(home, START_URL, portal.access_token)   # legacy: keyed by the start URL
    monkeypatch.setenv("AWS_PROFILE", "legacy")
    with s3xfer.Client(endpoint_url=proxy.url) as c:
        assert c.credentials_source == "sso"
        roundtrip(c, bucket, "sso-legacy")
    assert len(portal.calls) == 1 and not proxy.rejected


def test_sso_cache_file_name_matches_botocore(home, portal, tmp_path):
    """botocore, in a child with the same HOME and config, finds the same
    cached token and gets the same role credentials from the fake portal."""
    (home / ".aws" / "config").write_text(SESSION_CONFIG + "\n" + LEGACY_CONFIG)
    write_token(home, "my-sso", portal.access_token)
    write_token(home, START_URL, portal.access_token)
    child = ("import botocore.session, json, sys\n"
             "out = {}\n"
             "for p in sys.argv[1:]:\n"
             "    c = botocore.session.Session(profile=p).get_credentials().get_frozen_credentials()\n"
             "    out[p] = c.access_key\n"
             "print(json.dumps(out))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env["AWS_ENDPOINT_URL_SSO"] = portal.url
    p = subprocess.run([sys.executable, "-c", child, "dev", "legacy"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    boto = json.loads(p.stdout)
    n_boto = len(portal.calls)
    assert n_boto == 2 and all(c["token"] == portal.access_token for c in portal.calls)
    for prof in ("dev", "legacy"):
        with s3xfer.Client(endpoint_url="http://127.0.0.1:1", profile=prof) as c:
            assert c.credentials_source == "sso"
    assert len(portal.calls) == n_boto + 2
    assert boto == {"dev": portal.issuer.ak, "legacy": portal.issuer.ak}


def test_sso_expired_or_missing_token(home, portal):
    (home / ".aws" / "config").write_text(SESSION_CONFIG)
    # missing cache file
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url="http://127.0.0.1:1", profile="dev")
    msg = str(ei.value)
    assert "aws sso login --profile dev" in msg and "no cached SSO token" in msg and "my-sso" in msg
    # expired
    write_token(home, "my-sso", portal.access_token, expires_in=-60)
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url="http://127.0.0.1:1", profile="dev")
    assert "expired" in str(ei.value) and "aws sso login --profile dev" in str(ei.value)
    # a token the portal does not know (revoked): the portal's 401 says the same
    write_token(home, "my-sso", "revoked-token")
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url="http://127.0.0.1:1", profile="dev")
    assert "401" in str(ei.value) and "aws sso login --profile dev" in str(ei.value)
    assert "revoked-token" not in str(ei.value) and portal.access_token not in str(ei.value)
    # a cache file without the fields
    write_token(home, "my-sso", "")
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url="http://127.0.0.1:1", profile="dev")
    assert "accessToken" in str(ei.value)
    # no portal call was made for the refused tokens except the revoked one
    assert len(portal.calls) == 1


def test_sso_configuration_errors(home, portal):
    cfg = home / ".aws" / "config"
    cfg.write_text(f"[profile half]\nsso_account_id = {ACCOUNT}\nsso_region = us-east-1\n")
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url="http://127.0.0.1:1", profile="half")
    assert "sso_role_name" in str(ei.value) and "sso_start_url" in str(ei.value)
    cfg.write_text(f"[profile dev]\nsso_session = nope\nsso_account_id = {ACCOUNT}\nsso_role_name = {ROLE}\n")
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url="http://127.0.0.1:1", profile="dev")
    assert "sso-session nope" in str(ei.value)
    cfg.write_text(SESSION_CONFIG.replace("sso_session = my-sso", "sso_session = my-sso\nsso_region = eu-west-1"))
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url="http://127.0.0.1:1", profile="dev")
    assert "sso_region differs" in str(ei.value)
    # the wrong role: the portal's 403
    cfg.write_text(SESSION_CONFIG.replace(ROLE, "OtherRole"))
    write_token(home, "my-sso", portal.access_token)
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url="http://127.0.0.1:1", profile="dev")
    assert "403" in str(ei.value)
    assert portal.calls[-1]["query"]["role_name"] == "OtherRole"


def test_sso_credentials_refresh(home, s3env, proxy, bucket):
    iss = Issuer(s3env["access_key"], s3env["secret_key"], 4, "sso-short")
    proxy.issuers.append(iss)
    portal = SsoPortal(iss, "short-lived", ACCOUNT, ROLE).start()
    try:
        os.environ["AWS_ENDPOINT_URL_SSO"] = portal.url
        (home / ".aws" / "config").write_text(SESSION_CONFIG)
        write_token(home, "my-sso", "short-lived")
        with s3xfer.Client(endpoint_url=proxy.url, profile="dev") as c:
            t_end = time.monotonic() + 6
            i = 0
            while time.monotonic() < t_end:
                roundtrip(c, bucket, f"refresh-{i}")
                i += 1
                time.sleep(0.2)
            assert c.credentials_refreshes >= 1
        assert len(portal.calls) >= 2
        assert proxy.seen and not proxy.rejected
    finally:
        os.environ.pop("AWS_ENDPOINT_URL_SSO", None)
        portal.stop()


# ---- region from instance metadata -----------------------------------------------------

def test_region_from_imds(home, monkeypatch):
    fake = MetadataServer(None, region="eu-central-2").start()
    try:
        for v in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            monkeypatch.delenv(v, raising=False)
        monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.url)
        with s3xfer.Client(access_key="AK", secret_key="SK") as c:
            assert c.region == "eu-central-2"
            assert c._resolve_url("bkt", "k") == "https://bkt.s3.eu-central-2.amazonaws.com/k"
        # IMDSv2: a token first, then the GET with it
        assert fake.log[0][:2] == ("PUT", "/latest/api/token")
        assert ("GET", "/latest/meta-data/placement/region", True) in fake.log
        # anything else set wins, and the metadata service is not asked
        n = len(fake.log)
        (home / ".aws" / "config").write_text("[default]\nregion = ap-east-1\n")
        with s3xfer.Client(access_key="AK", secret_key="SK") as c:
            assert c.region == "ap-east-1"
        monkeypatch.setenv("AWS_DEFAULT_REGION", "sa-east-1")
        with s3xfer.Client(access_key="AK", secret_key="SK") as c:
            assert c.region == "sa-east-1"
        assert len(fake.log) == n
        # disabled: not asked, the default
        monkeypatch.delenv("AWS_DEFAULT_REGION")
        (home / ".aws" / "config").write_text("")
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        with s3xfer.Client(access_key="AK", secret_key="SK") as c:
            assert c.region == "us-east-1"
        assert len(fake.log) == n
    finally:
        fake.stop()


def test_region_from_imds_bad_answers(home, monkeypatch):
    for v in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    # a hostile region from the metadata service is refused, never put in a host
    fake = MetadataServer(None, region="evil.example.com#").start()
    try:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.url)
        with pytest.raises(s3xfer.InvalidConfigError) as ei:
            s3xfer.Client(access_key="AK", secret_key="SK")
        assert "instance metadata" in str(ei.value)
    finally:
        fake.stop()
    # no region there (404): the default
    fake = MetadataServer(None).start()
    try:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.url)
        with s3xfer.Client(access_key="AK", secret_key="SK") as c:
            assert c.region == "us-east-1"
    finally:
        fake.stop()
    # unreachable: the default, quickly (one attempt, 1 s timeouts)
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{s.getsockname()[1]}")
        t0 = time.monotonic()
        with s3xfer.Client(access_key="AK", secret_key="SK") as c:
            assert c.region == "us-east-1"
        assert time.monotonic() - t0 < 3
