"""s3xfer: fast, memory-bounded transfers to and from S3-compatible storage.

>>> import s3xfer
>>> with s3xfer.Client() as s3:          # endpoint and keys from the AWS environment
...     s3.put_object("bucket", "key", b"hello")
"""

from . import _core
from .client import CancelToken, Client
from .config import BufferStrategy, Checksum, ChecksumLocation, ChecksumType, Pool, RetryMode, TransferConfig
from .result import TransferResult
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all

__version__ = _core.py_version()

__all__ = ["Client", "CancelToken", "TransferManager", "TransferFuture", "BulkItem", "BulkSummary", "TransferConfig", "TransferResult", "BufferStrategy", "Pool", "Checksum",
           "ChecksumLocation", "ChecksumType", "RetryMode", "__version__"] + list(_errors_all)


def __getattr__(name):
    # The transfer manager pulls in concurrent.futures: imported on first use,
    # so `import s3xfer` stays quick.
    if name in ("TransferManager", "TransferFuture"):
        from . import manager
        return getattr(manager, name)
    if name in ("BulkItem", "BulkSummary"):
        from . import bulk
        return getattr(bulk, name)
    raise AttributeError(f"module 's3xfer' has no attribute {name!r}")
