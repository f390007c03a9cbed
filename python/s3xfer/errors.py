"""Exceptions raised by s3xfer.

Every error derives from :class:`S3xferError`. Errors that came back from the
server are :class:`ClientError` (with ``code``, ``status``, ``request_id`` and
``message``); the common S3 error codes have subclasses of their own. The one
table mapping C error codes and S3 error codes to classes is at the bottom of
this module.
"""

from __future__ import annotations

import builtins

__all__ = [
    "S3xferError", "ClientError", "NoSuchBucket", "NoSuchKey", "NoSuchUpload", "AccessDenied",
    "SignatureDoesNotMatch", "InvalidAccessKeyId", "BucketAlreadyExists", "EntityTooSmall",
    "InvalidRange", "PreconditionFailed", "SlowDown", "ChecksumMismatch", "TransferCancelled",
    "ConnectionError", "TLSError", "TimeoutError", "NetworkError", "CredentialsError",
    "InvalidConfigError", "SourceChangedError", "LimitExceededError", "LocalIOError",
    "MalformedResponseError", "MemoryLimitError", "PartialFailureError",
]


class S3xferError(Exception):
    """Base class of every s3xfer error.

    Attributes: ``message`` (text from the library), ``errno`` (the negative C
    error code, one of the ``S3X_E*`` values), ``status`` (HTTP status or 0),
    ``code`` (S3 error code or ""), ``request_id`` (or ""), ``sys_errno``
    (the system's errno behind a local failure, such as ``errno.ENOSPC`` for
    a full disk, or 0).
    """

    def __init__(self, message: str = "", *, errno: int = -15, status: int = 0, code: str = "",
                 request_id: str = "", sys_errno: int = 0):
        super().__init__(message)
        self.message = message
        self.errno = errno
        self.status = status
        self.code = code
        self.request_id = request_id
        self.sys_errno = sys_errno

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.errno, self.status, self.code, self.request_id,
                           self.sys_errno))


def _rebuild(cls, message, errno, status, code, request_id, sys_errno=0):
    return cls(message, errno=errno, status=status, code=code, request_id=request_id, sys_errno=sys_errno)


class ClientError(S3xferError):
    """The server answered with an error (HTTP status >= 300, or an error body)."""


class NoSuchBucket(ClientError):
    """The bucket does not exist."""


class NoSuchKey(ClientError):
    """The object does not exist."""


class NoSuchUpload(ClientError):
    """The multipart upload does not exist (completed or aborted)."""


class AccessDenied(ClientError):
    """The credentials are not allowed to do this."""


class SignatureDoesNotMatch(AccessDenied):
    """The server computed a different signature: usually a wrong secret key."""


class InvalidAccessKeyId(AccessDenied):
    """The server does not know the access key."""


class BucketAlreadyExists(ClientError):
    """The bucket exists already (owned by you or someone else)."""


class EntityTooSmall(ClientError):
    """A multipart part other than the last is below the server's minimum size."""


class InvalidRange(ClientError):
    """The requested byte range is not satisfiable."""


class PreconditionFailed(ClientError):
    """A conditional request (If-Match) failed: the object changed."""


class SlowDown(ClientError):
    """The server asks for fewer requests (HTTP 503)."""


class ChecksumMismatch(S3xferError):
    """A checksum did not match (local computation or server's BadDigest)."""


class TransferCancelled(S3xferError):
    """The transfer was cancelled (by a callback, cancel() or Ctrl-C)."""


class ConnectionError(S3xferError, builtins.ConnectionError):  # noqa: A001 - deliberate
    """Could not connect to the endpoint."""


class TLSError(ConnectionError):
    """TLS certificate verification failed."""


class TimeoutError(S3xferError, builtins.TimeoutError):  # noqa: A001
    """A request timed out."""


class NetworkError(S3xferError, builtins.OSError):
    """The connection broke during a request, or a body was cut short."""


class CredentialsError(S3xferError):
    """No credentials could be found or they are incomplete."""


class InvalidConfigError(S3xferError, builtins.ValueError):
    """A setting or knob is out of range or does not apply."""


class MemoryLimitError(S3xferError, builtins.MemoryError):
    """The transfer cannot fit in the memory limit, or memory ran out."""


class SourceChangedError(S3xferError):
    """The source file or the object changed during the transfer."""


class LimitExceededError(S3xferError):
    """An S3 limit (10,000 parts, 5 GiB per part) would be exceeded."""


class LocalIOError(S3xferError, builtins.OSError):
    """Reading or writing a local file or stream failed."""


class MalformedResponseError(S3xferError):
    """A response body could not be parsed."""


class PartialFailureError(S3xferError):
    """A run of many objects (``upload_dir``, ``sync``, ...) finished, but some
    objects failed or were refused. ``summary`` is the run's
    :class:`~s3xfer.bulk.BulkSummary`: its counts, and in ``failures`` each
    failed object with its error and reason."""

    summary = None


# C error codes (s3xfer/errors.h) -> class
_BY_ERRNO = {
    -1: InvalidConfigError,
    -2: MemoryLimitError,
    -3: LocalIOError,
    -4: ConnectionError,
    -5: TimeoutError,
    -6: NetworkError,
    -7: TLSError,
    -8: ClientError,
    -9: MalformedResponseError,
    -10: CredentialsError,
    -11: TransferCancelled,
    -12: ChecksumMismatch,
    -13: SourceChangedError,
    -14: LimitExceededError,
    -15: S3xferError,
    -16: PartialFailureError,
}

# S3 error codes -> class (for server errors)
_BY_CODE = {
    "NoSuchBucket": NoSuchBucket,
    "NoSuchKey": NoSuchKey,
    "NoSuchUpload": NoSuchUpload,
    "AccessDenied": AccessDenied,
    "SignatureDoesNotMatch": SignatureDoesNotMatch,
    "InvalidAccessKeyId": InvalidAccessKeyId,
    "BucketAlreadyExists": BucketAlreadyExists,
    "BucketAlreadyOwnedByYou": BucketAlreadyExists,
    "EntityTooSmall": EntityTooSmall,
    "InvalidRange": InvalidRange,
    "PreconditionFailed": PreconditionFailed,
    "SlowDown": SlowDown,
    "BadDigest": ChecksumMismatch,
    "InvalidDigest": ChecksumMismatch,
}


def _from_c(errno: int, message: str, status: int, code: str, request_id: str, sys_errno: int = 0) -> S3xferError:
    """Builds the exception for an error reported by the C library (called from C)."""
    # S3 error codes refine server errors only; local outcomes (a changed
    # object, a checksum mismatch) keep the class of their C code.
    cls = _BY_CODE.get(code) if code and errno == -8 else None
    if cls is None:
        cls = _BY_ERRNO.get(errno, S3xferError)
    return cls(message, errno=errno, status=status, code=code or "", request_id=request_id or "",
               sys_errno=sys_errno)
