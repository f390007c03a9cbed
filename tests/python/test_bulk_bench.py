"""benchmarks/bulk_compare.py, the many-objects benchmark: its run check finds
what did not land, and a tiny run against the test server measures what it can
and says why it skipped the rest (never silently), leaving no bucket or file.

The peers the script installs are not installed here: with --no-install and
this interpreter for the Python clients, boto3 (which the suite has) runs and
the others are either there already or listed as skipped.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bulk_compare  # noqa: E402


def test_compare_names_what_differs():
    want = {"d00/a": 10, "d00/b": 20, "d01/c": 30}
    assert bulk_compare.compare(want, dict(want), "upload") is None
    msg = bulk_compare.compare(want, {"d00/a": 10, "d00/b": 21, "x": 1}, "upload")
    assert msg.startswith("upload: 3 of 3 landed"), msg
    assert "1 missing (d01/c)" in msg and "1 extra (x)" in msg and "1 wrong size (d00/b)" in msg, msg


def test_dataset_changes_a_tenth_half_resized(tmp_path):
    ds = bulk_compare.DataSet("40x4KiB", str(tmp_path), 1_000_000_000)
    assert len(ds.rels) == 40 and len(ds.changed) == 4 and len(ds.resized) == 2
    assert all((tmp_path / f"src-{ds.name}" / r).stat().st_size == 4096 for r in ds.rels)
    assert all((tmp_path / f"src-{ds.name}" / r).stat().st_mtime == 1_000_000_000 for r in ds.rels)
    assert ds.changed_bytes() == 2 * 4096 + 2 * (4096 + 4096)


def test_tiny_run_measures_checks_and_cleans_up(s3env, build_dir, boto, tmp_path):
    out = tmp_path / "out"
    work = tmp_path / "work"
    clients = ["s3xfer-cli", "s5cmd", "boto3"]
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bulk_compare.py"), "--sets", "12x4KiB",
                        "--runs", "1", "--clients", ",".join(clients), "--no-install", "--python", sys.executable,
                        "--build", str(build_dir), "--work-dir", str(work), "--out", str(out)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    assert (out / "results.md").read_text().startswith("# Many objects")
    for c in clients:
        st = res["clients"][c]["status"]
        assert st == "ok" or (st.startswith("skipped: ") and len(st) > len("skipped: ")), (c, st)
        if st != "ok":
            assert f"bulk: {c} skipped: " in r.stderr, (c, r.stderr[-2000:])
    assert res["clients"]["boto3"]["status"] == "ok"
    assert set(res["workloads"]) == {f"{op}-12x4KiB" for op in bulk_compare.OPS}
    for op in ("upload", "download"):
        runs = res["workloads"][f"{op}-12x4KiB"]["clients"]["boto3"]["runs"]
        assert len(runs) == 1 and runs[0]["ok"], runs
        assert runs[0]["wall"] > 0 and runs[0]["rss_mib"] > 0
        assert res["workloads"][f"{op}-12x4KiB"]["clients"]["boto3"]["summary"]["objects_s"]["median"] > 0
    for op in ("sync-up", "sync-down"):
        assert res["workloads"][f"{op}-12x4KiB"]["clients"]["boto3"]["status"] == "n/a: boto3 has no sync"
        for c in clients:
            for x in res["workloads"][f"{op}-12x4KiB"]["clients"][c]["runs"]:
                # a sync that passed its check copied at least the changed tenth
                assert not x["ok"] or x["copied"] >= 1, (c, x)
    # the run's directory and buckets are gone
    assert not list(work.glob("s3xfer-bench-bulk-*"))
    assert res["buckets"], "no bucket recorded"
    left = {b["Name"] for b in boto.list_buckets()["Buckets"]}
    assert not left & set(res["buckets"]), left & set(res["buckets"])
