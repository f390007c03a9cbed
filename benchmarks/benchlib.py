"""Shared helpers of the benchmark scripts: the server, the build, the peers'
venv, test files, measuring a child process, statistics and tables.

Standard library only; every measured transfer runs in a child process so that
its CPU time and peak RSS are its own (os.wait4 gives the child's rusage).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import threading
import sys
import time
import uuid

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
VENV = os.path.join(BENCH, ".venv")
MiB = 1 << 20
GiB = 1 << 30


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---- build ---------------------------------------------------------------------
def build_dir(path=None):
    """The build to benchmark: --build, else $S3X_BENCH_BUILD, else build-bench
    (a Release build of our own, configured and built here if missing)."""
    d = os.path.abspath(path or os.environ.get("S3X_BENCH_BUILD") or os.path.join(REPO, "build-bench"))
    ours = d == os.path.join(REPO, "build-bench")
    if not os.path.exists(os.path.join(d, "s3xfer")) or not os.path.isdir(os.path.join(d, "python", "s3xfer")):
        log(f"bench: building a Release build into {d}")
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(["cmake", "-S", REPO, "-B", d, *gen, "-DCMAKE_BUILD_TYPE=Release", "-DS3X_BUILD_PYTHON=ON",
                        "-DS3X_BUILD_TESTS=OFF", f"-DPython3_EXECUTABLE={sys.executable}"],
                       check=True, stdout=subprocess.DEVNULL)
        ours = True
    if ours:
        # Brought up to date on every use, so a benchmark never runs an older
        # library than the working tree (a no-op when nothing changed).
        subprocess.run(["cmake", "--build", d, "-j", str(os.cpu_count() or 2)], check=True, stdout=subprocess.DEVNULL)
    return d


# ---- server --------------------------------------------------------------------
def server_env():
    """AWS_* of the server: the environment's if AWS_ENDPOINT_URL is set, else a
    local SeaweedFS of our own (scripts/local-s3 in a state dir of its own,
    stopped at exit if we started it)."""
    env = dict(os.environ)
    if env.get("AWS_ENDPOINT_URL"):
        env.setdefault("AWS_REGION", env.get("AWS_DEFAULT_REGION", "us-east-1"))
        env.setdefault("AWS_DEFAULT_REGION", env["AWS_REGION"])
        return env
    sdir = env.get("S3X_BENCH_S3_DIR", "/tmp/s3xfer-bench-s3")
    port = env.get("S3X_BENCH_S3_PORT", "22333")
    senv = dict(env, S3X_LOCAL_S3_DIR=sdir, S3X_LOCAL_S3_PORT=port)
    script = os.path.join(REPO, "scripts", "local-s3")
    was_running = subprocess.run([script, "status"], env=senv, stdout=subprocess.DEVNULL).returncode == 0
    for attempt in range(3):  # a server stopped just before may still hold its ports for a moment
        r = subprocess.run([script, "start"], env=senv, stdout=subprocess.PIPE, text=True)
        if r.returncode == 0:
            break
        time.sleep(10)
    if r.returncode:
        raise SystemExit(f"bench: scripts/local-s3 start failed (state {sdir}, port {port}; see its message above). "
                         "Set S3X_BENCH_S3_PORT / S3X_BENCH_S3_DIR, or AWS_ENDPOINT_URL for a server of your own.")
    out = r.stdout
    for line in out.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
    if not was_running:
        atexit.register(lambda: subprocess.run([script, "stop"], env=senv, stdout=subprocess.DEVNULL))
    return env


def server_version(env):
    sdir = env.get("S3X_BENCH_S3_DIR", "/tmp/s3xfer-bench-s3")
    weed = os.path.join(sdir, "venv", "bin", "weed")
    if os.path.exists(weed):
        out = subprocess.run([weed, "version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout.strip()
        import re
        v = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", out + " ")
        return "SeaweedFS " + (v.group(1) if v else "?") + " on loopback"
    return "external: " + env.get("AWS_ENDPOINT_URL", "?")


# ---- the peers' venv ---------------------------------------------------------
def venv_python():
    return os.path.join(VENV, "bin", "python")


def ensure_venv(packages):
    """Installs each of `packages` into benchmarks/.venv on first use.
    Returns {package: None if installed, else the reason it is not}."""
    status = {}
    if not os.path.exists(venv_python()):
        r = subprocess.run([sys.executable, "-m", "venv", VENV], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if r.returncode:
            return {p: f"venv creation failed: {r.stdout.strip()[-200:]}" for p in packages}
    stamp_dir = os.path.join(VENV, "installed")
    os.makedirs(stamp_dir, exist_ok=True)
    for p in packages:
        stamp = os.path.join(stamp_dir, p)
        if os.path.exists(stamp):
            status[p] = None
            continue
        log(f"bench: pip install {p} into {VENV}")
        r = subprocess.run([venv_python(), "-m", "pip", "install", "-q", "--disable-pip-version-check", p],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            lines = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("WARNING")]
            status[p] = "pip install failed: " + (lines[-1] if lines else f"exit {r.returncode}")
        else:
            open(stamp, "w").close()
            status[p] = None
    return status


def driver_env(env, build):
    """Environment of a Python driver: the s3xfer package of `build` importable."""
    e = dict(env)
    e["PYTHONPATH"] = os.path.join(build, "python") + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def driver_python():
    return venv_python() if os.path.exists(venv_python()) else sys.executable


DRIVER = os.path.join(BENCH, "drivers.py")
TIME = shutil.which("time", path="/usr/bin:/bin")


# ---- files -------------------------------------------------------------------
def data_dir(path=None):
    """Where test files go: --data-dir, else /dev/shm (tmpfs) when it has room, else /tmp."""
    if path:
        d = path
    else:
        d = "/tmp/s3xfer-bench-data"
        try:
            st = os.statvfs("/dev/shm")
            if st.f_bavail * st.f_frsize > 8 * GiB:
                d = "/dev/shm/s3xfer-bench-data"
        except OSError:
            pass
    os.makedirs(d, exist_ok=True)
    return d


def make_file(ddir, size):
    """A file of `size` random bytes (kept for reuse) and its sha256."""
    path = os.path.join(ddir, f"src-{size}.bin")
    meta = path + ".sha256"
    if os.path.exists(path) and os.path.getsize(path) == size and os.path.exists(meta):
        return path, open(meta).read().strip()
    h = hashlib.sha256()
    with open(path + ".tmp", "wb") as f:
        left = size
        while left > 0:
            block = os.urandom(min(left, 4 * MiB))
            f.write(block)
            h.update(block)
            left -= len(block)
    os.replace(path + ".tmp", path)
    digest = h.hexdigest()
    with open(meta, "w") as f:
        f.write(digest)
    return path, digest


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(8 * MiB)
            if not b:
                return h.hexdigest()
            h.update(b)


# ---- measuring a child ------------------------------------------------------
def measure(cmd, env=None, feed=None, hash_out=False, timeout=1800, out_rate=None):
    """Runs cmd; returns wall seconds, user/sys CPU seconds and peak RSS (MiB)
    of that child alone (os.wait4), its exit code and its stderr tail.
    feed: a file whose bytes are written into the child's stdin (a pipe);
    hash_out: the child's stdout is counted and sha256-hashed here (the
    parent's work, not counted in the child's CPU); out_rate: read stdout at
    most this many bytes/s (a slow consumer)."""

    # ru_maxrss from wait4 is useless here: at exec the kernel folds the old
    # mm's high-water RSS into the child's, and with fork or vfork that is the
    # harness's own RSS. So a small C program (GNU time) forks the child and
    # reports the child's own rusage; wait4 is the fallback.
    tfile = None
    if TIME and not os.environ.get("S3X_BENCH_NO_TIME"):
        tfile = os.path.join("/tmp", f"s3xb-time-{uuid.uuid4().hex}")
        cmd = [TIME, "-o", tfile, "-f", "%U %S %M", *cmd]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    bufs = {}

    def drain_err():
        bufs["err"] = p.stderr.read()

    def drain_out():
        if not hash_out:
            bufs["out"] = p.stdout.read()
            return
        h, n, t0 = hashlib.sha256(), 0, time.monotonic()
        while True:
            b = p.stdout.read(1 * MiB if out_rate else 4 * MiB)
            if not b:
                break
            h.update(b)
            n += len(b)
            if out_rate:
                ahead = n / out_rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
        bufs["out"], bufs["sha256"], bufs["out_bytes"] = b"", h.hexdigest(), n

    def feed_in():
        try:
            with open(feed, "rb") as f:
                shutil.copyfileobj(f, p.stdin, 4 * MiB)
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                p.stdin.close()
            except OSError:
                pass
    threads = [threading.Thread(target=drain_err), threading.Thread(target=drain_out)]
    if feed:
        threads.append(threading.Thread(target=feed_in))
    for t in threads:
        t.start()
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.002)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in threads:
        t.join()
    user, sys_, rss_kib = ru.ru_utime, ru.ru_stime, ru.ru_maxrss
    if tfile:
        try:
            with open(tfile) as f:
                last = f.read().strip().splitlines()[-1].split()
            os.unlink(tfile)
            user, sys_, rss_kib = float(last[0]), float(last[1]), int(last[2])
        except (OSError, IndexError, ValueError):
            pass
    m = {
        "wall": wall, "user": user, "sys": sys_, "cpu": user + sys_,
        "rss_mib": rss_kib / 1024.0, "rc": p.returncode,
        "stdout": bufs.get("out", b"").decode(errors="replace"),
        "stderr": bufs.get("err", b"").decode(errors="replace")[-2000:],
    }
    if hash_out:
        m["out_sha256"], m["out_bytes"] = bufs.get("sha256"), bufs.get("out_bytes", 0)
    return m


def run_driver(env, build, args, timeout=1800, feed=None, hash_out=False):
    """Runs benchmarks/drivers.py with args in a fresh interpreter; merges the
    driver's JSON result (in-process figures) into the measurement as "result"."""
    res_path = os.path.join(data_dir(), f"drv-{uuid.uuid4().hex}.json")
    m = measure([driver_python(), DRIVER, *args, "--result", res_path], env=driver_env(env, build),
                timeout=timeout, feed=feed, hash_out=hash_out)
    m["result"] = take_result(res_path)
    return m


def take_result(path):
    """A driver's JSON result file, read and removed; None when it wrote none
    (or not JSON)."""
    try:
        with open(path) as f:
            r = json.load(f)
        os.unlink(path)
        return r
    except (OSError, ValueError):
        return None


# ---- small S3 admin through the s3xfer CLI --------------------------------------
class Admin:
    def __init__(self, env, cli):
        self.env, self.cli = env, cli

    def _run(self, *args, check=True):
        r = subprocess.run([self.cli, *args, "-q"], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        if check and r.returncode:
            raise RuntimeError(f"s3xfer {' '.join(args)}: {r.stderr.strip()}")
        return r

    def mb(self, bucket):
        self._run("mb", f"s3://{bucket}")

    def rb(self, bucket):
        """Empties and removes a bucket (SeaweedFS then frees its volumes)."""
        for key in self.ls(bucket):
            self._run("rm", f"s3://{bucket}/{key}", check=False)
        self._run("rb", f"s3://{bucket}", check=False)

    def ls(self, bucket, prefix=""):
        """{key: size} (recursing through common prefixes)."""
        out = {}
        r = self._run("ls", f"s3://{bucket}/{prefix}", check=False)
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[-2] == "PRE":
                out.update(self.ls(bucket, parts[-1]))
            elif len(parts) >= 3 and parts[-2].isdigit():
                out[parts[-1]] = int(parts[-2])
        return out

    def rm(self, bucket, key):
        self._run("rm", f"s3://{bucket}/{key}", check=False)

    def put(self, path, bucket, key):
        self._run("cp", path, f"s3://{bucket}/{key}", "--no-progress")

    def get(self, bucket, key, path):
        self._run("cp", f"s3://{bucket}/{key}", path, "--no-progress")


def new_bucket(prefix="s3xb"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# ---- statistics and tables ---------------------------------------------------
def balanced_row(n, rnd):
    """Row rnd of a balanced Latin square on n items (Williams' design), the
    order of round rnd of an interleaved benchmark: over n rows (2n when n is
    odd) every item comes first once (twice) and follows every other item
    once (twice). A rotation would keep each item behind the same one, and
    what ran just before can change a run's cost (docs/performance.md,
    "What ran before")."""
    if n <= 0:
        return []
    base, lo, hi = [0], 1, n - 1
    while len(base) < n:
        base.append(lo)
        lo += 1
        if len(base) < n:
            base.append(hi)
            hi -= 1
    r = rnd % (n if n % 2 == 0 else 2 * n)
    row = [(x + r) % n for x in base]
    return row[::-1] if r >= n else row


def summarize(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def fmt_summary(s, spec="{:.2f}", span=False):
    """A summarize() result as its median, with "(min–max)" when span and
    there is more than one value; "" for None."""
    if not s:
        return ""
    v = spec.format(s["median"])
    if span and s["n"] > 1:
        v += f" ({spec.format(s['min'])}–{spec.format(s['max'])})"
    return v


def rsd(values):
    """Relative spread, benchstat style: max deviation from the median in %."""
    v = [x for x in values if x is not None]
    if len(v) < 2:
        return 0.0
    m = statistics.median(v)
    return 100.0 * max(abs(x - m) for x in v) / m if m else 0.0


def table(headers, rows, align=None):
    """A GitHub markdown table (also readable as plain text)."""
    rows = [[("" if c is None else str(c)) for c in r] for r in rows]
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    align = align or ["l"] + ["r"] * (len(headers) - 1)

    def fmt(cells):
        return "| " + " | ".join(c.ljust(w[i]) if align[i] == "l" else c.rjust(w[i])
                                 for i, c in enumerate(cells)) + " |"
    sep = "| " + " | ".join(("-" * w[i]) if align[i] == "l" else ("-" * (w[i] - 1) + ":")
                            for i in range(len(headers))) + " |"
    return "\n".join([fmt(headers), sep] + [fmt(r) for r in rows])


def human_size(n):
    for unit, div in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n / MiB:.1f}MiB" if n >= MiB else f"{n}B"


def machine_info(env=None):
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    info = {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(), "mem_gib": round(mem / GiB, 1),
            "python": platform.python_version(), "loadavg_start": os.getloadavg()}
    if env is not None:
        info["server"] = server_version(env)
        info["endpoint"] = env.get("AWS_ENDPOINT_URL")
    return info


def parse_size(s):
    s = str(s).strip()
    units = {"k": 1024, "m": MiB, "g": GiB}
    num = s.rstrip("iBb").rstrip("KkMmGg")
    u = s[len(num):].lower()[:1]
    return int(float(num) * units.get(u, 1))


# ---- the s3xfer-only scripts ---------------------------------------------------
def add_common_args(ap, runs=3):
    ap.add_argument("--runs", type=int, default=runs, help=f"measured runs per cell (default {runs})")
    ap.add_argument("--build", help="s3xfer build dir (default build-bench, built if missing)")
    ap.add_argument("--data-dir", help="where test files go (default /dev/shm, else /tmp)")
    ap.add_argument("--out", help="also write the table (.md) and the raw runs (.json) to this path prefix")


class Ctx:
    def __init__(self, a):
        self.build = build_dir(a.build)
        self.cli = os.path.join(self.build, "s3xfer")
        self.env = server_env()
        self.ddir = data_dir(a.data_dir)
        self.admin = Admin(self.env, self.cli)


def knob_args(knobs):
    """{"part_size": 8 << 20, "buffer_strategy": "buffered"} -> ["--part-size", "8388608", ...]"""
    out = []
    for k, v in knobs.items():
        if v is None or v is False:
            continue
        out.append("--" + k.replace("_", "-"))
        if v is not True:
            out.append(str(v))
    return out


def cli_cp(ctx, src, dst, knobs, feed=None, hash_out=False, out_rate=None):
    """One `s3xfer cp` in a fresh process (measured)."""
    return measure([ctx.cli, "cp", src, dst, "--no-progress", "-q", *knob_args(knobs)], env=ctx.env,
                   feed=feed, hash_out=hash_out, out_rate=out_rate)


def py_transfer(ctx, op, bucket, key, path, knobs, sink=None):
    """One transfer through the Python package in a fresh driver process;
    m["result"]["s3xfer"] is the TransferResult."""
    args = [("s3xfer-py"), op, "--bucket", bucket, "--key", key, "--file", path, *knob_args(knobs)]
    if sink:
        args += ["--sink", sink]
    return run_driver(ctx.env, ctx.build, args)


def mann_whitney_p(a, b):
    """Exact two-sided Mann-Whitney U p-value (small samples), as benchstat reports."""
    import itertools
    a, b = list(a), list(b)
    n, pooled = len(a), a + b
    if not a or not b:
        return 1.0

    def u(xs, ys):
        return sum((x > y) + 0.5 * (x == y) for x in xs for y in ys)
    u0 = u(a, b)
    mean = len(a) * len(b) / 2
    extreme, total = 0, 0
    for idx in itertools.combinations(range(len(pooled)), n):
        xs = [pooled[i] for i in idx]
        ys = [pooled[i] for i in range(len(pooled)) if i not in idx]
        total += 1
        extreme += abs(u(xs, ys) - mean) >= abs(u0 - mean) - 1e-9
    return extreme / total


def write_out(prefix, text, raw):
    if not prefix:
        return
    d = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(d, exist_ok=True)
    with open(prefix + ".md", "w") as f:
        f.write(text + "\n")
    with open(prefix + ".json", "w") as f:
        json.dump(raw, f, indent=1)
