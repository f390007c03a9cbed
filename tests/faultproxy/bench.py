"""Throughput of boto3 through the proxy (no faults) versus direct, same run.

    AWS_ENDPOINT_URL=http://127.0.0.1:8333 AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \
        python -m faultproxy.bench [--size-mib 256] [--rounds 3]

Uploads one object, then alternates direct and proxied single-stream GETs (read in
1 MiB pieces and dropped) and PUTs of the same size, and prints MiB/s for each.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
import uuid

import boto3
from botocore.config import Config

from .proxy import FaultProxy


class _Zeros(io.RawIOBase):
    """A readable, seekable stream of n pseudo-random bytes without holding them."""

    def __init__(self, n: int, block: bytes):
        self.n, self.pos, self.block = n, 0, block

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, off, whence=0):
        self.pos = off if whence == 0 else (self.pos + off if whence == 1 else self.n + off)
        return self.pos

    def tell(self):
        return self.pos

    def readinto(self, b):
        k = min(len(b), self.n - self.pos)
        if k <= 0:
            return 0
        o = self.pos % len(self.block)
        k = min(k, len(self.block) - o)
        b[:k] = self.block[o : o + k]
        self.pos += k
        return k


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m faultproxy.bench")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bucket", default=None)
    args = ap.parse_args(argv)
    ep = os.environ.get("AWS_ENDPOINT_URL")
    if not ep:
        print("set AWS_ENDPOINT_URL (e.g. eval \"$(scripts/local-s3 start)\")", file=sys.stderr)
        return 2
    region = os.environ.get("AWS_REGION", "us-east-1")
    cfg = Config(retries={"max_attempts": 1, "mode": "standard"}, max_pool_connections=4)
    direct = boto3.client("s3", endpoint_url=ep, region_name=region, config=cfg)
    proxy = FaultProxy.from_url(ep)
    proxy.start()
    via = boto3.client("s3", endpoint_url=proxy.url, region_name=region, config=cfg)
    bucket = args.bucket or f"fpbench-{uuid.uuid4().hex[:8]}"
    made = args.bucket is None
    if made:
        direct.create_bucket(Bucket=bucket)
    size = args.size_mib << 20
    block = os.urandom(8 << 20)
    key = "bench/object"
    results: dict[str, list[float]] = {k: [] for k in ("get direct", "get proxy", "put direct", "put proxy")}
    try:
        direct.put_object(Bucket=bucket, Key=key, Body=_Zeros(size, block), ContentLength=size)
        for _ in range(args.rounds):
            for name, c in (("direct", direct), ("proxy", via)):
                t = time.perf_counter()
                body = c.get_object(Bucket=bucket, Key=key)["Body"]
                got = 0
                while chunk := body.read(1 << 20):
                    got += len(chunk)
                dt = time.perf_counter() - t
                assert got == size, (got, size)
                results[f"get {name}"].append(size / dt / (1 << 20))
            for name, c in (("direct", direct), ("proxy", via)):
                t = time.perf_counter()
                c.put_object(Bucket=bucket, Key=f"bench/put-{name}", Body=_Zeros(size, block), ContentLength=size)
                dt = time.perf_counter() - t
                results[f"put {name}"].append(size / dt / (1 << 20))
    finally:
        for k in (key, "bench/put-direct", "bench/put-proxy"):
            try:
                direct.delete_object(Bucket=bucket, Key=k)
            except Exception:
                pass
        if made:
            try:
                direct.delete_bucket(Bucket=bucket)
            except Exception:
                pass
        proxy.stop()
    print(f"object {args.size_mib} MiB, {args.rounds} rounds, single stream, MiB/s (median, all):")
    for k, v in results.items():
        print(f"  {k:11s} {statistics.median(v):8.0f}   {' '.join(f'{x:.0f}' for x in v)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
