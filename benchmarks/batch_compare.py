#!/usr/bin/env python3
"""Many objects: one batch (TransferManager) vs one blocking call per object
in sequence vs a thread pool of blocking calls, through the Python package,
with boto3's TransferManager (a thread pool, its default config apart from
the same concurrency) beside them.

The thread pool runs `concurrency` blocking calls at once, each with
`concurrency` requests in flight (so up to concurrency^2 in all, as a user's
pool of default calls would); `batch-wide` runs the batch with that many.

Each cell is a fresh Python process moving N objects of S bytes up (from
files) or down (to files on the local disk, each renamed into place after a
sync): wall seconds, objects/s, MiB/s, CPU seconds per GiB and peak RSS of
that process (GNU time). Modes are interleaved within each run, runs
repeated; the table gives medians.

    benchmarks/batch_compare.py [--workloads 1000x256KiB,100x8MiB] [--concurrency 8] [--runs 3]
                                [--modes batch,sequential,threads,boto3] [--dest-dir /var/tmp/...]
"""

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

DRIVER = r"""
import concurrent.futures, json, os, sys, time
cfg = json.loads(sys.argv[1])
mode, op, bucket, files, dest, c = cfg["mode"], cfg["op"], cfg["bucket"], cfg["files"], cfg["dest"], cfg["c"]
keys = [f"o/{i:05d}" for i in range(len(files))]
outs = [os.path.join(dest, f"{i:05d}") for i in range(len(files))]
t0 = time.monotonic()
if mode == "boto3":
    import boto3
    from boto3.s3.transfer import TransferConfig as BCfg
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    from s3transfer.manager import TransferManager as BTM
    with BTM(s3, BCfg(max_concurrency=c)) as tm:
        futs = [tm.upload(f, bucket, k) if op == "upload" else tm.download(bucket, k, o)
                for f, k, o in zip(files, keys, outs)]
    [f.result() for f in futs]
else:
    import s3xfer
    client = s3xfer.Client()
    tc = s3xfer.TransferConfig(concurrency=c)
    one = (lambda f, k, o: client.upload_file(f, bucket, k, config=tc)) if op == "upload" else \
          (lambda f, k, o: client.download_file(bucket, k, o, config=tc))
    if mode in ("batch", "batch-wide"):
        # batch-wide: as many requests in flight as the thread pool can have
        # (c threads x c each), for a like-for-like look at the thread pool.
        if mode == "batch-wide":
            tc = s3xfer.TransferConfig(concurrency=c * c)
        with client.transfer_manager(tc) as tm:
            futs = [tm.upload(f, bucket, k) if op == "upload" else tm.download(bucket, k, o)
                    for f, k, o in zip(files, keys, outs)]
        [f.result() for f in futs]
    elif mode == "sequential":
        for f, k, o in zip(files, keys, outs):
            one(f, k, o)
    elif mode == "threads":
        with concurrent.futures.ThreadPoolExecutor(c) as ex:
            [f.result() for f in [ex.submit(one, f, k, o) for f, k, o in zip(files, keys, outs)]]
print(json.dumps({"seconds": time.monotonic() - t0}))
"""


def cleanup(env, build, bucket, delete_bucket=False):
    code = ("import s3xfer,sys; c=s3xfer.Client(); b=sys.argv[1]\n"
            "for o in list(c.iter_objects(b)): c.delete_object(b, o['key'])\n"
            "if sys.argv[2] == '1': c.delete_bucket(b)\n")
    B.measure([B.driver_python(), "-c", code, bucket, "1" if delete_bucket else "0"], env=B.driver_env(env, build))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="1000x256KiB,100x8MiB", help="NxSIZE,...")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--modes", default="batch,sequential,threads,boto3",
                    help="also: batch-wide (the batch at concurrency^2, the thread pool's most in flight)")
    ap.add_argument("--dest-dir", default="/var/tmp/s3xfer-bench-batch",
                    help="where downloads land (default on the local disk, not tmpfs)")
    B.add_common_args(ap, runs=3)
    a = ap.parse_args()
    ctx = B.Ctx(a)
    modes = a.modes.split(",")
    if "boto3" in modes:
        st = B.ensure_venv(["boto3"])
        if st.get("boto3"):
            B.log(f"boto3 skipped: {st['boto3']}")
            modes.remove("boto3")
    env = B.driver_env(ctx.env, ctx.build)
    rows, raw = [], []
    for wl in a.workloads.split(","):
        n, size = wl.split("x")
        n, size = int(n), B.parse_size(size)
        src_dir = os.path.join(ctx.ddir, f"batch-{n}x{size}")
        if not os.path.isdir(src_dir) or len(os.listdir(src_dir)) != n:
            shutil.rmtree(src_dir, ignore_errors=True)
            os.makedirs(src_dir)
            for i in range(n):
                with open(os.path.join(src_dir, f"{i:05d}"), "wb") as f:
                    f.write(os.urandom(size))
        files = [os.path.join(src_dir, f"{i:05d}") for i in range(n)]
        results = {(m, op): [] for m in modes for op in ("upload", "download")}
        for r in range(a.runs):
            for m in modes:
                bucket = B.new_bucket("s3xbb")
                ctx.admin.mb(bucket)
                for op in ("upload", "download"):
                    dest = os.path.join(a.dest_dir, f"{m}-{r}")
                    shutil.rmtree(dest, ignore_errors=True)
                    os.makedirs(dest)
                    os.sync()
                    arg = json.dumps({"mode": m, "op": op, "bucket": bucket, "files": files, "dest": dest,
                                      "c": a.concurrency})
                    meas = B.measure([B.driver_python(), "-c", DRIVER, arg], env=env, timeout=3600)
                    if meas["rc"]:
                        B.log(f"batch: {m} {op} {wl} failed: {meas['stderr'][-300:]}")
                        results[(m, op)].append(None)
                    else:
                        if op == "download":
                            got = sorted(os.listdir(dest))
                            assert len(got) == n and all(os.path.getsize(os.path.join(dest, g)) == size
                                                         for g in got), f"{m}: download incomplete"
                        results[(m, op)].append(meas)
                        B.log(f"batch: {wl} {m:10s} {op:8s} {meas['wall']:6.2f} s cpu {meas['cpu']:5.2f} s "
                              f"rss {meas['rss_mib']:5.0f} MiB")
                    shutil.rmtree(dest, ignore_errors=True)
                cleanup(ctx.env, ctx.build, bucket, delete_bucket=True)
        gib = n * size / B.GiB
        for op in ("upload", "download"):
            base = None
            for m in modes:
                ms = [x for x in results[(m, op)] if x]
                if not ms:
                    rows.append([wl, op, m, "failed", "", "", "", "", ""])
                    continue
                wall = B.summarize([x["wall"] for x in ms])["median"]
                cpu = B.summarize([x["cpu"] for x in ms])["median"]
                rss = B.summarize([x["rss_mib"] for x in ms])["median"]
                if m == "batch":
                    base = wall
                rows.append([wl, op, m, f"{wall:.2f}", f"{n / wall:.0f}", f"{n * size / B.MiB / wall:.0f}",
                             f"{cpu / gib:.2f}", f"{rss:.0f}", f"{wall / base:.2f}x" if base else ""])
                raw.append({"workload": wl, "op": op, "mode": m, "runs": [
                    {k: x[k] for k in ("wall", "cpu", "rss_mib")} for x in ms]})
    text = B.table(["workload", "op", "mode", "wall s", "objects/s", "MiB/s", "CPU s/GiB", "peak RSS MiB",
                    "time vs batch"], rows)
    print(text)
    print(f"\nmedians of {a.runs} interleaved runs, concurrency {a.concurrency}; "
          f"downloads to {a.dest_dir}; {B.machine_info(ctx.env)}")
    B.write_out(a.out, text, raw)


if __name__ == "__main__":
    main()
