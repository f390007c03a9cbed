"""The command-line tool on many objects: cp -r both ways and between
prefixes, sync (--delete, --dryrun, --exact), rm -r; --include/--exclude,
--follow-symlinks, --json records, exit codes, hostile keys, faults
injected by the proxy, and a signal in the middle of a run. Checked with
boto3 and the local file system."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from bulktrees import (HOSTILE_KEYS, SPECIAL_NAMES, FakeBucket, assert_bucket_holds, body_for, check_contained,
                       entries, hostile_objects, hostile_setup, listing, make_tree, read_tree, uploads_in_progress)

PROXY_SEED = 29
MiB = 1 << 20


def run(cli, *args, env=None, timeout=600, prefix=()):
    return subprocess.run([*prefix, cli, "--no-progress", *args], capture_output=True, env=env, timeout=timeout)


def ok(p):
    assert p.returncode == 0, (p.returncode, p.stderr.decode(errors="replace")[-3000:])
    return p


def esc(s: str) -> str:
    """A name as the tool prints it (cli_text.c): \\n for a newline."""
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def records(p):
    return [json.loads(line) for line in p.stdout.decode().splitlines()]


def test_cp_r_round_trip_lines_and_names(cli, boto, bucket, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = {name: body_for(name) for name in SPECIAL_NAMES}
    files.update({"n/e/s/t/ed.txt": b"nested", "empty": b"", "n/empty2": b""})
    make_tree(src, files, dirs=["emptydir", "n/e/empty"])
    p = ok(run(cli, "cp", "-r", str(src), f"s3://{bucket}/pre"))
    out = p.stdout.decode()
    for rel in files:
        assert f"upload: {esc(str(src / rel))} to s3://{bucket}/pre/{esc(rel)}\n" in out, rel
    lines = out.splitlines()
    assert len([line for line in lines if line.startswith("upload: ")]) == len(files)
    assert lines[-1].startswith(f"cp -r: {len(files)} copied, 0 deleted, 0 skipped, 0 failed")
    assert_bucket_holds(boto, bucket, "pre/", files)

    p = ok(run(cli, "cp", "--recursive", f"s3://{bucket}/pre/", str(dst)))
    out = p.stdout.decode()
    for rel in files:
        assert f"download: s3://{bucket}/pre/{esc(rel)} to {esc(str(dst / rel))}\n" in out, rel
    assert read_tree(dst) == files
    assert not [e for e in entries(dst) if "tmp" in e.lower() and e not in files]


def test_5000_files_round_trip(cli, boto, bucket, tmp_path, scale):
    src, dst = tmp_path / "src", tmp_path / "dst"
    # Under the sanitizers (S3X_TEST_SCALE) fewer, but still several listing
    # pages of 1,000 and far more files than the concurrency.
    n = scale(5000, at_least=2100)
    files = {f"d{i % 64:02d}/sub{i % 3}/f{i:05d}.dat": body_for(f"cli{i}", i % 300) for i in range(n)}
    make_tree(src, files)
    p = ok(run(cli, "--concurrency", "32", "-q", "cp", "-r", str(src), f"s3://{bucket}/five/"))
    assert p.stdout == b""
    assert_bucket_holds(boto, bucket, "five/", files)
    p = ok(run(cli, "--concurrency", "32", "--json", "cp", "-r", f"s3://{bucket}/five/", str(dst)))
    recs = records(p)
    objs = [r for r in recs if r["type"] == "object"]
    assert len(objs) == n and all(r["outcome"] == "ok" and r["action"] == "download" for r in objs)
    assert recs[-1]["type"] == "summary" and recs[-1]["objects_done"] == n and recs[-1]["exit_code"] == 0
    assert read_tree(dst) == files


def test_json_records(cli, boto, bucket, tmp_path):
    make_tree(tmp_path, {"a.txt": b"aaa", "b/c.txt": b"cc", "new\nline": b"n"})
    p = ok(run(cli, "--json", "cp", "-r", str(tmp_path), f"s3://{bucket}/j/"))
    recs = records(p)
    objs = sorted((r for r in recs if r["type"] == "object"), key=lambda r: r["key"])
    assert [(r["action"], r["outcome"], r["bucket"], r["key"], r["size"]) for r in objs] == [
        ("upload", "ok", bucket, "j/a.txt", 3), ("upload", "ok", bucket, "j/b/c.txt", 2),
        ("upload", "ok", bucket, "j/new\nline", 1)]
    assert all(r["path"].startswith(str(tmp_path)) and r["result"]["bytes"] == r["size"] for r in objs)
    s = recs[-1]
    assert s["type"] == "summary" and s["command"] == "cp" and s["outcome"] == "ok" and s["exit_code"] == 0
    assert (s["objects_done"], s["objects_failed"], s["bytes_done"]) == (3, 0, 6)
    assert "error" not in s


@pytest.mark.parametrize("flags, expect", [
    (["--exclude", "*", "--include", "*.txt"], {"a.txt", "sub/c.txt"}),
    (["--include", "*.txt", "--exclude", "*"], set()),
    (["--exclude", "sub/*"], {"a.txt", "b.log"}),
    (["--include", "*.txt"], {"a.txt", "b.log", "sub/c.txt", "sub/d.log"}),
    (["--exclude", "*.log", "--exclude", "a*"], {"sub/c.txt"}),
])
def test_include_exclude_order(cli, boto, bucket, tmp_path, flags, expect):
    make_tree(tmp_path, {n: b"x" for n in ["a.txt", "b.log", "sub/c.txt", "sub/d.log"]})
    ok(run(cli, "cp", "-r", *flags, str(tmp_path), f"s3://{bucket}/"))
    assert set(listing(boto, bucket)) == expect


def test_symlinks(cli, boto, bucket, tmp_path):
    src, outside = tmp_path / "src", tmp_path / "outside"
    make_tree(src, {"real.txt": b"r"})
    make_tree(outside, {"o.txt": b"o"})
    os.symlink(src / "real.txt", src / "link.txt")
    os.symlink(outside, src / "linkdir")
    p = ok(run(cli, "cp", "-r", str(src), f"s3://{bucket}/nf/"))
    assert set(listing(boto, bucket, "nf/")) == {"nf/real.txt"}
    err = p.stderr.decode()
    assert "link.txt" in err and "linkdir" in err and "warning: skipped" in err
    ok(run(cli, "cp", "-r", "--follow-symlinks", str(src), f"s3://{bucket}/f/"))
    assert set(listing(boto, bucket, "f/")) == {"f/real.txt", "f/link.txt", "f/linkdir/o.txt"}


def test_unreadable_file_exit_1(cli, boto, bucket, tmp_path):
    """A mode-000 file, with the tool run without CAP_DAC_OVERRIDE (root
    reads anything otherwise): that file fails, the others go, exit 1."""
    make_tree(tmp_path, {"a.txt": b"a", "locked.txt": b"secret", "z.txt": b"z"})
    os.chmod(tmp_path / "locked.txt", 0)
    p = run(cli, "cp", "-r", str(tmp_path), f"s3://{bucket}/",
            prefix=("setpriv", "--bounding-set", "-dac_override,-dac_read_search"))
    assert p.returncode == 1, p.stderr
    err = p.stderr.decode()
    assert f"upload failed: {tmp_path}/locked.txt to s3://{bucket}/locked.txt: " in err
    assert "1 object failed" in err
    out = p.stdout.decode()
    assert "upload: " in out and "2 copied, 0 deleted, 0 skipped, 1 failed" in out
    assert set(listing(boto, bucket)) == {"a.txt", "z.txt"}


def test_hostile_keys(cli, tmp_path):
    root, target, outside = hostile_setup(tmp_path)
    with FakeBucket("hbk", hostile_objects("h/")) as fake:
        p = run(cli, "--json", "cp", "-r", "s3://hbk/h/", str(target), env=fake.env())
        assert p.returncode == 1, p.stderr
        recs = records(p)
        bad = {r["key"]: r for r in recs if r["type"] == "object" and r["outcome"] in ("refused", "failed")}
        for k in HOSTILE_KEYS:
            assert "h/" + k in bad and (bad["h/" + k].get("reason") or bad["h/" + k].get("error")), (k, sorted(bad))
        assert ("h/a" in bad) != ("h/a/b" in bad)  # one of a file and a directory of one name
        s = recs[-1]
        assert s["outcome"] == "failed" and s["exit_code"] == 1
        assert s["objects_failed"] == len(bad) and s["error"]["code"] == -16
        assert (target / "ok.txt").read_bytes() == b"H:ok.txt"
        check_contained(tmp_path, root, target, outside)
        # The text form: a line per refusal on stderr with its reason, keys escaped.
        p = run(cli, "cp", "-r", "s3://hbk/h/", str(tmp_path / "t2"), env=fake.env())
    assert p.returncode == 1
    err = p.stderr.decode()
    lines = err.splitlines()
    # As above, but "link/x" lands: there is no planted link in t2.
    reported = [line for line in lines if line.startswith(("refused: ", "download failed: "))]
    assert len(reported) == len(bad) - 1, err
    assert any(line.startswith("refused: s3://hbk/h/../x: ") and "'..'" in line for line in reported)
    assert lines[-1] == f"s3xfer: cp -r: {len(bad) - 1} objects failed"


def test_sync_delete_dryrun_exact(cli, boto, bucket, tmp_path):
    src = tmp_path / "src"
    files = {f"f{i}": body_for(f"s{i}") for i in range(6)}
    make_tree(src, files)
    url = f"s3://{bucket}/sync"
    ok(run(cli, "sync", str(src), url))
    assert_bucket_holds(boto, bucket, "sync/", files)
    p = ok(run(cli, "sync", str(src), url))
    assert not [line for line in p.stdout.decode().splitlines() if not line.startswith("sync: ")]
    assert "0 copied, 0 deleted, 6 skipped, 0 failed" in p.stdout.decode()

    (src / "f1").write_bytes(b"changed size")
    (src / "f9").write_bytes(b"new")
    (src / "f2").unlink()
    remote_before, local_before = listing(boto, bucket), read_tree(src)
    p = ok(run(cli, "sync", "--delete", "--dryrun", str(src), url))
    lines = sorted(line for line in p.stdout.decode().splitlines() if not line.startswith("(dryrun) sync: "))
    assert lines == sorted([f"(dryrun) upload: {src}/f1 to {url}/f1", f"(dryrun) upload: {src}/f9 to {url}/f9",
                            f"(dryrun) delete: {url}/f2"])
    assert listing(boto, bucket) == remote_before and read_tree(src) == local_before

    p = ok(run(cli, "--json", "sync", "--delete", str(src), url))
    acted = sorted((r["action"], r["key"]) for r in records(p) if r["type"] == "object" and r["action"] != "skip")
    assert acted == [("delete_remote", "sync/f2"), ("upload", "sync/f1"), ("upload", "sync/f9")]
    assert_bucket_holds(boto, bucket, "sync/", read_tree(src))

    # Down, then --exact sees a same-size change that size and time miss.
    dst = tmp_path / "dst"
    ok(run(cli, "sync", url + "/", str(dst)))
    assert read_tree(dst) == read_tree(src)
    data = (dst / "f0").read_bytes()
    st = os.stat(dst / "f0")
    (dst / "f0").write_bytes(bytes(reversed(data)))
    os.utime(dst / "f0", (st.st_atime, st.st_mtime))
    p = ok(run(cli, "sync", url, str(dst)))
    assert "download:" not in p.stdout.decode()
    p = ok(run(cli, "sync", "--exact", url, str(dst)))
    assert f"download: {url}/f0 to {dst}/f0" in p.stdout.decode()
    assert (dst / "f0").read_bytes() == data
    # --delete downwards removes the local extra.
    (dst / "extra").write_bytes(b"e")
    p = ok(run(cli, "sync", "--delete", url, str(dst)))
    assert f"delete: {dst}/extra" in p.stdout.decode()
    assert read_tree(dst) == read_tree(src)


def test_rm_r_over_pages(cli, boto, bucket, tmp_path):
    make_tree(tmp_path, {f"k{i:04d}": b"" for i in range(1200)})
    ok(run(cli, "--concurrency", "32", "-q", "cp", "-r", str(tmp_path), f"s3://{bucket}/gone/"))
    boto.put_object(Bucket=bucket, Key="gone", Body=b"kept: not under gone/")
    boto.put_object(Bucket=bucket, Key="gonexx/k", Body=b"kept: not under gone/")
    p = ok(run(cli, "rm", "-r", "--dryrun", f"s3://{bucket}/gone"))
    assert p.stdout.decode().count("(dryrun) delete: ") == 1200
    assert len(listing(boto, bucket)) == 1202
    p = ok(run(cli, "rm", "-r", f"s3://{bucket}/gone"))
    out = p.stdout.decode()
    assert out.count("delete: s3://") == 1200 and f"delete: s3://{bucket}/gone/k0000\n" in out
    assert set(listing(boto, bucket)) == {"gone", "gonexx/k"}


def test_cp_r_between_prefixes(cli, boto, bucket, tmp_path):
    files = {f"p{i:03d}.bin": body_for(f"cp{i}", 50 + i) for i in range(200)}
    make_tree(tmp_path, files)
    ok(run(cli, "-q", "cp", "-r", str(tmp_path), f"s3://{bucket}/from/"))
    p = ok(run(cli, "cp", "-r", f"s3://{bucket}/from/", f"s3://{bucket}/to/"))
    out = p.stdout.decode()
    assert out.count("copy: ") == 200 and f"copy: s3://{bucket}/from/p000.bin to s3://{bucket}/to/p000.bin" in out
    assert_bucket_holds(boto, bucket, "to/", files)
    for k, data in files.items():
        assert boto.get_object(Bucket=bucket, Key="to/" + k)["Body"].read() == data


def test_faults_1000_objects_exactly_once(cli, s3env, boto, bucket, proxy, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = {f"o{i:04d}": body_for(f"fault{i}", 64 + i % 500) for i in range(1000)}
    make_tree(src, files)
    proxy.set_rules(["slowdown_503:p=0.05,kind=put", "reset_request:p=0.03,kind=put,after=10",
                     "reset_response:p=0.03,kind=put"])
    p = ok(run(cli, "--endpoint-url", proxy.url, "--concurrency", "16", "--json", "cp", "-r", str(src),
               f"s3://{bucket}/"))
    s = records(p)[-1]
    assert s["objects_done"] == 1000 and s["objects_failed"] == 0 and s["retries"] > 0
    assert sum(proxy.stats()["faults"].values()) > 0
    assert_bucket_holds(boto, bucket, "", files)
    puts = {}
    for d in proxy.decisions():
        if d["method"] == "PUT" and not d["faults"]:
            puts[d["path"]] = puts.get(d["path"], 0) + 1
    assert len(puts) == 1000 and set(puts.values()) == {1}

    proxy.set_rules(["slowdown_503:p=0.05,kind=get", "reset_response:p=0.03,kind=get,after=10"])
    proxy.reset_stats()
    ok(run(cli, "--endpoint-url", proxy.url, "--concurrency", "16", "-q", "cp", "-r", f"s3://{bucket}/", str(dst)))
    assert sum(proxy.stats()["faults"].values()) > 0
    assert read_tree(dst) == files


@pytest.mark.parametrize("direction", ["up", "down"])
def test_sigint_leaves_no_multipart_upload_nor_temp_file(cli, s3env, boto, bucket, proxy, tmp_path, direction):
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = {f"big{i}": os.urandom(11 * MiB) for i in range(4)}
    make_tree(src, files)
    if direction == "down":
        ok(run(cli, "-q", "cp", "-r", str(src), f"s3://{bucket}/"))
    # Slow enough through the proxy that the signal lands mid-run.
    proxy.set_rules(["bandwidth:rate=2M,direction=both"])
    args = ["--endpoint-url", proxy.url, "--part-size", "5MiB", "--multipart-threshold", "5MiB",
            "--concurrency", "4", "cp", "-r"]
    args += [str(src), f"s3://{bucket}/"] if direction == "up" else [f"s3://{bucket}/", str(dst)]
    proc = subprocess.Popen([cli, "--no-progress", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err)
    assert b"SIGINT" in err
    assert uploads_in_progress(boto, bucket) == []
    if direction == "down":
        # Only whole files, under their own names: no temporary file left.
        for e in entries(dst) if dst.exists() else ():
            assert e in files and (dst / e).read_bytes() == files[e], e


@pytest.mark.parametrize("args, needle", [
    (["cp", "-r", "onlyone"], "cp -r needs SRC and DST"),
    (["cp", "-r", "a", "b"], "s3://"),
    (["sync", "s3://b/x", "s3://b/y"], "local directory"),
    (["cp", "-r", "--delete", "d", "s3://b/x"], "--delete"),
    (["cp", "--include", "*", "d", "s3://b/x"], "cp -r, sync and rm -r"),
    (["rm", "-r"], "rm -r needs"),
    (["ls", "-r", "s3://b"], "-r applies"),
    (["cp", "-r", "d", "s3://"], "s3://bucket"),
])
def test_usage_errors_exit_2(cli, args, needle):
    p = run(cli, *args)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert needle in p.stderr.decode()


def test_run_error_exit_1(cli, bucket, tmp_path):
    p = run(cli, "cp", "-r", f"s3://{bucket}-missing/x/", str(tmp_path / "d"))
    assert p.returncode == 1
    assert "cp -r failed" in p.stderr.decode()
    p = run(cli, "--json", "sync", str(tmp_path / "nope"), f"s3://{bucket}/x")
    assert p.returncode == 1
    s = records(p)[-1]
    assert s["type"] == "summary" and s["outcome"] == "failed" and s["error"]["code"] != 0


def test_help_mentions_bulk(cli):
    out = run(cli, "--help").stdout.decode()
    for word in ("cp -r", "sync SRC DST", "rm -r", "--include", "--exclude", "--follow-symlinks", "--delete",
                 "--dryrun", "--exact", "--fail-fast"):
        assert word in out, word


def test_fail_fast_stops_at_the_first_failure(cli, tmp_path):
    objs = {f"k{i:03d}": b"x" for i in range(50)}
    objs.update({"k010/../../x": b"bad", "k020/../y": b"bad"})
    with FakeBucket("ffb", objs) as fake:
        p = run(cli, "--json", "--concurrency", "1", "cp", "-r", "s3://ffb/", str(tmp_path / "all"), env=fake.env())
        s = records(p)[-1]
        assert p.returncode == 1 and (s["objects_done"], s["objects_failed"]) == (50, 2)
        p = run(cli, "--json", "--concurrency", "1", "cp", "-r", "--fail-fast", "s3://ffb/", str(tmp_path / "ff"),
                env=fake.env())
    recs = records(p)
    s = recs[-1]
    assert p.returncode == 1 and s["objects_failed"] == 1 and s["objects_done"] < 50
    assert [r["key"] for r in recs if r["type"] == "object" and r["outcome"] != "ok"] == ["k010/../../x"]
    assert len(entries(tmp_path / "ff")) == s["objects_done"]
