"""Loopback stand-ins for the places credentials come from, for
test_credentials.py: moto's server as STS (behind a recorder that keeps the
keys it issued), an instance metadata service (IMDSv2), an ECS container
endpoint, and a proxy in front of the real S3 server that checks each
request's signature against the credentials it should carry.

The local SeaweedFS server knows one key pair and refuses session tokens, so
temporary credentials cannot reach it as they are. The checking proxy
verifies each request's SigV4 signature with the secret of the credentials it
names (issued by STS or by a fake provider), refuses (403 ExpiredToken) a
request signed with a token that has expired, then re-signs the request
with the server's own key pair and forwards it. Everything listens on
127.0.0.1 on ephemeral ports."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from typing import Dict, List, Optional, Tuple


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Server:
    """A threaded HTTP/1.1 server on 127.0.0.1 whose handler calls self.handle."""

    def __init__(self):
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                status, headers, out = outer.handle(self.command, self.path, self.headers, body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                # A HEAD's answer has no body but keeps the object's length.
                if not any(k.lower() == "content-length" for k in headers):
                    self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(out)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, method, path, headers, body):  # pragma: no cover - overridden
        raise NotImplementedError


class Issuer:
    """Hands out the server's real key pair with a fresh session token each
    time, each valid for `lifetime` seconds; remembers which token expires when."""

    def __init__(self, access_key: str, secret_key: str, lifetime: float, prefix: str):
        self.ak, self.sk, self.lifetime, self.prefix = access_key, secret_key, lifetime, prefix
        self.lock = threading.Lock()
        self.issued: Dict[str, float] = {}

    def issue(self) -> Tuple[str, float]:
        with self.lock:
            tok = f"{self.prefix}-{len(self.issued) + 1}-{os.urandom(6).hex()}"
            # Expiration has whole seconds: round down, so the token is never
            # valid longer than what the client was told.
            exp = float(int(time.time() + self.lifetime))
            self.issued[tok] = exp
            return tok, exp


class MetadataServer(_Server):
    """IMDSv2: PUT /latest/api/token gives a token; every GET needs it in
    X-aws-ec2-metadata-token (401 without). Also serves the ECS container
    endpoint at /container/creds (Authorization must equal container_auth)."""

    ROLE = "s3xfer-test-role"

    def __init__(self, issuer: Optional[Issuer], container_auth: Optional[str] = None,
                 region: Optional[str] = None):
        super().__init__()
        self.issuer = issuer
        self.container_auth = container_auth
        self.region = region   # served at placement/region when set
        self.tokens = set()
        self.log: List[Tuple[str, str, bool]] = []   # method, path, had a valid token

    def _creds(self, token_name="Token"):
        tok, exp = self.issuer.issue()
        return json.dumps({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": self.issuer.ak,
                           "SecretAccessKey": self.issuer.sk, token_name: tok,
                           "Expiration": iso(exp), "LastUpdated": iso(time.time())}).encode()

    def handle(self, method, path, headers, body):
        tok = headers.get("X-aws-ec2-metadata-token")
        with self.lock:
            valid = tok in self.tokens
            self.log.append((method, path, valid))
        if path.startswith("/container/"):
            if self.container_auth is not None and headers.get("Authorization") != self.container_auth:
                return 401, {}, b'{"message":"bad token"}'
            return 200, {"Content-Type": "application/json"}, self._creds()
        if method == "PUT" and path == "/latest/api/token":
            if not headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                return 400, {}, b""
            t = os.urandom(16).hex()
            with self.lock:
                self.tokens.add(t)
            return 200, {}, t.encode()
        if method != "GET":
            return 405, {}, b""
        if not valid:
            return 401, {}, b""
        if path == "/latest/meta-data/placement/region" and self.region is not None:
            return 200, {}, self.region.encode()
        base = "/latest/meta-data/iam/security-credentials/"
        if self.issuer is None:
            return 404, {}, b""
        if path == base:
            return 200, {}, self.ROLE.encode()
        if path == base + self.ROLE:
            return 200, {}, self._creds()
        return 404, {}, b""


class SsoPortal(_Server):
    """The IAM Identity Center portal's GetRoleCredentials:
    GET /federation/credentials?account_id=..&role_name=.. with the cached
    access token in x-amz-sso_bearer_token (401 UnauthorizedException for any
    other token, 403 ForbiddenException for another account or role).
    Answers with the issuer's credentials; expiration in milliseconds."""

    def __init__(self, issuer: Issuer, access_token: str, account_id: str, role_name: str):
        super().__init__()
        self.issuer, self.access_token = issuer, access_token
        self.account_id, self.role_name = account_id, role_name
        self.calls: List[dict] = []

    def handle(self, method, path, headers, body):
        u = urllib.parse.urlsplit(path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query).items()}
        call = {"method": method, "path": u.path, "query": q, "token": headers.get("x-amz-sso_bearer_token"),
                "authorization": headers.get("Authorization")}
        with self.lock:
            self.calls.append(call)
        if method != "GET" or u.path != "/federation/credentials":
            return 404, {}, b'{"message":"not found"}'
        if call["token"] != self.access_token:
            return 401, {"Content-Type": "application/json"}, b'{"message":"Session token not found or invalid"}'
        if q.get("account_id") != self.account_id or q.get("role_name") != self.role_name:
            return 403, {"Content-Type": "application/json"}, b'{"message":"No access"}'
        tok, exp = self.issuer.issue()
        out = {"roleCredentials": {"accessKeyId": self.issuer.ak, "secretAccessKey": self.issuer.sk,
                                   "sessionToken": tok, "expiration": int(exp * 1000)}}
        return 200, {"Content-Type": "application/json"}, json.dumps(out).encode()


def _form(body: bytes) -> Dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(body.decode(), keep_blank_values=True).items()}


def _credential_key_id(auth: Optional[str]) -> Optional[str]:
    m = re.search(r"Credential=([^/]+)/", auth or "")
    return m.group(1) if m else None


class StsRecorder(_Server):
    """Forwards STS calls to moto's server and records each call's form, the
    key id that signed it, and the credentials moto issued."""

    def __init__(self, moto_url: str):
        super().__init__()
        self.moto = urllib.parse.urlsplit(moto_url)
        self.calls: List[dict] = []
        self.answer: Optional[Tuple[int, bytes]] = None   # answer this instead of moto

    def handle(self, method, path, headers, body):
        if self.answer:
            with self.lock:
                self.calls.append({"form": _form(body), "signed_by": _credential_key_id(headers.get("Authorization")),
                                   "token_sent": headers.get("X-Amz-Security-Token"), "status": self.answer[0],
                                   "creds": None})
            return self.answer[0], {"Content-Type": "text/xml"}, self.answer[1]
        conn = http.client.HTTPConnection(self.moto.hostname, self.moto.port, timeout=30)
        fwd = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")}
        conn.request(method, path, body=body, headers=fwd)
        resp = conn.getresponse()
        out = resp.read()
        conn.close()
        call = {"form": _form(body), "signed_by": _credential_key_id(headers.get("Authorization")),
                "token_sent": headers.get("X-Amz-Security-Token"), "status": resp.status, "creds": None}
        if resp.status == 200:
            root = ET.fromstring(out)
            c = {el.tag.split("}")[-1]: el.text for el in root.iter() if el.tag.split("}")[-1] in
                 ("AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration")}
            call["creds"] = c
        with self.lock:
            self.calls.append(call)
        return resp.status, {"Content-Type": resp.getheader("Content-Type", "text/xml")}, out


def start_moto() -> Tuple[subprocess.Popen, str]:
    """moto's server on an ephemeral loopback port. The Python that has moto
    is S3X_MOTO_PYTHON, else this one (requirements-dev.txt installs it)."""
    py = os.environ.get("S3X_MOTO_PYTHON") or sys.executable
    port = free_port()
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("AWS_"):
            del env[k]
    env.update(AWS_ACCESS_KEY_ID="moto", AWS_SECRET_ACCESS_KEY="moto", AWS_DEFAULT_REGION="us-east-1")
    proc = subprocess.Popen([py, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("moto's server did not start (is moto[server] installed? "
                               "pip install -r requirements-dev.txt): "
                               + proc.stderr.read().decode(errors="replace")[-2000:])
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
            return proc, url
        except Exception:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto's server did not answer within 30 s")


# ---- the checking, re-signing proxy in front of the real server -------------

_UNSIGNED = ("authorization", "x-amz-security-token", "x-amz-date", "host", "content-length",
             "connection", "expect", "user-agent", "accept-encoding", "transfer-encoding")


class CheckingProxy(_Server):
    """Verifies each request's SigV4 signature with the secret of the
    credentials it names, refuses a request whose session token has expired
    (or is unknown), then re-signs it with the server's key pair."""

    def __init__(self, upstream: str, real_ak: str, real_sk: str, region: str):
        super().__init__()
        self.up = urllib.parse.urlsplit(upstream)
        self.real_ak, self.real_sk, self.region = real_ak, real_sk, region
        # access key id -> (secret, token) for STS-issued credentials;
        # token -> expiry for tokens issued by Issuers
        self.known: Dict[Tuple[str, Optional[str]], str] = {}
        self.issuers: List[Issuer] = []
        self.seen: List[dict] = []
        self.rejected: List[dict] = []
        self.delay = 0.0

    def allow(self, ak: str, sk: str, token: Optional[str]):
        with self.lock:
            self.known[(ak, token)] = sk

    def _secret_for(self, ak, token):
        with self.lock:
            if (ak, token) in self.known:
                return self.known[(ak, token)], None
        for iss in self.issuers:
            with iss.lock:
                if token in iss.issued and ak == iss.ak:
                    return iss.sk, iss.issued[token]
        if token is None and ak == self.real_ak:
            return self.real_sk, None
        return None, None

    def _verify(self, method, path, headers, body, secret) -> bool:
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        auth = headers.get("Authorization", "")
        m = re.search(r"SignedHeaders=([^,]+), Signature=([0-9a-f]+)", auth)
        scope = re.search(r"Credential=[^/]+/(\d{8})/([^/]+)/s3/aws4_request", auth)
        if not m or not scope:
            return False
        signed = m.group(1).split(";")
        hdrs = {h: headers.get(h, "") for h in signed}
        req = AWSRequest(method=method, url=f"http://{headers.get('Host')}{path}", headers=hdrs)
        req.context["timestamp"] = headers.get("X-Amz-Date")
        signer = S3SigV4Auth(Credentials("x", secret, headers.get("X-Amz-Security-Token")), "s3", scope.group(2))
        # headers_to_sign must be exactly the ones the request signed
        from botocore.awsrequest import HTTPHeaders
        only = HTTPHeaders()
        for k, v in hdrs.items():
            only[k] = v
        signer.headers_to_sign = lambda r: only
        canonical = signer.canonical_request(req)
        sts = signer.string_to_sign(req, canonical)
        return signer.signature(sts, req) == m.group(2)

    def handle(self, method, path, headers, body):
        if self.delay:
            time.sleep(self.delay)
        ak = _credential_key_id(headers.get("Authorization"))
        token = headers.get("X-Amz-Security-Token")
        now = time.time()
        secret, expiry = self._secret_for(ak, token)
        rec = {"ak": ak, "token": token, "t": now, "method": method, "path": path}
        why = None
        if secret is None:
            why = "unknown credentials"
        elif expiry is not None and now >= expiry:
            why = f"token expired {now - expiry:.2f} s ago"
        elif not self._verify(method, path, headers, body, secret):
            why = "signature does not match"
        with self.lock:
            self.seen.append(rec)
            if why:
                rec["why"] = why
                self.rejected.append(rec)
        if why:
            xml = (f"<Error><Code>{'ExpiredToken' if 'expired' in why else 'AccessDenied'}</Code>"
                   f"<Message>checking proxy: {why}</Message></Error>").encode()
            return 403, {"Content-Type": "application/xml"}, xml
        return self._forward(method, path, headers, body)

    def _forward(self, method, path, headers, body):
        # SigV4Auth, not S3SigV4Auth: it keeps the request's own
        # x-amz-content-sha256 (aws-chunked bodies stay what they were).
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        hdrs = {k: v for k, v in headers.items() if k.lower() not in _UNSIGNED}
        url = f"http://{self.up.netloc}{path}"
        req = AWSRequest(method=method, url=url, headers=hdrs, data=body)
        SigV4Auth(Credentials(self.real_ak, self.real_sk), "s3", self.region).add_auth(req)
        conn = http.client.HTTPConnection(self.up.hostname, self.up.port, timeout=120)
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", self.up.netloc)
        for k, v in req.headers.items():
            if k.lower() != "host":
                conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        out = resp.read()
        # A HEAD's Content-Length is the object's: it is passed on (a
        # download checks it against the size its ranges said).
        drop = ("connection", "transfer-encoding", "keep-alive") + (() if method == "HEAD" else ("content-length",))
        keep = {k: v for k, v in resp.getheaders() if k.lower() not in drop}
        conn.close()
        return resp.status, keep, out
