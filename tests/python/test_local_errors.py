"""What a failed local read or write reports: the library's code (S3X_EIO, -3)
and, beside it, the system's errno that caused it (``sys_errno``: ENOSPC for
a full disk, EFBIG past a file-size limit, ENOENT, EISDIR, ENOTDIR), in C
(s3x_error.sys_errno), in Python (``S3xferError.sys_errno``) and in the
CLI's --json error records. The failures are real: a missing directory, a
directory in the way, /dev/full, RLIMIT_FSIZE."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import pickle
import subprocess
import sys

import pytest

import s3xfer
from localfail import limit_file_size

MiB = 1 << 20


def local_error(fn, *args, **kw):
    with pytest.raises(s3xfer.LocalIOError) as ei:
        fn(*args, **kw)
    e = ei.value
    assert isinstance(e, OSError) and e.errno == -3, (e, e.errno)
    return e


def test_python_errors_carry_the_system_errno(client, boto, bucket, tmp_path):
    boto.put_object(Bucket=bucket, Key="k", Body=b"x" * 1000)
    e = local_error(client.download_file, bucket, "k", str(tmp_path / "missing" / "f"))
    assert e.sys_errno == errno.ENOENT and "does not exist" in e.message, e
    (tmp_path / "afile").write_bytes(b"in the way")
    e = local_error(client.download_file, bucket, "k", str(tmp_path / "afile" / "f"))
    assert e.sys_errno == errno.ENOTDIR and "afile is not a directory" in e.message, e
    (tmp_path / "afile").unlink()
    (tmp_path / "adir").mkdir()
    e = local_error(client.download_file, bucket, "k", str(tmp_path / "adir"))
    assert e.sys_errno == errno.EISDIR, e
    e = local_error(client.upload_file, str(tmp_path / "nofile"), bucket, "up")
    assert e.sys_errno == errno.ENOENT and "No such file" in e.message, e
    e = local_error(client.upload_file, str(tmp_path / "adir"), bucket, "up")
    assert e.sys_errno == errno.EISDIR, e

    # It survives pickling (errors cross process pools), and an error from
    # the server has none.
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is s3xfer.LocalIOError and back.sys_errno == errno.EISDIR and back.errno == -3
    with pytest.raises(s3xfer.NoSuchKey) as ei:
        client.download_file(bucket, "absent", str(tmp_path / "f"))
    assert ei.value.sys_errno == 0 and ei.value.status == 404
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]


def test_bulk_item_errors_carry_the_system_errno(client, boto, bucket, tmp_path):
    """download_dir where a file stands where a key needs a directory: that
    object fails with ENOTDIR, the others land."""
    boto.put_object(Bucket=bucket, Key="t/a/b", Body=b"under a")
    boto.put_object(Bucket=bucket, Key="t/c", Body=b"fine")
    (tmp_path / "a").write_bytes(b"a file, not a directory")
    with pytest.raises(s3xfer.PartialFailureError) as ei:
        client.download_dir(bucket, "t/", str(tmp_path))
    (f,) = ei.value.summary.failures
    assert isinstance(f.error, s3xfer.LocalIOError) and f.error.sys_errno == errno.ENOTDIR, f.error
    assert (tmp_path / "c").read_bytes() == b"fine"
    assert (tmp_path / "a").read_bytes() == b"a file, not a directory"


PY_FULL = r"""
import errno, json, sys, s3xfer
c = s3xfer.Client()
try:
    c.download_file(sys.argv[1], sys.argv[2], sys.argv[3],
                    config=s3xfer.TransferConfig(part_size=5 * 1024 * 1024))
    print(json.dumps({"ok": True}))
except s3xfer.S3xferError as e:
    print(json.dumps({"type": type(e).__name__, "errno": e.errno, "sys_errno": e.sys_errno,
                      "message": e.message}))
"""


def test_python_full_file_system(boto, bucket, tmp_path):
    """A download whose writes fail past a file-size limit (EFBIG, as a full
    disk gives ENOSPC) raises LocalIOError with sys_errno EFBIG, in a child
    process so that the limit binds only there."""
    boto.put_object(Bucket=bucket, Key="big", Body=os.urandom(6 * MiB + 3))
    dst = tmp_path / "big"
    p = subprocess.run([sys.executable, "-c", PY_FULL, bucket, "big", str(dst)], capture_output=True,
                       timeout=120, preexec_fn=limit_file_size(MiB))
    assert p.returncode == 0, p.stderr.decode()
    out = json.loads(p.stdout)
    assert out["type"] == "LocalIOError" and out["errno"] == -3, out
    assert out["sys_errno"] == errno.EFBIG and "File too large" in out["message"], out
    assert list(tmp_path.iterdir()) == []


class _CErr(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("http_status", ctypes.c_int), ("message", ctypes.c_char_p),
                ("s3_code", ctypes.c_char_p), ("request_id", ctypes.c_char_p), ("sys_errno", ctypes.c_int)]


def test_c_download_fd_to_a_full_device(build_dir, s3env, boto, bucket):
    """s3x_download_fd onto /dev/full: every write fails with ENOSPC, and the
    call says so (S3X_EIO, sys_errno ENOSPC, the reason in the message), not
    that a consumer stopped the download."""
    boto.put_object(Bucket=bucket, Key="obj", Body=os.urandom(3 * MiB))
    lib = ctypes.CDLL(str(build_dir / "libs3xfer.so"))
    lib.s3x_error_last.restype = ctypes.POINTER(_CErr)
    lib.s3x_client_set_string.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]
    lib.s3x_client_free.argtypes = [ctypes.c_void_p]
    lib.s3x_download_new.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    lib.s3x_download_free.argtypes = [ctypes.c_void_p]
    lib.s3x_download_fd.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                    ctypes.c_void_p]
    c, d = ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.s3x_client_new(ctypes.byref(c)) == 0
    try:
        for opt, v in ((0, s3env["endpoint_url"]), (1, s3env["region"]), (2, s3env["access_key"]),
                       (3, s3env["secret_key"])):
            assert lib.s3x_client_set_string(c, opt, v.encode()) == 0
        assert lib.s3x_download_new(ctypes.byref(d), c) == 0
        fd = os.open("/dev/full", os.O_WRONLY)
        try:
            rc = lib.s3x_download_fd(d, bucket.encode(), b"obj", fd, None)
            e = lib.s3x_error_last().contents
            msg = e.message.decode()
            assert rc == -3 and e.code == -3, (rc, msg)
            assert e.sys_errno == errno.ENOSPC and "No space left on device" in msg and "obj" in msg, msg
        finally:
            os.close(fd)
        lib.s3x_download_free(d)
    finally:
        lib.s3x_client_free(c)
