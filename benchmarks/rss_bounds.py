#!/usr/bin/env python3
"""Peak RSS of a whole process against the memory bounds s3xfer promises.
Each row is a fresh `s3xfer cp` process (--client py: a Python driver
process) moving a 1 GiB file; its ru_maxrss is compared with the bound:

  upload   BUFFERED + BOUNDED pool   (C+1) x P + 32 MiB
  upload   UNBUFFERED                64 MiB, whatever P
  download to a file                 64 MiB + C x P
  download to a slow stream consumer with --memory-limit M
                                     M + 32 MiB (the consumer reads stdout at
                                     --slow-rate MiB/s; py: an in-process sink)

Prints measured vs bound and PASS/FAIL per row; exits 1 on any FAIL.

    benchmarks/rss_bounds.py [--size 1GiB] [--cells 4x8MiB,16x8MiB,8x32MiB,64x5MiB] [--slow-rate 128]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

CONST = 32 * B.MiB


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--cells", default="4x8MiB,16x8MiB,8x32MiB,64x5MiB", help="CONCURRENCYxPARTSIZE,...")
    ap.add_argument("--memory-limits", default="32MiB,64MiB", help="for the slow-stream download rows")
    ap.add_argument("--slow-rate", type=float, default=128.0, help="slow consumer MiB/s")
    ap.add_argument("--client", choices=["cli", "py"], default="cli")
    B.add_common_args(ap, runs=1)
    a = ap.parse_args()
    size = B.parse_size(a.size)
    cells = [(int(c), B.parse_size(p)) for c, p in (x.split("x") for x in a.cells.split(","))]
    ctx = B.Ctx(a)
    src, sha = B.make_file(ctx.ddir, size)
    bucket = B.new_bucket("s3xr")
    ctx.admin.mb(bucket)
    rows, raw = [], []

    def record(what, c, p, m, bound, ok_extra=None):
        err = m["stderr"].strip()[-200:] if m["rc"] else ok_extra
        rss = m["rss_mib"] * B.MiB
        verdict = "PASS" if not err and rss <= bound else "FAIL"
        rows.append([what, str(c), B.human_size(p), f"{rss / B.MiB:.0f}", f"{bound / B.MiB:.0f}", verdict,
                     err or ""])
        raw.append({"what": what, "c": c, "p": p, "rss": rss, "bound": bound, "verdict": verdict, "error": err,
                    "wall": m["wall"], "cpu": m["cpu"]})
        B.log(f"rss: {what:34s} c={c:3d} p={B.human_size(p):6s} {rss / B.MiB:6.0f} MiB <= {bound / B.MiB:6.0f}? "
              f"{verdict} {err or ''}")

    def up(c, p, strategy):
        knobs = {"part_size": p, "concurrency": c, "buffer_strategy": strategy, "pool": "bounded",
                 "multipart_threshold": p}
        if a.client == "py":
            return B.py_transfer(ctx, "upload", bucket, "up", src, knobs)
        return B.cli_cp(ctx, src, f"s3://{bucket}/up", knobs)

    def check_up():
        got = ctx.admin.ls(bucket).get("up")
        return None if got == size else f"object size {got} != {size}"

    try:
        for _ in range(a.runs):
            for c, p in cells:
                record("upload buffered+bounded", c, p, up(c, p, "buffered"), (c + 1) * p + CONST, check_up())
                record("upload unbuffered", c, p, up(c, p, "unbuffered"), 64 * B.MiB, check_up())
            ctx.admin.put(src, bucket, "dl")
            for c, p in cells:
                dest = os.path.join(ctx.ddir, "rss-dl.bin")
                knobs = {"part_size": p, "concurrency": c}
                if a.client == "py":
                    m = B.py_transfer(ctx, "download", bucket, "dl", dest, knobs)
                else:
                    m = B.cli_cp(ctx, f"s3://{bucket}/dl", dest, knobs)
                bad = None if os.path.exists(dest) and B.sha256_file(dest) == sha else "sha256 mismatch"
                if os.path.exists(dest):
                    os.unlink(dest)
                record("download to file", c, p, m, 64 * B.MiB + c * p, bad)
            for lim in (B.parse_size(x) for x in a.memory_limits.split(",")):
                c, p = 16, 8 * B.MiB
                knobs = {"part_size": p, "concurrency": c, "memory_limit": lim}
                if a.client == "py":
                    m = B.py_transfer(ctx, "download", bucket, "dl", "-", knobs, sink=f"slow:{a.slow_rate}")
                    bad = None if m["rc"] == 0 and m["result"] and m["result"]["bytes"] == size else "short download"
                else:
                    m = B.cli_cp(ctx, f"s3://{bucket}/dl", "-", knobs, hash_out=True,
                                 out_rate=a.slow_rate * B.MiB)
                    bad = None if m.get("out_sha256") == sha else "sha256 mismatch"
                record(f"download to slow stream, limit {B.human_size(lim)}", c, p, m, lim + CONST, bad)
    finally:
        ctx.admin.rb(bucket)
    text = (f"Peak RSS vs bounds: {B.human_size(size)}, s3xfer {'CLI' if a.client == 'cli' else 'Python driver'} "
            f"(fresh process per row, ru_maxrss); slow consumer {a.slow_rate:g} MiB/s.\n\n"
            + B.table(["transfer", "C", "P", "peak RSS MiB", "bound MiB", "", "error"], rows))
    print(text)
    B.write_out(a.out, text, {"rows": raw, "machine": B.machine_info(ctx.env)})
    return 1 if any(r[5] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
