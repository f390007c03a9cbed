#!/usr/bin/env python3
"""Part-buffer pools side by side: MALLOC (one buffer per part), CACHE
(unbounded free list) and BOUNDED (at most concurrency+1 buffers), uploading
one file with BUFFERED part readers at several concurrencies. The aws-sdk-go
sync.Pool-vs-custom-pool benchmark, for s3xfer.

Each upload is a fresh Python driver process (the pool counters come from the
TransferResult): time/op, bytes allocated/op (pool_bytes_allocated),
allocations/op (pool_allocations), peak buffer bytes (peak_buffer_bytes) and
the process's peak RSS. For BOUNDED the expected ceiling is
(min(concurrency, parts) + 1) x part size; the table shows expected vs measured.

    benchmarks/pool_compare.py [--size 512MiB] [--part-size 5MiB] [--concurrency 1,4,16,64] [--runs 3]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

POOLS = ("malloc", "cache", "bounded")


def fmt_bytes(n):
    return f"{n / B.MiB:.1f}MiB" if n < 10 * B.GiB else f"{n / B.GiB:.2f}GiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="512MiB")
    ap.add_argument("--part-size", default="5MiB")
    ap.add_argument("--concurrency", default="1,4,16,64")
    B.add_common_args(ap)
    a = ap.parse_args()
    size, ps = B.parse_size(a.size), B.parse_size(a.part_size)
    concs = [int(x) for x in a.concurrency.split(",")]
    ctx = B.Ctx(a)
    src, _ = B.make_file(ctx.ddir, size)
    nparts = -(-size // ps)
    runs = {(p, c): [] for p in POOLS for c in concs}
    failures = []
    for r in range(a.runs):
        for c in concs:
            for p in POOLS:
                bucket = B.new_bucket("s3xp")
                ctx.admin.mb(bucket)
                knobs = {"part_size": ps, "concurrency": c, "buffer_strategy": "buffered", "pool": p}
                try:
                    m = B.py_transfer(ctx, "upload", bucket, "obj", src, knobs)
                    got = ctx.admin.ls(bucket).get("obj")
                finally:
                    ctx.admin.rb(bucket)
                res = (m.get("result") or {}).get("s3xfer")
                if m["rc"] or not res or got != size:
                    failures.append(((p, c), f"rc {m['rc']} size {got}: {m['stderr'].strip()[-300:]}"))
                    B.log(f"pool: FAIL {p} c={c}: {failures[-1][1]}")
                    continue
                B.log(f"pool: run {r + 1} {p:7s} c={c:3d} {m['result']['seconds']:6.2f} s "
                      f"allocs {res['pool_allocations']:5d} alloc {fmt_bytes(res['pool_bytes_allocated'])} "
                      f"peak {fmt_bytes(res['peak_buffer_bytes'])} rss {m['rss_mib']:.0f} MiB")
                runs[(p, c)].append(m)
    name = lambda p, c: f"Pools/{p}/{c}_Concurrency"  # noqa: E731
    sections = []
    for title, get, show in (
            ("time/op", lambda m: m["result"]["seconds"], lambda v: f"{v * 1000:.0f}ms"),
            ("alloc/op", lambda m: m["result"]["s3xfer"]["pool_bytes_allocated"], fmt_bytes),
            ("allocs/op", lambda m: m["result"]["s3xfer"]["pool_allocations"], lambda v: f"{v:.0f}"),
            ("peak buffers", lambda m: m["result"]["s3xfer"]["peak_buffer_bytes"], fmt_bytes),
            ("peak RSS", lambda m: m["rss_mib"] * B.MiB, fmt_bytes)):
        rows = []
        for p in POOLS:
            for c in concs:
                v = [get(m) for m in runs[(p, c)]]
                rows.append([name(p, c), f"{show(statistics.median(v))} ±{B.rsd(v):.0f}%" if v else "failed"])
        sections.append(B.table(["name", title], rows))
    rows = []
    for c in concs:
        expect = (min(c, nparts) + 1) * ps
        got = [m["result"]["s3xfer"]["peak_buffer_bytes"] for m in runs[("bounded", c)]]
        rows.append([f"{c}", fmt_bytes(expect), fmt_bytes(max(got)) if got else "failed",
                     ("PASS" if max(got) <= expect else "FAIL") if got else "FAIL"])
    sections.append("Bounded pool: expected ceiling (min(C, parts)+1) x part size vs measured peak buffer bytes "
                    "(max over runs)\n\n" + B.table(["concurrency", "expected", "measured", ""], rows))
    text = (f"Pool comparison: {B.human_size(size)} file, {B.human_size(ps)} parts ({nparts} parts), BUFFERED, "
            f"s3xfer Python driver, {a.runs} runs per cell (median ±max deviation). RSS includes the "
            "interpreter.\n\n" + "\n\n".join(sections))
    if failures:
        text += "\n\nFailures:\n" + "\n".join(f"- {k}: {e}" for k, e in failures)
    print(text)
    B.write_out(a.out, text, {"size": size, "part_size": ps, "runs": {f"{p}/{c}": v for (p, c), v in runs.items()},
                              "failures": [[list(k), e] for k, e in failures], "machine": B.machine_info(ctx.env)})
    bad = failures or any(r[-1] == "FAIL" for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
