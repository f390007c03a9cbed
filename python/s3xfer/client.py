"""The s3xfer Client."""

from __future__ import annotations

import hashlib
import os
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _core
from .config import TransferConfig
from .errors import InvalidConfigError, MalformedResponseError, TransferCancelled
from .result import TransferResult

if TYPE_CHECKING:  # bulk is imported on first use, so `import s3xfer` stays quick
    from .bulk import BulkSummary  # noqa: F401

ProgressFn = Callable[[int], Any]

BytesLike = Union[bytes, bytearray, memoryview]

_ADDRESSING = {"auto": _core.S3X_ADDRESSING_AUTO, "path": _core.S3X_ADDRESSING_PATH,
               "virtual": _core.S3X_ADDRESSING_VIRTUAL}

_SIGNING = {"auto": _core.S3X_PAYLOAD_AUTO, "signed": _core.S3X_PAYLOAD_SIGNED,
            "unsigned": _core.S3X_PAYLOAD_UNSIGNED}

_STRING_OPTS = {
    "endpoint_url": _core.S3X_CLIENT_ENDPOINT_URL,
    "region": _core.S3X_CLIENT_REGION,
    "access_key": _core.S3X_CLIENT_ACCESS_KEY,
    "secret_key": _core.S3X_CLIENT_SECRET_KEY,
    "session_token": _core.S3X_CLIENT_SESSION_TOKEN,
    "profile": _core.S3X_CLIENT_PROFILE,
    "ca_bundle": _core.S3X_CLIENT_CA_BUNDLE,
}


class Client:
    """A connection to an S3-compatible endpoint.

    Every argument is optional; unset ones come from the standard AWS
    environment (``AWS_ENDPOINT_URL``, ``AWS_REGION``/``AWS_DEFAULT_REGION``,
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``,
    ``AWS_PROFILE`` and the shared credentials/config files, ``AWS_CA_BUNDLE``).

    Args:
        endpoint_url: ``http://host:port`` or ``https://host``.
        region: signing region (default ``us-east-1``).
        access_key, secret_key, session_token: explicit credentials.
        profile: a profile of the shared config/credentials files, resolved
            through the whole provider chain (static keys, role_arn with
            source_profile or credential_source, web identity,
            SSO, credential_process): see docs/credentials.md.
        addressing_style: ``"auto"`` (botocore's rules with the profile's s3
            addressing_style: path-style for configured endpoints,
            virtual-hosted on AWS when the bucket name allows; see
            docs/endpoints.md), ``"path"`` or ``"virtual"`` (strict: a name
            that cannot be a host label is refused).
        verify: ``True`` (system CAs), ``False`` (no TLS verification) or the
            path of a CA bundle.
        payload_signing: ``"auto"`` (bodies that carry a checksum header go
            UNSIGNED-PAYLOAD, others are hashed into the signature),
            ``"signed"`` or ``"unsigned"``.
        max_attempts: attempts of each single operation (``put_object``,
            ``get_object``, ``head_object``, listing, deletes, multipart calls),
            1 .. 100 (default 5). A throttling answer (503 SlowDown, 429, 500),
            another retryable status or a broken connection is retried with
            jittered backoff, honouring Retry-After; 403, 404 and the like are not.
        retry_timeout: ms (default 120000) a single operation keeps retrying
            throttling answers whatever ``max_attempts`` says; 0 = throttling is
            retried ``max_attempts`` times like other errors.
        receive_threads: threads that receive the ranges of downloads,
            0 .. 8. 0 (the default) is auto: one for every two CPUs this
            process may use (affinity mask, cgroup CPU limit), 1 .. 8, so 1
            on 2 or 3 CPUs. 1: all on the thread running the transfer.
            With N > 1, N - 1 more threads per native
            handle, each with connections of its own, take ranges as they
            start; ``download_file`` keeps one over plain http (it uses the N
            over https). See docs/performance.md.
        Transfers (``upload_file``, ...) take these knobs from their
        :class:`TransferConfig` instead.

    A Client may be shared by threads: each call borrows a native handle of its
    own (created on demand and kept for reuse), so calls from different threads
    run in parallel. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, endpoint_url: Optional[str] = None, region: Optional[str] = None,
                 access_key: Optional[str] = None, secret_key: Optional[str] = None,
                 session_token: Optional[str] = None, profile: Optional[str] = None,
                 addressing_style: str = "auto", verify: Union[bool, str] = True,
                 payload_signing: str = "auto", max_attempts: Optional[int] = None,
                 retry_timeout: Optional[int] = None, receive_threads: Optional[int] = None):
        if addressing_style not in _ADDRESSING:
            raise InvalidConfigError(
                f"addressing_style must be one of {sorted(_ADDRESSING)}, got {addressing_style!r}",
                errno=-1)
        if payload_signing not in _SIGNING:
            raise InvalidConfigError(
                f"payload_signing must be one of {sorted(_SIGNING)}, got {payload_signing!r}", errno=-1)
        ca_bundle = None
        if isinstance(verify, (str, os.PathLike)):
            ca_bundle = os.fspath(verify)
            verify = True
        elif not isinstance(verify, bool):
            raise InvalidConfigError("verify must be True, False or a CA bundle path", errno=-1)
        self._strings = {"endpoint_url": endpoint_url, "region": region, "access_key": access_key,
                         "secret_key": secret_key, "session_token": session_token,
                         "profile": profile, "ca_bundle": ca_bundle}
        self._params = {_core.S3X_PARAM_ADDRESSING_STYLE: _ADDRESSING[addressing_style],
                        _core.S3X_PARAM_VERIFY_TLS: 1 if verify else 0,
                        _core.S3X_PARAM_PAYLOAD_SIGNING: _SIGNING[payload_signing]}
        # Bounds are checked by the C setter (the message names the knob).
        if max_attempts is not None:
            self._params[_core.S3X_PARAM_MAX_ATTEMPTS] = max_attempts
        if retry_timeout is not None:
            self._params[_core.S3X_PARAM_RETRY_TIMEOUT] = retry_timeout
        if receive_threads is not None:
            self._params[_core.S3X_PARAM_RECEIVE_THREADS] = receive_threads
        self._lock = threading.Lock()
        self._idle: List[Any] = []
        self._closed = False
        # The handle a transfer running on this thread uses: its progress
        # callback runs on the same thread and reads that handle's throttling.
        self._transfer = threading.local()
        # Resolve once now so configuration errors surface at construction.
        handle = self._new_handle()
        self.endpoint_url, self.region = _core.py_client_resolve(handle)
        #: Which credential provider supplied the keys (botocore's names:
        #: "explicit", "env", "assume-role", "assume-role-with-web-identity",
        #: "shared-credentials-file", "custom-process", "config-file",
        #: "container-role", "iam-role", "sso"); never the keys themselves.
        self.credentials_source: str = _core.py_client_credentials(handle)[0]
        self._idle.append(handle)

    # -- handles ----------------------------------------------------------
    def _new_handle(self):
        h = _core.py_client_new()
        try:
            for name, value in self._strings.items():
                if value is not None:
                    _core.py_client_set_string(h, _STRING_OPTS[name], value)
            for pid, value in self._params.items():
                _core.py_client_set(h, pid, value)
        except BaseException:
            _core.py_client_free(h)
            raise
        return h

    @contextmanager
    def _handle(self) -> Iterator[Any]:
        with self._lock:
            if self._closed:
                raise InvalidConfigError("the client is closed", errno=-1)
            h = self._idle.pop() if self._idle else None
        if h is None:
            h = self._new_handle()
        try:
            yield h
        finally:
            with self._lock:
                if self._closed:
                    _core.py_client_free(h)
                else:
                    self._idle.append(h)

    def close(self) -> None:
        """Closes every connection. The client cannot be used afterwards."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for h in idle:
            _core.py_client_free(h)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return (f"s3xfer.Client(endpoint_url={self.endpoint_url!r}, region={self.region!r}, "
                f"credentials_source={self.credentials_source!r})")

    def _resolve_url(self, bucket: str, key: Optional[str] = None) -> str:
        """The URL a request for ``bucket`` (and ``key``) would go to, built
        as every request's URL is, without sending anything (a debugging
        aid; the request is signed for :attr:`region`)."""
        with self._handle() as h:
            return _core.py_client_request_url(h, bucket, key)

    @property
    def credentials_refreshes(self) -> int:
        """How many times temporary credentials were refreshed before they
        expired, summed over the native handles not in use right now."""
        with self._lock:
            return sum(_core.py_client_credentials(h)[1] for h in self._idle)

    @property
    def credentials_expiry(self) -> Optional[float]:
        """When the current temporary credentials expire (seconds since the
        epoch), or None for keys that do not expire."""
        with self._lock:
            exp = [_core.py_client_credentials(h)[2] for h in self._idle]
        exp = [e for e in exp if e]
        return min(exp) if exp else None

    def transfer_manager(self, config: Optional[TransferConfig] = None,
                         fail_fast: bool = False) -> "TransferManager":
        """A :class:`TransferManager`: many uploads and downloads at once on one
        engine, returning futures. Use it as a context manager::

            with client.transfer_manager(TransferConfig(concurrency=16)) as tm:
                futures = [tm.upload(p, "bucket", p) for p in paths]
            for f in futures:
                f.result()
        """
        from .manager import TransferManager
        return TransferManager(self, config, fail_fast=fail_fast)

    # -- buckets -----------------------------------------------------------
    def create_bucket(self, bucket: str) -> None:
        """Creates a bucket (with a LocationConstraint outside us-east-1)."""
        with self._handle() as h:
            _core.py_create_bucket(h, bucket)

    def delete_bucket(self, bucket: str) -> None:
        """Deletes an empty bucket."""
        with self._handle() as h:
            _core.py_delete_bucket(h, bucket)

    def head_bucket(self, bucket: str) -> None:
        """Raises NoSuchBucket (or another ClientError) unless the bucket is reachable."""
        with self._handle() as h:
            _core.py_head_bucket(h, bucket)

    # -- objects -------------------------------------------------------------
    def put_object(self, bucket: str, key: str, body: BytesLike = b"",
                   content_type: Optional[str] = None) -> str:
        """Uploads ``body`` in one PutObject request and returns the ETag."""
        if isinstance(body, str):
            raise TypeError("body must be bytes-like, not str")
        with self._handle() as h:
            return _core.py_put_object(h, bucket, key, body, content_type)

    def get_object(self, bucket: str, key: str, range: Optional[Tuple[int, Optional[int]]] = None
                   ) -> Tuple[bytes, Dict[str, Any]]:
        """Downloads an object (or the inclusive byte ``range`` (start, end)).

        Returns ``(data, info)`` where info has ``size`` (of the whole object),
        ``etag``, ``last_modified``, ``content_type``, ``version_id``.

        The body is held in memory, so it is capped (1 GiB, the C library's
        S3X_GET_OBJECT_MAX_BYTES): a larger object or range raises
        LimitExceededError before it is read; use :meth:`download_file`,
        :meth:`download_fileobj` or :meth:`download_into`, whose memory is
        bounded, for those.
        """
        start, end = -1, -1
        if range is not None:
            start, end = range[0], (-1 if range[1] is None else range[1])
        with self._handle() as h:
            return _core.py_get_object(h, bucket, key, start, end)

    def head_object(self, bucket: str, key: str) -> Dict[str, Any]:
        """Returns the object's ``size``, ``etag``, ``last_modified``, ``content_type``."""
        with self._handle() as h:
            return _core.py_head_object(h, bucket, key)

    def delete_object(self, bucket: str, key: str) -> None:
        """Deletes an object (no error if it does not exist, as in S3)."""
        with self._handle() as h:
            _core.py_delete_object(h, bucket, key)

    def list_objects_page(self, bucket: str, prefix: str = "", delimiter: str = "",
                          continuation_token: Optional[str] = None, max_keys: int = 0) -> Dict[str, Any]:
        """One ListObjectsV2 page: ``objects``, ``prefixes``, ``is_truncated``, ``next_token``."""
        with self._handle() as h:
            return _core.py_list_objects(h, bucket, prefix or None, delimiter or None,
                                         continuation_token, max_keys)

    def iter_objects(self, bucket: str, prefix: str = "", delimiter: str = "",
                     max_keys: int = 0) -> Iterator[Dict[str, Any]]:
        """Yields every object under ``prefix`` page by page, following
        continuation tokens (entries as in :meth:`list_objects`).

        A server that hands back a continuation token it gave before would
        make the listing loop forever: that raises MalformedResponseError, as
        does a page marked truncated that carries no token (stopping there
        would pass a partial listing off as complete). A server can still
        page forever with new tokens; stop that with Ctrl-C, or by not
        consuming the iterator.
        """
        seen = set()
        token = None
        pages = 0
        while True:
            page = self.list_objects_page(bucket, prefix, delimiter, token, max_keys)
            pages += 1
            yield from page["objects"]
            yield from ({"prefix": p} for p in page["prefixes"])
            if not page["is_truncated"]:
                return
            token = page["next_token"]
            if not token:
                raise MalformedResponseError(
                    f"ListObjectsV2 s3://{bucket}: page {pages} is truncated but carries no continuation "
                    "token; the listing cannot go on and would be incomplete", errno=-9)
            # Tokens are kept as digests so a listing of millions of pages
            # holds 16 bytes per page, whatever the server's tokens weigh.
            digest = hashlib.blake2b(token.encode("utf-8", "surrogateescape"), digest_size=16).digest()
            if digest in seen:
                shown = token if len(token) <= 64 else token[:64] + "..."
                raise MalformedResponseError(
                    f"ListObjectsV2 s3://{bucket}: the server returned continuation token {shown!r} a second "
                    f"time (page {pages}); listing stopped, it would never end", errno=-9)
            seen.add(digest)

    def list_objects(self, bucket: str, prefix: str = "", delimiter: str = "",
                     max_keys: int = 0) -> List[Dict[str, Any]]:
        """Every object under ``prefix`` (following continuation tokens).

        Each entry has ``key``, ``size``, ``etag``, ``last_modified``. With a
        delimiter, common prefixes are returned as entries with only ``prefix``.
        A repeated continuation token raises MalformedResponseError (see
        :meth:`iter_objects`, which yields the same entries as pages arrive).

        Keys and prefixes that are not valid UTF-8 (S3 never stores such
        keys, but a server can send anything) come back decoded with
        ``surrogateescape``, as ``os.listdir`` does for file names: passing
        such a key back to ``get_object``, ``delete_object`` etc. addresses
        the same bytes, and distinct keys stay distinct.
        """
        return list(self.iter_objects(bucket, prefix, delimiter, max_keys))

    # -- multipart primitives ---------------------------------------------------
    def create_multipart_upload(self, bucket: str, key: str, content_type: Optional[str] = None) -> str:
        """Starts a multipart upload and returns its upload id."""
        with self._handle() as h:
            return _core.py_create_multipart_upload(h, bucket, key, content_type)

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                    body: BytesLike) -> str:
        """Uploads one part and returns its ETag."""
        with self._handle() as h:
            return _core.py_upload_part(h, bucket, key, upload_id, part_number, body)

    def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                  parts: Sequence[Tuple[int, str]]) -> str:
        """Completes an upload from ``(part_number, etag)`` pairs; returns the object's ETag."""
        with self._handle() as h:
            return _core.py_complete_multipart_upload(h, bucket, key, upload_id, list(parts))

    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """Aborts a multipart upload and frees its parts."""
        with self._handle() as h:
            _core.py_abort_multipart_upload(h, bucket, key, upload_id)

    def list_parts(self, bucket: str, key: str, upload_id: str) -> List[Dict[str, Any]]:
        """Every uploaded part: ``part_number``, ``size``, ``etag``."""
        with self._handle() as h:
            return _core.py_list_parts(h, bucket, key, upload_id)

    def list_multipart_uploads(self, bucket: str, prefix: str = "") -> List[Dict[str, Any]]:
        """Every multipart upload in progress: ``key``, ``upload_id``, ``initiated``."""
        with self._handle() as h:
            return _core.py_list_multipart_uploads(h, bucket, prefix or None)

    # -- managed transfers ------------------------------------------------------
    @contextmanager
    def _transferring(self, h) -> Iterator[None]:
        self._transfer.handle = h
        try:
            yield
        finally:
            self._transfer.handle = None

    def throttle_state(self) -> Dict[str, Any]:
        """Whether the server is throttling this client now (the adaptive
        request rate, docs/reliability.md): ``active`` (bool), ``rate`` (requests/s
        allowed while active, else 0), ``throttles`` (throttling answers seen),
        ``seconds`` (since the rate last switched on, else 0) and
        ``seconds_total`` (time throttled in all). Called from a transfer's
        progress callback, it describes the connections that transfer uses;
        elsewhere, those the last transfer used. Cheap enough for every call."""
        h = getattr(self._transfer, "handle", None)
        if h is not None:
            return _core.py_client_throttle_state(h)
        with self._lock:
            if self._closed:
                raise InvalidConfigError("the client is closed", errno=-1)
            if self._idle:
                return _core.py_client_throttle_state(self._idle[-1])
        return {"active": False, "rate": 0.0, "throttles": 0, "seconds": 0.0, "seconds_total": 0.0}

    @staticmethod
    def _progress(progress: Optional[ProgressFn], cancel: Optional["CancelToken"] = None):
        """Adapts boto3's Callback contract (bytes since the last call) to C's
        (done, total), and checks the cancel token on every call (the C side
        calls at least every 250 ms)."""
        if progress is None and cancel is None:
            return None
        last = [0]

        def cb(done: int, total: int) -> None:
            if cancel is not None and cancel.cancelled:
                raise TransferCancelled("transfer cancelled through its CancelToken", errno=-11)
            delta = done - last[0]
            last[0] = done
            # A callable marked `heartbeat` is also called with 0 (at least every
            # 250 ms): python -m s3xfer --json reports throttling while no byte moves.
            if progress is not None and (delta or getattr(progress, "heartbeat", False)):
                progress(delta)
        return cb

    def _upload(self, source, bucket: str, key: str, config: Optional[TransferConfig],
                progress: Optional[ProgressFn], cancel: Optional["CancelToken"]) -> TransferResult:
        knobs = (config or TransferConfig()).knobs("upload")
        with self._handle() as h, self._transferring(h):
            return TransferResult._from_c(_core.py_upload(h, bucket, key, source, knobs,
                                                          self._progress(progress, cancel)))

    def upload_file(self, filename: Union[str, os.PathLike], bucket: str, key: str,
                    config: Optional[TransferConfig] = None,
                    progress: Optional[ProgressFn] = None,
                    cancel: Optional["CancelToken"] = None) -> TransferResult:
        """Uploads a file with the upload manager (multipart above the threshold).

        ``progress`` is called with the number of bytes done since its last
        call (boto3's Callback contract; ``tqdm.update`` works as is). If it
        raises, the transfer is cancelled, the multipart upload aborted, and
        the exception re-raised here. ``cancel`` (a :class:`CancelToken`) lets
        another thread stop the transfer: it then raises TransferCancelled
        within about 250 ms, after the same cleanup. A file that changes
        during the upload fails it with SourceChangedError.
        """
        # fsdecode: a bytes path must not be taken for the bytes to upload.
        return self._upload(os.fsdecode(os.fspath(filename)), bucket, key, config, progress, cancel)

    def upload_fileobj(self, fileobj, bucket: str, key: str, config: Optional[TransferConfig] = None,
                       progress: Optional[ProgressFn] = None,
                       cancel: Optional["CancelToken"] = None) -> TransferResult:
        """Uploads everything read from a binary file object (``readinto`` or ``read``).

        The object is read sequentially until EOF (its length need not be
        known; pipes work); parts are buffered. Bytes-like objects are sent
        from memory without copying.

        ``readinto`` is given a writable memoryview of at most 1 MiB over a
        buffer of s3xfer's own, copied into the part afterwards, never a view
        of the transfer's part buffers: keeping it (or a slice of it) is safe,
        it is simply not reused.
        """
        if isinstance(fileobj, (bytes, bytearray, memoryview)):
            return self._upload(fileobj, bucket, key, config, progress, cancel)
        if not hasattr(fileobj, "readinto"):
            if not hasattr(fileobj, "read"):
                raise TypeError("fileobj must have readinto() or read()")
            fileobj = _ReadIntoAdapter(fileobj)
        return self._upload(fileobj, bucket, key, config, progress, cancel)

    def upload_bytes(self, data: BytesLike, bucket: str, key: str, config: Optional[TransferConfig] = None,
                     progress: Optional[ProgressFn] = None,
                     cancel: Optional["CancelToken"] = None) -> TransferResult:
        """Uploads a bytes-like object with the upload manager (no copy unless buffered)."""
        return self._upload(data, bucket, key, config, progress, cancel)

    def copy(self, src_bucket: str, src_key: str, dst_bucket: str, dst_key: str,
             config: Optional[TransferConfig] = None, metadata_directive: str = "COPY",
             content_type: Optional[str] = None, progress: Optional[ProgressFn] = None,
             cancel: Optional["CancelToken"] = None) -> TransferResult:
        """Server-side copy: the bytes never pass through this machine.

        Below ``config.multipart_threshold`` one CopyObject, above it
        UploadPartCopy ranges of ``config.part_size`` in parallel (objects
        over 5 GiB work). ``metadata_directive`` "COPY" keeps the source's
        content type and user metadata; "REPLACE" gives the copy
        ``content_type`` and no user metadata. A source replaced during the
        copy fails it with SourceChangedError; a failed or cancelled
        multipart copy is aborted. A missing source raises the NoSuchKey error.
        """
        directive = {"COPY": _core.S3X_METADATA_COPY, "REPLACE": _core.S3X_METADATA_REPLACE}.get(
            str(metadata_directive).upper())
        if directive is None:
            raise ValueError(f"metadata_directive must be 'COPY' or 'REPLACE', not {metadata_directive!r}")
        knobs = (config or TransferConfig()).knobs("upload")
        with self._handle() as h, self._transferring(h):
            return TransferResult._from_c(_core.py_copy(h, src_bucket, src_key, dst_bucket, dst_key, directive,
                                                        content_type, knobs, self._progress(progress, cancel)))

    def delete_objects(self, bucket: str, keys: Sequence[str]) -> List[Dict[str, Any]]:
        """Deletes keys with DeleteObjects, up to 1,000 per request (more keys
        are sent in several requests). Returns one dict per key, in the order
        given: ``key``, ``ok`` (True when deleted, or already absent), and
        ``code`` / ``message`` of the S3 error when not. A request that fails
        as a whole raises."""
        keys = list(keys)
        out: List[Dict[str, Any]] = []
        with self._handle() as h:
            for i in range(0, len(keys), 1000):
                out.extend(_core.py_delete_objects(h, bucket, keys[i:i + 1000]))
        return out

    def _download(self, dest, bucket: str, key: str, config: Optional[TransferConfig],
                  progress: Optional[ProgressFn], cancel: Optional["CancelToken"]) -> TransferResult:
        knobs = (config or TransferConfig()).knobs("download")
        with self._handle() as h, self._transferring(h):
            return TransferResult._from_c(_core.py_download(h, bucket, key, dest, knobs,
                                                            self._progress(progress, cancel)))

    def download_file(self, bucket: str, key: str, filename: Union[str, os.PathLike],
                      config: Optional[TransferConfig] = None,
                      progress: Optional[ProgressFn] = None,
                      cancel: Optional["CancelToken"] = None) -> TransferResult:
        """Downloads an object into a file with parallel ranged GETs.

        Bytes go to a temporary file beside ``filename`` that is renamed onto
        it only when complete; on failure it is removed and an existing file
        is left untouched.
        """
        return self._download(os.fsdecode(os.fspath(filename)), bucket, key, config, progress, cancel)

    def download_fileobj(self, bucket: str, key: str, fileobj, config: Optional[TransferConfig] = None,
                         progress: Optional[ProgressFn] = None,
                         cancel: Optional["CancelToken"] = None) -> TransferResult:
        """Downloads an object in order into a writable binary file object
        (which may be non-seekable: a pipe, ``sys.stdout.buffer``). Memory for
        reordering ranges is bounded by ``memory_limit`` (or concurrency+1 ranges).

        ``write`` is given read-only memoryviews of at most 1 MiB each over a
        copy of the data in a buffer of s3xfer's own; one that is kept (or a
        slice of it) keeps valid, unchanged bytes, as that buffer is not
        reused while referenced. ``write`` may return the count written (a
        short count is completed by another call) or None for all of it."""
        if not hasattr(fileobj, "write"):
            raise TypeError("fileobj must have write()")
        return self._download(fileobj, bucket, key, config, progress, cancel)

    def download_into(self, bucket: str, key: str, buffer, config: Optional[TransferConfig] = None,
                      progress: Optional[ProgressFn] = None,
                      cancel: Optional["CancelToken"] = None) -> TransferResult:
        """Downloads an object into a writable buffer (bytearray, memoryview);
        ``result.bytes`` tells how much of it was filled."""
        return self._download(memoryview(buffer).cast("B"), bucket, key, config, progress, cancel)

    # -- many objects (docs/bulk.md) --------------------------------------------
    # Keyword arguments of every call below: include / exclude (glob patterns,
    # or filters=[("exclude", "*"), ("include", "*.txt")] applied in order,
    # the last match winning), config (a TransferConfig: concurrency and
    # memory_limit for the whole run, the rest per transfer), fail_fast,
    # dryrun, on_object (called with a BulkItem per object), progress (called
    # with a BulkSummary so far, at least every 250 ms), cancel (a
    # CancelToken). They return the final BulkSummary, and raise
    # PartialFailureError (with .summary) when some objects failed.
    def upload_dir(self, dir: Union[str, os.PathLike], bucket: str, prefix: str = "", *,
                   follow_symlinks: bool = False, **kw) -> "BulkSummary":
        """Uploads every regular file under ``dir``: the key of each is
        ``prefix`` followed by its path relative to ``dir`` with '/'
        separators (give prefix a trailing '/' for a "folder"). Symbolic links
        are skipped (reported) unless ``follow_symlinks``."""
        from . import bulk
        return bulk.run(self, _core.PY_BULK_UPLOAD_DIR, (bulk._fs(dir), bucket, prefix),
                        follow_symlinks=follow_symlinks, **kw)

    def download_dir(self, bucket: str, prefix: str, dir: Union[str, os.PathLike], **kw) -> "BulkSummary":
        """Downloads every object under ``prefix`` into ``dir`` (created if
        missing), the key less the prefix as the relative path. A key that
        could land outside ``dir`` ("..", "/abs", empty segments, names too
        long) is refused for that object, never written."""
        from . import bulk
        return bulk.run(self, _core.PY_BULK_DOWNLOAD_DIR, (bucket, prefix, bulk._fs(dir)), **kw)

    def sync(self, src: Union[str, os.PathLike], dst: Union[str, os.PathLike], *, delete: bool = False,
             dryrun: bool = False, exact: bool = False, follow_symlinks: bool = False, **kw) -> "BulkSummary":
        """Makes ``dst`` hold what ``src`` holds: one is a local directory, the
        other "s3://bucket/prefix" (the prefix taken as a folder: a '/' is
        added). Copies what is missing or differs (size, or a newer source;
        the content with ``exact``); ``delete`` removes at the destination
        what the source lacks; ``dryrun`` reports and changes nothing."""
        from . import bulk
        s, d = bulk.parse_s3_url(src), bulk.parse_s3_url(dst)
        if (s is None) == (d is None):
            raise InvalidConfigError("sync needs a local directory and an s3://bucket/prefix URL", errno=-1)
        if d is not None:
            op, args = _core.PY_BULK_SYNC_UP, (bulk._fs(src), d[0], d[1])
        else:
            op, args = _core.PY_BULK_SYNC_DOWN, (s[0], s[1], bulk._fs(dst))
        return bulk.run(self, op, args, delete=delete, dryrun=dryrun, exact=exact,
                        follow_symlinks=follow_symlinks, **kw)

    def delete_prefix(self, bucket: str, prefix: str, **kw) -> "BulkSummary":
        """Deletes every object under ``prefix`` (filters apply) with
        DeleteObjects, up to 1,000 keys a request; "" means the whole bucket."""
        from . import bulk
        return bulk.run(self, _core.PY_BULK_DELETE_PREFIX, (bucket, prefix), **kw)

    def copy_prefix(self, src_bucket: str, src_prefix: str, dst_bucket: str, dst_prefix: str,
                    **kw) -> "BulkSummary":
        """Copies every object under ``src_prefix`` to ``dst_prefix`` + its key
        relative to ``src_prefix``, server-side."""
        from . import bulk
        return bulk.run(self, _core.PY_BULK_COPY_PREFIX, (src_bucket, src_prefix, dst_bucket, dst_prefix), **kw)


class CancelToken:
    """Cancels transfers from another thread: pass it as ``cancel=`` and call
    :meth:`cancel`. The transfer stops within about 250 ms, cleans up (aborts
    its multipart upload, removes its temporary file) and raises
    TransferCancelled. One token can serve several transfers."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Asks every transfer using this token to stop."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


class _ReadIntoAdapter:
    """Gives a read()-only file object the readinto() the C reader calls."""

    def __init__(self, f):
        self._f = f

    def readinto(self, b) -> int:
        data = self._f.read(len(b))
        if not data:
            return 0
        n = len(data)
        b[:n] = data
        return n
