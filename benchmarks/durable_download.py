#!/usr/bin/env python3
"""Downloads to the local disk with and without durability, against awscrt.

Python download_file of one object into a file on a real disk (not tmpfs):
s3xfer with durable=1 (the default: fsync before the rename, writeback
started while the ranges arrive), s3xfer with durable=0 (no fsync), and the
AWS CRT's S3Client (which does not fsync), interleaved. Before each timed run
the destination is removed and `sync` flushes what earlier runs left dirty,
so no run pays for another's pages; each download is sha256-checked after
it is timed.

    benchmarks/durable_download.py [--sizes 1GiB,4GiB] [--runs 5] [--dest-dir /var/tmp/s3xfer-bench-dest]
        [--runners s3xfer-durable,s3xfer-nofsync,awscrt] [--variant NAME=BUILD_DIR ...]

--variant adds a runner: s3xfer durable=1 from another build (e.g. one built
with a different writeback window), for A/B comparisons on the same run.
"""

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

RUNNERS = ["s3xfer-durable", "s3xfer-nofsync", "awscrt"]


def fs_type(path):
    r = subprocess.run(["stat", "-f", "-c", "%T", path], stdout=subprocess.PIPE, text=True)
    return r.stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1GiB,4GiB")
    ap.add_argument("--part-size", default="8MiB")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--runners", default=",".join(RUNNERS))
    ap.add_argument("--variant", action="append", default=[], help="NAME=BUILD_DIR: s3xfer durable=1 from BUILD_DIR")
    ap.add_argument("--dest-dir", default="/var/tmp/s3xfer-bench-dest",
                    help="where the downloads go: a directory on a disk, not tmpfs")
    ap.add_argument("--allow-tmpfs", action="store_true", help="accept a tmpfs --dest-dir (for a comparison)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    B.add_common_args(ap, runs=5)
    a = ap.parse_args()
    os.makedirs(a.dest_dir, exist_ok=True)
    fst = fs_type(a.dest_dir)
    if fst in ("tmpfs", "ramfs") and not a.allow_tmpfs:
        raise SystemExit(f"bench: {a.dest_dir} is {fst}; pick a directory on a disk with --dest-dir")
    sizes = [B.parse_size(s) for s in a.sizes.split(",")]
    part, conc = B.parse_size(a.part_size), a.concurrency
    ctx = B.Ctx(a)
    runners = [r for r in a.runners.split(",") if r]
    builds = {r: ctx.build for r in runners}
    for v in a.variant:
        name, path = v.split("=", 1)
        runners.append(name)
        builds[name] = os.path.abspath(path)
    skipped = {}
    if "awscrt" in runners:
        why = B.ensure_venv(["awscrt"]).get("awscrt")
        if why:
            skipped["awscrt"] = why
            runners.remove("awscrt")

    def one(runner, bucket, dest):
        args = ["--bucket", bucket, "--key", "obj", "--file", dest, "--part-size", str(part),
                "--concurrency", str(conc)]
        if runner == "awscrt":
            return B.run_driver(ctx.env, ctx.build, ["awscrt", "download", *args])
        durable = "0" if runner == "s3xfer-nofsync" else "1"
        return B.run_driver(ctx.env, builds[runner], ["s3xfer-py", "download", *args, "--durable", durable])

    runs = {(s, r): [] for s in sizes for r in runners}
    failures = []
    for size in sizes:
        src, sha = B.make_file(ctx.ddir, size)
        bucket = B.new_bucket("s3xdur")
        ctx.admin.mb(bucket)
        try:
            ctx.admin.put(src, bucket, "obj")
            for rnd in range(-a.warmup, a.runs):
                n = len(runners)
                order = [runners[(i + rnd) % n] for i in range(n)]
                for runner in order:
                    dest = os.path.join(a.dest_dir, f"dl-{runner}.bin")
                    if os.path.exists(dest):
                        os.unlink(dest)
                    subprocess.run(["sync"], check=True)
                    m = one(runner, bucket, dest)
                    ok = m["rc"] == 0 and os.path.exists(dest) and os.path.getsize(dest) == size
                    ok = ok and B.sha256_file(dest) == sha
                    res = (m.get("result") or {}).get("s3xfer") or {}
                    extra = ""
                    if res:
                        extra = (f" fsyncs {res.get('fsyncs')} writeback {res.get('writeback_calls')}"
                                 f" sync {res.get('sync_seconds', 0):.2f} s")
                    label = "warm-up" if rnd < 0 else f"run {rnd + 1}"
                    B.log(f"durable: {B.human_size(size)} {label} {runner:16s} {m['wall']:6.2f} s "
                          f"{size / B.MiB / m['wall']:7.1f} MiB/s cpu {m['cpu']:5.2f} s{extra}"
                          + ("" if ok else " FAIL"))
                    if os.path.exists(dest):
                        os.unlink(dest)
                    if rnd < 0:
                        continue
                    if ok:
                        m["sync_seconds"] = res.get("sync_seconds")
                        runs[(size, runner)].append(m)
                    else:
                        failures.append((B.human_size(size), runner, m["stderr"].strip()[-300:] or "bytes differ"))
        finally:
            ctx.admin.rb(bucket)

    rows = []
    for size in sizes:
        ref = runs.get((size, "awscrt")) or []
        ref_med = statistics.median([m["wall"] for m in ref]) if ref else None
        for runner in runners:
            ms = runs[(size, runner)]
            if not ms:
                rows.append([B.human_size(size), runner, "failed"] + [""] * 5)
                continue
            w = [m["wall"] for m in ms]
            syncs = [m["sync_seconds"] for m in ms if m.get("sync_seconds") is not None]
            rows.append([B.human_size(size), runner, f"{statistics.median(w):.2f} ({min(w):.2f}–{max(w):.2f})",
                         f"{size / B.MiB / statistics.median(w):.0f}",
                         f"{statistics.median([m['cpu'] for m in ms]) / (size / B.GiB):.2f}",
                         f"{statistics.median([m['rss_mib'] for m in ms]):.0f}",
                         f"{statistics.median(syncs):.2f}" if syncs else "–",
                         f"{ref_med / statistics.median(w):.2f}" if ref_med else ""])
    text = (f"Download to a file on {fst} ({a.dest_dir}), Python download_file, "
            f"{B.human_size(part)} parts, concurrency {conc}, "
            f"{a.runs} interleaved runs per cell (after {a.warmup} warm-up round), sync before each run.\n\n"
            + B.table(["size", "runner", "secs (min–max)", "MiB/s", "CPU s/GiB", "peak RSS MiB",
                       "sync s", "throughput vs awscrt"], rows))
    if skipped:
        text += "\n\nSkipped:\n" + "\n".join(f"- {k}: {v}" for k, v in skipped.items())
    if failures:
        text += "\n\nFailures:\n" + "\n".join(f"- {s} {r}: {e}" for s, r, e in failures)
    print(text)
    B.write_out(a.out, text, {"sizes": sizes, "part_size": part, "concurrency": conc,
                              "runs": {f"{B.human_size(s)}/{r}": v for (s, r), v in runs.items()},
                              "failures": failures, "machine": B.machine_info(ctx.env)})
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
