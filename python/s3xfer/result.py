"""What a transfer did."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict


@dataclass(frozen=True)
class TransferResult:
    """Figures of one upload or download.

    ``bytes``: object bytes moved; ``parts``: parts or ranges; ``seconds``:
    wall time; ``io_seconds``: the part of it the transfer's thread spent
    reading the source / writing the destination and computing checksums;
    ``requests``: HTTP requests sent (retries included);
    ``retries`` and by cause ``retries_http`` / ``retries_network`` /
    ``retries_timeout`` / ``retries_first_byte``; ``slow_part_timeout_ms``:
    the first-byte timeout in force at the end; ``part_size`` and
    ``concurrency`` used; pool counters ``pool_allocations``,
    ``pool_bytes_allocated``, ``peak_buffer_bytes``, ``buffer_waits``;
    ``multipart``; ``etag``; ``upload_id``; ``retries_throttled``: requests
    re-sent after a throttling answer (SlowDown, 429, 503, 500; also in
    ``retries_http``); ``throttled_seconds``: wall seconds spent throttled
    (from a throttling answer to the next success, summed over storms);
    downloads to a file: ``fsyncs`` (1 when the file was fsynced before its
    rename, i.e. ``durable``), ``writeback_calls`` (early writeback requests
    while it was written) and ``sync_seconds`` (from the last byte received
    to the rename, the fsync included; part of ``seconds``); downloads:
    ``requests_received_elsewhere``, ranged GETs (retries included) received
    on one of the client's extra receiving threads rather than on the
    transfer's own, and ``receive_threads``, the receiving threads the client
    had (its ``receive_threads``, or what the default, auto, picked here).
    """
    bytes: int
    parts: int
    seconds: float
    io_seconds: float
    requests: int
    retries: int
    retries_http: int
    retries_network: int
    retries_timeout: int
    retries_first_byte: int
    slow_part_timeout_ms: int
    part_size: int
    concurrency: int
    pool_allocations: int
    pool_bytes_allocated: int
    peak_buffer_bytes: int
    buffer_waits: int
    multipart: bool
    etag: str
    upload_id: str
    retries_throttled: int = 0
    throttled_seconds: float = 0.0
    fsyncs: int = 0
    writeback_calls: int = 0
    sync_seconds: float = 0.0
    requests_received_elsewhere: int = 0
    receive_threads: int = 0

    @classmethod
    def _from_c(cls, d: Dict[str, Any]) -> "TransferResult":
        return cls(**{f.name: d[f.name] for f in fields(cls)})

    @property
    def throughput_mib_s(self) -> float:
        return self.bytes / (1 << 20) / self.seconds if self.seconds > 0 else 0.0

    def __repr__(self) -> str:
        return (f"TransferResult(bytes={self.bytes}, parts={self.parts}, seconds={self.seconds:.3f} "
                f"({self.throughput_mib_s:.1f} MiB/s), requests={self.requests}, retries={self.retries}, "
                f"part_size={self.part_size}, concurrency={self.concurrency}, "
                f"pool_allocations={self.pool_allocations}, peak_buffer_bytes={self.peak_buffer_bytes}, "
                f"buffer_waits={self.buffer_waits}, retries_throttled={self.retries_throttled}, "
                f"throttled_seconds={self.throttled_seconds:.1f}, etag={self.etag!r})")
