#!/usr/bin/env python3
"""The slow-part timeout with no faults at all: OFF against DYNAMIC (and any
fixed timeouts given) on the bare server, each transfer a fresh `s3xfer cp`
process, as a command-line user's transfer is (DYNAMIC starts from nothing:
no carry from earlier transfers). A timeout can only cost here: every
attempt it cuts is a healthy one sent again.

No fault proxy: the server named by AWS_ENDPOINT_URL, else a local SeaweedFS
(benchlib.server_env). Rounds are interleaved (round i starts with mode i mod
n); in each round every mode uploads the file and downloads the object once.
Every download is checked against the source's sha256 after it is timed.
Per mode and direction: median wall seconds, the median same-round ratio to
OFF, client CPU s (user+sys) median, and the attempts cut
(retries_first_byte) and requests summed over the runs, from the CLI's
--json result.

    benchmarks/fbt_bare.py [--size 256MiB] [--part-size 8MiB] [--concurrency 8]
        [--runs 16] [--modes off,dynamic] [--env-variant NAME=VALUE ...] [--dst-dir DIR]
        [--out PREFIX|DIR] [--quick]

--env-variant NAME=VALUE (repeatable): one more mode, "dynamic NAME=VALUE",
DYNAMIC with that benchmark-only knob in the environment (one of
slow_part_grid.ENV_KNOBS, core/src/xfer/retry.h), for A/B runs.

--quick (benchmarks/run's default suite): 3 rounds unless --runs says.
--out: PREFIX.json and PREFIX.md, or results.json and results.md in DIR
when DIR is a directory.
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402


def one(ctx, mode, direction):
    env = ctx.env
    if mode.startswith("dynamic "):  # an --env-variant
        name, _, value = mode[len("dynamic "):].partition("=")
        env = dict(env, **{name: value})
    if direction == "upload":
        src, dst = ctx.path, f"s3://{ctx.bucket}/up-{mode.split(' ')[0]}"
    else:
        src, dst = f"s3://{ctx.bucket}/obj", ctx.dl
        if os.path.exists(dst):
            os.unlink(dst)
    cmd = [ctx.cli, "cp", "--json", "--no-progress", "--slow-part-timeout", mode.split(" ")[0], "--part-size",
           ctx.part, "--concurrency", str(ctx.conc), src, dst]
    m = B.measure(cmd, env=env)
    res = {}
    for line in m["stdout"].splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("type") == "result":
            res = j.get("result") or {}
    if m["rc"] != 0 or not res:
        raise SystemExit(f"bench: {mode} {direction} failed (exit {m['rc']}): {m['stderr'].strip()[-300:]}")
    if direction == "download" and B.sha256_file(dst) != ctx.sha:
        raise SystemExit(f"bench: {mode} download differs from the source")
    return {"wall": m["wall"], "cpu": m["cpu"], "cut": res.get("retries_first_byte", 0),
            "retries": res.get("retries", 0), "requests": res.get("requests", 0),
            "timeout_ms": res.get("slow_part_timeout_ms")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--part-size", default="8MiB")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--runs", type=int, default=None, help="rounds (default 16; --quick 3)")
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--clients", help=argparse.SUPPRESS)  # benchmarks/run passes it: s3xfer only here
    ap.add_argument("--modes", default="off,dynamic", help="off, dynamic, or milliseconds, comma-separated")
    ap.add_argument("--env-variant", action="append", default=[], metavar="NAME=VALUE",
                    help="add DYNAMIC with NAME=VALUE in the environment (repeatable)")
    ap.add_argument("--dst-dir", help="where downloads land (default: the data dir, /dev/shm when there)")
    ap.add_argument("--build")
    ap.add_argument("--out", help="write PREFIX.json and PREFIX.md")
    a = ap.parse_args()
    if a.runs is None:
        a.runs = 3 if a.quick else 16
    ctx = B.Ctx.__new__(B.Ctx)
    ctx.cli = os.path.join(B.build_dir(a.build), "s3xfer")
    ctx.env = B.server_env()
    ctx.part, ctx.conc = a.part_size, a.concurrency
    size = B.parse_size(a.size)
    ctx.path, ctx.sha = B.make_file(B.data_dir(), size)
    ctx.dl = os.path.join(a.dst_dir or B.data_dir(), "fbt-bare-dl.bin")
    ctx.bucket = B.new_bucket("fbtbare")
    admin = B.Admin(ctx.env, ctx.cli)
    admin.mb(ctx.bucket)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    if "off" not in modes:
        modes.insert(0, "off")
    from slow_part_grid import ENV_KNOBS
    for v in a.env_variant:
        name, eq, _ = v.partition("=")
        if not eq or name not in ENV_KNOBS:
            ap.error(f"--env-variant {v}: NAME=VALUE with NAME one of {', '.join(ENV_KNOBS)}")
        modes.append(f"dynamic {v}")
    runs = {(m, d): [] for m in modes for d in ("upload", "download")}
    try:
        admin.put(ctx.path, ctx.bucket, "obj")
        for rnd in range(a.runs):
            k = rnd % len(modes)
            for mode in modes[k:] + modes[:k]:
                for d in ("upload", "download"):
                    x = one(ctx, mode, d)
                    x["round"] = rnd
                    runs[(mode, d)].append(x)
                    B.log(f"bench: round {rnd + 1} {d:8s} {mode:8s} {x['wall']:6.2f} s cpu {x['cpu']:5.2f} s "
                          f"cut {x['cut']} timeout {x['timeout_ms']} ms")
    finally:
        admin.rb(ctx.bucket)
        if os.path.exists(ctx.dl):
            os.unlink(ctx.dl)
    rows = []
    for d in ("upload", "download"):
        off = {x["round"]: x["wall"] for x in runs[("off", d)]}
        for mode in modes:
            rr = runs[(mode, d)]
            ratio = statistics.median(x["wall"] / off[x["round"]] for x in rr)
            rows.append([d, mode, f"{statistics.median(x['wall'] for x in rr):.3f}",
                         f"{min(x['wall'] for x in rr):.2f}–{max(x['wall'] for x in rr):.2f}", f"{ratio:.2f}",
                         f"{statistics.median(x['cpu'] for x in rr):.2f}", str(sum(x["cut"] for x in rr)),
                         str(sum(1 for x in rr if x["cut"])), str(sum(x["requests"] for x in rr))])
    head = (f"{a.runs} rounds, {B.human_size(size)}, {a.part_size} parts, concurrency {a.concurrency}, "
            f"a fresh `s3xfer cp` per transfer, no faults; server {B.server_version(ctx.env)}")
    md = head + "\n\n" + B.table(["direction", "mode", "wall s median", "min–max", "x OFF same round",
                                  "CPU s", "attempts cut", "runs with a cut", "requests"], rows)
    print(md)
    if a.out:
        if os.path.isdir(a.out):
            a.out = os.path.join(a.out, "results")
        with open(a.out + ".json", "w") as f:
            json.dump({"args": vars(a), "runs": {f"{m}/{d}": v for (m, d), v in runs.items()}}, f, indent=1)
        with open(a.out + ".md", "w") as f:
            f.write(md + "\n")


if __name__ == "__main__":
    main()
