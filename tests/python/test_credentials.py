"""The credential provider chain (core/src/net/creds.c) end to end: which
provider supplies the keys, that those exact keys sign the requests that
reach the real server, the errors when a provider is misconfigured, and
refresh of short-lived credentials during long transfers.

Nothing here contacts anything but 127.0.0.1: STS is moto's server behind a
recorder, instance metadata and the container endpoint are in-test fakes,
and the requests to the real S3 server go through a proxy that verifies
each signature against the credentials it names (credfakes.py)."""

from __future__ import annotations

import os
import socket
import stat
import sys
import textwrap
import time
import urllib.error
import urllib.request

import pytest

import s3xfer
from credfakes import CheckingProxy, Issuer, MetadataServer, StsRecorder, iso, start_moto

CRED_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
             "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
             "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
             "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
             "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_ENDPOINT_URL_STS")


@pytest.fixture
def clean(monkeypatch, tmp_path, s3env):
    """No credentials anywhere: empty config and credentials files of the
    test's own, IMDS disabled. Returns (config path, credentials path)."""
    for v in CRED_VARS:
        monkeypatch.delenv(v, raising=False)
    cfg, cred = tmp_path / "config", tmp_path / "credentials"
    cfg.write_text("")
    cred.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(cfg))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(cred))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", s3env["region"])
    return cfg, cred


@pytest.fixture(scope="module")
def moto_url():
    proc, url = start_moto()
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except Exception:
        proc.kill()


@pytest.fixture
def sts(moto_url, monkeypatch):
    rec = StsRecorder(moto_url).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", rec.url)
    yield rec
    rec.stop()


@pytest.fixture
def proxy(s3env):
    p = CheckingProxy(s3env["endpoint_url"], s3env["access_key"], s3env["secret_key"], s3env["region"]).start()
    yield p
    p.stop()


def roundtrip(client, bucket, key, data=b"credentials chain"):
    client.put_object(bucket, key, data)
    assert client.get_object(bucket, key)[0] == data


def script(tmp_path, name, body):
    p = tmp_path / name
    p.write_text("#!" + sys.executable + "\n" + textwrap.dedent(body))
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


# ---- explicit, environment, files -------------------------------------------

def test_explicit_and_env_sources(clean, s3env, bucket, monkeypatch):
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"], access_key=s3env["access_key"],
                       secret_key=s3env["secret_key"]) as c:
        assert c.credentials_source == "explicit"
        roundtrip(c, bucket, "explicit")
        assert s3env["secret_key"] not in repr(c) and s3env["access_key"] not in repr(c)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3env["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3env["secret_key"])
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"]) as c:
        assert c.credentials_source == "env"
        assert c.credentials_expiry is None
        roundtrip(c, bucket, "env")
    # half of a pair in the environment is an error, not a silent fall-through
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(s3xfer.CredentialsError, match="AWS_SECRET_ACCESS_KEY"):
        s3xfer.Client(endpoint_url=s3env["endpoint_url"])


def test_shared_files_sources(clean, s3env, bucket, monkeypatch):
    cfg, cred = clean
    cred.write_text(f"[files]\naws_access_key_id = {s3env['access_key']}\n"
                    f"aws_secret_access_key = {s3env['secret_key']}\n")
    cfg.write_text(f"[profile cfgkeys]\naws_access_key_id = {s3env['access_key']}\n"
                   f"aws_secret_access_key = {s3env['secret_key']}\n")
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile="files") as c:
        assert c.credentials_source == "shared-credentials-file"
        roundtrip(c, bucket, "files")
    monkeypatch.setenv("AWS_PROFILE", "cfgkeys")
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"]) as c:
        assert c.credentials_source == "config-file"
        roundtrip(c, bucket, "cfg")
    # an explicit profile wins over the environment (botocore drops env then)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile="files") as c:
        assert c.credentials_source == "shared-credentials-file"
        roundtrip(c, bucket, "files2")


def test_bad_files_and_profiles(clean, s3env, tmp_path, monkeypatch):
    cfg, cred = clean
    # unknown profile
    with pytest.raises(s3xfer.CredentialsError, match="'nosuch' is not in the shared config file"):
        s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile="nosuch")
    # missing files: nothing found, and the message names every provider tried
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "missing-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "missing-credentials"))
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url=s3env["endpoint_url"])
    msg = str(ei.value)
    for name in ("env", "assume-role", "assume-role-with-web-identity", "shared-credentials-file",
                 "custom-process", "config-file", "container-role", "iam-role"):
        assert f"{name}:" in msg, (name, msg)
    assert "AWS_EC2_METADATA_DISABLED" in msg
    # a malformed line names the file and the line
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(cred))
    cred.write_text("[default]\naws_access_key_id = A\nthis line is neither\n")
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url=s3env["endpoint_url"])
    assert str(cred) in str(ei.value) and "line 3" in str(ei.value)
    # an unreadable file (not a regular file) is skipped as botocore skips it
    cred.unlink()
    cred.mkdir()
    with pytest.raises(s3xfer.CredentialsError, match="no credentials found"):
        s3xfer.Client(endpoint_url=s3env["endpoint_url"])


# ---- roles through STS (moto) --------------------------------------------------

ROLE1 = "arn:aws:iam::123456789012:role/s3xfer-one"
ROLE2 = "arn:aws:iam::123456789012:role/s3xfer-two"


def test_assume_role_chain_signs_with_issued_keys(clean, s3env, sts, proxy, bucket, boto):
    cfg, cred = clean
    cred.write_text(f"[base]\naws_access_key_id = {s3env['access_key']}\n"
                    f"aws_secret_access_key = {s3env['secret_key']}\n")
    cfg.write_text(textwrap.dedent(f"""\
        [profile one]
        role_arn = {ROLE1}
        source_profile = base
        external_id = ext-1234
        role_session_name = first-session
        duration_seconds = 1800
        [profile two]
        role_arn = {ROLE2}
        source_profile = one
        """))
    with s3xfer.Client(endpoint_url=proxy.url, profile="two") as c:
        assert c.credentials_source == "assume-role"
        assert len(sts.calls) == 2, sts.calls
        first, second = sts.calls
        assert first["form"]["Action"] == "AssumeRole" and first["form"]["RoleArn"] == ROLE1
        assert first["form"]["ExternalId"] == "ext-1234"
        assert first["form"]["RoleSessionName"] == "first-session"
        assert first["form"]["DurationSeconds"] == "1800"
        assert first["signed_by"] == s3env["access_key"]          # the base profile's keys
        assert first["token_sent"] is None
        issued1 = first["creds"]
        assert second["form"]["RoleArn"] == ROLE2
        assert second["signed_by"] == issued1["AccessKeyId"]     # chained: signed by role one
        assert second["token_sent"] == issued1["SessionToken"]
        issued2 = second["creds"]
        proxy.allow(issued2["AccessKeyId"], issued2["SecretAccessKey"], issued2["SessionToken"])
        roundtrip(c, bucket, "role")
        assert c.credentials_expiry and c.credentials_expiry > time.time() + 600
    assert proxy.seen and not proxy.rejected, proxy.rejected
    assert {r["ak"] for r in proxy.seen} == {issued2["AccessKeyId"]}
    assert {r["token"] for r in proxy.seen} == {issued2["SessionToken"]}
    assert boto.get_object(Bucket=bucket, Key="role")["Body"].read() == b"credentials chain"


def test_credential_source_environment(clean, s3env, sts, monkeypatch):
    cfg, _ = clean
    cfg.write_text(f"[profile envrole]\nrole_arn = {ROLE1}\ncredential_source = Environment\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-from-env")
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile="envrole") as c:
        assert c.credentials_source == "assume-role"
    assert sts.calls[0]["signed_by"] == "AKIDFROMENV"


def test_web_identity(clean, s3env, sts, proxy, bucket, tmp_path, monkeypatch):
    tok = tmp_path / "token"
    tok.write_text("eyJ.web-identity-token.sig")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tok))
    monkeypatch.setenv("AWS_ROLE_ARN", ROLE1)
    monkeypatch.setenv("AWS_ROLE_SESSION_NAME", "irsa-session")
    with s3xfer.Client(endpoint_url=proxy.url) as c:
        assert c.credentials_source == "assume-role-with-web-identity"
        (call,) = sts.calls
        assert call["form"]["Action"] == "AssumeRoleWithWebIdentity"
        assert call["form"]["WebIdentityToken"] == "eyJ.web-identity-token.sig"
        assert call["form"]["RoleSessionName"] == "irsa-session"
        assert call["signed_by"] is None                         # unsigned, as in botocore
        issued = call["creds"]
        proxy.allow(issued["AccessKeyId"], issued["SecretAccessKey"], issued["SessionToken"])
        roundtrip(c, bucket, "irsa")
    assert {r["ak"] for r in proxy.seen} == {issued["AccessKeyId"]} and not proxy.rejected
    # a token file that cannot be read
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "nope"))
    with pytest.raises(s3xfer.CredentialsError, match="web identity token file"):
        s3xfer.Client(endpoint_url=proxy.url)


def test_role_profile_errors(clean, s3env, sts):
    cfg, cred = clean
    cred.write_text("[keys]\naws_access_key_id = A\naws_secret_access_key = S\n")
    cfg.write_text(textwrap.dedent(f"""\
        [profile loop-a]
        role_arn = {ROLE1}
        source_profile = loop-b
        [profile loop-b]
        role_arn = {ROLE2}
        source_profile = loop-a
        [profile mfa]
        role_arn = {ROLE1}
        source_profile = keys
        mfa_serial = arn:aws:iam::123456789012:mfa/me
        [profile nosource]
        role_arn = {ROLE1}
        [profile badsource]
        role_arn = {ROLE1}
        credential_source = Somewhere
        [profile ghost]
        role_arn = {ROLE1}
        source_profile = not-there
        [profile baddur]
        role_arn = {ROLE1}
        source_profile = keys
        duration_seconds = ten
        """))
    cases = {
        "loop-a": "source_profile loop: loop-a -> loop-b -> loop-a",
        "mfa": "MFA",
        "nosource": "neither source_profile nor credential_source",
        "badsource": "not one of Environment, Ec2InstanceMetadata, EcsContainer",
        "ghost": "'not-there'",
        "baddur": "duration_seconds",
    }
    for profile, expected in cases.items():
        with pytest.raises(s3xfer.CredentialsError) as ei:
            s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile=profile)
        assert expected in str(ei.value), (profile, str(ei.value))
    assert sts.calls == []          # none of them got as far as STS


def test_sts_errors_are_reported(clean, s3env, sts):
    cfg, cred = clean
    cred.write_text("[keys]\naws_access_key_id = AKIDKEYS\naws_secret_access_key = SECRETKEYS\n")
    cfg.write_text(f"[profile denied]\nrole_arn = {ROLE1}\nsource_profile = keys\n")
    sts.answer = (403, b'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error>'
                       b'<Type>Sender</Type><Code>AccessDenied</Code><Message>not authorized to perform '
                       b'sts:AssumeRole</Message></Error><RequestId>r-1</RequestId></ErrorResponse>')
    with pytest.raises(s3xfer.CredentialsError) as ei:
        s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile="denied")
    msg = str(ei.value)
    assert "STS AssumeRole for profile 'denied' failed: AccessDenied: not authorized" in msg, msg
    assert "SECRETKEYS" not in msg
    # a body that is not STS XML, and one with a DTD, are refused
    for body in (b"<html>oops</html>", b"not xml at all",
                 b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e "x">]><AssumeRoleResponse/>'):
        sts.answer = (200, body)
        with pytest.raises(s3xfer.CredentialsError) as ei:
            s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile="denied")
        assert "STS AssumeRole for profile 'denied'" in str(ei.value)


# ---- credential_process ----------------------------------------------------------

def test_credential_process(clean, s3env, bucket, tmp_path):
    cfg, _ = clean
    good = script(tmp_path, "good", f"""\
        import json, sys
        assert sys.argv[1:] == ["two words", "semi;colon", "$HOME"], sys.argv
        print(json.dumps({{"Version": 1, "AccessKeyId": {s3env['access_key']!r},
                          "SecretAccessKey": {s3env['secret_key']!r}}}))
        """)
    failing = script(tmp_path, "failing", """\
        import sys
        sys.stderr.write("token service unreachable\\n")
        sys.exit(3)
        """)
    malformed = script(tmp_path, "malformed", """\
        print('{"Version": 1, "AccessKeyId": "A", "SecretAccessKey": "S",}')
        """)
    version2 = script(tmp_path, "version2", """\
        print('{"Version": 2, "AccessKeyId": "A", "SecretAccessKey": "S"}')
        """)
    expired = script(tmp_path, "expired", """\
        print('{"Version": 1, "AccessKeyId": "A", "SecretAccessKey": "S", "Expiration": "2001-01-01T00:00:00Z"}')
        """)
    cfg.write_text(textwrap.dedent(f"""\
        [profile good]
        credential_process = {good} "two words" 'semi;colon' $HOME
        [profile failing]
        credential_process = {failing}
        [profile malformed]
        credential_process = {malformed}
        [profile version2]
        credential_process = {version2}
        [profile expired]
        credential_process = {expired}
        [profile missing]
        credential_process = {tmp_path}/no-such-program
        [profile unbalanced]
        credential_process = {good} "open
        """))
    with s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile="good") as c:
        assert c.credentials_source == "custom-process"
        assert c.credentials_expiry is None      # no Expiration: does not expire
        roundtrip(c, bucket, "process")
    cases = {
        "failing": ["exited with status 3", "token service unreachable"],
        "malformed": ["malformed JSON", "credential_process output of profile 'malformed'"],
        "version2": ["Version must be the number 1"],
        "expired": ["expired already"],
        "missing": ["cannot run"],
        "unbalanced": ["unbalanced double quote"],
    }
    for profile, expected in cases.items():
        with pytest.raises(s3xfer.CredentialsError) as ei:
            s3xfer.Client(endpoint_url=s3env["endpoint_url"], profile=profile)
        for e in expected:
            assert e in str(ei.value), (profile, str(ei.value))


# ---- container and instance metadata ------------------------------------------------

def test_container_credentials(clean, s3env, proxy, bucket, tmp_path, monkeypatch):
    iss = Issuer(s3env["access_key"], s3env["secret_key"], 3600, "ecs")
    proxy.issuers.append(iss)
    fake = MetadataServer(iss, container_auth="Bearer container-secret").start()
    try:
        tokfile = tmp_path / "auth"
        tokfile.write_text("Bearer container-secret")
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", fake.url + "/container/creds")
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(tokfile))
        with s3xfer.Client(endpoint_url=proxy.url) as c:
            assert c.credentials_source == "container-role"
            roundtrip(c, bucket, "ecs")
        assert proxy.seen and not proxy.rejected
        assert all(r["token"] in iss.issued for r in proxy.seen)
        # the token from the environment when there is no file; a wrong one is refused
        monkeypatch.delenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer wrong")
        with pytest.raises(s3xfer.CredentialsError, match="HTTP 401"):
            s3xfer.Client(endpoint_url=proxy.url)
        # a full URI that is not loopback (nor an allowed host) is refused unasked
        for url in ("http://example.com/creds", "http://169.254.169.254.evil/creds", "http://10.0.0.1/x"):
            monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url)
            with pytest.raises(s3xfer.CredentialsError, match="loopback"):
                s3xfer.Client(endpoint_url=proxy.url)
    finally:
        fake.stop()


def test_imds_v2(clean, s3env, proxy, bucket, monkeypatch):
    iss = Issuer(s3env["access_key"], s3env["secret_key"], 3600, "imds")
    proxy.issuers.append(iss)
    fake = MetadataServer(iss).start()
    try:
        # the fake enforces IMDSv2: a GET without the token is refused
        with pytest.raises(urllib.error.HTTPError) as ei:
            urllib.request.urlopen(fake.url + "/latest/meta-data/iam/security-credentials/", timeout=5)
        assert ei.value.code == 401
        monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.url + "/")
        with s3xfer.Client(endpoint_url=proxy.url) as c:
            assert c.credentials_source == "iam-role"
            assert c.credentials_expiry == pytest.approx(time.time() + 3600, abs=5)
            roundtrip(c, bucket, "imds")
        log = fake.log[1:]   # after the test's own probe
        assert log[0][:2] == ("PUT", "/latest/api/token")
        assert all(valid for m, p, valid in log if m == "GET") and any(m == "GET" for m, _, _ in log)
        assert proxy.seen and not proxy.rejected
    finally:
        fake.stop()


def test_unreachable_imds_fails_fast(clean, s3env, monkeypatch):
    # A listening socket that never answers: connects, then silence.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{s.getsockname()[1]}")
        t0 = time.monotonic()
        with pytest.raises(s3xfer.CredentialsError) as ei:
            s3xfer.Client(endpoint_url=s3env["endpoint_url"])
        elapsed = time.monotonic() - t0
    assert elapsed < 5, elapsed
    msg = str(ei.value)
    assert "iam-role: no answer from the metadata service" in msg and "2 attempts" in msg
    for name in ("env:", "assume-role:", "shared-credentials-file:", "custom-process:", "config-file:",
                 "container-role:"):
        assert name in msg


# ---- refresh during long transfers ----------------------------------------------------

def _long_transfer(c, bucket, tmp_path, proxy, size=40 << 20):
    """An upload and a download of `size` bytes in 5 MiB parts, one at a
    time, each request held 1 s by the proxy: about tens of seconds."""
    src = tmp_path / "src.bin"
    data = os.urandom(size)
    src.write_bytes(data)
    cfg = s3xfer.TransferConfig(part_size=5 << 20, multipart_threshold=5 << 20, concurrency=1)
    proxy.delay = 1.0
    t0 = time.monotonic()
    c.upload_file(str(src), bucket, "long", config=cfg)
    dst = tmp_path / "dst.bin"
    c.download_file(bucket, "long", str(dst), config=cfg)
    proxy.delay = 0.0
    assert dst.read_bytes() == data
    return time.monotonic() - t0


LIFETIME = 4.0


def test_refresh_credential_process_during_transfer(clean, s3env, proxy, bucket, tmp_path):
    cfg, _ = clean
    issued = tmp_path / "issued.txt"
    proc = script(tmp_path, "rotating", f"""\
        import json, os, time
        from datetime import datetime, timezone
        n = sum(1 for _ in open({str(issued)!r})) + 1 if os.path.exists({str(issued)!r}) else 1
        tok = "proc-%d-%s" % (n, os.urandom(4).hex())
        exp = int(time.time() + {LIFETIME})
        with open({str(issued)!r}, "a") as f:
            f.write("%s %d\\n" % (tok, exp))
        print(json.dumps({{"Version": 1, "AccessKeyId": {s3env['access_key']!r},
                          "SecretAccessKey": {s3env['secret_key']!r}, "SessionToken": tok,
                          "Expiration": datetime.fromtimestamp(exp, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}}))
        """)
    cfg.write_text(f"[profile rotating]\ncredential_process = {proc}\n")

    class FileIssuer(Issuer):
        """The tokens the script issued, read from its file."""

        def __init__(self):
            super().__init__(s3env["access_key"], s3env["secret_key"], LIFETIME, "proc")

        @property
        def issued(self):
            out = {}
            if issued.exists():
                for line in issued.read_text().splitlines():
                    t, e = line.split()
                    out[t] = float(e)
            return out

        @issued.setter
        def issued(self, v):
            pass

    proxy.issuers.append(FileIssuer())
    with s3xfer.Client(endpoint_url=proxy.url, profile="rotating") as c:
        assert c.credentials_source == "custom-process"
        elapsed = _long_transfer(c, bucket, tmp_path, proxy)
        refreshes = c.credentials_refreshes
    # The premise: the transfer outlived four lifetimes (each of its 18-19
    # requests held 1 s), so it needed three refreshes at least. Not 20 s:
    # that is about the held time alone, and an idle machine came in under it.
    assert elapsed > 4 * LIFETIME, elapsed
    assert not proxy.rejected, proxy.rejected[:3]
    tokens = {r["token"] for r in proxy.seen}
    print(f"credential_process refresh: {elapsed:.1f} s, {len(proxy.seen)} requests, "
          f"{refreshes} refreshes, {len(tokens)} tokens used, 0 rejected")
    assert refreshes >= 3 and len(tokens) >= 3, (refreshes, len(tokens), elapsed)


def test_refresh_imds_during_transfer(clean, s3env, proxy, bucket, tmp_path, monkeypatch):
    iss = Issuer(s3env["access_key"], s3env["secret_key"], LIFETIME, "imds")
    proxy.issuers.append(iss)
    fake = MetadataServer(iss).start()
    try:
        monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.url)
        with s3xfer.Client(endpoint_url=proxy.url) as c:
            assert c.credentials_source == "iam-role"
            elapsed = _long_transfer(c, bucket, tmp_path, proxy)
            refreshes = c.credentials_refreshes
        assert not proxy.rejected, proxy.rejected[:3]
        tokens = {r["token"] for r in proxy.seen}
        print(f"IMDS refresh: {elapsed:.1f} s, {len(proxy.seen)} requests, "
              f"{refreshes} refreshes, {len(tokens)} tokens used, 0 rejected")
        assert refreshes >= 3 and len(tokens) >= 3, (refreshes, len(tokens), elapsed)
        assert tokens <= set(iss.issued)
    finally:
        fake.stop()


def test_checking_proxy_refuses_expired_and_foreign_keys(clean, s3env, proxy, bucket):
    """The proxy itself: a request signed with a token past its expiry, or
    with a secret that is not the issued one, is refused (so the refresh
    tests above would see a stale or wrong key)."""
    iss = Issuer(s3env["access_key"], s3env["secret_key"], -1, "old")
    proxy.issuers.append(iss)
    tok, _ = iss.issue()
    with s3xfer.Client(endpoint_url=proxy.url, access_key=s3env["access_key"], secret_key=s3env["secret_key"],
                       session_token=tok) as c:
        with pytest.raises(s3xfer.ClientError) as ei:
            c.put_object(bucket, "x", b"1")
    assert "ExpiredToken" in str(ei.value) or getattr(ei.value, "code", "") == "ExpiredToken"
    with s3xfer.Client(endpoint_url=proxy.url, access_key=s3env["access_key"], secret_key="wrong-secret") as c:
        with pytest.raises(s3xfer.ClientError):
            c.put_object(bucket, "x", b"1")
    assert [r["why"] for r in proxy.rejected][:1] and "expired" in proxy.rejected[0]["why"]
    assert proxy.rejected[-1]["why"] == "signature does not match"


def test_refresh_failure_windows(clean, s3env, proxy, bucket, tmp_path):
    """botocore's rule: a failed refresh in the advisory window keeps the
    current keys; in the mandatory window it is an error (never a request
    signed with keys about to expire)."""
    cfg, _ = clean
    issued, broken = tmp_path / "issued.txt", tmp_path / "broken"
    proc = script(tmp_path, "flaky", f"""\
        import json, os, sys, time
        from datetime import datetime, timezone
        if os.path.exists({str(broken)!r}):
            sys.stderr.write("identity broker is down\\n")
            sys.exit(7)
        tok = "flaky-" + os.urandom(4).hex()
        exp = int(time.time() + 6)
        with open({str(issued)!r}, "a") as f:
            f.write("%s %d\\n" % (tok, exp))
        print(json.dumps({{"Version": 1, "AccessKeyId": {s3env['access_key']!r},
                          "SecretAccessKey": {s3env['secret_key']!r}, "SessionToken": tok,
                          "Expiration": datetime.fromtimestamp(exp, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}}))
        """)
    cfg.write_text(f"[profile flaky]\ncredential_process = {proc}\n")

    class FileIssuer(Issuer):
        def __init__(self):
            super().__init__(s3env["access_key"], s3env["secret_key"], 6, "flaky")

        @property
        def issued(self):
            return {t: float(e) for t, e in (ln.split() for ln in issued.read_text().splitlines())}

        @issued.setter
        def issued(self, v):
            pass

    proxy.issuers.append(FileIssuer())
    with s3xfer.Client(endpoint_url=proxy.url, profile="flaky") as c:
        c.put_object(bucket, "a", b"1")
        exp = c.credentials_expiry
        broken.write_text("")
        time.sleep(max(0.0, exp - 2.0 - time.time()))       # advisory window (mandatory is ~1.3 s)
        c.put_object(bucket, "b", b"2")                      # refresh failed: the current keys are kept
        assert c.credentials_refreshes == 0 and c.credentials_expiry == exp
        time.sleep(max(0.0, exp - 0.6 - time.time()))       # mandatory window
        with pytest.raises(s3xfer.CredentialsError) as ei:
            c.put_object(bucket, "c", b"3")
        msg = str(ei.value)
        assert "custom-process" in msg and "could not be refreshed" in msg and "identity broker is down" in msg
        broken.unlink()
        c.put_object(bucket, "d", b"4")                      # the provider is back: fresh keys
        assert c.credentials_refreshes == 1 and c.credentials_expiry > exp
    assert not proxy.rejected, proxy.rejected
    assert len(issued.read_text().splitlines()) == 2


# ---- the CLI and python -m s3xfer -------------------------------------------------------

def test_cli_profile_through_the_chain(clean, s3env, cli, boto, bucket, tmp_path):
    """--profile of both command-line tools goes through the same chain: a
    credential_process profile uploads; a looping one fails with the reason."""
    import subprocess
    cfg, _ = clean
    proc = script(tmp_path, "proc", f"""\
        import json
        print(json.dumps({{"Version": 1, "AccessKeyId": {s3env['access_key']!r},
                          "SecretAccessKey": {s3env['secret_key']!r}}}))
        """)
    cfg.write_text(f"[profile viaproc]\ncredential_process = {proc}\n"
                   f"[profile a]\nrole_arn = {ROLE1}\nsource_profile = b\n"
                   f"[profile b]\nrole_arn = {ROLE2}\nsource_profile = a\n")
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(1 << 20))
    env = dict(os.environ)
    tools = {"cli": [cli], "python": [sys.executable, "-m", "s3xfer"]}
    for name, argv in tools.items():
        p = subprocess.run([*argv, "--profile", "viaproc", "cp", str(src), f"s3://{bucket}/{name}"],
                           capture_output=True, env=env, timeout=120)
        assert p.returncode == 0, (name, p.stderr)
        assert boto.get_object(Bucket=bucket, Key=name)["Body"].read() == src.read_bytes()
        p = subprocess.run([*argv, "--profile", "a", "cp", str(src), f"s3://{bucket}/loop"],
                           capture_output=True, env=env, timeout=120)
        assert p.returncode != 0 and b"source_profile loop: a -> b -> a" in p.stderr, (name, p.stderr)
        assert s3env["secret_key"].encode() not in p.stderr


def test_early_refresh_does_not_hold_up_requests(clean, s3env, proxy, bucket, tmp_path):
    """Keys that will expire are fetched again ahead of the advisory window on
    a thread of their own: a credential_process that takes 3 s the second
    time does not hold up the requests signed meanwhile, and its keys arrive
    (the refresh is counted) before the advisory window is reached."""
    cfg, _ = clean
    issued = tmp_path / "issued.txt"
    proc = script(tmp_path, "slow", f"""\
        import json, os, time
        from datetime import datetime, timezone
        n = sum(1 for _ in open({str(issued)!r})) + 1 if os.path.exists({str(issued)!r}) else 1
        if n > 1:
            time.sleep(3)
        tok = "slow-%d-%s" % (n, os.urandom(4).hex())
        exp = int(time.time() + 12)
        with open({str(issued)!r}, "a") as f:
            f.write("%s %d\\n" % (tok, exp))
        print(json.dumps({{"Version": 1, "AccessKeyId": {s3env['access_key']!r},
                          "SecretAccessKey": {s3env['secret_key']!r}, "SessionToken": tok,
                          "Expiration": datetime.fromtimestamp(exp, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}}))
        """)
    cfg.write_text(f"[profile slow]\ncredential_process = {proc}\n")

    class FileIssuer(Issuer):
        def __init__(self):
            super().__init__(s3env["access_key"], s3env["secret_key"], 12, "slow")

        @property
        def issued(self):
            if not issued.exists():
                return {}
            return {t: float(e) for t, e in (line.split() for line in issued.read_text().splitlines())}

        @issued.setter
        def issued(self, v):
            pass

    proxy.issuers.append(FileIssuer())
    # Keys live 11-12 s: advisory window 5.5-6 s before expiry, early fetch from 8.25-9 s before.
    with s3xfer.Client(endpoint_url=proxy.url, profile="slow") as c:
        assert c.credentials_source == "custom-process"
        c.put_object(bucket, "k", b"x")
        time.sleep(3.5)  # inside the early window now
        slowest = 0.0
        t_end = time.monotonic() + 2.5
        while time.monotonic() < t_end:  # the 3 s process runs meanwhile
            t0 = time.monotonic()
            c.head_object(bucket, "k")
            slowest = max(slowest, time.monotonic() - t0)
        assert slowest < 1.5, slowest  # signing did not wait for the 3 s process
        time.sleep(1.5)
        c.head_object(bucket, "k")
        assert c.credentials_refreshes == 1
    assert len(issued.read_text().splitlines()) == 2
    assert not proxy.rejected, proxy.rejected[:3]
