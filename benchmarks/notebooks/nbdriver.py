"""One transfer in a fresh interpreter, for the notebooks' peak-RSS figures.

    python nbdriver.py '{"op": "upload", "path": ..., "bucket": ..., "key": ...,
                         "config": {"part_size": ..., "concurrency": ..., "pool": ...}}'

op: "noop" (import s3xfer and make a Client: the baseline RSS), "upload"
(upload_file), "download_file", "download_stream" (download_fileobj into a sink
that drops the bytes, so the only buffers are the library's). Server settings
come from the AWS_* environment. Prints one JSON line: the TransferResult's
fields (and "throughput_mib_s"), or {} for noop, plus "peak_rss_kib": this
process's own peak resident set (VmHWM). nbsupport.run_fresh() runs it and adds
the child's wall and CPU time from os.wait4.

Why VmHWM and not the ru_maxrss of wait4/RUSAGE_CHILDREN: on Linux a child's
ru_maxrss starts from the RSS of the process it was forked (or vforked) from,
because exec keeps the old address space's high-water mark; a child spawned by
a Jupyter kernel of 150 MiB would report at least 150 MiB. VmHWM belongs to
the address space exec created.
"""

import dataclasses
import json
import sys

import s3xfer


class _Sink:
    """A write-only file object that counts and drops what it gets."""

    def __init__(self):
        self.n = 0

    def write(self, b):
        self.n += len(b)
        return len(b)


def peak_rss_kib():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib // 1024 if sys.platform == "darwin" else kib  # bytes on macOS


def main(spec):
    op = spec["op"]
    with s3xfer.Client() as c:
        if op == "noop":
            return {"peak_rss_kib": peak_rss_kib()}
        cfg = s3xfer.TransferConfig(**spec.get("config", {}))
        if op == "upload":
            r = c.upload_file(spec["path"], spec["bucket"], spec["key"], config=cfg)
        elif op == "download_file":
            r = c.download_file(spec["bucket"], spec["key"], spec["path"], config=cfg)
        elif op == "download_stream":
            sink = _Sink()
            r = c.download_fileobj(spec["bucket"], spec["key"], sink, config=cfg)
            if sink.n != r.bytes:
                raise SystemExit(f"sink got {sink.n} bytes, result says {r.bytes}")
        else:
            raise SystemExit(f"unknown op {op!r}")
    out = dataclasses.asdict(r)
    out["throughput_mib_s"] = r.throughput_mib_s
    out["peak_rss_kib"] = peak_rss_kib()
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
