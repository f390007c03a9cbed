"""python -m s3xfer: the command-line tool's cp, ls, mb, rb and rm in Python,
for machines without the native s3xfer binary on PATH.

It behaves as the native tool does (apps/s3xfer.c): sizes are whole numbers
with binary units; keys and server text are printed escaped; SIGINT, SIGTERM
and SIGHUP cancel a running transfer (after its cleanup) and end any other
command at once, with exit status 128 + the signal number."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import select
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import CancelToken, Client, LocalIOError, S3xferError, TransferCancelled, TransferConfig, _core

_INT64_MAX = (1 << 63) - 1

# Binary units only, any case; K, M, G, T mean KiB... (as dd and the AWS CLI
# read them). KB, MB, GB, TB are refused rather than guessed.
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30,
          "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40}


def _ms(text: str) -> int:
    """A duration flag in whole milliseconds: digits only (no sign, fraction or unit)."""
    if not re.fullmatch(r"[0-9]+", text or ""):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of milliseconds")
    return int(text)


def _size(text: str) -> int:
    """A size flag's value: digits and an optional unit, nothing else. The old
    float() parse let "0.5" become 0 (no limit), "1e300" overflow, and
    "inf"/"nan" through; a benchmark must run what it says it runs."""
    m = re.fullmatch(r"([0-9]+)([A-Za-z]*)", text)
    why = None
    if not text:
        why = "the value is empty"
    elif text[0] in "+-":
        why = "no sign is allowed"
    elif not m:
        if re.fullmatch(r"[0-9]*[.,][0-9]*[A-Za-z]*", text):
            why = "fractions are not allowed (write 1536KiB, not 1.5MiB)"
        elif re.fullmatch(r"[0-9.]+[eE][-+]?[0-9]+[A-Za-z]*", text):
            why = "exponents are not allowed"
        else:
            why = "it is not a whole number of bytes"
    elif m.group(2).lower() in ("kb", "mb", "gb", "tb"):
        why = "KB, MB, GB and TB are ambiguous: write KiB, MiB, GiB, TiB (powers of 1024) or a number of bytes"
    elif m.group(2).lower() not in _UNITS:
        why = "unknown unit (use B, KiB, MiB, GiB or TiB; K, M, G, T mean the same)"
    elif len(m.group(1)) > 19 or int(m.group(1)) * _UNITS[m.group(2).lower()] > _INT64_MAX:
        why = "it is too large"
    if why:
        raise argparse.ArgumentTypeError(f"invalid size {_escape(text)!s}: {why}")
    assert m is not None
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


# What a terminal would act on rather than show: C0 controls, DEL, C1
# controls (U+009B is an 8-bit CSI on some terminals), the bidirectional
# embeddings, overrides and isolates (they reorder the rest of the line), and
# lone surrogates (bytes that were not UTF-8, decoded with surrogateescape),
# plus the backslash itself so that every escape is unambiguous.
_HIDDEN = re.compile(r"[\\\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_one(m: "re.Match[str]") -> str:
    ch = m.group()
    named = _NAMED.get(ch)
    if named:
        return named
    try:
        raw = ch.encode("utf-8", "surrogateescape")  # U+DC80..U+DCFF: the byte it stood for
    except UnicodeEncodeError:
        raw = ch.encode("utf-8", "surrogatepass")
    return "".join(f"\\x{b:02x}" for b in raw)


def _escape(text: object) -> str:
    """Server-supplied text made safe to print, as the native tool does it:
    \\\\ for a backslash, \\n \\r \\t, and \\xHH for each UTF-8 byte of any
    other hidden character and for each byte that was not UTF-8. A key
    cannot start a new line, move the cursor or clear the screen."""
    return _HIDDEN.sub(_escape_one, str(text))


def _s3url(text: str) -> Optional[Tuple[str, str]]:
    if not text.startswith("s3://"):
        return None
    rest = text[5:]
    bucket, _, key = rest.partition("/")
    return bucket, key


def _place(src: str, src_url, dst: str, dst_url) -> Optional[str]:
    """cp's destination when it names a place rather than an object or a file
    (as the native tool's apps/s3xfer.c does): a key that is empty or ends in
    '/', or a local path that ends in '/' or is an existing directory. The
    source's base name is added: `cp f s3://b/p/` writes p/f, `cp s3://b/p/f
    dir` writes dir/f. The new key or path, or None when DST names one."""
    if dst_url:
        at = dst_url[1]
        if at and not at.endswith("/"):
            return None
    else:
        if dst == "-" or (not dst.endswith("/") and not os.path.isdir(dst)):
            return None
        at = dst
    if src_url:
        if not src_url[1]:
            return None  # "source needs a key", said where the source is used
        base = src_url[1].rpartition("/")[2]
        if base in ("", ".", ".."):
            raise SystemExit("s3xfer: the source key's last part cannot name a file or object: give DST in full")
    else:
        if src == "-":
            raise SystemExit("s3xfer: standard input has no name: give the destination key in full")
        base = src.rpartition("/")[2]
        if base in ("", ".", ".."):
            raise SystemExit("s3xfer: SRC has no file name to add to DST: give DST in full")
    return at + base if dst_url or at.endswith("/") else at + "/" + base


class _Bar:
    """A progress bar on stderr: tqdm when installed, else a plain one."""

    def __init__(self, total: Optional[int], desc: str):
        try:
            from tqdm import tqdm  # optional
            self._t = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, file=sys.stderr)
        except ImportError:
            self._t = None
        self.total, self.done = total, 0

    def __call__(self, n: int) -> None:
        self.done += n
        if self._t is not None:
            self._t.update(n)
        else:
            pct = f" {100 * self.done / self.total:5.1f}%" if self.total else ""
            sys.stderr.write(f"\r{self.done / (1 << 20):10.1f} MiB{pct}")
            sys.stderr.flush()

    def close(self) -> None:
        if self._t is not None:
            self._t.close()
        elif self.done:
            sys.stderr.write("\n")


# ---- --json: the native tool's records (apps/cli_json.c) ----------------------
# ensure_ascii escapes every non-ASCII character, so controls, C1, bidi
# controls and U+2028/9 never reach a terminal raw, and a byte that was not
# UTF-8 (a surrogateescape'd U+DC80..U+DCFF) comes out as \udcXX, as the
# native tool writes it.

def _emit(stream, record: Dict[str, Any]) -> None:
    stream.write(json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n")
    stream.flush()


class _JsonProgress:
    """Progress records (at most every 0.2 s, and when the bytes complete)
    with the client's throttling state, read on the transfer's thread."""

    heartbeat = True  # called every 250 ms even when no byte moved (a storm)

    def __init__(self, c: Client, total: Optional[int], stream):
        self.c, self.total, self.stream = c, total, stream
        self.done, self.t0, self.last = 0, time.monotonic(), None

    def __call__(self, n: int) -> None:
        self.done += n
        t = time.monotonic()
        completes = self.total is not None and self.done == self.total and n > 0
        if self.last is not None and not completes and t - self.last < 0.2:
            return
        self.last = t
        secs = t - self.t0
        _emit(self.stream, {"type": "progress", "bytes": self.done, "total": self.total, "seconds": secs,
                            "bytes_per_second": self.done / secs if secs > 0 else 0.0,
                            "throttle": self.c.throttle_state()})

    def close(self) -> None:
        pass


def _own_stream_error(e: BaseException, what: str) -> BaseException:
    """The tool's own stdin or stdout failed (what names it; "" when neither
    is in use): a LocalIOError that says so with the system's errno, as the
    native tool reports it. A closed pipe stays a BrokenPipeError, which ends
    the tool quietly (`... - | head`)."""
    if not what or isinstance(e, (S3xferError, BrokenPipeError)) or not isinstance(e, OSError):
        return e
    return LocalIOError(f"{what}: {e.strerror or e}", errno=-3, sys_errno=e.errno or 0)


def _error_record(e: BaseException) -> Dict[str, Any]:
    if isinstance(e, S3xferError):
        return {"code": e.errno, "name": _core.py_strerror(e.errno), "message": e.message or str(e),
                "http_status": e.status, "s3_code": e.code or "", "request_id": e.request_id or "",
                "sys_errno": e.sys_errno}
    return {"code": -3, "name": _core.py_strerror(-3), "message": str(e), "http_status": 0, "s3_code": "",
            "request_id": "", "sys_errno": e.errno if isinstance(e, OSError) and e.errno else 0}


def _result_record(c: Client, command: str, fields: Dict[str, Any], result, error: Optional[BaseException],
                   cancel: Optional[CancelToken]) -> Dict[str, Any]:
    rec: Dict[str, Any] = {"type": "result", "command": command}
    rec.update(fields)
    signum = getattr(cancel, "signum", 0) if cancel is not None and cancel.cancelled else 0
    rec["outcome"] = "interrupted" if signum else "failed" if error is not None else "ok"
    rec["exit_code"] = 128 + signum if signum else 1 if error is not None else 0
    if signum:
        rec["signal"] = signal.Signals(signum).name
    if result is not None:
        rec["result"] = dataclasses.asdict(result)
    try:
        rec["throttle"] = c.throttle_state()
    except S3xferError:
        pass
    if error is not None:
        rec["error"] = _error_record(error)
    return rec


def _config(a) -> TransferConfig:
    return TransferConfig(part_size=a.part_size, concurrency=a.concurrency, buffer_strategy=a.buffer_strategy,
                          pool=a.pool, checksum=a.checksum, checksum_location=a.checksum_location,
                          checksum_type=a.checksum_type.replace("-", "_") if a.checksum_type else None,
                          memory_limit=a.memory_limit, max_attempts=a.max_attempts,
                          slow_part_timeout=(int(a.slow_part_timeout) if a.slow_part_timeout and
                                             a.slow_part_timeout.isdigit() else a.slow_part_timeout),
                          size_hint=a.size_hint, retry_timeout=a.retry_timeout, retry_mode=a.retry_mode)


class _StdinReader:
    """stdin for an upload, read so that a signal is acted on even while no
    byte arrives: a blocking read on a stalled pipe would hold the transfer
    (and its cleanup) until the writer sends something."""

    def __init__(self, fd: int, cancel: CancelToken):
        self._fd, self._cancel = fd, cancel

    def readinto(self, b) -> int:
        while True:
            if self._cancel.cancelled:
                raise TransferCancelled("the upload from stdin was interrupted", errno=-11)
            ready, _, _ = select.select([self._fd], [], [], 0.2)
            if ready:
                return os.readv(self._fd, [b])


def _recorded(c: Client, jf, fields: Dict[str, Any], cancel: CancelToken, run, stream: str = "", bar=None):
    """Runs one cp (run() returns its result) and, with --json (jf), writes its
    result record to jf whether it failed or not. stream names the tool's own
    stdin or stdout when the transfer uses it ("" when not): a failure of it
    becomes a LocalIOError that says so (_own_stream_error)."""
    try:
        r = run()
    except (S3xferError, OSError) as e:
        err = _own_stream_error(e, stream)
        if jf:
            _emit(jf, _result_record(c, "cp", fields, None, err, cancel))
        if err is not e:
            raise err from e
        raise
    finally:
        if bar:
            bar.close()
    if jf:
        _emit(jf, _result_record(c, "cp", fields, r, None, cancel))
    return r


def _cp_copy(c: Client, a, src, dst, cancel: CancelToken) -> int:
    """cp s3://a/k s3://b/k2: a server-side copy (the bytes stay on the server)."""
    if not src[1]:
        raise SystemExit("s3xfer: source needs a key: s3://bucket/key")
    if not dst[1]:
        raise SystemExit("s3xfer: destination needs a key: s3://bucket/key")
    jf = sys.stdout if a.json else None
    fields = {"direction": "copy", "source": a.src, "destination": a.dst, "bucket": dst[0], "key": dst[1]}
    r = _recorded(c, jf, fields, cancel, lambda: c.copy(src[0], src[1], dst[0], dst[1], config=_config(a),
                                                        cancel=cancel))
    if not jf and not a.quiet:
        print(f"copy: s3://{_escape(src[0])}/{_escape(src[1])} to s3://{_escape(dst[0])}/{_escape(dst[1])} "
              f"({r.bytes} bytes in {r.seconds:.2f} s, server-side, {r.parts} parts, {r.requests} requests, "
              f"{r.retries} retries)")
    return 0


def _cp(c: Client, a, cancel: CancelToken) -> int:
    src, dst = _s3url(a.src), _s3url(a.dst)
    if not src and not dst:
        raise SystemExit("s3xfer: one of SRC and DST must be an s3:// URL")
    placed = _place(a.src, src, a.dst, dst)
    if placed is not None:
        if dst:
            dst = (dst[0], placed)
            a.dst = f"s3://{dst[0]}/{placed}"
        else:
            a.dst = placed
    if src and dst:
        return _cp_copy(c, a, src, dst, cancel)
    cfg = _config(a)
    # With --json, progress records only when asked for (--progress): what a
    # script reads does not depend on where stderr goes.
    show = (a.progress if a.progress is not None else sys.stderr.isatty() and not a.quiet) if not a.json \
        else bool(a.progress)
    if dst:
        bucket, key = dst
        if not key:
            raise SystemExit("s3xfer: destination needs a key: s3://bucket/key")
        total = None if a.src == "-" else os.path.getsize(a.src) if os.path.isfile(a.src) else None
        jf = sys.stdout if a.json else None
        fields = {"direction": "upload", "source": a.src, "destination": a.dst, "bucket": bucket, "key": key}
        bar = (_JsonProgress(c, total, jf) if jf else _Bar(total, "upload")) if show else None
        def upload():
            if a.src == "-":
                return c.upload_fileobj(_StdinReader(sys.stdin.fileno(), cancel), bucket, key, config=cfg,
                                        progress=bar, cancel=cancel)
            return c.upload_file(a.src, bucket, key, config=cfg, progress=bar, cancel=cancel)

        r = _recorded(c, jf, fields, cancel, upload, "reading standard input" if a.src == "-" else "", bar)
        if not jf and not a.quiet:
            print(f"upload: {_escape(a.src)} to s3://{_escape(bucket)}/{_escape(key)} ({r.bytes} bytes in "
                  f"{r.seconds:.2f} s, {r.throughput_mib_s:.1f} MiB/s, {r.parts} parts, {r.requests} requests, "
                  f"{r.retries} retries)")
        return 0
    bucket, key = src
    if not key:
        raise SystemExit("s3xfer: source needs a key: s3://bucket/key")
    # The object owns stdout when it goes there: the records take stderr.
    jf = (sys.stderr if a.dst == "-" else sys.stdout) if a.json else None
    fields = {"direction": "download", "source": a.src, "destination": a.dst, "bucket": bucket, "key": key}
    bar = (_JsonProgress(c, None, jf) if jf else _Bar(None, "download")) if show else None
    def download():
        if a.dst == "-":
            res = c.download_fileobj(bucket, key, sys.stdout.buffer, config=cfg, progress=bar, cancel=cancel)
            sys.stdout.buffer.flush()
            return res
        return c.download_file(bucket, key, a.dst, config=cfg, progress=bar, cancel=cancel)

    r = _recorded(c, jf, fields, cancel, download, "writing standard output" if a.dst == "-" else "", bar)
    if not jf and not a.quiet and a.dst != "-":
        print(f"download: s3://{_escape(bucket)}/{_escape(key)} to {_escape(a.dst)} ({r.bytes} bytes in "
              f"{r.seconds:.2f} s, {r.throughput_mib_s:.1f} MiB/s, {r.parts} parts, {r.requests} requests, "
              f"{r.retries} retries)")
    return 0


# ---- cp -r, sync, rm -r (docs/bulk.md): the native tool's apps/cli_bulk.c ----------

_VERB = {"upload": "upload", "download": "download", "copy": "copy", "delete_remote": "delete",
         "delete_local": "delete", "mkdir": "mkdir", "skip": "skip", "refused": "refused"}


def _bulk_line(item, bucket: str, dest_bucket: Optional[str]) -> str:
    def url(b, k):
        return f"s3://{_escape(b)}/{_escape(k or '')}"
    path = _escape(item.path or "")
    if item.action == "upload":
        return f"{path} to {url(bucket, item.key)}"
    if item.action == "download":
        return f"{url(bucket, item.key)} to {path}"
    if item.action == "copy":
        return f"{url(bucket, item.key)} to {url(dest_bucket or bucket, item.dest_key)}"
    if item.action in ("delete_local", "mkdir"):
        return path
    return url(bucket, item.key) if item.key is not None else path


def _bulk(c: Client, a, cancel: CancelToken) -> int:
    from .bulk import parse_s3_url
    from .errors import PartialFailureError
    label = "sync" if a.cmd == "sync" else f"{a.cmd} -r"
    if a.cmd == "rm":
        u = parse_s3_url(a.url)
        if u is None:
            raise SystemExit("s3xfer: rm -r needs s3://bucket/prefix/")
        src = dst = None
    else:
        src, dst = parse_s3_url(a.src), parse_s3_url(a.dst)
        if not src and not dst:
            raise SystemExit("s3xfer: one of SRC and DST must be an s3:// URL")
        if src and dst and a.cmd == "sync":
            raise SystemExit("s3xfer: sync needs a local directory on one side")
    bucket = (src or dst or u)[0] if a.cmd != "rm" else u[0]
    dest_bucket = dst[0] if src and dst else None
    counts = {"copied": 0, "deleted": 0}
    dry = "(dryrun) " if a.dryrun else ""

    def on_object(item) -> None:
        if item.ok and item.action in ("upload", "download", "copy"):
            counts["copied"] += 1
        elif item.ok and item.action in ("delete_remote", "delete_local"):
            counts["deleted"] += 1
        if a.json:
            rec: Dict[str, Any] = {"type": "object", "action": item.action,
                                   "outcome": "refused" if item.action == "refused" else "failed" if item.error
                                   else "skipped" if item.action == "skip" else "ok"}
            if a.dryrun:
                rec["dryrun"] = True
            if item.key is not None:
                rec.update(bucket=bucket, key=item.key)
            if item.dest_key is not None:
                rec.update(dest_bucket=dest_bucket or bucket, dest_key=item.dest_key)
            if item.path is not None:
                rec["path"] = item.path
            rec["size"] = item.size
            if item.reason:
                rec["reason"] = item.reason
            if item.result is not None:
                rec["result"] = dataclasses.asdict(item.result)
            if item.error is not None:
                rec["error"] = _error_record(item.error)
            _emit(sys.stdout, rec)
        elif not item.ok:
            what = "refused" if item.action == "refused" else f"{_VERB[item.action]} failed"
            why = str(item.error) if item.error is not None else item.reason or ""
            print(f"{what}: {_bulk_line(item, bucket, dest_bucket)}: {_escape(why)}", file=sys.stderr)
        elif item.action == "skip":
            if a.cmd != "sync" and item.reason and not a.quiet:
                print(f"warning: skipped {_bulk_line(item, bucket, dest_bucket)}: {_escape(item.reason)}",
                      file=sys.stderr)
        elif not a.quiet:
            print(f"{dry}{_VERB[item.action]}: {_bulk_line(item, bucket, dest_bucket)}")

    filters = [(k, p) for k, p in (a.filters or [])]
    kw: Dict[str, Any] = dict(filters=filters, config=_config(a), fail_fast=a.fail_fast, dryrun=a.dryrun,
                              on_object=on_object, cancel=cancel)
    summary, error = None, None
    try:
        if a.cmd == "rm":
            summary = c.delete_prefix(u[0], u[1], **kw)
        elif a.cmd == "sync":
            summary = c.sync(a.src, a.dst, delete=a.delete, exact=a.exact, follow_symlinks=a.follow_symlinks,
                             **kw)
        elif src and dst:
            summary = c.copy_prefix(src[0], src[1], dst[0], dst[1], **kw)
        elif dst:
            summary = c.upload_dir(a.src, dst[0], dst[1], follow_symlinks=a.follow_symlinks, **kw)
        else:
            summary = c.download_dir(src[0], src[1], a.dst, **kw)
    except S3xferError as e:
        error, summary = e, getattr(e, "summary", None)
    signum = getattr(cancel, "signum", 0) if cancel.cancelled else 0
    code = 128 + signum if signum else 1 if error is not None else 0
    if a.json:
        rec = {"type": "summary", "command": a.cmd,
               "outcome": "interrupted" if signum else "failed" if code else "ok", "exit_code": code}
        if a.dryrun:
            rec["dryrun"] = True
        if summary is not None:
            rec.update({k: v for k, v in dataclasses.asdict(summary).items() if k != "failures"})
            rec.update(objects_copied=counts["copied"], objects_deleted=counts["deleted"])
        if error is not None:
            rec["error"] = _error_record(error)
        _emit(sys.stdout, rec)
    elif isinstance(error, PartialFailureError):
        print(f"s3xfer: {label}: {summary.objects_failed} object{'s' if summary.objects_failed != 1 else ''} "
              "failed", file=sys.stderr)
    elif error is not None and not signum:
        print(f"s3xfer: {label} failed: {_escape(error)}", file=sys.stderr)
    if summary is not None and not a.json and not a.quiet and not signum and (
            error is None or isinstance(error, PartialFailureError)):
        mib = summary.bytes_done / (1 << 20)
        print(f"{dry}{label}: {counts['copied']} copied, {counts['deleted']} deleted, {summary.objects_skipped} "
              f"skipped, {summary.objects_failed} failed, {mib:.1f} MiB in {summary.seconds:.2f} s")
    return code


class _Filter(argparse.Action):
    """--include / --exclude, kept in the order given (the last match wins)."""

    def __call__(self, parser, namespace, values, option_string=None):
        lst = list(getattr(namespace, "filters", None) or [])
        lst.append((self.const, values))
        setattr(namespace, "filters", lst)


def _bulk_flags(p, sync: bool = False, rm: bool = False) -> None:
    p.add_argument("--include", action=_Filter, const="include", metavar="PAT", dest="filters")
    p.add_argument("--exclude", action=_Filter, const="exclude", metavar="PAT", dest="filters")
    p.add_argument("--fail-fast", action="store_true")
    p.add_argument("--dryrun", action="store_true")
    if not rm:
        p.add_argument("--follow-symlinks", action="store_true")
    if sync:
        p.add_argument("--delete", action="store_true")
        p.add_argument("--exact", action="store_true")


def _ls(c: Client, a, cancel: CancelToken) -> int:
    u = _s3url(a.url)
    if not u or not u[0]:
        raise SystemExit("s3xfer: ls needs s3://bucket[/prefix]")
    # Printed as pages arrive (iter_objects), so a listing that never ends
    # shows progress and holds one page, and a repeated token stops it.
    for e in c.iter_objects(u[0], prefix=u[1], delimiter="/"):
        if cancel.cancelled:
            break
        if "prefix" in e:
            print(f"{'':30} PRE {_escape(e['prefix'])}")
        else:
            print(f"{_escape(e['last_modified'] or ''):24} {e['size']:12d} {_escape(e['key'])}")
    return 0


def _bucket_cmd(c: Client, a, make: bool) -> int:
    u = _s3url(a.url)
    if not u or not u[0] or u[1]:
        raise SystemExit("s3xfer: expected s3://bucket")
    fields = {"bucket": u[0]}
    try:
        (c.create_bucket if make else c.delete_bucket)(u[0])
    except S3xferError as e:
        if a.json:
            _emit(sys.stdout, _result_record(c, a.cmd, fields, None, e, None))
        raise
    if a.json:
        _emit(sys.stdout, _result_record(c, a.cmd, fields, None, None, None))
    elif not a.quiet:
        print(f"{'make_bucket' if make else 'remove_bucket'}: s3://{_escape(u[0])}")
    return 0


def _rm(c: Client, a) -> int:
    u = _s3url(a.url)
    if not u or not u[0] or not u[1]:
        raise SystemExit("s3xfer: rm needs s3://bucket/key")
    fields = {"bucket": u[0], "key": u[1]}
    try:
        c.delete_object(*u)
    except S3xferError as e:
        if a.json:
            _emit(sys.stdout, _result_record(c, "rm", fields, None, e, None))
        raise
    if a.json:
        _emit(sys.stdout, _result_record(c, "rm", fields, None, None, None))
    elif not a.quiet:
        print(f"delete: s3://{_escape(u[0])}/{_escape(u[1])}")
    return 0


def _command(a, cancel: CancelToken) -> int:
    verify = a.ca_bundle or (not a.no_verify_ssl)
    try:
        with Client(endpoint_url=a.endpoint_url, region=a.region, profile=a.profile,
                    addressing_style=a.addressing_style, verify=verify) as c:
            if a.cmd == "sync" or (a.cmd in ("cp", "rm") and getattr(a, "recursive", False)):
                return _bulk(c, a, cancel)
            if a.cmd == "cp":
                return _cp(c, a, cancel)
            if a.cmd == "ls":
                return _ls(c, a, cancel)
            if a.cmd in ("mb", "rb"):
                return _bucket_cmd(c, a, a.cmd == "mb")
            return _rm(c, a)
    except TransferCancelled as e:
        if not cancel.cancelled:
            print(f"s3xfer: {_escape(e)}", file=sys.stderr)
        return 1  # after a signal, _run reports it and sets the exit status
    except S3xferError as e:
        print(f"s3xfer: {_escape(e)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `python -m s3xfer ls ... | head`: the reader is gone, stop quietly.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1
    except OSError as e:
        # Any other local failure is one line too, never a traceback.
        print(f"s3xfer: {_escape(e)}", file=sys.stderr)
        return 1


_SIGNALS = [getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]


_CLEANUP_SECONDS = 30


class _Signalled(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_signalled(signum, frame) -> None:
    raise _Signalled(signum)


def _say(text: str) -> None:
    try:
        sys.stderr.write(f"s3xfer: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _run(a, body: Callable[[CancelToken], int]) -> int:
    """Runs the command on a thread of its own while this (the main) thread
    waits for signals, so that SIGINT, SIGTERM and SIGHUP are acted on at
    once: Python runs signal handlers only on the main thread and only
    between bytecodes, never while a blocking C call (a list page, a DELETE
    that a server holds open) is in progress on it.

    A transfer is cancelled through its CancelToken and waited for: it stops
    within about 250 ms and cleans up (its multipart upload aborted, a partial
    file removed); a second signal, or a cleanup still running after
    _CLEANUP_SECONDS (a stalled reader of stdout), ends it at once. Any other
    command ends at once. The exit status is 128 + the first signal's number
    (130 SIGINT, 143 SIGTERM, 129 SIGHUP), as shells expect."""
    cancel = CancelToken()
    outcome: dict = {}
    # Waited on through an Event, not Thread.join(): CPython 3.11 marks a
    # thread as stopped when a signal handler raises inside join()
    # (bpo-45274's fix), and is_alive() would then lie about a transfer still
    # cleaning up.
    done = threading.Event()

    def work() -> None:
        try:
            outcome["rc"] = body(cancel)
        except BaseException as e:  # handed to the main thread
            outcome["exc"] = e
        finally:
            done.set()

    worker = threading.Thread(target=work, name="s3xfer-command", daemon=True)
    saved = {s: signal.signal(s, _raise_signalled) for s in _SIGNALS}
    first = 0
    try:
        try:
            worker.start()
            while not done.wait(0.5):
                pass
        except _Signalled as sig:
            first = sig.signum
            cancel.signum = first  # type: ignore[attr-defined]  # for a --json record
            cancel.cancel()
            if a.cmd in ("cp", "sync") or getattr(a, "recursive", False):
                try:
                    if not done.wait(_CLEANUP_SECONDS):
                        _say(f"the cancelled transfer did not finish its cleanup within {_CLEANUP_SECONDS} s; "
                             "exiting without it")
                        _exit_now(128 + first)
                except _Signalled as again:
                    _say(f"{signal.Signals(again.signum).name} again: exiting without waiting for the "
                         "cancelled transfer to clean up")
                    _exit_now(128 + first)
        if first:
            _say(f"interrupted by {signal.Signals(first).name}")
            if not done.is_set():
                # The command is inside a blocking C call that has nothing to
                # clean up: leave without running the interpreter's shutdown
                # under it.
                _exit_now(128 + first)
            return 128 + first
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    if "exc" in outcome:
        raise outcome["exc"]
    return outcome["rc"]


def _exit_now(code: int) -> None:
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    os._exit(code)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m s3xfer", description="Fast, memory-bounded S3 transfers.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="SIZE is a whole number of bytes with an optional unit: B, KiB, MiB, GiB, TiB (powers of 1024;\n"
               "K, M, G, T mean the same; any case), e.g. 8MiB or 8388608. Fractions, signs and exponents\n"
               "are refused, and so are KB, MB, GB, TB (ambiguous).\n\n"
               "Output: keys, prefixes and server messages are printed with visible escapes for anything\n"
               "a terminal would act on: \\\\ for a backslash, \\n \\r \\t, and \\xHH for each byte of other\n"
               "controls (C0, DEL, C1 U+0080..U+009F as their UTF-8 bytes, bidirectional overrides\n"
               "U+202A..U+202E, U+2066..U+2069) and of invalid UTF-8.\n\n"
               "Exit status: 0 success, 1 failure, 2 usage error, 128+N when ended by signal N (130 SIGINT,\n"
               "143 SIGTERM, 129 SIGHUP). A signal cancels a running transfer and returns after its cleanup\n"
               "(a multipart upload is aborted, a partial download removed); any other command ends at\n"
               "once, and so does a second signal.")
    p.add_argument("--endpoint-url")
    p.add_argument("--region")
    p.add_argument("--profile", help="profile of the shared config/credentials files, resolved through "
                   "the whole credential chain (docs/credentials.md)")
    p.add_argument("--ca-bundle")
    p.add_argument("--no-verify-ssl", action="store_true")
    p.add_argument("--addressing-style", default="auto", choices=["auto", "path", "virtual"])
    p.add_argument("-q", "--quiet", action="store_true")
    sub = p.add_subparsers(dest="cmd", required=True)
    cp = sub.add_parser("cp", help="copy a file (or - for stdin/stdout) to or from s3://bucket/key (a DST "
                        "ending in '/', a bucket alone or a directory gets SRC's base name added); with -r "
                        "a directory or a prefix (docs/bulk.md)")
    sync = sub.add_parser("sync", help="make DST (a directory or s3://bucket/prefix/) hold what SRC holds")
    for sp in (cp, sync):
        sp.add_argument("src")
        sp.add_argument("dst")
    cp.add_argument("-r", "--recursive", action="store_true")
    _bulk_flags(cp)
    _bulk_flags(sync, sync=True)
    _add_transfer_flags(cp)
    _add_transfer_flags(sync)
    for name, helptext in (("ls", "list objects"), ("mb", "make a bucket"), ("rb", "remove an empty bucket"),
                           ("rm", "remove an object; with -r every object under a prefix")):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("url")
        if name != "ls":
            sp.add_argument("--json", action="store_true", help=_JSON_HELP)
        if name == "rm":
            sp.add_argument("-r", "--recursive", action="store_true")
            _bulk_flags(sp, rm=True)
            _add_transfer_flags(sp, json=False)
    a = p.parse_args(argv)
    if a.cmd in ("cp", "rm") and not a.recursive and (a.filters or a.fail_fast or a.dryrun or
                                                      getattr(a, "follow_symlinks", False)):
        p.error("--include, --exclude, --fail-fast, --dryrun and --follow-symlinks apply to cp -r, sync and rm -r")
    if threading.current_thread() is not threading.main_thread():
        # Signal handlers can only be set from the main thread; whoever runs
        # main() elsewhere handles signals.
        return _command(a, CancelToken())
    return _run(a, lambda cancel: _command(a, cancel))


_JSON_HELP = "JSON lines for scripts, as the native tool prints them (s3xfer --help, Output)"


def _add_transfer_flags(cp, json: bool = True) -> None:
    cp.add_argument("--part-size", type=_size, metavar="SIZE")
    cp.add_argument("--concurrency", type=int)
    cp.add_argument("--buffer-strategy", choices=["auto", "buffered", "unbuffered"])
    cp.add_argument("--pool", choices=["bounded", "cache", "malloc"])
    cp.add_argument("--checksum", choices=["none", "crc32c", "crc32", "sha256", "md5"])
    cp.add_argument("--checksum-location", choices=["auto", "header", "trailer"])
    cp.add_argument("--checksum-type", choices=["composite", "full-object"])
    cp.add_argument("--memory-limit", type=_size, metavar="SIZE")
    cp.add_argument("--size-hint", type=_size, metavar="SIZE")
    cp.add_argument("--max-attempts", type=int)
    cp.add_argument("--slow-part-timeout", help="off, dynamic or milliseconds")
    cp.add_argument("--retry-timeout", type=_ms, metavar="MS",
                    help="keep retrying throttling answers this long with no request succeeding")
    cp.add_argument("--retry-mode", choices=["standard", "adaptive"])
    cp.add_argument("--progress", dest="progress", action="store_true", default=None)
    cp.add_argument("--no-progress", dest="progress", action="store_false")
    if json:
        cp.add_argument("--json", action="store_true", help=_JSON_HELP)


if __name__ == "__main__":
    sys.exit(main())
