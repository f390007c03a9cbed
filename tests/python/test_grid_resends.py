"""benchmarks/slow_part_grid.py: the re-sends beyond the held attempts,
summed per direction and tail share over the delays. Offline: records as
the grid writes them."""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import slow_part_grid  # noqa: E402


def rec(config, fraction, delay, resends, held, ok=True, direction="upload"):
    return {"direction": direction, "fraction": fraction, "delay": delay, "config": config, "run": 0, "ok": ok,
            "seconds": 1.0, "retries": resends, "resends": resends, "held": held, "timeout_end_ms": 0}


def test_resends_beyond_held_are_summed_over_delays_and_never_negative():
    recs = [
        rec("off", "0.05", "1-2", 0, 2), rec("off", "0.05", "10", 0, 1),
        # 3 re-sends for 2 held, then 1 for 1: one beyond
        rec("200 ms", "0.05", "1-2", 3, 2), rec("200 ms", "0.05", "10", 1, 1),
        # a held attempt answered under the timeout (0 re-sends for 1 held) does not
        # cancel a healthy cut of another transfer
        rec("dynamic", "0.05", "1-2", 4, 2), rec("dynamic", "0.05", "10", 0, 1),
        rec("off", slow_part_grid.SLOWDOWN, "+0.3", 0, 20),
        rec("200 ms", slow_part_grid.SLOWDOWN, "+0.3", 0, 20, ok=False),
        rec("dynamic", slow_part_grid.SLOWDOWN, "+0.3", 2, 20),
    ]
    head, rows = slow_part_grid.extra_resend_table(recs, ["off", "200 ms", "dynamic"])
    assert head[:3] == ["direction", "tail", "transfers"]
    by = {(r[0], r[1]): r for r in rows}
    assert by[("upload", "5%")][2:] == ["2", "0 / 0", "1 / 4", "2 / 4"]
    # every first byte is held in the slow-down cell: only the total means anything;
    # a configuration whose every transfer failed says so
    assert by[("upload", "slow-down")][2:] == ["1", "- / 0", "fail", "- / 2"]


def test_failed_transfers_are_left_out_and_counted():
    recs = [rec("200 ms", "0.2", "1-2", 5, 3), rec("200 ms", "0.2", "2-5", 9, 1, ok=False)]
    # "transfers" counts per configuration, whichever came first
    _, rows = slow_part_grid.extra_resend_table(recs, ["off", "200 ms"])
    assert rows[0][2:] == ["2", "", "2 / 5 (1 failed, left out)"]
