"""TransferConfig: the knobs of the upload and download managers."""

from __future__ import annotations

import enum
from typing import Any, Dict, Optional, Union

from . import _core
from ._knobs import KNOBS
from .errors import InvalidConfigError


class BufferStrategy(str, enum.Enum):
    """How upload parts are read: ``AUTO`` (unbuffered for files), ``BUFFERED``, ``UNBUFFERED``."""
    AUTO = "auto"
    BUFFERED = "buffered"
    UNBUFFERED = "unbuffered"


class Pool(str, enum.Enum):
    """Part-buffer pool: ``BOUNDED`` (concurrency+1 buffers), ``CACHE`` (unbounded), ``MALLOC``."""
    BOUNDED = "bounded"
    CACHE = "cache"
    MALLOC = "malloc"


class Checksum(str, enum.Enum):
    """Per-part checksum sent to and checked by the server."""
    NONE = "none"
    CRC32C = "crc32c"
    CRC32 = "crc32"
    SHA256 = "sha256"
    MD5 = "md5"


class ChecksumType(str, enum.Enum):
    """What a multipart upload's object checksum covers: ``COMPOSITE`` (S3's
    default: a checksum of the parts' checksums, ``<value>-<parts>``) or
    ``FULL_OBJECT`` (the whole object's CRC32C or CRC32, made from the parts'
    CRCs; the server checks it at completion and downloads check it)."""
    COMPOSITE = "composite"
    FULL_OBJECT = "full_object"


class RetryMode(str, enum.Enum):
    """How throttled retries are paced (botocore's names): ``STANDARD`` (each
    request backs off on its own) or ``ADAPTIVE`` (also a request rate shared
    by every transfer on the client, cut on throttling, regained on success)."""
    STANDARD = "standard"
    ADAPTIVE = "adaptive"


class ChecksumLocation(str, enum.Enum):
    """Where an upload part's checksum travels: ``AUTO`` (a trailer when the
    body is sent unsigned), ``HEADER`` (hashed before sending) or ``TRAILER``
    (aws-chunked, hashed while sending)."""
    AUTO = "auto"
    HEADER = "header"
    TRAILER = "trailer"


_ENUMS = {
    "buffer_strategy": (BufferStrategy, {"auto": _core.S3X_BUFFER_AUTO, "buffered": _core.S3X_BUFFER_BUFFERED,
                                         "unbuffered": _core.S3X_BUFFER_UNBUFFERED}),
    "pool": (Pool, {"bounded": _core.S3X_POOL_BOUNDED, "cache": _core.S3X_POOL_CACHE,
                    "malloc": _core.S3X_POOL_MALLOC}),
    "checksum": (Checksum, {"none": _core.S3X_CHECKSUM_NONE, "crc32c": _core.S3X_CHECKSUM_CRC32C,
                            "crc32": _core.S3X_CHECKSUM_CRC32, "sha256": _core.S3X_CHECKSUM_SHA256,
                            "md5": _core.S3X_CHECKSUM_MD5}),
    "checksum_location": (ChecksumLocation, {"auto": _core.S3X_CHECKSUM_LOCATION_AUTO,
                                             "header": _core.S3X_CHECKSUM_LOCATION_HEADER,
                                             "trailer": _core.S3X_CHECKSUM_LOCATION_TRAILER}),
    "retry_mode": (RetryMode, {"standard": _core.S3X_RETRY_MODE_STANDARD, "adaptive": _core.S3X_RETRY_MODE_ADAPTIVE}),
    "checksum_type": (ChecksumType, {"composite": _core.S3X_CHECKSUM_TYPE_COMPOSITE,
                                     "full_object": _core.S3X_CHECKSUM_TYPE_FULL_OBJECT}),
}

# Knobs that only one manager takes.
_UPLOAD_ONLY = {"multipart_threshold", "buffer_strategy", "checksum", "checksum_location", "leave_parts_on_error",
                "size_hint", "checksum_type"}
_DOWNLOAD_ONLY = {"validate_checksum", "durable"}


def _enum_value(name: str, value: Any) -> int:
    cls, table = _ENUMS[name]
    if value is None and name == "checksum":
        value = "none"
    if isinstance(value, cls):
        value = value.value
    if isinstance(value, str) and value.lower() in table:
        return table[value.lower()]
    raise InvalidConfigError(f"{name} must be one of {sorted(table)}, got {value!r}", errno=-1)


class TransferConfig:
    """Knobs for uploads and downloads. Every argument left as None keeps the
    library's default. Bounds come from the C library and are checked here,
    with an error that names the knob and its range.

    Args:
        part_size: bytes per part / range (5 MiB .. 5 GiB).
        multipart_threshold: uploads below this size use one PutObject.
        concurrency: requests in flight (1 .. 1024).
        buffer_strategy: "auto" | "buffered" | "unbuffered" (uploads).
        pool: "bounded" | "cache" | "malloc".
        memory_limit: bytes of part buffers a transfer may hold (0 = none).
        checksum: "none" | "crc32c" (default) | "crc32" | "sha256" | "md5"
            (uploads; with a checksum, part bodies are sent UNSIGNED-PAYLOAD
            unless the client signs payloads always).
        checksum_location: "auto" (default) | "header" | "trailer": where the
            part checksum travels. A trailer (aws-chunked) is computed while
            the part is sent, so a file part is read once; a header needs the
            part hashed first. "auto" takes the trailer whenever the body is
            sent unsigned and the checksum is not md5.
        checksum_type: "composite" (default) | "full_object": what a
            multipart upload's object checksum covers (see ChecksumType).
            full_object needs checksum crc32c or crc32; a server that does
            not know S3's x-amz-checksum-type may refuse it.
        leave_parts_on_error: keep the parts of a failed multipart upload.
        max_attempts: attempts per request (1 .. 100).
        slow_part_timeout: "off", "dynamic" or a first-byte timeout in ms.
        validate_checksum: check the object's full-object checksum on
            download (CRC32C, CRC32, SHA-256; into a file of several ranges
            CRC32C and CRC32 only; composite "-N" checksums are not checked).
        size_hint: expected size of a stream of unknown length.
        stall_timeout_ms: drop and retry a request that moves less than
            ``stall_min_rate`` bytes/s for this long (0 = off; whole seconds).
        stall_min_rate: bytes/s below which a request counts as stalled.
        retry_timeout: milliseconds a transfer keeps retrying throttling
            answers (503 SlowDown, 429, 500 ...) with no request succeeding,
            whatever max_attempts says (default 120000; 0 = throttling is
            retried max_attempts times like other errors).
        retry_mode: "adaptive" (default) | "standard": see RetryMode.
        durable: downloads to a file: fsync the file before renaming it
            into place (default True), with its writeback started while it
            downloads so the fsync costs little. False skips the fsync: after
            a power loss soon after the download the renamed file may be
            empty or partial.
    """

    _FIELDS = ("part_size", "multipart_threshold", "concurrency", "buffer_strategy", "pool", "memory_limit",
               "checksum", "checksum_location", "leave_parts_on_error", "max_attempts", "slow_part_timeout", "validate_checksum",
               "size_hint", "stall_timeout_ms", "stall_min_rate", "retry_timeout", "retry_mode", "durable",
               "checksum_type")

    def __init__(self, part_size: Optional[int] = None, multipart_threshold: Optional[int] = None,
                 concurrency: Optional[int] = None,
                 buffer_strategy: Union[str, BufferStrategy, None] = None,
                 pool: Union[str, Pool, None] = None, memory_limit: Optional[int] = None,
                 checksum: Union[str, Checksum, None] = None,
                 checksum_location: Union[str, ChecksumLocation, None] = None,
                 leave_parts_on_error: Optional[bool] = None,
                 max_attempts: Optional[int] = None, slow_part_timeout: Union[str, int, None] = None,
                 validate_checksum: Optional[bool] = None, size_hint: Optional[int] = None,
                 stall_timeout_ms: Optional[int] = None, stall_min_rate: Optional[int] = None,
                 retry_timeout: Optional[int] = None, retry_mode: Union[str, RetryMode, None] = None,
                 durable: Optional[bool] = None, checksum_type: Union[str, ChecksumType, None] = None):
        self._values: Dict[str, int] = {}
        given = dict(part_size=part_size, multipart_threshold=multipart_threshold, concurrency=concurrency,
                     buffer_strategy=buffer_strategy, pool=pool, memory_limit=memory_limit, checksum=checksum,
                     checksum_location=checksum_location,
                     leave_parts_on_error=leave_parts_on_error, max_attempts=max_attempts,
                     slow_part_timeout=slow_part_timeout, validate_checksum=validate_checksum,
                     size_hint=size_hint, stall_timeout_ms=stall_timeout_ms, stall_min_rate=stall_min_rate,
                     retry_timeout=retry_timeout, retry_mode=retry_mode, durable=durable,
                     checksum_type=checksum_type)
        self._given = {k: v for k, v in given.items() if v is not None}
        for name, value in self._given.items():
            self._values[name] = self._convert(name, value)

    @staticmethod
    def _convert(name: str, value: Any) -> int:
        if name in _ENUMS:
            v = _enum_value(name, value)
        elif name == "slow_part_timeout":
            if isinstance(value, str):
                table = {"off": _core.S3X_SLOW_PART_OFF, "dynamic": _core.S3X_SLOW_PART_DYNAMIC}
                if value.lower() not in table:
                    raise InvalidConfigError(
                        f"slow_part_timeout must be 'off', 'dynamic' or milliseconds, got {value!r}", errno=-1)
                v = table[value.lower()]
            elif isinstance(value, bool) or not isinstance(value, int):
                raise InvalidConfigError(f"slow_part_timeout must be 'off', 'dynamic' or an int, got {value!r}",
                                         errno=-1)
            elif value <= 0:
                raise InvalidConfigError(f"slow_part_timeout in milliseconds must be > 0, got {value}", errno=-1)
            else:
                v = value
        elif isinstance(value, bool):
            v = int(value)
        elif isinstance(value, int):
            v = value
        else:
            raise InvalidConfigError(f"{name} must be an int, got {type(value).__name__}", errno=-1)
        k = KNOBS[name]
        if not (k.lo <= v <= k.hi):
            raise InvalidConfigError(f"{name} = {value!r} is out of range [{k.lo}, {k.hi}]", errno=-1)
        return v

    def knobs(self, manager: str) -> Dict[int, int]:
        """{C knob id: value} for "upload" or "download" (knobs of the other one dropped)."""
        skip = _DOWNLOAD_ONLY if manager == "upload" else _UPLOAD_ONLY
        return {KNOBS[n].id: v for n, v in self._values.items() if n not in skip}

    def __getattr__(self, name: str) -> Any:
        """A knob's value: as given, else the library's default in the same
        form a caller would give it ("bounded", None, "off", True...)."""
        if name in TransferConfig._FIELDS:
            if name in self._given:
                return self._given[name]
            default = KNOBS[name].default
            if name in _ENUMS:
                label = {v: k for k, v in _ENUMS[name][1].items()}[default]
                return None if (name == "checksum" and label == "none") else label
            if name == "slow_part_timeout":
                return {_core.S3X_SLOW_PART_OFF: "off", _core.S3X_SLOW_PART_DYNAMIC: "dynamic"}.get(default, default)
            if name in ("leave_parts_on_error", "validate_checksum", "durable"):
                return bool(default)
            return default
        raise AttributeError(name)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._given.items())
        return f"TransferConfig({args})"

    @staticmethod
    def bounds(name: str):
        """(lo, hi, default) of a knob as the C library reports it."""
        k = KNOBS[name]
        return k.lo, k.hi, k.default
