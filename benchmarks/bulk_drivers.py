#!/usr/bin/env python3
"""The Python side of benchmarks/bulk_compare.py: many-object transfers through
one Python client in this process (measured from outside by the harness), and
the harness's own untimed S3 chores (buckets, seeding, listing, checks).

    bulk_drivers.py run CLIENT '{"op": ..., "bucket": ..., "prefix": ..., "dir": ...}'
    bulk_drivers.py admin '{"cmd": ..., ...}'|-      (-: the JSON on stdin)

CLIENT:
- boto3: a ThreadPoolExecutor of 16 threads calling s3.upload_file /
  s3.download_file (what boto3 users write, since boto3 has no directory
  transfer); a client with max_pool_connections=16 so no thread waits for a
  connection; downloads list the prefix with a paginator first. botocore's
  defaults otherwise (CRC32 on uploads, when_supported); s3transfer downloads
  into a temp file renamed into place, no fsync.
- awscrt: one S3Client, every file submitted, at most 64 requests in flight
  (a semaphore); uploads carry a CRC32 trailer (what the SDKs built on the CRT
  send by default; the bare CRT sends none), downloads validate a checksum when
  the object has one and are written straight to the final path (recv_filepath,
  no temp file, no fsync). Listing is ListObjectsV2 through the same client
  (a DEFAULT request, XML parsed here), page by page.
- s3xfer-py: Client.upload_dir / download_dir / sync, when the package has them.

Prints one JSON line: {"seconds": in-process seconds, "objects": n, ...}.
The admin commands use boto3 with 16 threads; they print JSON too.
"""

import concurrent.futures
import hashlib
import json
import os
import sys
import threading
import time

WORKERS = 16          # boto3 thread pool
CRT_IN_FLIGHT = 64    # awscrt requests submitted at once


def creds():
    e = os.environ
    return (e["AWS_ENDPOINT_URL"], e.get("AWS_REGION") or e.get("AWS_DEFAULT_REGION") or "us-east-1",
            e["AWS_ACCESS_KEY_ID"], e["AWS_SECRET_ACCESS_KEY"])


def walk(root):
    """[(relative path with / separators, absolute path)] of the regular files under root, sorted."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            out.append((os.path.relpath(p, root).replace(os.sep, "/"), p))
    return out


def boto3_client(workers=WORKERS):
    import boto3
    from botocore.config import Config
    endpoint, region, ak, sk = creds()
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                        config=Config(region_name=region, max_pool_connections=workers,
                                      s3={"addressing_style": "path"}))


def list_prefix(s3, bucket, prefix):
    """{relative key: {"size", "etag", "mtime"}} under prefix (paginated)."""
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            out[o["Key"][len(prefix):]] = {"size": o["Size"], "etag": o["ETag"].strip('"'),
                                           "mtime": int(o["LastModified"].timestamp())}
    return out


# ---- the measured clients ----------------------------------------------------------
def run_boto3(cfg):
    s3 = boto3_client()
    op, bucket, prefix, root = cfg["op"], cfg["bucket"], cfg["prefix"], cfg["dir"]
    if op == "upload":
        jobs = [(p, prefix + rel) for rel, p in walk(root)]

        def one(job):
            s3.upload_file(job[0], bucket, job[1])
    elif op == "download":
        jobs = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                rel = o["Key"][len(prefix):]
                jobs.append((os.path.join(root, *rel.split("/")), o["Key"]))

        def one(job):
            os.makedirs(os.path.dirname(job[0]), exist_ok=True)
            s3.download_file(bucket, job[1], job[0])
    else:
        raise SystemExit(f"boto3 has no {op}")
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as ex:
        for f in [ex.submit(one, j) for j in jobs]:
            f.result()
    return {"objects": len(jobs)}


def run_awscrt(cfg):
    from urllib.parse import quote, urlparse
    import xml.etree.ElementTree as ET
    from awscrt import auth, http, io, s3
    endpoint, region, ak, sk = creds()
    u = urlparse(endpoint)
    elg = io.EventLoopGroup()
    bootstrap = io.ClientBootstrap(elg, io.DefaultHostResolver(elg))
    provider = auth.AwsCredentialsProvider.new_static(ak, sk)
    signing = s3.create_default_s3_signing_config(region=region, credential_provider=provider)
    tls = s3.S3RequestTlsMode.ENABLED if u.scheme == "https" else s3.S3RequestTlsMode.DISABLED
    client = s3.S3Client(bootstrap=bootstrap, region=region, signing_config=signing, tls_mode=tls)
    op, bucket, prefix, root = cfg["op"], cfg["bucket"], cfg["prefix"], cfg["dir"]
    gate = threading.BoundedSemaphore(CRT_IN_FLIGHT)
    errors, futures = [], []

    def headers():
        return http.HttpHeaders([("Host", u.netloc)])

    def submit(**kw):
        gate.acquire()
        r = client.make_request(**kw)
        fut = r.finished_future

        def done(f):
            gate.release()
            if f.exception():
                errors.append(f.exception())
        fut.add_done_callback(done)
        futures.append((r, fut))

    def listing():
        """ListObjectsV2 pages through the CRT: [key]."""
        ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
        keys, token = [], None
        while True:
            q = f"list-type=2&prefix={quote(prefix, safe='')}"
            if token:
                q += f"&continuation-token={quote(token, safe='')}"
            body = bytearray()
            r = client.make_request(type=s3.S3RequestType.DEFAULT, operation_name="ListObjectsV2",
                                    request=http.HttpRequest("GET", f"/{bucket}?{q}", headers()),
                                    on_body=lambda chunk, offset, **_: body.extend(chunk))
            r.finished_future.result()
            doc = ET.fromstring(bytes(body))
            keys += [c.find(ns + "Key").text for c in doc.findall(ns + "Contents")]
            if (doc.findtext(ns + "IsTruncated") or "false") != "true":
                return keys
            token = doc.findtext(ns + "NextContinuationToken")

    if op == "upload":
        items = walk(root)
        for rel, p in items:
            h = headers()
            h.add("Content-Length", str(os.path.getsize(p)))
            submit(type=s3.S3RequestType.PUT_OBJECT,
                   request=http.HttpRequest("PUT", f"/{bucket}/{quote(prefix + rel)}", h), send_filepath=p,
                   checksum_config=s3.S3ChecksumConfig(algorithm=s3.S3ChecksumAlgorithm.CRC32,
                                                       location=s3.S3ChecksumLocation.TRAILER))
    elif op == "download":
        items = listing()
        made = set()
        for key in items:
            dest = os.path.join(root, *key[len(prefix):].split("/"))
            d = os.path.dirname(dest)
            if d not in made:
                os.makedirs(d, exist_ok=True)
                made.add(d)
            submit(type=s3.S3RequestType.GET_OBJECT,
                   request=http.HttpRequest("GET", f"/{bucket}/{quote(key)}", headers()), recv_filepath=dest,
                   checksum_config=s3.S3ChecksumConfig(validate_response=True))
    else:
        raise SystemExit(f"awscrt has no {op}")
    for _, f in futures:
        try:
            f.result()
        except Exception:
            pass  # counted by the callback
    if errors:
        raise SystemExit(f"awscrt: {len(errors)} of {len(items)} requests failed, first: {errors[0]!r}")
    return {"objects": len(items)}


def run_s3xfer(cfg):
    import s3xfer
    op, bucket, prefix, root = cfg["op"], cfg["bucket"], cfg["prefix"], cfg["dir"]
    c = s3xfer.Client()
    url = f"s3://{bucket}/{prefix}"
    if op == "upload":
        r = c.upload_dir(root, bucket, prefix)
    elif op == "download":
        r = c.download_dir(bucket, prefix, root)
    elif op == "sync-up":
        r = c.sync(root, url)
    elif op == "sync-down":
        r = c.sync(url, root)
    else:
        raise SystemExit(f"unknown op {op}")
    # the BulkSummary's counts (objects_done, objects_skipped, bytes_done, peak_buffer_bytes, ...)
    fields = getattr(r, "__dataclass_fields__", {})
    return {f: getattr(r, f) for f in fields if isinstance(getattr(r, f), (int, float, bool))}


# ---- the harness's chores ------------------------------------------------------------
def admin(cfg):
    s3 = boto3_client()
    cmd = cfg["cmd"]
    bucket = cfg.get("bucket")
    pool = concurrent.futures.ThreadPoolExecutor(WORKERS)
    if cmd == "mb":
        s3.create_bucket(Bucket=bucket)
        # SeaweedFS grows a new bucket's volumes on its first write (a stall of
        # 0.5-1 s, see benchmarks/README.md): a small untimed write first.
        s3.put_object(Bucket=bucket, Key=".warm", Body=b"w" * 1024)
        return {}
    if cmd == "rb":
        try:
            keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                    for o in page.get("Contents", [])]
        except s3.exceptions.NoSuchBucket:
            return {}
        for i in range(0, len(keys), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]],
                                                     "Quiet": True})
        for up in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"])
        s3.delete_bucket(Bucket=bucket)
        return {}
    if cmd == "put":
        # files: [[path, key, mtime or null]]; mtime goes into x-amz-meta-mtime,
        # where rclone keeps a file's modification time.
        def put(f):
            path, key, mtime = f
            extra = {"Metadata": {"mtime": mtime}} if mtime else None
            s3.upload_file(path, bucket, key, ExtraArgs=extra)
        list(pool.map(put, cfg["files"]))
        return {}
    if cmd == "list":
        return list_prefix(s3, bucket, cfg["prefix"])
    if cmd == "sha256":
        def get(key):
            h = hashlib.sha256()
            for chunk in s3.get_object(Bucket=bucket, Key=key)["Body"].iter_chunks(1 << 20):
                h.update(chunk)
            return key, h.hexdigest()
        return dict(pool.map(get, cfg["keys"]))
    raise SystemExit(f"unknown admin command {cmd}")


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    if sys.argv[1] == "admin":
        print(json.dumps(admin(json.loads(sys.stdin.read() if sys.argv[2] == "-" else sys.argv[2]))))
        return
    client, cfg = sys.argv[2], json.loads(sys.argv[3])
    fn = {"boto3": run_boto3, "awscrt": run_awscrt, "s3xfer-py": run_s3xfer}[client]
    t0 = time.monotonic()
    out = fn(cfg)
    out["seconds"] = time.monotonic() - t0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
