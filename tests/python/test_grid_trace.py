"""benchmarks/slow_part_grid.py --trace: the library's per-attempt lines
(S3X_FBT_TRACE) between the grid's start and end marks are summed up per
cell and configuration. Offline: a trace written here in the library's
format."""

from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import slow_part_grid  # noqa: E402


def attempt(sent, first_byte=0.0, cut=0, given=0, judged=0.0, rule="medians"):
    return {"xfer": 1, "slot": 0, "attempt": 1, "start": sent - 0.01, "sent": sent, "first_byte": first_byte,
            "end": first_byte or sent + given / 1000, "status": 200 if first_byte else 0, "cut": cut,
            "given_ms": given, "judged_ms": judged, "timeout_ms": 300, "tail_ms": 0.0, "median_ms": 100.0,
            "spread_ms": 20.0, "rule": rule, "inflight": 3}


def test_trace_table_sums_cuts_rules_and_healthy_answers(tmp_path):
    trace = tmp_path / "t.jsonl"
    rec = {"direction": "upload", "fraction": "0.2", "delay": "2-5", "run": 0}
    lines = []
    for config, atts in (
            ("off", [attempt(1.0, 1.1), attempt(1.0, 3.5)]),  # held 2.5 s: not a healthy answer
            ("200 ms", [attempt(2.0, 2.05), attempt(2.0, cut=1, given=200, rule="fixed")]),
            ("dynamic", [attempt(3.0, 3.2),
                         attempt(3.0, cut=1, given=300, judged=300.0, rule="spread"),
                         attempt(3.0, cut=1, given=1200, judged=300.0, rule="medians"),
                         attempt(3.0, cut=1, given=320, judged=300.0, rule="spread")])):
        lines.append({"mark": "start", "t": 0, **rec, "config": config})
        lines += atts
        lines.append({"mark": "end", "t": 0, **rec, "config": config})
    lines.append(attempt(9.0, 9.1))  # outside any transfer: left out
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))

    transfers = slow_part_grid.read_trace(str(trace))
    assert [m["config"] for m, _ in transfers] == ["off", "200 ms", "dynamic"]
    head, rows = slow_part_grid.trace_table(transfers, ["off", "200 ms", "dynamic"])
    got = {r[3]: dict(zip(head, r)) for r in rows}
    assert set(got) == {"200 ms", "dynamic"}  # OFF cuts nothing
    d = got["dynamic"]
    assert d["cuts per transfer"] == "3.0" and d["median given to a cut ms"] == "320"
    assert d["cuts given 2x+ their timeout"] == "1"
    assert d["rule in force at the cuts"] == "spread 2, medians 1"
    assert got["200 ms"]["cuts given 2x+ their timeout"] == "-"
    assert got["200 ms"]["rule in force at the cuts"] == "fixed 1"
    # healthy answers of every configuration, the 2.5 s one left out: 100, 50, 200 ms
    assert d["healthy first byte p50 / p99 / max ms"] == "100 / 200 / 200"
