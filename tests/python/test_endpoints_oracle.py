"""Region and endpoint resolution against botocore as the oracle.

Each configuration (environment, shared config file, client arguments,
bucket, key) is resolved by s3xfer (``Client._resolve_url``: the URL every
request is built into, nothing sent) and by botocore (a real S3 client whose
``before-send`` hook captures the signed request and answers it itself, so
nothing is sent either). Scheme, host, port, path and the SigV4 signing
region must agree; a configuration botocore refuses, s3xfer must refuse too.

Both run in one child process with a clean environment (only the case's
variables, a private HOME, instance metadata disabled) whose Python sockets
may only connect to 127.0.0.1: no case reaches the network."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
from urllib.parse import urlsplit

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# (id, env, config file text, client arguments, bucket, key)
CASES = [
    ("defaults-us-east-1-global", {}, "", {}, "bkt", "k"),
    ("env-default-region-us-east-1", {"AWS_DEFAULT_REGION": "us-east-1"}, "", {}, "bkt", "k"),
    ("arg-region-eu-west-1", {}, "", {"region": "eu-west-1"}, "bkt", "dir/a b+c"),
    ("cn-north-1", {"AWS_DEFAULT_REGION": "cn-north-1"}, "", {}, "bkt", "k"),
    ("cn-northwest-1-uppercase-bucket", {"AWS_DEFAULT_REGION": "cn-northwest-1"}, "", {}, "MyBucket", "k"),
    ("us-gov-west-1", {"AWS_DEFAULT_REGION": "us-gov-west-1"}, "", {}, "bkt", "k"),
    ("us-gov-east-1-fips", {"AWS_DEFAULT_REGION": "us-gov-east-1", "AWS_USE_FIPS_ENDPOINT": "true"}, "", {},
     "bkt", "k"),
    ("eu-west-1-dualstack-env", {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_USE_DUALSTACK_ENDPOINT": "true"}, "", {},
     "bkt", "k"),
    ("eu-west-1-dualstack-s3-section", {},
     "[default]\nregion = eu-west-1\ns3 =\n  use_dualstack_endpoint = true\n", {}, "bkt", "k"),
    ("us-west-2-fips-dualstack", {"AWS_USE_DUALSTACK_ENDPOINT": "TRUE"},
     "[default]\nregion = us-west-2\nuse_fips_endpoint = true\n", {}, "bkt", "k"),
    ("us-east-1-fips", {"AWS_DEFAULT_REGION": "us-east-1", "AWS_USE_FIPS_ENDPOINT": "true"}, "", {}, "bkt", "k"),
    ("fips-env-false-beats-profile", {"AWS_USE_FIPS_ENDPOINT": "false"},
     "[default]\nregion = us-west-2\nuse_fips_endpoint = true\n", {}, "bkt", "k"),
    ("accelerate", {"AWS_DEFAULT_REGION": "eu-west-1"},
     "[default]\ns3 =\n  use_accelerate_endpoint = true\n", {}, "bkt", "k"),
    ("accelerate-dualstack", {"AWS_DEFAULT_REGION": "us-east-1"},
     "[default]\ns3 =\n  use_accelerate_endpoint = true\n  use_dualstack_endpoint = true\n", {}, "bkt", "k"),
    ("accelerate-general-dualstack", {},
     "[default]\nregion = us-west-2\nuse_dualstack_endpoint = true\ns3 =\n  use_accelerate_endpoint = true\n",
     {}, "bkt", "k"),
    ("accelerate-beats-path-style", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\ns3 =\n  use_accelerate_endpoint = true\n  addressing_style = path\n", {}, "bkt", "k"),
    ("accelerate-beats-path-style-arg", {"AWS_DEFAULT_REGION": "eu-west-2"},
     "[default]\ns3 =\n  use_accelerate_endpoint = true\n", {"addressing_style": "path"}, "bkt", "k"),
    ("path-style-from-profile", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\ns3 =\n  addressing_style = path\n", {}, "bkt", "k"),
    ("path-style-from-profile-us-east-1-global", {},
     "[default]\ns3 =\n  addressing_style = path\n", {}, "bkt", "k"),
    ("path-style-arg-dualstack", {"AWS_DEFAULT_REGION": "ap-south-1", "AWS_USE_DUALSTACK_ENDPOINT": "true"}, "",
     {"addressing_style": "path"}, "bkt", "k"),
    ("virtual-arg-aws", {"AWS_DEFAULT_REGION": "sa-east-1"}, "", {"addressing_style": "virtual"}, "bkt", "k"),
    ("endpoint-url-in-profile", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\nendpoint_url = https://minio.example.com:9000\n", {}, "bkt", "k"),
    ("endpoint-url-in-profile-virtual", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\nendpoint_url = https://minio.example.com:9000\ns3 =\n  addressing_style = virtual\n", {},
     "bkt", "k"),
    ("services-section", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\nendpoint_url = https://minio.example.com:9000\nservices = loc\n"
     "[services loc]\ns3 =\n  endpoint_url = http://svc.example.com:8080\n", {}, "bkt", "k"),
    ("services-section-other-service-only", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\nservices = loc\n[services loc]\nsts =\n  endpoint_url = http://sts.example.com\n", {},
     "bkt", "k"),
    ("env-endpoint-beats-services", {"AWS_DEFAULT_REGION": "us-west-2",
                                     "AWS_ENDPOINT_URL": "http://global.example.com"},
     "[default]\nservices = loc\n[services loc]\ns3 =\n  endpoint_url = http://svc.example.com:8080\n", {},
     "bkt", "k"),
    ("endpoint-url-s3-over-endpoint-url", {"AWS_DEFAULT_REGION": "us-west-2",
                                           "AWS_ENDPOINT_URL": "http://global.example.com",
                                           "AWS_ENDPOINT_URL_S3": "https://s3only.example.com"}, "", {},
     "bkt", "k"),
    ("dualstack-ignored-with-endpoint", {"AWS_DEFAULT_REGION": "us-west-2", "AWS_USE_DUALSTACK_ENDPOINT": "true",
                                         "AWS_ENDPOINT_URL_S3": "https://s3only.example.com"}, "", {}, "bkt", "k"),
    ("arg-endpoint-over-env", {"AWS_DEFAULT_REGION": "us-west-2",
                               "AWS_ENDPOINT_URL_S3": "https://s3only.example.com"}, "",
     {"endpoint_url": "https://arg.example.com"}, "bkt", "k"),
    ("ignore-configured-env", {"AWS_DEFAULT_REGION": "us-west-2", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
                               "AWS_ENDPOINT_URL": "http://global.example.com"},
     "[default]\nendpoint_url = https://minio.example.com:9000\n", {}, "bkt", "k"),
    ("ignore-configured-profile", {"AWS_DEFAULT_REGION": "eu-central-1",
                                   "AWS_ENDPOINT_URL_S3": "http://s3only.example.com"},
     "[default]\nignore_configured_endpoint_urls = true\n", {}, "bkt", "k"),
    ("ignore-configured-keeps-arg", {"AWS_DEFAULT_REGION": "us-west-2",
                                     "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}, "",
     {"endpoint_url": "https://arg.example.com"}, "bkt", "k"),
    ("dotted-bucket-https", {"AWS_DEFAULT_REGION": "eu-west-1"}, "", {}, "my.bucket", "k"),
    ("dotted-bucket-http-virtual", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\ns3 =\n  addressing_style = virtual\n", {"endpoint_url": "http://e.example.com:81"},
     "my.bkt", "k"),
    ("dotted-bucket-https-virtual-profile", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\ns3 =\n  addressing_style = virtual\n", {"endpoint_url": "https://e.example.com:443"},
     "my.bkt", "k"),
    ("uppercase-bucket", {"AWS_DEFAULT_REGION": "eu-west-1"}, "", {}, "MyBucket", "k"),
    ("underscore-bucket-virtual-profile", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\ns3 =\n  addressing_style = virtual\n", {}, "my_bucket", "k"),
    ("ip-endpoint-virtual-profile", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\ns3 =\n  addressing_style = virtual\n", {"endpoint_url": "http://10.1.2.3:9000"}, "bkt", "k"),
    ("env-region-beats-profile-region", {"AWS_DEFAULT_REGION": "eu-north-1", "AWS_PROFILE": "p"},
     "[profile p]\nregion = ap-south-1\n", {}, "bkt", "k"),
    ("profile-region", {"AWS_PROFILE": "p"},
     "[default]\nregion = eu-west-2\n[profile p]\nregion = ap-south-1\n", {}, "bkt", "k"),
    ("arg-region-beats-env-and-profile", {"AWS_DEFAULT_REGION": "eu-north-1", "AWS_PROFILE": "p"},
     "[profile p]\nregion = ap-south-1\n", {"region": "sa-east-1"}, "bkt", "k"),
    ("default-profile-region", {}, "[default]\nregion = ca-central-1\n", {}, "bkt", "k"),
    ("us-east-1-regional-env", {"AWS_DEFAULT_REGION": "us-east-1",
                                "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT": "regional"}, "", {}, "bkt", "k"),
    ("us-east-1-regional-profile", {"AWS_DEFAULT_REGION": "us-east-1"},
     "[default]\ns3_us_east_1_regional_endpoint = regional\n", {}, "bkt", "k"),
    ("us-east-1-regional-s3-section", {"AWS_DEFAULT_REGION": "us-east-1"},
     "[default]\ns3 =\n  us_east_1_regional_endpoint = regional\n", {}, "bkt", "k"),
    ("us-east-1-legacy-env-beats-profile", {"AWS_DEFAULT_REGION": "us-east-1",
                                            "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT": "legacy"},
     "[default]\ns3_us_east_1_regional_endpoint = regional\n", {}, "bkt", "k"),
    ("us-east-1-dualstack-is-regional", {"AWS_DEFAULT_REGION": "us-east-1", "AWS_USE_DUALSTACK_ENDPOINT": "true"},
     "", {}, "bkt", "k"),
    ("iso-partition", {"AWS_DEFAULT_REGION": "us-iso-east-1"}, "", {}, "bkt", "k"),
    ("iso-b-partition-fips", {"AWS_DEFAULT_REGION": "us-isob-east-1", "AWS_USE_FIPS_ENDPOINT": "true"}, "", {},
     "bkt", "k"),
    ("eusc-partition", {"AWS_DEFAULT_REGION": "eusc-de-east-1"}, "", {}, "bkt", "k"),
    ("cn-dualstack", {"AWS_DEFAULT_REGION": "cn-north-1", "AWS_USE_DUALSTACK_ENDPOINT": "true"}, "", {},
     "bkt", "k"),
    ("unknown-region-shape", {"AWS_DEFAULT_REGION": "xx-foo-1"}, "", {}, "bkt", "k"),
    ("explicit-profile-arg", {"AWS_DEFAULT_REGION": "eu-west-1"},
     "[profile work]\naws_access_key_id = AK2\naws_secret_access_key = SK2\n"
     "s3 =\n  addressing_style = path\n", {"profile": "work"}, "bkt", "k"),
    # configurations botocore refuses
    ("refused-fips-in-cn", {"AWS_DEFAULT_REGION": "cn-north-1", "AWS_USE_FIPS_ENDPOINT": "true"}, "", {},
     "bkt", "k"),
    ("refused-accelerate-dotted-bucket", {"AWS_DEFAULT_REGION": "eu-west-1"},
     "[default]\ns3 =\n  use_accelerate_endpoint = true\n", {}, "my.bkt", "k"),
    ("refused-accelerate-fips", {"AWS_DEFAULT_REGION": "us-west-2", "AWS_USE_FIPS_ENDPOINT": "true"},
     "[default]\ns3 =\n  use_accelerate_endpoint = true\n", {}, "bkt", "k"),
    ("refused-accelerate-custom-endpoint", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\ns3 =\n  use_accelerate_endpoint = true\n", {"endpoint_url": "https://e.example.com"},
     "bkt", "k"),
    ("refused-accelerate-in-cn", {"AWS_DEFAULT_REGION": "cn-north-1"},
     "[default]\ns3 =\n  use_accelerate_endpoint = true\n", {}, "bkt", "k"),
    ("refused-missing-services-section", {"AWS_DEFAULT_REGION": "us-west-2"},
     "[default]\nservices = nope\n", {}, "bkt", "k"),
    ("refused-bad-us-east-1-setting", {"AWS_DEFAULT_REGION": "us-east-1",
                                       "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT": "bogus"}, "", {}, "bkt", "k"),
]

# The child: resolves every case with both libraries, prints one JSON list.
_CHILD = textwrap.dedent(r'''
    import json, os, socket, sys

    _connect = socket.socket.connect
    def _guard(self, addr):
        if not (isinstance(addr, tuple) and addr[0] in ("127.0.0.1", "::1")):
            raise OSError(f"test guard: connection to {addr!r} refused")
        return _connect(self, addr)
    socket.socket.connect = _guard

    import botocore.session
    from botocore.awsrequest import AWSResponse
    from botocore.config import Config
    import s3xfer

    cases, home = json.load(sys.stdin), sys.argv[1]
    base = dict(os.environ)
    out = []
    for i, (name, env, cfg, args, bucket, key) in enumerate(cases):
        path = os.path.join(home, f"config-{i}")
        with open(path, "w") as f:
            f.write(cfg)
        os.environ.clear()
        os.environ.update(base)
        os.environ.update(env)
        os.environ["AWS_CONFIG_FILE"] = path
        res = {"name": name}
        # botocore
        try:
            sess = botocore.session.Session(profile=args.get("profile"))
            kw = {k: args[k] for k in ("endpoint_url",) if k in args}
            if "region" in args:
                kw["region_name"] = args["region"]
            if "addressing_style" in args:
                kw["config"] = Config(s3={"addressing_style": args["addressing_style"]})
            c = sess.create_client("s3", **kw)
            seen = {}
            def before_send(request, **_):
                seen["url"] = request.url
                auth = request.headers.get("Authorization")
                seen["auth"] = auth.decode() if isinstance(auth, bytes) else auth
                return AWSResponse(request.url, 200, {}, None)
            c.meta.events.register("before-send.s3", before_send)
            try:
                c.head_object(Bucket=bucket, Key=key)
            except AttributeError:
                pass  # the fake response has no body: the request was captured already
            scope = seen["auth"].split("Credential=", 1)[1].split(",", 1)[0].split("/")
            res["boto"] = {"url": seen["url"], "region": scope[2]}
        except Exception as e:
            res["boto"] = {"error": f"{type(e).__name__}: {e}"}
        # s3xfer
        try:
            with s3xfer.Client(**args) as c:
                res["s3x"] = {"url": c._resolve_url(bucket, key), "region": c.region}
        except s3xfer.S3xferError as e:
            res["s3x"] = {"error": f"{type(e).__name__}: {e}"}
        out.append(res)
    print(json.dumps(out))
''')


def _clean_env(home: pathlib.Path) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "AWS_ACCESS_KEY_ID": "AKIDORACLE", "AWS_SECRET_ACCESS_KEY": "oracle-secret",
           "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-credentials")}
    # The module under test (and, in the sanitizer runs, its runtime and options).
    for v in ("PYTHONPATH", "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if os.environ.get(v):
            env[v] = os.environ[v]
    return env


@pytest.fixture(scope="module")
def resolved(tmp_path_factory):
    home = tmp_path_factory.mktemp("oracle-home")
    p = subprocess.run([sys.executable, "-c", _CHILD, str(home)], input=json.dumps(CASES),
                       capture_output=True, text=True, env=_clean_env(home), timeout=300)
    assert p.returncode == 0, p.stderr
    return {r["name"]: r for r in json.loads(p.stdout)}


def _parts(url: str):
    u = urlsplit(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme, (u.hostname or "").lower(), port, u.path


def test_enough_configurations():
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)
    # the partitions and features the brief names are all there
    regions = {c[1].get("AWS_DEFAULT_REGION") or c[3].get("region") for c in CASES}
    assert {"cn-north-1", "us-gov-west-1", "eu-west-1"} <= regions


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_same_url_and_signing_region(resolved, case):
    r = resolved[case[0]]
    boto, s3x = r["boto"], r["s3x"]
    if "error" in boto:
        assert case[0].startswith("refused-"), f"botocore refused an expected-good case: {boto['error']}"
        assert "error" in s3x, f"botocore refused ({boto['error']}) but s3xfer resolved {s3x}"
        assert "InvalidConfigError" in s3x["error"], s3x["error"]
        return
    assert not case[0].startswith("refused-"), f"botocore accepted {case[0]}: {boto}"
    assert "error" not in s3x, f"s3xfer refused what botocore resolves to {boto['url']}: {s3x['error']}"
    assert _parts(s3x["url"]) == _parts(boto["url"]), (s3x["url"], boto["url"])
    assert s3x["region"] == boto["region"]


def test_refusals_say_why(resolved):
    msgs = {name: r["s3x"].get("error", "") for name, r in resolved.items() if name.startswith("refused-")}
    assert "FIPS" in msgs["refused-fips-in-cn"]
    assert "Accelerate" in msgs["refused-accelerate-dotted-bucket"] and "my.bkt" in msgs[
        "refused-accelerate-dotted-bucket"]
    assert "Accelerate" in msgs["refused-accelerate-fips"]
    assert "Accelerate" in msgs["refused-accelerate-custom-endpoint"]
    assert "nope" in msgs["refused-missing-services-section"]
    assert "bogus" in msgs["refused-bad-us-east-1-setting"]
