#!/usr/bin/env python3
"""Buffered vs unbuffered part readers: the aws-sdk-go BufferStrategy matrix
(file size x concurrency {5, 100} x part size {5, 25, 100} MiB), scaled to
this machine, s3xfer only.

Every upload is a fresh `s3xfer cp` process (the C CLI; --client py uses the
Python package instead) into a fresh bucket; runs are interleaved (run 1 of
every cell, then run 2, ...). Prints a benchstat-like table: time/op of each
strategy, the delta of buffered against unbuffered with an exact Mann-Whitney
p-value ('~' when p > 0.05, as benchstat), and the peak RSS of each.

    benchmarks/upload_matrix.py [--size 1GiB] [--concurrency 5,100] [--part-sizes 5MiB,25MiB,100MiB] [--runs 3]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

STRATEGIES = ("unbuffered", "buffered")


def upload(ctx, a, src, conc, ps, strategy):
    bucket = B.new_bucket("s3xm")
    ctx.admin.mb(bucket)
    knobs = {"part_size": ps, "concurrency": conc, "buffer_strategy": strategy, "pool": "bounded",
             "multipart_threshold": ps, "unsigned_payload": a.unsigned_payload, "checksum": a.checksum}
    try:
        if a.client == "py":
            m = B.py_transfer(ctx, "upload", bucket, "obj", src, knobs)
        else:
            m = B.cli_cp(ctx, src, f"s3://{bucket}/obj", knobs)
        size = ctx.admin.ls(bucket).get("obj")
        if m["rc"] == 0 and size != a.size:
            m["rc"], m["stderr"] = -1, f"object size {size} != {a.size}"
    finally:
        ctx.admin.rb(bucket)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--concurrency", default="5,100")
    ap.add_argument("--part-sizes", default="5MiB,25MiB,100MiB")
    ap.add_argument("--client", choices=["cli", "py"], default="cli")
    ap.add_argument("--unsigned-payload", action="store_true", help="UNSIGNED-PAYLOAD (no SHA-256 of parts)")
    ap.add_argument("--checksum", help="none|crc32c|crc32|sha256|md5 (default: the library's, CRC32C)")
    B.add_common_args(ap)
    a = ap.parse_args()
    a.size = B.parse_size(a.size)
    concs = [int(x) for x in a.concurrency.split(",")]
    parts = [B.parse_size(x) for x in a.part_sizes.split(",")]
    ctx = B.Ctx(a)
    src, _ = B.make_file(ctx.ddir, a.size)
    cells = [(c, p) for c in concs for p in parts]
    runs = {(c, p, s): [] for c, p in cells for s in STRATEGIES}
    failures = []
    for r in range(a.runs):
        for c, p in cells:
            for s in STRATEGIES:
                m = upload(ctx, a, src, c, p, s)
                B.log(f"matrix: run {r + 1} c={c} p={B.human_size(p)} {s:10s} {m['wall']:6.2f} s "
                      f"rss {m['rss_mib']:6.0f} MiB" + (f" FAIL {m['stderr'].strip()[-200:]}" if m["rc"] else ""))
                if m["rc"]:
                    failures.append(((c, p, s), m["stderr"].strip()[-300:]))
                else:
                    runs[(c, p, s)].append(m)
    name = lambda c, p: f"Upload/{B.human_size(a.size)}_File/{c}_Concurrency/{B.human_size(p)}_PartSize"  # noqa: E731
    rows = []
    for c, p in cells:
        u, b = ([m["wall"] for m in runs[(c, p, s)]] for s in STRATEGIES)
        ur, br = ([m["rss_mib"] for m in runs[(c, p, s)]] for s in STRATEGIES)
        if not u or not b:
            rows.append([name(c, p), "failed"] + [""] * 6)
            continue
        mu, mb = statistics.median(u), statistics.median(b)
        pval = B.mann_whitney_p(u, b)
        delta = f"{100 * (mb - mu) / mu:+.2f}%" if pval <= 0.05 else "~"
        rows.append([name(c, p), f"{mu:.2f}s ±{B.rsd(u):.0f}%", f"{mb:.2f}s ±{B.rsd(b):.0f}%",
                     f"{100 * (mb - mu) / mu:+.2f}%", f"{delta} (p={pval:.3f} n={len(u)}+{len(b)})",
                     f"{statistics.median(ur):.0f}", f"{statistics.median(br):.0f}",
                     f"{(min(c, -(-a.size // p)) + 1) * p / B.MiB:.0f}"])
    text = (f"Upload matrix: {B.human_size(a.size)} file, s3xfer {'CLI' if a.client == 'cli' else 'Python'}, "
            f"bounded pool, checksum {a.checksum or 'default (CRC32C)'}, payload signing "
            f"{'UNSIGNED' if a.unsigned_payload else 'default (AUTO: unsigned when a checksum is sent)'}, "
            f"{a.runs} runs per cell, "
            "interleaved.\n\n"
            + B.table(["name", "unbuffered time/op", "buffered time/op", "delta", "benchstat delta",
                       "unbuffered RSS MiB", "buffered RSS MiB", "buffered bound (min(C,parts)+1)xP MiB"], rows))
    if failures:
        text += "\n\nFailures:\n" + "\n".join(f"- {k}: {e}" for k, e in failures)
    print(text)
    B.write_out(a.out, text, {"size": a.size, "runs": {f"{c}/{p}/{s}": v for (c, p, s), v in runs.items()},
                              "failures": [[list(k), e] for k, e in failures], "machine": B.machine_info(ctx.env)})
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
