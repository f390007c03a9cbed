"""benchmarks/client_limit.py: the curl reference downloads cover the object
exactly once, a failed process fails the run, and the same-round ratio pairs
each run with the iperf3 run of its round. Offline: no server is started;
the multi-process script is run with a stand-in `curl` on PATH."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import client_limit  # noqa: E402

MiB = 1 << 20


class _Ctx:
    certs = {"ca": "/tmp/ca.pem"}


def _ranges(args):
    """The (first, last) byte of every -r in an argument list."""
    out = []
    for i, a in enumerate(args):
        if a == "-r":
            first, last = args[i + 1].split("-")
            out.append((int(first), int(last)))
    return out


def _covers(ranges, size):
    pos = 0
    for first, last in sorted(ranges):
        assert first == pos, f"gap or overlap at {pos}: {first}"
        assert last >= first
        pos = last + 1
    assert pos == size


def test_parallel_curl_asks_one_range_per_part_over_one_process():
    wl = {"size": 100 * MiB + 5, "part_size": 8 * MiB, "concurrency": 8, "tls": True}
    cmd = client_limit.curl_ranges_cmd(_Ctx(), wl, "https://127.0.0.1:1/b/k", "curl-parallel-null")
    assert cmd[:4] == ["curl", "-Z", "--parallel-max", "8"]
    rs = _ranges(cmd)
    assert len(rs) == 13 and rs[-1] == (12 * 8 * MiB, 100 * MiB + 4)
    _covers(rs, wl["size"])
    # every transfer carries its own options after --next: the CA, /dev/null, the byte count
    assert cmd.count("--next") == 12 and cmd.count("--cacert") == 13 and cmd.count(os.devnull) == 13


def _fake_curl(tmp_path, fail_range=None):
    """A `curl` that prints the length of its -r range (as -w %{size_download}
    would) and exits 22 for fail_range."""
    d = tmp_path / "bin"
    d.mkdir()
    f = d / "curl"
    f.write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -r ] && r=$2; shift; done\n"
                 f"[ \"$r\" = '{fail_range}' ] && exit 22\n"
                 "a=${r%-*}; b=${r#*-}; echo $((b - a + 1))\n")
    f.chmod(0o755)
    return dict(os.environ, PATH=f"{d}:{os.environ['PATH']}")


def test_curl_processes_split_the_object_and_a_failed_one_fails_the_run(tmp_path):
    wl = {"size": 10 * MiB + 3, "part_size": 8 * MiB, "concurrency": 4, "tls": False}
    cmd = client_limit.curl_ranges_cmd(_Ctx(), wl, "http://127.0.0.1:1/b/k", "curl-procs-null")
    assert cmd[:2] == ["sh", "-c"] and "--cacert" not in cmd[2]
    rs = [tuple(int(x) for x in m.groups()) for m in re.finditer(r"-r (\d+)-(\d+)", cmd[2])]
    assert len(rs) == 4
    _covers(rs, wl["size"])
    env = _fake_curl(tmp_path)
    ok = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    assert ok.returncode == 0 and sum(int(v) for v in ok.stdout.split()) == wl["size"]
    bad = tmp_path / "bad"
    bad.mkdir()
    env = _fake_curl(bad, fail_range=f"{rs[2][0]}-{rs[2][1]}")
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    assert r.returncode != 0


def test_same_round_ratio_pairs_runs_by_round():
    lim = [{"ok": True, "round": 0, "mib_s": 4000.0}, {"ok": True, "round": 1, "mib_s": 2000.0},
           {"ok": False, "round": 2, "mib_s": 0.0}]
    runs = [{"ok": True, "round": 0, "mib_s": 2000.0}, {"ok": True, "round": 1, "mib_s": 1800.0},
            {"ok": True, "round": 2, "mib_s": 1900.0}, {"ok": False, "round": 3, "mib_s": 1.0}]
    # 0.5 and 0.9; the round whose iperf3 failed and the failed run are left out
    assert abs(client_limit.same_round_ratio(runs, lim) - 0.7) < 1e-9
    assert client_limit.same_round_ratio(runs, []) is None


def test_round_order_puts_every_runner_after_iperf3_equally():
    active = ["s3xfer-cli", "awscrt", "curl", "iperf3-P8", "iperf3-P1"]
    after = {}
    for rnd in range(6):
        order = client_limit.round_order(active, rnd)
        assert sorted(order) == sorted(active), order
        assert order[:2] == ["iperf3-P8", "iperf3-P1"], order
        after[order[2]] = after.get(order[2], 0) + 1
    assert after == {"s3xfer-cli": 2, "awscrt": 2, "curl": 2}
    assert client_limit.round_order(["iperf3-P8"], 3) == ["iperf3-P8"]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_round_order_puts_every_runner_after_each_other_equally(n):
    """Over one period of rounds (n, or 2n for odd n) every runner follows
    every other one in the same number of rounds: a rotation would keep each
    behind the same one, and what ran before changes a file download's cost."""
    from collections import Counter
    names = [f"r{i}" for i in range(n)]
    period = n if n % 2 == 0 else 2 * n
    pairs = Counter()
    for rnd in range(period):
        order = client_limit.round_order(["iperf3-P8", *names], rnd)
        assert order[0] == "iperf3-P8" and sorted(order[1:]) == names, order
        pairs.update(zip(order[1:], order[2:]))
    assert set(pairs) == {(a, b) for a in names for b in names if a != b}
    assert len(set(pairs.values())) == 1, pairs
