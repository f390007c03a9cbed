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


def _timed(config, seconds, resends, run, fraction="0.01"):
    r = rec(config, fraction, "1-2", resends, 0)
    r.update(seconds=seconds, run=run)
    return r


def test_an_off_miss_without_a_resend_is_marked_as_off_own_requests():
    labels = ["off", "200 ms", "dynamic"]
    # cell 1%: dynamic re-sent nothing and was slower than OFF in every round (noise: the same requests)
    # cell 5%: dynamic re-sent once per round and was slower (a real cost of its cuts)
    recs = []
    for run in range(3):
        recs += [_timed("off", 1.0, 0, run), _timed("200 ms", 1.0, 0, run), _timed("dynamic", 1.1, 0, run),
                 _timed("off", 1.0, 0, run, "0.05"), _timed("200 ms", 1.0, 1, run, "0.05"),
                 _timed("dynamic", 1.1, 1, run, "0.05")]
    cells = slow_part_grid.summarize(recs, labels)
    by = {c["fraction"]: c for c in cells}
    assert by["0.01"]["goals"]["dynamic"]["no_resend"] is True
    assert by["0.05"]["goals"]["dynamic"]["no_resend"] is False
    head, rows = slow_part_grid.grid_table(cells)
    goals = {r[1]: r[-1] for r in rows}
    assert goals["1%"] == "missed off (no re-send: OFF's requests)"
    assert goals["5%"] == "missed off"
    # cell 10%: OFF's requests in 2 of 3 rounds (slower there), a cut held attempt in the third (far faster)
    recs2 = recs + [_timed("off", 1.0, 0, 0, "0.1"), _timed("200 ms", 1.0, 0, 0, "0.1"),
                    _timed("dynamic", 1.05, 0, 0, "0.1"),
                    _timed("off", 1.0, 0, 1, "0.1"), _timed("200 ms", 1.0, 0, 1, "0.1"),
                    _timed("dynamic", 1.1, 0, 1, "0.1"),
                    _timed("off", 10.0, 0, 2, "0.1"), _timed("200 ms", 1.0, 1, 2, "0.1"),
                    _timed("dynamic", 0.9, 1, 2, "0.1")]
    c10 = {c["fraction"]: c for c in slow_part_grid.summarize(recs2, labels)}["0.1"]
    g = c10["goals"]["dynamic"]
    assert not g["not_worse_than_off"] and (g["rounds_as_off"], g["rounds"]) == (2, 3)
    assert g["within_15"] and abs(g["vs_off_resent"] - 0.09) < 1e-9
    rows10 = [r for r in slow_part_grid.grid_table([c10])[1]]
    assert rows10[0][-1] == "missed off (OFF's requests in 2 of 3 rounds; in the others a median 0.09 of OFF)"
    line = slow_part_grid.goal_line(cells)
    assert "not slower than off 0 (of the misses, 1 without a re-send: OFF's own requests)" in line


def test_a_dynamic_whose_every_transfer_failed_is_not_said_to_send_off_requests():
    recs = []
    for run in range(2):
        recs += [_timed("off", 1.0, 0, run), _timed("200 ms", 1.0, 0, run), _timed("dynamic", 9.0, 0, run)]
        recs[-1]["ok"] = False
    c = slow_part_grid.summarize(recs, ["off", "200 ms", "dynamic"])[0]
    g = c["goals"]["dynamic"]
    assert not g["not_worse_than_off"] and g["no_resend"] is False and g["rounds"] == 0
    assert slow_part_grid.grid_table([c])[1][0][-1].endswith("off")
