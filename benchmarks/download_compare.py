#!/usr/bin/env python3
"""Parallel ranged GETs vs one GET stream, and download throughput across
concurrency x part size, with peak RSS. s3xfer only: each download is a fresh
`s3xfer cp` process into a file (sha256-checked), runs interleaved.

The single stream is concurrency 1 with part size 5 GiB: the first range (the
probe) asks for the whole object, so it is one GET.

    benchmarks/download_compare.py [--size 1GiB] [--concurrency 1,4,8,16,64] [--part-sizes 5MiB,8MiB,32MiB,128MiB]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--concurrency", default="1,4,8,16,64")
    ap.add_argument("--part-sizes", default="5MiB,8MiB,32MiB,128MiB")
    B.add_common_args(ap)
    a = ap.parse_args()
    size = B.parse_size(a.size)
    ctx = B.Ctx(a)
    src, sha = B.make_file(ctx.ddir, size)
    cells = [("single GET stream", 1, 5 * B.GiB)]
    cells += [("ranged", int(c), B.parse_size(p)) for c in a.concurrency.split(",") for p in a.part_sizes.split(",")]
    bucket = B.new_bucket("s3xd")
    ctx.admin.mb(bucket)
    runs = {cell: [] for cell in cells}
    failures = []
    dest = os.path.join(ctx.ddir, "dlcmp.bin")
    try:
        ctx.admin.put(src, bucket, "obj")
        for r in range(a.runs):
            for cell in cells:
                _, c, p = cell
                m = B.cli_cp(ctx, f"s3://{bucket}/obj", dest, {"part_size": p, "concurrency": c})
                ok = m["rc"] == 0 and os.path.exists(dest) and B.sha256_file(dest) == sha
                if os.path.exists(dest):
                    os.unlink(dest)
                B.log(f"download: run {r + 1} {cell[0]:17s} c={c:3d} p={B.human_size(p):6s} {m['wall']:6.2f} s "
                      f"{size / B.MiB / m['wall']:7.1f} MiB/s rss {m['rss_mib']:5.0f} MiB" + ("" if ok else " FAIL"))
                if ok:
                    runs[cell].append(m)
                else:
                    failures.append((cell, m["stderr"].strip()[-300:] or "sha256 mismatch"))
    finally:
        ctx.admin.rb(bucket)
    base = runs[cells[0]]
    base_med = statistics.median([m["wall"] for m in base]) if base else None
    rows = []
    for cell in cells:
        ms = runs[cell]
        if not ms:
            rows.append([cell[0], str(cell[1]), B.human_size(cell[2]), "failed"] + [""] * 5)
            continue
        w = [m["wall"] for m in ms]
        tp = [size / B.MiB / x for x in w]
        rows.append([cell[0], str(cell[1]), B.human_size(cell[2]),
                     f"{statistics.median(w):.2f} ({min(w):.2f}–{max(w):.2f})", f"{statistics.median(tp):.0f}",
                     f"{statistics.median([m['cpu'] for m in ms]) / (size / B.GiB):.2f}",
                     f"{statistics.median([m['rss_mib'] for m in ms]):.0f}",
                     f"{base_med / statistics.median(w):.2f}" if base_med else ""])
    text = (f"Download: {B.human_size(size)} object to a file, s3xfer CLI, {a.runs} runs per cell, interleaved.\n\n"
            + B.table(["mode", "C", "P", "secs (min–max)", "MiB/s", "CPU s/GiB", "peak RSS MiB",
                       "speed-up vs single GET"], rows))
    if failures:
        text += "\n\nFailures:\n" + "\n".join(f"- {k}: {e}" for k, e in failures)
    print(text)
    B.write_out(a.out, text, {"size": size, "runs": {f"{k[0]}/{k[1]}/{k[2]}": v for k, v in runs.items()},
                              "failures": [[list(k), e] for k, e in failures], "machine": B.machine_info(ctx.env)})
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
