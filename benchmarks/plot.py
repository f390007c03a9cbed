#!/usr/bin/env python3
"""Plots a `benchmarks/run` results.json as PNG: per workload, each runner's
median throughput and client CPU seconds per GiB, with min-max whiskers.

    benchmarks/plot.py RESULTS_JSON [--out PREFIX]

Writes PREFIX-upload.png and PREFIX-download.png (default: beside the JSON,
`results-upload.png`...), one row of panels per action. Needs matplotlib (in
requirements-notebooks.txt).
"""

import argparse
import json
import os
import sys

COLORS = {"s3xfer-cli": "#1f5fa8", "s3xfer-py": "#6fa0d8", "boto3": "#d98c2b", "awscrt": "#b5452c",
          "s5cmd": "#5b9a48", "rclone": "#8a6bb0"}


def series(w, key):
    """{runner: (median, min, max)} of one summary figure, runners that ran."""
    out = {}
    for rn, rr in w["runners"].items():
        s = rr.get("summary") if rr.get("status") == "ok" else None
        if s and s.get(key):
            out[rn] = (s[key]["median"], s[key]["min"], s[key]["max"])
    return out


def plot_action(results, action, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, w in results["workloads"].items() if w["spec"]["action"] == action]
    if not names:
        return None
    seen = [r for n in names for r in results["workloads"][n]["runners"]]
    runners = [r for r in dict.fromkeys(list(COLORS) + seen)
               if any(r in series(results["workloads"][n], "mib_s") for n in names)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    width = 0.8 / max(1, len(runners))
    for ax, key, label in ((axes[0], "mib_s", "throughput, MiB/s (higher is better)"),
                           (axes[1], "cpu_per_gib", "client CPU s per GiB (lower is better)")):
        for i, rn in enumerate(runners):
            xs, ys, lo, hi = [], [], [], []
            for j, n in enumerate(names):
                s = series(results["workloads"][n], key).get(rn)
                if s:
                    xs.append(j + (i - (len(runners) - 1) / 2) * width)
                    ys.append(s[0])
                    lo.append(s[0] - s[1])
                    hi.append(s[2] - s[0])
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=COLORS.get(rn, "#888888"), label=rn)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_title(label, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(runners), fontsize=8)
    m = results["machine"]
    fig.suptitle(f"{action}s, median of {results['repeat']} runs (whiskers: min-max); {m['nproc']} x {m['cpu']}, "
                 f"{m['server']}", fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--out", help="output prefix (default: results.json's path without .json)")
    a = ap.parse_args()
    res = json.load(open(a.results))
    prefix = a.out or os.path.splitext(os.path.abspath(a.results))[0]
    made = [p for p in (plot_action(res, act, f"{prefix}-{act}.png") for act in ("upload", "download")) if p]
    for p in made:
        print(p)
    return 0 if made else 1


if __name__ == "__main__":
    sys.exit(main())
