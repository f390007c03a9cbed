#!/usr/bin/env python3
"""Bulk copies at every distance modulo 4096: glibc's memcpy against the
engine's s3x_bytes_copy (core/src/util/bytecopy.c), which copies in 2048-byte
pieces when the destination lies 1-31 bytes past the source modulo 4096.

Compiles benchmarks/copy_alias.c with core/src/util/bytecopy.c (cc -O2, into a
temp dir) and runs it: CHUNK bytes per copy from one source buffer into a
destination of TOTAL bytes, for distances 0..128, best of REPS passes. No
server. Prints a table (the distances where either copy is under half the
median of memcpy's rates, and a summary) and writes the JSON rows to --out.

    benchmarks/copy_alias.py [--chunk 16384] [--total 64MiB] [--reps 5] [--out FILE]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
UTIL = os.path.join(B.REPO, "core", "src", "util")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunk", type=B.parse_size, default=16384)
    ap.add_argument("--total", type=B.parse_size, default=64 * B.MiB)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", help="JSON results file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        exe = os.path.join(td, "copy_alias")
        subprocess.run(["cc", "-O2", "-std=c11", "-D_GNU_SOURCE", f"-I{UTIL}", "-o", exe,
                        os.path.join(HERE, "copy_alias.c"), os.path.join(UTIL, "bytecopy.c")], check=True)
        out = subprocess.run([exe, str(a.chunk), str(a.total), str(a.reps)], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
    res = json.loads(out)
    rows = res["rows"]
    med = statistics.median(r["memcpy"] for r in rows)
    slow = [r for r in rows if min(r["memcpy"], r["s3x_bytes_copy"]) < med / 2]
    print(f"{a.chunk}-byte copies into {a.total // B.MiB} MiB, best of {a.reps}; GB/s; "
          f"median memcpy over distances 0-128: {med:.2f}")
    print("| dst - src mod 4096 | memcpy | s3x_bytes_copy |")
    print("| ---: | ---: | ---: |")
    for r in slow:
        print(f"| {r['ahead']} | {r['memcpy']:.2f} | {r['s3x_bytes_copy']:.2f} |")
    inside = [r for r in rows if 1 <= r["ahead"] < 32]
    outside = [r for r in rows if not 1 <= r["ahead"] < 32]
    for name, part in (("1-31", inside), ("0 and 32-128", outside)):
        print(f"distances {name}: memcpy median {statistics.median(r['memcpy'] for r in part):.2f}, "
              f"s3x_bytes_copy median {statistics.median(r['s3x_bytes_copy'] for r in part):.2f}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
