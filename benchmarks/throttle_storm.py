#!/usr/bin/env python3
"""The throttling storm grid (issue 13): a fault proxy in front of the local
server answers every request with 503 SlowDown for W seconds, starting 0.3 s
into a transfer (the storm's clock starts at the first request through the
proxy), and each client moves one object through it with its default retry
settings. Reported per cell: survived or failed, wall seconds, and the
requests the proxy answered inside the storm.

    benchmarks/throttle_storm.py [--size 256MiB] [--part-size 8MiB] [--concurrency 8]
                                 [--storms 2,5,10,30] [--clients s3xfer,s3xfer-standard,boto3,boto3-adaptive]
                                 [--out results.json]

Clients: s3xfer (adaptive, its default), s3xfer-standard, boto3 (standard
retry mode, boto3's documented recommendation), boto3-adaptive, awscrt
(S3Client, its default retry strategy) and obstore (put with its multipart
writer; downloads as one get_range per part, `concurrency` at a time)
when those packages are installed (a cell says "not installed" otherwise;
`benchmarks/.venv` gets them with `pip install awscrt obstore`). Run with the local server's variables in the environment
(scripts/with-local-s3) and the built module on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from faultproxy import FaultProxy  # noqa: E402

MiB = 1 << 20


def parse_size(text: str) -> int:
    units = {"": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
    num = text.rstrip("KMGiBkmgib")
    return int(num) * units[text[len(num):].lower()]


def env():
    e = os.environ
    return dict(endpoint=e["AWS_ENDPOINT_URL"], key=e["AWS_ACCESS_KEY_ID"], secret=e["AWS_SECRET_ACCESS_KEY"],
                region=e.get("AWS_REGION", "us-east-1"))


def s3xfer_mover(mode):
    import s3xfer

    def move(url, E, direction, bucket, key, path, part, conc):
        c = s3xfer.Client(endpoint_url=url, region=E["region"], access_key=E["key"], secret_key=E["secret"])
        cfg = s3xfer.TransferConfig(part_size=part, concurrency=conc, retry_mode=mode)
        try:
            if direction == "up":
                c.upload_file(path, bucket, key, config=cfg)
            else:
                c.download_file(bucket, key, path + ".out", config=cfg)
        finally:
            c.close()
    return move


def boto3_mover(mode):
    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config

    def move(url, E, direction, bucket, key, path, part, conc):
        s3 = boto3.client("s3", endpoint_url=url, region_name=E["region"], aws_access_key_id=E["key"],
                          aws_secret_access_key=E["secret"],
                          config=Config(retries={"mode": mode}, max_pool_connections=conc))
        cfg = TransferConfig(multipart_chunksize=part, multipart_threshold=part, max_concurrency=conc)
        if direction == "up":
            s3.upload_file(path, bucket, key, Config=cfg)
        else:
            s3.download_file(bucket, key, path + ".out", Config=cfg)
    return move


def awscrt_mover():
    from urllib.parse import urlparse
    from awscrt import auth, http, io, s3

    def move(url, E, direction, bucket, key, path, part, conc):
        u = urlparse(url)
        elg = io.EventLoopGroup()
        bootstrap = io.ClientBootstrap(elg, io.DefaultHostResolver(elg))
        provider = auth.AwsCredentialsProvider.new_static(E["key"], E["secret"])
        signing = s3.create_default_s3_signing_config(region=E["region"], credential_provider=provider)
        client = s3.S3Client(bootstrap=bootstrap, region=E["region"], signing_config=signing,
                             tls_mode=s3.S3RequestTlsMode.DISABLED, part_size=part,
                             multipart_upload_threshold=part, max_active_connections_override=conc)
        headers = http.HttpHeaders([("Host", u.netloc)])
        kw = {}
        if direction == "up":
            headers.add("Content-Length", str(os.path.getsize(path)))
            req, rtype = http.HttpRequest("PUT", f"/{bucket}/{key}", headers), s3.S3RequestType.PUT_OBJECT
            kw["send_filepath"] = path
        else:
            req, rtype = http.HttpRequest("GET", f"/{bucket}/{key}", headers), s3.S3RequestType.GET_OBJECT
            kw["recv_filepath"] = path + ".out"
        client.make_request(type=rtype, request=req, **kw).finished_future.result()
    return move


def obstore_mover():
    import obstore
    from obstore.store import S3Store

    def move(url, E, direction, bucket, key, path, part, conc):
        store = S3Store(bucket, endpoint=url, region=E["region"], access_key_id=E["key"],
                        secret_access_key=E["secret"], client_options={"allow_http": True},
                        virtual_hosted_style_request=False)
        if direction == "up":
            with open(path, "rb") as f:
                obstore.put(store, key, f, chunk_size=part, max_concurrency=conc)
        else:
            # One get_range per part, `conc` at once (get_ranges would
            # coalesce adjacent ranges into one request).
            import concurrent.futures
            size = os.path.getsize(path)
            with open(path + ".out", "wb") as f, concurrent.futures.ThreadPoolExecutor(conc) as ex:
                def one(off):
                    b = obstore.get_range(store, key, start=off, end=min(off + part, size))
                    os.pwrite(f.fileno(), bytes(b), off)
                list(ex.map(one, range(0, size, part)))
    return move


def available(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--part-size", default="8MiB")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--storms", default="2,5,10,30")
    ap.add_argument("--start", type=float, default=0.3)
    ap.add_argument("--clients", default="s3xfer,s3xfer-standard,boto3,boto3-adaptive,awscrt,obstore")
    ap.add_argument("--out")
    a = ap.parse_args()
    E = env()
    size, part = parse_size(a.size), parse_size(a.part_size)
    movers = {"s3xfer": lambda: s3xfer_mover("adaptive"), "s3xfer-standard": lambda: s3xfer_mover("standard"),
              "boto3": lambda: boto3_mover("standard"), "boto3-adaptive": lambda: boto3_mover("adaptive")}
    if available("awscrt"):
        movers["awscrt"] = awscrt_mover
    if available("obstore"):
        movers["obstore"] = obstore_mover
    import boto3
    direct = boto3.client("s3", endpoint_url=E["endpoint"], region_name=E["region"], aws_access_key_id=E["key"],
                          aws_secret_access_key=E["secret"])
    bucket = f"storm-{os.getpid()}"
    direct.create_bucket(Bucket=bucket)
    tmp = tempfile.mkdtemp(prefix="storm-")
    path = os.path.join(tmp, "src")
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    direct.upload_file(path, bucket, "down")
    rows = []
    for name in a.clients.split(","):
        for direction in ("up", "down"):
            for w in [float(s) for s in a.storms.split(",")]:
                cell = {"client": name, "direction": direction, "storm_s": w}
                if name not in movers:
                    cell["result"] = "not installed" if not available(name) else "no driver"
                    rows.append(cell)
                    print(json.dumps(cell), flush=True)
                    continue
                move = movers[name]()
                p = FaultProxy.from_url(E["endpoint"], seed=1,
                                        rules=[f"storm:start={a.start},duration={w}"])
                p.start()
                key = "up" if direction == "up" else "down"
                t = time.monotonic()
                try:
                    move(p.url, E, direction, bucket, key, path, part, a.concurrency)
                    cell["result"] = "ok"
                except Exception as e:  # noqa: BLE001 - any failure is a result
                    cell["result"] = "failed"
                    cell["error"] = str(e)[:300]
                cell["wall_s"] = round(time.monotonic() - t, 2)
                cell["requests_into_storm"] = p.stats()["faults"].get("storm", 0)
                cell["requests"] = p.stats()["requests"]
                p.stop()
                if os.path.exists(path + ".out"):
                    os.unlink(path + ".out")
                for u in direct.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
                    direct.abort_multipart_upload(Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"])
                rows.append(cell)
                print(json.dumps(cell), flush=True)
    for k in ("up", "down"):
        try:
            direct.delete_object(Bucket=bucket, Key=k)
        except Exception:  # noqa: BLE001
            pass
    direct.delete_bucket(Bucket=bucket)
    os.unlink(path)
    os.rmdir(tmp)
    print("\n| client | " + " | ".join(f"{d} {w:g} s" for d in ("up", "down") for w in
                                     [float(s) for s in a.storms.split(",")]) + " |")
    for name in a.clients.split(","):
        cells = [r for r in rows if r["client"] == name]
        print(f"| {name} | " + " | ".join(
            (f"{r['result']} {r['wall_s']:.1f} s, {r['requests_into_storm']}" if "wall_s" in r else r["result"])
            for r in cells) + " |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
