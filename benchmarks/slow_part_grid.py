#!/usr/bin/env python3
"""The slow-part grid: does the learned (DYNAMIC) first-byte timeout do as well
as the best hand-tuned one, whatever the tail looks like?

Cells: tail fractions (share of part attempts whose first response byte is
held) x delays (how long) x directions (upload parts, ranged GETs), plus a
"server slows down for everyone" cell per direction (every first byte +300 ms
from a quarter to three quarters of the transfer). Configurations: OFF, fixed
timeouts, DYNAMIC with the P90 estimator of earlier releases (selected through
the S3X_FBT_ESTIMATOR=p90 environment variable, which exists for this
comparison only) and DYNAMIC with the robust estimator (the default), twice:

- "dynamic": what an application doing many transfers with one client gets.
  Every transfer of the grid runs on one client, and a DYNAMIC transfer starts
  from what the client's earlier DYNAMIC transfers of the same kind learned
  (docs/reliability.md, "carried between transfers"): in a cell's first round
  that is the previous cell's (another tail: the server changed), in its
  later rounds the same cell's previous round (a steady tail), 20-60 s
  earlier, with the other configurations' transfers in between.
- "dynamic (no carry)": the same with S3X_FBT_CARRY=off in the environment
  (for this comparison only): every transfer learns on its own from its
  starting timeout, as a client's first transfer does (on warm connections,
  like every configuration here).
- "dynamic (NAME=VALUE)", with --env-variant NAME=VALUE: the same with that
  benchmark-only switch in the environment (for this comparison only):
  S3X_FBT_TAIL_HISTORY=N, the tail rule (docs/reliability.md, point 9) takes
  the slowest of the last N answers instead of 128; S3X_FBT_TAIL_MARGIN=X,
  it goes down to X times that answer instead of 1.5; S3X_FBT_TAIL_FIT=off,
  it leaves out the quantiles of its fit of the answers (point 10);
  S3X_FBT_TAIL_NEAR=X (below 1), it takes the highest candidate saving at
  least X of the best candidate's saving instead of the best (point 11);
  S3X_FBT_TAIL_MIN_CUTS=N, it lowers once N of the last 128 attempts were
  cut instead of 2 (point 12; 1 is the rule before).

The faults come from tests/faultproxy in front of the server with "keyed"
decisions that leave the upload id out (key_ignore), reseeded before every
transfer: within a round every configuration meets the same held attempts
(the same ranges or part numbers, the same attempt numbers), in both
directions. Rounds use other seeds. Configurations are interleaved (their
order rotates each round). Cells report each configuration's median over the
rounds; the goals compare DYNAMIC with OFF and with the best fixed timeout
(the fastest median) round by round: the median over the rounds of the ratio
of their times in the same round, which met the same held attempts. A miss
against OFF in a cell where DYNAMIC re-sent nothing is marked "no re-send:
OFF's requests": the two sent the same requests, so the ratio is that of one
transfer timed twice (the goal still counts it as missed); where it re-sent in
some rounds only, the mark gives how many rounds sent OFF's requests and the
median ratio to OFF over the other rounds.

A 1% tail shows once per hundred part attempts: give the download (cheap) a
larger object than the upload with --size-down; the re-sends table reports
the held attempts of each cell (2026-12-03: --size-up 128MiB --size-down
320MiB --runs 3 --no-legacy, 39 min on the shared 2-core machine).

--trace FILE sets S3X_FBT_TRACE=FILE for the grid's transfers: the library
appends a JSON line per part attempt (its times, whether it was cut and
after how long, the timeout's state; benchmark-only), the grid a line at
each transfer's start and end, and the report gets a table of where the cut
attempts' time went and of the server's healthy first-byte times per cell.

    benchmarks/slow_part_grid.py [--size 100MiB] [--size-up SIZE] [--size-down SIZE] [--part-size 5MiB]
                                 [--concurrency 4] [--runs 3] [--no-legacy] [--no-carry-variant]
                                 [--env-variant NAME=VALUE ...]
                                 [--fractions 0.01,0.05,0.1,0.2] [--delays 1-2,2-5,10]
                                 [--directions upload,download] [--fixed 200,400,800,1600,3200]
                                 [--no-slowdown] [--quick] [--trace FILE] [--out PREFIX|DIR]

--fractions "" runs the slow-down cells only. --quick is the default suite's
entry (`benchmarks/run`): 128 MiB up and down (26 parts: with fewer, only a
few attempts fall in the slow-down, see benchmarks/README.md), the 10% x 2-5 s
cells and the two slow-down cells, no P90 and no no-carry variant (84 transfers at --runs 3, about 3
minutes here); options given as well still apply. --out PREFIX writes
PREFIX.md, PREFIX.json and PREFIX.records.jsonl; --out naming an existing
directory (as `run` passes it) is the prefix DIR/results. --clients (from `run --runners`) is accepted: the grid
is s3xfer's Python binding alone, so it runs when the list has s3xfer-py.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SLOWDOWN = "slowdown"          # the fraction column of the slow-down cell
SLOWDOWN_DELAY = "+0.3"         # its delay column: every first byte 300 ms late
SLOWDOWN_SPAN = (0.25, 0.75)    # ... from this share of the bytes done to this one
# --quick, the default suite's entry: 26 parts each way, one tail cell per
# direction and the slow-down cells, DYNAMIC carried only.
QUICK = {"size": "128MiB", "fractions": "0.1", "delays": "2-5", "no_legacy": True, "no_carry_variant": True}


ENV_KNOBS = ("S3X_FBT_ESTIMATOR", "S3X_FBT_CARRY", "S3X_FBT_TAIL_HISTORY", "S3X_FBT_TAIL_MARGIN",
             "S3X_FBT_TAIL_FIT", "S3X_FBT_TAIL_NEAR", "S3X_FBT_TAIL_MIN_CUTS", "S3X_FBT_WAITING",
             "S3X_FBT_BROAD")  # benchmark-only (core/src/xfer/retry.h)


def dynamics(labels):
    """The DYNAMIC configurations among labels, the default one first."""
    return sorted((x for x in labels if x.startswith("dynamic")), key=lambda x: x != "dynamic")


def configs(fixed=(200, 400, 800, 1600, 3200), legacy=True, no_carry=False, env_variants=()):
    """(label, slow_part_timeout knob, environment for the transfer or None)."""
    out = [("off", "off", None)] + [(f"{ms} ms", ms, None) for ms in fixed]
    if legacy:
        out.append(("dynamic (p90)", "dynamic", {"S3X_FBT_ESTIMATOR": "p90"}))
    if no_carry:
        out.append(("dynamic (no carry)", "dynamic", {"S3X_FBT_CARRY": "off"}))
    for v in env_variants:  # "NAME=VALUE"
        name, _, value = v.partition("=")
        out.append((f"dynamic ({v})", "dynamic", {name: value}))
    out.append(("dynamic", "dynamic", None))
    return out


def _transfer(s3xfer, client, direction, bucket, path, out, size, cfg, progress=None):
    t = time.monotonic()
    if direction == "upload":
        r = client.upload_file(path, bucket, "grid-up", config=cfg, progress=progress)
    else:
        r = client.download_file(bucket, "grid-down", out, config=cfg, progress=progress)
    secs = time.monotonic() - t
    assert r.bytes == size, (direction, r.bytes, size)
    return r, secs


def run_grid(s3xfer, client, proxy, bucket, path, out, size, part, concurrency, cells, cfgs, runs,
             max_attempts=10, log=None, sizes=None, on_record=None, trace=None):
    """Runs every cell (direction, fraction, delay) x configuration x round;
    returns one record per transfer. fraction SLOWDOWN is the slow-down cell.
    sizes: {direction: (path, size)} where a direction moves another object
    than (path, size) (a download is cheap, so it can have more parts).
    on_record(rec) is called after each transfer (a partial run's records
    survive an interruption). trace: the S3X_FBT_TRACE file, where a line
    marks each transfer's start and end around the library's attempt lines."""
    recs = []
    n_total = len(cells) * len(cfgs) * runs
    t0 = time.monotonic()
    for ci, (direction, fraction, delay) in enumerate(cells):
        kind = "upload_part" if direction == "upload" else "ranged_get"
        dpath, dsize = (sizes or {}).get(direction, (path, size))
        if fraction == SLOWDOWN:
            slow_rules = [f"delay_first_byte:p=1,kind={kind},delay=0.3"]
        else:
            rules = [f"delay_first_byte:p={fraction},kind={kind},delay={delay}"]
        for run in range(runs):
            k = run % len(cfgs)
            for label, knob, env in cfgs[k:] + cfgs[:k]:
                seed = 7000 + 97 * run + ci
                progress = None
                if fraction == SLOWDOWN:
                    proxy.set_rules([], seed=seed)
                    state = {"done": 0, "phase": 0}

                    def progress(delta, state=state, slow_rules=slow_rules, dsize=dsize):
                        # The server slows down for everyone in the middle of
                        # the transfer: the estimator has learned the healthy
                        # times by then, and must also come back down after.
                        state["done"] += delta
                        share = state["done"] / dsize
                        if state["phase"] == 0 and share >= SLOWDOWN_SPAN[0]:
                            state["phase"] = 1
                            proxy.set_rules(slow_rules)
                        elif state["phase"] == 1 and share >= SLOWDOWN_SPAN[1]:
                            state["phase"] = 2
                            proxy.set_rules([])
                else:
                    proxy.set_rules(rules, seed=seed)
                proxy.reset_stats()
                for name in ENV_KNOBS:
                    os.environ.pop(name, None)
                os.environ.update(env or {})
                cfg = s3xfer.TransferConfig(part_size=part, concurrency=concurrency, slow_part_timeout=knob,
                                            max_attempts=max_attempts)
                rec = {"direction": direction, "fraction": fraction, "delay": delay, "config": label,
                       "run": run, "ok": True, "size": dsize, "parts": -(-dsize // part)}
                if trace:
                    _mark(trace, "start", rec)
                try:
                    r, secs = _transfer(s3xfer, client, direction, bucket, dpath, out, dsize, cfg, progress)
                    rec.update(seconds=secs, retries=r.retries, resends=r.retries_first_byte,
                               timeout_end_ms=r.slow_part_timeout_ms, requests=r.requests)
                except s3xfer.S3xferError as e:  # a fixed timeout below every answer gives up
                    rec.update(ok=False, seconds=math.inf, error=str(e).splitlines()[0][:200],
                               retries=None, resends=None, timeout_end_ms=None, requests=None)
                finally:
                    for name in ENV_KNOBS:
                        os.environ.pop(name, None)
                    if trace:
                        _mark(trace, "end", rec)
                rec["held"] = proxy.stats()["faults"].get("delay_first_byte", 0)
                recs.append(rec)
                if on_record:
                    on_record(rec)
                if log:
                    done = len(recs)
                    eta = (time.monotonic() - t0) / done * (n_total - done)
                    log(f"[{done}/{n_total} eta {eta:4.0f}s] {direction:8} {str(fraction):8} {delay:5} "
                        f"{label:14} {rec['seconds']:6.2f}s retries={rec['retries']} resends={rec['resends']} "
                        f"held={rec['held']} timeout_end={rec['timeout_end_ms']}")
    proxy.set_rules([])
    return recs


def _mark(trace, what, rec):
    with open(trace, "a") as f:
        f.write(json.dumps({"mark": what, "t": time.monotonic(),
                            **{k: rec[k] for k in ("direction", "fraction", "delay", "config", "run")}}) + "\n")


def read_trace(path):
    """The S3X_FBT_TRACE file as [(marker of the transfer, [attempt lines])];
    the library and the markers use the same clock (CLOCK_MONOTONIC)."""
    out, cur = [], None
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if d.get("mark") == "start":
                cur = (d, [])
            elif d.get("mark") == "end":
                if cur:
                    out.append(cur)
                cur = None
            elif cur:
                cur[1].append(d)
    return out


def _quantile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


def trace_table(transfers, labels):
    """Where the time of the cut attempts went, per cell and configuration
    (OFF left out): cuts per transfer, the median time a cut attempt was
    given, and how many cut attempts of DYNAMIC were given twice or more its
    learned timeout (the wait when no attempt sent after them was answered
    in time, scheduler.c fb_due), and which rule set the timeout in force
    when they were cut (for DYNAMIC, retry.h S3X_FBT_RULE_*: "medians" is
    MEDIAN_MULT x the median, "spread" the median plus SPREAD_MULT spreads,
    "tail" the tail rule, "lift" the raise after a run of cuts); then the
    server's answers in the cell over
    all configurations: first-byte times of the attempts answered within 1 s
    of being sent (the grid holds attempts 1 s or more, so these are the
    healthy ones), in ms."""
    cells = {}
    for m, atts in transfers:
        key = (m["direction"], m["fraction"], m["delay"])
        c = cells.setdefault(key, {"healthy": [], "by": {}})
        for a in atts:
            if not a["cut"] and a["first_byte"] > 0 and a["sent"] > 0 and a["first_byte"] - a["sent"] < 1.0:
                c["healthy"].append(1000.0 * (a["first_byte"] - a["sent"]))
        if m["config"] == "off":
            continue
        b = c["by"].setdefault(m["config"], {"n": 0, "given": [], "long": 0, "rules": collections.Counter()})
        b["n"] += 1
        for a in atts:
            if a["cut"]:
                b["given"].append(a["given_ms"])
                b["long"] += a["judged_ms"] > 0 and a["given_ms"] >= 2 * a["judged_ms"]
                b["rules"][a.get("rule", "?")] += 1
    head = ["direction", "tail", "delay s", "configuration", "transfers", "cuts per transfer",
            "median given to a cut ms", "cuts given 2x+ their timeout", "rule in force at the cuts",
            "healthy first byte p50 / p99 / max ms"]
    rows = []
    for key, c in cells.items():
        h = c["healthy"]
        hq = " / ".join(f"{_quantile(h, q):.0f}" for q in (0.5, 0.99)) + f" / {max(h):.0f}" if h else ""
        for label in [lb for lb in labels if lb in c["by"]]:
            b = c["by"][label]
            rows.append([key[0], _fmt_frac(key[1]), key[2], label, str(b["n"]), f"{len(b['given']) / b['n']:.1f}",
                         f"{statistics.median(b['given']):.0f}" if b["given"] else "-",
                         str(b["long"]) if label.startswith("dynamic") else "-",
                         ", ".join(f"{k} {v}" for k, v in b["rules"].most_common()) or "-",
                         hq])
    return head, rows


def _median(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def _paired(recs, key, a, b):
    """The median over the rounds of a's seconds over b's in the same round
    (inf when a failed a round that b did not)."""
    by = {}
    for r in recs:
        if (r["direction"], r["fraction"], r["delay"]) == key and r["config"] in (a, b):
            by.setdefault(r["run"], {})[r["config"]] = r["seconds"]
    ratios = [v[a] / v[b] for v in by.values() if a in v and b in v and math.isfinite(v[b])]
    return statistics.median(ratios) if ratios else math.inf


def _judged(vs_best, vs_off, retries_ok):
    """The goals for one DYNAMIC in one cell, from its time ratios."""
    return {"vs_best": vs_best, "vs_off": vs_off, "within_15": vs_best <= 1.15,
            "not_worse_than_off": vs_off is None or vs_off <= 1.0, "retries_ok": retries_ok}


def summarize(recs, cfg_labels):
    """Per cell: per configuration the median seconds / retries / re-sends,
    and the goals for each DYNAMIC (within 15% of the best fixed timeout,
    not slower than OFF, at most 1.2x that fixed timeout's retries)."""
    cells = []
    by_cell = {}
    for r in recs:
        by_cell.setdefault((r["direction"], r["fraction"], r["delay"]), []).append(r)
    for key, cell in by_cell.items():
        rows = {}
        for label in cfg_labels:
            rs = [r for r in cell if r["config"] == label]
            if not rs:
                continue
            rows[label] = {"seconds": _median([r["seconds"] for r in rs]),
                           "min": min(r["seconds"] for r in rs), "max": max(r["seconds"] for r in rs),
                           "retries": _median([r["retries"] for r in rs]),
                           "resends": _median([r["resends"] for r in rs]),
                           "held": _median([r["held"] for r in rs]),
                           "held_total": sum(r["held"] for r in rs),
                           "timeout_end_ms": _median([r["timeout_end_ms"] for r in rs]),
                           "failed": sum(not r["ok"] for r in rs), "runs": len(rs)}
        fixed = {k: v for k, v in rows.items() if k.endswith(" ms")}
        best = min(fixed, key=lambda k: (fixed[k]["seconds"], fixed[k]["retries"] or 0)) if fixed else None
        goals = {}
        for dyn in dynamics(rows) if best else ():
            d, b, off = rows[dyn], rows[best], rows.get("off")
            # Round by round: the same seed, so the same held attempts.
            vs_best = _paired(cell, key, dyn, best)
            vs_off = _paired(cell, key, dyn, "off") if off else None
            br, dr = b["retries"] or 0, d["retries"] or 0
            retries_ok = dr <= 1.2 * br if br else dr <= 1
            # A round where it re-sent nothing sent OFF's requests: its time
            # against OFF's there is that of the same transfer twice. How
            # many rounds were so, and the same-round ratio over the others.
            # (A DYNAMIC whose every transfer failed is not said to have sent OFF's requests.)
            mine = [r for r in cell if r["config"] == dyn and r["ok"]]
            same = {r["run"] for r in mine if r["resends"] == 0}
            goals[dyn] = dict(_judged(vs_best, vs_off, retries_ok), retries_ratio=(dr / br) if br else None,
                              no_resend=bool(mine) and len(same) == len(mine), rounds_as_off=len(same),
                              rounds=len(mine),
                              vs_off_resent=(_paired([r for r in cell if r["run"] not in same], key, dyn, "off")
                                             if off and len(same) < len(mine) else None),
                              of_medians=_judged(d["seconds"] / b["seconds"],
                                                 d["seconds"] / off["seconds"] if off else None, retries_ok))
        cells.append({"direction": key[0], "fraction": key[1], "delay": key[2], "rows": rows, "best_fixed": best,
                      "goals": goals, "held_total": sum(r["held"] for r in cell), "transfers": len(cell),
                      "parts": cell[0].get("parts")})
    return cells


def goal_counts(cells, dyn="dynamic", of_medians=False):
    """How many cells dyn meets all three goals in, each goal alone, and the
    geometric means of its wall time over the best fixed timeout's and OFF's.
    of_medians: the ratios of the configurations' medians instead of the
    same-round ratios (how the grid was judged before 2026-12-03's third run)."""
    top = [c["goals"][dyn] for c in cells if dyn in c["goals"]]
    gs = [t["of_medians"] if of_medians else t for t in top]
    if not gs:
        return None

    def gmean(v):
        v = [x for x in v if x and math.isfinite(x)]
        return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None
    return {"cells": len(gs),
            "all": sum(g["within_15"] and g["not_worse_than_off"] and g["retries_ok"] for g in gs),
            "within_15": sum(g["within_15"] for g in gs),
            "not_worse_than_off": sum(g["not_worse_than_off"] for g in gs),
            "retries_ok": sum(g["retries_ok"] for g in gs),
            # of the cells missed against OFF, those where dyn re-sent nothing
            "off_missed_no_resend": sum(bool(t.get("no_resend")) and not g["not_worse_than_off"]
                                        for t, g in zip(top, gs)),
            "gmean_vs_best": gmean([g["vs_best"] for g in gs]), "gmean_vs_off": gmean([g["vs_off"] for g in gs])}


def goal_line(cells, dyn="dynamic", of_medians=False):
    g = goal_counts(cells, dyn, of_medians)
    if not g:
        return ""
    f = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    how = "ratios of the medians" if of_medians else "same-round ratios"
    return (f"{dyn} ({how}): all three goals in {g['all']} of {g['cells']} cells; within 15% of the best fixed "
            f"{g['within_15']}, not slower than off {g['not_worse_than_off']}"
            + (f" (of the misses, {g['off_missed_no_resend']} without a re-send: OFF's own requests)"
               if g.get("off_missed_no_resend") else "") + ", at most 1.2x its retries "
            f"{g['retries_ok']}; wall time over the best fixed (geometric mean) {f(g['gmean_vs_best'])}, "
            f"over off {f(g['gmean_vs_off'])}")


def _fmt_frac(f):
    return "slow-down" if f == SLOWDOWN else f"{float(f):.0%}"


def off_note(g, met):
    """For a miss against OFF: the rounds in which DYNAMIC sent OFF's own
    requests (re-sent nothing), and its time over OFF's in the others."""
    if "off" not in met:
        return ""
    if g.get("no_resend"):
        return " (no re-send: OFF's requests)"
    v = g.get("vs_off_resent")
    if g.get("rounds_as_off") and v is not None and math.isfinite(v):
        return (f" (OFF's requests in {g['rounds_as_off']} of {g['rounds']} rounds; in the others a median "
                f"{v:.2f} of OFF)")
    return ""


def grid_table(cells, dyn="dynamic"):
    """One line per cell: the times of each configuration and the goals for dyn."""
    labels = list(cells[0]["rows"]) if cells else []
    head = ["direction", "tail", "delay s"] + [f"{lb} s" for lb in labels] + \
        ["best fixed", f"{dyn} / best (same round)", f"{dyn} / off (same round)", "retries dyn:best", "goals"]
    out = []
    for c in cells:
        g = c["goals"].get(dyn, {})
        b = c["rows"].get(c["best_fixed"], {})
        d = c["rows"].get(dyn, {})
        met = [n for n, ok in (("15%", g.get("within_15")), ("off", g.get("not_worse_than_off")),
                               ("1.2x", g.get("retries_ok"))) if ok is False]
        out.append([c["direction"], _fmt_frac(c["fraction"]), c["delay"]] +
                   [("fail" if r["failed"] == r["runs"] else f"{r['seconds']:.2f}") for r in c["rows"].values()] +
                   [c["best_fixed"] or "", f"{g['vs_best']:.2f}" if g else "",
                    f"{g['vs_off']:.2f}" if g.get("vs_off") else "",
                    f"{d.get('retries')}:{b.get('retries')}",
                    "met" if g and not met else "missed " + ",".join(met)
                    + off_note(g, met)])
    return head, out


def resend_table(cells):
    """Per cell, the median re-sends (first-byte retries) of each configuration."""
    labels = list(cells[0]["rows"]) if cells else []
    head = ["direction", "tail", "delay s", "parts", "held (off)", "held per transfer", "held in all"] + labels + \
        ["dynamic timeout at end ms"]
    out = []
    for c in cells:
        rows = c["rows"]
        n = c.get("transfers") or 0
        out.append([c["direction"], _fmt_frac(c["fraction"]), c["delay"], str(c.get("parts") or ""),
                    str(rows.get("off", {}).get("held", "")),
                    f"{c.get('held_total', 0) / n:.1f}" if n else "", str(c.get("held_total", ""))] +
                   ["fail" if r["failed"] == r["runs"] else str(r["resends"]) for r in rows.values()] +
                   [str(rows.get("dynamic", {}).get("timeout_end_ms", ""))])
    return head, out


def extra_resend_table(recs, labels):
    """Per direction and tail share (the delays summed), per configuration:
    the re-sends beyond the held attempts (re-sends minus held attempts per
    transfer, at least 0: parts re-sent that the proxy did not hold, mostly
    healthy answers cut) and all re-sends, summed over the transfers that
    succeeded ("fail": none did); "transfers": per configuration. The
    per-cell medians of the re-send table hide these: a transfer re-sends
    one to a few parts, so one healthy cut more or less moves a median by
    a whole step. In the slow-down cell every first byte is held: only the
    sum of all re-sends means anything there."""
    head = ["direction", "tail", "transfers"] + [f"{lb} beyond held / all" for lb in labels]
    out = []
    for d, f in dict.fromkeys((r["direction"], r["fraction"]) for r in recs):
        rs = [r for r in recs if (r["direction"], r["fraction"]) == (d, f)]
        cols, transfers = [], 0
        for lb in labels:
            mine = [r for r in rs if r["config"] == lb]
            transfers = max(transfers, len(mine))
            if not mine:
                cols.append("")
                continue
            ok = [r for r in mine if r["ok"]]
            if not ok:
                cols.append("fail")
                continue
            total = sum(r["resends"] or 0 for r in ok)
            beyond = "-" if f == SLOWDOWN else str(sum(max(0, (r["resends"] or 0) - (r["held"] or 0)) for r in ok))
            failed = f" ({len(mine) - len(ok)} failed, left out)" if len(ok) < len(mine) else ""
            cols.append(f"{beyond} / {total}{failed}")
        out.append([d, _fmt_frac(f), str(transfers)] + cols)
    return head, out


def markdown(head, rows):
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    line = lambda cols: "| " + " | ".join(str(c).rjust(w[i]) for i, c in enumerate(cols)) + " |"  # noqa: E731
    return "\n".join([line(head), "| " + " | ".join("-" * x for x in w) + " |"] + [line(r) for r in rows])


def remove_bucket(s3xfer, client, bucket):
    """Empties and removes the grid's bucket: every transfer overwrites the
    same two keys, and SeaweedFS keeps what they replaced in the bucket's
    volumes until the bucket goes (one full grid and two runs of its upload
    cells left 77 GB here)."""
    try:
        for u in client.list_multipart_uploads(bucket):
            client.abort_multipart_upload(bucket, u["key"], u["upload_id"])
        client.delete_prefix(bucket, "")
        client.delete_bucket(bucket)
    except s3xfer.ClientError as e:
        print(f"slow-part grid: could not remove bucket {bucket}: {e}", file=sys.stderr)


def build_cells(directions, fractions, delays, slowdown=True):
    cells = [(d, f, dl) for d in directions for f in fractions for dl in delays]
    if slowdown:
        cells += [(d, SLOWDOWN, SLOWDOWN_DELAY) for d in directions]
    return cells


def main() -> int:
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    import benchlib
    from faultproxy import FaultProxy

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="100MiB", help="both objects")
    ap.add_argument("--size-up", default=None, help="the upload's object (default --size)")
    ap.add_argument("--size-down", default=None, help="the download's object (default --size)")
    ap.add_argument("--part-size", default="5MiB")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--fractions", default="0.01,0.05,0.1,0.2")
    ap.add_argument("--delays", default="1-2,2-5,10")
    ap.add_argument("--directions", default="upload,download")
    ap.add_argument("--fixed", default="200,400,800,1600,3200")
    ap.add_argument("--no-legacy", action="store_true", help="leave out DYNAMIC with the P90 estimator")
    ap.add_argument("--no-carry-variant", action="store_true",
                    help="leave out DYNAMIC without the carry between transfers (S3X_FBT_CARRY=off)")
    ap.add_argument("--env-variant", action="append", default=[], metavar="NAME=VALUE",
                    help="add DYNAMIC with NAME=VALUE in the environment, one of " + ", ".join(ENV_KNOBS) +
                    " (repeatable)")
    ap.add_argument("--no-slowdown", action="store_true")
    ap.add_argument("--trace", default=None, metavar="FILE",
                    help="write the library's per-attempt trace (S3X_FBT_TRACE) to FILE and add a table of it")
    ap.add_argument("--build")
    ap.add_argument("--quick", action="store_true",
                    help="the default suite's entry: 128MiB, 10%% x 2-5 s and the slow-down cells")
    ap.add_argument("--clients", default=None, help="runners asked for (benchmarks/run --runners)")
    ap.add_argument("--out", default=None,
                    help="PREFIX: write PREFIX.md, .json, .records.jsonl; an existing directory: results.* in it")
    a = ap.parse_args()
    if a.quick:  # its presets become the defaults: options given still apply
        ap.set_defaults(**QUICK)
        a = ap.parse_args()
    for v in a.env_variant:
        if v.partition("=")[0] not in ENV_KNOBS or "=" not in v:
            ap.error(f"--env-variant {v}: NAME=VALUE with NAME one of {', '.join(ENV_KNOBS)}")
    if a.out and os.path.isdir(a.out):
        a.out = os.path.join(a.out, "results")
    if a.clients is not None and "s3xfer-py" not in a.clients.split(","):
        note = f"slow-part grid: skipped (it runs s3xfer's Python binding, s3xfer-py, not in --clients {a.clients})"
        print(note)
        benchlib.write_out(a.out, note, {"skipped": note})
        return 0
    size, part = benchlib.parse_size(a.size), benchlib.parse_size(a.part_size)
    build = benchlib.build_dir(a.build)
    sys.path.insert(0, os.path.join(build, "python"))
    import s3xfer

    env = benchlib.server_env()
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    direct = s3xfer.Client()
    bucket = "s3xfer-slow-part-grid"  # fixed: keyed fault decisions depend on the path
    try:
        direct.create_bucket(bucket)
    except s3xfer.ClientError:
        pass
    def data_file(n):
        p = os.path.join(benchlib.data_dir(), f"slowpart-{n}.bin")
        if not os.path.exists(p) or os.path.getsize(p) != n:
            with open(p, "wb") as f:
                left = n
                while left:
                    k = min(left, 64 << 20)
                    f.write(os.urandom(k))
                    left -= k
        return p

    size_up = benchlib.parse_size(a.size_up) if a.size_up else size
    size_down = benchlib.parse_size(a.size_down) if a.size_down else size
    sizes = {"upload": (data_file(size_up), size_up), "download": (data_file(size_down), size_down)}
    path = sizes["upload"][0]
    direct.upload_file(sizes["download"][0], bucket, "grid-down", config=s3xfer.TransferConfig(part_size=part))
    out = os.path.join(benchlib.data_dir(), "slowpart-grid.out")

    cfgs = configs([int(x) for x in a.fixed.split(",") if x], legacy=not a.no_legacy,
                   no_carry=not a.no_carry_variant, env_variants=a.env_variant)
    cells = build_cells(a.directions.split(","), [f for f in a.fractions.split(",") if f],
                        [d for d in a.delays.split(",") if d], not a.no_slowdown)
    proxy = FaultProxy.from_url(env["AWS_ENDPOINT_URL"], seed=1, decisions="keyed", key_ignore=("uploadId",))
    proxy.start()
    t0 = time.monotonic()
    load0 = os.getloadavg()
    on_record = None
    if a.out:
        partial = a.out + ".records.jsonl"  # one line per transfer as it ends
        open(partial, "w").close()

        def on_record(rec):
            with open(partial, "a") as f:
                f.write(json.dumps(rec) + "\n")
    if a.trace:
        open(a.trace, "w").close()
        os.environ["S3X_FBT_TRACE"] = os.path.abspath(a.trace)
    try:
        client = s3xfer.Client(endpoint_url=proxy.url)
        recs = run_grid(s3xfer, client, proxy, bucket, path, out, size_up, part, a.concurrency, cells, cfgs, a.runs,
                        log=benchlib.log, sizes=sizes, on_record=on_record, trace=a.trace)
    finally:
        os.environ.pop("S3X_FBT_TRACE", None)
        proxy.stop()
        if os.path.exists(out):
            os.unlink(out)
        remove_bucket(s3xfer, direct, bucket)
    took = time.monotonic() - t0
    load1 = os.getloadavg()
    summary = summarize(recs, [c[0] for c in cfgs])
    hdr = (f"slow-part grid: uploads of {benchlib.human_size(size_up)}, downloads of {benchlib.human_size(size_down)}, "
           f"in {benchlib.human_size(part)} parts, concurrency "
           f"{a.concurrency}, {a.runs} interleaved rounds, medians; {took / 60:.1f} min, load average "
           f"{load0[0]:.1f} at the start, {load1[0]:.1f} at the end; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    text = [hdr, "", "Wall seconds (median) and the goals for DYNAMIC (robust, carried between transfers):", ""]
    text.append(markdown(*grid_table(summary, "dynamic")))
    labels = dynamics([c[0] for c in cfgs])
    titles = {"dynamic (no carry)": "DYNAMIC without the carry (each transfer learns on its own)",
              "dynamic (p90)": "DYNAMIC (p90, the earlier estimator)"}
    for d in labels[1:]:
        text += ["", f"The same goals for {titles.get(d, f'DYNAMIC with {d[9:-1]} in the environment')}:", ""]
        text.append(markdown(*grid_table(summary, d)))
    text += [""] + [line for d in labels for m in (False, True) if (line := goal_line(summary, d, m))]
    text += ["", "Re-sends (first-byte retries, median) per configuration:", ""]
    text.append(markdown(*resend_table(summary)))
    text += ["", "Re-sends beyond the held attempts and all re-sends, summed per direction and tail share:", ""]
    text.append(markdown(*extra_resend_table(recs, [c[0] for c in cfgs])))
    if a.trace:
        text += ["", f"Per-attempt trace ({a.trace}):", ""]
        text.append(markdown(*trace_table(read_trace(a.trace), [c[0] for c in cfgs])))
    print("\n".join(text))
    if a.out:
        benchlib.write_out(a.out, "\n".join(text), {"header": hdr, "records": recs, "cells": summary,
                                                    "configs": [c[0] for c in cfgs], "size": size_up, "size_down": size_down,
                                                    "part": part,
                                                    "concurrency": a.concurrency, "runs": a.runs,
                                                    "load": [load0, load1]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
