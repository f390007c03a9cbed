"""Helpers shared by the benchmark notebooks in this directory.

Standard library only (matplotlib is imported by the notebooks themselves):
finding the repository and the s3xfer package, the S3 server (the
environment's AWS_* or a local SeaweedFS started through scripts/local-s3),
throw-away buckets and files, running one configuration in a fresh
interpreter to get its own peak RSS, small statistics and plain-text tables.

A notebook uses it as::

    import pathlib, sys
    here = pathlib.Path.cwd()
    root = next(p for p in (here, *here.parents) if (p / "benchmarks" / "notebooks" / "nbsupport.py").exists())
    sys.path.insert(0, str(root / "benchmarks" / "notebooks"))
    import nbsupport as nbs
    s3xfer = nbs.import_s3xfer()
    env = nbs.server_env()
    ...
    nbs.cleanup()          # buckets, files, a server we started (also at exit)
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

MiB = 1 << 20
GiB = 1 << 30

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = HERE / "nbdriver.py"

_cleanups: list = []  # callables, run last-in first-out by cleanup()


def cleanup() -> None:
    """Removes what this kernel created (buckets, files) and stops a server it
    started. Safe to call more than once; also runs at interpreter exit."""
    while _cleanups:
        fn = _cleanups.pop()
        try:
            fn()
        except Exception as e:  # cleanup must not hide the notebook's own error
            print(f"nbsupport: cleanup step failed: {e}", file=sys.stderr)


atexit.register(cleanup)


# ---- the package under test ------------------------------------------------------
def s3xfer_path() -> str | None:
    """The directory to put on sys.path for `import s3xfer`: None if it is
    importable already (installed, or on PYTHONPATH), else the python/ dir of
    $S3X_BUILD_DIR, <repo>/build or <repo>/build-bench, whichever has it."""
    import importlib.util
    if importlib.util.find_spec("s3xfer") is not None:
        return None
    cands = [os.environ.get("S3X_BUILD_DIR"), REPO / "build", REPO / "build-bench"]
    for c in cands:
        if c and (pathlib.Path(c) / "python" / "s3xfer" / "__init__.py").exists():
            return str(pathlib.Path(c) / "python")
    raise ImportError("s3xfer is not importable: `pip install .`, or build it (cmake -DS3X_BUILD_PYTHON=ON) "
                      "and set S3X_BUILD_DIR or PYTHONPATH=<build>/python")


def import_s3xfer():
    p = s3xfer_path()
    if p and p not in sys.path:
        sys.path.insert(0, p)
    import s3xfer
    return s3xfer


def import_faultproxy():
    """The fault-injecting proxy of the test suite (tests/faultproxy)."""
    t = str(REPO / "tests")
    if t not in sys.path:
        sys.path.insert(0, t)
    from faultproxy import FaultProxy
    return FaultProxy


class ProxyTimings(logging.Handler):
    """Per-request timings as the fault proxy sees them, joined with its decision
    log (part number, faults), to get per-part latencies from outside s3xfer.

    The proxy logs, at DEBUG, one line per request when it is done with it:
    "conn C request SEQ METHOD KIND: OUTCOME in SECONDSs, faults [...]" (from the
    request's head arriving to the end of its response, held time included).
    This handler parses those lines; collect() copies the decision log (call it
    before proxy.reset_stats(), which clears it); part_latencies() gives each
    part's latency: from its first attempt's arrival to the end of its last
    attempt (the one the client waited for), so a part re-sent after a
    first-byte timeout counts the abandoned wait too.
    """

    LINE = re.compile(r"conn \d+ request (\d+) (\S+) (\S+): (\S+) in ([0-9.]+)s")

    def __init__(self, proxy):
        super().__init__(logging.DEBUG)
        self.proxy = proxy
        self.timings: dict = {}    # seq -> (start, end, outcome), time.time() clock
        self.decided: dict = {}    # seq -> decision dict
        self._logger = logging.getLogger("faultproxy")
        self._saved = (self._logger.level, self._logger.propagate)
        self._logger.setLevel(logging.DEBUG)
        self._logger.propagate = False   # the debug lines go here only, not to the notebook
        self._logger.addHandler(self)
        _cleanups.append(self.close)

    def emit(self, record):
        m = self.LINE.match(record.getMessage())
        if m:
            dur = float(m.group(5))
            self.timings[int(m.group(1))] = (record.created - dur, record.created, m.group(4))

    def close(self):
        self._logger.removeHandler(self)
        self._logger.setLevel(self._saved[0])
        self._logger.propagate = self._saved[1]
        super().close()

    def collect(self):
        for d in self.proxy.decisions():
            self.decided[d["seq"]] = d

    def part_latencies(self, path: str, wait: float = 10.0) -> list:
        """[(part number, seconds, attempts, held attempts)] of the UploadParts to
        `path` ("/bucket/key"). Waits up to `wait` s for attempts the client gave
        up on (the proxy finishes them when their hold ends)."""
        seqs = [q for q, d in self.decided.items() if d["path"] == path and d["kind"] == "upload_part"]
        deadline = time.monotonic() + wait
        while any(q not in self.timings for q in seqs) and time.monotonic() < deadline:
            time.sleep(0.05)
        missing = [q for q in seqs if q not in self.timings]
        if not seqs or missing:
            raise RuntimeError(f"no proxy timing for {len(missing)} of {len(seqs)} UploadPart requests of {path}: "
                               "has the fault proxy's debug log line changed?")
        parts: dict = {}
        for q in seqs:
            parts.setdefault(int(self.decided[q]["part"]), []).append(q)
        out = []
        for n, qs in sorted(parts.items()):
            att = sorted((self.timings[q] + (q,) for q in qs))  # by start time
            held = sum(1 for q in qs if "delay_first_byte" in self.decided[q]["faults"])
            out.append((n, att[-1][1] - att[0][0], len(att), held))
        return out


# ---- the server -------------------------------------------------------------------
def server_env() -> dict:
    """The AWS_* settings of the S3 server, also put into os.environ: the
    environment's if AWS_ENDPOINT_URL is set, else SeaweedFS started by
    scripts/local-s3 (state dir $S3X_LOCAL_S3_DIR, default <repo>/.local-s3;
    port $S3X_LOCAL_S3_PORT, default 8333), stopped by cleanup() if this
    kernel started it."""
    if not os.environ.get("AWS_ENDPOINT_URL"):
        script = str(REPO / "scripts" / "local-s3")
        running = subprocess.run([script, "status"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL).returncode == 0
        out = subprocess.run([script, "start"], check=True, stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            if line.startswith("export ") and "=" in line:
                k, v = line[len("export "):].split("=", 1)
                os.environ[k] = v.strip().strip("'\"")
        if not running:
            _cleanups.insert(0, lambda: subprocess.run([script, "stop"], stdout=subprocess.DEVNULL,
                                                       stderr=subprocess.DEVNULL))
    os.environ.setdefault("AWS_REGION", os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    missing = [k for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if not os.environ.get(k)]
    if missing:
        raise RuntimeError(f"no S3 server configured: {', '.join(missing)} unset")
    return {k: v for k, v in os.environ.items() if k.startswith("AWS_")}


def client(**kw):
    """An s3xfer.Client on the environment's server (closed by cleanup())."""
    s3xfer = import_s3xfer()
    c = s3xfer.Client(**kw)
    _cleanups.append(c.close)
    return c


# ---- buckets and files --------------------------------------------------------------
def drop_bucket(c, bucket: str) -> None:
    """Aborts the bucket's multipart uploads, deletes its objects and the bucket."""
    for up in c.list_multipart_uploads(bucket):
        c.abort_multipart_upload(bucket, up["key"], up["upload_id"])
    for obj in c.list_objects(bucket):
        if "key" in obj:
            c.delete_object(bucket, obj["key"])
    c.delete_bucket(bucket)


def new_bucket(c, prefix: str = "nb") -> str:
    """A fresh bucket, removed with its contents by cleanup()."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    c.create_bucket(name)
    _cleanups.append(lambda: drop_bucket(c, name))
    return name


def work_dir() -> str:
    """A scratch directory (on tmpfs when it has room), removed by cleanup()."""
    base = None
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize > 4 * GiB:
            base = "/dev/shm"
    except OSError:
        pass
    d = tempfile.mkdtemp(prefix="s3xfer-nb-", dir=base)
    _cleanups.append(lambda: shutil.rmtree(d, ignore_errors=True))
    return d


def make_file(directory: str, size: int) -> tuple[str, str]:
    """A file of `size` random bytes in `directory`; returns (path, sha256)."""
    path = os.path.join(directory, f"src-{size}.bin")
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left > 0:
            block = os.urandom(min(left, 4 * MiB))
            f.write(block)
            h.update(block)
            left -= len(block)
    return path, h.hexdigest()


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 * MiB)
            if not b:
                return h.hexdigest()
            h.update(b)


def plot_path(plot_dir: str | None, name: str) -> str:
    """Where a notebook saves its figure: plot_dir, else <tmp>/s3xfer-notebooks."""
    d = plot_dir or os.path.join(tempfile.gettempdir(), "s3xfer-notebooks")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, name)


# ---- one configuration in a fresh interpreter ------------------------------------------
def run_fresh(spec: dict, timeout: float = 600) -> dict:
    """Runs nbdriver.py with `spec` in a new Python process and returns its JSON
    result plus "wall" and "cpu" seconds (user+sys, from os.wait4) and
    "rss_mib", the child's peak resident set as it measured it itself (VmHWM:
    wait4's ru_maxrss would include this kernel's own RSS, see nbdriver.py)."""
    env = dict(os.environ)
    p = s3xfer_path()
    if p:
        env["PYTHONPATH"] = p + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, str(DRIVER), json.dumps(spec)], env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode:
        raise RuntimeError(f"nbdriver {spec.get('op')} exited with {proc.returncode}: {stderr[-2000:]}")
    res = json.loads(stdout.strip().splitlines()[-1])
    res.update(wall=wall, cpu=ru.ru_utime + ru.ru_stime, rss_mib=res.pop("peak_rss_kib") / 1024.0)
    return res


# ---- statistics and tables ----------------------------------------------------------
def med(values):
    """(median, min, max) of the values."""
    v = list(values)
    return statistics.median(v), min(v), max(v)


def percentile(values, q: float) -> float:
    """The q-th percentile (0..100), nearest rank."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = max(0, min(len(v) - 1, int(round(q / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def table(headers, rows) -> str:
    """A plain-text table (GitHub markdown syntax): numeric columns right-aligned."""
    def fmt(c):
        if c is None:
            return ""
        if isinstance(c, float):
            return f"{c:.3g}" if abs(c) < 100 else f"{c:.0f}"
        return str(c)
    numeric = [all(isinstance(r[i], (int, float)) or r[i] in (None, "") for r in rows) for i in range(len(headers))]
    cells = [[fmt(c) for c in r] for r in rows]
    w = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(cs):
        return "| " + " | ".join(c.rjust(w[i]) if numeric[i] else c.ljust(w[i]) for i, c in enumerate(cs)) + " |"
    sep = "| " + " | ".join("-" * (w[i] - 1) + ":" if numeric[i] else "-" * w[i] for i in range(len(w))) + " |"
    return "\n".join([line(headers), sep] + [line(r) for r in cells])


def human(n: int) -> str:
    """Bytes as KiB/MiB/GiB."""
    for unit, div in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} B"


def s3_etag(path: str, part_size: int, multipart: bool = True) -> str:
    """The ETag S3 gives `path` uploaded in parts of `part_size` (MD5 of the
    parts' MD5s, "-N"), or in one PutObject (its MD5): comparing it with a
    result's etag checks the bytes that arrived without downloading them."""
    digests = []
    whole = hashlib.md5()
    with open(path, "rb") as f:
        while True:
            b = f.read(part_size if multipart else 4 * MiB)
            if not b:
                break
            whole.update(b)
            digests.append(hashlib.md5(b).digest())
    if not multipart:
        return f'"{whole.hexdigest()}"'
    return f'"{hashlib.md5(b"".join(digests)).hexdigest()}-{len(digests)}"'


# ---- running the notebooks headless (render.py, tests/python/test_notebooks.py)

RUNNER_MODULES = ("nbclient", "nbformat", "ipykernel", "matplotlib")


def missing_runner_modules() -> list:
    """The modules needed to execute the notebooks that this interpreter lacks."""
    missing = []
    for mod in RUNNER_MODULES:
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    return missing


def write_kernel_spec(jupyter_dir, name: str, display: str) -> None:
    """A kernel spec `name` for this very interpreter under jupyter_dir/kernels;
    put jupyter_dir first on JUPYTER_PATH so that nbclient finds it before any
    other python3 kernel installed on the machine."""
    spec = pathlib.Path(jupyter_dir) / "kernels" / name
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"{display} ({sys.executable})", "language": "python"}))
