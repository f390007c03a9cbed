#!/usr/bin/env python3
"""What checking the full-object checksum costs a file download of several ranges.

nginx (limit_servers.py; 127.0.0.1, stopped at exit) serves SIZE random bytes
under three keys: bkt/plain, whose HEAD carries no checksum, and bkt/crc32 and
bkt/crc32c, whose HEAD carries the object's x-amz-checksum-crc32 or
x-amz-checksum-crc32c. Ranged GETs carry none, as with S3. Each run is one
s3xfer `download_file` (Python; the transfer is the C engine). Wall seconds and
the process's CPU (user + sys, every thread) are taken inside the process,
around the call. The destination is a file in --dst-dir: /dev/shm by default;
give a directory on the local disk to measure what users do. Cases,
interleaved:

  off     validate_checksum=False: no HEAD, nothing hashed (what file downloads
          of several ranges did before they were checked)
  none    bkt/plain: the HEAD says there is no checksum. The writer hashes the
          first ranges with both CRCs until the HEAD answers, then nothing.
  crc32   bkt/crc32: every range hashed with CRC32 on the writer thread as its
          buffers are written, the ranges' CRCs combined before the rename
  crc32c  the same with CRC32C

Every download is compared with the source (sha256) after it is timed. The
CRC32C of the object is computed with awscrt (in the benchmarks' venv).

    benchmarks/checksum_cost.py [--size 1GiB] [--runs 5] [--part-size 8MiB] [--concurrency 8]
        [--dst-dir DIR] [--durable] [--out PREFIX]
"""

import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import limit_servers as LS  # noqa: E402

CASES = ["off", "none", "crc32", "crc32c"]
KEYS = {"off": "plain", "none": "plain", "crc32": "crc32", "crc32c": "crc32c"}

# One download in a fresh interpreter: the figures are the call's own.
DRIVER = r"""
import json, resource, sys, time
import s3xfer
from s3xfer import TransferConfig
ep, key, dst, part, conc, validate, durable = sys.argv[1:8]
c = s3xfer.Client(endpoint_url=ep, region="us-east-1", access_key="limit", secret_key="limit-secret",
                  addressing_style="path")
cfg = TransferConfig(part_size=int(part), concurrency=int(conc), validate_checksum=validate == "1",
                     durable=durable == "1")
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
res = c.download_file("bkt", key, dst, config=cfg)
t1, r1 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"secs": t1 - t0, "cpu": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime,
                  "parts": res.parts, "bytes": res.bytes}))
"""


def crc_b64(v):
    return base64.b64encode(v.to_bytes(4, "big")).decode()


def file_crcs(path):
    from awscrt import checksums
    c32 = c32c = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(8 << 20)
            if not b:
                break
            c32 = zlib.crc32(b, c32)
            c32c = checksums.crc32c(b, c32c)
    return crc_b64(c32), crc_b64(c32c)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--part-size", default="8MiB")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--dst-dir", default="/dev/shm", help="where the downloads land (default /dev/shm)")
    ap.add_argument("--durable", action="store_true", help="fsync before the rename (default: off, so the "
                    "figures are the transfer's and the hashing's, not the disk's)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--build", help="build directory (default build-bench)")
    ap.add_argument("--out", help="write PREFIX.md and PREFIX.json")
    a = ap.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c!r}; known: {', '.join(CASES)}")
    size, part = B.parse_size(a.size), B.parse_size(a.part_size)
    build = B.build_dir(a.build)
    missing = B.ensure_venv(["awscrt"])["awscrt"]
    if missing:
        sys.exit(f"awscrt (for the object's CRC32C): {missing}")
    LS.ensure_apt(["nginx"])
    LS.install_signal_handlers()
    d = tempfile.mkdtemp(prefix="s3x-csum-srv-", dir="/dev/shm")
    os.chmod(d, 0o755)  # nginx's workers run as another user and must read the object
    dst_dir = tempfile.mkdtemp(prefix="s3x-csum-dst-", dir=a.dst_dir)
    try:
        www = os.path.join(d, "www")
        os.makedirs(os.path.join(www, "bkt"))
        src = os.path.join(www, "bkt", "plain")
        os.replace(B.make_file(d, size)[0], src)
        os.chmod(src, 0o644)
        for k in ("crc32", "crc32c"):
            os.link(src, os.path.join(www, "bkt", k))
        want = B.sha256_file(src)
        c32, c32c = subprocess.run([B.venv_python(), "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                                    "import checksum_cost as C; print(*C.file_crcs(sys.argv[2]))",
                                    os.path.dirname(os.path.abspath(__file__)), src],
                                   check=True, capture_output=True, text=True).stdout.split()
        srv = LS.start_nginx(d, www, False, head_headers=[("/bkt/crc32", "x-amz-checksum-crc32", c32),
                                                          ("/bkt/crc32c", "x-amz-checksum-crc32c", c32c)])
        ep = f"http://127.0.0.1:{srv['http']}"
        env = B.driver_env(os.environ, build)
        B.log(f"checksum_cost: {B.human_size(size)} at {ep}, CRC32 {c32}, CRC32C {c32c}, into {dst_dir}")
        res = {c: [] for c in cases}
        load0 = os.getloadavg()[0]
        for i in range(a.runs + 1):  # round 0 is a warm-up, not counted
            for j in range(len(cases)):
                case = cases[(i + j) % len(cases)]
                dst = os.path.join(dst_dir, "out")
                if os.path.exists(dst):
                    os.unlink(dst)
                p = subprocess.run([B.venv_python(), "-c", DRIVER, ep, KEYS[case], dst, str(part),
                                    str(a.concurrency), "0" if case == "off" else "1", "1" if a.durable else "0"],
                                   env=env, capture_output=True, text=True, timeout=600)
                if p.returncode:
                    sys.exit(f"{case}: the download failed:\n{p.stderr[-2000:]}")
                r = json.loads(p.stdout.strip().splitlines()[-1])
                if B.sha256_file(dst) != want or r["bytes"] != size:
                    sys.exit(f"{case}: the file does not match the object")
                os.unlink(dst)
                if i:
                    res[case].append(r)
                B.log(f"  round {i}{' (warm-up)' if not i else ''} {case}: {r['secs']:.3f} s, "
                      f"{size / 2**20 / r['secs']:.0f} MiB/s, CPU {r['cpu'] / (size / 2**30):.2f} s/GiB")
        load1 = os.getloadavg()[0]
    finally:
        LS.stop_all()
        shutil.rmtree(d, True)
        shutil.rmtree(dst_dir, True)
    gib = size / 2**30
    base = statistics.median(r["cpu"] for r in res[cases[0]]) / gib if res.get(cases[0]) else None
    rows = []
    for c in cases:
        mibs = [size / 2**20 / r["secs"] for r in res[c]]
        cpu = [r["cpu"] / gib for r in res[c]]
        med_cpu = statistics.median(cpu)
        rows.append([c, f"{statistics.median(mibs):.0f} ({min(mibs):.0f}–{max(mibs):.0f})",
                     f"{med_cpu:.2f} ({min(cpu):.2f}–{max(cpu):.2f})",
                     f"{med_cpu - base:+.2f}" if base is not None and c != cases[0] else ""])
    head = (f"download_file of {B.human_size(size)} from nginx into {a.dst_dir} "
            f"(part size {B.human_size(part)}, concurrency {a.concurrency}, durable {int(a.durable)}); "
            f"medians (min–max) of {a.runs} interleaved runs after a warm-up round; load average "
            f"{load0:.1f} → {load1:.1f}; build {build}")
    table = B.table(["case", "MiB/s", "CPU s/GiB", f"CPU vs {cases[0]}"], rows)
    text = head + "\n\n" + table + "\n"
    print(text)
    if a.out:
        B.write_out(a.out, text, {"cases": cases, "runs": res, "size": size, "part_size": part,
                                  "concurrency": a.concurrency, "durable": a.durable, "dst_dir": a.dst_dir})


if __name__ == "__main__":
    main()
