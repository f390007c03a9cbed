"""Shared fixtures: a real S3 server (the environment's, or the project's
local SeaweedFS started on demand), boto3 as an independent client, fresh
buckets, and the s3xfer client under test."""

from __future__ import annotations

import os
import pathlib
import subprocess
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The credential chain ends at instance metadata (169.254.169.254): no test
# may reach for it, so it is off unless a test points it at a loopback fake.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
for _v in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
           "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_EC2_METADATA_SERVICE_ENDPOINT"):
    os.environ.pop(_v, None)


def _start_local_server() -> dict:
    out = subprocess.run([str(ROOT / "scripts" / "local-s3"), "start"], check=True,
                         capture_output=True, text=True).stdout
    env = {}
    for line in out.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v.strip().strip("'\"")
    return env


@pytest.fixture(scope="session")
def s3env() -> dict:
    """Endpoint, region and credentials of the server the tests use."""
    if not os.environ.get("AWS_ENDPOINT_URL"):
        os.environ.update(_start_local_server())
    missing = [k for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
               if not os.environ.get(k)]
    if missing:
        pytest.fail(f"no S3 server configured: {', '.join(missing)} unset")
    return {
        "endpoint_url": os.environ["AWS_ENDPOINT_URL"],
        "access_key": os.environ["AWS_ACCESS_KEY_ID"],
        "secret_key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
    }


@pytest.fixture(scope="session")
def boto(s3env):
    """boto3 as the independent oracle client."""
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=s3env["endpoint_url"], region_name=s3env["region"],
                        aws_access_key_id=s3env["access_key"],
                        aws_secret_access_key=s3env["secret_key"],
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}))


def _empty_bucket(boto, name):
    try:
        for up in boto.list_multipart_uploads(Bucket=name).get("Uploads", []):
            boto.abort_multipart_upload(Bucket=name, Key=up["Key"], UploadId=up["UploadId"])
        # One DeleteObjects per listing page (up to 1,000 keys), not one
        # DeleteObject per key: a 5,000-file test's bucket empties in a few
        # requests instead of 5,000 round trips. A key it could not delete
        # leaves the bucket as before (delete_bucket fails, ignored below).
        paginator = boto.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=name):
            keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
            if keys:
                boto.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
        boto.delete_bucket(Bucket=name)
    except Exception:
        pass


@pytest.fixture
def bucket(boto):
    """A fresh, empty bucket, removed with its contents after the test."""
    name = f"t-{uuid.uuid4().hex[:20]}"
    boto.create_bucket(Bucket=name)
    yield name
    _empty_bucket(boto, name)


@pytest.fixture
def client(s3env):
    """The s3xfer client under test, configured explicitly."""
    import s3xfer
    c = s3xfer.Client(endpoint_url=s3env["endpoint_url"], region=s3env["region"],
                      access_key=s3env["access_key"], secret_key=s3env["secret_key"])
    yield c
    c.close()


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    d = pathlib.Path(os.environ.get("S3X_BUILD_DIR", ROOT / "build"))
    if not (d / "s3xfer").exists():
        pytest.fail(f"the s3xfer CLI is not built in {d}: run `make build` (or set S3X_BUILD_DIR)")
    return d


@pytest.fixture(scope="session")
def cli(build_dir) -> str:
    return str(build_dir / "s3xfer")


# The fault-injecting proxy (tests/faultproxy) in front of the real server,
# for test_reliability.py, test_throttling.py and test_bulk*.py. A module
# picks its seed with PROXY_SEED (decisions are "keyed": each request's fate
# depends on the seed and the request, not on the interleaving).
@pytest.fixture
def proxy(s3env, request):
    from faultproxy import FaultProxy
    p = FaultProxy.from_url(s3env["endpoint_url"], seed=getattr(request.module, "PROXY_SEED", 7),
                            decisions="keyed")
    p.start()
    yield p
    p.stop()


@pytest.fixture
def pclient(s3env, proxy):
    """The s3xfer client under test, talking through the proxy."""
    import s3xfer
    c = s3xfer.Client(endpoint_url=proxy.url, region=s3env["region"], access_key=s3env["access_key"],
                      secret_key=s3env["secret_key"])
    yield c
    c.close()


# make test runs the heaviest tests three times: at full size in the normal
# pytest run, then again under ASan/UBSan (pytest-asan-cli, pytest-asan-py),
# where every byte and every request costs several times more. Those runs set
# S3X_TEST_SCALE (a fraction in (0, 1]) and a test whose size is only volume
# (5,000 files, a 300 MiB object) takes `scale(n)` items instead: fewer, but
# still past the same thresholds (several listing pages, many parts, more
# files than the concurrency), so the same code paths run under the
# sanitizers. Unset, every size is the full one.
def _test_scale() -> float:
    raw = os.environ.get("S3X_TEST_SCALE", "")
    if not raw:
        return 1.0
    try:
        v = float(raw)
    except ValueError:
        raise pytest.UsageError(f"S3X_TEST_SCALE must be a number in (0, 1], got {raw!r}") from None
    if not 0 < v <= 1:
        raise pytest.UsageError(f"S3X_TEST_SCALE must be a number in (0, 1], got {raw!r}")
    return v


@pytest.fixture(scope="session")
def scale():
    """scale(n, at_least) -> n at full size, else n * S3X_TEST_SCALE but not
    below at_least (the smallest size that still exercises what the test is
    about)."""
    f = _test_scale()

    def scaled(n: int, at_least: int = 1) -> int:
        return n if f == 1.0 else max(at_least, int(n * f))
    return scaled


# `make pytest` runs the suite in two passes: first the files below NOT
# listed, spread over two pytest-xdist workers (whole files per worker, so a
# file's fixed names and module fixtures stay in one process); then these
# files alone, one test at a time, because their tests assert how long
# something took (a signal obeyed within 2 s, a slow part resent, a
# credential refreshed in its window, throttling spread over time) or how much
# memory a process used, and a second test running beside them would eat into
# those margins. A new file that measures time or memory belongs here.
SERIAL_FILES = frozenset({
    "test_batch.py", "test_cli.py", "test_cli_hardening.py", "test_cli_json.py", "test_credentials.py",
    "test_credentials_sso.py", "test_faultproxy.py", "test_py_hardening.py", "test_python_api.py",
    "test_reliability.py", "test_throttling.py",
})


def pytest_configure(config):
    config.addinivalue_line("markers", "serial: measures time or memory; `make pytest` runs it alone, after the "
                                       "parallel pass (conftest.SERIAL_FILES)")


# The longest files of the parallel pass (minutes each: notebooks, a pip
# install, thousands of objects), handed to the workers first so that neither
# worker is left alone with one of them at the end. Only the order of whole
# files changes, and only on xdist workers.
LONG_FILES = ("test_notebooks.py", "test_packaging.py", "test_bulk.py", "test_upload.py",
              "test_endpoints_oracle.py", "test_cli_bulk.py")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)
    if hasattr(config, "workerinput"):
        rank = {name: i for i, name in enumerate(LONG_FILES)}
        items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: file order kept
