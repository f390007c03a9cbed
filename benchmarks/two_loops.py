#!/usr/bin/env python3
"""What a second receiving thread could be worth: one s3xfer process against
two at once, downloading from nginx into /dev/null, next to iperf3 -P 8.

s3xfer's engine runs every connection of a transfer on one event loop (one
thread). Whether spreading the receiving over two threads would raise a
download's throughput on this machine can be bounded without writing that
engine: two processes, each with its own loop and half the connections,
downloading the same object at the same time, are what two loops with no
shared state at all would do. Their combined MiB/s (both objects' bytes over
the wall time of the pair) against one process with all the connections is
the most a second loop could add here.

    benchmarks/two_loops.py [--size 1GiB] [--part-size 8MiB] [--concurrency 8]
        [--runs 5] [--tls off|on|both] [--build DIR]

Rows, interleaved in rounds (round i starts with row i mod n):
  one-loop    `s3xfer cp s3://bkt/obj -` with --concurrency C, into /dev/null
  two-loops   two such processes at once, C/2 connections each; MiB/s is
              2 x SIZE over the wall time from the start of both to the end
              of the later
  receive-threads-2  one process with --receive-threads 2: the same C
              connections spread over the transfer's thread and one more
  iperf3-P8   `iperf3 -c -P 8` for 3 s (plain rows only): the loopback limit
CPU s/GiB is the clients' user+sys (both processes for two-loops) per GiB
moved. nginx (limit_servers.py) serves SIZE random bytes from tmpfs on
127.0.0.1, plain and TLS 1.3 with a CA of the run's own; stopped at exit.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import limit_servers as LS  # noqa: E402


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_clients(cmds, env):
    """Starts every command at once; returns (wall seconds, CPU seconds of them all)."""
    cpu0 = children_cpu()
    t0 = time.monotonic()
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in cmds]
    errs = [p.communicate()[1] for p in procs]
    wall = time.monotonic() - t0
    for p, e in zip(procs, errs):
        if p.returncode:
            raise RuntimeError(f"{' '.join(p.args)}: exit {p.returncode}: {e.decode(errors='replace')[-400:]}")
    return wall, children_cpu() - cpu0


def iperf3(port, secs):
    cpu0 = children_cpu()
    r = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-P", "8", "-t", str(secs), "-J"],
                       stdout=subprocess.PIPE, text=True, check=True)
    import json
    j = json.loads(r.stdout)
    bps = j["end"]["sum_received"]["bits_per_second"]
    moved = j["end"]["sum_received"]["bytes"]
    return bps / 8 / 2**20, (children_cpu() - cpu0) / (moved / 2**30)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--part-size", default="8MiB")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tls", choices=["off", "on", "both"], default="both")
    ap.add_argument("--build", help="s3xfer build dir (default build-bench, built if missing)")
    a = ap.parse_args()
    if a.concurrency < 2 or a.concurrency % 2:
        ap.error("--concurrency must be even (two processes get half each)")
    build = B.build_dir(a.build)
    exe = os.path.join(build, "s3xfer")
    size = B.parse_size(a.size)
    LS.ensure_apt(["iperf3"])
    d, srv, certs, _ = LS.serve_object(size, "s3x-twoloops-")
    ip = LS.start_iperf3(d)
    env = dict(os.environ, AWS_ACCESS_KEY_ID="limit", AWS_SECRET_ACCESS_KEY="limit-secret",
               AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true", AWS_CA_BUNDLE=certs["ca"])
    commit = subprocess.run(["git", "-C", B.REPO, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    modes = {"off": ["plain"], "on": ["tls"], "both": ["plain", "tls"]}[a.tls]
    gib = size / 2**30
    print("# One event loop or two: s3xfer downloads into /dev/null\n")
    print(f"Build {build} (commit {commit}); nginx {srv['version']}; {a.size} object, {a.part_size} "
          f"parts, concurrency {a.concurrency} (two-loops: {a.concurrency // 2} per process); {a.runs} "
          f"interleaved runs after one warm-up; started {time.strftime('%Y-%m-%dT%H:%M:%S%z')}, load average "
          f"{os.getloadavg()[0]:.2f}.\n")
    for mode in modes:
        ep = f"http://127.0.0.1:{srv['http']}" if mode == "plain" else f"https://127.0.0.1:{srv['https']}"

        def cp(c, *extra):
            return [exe, "--endpoint-url", ep, *extra, "cp", "--part-size", a.part_size, "--concurrency", str(c),
                    "s3://bkt/obj", "-"]

        rows = {"one-loop": ([cp(a.concurrency)], 1), "two-loops": ([cp(a.concurrency // 2)] * 2, 2),
                "receive-threads-2": ([cp(a.concurrency, "--receive-threads", "2")], 1)}
        names = list(rows) + (["iperf3-P8"] if mode == "plain" else [])
        res = {n: [] for n in names}
        for rnd in range(a.runs + 1):
            for j in range(len(names)):
                n = names[(rnd + j) % len(names)]
                if n == "iperf3-P8":
                    mibs, cpu = iperf3(ip["port"], 3)
                else:
                    cmds, k = rows[n]
                    wall, cpu_s = run_clients(cmds, env)
                    mibs, cpu = k * size / 2**20 / wall, cpu_s / (k * gib)
                if rnd:
                    res[n].append((mibs, cpu))
                    B.log(f"bench: {mode} run {rnd} {n:10s} {mibs:6.0f} MiB/s  cpu {cpu:.2f} s/GiB")
        print(f"## {mode}\n\nload average at the end {os.getloadavg()[0]:.2f}\n")
        print("| row | MiB/s | CPU s/GiB | x one-loop (median of same-round ratios) |")
        print("| --- | ---: | ---: | ---: |")
        for n in names:
            m = [x[0] for x in res[n]]
            c = statistics.median(x[1] for x in res[n])
            ratio = statistics.median(x[0] / y[0] for x, y in zip(res[n], res["one-loop"]))
            print(f"| {n} | {statistics.median(m):.0f} ({min(m):.0f}–{max(m):.0f}) | {c:.2f} | {ratio:.2f} |")
        print()


if __name__ == "__main__":
    main()
