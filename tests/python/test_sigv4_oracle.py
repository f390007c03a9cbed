"""botocore as the oracle for s3xfer's SigV4 signer.

Random S3 requests (seeded) are signed by botocore's S3SigV4Auth and by the C
signer (through the helper program tests/c/tool_sign), and the Authorization
headers must be identical. On a mismatch the two canonical requests are shown
side by side.

How the request is given to each side, so that both sign the same thing:
- The object key is encoded for the URL with botocore's own
  ``percent_encode(key, safe='/~')`` (what its REST serializer does for the
  greedy ``{Key+}`` label). S3SigV4Auth takes the path of the URL as the
  canonical URI unchanged (no normalisation, no second encoding), so botocore
  signs exactly that encoded path. The C tool receives the *raw* path and
  encodes it with s3x_uri_encode(encode_slash=0): the encoder is checked too.
- Query parameters reach botocore either as ``params`` (which it encodes with
  quote(safe='-_.~') and sorts) or already encoded in the URL (which it only
  sorts), alternating; the C tool gets them raw.
- botocore adds X-Amz-Date, X-Amz-Content-SHA256 and X-Amz-Security-Token
  itself; the C signer must be given them, so the test passes them explicitly.

Run: S3X_BUILD_DIR=build-h2 python3 -m pytest tests/python/test_sigv4_oracle.py
"""

import datetime
import hashlib
import os
import random
import string
import subprocess
from pathlib import Path
from unittest import mock

import pytest
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.utils import percent_encode

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("S3X_ORACLE_SEED", "20130524"))
COUNT = int(os.environ.get("S3X_ORACLE_COUNT", "600"))
EMPTY_SHA = hashlib.sha256(b"").hexdigest()


# ---------------------------------------------------------------- the tool

def tool_path():
    build = Path(os.environ.get("S3X_BUILD_DIR", "build"))
    if not build.is_absolute():
        build = ROOT / build
    tool = build / "tool_sign"
    if not tool.is_file() or not os.access(tool, os.X_OK):
        pytest.fail(
            f"the signing helper {tool} is missing. Build it first:\n"
            f"  cmake -S {ROOT} -B {build} -G Ninja && cmake --build {build} --target tool_sign\n"
            "or point S3X_BUILD_DIR at a build directory that has it."
        )
    return tool


def _hex(s):
    return (s.encode("utf-8") if isinstance(s, str) else s).hex()


def _hexlist(pairs):
    return ",".join(f"{_hex(k)}={_hex(v)}" for k, v in pairs)


def run_tool(requests):
    """Signs each request dict with the C signer. Returns a list of
    (authorization, canonical_request, string_to_sign) or ('ERR', message)."""
    lines = []
    for r in requests:
        fields = [
            _hex(r["method"]),
            _hex(r["raw_path"]),
            _hexlist(r["query"]),
            _hexlist(r["c_headers"]),
            _hex(r["payload_hash"]),
            _hex(r["amz_date"]),
            _hex(r["region"]),
            _hex(r.get("service", "s3")),
            _hex(r["access_key"]),
            _hex(r["secret_key"]),
        ]
        lines.append("\t".join(fields))
    proc = subprocess.run(
        [str(tool_path())],
        input=("\n".join(lines) + "\n").encode(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"tool_sign failed: {proc.stderr.decode(errors='replace')}"
    assert proc.stderr == b"", f"tool_sign wrote to stderr: {proc.stderr[:500]!r}"
    out = []
    for line in proc.stdout.decode("utf-8").split("\n")[:-1]:
        parts = line.split("\t")
        if parts[0] == "OK":
            out.append((parts[1], bytes.fromhex(parts[2]).decode("utf-8"), bytes.fromhex(parts[3]).decode("utf-8")))
        else:
            out.append(("ERR", "\t".join(parts[1:])))
    assert len(out) == len(requests), f"tool_sign answered {len(out)} lines for {len(requests)} requests"
    return out


# ---------------------------------------------------------------- botocore side

class RecordingS3SigV4Auth(S3SigV4Auth):
    """S3SigV4Auth that keeps the canonical request and string to sign."""

    def canonical_request(self, request):
        self.last_canonical_request = super().canonical_request(request)
        return self.last_canonical_request

    def string_to_sign(self, request, canonical_request):
        self.last_string_to_sign = super().string_to_sign(request, canonical_request)
        return self.last_string_to_sign


def botocore_sign(r):
    creds = Credentials(r["access_key"], r["secret_key"], r["token"])
    auth = RecordingS3SigV4Auth(creds, "s3", r["region"])
    url = f"{r['scheme']}://{r['host']}{percent_encode(r['raw_path'], safe='/~')}"
    params = {}
    if r["query"]:
        if r["query_mode"] == "params":
            params = list(r["query"])
        else:
            items = []
            for k, v in r["query"]:
                if v == "" and r["bare_flags"]:
                    items.append(percent_encode(k))  # "?uploads", as in botocore's URI templates
                else:
                    items.append(f"{percent_encode(k)}={percent_encode(v)}")
            url += "?" + "&".join(items)
    req = AWSRequest(method=r["method"], url=url, data=r["body"], params=params)
    for name, value in r["b_headers"]:
        req.headers[name] = value  # HTTPHeaders: a second set of a name adds a duplicate
    req.context["client_config"] = Config(s3={"payload_signing_enabled": not r["unsigned"]})
    with mock.patch("botocore.auth.get_current_datetime", return_value=r["when"]):
        auth.add_auth(req)
    return req.headers["Authorization"], auth.last_canonical_request, auth.last_string_to_sign


# ---------------------------------------------------------------- random requests

NASTY = [
    " ", "  ", "+", "=", "&", "?", "#", "%", "%20", "%2F", "~", "/", "//", "*", "!", "'", "(", ")",
    "$", "@", ":", ";", ",", "[", "]", "{", "}", "|", "\\", "^", "`", '"', "<", ">", ".", "..", "./", "../",
    "-", "_", "\u00e9", "\u65e5\u672c", "\U0001F600", "\u00a0", "\u200b", "\ufeff", "\t", "\x01", "\x7f",
    "a", "Z", "0", "key", "photos", "2024",
]


def nasty_text(rng, lo=1, hi=12):
    return "".join(rng.choice(NASTY) if rng.random() < 0.6 else rng.choice(string.ascii_letters + string.digits)
                   for _ in range(rng.randint(lo, hi)))


def bucket_name(rng):
    chars = string.ascii_lowercase + string.digits
    n = rng.randint(3, 40)
    body = "".join(rng.choice(chars + "-.") for _ in range(n - 2))
    return rng.choice(chars) + body + rng.choice(chars)


def token_text(rng, n):
    return "".join(rng.choice(string.ascii_letters + string.digits + "+/=") for _ in range(n))


def header_value(rng):
    """ASCII values with leading, trailing and inner runs of spaces and tabs.
    (The signer rejects other control characters; non-ASCII header values are
    out of scope for S3, which wants them RFC 2047-encoded.)"""
    words = ["".join(rng.choice(string.ascii_letters + string.digits + "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
                     for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(0, 4))]
    seps = [rng.choice([" ", "  ", "\t", " \t ", "   "]) for _ in words]
    v = "".join(w + s for w, s in zip(words, seps))
    if rng.random() < 0.5:
        v = rng.choice(["", " ", "\t", "  "]) + v
    return v


TCHARS = string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~"
BLACKLIST = {"connection", "expect", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
             "transfer-encoding", "upgrade", "user-agent", "x-amzn-trace-id", "authorization", "date",
             "x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "host"}


def random_headers(rng):
    h = []
    if rng.random() < 0.3:
        a = rng.randint(0, 10**9)
        h.append(("Range", f"bytes={a}-{a + rng.randint(0, 10**8)}"))
    if rng.random() < 0.3:
        h.append(("Content-Type", rng.choice(["application/octet-stream", "text/plain; charset=utf-8",
                                              "application/xml", "multipart/form-data;  boundary=x"])))
    if rng.random() < 0.3:
        h.append(("x-amz-checksum-crc32c", token_text(rng, 6) + "=="))
    if rng.random() < 0.2:
        h.append(("Content-MD5", token_text(rng, 22) + "=="))
    if rng.random() < 0.2:
        h.append((rng.choice(["If-None-Match", "If-Match"]), rng.choice(["*", '"abc"', ' "d41d8cd9" '])))
    if rng.random() < 0.2:
        h.append(("x-amz-storage-class", rng.choice(["STANDARD", "REDUCED_REDUNDANCY", "GLACIER_IR"])))
    if rng.random() < 0.2:
        h.append(("Content-Length", str(rng.randint(0, 5 * 2**30))))
    for _ in range(rng.choice([0, 0, 1, 2, 4])):
        h.append((rng.choice(["x-amz-meta-", "X-Amz-Meta-", "X-AMZ-META-"]) +
                  "".join(rng.choice(string.ascii_lowercase + "-_") for _ in range(rng.randint(1, 10))),
                  header_value(rng)))
    if rng.random() < 0.15:  # a duplicated name, in different cases
        name = "x-amz-meta-dup"
        for _ in range(rng.randint(2, 4)):
            h.append((rng.choice([name, name.upper(), "X-Amz-Meta-Dup"]), header_value(rng)))
    if rng.random() < 0.15:  # odd but legal token characters in the name
        name = "x-" + "".join(rng.choice(TCHARS) for _ in range(rng.randint(1, 12)))
        if name.lower() not in BLACKLIST:
            h.append((name, header_value(rng)))
    rng.shuffle(h)
    return h


def random_query(rng):
    q = []
    kind = rng.random()
    if kind < 0.15:
        q.append(("uploads", ""))
    elif kind < 0.35:
        q += [("partNumber", str(rng.randint(1, 10000))), ("uploadId", token_text(rng, rng.randint(20, 80)))]
    elif kind < 0.45:
        q.append(("uploadId", token_text(rng, 40)))
    elif kind < 0.65:
        q.append(("list-type", "2"))
        if rng.random() < 0.7:
            q.append(("prefix", nasty_text(rng, 0, 10)))
        if rng.random() < 0.5:
            q.append(("delimiter", rng.choice(["/", "", "%", " "])))
        if rng.random() < 0.5:
            q.append(("continuation-token", token_text(rng, rng.randint(10, 120))))
        if rng.random() < 0.3:
            q.append(("max-keys", str(rng.randint(1, 1000))))
        if rng.random() < 0.2:
            q.append(("start-after", nasty_text(rng)))
        if rng.random() < 0.2:
            q.append(("encoding-type", "url"))
    elif kind < 0.75:
        for _ in range(rng.randint(1, 4)):
            q.append((nasty_text(rng, 1, 6), nasty_text(rng, 0, 8)))
    if rng.random() < 0.1:  # repeated key, sorted by value
        q += [("prefix", nasty_text(rng, 0, 4)), ("prefix", nasty_text(rng, 0, 4))]
    if rng.random() < 0.1:
        q.append((rng.choice(["delete", "tagging", "acl", "versioning", "x-id"]), rng.choice(["", "PutObject"])))
    rng.shuffle(q)
    return q


def random_request(rng):
    bucket = bucket_name(rng)
    key = nasty_text(rng, 1, 16)
    if rng.random() < 0.15:
        key = "/" + key  # a leading slash gives "//" in a path-style URL
    virtual = rng.random() < 0.3
    if rng.random() < 0.05:
        raw_path = "/" if virtual else f"/{bucket}"
    else:
        raw_path = f"/{key}" if virtual else f"/{bucket}/{key}"
    if virtual:
        host = f"{bucket}.s3.{rng.choice(['us-east-1', 'eu-west-3'])}.amazonaws.com"
    else:
        host = rng.choice(["127.0.0.1:8333", "localhost:9000", "s3.amazonaws.com", "[::1]:8080", "minio"])
    unsigned = rng.random() < 0.35
    body = b"" if rng.random() < 0.4 else bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))
    payload_hash = "UNSIGNED-PAYLOAD" if unsigned else hashlib.sha256(body).hexdigest()
    when = datetime.datetime(2000, 1, 1) + datetime.timedelta(seconds=rng.randint(0, 100 * 365 * 86400))
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    token = token_text(rng, rng.randint(100, 400)) if rng.random() < 0.3 else None
    extra = random_headers(rng)
    b_headers = [("Host", host)] + extra
    # The C signer gets the same headers in the same order (the order of
    # duplicate names is significant) plus the ones botocore adds itself,
    # slipped in at random places.
    c_headers = list(b_headers)
    added = [(rng.choice(["x-amz-date", "X-Amz-Date"]), amz_date),
             (rng.choice(["x-amz-content-sha256", "X-Amz-Content-SHA256"]), payload_hash)]
    if token:
        added.append((rng.choice(["X-Amz-Security-Token", "x-amz-security-token"]), token))
    for h in added:
        c_headers.insert(rng.randint(0, len(c_headers)), h)
    access_key = rng.choice(["AKIA", "ASIA", "GOOG", ""]) + "".join(
        rng.choice(string.ascii_uppercase + string.digits) for _ in range(rng.randint(8, 28)))
    secret_key = "".join(rng.choice(string.ascii_letters + string.digits + "+/=!@#$%^&*()")
                         for _ in range(rng.choice([1, 20, 40, 40, 40, 59, 60, 61, 64, 100])))
    return {
        "method": rng.choice(["GET", "GET", "PUT", "PUT", "POST", "DELETE", "HEAD"]),
        "scheme": rng.choice(["https", "http"]),
        "host": host,
        "raw_path": raw_path,
        "query": random_query(rng),
        "query_mode": rng.choice(["params", "url"]),
        "bare_flags": rng.random() < 0.5,
        "b_headers": b_headers,
        "c_headers": c_headers,
        "body": body,
        "unsigned": unsigned,
        "payload_hash": payload_hash,
        "when": when,
        "amz_date": amz_date,
        "region": rng.choice(["us-east-1", "eu-west-3", "ap-southeast-2", "us-gov-west-1", "auto", "garage"]),
        "token": token,
        "access_key": access_key,
        "secret_key": secret_key,
    }


def side_by_side(a, b, left="botocore", right="s3xfer"):
    la, lb = a.split("\n"), b.split("\n")
    width = max([len(left)] + [len(repr(x)) for x in la])
    rows = [f"  {left:<{width}} | {right}"]
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else ""
        y = lb[i] if i < len(lb) else ""
        mark = "  " if x == y else "!!"
        rows.append(f"{mark}{x!r:<{width}} | {y!r}")
    return "\n".join(rows)


# ---------------------------------------------------------------- tests

def test_random_requests_match_botocore():
    rng = random.Random(SEED)
    reqs = [random_request(rng) for _ in range(COUNT)]
    ours = run_tool(reqs)
    mismatches = []
    stats = {"unsigned": 0, "token": 0, "dup_headers": 0, "query": 0, "flags": 0, "double_slash": 0,
             "virtual": 0, "non_ascii_key": 0, "long_secret": 0}
    for r, mine in zip(reqs, ours):
        theirs = botocore_sign(r)
        stats["unsigned"] += r["unsigned"]
        stats["token"] += r["token"] is not None
        names = [n.lower() for n, _ in r["b_headers"]]
        stats["dup_headers"] += len(names) != len(set(names))
        stats["query"] += bool(r["query"])
        stats["flags"] += any(v == "" for _, v in r["query"])
        stats["double_slash"] += "//" in r["raw_path"]
        stats["virtual"] += ".amazonaws.com" in r["host"] and r["host"].count(".") > 2
        stats["non_ascii_key"] += any(ord(c) > 127 for c in r["raw_path"])
        stats["long_secret"] += len(r["secret_key"]) > 60
        if mine[0] == "ERR":
            mismatches.append((r, theirs, mine))
        elif mine[0] != theirs[0]:
            mismatches.append((r, theirs, mine))
    if mismatches:
        r, theirs, mine = mismatches[0]
        if mine[0] == "ERR":
            detail = f"s3xfer refused it: {mine[1]}\nbotocore canonical request:\n{theirs[1]}"
        else:
            detail = (f"botocore: {theirs[0]}\ns3xfer:   {mine[0]}\n\ncanonical requests:\n"
                      f"{side_by_side(theirs[1], mine[1])}\n\nstrings to sign:\n{side_by_side(theirs[2], mine[2])}")
        pytest.fail(f"{len(mismatches)} of {len(reqs)} signatures differ from botocore (seed {SEED}).\n"
                    f"First: {r['method']} {r['raw_path']!r} query={r['query']!r}\n{detail}")
    # The generator must actually have produced the cases this test is about.
    for k, n in stats.items():
        assert n >= COUNT // 50, f"only {n} requests with {k}: the generator is not covering it"


AWS_DOC = {
    "access_key": "AKIAIOSFODNN7EXAMPLE",
    "secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "amz_date": "20130524T000000Z",
    "region": "us-east-1",
}
DOC_HOST = "examplebucket.s3.amazonaws.com"


def doc_request(method, raw_path, query, headers, payload_hash):
    return dict(AWS_DOC, method=method, raw_path=raw_path, query=query, payload_hash=payload_hash,
                c_headers=[("Host", DOC_HOST), ("x-amz-date", AWS_DOC["amz_date"]),
                           ("x-amz-content-sha256", payload_hash)] + headers)


DOC_CASES = [
    (doc_request("GET", "/test.txt", [], [("Range", "bytes=0-9")], EMPTY_SHA),
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
    (doc_request("PUT", "/test$file.text", [], [("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                                                 ("x-amz-storage-class", "REDUCED_REDUNDANCY")],
                 hashlib.sha256(b"Welcome to Amazon S3.").hexdigest()),
     "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"),
    (doc_request("GET", "/", [("lifecycle", "")], [], EMPTY_SHA),
     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
    (doc_request("GET", "/", [("max-keys", "2"), ("prefix", "J")], [], EMPTY_SHA),
     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
]


def test_aws_documentation_vectors_through_the_tool():
    out = run_tool([c for c, _ in DOC_CASES])
    for (case, sig), mine in zip(DOC_CASES, out):
        assert mine[0] != "ERR", mine
        assert mine[0].endswith("Signature=" + sig), f"{case['method']} {case['raw_path']}: {mine[0]}"


def test_botocore_reproduces_the_documentation_vectors():
    """The oracle itself agrees with AWS's published examples. The PUT example
    signs a Date header next to x-amz-date, which add_auth would rewrite, so
    botocore's canonicalisation steps are called directly."""
    creds = Credentials(AWS_DOC["access_key"], AWS_DOC["secret_key"])
    auth = S3SigV4Auth(creds, "s3", "us-east-1")
    for case, sig in DOC_CASES:
        url = f"https://{DOC_HOST}{percent_encode(case['raw_path'], safe='/~')}"
        req = AWSRequest(method=case["method"], url=url, params=list(case["query"]))
        for k, v in case["c_headers"]:
            req.headers[k] = v
        req.context["timestamp"] = AWS_DOC["amz_date"]
        cr = auth.canonical_request(req)
        assert auth.signature(auth.string_to_sign(req, cr), req) == sig


def test_get_vanilla_matches_botocore_sigv4():
    """aws-sig-v4-test-suite get-vanilla (generic SigV4, service "service")."""
    when = datetime.datetime(2015, 8, 30, 12, 36, 0)
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    auth = SigV4Auth(creds, "service", "us-east-1")
    req = AWSRequest(method="GET", url="https://example.amazonaws.com/", headers={"Host": "example.amazonaws.com"})
    with mock.patch("botocore.auth.get_current_datetime", return_value=when):
        auth.add_auth(req)
    expected = req.headers["Authorization"]
    assert expected.endswith("Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
    case = {"method": "GET", "raw_path": "/", "query": [], "payload_hash": EMPTY_SHA,
            "c_headers": [("Host", "example.amazonaws.com"), ("X-Amz-Date", "20150830T123600Z")],
            "amz_date": "20150830T123600Z", "region": "us-east-1", "service": "service",
            "access_key": "AKIDEXAMPLE", "secret_key": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
    (mine,) = run_tool([case])
    assert mine[0] == expected


def test_tool_refuses_bad_requests():
    base = doc_request("GET", "/k", [], [], EMPTY_SHA)
    bad_header = dict(base, c_headers=base["c_headers"] + [("x-amz-meta-a", "x\r\nInjected: 1")])
    bad_hash = dict(base, payload_hash="UNSIGNED-PAYLOAD")  # differs from the x-amz-content-sha256 header
    out = run_tool([bad_header, bad_hash, base])
    assert out[0][0] == "ERR" and "control character" in out[0][1]
    assert out[1][0] == "ERR" and "x-amz-content-sha256" in out[1][1]
    assert out[2][0] != "ERR"


UNICODE_SPACE_VALUES = [
    "a\u00a0b",                      # no-break space between words
    "\u00a0\u00a0lead and trail\u00a0",
    "one \u00a0 two\t\u00a0three",   # a mixed run collapses to one space
    "\u00a0",                        # only whitespace: the value becomes empty
    "x\u2003y\u3000z",               # em space, ideographic space
    "a\u0085b\u1680c\u2028d\u2029e\u202ff\u205fg\u2000h\u200ai",
    "zero\u200bwidth",               # U+200B is not whitespace to str.split(): kept
    "bom\ufeffkept",                 # nor is U+FEFF
    "caf\u00e9 \u00e9t\u00e9",       # other non-ASCII letters are untouched
    "\u65e5\u00a0\u672c",
]


def unicode_space_request(value, dup=False):
    when = datetime.datetime(2024, 2, 29, 12, 0, 0)
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    extra = [("x-amz-meta-space", value)]
    if dup:
        extra.append(("X-Amz-Meta-Space", "\u00a0second\u00a0 value "))
    b_headers = [("Host", "127.0.0.1:8333")] + extra
    return {
        "method": "PUT", "scheme": "http", "host": "127.0.0.1:8333", "raw_path": "/bucket/key",
        "query": [], "query_mode": "params", "bare_flags": False,
        "b_headers": b_headers,
        "c_headers": b_headers + [("x-amz-date", amz_date), ("x-amz-content-sha256", "UNSIGNED-PAYLOAD")],
        "body": b"", "unsigned": True, "payload_hash": "UNSIGNED-PAYLOAD", "when": when, "amz_date": amz_date,
        "region": "us-east-1", "token": None, "access_key": "AKIDEXAMPLE", "secret_key": "secret",
    }


def test_unicode_whitespace_in_header_values_matches_botocore():
    """botocore trims a header value with ' '.join(value.split()) on a str,
    so the Unicode spaces (U+00A0 and the others str.isspace() knows) are
    trimmed and collapsed like ASCII ones (issue 11). The C signer gets the
    same value as UTF-8 and must produce the same canonical request."""
    reqs = [unicode_space_request(v) for v in UNICODE_SPACE_VALUES]
    reqs += [unicode_space_request(v, dup=True) for v in UNICODE_SPACE_VALUES[:3]]
    ours = run_tool(reqs)
    for r, mine in zip(reqs, ours):
        theirs = botocore_sign(r)
        assert mine[0] != "ERR", f"{r['b_headers']!r}: refused: {mine[1]}"
        assert mine[0] == theirs[0], (f"{r['b_headers'][1:]!r}\n"
                                      f"{side_by_side(theirs[1], mine[1])}")
    # What the rule gives, spelled out (so a change in botocore shows here too).
    by_value = {r["b_headers"][1][1]: mine[1] for r, mine in zip(reqs[:len(UNICODE_SPACE_VALUES)], ours)}
    assert "\nx-amz-meta-space:a b\n" in by_value["a\u00a0b"]
    assert "\nx-amz-meta-space:lead and trail\n" in by_value["\u00a0\u00a0lead and trail\u00a0"]
    assert "\nx-amz-meta-space:one two three\n" in by_value["one \u00a0 two\t\u00a0three"]
    assert "\nx-amz-meta-space:\n" in by_value["\u00a0"]
    assert "\nx-amz-meta-space:zero\u200bwidth\n" in by_value["zero\u200bwidth"]
    assert "\nx-amz-meta-space:a b c d e f g h i\n" in by_value[UNICODE_SPACE_VALUES[5]]
    dup = ours[len(UNICODE_SPACE_VALUES)][1]
    assert "\nx-amz-meta-space:a b,second value\n" in dup
