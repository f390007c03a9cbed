"""python -m s3xfer: the command-line tool's cp, ls, mb, rb and rm in Python,
for machines without the native s3xfer binary on PATH."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Tuple

from . import Client, S3xferError, TransferConfig


def _size(text: str) -> int:
    units = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
             "mb": 1 << 20, "g": 1 << 30, "gib": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tib": 1 << 40}
    t = text.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num):]
    if unit not in units or not num:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (e.g. 8MiB)")
    return int(float(num) * units[unit])


def _s3url(text: str) -> Optional[Tuple[str, str]]:
    if not text.startswith("s3://"):
        return None
    rest = text[5:]
    bucket, _, key = rest.partition("/")
    return bucket, key


class _Bar:
    """A progress bar on stderr: tqdm when installed, else a plain one."""

    def __init__(self, total: Optional[int], desc: str):
        try:
            from tqdm import tqdm  # optional
            self._t = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, file=sys.stderr)
        except ImportError:
            self._t = None
        self.total, self.done = total, 0

    def __call__(self, n: int) -> None:
        self.done += n
        if self._t is not None:
            self._t.update(n)
        else:
            pct = f" {100 * self.done / self.total:5.1f}%" if self.total else ""
            sys.stderr.write(f"\r{self.done / (1 << 20):10.1f} MiB{pct}")
            sys.stderr.flush()

    def close(self) -> None:
        if self._t is not None:
            self._t.close()
        elif self.done:
            sys.stderr.write("\n")


def _config(a) -> TransferConfig:
    return TransferConfig(part_size=a.part_size, concurrency=a.concurrency, buffer_strategy=a.buffer_strategy,
                          pool=a.pool, checksum=a.checksum, checksum_location=a.checksum_location,
                          memory_limit=a.memory_limit, max_attempts=a.max_attempts,
                          slow_part_timeout=(int(a.slow_part_timeout) if a.slow_part_timeout and
                                             a.slow_part_timeout.isdigit() else a.slow_part_timeout),
                          size_hint=a.size_hint)


def _cp(c: Client, a) -> int:
    src, dst = _s3url(a.src), _s3url(a.dst)
    if src and dst:
        raise SystemExit("s3xfer: copying between two S3 locations is not supported yet")
    if not src and not dst:
        raise SystemExit("s3xfer: one of SRC and DST must be an s3:// URL")
    cfg = _config(a)
    show = a.progress if a.progress is not None else sys.stderr.isatty() and not a.quiet
    if dst:
        bucket, key = dst
        if not key:
            raise SystemExit("s3xfer: destination needs a key: s3://bucket/key")
        total = None if a.src == "-" else os.path.getsize(a.src) if os.path.isfile(a.src) else None
        bar = _Bar(total, "upload") if show else None
        try:
            if a.src == "-":
                r = c.upload_fileobj(sys.stdin.buffer, bucket, key, config=cfg, progress=bar)
            else:
                r = c.upload_file(a.src, bucket, key, config=cfg, progress=bar)
        finally:
            if bar:
                bar.close()
        if not a.quiet:
            print(f"upload: {a.src} to s3://{bucket}/{key} ({r.bytes} bytes in {r.seconds:.2f} s, "
                  f"{r.throughput_mib_s:.1f} MiB/s, {r.parts} parts, {r.requests} requests, {r.retries} retries)")
        return 0
    bucket, key = src
    if not key:
        raise SystemExit("s3xfer: source needs a key: s3://bucket/key")
    bar = _Bar(None, "download") if show else None
    try:
        if a.dst == "-":
            r = c.download_fileobj(bucket, key, sys.stdout.buffer, config=cfg, progress=bar)
            sys.stdout.buffer.flush()
        else:
            r = c.download_file(bucket, key, a.dst, config=cfg, progress=bar)
    finally:
        if bar:
            bar.close()
    if not a.quiet and a.dst != "-":
        print(f"download: s3://{bucket}/{key} to {a.dst} ({r.bytes} bytes in {r.seconds:.2f} s, "
              f"{r.throughput_mib_s:.1f} MiB/s, {r.parts} parts, {r.requests} requests, {r.retries} retries)")
    return 0


def _ls(c: Client, a) -> int:
    u = _s3url(a.url)
    if not u or not u[0]:
        raise SystemExit("s3xfer: ls needs s3://bucket[/prefix]")
    for e in c.list_objects(u[0], prefix=u[1], delimiter="/"):
        if "prefix" in e:
            print(f"{'':30} PRE {e['prefix']}")
        else:
            print(f"{e['last_modified'] or '':24} {e['size']:12d} {e['key']}")
    return 0


def _bucket_cmd(c: Client, a, make: bool) -> int:
    u = _s3url(a.url)
    if not u or not u[0] or u[1]:
        raise SystemExit("s3xfer: expected s3://bucket")
    (c.create_bucket if make else c.delete_bucket)(u[0])
    if not a.quiet:
        print(f"{'make_bucket' if make else 'remove_bucket'}: s3://{u[0]}")
    return 0


def _rm(c: Client, a) -> int:
    u = _s3url(a.url)
    if not u or not u[0] or not u[1]:
        raise SystemExit("s3xfer: rm needs s3://bucket/key")
    c.delete_object(*u)
    if not a.quiet:
        print(f"delete: s3://{u[0]}/{u[1]}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m s3xfer", description="Fast, memory-bounded S3 transfers.")
    p.add_argument("--endpoint-url")
    p.add_argument("--region")
    p.add_argument("--profile")
    p.add_argument("--ca-bundle")
    p.add_argument("--no-verify-ssl", action="store_true")
    p.add_argument("--addressing-style", default="auto", choices=["auto", "path", "virtual"])
    p.add_argument("-q", "--quiet", action="store_true")
    sub = p.add_subparsers(dest="cmd", required=True)
    cp = sub.add_parser("cp", help="copy a file (or - for stdin/stdout) to or from s3://bucket/key")
    cp.add_argument("src")
    cp.add_argument("dst")
    cp.add_argument("--part-size", type=_size)
    cp.add_argument("--concurrency", type=int)
    cp.add_argument("--buffer-strategy", choices=["auto", "buffered", "unbuffered"])
    cp.add_argument("--pool", choices=["bounded", "cache", "malloc"])
    cp.add_argument("--checksum", choices=["none", "crc32c", "crc32", "sha256", "md5"])
    cp.add_argument("--checksum-location", choices=["auto", "header", "trailer"])
    cp.add_argument("--memory-limit", type=_size)
    cp.add_argument("--size-hint", type=_size)
    cp.add_argument("--max-attempts", type=int)
    cp.add_argument("--slow-part-timeout", help="off, dynamic or milliseconds")
    cp.add_argument("--progress", dest="progress", action="store_true", default=None)
    cp.add_argument("--no-progress", dest="progress", action="store_false")
    for name, helptext in (("ls", "list objects"), ("mb", "make a bucket"), ("rb", "remove an empty bucket"),
                           ("rm", "remove an object")):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("url")
    a = p.parse_args(argv)
    verify = a.ca_bundle or (not a.no_verify_ssl)
    try:
        with Client(endpoint_url=a.endpoint_url, region=a.region, profile=a.profile,
                    addressing_style=a.addressing_style, verify=verify) as c:
            if a.cmd == "cp":
                return _cp(c, a)
            if a.cmd == "ls":
                return _ls(c, a)
            if a.cmd in ("mb", "rb"):
                return _bucket_cmd(c, a, a.cmd == "mb")
            return _rm(c, a)
    except S3xferError as e:
        print(f"s3xfer: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("s3xfer: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
