#!/usr/bin/env python3
"""One transfer through awscrt or obstore in this process, for
benchmarks/client_limit.py, which measures the process from outside.

    limit_drivers.py awscrt download|upload --endpoint URL --bucket B --key K --file PATH [--ca CA.pem]
    limit_drivers.py obstore-get|obstore-ranges download --endpoint URL --bucket B --key K --size N [--sha256 H]
    limit_drivers.py obstore upload --endpoint URL --bucket B --key K --file PATH

Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_REGION.
An https endpoint is verified against --ca alone (added to the trusted
roots), never skipped. obstore downloads go into memory: one `get` stream
(`obstore-get`), or `get_range_async` of every part with at most
--concurrency in flight, copied into one preallocated buffer
(`obstore-ranges`). Those bytes are hashed after the transfer is timed, and
the time and CPU of that check are reported (verify_s, verify_cpu) so that
the caller takes them out of the process's figures.
"""

import argparse
import hashlib
import json
import os
import resource
import sys
import time


def cpu_self():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def run_awscrt(a):
    from awscrt import auth, http, io, s3
    from urllib.parse import urlparse
    u = urlparse(a.endpoint)
    region = os.environ.get("AWS_REGION", "us-east-1")
    elg = io.EventLoopGroup()
    bootstrap = io.ClientBootstrap(elg, io.DefaultHostResolver(elg))
    provider = auth.AwsCredentialsProvider.new_static(os.environ["AWS_ACCESS_KEY_ID"],
                                                      os.environ["AWS_SECRET_ACCESS_KEY"])
    signing = s3.create_default_s3_signing_config(region=region, credential_provider=provider)
    kw = {}
    if u.scheme == "https":
        opts = io.TlsContextOptions()
        opts.override_default_trust_store_from_path(None, a.ca)
        conn = io.ClientTlsContext(opts).new_connection_options()
        conn.set_server_name(u.hostname)
        kw.update(tls_mode=s3.S3RequestTlsMode.ENABLED, tls_connection_options=conn)
    else:
        kw["tls_mode"] = s3.S3RequestTlsMode.DISABLED
    client = s3.S3Client(bootstrap=bootstrap, region=region, signing_config=signing, part_size=a.part_size,
                         multipart_upload_threshold=a.part_size, throughput_target_gbps=10.0,
                         max_active_connections_override=a.concurrency, **kw)
    headers = http.HttpHeaders([("Host", u.netloc)])
    path = f"/{a.bucket}/{a.key}"
    rkw = {}
    t0 = time.monotonic()
    if a.op == "upload":
        headers.add("Content-Length", str(os.path.getsize(a.file)))
        req = http.HttpRequest("PUT", path, headers)
        rkw["send_filepath"] = a.file
        rtype = s3.S3RequestType.PUT_OBJECT
    else:
        req = http.HttpRequest("GET", path, headers)
        rkw["recv_filepath"] = a.file
        rtype = s3.S3RequestType.GET_OBJECT
    moved = [0]
    r = client.make_request(type=rtype, request=req,
                            on_progress=lambda n, **_: moved.__setitem__(0, moved[0] + n), **rkw)
    r.finished_future.result()
    return time.monotonic() - t0, moved[0], None


def obstore_store(a):
    from obstore.store import S3Store
    opts = {"allow_http": True}
    if a.endpoint.startswith("https:"):
        with open(a.ca) as f:
            opts["root_certificate"] = f.read()
    return S3Store(a.bucket, endpoint=a.endpoint, region=os.environ.get("AWS_REGION", "us-east-1"),
                   access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                   secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"], virtual_hosted_style_request=False,
                   client_options=opts)


def run_obstore(a):
    import obstore as obs
    store = obstore_store(a)
    t0 = time.monotonic()
    if a.op == "upload":
        # put() of a path: a multipart upload when the file is larger than chunk_size
        from pathlib import Path
        obs.put(store, a.key, Path(a.file), chunk_size=a.part_size, max_concurrency=a.concurrency)
        return time.monotonic() - t0, os.path.getsize(a.file), None
    if a.client == "obstore-get":
        data = obs.get(store, a.key).bytes()
        secs = time.monotonic() - t0
        return secs, len(data), memoryview(data)
    import asyncio
    size = a.size
    buf = bytearray(size)
    view = memoryview(buf)

    async def main():
        sem = asyncio.Semaphore(a.concurrency)

        async def one(start):
            end = min(size, start + a.part_size)
            async with sem:
                b = await obs.get_range_async(store, a.key, start=start, end=end)
            view[start:end] = memoryview(b)
        await asyncio.gather(*(one(s) for s in range(0, size, a.part_size)))
    asyncio.run(main())
    return time.monotonic() - t0, size, view


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("client", choices=["awscrt", "obstore", "obstore-get", "obstore-ranges"])
    ap.add_argument("op", choices=["upload", "download"])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--file")
    ap.add_argument("--size", type=int)
    ap.add_argument("--sha256")
    ap.add_argument("--ca")
    ap.add_argument("--part-size", type=int, default=8 << 20)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--result", required=True)
    a = ap.parse_args()
    fn = run_awscrt if a.client == "awscrt" else run_obstore
    secs, n, mem = fn(a)
    out = {"seconds": secs, "bytes": n}
    if mem is not None:
        v0, c0 = time.monotonic(), cpu_self()
        got = hashlib.sha256(mem).hexdigest()
        out.update(verify_s=time.monotonic() - v0, verify_cpu=cpu_self() - c0, sha256=got)
    with open(a.result + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(a.result + ".tmp", a.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
