#!/usr/bin/env python3
"""Copies into memory that is out of the cache: glibc's memcpy against the
engine's s3x_bytes_copy_to (core/src/util/bytecopy.c), which writes whole
cache lines with non-temporal stores into regions of 4 MiB or more (x86-64).

Compiles benchmarks/copy_cold.c with core/src/util/bytecopy.c (cc -O2, into a
temp dir) and runs it for every CHUNK x TOTAL: CHUNK bytes per copy from a
256 KiB source (in the cache, as libcurl's buffer) into a destination of
TOTAL bytes written front to back, best of REPS passes. No server. A total
that fits the last-level cache shows what the stores cost when the bytes
would have stayed there; the engine uses them only for range buffers and
memory destinations, which are written whole before anyone reads them.

    benchmarks/copy_cold.py [--chunks 4096,16384,262144] [--totals 8MiB,72MiB,1GiB] [--reps 5] [--out FILE]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
UTIL = os.path.join(B.REPO, "core", "src", "util")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", default="4096,16384,262144")
    ap.add_argument("--totals", default="8MiB,72MiB,1GiB")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", help="JSON results file")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as td:
        exe = os.path.join(td, "copy_cold")
        subprocess.run(["cc", "-O2", "-std=c11", "-D_GNU_SOURCE", f"-I{UTIL}", "-o", exe,
                        os.path.join(HERE, "copy_cold.c"), os.path.join(UTIL, "bytecopy.c")], check=True)
        for total in (B.parse_size(t) for t in a.totals.split(",")):
            for chunk in (B.parse_size(c) for c in a.chunks.split(",")):
                out = subprocess.run([exe, str(chunk), str(total), str(a.reps)], check=True,
                                     stdout=subprocess.PIPE, text=True).stdout
                rows.append(json.loads(out))
    print(f"GB/s, best of {a.reps}; s3x_bytes_copy_to with the destination as its region")
    print("| destination | copy | memcpy | s3x_bytes_copy_to | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {B.human_size(r['total'])} | {r['chunk']} | "
              f"{r['memcpy']:.2f} | {r['s3x_bytes_copy_to']:.2f} | {r['s3x_bytes_copy_to'] / r['memcpy']:.2f} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
