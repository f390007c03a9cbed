#!/usr/bin/env python3
"""One transfer in this process, through one Python client; the caller
(benchmarks/run and friends) measures the process from outside.

    drivers.py CLIENT upload|download --bucket B --key K --file PATH|- [knobs] --result OUT.json

CLIENT: s3xfer-py | boto3 | awscrt | noop (imports nothing: the interpreter's
own cost). `--file -` streams: upload reads stdin, download writes stdout.
`--sink slow:MIBPS` downloads into an in-process consumer that takes at most
MIBPS MiB/s (s3xfer-py only); `--sink memory:SIZE` downloads into a
bytearray of SIZE bytes made in the timed part (`download_into`, s3xfer-py
only), whose sha256 is taken after the timing and reported with its time and
CPU (sha256, verify_s, verify_cpu). The result file holds the in-process transfer
seconds and CPU seconds, and for s3xfer the TransferResult.
"""

import argparse
import json
import os
import resource
import sys
import time


def creds():
    e = os.environ
    return (e["AWS_ENDPOINT_URL"], e.get("AWS_REGION") or e.get("AWS_DEFAULT_REGION") or "us-east-1",
            e["AWS_ACCESS_KEY_ID"], e["AWS_SECRET_ACCESS_KEY"])


_RU0 = None


def start():
    """Marks the start of the transfer: in-process CPU is counted from here."""
    global _RU0
    _RU0 = resource.getrusage(resource.RUSAGE_SELF)
    return time.monotonic()


class SlowSink:
    """A write()-only consumer that takes at most `rate` bytes/s."""

    def __init__(self, rate):
        self.rate, self.n, self.t0 = rate, 0, time.monotonic()

    def write(self, b):
        self.n += len(b)
        ahead = self.n / self.rate - (time.monotonic() - self.t0)
        if ahead > 0:
            time.sleep(ahead)
        return len(b)


def run_s3xfer(a):
    import s3xfer
    endpoint, region, ak, sk = creds()
    kw = {"payload_signing": "unsigned"} if a.unsigned_payload else {}
    try:
        c = s3xfer.Client(endpoint_url=endpoint, region=region, access_key=ak, secret_key=sk, **kw)
    except TypeError:  # an older package without payload_signing=
        c = s3xfer.Client(endpoint_url=endpoint, region=region, access_key=ak, secret_key=sk)
        kw = {}
    kw = dict(part_size=a.part_size, concurrency=a.concurrency, buffer_strategy=a.buffer_strategy, pool=a.pool,
              checksum=a.checksum, memory_limit=a.memory_limit, slow_part_timeout=a.slow_part_timeout)
    if a.durable is not None:
        kw["durable"] = bool(a.durable)
    if a.part_size and a.op == "upload":
        kw["multipart_threshold"] = min(a.part_size, 5 << 30)
    if a.slow_part_timeout and a.slow_part_timeout.isdigit():
        kw["slow_part_timeout"] = int(a.slow_part_timeout)
    cfg = s3xfer.TransferConfig(**{k: v for k, v in kw.items() if v is not None})
    if a.unsigned_payload and not kw:
        # An older Client without payload_signing=: set the C knob on its handles.
        from s3xfer import _core
        c._params[_core.S3X_PARAM_PAYLOAD_SIGNING] = _core.S3X_PAYLOAD_UNSIGNED
        for h in c._idle:
            _core.py_client_set(h, _core.S3X_PARAM_PAYLOAD_SIGNING, _core.S3X_PAYLOAD_UNSIGNED)
    t0 = start()
    if a.op == "upload":
        if a.file == "-":
            r = c.upload_fileobj(sys.stdin.buffer, a.bucket, a.key, config=cfg)
        else:
            r = c.upload_file(a.file, a.bucket, a.key, config=cfg)
    elif a.sink and a.sink.startswith("memory:"):
        buf = bytearray(int(a.sink.split(":", 1)[1]))
        r = c.download_into(a.bucket, a.key, buf, config=cfg)
        secs = time.monotonic() - t0
        import hashlib
        v0, ru0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
        got = hashlib.sha256(memoryview(buf)[:r.bytes]).hexdigest()
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        d = {f: getattr(r, f) for f in r.__dataclass_fields__}
        return secs, r.bytes, {"s3xfer": d, "sha256": got, "verify_s": time.monotonic() - v0,
                               "verify_cpu": ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime}
    elif a.sink:
        rate = float(a.sink.split(":", 1)[1]) * (1 << 20)
        r = c.download_fileobj(a.bucket, a.key, SlowSink(rate), config=cfg)
    elif a.file == "-":
        r = c.download_fileobj(a.bucket, a.key, sys.stdout.buffer, config=cfg)
    else:
        r = c.download_file(a.bucket, a.key, a.file, config=cfg)
    secs = time.monotonic() - t0
    d = {f: getattr(r, f) for f in r.__dataclass_fields__}
    return secs, r.bytes, {"s3xfer": d}


def run_boto3(a):
    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config
    endpoint, region, ak, sk = creds()
    checksum = a.checksum not in (None, "none")
    cfg = Config(region_name=region, s3={"addressing_style": "path"}, max_pool_connections=max(10, a.concurrency),
                 retries={"max_attempts": 5, "mode": "standard"},
                 request_checksum_calculation="when_supported" if checksum else "when_required",
                 response_checksum_validation="when_required")
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk, config=cfg)
    tc = TransferConfig(multipart_threshold=a.part_size, multipart_chunksize=a.part_size,
                        max_concurrency=a.concurrency, use_threads=True, preferred_transfer_client="classic")
    extra = {"ChecksumAlgorithm": a.checksum.upper()} if checksum and a.op == "upload" else None
    t0 = start()
    if a.op == "upload":
        if a.file == "-":
            s3.upload_fileobj(sys.stdin.buffer, a.bucket, a.key, ExtraArgs=extra, Config=tc)
        else:
            s3.upload_file(a.file, a.bucket, a.key, ExtraArgs=extra, Config=tc)
        n = s3.head_object(Bucket=a.bucket, Key=a.key)["ContentLength"] if a.file == "-" else os.path.getsize(a.file)
    elif a.file == "-":
        s3.download_fileobj(a.bucket, a.key, sys.stdout.buffer, Config=tc)
        n = 0
    else:
        s3.download_file(a.bucket, a.key, a.file, Config=tc)
        n = os.path.getsize(a.file)
    return time.monotonic() - t0, n, {"payload": "signed (botocore signs bodies over http)"}


def run_awscrt(a):
    from awscrt import auth, http, io, s3
    from urllib.parse import urlparse
    endpoint, region, ak, sk = creds()
    u = urlparse(endpoint)
    elg = io.EventLoopGroup()
    bootstrap = io.ClientBootstrap(elg, io.DefaultHostResolver(elg))
    provider = auth.AwsCredentialsProvider.new_static(ak, sk)
    signing = s3.create_default_s3_signing_config(region=region, credential_provider=provider)
    tls = s3.S3RequestTlsMode.ENABLED if u.scheme == "https" else s3.S3RequestTlsMode.DISABLED
    client = s3.S3Client(bootstrap=bootstrap, region=region, signing_config=signing, tls_mode=tls,
                         part_size=a.part_size, multipart_upload_threshold=a.part_size,
                         throughput_target_gbps=a.target_gbps,
                         max_active_connections_override=a.concurrency)
    headers = http.HttpHeaders([("Host", u.netloc)])
    path = f"/{a.bucket}/{a.key}"
    checksum = None
    if a.checksum not in (None, "none"):
        alg = {"crc32": s3.S3ChecksumAlgorithm.CRC32, "crc32c": s3.S3ChecksumAlgorithm.CRC32C,
               "sha256": s3.S3ChecksumAlgorithm.SHA256}[a.checksum]
        checksum = s3.S3ChecksumConfig(algorithm=alg, location=s3.S3ChecksumLocation.TRAILER) \
            if a.op == "upload" else s3.S3ChecksumConfig(validate_response=True)
    kw = {}
    t0 = start()
    if a.op == "upload":
        if a.file == "-":
            req = http.HttpRequest("PUT", path, headers, sys.stdin.buffer)
        else:
            headers.add("Content-Length", str(os.path.getsize(a.file)))
            req = http.HttpRequest("PUT", path, headers)
            kw["send_filepath"] = a.file
        rtype = s3.S3RequestType.PUT_OBJECT
    else:
        req = http.HttpRequest("GET", path, headers)
        rtype = s3.S3RequestType.GET_OBJECT
        if a.file == "-":
            out = sys.stdout.buffer
            kw["on_body"] = lambda chunk, offset, **_: out.write(chunk)
        else:
            kw["recv_filepath"] = a.file
    moved = [0]
    r = client.make_request(type=rtype, request=req, checksum_config=checksum,
                            on_progress=lambda n, **_: moved.__setitem__(0, moved[0] + n), **kw)
    r.finished_future.result()
    return time.monotonic() - t0, moved[0], {"payload": "unsigned (CRT default)"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("client", choices=["s3xfer-py", "boto3", "awscrt", "noop"])
    ap.add_argument("op", choices=["upload", "download"])
    ap.add_argument("--bucket")
    ap.add_argument("--key")
    ap.add_argument("--file", default="-")
    ap.add_argument("--part-size", type=int, default=8 << 20)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--checksum")
    ap.add_argument("--buffer-strategy")
    ap.add_argument("--pool")
    ap.add_argument("--memory-limit", type=int)
    ap.add_argument("--slow-part-timeout")
    ap.add_argument("--unsigned-payload", action="store_true")
    ap.add_argument("--target-gbps", type=float, default=10.0)
    ap.add_argument("--sink")
    ap.add_argument("--durable", type=int, choices=[0, 1], help="s3xfer-py downloads: fsync before the rename")
    ap.add_argument("--result", required=True)
    a = ap.parse_args()
    if a.checksum in ("none", "null"):
        # s3xfer's default is CRC32C, so "none" must reach it as "none"; the peers take None.
        a.checksum = "none" if a.client == "s3xfer-py" else None
    if a.client == "noop":
        start()
        secs, n, extra = 0.0, 0, {}
    else:
        fn = {"s3xfer-py": run_s3xfer, "boto3": run_boto3, "awscrt": run_awscrt}[a.client]
        secs, n, extra = fn(a)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - _RU0.ru_utime) + (ru1.ru_stime - _RU0.ru_stime)
    out = {"seconds": secs, "bytes": n, "cpu": cpu, **extra}
    with open(a.result + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(a.result + ".tmp", a.result)


if __name__ == "__main__":
    main()
