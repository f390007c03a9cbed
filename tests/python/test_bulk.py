"""Many objects through the Python API (Client.upload_dir, download_dir, sync,
delete_prefix, copy_prefix) against the real server, checked with boto3:
trees with nested and empty directories, empty files and hostile names,
filters, symbolic links, hostile keys, sync's exact plan, dry runs, a bulk
delete over several DeleteObjects pages, a prefix copy, faults injected by
the proxy, cancellation, and the raise policy."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

import s3xfer
from bulktrees import (HOSTILE_KEYS, SAFE_KEYS, SPECIAL_NAMES, FakeBucket, assert_bucket_holds, body_for,
                       check_contained, entries, hostile_objects, hostile_setup, listing, make_tree, read_tree,
                       uploads_in_progress)
from s3xfer import TransferConfig

PROXY_SEED = 21
MiB = 1 << 20


def tree_files():
    files = {f"top{i}.bin": body_for(f"top{i}") for i in range(3)}
    files.update({f"a/b/c/deep{i}.txt": body_for(f"deep{i}") for i in range(3)})
    files["a/empty.txt"] = b""
    files["z/empty2"] = b""
    files.update({name: body_for(name) for name in SPECIAL_NAMES})
    return files


def collect():
    items = []
    return items, items.append


def test_errors_table_has_partial_failure():
    assert s3xfer.PartialFailureError in s3xfer.errors._BY_ERRNO.values()
    e = s3xfer.errors._from_c(-16, "2 objects failed", 0, "", "")
    assert type(e) is s3xfer.PartialFailureError and e.errno == -16


def test_upload_download_round_trip(client, boto, bucket, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = tree_files()
    make_tree(src, files, dirs=["emptydir", "a/b/emptier"])
    items, on_object = collect()
    s = client.upload_dir(src, bucket, "up/", on_object=on_object)
    assert isinstance(s, s3xfer.BulkSummary)
    assert s.objects_done == len(files) and s.objects_failed == 0 and s.failures == []
    assert s.bytes_done == sum(map(len, files.values()))
    assert s.listing_done and s.objects_found == len(files)
    assert sorted(i.key for i in items if i.action == "upload") == sorted("up/" + k for k in files)
    assert all(i.ok and i.result is not None for i in items if i.action == "upload")
    assert_bucket_holds(boto, bucket, "up/", files)

    s = client.download_dir(bucket, "up/", dst)
    assert s.objects_done == len(files) and s.objects_failed == 0
    assert read_tree(dst) == files
    # Nothing but the files and their directories: no temporary file left.
    want = set(files)
    for k in files:
        parts = k.split("/")
        want.update("/".join(parts[:i]) for i in range(1, len(parts)))
    assert entries(dst) == want


def test_5000_small_files(client, boto, bucket, tmp_path, scale):
    src, dst = tmp_path / "src", tmp_path / "dst"
    # Under the sanitizers (S3X_TEST_SCALE) fewer, but still several listing
    # pages of 1,000 and far more files than the concurrency.
    n = scale(5000, at_least=2100)
    files = {f"d{i % 50:02d}/f{i:05d}": body_for(f"f{i}", 1 + i % 97) for i in range(n)}
    files["d00/empty"] = b""
    make_tree(src, files)
    cfg = TransferConfig(concurrency=32)
    s = client.upload_dir(src, bucket, "many/", config=cfg)
    assert (s.objects_done, s.objects_failed) == (len(files), 0)
    assert_bucket_holds(boto, bucket, "many/", files)
    s = client.download_dir(bucket, "many/", dst, config=cfg)
    assert (s.objects_done, s.objects_failed) == (len(files), 0)
    assert read_tree(dst) == files


@pytest.mark.parametrize("kw, expect", [
    (dict(filters=[("exclude", "*"), ("include", "*.txt")]), {"a.txt", "sub/c.txt", "sub/deeper/e.txt"}),
    (dict(exclude="*", include="*.txt"), {"a.txt", "sub/c.txt", "sub/deeper/e.txt"}),
    (dict(exclude="*", include="sub/?.txt"), {"sub/c.txt"}),
    (dict(include=["*.txt"]), {"a.txt", "b.log", "sub/c.txt", "sub/d.log", "sub/deeper/e.txt"}),
    (dict(exclude=["sub/*"]), {"a.txt", "b.log"}),
    (dict(filters=[("include", "*.txt"), ("exclude", "sub/*")]), {"a.txt", "b.log"}),
    (dict(filters=[("exclude", "sub/*"), ("include", "sub/deeper/*")]), {"a.txt", "b.log", "sub/deeper/e.txt"}),
    (dict(exclude=["?.txt"]), {"b.log", "sub/c.txt", "sub/d.log", "sub/deeper/e.txt"}),
    (dict(exclude=["*.[lt][ox][gt]"]), set()),
])
def test_filters(client, boto, bucket, tmp_path, kw, expect):
    files = {n: body_for(n) for n in ["a.txt", "b.log", "sub/c.txt", "sub/d.log", "sub/deeper/e.txt"]}
    make_tree(tmp_path, files)
    client.upload_dir(tmp_path, bucket, "", **kw)
    assert set(listing(boto, bucket)) == expect
    # The same filters select what comes down, relative to the prefix.
    if expect:
        dst = tmp_path.parent / (tmp_path.name + "-down")
        client.download_dir(bucket, "", dst, **kw)
        assert set(read_tree(dst)) == expect


def test_filters_both_ways_is_refused(client, bucket, tmp_path):
    with pytest.raises(s3xfer.InvalidConfigError):
        client.upload_dir(tmp_path, bucket, "", include="*", filters=[("exclude", "*")])
    with pytest.raises(s3xfer.InvalidConfigError):
        client.upload_dir(tmp_path, bucket, "", filters=[("skip", "*")])


def test_symlinks_skipped_unless_followed(client, boto, bucket, tmp_path):
    src = tmp_path / "src"
    outside = tmp_path / "outside"
    make_tree(src, {"real.txt": b"real", "sub/x.txt": b"x"})
    make_tree(outside, {"o.txt": b"outside"})
    os.symlink(src / "real.txt", src / "link.txt")
    os.symlink(outside, src / "linkdir")
    os.symlink(src / "nowhere", src / "dangling")
    items, on_object = collect()
    s = client.upload_dir(src, bucket, "nf/", on_object=on_object)
    assert set(listing(boto, bucket, "nf/")) == {"nf/real.txt", "nf/sub/x.txt"}
    skipped = {os.path.basename(i.path or i.key or "") for i in items if i.action == "skip"}
    assert {"link.txt", "linkdir"} <= skipped
    assert s.objects_failed == 0

    os.unlink(src / "dangling")
    s = client.upload_dir(src, bucket, "f/", follow_symlinks=True)
    assert s.objects_failed == 0
    assert set(listing(boto, bucket, "f/")) == {"f/real.txt", "f/sub/x.txt", "f/link.txt", "f/linkdir/o.txt"}
    assert boto.get_object(Bucket=bucket, Key="f/linkdir/o.txt")["Body"].read() == b"outside"


def test_unreadable_file_is_reported_and_the_rest_goes(s3env, boto, bucket, tmp_path, build_dir):
    """Root reads any file: the run goes in a child without CAP_DAC_OVERRIDE
    (setpriv), where a mode-000 file cannot be opened."""
    src = tmp_path / "src"
    make_tree(src, {"a.txt": b"a", "locked.txt": b"secret", "z.txt": b"z"})
    os.chmod(src / "locked.txt", 0)
    code = (
        "import s3xfer, sys\n"
        "c = s3xfer.Client()\n"
        "try:\n"
        f"    c.upload_dir({str(src)!r}, {bucket!r}, 'p/')\n"
        "except s3xfer.PartialFailureError as e:\n"
        "    f = e.summary.failures\n"
        "    print(e.errno, e.summary.objects_done, len(f), f[0].path, type(f[0].error).__name__)\n"
        "    sys.exit(3)\n")
    env = dict(os.environ, AWS_ENDPOINT_URL=s3env["endpoint_url"], AWS_ACCESS_KEY_ID=s3env["access_key"],
               AWS_SECRET_ACCESS_KEY=s3env["secret_key"], AWS_REGION=s3env["region"])
    p = subprocess.run(["setpriv", "--bounding-set", "-dac_override,-dac_read_search", sys.executable, "-c", code],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    errno, done, nfail, path, cls = p.stdout.split()
    assert (errno, done, nfail) == ("-16", "2", "1")
    assert path.endswith("locked.txt") and cls == "LocalIOError"
    assert set(listing(boto, bucket)) == {"p/a.txt", "p/z.txt"}


def test_vanished_file_is_reported(client, boto, bucket, tmp_path):
    """A file removed between the walk and its upload fails on its own."""
    src = tmp_path / "src"
    make_tree(src, {f"f{i:02d}": body_for(str(i)) for i in range(20)})
    gone = src / "f19"

    def on_object(item):
        if gone.exists():
            gone.unlink()
    with pytest.raises(s3xfer.PartialFailureError) as ei:
        client.upload_dir(src, bucket, "", on_object=on_object, config=TransferConfig(concurrency=1))
    s = ei.value.summary
    assert [f.path.endswith("f19") for f in s.failures] == [True]
    assert s.objects_done == 19
    assert "f19" not in listing(boto, bucket)


def test_hostile_keys_cannot_escape(s3env, tmp_path):
    root, target, outside = hostile_setup(tmp_path)
    with FakeBucket("hbk", hostile_objects("h/")) as fake, \
            s3xfer.Client(endpoint_url=fake.url, access_key="AKIDFAKE", secret_key="fake") as c:
        with pytest.raises(s3xfer.PartialFailureError) as ei:
            c.download_dir("hbk", "h/", target)
    s = ei.value.summary
    assert ei.value.errno == -16
    assert (target / "ok.txt").read_bytes() == b"H:ok.txt"
    assert (target / "fine/deep.txt").read_bytes() == b"H:fine/deep.txt"
    check_contained(tmp_path, root, target, outside)
    failed = {f.key: f for f in s.failures}
    for k in HOSTILE_KEYS:
        assert "h/" + k in failed, (k, sorted(failed))
        f = failed["h/" + k]
        assert f.reason or f.error, f
        assert not f.ok
    # "a" and "a/b": one lands (which one depends on which the engine
    # prepares first), the other is reported; nothing clobbered.
    assert ("h/a" in failed) != ("h/a/b" in failed)
    if "h/a" in failed:
        assert (target / "a/b").read_bytes() == b"H:a/b"
    else:
        assert (target / "a").read_bytes() == b"H:a"
    assert s.objects_failed == len(failed) == len(HOSTILE_KEYS) + 1
    assert s.objects_done == len(SAFE_KEYS) + 1


@pytest.fixture(scope="module")
def moto_s3():
    """moto's server as an S3 that, unlike SeaweedFS, keeps any key it is
    given, so hostile keys can be planted with boto3 as a careless or
    malicious writer would."""
    from credfakes import start_moto
    proc, url = start_moto()
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_hostile_keys_planted_with_boto3_cannot_escape(moto_s3, tmp_path):
    import boto3
    boto = boto3.client("s3", endpoint_url=moto_s3, aws_access_key_id="moto", aws_secret_access_key="moto",
                        region_name="us-east-1")
    boto.create_bucket(Bucket="planted")
    objs = hostile_objects("h/")
    for k, body in objs.items():
        boto.put_object(Bucket="planted", Key=k, Body=body)
    listed = {o["Key"] for o in boto.list_objects_v2(Bucket="planted")["Contents"]}
    assert listed == set(objs)  # moto kept every key as given
    root, target, outside = hostile_setup(tmp_path)
    with s3xfer.Client(endpoint_url=moto_s3, region="us-east-1", access_key="moto", secret_key="moto") as c:
        with pytest.raises(s3xfer.PartialFailureError) as ei:
            c.download_dir("planted", "h", target)
    s = ei.value.summary
    check_contained(tmp_path, root, target, outside)
    failed = {f.key: f for f in s.failures}
    for k in HOSTILE_KEYS:
        assert "h/" + k in failed and not failed["h/" + k].ok, (k, sorted(failed))
    assert (target / "ok.txt").read_bytes() == b"H:ok.txt"
    assert (target / "fine/deep.txt").read_bytes() == b"H:fine/deep.txt"
    assert ("h/a" in failed) != ("h/a/b" in failed)
    assert s.objects_done == len(SAFE_KEYS) + 1


def test_file_and_directory_key_on_the_real_server(client, boto, s3env, bucket, tmp_path):
    for k in ("a", "a/b", "dir/in.txt", "z"):
        boto.put_object(Bucket=bucket, Key=k, Body=k.encode())
    # The directory marker through a boto3 client of its own, used once:
    # SeaweedFS leaves the connection that PUT it unusable, and the next
    # request on it waited out botocore's 60 s read timeout before its retry.
    import boto3
    from botocore.config import Config
    once = boto3.client("s3", endpoint_url=s3env["endpoint_url"], region_name=s3env["region"],
                        aws_access_key_id=s3env["access_key"], aws_secret_access_key=s3env["secret_key"],
                        config=Config(s3={"addressing_style": "path"}))
    once.put_object(Bucket=bucket, Key="dir/", Body=b"")
    once.close()
    target = tmp_path / "t"
    with pytest.raises(s3xfer.PartialFailureError) as ei:
        client.download_dir(bucket, "", target)
    failed = [(f.key, f.action) for f in ei.value.summary.failures]
    assert len(failed) == 1 and failed[0][0] in ("a", "a/b")
    assert (target / "dir").is_dir() and (target / "dir/in.txt").read_bytes() == b"dir/in.txt"
    assert (target / "z").read_bytes() == b"z"
    assert entries(tmp_path) - {"t"} - {"t/" + e for e in entries(target)} == set()


def test_sync_copies_and_deletes_exactly_the_difference(client, boto, bucket, tmp_path):
    src = tmp_path / "src"
    files = {f"f{i}.txt": body_for(f"f{i}") for i in range(10)}
    files["sub/s.txt"] = b"s"
    make_tree(src, files)
    s = client.sync(src, f"s3://{bucket}/sy")
    assert s.objects_done == len(files)
    assert_bucket_holds(boto, bucket, "sy/", files)

    # Nothing changed: nothing to do.
    items, on_object = collect()
    s = client.sync(src, f"s3://{bucket}/sy/", on_object=on_object)
    assert s.objects_done == 0 and s.objects_skipped == len(files)
    assert [i for i in items if i.action != "skip"] == []

    # Local edits: a size change, a same-size newer file, a new file, a deletion.
    (src / "f1.txt").write_bytes(b"a size no original has " * 50)
    (src / "f2.txt").write_bytes(bytes(reversed(files["f2.txt"])))
    st = os.stat(src / "f2.txt")
    os.utime(src / "f2.txt", (st.st_atime, st.st_mtime + 120))
    (src / "new.txt").write_bytes(b"new")
    (src / "f3.txt").unlink()
    items, on_object = collect()
    s = client.sync(src, f"s3://{bucket}/sy/", delete=True, on_object=on_object)
    acted = sorted((i.action, i.key) for i in items if i.action != "skip")
    assert acted == [("delete_remote", "sy/f3.txt"), ("upload", "sy/f1.txt"), ("upload", "sy/f2.txt"),
                     ("upload", "sy/new.txt")]
    assert s.objects_failed == 0
    assert_bucket_holds(boto, bucket, "sy/", read_tree(src))

    # Down: a fresh directory gets everything; then remote edits come down,
    # and with delete a local extra goes.
    dst = tmp_path / "dst"
    client.sync(f"s3://{bucket}/sy", dst)
    assert read_tree(dst) == read_tree(src)
    items, on_object = collect()
    s = client.sync(f"s3://{bucket}/sy", dst, on_object=on_object)
    assert [i for i in items if i.action != "skip"] == [] and s.objects_done == 0
    boto.put_object(Bucket=bucket, Key="sy/remote-new.txt", Body=b"rn")
    boto.put_object(Bucket=bucket, Key="sy/f4.txt", Body=b"changed size")
    (dst / "local-only.txt").write_bytes(b"lo")
    items, on_object = collect()
    client.sync(f"s3://{bucket}/sy", dst, delete=True, on_object=on_object)
    acted = sorted((i.action, i.key or os.path.basename(i.path)) for i in items if i.action != "skip")
    assert acted == [("delete_local", "local-only.txt"), ("download", "sy/f4.txt"),
                     ("download", "sy/remote-new.txt")]
    assert read_tree(dst) == {k[3:]: boto.get_object(Bucket=bucket, Key=k)["Body"].read()
                              for k in listing(boto, bucket, "sy/")}


def test_sync_exact_compares_content(client, boto, bucket, tmp_path):
    src = tmp_path / "src"
    make_tree(src, {"same.txt": b"0123456789"})
    client.sync(src, f"s3://{bucket}/ex")
    # Same size, same (older) time, other bytes: only --exact sees it.
    st = os.stat(src / "same.txt")
    (src / "same.txt").write_bytes(b"9876543210")
    os.utime(src / "same.txt", (st.st_atime, st.st_mtime - 3600))
    s = client.sync(src, f"s3://{bucket}/ex")
    assert s.objects_done == 0
    items, on_object = collect()
    s = client.sync(src, f"s3://{bucket}/ex", exact=True, on_object=on_object)
    assert [(i.action, i.key) for i in items if i.action != "skip"] == [("upload", "ex/same.txt")]
    assert boto.get_object(Bucket=bucket, Key="ex/same.txt")["Body"].read() == b"9876543210"


def test_dryrun_changes_nothing(client, boto, bucket, tmp_path):
    src = tmp_path / "src"
    make_tree(src, {"a.txt": b"a", "b.txt": b"b"})
    client.sync(src, f"s3://{bucket}/dr")
    (src / "c.txt").write_bytes(b"c")
    (src / "a.txt").unlink()
    boto.put_object(Bucket=bucket, Key="dr/remote.txt", Body=b"r")
    before_remote, before_local = listing(boto, bucket), read_tree(src)
    items, on_object = collect()
    client.sync(src, f"s3://{bucket}/dr", delete=True, dryrun=True, on_object=on_object)
    assert sorted((i.action, i.key) for i in items if i.action != "skip") == [
        ("delete_remote", "dr/a.txt"), ("delete_remote", "dr/remote.txt"), ("upload", "dr/c.txt")]
    assert listing(boto, bucket) == before_remote and read_tree(src) == before_local
    # The other direction, and the other calls.
    dst = tmp_path / "dst"
    items, on_object = collect()
    client.sync(f"s3://{bucket}/dr", dst, dryrun=True, on_object=on_object)
    assert sorted(i.key for i in items if i.action == "download") == ["dr/a.txt", "dr/b.txt", "dr/remote.txt"]
    assert not dst.exists() or entries(dst) == set()
    client.upload_dir(src, bucket, "dr2/", dryrun=True)
    client.delete_prefix(bucket, "dr/", dryrun=True)
    client.copy_prefix(bucket, "dr/", bucket, "dr3/", dryrun=True)
    assert listing(boto, bucket) == before_remote


def test_delete_prefix_2500(client, boto, bucket, tmp_path):
    make_tree(tmp_path, {f"k{i:04d}": b"" for i in range(2500)})
    client.upload_dir(tmp_path, bucket, "del/", config=TransferConfig(concurrency=32))
    boto.put_object(Bucket=bucket, Key="keep/x", Body=b"x")
    boto.put_object(Bucket=bucket, Key="del", Body=b"not under del/")
    assert len(listing(boto, bucket, "del/")) == 2500
    items, on_object = collect()
    s = client.delete_prefix(bucket, "del/", on_object=on_object)
    assert s.objects_done == 2500 and s.objects_failed == 0
    assert len({i.key for i in items if i.action == "delete_remote"}) == 2500
    assert set(listing(boto, bucket)) == {"keep/x", "del"}


def test_copy_prefix_200(client, boto, bucket, tmp_path):
    dst_bucket = bucket + "-dst"
    boto.create_bucket(Bucket=dst_bucket)
    try:
        files = {f"c{i:03d}/{'x' * (i % 7)}.bin": body_for(f"c{i}", i * 37) for i in range(200)}
        make_tree(tmp_path, files)
        client.upload_dir(tmp_path, bucket, "src/")
        items, on_object = collect()
        s = client.copy_prefix(bucket, "src/", dst_bucket, "copied/", on_object=on_object)
        assert s.objects_done == 200 and s.objects_failed == 0
        assert {(i.key, i.dest_key) for i in items if i.action == "copy"} == {
            ("src/" + k, "copied/" + k) for k in files}
        assert_bucket_holds(boto, dst_bucket, "copied/", files)
        for k, data in files.items():
            assert boto.get_object(Bucket=dst_bucket, Key="copied/" + k)["Body"].read() == data
    finally:
        from conftest import _empty_bucket
        _empty_bucket(boto, dst_bucket)


def puts_per_key(proxy, bucket):
    """Successful PUTs (no fault injected) per key, from the proxy's log."""
    n = {}
    for d in proxy.decisions():
        if d["method"] == "PUT" and not d.get("faults") and d["path"].startswith(f"/{bucket}/"):
            n[d["path"]] = n.get(d["path"], 0) + 1
    return n


def test_faults_on_1000_objects_exactly_once(pclient, boto, bucket, proxy, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = {f"g{i % 10}/o{i:04d}": body_for(f"o{i}", 100 + i) for i in range(1000)}
    make_tree(src, files)
    proxy.set_rules(["slowdown_503:p=0.05,kind=put", "reset_request:p=0.03,kind=put,after=10",
                     "reset_response:p=0.03,kind=put"])
    proxy.reset_stats()
    s = pclient.upload_dir(src, bucket, "", config=TransferConfig(concurrency=16))
    assert (s.objects_done, s.objects_failed) == (1000, 0)
    faults = proxy.stats()["faults"]
    assert sum(faults.values()) > 0, faults
    assert s.retries > 0
    assert_bucket_holds(boto, bucket, "", files)
    per_key = puts_per_key(proxy, bucket)
    assert len(per_key) == 1000 and set(per_key.values()) == {1}

    proxy.set_rules(["slowdown_503:p=0.05,kind=get", "reset_response:p=0.03,kind=get,after=10",
                     "truncate_response:p=0.02,kind=get,after=20"])
    proxy.reset_stats()
    s = pclient.download_dir(bucket, "", dst, config=TransferConfig(concurrency=16))
    assert (s.objects_done, s.objects_failed) == (1000, 0)
    assert sum(proxy.stats()["faults"].values()) > 0
    assert read_tree(dst) == files


def test_exception_in_on_object_cancels_and_is_raised(client, boto, bucket, tmp_path):
    make_tree(tmp_path, {f"f{i:03d}": b"x" for i in range(200)})
    seen = []

    def on_object(item):
        seen.append(item)
        if len(seen) == 3:
            raise KeyError("stop here")
    with pytest.raises(KeyError, match="stop here"):
        client.upload_dir(tmp_path, bucket, "", on_object=on_object, config=TransferConfig(concurrency=2))
    assert len(seen) == 3
    assert len(listing(boto, bucket)) < 200
    assert uploads_in_progress(boto, bucket) == []


def test_progress_and_cancel_token_leave_nothing(client, boto, bucket, tmp_path):
    src = tmp_path / "src"
    make_tree(src, {f"big{i:02d}": os.urandom(11 * MiB) for i in range(10)})
    token = s3xfer.CancelToken()
    seen, done = [], []

    def on_object(item):
        done.append(item)
        token.cancel()  # the run stops at its next report, multipart uploads in flight

    cfg = TransferConfig(part_size=5 * MiB, multipart_threshold=5 * MiB, concurrency=4)
    with pytest.raises(s3xfer.TransferCancelled) as ei:
        client.upload_dir(src, bucket, "", config=cfg, progress=seen.append, on_object=on_object, cancel=token)
    assert len(done) == 1 and ei.value.summary.objects_done < 10
    assert seen and all(isinstance(s, s3xfer.BulkSummary) for s in seen)
    assert uploads_in_progress(boto, bucket) == []
    assert len(listing(boto, bucket)) < 10

    # A download cancelled part way leaves whole files only, no temporary file.
    client.upload_dir(src, bucket, "", config=cfg)
    dst = tmp_path / "dst"
    token, done = s3xfer.CancelToken(), []
    with pytest.raises(s3xfer.TransferCancelled) as ei:
        client.download_dir(bucket, "", dst, config=cfg, on_object=on_object, cancel=token)
    assert ei.value.summary is not None and len(done) == 1
    names = entries(dst)
    assert len(names) < 10
    for e in names:
        assert e.startswith("big") and len(e) == 5, e
        assert (dst / e).read_bytes() == (src / e).read_bytes()


def test_progress_of_the_whole_run(client, bucket, tmp_path):
    files = {f"p{i}": os.urandom(11 * MiB) for i in range(6)}
    make_tree(tmp_path, files)
    seen = []
    cfg = TransferConfig(part_size=5 * MiB, multipart_threshold=5 * MiB, concurrency=2)
    s = client.upload_dir(tmp_path, bucket, "", config=cfg, progress=seen.append)
    total = sum(map(len, files.values()))
    assert s.bytes_done == total
    done = [p.bytes_done for p in seen]
    assert done == sorted(done) and done[-1] == total
    # Calls while the bytes move (at least every 250 ms), not only at the ends.
    assert any(0 < d < total for d in done), done
    assert seen[-1].listing_done and seen[-1].objects_found == 6


def test_cancel_from_another_thread(client, bucket, tmp_path):
    make_tree(tmp_path, {f"m{i}": os.urandom(8 * MiB) for i in range(8)})
    token = s3xfer.CancelToken()
    threading.Timer(0.3, token.cancel).start()
    with pytest.raises(s3xfer.TransferCancelled):
        client.upload_dir(tmp_path, bucket, "", cancel=token,
                          config=TransferConfig(part_size=5 * MiB, multipart_threshold=5 * MiB, concurrency=1))


def test_run_errors_raise_their_own_class(client, bucket, tmp_path):
    with pytest.raises(s3xfer.NoSuchBucket):
        client.download_dir(bucket + "-missing", "", tmp_path / "d")
    with pytest.raises(s3xfer.LocalIOError):
        client.upload_dir(tmp_path / "no-such-dir", bucket, "")
    with pytest.raises(s3xfer.InvalidConfigError):
        client.sync(tmp_path, tmp_path)
    with pytest.raises(s3xfer.InvalidConfigError):
        client.sync(f"s3://{bucket}/a", f"s3://{bucket}/b")


def test_python_m_s3xfer_cp_r_sync_rm_r(s3env, boto, bucket, tmp_path):
    """python -m s3xfer mirrors the native tool's cp -r, sync and rm -r."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, {"a.txt": b"a", "sub/b.log": b"b", "sub/c.txt": b"c"})
    env = dict(os.environ, AWS_ENDPOINT_URL=s3env["endpoint_url"], AWS_ACCESS_KEY_ID=s3env["access_key"],
               AWS_SECRET_ACCESS_KEY=s3env["secret_key"], AWS_REGION=s3env["region"])

    def pym(*args):
        return subprocess.run([sys.executable, "-m", "s3xfer", *args], env=env, capture_output=True, text=True,
                              timeout=300)
    p = pym("cp", "-r", "--exclude", "*", "--include", "*.txt", str(src), f"s3://{bucket}/p")
    assert p.returncode == 0, p.stderr
    assert f"upload: {src}/sub/c.txt to s3://{bucket}/p/sub/c.txt\n" in p.stdout
    assert set(listing(boto, bucket)) == {"p/a.txt", "p/sub/c.txt"}
    p = pym("sync", "--json", f"s3://{bucket}/p", str(dst))
    assert p.returncode == 0, p.stderr
    import json
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    assert sorted(r["key"] for r in recs if r["type"] == "object" and r["action"] == "download") == [
        "p/a.txt", "p/sub/c.txt"]
    assert recs[-1]["type"] == "summary" and recs[-1]["objects_done"] == 2
    assert read_tree(dst) == {"a.txt": b"a", "sub/c.txt": b"c"}
    p = pym("rm", "-r", "--dryrun", f"s3://{bucket}/p/")
    assert p.returncode == 0 and p.stdout.count("(dryrun) delete: ") == 2
    p = pym("rm", "-r", f"s3://{bucket}/p/")
    assert p.returncode == 0 and listing(boto, bucket) == {}
    boto.put_object(Bucket=bucket, Key="x/clash", Body=b"f")
    boto.put_object(Bucket=bucket, Key="x/clash/in", Body=b"d")
    p = pym("cp", "-r", f"s3://{bucket}/x/", str(tmp_path / "clash"))
    assert p.returncode == 1 and "1 object failed" in p.stderr
    assert pym("cp", "--include", "*", str(src), f"s3://{bucket}/k").returncode == 2


def test_fail_fast(tmp_path):
    objs = {f"k{i:03d}": b"x" for i in range(50)}
    objs.update({"k010/../../x": b"bad", "k020/../y": b"bad"})
    with FakeBucket("ffb", objs) as fake, \
            s3xfer.Client(endpoint_url=fake.url, access_key="AKIDFAKE", secret_key="fake") as c:
        with pytest.raises(s3xfer.PartialFailureError) as ei:
            c.download_dir("ffb", "", tmp_path / "all", config=TransferConfig(concurrency=1))
        assert [f.key for f in ei.value.summary.failures] == ["k010/../../x", "k020/../y"]
        with pytest.raises(s3xfer.PartialFailureError) as ei:
            c.download_dir("ffb", "", tmp_path / "ff", config=TransferConfig(concurrency=1), fail_fast=True)
    s = ei.value.summary
    assert [f.key for f in s.failures] == ["k010/../../x"] and s.objects_done < 50
    assert "'..'" in str(ei.value) and "1 of" in str(ei.value)
