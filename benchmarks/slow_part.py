#!/usr/bin/env python3
"""The slow-part experiment: a large upload (and download) where a fraction
of part requests get their first response byte seconds late, with the
slow-part timeout DYNAMIC vs OFF vs FIXED, and the no-fault throughput as the
reference. Faults come from tests/faultproxy in front of the server, with
"keyed" decisions, so every run and every mode meets the same delayed
attempts. Every transfer runs on one client, as an application's would: a
DYNAMIC transfer starts from what the earlier DYNAMIC transfers learned
(docs/reliability.md); S3X_FBT_CARRY=off in the environment makes each learn
on its own, as a client's first transfer does.

    benchmarks/slow_part.py [--size 1GiB] [--part-size 5MiB] [--concurrency 8]
                            [--fraction 0.01] [--delay 2-5] [--fixed-ms 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import benchlib  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--part-size", default="5MiB")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--fraction", type=float, default=0.01, help="share of part attempts delayed")
    ap.add_argument("--delay", default="2-5", help="seconds, or lo-hi")
    ap.add_argument("--fixed-ms", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    size, part = benchlib.parse_size(a.size), benchlib.parse_size(a.part_size)
    build = benchlib.build_dir(a.build)
    sys.path.insert(0, os.path.join(build, "python"))
    import s3xfer

    env = benchlib.server_env()
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    direct = s3xfer.Client()
    bucket = "s3xfer-slow-part-bench"  # fixed: keyed fault decisions depend on the path
    try:
        direct.create_bucket(bucket)
    except s3xfer.ClientError:
        pass
    path = os.path.join(benchlib.data_dir(), f"slowpart-{size}.bin")
    if not os.path.exists(path) or os.path.getsize(path) != size:
        with open(path, "wb") as f:
            left = size
            while left:
                n = min(left, 64 << 20)
                f.write(os.urandom(n))
                left -= n
    direct.upload_file(path, bucket, "down", config=s3xfer.TransferConfig(part_size=part))

    proxy = FaultProxy.from_url(env["AWS_ENDPOINT_URL"], seed=11, decisions="keyed")
    proxy.start()
    client = s3xfer.Client(endpoint_url=proxy.url)
    modes = [("no faults (reference)", "off", False), ("OFF", "off", True),
             (f"FIXED {a.fixed_ms} ms", a.fixed_ms, True), ("DYNAMIC", "dynamic", True)]
    results = {(d, m[0]): [] for d in ("upload", "download") for m in modes}
    extra = {}
    out = os.path.join(benchlib.data_dir(), "slowpart.out")
    for run in range(a.runs):
        for direction in ("upload", "download"):
            kind = "upload_part" if direction == "upload" else "ranged_get"
            for label, knob, faults in modes:
                proxy.set_rules([f"delay_first_byte:p={a.fraction},kind={kind},delay={a.delay}"] if faults else [])
                proxy.reset_stats()
                cfg = s3xfer.TransferConfig(part_size=part, concurrency=a.concurrency, slow_part_timeout=knob,
                                            max_attempts=10)
                t = time.monotonic()
                if direction == "upload":
                    r = client.upload_file(path, bucket, "up", config=cfg)
                else:
                    r = client.download_file(bucket, "down", out, config=cfg)
                secs = time.monotonic() - t
                results[(direction, label)].append(size / secs / (1 << 20))
                delayed = proxy.stats()["faults"].get("delay_first_byte", 0)
                extra.setdefault((direction, label), []).append((delayed, r.retries_first_byte,
                                                                 r.slow_part_timeout_ms))
                benchlib.log(f"run {run + 1} {direction:8} {label:22} {size / secs / (1 << 20):7.1f} MiB/s "
                             f"delayed={delayed} first-byte retries={r.retries_first_byte} "
                             f"timeout at end={r.slow_part_timeout_ms} ms")
    proxy.stop()
    if os.path.exists(out):
        os.unlink(out)

    rows = []
    for direction in ("upload", "download"):
        ref = statistics.median(results[(direction, modes[0][0])])
        off = statistics.median(results[(direction, "OFF")])
        for label, _, _ in modes:
            v = results[(direction, label)]
            s = benchlib.summarize(v)
            ex = extra[(direction, label)]
            rows.append([direction, label, f"{s['median']:.1f}", f"{s['min']:.1f}", f"{s['max']:.1f}",
                         f"{s['median'] / ref:.2f}", f"{s['median'] / off:.2f}",
                         str(statistics.median(e[0] for e in ex)), str(statistics.median(e[1] for e in ex)),
                         str(ex[-1][2])])
    text = (f"slow-part experiment: {benchlib.human_size(size)}, part {benchlib.human_size(part)}, "
            f"concurrency {a.concurrency}, {a.fraction:.1%} of part attempts delayed {a.delay} s at first byte, "
            f"{a.runs} runs; MiB/s through the fault proxy\n\n" +
            benchlib.table(["direction", "slow-part timeout", "median MiB/s", "min", "max", "vs no faults",
                            "vs OFF", "delayed attempts", "first-byte retries", "timeout at end (ms)"], rows))
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({f"{k[0]}/{k[1]}": v for k, v in results.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
