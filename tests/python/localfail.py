"""Ways to make the local side of a transfer fail for real, shared by the
tests of what a failed local write or read reports."""

from __future__ import annotations


def limit_file_size(nbytes):
    """A preexec_fn: files the child writes stop at nbytes (the write fails with
    EFBIG, SIGXFSZ ignored), as a full disk stops them with ENOSPC."""
    import resource
    import signal

    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return apply
