"""A transfer manager: many uploads and downloads on one native batch."""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import Any, Callable, Dict, Optional, Union

from . import _core
from .config import TransferConfig
from .errors import InvalidConfigError
from .result import TransferResult

ProgressFn = Callable[[int], Any]


class TransferFuture(concurrent.futures.Future):
    """The future of one transfer of a :class:`TransferManager`.

    ``result()`` returns its :class:`TransferResult` or raises its error
    (an exception raised by its progress callback is re-raised here).
    ``cancel()`` asks the engine to stop it: the future is cancelled at once,
    and the transfer's cleanup (aborting a multipart upload, removing a
    temporary file) is finished before the manager's ``shutdown`` returns.
    """

    def __init__(self, manager: "TransferManager", bucket: str, key: str):
        super().__init__()
        self._manager = manager
        self._id = 0
        self.bucket = bucket
        self.key = key

    @property
    def transfer_id(self) -> int:
        return self._id

    def cancel(self) -> bool:
        if self.done():
            return False
        self._manager._cancel(self._id)
        return super().cancel()

    def __repr__(self) -> str:
        return f"<TransferFuture s3://{self.bucket}/{self.key} id={self._id} {self._state}>"


class TransferManager:
    """Runs many transfers at once on one native engine: one loop (a thread of
    the engine's own, the GIL released while it works), one connection limit
    (``config.concurrency`` requests in flight for all transfers together) and
    one memory budget (``config.memory_limit`` bytes of part buffers for all
    of them; by default (concurrency + 1) x part_size). Transfers are fed
    fairly: a large object does not hold every connection while small ones
    wait. Pool kind "cache" reuses part buffers from one transfer to the next.

    Use it as a context manager; leaving the block waits for every transfer
    (on an exception in the block, the transfers still running are cancelled
    first). ``fail_fast=True`` cancels every other transfer at the first
    failure.

    It uses a connection handle of its own, so the :class:`Client` it came
    from stays usable meanwhile.
    """

    def __init__(self, client, config: Optional[TransferConfig] = None, fail_fast: bool = False):
        self._client = client
        self.config = config or TransferConfig()
        knobs: Dict[int, int] = dict(self.config.knobs("upload"))
        knobs.update(self.config.knobs("download"))
        knobs[_core.S3X_PARAM_FAIL_FAST] = 1 if fail_fast else 0
        self._handle = client._new_handle()
        try:
            self._batch = _core.py_batch_new(self._handle, knobs)
        except BaseException:
            _core.py_client_free(self._handle)
            raise
        self._lock = threading.Lock()
        self._futures: Dict[int, TransferFuture] = {}
        self._closed = False

    # -- adding ---------------------------------------------------------------
    def _add(self, upload: bool, obj, bucket: str, key: str, progress: Optional[ProgressFn]) -> TransferFuture:
        with self._lock:
            if self._closed:
                raise InvalidConfigError("the transfer manager is shut down", errno=-1)
            fut = TransferFuture(self, bucket, key)
            # The done callback can run before add returns the id: it finds
            # the future through this holder.
            holder = [fut]
            tid = _core.py_batch_add(self._batch, 1 if upload else 0, bucket, key, obj,
                                     lambda i, exc, res, h=holder: self._done(h[0], exc, res),
                                     _progress_adapter(progress))
            fut._id = tid
            self._futures[tid] = fut
        return fut

    def upload(self, source: Union[str, os.PathLike, bytes, bytearray, memoryview, Any], bucket: str, key: str,
               progress: Optional[ProgressFn] = None) -> TransferFuture:
        """Uploads a file (a path), a bytes-like object (not copied; keep it
        unchanged until the future is done) or a binary file object read to
        its end. Returns a :class:`TransferFuture`."""
        if isinstance(source, (str, os.PathLike)) and not isinstance(source, (bytes, bytearray)):
            source = os.fsdecode(os.fspath(source))
        elif not isinstance(source, (bytes, bytearray, memoryview)):
            if not hasattr(source, "readinto"):
                raise TypeError("source must be a path, a bytes-like object or a file object with readinto()")
        return self._add(True, source, bucket, key, progress)

    def download(self, bucket: str, key: str, dest: Union[str, os.PathLike, bytearray, memoryview, Any],
                 progress: Optional[ProgressFn] = None) -> TransferFuture:
        """Downloads into a file (a path: renamed into place when complete), a
        writable buffer (``result.bytes`` tells how much was filled) or a
        binary file object with ``write()`` (in order)."""
        if isinstance(dest, (str, os.PathLike)):
            dest = os.fsdecode(os.fspath(dest))
        elif isinstance(dest, (bytearray, memoryview)):
            dest = memoryview(dest).cast("B")
        elif not hasattr(dest, "write"):
            raise TypeError("dest must be a path, a writable buffer or a file object with write()")
        return self._add(False, dest, bucket, key, progress)

    def copy(self, src_bucket: str, src_key: str, dst_bucket: str, dst_key: str,
             metadata_directive: str = "COPY", content_type: Optional[str] = None,
             progress: Optional[ProgressFn] = None) -> TransferFuture:
        """Server-side copy on the batch (see Client.copy); takes none of the
        memory budget. Returns a :class:`TransferFuture`."""
        directive = {"COPY": _core.S3X_METADATA_COPY, "REPLACE": _core.S3X_METADATA_REPLACE}.get(
            str(metadata_directive).upper())
        if directive is None:
            raise ValueError(f"metadata_directive must be 'COPY' or 'REPLACE', not {metadata_directive!r}")
        with self._lock:
            if self._closed:
                raise InvalidConfigError("the transfer manager is shut down", errno=-1)
            fut = TransferFuture(self, dst_bucket, dst_key)
            holder = [fut]
            tid = _core.py_batch_copy(self._batch, src_bucket, src_key, dst_bucket, dst_key, directive,
                                      content_type, lambda i, exc, res, h=holder: self._done(h[0], exc, res),
                                      _progress_adapter(progress))
            fut._id = tid
            self._futures[tid] = fut
        return fut

    # -- completion -------------------------------------------------------------
    def _done(self, fut: TransferFuture, exc, res) -> None:
        with self._lock:
            self._futures.pop(fut._id, None)
        if fut.cancelled():
            return
        try:
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(TransferResult._from_c(res))
        except concurrent.futures.InvalidStateError:
            pass  # cancelled meanwhile

    def _cancel(self, tid: int) -> None:
        if not self._closed:
            _core.py_batch_cancel(self._batch, tid)

    # -- control ------------------------------------------------------------------
    def cancel_all(self) -> None:
        """Cancels every transfer queued or running."""
        with self._lock:
            if self._closed:
                return
            futs = list(self._futures.values())
        _core.py_batch_cancel_all(self._batch)
        for f in futs:
            concurrent.futures.Future.cancel(f)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until every transfer added so far has finished (True), or
        timeout seconds (False)."""
        if self._closed:
            return True
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        return bool(_core.py_batch_wait(self._batch, ms))

    @property
    def stats(self) -> Dict[str, int]:
        """Counts for the whole manager: added, finished, failed, running,
        bytes, budget, peak_buffer_bytes (all transfers together),
        buffer_waits."""
        if self._closed:
            return dict(self._final_stats)
        return _core.py_batch_stats(self._batch)

    def fileno(self) -> int:
        """A descriptor that becomes readable when a transfer finishes (for an
        event loop's reader); call :meth:`ack` after it did."""
        return _core.py_batch_fd(self._batch)

    def ack(self) -> None:
        _core.py_batch_ack(self._batch)

    def shutdown(self, cancel: bool = False) -> None:
        """Waits for every transfer (after cancelling them if ``cancel``), then
        frees the engine. Idempotent."""
        with self._lock:
            if self._closed:
                return
        if cancel:
            self.cancel_all()
        while not self.wait(0.2):
            pass
        with self._lock:
            self._closed = True
            self._final_stats = _core.py_batch_stats(self._batch)
        _core.py_batch_free(self._batch)
        _core.py_client_free(self._handle)

    def __enter__(self) -> "TransferManager":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.shutdown(cancel=exc_type is not None)

    def __del__(self):
        try:
            self.shutdown(cancel=True)
        except Exception:
            pass


def _progress_adapter(progress: Optional[ProgressFn]):
    """boto3's Callback contract (bytes since the last call) from C's (done, total)."""
    if progress is None:
        return None
    last = [0]

    def cb(done: int, total: int) -> None:
        delta = done - last[0]
        last[0] = done
        if delta:
            progress(delta)
    return cb
