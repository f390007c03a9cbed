"""Many objects at once: directories up and down, sync, prefix delete and copy.

The work is done by the C bulk layer (s3xfer/bulk.h): one native engine for
the whole run (one connection limit, one memory budget), a streaming walk of
the local tree and a paged listing of the prefix, never held whole. This
module only shapes its reports: a :class:`BulkItem` per object for the
``on_object`` callback, a :class:`BulkSummary` at the end that keeps the
failures only (so that its memory does not grow with the number of objects),
and the raise policy (:class:`~s3xfer.errors.PartialFailureError` when some
objects failed). See docs/bulk.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _core
from .config import TransferConfig
from .errors import InvalidConfigError, PartialFailureError, S3xferError, TransferCancelled, _from_c
from .result import TransferResult

__all__ = ["BulkItem", "BulkSummary", "parse_s3_url"]

_ACTIONS = {
    _core.S3X_BULK_UPLOAD: "upload",
    _core.S3X_BULK_DOWNLOAD: "download",
    _core.S3X_BULK_COPY: "copy",
    _core.S3X_BULK_DELETE_REMOTE: "delete_remote",
    _core.S3X_BULK_DELETE_LOCAL: "delete_local",
    _core.S3X_BULK_SKIP: "skip",
    _core.S3X_BULK_MKDIR: "mkdir",
    _core.S3X_BULK_REFUSED: "refused",
}


@dataclass(frozen=True)
class BulkItem:
    """What happened (or, with ``dryrun``, would happen) to one object.

    ``action``: "upload", "download", "copy", "delete_remote",
    "delete_local", "skip", "mkdir" or "refused"; ``key`` (a copy's source
    key), ``dest_key`` (a copy's destination key), ``path`` (the local path),
    each None where it does not apply; ``size`` (-1 unknown); ``error``: the
    :class:`~s3xfer.errors.S3xferError` it failed with, or None; ``reason``:
    why it was skipped, refused or done ("size differs", "'..' segment"), or
    None; ``result``: the transfer's :class:`TransferResult` (uploads,
    downloads, copies), else None.
    """
    action: str
    key: Optional[str]
    dest_key: Optional[str]
    path: Optional[str]
    size: int
    error: Optional[S3xferError] = None
    reason: Optional[str] = None
    result: Optional[TransferResult] = None

    @property
    def ok(self) -> bool:
        """False when the object failed or was refused."""
        return self.error is None and self.action != "refused"

    @classmethod
    def _from_c(cls, d: Dict[str, Any]) -> "BulkItem":
        err = d["error"]
        key, dest_key = d["key"], d["dest_key"]
        return cls(action=_ACTIONS.get(d["action"], str(d["action"])), key=key, dest_key=dest_key,
                   path=d["path"], size=d["size"], error=_from_c(*err) if err is not None else None,
                   reason=d["reason"], result=TransferResult._from_c(d["result"]) if d["result"] else None)


@dataclass
class BulkSummary:
    """Counts of a whole run (so far, for a progress callback; final, as the
    return value). ``objects_found``: objects planned (final once
    ``listing_done``); ``objects_done``: transferred, copied or deleted;
    ``objects_skipped``: up to date (or excluded and reported);
    ``objects_failed``: failed or refused; ``bytes_found``, ``bytes_done``;
    ``seconds``; ``requests`` and ``retries`` (listing and deletes included);
    ``peak_buffer_bytes`` and ``budget`` (the memory budget in force).
    ``failures``: a :class:`BulkItem` for each failed or refused object (only
    those: a run over a million objects keeps no record of the others; use
    ``on_object`` to see every one)."""
    objects_found: int = 0
    listing_done: bool = False
    objects_done: int = 0
    objects_skipped: int = 0
    objects_failed: int = 0
    bytes_found: int = 0
    bytes_done: int = 0
    seconds: float = 0.0
    requests: int = 0
    retries: int = 0
    peak_buffer_bytes: int = 0
    budget: int = 0
    failures: List[BulkItem] = field(default_factory=list)

    @classmethod
    def _from_c(cls, d: Dict[str, Any], failures: Optional[List[BulkItem]] = None) -> "BulkSummary":
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name != "failures"}, failures=failures or [])

    def __repr__(self) -> str:
        return (f"BulkSummary(found={self.objects_found}, done={self.objects_done}, "
                f"skipped={self.objects_skipped}, failed={self.objects_failed}, bytes={self.bytes_done}, "
                f"seconds={self.seconds:.3f}, requests={self.requests}, retries={self.retries})")


Filters = Sequence[Tuple[str, str]]


def _filters(include: Union[str, Iterable[str]], exclude: Union[str, Iterable[str]],
             filters: Optional[Filters]) -> List[Tuple[bool, str]]:
    """The filter list in the order the C layer applies it (last match wins)."""
    if isinstance(include, str):
        include = (include,)
    if isinstance(exclude, str):
        exclude = (exclude,)
    include, exclude = list(include), list(exclude)
    if filters is not None:
        if include or exclude:
            raise InvalidConfigError("give either filters=[...] or include=/exclude=, not both", errno=-1)
        out = []
        for f in filters:
            try:
                kind, pattern = f
            except (TypeError, ValueError):
                raise InvalidConfigError(f"a filter is a pair (\"include\"|\"exclude\", pattern), got {f!r}",
                                         errno=-1) from None
            if kind not in ("include", "exclude"):
                raise InvalidConfigError(f"a filter's kind is \"include\" or \"exclude\", got {kind!r}", errno=-1)
            out.append((kind == "include", pattern))
        return out
    # Separate lists have no order of their own: excludes first, so that
    # include= re-admits what exclude= took out (exclude="*", include="*.txt"),
    # the usual intent.
    return [(False, p) for p in exclude] + [(True, p) for p in include]


def parse_s3_url(url: str) -> Optional[Tuple[str, str]]:
    """("bucket", "prefix/") for "s3://bucket/prefix", None for anything else.
    As with the CLI (and the AWS CLI), a URL names a "folder": a non-empty
    prefix without a trailing '/' gets one, so s3://b/logs never matches
    "logs2/x"."""
    if not isinstance(url, str) or not url.startswith("s3://"):
        return None
    bucket, _, prefix = url[5:].partition("/")
    if not bucket:
        raise InvalidConfigError(f"{url!r} has no bucket: expected s3://bucket/prefix/", errno=-1)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return bucket, prefix


def _fs(path) -> str:
    return os.fsdecode(os.fspath(path))


def run(client, op: int, args: Sequence[Optional[str]], *, include=(), exclude=(), filters=None,
        follow_symlinks: bool = False, delete: bool = False, dryrun: bool = False, exact: bool = False,
        config: Optional[TransferConfig] = None, fail_fast: bool = False,
        on_object: Optional[Callable[[BulkItem], Any]] = None,
        progress: Optional[Callable[[BulkSummary], Any]] = None, cancel=None) -> BulkSummary:
    """Runs one bulk operation (Client.upload_dir and the others call this)."""
    cfg = config or TransferConfig()
    knobs: Dict[int, int] = dict(cfg.knobs("upload"))
    knobs.update(cfg.knobs("download"))
    knobs[_core.S3X_PARAM_FAIL_FAST] = 1 if fail_fast else 0
    flags = ((_core.S3X_BULK_FOLLOW_SYMLINKS if follow_symlinks else 0)
             | (_core.S3X_BULK_SYNC_DELETE if delete else 0)
             | (_core.S3X_BULK_DRYRUN if dryrun else 0)
             | (_core.S3X_BULK_EXACT if exact else 0))
    flist = _filters(include, exclude, filters)
    failures: List[BulkItem] = []

    def item_cb(d: Dict[str, Any]) -> None:
        # The token is checked here too: an object's report comes sooner
        # than the next progress call in a run of many small objects.
        if cancel is not None and cancel.cancelled:
            raise TransferCancelled("bulk run cancelled through its CancelToken", errno=-11)
        failed = d["rc"] != 0 or d["action"] == _core.S3X_BULK_REFUSED
        if not failed and on_object is None:
            return
        item = BulkItem._from_c(d)
        if failed:
            failures.append(item)
        if on_object is not None:
            on_object(item)

    progress_cb = None
    if progress is not None or cancel is not None:
        def progress_cb(d: Dict[str, Any]) -> None:
            if cancel is not None and cancel.cancelled:
                raise TransferCancelled("bulk run cancelled through its CancelToken", errno=-11)
            if progress is not None:
                progress(BulkSummary._from_c(d))

    a = list(args) + [None] * (4 - len(args))
    with client._handle() as h, client._transferring(h):
        rc, summary_d, err, cb_exc = _core.py_bulk_run(h, op, a[0], a[1], a[2], a[3], knobs, flags, flist,
                                                       item_cb, progress_cb)
    summary = BulkSummary._from_c(summary_d, failures)
    if cb_exc is not None:
        # A callback raised (or a CancelToken was cancelled): the run was
        # cancelled, its in-flight uploads aborted; that exception wins.
        try:
            cb_exc.summary = summary
        except AttributeError:
            pass
        raise cb_exc
    if rc == 0:
        return summary
    exc = _from_c(*err)
    if isinstance(exc, PartialFailureError):
        n = summary.objects_failed
        exc.message = (f"{n} of {summary.objects_found} object{'s' if summary.objects_found != 1 else ''} "
                       f"failed" + (f"; first: {_describe(failures[0])}" if failures else ""))
        exc.args = (exc.message,)
    exc.summary = summary
    raise exc


def _describe(item: BulkItem) -> str:
    what = item.key if item.key is not None else item.path
    why = str(item.error) if item.error is not None else ""
    if item.reason and item.reason not in why:
        why = f"{why} ({item.reason})" if why else item.reason
    return f"{item.action} {what!r}: {why}"
